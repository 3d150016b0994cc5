//! Issue 25, item 3 (and item 4's chunks, below): a new cycle of a shared
//! crawl queues every due page even
//! when the first chunk of the due index (`CYCLE_CHUNK`, 1,000) is all seeds.
//!
//! The crawl has 1,050 seeds on one host and 50 linked pages on another that
//! answer slowly, so every seed is fetched (and due) before any page: the
//! first 1,000 entries of the due index in cycle 2 are seeds. Cycle 2 must
//! fetch every seed and every one of the 50 due pages again.

use std::time::Duration;

use legcrawl::config::CrawlConfig;
use legcrawl::shared::client::{CycleKind, NewRequest, SCRIPT_CHUNK};
use legcrawl::shared::{Shared, SharedTarget};

use crate::support::redis::{RedisServer, Resp};
use crate::support::runtime;
use crate::support::scripts::seed;
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
    crawl.spawn(&["--revisit-after", "0"]);
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

/// A host of `n` seed pages `/s/I` without links.
fn seed_host(n: usize) -> (TestServer, Vec<String>) {
    let server = TestServer::start_on(
        "127.0.0.2",
        handler(|req| TestResponse::html(format!("<title>{}</title>", req.path()))),
    );
    let urls = (0..n).map(|s| server.url(&format!("/s/{s}"))).collect();
    (server, urls)
}

const WORKER_OPTIONS: [&str; 7] = [
    "--ignore-robots",
    "--concurrency",
    "32",
    "--per-host",
    "32",
    "--delay",
    "0",
];

/// Issue 25, item 4: seeds are stored in chunks. A worker killed after its
/// first chunk (played here by a job stored with every seed and that chunk
/// alone stored) leaves the rest to the next worker, even one given no
/// seeds: each seed is fetched exactly once.
#[test]
fn seeds_left_unstored_between_chunks_are_stored_by_the_next_worker() {
    const N: usize = 600;
    let _serial = serial();
    let Some(redis) = RedisServer::start("seeds_left_unstored_between_chunks") else {
        return;
    };
    let (server, urls) = seed_host(N);
    let target = SharedTarget::new(&redis.url(), "chunks").expect("target");
    runtime().block_on(async {
        let run = CrawlConfig {
            seeds: urls.clone(),
            ..CrawlConfig::default()
        };
        let plan = legcrawl::engine::worker::JobPlan {
            file: None,
            flags: &|_| {},
            run: &run,
        };
        let joined = legcrawl::engine::worker::join(&target, plan)
            .await
            .expect("join");
        assert_eq!(joined.version, 1);
        let shared = Shared::connect(&target, 32).await.expect("connect");
        let first: Vec<NewRequest> = urls[..SCRIPT_CHUNK].iter().map(|u| seed(u)).collect();
        assert_eq!(
            shared.add_seeds(&first).await.unwrap().queued,
            SCRIPT_CHUNK as u64
        );
    });
    let mut crawl = Crawl::new(&redis.url(), "chunks");
    crawl.spawn(&WORKER_OPTIONS);
    crawl.wait_all_ok(LIMIT);
    let wrong: Vec<usize> = (0..N)
        .filter(|s| server.hits(&format!("/s/{s}")) != 1)
        .collect();
    assert!(
        wrong.is_empty(),
        "{} seeds not fetched exactly once (e.g. /s/{:?}): {}",
        wrong.len(),
        wrong.first(),
        crawl.logs_tail()
    );
    assert_eq!(server.requests(), N as u64);
}

/// Issue 25, item 4: a new cycle queues its seeds in chunks. The worker that
/// started cycle 2 is killed after its first chunk (played here by that one
/// call): the cycle is left `seeding`, and the next worker queues the other
/// seeds, each once, before it runs the cycle.
#[test]
fn a_cycle_start_cut_between_seed_chunks_is_completed_by_the_next_worker() {
    const N: usize = 600;
    let _serial = serial();
    let Some(redis) = RedisServer::start("a_cycle_start_cut_between_seed_chunks") else {
        return;
    };
    let (server, urls) = seed_host(N);
    let mut crawl = Crawl::new(&redis.url(), "cut");
    let mut argv: Vec<&str> = urls.iter().map(String::as_str).collect();
    // No revisit policy: the seeds are not due, so only the cycle's seeding
    // queues them again.
    argv.extend(WORKER_OPTIONS);
    crawl.spawn(&argv);
    crawl.wait_all_ok(LIMIT);
    assert_eq!(server.requests(), N as u64, "cycle 1");
    std::thread::sleep(Duration::from_millis(1100));
    let target = SharedTarget::new(&redis.url(), "cut").expect("target");
    runtime().block_on(async {
        let shared = Shared::connect(&target, 32).await.expect("connect");
        let first: Vec<(CycleKind, NewRequest)> = urls[..SCRIPT_CHUNK]
            .iter()
            .map(|u| (CycleKind::Seed, seed(u)))
            .collect();
        let queued = shared
            .queue_cycle(1, true, None, &first)
            .await
            .unwrap()
            .map(|q| q.queued);
        assert_eq!(
            queued,
            Some(SCRIPT_CHUNK as u64),
            "cycle 2 started with one chunk"
        );
    });
    crawl.spawn(&[]);
    crawl.wait_all_ok(LIMIT);
    let wrong: Vec<(usize, u64)> = (0..N)
        .map(|s| (s, server.hits(&format!("/s/{s}"))))
        .filter(|(_, n)| *n != 2)
        .collect();
    assert!(
        wrong.is_empty(),
        "{} seeds not fetched exactly twice (e.g. {:?}): {}",
        wrong.len(),
        wrong.first(),
        crawl.logs_tail()
    );
}

/// Issue 25, item 4: no script call carries more than one chunk of requests,
/// for 3,000 seeds, a cycle start of them and a page of 3,000 links (the
/// server's SLOWLOG, logging every call, shows each call's arguments; the
/// longest call is printed, and measured in `benches/shared.rs`).
#[test]
fn no_script_call_carries_more_than_one_chunk() {
    const N: usize = 3000;
    let Some(redis) = RedisServer::start("no_script_call_carries_more_than_one_chunk") else {
        return;
    };
    for (k, v) in [
        ("slowlog-log-slower-than", "0"),
        ("slowlog-max-len", "100000"),
    ] {
        redis.command(&["CONFIG", "SET", k, v]).unwrap();
    }
    let target = SharedTarget::new(&redis.url(), "chunked").expect("target");
    runtime().block_on(async {
        let shared = Shared::connect(&target, 4).await.expect("connect");
        let seeds: Vec<NewRequest> = (0..N)
            .map(|i| seed(&format!("http://a.test/s/{i}")))
            .collect();
        assert_eq!(shared.add_seeds(&seeds).await.unwrap().queued, N as u64);
        let lease = shared.lease("w", 1, Duration::from_secs(60)).await.unwrap();
        let token = lease.leases[0].token;
        let links: Vec<NewRequest> = (0..N)
            .map(|i| {
                let mut r = seed(&format!("http://b.test/l/{i}"));
                r.request.dont_filter = false;
                r
            })
            .collect();
        let page = legcrawl::shared::client::PageCompletion {
            token,
            requests: links,
            ..Default::default()
        };
        let done = shared.complete("w", &page).await.unwrap();
        assert_eq!(
            done,
            legcrawl::shared::client::Completed::Done {
                queued: legcrawl::shared::client::Queued {
                    queued: N as u64,
                    filtered: 0,
                    unique: N as u64,
                },
                parked: false,
            }
        );
        let cycle: Vec<(CycleKind, NewRequest)> =
            seeds.into_iter().map(|s| (CycleKind::Seed, s)).collect();
        // Not drained: a 'more' of a cycle that is not seeding queues
        // nothing, but its calls are chunked all the same.
        shared.queue_cycle(1, false, None, &cycle).await.unwrap();
    });
    let Resp::Array(Some(entries)) = redis.command(&["SLOWLOG", "GET", "-1"]).unwrap() else {
        panic!("SLOWLOG GET");
    };
    let (mut calls, mut most_args, mut longest_us) = (0, 0usize, 0i64);
    for entry in &entries {
        let Resp::Array(Some(fields)) = entry else {
            continue;
        };
        let (Some(Resp::Int(us)), Some(Resp::Array(Some(args)))) = (fields.get(2), fields.get(3))
        else {
            continue;
        };
        let name = args.first().and_then(Resp::text).unwrap_or_default();
        if !name.eq_ignore_ascii_case("evalsha") && !name.eq_ignore_ascii_case("eval") {
            continue;
        }
        // Past 32 arguments the log shows "... (N more arguments)".
        let shown = args.len();
        let more = args
            .last()
            .and_then(Resp::text)
            .and_then(|t| {
                t.strip_prefix("... (")?
                    .split(' ')
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .unwrap_or(0);
        calls += 1;
        most_args = most_args.max(shown + more);
        longest_us = longest_us.max(*us);
    }
    eprintln!("{calls} script calls, at most {most_args} arguments, longest {longest_us} µs");
    // A chunk of requests is at most 7 arguments each, plus a few, plus the
    // keys the call declares (at most 18 fixed ones and its lease's record).
    assert!(
        most_args <= SCRIPT_CHUNK * 7 + 40,
        "a call of {most_args} arguments"
    );
    assert!(calls >= 3 * N / SCRIPT_CHUNK, "{calls} calls");
}

/// A revisit budget in the cycle script: a cycle started with a budget of 3
/// queues at most 3 pages sent as budgeted, however many calls send them and
/// whatever they send (as workers that join the cycle send their own
/// choice), each page once.
#[test]
fn a_cycle_queues_at_most_its_budget_whatever_the_workers_send() {
    const N: usize = 20;
    let _serial = serial();
    let Some(redis) = RedisServer::start("a_cycle_queues_at_most_its_budget") else {
        return;
    };
    let (_server, urls) = seed_host(N);
    let mut crawl = Crawl::new(&redis.url(), "budget");
    let mut argv: Vec<&str> = urls.iter().map(String::as_str).collect();
    argv.extend(WORKER_OPTIONS);
    crawl.spawn(&argv);
    crawl.wait_all_ok(LIMIT);
    let target = SharedTarget::new(&redis.url(), "budget").expect("target");
    runtime().block_on(async {
        let shared = Shared::connect(&target, 32).await.expect("connect");
        let started = shared.queue_cycle(1, true, Some(3), &[]).await.unwrap();
        assert!(started.is_some(), "cycle 2 started");
        let budgeted = |urls: &[String]| -> Vec<(CycleKind, NewRequest)> {
            urls.iter()
                .map(|u| (CycleKind::Budgeted, seed(u)))
                .collect()
        };
        let mut queued = 0;
        for chosen in [&urls[..5], &urls[..5], &urls[5..], &urls[..]] {
            let n = shared.queue_cycle(2, false, None, &budgeted(chosen)).await;
            queued += n.unwrap().map_or(0, |q| q.queued);
        }
        assert_eq!(queued, 3, "queued under a budget of 3");
    });
}
