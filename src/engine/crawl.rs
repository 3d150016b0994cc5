//! The crawl loop, written once over a [`Frontier`]: lease as many requests as
//! there is room for, run each page's task ([`crate::page::task`]) while the
//! loop goes on, hand the parts of a page's links and the finished pages back
//! to the frontier, act on the frontier's own events, and end when nothing can
//! be leased, at a limit of the run, or at Ctrl-C.
//!
//! Ctrl-C (the `shutdown` future) stops the leasing; fetches under way get
//! the grace period to finish and are completed, the rest go back (see
//! [`Frontier::stopped`]). A call to the frontier under way when it comes is
//! given [`Frontier::settle_time`] to end. Depends on [`super::frontier`] and
//! [`crate::page`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::EngineError;
use super::frontier::{Frontier, Next};
use crate::page::PageResult;
use crate::page::parts::{Part, Parts};
use crate::page::task;
use crate::store::records::RunOutcome;

/// A run's own limits (not the job's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `--max-pages`: the pages this run leases (a page put back to be
    /// fetched again does not count twice).
    pub max_pages: Option<u64>,
    /// `--max-duration`: no lease starts after this.
    pub deadline: Option<Instant>,
    /// `--until-idle`: end when nothing can start within
    /// [`crate::config::IDLE_WAIT`].
    pub until_idle: bool,
    /// `--grace`: how long fetches under way get at Ctrl-C.
    pub grace: Duration,
}

impl Limits {
    /// The limits `config` gives a run that starts now.
    pub(crate) fn of(config: &crate::config::CrawlConfig) -> Limits {
        Limits {
            max_pages: config.max_pages,
            deadline: config.max_duration.map(|d| Instant::now() + d),
            until_idle: config.until_idle,
            grace: config.shutdown_grace,
        }
    }
}

/// The loop's working set.
pub(crate) struct Crawl<F: Frontier> {
    /// The backend.
    pub frontier: F,
    limits: Limits,
    tasks: JoinSet<()>,
    results: mpsc::UnboundedReceiver<(F::Lease, PageResult)>,
    results_tx: mpsc::UnboundedSender<(F::Lease, PageResult)>,
    /// Parts of pages' links, sent while their legs run (`page::parts`).
    parts: mpsc::UnboundedReceiver<Part>,
    parts_tx: mpsc::UnboundedSender<Part>,
    /// Pages being fetched or processed (leased and not yet handed back).
    in_flight: usize,
    /// Pages leased this run and not put back: what `--max-pages` counts.
    pages_this_run: u64,
}

/// How a call to the frontier went, with Ctrl-C possibly in between.
enum Call<T> {
    /// It ended before Ctrl-C.
    Done(T),
    /// Ctrl-C came first; the call's output if it ended within its settle time.
    Stopped(Option<T>),
}

impl<F: Frontier> Crawl<F> {
    /// A crawl of `frontier` under `limits`.
    pub(crate) fn new(frontier: F, limits: Limits) -> Crawl<F> {
        let (results_tx, results) = mpsc::unbounded_channel();
        let (parts_tx, parts) = mpsc::unbounded_channel();
        Crawl {
            frontier,
            limits,
            tasks: JoinSet::new(),
            results,
            results_tx,
            parts,
            parts_tx,
            in_flight: 0,
            pages_this_run: 0,
        }
    }

    /// Runs the loop; however it ends, the frontier is left with nothing
    /// running beside it ([`Frontier::finish`]).
    pub(crate) async fn run(
        &mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<RunOutcome, EngineError> {
        let result = self.run_loop(shutdown).await;
        let finished = self.frontier.finish(result.is_ok()).await;
        let outcome = result?;
        finished?;
        Ok(outcome)
    }

    async fn run_loop(
        &mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<RunOutcome, EngineError> {
        tokio::pin!(shutdown);
        let stopper = self.frontier.stopper();
        let settle = self.frontier.settle_time();
        let mut next_lease = Some(Instant::now());
        loop {
            let now = Instant::now();
            if self.limit_reached() && self.in_flight == 0 {
                self.frontier.settle().await?;
                return Ok(RunOutcome::Limit);
            }
            let room = self.room();
            if room > 0 && next_lease.is_some_and(|at| at <= now) {
                let call = self.frontier.lease(room);
                let leased = match interruptible(shutdown.as_mut(), &stopper, settle, call).await {
                    Call::Done(leased) => leased?,
                    // Leases the call granted are the frontier's: they go
                    // back as it stops.
                    Call::Stopped(_) => return self.stop().await,
                };
                for (lease, prior) in leased.leases {
                    self.spawn(lease, prior);
                }
                next_lease = match leased.next {
                    Next::Now => Some(now),
                    Next::At(at) => Some(at),
                    Next::Finish => None,
                    Next::Empty if self.in_flight == 0 => {
                        // Nothing leasable and nothing running: make everything
                        // durable; what it committed may queue new requests.
                        if self.frontier.settle().await? == 0 {
                            return Ok(self.frontier.idle_outcome());
                        }
                        continue;
                    }
                    Next::Empty => {
                        self.frontier.starved()?;
                        None
                    }
                };
                if let Next::At(at) = leased.next
                    && self.limits.until_idle
                    && self.in_flight == 0
                    && at > Instant::now() + crate::config::IDLE_WAIT
                {
                    // Settling may make requests of other hosts leasable.
                    if self.frontier.settle().await? == 0 {
                        return Ok(RunOutcome::Idle);
                    }
                    next_lease = Some(Instant::now());
                    continue;
                }
            }
            // Past the deadline nothing is leased; waking for it again would spin.
            let deadline = self.limits.deadline.filter(|at| *at > Instant::now());
            let wake = match (next_lease.filter(|_| self.room() > 0), deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                biased;
                () = &mut shutdown => return self.stop().await,
                // Before the results: a busy worker must still renew its leases.
                event = self.frontier.next_event() => {
                    let call = self.frontier.on_event(event);
                    match interruptible(shutdown.as_mut(), &stopper, settle, call).await {
                        Call::Done(sooner) => {
                            if let Some(at) = sooner? {
                                next_lease = Some(next_lease.map_or(at, |planned| planned.min(at)));
                            }
                        }
                        Call::Stopped(_) => return self.stop().await,
                    }
                }
                Some(part) = self.parts.recv() => {
                    let call = self.frontier.queue_part(part);
                    match interruptible(shutdown.as_mut(), &stopper, settle, call).await {
                        Call::Done(queued) => queued?,
                        Call::Stopped(_) => return self.stop().await,
                    }
                }
                Some(first) = self.results.recv() => {
                    let mut finished = vec![first];
                    let together = self.frontier.complete_together();
                    while finished.len() < together {
                        match self.results.try_recv() {
                            Ok(next) => finished.push(next),
                            Err(_) => break,
                        }
                    }
                    self.in_flight -= finished.len();
                    task::reap(&mut self.tasks);
                    let call = self.frontier.complete(finished);
                    match interruptible(shutdown.as_mut(), &stopper, settle, call).await {
                        Call::Done(put_back) => {
                            self.pages_this_run = self.pages_this_run.saturating_sub(put_back?);
                        }
                        // The leases of pages whose completions did not settle
                        // are still held: handed back with the others (or, if a
                        // completion did commit before its answer was lost,
                        // found completed).
                        Call::Stopped(_) => return self.stop().await,
                    }
                    // A slot is free, and the host may be under its limit again.
                    next_lease = Some(Instant::now());
                }
                () = sleep_until(wake), if wake.is_some() => {}
            }
        }
    }

    /// Free slots: the job's concurrency less the pages in flight, within
    /// `--max-pages`; none past `--max-duration`.
    fn room(&self) -> usize {
        if self.limit_reached() {
            return 0;
        }
        let free = self
            .frontier
            .active()
            .config
            .concurrency
            .saturating_sub(self.in_flight);
        match self.limits.max_pages {
            Some(max) => free.min(usize::try_from(max - self.pages_this_run).unwrap_or(usize::MAX)),
            None => free,
        }
    }

    fn limit_reached(&self) -> bool {
        self.limits
            .max_pages
            .is_some_and(|max| self.pages_this_run >= max)
            || self.limits.deadline.is_some_and(|at| Instant::now() >= at)
    }

    fn spawn(&mut self, lease: F::Lease, prior: Option<crate::store::PageRecord>) {
        self.pages_this_run += 1;
        self.in_flight += 1;
        let active = self.frontier.active();
        let request = F::request(&lease);
        let job = task::Job {
            // Queued or stored before the job's scope narrowed.
            out_of_scope: active.scope.holds(request).is_err(),
            fetcher: active.fetcher.clone(),
            legs: Arc::clone(&active.legs),
            retry: active.retry,
            robots: active.robots.clone(),
            // Only a request that bypasses the seen set (seed, revisit, retry)
            // is fetched against its page record: a filtered one is new.
            prior: prior.filter(|_| request.dont_filter),
            parts: Parts::new(F::token(&lease), self.parts_tx.clone()),
            stored: active.stored.clone(),
            render: active.render.clone(),
        };
        let tx = self.results_tx.clone();
        self.tasks.spawn(async move {
            // A panic while processing comes back as a failed page.
            let result = job.run(F::request(&lease)).await;
            // The receiver is gone only when the loop has stopped; the lease
            // then goes back as the frontier stops.
            let _ = tx.send((lease, result));
        });
    }

    /// Ctrl-C: no more leases. Fetches under way get the grace period to
    /// finish and are completed, so that a clean stop fetches nothing twice;
    /// the frontier then takes back the leases of those that did not finish.
    async fn stop(&mut self) -> Result<RunOutcome, EngineError> {
        let mut completing = self.frontier.stopping();
        let deadline = Instant::now() + self.limits.grace;
        while self.in_flight > 0 && completing {
            tokio::select! {
                Some(part) = self.parts.recv() => {
                    if let Err(error) = self.frontier.queue_part(part).await {
                        completing = self.frontier.failed_while_stopping(
                            "a part of a page's links could not be queued while stopping",
                            error,
                        )?;
                    }
                }
                Some(finished) = self.results.recv() => {
                    self.in_flight -= 1;
                    match self.frontier.complete(vec![finished]).await {
                        Ok(put_back) => {
                            self.pages_this_run = self.pages_this_run.saturating_sub(put_back);
                        }
                        Err(error) => {
                            completing = self.frontier.failed_while_stopping(
                                "a finished page could not be completed while stopping",
                                error,
                            )?;
                        }
                    }
                }
                () = tokio::time::sleep_until(deadline.into()) => break,
            }
        }
        self.tasks.abort_all();
        self.frontier.stopped().await?;
        Ok(RunOutcome::Interrupted)
    }
}

/// `call`'s output, unless `shutdown` resolves first: then `stop` is called
/// and the call is given `settle` to end (`None`: as long as it takes).
/// `shutdown` is not polled again once it resolved.
async fn interruptible<T>(
    shutdown: Pin<&mut impl Future<Output = ()>>,
    stop: &dyn Fn(),
    settle: Option<Duration>,
    call: impl Future<Output = T>,
) -> Call<T> {
    tokio::pin!(call);
    tokio::select! {
        biased;
        () = shutdown => {}
        out = &mut call => return Call::Done(out),
    }
    stop();
    match settle {
        None => Call::Stopped(Some(call.await)),
        Some(time) => Call::Stopped(tokio::time::timeout(time, call).await.ok()),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
