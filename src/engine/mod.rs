//! The crawl loops: lease, fetch and process concurrently, complete.
//!
//! Two loops, one per frontier, over the same page processing
//! ([`crate::page`]): this module's `Crawl` over the embedded state
//! ([`State`]), and [`worker`] over a shared crawl's Redis
//! ([`crate::shared`]). Used by `cli` (crawl), benches and tests.
//!
//! The embedded loop is the state's only writer: it leases up to
//! `concurrency` requests, host by host as far as [`politeness::Politeness`]
//! allows, spawns a task per request (`page::task`), and completes
//! each result into the open group, which is sealed at
//! [`crate::store::GROUP_MAX_PAGES`]` / 2` pages or
//! [`crate::store::GROUP_MAX_AGE`], or at once when nothing else can be
//! leased, and made durable on the committer's thread (`flush`). A page with
//! more than [`crate::store::LINK_CHUNK`] links has them queued part by part,
//! a group each, ahead of its completion. New requests pass the scope and
//! then the seen set: dedup happens only here, never in legs. A host that
//! cannot be connected to, or whose robots.txt keeps failing, is parked for
//! the run with its requests left queued (`hosts`).
//!
//! Shutdown is injected (as in mini-redis): when the `shutdown` future
//! resolves the loop stops leasing, gives in-flight fetches `shutdown_grace`
//! to finish, commits what finished, and ends the run as interrupted;
//! unfinished leases stay queued.
//!
//! A run either resumes the cycle the last run left (it was interrupted,
//! killed, failed or stopped by a limit, and requests are queued) or starts a
//! new one: the stored seeds and every page due by [`crate::revisit`] are
//! queued again ([`State::start_cycle`]). A request with a page record is
//! fetched conditionally; its completion writes the next record in the same
//! group as the page's items.

mod archive;
mod flush;
mod hosts;
pub mod politeness;
mod progress;
pub(crate) mod revisits;
pub mod sink;
mod watch;
pub mod worker;

use crate::page::PageTotals;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::config::CrawlConfig;
use crate::fetch::{FetchError, Fetcher};
use crate::legs::Leg;
use crate::page::parts::{Part, Parts};
use crate::page::scope::Scope;
use crate::page::{PageResult, RetryPolicy, task};
use crate::revisit::{RuleError, Schedule};
use crate::robots::{RobotsCache, RobotsSettings};
use crate::store::records::{RunOutcome, unix_now};
use crate::store::{Committer, Completion, Ended, Lease, OpenOptions, State, StoreError};
use politeness::Politeness;
use sink::{OutputFile, SinkError};

use crate::warc::{WarcError, WarcSettings, WarcWriter};

/// What one `fill` pass found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fill {
    /// `concurrency` requests are in flight.
    Full,
    /// Some host has (or may have) requests but politeness holds them: until the
    /// given instant, or until a request of it finishes (`None`).
    Waiting(Option<Instant>),
    /// No host has an unleased, visible request (or a limit stops leasing).
    Empty,
}

impl Fill {
    fn waiting(self, at: Option<Instant>) -> Fill {
        match (self, at) {
            (Fill::Waiting(Some(a)), Some(b)) => Fill::Waiting(Some(a.min(b))),
            (Fill::Waiting(Some(a)), None) => Fill::Waiting(Some(a)),
            (_, at) => Fill::Waiting(at),
        }
    }
}

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
    let result = match Crawl::new(config, &mut state, fetcher, legs, schedule, previous_end) {
        Ok(crawl) => crawl.run(shutdown).await,
        Err(error) => Err(error),
    };
    let outcome = match &result {
        Ok(outcome) => *outcome,
        Err(_) => RunOutcome::Failed,
    };
    if let Some(kib) = peak_rss_kib() {
        state.note_run_peak(crate::store::PEAK_RSS, kib);
    }
    // A crawl that failed reports its own error, not a failure to record it.
    if let Err(error) = state.end_run(outcome) {
        if result.is_ok() {
            return Err(error.into());
        }
        tracing::warn!(%error, "the failed run could not be recorded as failed");
    }
    progress::publish_end(&state, outcome);
    result?;
    Ok(report(&state, outcome, started.elapsed()))
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
fn peak_rss_kib() -> Option<u64> {
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
        enqueued: state.run_counter("frontier/enqueued"),
        filtered: state.run_counter("dupefilter/filtered"),
        frontier: state.frontier_len(),
        unreachable: state.run_counter("hosts/unreachable"),
        bytes: state.run_counter("fetch/bytes"),
        new_cycle: state.run_counter("cycle/started") > 0,
        network_failed: network_failed(|name| state.run_counter(name)),
        elapsed,
    }
}

/// The loop's working set.
struct Crawl<'a> {
    config: &'a CrawlConfig,
    state: &'a mut State,
    fetcher: Fetcher,
    legs: Arc<dyn Leg>,
    scope: Scope,
    sink: Option<OutputFile>,
    /// The WARC files (`--warc`), written in step with group commit.
    warc: Option<WarcWriter>,
    tasks: JoinSet<()>,
    results: mpsc::UnboundedReceiver<(Lease, PageResult)>,
    results_tx: mpsc::UnboundedSender<(Lease, PageResult)>,
    /// Parts of pages' links, sent while their legs run (see `parts`).
    parts: mpsc::UnboundedReceiver<Part>,
    parts_tx: mpsc::UnboundedSender<Part>,
    /// Requests being fetched or processed right now (≤ concurrency). Leases
    /// completed into the open group are no longer counted here.
    fetching: usize,
    /// Leases started this run that have not come back put back in the
    /// frontier: the pages `--max-pages` counts (a retry, or a request of a
    /// host parked as unreachable, does not count twice).
    pages_this_run: u64,
    politeness: Politeness,
    retry: RetryPolicy,
    /// robots.txt answers per host (None with `obey_robots` off).
    robots: Option<RobotsCache>,
    /// Rotates which host `fill` serves first, so hosts take turns.
    turn: usize,
    progress: progress::Progress,
    schedule: Schedule,
    /// Reused by `fill` for the ready host ids.
    host_buf: Vec<u32>,
    /// `--max-duration`: no lease starts after this.
    deadline: Option<Instant>,
    /// The threads the state's flushes and checkpoints run on, off the loop
    /// (see [`flush`]).
    committer: Committer,
    /// Unix seconds when this run started (redirects to pages fetched since are
    /// not followed again).
    run_started: u64,
    /// Hosts whose last runs failed on the network (stored, see `hosts`): an
    /// answer from one of them clears its record.
    unreachable: std::collections::HashSet<String>,
}

impl<'a> Crawl<'a> {
    fn new(
        config: &'a CrawlConfig,
        state: &'a mut State,
        fetcher: Fetcher,
        legs: Arc<dyn Leg>,
        schedule: Schedule,
        previous_end: Option<std::time::SystemTime>,
    ) -> Result<Crawl<'a>, EngineError> {
        revisits::begin_cycle(state, config, &schedule)?;
        // Credentials in a seed are never stored or sent.
        let seeds: Vec<String> = config
            .seeds
            .iter()
            .map(|seed| crate::canon::strip_credentials(seed).into_owned())
            .collect();
        state.add_seeds(&seeds, &config.fingerprint_headers)?;
        let stored = state.seeds()?;
        if stored.is_empty() {
            return Err(EngineError::NoSeeds {
                dir: state.dir().display().to_string(),
            });
        }
        let scope = Scope::of_crawl(config, &stored, &seeds);
        let sink = match &config.output {
            Some(path) => Some(OutputFile::open(path, state)?),
            None => None,
        };
        let warc = match WarcSettings::of(config) {
            Some(settings) => Some(archive::open(settings, state)?),
            None => None,
        };
        let robots = if config.obey_robots {
            let cache = RobotsCache::new(fetcher.clone(), RobotsSettings::from_config(config));
            cache.preload(state.robots_records()?);
            Some(cache)
        } else {
            None
        };
        let (results_tx, results) = mpsc::unbounded_channel();
        let (parts_tx, parts) = mpsc::unbounded_channel();
        let progress = progress::Progress::new(state.dir(), config.obey_robots);
        let mut politeness = Politeness::new(config);
        if let Some(ended) = previous_end {
            politeness.after_previous_run(ended);
        }
        let unreachable = hosts::park_unreachable(state, &mut politeness)?;
        Ok(Crawl {
            config,
            state,
            fetcher,
            legs,
            scope,
            sink,
            warc,
            tasks: JoinSet::new(),
            results,
            results_tx,
            parts,
            parts_tx,
            fetching: 0,
            pages_this_run: 0,
            politeness,
            robots,
            retry: RetryPolicy::of(config),
            turn: 0,
            progress,
            schedule,
            host_buf: Vec::new(),
            deadline: config.max_duration.map(|d| Instant::now() + d),
            committer: Committer::new()?,
            run_started: unix_now(),
            unreachable,
        })
    }

    /// The loop; whatever ends it, a flush or checkpoint still running is
    /// waited for, so the state is left with nothing in flight.
    async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<RunOutcome, EngineError> {
        let result = self.run_loop(shutdown).await;
        let finished = self.finish_flush().await;
        if result.is_ok() {
            finished?;
        }
        let finished = self.finish_checkpoint().await;
        if result.is_ok() {
            finished?;
        }
        // Whatever is still open is committed by the end of the run.
        self.keep_cookies();
        let finished = self.archive_finish();
        if result.is_ok() {
            finished?;
        }
        self.progress.publish(self.state, &self.politeness);
        result
    }

    async fn run_loop(
        &mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<RunOutcome, EngineError> {
        tokio::pin!(shutdown);
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            let fill = self.fill()?;
            if fill == Fill::Empty {
                if self.fetching == 0 {
                    // Nothing leasable and nothing running: make everything
                    // durable; what it committed may reveal new requests.
                    let pages = self.commit_all().await?;
                    if self.limit_reached() {
                        return Ok(RunOutcome::Limit);
                    }
                    if pages == 0 {
                        // Requests left here are held by parked hosts.
                        return Ok(if self.state.frontier_len() > 0 {
                            RunOutcome::Idle
                        } else {
                            RunOutcome::Drained
                        });
                    }
                    continue;
                }
                // The open group's new requests become leasable once it is
                // durable: seal it now rather than when it is due.
                if !self.committer.flushing() {
                    self.seal()?;
                }
            }
            if let Fill::Waiting(Some(at)) = fill
                && self.config.until_idle
                && self.fetching == 0
                && at > Instant::now() + crate::config::IDLE_WAIT
            {
                // Committing may make requests of other hosts visible.
                if self.commit_all().await? == 0 {
                    return Ok(RunOutcome::Idle);
                }
                continue;
            }
            let far = Instant::now() + Duration::from_secs(3600);
            // While a flush runs, its end (not the group's age) is the next event.
            let group = if self.committer.flushing() {
                far
            } else {
                self.state.group_deadline().unwrap_or(far)
            };
            let mut wake = match fill {
                Fill::Waiting(Some(at)) => at.min(group),
                _ => group,
            };
            // Past the deadline nothing is leased; waking for it again would spin.
            if let Some(deadline) = self.deadline.filter(|d| *d > Instant::now()) {
                wake = wake.min(deadline);
            }
            tokio::select! {
                biased;
                () = &mut shutdown => return self.stop().await,
                ended = self.committer.ended() => match ended {
                    Ended::Flush(result) => {
                        self.flush_ended(result)?;
                    }
                    Ended::Checkpoint(result) => self.checkpoint_ended(result)?,
                },
                Some(part) = self.parts.recv() => self.queue_part_of_page(part).await?,
                Some((lease, result)) = self.results.recv() => self.complete(lease, result).await?,
                () = tokio::time::sleep_until(wake.into()) => {}
                _ = tick.tick() => self.progress.update(self.state, &self.politeness),
            }
            self.maybe_seal().await?;
        }
    }

    /// Leases and spawns until `concurrency` requests are in flight, host by host
    /// in turn, as far as each host's politeness allows.
    fn fill(&mut self) -> Result<Fill, EngineError> {
        let now = Instant::now();
        // The ids are copied (into a buffer kept across calls) because leasing
        // needs the state mutably; names are looked up again when needed.
        let mut hosts = std::mem::take(&mut self.host_buf);
        hosts.clear();
        hosts.extend(self.state.ready_hosts().map(|(id, _, _)| id));
        let fill = self.fill_hosts(&hosts, now);
        self.host_buf = hosts;
        fill
    }

    /// [`Crawl::fill`] over the given hosts, starting at the next one in turn.
    fn fill_hosts(&mut self, hosts: &[u32], now: Instant) -> Result<Fill, EngineError> {
        let mut fill = Fill::Empty;
        let turn = self.turn;
        self.turn = self.turn.wrapping_add(1);
        for k in 0..hosts.len() {
            let id = &hosts[(turn + k) % hosts.len()];
            if self.politeness.is_parked(*id) {
                continue;
            }
            loop {
                if self.fetching >= self.config.concurrency {
                    return Ok(Fill::Full);
                }
                if self.limit_reached() {
                    return Ok(Fill::Empty);
                }
                let name = self.state.host_name(*id).unwrap_or_default();
                match self.politeness.ready_at(*id, name, now) {
                    // At its in-flight limit: a finishing request wakes the loop.
                    None => {
                        fill = fill.waiting(None);
                        break;
                    }
                    Some(at) if at > now => {
                        fill = fill.waiting(Some(at));
                        break;
                    }
                    Some(_) => {}
                }
                let Some(lease) = self.state.lease_from(*id)? else {
                    break;
                };
                let name = self.state.host_name(*id).unwrap_or_default();
                self.politeness.started(*id, name, now);
                self.spawn(lease)?;
            }
        }
        Ok(fill)
    }

    fn spawn(&mut self, lease: Lease) -> Result<(), EngineError> {
        // Only a request that bypasses the seen set (seed, revisit, retry) can
        // have a page record: a filtered one is new by definition.
        let prior = if lease.request.dont_filter {
            self.state.page(&self.fingerprint(&lease.request))?
        } else {
            None
        };
        self.pages_this_run += 1;
        self.fetching += 1;
        let job = task::Job {
            fetcher: self.fetcher.clone(),
            legs: Arc::clone(&self.legs),
            retry: self.retry,
            robots: self.robots.clone(),
            prior,
            parts: Parts::new(0, self.parts_tx.clone()),
        };
        let tx = self.results_tx.clone();
        self.tasks.spawn(async move {
            // A panic while processing comes back as a failed page.
            let result = job.run(&lease.request).await;
            // The receiver is gone only when the loop has stopped; the lease
            // then stays queued, which is what a stop wants.
            let _ = tx.send((lease, result));
        });
        Ok(())
    }

    fn limit_reached(&self) -> bool {
        self.config
            .max_pages
            .is_some_and(|max| self.pages_this_run >= max)
            || self.deadline.is_some_and(|at| Instant::now() >= at)
    }

    /// Queues a part of a page's links that its task sent while its legs run,
    /// and answers with the counters of what was dropped.
    async fn queue_part_of_page(&mut self, part: Part) -> Result<(), EngineError> {
        let Part {
            mut requests, ack, ..
        } = part;
        let mut counters = Vec::new();
        self.accept(&mut requests, false, &mut counters)?;
        // Revisits `accept` made (sitemap `lastmod`) go with the completion.
        let back: Vec<_> = requests.extract_if(.., |r| r.dont_filter).collect();
        self.queue_part(&requests).await?;
        // The task is gone only if it was aborted; its page then stays queued.
        let _ = ack.send((counters, back));
        Ok(())
    }

    async fn complete(&mut self, lease: Lease, result: PageResult) -> Result<(), EngineError> {
        self.fetching -= 1;
        self.politeness.finished(lease.host_id);
        if let Some(host) = self.state.host_name(lease.host_id).map(str::to_owned) {
            let now = Instant::now();
            if let Some(wait) = result.backoff {
                self.politeness.back_off(lease.host_id, &host, now, wait);
            }
            if result.crawl_delay.is_some() {
                self.politeness
                    .set_crawl_delay(lease.host_id, &host, now, result.crawl_delay);
            }
        }
        if let Some(reason) = result.blocked {
            self.state.record_blocked(&lease.request.url, reason)?;
        }
        self.progress.observe(&lease, &result);
        let unreachable = self.note_connect(lease.host_id, &result)?;
        let parked = !unreachable.parked && self.note_robots(lease.host_id, &result);
        // Reap finished tasks so the set does not grow with the crawl.
        task::reap(&mut self.tasks);
        let PageResult {
            mut requests,
            mut items,
            mut counters,
            seen,
            prior,
            failed,
            mut requeued,
            archived,
            ..
        } = result;
        if unreachable.parked {
            counters.push(("hosts/unreachable", 1));
        }
        if unreachable.put_back && !requeued {
            hosts::keep_for_next_run(&lease.request, &mut requests, &mut counters);
            requeued = true;
        }
        if requeued {
            counters.push(("pages/requeued", 1));
            self.pages_this_run = self.pages_this_run.saturating_sub(1);
        }
        let redirect = seen
            .as_ref()
            .is_some_and(|seen| (300..400).contains(&seen.status));
        self.accept(&mut requests, redirect, &mut counters)?;
        // A page with many links queues all but the last part of them in
        // groups of their own first; its record, items and completion come
        // with the last part.
        let requests = self.queue_in_parts(requests).await?;
        let end = crate::page::record::PageEnd {
            seen,
            prior,
            failed,
            requeued,
        };
        self.note_page(&lease, end, &mut items, &mut counters)?;
        if parked {
            counters.push(("robots/host_parked", 1));
        }
        let completion = Completion {
            lease,
            requests,
            items,
            counters,
        };
        self.state
            .complete(completion, &self.config.fingerprint_headers)?;
        // In the same open group as the completion.
        self.archive(&archived)?;
        Ok(())
    }

    /// Keeps the requests the crawl may queue, in place (a page's links can be
    /// a million), and counts what it drops: see [`crate::page::accept`]. The
    /// page records its rules need are read from the state.
    fn accept(
        &self,
        requests: &mut Vec<crate::request::Request>,
        redirect: bool,
        counters: &mut Vec<(&'static str, u64)>,
    ) -> Result<(), EngineError> {
        let rules = crate::page::accept::Accept {
            scope: &self.scope,
            fingerprint_headers: &self.config.fingerprint_headers,
            run_started: self.run_started,
        };
        let lookups = rules.lookups(requests, redirect, counters);
        let records = lookups
            .iter()
            .map(|(_, fp)| self.state.page(fp))
            .collect::<Result<Vec<_>, _>>()?;
        rules.apply(requests, redirect, &lookups, &records, counters);
        Ok(())
    }

    /// The first Ctrl-C: no more leases; let in-flight work finish for the grace
    /// period, commit what finished, leave the rest queued.
    async fn stop(&mut self) -> Result<RunOutcome, EngineError> {
        tracing::info!(
            in_flight = self.state.in_flight(),
            "stopping: finishing in-flight requests"
        );
        let deadline = Instant::now() + self.config.shutdown_grace;
        while self.fetching > 0 {
            tokio::select! {
                Some(part) = self.parts.recv() => self.queue_part_of_page(part).await?,
                Some((lease, result)) = self.results.recv() => self.complete(lease, result).await?,
                () = tokio::time::sleep_until(deadline.into()) => break,
            }
        }
        self.tasks.abort_all();
        self.commit_all().await?;
        self.progress.finish();
        Ok(RunOutcome::Interrupted)
    }
}
