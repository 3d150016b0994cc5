//! The embedded frontier: the crawl's state ([`State`], sled) behind
//! [`Frontier`], with politeness in memory ([`politeness::Politeness`]).
//!
//! A run of it is the state's only writer. Leasing goes host by host in turn,
//! as far as each host's politeness allows. Each finished page is completed
//! into the open group, which is sealed at
//! [`crate::store::GROUP_MAX_PAGES`]` / 2` pages or
//! [`crate::store::GROUP_MAX_AGE`], or at once when nothing else can be
//! leased, and made durable on the committer's thread (`flush`); only then do
//! its leases end, its new requests become leasable and its items reach
//! `--output`. A page with more than [`crate::store::LINK_CHUNK`] links has
//! them queued part by part, a group each, ahead of its completion. New
//! requests pass [`crate::page::accept`] and then the seen set: dedup happens
//! only here, never in legs. A host that cannot be connected to, or whose
//! robots.txt keeps failing, is parked for the run with its requests left
//! queued (`hosts`).
//!
//! A run either resumes the cycle the last run left or starts a new one
//! (`revisits`). Depends on [`crate::store`], [`crate::page`], the sink
//! ([`super::sink`]) and [`crate::warc`].

mod archive;
mod flush;
mod hosts;
pub mod politeness;
pub(super) mod progress;
pub(crate) mod reparse;
pub(crate) mod revisits;
mod watch;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::EngineError;
use super::active::Active;
use super::frontier::{Frontier, Leased, Next};
use super::sink::OutputFile;
use crate::config::CrawlConfig;
use crate::fetch::Fetcher;
use crate::legs::Leg;
use crate::page::parts::Part;
use crate::page::scope::Scope;
use crate::page::{PageResult, RetryPolicy};
use crate::request::Request;
use crate::revisit::Schedule;
use crate::robots::{RobotsCache, RobotsSettings};
use crate::store::records::{RunOutcome, unix_now};
use crate::store::{Committer, Completion, Ended, Lease, PageRecord, State};
use crate::warc::{WarcSettings, WarcWriter};
use politeness::Politeness;

/// How often the run's progress is published for `legcrawl serve`.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// The embedded frontier of one run.
pub(crate) struct Embedded<'a> {
    state: &'a mut State,
    active: Active,
    sink: Option<OutputFile>,
    /// The WARC files (`--warc`), written in step with group commit.
    warc: Option<WarcWriter>,
    /// The open WARC file and its id in the state.
    warc_file: Option<(std::path::PathBuf, u32)>,
    politeness: Politeness,
    /// Rotates which host `lease` serves first, so hosts take turns.
    turn: usize,
    progress: progress::Progress,
    /// When the progress is published next.
    tick: tokio::time::Interval,
    /// Reused by `lease` for the ready host ids.
    host_buf: Vec<u32>,
    /// The threads the state's flushes and checkpoints run on, off the loop
    /// (see `flush`).
    committer: Committer,
    /// Unix seconds when this run started (redirects to pages fetched since
    /// are not followed again).
    run_started: u64,
    /// Hosts whose last runs failed on the network (stored, see `hosts`): an
    /// answer from one of them clears its record.
    unreachable: HashSet<String>,
    /// Set for `legcrawl reparse`: the stored pages it leases instead of
    /// the queue.
    reparse: Option<reparse::Visit>,
}

/// An event of the embedded frontier's own.
pub(crate) enum Event {
    /// A flush or a checkpoint ended.
    Ended(Ended),
    /// The open group is due by its age.
    GroupDue,
    /// The progress is due.
    Tick,
}

impl<'a> Embedded<'a> {
    /// Begins or resumes the cycle, adds the seeds, and opens the outputs:
    /// the frontier of a run of `config` (its legs built from it, as
    /// `legs`) on `state`. `previous_end` is when the last run ended: the
    /// politeness delay holds across it.
    pub(crate) fn new(
        config: &CrawlConfig,
        state: &'a mut State,
        fetcher: Fetcher,
        legs: std::sync::Arc<dyn Leg>,
        schedule: Schedule,
        previous_end: Option<std::time::SystemTime>,
    ) -> Result<Embedded<'a>, EngineError> {
        // Credentials in a seed are never stored or sent.
        let seeds: Vec<String> = config
            .seeds
            .iter()
            .map(|seed| crate::canon::strip_credentials(seed).into_owned())
            .collect();
        // The stored seeds with this run's: what they are once it adds them.
        let mut every = state.seeds()?;
        every.extend(seeds.iter().cloned());
        every.sort();
        every.dedup();
        let scope = Scope::of_crawl(config, &every, &seeds);
        revisits::begin_cycle(state, config, &schedule, &scope)?;
        state.add_seeds(&seeds, &config.fingerprint_headers)?;
        if state.seeds()?.is_empty() {
            return Err(EngineError::NoSeeds {
                dir: state.dir().display().to_string(),
            });
        }
        let job = state.latest_job()?;
        let warc = match WarcSettings::of(config) {
            Some(settings) => {
                // Each run's records follow a `warcinfo` record of its job.
                let settings = match (&job, state.current_run()) {
                    (Some(job), Some(run)) => settings.describe_run(run, job.version, &job.text),
                    _ => settings,
                };
                Some(archive::open(settings, state)?)
            }
            None => None,
        };
        let robots = if config.obey_robots {
            let cache = RobotsCache::new(fetcher.clone(), RobotsSettings::from_config(config));
            cache.preload(state.robots_records()?);
            Some(cache)
        } else {
            None
        };
        let mut politeness = Politeness::new(config);
        if let Some(ended) = previous_end {
            politeness.after_previous_run(ended);
        }
        let unreachable = hosts::park_unreachable(state, &mut politeness)?;
        let active = Active {
            // The version `begin_run` stored: its legs are the pages' legs.
            version: job.map_or(0, |job| job.version),
            config: config.clone(),
            seeds: Vec::new(),
            scope,
            legs,
            fetcher,
            robots,
            schedule,
            retry: RetryPolicy::of(config),
            stored: None,
            render: crate::render::Renderer::of(config)?,
        };
        let mut frontier = Embedded::open(state, active, politeness)?;
        frontier.warc = warc;
        frontier.unreachable = unreachable;
        Ok(frontier)
    }

    /// The frontier of a `legcrawl reparse` run of `config` on `state`: it
    /// leases the stored pages whose items legs older than job version
    /// `legs_since` made, and runs `legs` over their responses, read back
    /// from `stored` (see `reparse`). Nothing is fetched: no cycle begins,
    /// no seed is added, no WARC record is written.
    pub(crate) fn reparse(
        config: &CrawlConfig,
        state: &'a mut State,
        legs: std::sync::Arc<dyn Leg>,
        stored: crate::page::reparse::StoredResponses,
        legs_since: u32,
    ) -> Result<Embedded<'a>, EngineError> {
        let seeds = state.seeds()?;
        let active = Active {
            version: state.latest_job()?.map_or(0, |job| job.version),
            config: config.clone(),
            seeds: Vec::new(),
            scope: Scope::of_crawl(config, &seeds, &[]),
            legs,
            fetcher: Fetcher::new(crate::fetch::FetchSettings::from_config(config))?,
            robots: None,
            schedule: Schedule::new(config)?,
            retry: RetryPolicy::of(config),
            stored: Some(std::sync::Arc::new(stored)),
            render: None,
        };
        let mut frontier = Embedded::open(state, active, Politeness::new(config))?;
        frontier.reparse = Some(reparse::Visit::new(legs_since));
        Ok(frontier)
    }

    /// The frontier of `active` on `state`, with its `--output` open.
    fn open(
        state: &'a mut State,
        active: Active,
        politeness: Politeness,
    ) -> Result<Embedded<'a>, EngineError> {
        let sink = match &active.config.output {
            Some(path) => Some(OutputFile::open(path, state)?),
            None => None,
        };
        let progress = progress::Progress::new(state.dir(), active.config.obey_robots);
        Ok(Embedded {
            state,
            active,
            sink,
            warc: None,
            warc_file: None,
            politeness,
            turn: 0,
            progress,
            tick: tokio::time::interval(PROGRESS_EVERY),
            host_buf: Vec::new(),
            committer: Committer::new()?,
            run_started: unix_now(),
            unreachable: HashSet::new(),
            reparse: None,
        })
    }

    /// [`Frontier::lease`] over the given hosts, starting at the next one in
    /// turn, into `out`.
    fn lease_from_hosts(
        &mut self,
        hosts: &[u32],
        room: usize,
        now: Instant,
        out: &mut Vec<(Lease, Option<PageRecord>)>,
    ) -> Result<Next, EngineError> {
        let mut next = Next::Empty;
        let turn = self.turn;
        self.turn = self.turn.wrapping_add(1);
        for k in 0..hosts.len() {
            let id = hosts[(turn + k) % hosts.len()];
            if self.politeness.is_parked(id) {
                continue;
            }
            loop {
                if out.len() >= room {
                    return Ok(Next::Now);
                }
                let name = self.state.host_name(id).unwrap_or_default();
                match self.politeness.ready_at(id, name, now) {
                    // At its in-flight limit: a finishing request wakes the loop.
                    None => {
                        next = waiting(next, None);
                        break;
                    }
                    Some(at) if at > now => {
                        next = waiting(next, Some(at));
                        break;
                    }
                    Some(_) => {}
                }
                let Some(lease) = self.state.lease_from(id)? else {
                    break;
                };
                // A request the job's scope no longer holds is dropped
                // unfetched (see `engine::crawl`): it takes no turn of its host.
                if self.active.scope.holds(&lease.request).is_ok() {
                    let name = self.state.host_name(id).unwrap_or_default();
                    self.politeness.started(id, name, now);
                }
                // Only a request that bypasses the seen set (seed, revisit,
                // retry) can have a page record: a filtered one is new.
                let prior = if lease.request.dont_filter {
                    self.state.page(&self.fingerprint(&lease.request))?
                } else {
                    None
                };
                out.push((lease, prior));
            }
        }
        Ok(next)
    }

    /// Completes one finished page into the open group; true when it was put
    /// back to be fetched again.
    async fn complete_one(
        &mut self,
        lease: Lease,
        result: PageResult,
    ) -> Result<bool, EngineError> {
        // Nothing was asked of the host for a page dropped unfetched or read
        // back.
        if !result.out_of_scope && result.reparse.is_none() {
            self.politeness.finished(lease.host_id);
        }
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
        let PageResult {
            mut requests,
            mut items,
            mut counters,
            seen,
            prior,
            failed,
            mut requeued,
            out_of_scope,
            archived,
            response_at,
            reparse,
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
        }
        let redirect = seen
            .as_ref()
            .is_some_and(|seen| (300..400).contains(&seen.status));
        self.accept(&mut requests, redirect, &mut counters)?;
        // A page with many links queues all but the last part of them in
        // groups of their own first; its record, items and completion come
        // with the last part.
        let requests = self.queue_in_parts(requests).await?;
        // In the same open group as the completion, before its record, which
        // keeps where its response is.
        let archived_at = self.archive(&archived)?;
        let response = match (archived_at, response_at) {
            (Some((file, base)), Some(at)) => Some(crate::store::WarcAt {
                file,
                offset: base + at,
            }),
            _ => None,
        };
        let end = crate::page::record::PageEnd {
            seen,
            prior,
            failed,
            requeued,
            out_of_scope,
            legs: u32::try_from(self.active.version).unwrap_or(u32::MAX),
            response,
            reparse,
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
            .complete(completion, &self.active.config.fingerprint_headers)?;
        Ok(requeued)
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
        self.queue_link_part(&requests).await?;
        // The task is gone only if it was aborted; its page then stays queued.
        let _ = ack.send((counters, back));
        Ok(())
    }

    /// Keeps the requests the crawl may queue, in place (a page's links can be
    /// a million), and counts what it drops: see [`crate::page::accept`]. The
    /// page records its rules need are read from the state.
    fn accept(
        &self,
        requests: &mut Vec<Request>,
        redirect: bool,
        counters: &mut Vec<(&'static str, u64)>,
    ) -> Result<(), EngineError> {
        let rules = crate::page::accept::Accept {
            scope: &self.active.scope,
            fingerprint_headers: &self.active.config.fingerprint_headers,
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
}

impl Frontier for Embedded<'_> {
    type Lease = Lease;
    type Event = Event;

    fn request(lease: &Lease) -> &Request {
        &lease.request
    }

    fn token(_: &Lease) -> u64 {
        // The state's parts are queued in the open group, not by lease.
        0
    }

    fn active(&self) -> &Active {
        &self.active
    }

    async fn lease(&mut self, room: usize) -> Result<Leased<Lease>, EngineError> {
        if self.reparse.is_some() {
            return self.lease_stored(room);
        }
        let now = Instant::now();
        // The ids are copied (into a buffer kept across calls) because leasing
        // needs the state mutably; names are looked up again when needed.
        let mut hosts = std::mem::take(&mut self.host_buf);
        hosts.clear();
        hosts.extend(self.state.ready_hosts().map(|(id, _, _)| id));
        let mut leases = Vec::new();
        let next = self.lease_from_hosts(&hosts, room, now, &mut leases);
        self.host_buf = hosts;
        Ok(Leased {
            leases,
            next: next?,
        })
    }

    fn complete_together(&self) -> usize {
        // A page at a time, leasing in between: group commit already batches.
        1
    }

    async fn complete(&mut self, finished: Vec<(Lease, PageResult)>) -> Result<u64, EngineError> {
        let mut put_back = 0;
        for (lease, result) in finished {
            put_back += u64::from(self.complete_one(lease, result).await?);
            // Page by page: a full pipeline waits for its flush.
            self.maybe_seal().await?;
        }
        Ok(put_back)
    }

    async fn queue_part(&mut self, part: Part) -> Result<(), EngineError> {
        self.queue_part_of_page(part).await?;
        self.maybe_seal().await
    }

    async fn next_event(&mut self) -> Event {
        let far = Instant::now() + Duration::from_secs(3600);
        // While a flush runs, its end (not the group's age) is the next event.
        let group = if self.committer.flushing() {
            far
        } else {
            self.state.group_deadline().unwrap_or(far)
        };
        tokio::select! {
            biased;
            ended = self.committer.ended() => Event::Ended(ended),
            () = tokio::time::sleep_until(group.into()) => Event::GroupDue,
            _ = self.tick.tick() => Event::Tick,
        }
    }

    async fn on_event(&mut self, event: Event) -> Result<Option<Instant>, EngineError> {
        match event {
            Event::Ended(Ended::Flush(result)) => {
                self.flush_ended(result)?;
            }
            Event::Ended(Ended::Checkpoint(result)) => self.checkpoint_ended(result)?,
            Event::GroupDue => {}
            Event::Tick => self.progress.update(self.state, &self.politeness),
        }
        self.maybe_seal().await?;
        // Leasing costs a look at memory: look again.
        Ok(Some(Instant::now()))
    }

    fn starved(&mut self) -> Result<(), EngineError> {
        // The open group's new requests become leasable once it is durable:
        // seal it now rather than when it is due.
        if !self.committer.flushing() {
            self.seal()?;
        }
        Ok(())
    }

    async fn settle(&mut self) -> Result<usize, EngineError> {
        self.commit_all().await
    }

    fn idle_outcome(&self) -> RunOutcome {
        // Requests left here are held by parked hosts (a reparse leaves the
        // links it queued to the next crawl run).
        if self.state.frontier_len() > 0 && self.reparse.is_none() {
            RunOutcome::Idle
        } else {
            RunOutcome::Drained
        }
    }

    fn stopper(&self) -> Box<dyn Fn()> {
        Box::new(|| {})
    }

    fn settle_time(&self) -> Option<Duration> {
        // Nothing here waits for a server: every call ends soon.
        None
    }

    fn stopping(&mut self) -> bool {
        tracing::info!(
            in_flight = self.state.in_flight(),
            "stopping: finishing in-flight requests"
        );
        true
    }

    fn failed_while_stopping(&mut self, _: &str, error: EngineError) -> Result<bool, EngineError> {
        Err(error)
    }

    async fn stopped(&mut self) -> Result<(), EngineError> {
        // Unfinished leases stay queued.
        self.commit_all().await?;
        self.progress.finish();
        Ok(())
    }

    async fn finish(&mut self, ok: bool) -> Result<(), EngineError> {
        // A flush or checkpoint still running is waited for, so the state is
        // left with nothing in flight; whatever is still open is committed
        // by the end of the run.
        let flushed = self.finish_flush().await;
        if ok {
            flushed?;
        }
        let checkpointed = self.finish_checkpoint().await;
        if ok {
            checkpointed?;
        }
        self.keep_cookies();
        let archived = self.archive_finish();
        if ok {
            archived?;
        }
        self.progress.publish(self.state, &self.politeness);
        Ok(())
    }
}

/// `next` with politeness holding a host until `at` (`None`: until a request
/// in flight finishes); the soonest instant wins.
fn waiting(next: Next, at: Option<Instant>) -> Next {
    match (next, at) {
        (Next::At(a), Some(b)) => Next::At(a.min(b)),
        (Next::At(a), None) => Next::At(a),
        (_, Some(b)) => Next::At(b),
        (_, None) => Next::Finish,
    }
}
