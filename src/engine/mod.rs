//! The crawl: one loop (`crawl`) over a `frontier::Frontier`, with two
//! frontiers below it — the embedded state (`embedded`, sled) and a shared
//! crawl's Redis ([`worker`], over [`crate::shared`]) — and the same page
//! processing ([`crate::page`]) for both. Used by `cli` (crawl), benches and
//! tests.
//!
//! This module starts an embedded run ([`run_job`]): it begins the run's
//! record, builds the frontier, runs the loop, and ends the record however
//! the loop ended. Shutdown is injected (as in mini-redis): when the
//! `shutdown` future resolves the loop stops leasing, gives in-flight fetches
//! `shutdown_grace` to finish, completes what finished, and ends the run as
//! interrupted; unfinished leases stay queued. A shared worker starts through
//! [`worker::join`].

pub(crate) mod active;
mod crawl;
pub(crate) mod embedded;
pub(crate) mod frontier;
pub mod sink;
pub mod worker;

pub use embedded::politeness;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::CrawlConfig;
use crate::fetch::{FetchError, Fetcher};
use crate::legs::Leg;
use crate::page::PageTotals;
use crate::revisit::{RuleError, Schedule};
use crate::store::records::RunOutcome;
use crate::store::{OpenOptions, State, StoreError};
use crate::warc::WarcError;
use crawl::{Crawl, Limits};
use embedded::Embedded;
use sink::SinkError;

/// Errors that stop a crawl.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The state failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The output file failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// A WARC file failed.
    #[error(transparent)]
    Warc(#[from] WarcError),
    /// The fetcher could not be built.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// A configured leg refused its configuration.
    #[error(transparent)]
    Leg(#[from] crate::legs::LegError),
    /// A revisit rule is not a valid regex.
    #[error(transparent)]
    Revisit(#[from] RuleError),
    /// `--render` without a browser on the machine.
    #[error(transparent)]
    Render(#[from] crate::render::RenderError),
    /// No seed was given and the state has none stored.
    #[error("no seeds: give URLs to crawl (the state in {dir} has none stored)")]
    NoSeeds {
        /// The state directory.
        dir: String,
    },
    /// No seed was given and there is no state to continue: nothing is created
    /// (a mistyped `--data` must not leave a new state behind).
    #[error(
        "{dir}: no crawl state here to continue, and no URLs to start one (a mistyped --data?)"
    )]
    NothingToCrawl {
        /// The state directory asked for.
        dir: String,
    },
    /// The task that flushes the state to disk panicked or was cancelled.
    #[error("the state's flush did not finish: {reason}")]
    FlushTask {
        /// What the runtime reported.
        reason: String,
    },
    /// The shared crawl's Redis server failed (`--shared`).
    #[error(transparent)]
    Shared(#[from] crate::shared::SharedError),
    /// A seed is not an absolute http(s) URL.
    #[error("seed {url:?} is not an absolute http(s) URL")]
    BadSeed {
        /// The seed as given.
        url: String,
    },
    /// `legcrawl reparse` of a crawl that kept no responses.
    #[error(
        "{dir}: this crawl wrote no WARC files, so no response is kept to run the legs over; crawl with --warc DIR (or `[output] warc` in the crawl file) to keep them from now on"
    )]
    NothingStored {
        /// The state directory.
        dir: String,
    },
}

/// What a run did, for the summary printed at its end.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Run number.
    pub run: u64,
    /// The run's pages by outcome (they sum to `totals.pages`).
    pub totals: PageTotals,
    /// Items stored in this run.
    pub items: u64,
    /// Of `items`, the deletion records ([`crate::page::feed`]).
    pub deleted: u64,
    /// Requests queued in this run.
    pub enqueued: u64,
    /// Duplicates dropped in this run.
    pub filtered: u64,
    /// Requests left in the frontier.
    pub frontier: u64,
    /// Hosts given up for this run because no connection could be made to them
    /// (their requests stay queued for the next run).
    pub unreachable: u64,
    /// Body bytes received in this run.
    pub bytes: u64,
    /// True when this run started a new cycle (seeds and due pages queued
    /// again); false when it resumed the last one.
    pub new_cycle: bool,
    /// True when the run made requests and none was answered: every one
    /// failed on the network (refused, DNS, TLS, timeout). `legcrawl crawl`
    /// exits 4 then, as wget does.
    pub network_failed: bool,
    /// True when no page answered well (2xx or 304) and some request was
    /// answered with an error status ([`crate::page::error_answers_only`]);
    /// for a shared worker, when no worker's page answered well during its
    /// run either. `legcrawl crawl` exits 8 then, as wget does.
    pub errors_only: bool,
    /// For a shared worker that saw Redis go back during its run: the
    /// committed completions of its own it saw lost and the last fall of its
    /// commit sequence (from, to). Their pages were fetched
    /// again; the run is not a plain success (`legcrawl crawl` exits 3).
    /// `None` for an embedded run and a shared run that saw no loss.
    pub lost: Option<(u64, (u64, u64))>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Opens the state in `config.data_dir`, adds the seeds, and crawls until the
/// frontier is drained, a limit is reached, or `shutdown` resolves. The run's
/// job is `config` itself, stored as it is (with the bundled legs' place left
/// empty: `legs` are the caller's); `legcrawl crawl` resolves the job first
/// (see [`crate::job`]) and calls [`open_state`] and [`run_job`].
pub async fn run(
    config: &CrawlConfig,
    legs: Arc<dyn Leg>,
    shutdown: impl Future<Output = ()>,
) -> Result<RunReport, EngineError> {
    let state = open_state(config)?;
    let facts = job_facts(&state, &config.seeds)?;
    let job = crate::crawlfile::job_text(config, None, &facts.seeds);
    run_job(state, config, legs, &job, shutdown).await
}

/// Opens (or creates) the state a crawl with `config` runs on, without
/// beginning a run: the seeds are checked, and a directory that holds nothing
/// is not created without seeds to start from.
pub fn open_state(config: &CrawlConfig) -> Result<State, EngineError> {
    check_seeds(&config.seeds)?;
    let options = OpenOptions {
        create: true,
        dedup: config.dedup,
        bloom_bits: config.bloom_bits,
        bloom_hashes: config.bloom_hashes,
        begin_run: false,
        checkpoint_every: Some(config.checkpoint_every),
        cache_bytes: Some(config.cache_bytes),
    };
    // A directory that holds anything else is for `State::open` to judge.
    if config.seeds.is_empty() && crate::store::holds_nothing(&config.data_dir) {
        return Err(EngineError::NothingToCrawl {
            dir: config.data_dir.display().to_string(),
        });
    }
    Ok(State::open(&config.data_dir, &options)?)
}

/// What a job of the open `state` takes from it: the seeds it will hold once
/// `seeds` (this run's) are added, and its dedup settings.
pub fn job_facts(state: &State, seeds: &[String]) -> Result<crate::job::StateFacts, EngineError> {
    let mut all: std::collections::BTreeSet<String> = state.seeds()?.into_iter().collect();
    all.extend(
        seeds
            .iter()
            .map(|seed| crate::canon::strip_credentials(seed).into_owned()),
    );
    let (bits, hashes) = state.bloom_shape();
    Ok(crate::job::StateFacts {
        seeds: all.into_iter().collect(),
        dedup: Some((state.dedup(), bits, hashes)),
    })
}

/// Starts the fetcher's cookie jar from the one the state keeps (see
/// [`crate::fetch::cookies`]); an unreadable jar is an error, never dropped.
fn load_cookies(state: &State, fetcher: &Fetcher) -> Result<(), EngineError> {
    if let Some(jar) = fetcher.cookie_jar()
        && let Some(saved) = state.cookies()?
    {
        jar.load(&saved).map_err(|reason| StoreError::Corrupt {
            path: state.dir().to_owned(),
            what: "cookie jar (K)".into(),
            reason,
        })?;
    }
    Ok(())
}

/// Crawls on `state` (from [`open_state`]) under the job `job` (its text,
/// whose settings `config` holds): begins the run, recording the job as a new
/// version when it changed, adds the seeds, and crawls until the frontier is
/// drained, a limit is reached, or `shutdown` resolves.
pub async fn run_job(
    mut state: State,
    config: &CrawlConfig,
    legs: Arc<dyn Leg>,
    job: &str,
    shutdown: impl Future<Output = ()>,
) -> Result<RunReport, EngineError> {
    // Bad configuration is refused before a run is recorded.
    let fetcher = Fetcher::new(crate::fetch::FetchSettings::from_config(config))?;
    load_cookies(&state, &fetcher)?;
    let schedule = Schedule::new(config)?;
    let started = Instant::now();
    // The previous run's last activity, as its record tells (to the second,
    // rounded up): the delay holds across a resume.
    let previous_end = state.runs()?.last().map(|run| {
        let secs = run.ended_at.unwrap_or(0).max(run.updated_at) + 1;
        std::time::UNIX_EPOCH + Duration::from_secs(secs)
    });
    state.begin_run(Some(job))?;
    // A run that cannot start (no seeds, an unwritable output file) still ends
    // its run record, as failed.
    let result = match Embedded::new(config, &mut state, fetcher, legs, schedule, previous_end) {
        Ok(frontier) => Crawl::new(frontier, Limits::of(config)).run(shutdown).await,
        Err(error) => Err(error),
    };
    let outcome = end_run(&mut state, result)?;
    Ok(report(&state, outcome, started.elapsed()))
}

/// Ends the run's record however its loop ended (`result`) and publishes
/// its end; a run that failed reports its own error, not a failure to
/// record it.
fn end_run(
    state: &mut State,
    result: Result<RunOutcome, EngineError>,
) -> Result<RunOutcome, EngineError> {
    let outcome = match &result {
        Ok(outcome) => *outcome,
        Err(_) => RunOutcome::Failed,
    };
    if let Some(kib) = peak_rss_kib() {
        state.note_run_peak(crate::store::PEAK_RSS, kib);
    }
    if let Err(error) = state.end_run(outcome) {
        match &result {
            Ok(_) => return Err(error.into()),
            // A write (of the state, the WARC or the output, which the
            // state's flush waits for) failed the run and the state writes
            // nothing more since: the run's error line says it (a full disk
            // once, not twice).
            Err(
                EngineError::Store(_)
                | EngineError::Warc(_)
                | EngineError::Sink(_)
                | EngineError::FlushTask { .. },
            ) if matches!(error, StoreError::Poisoned { .. }) => {
                tracing::debug!(%error, "the failed run could not be recorded as failed");
            }
            Err(_) => tracing::warn!(%error, "the failed run could not be recorded as failed"),
        }
    }
    embedded::progress::publish_end(state, outcome);
    result
}

/// What a `legcrawl reparse` run did besides a run's report.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reparsed {
    /// Pages whose stored response the legs ran over.
    pub pages: u64,
    /// Pages older legs made whose stored response could not be read back
    /// (left as they were).
    pub unreadable: u64,
    /// Pages older legs made with no stored response (fetched before
    /// `--warc`): the legs run when they change.
    pub not_stored: u64,
}

/// `legcrawl reparse`: runs `legs` (those of `job`, stored as a crawl run
/// stores its job) over the stored responses of the pages that older legs
/// made, as a run of its own: their new items and the deletion records of
/// the items the legs no longer make go to the change feed and `--output`,
/// the links they find are queued for the next crawl run. Nothing is
/// fetched. A run stopped midway (`shutdown`, kill -9) is resumed by the next
/// reparse (see `embedded::reparse`). A crawl that wrote no WARC files is
/// refused ([`EngineError::NothingStored`]).
pub async fn run_reparse(
    mut state: State,
    config: &CrawlConfig,
    legs: Arc<dyn Leg>,
    job: &str,
    shutdown: impl Future<Output = ()>,
) -> Result<(RunReport, Reparsed), EngineError> {
    let files = state.warc_files()?;
    if files.is_empty() {
        return Err(EngineError::NothingStored {
            dir: state.dir().display().to_string(),
        });
    }
    let started = Instant::now();
    state.begin_run(Some(job))?;
    let since = legs_since(&state)?;
    let stored = crate::page::reparse::StoredResponses {
        files: files.into_iter().collect(),
        max_body: config.max_body_bytes,
    };
    let result = match Embedded::reparse(config, &mut state, legs, stored, since) {
        Ok(frontier) => Crawl::new(frontier, Limits::of(config)).run(shutdown).await,
        Err(error) => Err(error),
    };
    let outcome = end_run(&mut state, result)?;
    let reparsed = Reparsed {
        pages: state.run_counter("pages/reparsed"),
        unreadable: state.run_counter("reparse/unreadable"),
        not_stored: state.run_counter("reparse/not_stored"),
    };
    Ok((report(&state, outcome, started.elapsed()), reparsed))
}

/// The first job version whose legs are the newest version's (the legs in
/// force): a page whose items an older version's legs made has not been seen
/// by them ([`crate::job::legs_key`]). 0 when no job is stored.
pub fn legs_since(state: &State) -> Result<u32, EngineError> {
    let Some(latest) = state.latest_job()? else {
        return Ok(0);
    };
    let key = crate::job::legs_key(&latest.text);
    let mut since = latest.version;
    while since > 1 {
        match state.job(since - 1)? {
            Some(before) if crate::job::legs_key(&before.text) == key => since -= 1,
            _ => break,
        }
    }
    Ok(u32::try_from(since).unwrap_or(u32::MAX))
}

/// The stored pages whose items legs older than job version `since` made:
/// `(with a stored response, without)`; `legcrawl reparse` runs the legs in
/// force over the first.
pub fn unseen_by_legs(state: &State, since: u32) -> Result<(u64, u64), EngineError> {
    embedded::reparse::count_stale(state, since)
}

/// True when a run made requests and none was answered, by its counters
/// (`count`): no page fetched and no robots.txt answered, and some request
/// failed on the network. Both loops' reports say it the same way.
pub fn network_failed(count: impl Fn(&str) -> u64) -> bool {
    count("pages/fetched") == 0
        && count("robots/answered") == 0
        && count("fetch/network_error") + count("robots/no_answer") > 0
}

/// Every seed must be an absolute http(s) URL.
pub fn check_seeds(seeds: &[String]) -> Result<(), EngineError> {
    for seed in seeds {
        let ok = url::Url::parse(seed)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
        if !ok {
            return Err(EngineError::BadSeed { url: seed.clone() });
        }
    }
    Ok(())
}

/// This process's peak resident memory so far, in KiB (`VmHWM` of
/// /proc/self/status); `None` where there is no such file.
pub(crate) fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn report(state: &State, outcome: RunOutcome, elapsed: Duration) -> RunReport {
    RunReport {
        outcome,
        run: state
            .runs()
            .ok()
            .and_then(|r| r.last().map(|r| r.id))
            .unwrap_or(0),
        totals: PageTotals::of(|name| state.run_counter(name)),
        items: state.run_counter("items/stored"),
        deleted: state.run_counter("items/deleted"),
        enqueued: state.run_counter("frontier/enqueued"),
        filtered: state.run_counter("dupefilter/filtered"),
        frontier: state.frontier_len(),
        unreachable: state.run_counter("hosts/unreachable"),
        bytes: state.run_counter("fetch/bytes"),
        new_cycle: state.run_counter("cycle/started") > 0,
        network_failed: network_failed(|name| state.run_counter(name)),
        errors_only: crate::page::error_answers_only(|name| state.run_counter(name)),
        lost: None,
        elapsed,
    }
}

/// Logs what following the job's revisit policy and scope moved: `moved`
/// pages, `left` of them because they left the scope. Both frontiers say it.
pub(crate) fn say_moved(moved: u64, left: u64) {
    if left > 0 {
        tracing::warn!(
            pages = left,
            "stored pages are outside the job's scope now: they are not fetched again, and this run writes deletion records for their items"
        );
    }
    if moved > left {
        tracing::info!(
            pages = moved - left,
            "the revisit policy or scope changed: due times follow the new one"
        );
    }
}
