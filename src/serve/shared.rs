//! `serve --shared URL --name N`: a crawl shared through Redis, read with the
//! same public read functions `dump --shared` uses (plain commands, never a
//! script, never a write), every [`POLL_EVERY`], and fed to the source as a
//! snapshot.
//!
//! What a shared crawl keeps differs from a state directory's snapshot: its
//! counters are the crawl's totals over every worker and run (not one run's),
//! its runs are the workers' runs, and the head of the queue comes from
//! `dump --shared frontier`. The hosts come from the workers' shared tables
//! ([`Shared::busiest_hosts`]: queued, in flight, delay, wait, parked; their
//! per-run fetched and error counts are not kept and show as "-"), the latest
//! items from the stream's tail, and pages over time from the totals of
//! successive polls (so the chart starts when serve does). Recent errors are
//! not kept for a shared crawl and stay empty. Depends on [`crate::shared`]
//! (read functions only) and the source.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::PageTotals;
use crate::shared::Shared;
use crate::shared::views::SharedSummary;
use crate::shared::watch::SharedHost;
use crate::status::snapshot::{
    self, HEAD_HOSTS, HEAD_URLS, HostHead, HostRow, ItemRow, MAX_HOSTS, MAX_ITEMS, MAX_RUNS,
    Outcomes, RunRow, SNAPSHOT_VERSION, Snapshot,
};

use super::App;
use super::source::{Phase, View};

/// How often Redis is read.
pub const POLL_EVERY: Duration = Duration::from_secs(2);

/// Reads the crawl into `app`'s source every [`POLL_EVERY`], for ever.
pub async fn poll(shared: Shared, app: Arc<App>) {
    let mut tick = tokio::time::interval(POLL_EVERY);
    // Pages over time, as successive polls saw the crawl's totals.
    let mut samples: Vec<[u64; 2]> = Vec::new();
    loop {
        tick.tick().await;
        let view = match read(&shared, &mut samples).await {
            Ok(view) => view,
            Err(error) => View {
                phase: Phase::Unreadable,
                // SharedError names the server by `SharedTarget::shown` only.
                message: error.to_string(),
                snapshot: None,
            },
        };
        app.source.feed(view);
    }
}

/// The first view, before Redis was read.
pub fn waiting() -> View {
    View {
        phase: Phase::None,
        message: "reading the shared crawl...".to_owned(),
        snapshot: None,
    }
}

async fn read(
    shared: &Shared,
    samples: &mut Vec<[u64; 2]>,
) -> Result<View, crate::shared::SharedError> {
    let name = shared.target().name.clone();
    if !shared.exists().await? {
        return Ok(View {
            phase: Phase::None,
            message: format!("no worker has used the shared crawl {name:?} yet"),
            snapshot: None,
        });
    }
    // A crawl of an earlier key layout is not read (shown as unreadable).
    shared.check_schema().await?;
    let summary = shared.summary().await?;
    let records = shared.runs().await?;
    let queued = shared.frontier_head(HEAD_HOSTS * HEAD_URLS).await?;
    let hosts = shared.busiest_hosts(MAX_HOSTS).await?;
    let latest = shared.latest_items(MAX_ITEMS).await?;
    let count = |name: &str| summary.counters.get(name).copied().unwrap_or(0);
    snapshot::push_sample(samples, [snapshot::unix_ms(), PageTotals::of(count).pages]);
    // Newest last, numbered by their place in the stream.
    let items: Vec<ItemRow> = latest
        .iter()
        .enumerate()
        .rev()
        .map(|(k, entry)| snapshot::item_row(summary.items.saturating_sub(k as u64), &entry.item))
        .collect();
    let runs = run_rows(&records);
    let workers = summary.workers.len();
    let (phase, outcome, message) = match (workers, runs.last()) {
        (0, Some(last)) => (
            Phase::Ended,
            last.outcome.clone(),
            format!("no worker running; the last run ended: {}", last.outcome),
        ),
        (0, None) => (Phase::None, String::new(), "no worker running".to_owned()),
        (n, _) => (
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
    Ok(View {
        phase,
        message,
        snapshot: Some(Arc::new(Snapshot {
            samples: samples.clone(),
            hosts: hosts.into_iter().map(host_row).collect(),
            recent_items: items,
            ..snapshot(&summary, runs, frontier, outcome)
        })),
    })
}

fn snapshot(
    summary: &SharedSummary,
    runs: Vec<RunRow>,
    frontier: Vec<HostHead>,
    outcome: String,
) -> Snapshot {
    let count = |name: &str| summary.counters.get(name).copied().unwrap_or(0);
    let now_ms = snapshot::unix_ms();
    let errors = snapshot::errors(count);
    Snapshot {
        version: SNAPSHOT_VERSION,
        pid: 0,
        updated_at_ms: now_ms,
        run: runs.last().map_or(0, |r| r.id),
        run_started_at: runs.first().map_or(0, |r| r.started_at),
        ended_at: None,
        outcome,
        pages: Outcomes::from(PageTotals::of(count)),
        items_stored: summary.items,
        bytes: count("fetch/bytes"),
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
            dedup: summary.dedup.to_owned(),
            ..crate::store::Summary::default()
        },
        samples: Vec::new(),
        hosts_total: summary.hosts,
        hosts: Vec::new(),
        frontier,
        recent_errors: Vec::new(),
        recent_items: Vec::new(),
        runs,
    }
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

/// The workers' run records (JSON) as run rows, the last [`MAX_RUNS`].
fn run_rows(records: &[serde_json::Value]) -> Vec<RunRow> {
    let skip = records.len().saturating_sub(MAX_RUNS);
    records
        .iter()
        .enumerate()
        .skip(skip)
        .map(|(k, record)| {
            let count = |name: &str| record["counters"][name].as_u64().unwrap_or(0);
            RunRow {
                id: k as u64 + 1,
                started_at: record["started_at"].as_u64().unwrap_or(0),
                ended_at: record["ended_at"].as_u64(),
                outcome: record["outcome"].as_str().unwrap_or("").to_owned(),
                pages: Outcomes::from(PageTotals::of(count)),
                items: count("items/stored"),
            }
        })
        .collect()
}
