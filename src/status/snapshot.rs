//! The snapshot a crawl publishes for `legcrawl serve`: `snapshot.json` in the
//! data directory.
//!
//! `serve` never opens the database (sled allows one process, and a cron crawl
//! must be able to start beside it), so everything it shows of an embedded
//! state comes from this file. The running crawl rewrites it about once a
//! second, atomically (a temporary file, then a rename), and writes it one last
//! time at the end of the run with the run's outcome; unlike `status.json` it is
//! left in place, so a stopped state still shows its last run. Every list in it
//! is bounded (the `MAX_*` constants), so the file and what `serve` answers
//! from it stay small whatever the crawl's size. Plain records only: the engine
//! fills them, `serve` reads them. Depends on the store's [`Summary`] only.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::Summary;

/// Name of the snapshot file in the data directory.
pub const SNAPSHOT_FILE: &str = "snapshot.json";
/// The format version written in [`Snapshot::version`]; a reader refuses others.
pub const SNAPSHOT_VERSION: u32 = 1;
/// Hosts in the host table (the most queued + in flight).
pub const MAX_HOSTS: usize = 200;
/// Hosts whose queue head is listed.
pub const HEAD_HOSTS: usize = 50;
/// URLs listed per host at the head of the queue.
pub const HEAD_URLS: usize = 5;
/// The most recent errors kept.
pub const MAX_ERRORS: usize = 100;
/// The latest items kept.
pub const MAX_ITEMS: usize = 200;
/// An item's JSON longer than this is replaced by a note saying so.
pub const MAX_ITEM_BYTES: usize = 8 * 1024;
/// Runs in the history.
pub const MAX_RUNS: usize = 100;
/// Samples of pages over the run; past this every other one is dropped, so the
/// samples always span the whole run.
pub const MAX_SAMPLES: usize = 600;
/// A snapshot file larger than this is not read (the bounds above keep a real
/// one far below it).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Run counters that count errors, by the kind `serve` shows.
pub const ERROR_KINDS: &[(&str, &str)] = &[
    ("network", "fetch/network_error"),
    ("http_4xx", "status/4xx"),
    ("http_5xx", "status/5xx"),
    ("truncated", "fetch/truncated"),
    ("undecodable", "fetch/undecodable"),
    ("panicked", "fetch/panicked"),
    ("robots_unavailable", "robots/unavailable"),
];

/// A run's errors by kind (those that happened), from its counters.
pub fn errors(count: impl Fn(&str) -> u64) -> BTreeMap<String, u64> {
    ERROR_KINDS
        .iter()
        .map(|(kind, counter)| ((*kind).to_owned(), count(counter)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Unix milliseconds now.
pub fn unix_ms() -> u64 {
    crate::clock::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What a crawl publishes (see the module doc).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    /// [`SNAPSHOT_VERSION`].
    pub version: u32,
    /// Process id of the crawl that wrote it.
    pub pid: u32,
    /// Unix milliseconds of this write.
    pub updated_at_ms: u64,
    /// Run number.
    pub run: u64,
    /// Unix seconds when the run started.
    pub run_started_at: u64,
    /// Unix seconds when the run ended; `None` while it runs.
    pub ended_at: Option<u64>,
    /// `running` while the crawl runs, then how the run ended (`drained`,
    /// `limit`, `interrupted`, `idle`, `failed`).
    pub outcome: String,
    /// This run's pages by outcome.
    pub pages: Outcomes,
    /// Items stored by this run.
    pub items_stored: u64,
    /// Body bytes fetched by this run.
    pub bytes: u64,
    /// This run's errors by kind (`network`, `http_4xx`, `http_5xx`, ...).
    pub errors: BTreeMap<String, u64>,
    /// Requests queued and not in flight.
    pub queued: u64,
    /// Requests in flight.
    pub in_flight: u64,
    /// The state's summary (what `dump summary` prints).
    pub summary: Summary,
    /// `[unix ms, pages of this run so far]`, oldest first (at most [`MAX_SAMPLES`]).
    pub samples: Vec<[u64; 2]>,
    /// Hosts known to the frontier.
    pub hosts_total: u64,
    /// The busiest hosts (at most [`MAX_HOSTS`]).
    pub hosts: Vec<HostRow>,
    /// The head of the queue of the busiest hosts (at most [`HEAD_HOSTS`]).
    pub frontier: Vec<HostHead>,
    /// The most recent errors, newest last (at most [`MAX_ERRORS`]).
    pub recent_errors: Vec<ErrorRow>,
    /// The latest items, newest last (at most [`MAX_ITEMS`]).
    pub recent_items: Vec<ItemRow>,
    /// The last runs, oldest first, this one last (at most [`MAX_RUNS`]).
    pub runs: Vec<RunRow>,
}

/// Pages by outcome (as the end-of-run line counts them).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Outcomes {
    /// All pages that finished.
    pub pages: u64,
    /// Fetched for the first time.
    pub new: u64,
    /// Known and changed.
    pub changed: u64,
    /// Known and unchanged (304s included).
    pub unchanged: u64,
    /// Found gone.
    pub gone: u64,
    /// Failed for good.
    pub failed: u64,
    /// Disallowed by robots.txt.
    pub blocked: u64,
}

/// One row of the host table.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HostRow {
    /// `host` or `host:port`.
    pub host: String,
    /// Requests queued and not in flight (counted up to a cap, see `more`).
    pub queued: u64,
    /// True when the count stopped at its cap: there are more.
    pub more: bool,
    /// Requests in flight.
    pub in_flight: u64,
    /// Pages of this host that finished in this run (`None`: not kept, as in
    /// a shared crawl).
    pub fetched: Option<u64>,
    /// Failures of this host in this run (pages, robots.txt, connections;
    /// `None`: not kept, as in a shared crawl).
    pub errors: Option<u64>,
    /// The delay between two requests to it, in milliseconds (robots.txt
    /// `Crawl-delay` included).
    pub delay_ms: u64,
    /// Milliseconds until its next request may start (a backoff shows here).
    pub wait_ms: u64,
    /// What its robots.txt said last: `ok`, `disallows some`, `unavailable`,
    /// `off`, or `-` (not consulted this run).
    pub robots: String,
    /// Left alone for the rest of the run.
    pub parked: bool,
}

/// The head of one host's queue.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HostHead {
    /// The host.
    pub host: String,
    /// Its first queued URLs, in lease order (at most [`HEAD_URLS`]).
    pub urls: Vec<String>,
}

/// One recent error.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ErrorRow {
    /// Unix seconds.
    pub at: u64,
    /// The request's URL (stored URLs never hold credentials).
    pub url: String,
    /// What went wrong, one line.
    pub reason: String,
}

/// One recent item.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ItemRow {
    /// Its sequence number in the state.
    pub seq: u64,
    /// Its `url` field (empty when it has none).
    pub url: String,
    /// The item as stored (or a note when longer than [`MAX_ITEM_BYTES`]).
    pub item: serde_json::Value,
}

/// One run of the history.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RunRow {
    /// Run number.
    pub id: u64,
    /// Unix seconds at start.
    pub started_at: u64,
    /// Unix seconds at its end (`None` while running, or after a kill).
    pub ended_at: Option<u64>,
    /// How it ended.
    pub outcome: String,
    /// Its pages by outcome.
    pub pages: Outcomes,
    /// Items it stored.
    pub items: u64,
}

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a snapshot this version reads.
    #[error("{path} is not a snapshot this legcrawl reads: {reason}")]
    Format {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// Writes `snapshot` atomically into `dir`.
pub fn write(dir: &Path, snapshot: &Snapshot) -> std::io::Result<()> {
    let tmp = dir.join(".snapshot.json.tmp");
    crate::crash::point("snapshot.write");
    let mut file = fs::File::create(&tmp)?;
    let text = serde_json::to_vec(snapshot)?;
    file.write_all(&text)?;
    drop(file);
    fs::rename(&tmp, dir.join(SNAPSHOT_FILE))
}

/// The snapshot in `dir`: `None` when no crawl has published one there.
pub fn read(dir: &Path) -> Result<Option<Snapshot>, SnapshotError> {
    let path = dir.join(SNAPSHOT_FILE);
    let shown = || path.display().to_string();
    let file = match fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(SnapshotError::Io {
                path: shown(),
                source,
            });
        }
    };
    let mut text = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|source| SnapshotError::Io {
            path: shown(),
            source,
        })?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(SnapshotError::Format {
            path: shown(),
            reason: format!("larger than {MAX_FILE_BYTES} bytes"),
        });
    }
    #[derive(Deserialize)]
    struct Version {
        version: u32,
    }
    let version: Version = serde_json::from_slice(&text).map_err(|e| SnapshotError::Format {
        path: shown(),
        reason: e.to_string(),
    })?;
    if version.version != SNAPSHOT_VERSION {
        return Err(SnapshotError::Format {
            path: shown(),
            reason: format!("format version {}", version.version),
        });
    }
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| SnapshotError::Format {
            path: shown(),
            reason: e.to_string(),
        })
}

/// The row of item number `seq`, whose JSON text is `text`: the item itself,
/// or a note when it is longer than [`MAX_ITEM_BYTES`].
pub fn item_row(seq: u64, text: &str) -> ItemRow {
    let parsed: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let url = parsed
        .as_ref()
        .and_then(|v| v.get("url"))
        .and_then(|u| u.as_str())
        .unwrap_or_default()
        .to_owned();
    let item = match parsed {
        Some(value) if text.len() <= MAX_ITEM_BYTES => value,
        _ => serde_json::json!({
            "url": url,
            "note": format!("item of {} bytes: see `legcrawl dump items`", text.len()),
        }),
    };
    ItemRow { seq, url, item }
}

/// Drops every other sample once there are more than [`MAX_SAMPLES`].
pub fn push_sample(samples: &mut Vec<[u64; 2]>, sample: [u64; 2]) {
    samples.push(sample);
    if samples.len() > MAX_SAMPLES {
        let mut k = 0;
        samples.retain(|_| {
            k += 1;
            k % 2 == 1
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_round_trips_and_another_version_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read(dir.path()).expect("no file is fine").is_none());
        let snapshot = Snapshot {
            version: SNAPSHOT_VERSION,
            run: 3,
            outcome: "running".into(),
            ..Snapshot::default()
        };
        write(dir.path(), &snapshot).expect("write");
        assert_eq!(read(dir.path()).expect("read"), Some(snapshot));
        fs::write(dir.path().join(SNAPSHOT_FILE), r#"{"version":99}"#).expect("write");
        let error = read(dir.path()).expect_err("version 99");
        assert!(error.to_string().contains("format version 99"), "{error}");
    }

    #[test]
    fn samples_stay_bounded_and_span_the_run() {
        let mut samples = Vec::new();
        for k in 0..10_000 {
            push_sample(&mut samples, [k, k]);
        }
        assert!(samples.len() <= MAX_SAMPLES);
        assert_eq!(samples[0], [0, 0]);
        assert!(samples[samples.len() - 1][0] > 9_000);
    }
}
