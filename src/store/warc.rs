//! WARC marks: how much of each WARC file is covered by durable completions.
//!
//! The WARC writer (`crate::warc`) appends a page's records to the open file
//! as the page completes. Before the group holding those completions is
//! sealed, the writer flushes the file and [`super::State::mark_warc`] puts the file's
//! length into the group's batch (`w` · canonical path → version byte, u64),
//! and the file is synced before that batch is applied. So the mark is durable
//! exactly when the group's completions are, and it never covers bytes the
//! disk may not have. On open the engine reads the marks
//! ([`super::State::warc_marks`]) and the writer cuts every file back to its mark: the records
//! of pages whose completion was not durable (they will be fetched again) and
//! any torn record go. A new file is registered ([`super::State::register_warc`],
//! length 0, synced) before it is created, so a file of this state is always
//! known, and a file without a mark is never touched.
//!
//! A table of its own (namespace `w`), written into the group's batch or, for
//! a registration, through the tree behind a crash point. Depends on `table`,
//! `keys` and [`super::crash`] only.

use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::table::{Batch, Db, Durability};
use super::{crash, keys};

/// WARC marks: `w` · canonical path of a WARC file → [`super::keys::SMALL_VERSION`], then
/// its valid length (u64, big-endian): the bytes covered by durable
/// completions (see `warc`).
pub(super) const WARC: u8 = b'w';

/// The key of the mark of `file` (a canonical path).
fn mark_key(file: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    keys::with_prefix(WARC, file.as_os_str().as_bytes())
}

/// Puts into `batch` (the open group's) that the first `len` bytes of `file`
/// (a canonical path) hold only records of this group's and earlier groups'
/// completions.
pub(super) fn mark(batch: &mut Batch, file: &Path, len: u64) {
    batch.put(mark_key(file), keys::versioned(&len.to_be_bytes()));
}

/// Registers a new WARC file `file` (a canonical path) with length 0 and
/// makes that durable.
pub(super) fn register(db: &Db, file: &Path) -> Result<(), StoreError> {
    let mut batch = Batch::default();
    batch.put(mark_key(file), keys::versioned(&0u64.to_be_bytes()));
    crash::point("warc.create");
    db.commit_now(batch, Durability::Synced(|| ()))
}

/// The marks of the WARC files in `dir` (a canonical path), in name order:
/// `(file, valid length)`.
pub(super) fn marks(db: &Db, dir: &Path) -> Result<Vec<(PathBuf, u64)>, StoreError> {
    use std::os::unix::ffi::OsStrExt;
    let mut prefix = mark_key(dir);
    prefix.push(b'/');
    let mut marks = Vec::new();
    for entry in db.scan(&prefix) {
        let (key, value) = entry?;
        let name = &key[prefix.len()..];
        if name.contains(&b'/') {
            continue;
        }
        let len: [u8; 8] = keys::versioned_body(&value)
            .ok_or_else(|| db.corrupt("warc mark", &key, "not a version byte and 8 bytes"))?;
        let file = Path::new(std::ffi::OsStr::from_bytes(&key[1..])).to_owned();
        marks.push((file, u64::from_be_bytes(len)));
    }
    Ok(marks)
}
