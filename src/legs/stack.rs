//! [`Stack`]: an ordered list of legs that is itself a leg (the SEP's nesting).
//!
//! Invariant: every hook visits the children in the order they were pushed.

use super::{Leg, LegError, Output};
use crate::config::CrawlConfig;
use crate::item::Item;
use crate::request::Request;
use crate::response::Response;

/// Legs run in declared order; a stack can be pushed onto another stack.
#[derive(Default)]
pub struct Stack {
    legs: Vec<Box<dyn Leg>>,
}

impl Stack {
    /// An empty stack (a leg that does nothing).
    pub fn new() -> Stack {
        Stack::default()
    }

    /// Appends `leg` after the legs already pushed.
    pub fn push(self, leg: impl Leg + 'static) -> Stack {
        self.push_boxed(Box::new(leg))
    }

    /// Appends an already boxed leg (for legs chosen at run time).
    pub fn push_boxed(mut self, leg: Box<dyn Leg>) -> Stack {
        self.legs.push(leg);
        self
    }

    /// Number of direct children (a nested stack counts as one).
    pub fn len(&self) -> usize {
        self.legs.len()
    }

    /// True when the stack has no children.
    pub fn is_empty(&self) -> bool {
        self.legs.is_empty()
    }
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("len", &self.legs.len())
            .finish()
    }
}

impl Leg for Stack {
    /// Configures every child in order; stops at the first error.
    fn configure(&mut self, config: &CrawlConfig) -> Result<(), LegError> {
        self.legs
            .iter_mut()
            .try_for_each(|leg| leg.configure(config))
    }

    /// Runs every child and concatenates their outputs in order.
    fn process_response(&self, response: &Response, out: &mut Output) {
        for leg in &self.legs {
            leg.process_response(response, out);
            // A child that pushed onto `out.requests` directly.
            out.spill_full_parts();
        }
    }

    /// Passes the request through every child; `None` as soon as one drops it.
    fn process_request(&self, mut request: Request, response: &Response) -> Option<Request> {
        for leg in self.legs.iter().filter(|leg| leg.rewrites_requests()) {
            request = leg.process_request(request, response)?;
        }
        Some(request)
    }

    /// True when any child rewrites requests.
    fn rewrites_requests(&self) -> bool {
        self.legs.iter().any(|leg| leg.rewrites_requests())
    }

    /// Passes the item through every child; `None` as soon as one drops it.
    fn process_item(&self, item: Item, response: &Response) -> Option<Item> {
        self.legs
            .iter()
            .try_fold(item, |item, leg| leg.process_item(item, response))
    }

    /// The last child's that sets one: it runs last, so its field holds
    /// the id an item leaves with.
    fn identity_field(&self) -> Option<&str> {
        self.legs.iter().rev().find_map(|leg| leg.identity_field())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::legs::{from_fn, map_items, run, test_response};

    /// Records the order in which hooks of named legs run.
    struct Trace {
        name: &'static str,
        log: &'static Mutex<Vec<String>>,
        drop_items: bool,
    }

    impl Leg for Trace {
        fn configure(&mut self, _config: &CrawlConfig) -> Result<(), LegError> {
            self.log
                .lock()
                .unwrap()
                .push(format!("configure {}", self.name));
            Ok(())
        }
        fn process_response(&self, response: &Response, out: &mut Output) {
            self.log
                .lock()
                .unwrap()
                .push(format!("response {}", self.name));
            out.requests
                .push(Request::follow(&response.request, "http://e.com/x"));
            out.items.push(Item::new());
        }
        fn process_request(&self, request: Request, _response: &Response) -> Option<Request> {
            self.log
                .lock()
                .unwrap()
                .push(format!("request {}", self.name));
            Some(request)
        }
        fn process_item(&self, item: Item, _response: &Response) -> Option<Item> {
            self.log.lock().unwrap().push(format!("item {}", self.name));
            (!self.drop_items).then_some(item)
        }
    }

    #[test]
    fn nested_stacks_run_depth_first_in_declared_order() {
        static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let trace = |name, drop_items| Trace {
            name,
            log: &LOG,
            drop_items,
        };
        let inner = Stack::new().push(trace("b", false)).push(trace("c", true));
        let mut root = Stack::new()
            .push(trace("a", false))
            .push(inner)
            .push(trace("d", false));
        assert_eq!(root.len(), 3);
        root.configure(&CrawlConfig::default()).unwrap();
        let response = test_response("http://e.com/", Some("text/html"), "");
        let out = run(&root, &response);
        assert_eq!(out.requests.len(), 4);
        assert!(out.items.is_empty(), "leg c drops every item");
        let log = LOG.lock().unwrap();
        let head: Vec<&str> = log.iter().take(12).map(String::as_str).collect();
        assert_eq!(
            head,
            [
                "configure a",
                "configure b",
                "configure c",
                "configure d",
                "response a",
                "response b",
                "response c",
                "response d",
                "request a",
                "request b",
                "request c",
                "request d",
            ]
        );
        // Each item stops at c: d never sees an item.
        assert!(!log.iter().any(|line| line == "item d"));
        assert_eq!(log.iter().filter(|line| *line == "item c").count(), 4);
    }

    #[test]
    fn configure_stops_at_first_error() {
        struct Fails;
        impl Leg for Fails {
            fn configure(&mut self, _config: &CrawlConfig) -> Result<(), LegError> {
                Err(LegError::Invalid {
                    leg: "fails",
                    message: "always".into(),
                })
            }
        }
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        struct Counts;
        impl Leg for Counts {
            fn configure(&mut self, _config: &CrawlConfig) -> Result<(), LegError> {
                CALLS.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        }
        let mut stack = Stack::new()
            .push(Counts)
            .push(Fails)
            .push_boxed(Box::new(Counts));
        let error = stack.configure(&CrawlConfig::default()).unwrap_err();
        assert!(matches!(error, LegError::Invalid { leg: "fails", .. }));
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn legs_that_do_not_rewrite_requests_are_skipped() {
        /// Would drop every request, but says it rewrites none.
        struct Claims(bool);
        impl Leg for Claims {
            fn process_request(&self, _: Request, _: &Response) -> Option<Request> {
                None
            }
            fn rewrites_requests(&self) -> bool {
                self.0
            }
        }
        let emit = || {
            from_fn(|response, out| {
                out.requests
                    .push(Request::follow(&response.request, "http://e.com/x"));
            })
        };
        let response = test_response("http://e.com/", None, "");
        let quiet = Stack::new().push(emit()).push(Claims(false));
        assert!(!quiet.rewrites_requests());
        assert_eq!(run(&quiet, &response).requests.len(), 1);
        let nested = Stack::new()
            .push(quiet)
            .push(Stack::new().push(Claims(true)));
        assert!(nested.rewrites_requests());
        assert!(run(&nested, &response).requests.is_empty());
    }

    #[test]
    fn empty_stack_passes_everything_through() {
        let stack = Stack::new();
        assert!(stack.is_empty());
        let response = test_response("http://e.com/", None, "");
        let request = Request::get("http://e.com/y");
        assert_eq!(
            stack.process_request(request.clone(), &response),
            Some(request)
        );
        let dropper = Stack::new()
            .push(map_items(|_| None))
            .push(from_fn(|_, _| {}));
        assert_eq!(dropper.process_item(Item::new(), &response), None);
    }
}
