//! The embedded frontier of `legcrawl reparse`: instead of the queue, it
//! leases the stored pages whose items older legs made, one visit over the
//! page records in their stored order, each with its record; the page's task
//! reads its response back ([`crate::page::reparse`]) and its completion is a
//! fetched page's (record, items, links queued for the next crawl run).
//!
//! Nothing marks a page but its own record: a completion stores the job
//! version whose legs ran ([`PageRecord::legs`]), durably with the page's
//! items, so a run stopped or killed midway is resumed by the next `reparse`
//! visiting the records again and skipping the pages done. Depends on the
//! store and [`crate::page`].

use std::collections::VecDeque;

use super::{Embedded, EngineError};
use crate::engine::frontier::{Leased, Next};
use crate::store::{Lease, PageRecord, State};

/// Page records read from the state at a time.
const VISIT_CHUNK: usize = 1024;

/// What `reparse` makes of a stored page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stale {
    /// Its items stand, made by the legs in force: nothing to do.
    No,
    /// Older legs made its items and its response is stored: the legs run
    /// over it.
    Stored,
    /// Older legs made its items but no response of it is stored (fetched
    /// before `--warc`, or without one): its next change runs the legs.
    NotStored,
}

impl Stale {
    /// What `record` is under the legs in force since job version
    /// `legs_since`. Only a page whose last answer ran legs counts: not one
    /// gone, withdrawn, failed or redirected.
    pub(crate) fn of(record: &PageRecord, legs_since: u32) -> Stale {
        let ran_legs = !record.gone
            && record.withdrawn.is_none()
            && record.version > 0
            && !(300..400).contains(&record.status);
        // A record from before legs were kept: made by the first version.
        if !ran_legs || record.legs.max(1) >= legs_since {
            return Stale::No;
        }
        match record.response {
            Some(_) => Stale::Stored,
            None => Stale::NotStored,
        }
    }
}

/// Counts the stored pages the legs in force since job version `legs_since`
/// have not seen: `(with a stored response, without)`.
pub(crate) fn count_stale(state: &State, legs_since: u32) -> Result<(u64, u64), EngineError> {
    let (mut stored, mut not_stored) = (0, 0);
    state.for_each_page(|_, record| {
        match Stale::of(record, legs_since) {
            Stale::Stored => stored += 1,
            Stale::NotStored => not_stored += 1,
            Stale::No => {}
        }
        true
    })?;
    Ok((stored, not_stored))
}

/// The visit of one reparse run.
pub(super) struct Visit {
    /// The first job version of the legs in force.
    legs_since: u32,
    /// Where the visit goes on from; `None` once it reached the end.
    from: Option<Vec<u8>>,
    /// Pages found to reparse, not leased yet.
    ready: VecDeque<PageRecord>,
}

impl Visit {
    /// A visit from the first page record.
    pub(super) fn new(legs_since: u32) -> Visit {
        Visit {
            legs_since,
            from: Some(Vec::new()),
            ready: VecDeque::new(),
        }
    }

    /// True once every record was visited and leased.
    pub(super) fn done(&self) -> bool {
        self.from.is_none() && self.ready.is_empty()
    }
}

impl Embedded<'_> {
    /// [`crate::engine::frontier::Frontier::lease`] of a reparse run: up to
    /// `room` stored pages, each with its record.
    pub(super) fn lease_stored(&mut self, room: usize) -> Result<Leased<Lease>, EngineError> {
        let Some(visit) = self.reparse.as_mut() else {
            return Ok(Leased {
                leases: Vec::new(),
                next: Next::Empty,
            });
        };
        let mut leases = Vec::new();
        while leases.len() < room {
            if let Some(record) = visit.ready.pop_front() {
                leases.push((Lease::of_page(record.revisit_request()), Some(record)));
                continue;
            }
            let Some(from) = visit.from.take() else {
                break;
            };
            let (ready, legs_since) = (&mut visit.ready, visit.legs_since);
            let mut not_stored = 0;
            visit.from = self
                .state
                .visit_pages_from(&from, VISIT_CHUNK, |_, record| {
                    match Stale::of(record, legs_since) {
                        Stale::Stored => ready.push_back(record.clone()),
                        Stale::NotStored => not_stored += 1,
                        Stale::No => {}
                    }
                })?;
            if not_stored > 0 {
                self.state.count("reparse/not_stored", not_stored);
            }
        }
        let next = if visit.done() { Next::Empty } else { Next::Now };
        Ok(Leased { leases, next })
    }
}
