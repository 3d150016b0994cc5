//! One page's task: [`page::process`] in a task of its own, so that a panic in
//! it (fetcher, robots.txt, legs) becomes a failed page, never a lost result.
//!
//! The engine loop counts a request as in flight until its result arrives; a
//! task that died without sending one would hold that count forever and the run
//! would never end. [`Job::run`] awaits the inner task and turns its panic into
//! [`page::panicked`]'s result, which the loop completes like a fetch that failed
//! for good (so the lease ends and the page is not fetched again in the cycle).
//! Aborting the outer task (a stop) aborts the inner one too. Depends on
//! [`page`] only.

use std::any::Any;
use std::sync::Arc;

use tokio::task::{AbortHandle, JoinSet};

use super::page::{self, PageResult, RetryPolicy};
use crate::fetch::Fetcher;
use crate::legs::Leg;
use crate::request::Request;
use crate::robots::RobotsCache;
use crate::store::PageRecord;

/// Everything [`page::process`] needs besides the request, owned so that it can
/// move into a task.
pub(super) struct Job {
    pub fetcher: Fetcher,
    pub legs: Arc<dyn Leg>,
    pub retry: RetryPolicy,
    pub robots: Option<RobotsCache>,
    /// The request's page record, when it is a revisit.
    pub prior: Option<PageRecord>,
}

impl Job {
    /// Processes `request` in an inner task; a panic there becomes a failed
    /// page. `None` only when the inner task was cancelled, which happens when
    /// the runtime shuts down: the lease then stays queued, as after a stop.
    pub(super) async fn run(self, request: &Request) -> Option<PageResult> {
        // Handed back with the failed result; cloned only for a revisit.
        let prior = self.prior.clone();
        let owned = request.clone();
        let mut inner = tokio::spawn(async move {
            let Job {
                fetcher,
                legs,
                retry,
                robots,
                prior,
            } = self;
            page::process(&fetcher, &legs, &owned, retry, robots.as_ref(), prior).await
        });
        let _abort = AbortOnDrop(inner.abort_handle());
        match (&mut inner).await {
            Ok(result) => Some(result),
            Err(error) if error.is_panic() => {
                let message = panic_message(error.into_panic().as_ref());
                Some(page::panicked(request, &message, prior))
            }
            Err(error) => {
                tracing::debug!(url = %request.url, %error, "page task cancelled");
                None
            }
        }
    }
}

/// Takes the finished tasks out of `tasks`, logging any that failed (a page's
/// own panic is already a result; this is whatever escaped [`Job::run`]).
pub(super) fn reap(tasks: &mut JoinSet<()>) {
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

/// Aborts a task when dropped (the outer task was aborted or finished first).
struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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
