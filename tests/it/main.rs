//! The integration-test binary: one binary, shared helpers in `support`.
//!
//! Run with `cargo test --release --test it`.

mod crawl;
mod fetch;
mod crash_store;
mod support;
