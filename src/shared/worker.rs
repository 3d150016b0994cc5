//! One worker of a shared crawl: lease from Redis, fetch and process
//! concurrently, complete each page with one script.
//!
//! The loop asks the lease script for as many requests as it has free slots;
//! the script, not the worker, decides which hosts may start (the crawl's
//! per-host limit and delay, on the server's clock). Each leased request runs
//! the same page task as the embedded crawl ([`crate::engine::page`]: robots.txt,
//! fetch, legs), and its result is completed at once: scope, credentials and
//! the page record are worked out here as in the embedded loop, then the
//! completion script checks the lease, appends the items, dedups and queues the
//! new requests and writes the record, atomically. Leases are renewed every
//! third of their TTL while their fetch runs.
//!
//! A worker ends when the crawl is drained (nothing queued and no live lease in
//! Redis, of any worker: nothing can add requests any more), at `--max-pages`
//! or `--max-duration`, or at Ctrl-C (fetches under way get `--grace`, the
//! other leases are returned at once). Depends
//! on [`super::client`], and on the engine's page task, scope and page records.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::SharedTarget;
use super::client::{
    Completed, CycleKind, DueChange, NewRequest, PageCompletion, Shared, SharedLease,
};
use super::output::WorkerOutput;
use crate::config::{CrawlConfig, DEFAULT_DELAY};
use crate::engine::page::{PageResult, RetryPolicy};
use crate::engine::parts::{Part, Parts};
use crate::engine::politeness::is_loopback;
use crate::engine::revisits::{PageEnd, PageWrite, page_write};
use crate::engine::scope::Scope;
use crate::engine::task::{self, Job};
use crate::engine::{EngineError, PageTotals, RunReport};
use crate::fetch::Fetcher;
use crate::fingerprint::fingerprint;
use crate::legs::Leg;
use crate::request::Request;
use crate::revisit::Schedule;
use crate::robots::{RobotsCache, RobotsSettings};
use crate::store::records::{RunOutcome, unix_now};

/// The longest a worker waits before asking for leases again when nothing was
/// ready: another worker's completion may queue requests at any moment.
const POLL: Duration = Duration::from_millis(100);

/// Runs one worker of the shared crawl `target` until the crawl is drained, a
/// limit is reached, or `shutdown` resolves.
pub async fn run(
    config: &CrawlConfig,
    target: &SharedTarget,
    lease_ttl: Duration,
    legs: Arc<dyn Leg>,
    shutdown: impl Future<Output = ()>,
) -> Result<RunReport, EngineError> {
    crate::engine::check_seeds(&config.seeds)?;
    let schedule = Schedule::new(config)?;
    let fetcher = Fetcher::new(crate::fetch::FetchSettings::from_config(config))?;
    let started = Instant::now();
    let shared = Shared::connect(target, config.per_host).await?;
    let mut worker = Worker::new(config, shared, lease_ttl, fetcher, legs, schedule).await?;
    let result = worker.run(shutdown).await;
    let outcome = match &result {
        Ok(outcome) => *outcome,
        Err(_) => RunOutcome::Failed,
    };
    let run = worker.record_run(outcome, started.elapsed()).await;
    result?;
    Ok(worker.report(run.unwrap_or(0), outcome, started.elapsed()))
}

/// A worker's id: the machine's name and the process id, unique among the
/// workers alive at one time.
fn worker_id() -> String {
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
struct Worker<'a> {
    config: &'a CrawlConfig,
    shared: Shared,
    id: String,
    ttl: Duration,
    fetcher: Fetcher,
    legs: Arc<dyn Leg>,
    scope: Scope,
    schedule: Schedule,
    retry: RetryPolicy,
    robots: Option<RobotsCache>,
    /// `--output`: the items this worker commits.
    output: Option<WorkerOutput>,
    tasks: JoinSet<()>,
    results: mpsc::UnboundedReceiver<(SharedLease, PageResult)>,
    results_tx: mpsc::UnboundedSender<(SharedLease, PageResult)>,
    /// Parts of pages' links, sent while their legs run (`engine::parts`).
    parts: mpsc::UnboundedReceiver<Part>,
    parts_tx: mpsc::UnboundedSender<Part>,
    /// Tokens of the leases being fetched or processed.
    held: BTreeSet<u64>,
    leased: u64,
    /// Requests queued in the crawl when this worker last leased.
    frontier: u64,
    /// This worker's counters (what it committed), for its report.
    counters: HashMap<&'static str, u64>,
    deadline: Option<Instant>,
    started_at: u64,
}

impl<'a> Worker<'a> {
    async fn new(
        config: &'a CrawlConfig,
        shared: Shared,
        ttl: Duration,
        fetcher: Fetcher,
        legs: Arc<dyn Leg>,
        schedule: Schedule,
    ) -> Result<Worker<'a>, EngineError> {
        // Credentials in a seed are never stored or sent.
        let seeds: Vec<String> = config
            .seeds
            .iter()
            .map(|seed| crate::canon::strip_credentials(seed).into_owned())
            .collect();
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
        begin_cycle(&shared, config, &new).await?;
        if !new.is_empty() {
            shared.add_seeds(&new).await?;
        }
        let stored = shared.seeds().await?;
        if stored.is_empty() {
            return Err(EngineError::NoSeeds {
                dir: format!("Redis crawl {:?}", shared.target().name),
            });
        }
        let mut hosts = if config.allowed_hosts.is_empty() {
            Scope::hosts_of(&stored)
        } else {
            config.allowed_hosts.clone()
        };
        hosts.extend(Scope::hosts_of(&seeds));
        let robots = if config.obey_robots {
            let cache = RobotsCache::new(fetcher.clone(), RobotsSettings::from_config(config));
            cache.preload(shared.robots().await?);
            Some(cache)
        } else {
            None
        };
        let output = match &config.output {
            Some(path) => Some(WorkerOutput::open(path, &machine_name(), &shared).await?),
            None => None,
        };
        let (results_tx, results) = mpsc::unbounded_channel();
        let (parts_tx, parts) = mpsc::unbounded_channel();
        Ok(Worker {
            config,
            shared,
            id: worker_id(),
            ttl,
            fetcher,
            legs,
            scope: Scope::new(hosts, config.max_depth),
            schedule,
            retry: RetryPolicy {
                max_retries: config.max_retries,
                backoff: config.retry_backoff,
            },
            robots,
            output,
            tasks: JoinSet::new(),
            results,
            results_tx,
            parts,
            parts_tx,
            held: BTreeSet::new(),
            leased: 0,
            frontier: 0,
            counters: HashMap::new(),
            deadline: config.max_duration.map(|d| Instant::now() + d),
            started_at: unix_now(),
        })
    }

    async fn run(&mut self, shutdown: impl Future<Output = ()>) -> Result<RunOutcome, EngineError> {
        tokio::pin!(shutdown);
        let mut renew = tokio::time::interval((self.ttl / 3).max(Duration::from_millis(100)));
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_lease = Instant::now();
        loop {
            let room = self.config.concurrency.saturating_sub(self.held.len());
            let leasing = room > 0 && !self.limit_reached();
            if leasing && Instant::now() >= next_lease {
                // Err on Ctrl-C, with the answer of a call that was under way:
                // the script may have run, and its leases are then this
                // worker's, to be returned with the rest (not left to expire).
                let answer = {
                    let call = self.shared.lease(&self.id, room, self.ttl);
                    tokio::pin!(call);
                    match unless_stopped(shutdown.as_mut(), call.as_mut()).await {
                        Some(batch) => Ok(batch),
                        None => {
                            self.shared.stop_retrying();
                            let settled = tokio::time::timeout(LEASE_SETTLE, call).await;
                            Err(settled.ok().and_then(Result::ok))
                        }
                    }
                };
                let batch = match answer {
                    Ok(batch) => batch?,
                    Err(settled) => {
                        let granted = settled.into_iter().flat_map(|batch| batch.leases);
                        self.held.extend(granted.map(|lease| lease.token));
                        return self.stop().await;
                    }
                };
                let got = batch.leases.len();
                self.frontier = batch.frontier;
                for lease in batch.leases {
                    self.spawn(lease);
                }
                if got == room {
                    continue;
                }
                if got == 0 && self.held.is_empty() && batch.frontier == 0 && batch.live == 0 {
                    return Ok(RunOutcome::Drained);
                }
                let wait = batch
                    .wait
                    .unwrap_or(POLL)
                    .clamp(Duration::from_millis(1), POLL);
                next_lease = Instant::now() + wait;
            }
            if self.limit_reached() && self.held.is_empty() {
                return Ok(RunOutcome::Limit);
            }
            tokio::select! {
                biased;
                () = &mut shutdown => return self.stop().await,
                // Before the results: a busy worker must still renew.
                _ = renew.tick() => {
                    if unless_stopped(shutdown.as_mut(), self.renew()).await.transpose()?.is_none() {
                        return self.stop().await;
                    }
                }
                Some(part) = self.parts.recv() => {
                    let call = self.queue_part(part);
                    if unless_stopped(shutdown.as_mut(), call).await.transpose()?.is_none() {
                        return self.stop().await;
                    }
                }
                Some((lease, result)) = self.results.recv() => {
                    let token = lease.token;
                    let call = self.complete(lease, result);
                    if unless_stopped(shutdown.as_mut(), call).await.transpose()?.is_none() {
                        // Returned with the others (or, if the completion did
                        // commit before its answer was lost, found completed).
                        self.held.insert(token);
                        return self.stop().await;
                    }
                    // A slot is free, and the host may be under its limit again.
                    next_lease = Instant::now();
                }
                () = tokio::time::sleep_until(next_lease.into()), if leasing => {}
            }
        }
    }

    fn limit_reached(&self) -> bool {
        self.config.max_pages.is_some_and(|max| self.leased >= max)
            || self.deadline.is_some_and(|at| Instant::now() >= at)
    }

    fn spawn(&mut self, lease: SharedLease) {
        self.leased += 1;
        self.held.insert(lease.token);
        let job = Job {
            fetcher: self.fetcher.clone(),
            legs: Arc::clone(&self.legs),
            retry: self.retry,
            robots: self.robots.clone(),
            // Only a request that bypasses the seen set (seed, revisit, retry)
            // is fetched against its page record: a filtered one is new.
            prior: lease.prior.clone().filter(|_| lease.request.dont_filter),
            parts: Parts::new(lease.token, self.parts_tx.clone()),
        };
        let tx = self.results_tx.clone();
        self.tasks.spawn(async move {
            let result = job.run(&lease.request).await;
            // The receiver is gone only when the loop has stopped; the lease is
            // then returned or expires.
            let _ = tx.send((lease, result));
        });
    }

    /// Extends the leases being worked on, and says this worker is alive.
    async fn renew(&mut self) -> Result<(), EngineError> {
        let info = serde_json::json!({
            "id": self.id,
            "pid": std::process::id(),
            "started_at": self.started_at,
            "concurrency": self.config.concurrency,
            "leased": self.leased,
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

    /// Completes one finished page with the completion script.
    async fn complete(
        &mut self,
        lease: SharedLease,
        result: PageResult,
    ) -> Result<(), EngineError> {
        self.held.remove(&lease.token);
        task::reap(&mut self.tasks);
        let robots_answered = self.robots.is_some().then_some(!result.robots_unavailable);
        let PageResult {
            requests,
            mut items,
            mut counters,
            seen,
            prior,
            failed,
            requeued,
            backoff,
            crawl_delay,
            ..
        } = result;
        if requeued {
            counters.push(("pages/requeued", 1));
        }
        let end = PageEnd {
            seen,
            prior,
            failed,
            requeued,
        };
        let (record, due) = match page_write(
            &self.schedule,
            &lease.request,
            end,
            &mut items,
            &mut counters,
        ) {
            PageWrite::Put { record, .. } => {
                let due = match record.next_due {
                    Some(at) if !record.gone => DueChange::At(at),
                    _ => DueChange::Clear,
                };
                (Some(crate::store::encode_page(&record)), due)
            }
            PageWrite::KeepDue(at) => (None, DueChange::At(at)),
            PageWrite::Nothing => (None, DueChange::Leave),
        };
        let accepted = self.accept(requests, &mut counters);
        let items: Vec<String> = items
            .iter()
            .map(|item| serde_json::Value::Object(item.clone()).to_string())
            .collect();
        let completion = PageCompletion {
            token: lease.token,
            backoff,
            crawl_delay,
            fingerprint: fingerprint(&lease.request, &self.config.fingerprint_headers),
            record,
            due,
            output: self.output.as_ref().map(|o| o.id().to_owned()),
            robots_answered,
            counters,
            items,
            requests: accepted,
        };
        match self.shared.complete(&self.id, &completion).await? {
            Completed::Done { queued, filtered } => {
                self.tally(&completion, queued, filtered);
                if let Some(output) = &mut self.output {
                    output.append(&completion.items)?;
                }
            }
            // Committed by the earlier attempt whose answer was lost.
            Completed::Already => {
                self.tally(&completion, 0, 0);
                if let Some(output) = &mut self.output {
                    output.catch_up(&self.shared).await?;
                }
            }
            Completed::Stale => {
                tracing::warn!(
                    url = %lease.request.url,
                    "the lease expired before the page was completed; another worker fetches it again"
                );
                *self.counters.entry("leases/lost").or_default() += 1;
            }
        }
        if let Some(robots) = &self.robots {
            let records = robots.take_new_records();
            self.shared.put_robots(&records).await?;
        }
        Ok(())
    }

    /// Queues a part of a page's links that its task sent while its legs run
    /// (scope checked here, deduplicated by the script), and answers with the
    /// counters of what was dropped, which come with the page's completion.
    async fn queue_part(&mut self, part: Part) -> Result<(), EngineError> {
        let Part {
            lease,
            requests,
            ack,
        } = part;
        let mut counters = Vec::new();
        let accepted = self.accept(requests, &mut counters);
        if let Some((queued, filtered)) =
            self.shared.queue_links(&self.id, lease, &accepted).await?
        {
            *self.counters.entry("frontier/enqueued").or_default() += queued;
            *self.counters.entry("dupefilter/filtered").or_default() += filtered;
        }
        // The task is gone only if it was aborted; its page then goes back.
        let _ = ack.send(counters);
        Ok(())
    }

    /// The requests the crawl may queue, credentials stripped and scope
    /// checked; counts what it drops.
    fn accept(
        &self,
        requests: Vec<Request>,
        counters: &mut Vec<(&'static str, u64)>,
    ) -> Vec<NewRequest> {
        let mut accepted = Vec::with_capacity(requests.len());
        for mut request in requests {
            crate::engine::scope::strip_credentials(&mut request, counters);
            match self.scope.check(&request) {
                Ok(()) => accepted.push(new_request(self.config, request)),
                Err(rejected) => counters.push((rejected.counter(), 1)),
            }
        }
        accepted
    }

    fn tally(&mut self, completion: &PageCompletion, queued: u64, filtered: u64) {
        for (name, by) in &completion.counters {
            *self.counters.entry(name).or_default() += by;
        }
        *self.counters.entry("items/stored").or_default() += completion.items.len() as u64;
        *self.counters.entry("pages/completed").or_default() += 1;
        *self.counters.entry("frontier/enqueued").or_default() += queued;
        *self.counters.entry("dupefilter/filtered").or_default() += filtered;
    }

    /// Ctrl-C: no more leases. As in the embedded crawl, fetches under way get
    /// `--grace` to finish and are completed, so that a clean stop fetches
    /// nothing twice; the leases of those that have not finished by then are
    /// returned to the frontier at once (not left to expire). With Redis away
    /// nothing is waited for: the leases then expire after their TTL instead.
    async fn stop(&mut self) -> Result<RunOutcome, EngineError> {
        self.shared.stop_retrying();
        let deadline = Instant::now() + self.config.shutdown_grace;
        let mut failed = false;
        while !self.held.is_empty() && !failed {
            tokio::select! {
                Some(part) = self.parts.recv() => {
                    if let Err(error) = self.queue_part(part).await {
                        tracing::warn!(%error, "a part of a page's links could not be queued while stopping");
                        failed = true;
                    }
                }
                Some((lease, result)) = self.results.recv() => {
                    let token = lease.token;
                    if let Err(error) = self.complete(lease, result).await {
                        self.held.insert(token);
                        tracing::warn!(%error, "a finished page could not be completed while stopping");
                        failed = true;
                    }
                }
                () = tokio::time::sleep_until(deadline.into()) => break,
            }
        }
        self.tasks.abort_all();
        let tokens: Vec<u64> = std::mem::take(&mut self.held).into_iter().collect();
        match self.shared.release(&self.id, &tokens).await {
            Ok(returned) => tracing::info!(returned, "stopped: leases returned to the frontier"),
            Err(error) => tracing::warn!(
                %error,
                leases = tokens.len(),
                "stopped without returning the leases: they go back to the frontier when they expire"
            ),
        }
        Ok(RunOutcome::Interrupted)
    }

    /// Unlists the worker and appends its run to the crawl's runs; returns the
    /// run's number. A failure here is logged: the pages are committed already.
    async fn record_run(&mut self, outcome: RunOutcome, elapsed: Duration) -> Option<u64> {
        if let Err(error) = self.shared.release(&self.id, &[]).await {
            tracing::warn!(%error, "could not unlist this worker");
        }
        let counters: std::collections::BTreeMap<&str, u64> =
            self.counters.iter().map(|(k, v)| (*k, *v)).collect();
        let record = serde_json::json!({
            "worker": self.id,
            "started_at": self.started_at,
            "ended_at": unix_now(),
            "seconds": elapsed.as_secs_f64(),
            "outcome": outcome.as_str(),
            "counters": counters,
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
            enqueued: count("frontier/enqueued"),
            filtered: count("dupefilter/filtered"),
            frontier: self.frontier,
            unreachable: 0,
            bytes: count("fetch/bytes"),
            new_cycle: false,
            // Robots answers are not counted per worker: only page fetches.
            network_failed: count("pages/fetched") == 0 && count("fetch/network_error") > 0,
            elapsed,
        }
    }
}

/// Due pages are queued in calls of this many.
const CYCLE_CHUNK: usize = 1000;

/// A drained crawl starts a new cycle: its seeds (and `given`) and every page
/// due by now are queued again — by exactly one of the workers starting
/// together (the cycle script's guard). A worker joining a running cycle
/// queues what of it is still due (a worker that started it may have died
/// between chunks); the due index makes that idempotent.
async fn begin_cycle(
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
    let seeds: std::collections::HashSet<[u8; 20]> =
        requests.iter().map(|(_, r)| r.fingerprint).collect();
    let mut start = drained;
    let mut cycle = state.cycle;
    let mut queued = 0;
    loop {
        let fps = shared.due(until, CYCLE_CHUNK).await?;
        let fps: Vec<[u8; 20]> = fps.into_iter().filter(|fp| !seeds.contains(fp)).collect();
        let done = fps.is_empty();
        let mut stale = Vec::new();
        for (fp, record) in fps.iter().zip(shared.page_records(&fps).await?) {
            match record {
                Some(record) if !record.gone => {
                    requests.push((
                        CycleKind::Due,
                        new_request(config, record.revisit_request()),
                    ));
                }
                // Not due at all: a gone page, or a record that went away.
                _ => stale.push(*fp),
            }
        }
        shared.forget_due(&stale).await?;
        if requests.is_empty() && !start {
            break;
        }
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
        }
        requests.clear();
        if done {
            break;
        }
    }
    if queued > 0 {
        tracing::info!(queued, "queued for this cycle");
    }
    Ok(())
}

/// `call`'s output, or `None` when `shutdown` resolves first: Ctrl-C is heard
/// even while Redis is away and a call waits for it.
/// How long a stopping worker waits for the answer to a lease call that was
/// under way, so that leases granted just before Ctrl-C are returned at once
/// rather than left to expire (with Redis away it waits this long, no more).
const LEASE_SETTLE: Duration = Duration::from_secs(1);

async fn unless_stopped<T>(
    shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
    call: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        () = shutdown => None,
        out = call => Some(out),
    }
}

/// `request` as the scripts take it: its host, fingerprint and host delay.
fn new_request(config: &CrawlConfig, request: Request) -> NewRequest {
    let host = crate::store::host_of(&request.url);
    let delay = config.delay.unwrap_or(if is_loopback(&host) {
        Duration::ZERO
    } else {
        DEFAULT_DELAY
    });
    NewRequest {
        fingerprint: fingerprint(&request, &config.fingerprint_headers),
        host,
        request,
        delay,
    }
}
