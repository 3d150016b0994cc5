//! A new cycle of a shared crawl: when a worker starts on a drained crawl,
//! its seeds and every page due by now are queued again, by exactly one of
//! the workers starting together. Depends on [`super::client`] (the cycle
//! script and the due index).

use super::client::{CycleKind, NewRequest, Shared};
use super::worker::new_request;
use crate::config::CrawlConfig;
use crate::engine::EngineError;
use crate::request::Request;
use crate::store::records::unix_now;

/// Due pages are queued in calls of this many.
const CYCLE_CHUNK: usize = 1000;

/// A drained crawl starts a new cycle: its seeds (and `given`) and every page
/// due by now are queued again — by exactly one of the workers starting
/// together (the cycle script's guard). A worker joining a running cycle
/// queues what of it is still due (a worker that started it may have died
/// between chunks); the due index makes that idempotent.
pub(super) async fn begin_cycle(
    shared: &Shared,
    config: &CrawlConfig,
    given: &[NewRequest],
) -> Result<(), EngineError> {
    let state = shared.state().await?;
    if !state.exists {
        return Ok(());
    }
    let drained = state.frontier == 0 && state.live == 0;
    let mut requests = Vec::new();
    let until = if drained {
        let mut urls: Vec<String> = shared.seeds().await?;
        urls.extend(given.iter().map(|g| g.request.url.clone()));
        urls.sort();
        urls.dedup();
        for url in urls {
            let mut request = Request::get(url);
            request.dont_filter = true;
            requests.push((CycleKind::Seed, new_request(config, request)));
        }
        unix_now()
    } else {
        state.cycle_started
    };
    // The seeds are queued by the first call, which also takes them out of
    // the due index; until then, due entries of seeds are skipped here (the
    // seed request stands for them). Whether the due index is exhausted is
    // judged on the chunk as read, before that filter: a chunk of nothing but
    // seeds is not the end of it.
    let mut seeds: std::collections::HashSet<[u8; 20]> =
        requests.iter().map(|(_, r)| r.fingerprint).collect();
    let mut start = drained;
    let mut cycle = state.cycle;
    let mut queued = 0;
    loop {
        let read = shared.due(until, CYCLE_CHUNK).await?;
        let done = read.len() < CYCLE_CHUNK;
        let fps: Vec<[u8; 20]> = read.into_iter().filter(|fp| !seeds.contains(fp)).collect();
        let mut stale = Vec::new();
        for (fp, record) in fps.iter().zip(shared.page_records(&fps).await?) {
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
        if !requests.is_empty() || start {
            match shared.queue_cycle(cycle, start, &requests).await? {
                Some(n) => queued += n,
                // Another worker started the cycle, or it moved on: join it.
                None => break,
            }
            if start {
                tracing::info!(
                    cycle = cycle + 1,
                    "new cycle: seeds and due pages queued again"
                );
                cycle += 1;
                start = false;
                seeds.clear();
            }
            requests.clear();
        }
        if done {
            break;
        }
    }
    if queued > 0 {
        tracing::info!(queued, "queued for this cycle");
    }
    Ok(())
}
