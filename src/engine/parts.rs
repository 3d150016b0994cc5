//! A page's links handed to the engine loop part by part while its legs still
//! run, so a page with a million links never holds them all in memory.
//!
//! The page's task runs the legs with [`legs::run_in_parts`]; each full part
//! ([`LINK_CHUNK`] requests) goes to the loop on the channel its result takes
//! later ([`Done::Part`]), and the task waits until the loop has queued it
//! (scope checked, deduplicated, its group sealed) before the legs go on. The
//! loop reads the channel in order, so a page's parts are queued before its
//! completion, exactly as `queue_in_parts` queues a long list that arrived
//! whole; a crash between parts leaves the page queued, to be fetched again.
//! Requests that bypass the seen set (`dont_filter`) are held back for the
//! completion, as there. The counters of what the loop dropped from a part come
//! back with its acknowledgement and are counted with the page's completion.
//!
//! The wait blocks the task's thread, so it is taken with
//! [`tokio::task::block_in_place`], which needs the multi-thread runtime (the
//! binary's); on any other runtime [`Parts::new`] gives `None` and the legs'
//! requests come back whole. Depends on [`crate::legs`] and the store's
//! `LINK_CHUNK` only.

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::{mpsc, oneshot};

use super::page::PageResult;
use crate::legs::{self, Leg};
use crate::request::Request;
use crate::response::Response;
use crate::store::{LINK_CHUNK, Lease};

/// Counter increments, as a [`PageResult`] carries them.
pub(crate) type Counters = Vec<(&'static str, u64)>;

/// What a page's task sends the loop.
pub(crate) enum Done {
    /// A part of a page's links, to queue before its completion; the loop
    /// answers with the counters of what it dropped.
    Part(Vec<Request>, oneshot::Sender<Counters>),
    /// The page's result, to complete.
    Page(Lease, Box<PageResult>),
}

/// A page task's way to hand its links to the loop in parts.
#[derive(Clone)]
pub(crate) struct Parts {
    tx: mpsc::UnboundedSender<Done>,
}

impl Parts {
    /// Parts sent on `tx`, when the runtime can wait for them (multi-thread).
    pub(crate) fn new(tx: mpsc::UnboundedSender<Done>) -> Option<Parts> {
        let multi_thread = Handle::try_current()
            .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread);
        multi_thread.then_some(Parts { tx })
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
                    Some(counters) => result.counters.extend(counters),
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
    fn send(&self, part: Vec<Request>) -> Option<Counters> {
        let (ack, acked) = oneshot::channel();
        self.tx.send(Done::Part(part, ack)).ok()?;
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
            let parts = Parts::new(tx).expect("a multi-thread runtime");
            let n = 2 * LINK_CHUNK + 5;
            let task = tokio::spawn(async move {
                let response = test_response("http://e.com/", Some("text/html"), "");
                let mut result = PageResult::default();
                parts.run_legs(&Links(n), &response, &mut result);
                result
            });
            // The loop's side: each part is answered before the legs go on.
            let mut queued = Vec::new();
            while let Some(done) = rx.recv().await {
                let Done::Part(part, ack) = done else {
                    unreachable!("only parts are sent here");
                };
                queued.extend(part.into_iter().map(|r| r.url));
                ack.send(vec![("scope/dropped", 1)]).unwrap();
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
            // Every link exactly once: queued in parts, or held for the completion.
            let mut all: Vec<String> = queued;
            all.extend(result.requests.iter().map(|r| r.url.clone()));
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
        assert!(runtime.block_on(async { Parts::new(tx) }).is_none());
    }

    #[test]
    fn a_gone_loop_ends_the_parts_and_keeps_the_held_requests() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        runtime.block_on(async {
            let (tx, rx) = mpsc::unbounded_channel();
            let parts = Parts::new(tx).expect("a multi-thread runtime");
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
