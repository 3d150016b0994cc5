//! The jobs table: every version of the crawl's job (`J` · version (u64) →
//! [`JobRecord`]), the crawl file that defines it (see [`crate::job`]).
//!
//! A version is written only in the batch that begins the first run using it
//! (see `State::begin_run`), so a job version never exists without a run that
//! names it, and is never rewritten. Depends on `table` and `records`.

use super::error::StoreError;
use super::records::JobRecord;
use super::table::{Batch, Db, Json, Table};

/// Job versions: `J` · version (u64) → [`JobRecord`].
pub(super) const JOB: Table<u64, Json<JobRecord>> = Table::new(b'J', "job");

/// The newest job version, if the state has one.
pub(super) fn latest(db: &Db) -> Result<Option<JobRecord>, StoreError> {
    Ok(JOB.last(db, None)?.map(|(_, job)| job))
}

/// Job version `version`, if stored.
pub(super) fn get(db: &Db, version: u64) -> Result<Option<JobRecord>, StoreError> {
    JOB.get(db, &version)
}

/// Puts `record` into `batch` (the batch that begins its first run).
pub(super) fn put(batch: &mut Batch, record: &JobRecord) {
    JOB.put(batch, &record.version, record);
}
