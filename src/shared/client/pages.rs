//! Completing a page, and queuing a part of its links ahead of that: the
//! calls of `lua/complete.lua` and `lua/links.lua`, and what they carry.

use std::time::Duration;

use super::{SCRIPT_CHUNK, Shared, SharedError, array, count_at, encode_request, int, millis};
use crate::request::Request;

/// What a completion does to the page's place in the due index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DueChange {
    /// Leave it as it is.
    #[default]
    Leave,
    /// The page is not due again (never again).
    Clear,
    /// Due again at this unix time.
    At(u64),
}

/// A finished page, as the completion script takes it.
#[derive(Debug, Default)]
pub struct PageCompletion {
    /// The lease's token.
    pub token: u64,
    /// Push the host's next start this far past now (`Retry-After`, backoff).
    pub backoff: Option<Duration>,
    /// The host's robots.txt `Crawl-delay`, when it was consulted.
    pub crawl_delay: Option<Duration>,
    /// The page's fingerprint.
    pub fingerprint: [u8; 20],
    /// The page's next record ([`crate::store`]'s encoding), if any.
    pub record: Option<Vec<u8>>,
    /// The page's due time.
    pub due: DueChange,
    /// The id of the worker's output file its items are written to.
    pub output: Option<String>,
    /// The worker's WARC file holding the page's records, and its length
    /// after them (synced): the mark the completion stores.
    pub warc: Option<(String, u64)>,
    /// What the host's robots.txt said: `Some(true)` answered, `Some(false)`
    /// failed (5xx, unreachable: three in a row park the host), `None` not asked.
    pub robots_answered: Option<bool>,
    /// What went wrong with the page (a [`crate::status::snapshot::ErrorRow`]
    /// as JSON), kept among the crawl's recent errors.
    pub error: Option<String>,
    /// Counter increments.
    pub counters: Vec<(&'static str, u64)>,
    /// Items, as JSON text.
    pub items: Vec<String>,
    /// New requests: host, fingerprint, the request, the host's delay.
    pub requests: Vec<NewRequest>,
}

/// A request found by a page, ready for the seen set and the frontier.
#[derive(Debug)]
pub struct NewRequest {
    /// Its host (`host[:port]`).
    pub host: String,
    /// Its fingerprint.
    pub fingerprint: [u8; 20],
    /// The request.
    pub request: Request,
    /// The crawl's delay for its host.
    pub delay: Duration,
}

/// What a script did with the requests it was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Queued {
    /// Requests queued.
    pub queued: u64,
    /// Requests dropped as already seen.
    pub filtered: u64,
    /// Fingerprints new to the seen set.
    pub unique: u64,
}

impl Queued {
    /// This and `other` together.
    pub fn and(self, other: Queued) -> Queued {
        Queued {
            queued: self.queued + other.queued,
            filtered: self.filtered + other.filtered,
            unique: self.unique + other.unique,
        }
    }

    /// The counts at `parts[from..from + 3]` of a script's answer.
    fn read(parts: &[redis::Value], from: usize) -> Option<Queued> {
        Some(Queued {
            queued: count_at(parts, from)?,
            filtered: count_at(parts, from + 1)?,
            unique: count_at(parts, from + 2)?,
        })
    }
}

/// What the completion script did.
#[derive(Debug, PartialEq, Eq)]
pub enum Completed {
    /// Committed.
    Done {
        /// What became of the page's new requests.
        queued: Queued,
        /// This completion parked the page's host: its robots.txt failed
        /// for the third time in a row (see `lua/complete.lua`).
        parked: bool,
    },
    /// This lease was completed already (a retry after a lost reply).
    Already,
    /// The lease had expired and was reclaimed: nothing was written.
    Stale,
}

/// Appends `requests` as the scripts take them: a count, then per request its
/// host, priority, dont_filter (0/1), fingerprint, JSON and host delay (ms).
fn push_requests(args: &mut Vec<Vec<u8>>, requests: &[NewRequest]) {
    args.push(requests.len().to_string().into_bytes());
    for r in requests {
        args.push(r.host.as_bytes().to_vec());
        args.push(r.request.priority.to_string().into_bytes());
        args.push(if r.request.dont_filter {
            b"1".to_vec()
        } else {
            b"0".to_vec()
        });
        args.push(r.fingerprint.to_vec());
        args.push(encode_request(&r.request));
        args.push(millis(r.delay).into_bytes());
    }
}

impl Shared {
    /// Completes a lease of `worker` (see `lua/complete.lua`). A page with
    /// more than [`SCRIPT_CHUNK`] new requests hands all but the last chunk
    /// to `lua/links.lua` first (each chunk under the lease, idempotent
    /// through the seen set), so that no call holds Redis long; the
    /// completion carries the last chunk.
    pub async fn complete(
        &self,
        worker: &str,
        page: &PageCompletion,
    ) -> Result<Completed, SharedError> {
        let mut done = Queued::default();
        let last = page.requests.len().saturating_sub(1) / SCRIPT_CHUNK * SCRIPT_CHUNK;
        let (ahead, rest) = page.requests.split_at(last);
        for chunk in ahead.chunks(SCRIPT_CHUNK) {
            match self.links_call(worker, page.token, chunk).await? {
                Some(part) => done = done.and(part),
                // The lease is gone: the completion says why (stale, or
                // completed already by an attempt whose answer was lost).
                None => break,
            }
        }
        Ok(match self.complete_call(worker, page, rest).await? {
            Completed::Done { queued, parked } => Completed::Done {
                queued: done.and(queued),
                parked,
            },
            other => other,
        })
    }

    /// One call of `lua/complete.lua` with `requests` as the page's.
    async fn complete_call(
        &self,
        worker: &str,
        page: &PageCompletion,
        requests: &[NewRequest],
    ) -> Result<Completed, SharedError> {
        let mut args = vec![
            worker.as_bytes().to_vec(),
            page.token.to_string().into_bytes(),
            page.backoff
                .map_or_else(|| "0".to_owned(), millis)
                .into_bytes(),
            page.crawl_delay
                .map_or_else(|| "-1".to_owned(), millis)
                .into_bytes(),
        ];
        args.push(page.fingerprint.to_vec());
        args.push(page.record.clone().unwrap_or_default());
        args.push(match page.due {
            DueChange::Leave => b"-".to_vec(),
            DueChange::Clear => Vec::new(),
            DueChange::At(at) => at.to_string().into_bytes(),
        });
        args.push(page.output.clone().unwrap_or_default().into_bytes());
        args.push(match page.robots_answered {
            Some(true) => b"ok".to_vec(),
            Some(false) => b"failed".to_vec(),
            None => Vec::new(),
        });
        let (warc_file, warc_len) = page
            .warc
            .as_ref()
            .map_or((String::new(), 0), |(file, len)| (file.clone(), *len));
        args.push(warc_file.into_bytes());
        args.push(warc_len.to_string().into_bytes());
        args.push(page.error.clone().unwrap_or_default().into_bytes());
        args.push(crate::status::snapshot::MAX_ERRORS.to_string().into_bytes());
        args.push(page.counters.len().to_string().into_bytes());
        for (name, by) in &page.counters {
            args.push(name.as_bytes().to_vec());
            args.push(by.to_string().into_bytes());
        }
        args.push(page.items.len().to_string().into_bytes());
        args.extend(page.items.iter().map(|i| i.as_bytes().to_vec()));
        push_requests(&mut args, requests);
        let value = self
            .script("completing a page", |s| &s.complete, &[page.token], &args)
            .await?;
        let parts = array(&value).ok_or_else(|| self.corrupt("the completion script's answer"))?;
        match parts.first().and_then(int) {
            Some(0) => Ok(Completed::Stale),
            Some(1) => Ok(Completed::Already),
            Some(2) => match (Queued::read(parts, 1), count_at(parts, 4)) {
                (Some(queued), Some(parked)) => {
                    if let Some(commits) = super::commits::commits_at(parts, 5) {
                        self.committed_at(commits);
                        self.note_committed(worker, commits, page.token);
                    }
                    Ok(Completed::Done {
                        queued,
                        parked: parked == 1,
                    })
                }
                _ => Err(self.corrupt("the completion script's answer")),
            },
            _ => Err(self.corrupt("the completion script's answer")),
        }
    }

    /// Queues a part of the links of a page `worker` holds leased as `token`,
    /// ahead of its completion (see `lua/links.lua`), [`SCRIPT_CHUNK`] per
    /// call: what became of them, or `None` when the lease is no longer this
    /// worker's (nothing more is written).
    pub async fn queue_links(
        &self,
        worker: &str,
        token: u64,
        requests: &[NewRequest],
    ) -> Result<Option<Queued>, SharedError> {
        let mut done = Queued::default();
        for chunk in requests.chunks(SCRIPT_CHUNK) {
            match self.links_call(worker, token, chunk).await? {
                Some(part) => done = done.and(part),
                None => return Ok(None),
            }
        }
        Ok(Some(done))
    }

    /// One call of `lua/links.lua`.
    async fn links_call(
        &self,
        worker: &str,
        token: u64,
        requests: &[NewRequest],
    ) -> Result<Option<Queued>, SharedError> {
        let mut args = vec![worker.as_bytes().to_vec(), token.to_string().into_bytes()];
        push_requests(&mut args, requests);
        let value = self
            .script(
                "queuing a part of a page's links",
                |s| &s.links,
                &[token],
                &args,
            )
            .await?;
        let corrupt = || self.corrupt("the links script's answer");
        let parts = array(&value).ok_or_else(corrupt)?;
        match parts.first().and_then(int) {
            Some(0) => Ok(None),
            Some(2) => Queued::read(parts, 1).map(Some).ok_or_else(corrupt),
            _ => Err(corrupt()),
        }
    }
}
