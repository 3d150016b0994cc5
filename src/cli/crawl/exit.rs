//! Exit 8: a run in which no page answered well and some request was answered
//! with an error status ([`legcrawl::page::error_answers_only`]), decided the
//! same way for a state directory and a shared worker.
//!
//! The run's report says whether a page answered well; when none did, the
//! run's counters (its `status/4xx` and `status/5xx`) are read back through
//! the crawl's view ([`CrawlView::run`]), after the run. A shared worker's
//! exit 8 is the crawl's, as its exit 4 is: it also needs that no worker of
//! the crawl had a page answered well meanwhile (the crawl's counters, read
//! when the worker has joined and again at its end). When the counters cannot
//! be read, a page found gone (a 404 or 410 answer) still decides it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use legcrawl::engine::RunReport;
use legcrawl::page::{PageTotals, error_answers_only};
use legcrawl::shared::{Shared, SharedTarget};
use legcrawl::store::records::RunOutcome;
use legcrawl::view::CrawlView;

use crate::cli::stderr::say;

/// How long the reads of a shared crawl's counters may take (Redis away: the
/// exit status is then decided without them).
const REDIS_LIMIT: Duration = Duration::from_secs(5);

/// The counters of a crawl whose sum is its pages that answered well.
const ANSWERED_WELL: [&str; 4] = [
    "pages/new",
    "pages/changed",
    "pages/unchanged",
    "pages/not_modified",
];

/// True when `report` leaves exit 8 open: the run ended by itself (not
/// interrupted), did not fail on the network (exit 4 comes first), and no
/// page answered well.
fn open(report: &RunReport) -> bool {
    report.outcome != RunOutcome::Interrupted
        && !report.network_failed
        && report.totals.answered_well() == 0
}

/// Exit 8 for run `report` of the state in `data`.
pub(super) fn errors_only_in_dir(data: &Path, report: &RunReport) -> bool {
    if !open(report) {
        return false;
    }
    let counters = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|runtime| {
            let view = CrawlView::open_dir(data, false).map_err(|e| e.to_string())?;
            runtime
                .block_on(view.run(report.run))
                .map_err(|e| e.to_string())
        });
    decide(report, counters.map(|run| run.map(|r| r.counters)), |e| e)
}

/// The crawl's pages that answered well so far, summed over its workers
/// (`None` when Redis could not say within [`REDIS_LIMIT`]): read when a
/// worker has joined, before it fetches anything.
pub(super) async fn crawl_answered_well(target: &SharedTarget) -> Option<u64> {
    let read = async {
        let shared = Shared::inspect(target, 1).await.ok()?;
        answered_well(&shared).await
    };
    tokio::time::timeout(REDIS_LIMIT, read).await.ok().flatten()
}

/// Exit 8 for worker run `report` of the shared crawl at `target`, whose
/// pages that answered well were `before` when the worker joined.
pub(super) async fn errors_only_shared(
    target: &SharedTarget,
    report: &RunReport,
    before: Option<u64>,
) -> bool {
    if !open(report) {
        return false;
    }
    let read = async {
        let shared = Shared::inspect(target, 1)
            .await
            .map_err(|e| e.to_string())?;
        let now = answered_well(&shared).await;
        let run = CrawlView::of_shared(shared)
            .run(report.run)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((now, run))
    };
    let counters = match tokio::time::timeout(REDIS_LIMIT, read).await {
        Err(_) => Err(format!(
            "Redis at {} did not answer within {} s",
            target.shown(),
            REDIS_LIMIT.as_secs()
        )),
        Ok(Err(error)) => Err(error),
        // Another worker's page answered well during this run: the crawl's
        // run did not see error answers only.
        Ok(Ok((Some(now), _))) if before.is_some_and(|before| now > before) => return false,
        Ok(Ok((_, run))) => Ok(run.map(|r| r.counters)),
    };
    decide(report, counters, |e| target.scrub(&e))
}

/// The rule over the run's counters (`Ok(None)`: no such run recorded); when
/// they could not be read, a page found gone decides, after one line saying
/// so (`scrub`bed of secrets).
fn decide(
    report: &RunReport,
    counters: Result<Option<BTreeMap<String, u64>>, String>,
    scrub: impl Fn(String) -> String,
) -> bool {
    match counters {
        Ok(Some(counters)) => error_answers_only(|name| counters.get(name).copied().unwrap_or(0)),
        Ok(None) => report.totals.gone > 0,
        Err(error) => {
            say!(
                "legcrawl: could not read run {}'s counters to tell exit 8 from 0 (decided by the pages found gone): {}",
                report.run,
                scrub(error)
            );
            report.totals.gone > 0
        }
    }
}

/// The crawl's pages that answered well ([`ANSWERED_WELL`]); `None` when a
/// counter could not be read.
async fn answered_well(shared: &Shared) -> Option<u64> {
    let mut counters = BTreeMap::new();
    for name in ANSWERED_WELL {
        counters.insert(name, shared.crawl_counter(name).await.ok()?);
    }
    Some(PageTotals::of(|name| counters.get(name).copied().unwrap_or(0)).answered_well())
}
