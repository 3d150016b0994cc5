//! A page's links handed to the engine loop part by part while its legs still
//! run, so a page with a million links never holds them all in memory.
//!
//! The page's task runs the legs with [`legs::run_in_parts`]; each full part
//! ([`LINK_CHUNK`] requests) goes to the loop as a [`Part`], and the task waits
//! until the loop has queued it (scope checked, deduplicated, committed the
//! loop's way) before the legs go on. Its result is sent after the last part
//! was acknowledged, so a page's parts are queued before its completion,
//! exactly as `queue_in_parts` queues a long list that arrived whole; a crash
//! between parts leaves the page queued, to be fetched again. Requests that
//! bypass the seen set (`dont_filter`) are held back for the completion, as
//! there; so are those the loop made revisits of (a sitemap entry whose
//! `lastmod` makes its known page due), which come back with the part's
//! acknowledgement: queued in a part, a page fetched again after a crash
//! would queue them twice. The counters of what the loop dropped from a part
//! come back with its acknowledgement and are counted with the page's
//! completion.
//!
//! The wait blocks the task's thread, so it is taken with
//! [`tokio::task::block_in_place`], which needs the multi-thread runtime (the
//! binary's); on any other runtime [`Parts::new`] gives `None` and the legs'
//! requests come back whole. Depends on [`crate::legs`] and the store's
//! `LINK_CHUNK` only.

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::{mpsc, oneshot};

use super::result::PageResult;
use crate::legs::{self, Leg};
use crate::request::Request;
use crate::response::Response;
use crate::store::LINK_CHUNK;

/// Counter increments, as a [`PageResult`] carries them.
pub(crate) type Counters = Vec<(&'static str, u64)>;

/// A part of a page's links, to queue before its completion.
pub(crate) struct Part {
    /// The lease the page was fetched under, as the loop named it.
    pub lease: u64,
    /// The links, after the legs' `process_request`.
    pub requests: Vec<Request>,
    /// Answered, once queued, with the counters of what the loop dropped and
    /// the requests it made revisits of, which the completion queues.
    pub ack: oneshot::Sender<(Counters, Vec<Request>)>,
}

/// A page task's way to hand its links to the loop in parts.
pub(crate) struct Parts {
    lease: u64,
    tx: mpsc::UnboundedSender<Part>,
}

impl Parts {
    /// Parts of the page leased as `lease`, sent on `tx`, when the runtime can
    /// wait for them (multi-thread).
    pub(crate) fn new(lease: u64, tx: mpsc::UnboundedSender<Part>) -> Option<Parts> {
        let multi_thread = Handle::try_current()
            .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread);
        multi_thread.then_some(Parts { lease, tx })
    }

    /// Runs `leg` on `response` into `result`: full parts of its requests go
    /// to the loop as they form; the rest (with the held-back `dont_filter`
    /// requests), the items and the loop's counters go into `result`.
    pub(crate) fn run_legs(&self, leg: &dyn Leg, response: &Response, result: &mut PageResult) {
        let mut held = Vec::new();
        // Once the loop is gone (it stopped), nothing more is sent: the page
        // will not be completed, so it stays queued.
        let mut open = true;
        let mut spill = |mut part: Vec<Request>| {
            held.extend(part.extract_if(.., |request| request.dont_filter));
            if open {
                match self.send(part) {
                    Some((counters, back)) => {
                        result.counters.extend(counters);
                        held.extend(back);
                    }
                    None => open = false,
                }
            }
        };
        let output = legs::run_in_parts(leg, response, LINK_CHUNK, &mut spill);
        held.extend(output.requests);
        result.requests = held;
        result.items = output.items;
    }

    /// Sends `part` and waits until the loop has queued it; `None` when the
    /// loop is gone.
    fn send(&self, requests: Vec<Request>) -> Option<(Counters, Vec<Request>)> {
        let (ack, acked) = oneshot::channel();
        let part = Part {
            lease: self.lease,
            requests,
            ack,
        };
        self.tx.send(part).ok()?;
        tokio::task::block_in_place(|| acked.blocking_recv()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legs::{Output, test_response};

    /// Emits `n` links, every tenth of them bypassing the seen set.
    struct Links(usize);
    impl Leg for Links {
        fn process_response(&self, response: &Response, out: &mut Output) {
            for k in 0..self.0 {
                let mut request = Request::follow(&response.request, format!("http://e.com/{k}"));
                request.dont_filter = k.is_multiple_of(10);
                out.push_request(request);
            }
        }
    }

    #[test]
    fn parts_go_to_the_loop_and_the_rest_comes_back_with_its_counters() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        runtime.block_on(async {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let parts = Parts::new(7, tx).expect("a multi-thread runtime");
            let n = 2 * LINK_CHUNK + 5;
            let task = tokio::spawn(async move {
                let response = test_response("http://e.com/", Some("text/html"), "");
                let mut result = PageResult::default();
                parts.run_legs(&Links(n), &response, &mut result);
                result
            });
            // The loop's side: each part is answered before the legs go on.
            let mut queued = Vec::new();
            while let Some(part) = rx.recv().await {
                assert_eq!(part.lease, 7);
                queued.extend(part.requests.into_iter().map(|r| r.url));
                let back = vec![Request::get("http://e.com/back")];
                part.ack.send((vec![("scope/dropped", 1)], back)).unwrap();
                if queued.len() >= 2 * (LINK_CHUNK - LINK_CHUNK / 10) {
                    break;
                }
            }
            let result = task.await.unwrap();
            assert!(rx.try_recv().is_err(), "no part after the legs ended");
            assert_eq!(
                result.counters,
                [("scope/dropped", 1), ("scope/dropped", 1)]
            );
            assert!(queued.iter().all(|url| {
                let k: usize = url.rsplit('/').next().unwrap().parse().unwrap();
                !k.is_multiple_of(10)
            }));
            // Every link exactly once: queued in parts, or held for the
            // completion; and what the loop handed back, once a part.
            let back = "http://e.com/back";
            let handed = result.requests.iter().filter(|r| r.url == back).count();
            assert_eq!(handed, 2);
            let mut all: Vec<String> = queued;
            all.extend(
                result
                    .requests
                    .iter()
                    .filter(|r| r.url != back)
                    .map(|r| r.url.clone()),
            );
            all.sort();
            let mut expected: Vec<String> = (0..n).map(|k| format!("http://e.com/{k}")).collect();
            expected.sort();
            assert_eq!(all, expected);
        });
    }

    #[test]
    fn a_current_thread_runtime_gets_no_parts() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (tx, _rx) = mpsc::unbounded_channel();
        assert!(runtime.block_on(async { Parts::new(0, tx) }).is_none());
    }

    #[test]
    fn a_gone_loop_ends_the_parts_and_keeps_the_held_requests() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        runtime.block_on(async {
            let (tx, rx) = mpsc::unbounded_channel();
            let parts = Parts::new(0, tx).expect("a multi-thread runtime");
            drop(rx);
            let result = tokio::spawn(async move {
                let response = test_response("http://e.com/", Some("text/html"), "");
                let mut result = PageResult::default();
                parts.run_legs(&Links(3 * LINK_CHUNK), &response, &mut result);
                result
            })
            .await
            .unwrap();
            assert!(result.counters.is_empty());
            assert!(result.requests.iter().all(|r| r.dont_filter));
        });
    }
}
