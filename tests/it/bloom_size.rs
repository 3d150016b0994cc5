//! The Bloom filter sized to its crawl: a small crawl leaves a small state,
//! and a crawl that outgrows its filter grows it at a checkpoint, without
//! losing or repeating a page, also when it is killed there.

use std::path::Path;
use std::time::Duration;

use legcrawl::crash::CRASH_AT_ENV;
use legcrawl::store::sizing::START_BITS_ENV;
use legcrawl::store::{OpenOptions, State};

use crate::support::cli::{self, item_path, legcrawl};
use crate::support::{Site, TestServer, assert_each_once};

const LIMIT: Duration = Duration::from_secs(60);

/// Bytes the files under `dir` take on disk (allocated blocks, as `du` counts).
fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("reading the state") {
        let entry = entry.expect("a directory entry");
        let meta = entry.metadata().expect("metadata");
        total += match meta.is_dir() {
            true => disk_usage(&entry.path()),
            false => meta.blocks() * 512,
        };
    }
    total
}

/// `dump summary --json`'s Bloom size (log2 of bits) and whether it is sized.
fn bloom(state: &Path) -> (u64, bool) {
    let summary = cli::dump_summary(state);
    (
        summary["bloom_bits"].as_u64().expect("bloom_bits"),
        summary["bloom_sized"].as_bool().expect("bloom_sized"),
    )
}

fn crawl(state: &Path, seed: &str, start_bits: Option<&str>, crash_at: Option<&str>) -> bool {
    let mut cmd = legcrawl(state, &["crawl", seed, "--checkpoint-every", "0.01"]);
    if let Some(bits) = start_bits {
        cmd.env(START_BITS_ENV, bits);
    }
    if let Some(point) = crash_at {
        cmd.env(CRASH_AT_ENV, point);
    }
    let out = cli::run(cmd, LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        return true;
    }
    // Only an abort at the named crash point may end a crawl early.
    use std::os::unix::process::ExitStatusExt;
    assert!(
        crash_at.is_some() && out.status.signal() == Some(libc::SIGABRT),
        "crawl failed ({:?}): {stderr}",
        out.status
    );
    false
}

fn assert_each_page_once(state: &Path, site: &Site) {
    let paths: Vec<String> = cli::dump_items(state).iter().map(item_path).collect();
    assert_each_once(&paths, &site.reachable(), "items");
}

/// Every URL the exact set knows is a "maybe" of the filter: a grown filter
/// that lost a durable fingerprint would let its URL be queued again.
fn assert_bloom_holds_the_exact_set(state: &Path, server: &TestServer, site: &Site, point: &str) {
    let state = State::open(state, &OpenOptions::default())
        .unwrap_or_else(|e| panic!("after a crash at {point}: open: {e}"));
    let mut known = 0;
    for path in site.reachable() {
        let answer = state
            .seen_answer(&server.url(&path), &[])
            .expect("seen lookup");
        if answer.exact == Some(true) {
            known += 1;
            assert!(
                answer.bloom,
                "after a crash at {point}: the filter lost {path}"
            );
        }
    }
    assert!(known > 0, "after a crash at {point}: nothing seen yet");
}

#[test]
fn a_101_page_crawl_leaves_a_state_of_at_most_5_mb() {
    let site = Site::generate(101, 7);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    assert!(crawl(&state, &server.url("/"), None, None));
    assert_each_page_once(&state, &site);
    assert_eq!(bloom(&state), (20, true));
    let used = disk_usage(&state);
    assert!(used <= 5 << 20, "the state takes {used} bytes on disk");
}

#[test]
fn a_crawl_that_outgrows_its_filter_grows_it_and_stays_exact() {
    let site = Site::generate(400, 11);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    assert!(crawl(&state, &server.url("/"), Some("10"), None));
    assert_each_page_once(&state, &site);
    let (bits, sized) = bloom(&state);
    assert!(sized);
    assert!(bits > 10, "the filter stayed at 2^{bits} bits");
    assert!(!state.join("bloom.bin.rebuild").exists());
    // The job names no size, so the next run keeps growing it.
    let job = cli::run(legcrawl(&state, &["dump", "job"]), LIMIT);
    assert!(!String::from_utf8_lossy(&job.stdout).contains("bloom_bits"));
    // A size given for a sized state is refused in one line.
    let out = cli::run(legcrawl(&state, &["crawl", "--bloom-bits", "24"]), LIMIT);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sized to the crawl"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn a_crawl_killed_while_its_filter_grows_resumes_exactly() {
    for point in ["bloom.grow:1", "bloom.grow.switch:1"] {
        let site = Site::generate(300, 5);
        let server = TestServer::start(site.handler());
        let data = tempfile::tempdir().expect("temp dir");
        let state = data.path().join("state");
        let seed = server.url("/");
        assert!(
            !crawl(&state, &seed, Some("10"), Some(point)),
            "the crawl never reached {point}"
        );
        assert_bloom_holds_the_exact_set(&state, &server, &site, point);
        assert!(crawl(&state, &seed, Some("10"), None));
        assert_each_page_once(&state, &site);
        let (bits, _) = bloom(&state);
        assert!(bits > 10, "after a crash at {point}: 2^{bits} bits");
    }
}
