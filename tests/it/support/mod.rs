//! Shared helpers for the integration tests.
//!
//! - [`server`]: an in-process HTTP server ([`server::TestServer`]) on
//!   `127.0.0.1:0` with request counters and misbehaviours (delays, stalls,
//!   chunking, lying `Content-Length`).
//! - [`changing`]: a site whose pages are edited, added and removed between
//!   runs ([`changing::ChangingSite`]), with ETag / Last-Modified and 304s.
//! - [`cli`]: running the real `legcrawl` binary with bounded waits.
//! - [`site`]: a deterministic generated site ([`site::Site`]) to crawl.
//!
//! Everything here is hermetic: it only binds and talks to 127.0.0.1, and every
//! wait is bounded.
#![allow(dead_code)]

pub mod changing;
pub mod cli;
pub mod server;
pub mod site;

#[allow(unused_imports)]
pub use server::{BodyMode, Handler, TestRequest, TestResponse, TestServer, handler};
pub use site::Site;

/// splitmix64: a fixed, dependency-free PRNG (kill moments, random choices).
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
