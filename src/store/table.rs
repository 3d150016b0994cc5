//! What every table shares: [`Db`], the handle tables read through,
//! [`Batch`], the write set of one commit that tables write into, and
//! [`Table`], a namespace with its key and value encodings defined once.
//!
//! A table owns its namespaces and record encodings, reads through `&Db` and
//! writes only into a `&mut Batch`. Every write reaches sled through
//! [`Db::commit_now`]: one atomic `apply_batch`, then (as the [`Durability`]
//! says) one sync. A group's flush calls it (see `commit`), and so does every
//! write outside a group (a run's begin and end, output cursors, the
//! checkpoint's switch, a new WARC file's registration, the metadata record at
//! creation), each behind its caller's named crash point; a unit test
//! (`crash_tests`) finds any other write to sled's tree.
//! Depends on `keys`, `records`, `db` (sled's tree), `repair` (naming a
//! damaged read) and `error`.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::{keys, records};

/// The database as the tables read it: sled's tree and the directory (for
/// error messages that name it).
#[derive(Clone)]
pub(super) struct Db {
    tree: super::db::Sled,
    dir: PathBuf,
    /// A reader's handle beside the crawl that owns the database (see
    /// `beside`): it writes nothing, and a table's load repairs nothing.
    reader: bool,
}

impl Db {
    pub(super) fn new(tree: super::db::Sled, dir: &Path) -> Db {
        Db {
            tree,
            dir: dir.to_owned(),
            reader: false,
        }
    }

    /// The same database as a reader's handle, which refuses every write
    /// ([`Db::writable`]).
    pub(super) fn reader(&self) -> Db {
        Db {
            reader: true,
            ..self.clone()
        }
    }

    /// True for a reader's handle ([`Db::reader`]).
    pub(super) fn is_reader(&self) -> bool {
        self.reader
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

    /// `Ok` unless a write of the state failed before ([`Db::poison`]), or
    /// this is a reader's handle.
    pub(super) fn writable(&self) -> Result<(), StoreError> {
        if self.reader {
            return Err(StoreError::ReadOnly {
                path: self.dir.clone(),
            });
        }
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

/// A table of the one sled tree, as redb's `TableDefinition` declares one:
/// its namespace byte, what an error calls one of its entries, how its keys
/// follow the namespace ([`Key`]) and how its values are written ([`Codec`]).
/// A table module declares its tables as constants beside itself and reads
/// and writes only through them, so an encoding exists once.
pub(super) struct Table<K: ?Sized, V> {
    ns: u8,
    what: &'static str,
    types: PhantomData<fn(&K) -> V>,
}

/// A table's entry: its key and its value.
type Entry<K, V> = (<K as Key>::Owned, <V as Codec>::Value);

impl<K: ?Sized, V> Clone for Table<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: ?Sized, V> Copy for Table<K, V> {}

impl<K: Key + ?Sized, V: Codec> Table<K, V> {
    /// The table in namespace `ns`, whose entries an error calls `what`.
    pub(super) const fn new(ns: u8, what: &'static str) -> Self {
        Table {
            ns,
            what,
            types: PhantomData,
        }
    }

    /// The namespace byte.
    #[cfg(test)]
    pub(super) const fn ns(&self) -> u8 {
        self.ns
    }

    /// The stored key of `key`.
    pub(super) fn key(&self, key: &K) -> Vec<u8> {
        let mut out = vec![self.ns];
        key.write(&mut out);
        out
    }

    /// The value under `key`, if any.
    pub(super) fn get(&self, db: &Db, key: &K) -> Result<Option<V::Value>, StoreError> {
        let key = self.key(key);
        match db.get(&key)? {
            None => Ok(None),
            Some(value) => self.decode(db, &key, &value).map(Some),
        }
    }

    /// True when `key` is stored.
    pub(super) fn contains(&self, db: &Db, key: &K) -> Result<bool, StoreError> {
        db.contains(self.key(key))
    }

    /// Stores `value` under `key`, in `batch`.
    pub(super) fn put(&self, batch: &mut Batch, key: &K, value: &V::Value) {
        batch.put(self.key(key), V::encode(value));
    }

    /// Removes `key`, in `batch`.
    pub(super) fn delete(&self, batch: &mut Batch, key: &K) {
        batch.delete(self.key(key));
    }

    /// Every entry, in key order.
    pub(super) fn iter<'a>(
        &self,
        db: &'a Db,
    ) -> impl DoubleEndedIterator<Item = Result<Entry<K, V>, StoreError>> + 'a
    where
        K: 'a,
        V: 'a,
    {
        let table = *self;
        db.scan([self.ns]).map(move |entry| table.entry(db, entry?))
    }

    /// Every value, in key order.
    pub(super) fn values(&self, db: &Db) -> Result<Vec<V::Value>, StoreError> {
        self.iter(db).map(|entry| Ok(entry?.1)).collect()
    }

    /// The last entry whose key is below `end` (of all, without one).
    pub(super) fn last(&self, db: &Db, end: Option<&K>) -> Result<Option<Entry<K, V>>, StoreError> {
        let end = end.map_or_else(|| vec![self.ns + 1], |end| self.key(end));
        db.range(vec![self.ns]..end)
            .next_back()
            .map(|entry| self.entry(db, entry?))
            .transpose()
    }

    /// Removes, in `batch`, every entry whose key is below `end`.
    pub(super) fn delete_below(
        &self,
        db: &Db,
        batch: &mut Batch,
        end: &K,
    ) -> Result<(), StoreError> {
        for entry in db.range(vec![self.ns]..self.key(end)) {
            batch.delete(entry?.0);
        }
        Ok(())
    }

    fn entry(
        &self,
        db: &Db,
        (key, value): (sled::IVec, sled::IVec),
    ) -> Result<Entry<K, V>, StoreError> {
        let owned = K::read(&key[1..]).ok_or_else(|| db.corrupt(self.what, &key, "bad key"))?;
        Ok((owned, self.decode(db, &key, &value)?))
    }

    fn decode(&self, db: &Db, key: &[u8], value: &[u8]) -> Result<V::Value, StoreError> {
        V::decode(value).map_err(|reason| db.corrupt(self.what, key, &reason))
    }
}

/// How a table's keys are written after its namespace byte (integers
/// big-endian, so that byte order is numeric order).
pub(super) trait Key {
    /// What a stored key reads back as.
    type Owned;
    /// Appends the key's bytes.
    fn write(&self, out: &mut Vec<u8>);
    /// The key written as `bytes`; `None` when they are not one.
    fn read(bytes: &[u8]) -> Option<Self::Owned>;
}

/// A table with one entry: the key is the namespace byte alone.
impl Key for () {
    type Owned = ();
    fn write(&self, _: &mut Vec<u8>) {}
    fn read(bytes: &[u8]) -> Option<()> {
        bytes.is_empty().then_some(())
    }
}

impl Key for str {
    type Owned = String;
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
    fn read(bytes: &[u8]) -> Option<String> {
        String::from_utf8(bytes.to_vec()).ok()
    }
}

impl Key for Path {
    type Owned = PathBuf;
    fn write(&self, out: &mut Vec<u8>) {
        use std::os::unix::ffi::OsStrExt;
        out.extend_from_slice(self.as_os_str().as_bytes());
    }
    fn read(bytes: &[u8]) -> Option<PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        Some(std::ffi::OsStr::from_bytes(bytes).into())
    }
}

impl Key for u32 {
    type Owned = u32;
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
    fn read(bytes: &[u8]) -> Option<u32> {
        Some(u32::from_be_bytes(bytes.try_into().ok()?))
    }
}

impl Key for u64 {
    type Owned = u64;
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
    fn read(bytes: &[u8]) -> Option<u64> {
        Some(u64::from_be_bytes(bytes.try_into().ok()?))
    }
}

/// A journal entry's key: the group's number, then the part's.
impl Key for (u64, u16) {
    type Owned = (u64, u16);
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_be_bytes());
        out.extend_from_slice(&self.1.to_be_bytes());
    }
    fn read(bytes: &[u8]) -> Option<(u64, u16)> {
        let (group, part) = bytes.split_first_chunk::<8>()?;
        Some((
            u64::from_be_bytes(*group),
            u16::from_be_bytes(part.try_into().ok()?),
        ))
    }
}

/// How a table's values are written.
pub(super) trait Codec {
    /// The value.
    type Value;
    /// Its bytes.
    fn encode(value: &Self::Value) -> Vec<u8>;
    /// The value written as `bytes`, or why they are not one.
    fn decode(bytes: &[u8]) -> Result<Self::Value, String>;
}

/// A serde record, as [`records::encode`] writes it (version byte, JSON).
pub(super) struct Json<T>(PhantomData<T>);

impl<T: serde::Serialize + serde::de::DeserializeOwned> Codec for Json<T> {
    type Value = T;
    fn encode(value: &T) -> Vec<u8> {
        records::encode(value)
    }
    fn decode(bytes: &[u8]) -> Result<T, String> {
        records::decode(bytes).map_err(|e| e.to_string())
    }
}

/// No value: the key is the entry (a set).
pub(super) struct Unit;

impl Codec for Unit {
    type Value = ();
    fn encode(_: &()) -> Vec<u8> {
        Vec::new()
    }
    fn decode(_: &[u8]) -> Result<(), String> {
        Ok(())
    }
}

/// [`keys::SMALL_VERSION`], then bytes (a cookie jar).
pub(super) struct Bytes;

impl Codec for Bytes {
    type Value = Vec<u8>;
    fn encode(value: &Vec<u8>) -> Vec<u8> {
        keys::versioned(value)
    }
    fn decode(bytes: &[u8]) -> Result<Vec<u8>, String> {
        small(bytes).map(<[u8]>::to_vec)
    }
}

/// [`keys::SMALL_VERSION`], then UTF-8 text.
pub(super) struct Text;

impl Codec for Text {
    type Value = String;
    fn encode(value: &String) -> Vec<u8> {
        keys::versioned(value.as_bytes())
    }
    fn decode(bytes: &[u8]) -> Result<String, String> {
        String::from_utf8(small(bytes)?.to_vec()).map_err(|_| "not UTF-8".to_owned())
    }
}

/// Declares a codec of an integer: [`keys::SMALL_VERSION`], then its bytes
/// as `$to` writes them.
macro_rules! int_codec {
    ($(#[$doc:meta])* $name:ident: $int:ty, $to:ident, $from:ident) => {
        $(#[$doc])*
        pub(super) struct $name;

        impl Codec for $name {
            type Value = $int;
            fn encode(value: &$int) -> Vec<u8> {
                keys::versioned(&value.$to())
            }
            fn decode(bytes: &[u8]) -> Result<$int, String> {
                Ok(<$int>::$from(fixed(bytes)?))
            }
        }
    };
}

int_codec!(
    /// [`keys::SMALL_VERSION`], then a u32, big-endian (a host id).
    U32: u32, to_be_bytes, from_be_bytes
);
int_codec!(
    /// [`keys::SMALL_VERSION`], then a u64, big-endian (a WARC mark, the
    /// cycle start).
    U64: u64, to_be_bytes, from_be_bytes
);
int_codec!(
    /// [`keys::SMALL_VERSION`], then a u64, little-endian: a counter.
    Count: u64, to_le_bytes, from_le_bytes
);

/// The bytes after [`keys::SMALL_VERSION`].
fn small(bytes: &[u8]) -> Result<&[u8], String> {
    match bytes.split_first() {
        Some((&keys::SMALL_VERSION, body)) => Ok(body),
        _ => Err("unknown version".to_owned()),
    }
}

/// The `N` bytes after [`keys::SMALL_VERSION`].
pub(super) fn fixed<const N: usize>(bytes: &[u8]) -> Result<[u8; N], String> {
    let body = small(bytes)?;
    body.try_into()
        .map_err(|_| format!("{} bytes, expected a version byte and {N}", bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: Table<str, Count> = Table::new(b'x', "name");
    const SEQS: Table<(u64, u16), Json<String>> = Table::new(b'z', "seq");

    fn scratch(dir: &Path) -> Db {
        Db::new(super::super::db::Sled::scratch(dir), dir)
    }

    #[test]
    fn entries_round_trip_in_key_order_and_stay_in_their_namespace() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = scratch(dir.path());
        let mut batch = Batch::default();
        for (name, n) in [("b", 2), ("a", 1), ("c", 3)] {
            NAMES.put(&mut batch, name, &n);
        }
        for (seq, part) in [(2, 0), (1, 1), (1, 0), (3, 0)] {
            SEQS.put(&mut batch, &(seq, part), &format!("{seq}.{part}"));
        }
        db.commit_now(batch, Durability::NextSync).expect("commit");
        assert_eq!(NAMES.get(&db, "b").expect("get"), Some(2));
        assert_eq!(NAMES.get(&db, "d").expect("get"), None);
        assert_eq!(NAMES.values(&db).expect("values"), [1, 2, 3]);
        let last = SEQS.last(&db, Some(&(2, 0))).expect("last");
        assert_eq!(last, Some(((1, 1), "1.1".to_owned())));
        let mut batch = Batch::default();
        SEQS.delete_below(&db, &mut batch, &(2, 0)).expect("delete");
        NAMES.delete(&mut batch, "a");
        db.commit_now(batch, Durability::NextSync).expect("commit");
        let left: Vec<_> = SEQS.iter(&db).map(|e| e.expect("entry").0).collect();
        assert_eq!(left, [(2, 0), (3, 0)]);
        assert!(!NAMES.contains(&db, "a").expect("contains"));
    }

    #[test]
    fn a_value_of_another_layout_is_an_error_naming_the_table() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = scratch(dir.path());
        let mut batch = Batch::default();
        batch.put(NAMES.key("short"), vec![keys::SMALL_VERSION, 1, 2]);
        batch.put(NAMES.key("unversioned"), 7u64.to_le_bytes().to_vec());
        db.commit_now(batch, Durability::NextSync).expect("commit");
        for name in ["short", "unversioned"] {
            let error = NAMES.get(&db, name).expect_err(name).to_string();
            assert!(error.contains("name"), "{error}");
        }
    }
}
