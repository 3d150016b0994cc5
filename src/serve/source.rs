//! Where `serve` reads what it shows: the snapshot a crawl publishes in the
//! data directory (see [`crate::status::snapshot`]). Never the database
//! and never its lock, so a crawl can start beside it at any moment.
//!
//! The file is read again whenever its modification time or length changed
//! (a request never waits for more than one read and parse), and judged
//! live only while its writer runs. A shared crawl has no file: its poller
//! feeds views in ([`Source::fed`]). Depends on the store's snapshot and status
//! modules only.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Serialize;

use crate::status::snapshot::{self, SNAPSHOT_FILE, Snapshot};
use crate::status::{STALE_AFTER_SECS, process_alive};

/// How the crawl behind the snapshot stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// No crawl has published here yet.
    None,
    /// A crawl is running and publishing.
    Running,
    /// The last run ended (its outcome is in the snapshot).
    Ended,
    /// The snapshot says running, but its writer is gone or stopped writing
    /// (killed, or stuck).
    Stale,
    /// The snapshot cannot be read (the message says why).
    Unreadable,
}

/// What the source shows right now.
#[derive(Clone, Debug)]
pub struct View {
    /// How the crawl stands.
    pub phase: Phase,
    /// One line for a person ("no crawl has published here yet", ...).
    pub message: String,
    /// The snapshot, unless `phase` is `None` or `Unreadable`.
    pub snapshot: Option<Arc<Snapshot>>,
}

/// The snapshot file of one data directory (cached), or a view fed by a
/// poller (a shared crawl, see [`super::shared`]).
#[derive(Debug)]
pub struct Source {
    dir: PathBuf,
    cache: Mutex<Cached>,
    /// Set for a fed source: the latest view the poller made.
    fed: Option<Mutex<View>>,
}

#[derive(Debug, Default)]
struct Cached {
    /// Modification time and length of the file last read.
    stamp: Option<(SystemTime, u64)>,
    read: Option<Result<Arc<Snapshot>, String>>,
}

impl Source {
    /// The source of the data directory `dir`.
    pub fn new(dir: &Path) -> Source {
        Source {
            dir: dir.to_owned(),
            cache: Mutex::new(Cached::default()),
            fed: None,
        }
    }

    /// A source whose views are fed by [`Source::feed`], starting with `first`.
    pub fn fed(first: View) -> Source {
        Source {
            dir: PathBuf::new(),
            cache: Mutex::new(Cached::default()),
            fed: Some(Mutex::new(first)),
        }
    }

    /// Replaces the view of a fed source (a directory source ignores it).
    pub fn feed(&self, view: View) {
        if let Some(fed) = &self.fed {
            *lock(fed) = view;
        }
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What to show now (re-reads the file when it changed).
    pub fn view(&self) -> View {
        if let Some(fed) = &self.fed {
            return lock(fed).clone();
        }
        let stamp = std::fs::metadata(self.dir.join(SNAPSHOT_FILE))
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        let read = {
            let mut cache = lock(&self.cache);
            if stamp.is_none() || cache.stamp != stamp || cache.read.is_none() {
                cache.read = match snapshot::read(&self.dir) {
                    Ok(Some(snapshot)) => Some(Ok(Arc::new(snapshot))),
                    Ok(None) => None,
                    Err(error) => Some(Err(error.to_string())),
                };
                cache.stamp = stamp;
            }
            cache.read.clone()
        };
        match read {
            None => View {
                phase: Phase::None,
                message: "no crawl has published here yet".to_owned(),
                snapshot: None,
            },
            Some(Err(message)) => View {
                phase: Phase::Unreadable,
                message,
                snapshot: None,
            },
            Some(Ok(snapshot)) => judge(snapshot),
        }
    }
}

/// A lock, whether or not a holder panicked (the data is replaced whole).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Running, ended or stale, from the snapshot and its writer.
fn judge(snapshot: Arc<Snapshot>) -> View {
    let age_secs = crate::store::records::unix_now().saturating_sub(snapshot.updated_at_ms / 1000);
    let (phase, message) = if snapshot.outcome != "running" {
        (
            Phase::Ended,
            format!("run {} ended: {}", snapshot.run, snapshot.outcome),
        )
    } else if age_secs <= STALE_AFTER_SECS && process_alive(snapshot.pid) {
        (Phase::Running, format!("run {} is running", snapshot.run))
    } else {
        (
            Phase::Stale,
            format!(
                "run {} stopped publishing {age_secs} s ago (killed or stuck)",
                snapshot.run
            ),
        )
    };
    View {
        phase,
        message,
        snapshot: Some(snapshot),
    }
}
