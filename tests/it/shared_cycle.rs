//! Issue 25, item 3: a new cycle of a shared crawl queues every due page even
//! when the first chunk of the due index (`CYCLE_CHUNK`, 1,000) is all seeds.
//!
//! The crawl has 1,050 seeds on one host and 50 linked pages on another that
//! answer slowly, so every seed is fetched (and due) before any page: the
//! first 1,000 entries of the due index in cycle 2 are seeds. Cycle 2 must
//! fetch every seed and every one of the 50 due pages again.

use std::time::Duration;

use crate::support::redis::RedisServer;
use crate::support::server::{TestResponse, TestServer, handler};
use crate::support::workers::{Crawl, serial};

/// Longest any one run may take.
const LIMIT: Duration = Duration::from_secs(180);
const SEEDS: usize = 1050;
const PAGES: usize = 50;

#[test]
fn a_cycle_whose_first_due_chunk_is_all_seeds_queues_every_due_page() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("a_cycle_whose_first_due_chunk_is_all_seeds") else {
        return;
    };
    let pages = TestServer::start_on(
        "127.0.0.3",
        handler(|req| {
            TestResponse::html(format!("<title>{}</title>", req.path()))
                .delay(Duration::from_millis(1500))
        }),
    );
    let pages_base = pages.url("");
    let pages_base = pages_base.trim_end_matches('/').to_owned();
    let seeds = TestServer::start_on(
        "127.0.0.2",
        handler(move |req| {
            let mut body = format!("<title>{}</title>", req.path());
            if req.path() == "/s/0" {
                for p in 0..PAGES {
                    body.push_str(&format!("<a href=\"{pages_base}/p/{p}\">p</a>"));
                }
            }
            TestResponse::html(body)
        }),
    );
    let seed_urls: Vec<String> = (0..SEEDS).map(|s| seeds.url(&format!("/s/{s}"))).collect();
    let mut argv: Vec<&str> = seed_urls.iter().map(String::as_str).collect();
    argv.extend(["--allow-host", "127.0.0.3", "--ignore-robots"]);
    argv.extend(["--revisit-after", "0", "--concurrency", "64"]);
    argv.extend(["--per-host", "64", "--delay", "0"]);
    let mut crawl = Crawl::new(&redis.url(), "cycle");
    crawl.spawn(&argv);
    crawl.wait_all_ok(LIMIT);
    assert_eq!(seeds.requests(), SEEDS as u64, "cycle 1 fetched every seed");
    assert_eq!(pages.requests(), PAGES as u64, "cycle 1 fetched every page");
    // The cycle's due time is in whole seconds: start cycle 2 a second on.
    std::thread::sleep(Duration::from_millis(1100));
    crawl.spawn(&[]);
    crawl.wait_all_ok(LIMIT);
    assert_eq!(
        seeds.requests(),
        2 * SEEDS as u64,
        "cycle 2 fetched every seed again: {}",
        crawl.logs_tail()
    );
    let missed: Vec<usize> = (0..PAGES)
        .filter(|p| pages.hits(&format!("/p/{p}")) != 2)
        .collect();
    assert!(
        missed.is_empty(),
        "cycle 2 did not fetch {} of the {PAGES} due pages (e.g. /p/{:?}): {}",
        missed.len(),
        missed.first(),
        crawl.logs_tail()
    );
}
