//! What every table shares: [`Db`], the handle tables read through, and
//! [`Batch`], the write set of one commit group that tables write into.
//!
//! A table (frontier, seen, pages, items, runs, robots) owns its namespaces and
//! its record encodings, reads through `&Db` and writes only into a
//! `&mut Batch`. Every write reaches sled through [`Db::commit_now`]: one
//! atomic `apply_batch`, then (as the [`Durability`] says) one sync. A commit
//! group's flush calls it (see `commit`), and so does every write outside a
//! group (a run's begin and end, output cursors, the checkpoint's switch, a
//! new WARC file's registration, the metadata record at creation), each
//! behind its caller's named crash point; a unit test (`crash_tests`) finds
//! any other write to sled's tree.
//! Depends on `keys` and `records`.

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

    /// sled's tree, for the repairs' whole-database reads (writes go through
    /// [`Db::commit_now`]).
    pub(super) fn tree(&self) -> &super::db::Sled {
        &self.tree
    }

    /// Writes `batch` to the database: one atomic `apply_batch`, then the sync
    /// that `durability` asks for. The one write path: a commit group's flush
    /// and every write outside a group come here, each after its caller's
    /// crash point. A failure poisons the state, as a failed sync does (see
    /// `db::Sled`): what reached the disk is unknown until the next open reads
    /// it, so nothing more is written in this process. A poisoned state
    /// writes nothing ([`StoreError::Poisoned`]).
    pub(super) fn commit_now(
        &self,
        batch: Batch,
        durability: Durability,
    ) -> Result<(), StoreError> {
        self.writable()?;
        // crash point: group.apply, checkpoint.index, run.begin, run.end, run.close_dead, output.watermark, output.cursor, output.advance, create.meta, repair.ids_index, warc.create (the callers')
        let applied = self.tree.apply_batch(batch.inner).map_err(|e| {
            self.tree.poison(&e);
            self.error(e)
        });
        applied?;
        if let Durability::Synced(before_sync) = durability {
            before_sync();
            // `Sled::flush` poisons the state when it fails.
            self.tree.flush().map_err(|e| self.error(e))?;
        }
        Ok(())
    }

    /// Marks the state poisoned by `cause`: a write failed where
    /// [`Db::commit_now`] could not see it (a flush thread died).
    pub(super) fn poison(&self, cause: &dyn std::fmt::Display) {
        self.tree.poison(cause);
    }

    /// `Ok` unless a write of the state failed before ([`Db::poison`]).
    pub(super) fn writable(&self) -> Result<(), StoreError> {
        match self.tree.poisoned() {
            Some(cause) => Err(StoreError::Poisoned {
                path: self.dir.clone(),
                cause: cause.to_owned(),
            }),
            None => Ok(()),
        }
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

/// When a write of [`Db::commit_now`] is on disk.
pub(super) enum Durability {
    /// Before `commit_now` returns: the batch is applied, the function (the
    /// caller's crash point between the two, or nothing) runs, then the log
    /// is synced.
    Synced(fn()),
    /// With the next sync of the database (a commit group's or a
    /// checkpoint's): a record whose loss to a crash the next open repairs
    /// (a run's end, a dead run's outcome, an output cursor handed over
    /// between groups).
    NextSync,
}

/// What one write to the database holds: a commit group's every table's
/// inserts and removals, or one write outside a group, applied atomically by
/// [`Db::commit_now`]. Only tables write into it.
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
}
