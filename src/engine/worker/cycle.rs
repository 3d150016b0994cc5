//! A new cycle of a shared crawl: when a worker starts on a drained crawl,
//! its seeds and every page due by now are queued again, by exactly one of
//! the workers starting together. Depends on [`crate::shared::client`] (the
//! cycle script and the due index).

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
        match shared.queue_cycle(cycle, drained, &seeds).await? {
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
            match shared.queue_cycle(cycle, false, &requests).await? {
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
