//! The jobs table: every version of the crawl's job (`J` · version (u64) →
//! [`JobRecord`]), the crawl file that defines it (see [`crate::job`]).
//!
//! A version is written only in the batch that begins the first run using it
//! (see `State::begin_run`), so a job version never exists without a run that
//! names it, and is never rewritten. The table owns its prefix here (it is not
//! in `keys`, which predates it). Depends on `table`, `records` and `keys`.

use super::error::StoreError;
use super::keys;
use super::records::{self, JobRecord};
use super::table::{Batch, Db};

/// Namespace of job versions: `J` · version (u64, big-endian) → a
/// [`JobRecord`] as [`records::encode`] writes it.
pub(super) const JOB: u8 = b'J';

/// The newest job version, if the state has one.
pub(super) fn latest(db: &Db) -> Result<Option<JobRecord>, StoreError> {
    match db.range([JOB]..[JOB + 1]).next_back() {
        None => Ok(None),
        Some(entry) => {
            let (key, value) = entry?;
            Ok(Some(db.decode("job", &key, &value)?))
        }
    }
}

/// Job version `version`, if stored.
pub(super) fn get(db: &Db, version: u64) -> Result<Option<JobRecord>, StoreError> {
    db.record("job", &keys::with_u64(JOB, version))
}

/// Puts `record` into `batch` (the batch that begins its first run).
pub(super) fn put(batch: &mut Batch, record: &JobRecord) {
    batch.put(keys::with_u64(JOB, record.version), records::encode(record));
}
