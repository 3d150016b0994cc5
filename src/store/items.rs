//! Items: the item records (`i`), numbered in the order they were stored.
//!
//! A group's items are one record (more past [`keys::MAX_VALUE_BYTES`]) keyed by
//! the sequence number of its first item: a version byte, then each item
//! length-prefixed. Items below `durable_items` are durable and may be streamed
//! to `--output`. Depends on `keys` and [`crate::item`].

use super::{State, StoreError, keys};
use crate::item::{self, Item};

impl State {
    /// The sequence number after the last stored item.
    pub(super) fn load_next_item(&self) -> Result<u64, StoreError> {
        let end = [keys::ITEM + 1];
        let Some(entry) = self.db.range([keys::ITEM]..end).next_back() else {
            return Ok(0);
        };
        let (key, value) = entry.map_err(|e| self.db_error(e))?;
        let first =
            keys::u64_after_prefix(&key).ok_or_else(|| self.corrupt("item", &key, "short key"))?;
        let mut count = 0;
        for entry in self.item_entries(&key, &value)? {
            entry.map_err(|reason| self.corrupt("item", &key, reason))?;
            count += 1;
        }
        Ok(first + count)
    }

    /// The entries of an item record, its version checked.
    pub(crate) fn item_entries<'v>(
        &self,
        key: &[u8],
        value: &'v [u8],
    ) -> Result<impl Iterator<Item = Result<&'v [u8], &'static str>> + 'v, StoreError> {
        match value.split_first() {
            Some((&keys::ITEM_RECORD_VERSION, rest)) => Ok(keys::length_prefixed(rest)),
            _ => Err(self.corrupt("item", key, "unknown item record version")),
        }
    }

    /// Appends `items` to the open group's item record.
    pub(super) fn append_items(&mut self, items: &[Item]) {
        for item in items {
            let seq = self.next_item;
            self.next_item += 1;
            self.group.first_item.get_or_insert(seq);
            if self.group.record_first.is_none() {
                self.group.record_first = Some(seq);
                self.group.items.push(keys::ITEM_RECORD_VERSION);
            }
            let bytes = item::encode(item);
            self.group
                .items
                .extend_from_slice(&(bytes.len() as u32).to_be_bytes());
            self.group.items.extend_from_slice(&bytes);
            if self.group.items.len() >= keys::MAX_VALUE_BYTES {
                self.close_item_record();
            }
        }
    }

    /// Puts the item record being filled into the batch; the next item starts one.
    pub(super) fn close_item_record(&mut self) {
        if let Some(first) = self.group.record_first.take() {
            let items = std::mem::take(&mut self.group.items);
            self.group
                .batch
                .insert(keys::with_u64(keys::ITEM, first), items);
        }
    }
}
