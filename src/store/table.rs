//! What every table shares: [`Db`], the handle tables read through, and
//! [`Batch`], the write set of one commit group that tables write into.
//!
//! A table (frontier, seen, pages, items, runs, robots) owns its namespaces and
//! its record encodings, reads through `&Db` and writes only into a
//! `&mut Batch`; the batch reaches the disk in one atomic `apply_batch` and one
//! sync (see `commit`). The few records written outside a group (a run's
//! begin and end, output watermarks) are written by their table with a named
//! crash point through [`Db::tree`]. Depends on `keys` and `records`.

use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::{keys, records};

/// The database as the tables read it: sled's tree and the directory (for
/// error messages that name it).
#[derive(Clone)]
pub(super) struct Db {
    tree: super::db::Sled,
    dir: PathBuf,
}

impl Db {
    pub(super) fn new(tree: super::db::Sled, dir: &Path) -> Db {
        Db {
            tree,
            dir: dir.to_owned(),
        }
    }

    /// The state directory.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// sled's tree, for the writes outside a group (each behind a crash point)
    /// and the handles that run off the crawl loop.
    pub(super) fn tree(&self) -> &super::db::Sled {
        &self.tree
    }

    /// The value under `key`.
    pub(super) fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<sled::IVec>, StoreError> {
        self.tree.get(key).map_err(|e| self.error(e))
    }

    /// True when `key` is stored.
    pub(super) fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool, StoreError> {
        self.tree.contains_key(key).map_err(|e| self.error(e))
    }

    /// Every `(key, value)` under `prefix`, in key order.
    pub(super) fn scan(
        &self,
        prefix: impl AsRef<[u8]>,
    ) -> impl DoubleEndedIterator<Item = Result<(sled::IVec, sled::IVec), StoreError>> + '_ {
        self.tree
            .scan_prefix(prefix)
            .map(|entry| entry.map_err(|e| self.error(e)))
    }

    /// Every `(key, value)` in `range`, in key order.
    pub(super) fn range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> impl DoubleEndedIterator<Item = Result<(sled::IVec, sled::IVec), StoreError>> + '_ {
        self.tree
            .range(range)
            .map(|entry| entry.map_err(|e| self.error(e)))
    }

    /// The u64 after the namespace byte of the last key in `namespace`.
    pub(super) fn last_u64_key(&self, namespace: u8) -> Result<Option<u64>, StoreError> {
        let end = [namespace + 1];
        match self.range([namespace]..end).next_back() {
            None => Ok(None),
            Some(entry) => {
                let (key, _) = entry?;
                keys::u64_after_prefix(&key)
                    .map(Some)
                    .ok_or_else(|| self.corrupt("key", &key, "too short"))
            }
        }
    }

    /// A serde record (`records`), its version checked.
    pub(super) fn decode<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        key: &[u8],
        value: &[u8],
    ) -> Result<T, StoreError> {
        records::decode(value).map_err(|e| self.corrupt(what, key, &e.to_string()))
    }

    /// The serde record under `key` (`what` names it in an error), if any.
    pub(super) fn record<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        key: &[u8],
    ) -> Result<Option<T>, StoreError> {
        match self.get(key)? {
            Some(value) => self.decode(what, key, &value).map(Some),
            None => Ok(None),
        }
    }

    /// Every serde record under `prefix`, in key order (`what` names one in
    /// an error).
    pub(super) fn records<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        prefix: impl AsRef<[u8]>,
    ) -> Result<Vec<T>, StoreError> {
        self.scan(prefix)
            .map(|entry| {
                let (key, value) = entry?;
                self.decode(what, &key, &value)
            })
            .collect()
    }

    /// sled's error, naming the directory.
    pub(super) fn error(&self, source: sled::Error) -> StoreError {
        super::repair::classify(&self.dir, source)
    }

    /// A record that cannot be read: which (`what` and its key) and why.
    pub(super) fn corrupt(&self, what: &str, key: &[u8], reason: &str) -> StoreError {
        StoreError::Corrupt {
            path: self.dir.clone(),
            what: format!("{what} {key:?}"),
            reason: reason.to_owned(),
        }
    }
}

/// What one commit group writes: every table's inserts and removals, applied
/// atomically by one flush (see `commit`). Only tables write into it.
#[derive(Default)]
pub(super) struct Batch {
    inner: sled::Batch,
    dirty: bool,
}

impl Batch {
    /// Stores `value` under `key` when the group commits.
    pub(super) fn put(&mut self, key: impl Into<sled::IVec>, value: impl Into<sled::IVec>) {
        self.inner.insert(key, value);
        self.dirty = true;
    }

    /// Removes `key` when the group commits.
    pub(super) fn delete(&mut self, key: impl Into<sled::IVec>) {
        self.inner.remove(key);
        self.dirty = true;
    }

    /// Notes that a table holds writes for this batch that it adds at the seal
    /// (packed queue records, the journal entry, the item record).
    pub(super) fn defer(&mut self) {
        self.dirty = true;
    }

    /// True when the group writes anything at all.
    pub(super) fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// The sled batch, for the flush.
    pub(super) fn into_inner(self) -> sled::Batch {
        self.inner
    }
}
