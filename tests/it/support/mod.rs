//! Shared helpers for the integration tests.
//!
//! - [`server`]: an in-process HTTP server ([`server::TestServer`]) on
//!   `127.0.0.1:0` with request counters and misbehaviours (delays, stalls,
//!   chunking, lying `Content-Length`).
//! - [`cli`]: running the real `legcrawl` binary with bounded waits.
//! - [`site`]: a deterministic generated site ([`site::Site`]) to crawl.
//!
//! Everything here is hermetic: it only binds and talks to 127.0.0.1, and every
//! wait is bounded.
#![allow(dead_code)]

pub mod cli;
pub mod server;
pub mod site;

#[allow(unused_imports)]
pub use server::{BodyMode, Handler, TestRequest, TestResponse, TestServer, handler};
pub use site::Site;
