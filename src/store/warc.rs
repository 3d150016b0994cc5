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
//! Depends on `table`, `error` and [`crate::crash`].

use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::table::{Batch, Db, Durability, Table, U64};
use crate::crash;

/// WARC marks: `w` · canonical path of a WARC file → its valid length: the
/// bytes covered by durable completions.
pub(super) const WARC: Table<Path, U64> = Table::new(b'w', "warc mark");

/// Puts into `batch` (the open group's) that the first `len` bytes of `file`
/// (a canonical path) hold only records of this group's and earlier groups'
/// completions.
pub(super) fn mark(batch: &mut Batch, file: &Path, len: u64) {
    WARC.put(batch, file, &len);
}

/// Registers a new WARC file `file` (a canonical path) with length 0 and
/// makes that durable.
pub(super) fn register(db: &Db, file: &Path) -> Result<(), StoreError> {
    let mut batch = Batch::default();
    WARC.put(&mut batch, file, &0);
    crash::point("warc.create");
    db.commit_now(batch, Durability::Synced(|| ()))
}

/// The marks of the WARC files in `dir` (a canonical path), in name order:
/// `(file, valid length)`.
pub(super) fn marks(db: &Db, dir: &Path) -> Result<Vec<(PathBuf, u64)>, StoreError> {
    WARC.iter(db)
        .filter(|entry| !matches!(entry, Ok((file, _)) if file.parent() != Some(dir)))
        .collect()
}
