//! Legs: small, composable, synchronous pieces that turn a response into requests and items.
//!
//! This is Scrapy's SEP-016 "Leg Spider" in Rust. A [`Leg`] has four hooks:
//! - [`Leg::configure`] (the SEP's `set_spider`): called once before the crawl with the
//!   [`CrawlConfig`];
//! - [`Leg::process_response`]: extract requests and items from one response;
//! - [`Leg::process_request`]: rewrite or drop a request, whichever leg produced it;
//! - [`Leg::process_item`]: rewrite or drop an item, whichever leg produced it.
//!
//! # How a response flows
//! [`run`] asks the (root) leg for its [`Output`], then passes every request through the
//! root's `process_request` and every item through its `process_item`. A [`Stack`] is
//! itself a leg: its `process_response` runs every child in declared order and
//! concatenates their outputs, and its `process_request` / `process_item` pass the value
//! through every child in declared order, stopping at the first that drops it. Stacks
//! nest, so the hooks of the whole tree run depth-first in declared order.
//!
//! # Rules for legs
//! Legs are synchronous and CPU-only: no I/O, no clocks, no shared mutable state (they are
//! `Send + Sync` and called concurrently). They see one page at a time, so they never
//! deduplicate; the scheduler does. Expected outcomes (a non-HTML page, a link out of
//! scope) are silence, not errors; only [`Leg::configure`] can fail.
//!
//! The legs depend on [`crate::request`], [`crate::item`], [`crate::response`],
//! [`crate::config`], [`crate::charset`], [`crate::canon`] and [`crate::clock`]
//! (formatting a time, never reading one).
//!
//! # Example
//! ```
//! use legcrawl::item::Item;
//! use legcrawl::legs::{self, LinkExtractor, Leg, PageItem, Stack};
//! use legcrawl::response::Response;
//!
//! /// Tags every item with the crawl's name.
//! struct Tag(&'static str);
//! impl Leg for Tag {
//!     fn process_item(&self, mut item: Item, _response: &Response) -> Option<Item> {
//!         item.insert("crawl".into(), self.0.into());
//!         Some(item)
//!     }
//! }
//!
//! let spider = Stack::new()
//!     .push(LinkExtractor::new())
//!     .push(PageItem::new())
//!     .push(legs::filter_requests(|request| !request.url.ends_with(".pdf")))
//!     .push(Tag("docs"));
//! assert_eq!(spider.len(), 4);
//! ```

mod callback_rules;
mod canonicalize;
mod css_items;
mod css_urls;
mod feed;
mod func;
mod html;
mod item_id;
mod links;
mod page_item;
pub mod requisites;
mod resolve;
mod sitemap;
mod skim;
mod stack;
mod trap_guard;
mod xml;

pub use callback_rules::CallbackRules;
pub use canonicalize::Canonicalize;
pub use css_items::{CssItems, CssItemsSettings, FieldSettings};
pub use feed::{FeedLinks, FeedSettings};
pub use func::{filter_requests, from_fn, map_items};
pub use item_id::{ItemIdSetter, ItemIdSettings};
pub use links::LinkExtractor;
pub use page_item::PageItem;
pub use requisites::REQUISITE_META;
pub use sitemap::{LASTMOD_META, SITEMAP_META, Sitemap, SitemapSettings, parse_lastmod};
pub use stack::Stack;
pub use trap_guard::{TrapGuard, TrapGuardSettings};

use crate::config::CrawlConfig;
use crate::item::Item;
use crate::request::Request;
use crate::response::Response;

/// What `process_response` produces: new requests and items, in extraction order.
///
/// Legs add requests with [`Output::push_request`]: when the engine runs the legs
/// with [`run_in_parts`], a long list (a page with a million links) is handed on
/// in parts as it grows, so it is never whole in memory. Requests pushed onto
/// [`Output::requests`] directly are handed on when the leg returns (a [`Stack`]
/// checks after each child).
#[derive(Default)]
pub struct Output<'s> {
    /// Requests to hand to the scheduler (which deduplicates them).
    pub requests: Vec<Request>,
    /// Items to hand to the sink.
    pub items: Vec<Item>,
    /// Where full parts of `requests` go, with [`run_in_parts`].
    spill: Option<Spill<'s>>,
}

/// A part size and where parts go.
struct Spill<'s> {
    part: usize,
    to: &'s mut dyn FnMut(Vec<Request>),
}

impl Output<'_> {
    /// Adds a request; with [`run_in_parts`], a full part is handed on at once.
    pub fn push_request(&mut self, request: Request) {
        self.requests.push(request);
        self.spill_full_parts();
    }

    /// Hands on the requests gathered so far when they fill a part.
    pub(crate) fn spill_full_parts(&mut self) {
        if let Some(spill) = &mut self.spill
            && self.requests.len() >= spill.part
        {
            let part = std::mem::replace(&mut self.requests, Vec::with_capacity(spill.part));
            (spill.to)(part);
        }
    }
}

impl std::fmt::Debug for Output<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("requests", &self.requests)
            .field("items", &self.items)
            .field("in_parts", &self.spill.is_some())
            .finish()
    }
}

/// One composable piece of a spider. Every hook has a do-nothing default.
pub trait Leg: Send + Sync {
    /// The `set_spider` role: called once before the crawl with its configuration.
    fn configure(&mut self, _config: &CrawlConfig) -> Result<(), LegError> {
        Ok(())
    }

    /// Extract requests and items from a response, appending them to `out`.
    fn process_response(&self, _response: &Response, _out: &mut Output) {}

    /// Rewrite or drop (`None`) a request produced by any leg for `response`.
    fn process_request(&self, request: Request, _response: &Response) -> Option<Request> {
        Some(request)
    }

    /// False when [`Leg::process_request`] returns every request unchanged (as the
    /// default does): [`run`] and [`Stack`] then do not call it, which saves moving
    /// each request through it. Leave it `true` (the default) in any leg that
    /// overrides `process_request`.
    fn rewrites_requests(&self) -> bool {
        true
    }

    /// Rewrite or drop (`None`) an item produced by any leg for `response`.
    fn process_item(&self, item: Item, _response: &Response) -> Option<Item> {
        Some(item)
    }

    /// The field that holds each item's stable identity, when this leg sets
    /// one (the `item_id` leg's `id_field`). The change feed knows items by
    /// it; without one, an item is known by its page and its place there
    /// (see [`crate::page::feed`]).
    fn identity_field(&self) -> Option<&str> {
        None
    }
}

/// Why a leg could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum LegError {
    /// A regex setting does not compile.
    #[error("leg {leg}: bad regex {pattern:?}: {source}")]
    BadRegex {
        /// The leg's name.
        leg: &'static str,
        /// The pattern as given.
        pattern: String,
        /// What the regex compiler said.
        source: regex::Error,
    },
    /// Any other invalid setting.
    #[error("leg {leg}: {message}")]
    Invalid {
        /// The leg's name.
        leg: &'static str,
        /// What is wrong, naming the setting.
        message: String,
    },
}

/// The engine's entry point: combine `leg`'s `process_response` output, then run each
/// request through its `process_request` and each item through its `process_item`.
pub fn run(leg: &dyn Leg, response: &Response) -> Output<'static> {
    let mut raw = Output::default();
    leg.process_response(response, &mut raw);
    finish(leg, response, raw)
}

/// [`run`], with the requests handed to `spill` in parts of `part` (after
/// `process_request`) as the legs produce them; the returned output holds the
/// last, partial part and the items. Memory for requests stays about one part,
/// however many links a page has.
pub fn run_in_parts(
    leg: &dyn Leg,
    response: &Response,
    part: usize,
    spill: &mut dyn FnMut(Vec<Request>),
) -> Output<'static> {
    let mut rewritten = |requests: Vec<Request>| spill(rewrite(leg, response, requests));
    let mut raw = Output {
        spill: Some(Spill {
            part: part.max(1),
            to: &mut rewritten,
        }),
        ..Output::default()
    };
    leg.process_response(response, &mut raw);
    let Output {
        requests, items, ..
    } = raw;
    finish(
        leg,
        response,
        Output {
            requests,
            items,
            spill: None,
        },
    )
}

/// Applies the request and item hooks to what `process_response` produced.
fn finish(leg: &dyn Leg, response: &Response, raw: Output<'_>) -> Output<'static> {
    Output {
        requests: rewrite(leg, response, raw.requests),
        items: raw
            .items
            .into_iter()
            .filter_map(|item| leg.process_item(item, response))
            .collect(),
        spill: None,
    }
}

/// `requests` through `leg`'s `process_request` (when it rewrites any).
fn rewrite(leg: &dyn Leg, response: &Response, requests: Vec<Request>) -> Vec<Request> {
    if leg.rewrites_requests() {
        requests
            .into_iter()
            .filter_map(|request| leg.process_request(request, response))
            .collect()
    } else {
        requests
    }
}

/// A 200 response to a `GET` of `url` at depth 0, fetched at 2021-01-01T00:00:00Z.
#[cfg(test)]
pub(crate) fn test_response(
    url: &str,
    content_type: Option<&str>,
    body: impl Into<bytes::Bytes>,
) -> Response {
    let mut headers = http::HeaderMap::new();
    if let Some(value) = content_type {
        headers.insert(http::header::CONTENT_TYPE, value.parse().unwrap());
    }
    Response {
        request: Request::get(url),
        url: url::Url::parse(url).unwrap(),
        status: 200,
        headers,
        body: body.into(),
        truncated: false,
        fetched_at: std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_609_459_200),
        kept: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Emit(&'static str);
    impl Leg for Emit {
        fn process_response(&self, response: &Response, out: &mut Output) {
            out.requests.push(Request::follow(
                &response.request,
                format!("http://e.com/{}", self.0),
            ));
            let mut item = Item::new();
            item.insert("from".into(), self.0.into());
            out.items.push(item);
        }
    }

    #[test]
    fn run_applies_every_hook_to_every_output() {
        let leg = Stack::new()
            .push(Emit("a"))
            .push(Emit("b"))
            .push(filter_requests(|request| !request.url.ends_with('b')))
            .push(map_items(|mut item| {
                item.insert("seen".into(), true.into());
                Some(item)
            }));
        let response = test_response("http://e.com/", Some("text/html"), "");
        let out = run(&leg, &response);
        let urls: Vec<_> = out.requests.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls, ["http://e.com/a"]);
        assert_eq!(out.requests[0].depth, 1);
        assert_eq!(out.items.len(), 2);
        assert!(out.items.iter().all(|item| item["seen"] == true));
    }

    /// Emits `n` links with `push_request`, then `direct` more onto the list itself.
    struct Many {
        n: usize,
        direct: usize,
    }
    impl Leg for Many {
        fn process_response(&self, response: &Response, out: &mut Output) {
            for k in 0..self.n {
                out.push_request(Request::follow(
                    &response.request,
                    format!("http://e.com/{k}"),
                ));
            }
            for k in 0..self.direct {
                let url = format!("http://e.com/direct/{k}");
                out.requests.push(Request::follow(&response.request, url));
            }
        }
    }

    #[test]
    fn run_in_parts_hands_on_full_parts_after_process_request() {
        let leg = Stack::new()
            .push(Many { n: 10, direct: 7 })
            .push(filter_requests(|request| !request.url.ends_with("/3")));
        let response = test_response("http://e.com/", Some("text/html"), "");
        let mut parts: Vec<Vec<String>> = Vec::new();
        let out = run_in_parts(&leg, &response, 4, &mut |part| {
            parts.push(part.into_iter().map(|r| r.url).collect());
        });
        // Parts form as requests are pushed (4 each), are filtered after, and
        // the direct pushes are handed on when their leg returns (the stack
        // checks after each child).
        let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
        assert_eq!(sizes, [3, 4, 8]); // `/3` and `/direct/3` are dropped
        assert!(parts.iter().flatten().all(|url| !url.ends_with("/3")));
        let left: Vec<_> = out.requests.iter().map(|r| r.url.as_str()).collect();
        assert!(left.is_empty(), "{left:?}");
        // Every request once, in order, as `run` gives them.
        let whole: Vec<String> = run(&leg, &response)
            .requests
            .into_iter()
            .map(|r| r.url)
            .collect();
        let spilled: Vec<String> = parts.into_iter().flatten().collect();
        assert_eq!(spilled, whole);
    }

    #[test]
    fn run_in_parts_keeps_a_short_list_whole() {
        let leg = Many { n: 3, direct: 0 };
        let response = test_response("http://e.com/", Some("text/html"), "");
        let mut calls = 0;
        let out = run_in_parts(&leg, &response, 4, &mut |_| calls += 1);
        assert_eq!((calls, out.requests.len()), (0, 3));
    }

    #[test]
    fn default_leg_is_a_no_op() {
        struct Nothing;
        impl Leg for Nothing {}
        let response = test_response("http://e.com/", None, "x");
        let out = run(&Nothing, &response);
        assert!(out.requests.is_empty() && out.items.is_empty());
    }

    #[test]
    fn errors_name_leg_and_pattern() {
        let pattern = String::from("(");
        let source = regex::Regex::new(&pattern).unwrap_err();
        let error = LegError::BadRegex {
            leg: "links",
            pattern,
            source,
        };
        assert!(error.to_string().starts_with("leg links: bad regex \"(\""));
    }
}
