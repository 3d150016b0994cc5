//! WARC marks (`w` · canonical path → version byte, u64): how much of each WARC
//! file durable completions cover.
//!
//! The WARC writer ([`crate::warc`]) appends a page's records to the open file
//! as the page completes. Before the group holding those completions is
//! sealed, the writer flushes the file and [`super::State::mark_warc`] puts the
//! file's length into the group's batch, and the file is synced before that
//! batch is applied. So the mark is durable exactly when the group's
//! completions are, and never covers bytes the disk may not have. On open the
//! writer cuts every file back to its mark ([`super::State::warc_marks`]): the
//! records of pages whose completion was not durable (they will be fetched
//! again) and any torn record go. A new file is registered
//! ([`super::State::register_warc`], length 0, synced, behind a crash point)
//! before it is created, so a file without a mark is never touched.
//!
//! Each file also gets a small id (`W` · id → canonical path) when it is
//! registered, or the first time a record's place in it is asked for
//! ([`file_id`]), so that a page record names the file of its response in a
//! few bytes ([`super::WarcAt`]).
//!
//! Depends on `table`, `error` and [`crate::crash`].

use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::table::{Batch, Bytes, Db, Durability, Table, U64};
use crate::crash;

/// WARC marks: `w` · canonical path of a WARC file → its valid length: the
/// bytes covered by durable completions.
pub(super) const WARC: Table<Path, U64> = Table::new(b'w', "warc mark");

/// WARC file ids: `W` · id → the file's canonical path (its OS bytes).
pub(super) const FILE: Table<u32, Bytes> = Table::new(b'W', "warc file");

/// The canonical path of WARC file `id`, if there is one.
pub(super) fn file(db: &Db, id: u32) -> Result<Option<PathBuf>, StoreError> {
    Ok(FILE.get(db, &id)?.map(path_of))
}

/// Every WARC file with an id, in id order.
pub(super) fn files(db: &Db) -> Result<Vec<(u32, PathBuf)>, StoreError> {
    FILE.iter(db)
        .map(|entry| entry.map(|(id, bytes)| (id, path_of(bytes))))
        .collect()
}

/// The id of WARC file `file` (a canonical path); one is given, and made
/// durable, when it has none (a file registered by a build before ids).
pub(super) fn file_id(db: &Db, file: &Path) -> Result<u32, StoreError> {
    if let Some(id) = find(db, file)? {
        return Ok(id);
    }
    let mut batch = Batch::default();
    let id = next_id(db, &mut batch, file)?;
    crash::point("warc.create");
    db.commit_now(batch, Durability::Synced(|| ()))?;
    Ok(id)
}

/// The id `file` has, if any.
fn find(db: &Db, file: &Path) -> Result<Option<u32>, StoreError> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = file.as_os_str().as_bytes();
    for entry in FILE.iter(db) {
        let (id, path) = entry?;
        if path == bytes {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Gives `file` the next id, in `batch`.
fn next_id(db: &Db, batch: &mut Batch, file: &Path) -> Result<u32, StoreError> {
    use std::os::unix::ffi::OsStrExt;
    let id = FILE.last(db, None)?.map_or(1, |(last, _)| last + 1);
    FILE.put(batch, &id, &file.as_os_str().as_bytes().to_vec());
    Ok(id)
}

fn path_of(bytes: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(bytes))
}

/// Puts into `batch` (the open group's) that the first `len` bytes of `file`
/// (a canonical path) hold only records of this group's and earlier groups'
/// completions.
pub(super) fn mark(batch: &mut Batch, file: &Path, len: u64) {
    WARC.put(batch, file, &len);
}

/// Registers a new WARC file `file` (a canonical path) with length 0 and
/// its id, and makes that durable; returns the id.
pub(super) fn register(db: &Db, file: &Path) -> Result<u32, StoreError> {
    let mut batch = Batch::default();
    WARC.put(&mut batch, file, &0);
    let id = match find(db, file)? {
        Some(id) => id,
        None => next_id(db, &mut batch, file)?,
    };
    crash::point("warc.create");
    db.commit_now(batch, Durability::Synced(|| ()))?;
    Ok(id)
}

/// The marks of the WARC files in `dir` (a canonical path), in name order:
/// `(file, valid length)`.
pub(super) fn marks(db: &Db, dir: &Path) -> Result<Vec<(PathBuf, u64)>, StoreError> {
    WARC.iter(db)
        .filter(|entry| !matches!(entry, Ok((file, _)) if file.parent() != Some(dir)))
        .collect()
}
