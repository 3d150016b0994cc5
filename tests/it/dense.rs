//! A page with more links than one group takes (`legcrawl::store::LINK_CHUNK`):
//! its links are queued part by part, each part in a commit group of its own,
//! and the page completes with the last part. These tests crawl such a page with
//! the real binary and check the parts (`links.chunk` in the crash trace), then
//! abort the binary at crash point `links.chunk` — with earlier parts sealed or
//! durable and the page not complete — and check that nothing the seen set
//! claims is lost (invariant 2), that the resumed run fetches the page again and
//! ends with every link queued exactly once and the page's item stored once
//! (invariants 1 and 3). The crash-point suite's site has no such page, so it
//! leaves this point to these tests. The last test checks that the binary runs
//! with the allocator options that bound a dense page's memory.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use legcrawl::crash::{CRASH_AT_ENV, TRACE_ENV};
use legcrawl::fingerprint::fingerprint;
use legcrawl::request::Request;
use legcrawl::store::{LINK_CHUNK, OpenOptions, Seen, State};

use crate::support::cli::{self, dump_items, dump_summary, legcrawl};
use crate::support::server::TestResponse;
use crate::support::{TestServer, handler, queued_urls};

/// Links on the dense page: three full parts before the last one.
const LINKS: usize = 3 * LINK_CHUNK + 100;
const LIMIT: Duration = Duration::from_secs(60);

/// `/` links to `/p/0` .. `/p/{links - 1}`; those are small pages without links
/// (also the shared crawl's dense page, `shared.rs`).
pub(crate) fn serve_dense(links: usize) -> TestServer {
    let mut dense = String::from("<!DOCTYPE html><html><head><title>Dense</title></head><body>\n");
    for i in 0..links {
        dense.push_str(&format!("<a href=\"/p/{i}\">{i}</a>\n"));
    }
    dense.push_str("</body></html>\n");
    TestServer::start(handler(move |req| match req.path() {
        "/" => TestResponse::html(dense.clone()),
        path if path.starts_with("/p/") => {
            TestResponse::html("<html><head><title>Leaf</title></head><body>leaf</body></html>")
        }
        _ => TestResponse::not_found(),
    }))
}

/// `crawl` of one page (the seed, or the resumed queue's first request).
fn crawl(data: &Path, seed: Option<&str>) -> std::process::Command {
    let mut args = vec!["crawl"];
    args.extend(seed);
    args.extend(["--ignore-robots", "--concurrency", "1", "--max-pages", "1"]);
    legcrawl(data, &args)
}

fn links(server: &TestServer) -> HashSet<String> {
    (0..LINKS).map(|i| server.url(&format!("/p/{i}"))).collect()
}

/// Invariant 2 on a crashed state: every link the seen set claims is queued,
/// the dense page is still queued and nothing is completed. Returns how many
/// links are queued.
fn check_after_crash(data: &Path, server: &TestServer, point: &str) -> usize {
    let state = State::open(data, &OpenOptions::default()).expect("the crashed state opens");
    let queued = queued_urls(&state);
    assert!(
        queued.contains(&server.url("/")),
        "{point}: the dense page is not complete, so it stays queued"
    );
    assert_eq!(state.counter("pages/completed"), 0, "{point}: pages");
    assert_eq!(state.items_len(), 0, "{point}: items");
    let mut seen = 0;
    for link in links(server) {
        let answer = state
            .check_seen(&fingerprint(&Request::get(link.clone()), &[]))
            .expect("seen set");
        if answer == Seen::Duplicate {
            seen += 1;
            assert!(
                queued.contains(&link),
                "{point}: {link} is seen but not queued"
            );
        }
    }
    assert_eq!(
        queued.len(),
        seen + 1,
        "{point}: queued = seen links + the page"
    );
    seen
}

/// After the resumed run: the page completed once, its item stored once, every
/// link queued exactly once.
fn check_done(data: &Path, server: &TestServer, point: &str) {
    let summary = dump_summary(data);
    assert_eq!(summary["pages"], 1, "{point}: pages completed");
    assert_eq!(summary["items"], 1, "{point}: items");
    assert_eq!(
        summary["frontier"], LINKS as u64,
        "{point}: queued requests"
    );
    let items = dump_items(data);
    assert_eq!(items.len(), 1, "{point}: item lines");
    assert_eq!(items[0]["url"], server.url("/"), "{point}: the item");
    let state = State::open(data, &OpenOptions::default()).expect("state opens");
    assert_eq!(queued_urls(&state), links(server), "{point}: the queue");
}

#[test]
fn a_dense_page_queues_its_links_in_parts() {
    let server = serve_dense(LINKS);
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("state");
    let trace = dir.path().join("trace");
    let mut cmd = crawl(&data, Some(&server.url("/")));
    cmd.env(TRACE_ENV, &trace);
    let out = cli::run(cmd, LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hits = std::fs::read_to_string(&trace).expect("trace");
    let parts = hits.lines().filter(|l| *l == "links.chunk").count();
    assert_eq!(
        parts,
        LINKS / LINK_CHUNK,
        "parts queued before the last one"
    );
    check_done(&data, &server, "no crash");
}

#[test]
fn a_crash_between_parts_of_a_dense_page_loses_no_link() {
    let server = serve_dense(LINKS);
    // The first part (nothing of the page durable yet), and the last one (two
    // parts durable or sealed before it).
    for hit in [1, LINKS / LINK_CHUNK] {
        let point = format!("links.chunk:{hit}");
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("state");
        let fetched = server.hits("/");
        let mut cmd = crawl(&data, Some(&server.url("/")));
        cmd.env(CRASH_AT_ENV, &point);
        let out = cli::run(cmd, LIMIT);
        assert!(!out.status.success(), "{point}: the crash did not happen");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("crash point {point}")),
            "{point}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let seen = check_after_crash(&data, &server, &point);
        if hit > 1 {
            // Parts before the one sealed last are durable.
            assert!(seen >= (hit - 2) * LINK_CHUNK, "{point}: {seen} links seen");
        }
        let out = cli::run(crawl(&data, None), LIMIT);
        assert!(
            out.status.success(),
            "{point}: resume: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Fetched by the crashed run, and again by the resumed one.
        assert_eq!(
            server.hits("/") - fetched,
            2,
            "{point}: fetches of the page"
        );
        check_done(&data, &server, &point);
    }
}

/// The binary's jemalloc options are in force (`src/main.rs`; docs/performance.md, *Large
/// frontier*): asked to confirm its options, jemalloc names where each came
/// from.
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[test]
fn the_binary_runs_jemalloc_with_its_memory_options() {
    let mut cmd = std::process::Command::new(cli::bin());
    cmd.arg("--version")
        .env("_RJEM_MALLOC_CONF", "confirm_conf:true");
    let out = cli::run(cmd, LIMIT);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "global variable malloc_conf): \"narenas:1,dirty_decay_ms:1000,muzzy_decay_ms:0\""
        ),
        "{stderr}"
    );
}
