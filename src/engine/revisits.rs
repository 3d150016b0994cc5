//! The engine's side of incremental re-crawls: whether a run starts a cycle or
//! resumes one, and what a finished page means for its record.
//!
//! [`begin_cycle`] runs once per run before any lease; the `Crawl` methods here
//! run in the completion of each lease, in the open group, so a page record is
//! durable exactly when the page's items are. The rules themselves (change,
//! version, due time) are [`crate::revisit`]'s. Depends on [`crate::store`],
//! [`crate::revisit`] and the engine's `Crawl`.

use super::{Crawl, EngineError, Lease};
use crate::config::CrawlConfig;
use crate::item::Item;
use crate::revisit::{Change, Observation, Schedule};
use crate::store::records::{RunOutcome, unix_now};
use crate::store::{PageRecord, State};

/// Starts a new cycle unless the last run left one to finish: it was interrupted,
/// killed, failed or stopped by a limit, and requests are still queued.
/// A new cycle first makes the due index follow the revisit policy in force.
pub(super) fn begin_cycle(
    state: &mut State,
    config: &CrawlConfig,
    schedule: &Schedule,
) -> Result<(), EngineError> {
    let previous = state.previous_run()?;
    if let Some(previous) = previous.filter(|run| {
        !matches!(run.outcome, RunOutcome::Drained | RunOutcome::Idle) && state.frontier_len() > 0
    }) {
        let due = state.resume_cycle(&config.fingerprint_headers)?;
        tracing::info!(
            queued = state.frontier_len(),
            due,
            "resuming the cycle run {} left ({})",
            previous.id,
            previous.outcome.as_str()
        );
        return Ok(());
    }
    let moved = state.follow_revisit_policy(&schedule.describe(), |record| schedule.due(record))?;
    if moved > 0 {
        tracing::info!(
            pages = moved,
            "the revisit policy changed: due times follow the new one"
        );
    }
    let start = state.start_cycle(unix_now(), &config.fingerprint_headers)?;
    tracing::info!(
        seeds = start.seeds,
        due = start.due,
        held = start.held,
        parked = start.parked,
        "new cycle: seeds and due pages queued again"
    );
    Ok(())
}

/// How a lease ended, as far as its page record is concerned.
pub(crate) struct PageEnd {
    /// What the fetch saw (`None`: no final answer).
    pub seen: Option<Observation>,
    /// The page record it was fetched against.
    pub prior: Option<PageRecord>,
    /// It failed for good, with this status (0: no answer).
    pub failed: Option<u16>,
    /// It was put back in the frontier.
    pub requeued: bool,
}

/// What a finished lease means for its page record (see [`page_write`]).
#[derive(Debug)]
pub(crate) enum PageWrite {
    /// Write this record; `previous_due` is where the page was in the due index.
    Put {
        /// The page's next record.
        record: Box<PageRecord>,
        /// The page's place in the due index before (to move it from).
        previous_due: Option<u64>,
    },
    /// Nothing new to record, but the page stays due at this time.
    KeepDue(u64),
    /// Nothing to write.
    Nothing,
}

/// What a finished lease of `request` saw, as its page record: the page's next
/// record (and its items' version, added to `items`); for a revisit that ended
/// with nothing to record (failed for good, refused by robots.txt) and was not
/// queued again, its place in the due index, so that it is due in the next
/// cycle; for a new page that failed for good, a record of the failure (see
/// [`Schedule::failed`]), due in the next cycle too. The page's outcome counter
/// goes into `counters`. Used by both the embedded crawl loop and the shared
/// worker, so that a page means the same in either.
pub(crate) fn page_write(
    schedule: &Schedule,
    request: &crate::request::Request,
    end: PageEnd,
    items: &mut Vec<Item>,
    counters: &mut Vec<(&'static str, u64)>,
) -> PageWrite {
    let PageEnd {
        seen,
        prior,
        failed,
        requeued,
    } = end;
    match (seen, prior) {
        (Some(seen), prior) => {
            // The fetch's own time, so that a WARC revisit record can name the
            // capture this record stands for by its date.
            let now = match seen.fetched_at {
                0 => unix_now(),
                at => at,
            };
            let (record, change) = schedule.record(prior.as_ref(), request, &seen, now);
            // Each finished page counts under one outcome: a 404 or 410 is
            // gone, even when its status is kept (and makes items).
            let gone = matches!(seen.status, 404 | 410);
            counters.push((
                if gone {
                    Change::Gone.counter()
                } else {
                    change.counter()
                },
                1,
            ));
            if change.stores_items() {
                for item in items.iter_mut() {
                    item.insert("version".into(), record.version.into());
                    if let (Change::Changed, Some(prior)) = (change, &prior) {
                        item.insert("previous_hash".into(), prior.content_hash.clone().into());
                    }
                }
            } else {
                items.clear();
            }
            PageWrite::Put {
                record: Box::new(record),
                previous_due: prior.and_then(|p| p.next_due),
            }
        }
        (None, Some(prior)) if !requeued => match prior.next_due {
            Some(due) => PageWrite::KeepDue(due.max(unix_now())),
            None => PageWrite::Nothing,
        },
        (None, None) if !requeued => match failed {
            Some(status) => PageWrite::Put {
                record: Box::new(Schedule::failed(request, status, unix_now())),
                previous_due: None,
            },
            None => PageWrite::Nothing,
        },
        (None, _) => PageWrite::Nothing,
    }
}

impl Crawl<'_> {
    /// Records what a finished lease saw (see [`page_write`]) in the open group.
    pub(super) fn note_page(
        &mut self,
        lease: &Lease,
        end: PageEnd,
        items: &mut Vec<Item>,
        counters: &mut Vec<(&'static str, u64)>,
    ) -> Result<(), EngineError> {
        match page_write(&self.schedule, &lease.request, end, items, counters) {
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

    /// True when the page `request` asks for is fetched in this cycle anyway
    /// (see [`crate::revisit::redirect_is_redundant`]).
    pub(super) fn fetched_this_cycle(
        &self,
        request: &crate::request::Request,
    ) -> Result<bool, EngineError> {
        let fp = self.fingerprint(request);
        let record = self.state.page(&fp)?;
        Ok(crate::revisit::redirect_is_redundant(
            record.as_ref(),
            unix_now(),
            self.run_started,
        ))
    }

    /// True when `request`, a sitemap entry with a `lastmod`, makes its known
    /// page due now and the page is not fetched in this cycle anyway.
    pub(super) fn lastmod_makes_due(
        &self,
        request: &crate::request::Request,
    ) -> Result<bool, EngineError> {
        let fp = self.fingerprint(request);
        let record = self.state.page(&fp)?;
        Ok(crate::revisit::lastmod_makes_due(record.as_ref(), request)
            && !crate::revisit::redirect_is_redundant(
                record.as_ref(),
                unix_now(),
                self.run_started,
            ))
    }

    /// `request`'s fingerprint with the crawl's fingerprint headers (the key of its
    /// page record).
    pub(super) fn fingerprint(
        &self,
        request: &crate::request::Request,
    ) -> crate::fingerprint::Fingerprint {
        crate::fingerprint::fingerprint(request, &self.config.fingerprint_headers)
    }
}
