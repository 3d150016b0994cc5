//! The integration-test binary: one binary, shared helpers in `support`.
//!
//! Run with `cargo test --release --test it`.

mod config;
mod crash_store;
mod crawl;
mod examples;
mod export;
mod fetch;
mod incremental;
mod polite;
mod robots;
mod support;
