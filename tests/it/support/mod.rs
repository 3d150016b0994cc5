//! Shared helpers for the integration tests.
//!
//! - [`server`]: an in-process HTTP server ([`server::TestServer`]) on
//!   `127.0.0.1:0` with request counters and misbehaviours (delays, stalls,
//!   chunking, lying `Content-Length`).
//! - [`changing`]: a site whose pages are edited, added and removed between
//!   runs ([`changing::ChangingSite`]), with ETag / Last-Modified and 304s.
//! - [`cli`]: running the real `legcrawl` binary with bounded waits.
//! - [`site`]: a deterministic generated site ([`site::Site`]) to crawl.
//! - [`warc`]: reading WARC files back, and running `warcio` on them.
//! - [`redis`]: a real `redis-server` child on a free port (skipped loudly when
//!   missing, unless `LEGCRAWL_REQUIRE_REDIS=1`).
//! - [`cluster`]: a real three-master Redis Cluster (three `redis-server`
//!   children joined by `redis-cli --cluster create`).
//! - [`hosts`]: a generated site over several loopback hosts (127.0.0.2, ...).
//! - [`workers`]: the worker processes of one shared crawl, and `dump --shared`.
//! - [`serve`]: `legcrawl serve` as a child, its HTTP client, the Prometheus
//!   text parser and headless chromium.
//! - [`tinyproxy`]: a real `tinyproxy` child on a free port (skipped loudly
//!   when missing, unless `LEGCRAWL_REQUIRE_PROXY=1`).
//! - [`tcp_proxy`]: a TCP proxy between workers and Redis that a test can
//!   re-point (a failover) or black-hole (a network that drops packets).
//! - [`tls`]: a CA and a server certificate for the `rediss://` and https
//!   tests (rcgen), and the https server's TLS configuration.
//! - [`lazyfs`]: a FUSE filesystem that drops what was not fsynced at a
//!   simulated power cut ([`lazyfs::PowerCutFs`]), after Jepsen's LazyFS.
//! - [`politeness`]: judging a host's request log against `--per-host` and
//!   `--delay`.
//! - [`scripts`]: requests and seeds for calling the shared crawl's scripts
//!   directly.
//! - [`mode`]: one test body over both frontiers: [`mode::Crawler`] runs a
//!   crawl embedded (`--data`) or shared through Redis ([`mode::Mode`]).
//! - [`skip`]: the loud `SKIPPED` line of a test whose program is missing.
//!
//! Everything here is hermetic: it only binds and talks to loopback addresses
//! (127.0.0.x), and every wait is bounded.
#![allow(dead_code)]

use std::collections::{BTreeSet, HashSet};

pub mod changing;
pub mod cli;
pub mod cluster;
pub mod hosts;
pub mod lazyfs;
pub mod mode;
pub mod politeness;
pub mod pywb;
pub mod redis;
pub mod scripts;
pub mod serve;
pub mod server;
pub mod site;
pub mod skip;
pub mod stream;
pub mod tcp_proxy;
pub mod tinyproxy;
pub mod tls;
pub mod warc;
pub mod workers;

#[allow(unused_imports)]
pub use server::{BodyMode, Handler, TestRequest, TestResponse, TestServer, handler};
pub use site::Site;

/// The environment variable that replays the random kill moments of a run.
pub const KILL_SEED_VAR: &str = "LEGCRAWL_KILL_SEED";

/// The seed every random kill moment of test `name` derives from (through
/// [`splitmix64`]): `LEGCRAWL_KILL_SEED` when set, to replay a failed run,
/// otherwise the clock. Printed to stderr (shown with the test's failure).
pub fn kill_seed(name: &str) -> u64 {
    let seed = match std::env::var(KILL_SEED_VAR) {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{KILL_SEED_VAR}={value:?} is not a u64")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    };
    eprintln!("{name}: kill-moment seed {seed} (replay with {KILL_SEED_VAR}={seed})");
    seed
}

/// Asserts that `paths` holds each of `expected` exactly once and nothing else;
/// `what` names the list in the message.
pub fn assert_each_once(paths: &[String], expected: &BTreeSet<String>, what: &str) {
    let mut got = BTreeSet::new();
    let twice: Vec<&String> = paths.iter().filter(|p| !got.insert((*p).clone())).collect();
    assert!(twice.is_empty(), "{what}: stored more than once: {twice:?}");
    let missing: Vec<_> = expected.difference(&got).take(5).collect();
    let extra: Vec<_> = got.difference(expected).take(5).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{what}: missing {missing:?}, unexpected {extra:?}"
    );
}

/// Copies the files and directories under `from` into `to` (made if
/// missing); a socket (the `read.sock` a crawl killed with `-9` leaves) is
/// not copied, as `tar` skips it.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    use std::os::unix::fs::FileTypeExt;
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            copy_dir(&entry.path(), &target);
        } else if !kind.is_socket() {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// Every path under `dir` with its length, sorted: compared before and after a
/// command to show it touched nothing (empty when `dir` does not exist).
pub fn listing(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            }
            out.push((entry.path().display().to_string(), meta.len()));
        }
    }
    out.sort();
    out
}

/// The URLs of every request queued (or leased) in `state`.
pub fn queued_urls(state: &legcrawl::store::State) -> HashSet<String> {
    state
        .frontier_head(usize::MAX)
        .expect("frontier")
        .into_iter()
        .map(|e| e.request.url)
        .collect()
}

/// splitmix64: a fixed, dependency-free PRNG (kill moments, random choices).
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Borrows each string of `v` (to pass owned arguments as `&[&str]`).
pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `v`, sorted.
pub fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

/// A current-thread tokio runtime, for tests that call the library's async
/// API (the shared crawl's scripts) one call at a time.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Polls `ready` every 5 ms until it holds; fails naming `what` when it does
/// not within `limit`.
pub fn wait_until(what: &str, limit: std::time::Duration, ready: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never happened"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A site of one hub page, `/`, linking `/p/0` to `/p/{links - 1}` (empty
/// pages), with no robots.txt: the shape the politeness tests time.
pub fn hub_site(links: usize) -> TestServer {
    TestServer::start(handler(move |req| match req.path() {
        "/robots.txt" => TestResponse::not_found(),
        "/" => TestResponse::html(
            (0..links)
                .map(|i| format!("<a href=/p/{i}>x</a>"))
                .collect::<String>(),
        ),
        _ => TestResponse::html(String::new()),
    }))
}

/// When the requests `server` logged arrived, robots.txt left out, in order.
pub fn arrivals(server: &TestServer) -> Vec<std::time::Instant> {
    let mut times: Vec<_> = server
        .log()
        .into_iter()
        .filter(|logged| logged.target != "/robots.txt")
        .map(|logged| logged.start)
        .collect();
    times.sort();
    times
}
