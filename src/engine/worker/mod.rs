//! One worker of a shared crawl: the Redis frontier of the one crawl loop
//! (`engine::frontier::Frontier`, run by `engine::crawl`), each page
//! completed with one script.
//!
//! A lease asks the lease script for as many requests as the loop has free
//! slots; the script, not the worker, decides which hosts may start (the
//! crawl's per-host limit and delay, on the server's clock). The pages
//! finished by then are completed together, each with the completion script:
//! scope, credentials and the page record are worked out here
//! ([`crate::page::accept`], `page::record`), then the script checks
//! the lease, appends the items, dedups and queues the new requests and
//! writes the record, atomically. The worker's events are lease renewal
//! (every third of the TTL) and the job's version (every [`JOB_POLL`]); its
//! liveness is a heartbeat on a task of its own (`heartbeat`): a worker not
//! heard from for `SILENCE_BOUND` loses its leases, whatever their TTL.
//!
//! A worker ends when the crawl is drained (nothing queued and no live lease in
//! Redis, of any worker: nothing can add requests any more), at `--max-pages`
//! or `--max-duration`, or at Ctrl-C (fetches under way get `--grace`, the
//! other leases are returned at once).
//!
//! The worker runs the crawl's job ([`join()`]): every [`JOB_POLL`] it
//! reads the job's version and, when another worker stored a newer one, takes
//! it up at once (scope, legs, fetcher, robots.txt settings, revisit policy,
//! retries, concurrency); the per-host limit and the delay are the scripts'
//! and hold crawl-wide from the moment a version is stored. Completing a page
//! is in `pages`, a new cycle in `cycle`, the worker's `--output` file in
//! [`output`] and its WARC files in [`warc`]. Depends on [`crate::shared`]
//! (the Redis frontier), [`crate::page`] and [`crate::warc`].

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{CrawlConfig, default_delay};
use crate::engine::active::Active;
use crate::engine::crawl::{Crawl, Limits};
use crate::engine::frontier::{Frontier, Leased, Next};
use crate::engine::{EngineError, RunReport};
use crate::fingerprint::fingerprint;
use crate::page::PageResult;
use crate::page::PageTotals;
use crate::page::parts::Part;
use crate::request::Request;
use crate::shared::client::{NewRequest, SharedLease};
use crate::shared::{Shared, SharedError};
use crate::store::records::{RunOutcome, unix_now};
use crate::warc::WarcSettings;
use cycle::begin_cycle;
use heartbeat::Heartbeat;
pub use join::{JOB_POLL, JobPlan, JoinError, Joined, join};
use output::WorkerOutput;
use warc::WorkerWarc;
use witness::Kept;

mod cycle;
mod heartbeat;
mod join;
pub mod output;
mod pages;
pub mod warc;
mod witness;

/// The longest a worker waits before asking for leases again when nothing was
/// ready: another worker's completion may queue requests at any moment.
const POLL: Duration = Duration::from_millis(100);

/// The most finished pages completed together (with `--warc`, their records
/// written with one sync of the WARC file, see [`warc`]).
pub const COMPLETE_TOGETHER: usize = 64;

/// The counter of pages fetched (answered), a worker's and the crawl's.
const FETCHED: &str = "pages/fetched";

impl Joined {
    /// Runs this worker on the crawl's job until the crawl is drained, a
    /// limit of this run is reached, or `shutdown` resolves; the run's record
    /// names the job versions it ran under. `None` when `shutdown` resolved
    /// while the worker was still starting (queueing its seeds and the
    /// cycle's due pages, loading robots.txt answers): it fetched nothing and
    /// recorded no run. What it had stored by then is kept, as after a kill.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<Option<RunReport>, EngineError> {
        let started = Instant::now();
        tokio::pin!(shutdown);
        let worker = tokio::select! {
            biased;
            () = &mut shutdown => return Ok(None),
            worker = Worker::new(self) => worker?,
        };
        let limits = Limits::of(&worker.run);
        let mut crawl = Crawl::new(worker, limits);
        let result = crawl.run(shutdown).await;
        let worker = &mut crawl.frontier;
        let outcome = match &result {
            Ok(outcome) => *outcome,
            Err(_) => RunOutcome::Failed,
        };
        // A state gone from Redis, or a server out of memory, takes no more
        // writes: nothing is recorded (the leases expire), one line is said.
        let run = match &result {
            Err(EngineError::Shared(
                SharedError::Gone { .. } | SharedError::OutOfMemory { .. },
            )) => None,
            _ => worker.record_run(outcome, started.elapsed()).await,
        };
        result?;
        let mut report = worker.report(run.unwrap_or(0), outcome, started.elapsed());
        // This worker's requests all failed on the network; the crawl's did
        // not when another worker fetched a page meanwhile (this one was only
        // handed a dead host): the run is the crawl's, as an embedded run is.
        if report.network_failed
            && let Ok(fetched) = worker.shared.crawl_counter(FETCHED).await
        {
            report.network_failed = fetched <= worker.fetched_before;
        }
        // The same for error answers: another worker's page answered well.
        if report.errors_only
            && let Ok(now) = answered_well(&worker.shared).await
        {
            report.errors_only = now <= worker.answered_well_before;
        }
        Ok(Some(report))
    }
}

/// The crawl's pages that answered well so far, summed over its workers.
async fn answered_well(shared: &Shared) -> Result<u64, SharedError> {
    let names = ["pages/new", "pages/changed", "pages/unchanged"];
    let counts = shared.crawl_counters(&names).await?;
    let count = |name: &str| {
        let at = names.iter().position(|n| *n == name);
        at.and_then(|at| counts.get(at)).copied().unwrap_or(0)
    };
    Ok(PageTotals::of(count).answered_well())
}

/// A worker's id: the machine's name and the process id, unique among the
/// workers alive at one time.
pub(super) fn worker_id() -> String {
    format!("{}:{}", machine_name(), std::process::id())
}

/// This machine's name (`worker` where it has none).
fn machine_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned())
}

/// The loop's working set.
struct Worker {
    /// The job version being run, and what is built from it.
    active: Active,
    /// This worker's seeds, per-run options and output file (its job
    /// settings are not read: `active`'s are).
    run: CrawlConfig,
    /// Every job version this run ran under, oldest first.
    versions: Vec<u64>,
    /// A newer version this worker could not take up (not tried again).
    refused: Option<u64>,
    shared: Arc<Shared>,
    id: String,
    /// Beats for this worker on a task of its own; stopped once its leases
    /// are returned.
    heartbeat: Heartbeat,
    ttl: Duration,
    /// `--output`: the items this worker commits.
    output: Option<WorkerOutput>,
    /// The witness record beside the output file.
    witness: Option<Kept>,
    /// `--warc`: the records of the pages this worker completes.
    warc: Option<WorkerWarc>,
    /// When the leases held are renewed next (every third of their TTL).
    renew: tokio::time::Interval,
    /// When the job's version is looked at next.
    job_poll: tokio::time::Interval,
    /// Tokens of the leases being fetched or processed.
    held: BTreeSet<u64>,
    leased: u64,
    /// Requests queued in the crawl when this worker last leased.
    frontier: u64,
    /// This worker's counters (what it committed), for its report.
    counters: HashMap<&'static str, u64>,
    started_at: u64,
    /// The newest item in the stream when this run began: the run's items
    /// come after it (`dump --shared ... items --run N`).
    items_after: String,
    /// The crawl's pages fetched (every worker's) when this run began.
    fetched_before: u64,
    /// The crawl's pages that answered well (every worker's) when this run
    /// began.
    answered_well_before: u64,
    /// Hosts whose connection failure this run has said (once per host, as
    /// the embedded crawl does).
    unreachable_said: std::collections::HashSet<String>,
    /// robots.txt answers whose `Sitemap:` lines a completion that was refused
    /// (its lease had expired) did not queue: the next completion carries them.
    robots_pending: Vec<crate::robots::RobotsRecord>,
}

impl Worker {
    async fn new(joined: Joined) -> Result<Worker, EngineError> {
        let Joined {
            shared,
            witness,
            active,
            run,
            version,
            ..
        } = joined;
        let config = &active.config;
        // This worker's seeds and the job's (a worker killed while storing
        // seeds in chunks left some unstored: the job names them all), less
        // those stored. Credentials in a seed are never stored or sent.
        let stored: std::collections::HashSet<String> = shared.seeds().await?.into_iter().collect();
        let mut seeds: Vec<String> = config
            .seeds
            .iter()
            .chain(&active.seeds)
            .map(|seed| crate::canon::strip_credentials(seed).into_owned())
            .filter(|seed| !stored.contains(seed))
            .collect();
        seeds.sort();
        seeds.dedup();
        let new: Vec<NewRequest> = seeds
            .iter()
            .map(|url| {
                let mut request = Request::get(url.clone());
                request.dont_filter = true;
                new_request(config, request)
            })
            .collect();
        let back = shared.unpark().await?;
        if back > 0 {
            tracing::info!(
                requests = back,
                "hosts whose robots.txt kept failing are tried again"
            );
        }
        let mut counters = HashMap::new();
        let cycle = begin_cycle(&shared, config, &active.schedule, &active.scope, &new).await?;
        let seeded = match new.is_empty() {
            true => Default::default(),
            false => shared.add_seeds(&new).await?,
        };
        // Counted as the embedded state counts its cycle start and seeds.
        for (name, by) in [
            ("cycle/started", u64::from(cycle.started || seeded.created)),
            ("revisit/rescheduled", cycle.rescheduled),
            ("revisit/seeds", cycle.queued.seeds),
            ("revisit/due", cycle.queued.due),
            ("frontier/enqueued", cycle.queued.queued + seeded.queued),
            ("seen/unique", cycle.queued.unique + seeded.unique),
        ] {
            if by > 0 {
                counters.insert(name, by);
            }
        }
        if stored.is_empty() && new.is_empty() {
            return Err(EngineError::NoSeeds {
                dir: format!("Redis crawl {:?}", shared.target().name),
            });
        }
        active.load_robots(&shared).await?;
        active.load_cookies(&shared).await?;
        let mut witness = witness;
        let output = match &run.output {
            Some(path) => {
                // Lines of completions Redis lost, this run or while no
                // worker ran, are moved aside, not refused.
                let after_loss = witness.as_ref().is_some_and(|w| w.lost(&shared).0 > 0);
                let output = WorkerOutput::open(path, &machine_name(), &shared, after_loss).await?;
                if let Some(witness) = &mut witness {
                    witness.reconciled(output.losses());
                }
                Some(output)
            }
            None => None,
        };
        let id = worker_id();
        let started_at = unix_now();
        let warc = match WarcSettings::of(&active.config) {
            Some(settings) => {
                // The run's records follow a `warcinfo` record of its job,
                // naming the run as its record in the crawl's runs will.
                let job = shared.job(version).await?;
                let text = job.as_ref().map_or("", |job| job.text.as_str());
                let settings = settings.describe_worker_run(&id, started_at, version, text);
                Some(WorkerWarc::open(settings, &machine_name(), &shared).await?)
            }
            None => None,
        };
        let items_after = shared.last_item_id().await?;
        let fetched_before = shared.crawl_counter(FETCHED).await?;
        let answered_well_before = answered_well(&shared).await?;
        // Listed as beating before its first lease; beating from here on.
        shared.beat(&id).await?;
        let shared = Arc::new(shared);
        let heartbeat = Heartbeat::start(Arc::clone(&shared), id.clone());
        let mut renew = tokio::time::interval((run.lease_ttl / 3).max(Duration::from_millis(100)));
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut job_poll = tokio::time::interval(JOB_POLL);
        job_poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ok(Worker {
            renew,
            job_poll,
            ttl: run.lease_ttl,
            active,
            run,
            versions: vec![version],
            refused: None,
            shared,
            id,
            heartbeat,
            output,
            witness,
            warc,
            held: BTreeSet::new(),
            leased: 0,
            frontier: 0,
            counters,
            started_at,
            items_after,
            fetched_before,
            answered_well_before,
            unreachable_said: Default::default(),
            robots_pending: Vec::new(),
        })
    }

    /// Takes up a newer job version when another worker stored one.
    async fn follow_job(&mut self) -> Result<(), EngineError> {
        let newest = self.shared.job_version().await?;
        if newest <= self.active.version || self.refused == Some(newest) {
            return Ok(());
        }
        let Some(stored) = self.shared.current_job().await? else {
            return Ok(());
        };
        let seeds = self.shared.seeds().await?;
        match Active::from_stored(&stored, &self.run, &seeds) {
            Ok(active) => {
                active.load_robots(&self.shared).await?;
                // The cookies go on from this version's jar to the next.
                self.active.keep_cookies(&self.shared).await?;
                active.load_cookies(&self.shared).await?;
                tracing::info!(
                    from = self.active.version,
                    to = active.version,
                    "taking up the crawl's new job version"
                );
                if let Some(robots) = &self.active.robots {
                    // What this version's cache learned, before it goes (its
                    // WARC records go with the next completion).
                    let (records, exchanges) = robots.take_new();
                    if let Some(warc) = &mut self.warc {
                        warc.robots(exchanges);
                    }
                    self.shared.put_robots(&records).await?;
                }
                self.versions.push(active.version);
                self.active = active;
            }
            Err(error) => {
                tracing::warn!(
                    version = stored.version,
                    %error,
                    "cannot take up the crawl's new job version; going on with version {}",
                    self.active.version
                );
                self.refused = Some(newest.max(stored.version));
            }
        }
        Ok(())
    }

    /// Extends the leases being worked on, and says this worker is alive.
    async fn renew(&mut self) -> Result<(), EngineError> {
        let info = serde_json::json!({
            "id": self.id,
            "pid": std::process::id(),
            "started_at": self.started_at,
            "concurrency": self.active.config.concurrency,
            "job": self.active.version,
            "leased": self.leased,
            // Three of these without a renewal and it is taken for dead.
            "lease_ttl_ms": self.ttl.as_millis() as u64,
        })
        .to_string();
        let tokens: Vec<u64> = self.held.iter().copied().collect();
        let kept = self
            .shared
            .renew(&self.id, self.ttl, &info, &tokens)
            .await?;
        if (kept as usize) < tokens.len() {
            tracing::warn!(
                lost = tokens.len() - kept as usize,
                "leases expired before they were renewed; their pages will be fetched again"
            );
        }
        Ok(())
    }

    /// Reconciles the output file when Redis went back since it last was
    /// (see [`output`]), and notes it in the witness record.
    async fn reconcile_output(&mut self) -> Result<(), EngineError> {
        let Some(output) = &mut self.output else {
            return Ok(());
        };
        output.after_loss(&self.shared).await?;
        if let Some(witness) = &mut self.witness {
            witness.reconciled(output.losses());
        }
        Ok(())
    }

    /// Adds `by` to this run's counter `name`.
    fn count(&mut self, name: &'static str, by: u64) {
        *self.counters.entry(name).or_default() += by;
    }

    /// Counts what a script did with requests this worker sent.
    fn count_queued(&mut self, queued: crate::shared::client::Queued) {
        self.count("frontier/enqueued", queued.queued);
        self.count("dupefilter/filtered", queued.filtered);
        self.count("seen/unique", queued.unique);
    }

    /// Unlists the worker and appends its run to the crawl's runs; returns the
    /// run's number. A failure here is logged: the pages are committed already.
    async fn record_run(&mut self, outcome: RunOutcome, elapsed: Duration) -> Option<u64> {
        self.heartbeat.stop();
        if let Err(error) = self.reconcile_output().await {
            tracing::warn!(%error, "could not reconcile the output file after Redis went back");
        }
        if let Some(witness) = &mut self.witness {
            witness.keep(&self.shared, true);
        }
        if let Err(error) = self.shared.release(&self.id, &[]).await {
            tracing::warn!(%error, "could not unlist this worker");
        }
        if let Some(kib) = crate::engine::peak_rss_kib() {
            self.counters.insert(crate::store::PEAK_RSS, kib);
        }
        // As the embedded state records them: a counter that did not move is
        // not listed.
        let counters: std::collections::BTreeMap<&str, u64> = self
            .counters
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| (*k, *v))
            .collect();
        // Every page of this run is completed: its items are at or before
        // the newest now.
        let items_until = self.shared.last_item_id().await.ok();
        let record = serde_json::json!({
            "worker": self.id,
            "started_at": self.started_at,
            "ended_at": unix_now(),
            "seconds": elapsed.as_secs_f64(),
            "outcome": outcome.as_str(),
            // The job version the run began under, and every one it ran under.
            "job": self.versions.first(),
            "jobs": self.versions,
            "counters": counters,
            // Its items: this worker's, after `items_after`, up to `items_until`.
            "items_after": self.items_after,
            "items_until": items_until,
            // Committed completions this worker saw Redis lose (0: none).
            "lost_completions": self.shared.lost_completions(),
        });
        match self.shared.push_run(&record.to_string()).await {
            Ok(n) => Some(n),
            Err(error) => {
                tracing::warn!(%error, "could not record this worker's run");
                None
            }
        }
    }

    fn report(&self, run: u64, outcome: RunOutcome, elapsed: Duration) -> RunReport {
        let count = |name: &str| self.counters.get(name).copied().unwrap_or(0);
        RunReport {
            outcome,
            run,
            totals: PageTotals::of(count),
            items: count("items/stored"),
            deleted: count("items/deleted"),
            enqueued: count("frontier/enqueued"),
            filtered: count("dupefilter/filtered"),
            frontier: self.frontier,
            unreachable: 0,
            bytes: count("fetch/bytes"),
            new_cycle: count("cycle/started") > 0,
            network_failed: super::network_failed(count),
            errors_only: crate::page::error_answers_only(count),
            lost: match (self.shared.lost_completions(), self.shared.went_back_last()) {
                (0, _) | (_, None) => None,
                (lost, Some(fall)) => Some((lost, fall)),
            },
            elapsed,
        }
    }
}

/// An event of a worker's own.
pub(crate) enum Event {
    /// The leases held are due for renewal.
    Renew,
    /// The job's version is due for a look.
    Job,
}

impl Frontier for Worker {
    type Lease = SharedLease;
    type Event = Event;

    fn request(lease: &SharedLease) -> &Request {
        &lease.request
    }

    fn token(lease: &SharedLease) -> u64 {
        lease.token
    }

    fn active(&self) -> &Active {
        &self.active
    }

    /// The lease script decides which hosts may start (the crawl's per-host
    /// limit and delay, on the server's clock).
    async fn lease(&mut self, room: usize) -> Result<Leased<SharedLease>, EngineError> {
        let batch = self.shared.lease(&self.id, room, self.ttl).await?;
        let got = batch.leases.len();
        self.frontier = batch.frontier;
        self.leased += got as u64;
        // Held from here: returned at a stop even if never started.
        self.held
            .extend(batch.leases.iter().map(|lease| lease.token));
        let next = if got == room {
            Next::Now
        } else if got == 0 && batch.frontier == 0 && batch.live == 0 {
            // Nothing queued and no live lease of any worker: nothing can
            // add requests any more.
            Next::Empty
        } else {
            // Another worker's completion may queue requests at any moment.
            let wait = batch
                .wait
                .unwrap_or(POLL)
                .clamp(Duration::from_millis(1), POLL);
            Next::At(Instant::now() + wait)
        };
        Ok(Leased {
            leases: batch
                .leases
                .into_iter()
                .map(|mut lease| {
                    let prior = lease.prior.take();
                    (lease, prior)
                })
                .collect(),
            next,
        })
    }

    fn complete_together(&self) -> usize {
        // The pages finished by now are completed together, then the free
        // slots are leased with one call of the lease script, not one per
        // page (1.5x the pages/s of completing one at a time, see
        // docs/performance.md); with --warc, their records take one sync.
        COMPLETE_TOGETHER
    }

    async fn complete(
        &mut self,
        finished: Vec<(SharedLease, PageResult)>,
    ) -> Result<u64, EngineError> {
        let put_back = finished
            .iter()
            .filter(|(_, result)| result.requeued)
            .count();
        self.complete_pages(finished).await?;
        self.reconcile_output().await?;
        if let Some(witness) = &mut self.witness {
            witness.keep(&self.shared, false);
        }
        Ok(put_back as u64)
    }

    async fn queue_part(&mut self, part: Part) -> Result<(), EngineError> {
        self.queue_link_part(part).await
    }

    async fn next_event(&mut self) -> Event {
        tokio::select! {
            biased;
            _ = self.renew.tick() => Event::Renew,
            _ = self.job_poll.tick() => Event::Job,
        }
    }

    async fn on_event(&mut self, event: Event) -> Result<Option<Instant>, EngineError> {
        match event {
            Event::Renew => {
                self.renew().await?;
                Ok(None)
            }
            Event::Job => {
                self.follow_job().await?;
                // A new concurrency may leave room.
                Ok(Some(Instant::now() + POLL))
            }
        }
    }

    fn starved(&mut self) -> Result<(), EngineError> {
        // A completion is durable when its script answers: nothing waits.
        Ok(())
    }

    async fn settle(&mut self) -> Result<usize, EngineError> {
        Ok(0)
    }

    fn idle_outcome(&self) -> RunOutcome {
        RunOutcome::Drained
    }

    fn stopper(&self) -> Box<dyn Fn()> {
        Box::new(self.shared.retry_stopper())
    }

    fn settle_time(&self) -> Option<Duration> {
        Some(LEASE_SETTLE)
    }

    fn stopping(&mut self) -> bool {
        self.shared.stop_retrying();
        // After a completion whose outcome is not known, another would mark
        // the WARC file past that one's records: nothing more is completed.
        !self.warc.as_ref().is_some_and(WorkerWarc::uncertain)
    }

    fn failed_while_stopping(
        &mut self,
        what: &str,
        error: EngineError,
    ) -> Result<bool, EngineError> {
        tracing::warn!(%error, "{what}");
        Ok(false)
    }

    /// The leases of pages not completed are returned to the frontier at
    /// once (not left to expire). With Redis away nothing is waited for: the
    /// leases then expire after their TTL instead.
    async fn stopped(&mut self) -> Result<(), EngineError> {
        self.heartbeat.stop();
        let tokens: Vec<u64> = std::mem::take(&mut self.held).into_iter().collect();
        match self.shared.release(&self.id, &tokens).await {
            Ok(returned) => tracing::info!(returned, "stopped: leases returned to the frontier"),
            Err(error) => tracing::warn!(
                %error,
                leases = tokens.len(),
                "stopped without returning the leases: they go back to the frontier when they expire"
            ),
        }
        Ok(())
    }

    async fn finish(&mut self, _: bool) -> Result<(), EngineError> {
        Ok(())
    }
}

/// How long a stopping worker waits for the answer to a call that was under
/// way (a lease call, so that leases granted just before Ctrl-C are returned
/// at once rather than left to expire; a completion, whose outcome decides
/// what the WARC file keeps). With Redis away it waits this long, no more.
const LEASE_SETTLE: Duration = Duration::from_secs(1);

/// `request` as the scripts take it: its host, fingerprint and default delay.
pub(super) fn new_request(config: &CrawlConfig, request: Request) -> NewRequest {
    let host = crate::store::host_of(&request.url);
    let delay = default_delay(&host);
    NewRequest {
        fingerprint: fingerprint(&request, &config.fingerprint_headers),
        host,
        request,
        delay,
    }
}
