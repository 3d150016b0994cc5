//! What the crawl publishes for `legcrawl serve` ([`crate::status::snapshot`]):
//! per-host counts, the recent errors and items, the pages-over-time samples,
//! and the assembly of the snapshot from them, the state's counters and queues,
//! and the politeness slots.
//!
//! [`Watch::observe`] runs once per finished lease (a hash-map update and, for a
//! failure, a bounded ring push); everything else runs in [`Watch::snapshot`],
//! about once a second. Depends on the store's views, the engine's politeness
//! and totals.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use super::politeness::Politeness;
use crate::page::PageResult;
use crate::page::PageTotals;
use crate::status::snapshot::{
    self, ErrorRow, HEAD_HOSTS, HEAD_URLS, HostHead, HostRow, ItemRow, MAX_ERRORS, MAX_HOSTS,
    MAX_ITEMS, MAX_RUNS, Outcomes, RunRow, SNAPSHOT_VERSION, Snapshot, errors, unix_ms,
};
use crate::store::records::{RunRecord, unix_now};
use crate::store::{Each, Lease, State, StoreError};

/// One host's counts this run.
#[derive(Debug, Default)]
struct HostCounts {
    fetched: u64,
    errors: u64,
    robots: &'static str,
}

/// The crawl's side of the snapshot (see the module doc).
#[derive(Debug, Default)]
pub struct Watch {
    hosts: HashMap<u32, HostCounts>,
    errors: VecDeque<ErrorRow>,
    items: VecDeque<ItemRow>,
    /// The item sequence number after the last one read into `items`.
    next_item: u64,
    samples: Vec<[u64; 2]>,
    /// The runs before this one (read once).
    earlier_runs: Option<Vec<RunRow>>,
    /// robots.txt is obeyed in this crawl.
    robots_on: bool,
}

impl Watch {
    /// An empty watch; `robots_on` when the crawl obeys robots.txt.
    pub fn new(robots_on: bool) -> Watch {
        Watch {
            robots_on,
            ..Watch::default()
        }
    }

    /// Counts a finished lease for its host, and keeps it when it failed.
    pub fn observe(&mut self, lease: &Lease, result: &PageResult) {
        let host = self.hosts.entry(lease.host_id).or_default();
        if !result.requeued {
            host.fetched += 1;
        }
        if result.robots_unavailable {
            host.robots = "unavailable";
        } else if result.blocked.is_some() {
            host.robots = "disallows some";
        } else if self.robots_on && host.robots != "disallows some" {
            host.robots = "ok";
        }
        let reason = result.error_reason();
        if let Some(reason) = reason {
            host.errors += 1;
            if self.errors.len() == MAX_ERRORS {
                self.errors.pop_front();
            }
            self.errors.push_back(ErrorRow {
                at: unix_now(),
                url: lease.request.url.clone(),
                reason,
            });
        }
    }

    /// The snapshot of the crawl now.
    pub fn snapshot(
        &mut self,
        state: &State,
        politeness: Option<&Politeness>,
        summary: crate::store::Summary,
        now_ms: u64,
    ) -> Result<Snapshot, StoreError> {
        let count = |name: &str| state.run_counter(name);
        let run = state.run();
        let pages = Outcomes::from(PageTotals::of(count));
        snapshot::push_sample(&mut self.samples, [now_ms, pages.pages]);
        self.read_items(state)?;
        let (hosts, frontier) = self.hosts_and_heads(state, politeness)?;
        let mut runs = self.earlier_runs(state)?.to_vec();
        if let Some(run) = run {
            runs.push(run_row(run, None));
            if runs.len() > MAX_RUNS {
                runs.remove(0);
            }
        }
        let in_flight = state.in_flight() as u64;
        Ok(Snapshot {
            version: SNAPSHOT_VERSION,
            pid: std::process::id(),
            updated_at_ms: now_ms,
            run: run.map_or(0, |r| r.id),
            run_started_at: run.map_or(0, |r| r.started_at),
            ended_at: None,
            outcome: "running".to_owned(),
            pages,
            items_stored: count("items/stored"),
            bytes: count("fetch/bytes"),
            errors: errors(count),
            queued: state.frontier_len().saturating_sub(in_flight),
            in_flight,
            hosts_total: summary.hosts,
            summary,
            samples: self.samples.clone(),
            hosts,
            frontier,
            recent_errors: self.errors.iter().cloned().collect(),
            recent_items: self.items.iter().cloned().collect(),
            runs,
        })
    }

    /// Reads the items stored since the last snapshot (the newest
    /// [`MAX_ITEMS`] of them at most).
    fn read_items(&mut self, state: &State) -> Result<(), StoreError> {
        let end = state.items_len();
        if end <= self.next_item {
            return Ok(());
        }
        let from = self.next_item.max(end.saturating_sub(MAX_ITEMS as u64));
        let mut next = self.next_item;
        let items = &mut self.items;
        state.deliver(&mut Each::new(from, |seq, text| {
            if items.len() == MAX_ITEMS {
                items.pop_front();
            }
            items.push_back(snapshot::item_row(seq, text));
            next = seq + 1;
            Ok::<_, StoreError>(true)
        }))?;
        self.next_item = next;
        Ok(())
    }

    /// The host table (the busiest [`MAX_HOSTS`]) and the queue heads of the
    /// busiest [`HEAD_HOSTS`].
    fn hosts_and_heads(
        &self,
        state: &State,
        politeness: Option<&Politeness>,
    ) -> Result<(Vec<HostRow>, Vec<HostHead>), StoreError> {
        let mut queues = state.host_queues()?;
        let busy = |q: &crate::store::queues::HostQueueView| {
            let fetched = self.hosts.get(&q.host_id).map_or(0, |h| h.fetched);
            (q.queued + q.leased, fetched)
        };
        queues.sort_by_key(|q| std::cmp::Reverse(busy(q)));
        queues.truncate(MAX_HOSTS);
        let now = Instant::now();
        let mut heads = Vec::new();
        let mut rows = Vec::with_capacity(queues.len());
        for queue in queues {
            let counts = self.hosts.get(&queue.host_id);
            let slot = politeness.and_then(|p| p.view(queue.host_id, now));
            if heads.len() < HEAD_HOSTS && queue.queued + queue.leased > 0 {
                heads.push(HostHead {
                    host: queue.host.clone(),
                    urls: state.queue_head(queue.host_id, HEAD_URLS)?,
                });
            }
            let robots = match counts.map(|c| c.robots) {
                _ if !self.robots_on => "off",
                Some(robots) if !robots.is_empty() => robots,
                _ => "-",
            };
            rows.push(HostRow {
                host: queue.host,
                queued: queue.queued,
                more: queue.more,
                in_flight: queue.leased,
                fetched: Some(counts.map_or(0, |c| c.fetched)),
                errors: Some(counts.map_or(0, |c| c.errors)),
                delay_ms: slot.map_or(0, |s| s.delay.as_millis() as u64),
                wait_ms: slot.map_or(0, |s| s.wait.as_millis() as u64),
                robots: robots.to_owned(),
                parked: slot.is_some_and(|s| s.parked),
            });
        }
        Ok((rows, heads))
    }

    /// The runs before the current one, read from the state once.
    fn earlier_runs(&mut self, state: &State) -> Result<&[RunRow], StoreError> {
        if self.earlier_runs.is_none() {
            let current = state.run().map(|r| r.id);
            let all = state.runs()?;
            let earlier: Vec<&RunRecord> = all.iter().filter(|r| Some(r.id) != current).collect();
            let skip = earlier.len().saturating_sub(MAX_RUNS - 1);
            self.earlier_runs = Some(earlier[skip..].iter().map(|r| run_row(r, None)).collect());
        }
        Ok(self.earlier_runs.as_deref().unwrap_or_default())
    }
}

/// The final snapshot of a run that ended: `last` (this process's last
/// snapshot, if it wrote one) brought up to the ended run's record.
pub fn final_snapshot(
    state: &State,
    last: Option<Snapshot>,
    outcome: &str,
) -> Result<Snapshot, StoreError> {
    let summary = state.summary()?;
    let mut snapshot = match last {
        Some(last) if last.pid == std::process::id() => last,
        _ => Watch::new(false).snapshot(state, None, summary.clone(), unix_ms())?,
    };
    let runs = state.runs()?;
    let Some(run) = runs.last() else {
        return Ok(snapshot);
    };
    let count = |name: &str| run.counters.get(name).copied().unwrap_or(0);
    let now = unix_ms();
    snapshot.updated_at_ms = now;
    snapshot.run = run.id;
    snapshot.run_started_at = run.started_at;
    snapshot.ended_at = Some(run.ended_at.unwrap_or(now / 1000));
    snapshot.outcome = outcome.to_owned();
    snapshot.pages = Outcomes::from(PageTotals::of(count));
    snapshot.items_stored = count("items/stored");
    snapshot.bytes = count("fetch/bytes");
    snapshot.errors = errors(count);
    snapshot.queued = summary.frontier;
    snapshot.in_flight = 0;
    snapshot.hosts_total = summary.hosts;
    snapshot.summary = summary;
    snapshot::push_sample(&mut snapshot.samples, [now, snapshot.pages.pages]);
    for host in &mut snapshot.hosts {
        host.queued += host.in_flight;
        host.in_flight = 0;
        host.wait_ms = 0;
    }
    let row = run_row(run, Some(outcome));
    match snapshot.runs.last_mut() {
        Some(last) if last.id == run.id => *last = row,
        _ => snapshot.runs.push(row),
    }
    if snapshot.runs.len() > MAX_RUNS {
        snapshot.runs.remove(0);
    }
    Ok(snapshot)
}

/// A run's totals as the snapshot writes them (serve's shared source too).
impl From<PageTotals> for Outcomes {
    fn from(t: PageTotals) -> Outcomes {
        Outcomes {
            pages: t.pages,
            new: t.new,
            changed: t.changed,
            unchanged: t.unchanged,
            gone: t.gone,
            failed: t.failed,
            blocked: t.blocked,
        }
    }
}

fn run_row(run: &RunRecord, outcome: Option<&str>) -> RunRow {
    let count = |name: &str| run.counters.get(name).copied().unwrap_or(0);
    RunRow {
        id: run.id,
        started_at: run.started_at,
        ended_at: run.ended_at,
        outcome: outcome.unwrap_or(run.outcome.as_str()).to_owned(),
        pages: Outcomes::from(PageTotals::of(count)),
        items: count("items/stored"),
    }
}
