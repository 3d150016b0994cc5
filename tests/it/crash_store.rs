//! Crash test of the state alone: a child process completes lease after lease of
//! a synthetic site and is killed with SIGKILL at random moments, 30 times. After
//! each kill the state is reopened and invariants 1 and 2 of BRIEF.md are checked:
//! no item twice, and every URL marked seen is completed (has its item) or queued;
//! the Bloom bits never claim a URL the durable frontier does not know.
//!
//! The child is this same test binary, re-run with `LEGCRAWL_CRASH_CHILD` set.

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use legcrawl::item::Item;
use legcrawl::request::Request;
use legcrawl::store::{Completion, OpenOptions, State, StoreError};

const PAGES: u64 = 60_000;
const LINKS: u64 = 20;
const KILLS: usize = 30;
const CHILD_ENV: &str = "LEGCRAWL_CRASH_CHILD";

fn url(i: u64) -> String {
    format!("http://crash.test/p/{i}")
}

fn page_index(url: &str) -> u64 {
    url.rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("synthetic URL")
}

/// The links of page i: 20 pseudo-random pages (deterministic).
fn links(i: u64) -> impl Iterator<Item = u64> {
    (0..LINKS).map(move |k| (i.wrapping_mul(2_654_435_761).wrapping_add(k * 40_503 + 1)) % PAGES)
}

fn options() -> OpenOptions {
    OpenOptions {
        create: true,
        bloom_bits: Some(24),
        begin_run: true,
        ..OpenOptions::default()
    }
}

/// Child body: crawl the synthetic site until drained (or killed).
fn run_child(dir: &Path) {
    let mut state = State::open(dir, &options()).expect("child opens the state");
    state.add_seeds(&[url(0)], &[]).expect("seed");
    loop {
        let Some(lease) = state.lease().expect("lease") else {
            if state.commit().expect("commit").pages == 0 {
                break;
            }
            continue;
        };
        let i = page_index(&lease.request.url);
        let requests = links(i)
            .map(|j| Request::follow(&lease.request, url(j)))
            .collect();
        let mut item = Item::new();
        item.insert("url".into(), lease.request.url.clone().into());
        state
            .complete(
                Completion {
                    lease,
                    requests,
                    items: vec![item],
                    counters: vec![],
                },
                &[],
            )
            .expect("complete");
        if state.group_due() || state.in_flight() >= 64 {
            state.commit().expect("commit");
        }
    }
    state
        .end_run(legcrawl::store::records::RunOutcome::Drained)
        .expect("end run");
}

#[test]
fn crash_child() {
    // Does nothing unless started by `kill_nine_30_times_keeps_invariants`.
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        run_child(Path::new(&dir));
    }
}

fn spawn_child(dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().expect("test binary path"))
        .args([
            "--exact",
            "crash_store::crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child")
}

/// Checks invariants 1 and 2; returns the number of pages completed.
fn check_invariants(dir: &Path) -> usize {
    let state = match State::open(dir, &OpenOptions::default()) {
        // Killed while it created the state (the first round's kill can land
        // before the marker on a loaded machine): it held nothing yet, and the
        // next child creates it again. Progress never going back checks that
        // this happens only before any page completed.
        Err(StoreError::Incomplete { .. }) => return 0,
        opened => opened.expect("reopen after kill"),
    };
    let mut completed = HashSet::new();
    state
        .for_each_item(0, |_, text| {
            let item: serde_json::Value = serde_json::from_str(text).expect("item JSON");
            let url = item["url"].as_str().expect("url field").to_owned();
            assert!(
                completed.insert(url.clone()),
                "invariant 1: item for {url} stored twice"
            );
            true
        })
        .expect("read items");
    let queued = crate::support::queued_urls(&state);
    for i in 0..PAGES {
        let u = url(i);
        let answer = state.seen_answer(&u, &[]).expect("seen lookup");
        let known = completed.contains(&u) || queued.contains(&u);
        if answer.exact == Some(true) {
            assert!(
                known,
                "invariant 2: {u} is marked seen but neither completed nor queued"
            );
        }
        // A 2^24-bit filter holding at most 60k keys has a false-positive rate
        // around 1e-12: a "maybe" the exact set denies means the bits ran ahead.
        assert!(
            !answer.bloom || answer.exact == Some(true),
            "Bloom bits ran ahead of the durable frontier for {u}"
        );
        if known {
            assert_eq!(
                answer.exact,
                Some(true),
                "{u} is queued or completed but not marked seen"
            );
        }
    }
    completed.len()
}

#[test]
fn kill_nine_30_times_keeps_invariants() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut rng = crate::support::kill_seed("kill_nine_30_times_keeps_invariants");
    let mut progress = Vec::new();
    for round in 0..KILLS {
        let mut child = spawn_child(dir.path());
        // Short enough that the kills land while the crawl runs (a whole
        // crawl takes about 1.5 s here): checked below.
        let wait = Duration::from_millis(20 + crate::support::splitmix64(&mut rng) % 60);
        std::thread::sleep(wait);
        child.kill().expect("SIGKILL the child");
        child.wait().expect("reap the child");
        let done = check_invariants(dir.path());
        progress.push(done);
        eprintln!("round {round}: killed after {wait:?}, {done} pages completed");
    }
    // Finish the crawl without interruption: every page exactly once.
    let started = Instant::now();
    let status = spawn_child(dir.path()).wait().expect("final child");
    assert!(status.success(), "final child failed: {status}");
    assert!(started.elapsed() < Duration::from_secs(300));
    let done = check_invariants(dir.path());
    let reachable: HashSet<u64> = reachable_pages();
    assert_eq!(
        done,
        reachable.len(),
        "the finished crawl holds every reachable page once"
    );
    assert!(
        progress.windows(2).all(|w| w[0] <= w[1]),
        "completed pages never go backwards: {progress:?}"
    );
    // The kills landed mid-crawl: most before the crawl was done, and many
    // in a round that completed pages (not only while the state opened).
    let unfinished = progress.iter().filter(|&&d| d < done).count();
    let moving = progress
        .iter()
        .zip(std::iter::once(&0).chain(&progress))
        .filter(|(now, before)| now > before && **now < done)
        .count();
    assert!(
        unfinished * 4 >= KILLS * 3 && moving * 3 >= KILLS,
        "{unfinished} of {KILLS} kills before the crawl was done, {moving} mid-progress: {progress:?}"
    );
}

fn reachable_pages() -> HashSet<u64> {
    let mut seen = HashSet::from([0]);
    let mut stack = vec![0];
    while let Some(i) = stack.pop() {
        for j in links(i) {
            if seen.insert(j) {
                stack.push(j);
            }
        }
    }
    seen
}
