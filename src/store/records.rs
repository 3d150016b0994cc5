//! The small records of the state: metadata, runs and jobs, and the counters.
//!
//! Each record is one version byte ([`RECORD_VERSION`]) followed by JSON (they
//! are small, rarely written and read by `dump`, so readability beats
//! compactness). Depends on nothing else in the crate.

use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// Version byte written before every record of this module.
pub const RECORD_VERSION: u8 = 1;

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Empty value.
    #[error("empty record")]
    Empty,
    /// Written by another format version.
    #[error("record has format version {found}, this build reads version {RECORD_VERSION}")]
    Version {
        /// The version byte found.
        found: u8,
    },
    /// Not valid JSON for the record type.
    #[error("corrupt record: {0}")]
    Corrupt(#[from] serde_json::Error),
}

/// Encodes a record: version byte, then JSON.
pub fn encode<T: Serialize>(record: &T) -> Vec<u8> {
    let mut out = vec![RECORD_VERSION];
    if let Err(error) = serde_json::to_writer(&mut out, record) {
        unreachable!("serializing a record into memory failed: {error}");
    }
    out
}

/// Decodes a record written by [`encode`].
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, RecordError> {
    let (&version, rest) = bytes.split_first().ok_or(RecordError::Empty)?;
    if version != RECORD_VERSION {
        return Err(RecordError::Version { found: version });
    }
    Ok(serde_json::from_slice(rest)?)
}

/// Fixed facts about a state, chosen when it is created, plus its allocators.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Meta {
    /// State format version (see [`super::STATE_FORMAT`]).
    pub format: u32,
    /// Unix seconds when the state was created.
    pub created_at: u64,
    /// Bloom filter size, log2 of bits: the size it has, or, when
    /// `bloom_sized`, the size it started at.
    pub bloom_bits: u8,
    /// The filter grows with the crawl (see `sizing`); `bloom.bin`'s header
    /// says its size. False when `--bloom-bits` fixed it, and in `bloom` mode
    /// (and missing in the records of formats before 5, which the format
    /// number refuses after they decode).
    #[serde(default)]
    pub bloom_sized: bool,
    /// Bloom filter hash count.
    pub bloom_hashes: u8,
    /// `exact` or `bloom`.
    pub dedup: String,
    /// Next queue sequence number to hand out.
    pub next_queue_seq: u64,
    /// Next host id to hand out.
    pub next_host_id: u32,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Still running (or the process died: see [`RunOutcome::Killed`]).
    Running,
    /// The frontier was drained.
    Drained,
    /// A limit (`--max-pages`, `--max-duration`) was reached.
    Limit,
    /// Stopped by Ctrl-C or SIGTERM; resume by running again.
    Interrupted,
    /// Found still "running" by a later run: the process died without closing.
    Killed,
    /// Stopped by an error.
    Failed,
    /// Requests are left, but none could start soon (hosts backed off or parked);
    /// they wait for the next run, which also starts a new cycle.
    Idle,
}

impl RunOutcome {
    /// The snake_case name used in the record and in `dump runs`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Running => "running",
            RunOutcome::Drained => "drained",
            RunOutcome::Limit => "limit",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::Killed => "killed",
            RunOutcome::Failed => "failed",
            RunOutcome::Idle => "idle",
        }
    }
}

/// One crawl run: when, how it ended, and what it counted.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunRecord {
    /// Run number, from 1.
    pub id: u64,
    /// Unix seconds at start.
    pub started_at: u64,
    /// Unix seconds at the last commit or at the end.
    pub updated_at: u64,
    /// Unix seconds at a clean end; `None` while running or after a kill.
    pub ended_at: Option<u64>,
    /// How it ended.
    pub outcome: RunOutcome,
    /// Process id of the crawl.
    pub pid: u32,
    /// Counters of this run (`dupefilter/filtered`, `frontier/enqueued`, ...).
    pub counters: BTreeMap<String, u64>,
    /// Sequence number of the first item this run stored (the item count when it
    /// began): the run's items are those from here to the next run's `first_item`.
    /// `None` in runs recorded before this field existed.
    #[serde(default)]
    pub first_item: Option<u64>,
    /// The version of the job this run ran under (see [`JobRecord`]); `None`
    /// in runs recorded before jobs were stored, and in runs begun without one
    /// (the library's tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u64>,
}

/// One version of a crawl's job: the crawl file that defines it (see
/// [`crate::job`]). A version is written in the same commit as the begin
/// record of the first run that uses it, and never changed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobRecord {
    /// Version number, from 1.
    pub version: u64,
    /// Unix seconds when it was stored.
    pub created_at: u64,
    /// The run that first used it.
    pub first_run: u64,
    /// The job as a crawl file.
    pub text: String,
}

/// Seconds since the Unix epoch, 0 if the clock is before it.
pub fn unix_now() -> u64 {
    crate::clock::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A set of named counters with the names changed since the last [`Counters::take_dirty`].
#[derive(Clone, Debug, Default)]
pub struct Counters {
    values: BTreeMap<String, u64>,
    dirty: Vec<String>,
}

impl Counters {
    /// Counters starting from stored values.
    pub fn from_values(values: BTreeMap<String, u64>) -> Counters {
        Counters {
            values,
            dirty: Vec::new(),
        }
    }

    /// Adds `by` to `name`.
    pub fn add(&mut self, name: &str, by: u64) {
        if by == 0 {
            return;
        }
        match self.values.get_mut(name) {
            Some(value) => *value += by,
            None => {
                self.values.insert(name.to_owned(), by);
            }
        }
        if !self.dirty.iter().any(|d| d == name) {
            self.dirty.push(name.to_owned());
        }
    }

    /// Subtracts `by` from `name`, saturating at 0 (for gauges such as queue length).
    pub fn sub(&mut self, name: &str, by: u64) {
        if let Some(value) = self.values.get_mut(name) {
            *value = value.saturating_sub(by);
            if !self.dirty.iter().any(|d| d == name) {
                self.dirty.push(name.to_owned());
            }
        }
    }

    /// Current value of `name` (0 if never counted).
    pub fn get(&self, name: &str) -> u64 {
        self.values.get(name).copied().unwrap_or(0)
    }

    /// All values.
    pub fn values(&self) -> &BTreeMap<String, u64> {
        &self.values
    }

    /// The names changed since the last call, with their values.
    pub fn take_dirty(&mut self) -> Vec<(String, u64)> {
        let dirty = std::mem::take(&mut self.dirty);
        dirty
            .into_iter()
            .map(|name| (name.clone(), self.get(&name)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_other_versions() {
        let run = RunRecord {
            id: 3,
            started_at: 10,
            updated_at: 11,
            ended_at: None,
            outcome: RunOutcome::Running,
            pid: 42,
            counters: BTreeMap::from([("a".to_owned(), 1)]),
            first_item: Some(9),
            job: Some(2),
        };
        let bytes = encode(&run);
        assert_eq!(decode::<RunRecord>(&bytes).unwrap(), run);
        let mut other = bytes.clone();
        other[0] = 7;
        assert!(matches!(
            decode::<RunRecord>(&other),
            Err(RecordError::Version { found: 7 })
        ));
        assert!(matches!(
            decode::<RunRecord>(&bytes[..5]),
            Err(RecordError::Corrupt(_))
        ));
    }

    #[test]
    fn runs_recorded_before_first_item_still_decode() {
        let old = br#"{"id":2,"started_at":1,"updated_at":2,"ended_at":2,"outcome":"drained","pid":7,"counters":{}}"#;
        let mut bytes = vec![RECORD_VERSION];
        bytes.extend_from_slice(old);
        let run: RunRecord = decode(&bytes).unwrap();
        assert_eq!((run.id, run.first_item), (2, None));
    }

    #[test]
    fn counters_track_dirty_names_once() {
        let mut counters = Counters::default();
        counters.add("x", 2);
        counters.add("x", 3);
        counters.add("y", 0);
        assert_eq!(counters.take_dirty(), vec![("x".to_owned(), 5)]);
        assert!(counters.take_dirty().is_empty());
    }
}
