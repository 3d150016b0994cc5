//! legcrawl: a single-node, embedded-storage, incremental web crawler.
//!
//! # Layout
//! - [`request`]: the [`request::Request`] record and its versioned encoding.
//! - [`item`]: items (JSON objects) and their versioned encoding.
//! - [`response`]: a fetched response as legs see it.
//! - [`charset`]: body decoding: BOM, `Content-Type` charset, `<meta>`, then UTF-8.
//! - [`config`]: the one [`config::CrawlConfig`].
//! - [`crawlfile`]: the TOML crawl file → a `CrawlConfig` and a stack of legs.
//! - [`job`]: a crawl is a stored job: the crawl file a run resolves and stores.
//! - [`clock`]: RFC 3339 timestamps.
//! - [`canon`]: w3lib-style URL canonicalization, one table of rules.
//! - [`fingerprint`]: SHA-1 request fingerprints over the canonical URL.
//! - [`bloom`]: the memory-mapped Bloom filter and its math.
//! - [`fsync`]: new names made durable (directory syncs).
//! - [`dirlock`]: the exclusive lock of a directory (the state's, a WARC directory's).
//! - [`store`]: the sled state: frontier, seen set, items, page records, seeds, runs, stats.
//! - [`crash`]: the named crash points of every step that writes or syncs, and
//!   `LEGCRAWL_CRASH_AT` to abort at one.
//! - [`status`]: the files a running crawl publishes (`status.json`,
//!   `snapshot.json`).
//! - [`revisit`]: incremental re-crawls: revisit policies, change detection, versions.
//! - [`fetch`]: the hyper fetcher.
//! - [`robots`]: robots.txt (RFC 9309) rules and the per-origin robots.txt cache.
//! - [`legs`]: the `Leg` trait, stacks of legs and the bundled legs.
//! - [`engine`]: the tokio crawl loop, group commit and shutdown.
//! - [`warc`]: WARC 1.1 files of every fetch, exact across `kill -9`.
//! - [`shared`]: one crawl shared by several workers through Redis (`--shared`).
//! - [`serve`]: `legcrawl serve`, a read-only page and `/metrics` from the
//!   snapshot a crawl publishes ([`status::snapshot`]).
//!
//! # Data flow
//! frontier → politeness → fetcher → legs → sink + frontier. The engine leases
//! requests from the frontier ([`store`]) host by host as per-host politeness allows
//! (`engine::politeness`), asks [`robots`] before each fetch, the fetcher turns each
//! request into a [`response::Response`], the legs turn responses into new requests and
//! items, and the engine completes the lease: items go to the sink and new requests
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
pub mod request;
pub mod response;
pub mod revisit;
pub mod robots;
pub mod serve;
pub mod shared;
pub mod status;
pub mod store;
pub mod view;
pub mod warc;
