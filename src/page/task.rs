//! One page's task: [`page::process`] with its panics caught, so that a panic
//! in it (fetcher, robots.txt, legs) becomes a failed page, never a lost result.
//!
//! The engine loop counts a request as in flight until its result arrives; a
//! task that died without sending one would hold that count forever and the run
//! would never end. [`Job::run`] catches a panic of the page's future
//! (`futures-util`'s `catch_unwind`, so no second task per page) and turns it
//! into [`page::panicked`]'s result, which the loop completes like a fetch that
//! failed for good (so the lease ends and the page is not fetched again in the
//! cycle). A reparse (`Job::stored`) reads the page's response back instead
//! of fetching it. Depends on [`page`] only.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::task::JoinSet;

use super::parts::Parts;
use super::reparse::StoredResponses;
use crate::fetch::Fetcher;
use crate::legs::Leg;
use crate::page::{self, PageResult, RetryPolicy};
use crate::request::Request;
use crate::robots::RobotsCache;
use crate::store::PageRecord;

/// Everything [`page::process`] needs besides the request, owned so that it can
/// move into a task.
pub(crate) struct Job {
    pub fetcher: Fetcher,
    pub legs: Arc<dyn Leg>,
    pub retry: RetryPolicy,
    pub robots: Option<RobotsCache>,
    /// The request's page record, when it is a revisit.
    pub prior: Option<PageRecord>,
    /// Where a page's links go in parts as the legs make them (the embedded
    /// loop's; `None`: they come back whole with the result).
    pub parts: Option<Parts>,
    /// The job's scope no longer holds the request: it is not fetched.
    pub out_of_scope: bool,
    /// Set for `legcrawl reparse`: the legs run over the page's stored
    /// response, nothing is fetched.
    pub stored: Option<Arc<StoredResponses>>,
    /// `--render`: new and changed HTML pages go through the browser.
    pub render: Option<crate::render::Renderer>,
}

impl Job {
    /// Processes `request`; a panic while doing so becomes a failed page.
    pub(crate) async fn run(self, request: &Request) -> PageResult {
        let Job {
            fetcher,
            legs,
            retry,
            robots,
            prior,
            parts,
            out_of_scope,
            stored,
            render,
        } = self;
        if out_of_scope {
            return PageResult {
                prior,
                out_of_scope,
                ..PageResult::default()
            };
        }
        // Handed back with the failed result; cloned only for a revisit.
        let fallback = prior.clone();
        // Unwind safety: after a panic nothing the future borrowed is used
        // again but `request`, which it only read.
        let processed = AssertUnwindSafe(async {
            match &stored {
                Some(stored) => {
                    page::reparse::reparse(stored, &legs, request, retry, prior, parts.as_ref())
                        .await
                }
                None => {
                    page::process(
                        &fetcher,
                        &legs,
                        request,
                        retry,
                        robots.as_ref(),
                        prior,
                        parts.as_ref(),
                        render.as_ref(),
                    )
                    .await
                }
            }
        })
        .catch_unwind()
        .await;
        match processed {
            Ok(mut result) => {
                // The records are built here, beside the fetch, not on the loop.
                if !result.captures.is_empty() {
                    let (archived, response_at) =
                        crate::warc::encode_page(&std::mem::take(&mut result.captures));
                    result.archived = archived;
                    result.response_at = response_at.filter(|_| result.legs_ran);
                }
                result
            }
            Err(payload) => page::panicked(request, &panic_message(payload.as_ref()), fallback),
        }
    }
}

/// Takes the finished tasks out of `tasks`, logging any that failed (a page's
/// own panic is already a result; this is whatever escaped [`Job::run`]).
pub(crate) fn reap(tasks: &mut JoinSet<()>) {
    while let Some(joined) = tasks.try_join_next() {
        match joined {
            Ok(()) => {}
            Err(error) if error.is_panic() => {
                let message = panic_message(error.into_panic().as_ref());
                tracing::error!(panic = %message, "a page task panicked");
            }
            Err(error) => tracing::warn!(%error, "a page task ended without finishing"),
        }
    }
}

/// The message a panic was raised with (`panic!("...")` gives a `&str`, a
/// formatted `panic!` a `String`).
pub(super) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&'static str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_of_either_payload() {
        let caught = |f: fn()| std::panic::catch_unwind(f).expect_err("it panics");
        let literal = caught(|| panic!("boom"));
        let formatted = caught(|| panic!("boom {}", 2));
        let other = caught(|| std::panic::panic_any(7_u32));
        assert_eq!(panic_message(literal.as_ref()), "boom");
        assert_eq!(panic_message(formatted.as_ref()), "boom 2");
        assert_eq!(panic_message(other.as_ref()), "a panic without a message");
    }
}
