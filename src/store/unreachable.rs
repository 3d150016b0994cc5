//! Hosts that could not be reached in runs in a row (`U` · host → record).
//!
//! A host given up for a run because no connection could be made to it (see
//! the engine's `hosts`) gets one more failed run here; a host that answers
//! loses its record. The engine decides from the count when a host is parked
//! across runs and until when: a parked host's seeds are not queued by a new
//! cycle ([`super::State::start_cycle`]) and its queued requests wait.
//! Records are written in the open group, with the completion that failed or
//! answered. Depends on `table` and `error`.

use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::table::{Batch, Db, Json, Table};

/// Hosts that failed on the network in runs in a row: `U` · host → record.
pub(super) const UNREACHABLE: Table<str, Json<UnreachableHost>> =
    Table::new(b'U', "unreachable host");

/// A host that failed on the network in its last runs (`dump summary`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnreachableHost {
    /// The host (with its port when not the scheme's).
    pub host: String,
    /// Runs in a row in which no connection could be made to it.
    pub runs: u32,
    /// The last of those runs.
    pub last_run: u64,
    /// Unix seconds of the first failure of the row.
    pub since: u64,
    /// The last connection error.
    pub error: String,
    /// Parked: neither its seeds nor its queued requests are tried before
    /// this (unix seconds). `None`: not parked (yet).
    pub parked_until: Option<u64>,
}

impl UnreachableHost {
    /// True when the host is parked at `now`.
    pub fn parked_at(&self, now: u64) -> bool {
        self.parked_until.is_some_and(|until| until > now)
    }
}

/// Every host with a failed run in a row, in host order.
pub(super) fn all(db: &Db) -> Result<Vec<UnreachableHost>, StoreError> {
    UNREACHABLE.values(db)
}

/// Puts into `batch` (the open group's) that no connection could be made to
/// `host` in run `run` (once per run: a second note of the same run changes
/// nothing) at `now`, with `error`; `park(runs)` says until when the host is
/// parked after `runs` failed runs in a row. Returns the new record.
pub(super) fn note(
    db: &Db,
    batch: &mut Batch,
    host: &str,
    (run, now): (u64, u64),
    error: &str,
    park: impl Fn(u32) -> Option<u64>,
) -> Result<UnreachableHost, StoreError> {
    let record = match UNREACHABLE.get(db, host)? {
        Some(record) if record.last_run == run => return Ok(record),
        Some(record) => UnreachableHost {
            runs: record.runs.saturating_add(1),
            ..record
        },
        None => UnreachableHost {
            host: host.to_owned(),
            runs: 1,
            last_run: run,
            since: now,
            error: String::new(),
            parked_until: None,
        },
    };
    let record = UnreachableHost {
        last_run: run,
        error: error.to_owned(),
        parked_until: park(record.runs),
        ..record
    };
    UNREACHABLE.put(batch, host, &record);
    Ok(record)
}

/// Removes, in `batch` (the open group's), the record of `host`; true when
/// it had one.
pub(super) fn forget(db: &Db, batch: &mut Batch, host: &str) -> Result<bool, StoreError> {
    let known = UNREACHABLE.contains(db, host)?;
    if known {
        UNREACHABLE.delete(batch, host);
    }
    Ok(known)
}
