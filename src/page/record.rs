//! What a finished page means for its page record and the change feed:
//! [`page_write`], the one rule both crawl loops apply, so that a page means
//! the same whichever frontier it came from. The rules themselves (change,
//! version, due time) are [`crate::revisit`]'s, the items' identities and
//! deletion records [`super::feed`]'s. Depends on [`crate::revisit`],
//! [`crate::item`], [`super::feed`] and the store's page record.

use super::feed::{self, Deletions};
use super::scope::Scope;
use crate::item::Item;
use crate::page::Reparse;
use crate::revisit::{Change, Observation, Schedule};
use crate::store::records::unix_now;
use crate::store::{PageRecord, WarcAt, Withdrawn};

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
    /// It was not fetched: the job's scope no longer holds it.
    pub out_of_scope: bool,
    /// The job version whose legs ran (kept in the record with the items
    /// they made).
    pub legs: u32,
    /// Where the response the legs ran on is archived (`None`: not archived,
    /// or no legs ran on a response).
    pub response: Option<WarcAt>,
    /// What `legcrawl reparse` did (`None`: the page was fetched).
    pub reparse: Option<Reparse>,
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
/// record (and its items' version, added to `items`, after the deletion
/// records of the items it no longer makes, by the identity field `identity`;
/// a page gone or out of scope gets the deletion records of all its items
/// instead); for a revisit that ended
/// with nothing to record (failed for good, refused by robots.txt) and was not
/// queued again, its place in the due index, so that it is due in the next
/// cycle; for a new page that failed for good, a record of the failure (see
/// [`Schedule::failed`]), due in the next cycle too. A page whose stored
/// response `legcrawl reparse` ran the legs over keeps its content and gets
/// its items as a new version (one it could not read back is left as it
/// was). A record keeps the job version whose legs made its items and where
/// their response is archived. The page's outcome counter goes into
/// `counters`. Used by both the embedded crawl loop and the shared
/// worker, so that a page means the same in either.
pub fn page_write(
    schedule: &Schedule,
    request: &crate::request::Request,
    end: PageEnd,
    identity: Option<&str>,
    items: &mut Vec<Item>,
    counters: &mut Vec<(&'static str, u64)>,
) -> PageWrite {
    let Some(reparse) = end.reparse else {
        return fetched(schedule, request, end, identity, items, counters);
    };
    match (reparse, end.prior) {
        (Reparse::Done, Some(mut record)) if !end.out_of_scope => {
            // The page's content is the same, its items are a new version.
            let now = unix_now();
            let version = record.version.saturating_add(1);
            let standing = record
                .withdrawn
                .is_none()
                .then(|| std::mem::take(&mut record.items));
            record.items = new_version(
                standing.as_deref(),
                &record.final_url,
                version,
                now,
                identity,
                items,
                counters,
            );
            record.version = version;
            record.legs = end.legs;
            counters.push(("pages/reparsed", 1));
            PageWrite::Put {
                previous_due: record.next_due,
                record: Box::new(record),
            }
        }
        // Unreadable, or with no record: the page is left as it was.
        _ => {
            items.clear();
            PageWrite::Nothing
        }
    }
}

/// [`page_write`] for a page that was fetched.
fn fetched(
    schedule: &Schedule,
    request: &crate::request::Request,
    end: PageEnd,
    identity: Option<&str>,
    items: &mut Vec<Item>,
    counters: &mut Vec<(&'static str, u64)>,
) -> PageWrite {
    let PageEnd {
        seen,
        prior,
        failed,
        requeued,
        out_of_scope,
        legs,
        response,
        ..
    } = end;
    if out_of_scope {
        counters.push(("pages/out_of_scope", 1));
        let Some(mut record) = prior else {
            return PageWrite::Nothing;
        };
        let now = unix_now();
        let previous_due = record.next_due;
        *items = feed::withdraw(&mut record, Withdrawn::OutOfScope, identity, now);
        count_deletions(items, counters);
        // Looked at again after the longest interval, as a gone page: in
        // scope again by then, it is fetched as a changed page.
        record.next_due = schedule.gone_due(&record.url, now);
        return PageWrite::Put {
            record: Box::new(record),
            previous_due,
        };
    }
    match (seen, prior) {
        (Some(seen), prior) => {
            // The fetch's own time, so that a WARC revisit record can name the
            // capture this record stands for by its date.
            let now = match seen.fetched_at {
                0 => unix_now(),
                at => at,
            };
            let (mut record, change) = schedule.record(prior.as_ref(), request, &seen, now);
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
                if let (Change::Changed, Some(prior)) = (change, &prior) {
                    for item in items.iter_mut() {
                        item.insert("previous_hash".into(), prior.content_hash.clone().into());
                    }
                }
                let standing = prior
                    .as_ref()
                    .filter(|prior| prior.withdrawn.is_none())
                    .map(|prior| prior.items.as_slice());
                record.items = new_version(
                    standing,
                    &record.final_url,
                    record.version,
                    now,
                    identity,
                    items,
                    counters,
                );
                record.withdrawn = None;
                record.legs = legs;
                record.response = response;
            } else if gone {
                *items = feed::withdraw(&mut record, Withdrawn::Gone, identity, now);
                count_deletions(items, counters);
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

/// Makes `items` a page's items of version `version`: each gets the version,
/// and the deletion records of the items it no longer makes (compared with
/// `standing`, the identities of the items that stood; `None` when none did)
/// go before them. Returns the new items' identities.
fn new_version(
    standing: Option<&[Option<String>]>,
    url: &str,
    version: u32,
    at: u64,
    identity: Option<&str>,
    items: &mut Vec<Item>,
    counters: &mut Vec<(&'static str, u64)>,
) -> Vec<Option<String>> {
    let ids = feed::identities(items, identity);
    let mut fed = match standing {
        Some(standing) => Deletions {
            field: identity,
            url,
            version,
            at,
        }
        .of(standing, &ids, feed::NOT_EXTRACTED),
        None => Vec::new(),
    };
    count_deletions(&fed, counters);
    for item in items.iter_mut() {
        item.insert("version".into(), version.into());
    }
    if !fed.is_empty() {
        fed.append(items);
        *items = fed;
    }
    ids
}

/// Counts the deletion records among `items` (`items/deleted`).
fn count_deletions(items: &[Item], counters: &mut Vec<(&'static str, u64)>) {
    if !items.is_empty() {
        counters.push(("items/deleted", items.len() as u64));
    }
}

/// What the due index follows, as one description: the revisit policy and
/// the job's scope. A cycle that starts under another description moves the
/// stored pages' due times to what [`due`] says.
pub fn due_policy(schedule: &Schedule, scope: &Scope) -> String {
    format!("{}|{}", schedule.describe(), scope.describe())
}

/// When `record`'s page is due under `schedule` and `scope`, and whether it
/// just left the scope: a page the scope no longer holds whose items stand is
/// due `now`, so that this cycle withdraws them unfetched (see
/// [`page_write`]); one withdrawn out of scope is due when its policy asks a
/// gone page again, or `now` when the scope holds it again (it is then
/// fetched as a changed page). Any other page is due when its policy says.
pub fn due(
    schedule: &Schedule,
    scope: &Scope,
    record: &PageRecord,
    now: u64,
) -> (Option<u64>, bool) {
    let held = scope.holds(&record.revisit_request()).is_ok();
    let withdrawn = record.withdrawn == Some(Withdrawn::OutOfScope);
    match (held, withdrawn) {
        (false, false) => (Some(now), true),
        (false, true) => (record.next_due, false),
        (true, true) => (Some(now), false),
        (true, false) => (schedule.due(record), false),
    }
}
