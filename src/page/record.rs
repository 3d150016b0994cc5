//! What a finished page means for its page record: [`page_write`], the one
//! rule both crawl loops apply, so that a page means the same whichever
//! frontier it came from. The rules themselves (change, version, due time) are
//! [`crate::revisit`]'s. Depends on [`crate::revisit`], [`crate::item`] and
//! the store's page record.

use crate::item::Item;
use crate::revisit::{Change, Observation, Schedule};
use crate::store::PageRecord;
use crate::store::records::unix_now;

/// How a lease ended, as far as its page record is concerned.
pub struct PageEnd {
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
pub enum PageWrite {
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
pub fn page_write(
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
