//! legcrawl: a single-node, embedded-storage, incremental web crawler.
//!
//! # Layout, by layer (each uses only the layers below it)
//! - Commands: `cli` (in the binary) and [`serve`], `legcrawl serve`'s page and
//!   `/metrics`.
//! - Views: [`view`], what `dump`, `--stats` and `serve` read, written once over
//!   two sources: a state directory (or the snapshot a running crawl publishes,
//!   [`status::snapshot`]) and a shared crawl in Redis.
//! - The loop: [`engine`], one tokio crawl loop over a frontier trait, with
//!   its two frontiers (the embedded state's and a shared worker's,
//!   [`engine::worker`]) and their outputs (`--output`, WARC).
//! - Frontier backends: [`store`], the embedded sled state (frontier, seen
//!   set, items, page records, seeds, runs, counters), and [`shared`], one
//!   crawl in Redis shared by several workers (`--shared`).
//! - Page processing: [`page`], one leased request to what its completion
//!   needs: robots.txt, fetch, legs, scope, page record.
//! - Parts of a page: [`fetch`] (the hyper fetcher), [`robots`] (RFC 9309
//!   rules and the per-origin cache), [`legs`] (the `Leg` trait, stacks and the
//!   bundled legs), [`warc`] (WARC 1.1 files), [`revisit`] (revisit policies,
//!   change detection, versions), [`render`] (headless Chromium for pages
//!   built by JavaScript).
//! - The job: [`job`] (a crawl is a stored job), [`crawlfile`] (the TOML crawl
//!   file), [`config`] (the one [`config::CrawlConfig`]), [`shared_target`]
//!   (where a shared crawl lives).
//! - Records and primitives: [`request`], [`item`], [`response`],
//!   [`fingerprint`] (SHA-1 request fingerprints), [`canon`] (w3lib-style URL
//!   canonicalization), [`charset`], [`bloom`] (the memory-mapped Bloom
//!   filter), [`status`] (the files a running crawl publishes), [`crash`] (named
//!   crash points, `LEGCRAWL_CRASH_AT`), [`fsync`], [`dirlock`], [`clock`].
//!
//! # Data flow
//! frontier → politeness → fetcher → legs → sink + frontier. A loop leases
//! requests from its frontier ([`store`] or [`shared`]) host by host as
//! per-host politeness allows, asks [`robots`] before each fetch, the fetcher turns each
//! request into a [`response::Response`], the legs turn responses into new requests and
//! items, and the loop completes the lease: items go to the sink and new requests
//! (scoped, then deduped by the seen set — never by legs) go back to the frontier, in
//! one atomic step, with the page's record (validators, content hash, next due
//! time, from [`revisit`]). With `--warc`, the fetcher also hands over each exchange
//! as sent and received, and the engine appends it to the [`warc`] files as the
//! page completes (marked durable with the page's group). Nothing flows the other way;
//! `serve` only reads what the engine publishes about once a second.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bloom;
pub mod canon;
pub mod charset;
pub mod clock;
pub mod config;
pub mod crash;
pub mod crawlfile;
pub mod dirlock;
pub mod engine;
pub mod fetch;
pub mod fingerprint;
pub mod fsync;
pub mod item;
pub mod job;
pub mod legs;
pub mod page;
pub mod render;
pub mod request;
pub mod response;
pub mod revisit;
pub mod robots;
pub mod serve;
pub mod shared;
pub mod shared_target;
pub mod status;
pub mod store;
pub mod view;
pub mod warc;
