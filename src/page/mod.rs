//! Page processing, below both crawl loops (the embedded one in
//! [`crate::engine`] and the shared worker): one leased request turned into
//! what its completion needs, the same whichever frontier it came from.
//!
//! `process` fetches (robots.txt first) and runs the legs, inside a tokio
//! task per request (`task`, which turns a panic into a failed page), so
//! fetching and the legs' CPU work are spread over the runtime's threads. It
//! touches no state: it returns a [`PageResult`] for the loop to complete. A
//! page with many links hands them over in `parts` while its legs run. The
//! loop then keeps the requests [`accept`] allows (credentials, sitemap
//! `lastmod`, redirects, then [`scope`]), queues the sitemaps of the
//! robots.txt answers (`sitemaps`) and writes the page record `record`
//! says; [`PageTotals`] counts a run's pages by outcome, and
//! [`error_answers_only`] says when a run saw only error answers.
//!
//! A revisit (a request with a page record) is a conditional GET; a 304, or a 200
//! whose content hash equals the record's, is not given to the legs: the page's
//! items and links are those already stored. With `--page-requisites` a new
//! or changed 2xx page also queues its requisites; a requisite's own answer
//! runs no legs (no items, no links). Depends on [`crate::fetch`],
//! [`crate::robots`], [`crate::legs`], [`crate::revisit`], [`crate::request`],
//! [`crate::warc`]'s captures and [`crate::store`]'s page record.

pub mod accept;
pub mod feed;
pub(crate) mod parts;
pub(crate) mod record;
pub mod reparse;
mod result;
pub mod scope;
pub(crate) mod sitemaps;
pub(crate) mod task;
mod totals;

pub use totals::{PageTotals, error_answers, error_answers_only};

use std::sync::Arc;
use std::time::Duration;

use crate::fetch::{FetchError, Fetcher};
use crate::legs::{self, Leg};
use crate::render::Renderer;
use crate::request::Request;
use crate::response::Response;
use crate::revisit::{self, Change, Observation};
use crate::robots::{RobotsCache, Verdict};
use crate::store::{PageRecord, pages};
use crate::warc::{Capture, Profile, RevisitOf};
use parts::Parts;
pub use result::{PageResult, Reparse};

pub use crate::config::RETRY_STATUSES;
/// Redirect hops followed from one request before giving up.
pub const MAX_REDIRECTS: usize = 10;

/// Longest `Retry-After` honoured; longer values are capped.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// How failing answers are treated: which are retried, and which error
/// statuses still make items.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// Retries before a request is recorded as failed.
    pub max_retries: u32,
    /// Backoff before the first retry; doubles with each further retry.
    pub backoff: Duration,
    /// The error statuses kept like 2xx answers (`--keep-status`).
    pub keep: StatusSet,
    /// `--page-requisites`: a new or changed 2xx page also queues its
    /// requisites ([`crate::legs::requisites`]). Carried here, with the other
    /// per-answer rules, because both frontiers' jobs hand this policy to
    /// every page's task.
    pub page_requisites: bool,
}

/// A set of HTTP status codes (100 to 639), copied into every page's task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusSet([u64; 10]);

impl StatusSet {
    /// The set of `codes` (codes of 640 and above are left out).
    pub fn of(codes: &[u16]) -> StatusSet {
        let mut set = StatusSet::default();
        for &code in codes.iter().filter(|&&c| c < 640) {
            set.0[usize::from(code / 64)] |= 1 << (code % 64);
        }
        set
    }

    /// True when `code` is in the set.
    pub fn contains(&self, code: u16) -> bool {
        code < 640 && self.0[usize::from(code / 64)] & (1 << (code % 64)) != 0
    }
}

impl RetryPolicy {
    /// The policy `config` sets.
    pub fn of(config: &crate::config::CrawlConfig) -> RetryPolicy {
        RetryPolicy {
            max_retries: config.max_retries,
            backoff: config.retry_backoff,
            keep: StatusSet::of(&config.keep_status),
            page_requisites: config.page_requisites,
        }
    }

    /// True when an answer with `status` makes items: a 2xx, or a kept error status.
    pub fn keeps(&self, status: u16) -> bool {
        (200..300).contains(&status) || self.keep.contains(status)
    }

    /// The wait before retry number `retries + 1`.
    pub fn wait(&self, retries: u32) -> Duration {
        self.backoff.saturating_mul(1u32 << retries.min(16))
    }
}

/// Fetches `request` (conditionally when `prior`, its page record, is given) and
/// runs the legs on the response when it is new or changed.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn process(
    fetcher: &Fetcher,
    legs: &Arc<dyn Leg>,
    request: &Request,
    retry: RetryPolicy,
    robots: Option<&RobotsCache>,
    prior: Option<PageRecord>,
    parts: Option<&Parts>,
    renderer: Option<&Renderer>,
) -> PageResult {
    let mut result = PageResult {
        prior,
        ..PageResult::default()
    };
    if let Some(robots) = robots
        && !obeys_robots(robots, request, &mut result).await
    {
        return result;
    }
    let fetched = match &result.prior {
        Some(prior) => fetcher.fetch_captured(&conditional(request, prior)).await,
        None => fetcher.fetch_captured(request).await,
    };
    let mut response = match fetched {
        Ok((response, exchange)) => {
            result.captures.extend(exchange.map(|exchange| Capture {
                exchange,
                revisit: None,
            }));
            response
        }
        Err(error) => {
            fetch_failed(request, &error, retry, &mut result);
            return result;
        }
    };
    result.answered = true;
    result.counters.push(("pages/fetched", 1));
    result
        .counters
        .push(("fetch/bytes", response.body.len() as u64));
    result.counters.push((status_counter(response.status), 1));
    if RETRY_STATUSES.contains(&response.status) {
        let wait = retry_after(&response).unwrap_or_else(|| retry.wait(request.retries));
        // 429/503 ask the host to slow down, even when we give up on the page.
        result.backoff = Some(wait);
        if request.retries < retry.max_retries {
            result.requests.push(again(request));
            result.requeued = true;
            result.counters.push(("retry/scheduled", 1));
            return result;
        }
        // Out of retries: the page failed. No item; a revisit keeps its stored
        // version, and either way the page is due again next cycle.
        tracing::warn!(url = %request.url, status = response.status, retries = request.retries, "gave up on the page");
        result.counters.push(("retry/exhausted", 1));
        result.counters.push(("fetch/failed", 1));
        if result.prior.is_some() {
            result.counters.push(("revisit/failed", 1));
        }
        result.failed = Some(response.status);
        return result;
    }
    if response.status == 304 && result.prior.is_some() {
        revisit_of(&mut result, Profile::ServerNotModified);
        result.seen = Some(observe(&response, String::new()));
        return result;
    }
    if (300..400).contains(&response.status)
        && let Some(target) = redirect_target(&response)
    {
        result.seen = Some(observe(
            &response,
            revisit::content_hash(target.as_str().as_bytes()),
        ));
        follow_redirect(request, target, &mut result);
        return result;
    }
    let hash = revisit::content_hash(&response.body);
    if !retry.keeps(response.status) {
        // An error answer (Scrapy's HttpError): recorded and archived, but it
        // is not the page's content, so no legs run on it.
        result.seen = Some(Observation {
            error: true,
            ..observe(&response, hash)
        });
        return result;
    }
    response.kept = !response.is_success();
    // The engine applies the same rule when it writes the record.
    let change = Change::of(result.prior.as_ref(), response.status, &hash);
    result.seen = Some(observe(&response, hash));
    if !change.stores_items() {
        if change == Change::Unchanged {
            revisit_of(&mut result, Profile::IdenticalPayloadDigest);
        }
        return result;
    }
    let rendered = match renderer {
        Some(renderer) if renderer.wants(&response) => {
            rendered(renderer, fetcher, robots, &response, &mut result).await
        }
        _ => None,
    };
    extract(
        legs,
        request,
        rendered.as_ref().unwrap_or(&response),
        retry,
        parts,
        &mut result,
    );
    if response.truncated {
        result.counters.push(("fetch/truncated", 1));
    }
    result
}

/// `response` as the browser built it (the DOM in place of the body), or
/// `None` when rendering failed: the legs then read the HTML the server
/// sent, and the run counts the failure.
async fn rendered(
    renderer: &Renderer,
    fetcher: &Fetcher,
    robots: Option<&RobotsCache>,
    response: &Response,
    result: &mut PageResult,
) -> Option<Response> {
    match renderer.render(response, fetcher, robots).await {
        Ok(done) => {
            result.counters.push(("render/pages", 1));
            result.counters.push(("render/fetched", done.fetched));
            result.counters.push(("render/blocked", done.blocked));
            if done.timed_out {
                result.counters.push(("render/timeouts", 1));
            }
            let mut page = response.clone();
            page.headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/html; charset=utf-8"),
            );
            page.body = done.dom.into();
            Some(page)
        }
        Err(error) => {
            tracing::warn!(url = %response.url, %error, "could not render the page; its links and items are the HTML's");
            result.counters.push(("render/failed", 1));
            None
        }
    }
}

/// Runs the legs over a new or changed page's `response` (a page requisite
/// makes no items and follows no links: none run on it) and, with
/// `--page-requisites`, queues its requisites.
fn extract(
    legs: &Arc<dyn Leg>,
    request: &Request,
    response: &Response,
    retry: RetryPolicy,
    parts: Option<&Parts>,
    result: &mut PageResult,
) {
    if !legs::requisites::is_requisite(request) {
        match parts {
            Some(parts) => parts.run_legs(legs.as_ref(), response, result),
            None => {
                let output = legs::run(legs.as_ref(), response);
                result.requests = output.requests;
                result.items = output.items;
            }
        }
        result.legs_ran = true;
    }
    if retry.page_requisites {
        let requisites = legs::requisites::of(response);
        if !requisites.is_empty() {
            result
                .counters
                .push(("requisites/found", requisites.len() as u64));
            result.requests.extend(requisites);
        }
    }
}

/// Makes the page's capture a revisit of the capture its record stands for:
/// the record's URL, and when its content was last found new or changed.
fn revisit_of(result: &mut PageResult, profile: Profile) {
    if let (Some(prior), Some(capture)) = (&result.prior, result.captures.last_mut()) {
        capture.revisit = Some(RevisitOf {
            profile,
            target: prior.url.clone(),
            date: prior.last_changed,
        });
    }
}

/// `request` with the validators of its page record as conditional headers.
fn conditional(request: &Request, prior: &PageRecord) -> Request {
    let mut request = request.clone();
    request
        .headers
        .retain(|(name, _)| !pages::is_conditional_header(name));
    request.headers.extend(revisit::conditional_headers(prior));
    request
}

/// The page-record facts of a response.
fn observe(response: &Response, content_hash: String) -> Observation {
    let header = |name| {
        response
            .headers
            .get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    let fetched_at = crate::warc::unix_secs(response.fetched_at);
    Observation {
        status: response.status,
        final_url: response.url.to_string(),
        etag: header(http::header::ETAG),
        last_modified: header(http::header::LAST_MODIFIED),
        content_hash,
        fetched_at,
        error: false,
        fresh_for: revisit::fresh_for(
            header(http::header::CACHE_CONTROL).as_deref(),
            header(http::header::EXPIRES).as_deref(),
            header(http::header::DATE).as_deref(),
            fetched_at,
        ),
    }
}

/// Asks robots.txt about `request`; false when it must not be fetched now (the
/// result then says why: blocked, or put back for later).
async fn obeys_robots(robots: &RobotsCache, request: &Request, result: &mut PageResult) -> bool {
    let Ok(url) = url::Url::parse(&request.url) else {
        return true;
    };
    match robots.check(&url).await {
        Verdict::Allowed { crawl_delay } => {
            result.crawl_delay = crawl_delay;
            true
        }
        Verdict::Disallowed => {
            result.counters.push(("robots/disallowed", 1));
            result.blocked = Some("robots");
            false
        }
        Verdict::Unavailable {
            retry_after,
            unreachable,
        } => {
            result.unreachable = unreachable;
            // robots.txt failed (5xx, unreachable): everything waits, nothing is lost.
            let mut later = request.clone();
            later.dont_filter = true;
            result.requests.push(later);
            result.requeued = true;
            result.counters.push(("robots/unavailable", 1));
            result.robots_unavailable = true;
            result.backoff = Some(retry_after);
            false
        }
    }
}

fn fetch_failed(
    request: &Request,
    error: &FetchError,
    retry: RetryPolicy,
    result: &mut PageResult,
) {
    match error {
        FetchError::Connect { .. } => result.unreachable = Some(error.to_string()),
        FetchError::Decode { .. } => result.counters.push(("fetch/undecodable", 1)),
        _ => {}
    }
    // No answer came: what makes a run in which every request failed exit 4.
    if matches!(
        error,
        FetchError::Connect { .. } | FetchError::Timeout { .. }
    ) {
        result.counters.push(("fetch/network_error", 1));
    }
    if error.is_retryable() && request.retries < retry.max_retries {
        tracing::debug!(url = %request.url, %error, retries = request.retries, "fetch failed, will retry");
        result.requests.push(again(request));
        result.requeued = true;
        result.counters.push(("retry/scheduled", 1));
        result.backoff = Some(retry.wait(request.retries));
    } else {
        // A connection failure is reported once per host by the engine.
        if result.unreachable.is_some() {
            tracing::debug!(url = %request.url, %error, "fetch failed");
        } else {
            tracing::warn!(url = %request.url, %error, "fetch failed");
        }
        result.counters.push(("fetch/failed", 1));
        result.failed = Some(0);
        if error.is_retryable() {
            result.counters.push(("retry/exhausted", 1));
        }
    }
}

/// The result of a request whose task panicked (in the fetcher, robots.txt or a
/// leg): recorded as a fetch that failed for good — counted as `fetch/failed`
/// and `fetch/panicked`, no items, no requests, not queued again; a revisit's
/// record (`prior`) is handed back so the page stays due as after a failure.
pub fn panicked(request: &Request, message: &str, prior: Option<PageRecord>) -> PageResult {
    tracing::error!(url = %request.url, panic = message, "processing the page panicked; recorded as failed");
    PageResult {
        counters: vec![("fetch/failed", 1), ("fetch/panicked", 1)],
        prior,
        failed: Some(0),
        ..PageResult::default()
    }
}

/// The seconds of a `Retry-After` header (an HTTP date is not parsed: the
/// default backoff applies), capped at [`MAX_RETRY_AFTER`].
fn retry_after(response: &Response) -> Option<Duration> {
    let value = response
        .headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?;
    let secs: u64 = value.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

/// The same request again, counting one more retry; bypasses the seen set.
fn again(request: &Request) -> Request {
    let mut again = request.clone();
    again.retries += 1;
    again.dont_filter = true;
    again
}

fn redirect_target(response: &Response) -> Option<url::Url> {
    let location = response
        .headers
        .get(http::header::LOCATION)?
        .to_str()
        .ok()?;
    response.url.join(location).ok()
}

/// A redirect is a new request for the target, deduped like any link (a seed's
/// or a revisit's target bypasses the seen set like its source, so that a hub
/// behind a redirect is looked at again), carrying the chain so far; loops and
/// chains over [`MAX_REDIRECTS`] stop.
fn follow_redirect(request: &Request, mut target: url::Url, result: &mut PageResult) {
    target.set_fragment(None);
    let target = target.to_string();
    let looped = target == request.url || request.redirects.contains(&target);
    if looped {
        result.counters.push(("redirect/loop", 1));
        return;
    }
    if request.redirects.len() >= MAX_REDIRECTS {
        result.counters.push(("redirect/too_many", 1));
        return;
    }
    let mut next = request.clone();
    next.redirects.push(request.url.clone());
    next.url = target;
    next.retries = 0;
    result.requests.push(next);
    result.counters.push(("redirect/followed", 1));
}

fn status_counter(status: u16) -> &'static str {
    match status {
        200..=299 => "status/2xx",
        300..=399 => "status/3xx",
        400..=499 => "status/4xx",
        _ => "status/5xx",
    }
}
