//! A new cycle of a shared crawl: when a worker starts on a drained crawl,
//! its seeds and every page due by now are queued again, by exactly one of
//! the workers starting together. Depends on [`crate::shared::client`] (the
//! cycle script, the due index and the page records) and [`crate::store`]
//! (a revisit budget's choice).

use super::new_request;
use crate::config::CrawlConfig;
use crate::engine::EngineError;
use crate::page::record;
use crate::page::scope::Scope;
use crate::request::Request;
use crate::revisit::Schedule;
use crate::shared::Shared;
use crate::shared::client::{CycleKind, CycleQueued, Move, NewRequest};
use crate::store::records::unix_now;
use crate::store::{TopWorth, seed_request};
use std::collections::HashSet;

/// Due pages are read in chunks of this many (and queued
/// [`crate::shared::client::SCRIPT_CHUNK`] per call).
const CYCLE_CHUNK: usize = 1000;

/// A drained crawl starts a new cycle: its seeds (and `given`) and every page
/// due by now are queued again — by exactly one of the workers starting
/// together (the cycle script's guard). The seeds go first, in chunks; a
/// worker killed between them leaves the cycle `seeding`, and the next worker
/// that starts sends every seed again (the cycle script skips those already
/// queued) before it says the cycle is seeded. A worker joining a running
/// cycle then queues what of it is still due (a worker that started it may
/// have died between chunks); the due index makes that idempotent. A new
/// cycle first makes the due index follow the revisit policy in force.
pub(super) async fn begin_cycle(
    shared: &Shared,
    config: &CrawlConfig,
    schedule: &Schedule,
    scope: &Scope,
    given: &[NewRequest],
) -> Result<CycleStart, EngineError> {
    let state = shared.state().await?;
    let mut start = CycleStart::default();
    if !state.exists {
        return Ok(start);
    }
    let drained = state.frontier == 0 && state.live == 0;
    if drained {
        start.rescheduled = follow_revisit_policy(shared, schedule, scope).await?;
    }
    let mut cycle = state.cycle;
    if drained || state.seeding {
        let mut urls: Vec<String> = shared.seeds().await?;
        urls.extend(given.iter().map(|g| g.request.url.clone()));
        urls.sort();
        urls.dedup();
        let seeds: Vec<(CycleKind, NewRequest)> = urls
            .into_iter()
            .map(|url| {
                let mut request = Request::get(url);
                request.dont_filter = true;
                (CycleKind::Seed, new_request(config, request))
            })
            .collect();
        match shared
            .queue_cycle(cycle, drained, config.revisit_budget, &seeds)
            .await?
        {
            Some(n) => start.queued = start.queued.and(n),
            // Another worker started the cycle, or it moved on: join it.
            None => return Ok(start),
        }
        if drained {
            start.started = true;
            cycle += 1;
            tracing::info!(cycle, "new cycle: seeds and due pages queued again");
        }
        shared.seeded(cycle).await?;
    }
    let until = if drained {
        unix_now()
    } else {
        state.cycle_started
    };
    if let Some(budget) = config.revisit_budget {
        // Ranked at the cycle's start as recorded, the same for every worker.
        let started = if drained {
            shared.state().await?.cycle_started
        } else {
            state.cycle_started
        };
        let cycle = Budgeted {
            cycle,
            budget,
            started,
            until,
        };
        start.queued = start
            .queued
            .and(queue_budgeted(shared, config, schedule, &cycle).await?);
        if start.queued.queued > 0 {
            tracing::info!(queued = start.queued.queued, "queued for this cycle");
        }
        return Ok(start);
    }
    // The seeds left the due index as they were queued. Whether the due index
    // is exhausted is judged on the chunk as read.
    loop {
        let read = shared.due(until, CYCLE_CHUNK).await?;
        let done = read.len() < CYCLE_CHUNK;
        let mut requests = Vec::new();
        let mut stale = Vec::new();
        for (fp, record) in read.iter().zip(shared.page_records(&read).await?) {
            match record {
                // A gone page too, when its due time has come (`Schedule::gone_due`).
                Some(record) => {
                    requests.push((
                        CycleKind::Due,
                        new_request(config, record.revisit_request()),
                    ));
                }
                // A record that went away.
                None => stale.push(*fp),
            }
        }
        shared.forget_due(&stale).await?;
        // Every entry read leaves the due index (queued, or forgotten as
        // stale, or already taken by another worker), so each pass makes
        // progress and the loop ends.
        if !requests.is_empty() {
            match shared.queue_cycle(cycle, false, None, &requests).await? {
                Some(n) => start.queued = start.queued.and(n),
                // The cycle moved on: nothing of this one is left to queue.
                None => break,
            }
        }
        if done {
            break;
        }
    }
    if start.queued.queued > 0 {
        tracing::info!(queued = start.queued.queued, "queued for this cycle");
    }
    Ok(start)
}

/// A cycle under a revisit budget.
struct Budgeted {
    cycle: u64,
    budget: u64,
    /// When the cycle started: pages are ranked at that time.
    started: u64,
    /// Pages outside the budget due by then are queued.
    until: u64,
}

/// Queues a cycle's pages under a revisit budget (see
/// [`crate::store::Budget`]): one pass over the page records finds the pages
/// outside the budget that are due, and the `budget` pages it governs worth
/// most at the cycle's start that were fetched before it. These are sent
/// worth most first; the cycle script queues them while the cycle's budget
/// lasts, so a worker that joins (or starts again after a kill) and sends the
/// same choice queues only what of it is left.
async fn queue_budgeted(
    shared: &Shared,
    config: &CrawlConfig,
    schedule: &Schedule,
    cycle: &Budgeted,
) -> Result<CycleQueued, EngineError> {
    let seeds: HashSet<[u8; 20]> = shared
        .seeds()
        .await?
        .into_iter()
        .map(|url| new_request(config, seed_request(url)).fingerprint)
        .collect();
    let mut read = HashSet::new();
    let mut best = TopWorth::new(cycle.budget);
    let mut due = Vec::new();
    let mut cursor = 0;
    // Bounded: the cursor comes back to 0 after one pass over the records.
    loop {
        let (next, pages) = shared.scan_pages(cursor).await?;
        for (field, _, record) in pages {
            let Ok(fp) = <[u8; 20]>::try_from(field.as_slice()) else {
                continue;
            };
            // A scan may return a record twice; a seed keeps its place.
            if seeds.contains(&fp) || !read.insert(fp) {
                continue;
            }
            // Not in the due index: never again, or queued.
            let Some(at) = record.next_due else {
                continue;
            };
            match schedule.worth(&record, cycle.started) {
                // Worth nothing, or fetched in this cycle: not chosen.
                Some(worth) if worth > 0.0 && record.last_fetched < cycle.started => {
                    best.offer(worth, fp, record.revisit_request());
                }
                Some(_) => {}
                None if at <= cycle.until => {
                    due.push((
                        CycleKind::Due,
                        new_request(config, record.revisit_request()),
                    ));
                }
                None => {}
            }
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let chosen = best
        .into_best()
        .into_iter()
        .map(|(_, request)| (CycleKind::Budgeted, new_request(config, request)));
    due.extend(chosen);
    Ok(shared
        .queue_cycle(cycle.cycle, false, None, &due)
        .await?
        .unwrap_or_default())
}

/// What [`begin_cycle`] did.
#[derive(Debug, Default)]
pub(super) struct CycleStart {
    /// This worker started a new cycle.
    pub started: bool,
    /// What it queued for the cycle.
    pub queued: CycleQueued,
    /// Pages whose due time it moved to follow a new revisit policy.
    pub rescheduled: u64,
}

/// When the revisit policy in force is not the one the stored due times
/// follow, every page's due time is worked out again under it (a page that
/// is queued now is left alone), as the embedded state does; the policy is
/// noted once every record was visited, so a worker killed midway leaves the
/// rest to the next. Returns the pages moved.
async fn follow_revisit_policy(
    shared: &Shared,
    schedule: &Schedule,
    scope: &Scope,
) -> Result<u64, EngineError> {
    let policy = record::due_policy(schedule, scope);
    if shared.revisit_policy().await?.as_deref() == Some(policy.as_str()) {
        return Ok(0);
    }
    let (mut cursor, mut moved, mut left) = (0, 0, 0);
    let now = unix_now();
    // Bounded: the cursor comes back to 0 after one pass over the records.
    loop {
        let (next, pages) = shared.scan_pages(cursor).await?;
        let moves: Vec<Move> = pages
            .into_iter()
            .filter_map(|(fingerprint, read, mut record)| {
                let (due, leaves) = record::due(schedule, scope, &record, now);
                left += u64::from(leaves);
                (due != record.next_due).then(|| {
                    let was_due = record.next_due.is_some();
                    record.next_due = due;
                    Move {
                        fingerprint,
                        read,
                        was_due,
                        record,
                    }
                })
            })
            .collect();
        moved += shared.reschedule(&moves).await?;
        if next == 0 {
            break;
        }
        cursor = next;
    }
    shared.set_revisit_policy(&policy).await?;
    crate::engine::say_moved(moved, left);
    Ok(moved)
}
