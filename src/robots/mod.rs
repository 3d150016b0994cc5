//! robots.txt (RFC 9309): parsing and matching, and a per-origin cache.
//!
//! Depends on [`crate::fetch`] (the cache fetches robots.txt with the crawl's own
//! fetcher), [`crate::request`] and [`crate::config`]; never on the engine or the
//! store: the engine asks [`RobotsCache::check`] before each fetch and persists
//! what [`RobotsCache::take_new_records`] hands it. Invariants: a verdict is a
//! value, never an error; robots.txt that cannot be had (5xx, 429, unreachable,
//! too many redirects) means "not now" ([`Verdict::Unavailable`]), never "allowed".
//!
//! - `pattern`: one path pattern, RFC 9309 §2.2.2 normalization and `*`/`$` matching.
//! - `rules`: [`Robots`], the groups of one robots.txt chosen for one agent.
//! - `cache`: [`RobotsCache`], fetching once per origin, TTL, redirects, records.
//!
//! The matcher is written here rather than taken from a crate: `robotstxt` (a
//! port of Google's parser) re-parses the file on every check and has had
//! panics on junk input, and `texting_robots` matches whole `User-agent` values
//! instead of product tokens; both are unmaintained.

mod cache;
mod pattern;
mod rules;

pub use cache::{
    Clock, DEFAULT_MAX_CRAWL_DELAY, DEFAULT_TTL, DEFAULT_UNAVAILABLE_RETRY, MAX_REDIRECTS,
    RobotsCache, RobotsRecord, RobotsSettings, Verdict, system_clock,
};
pub use rules::{MAX_ROBOTS_BYTES, Robots};
