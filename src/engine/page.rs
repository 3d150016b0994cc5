//! One leased request, turned into what its completion needs: fetch, then legs.
//!
//! Runs inside a tokio task per request, so fetching and the legs' CPU work are
//! spread over the runtime's threads. It touches no state: it returns a
//! [`PageResult`] that the engine loop (the state's only owner) completes.
//! Depends on [`crate::fetch`], [`crate::legs`] and [`crate::request`].

use std::sync::Arc;

use crate::fetch::{FetchError, Fetcher};
use crate::item::Item;
use crate::legs::{self, Leg};
use crate::request::Request;

/// Responses with these statuses are retried (with the request's retry count).
pub const RETRY_STATUSES: [u16; 6] = [408, 429, 500, 502, 503, 504];
/// Redirect hops followed from one request before giving up.
pub const MAX_REDIRECTS: usize = 10;

/// What fetching and processing one request produced.
#[derive(Debug, Default)]
pub struct PageResult {
    /// New requests (links, a redirect target, or the request itself to retry).
    pub requests: Vec<Request>,
    /// Items to store.
    pub items: Vec<Item>,
    /// Counter increments.
    pub counters: Vec<(&'static str, u64)>,
}

/// Fetches `request` and runs the legs on the response.
pub async fn process(
    fetcher: &Fetcher,
    legs: &Arc<dyn Leg>,
    request: &Request,
    max_retries: u32,
) -> PageResult {
    let mut result = PageResult::default();
    let response = match fetcher.fetch(request).await {
        Ok(response) => response,
        Err(error) => {
            fetch_failed(request, &error, max_retries, &mut result);
            return result;
        }
    };
    result.counters.push(("pages/fetched", 1));
    result.counters.push((status_counter(response.status), 1));
    if RETRY_STATUSES.contains(&response.status) && request.retries < max_retries {
        result.requests.push(retry(request));
        result.counters.push(("retry/scheduled", 1));
        return result;
    }
    if (300..400).contains(&response.status)
        && let Some(target) = redirect_target(&response)
    {
        follow_redirect(request, target, &mut result);
        return result;
    }
    let output = legs::run(legs.as_ref(), &response);
    result.requests = output.requests;
    result.items = output.items;
    if response.truncated {
        result.counters.push(("fetch/truncated", 1));
    }
    result
}

fn fetch_failed(request: &Request, error: &FetchError, max_retries: u32, result: &mut PageResult) {
    if error.is_retryable() && request.retries < max_retries {
        tracing::debug!(url = %request.url, %error, retries = request.retries, "fetch failed, will retry");
        result.requests.push(retry(request));
        result.counters.push(("retry/scheduled", 1));
    } else {
        tracing::warn!(url = %request.url, %error, "fetch failed");
        result.counters.push(("fetch/failed", 1));
        if error.is_retryable() {
            result.counters.push(("retry/exhausted", 1));
        }
    }
}

/// The same request again, counting one more retry; bypasses the seen set.
fn retry(request: &Request) -> Request {
    let mut again = request.clone();
    again.retries += 1;
    again.dont_filter = true;
    again
}

fn redirect_target(response: &crate::response::Response) -> Option<url::Url> {
    let location = response
        .headers
        .get(http::header::LOCATION)?
        .to_str()
        .ok()?;
    response.url.join(location).ok()
}

/// A redirect is a new request for the target, deduped like any link, carrying
/// the chain so far; loops and chains over [`MAX_REDIRECTS`] stop.
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
    next.dont_filter = false;
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
