//! The integration-test binary: one binary, shared helpers in `support`.
//!
//! Run with `cargo test --release --test it`.

mod answers;
mod bloom_size;
mod closed_pipe;
mod config;
mod crash_points;
mod crash_store;
mod crawl;
mod damage;
mod dense;
mod deployments;
mod docs;
mod examples;
mod export;
mod fetch;
mod hostile;
mod incremental;
mod job;
mod lastmod;
mod login;
mod output_cursor;
mod panics;
mod polite;
mod powercut;
mod proxy;
mod replay;
mod requisites;
mod robots;
mod seeds;
mod serve;
mod shared;
mod shared_cycle;
mod shared_dump;
mod shared_faults;
mod shared_job;
mod shared_loss;
mod shared_parity;
mod shared_scripts;
mod shared_secrets;
mod shared_startup;
mod skips;
mod state_dir;
mod support;
mod tour;
mod warc;
