//! [`ItemIdSetter`]: a stable id for every item, hashed from chosen fields (the SEP's
//! item-id setter).
//!
//! The id is the SHA-1 of the canonical JSON text of the array of the chosen fields'
//! values, in the order the fields are listed, as 40 lower-case hex characters. A
//! missing field counts as `null`. Canonical JSON means: object keys sorted byte-wise at
//! every level, no whitespace, strings and numbers as `serde_json` writes them. So
//! `fields = ["name", "price"]` on `{"price": 3, "name": "Mug"}` hashes the bytes
//! `["Mug",3]`. The id goes into `id_field` (default `id`), replacing any value there.
//!
//! Invariant: an item that has none of the fields is left untouched (no id), so items of
//! another shape never share one all-`null` id. Depends on [`crate::legs`] and `sha1`.

use serde_json::Value;
use sha1::{Digest, Sha1};

use super::{Leg, LegError};
use crate::item::Item;
use crate::response::Response;

/// The name used in [`LegError`]s.
const LEG: &str = "item_id";

/// Which fields are hashed and where the id goes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ItemIdSettings {
    /// Fields hashed, in this order (at least one).
    pub fields: Vec<String>,
    /// Field that receives the id (default `id`).
    pub id_field: String,
}

impl Default for ItemIdSettings {
    fn default() -> ItemIdSettings {
        ItemIdSettings {
            fields: Vec::new(),
            id_field: "id".to_owned(),
        }
    }
}

/// Sets `id_field` to the hash of `fields` on every item (see the module doc).
///
/// ```
/// use legcrawl::item::Item;
/// use legcrawl::legs::{ItemIdSetter, ItemIdSettings};
///
/// let setter = ItemIdSetter::new(ItemIdSettings {
///     fields: vec!["name".into(), "price".into()],
///     ..ItemIdSettings::default()
/// })
/// .unwrap();
/// let mut item = Item::new();
/// item.insert("price".into(), 3.into());
/// item.insert("name".into(), "Mug".into());
/// // The SHA-1 of the bytes `["Mug",3]`.
/// let id = setter.id_of(&item).unwrap();
/// assert_eq!(id, "a5d86d9dc4157b4d7e17c37d4003cc7cfb31ee3f");
/// ```
#[derive(Clone, Debug)]
pub struct ItemIdSetter {
    settings: ItemIdSettings,
}

impl ItemIdSetter {
    /// A setter for these settings; `fields` must not be empty nor `id_field` empty.
    pub fn new(settings: ItemIdSettings) -> Result<ItemIdSetter, LegError> {
        if settings.fields.is_empty() {
            return Err(LegError::Invalid {
                leg: LEG,
                message: "`fields` must name at least one field".into(),
            });
        }
        if settings.id_field.is_empty() {
            return Err(LegError::Invalid {
                leg: LEG,
                message: "`id_field` must not be empty".into(),
            });
        }
        Ok(ItemIdSetter { settings })
    }

    /// The id `item` gets, or `None` when it has none of the fields.
    pub fn id_of(&self, item: &Item) -> Option<String> {
        let fields = &self.settings.fields;
        if !fields.iter().any(|field| item.contains_key(field)) {
            return None;
        }
        let mut text = String::from("[");
        for (i, field) in fields.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            write_canonical(item.get(field).unwrap_or(&Value::Null), &mut text);
        }
        text.push(']');
        let digest = Sha1::digest(text.as_bytes());
        Some(digest.iter().map(|byte| format!("{byte:02x}")).collect())
    }
}

/// Appends `value` as canonical JSON: object keys sorted, no whitespace.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(values) => {
            out.push('[');
            for (i, value) in values.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(value, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

impl Leg for ItemIdSetter {
    fn identity_field(&self) -> Option<&str> {
        Some(&self.settings.id_field)
    }

    fn process_item(&self, mut item: Item, _response: &Response) -> Option<Item> {
        if let Some(id) = self.id_of(&item) {
            item.insert(self.settings.id_field.clone(), Value::String(id));
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::legs::test_response;

    fn setter(fields: &[&str]) -> ItemIdSetter {
        ItemIdSetter::new(ItemIdSettings {
            fields: fields.iter().map(|f| f.to_string()).collect(),
            ..ItemIdSettings::default()
        })
        .unwrap()
    }

    fn item(value: Value) -> Item {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn id_is_sha1_of_the_canonical_array() {
        let s = setter(&["name", "price"]);
        let id = s.id_of(&item(json!({"price": 3, "name": "Mug"}))).unwrap();
        // printf '["Mug",3]' | sha1sum
        assert_eq!(id, "a5d86d9dc4157b4d7e17c37d4003cc7cfb31ee3f");
    }

    #[test]
    fn object_key_order_does_not_matter_but_field_order_does() {
        let s = setter(&["a", "b"]);
        let one = s.id_of(&item(json!({"a": {"x": 1, "y": [2, {"q": 1, "p": 2}]}})));
        let two = s.id_of(&item(json!({"a": {"y": [2, {"p": 2, "q": 1}], "x": 1}})));
        assert_eq!(one, two);
        let swapped =
            setter(&["b", "a"]).id_of(&item(json!({"a": {"x": 1, "y": [2, {"q": 1, "p": 2}]}})));
        assert_ne!(one, swapped);
    }

    #[test]
    fn missing_fields_hash_as_null_and_items_without_any_are_untouched() {
        let s = setter(&["name", "sku"]);
        let partial = s.id_of(&item(json!({"name": "Mug"})));
        let explicit = s.id_of(&item(json!({"name": "Mug", "sku": null})));
        assert_eq!(partial, explicit);
        let response = test_response("http://e.test/", None, "");
        let other = item(json!({"url": "http://e.test/"}));
        assert_eq!(s.process_item(other.clone(), &response), Some(other));
        let set = s
            .process_item(item(json!({"name": "Mug", "id": 7})), &response)
            .unwrap();
        assert_eq!(set["id"], Value::String(partial.unwrap()));
    }

    #[test]
    fn empty_fields_or_id_field_are_refused() {
        assert!(ItemIdSetter::new(ItemIdSettings::default()).is_err());
        let error = ItemIdSetter::new(ItemIdSettings {
            fields: vec!["a".into()],
            id_field: String::new(),
        })
        .unwrap_err();
        assert!(error.to_string().contains("id_field"));
    }
}
