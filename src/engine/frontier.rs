//! The frontier a crawl loop runs against: what the one loop
//! ([`super::crawl`]) asks of a backend. Two implement it: the embedded
//! state ([`super::embedded`], sled, with politeness in memory) and a shared
//! crawl's Redis ([`super::worker`], with politeness in its scripts).
//!
//! A frontier leases requests, takes back finished pages (completing them
//! durably, each frontier by its own protocol: group commit for the state,
//! one script per page for Redis) and the parts of a page's links sent ahead
//! of it, and has events of its own beside the loop (a flush ending, a lease
//! renewal due, a new job version). It holds the job being run ([`Active`]).
//! Depends on [`crate::page`] and [`super::active`].

use std::future::Future;
use std::time::{Duration, Instant};

use super::EngineError;
use super::active::Active;
use crate::page::PageResult;
use crate::page::parts::Part;
use crate::request::Request;
use crate::store::PageRecord;
use crate::store::records::RunOutcome;

/// What one lease call gave.
pub(crate) struct Leased<L> {
    /// The leases, each with the page record of its URL when the request is
    /// a revisit (it is fetched conditionally against it).
    pub leases: Vec<(L, Option<PageRecord>)>,
    /// When to ask again.
    pub next: Next,
}

/// When a frontier may have more to lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// At once: the call filled all the room it was given.
    Now,
    /// Politeness holds the ready requests until then.
    At(Instant),
    /// Politeness holds them until a request in flight finishes.
    Finish,
    /// Nothing is leasable: nothing is queued that could start, here or (for
    /// a shared crawl) by any worker.
    Empty,
}

/// The backend of a crawl, as the loop sees it.
///
/// Every call but [`Frontier::next_event`] may be interrupted by Ctrl-C: the
/// loop then calls the [`Frontier::stopper`] it took before the call and gives
/// the call [`Frontier::settle_time`] to end.
pub(crate) trait Frontier {
    /// A leased request, held until its page is completed.
    type Lease: Send + 'static;
    /// Something that happened beside the loop.
    type Event;

    /// The request `lease` is for.
    fn request(lease: &Self::Lease) -> &Request;

    /// The id a page's parts name its lease by.
    fn token(lease: &Self::Lease) -> u64;

    /// The job being run, and what is built from it.
    fn active(&self) -> &Active;

    /// Leases up to `room` requests, as far as politeness allows. A lease is
    /// the frontier's from when it is granted: one that is never started (a
    /// call Ctrl-C interrupted) goes back at [`Frontier::stopped`].
    fn lease(
        &mut self,
        room: usize,
    ) -> impl Future<Output = Result<Leased<Self::Lease>, EngineError>>;

    /// The most finished pages [`Frontier::complete`] takes at once: more
    /// than one only where completing together saves work (a shared worker
    /// leases their slots with one call), since the loop leases again only
    /// after the call.
    fn complete_together(&self) -> usize;

    /// Completes finished pages, in order. Returns how many of them were put
    /// back in the frontier to be fetched again (they do not count towards
    /// `--max-pages` twice).
    fn complete(
        &mut self,
        finished: Vec<(Self::Lease, PageResult)>,
    ) -> impl Future<Output = Result<u64, EngineError>>;

    /// Queues a part of a page's links that its task sent while its legs run,
    /// and answers the task.
    fn queue_part(&mut self, part: Part) -> impl Future<Output = Result<(), EngineError>>;

    /// The next event of the frontier's own. Cancel-safe: it is one branch of
    /// the loop's `select!`.
    fn next_event(&mut self) -> impl Future<Output = Self::Event>;

    /// Acts on an event; returns when leasing may give more now (`None`: no
    /// sooner than the loop planned).
    fn on_event(
        &mut self,
        event: Self::Event,
    ) -> impl Future<Output = Result<Option<Instant>, EngineError>>;

    /// Nothing could be leased while pages are in flight: what was completed
    /// may have to be made durable before its new requests can be leased.
    fn starved(&mut self) -> Result<(), EngineError>;

    /// Makes everything completed so far durable; returns the pages this made
    /// durable (what they queued may be leasable now).
    fn settle(&mut self) -> impl Future<Output = Result<usize, EngineError>>;

    /// How a run ends that can lease nothing, has nothing in flight and
    /// nothing left to settle.
    fn idle_outcome(&self) -> RunOutcome;

    /// A function that makes calls under way stop waiting for an absent
    /// backend; called at Ctrl-C, while such a call may be under way. Taken
    /// once per run.
    fn stopper(&self) -> Box<dyn Fn()>;

    /// How long a call that Ctrl-C interrupted is given to end (`None`: as long
    /// as it takes).
    fn settle_time(&self) -> Option<Duration>;

    /// Ctrl-C: no more leases. True when finished pages may still be
    /// completed during the grace period.
    fn stopping(&mut self) -> bool;

    /// A completion that failed during the grace period: `Ok(false)` stops
    /// completing (the leases are handed back), an error ends the crawl.
    fn failed_while_stopping(
        &mut self,
        what: &str,
        error: EngineError,
    ) -> Result<bool, EngineError>;

    /// After the grace period: the leases of pages that did not finish go
    /// back, and what was completed is made durable.
    fn stopped(&mut self) -> impl Future<Output = Result<(), EngineError>>;

    /// The loop ended, however (`ok`: without an error): nothing the frontier
    /// runs beside it is left running.
    fn finish(&mut self, ok: bool) -> impl Future<Output = Result<(), EngineError>>;
}
