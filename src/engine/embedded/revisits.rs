//! The engine's side of incremental re-crawls: whether a run starts a cycle or
//! resumes one, and what a finished page means for its record.
//!
//! [`begin_cycle`] runs once per run before any lease; the `Embedded` methods here
//! run in the completion of each lease, in the open group, so a page record is
//! durable exactly when the page's items are. The rules themselves (change,
//! version, due time) are [`crate::revisit`]'s. Depends on [`crate::store`],
//! [`crate::revisit`] and the embedded frontier.

use super::{Embedded, EngineError};
use crate::config::CrawlConfig;
use crate::item::Item;
use crate::page::record::{self, PageEnd, PageWrite, page_write};
use crate::page::scope::Scope;
use crate::revisit::Schedule;
use crate::store::State;
use crate::store::records::{RunOutcome, unix_now};
use crate::store::{Budget, Lease};

/// Starts a new cycle unless the last run left one to finish: it was interrupted,
/// killed, failed or stopped by a limit, and requests are still queued.
/// A new cycle first makes the due index follow the revisit policy in force.
/// With a revisit budget, the pages it governs are queued by worth (see
/// [`Budget`]).
pub(super) fn begin_cycle(
    state: &mut State,
    config: &CrawlConfig,
    schedule: &Schedule,
    scope: &Scope,
) -> Result<(), EngineError> {
    let worth = |record: &crate::store::PageRecord, at: u64| schedule.worth(record, at);
    let budget = config.revisit_budget.map(|revisits| Budget {
        revisits,
        worth: &worth,
    });
    let previous = state.previous_run()?;
    if let Some(previous) = previous.filter(|run| {
        !matches!(run.outcome, RunOutcome::Drained | RunOutcome::Idle) && state.frontier_len() > 0
    }) {
        let due = state.resume_cycle(&config.fingerprint_headers, budget.as_ref())?;
        tracing::info!(
            queued = state.frontier_len(),
            due,
            "resuming the cycle run {} left ({})",
            previous.id,
            previous.outcome.as_str()
        );
        return Ok(());
    }
    let now = unix_now();
    let left = std::cell::Cell::new(0u64);
    let moved = state.follow_revisit_policy(&record::due_policy(schedule, scope), |page| {
        let (due, leaves) = record::due(schedule, scope, page, now);
        left.set(left.get() + u64::from(leaves));
        due
    })?;
    crate::engine::say_moved(moved, left.get());
    let start = state.start_cycle(unix_now(), &config.fingerprint_headers, budget.as_ref())?;
    tracing::info!(
        seeds = start.seeds,
        due = start.due,
        held = start.held,
        parked = start.parked,
        "new cycle: seeds and due pages queued again"
    );
    Ok(())
}

impl Embedded<'_> {
    /// Records what a finished lease saw (see [`page_write`]) in the open group.
    pub(super) fn note_page(
        &mut self,
        lease: &Lease,
        end: PageEnd,
        items: &mut Vec<Item>,
        counters: &mut Vec<(&'static str, u64)>,
    ) -> Result<(), EngineError> {
        let identity = self.active.legs.identity_field();
        match page_write(
            &self.active.schedule,
            &lease.request,
            end,
            identity,
            items,
            counters,
        ) {
            PageWrite::Put {
                record,
                previous_due,
            } => {
                let fp = self.fingerprint(&lease.request);
                self.state.put_page(fp, *record, previous_due)?;
            }
            PageWrite::KeepDue(due) => {
                let fp = self.fingerprint(&lease.request);
                self.state.keep_due(&fp, due);
            }
            PageWrite::Nothing => {}
        }
        Ok(())
    }

    /// `request`'s fingerprint with the crawl's fingerprint headers (the key of its
    /// page record).
    pub(super) fn fingerprint(
        &self,
        request: &crate::request::Request,
    ) -> crate::fingerprint::Fingerprint {
        crate::fingerprint::fingerprint(request, &self.active.config.fingerprint_headers)
    }
}
