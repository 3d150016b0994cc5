//! What a page's items mean for the change feed: each item's identity, and
//! the deletion records of the items a page stops making.
//!
//! An item is known by the job's identity field (the `item_id` leg's
//! `id_field`) when it has that field, else by its page and its place among
//! the page's items (0, 1, ...). The page record keeps the identities of its
//! current version's items ([`PageRecord::items`]); when a page's items
//! change, the identities that are gone get a deletion record, and when the
//! page itself is gone (404, 410) or leaves the job's scope, all of them do
//! ([`PageRecord::withdrawn`]).
//!
//! A deletion record is an item of the feed: `url` (the page's), `deleted`
//! (`gone`, `out_of_scope` or `not_extracted`), `version` (the page's),
//! `deleted_at` (RFC 3339 UTC) and the identity: the identity field with the
//! item's id, or `place`. It goes through the same completion as the page's
//! other items, so it is in the outputs exactly once. Depends on
//! [`crate::item`] and the store's page record only.

use std::collections::HashSet;

use serde_json::Value;

use crate::item::Item;
use crate::store::{PageRecord, Withdrawn};

/// The field of a deletion record that says why the item was deleted.
pub const DELETED_FIELD: &str = "deleted";
/// The field of a deletion record (and of nothing else) that holds the
/// place of an item known by its place.
pub const PLACE_FIELD: &str = "place";
/// The reason of an item that a changed page no longer makes.
pub const NOT_EXTRACTED: &str = "not_extracted";

/// The identity of each of `items`, in order: its `field` value when it has
/// one (a string as it is, anything else as its JSON text), else `None`.
pub fn identities(items: &[Item], field: Option<&str>) -> Vec<Option<String>> {
    items
        .iter()
        .map(|item| match field.and_then(|f| item.get(f)) {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(id.clone()),
            Some(other) => Some(other.to_string()),
        })
        .collect()
}

/// An identity as compared: an id, or a place on the page.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key<'a> {
    Id(&'a str),
    Place(usize),
}

fn keys(ids: &[Option<String>]) -> impl Iterator<Item = Key<'_>> {
    ids.iter().enumerate().map(|(place, id)| match id {
        Some(id) => Key::Id(id),
        None => Key::Place(place),
    })
}

/// What one page contributes to the feed besides its new items.
pub struct Deletions<'a> {
    /// The identity field of the job's items.
    pub field: Option<&'a str>,
    /// The page's URL, as its items carry it.
    pub url: &'a str,
    /// The page's version the records name.
    pub version: u32,
    /// When, Unix seconds.
    pub at: u64,
}

impl Deletions<'_> {
    /// The deletion records of the items `before` names that `after` does
    /// not, for `reason`, in their order on the page.
    pub fn of(
        &self,
        before: &[Option<String>],
        after: &[Option<String>],
        reason: &str,
    ) -> Vec<Item> {
        let kept: HashSet<Key<'_>> = keys(after).collect();
        let mut seen = HashSet::new();
        keys(before)
            .filter(|key| !kept.contains(key) && seen.insert(key.clone()))
            .map(|key| self.record(key, reason))
            .collect()
    }

    fn record(&self, key: Key<'_>, reason: &str) -> Item {
        let mut item = Item::new();
        item.insert("url".into(), self.url.into());
        item.insert(DELETED_FIELD.into(), reason.into());
        item.insert("version".into(), self.version.into());
        item.insert(
            "deleted_at".into(),
            crate::clock::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs(self.at))
                .into(),
        );
        match (key, self.field) {
            (Key::Id(id), Some(field)) => item.insert(field.into(), id.into()),
            (Key::Id(id), None) => item.insert("id".into(), id.into()),
            (Key::Place(place), _) => item.insert(PLACE_FIELD.into(), place.into()),
        };
        item
    }
}

/// Withdraws `record`'s items from the feed for `why`: their deletion
/// records, and the record without them. Items withdrawn already get no
/// second record; the record then says the newer reason (a gone page that
/// left the scope is out of scope).
pub fn withdraw(
    record: &mut PageRecord,
    why: Withdrawn,
    field: Option<&str>,
    at: u64,
) -> Vec<Item> {
    if record.withdrawn.is_some() {
        record.withdrawn = Some(why);
        return Vec::new();
    }
    let deletions = Deletions {
        field,
        url: &record.final_url,
        version: record.version,
        at,
    }
    .of(&record.items, &[], why.reason());
    record.items.clear();
    record.withdrawn = Some(why);
    deletions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, &str)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect()
    }

    fn at(field: Option<&str>) -> Deletions<'_> {
        Deletions {
            field,
            url: "http://a.test/p",
            version: 3,
            at: 0,
        }
    }

    #[test]
    fn an_item_is_known_by_its_id_else_by_its_place() {
        let items = [
            item(&[("id", "x")]),
            item(&[("t", "y")]),
            item(&[("id", "z")]),
        ];
        assert_eq!(
            identities(&items, Some("id")),
            [Some("x".into()), None, Some("z".into())]
        );
        assert_eq!(identities(&items, None), [None, None, None]);
    }

    #[test]
    fn the_items_that_disappear_get_one_record_each() {
        let before = [Some("x".to_owned()), None, Some("z".to_owned()), None];
        let after = [Some("z".to_owned()), None];
        let records = at(Some("id")).of(&before, &after, NOT_EXTRACTED);
        let named: Vec<(Option<&Value>, Option<&Value>)> = records
            .iter()
            .map(|r| (r.get("id"), r.get(PLACE_FIELD)))
            .collect();
        // `x` went; place 1 stays (the new page has a place-1 item without
        // an id); place 3 went.
        assert_eq!(
            named,
            [
                (Some(&Value::from("x")), None),
                (None, Some(&Value::from(3)))
            ]
        );
        for record in &records {
            assert_eq!(record["deleted"], NOT_EXTRACTED);
            assert_eq!(record["version"], 3);
            assert_eq!(record["url"], "http://a.test/p");
            assert_eq!(record["deleted_at"], "1970-01-01T00:00:00.000Z");
        }
    }

    #[test]
    fn a_page_is_withdrawn_once_and_keeps_the_newer_reason() {
        let request = crate::request::Request::get("http://a.test/p".to_owned());
        let mut record = crate::revisit::Schedule::failed(&request, 200, 0);
        record.items = vec![Some("x".to_owned()), None];
        let first = withdraw(&mut record, Withdrawn::Gone, Some("id"), 5);
        assert_eq!(first.len(), 2);
        assert!(record.items.is_empty());
        assert!(withdraw(&mut record, Withdrawn::OutOfScope, Some("id"), 6).is_empty());
        assert_eq!(record.withdrawn, Some(Withdrawn::OutOfScope));
    }

    #[test]
    fn a_repeated_id_is_deleted_once() {
        let before = [Some("x".to_owned()), Some("x".to_owned())];
        assert_eq!(at(None).of(&before, &[], "gone").len(), 1);
    }
}
