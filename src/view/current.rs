//! The current view of a crawl's items: of everything the change feed
//! holds, the items that stand now (what a consumer that applied the whole
//! feed holds), for plain `dump items`.
//!
//! An item with the job's identity field stands until a later item with
//! the same id replaces it or a deletion record names that id. Any other
//! item belongs to its page (`url`) and the page's version (`version`): a
//! page's items of its newest version stand, unless a deletion record of
//! that version withdrew them all (the page was gone or left the scope). An
//! item with neither `url` nor `version` always stands. Depends on
//! [`crate::page::feed`]'s field names only.

use std::collections::HashMap;

use serde_json::Value;

use crate::page::feed::{DELETED_FIELD, NOT_EXTRACTED};

/// The items of one page known by their place: the newest version seen, and
/// the numbers of its items.
#[derive(Default)]
struct PageItems {
    version: u64,
    items: Vec<usize>,
}

/// Reads the feed in order (`add`), then says which of its items stand
/// (`standing`).
pub(super) struct Current {
    field: Option<String>,
    /// Items read so far.
    count: usize,
    /// The item each id stands for.
    by_id: HashMap<String, usize>,
    /// The items of each page known by place.
    by_page: HashMap<String, PageItems>,
    /// Items that stand whatever comes (no id, no page).
    loose: Vec<usize>,
}

impl Current {
    /// A view whose items are known by `field` when they have it.
    pub(super) fn new(field: Option<String>) -> Current {
        Current {
            field,
            count: 0,
            by_id: HashMap::new(),
            by_page: HashMap::new(),
            loose: Vec::new(),
        }
    }

    /// Reads the next item of the feed (`None`: not a JSON object, which
    /// then stands).
    pub(super) fn add(&mut self, item: Option<&serde_json::Map<String, Value>>) {
        let n = self.count;
        self.count += 1;
        let Some(item) = item else {
            self.loose.push(n);
            return;
        };
        let deleted = item.get(DELETED_FIELD).and_then(Value::as_str);
        let id = self
            .field
            .as_deref()
            .and_then(|field| item.get(field))
            .filter(|value| !value.is_null())
            .map(|value| match value {
                Value::String(id) => id.clone(),
                other => other.to_string(),
            });
        if let Some(id) = id {
            match deleted {
                Some(_) => self.by_id.remove(&id),
                None => self.by_id.insert(id, n),
            };
            return;
        }
        let page = item.get("url").and_then(Value::as_str);
        let version = item.get("version").and_then(Value::as_u64);
        let (Some(page), Some(version)) = (page, version) else {
            if deleted.is_none() {
                self.loose.push(n);
            }
            return;
        };
        let entry = self.by_page.entry(page.to_owned()).or_default();
        if version > entry.version {
            *entry = PageItems {
                version,
                items: Vec::new(),
            };
        }
        match deleted {
            // The page's items were all withdrawn at this version.
            Some(reason) if reason != NOT_EXTRACTED && version >= entry.version => {
                entry.items.clear();
            }
            Some(_) => {}
            None if version == entry.version => entry.items.push(n),
            None => {}
        }
    }

    /// Which of the items read stand: one flag per item, in feed order.
    pub(super) fn standing(self) -> Vec<bool> {
        let mut standing = vec![false; self.count];
        let pages = self.by_page.into_values().flat_map(|page| page.items);
        for n in self.by_id.into_values().chain(pages).chain(self.loose) {
            standing[n] = true;
        }
        standing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(field: Option<&str>, lines: &[&str]) -> Vec<usize> {
        let mut current = Current::new(field.map(str::to_owned));
        for line in lines {
            let value: Option<serde_json::Map<String, Value>> = serde_json::from_str(line).ok();
            current.add(value.as_ref());
        }
        let standing = current.standing();
        (0..standing.len()).filter(|&n| standing[n]).collect()
    }

    #[test]
    fn a_page_stands_by_its_newest_version_until_it_is_withdrawn() {
        let lines = [
            r#"{"url":"a","version":1}"#,
            r#"{"url":"b","version":1}"#,
            r#"{"url":"a","version":2}"#,
            r#"{"url":"b","deleted":"gone","version":1,"place":0}"#,
            r#"{"url":"c","version":1}"#,
            r#"{"url":"c","version":1}"#,
            r#"{"url":"c","deleted":"not_extracted","version":2,"place":1}"#,
            r#"{"url":"c","version":2}"#,
            r#"{"no":"page"}"#,
            "not json",
        ];
        assert_eq!(feed(None, &lines), [2, 7, 8, 9]);
        // b comes back as a changed page.
        let mut back = lines.to_vec();
        back.push(r#"{"url":"b","version":2}"#);
        assert_eq!(feed(None, &back), [2, 7, 8, 9, 10]);
    }

    #[test]
    fn an_item_with_an_id_stands_until_replaced_or_deleted() {
        let lines = [
            r#"{"url":"a","version":1,"id":"x"}"#,
            r#"{"url":"a","version":1,"id":"y"}"#,
            r#"{"url":"a","version":2,"id":"x"}"#,
            r#"{"url":"a","deleted":"not_extracted","version":2,"id":"y"}"#,
            r#"{"url":"a","version":2,"id":"z"}"#,
        ];
        assert_eq!(feed(Some("id"), &lines), [2, 4]);
        // Without the field they are a page's items by place.
        assert_eq!(feed(None, &lines), [2, 4]);
    }
}
