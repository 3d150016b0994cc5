//! A leg that panics, in-process: `engine::run` with an injected shutdown as a
//! safety net. The page whose task panicked is a failed page (`fetch/panicked`),
//! its lease is completed (not retried), and the crawl ends by itself.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use legcrawl::config::CrawlConfig;
use legcrawl::engine::{self, RunReport};
use legcrawl::legs::{self, Leg};
use legcrawl::store::records::RunOutcome;

use crate::support::cli::{counter, dump_pages, dump_runs};
use crate::support::{TestResponse, TestServer, handler};

/// When the injected shutdown fires: far beyond what these crawls need.
const SAFETY_NET: Duration = Duration::from_secs(30);
/// A run is expected to end by itself well within this.
const EXPECTED: Duration = Duration::from_secs(10);

/// A server answering every path with a small HTML page linking nowhere.
fn pages_server() -> TestServer {
    TestServer::start(handler(|req| {
        if req.path() == "/robots.txt" {
            return TestResponse::not_found();
        }
        TestResponse::html(format!("<title>{}</title>", req.path()))
    }))
}

/// Runs `engine::run` on its own runtime with a shutdown that fires after
/// [`SAFETY_NET`]; returns the report, whether the shutdown fired, and how long
/// the run took. A run that outlives even the shutdown's grace is a failure.
fn run_in_process(config: &CrawlConfig, legs: Arc<dyn Leg>) -> (RunReport, bool, Duration) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let fired = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&fired);
    let shutdown = async move {
        tokio::time::sleep(SAFETY_NET).await;
        flag.store(true, Ordering::SeqCst);
    };
    let started = Instant::now();
    let report = runtime
        .block_on(async {
            tokio::time::timeout(
                SAFETY_NET + Duration::from_secs(30),
                engine::run(config, legs, shutdown),
            )
            .await
        })
        .expect("engine::run did not end even after its shutdown")
        .expect("engine::run failed");
    let took = started.elapsed();
    runtime.shutdown_timeout(Duration::from_secs(5));
    (report, fired.load(Ordering::SeqCst), took)
}

fn config(data: &Path, seeds: Vec<String>) -> CrawlConfig {
    CrawlConfig {
        data_dir: data.to_path_buf(),
        seeds,
        concurrency: 4,
        per_host: 4,
        bloom_bits: Some(20),
        shutdown_grace: Duration::from_secs(1),
        ..CrawlConfig::default()
    }
}

#[test]
fn a_panicking_leg_fails_its_pages_and_the_crawl_ends() {
    const SEEDS: usize = 8;
    const FIRST: u64 = 5;
    let server = pages_server();
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    let paths: Vec<String> = (0..SEEDS).map(|i| format!("/s/{i}")).collect();
    let seeds: Vec<String> = paths.iter().map(|path| server.url(path)).collect();
    let legs: Arc<dyn Leg> = Arc::new(legs::from_fn(|_, _| panic!("boom")));

    // First run: stopped by a limit, so the second one resumes the same cycle.
    let mut first = config(&state, seeds.clone());
    first.max_pages = Some(FIRST);
    let (report, fired, took) = run_in_process(&first, Arc::clone(&legs));
    assert!(!fired, "the run was ended by the safety net after {took:?}");
    assert!(took < EXPECTED, "the run took {took:?}");
    assert_eq!(report.outcome, RunOutcome::Limit);
    assert_eq!(report.totals.pages, FIRST, "every leased page is completed");
    assert_eq!(report.items, 0);
    assert_eq!(
        report.totals.failed, FIRST,
        "a panicked page counts as failed"
    );
    let fetched: u64 = paths.iter().map(|path| server.hits(path)).sum();
    assert_eq!(fetched, FIRST);
    let records = dump_runs(&state);
    assert_eq!(counter(&records[0], "fetch/panicked"), fetched);

    // Second run: the rest of the cycle; nothing the first run leased again.
    let (report, fired, took) = run_in_process(&config(&state, Vec::new()), legs);
    assert!(!fired, "the second run was ended by the safety net");
    assert!(took < EXPECTED, "the second run took {took:?}");
    assert!(!report.new_cycle, "the second run resumes the cycle");
    assert_eq!(report.outcome, RunOutcome::Drained);
    assert_eq!(report.totals.pages, SEEDS as u64 - FIRST);
    for path in &paths {
        assert_eq!(server.hits(path), 1, "{path} fetched again in the cycle");
    }
    let records = dump_runs(&state);
    assert_eq!(records.len(), 2);
    assert_eq!(
        counter(&records[1], "fetch/panicked"),
        SEEDS as u64 - FIRST,
        "{}",
        records[1]
    );
    assert_eq!(counter(&records[1], "fetch/failed"), SEEDS as u64 - FIRST);
}

#[test]
fn one_panicking_page_does_not_stop_the_others() {
    // A leg that panics (with a formatted message: a String payload) on one page
    // only, in front of the bundled legs.
    let server = TestServer::start(handler(|req| match req.path() {
        "/" => TestResponse::html("<a href=\"/a\">a</a><a href=\"/bad\">b</a><a href=\"/c\">c</a>"),
        "/robots.txt" => TestResponse::not_found(),
        path => TestResponse::html(format!("<title>{path}</title>")),
    }));
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    let config = config(&state, vec![server.url("/")]);
    let mut stack = legs::Stack::new()
        .push(legs::from_fn(|response, _| {
            if response.url.path() == "/bad" {
                panic!("cannot take {}", response.url);
            }
        }))
        .push(legcrawl::crawlfile::default_legs());
    stack.configure(&config).expect("legs configured");
    let (report, fired, took) = run_in_process(&config, Arc::new(stack));
    assert!(!fired, "ended by the safety net after {took:?}");
    assert_eq!(report.outcome, RunOutcome::Drained);
    assert_eq!(report.totals.pages, 4);
    assert_eq!(report.totals.failed, 1);
    assert_eq!(
        report.items, 3,
        "every page but the panicked one has its item"
    );
    assert_eq!(server.hits("/bad"), 1);
    let records = dump_runs(&state);
    assert_eq!(counter(&records[0], "fetch/panicked"), 1);
}

#[test]
fn a_revisit_that_panics_keeps_its_record_and_stays_due() {
    // Every body carries a generation number: bumping it changes every page, so
    // a revisit hands the new body to the legs.
    let generation = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let current = Arc::clone(&generation);
    let server = TestServer::start(handler(move |req| {
        let n = current.load(Ordering::SeqCst);
        match req.path() {
            "/" => TestResponse::html(format!(
                "<title>hub {n}</title><a href=\"/a\">a</a><a href=\"/b\">b</a>"
            )),
            "/robots.txt" => TestResponse::not_found(),
            path => TestResponse::html(format!("<title>{path} {n}</title>")),
        }
    }));
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    let mut config = config(&state, vec![server.url("/")]);
    config.revisit = legcrawl::config::Revisit::After(Duration::ZERO);
    let bundled = || -> Arc<dyn Leg> {
        let mut legs = legcrawl::crawlfile::default_legs();
        legs.configure(&config).expect("legs configured");
        Arc::new(legs)
    };
    let (report, fired, _) = run_in_process(&config, bundled());
    assert!(!fired);
    assert_eq!(report.items, 3);

    generation.store(2, Ordering::SeqCst);
    let boom: Arc<dyn Leg> = Arc::new(legs::from_fn(|_, _| panic!("boom")));
    let (report, fired, took) = run_in_process(&config, boom);
    assert!(!fired, "ended by the safety net after {took:?}");
    assert!(report.new_cycle);
    assert_eq!(report.outcome, RunOutcome::Drained);
    assert_eq!(
        (report.totals.pages, report.totals.failed, report.items),
        (3, 3, 0)
    );
    let records = dump_pages(&state, false);
    for path in ["/", "/a", "/b"] {
        assert_eq!(records[path]["version"], 1, "{path}: {}", records[path]);
    }
    let due = dump_pages(&state, true);
    assert!(
        due.contains_key("/a") && due.contains_key("/b"),
        "the failed revisits stay due: {due:?}"
    );

    // The next cycle fetches them again and stores the new versions.
    let (report, fired, _) = run_in_process(&config, bundled());
    assert!(!fired);
    assert_eq!(
        (
            report.totals.pages,
            report.totals.failed,
            report.totals.changed
        ),
        (3, 0, 3)
    );
    let records = dump_pages(&state, false);
    for path in ["/", "/a", "/b"] {
        assert_eq!(records[path]["version"], 2, "{path}: {}", records[path]);
    }
}
