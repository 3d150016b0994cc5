//! The state directory as users damage it: a lost marker, two crawls started at
//! once on a new `--data`, a file given as `--data`.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::cli::{self, item_path, legcrawl};
use crate::support::{Site, TestServer, handler, listing};

const LIMIT: Duration = Duration::from_secs(60);

/// A generated site, its server, and a state in a temp dir that crawled it whole.
struct Crawled {
    site: Site,
    server: TestServer,
    data: tempfile::TempDir,
    state: std::path::PathBuf,
    seed: String,
}

fn crawled(pages: usize, seed: u64) -> Crawled {
    let site = Site::generate(pages, seed);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    let seed = server.url("/");
    let out = cli::run(
        legcrawl(&state, &["crawl", &seed, "--bloom-bits", "16"]),
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Crawled {
        site,
        server,
        data,
        state,
        seed,
    }
}

#[test]
fn a_state_that_lost_its_marker_is_refused_by_every_command_and_kept_whole() {
    let Crawled {
        site,
        server: _server,
        data: _data,
        state,
        seed,
    } = crawled(20, 3);
    std::fs::remove_file(state.join("LEGCRAWL")).expect("remove the marker");
    let before = listing(&state);
    for args in [
        &["dump", "summary"][..],
        &["dump", "items"],
        &["crawl", &seed, "--bloom-bits", "16"],
        &["crawl"],
    ] {
        let out = cli::run(legcrawl(&state, args), LIMIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("no LEGCRAWL marker"), "{args:?}: {stderr}");
        assert_eq!(listing(&state), before, "{args:?} touched the state");
    }
    // Putting the marker back gives the crawl back, whole.
    let marker = format!("legcrawl state format {}\n", legcrawl::store::STATE_FORMAT);
    std::fs::write(state.join("LEGCRAWL"), marker).expect("marker");
    assert_eq!(cli::dump_items(&state).len(), site.reachable().len());
}

#[test]
fn two_crawls_started_at_once_on_a_new_state_never_both_run() {
    let site = Site::generate(60, 5);
    let inner = site.handler();
    let server = TestServer::start(handler(move |req| {
        inner(req).delay(Duration::from_millis(15))
    }));
    let seed = server.url("/");
    for trial in 0..5 {
        let data = tempfile::tempdir().expect("temp dir");
        let state = data.path().join("new");
        let output = data.path().join("same.jsonl");
        let args = [
            "crawl",
            &seed,
            "--bloom-bits",
            "16",
            "--per-host",
            "2",
            "--output",
            output.to_str().expect("UTF-8 path"),
        ];
        let spawn = || {
            legcrawl(&state, &args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn legcrawl")
        };
        let (first, second) = (spawn(), spawn());
        let outs = [
            cli::wait_output(first, LIMIT),
            cli::wait_output(second, LIMIT),
        ];
        let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
        let busy = outs
            .iter()
            .filter(|o| {
                o.status.code() == Some(2) && String::from_utf8_lossy(&o.stderr).contains("busy")
            })
            .count();
        assert_eq!(
            (codes.iter().filter(|c| **c == Some(0)).count(), busy),
            (1, 1),
            "trial {trial}: one crawl runs, the other finds the state busy: {codes:?} {:?}",
            outs.iter()
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .collect::<Vec<_>>()
        );
        let lines = cli::parse_lines(&std::fs::read(&output).expect("output"));
        let paths: Vec<String> = lines.iter().map(item_path).collect();
        let unique: BTreeSet<&String> = paths.iter().collect();
        assert_eq!(unique.len(), paths.len(), "trial {trial}: duplicate lines");
        assert_eq!(unique.len(), site.reachable().len());
        let runs = cli::run(legcrawl(&state, &["dump", "runs"]), LIMIT);
        assert!(runs.status.success());
    }
}

#[test]
fn a_file_given_as_data_is_named_as_a_file_and_left_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("site.toml");
    std::fs::write(&file, "seeds = []\n").expect("write");
    for args in [&["dump", "summary"][..], &["crawl", "http://127.0.0.1:9/"]] {
        let out = cli::run(legcrawl(&file, args), LIMIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("is a file"), "{args:?}: {stderr}");
    }
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "seeds = []\n"
    );
}

#[test]
fn fresh_never_deletes_a_crawl_it_cannot_restart_or_was_not_asked_to() {
    let Crawled {
        site,
        server,
        data: _data,
        state,
        seed,
    } = crawled(30, 9);
    let pages = site.reachable().len();
    let before = listing(&state);
    // No seeds to start again from: refused before anything is deleted.
    let out = cli::run(legcrawl(&state, &["crawl", "--fresh", "--yes"]), LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nothing was deleted"), "{stderr}");
    assert_eq!(listing(&state), before);
    // Seeds but no --yes and no terminal (tests run without one): refused.
    let out = cli::run(legcrawl(&state, &["crawl", &seed, "--fresh"]), LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("without --yes"), "{stderr}");
    assert_eq!(cli::dump_items(&state).len(), pages, "the crawl is intact");
    // Asked for in full: the crawl starts over, one run, every page again.
    let requests = server.requests();
    let out = cli::run(
        legcrawl(
            &state,
            &["crawl", &seed, "--fresh", "--yes", "--bloom-bits", "16"],
        ),
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(cli::dump_items(&state).len(), pages);
    assert!(server.requests() >= requests + pages as u64);
}

#[test]
fn an_output_in_a_missing_directory_is_refused_before_a_state_is_made() {
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    let output = data.path().join("no/such/dir/out.jsonl");
    let out = cli::run(
        legcrawl(
            &state,
            &[
                "crawl",
                "http://127.0.0.1:9/",
                "--output",
                output.to_str().expect("UTF-8"),
            ],
        ),
        LIMIT,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!state.exists(), "no state was created");
}

/// Issue 14, item 9: `crawl --data TYPO` without URLs creates nothing; it says
/// there is no crawl there to continue (exit 2, one line).
#[test]
fn a_mistyped_data_without_urls_creates_nothing() {
    let data = tempfile::tempdir().expect("temp dir");
    for state in [data.path().join("typo"), data.path().to_owned()] {
        let out = cli::run(legcrawl(&state, &["crawl"]), LIMIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains("no crawl state here"), "{stderr}");
    }
    assert!(!data.path().join("typo").exists(), "no state was created");
    assert!(listing(data.path()).is_empty(), "nothing was created");
}
