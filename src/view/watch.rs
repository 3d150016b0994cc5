//! What `serve` shows of a crawl now: a [`Snapshot`] and how the crawl
//! stands ([`Watched`]).
//!
//! A state directory's snapshot is the file its crawl publishes
//! ([`crate::status::snapshot`]), read again only when its modification time
//! or length changed, and judged live only while its writer runs; a run whose
//! record says running while nothing runs it (its writer killed or silent, a
//! shared crawl's workers all past their lease TTL) is shown as [`STALE`],
//! never as running. A shared crawl's is made from Redis: its counters (the
//! crawl's totals over every worker and run), its workers' runs, the head of
//! the queue, the busiest hosts of the shared tables (their per-run fetched
//! and error counts are not kept and show as "-"), the stream's newest
//! items, pages over time from the totals of successive reads, and the recent
//! errors the workers' completions keep (the same rows as an embedded
//! crawl's). Depends on [`crate::status`] and the view's Redis reads.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::{CrawlView, RunRow as ViewRun, ViewError};
use crate::page::PageTotals;
use crate::shared::Shared;
use crate::shared::watch::SharedHost;
use crate::status::snapshot::{
    self, HEAD_HOSTS, HEAD_URLS, HostHead, HostRow, ItemRow, MAX_ERRORS, MAX_HOSTS, MAX_ITEMS,
    MAX_RUNS, Outcomes, RunRow, SNAPSHOT_FILE, SNAPSHOT_VERSION, Snapshot,
};
use crate::status::{STALE_AFTER_SECS, process_alive};

/// How often a shared crawl is read again at most (a published file is
/// looked at on every request: it is cheap).
pub const REDIS_EVERY: Duration = Duration::from_secs(2);

/// How long one read of a shared crawl may take before the answer is
/// "unreadable" (Redis away: its calls retry until it answers).
pub const REDIS_LIMIT: Duration = Duration::from_secs(5);

/// The outcome shown for a run whose record still says `running` while no
/// crawl runs it (phase [`Phase::Stale`]): its process was killed, or it
/// stopped publishing. A state's next run records it as `killed`.
pub const STALE: &str = "stale";

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
    /// (killed, or stuck); a shared crawl's workers all stopped renewing
    /// within their lease TTL. The run's outcome is shown as [`STALE`].
    Stale,
    /// The crawl cannot be read (the message says why).
    Unreadable,
}

/// What `serve` shows right now.
#[derive(Clone, Debug)]
pub struct Watched {
    /// How the crawl stands.
    pub phase: Phase,
    /// One line for a person ("no crawl has published here yet", ...).
    pub message: String,
    /// The snapshot, unless `phase` is `None` or `Unreadable`.
    pub snapshot: Option<Arc<Snapshot>>,
}

/// What a watcher keeps between two reads.
#[derive(Debug, Default)]
pub struct Memory {
    /// Modification time and length of the snapshot file last read.
    stamp: Option<(SystemTime, u64)>,
    /// What that read gave.
    read: Option<Result<Arc<Snapshot>, String>>,
    /// A shared crawl's pages over time, as successive reads saw them.
    samples: Vec<[u64; 2]>,
}

impl CrawlView {
    /// How long a [`CrawlView::watch`] answer stays good.
    pub fn watch_every(&self) -> Duration {
        match self {
            CrawlView::Shared(_) => REDIS_EVERY,
            _ => Duration::ZERO,
        }
    }

    /// What the crawl shows now; `memory` is the watcher's.
    pub async fn watch(&self, memory: &mut Memory) -> Watched {
        let read = match self {
            CrawlView::State(state) => Ok(published(state.dir(), memory)),
            CrawlView::Published(dir) => Ok(published(dir, memory)),
            CrawlView::Shared(shared) => {
                match tokio::time::timeout(REDIS_LIMIT, from_redis(shared, memory)).await {
                    Ok(read) => read,
                    Err(_) => Ok(Watched {
                        phase: Phase::Unreadable,
                        message: format!(
                            "Redis at {} did not answer within {} s",
                            shared.target().shown(),
                            REDIS_LIMIT.as_secs()
                        ),
                        snapshot: None,
                    }),
                }
            }
        };
        read.unwrap_or_else(|error| Watched {
            phase: Phase::Unreadable,
            // SharedError names the server by `SharedTarget::shown` only.
            message: error.to_string(),
            snapshot: None,
        })
    }
}

/// The first answer, before anything was read.
pub fn waiting() -> Watched {
    Watched {
        phase: Phase::None,
        message: "reading the crawl...".to_owned(),
        snapshot: None,
    }
}

/// The snapshot file of `dir` (re-read when it changed), judged.
fn published(dir: &Path, memory: &mut Memory) -> Watched {
    let stamp = std::fs::metadata(dir.join(SNAPSHOT_FILE))
        .ok()
        .and_then(|m| Some((m.modified().ok()?, m.len())));
    if stamp.is_none() || memory.stamp != stamp || memory.read.is_none() {
        memory.read = match snapshot::read(dir) {
            Ok(Some(snapshot)) => Some(Ok(Arc::new(snapshot))),
            Ok(None) => None,
            Err(error) => Some(Err(error.to_string())),
        };
        memory.stamp = stamp;
    }
    match memory.read.clone() {
        None => Watched {
            phase: Phase::None,
            message: "no crawl has published here yet".to_owned(),
            snapshot: None,
        },
        Some(Err(message)) => Watched {
            phase: Phase::Unreadable,
            message,
            snapshot: None,
        },
        Some(Ok(snapshot)) => judge(snapshot),
    }
}

/// Running, ended or stale, from the snapshot and its writer; a stale run is
/// shown as [`STALE`], never as running.
fn judge(snapshot: Arc<Snapshot>) -> Watched {
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
    let snapshot = match phase {
        Phase::Stale => Arc::new(stale(Arc::unwrap_or_clone(snapshot))),
        _ => snapshot,
    };
    Watched {
        phase,
        message,
        snapshot: Some(snapshot),
    }
}

/// `snapshot` with its run, which says running while nothing runs it, shown
/// as [`STALE`] (in its history too).
fn stale(mut snapshot: Snapshot) -> Snapshot {
    let run = snapshot.run;
    snapshot.outcome = STALE.to_owned();
    for row in snapshot.runs.iter_mut().filter(|r| r.id == run) {
        if row.outcome == "running" {
            STALE.clone_into(&mut row.outcome);
        }
    }
    snapshot
}

/// True when a shared crawl's worker renewed within its lease TTL (its
/// record's `lease_ttl_ms`): it runs. One silent for longer is killed or
/// stuck, and its leases have expired.
fn renewing(worker: &crate::shared::views::WorkerView) -> bool {
    let ttl = worker
        .record
        .as_ref()
        .and_then(|r| r.get("lease_ttl_ms"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(crate::shared::DEFAULT_LEASE_TTL.as_millis() as u64);
    worker.last_seen_ms.is_some_and(|ms| ms <= ttl)
}

/// A shared crawl's snapshot, made from what Redis holds now.
async fn from_redis(shared: &Shared, memory: &mut Memory) -> Result<Watched, ViewError> {
    let name = shared.target().name.clone();
    if !shared.exists().await? {
        return Ok(Watched {
            phase: Phase::None,
            message: format!("no worker has used the shared crawl {name:?} yet"),
            snapshot: None,
        });
    }
    // A crawl of an earlier key layout is not read (shown as unreadable).
    shared.check_schema().await?;
    let raw = shared.summary().await?;
    let runs = super::redis::runs(shared).await?;
    let queued = super::redis::frontier_head(shared, HEAD_HOSTS * HEAD_URLS).await?;
    let hosts = shared.busiest_hosts(MAX_HOSTS).await?;
    let latest = shared.latest_items(MAX_ITEMS).await?;
    let count = |name: &str| raw.counters.get(name).copied().unwrap_or(0);
    let totals = PageTotals::of(count);
    snapshot::push_sample(&mut memory.samples, [snapshot::unix_ms(), totals.pages]);
    // Newest last, numbered by their place in the stream.
    let recent_items: Vec<ItemRow> = latest
        .iter()
        .enumerate()
        .rev()
        .map(|(k, entry)| snapshot::item_row(raw.items.saturating_sub(k as u64), &entry.item))
        .collect();
    let runs: Vec<RunRow> = runs[runs.len().saturating_sub(MAX_RUNS)..]
        .iter()
        .map(run_row)
        .collect();
    let running = raw.workers.iter().filter(|w| renewing(w)).count();
    let (phase, outcome, message) = match (running, raw.workers.len(), runs.last()) {
        (0, 0, Some(last)) => (
            Phase::Ended,
            last.outcome.clone(),
            format!("no worker running; the last run ended: {}", last.outcome),
        ),
        (0, 0, None) => (Phase::None, String::new(), "no worker running".to_owned()),
        (0, n, _) => (
            Phase::Stale,
            STALE.to_owned(),
            format!(
                "{n} worker(s) stopped renewing within their lease TTL (killed or stuck); no worker running"
            ),
        ),
        (n, _, _) => (
            Phase::Running,
            "running".to_owned(),
            format!("{n} worker(s) running"),
        ),
    };
    let mut frontier: Vec<HostHead> = Vec::new();
    for entry in queued {
        match frontier.iter().position(|h| h.host == entry.host) {
            Some(k) if frontier[k].urls.len() < HEAD_URLS => {
                frontier[k].urls.push(entry.request.url);
            }
            Some(_) => {}
            None if frontier.len() < HEAD_HOSTS => frontier.push(HostHead {
                host: entry.host,
                urls: vec![entry.request.url],
            }),
            None => {}
        }
    }
    let (bytes, errors) = (count("fetch/bytes"), snapshot::errors(count));
    let summary = super::Summary::of_shared(raw);
    let snapshot = Snapshot {
        version: SNAPSHOT_VERSION,
        pid: 0,
        updated_at_ms: snapshot::unix_ms(),
        run: runs.last().map_or(0, |r| r.id),
        run_started_at: runs.first().map_or(0, |r| r.started_at),
        ended_at: None,
        outcome,
        pages: Outcomes::from(totals),
        items_stored: summary.items,
        bytes,
        errors,
        queued: summary.frontier,
        in_flight: summary.in_flight,
        summary: crate::store::Summary {
            frontier: summary.frontier,
            in_flight: summary.in_flight,
            seen: summary.seen,
            items: summary.items,
            hosts: summary.hosts,
            runs: summary.runs,
            pages: summary.pages,
            filtered: summary.filtered,
            robots_disallowed: summary.robots_disallowed,
            job: summary.job,
            dedup: summary.dedup.clone(),
            ..crate::store::Summary::default()
        },
        samples: memory.samples.clone(),
        hosts_total: summary.hosts,
        hosts: hosts.into_iter().map(host_row).collect(),
        frontier,
        recent_errors: shared.recent_errors(MAX_ERRORS).await?,
        recent_items,
        runs,
    };
    Ok(Watched {
        phase,
        message,
        snapshot: Some(Arc::new(snapshot)),
    })
}

/// A host of the shared tables as a row of the hosts table; its per-run
/// fetched and error counts are not kept in Redis.
fn host_row(h: SharedHost) -> HostRow {
    HostRow {
        host: h.host,
        queued: h.queued,
        more: false,
        in_flight: h.in_flight,
        fetched: None,
        errors: None,
        delay_ms: h.delay_ms,
        wait_ms: h.wait_ms,
        robots: match h.robots_failures {
            0 => "-".to_owned(),
            n => format!("unavailable ({n} in a row)"),
        },
        parked: h.parked,
    }
}

/// A run of the view as a row of serve's history.
fn run_row(run: &ViewRun) -> RunRow {
    RunRow {
        id: run.id,
        started_at: run.started_at,
        ended_at: run.ended_at,
        outcome: run.outcome.clone(),
        pages: Outcomes::from(run.columns.totals),
        items: run.columns.items,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(pid: u32, updated_at_ms: u64) -> Arc<Snapshot> {
        Arc::new(Snapshot {
            pid,
            updated_at_ms,
            run: 2,
            outcome: "running".into(),
            runs: vec![
                RunRow {
                    id: 1,
                    ended_at: Some(1),
                    outcome: "drained".into(),
                    ..RunRow::default()
                },
                RunRow {
                    id: 2,
                    outcome: "running".into(),
                    ..RunRow::default()
                },
            ],
            ..Snapshot::default()
        })
    }

    #[test]
    fn a_run_whose_writer_is_gone_is_shown_stale_never_running() {
        // A pid no process has (above Linux's pid_max).
        let watched = judge(running(u32::MAX, snapshot::unix_ms()));
        assert_eq!(watched.phase, Phase::Stale);
        let shown = watched.snapshot.as_deref().map(|s| s.outcome.as_str());
        assert_eq!(shown, Some(STALE));
        let rows: Vec<&str> = watched
            .snapshot
            .iter()
            .flat_map(|s| s.runs.iter().map(|r| r.outcome.as_str()))
            .collect();
        assert_eq!(rows, ["drained", STALE]);
        // A writer that runs and published just now: running.
        let watched = judge(running(std::process::id(), snapshot::unix_ms()));
        assert_eq!(watched.phase, Phase::Running);
        assert_eq!(
            watched.snapshot.as_deref().map(|s| s.outcome.as_str()),
            Some("running")
        );
        // One that stopped publishing long ago: stale, though it lives.
        let watched = judge(running(std::process::id(), 0));
        assert_eq!(watched.phase, Phase::Stale);
        assert_eq!(
            watched.snapshot.as_deref().map(|s| s.outcome.as_str()),
            Some(STALE)
        );
    }

    #[test]
    fn a_worker_is_running_while_it_renews_within_its_lease_ttl() {
        let worker =
            |last_seen_ms: Option<u64>, ttl_ms: Option<u64>| crate::shared::views::WorkerView {
                id: "host:1".into(),
                leases: 1,
                last_seen_ms,
                record: ttl_ms.map(|ttl| serde_json::json!({ "lease_ttl_ms": ttl })),
            };
        assert!(renewing(&worker(Some(500), Some(1_000))));
        assert!(!renewing(&worker(Some(1_500), Some(1_000))));
        assert!(renewing(&worker(Some(30_000), None)));
        assert!(!renewing(&worker(None, Some(1_000))));
    }
}
