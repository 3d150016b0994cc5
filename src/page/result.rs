//! What one page's task hands the engine loop: [`PageResult`]. `page` fills
//! it, `parts` fills it while the legs run in parts, the loop completes it.
//! Depends on [`crate::revisit`], [`crate::store`]'s page record and
//! [`crate::warc`]'s captures only.

use std::time::Duration;

use crate::item::Item;
use crate::request::Request;
use crate::revisit::Observation;
use crate::store::PageRecord;
use crate::warc::Capture;

/// What fetching and processing one request produced.
#[derive(Debug, Default)]
pub struct PageResult {
    /// New requests (links, a redirect target, or the request itself to retry).
    pub requests: Vec<Request>,
    /// Items to store.
    pub items: Vec<Item>,
    /// Counter increments.
    pub counters: Vec<(&'static str, u64)>,
    /// No request to this host should start before this much time has passed
    /// (retry backoff, `Retry-After`, robots.txt unavailable).
    pub backoff: Option<Duration>,
    /// The host's robots.txt `Crawl-delay` (capped), when robots.txt was consulted.
    pub crawl_delay: Option<Duration>,
    /// Set when the request was not fetched by rule (`robots`).
    pub blocked: Option<&'static str>,
    /// The host's robots.txt answered 5xx or could not be reached; the request was
    /// put back.
    pub robots_unavailable: bool,
    /// What the fetch saw, for the page record (`None`: no final answer, or an
    /// error answer to a revisit, which keeps the record as it was).
    pub seen: Option<Observation>,
    /// The page record the request was fetched against (a revisit), handed back.
    pub prior: Option<PageRecord>,
    /// The request was queued again (a retry, or robots.txt unavailable).
    pub requeued: bool,
    /// The request was not fetched: the job's scope no longer holds it
    /// ([`crate::page::scope::Scope::holds`]).
    pub out_of_scope: bool,
    /// No connection could be made to the host (DNS, refused, TLS), for the page
    /// or for its robots.txt: the fetcher's one-line message.
    pub unreachable: Option<String>,
    /// The host sent a response to the page (of any status).
    pub answered: bool,
    /// The page failed for good (counted as `fetch/failed`): the status of the
    /// last answer, or 0 when there was none (connection, decoding, a panic).
    pub failed: Option<u16>,
    /// The exchange to archive (with `--warc`): the page's response, or a
    /// revisit of its record when it is unchanged.
    pub captures: Vec<Capture>,
    /// The captures as WARC records ([`crate::warc::encode`]), made in the
    /// page's task; the engine appends them when it completes the page.
    pub archived: Vec<u8>,
    /// The legs ran over the page's response (fetched, or read back).
    pub legs_ran: bool,
    /// The offset in `archived` of the response record the legs ran on, which
    /// the page record keeps for `legcrawl reparse`.
    pub response_at: Option<u64>,
    /// What `legcrawl reparse` did with the page (`None`: it was fetched).
    pub reparse: Option<Reparse>,
}

/// How reading a page's stored response back went (`legcrawl reparse`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reparse {
    /// The legs ran over it.
    Done,
    /// It could not be read (the file moved away or damaged): the page is
    /// left as it was.
    Unreadable,
}

impl PageResult {
    /// What went wrong with this page, one line, for `serve`'s recent errors
    /// (the same rule in both modes); `None` when nothing did. A 404 or 410 is
    /// a page's answer, not a failure, but is worth seeing.
    pub fn error_reason(&self) -> Option<String> {
        let answered = self.seen.as_ref().map_or(0, |seen| seen.status);
        match (self.failed, &self.unreachable) {
            (_, Some(message)) => Some(message.clone()),
            (Some(0), None) => Some(self.failure_kind().to_owned()),
            (Some(status), None) => Some(format!("HTTP {status}")),
            (None, None) if self.robots_unavailable => {
                Some("robots.txt unavailable: put back".to_owned())
            }
            (None, None) if answered >= 400 => Some(format!("HTTP {answered}")),
            (None, None) => None,
        }
    }

    /// What a failure without an answer was, from its counters.
    fn failure_kind(&self) -> &'static str {
        let has = |name: &str| self.counters.iter().any(|(n, _)| *n == name);
        if has("fetch/panicked") {
            "the page's task panicked"
        } else if has("fetch/undecodable") {
            "the body could not be decoded"
        } else if has("fetch/truncated") {
            "the body was cut short"
        } else {
            "network error"
        }
    }
}
