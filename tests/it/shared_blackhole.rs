//! Issue 46, item 4: a network black hole between the workers and Redis.
//! Two workers reach one `redis-server` through a TCP proxy
//! (`support::tcp_proxy`) that, mid-crawl, stops forwarding for [`HOLE`]:
//! the connections stay open and nothing passes either way, so every call
//! under way times out (the worker's response timeout is 10 s) and is
//! retried on the same connection, and what was sent arrives only when the
//! hole heals (TCP sends it again), late: calls whose answers the workers
//! stopped waiting for run then, beside their retries.
//!
//! Judged on the test servers' request logs, as `shared_stall` does: after
//! the heal no host goes more than [`HEAL_BOUND`] without a request while
//! the crawl runs (the lease TTL is the default, 60 s, so a lease held
//! unknown would show), no worker dies (each exits 0), and the crawl ends
//! exact: the stream holds each page once and the workers' `--output` files,
//! joined, equal it. The hole's moment is random (seed printed, replayable
//! with `LEGCRAWL_KILL_SEED`).

use std::time::{Duration, Instant};

use crate::support::hosts::{MultiSite, args, fixed};
use crate::support::redis::RedisServer;
use crate::support::stream::assert_files_equal_the_stream;
use crate::support::tcp_proxy::TcpProxy;
use crate::support::workers::{Crawl, assert_items_once, idle_after, serial, wait_for_requests};
use crate::support::{kill_seed, splitmix64};

/// The longest a host may go without a request once the hole healed.
const HEAL_BOUND: Duration = Duration::from_secs(10);
/// How long nothing passes.
const HOLE: Duration = Duration::from_secs(15);
/// Longest the crawl may take.
const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn a_black_hole_between_workers_and_redis_stalls_no_host_after_it_heals() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_blackhole") else {
        return;
    };
    let proxy = TcpProxy::start(redis.port());
    // Four hosts, one request at a time each, 50 ms apart: some 60 pages a
    // second, so the crawl of 1,200 pages runs well past the hole.
    let site = MultiSite::start(1200, 4, 61, fixed(5));
    let mut crawl = Crawl::new(&proxy.redis_url(), "hole");
    let crawl_args = site.crawl_args();
    let outputs: Vec<String> = (0..2).map(|i| format!("out-{i}.jsonl")).collect();
    let argv: Vec<Vec<&str>> = outputs
        .iter()
        .map(|out| {
            args(
                &crawl_args,
                &[
                    "--concurrency",
                    "4",
                    "--per-host",
                    "1",
                    "--delay",
                    "50ms",
                    "--output",
                    out,
                ],
            )
        })
        .collect();
    for a in &argv {
        crawl.spawn(a);
    }
    let mut rng = kill_seed("a_black_hole_between_workers_and_redis_stalls_no_host_after_it_heals");
    wait_for_requests(&site, 200, &mut crawl);
    std::thread::sleep(Duration::from_millis(splitmix64(&mut rng) % 1000));
    let before = site.requests();
    proxy.black_hole();
    std::thread::sleep(HOLE);
    let during = site.requests() - before;
    proxy.heal();
    let healed = Instant::now();
    eprintln!(
        "black-holed Redis for {HOLE:?} after {before} requests ({during} requests during it)"
    );
    crawl.wait_all_ok(LIMIT);
    let ended = Instant::now();

    let mut worst = Duration::ZERO;
    for (h, (after, idle)) in idle_after(&site, healed).into_iter().enumerate() {
        eprintln!(
            "measured: host {h}: {after} requests after the heal, longest idle {idle:?}, \
             crawl ended {:?} after the heal",
            ended - healed
        );
        assert!(
            after > 0,
            "host {h}: no request after the hole (the crawl ended in it)"
        );
        assert!(
            idle <= HEAL_BOUND,
            "host {h} idle {idle:?} after the hole healed\n{}",
            crawl.logs_tail()
        );
        worst = worst.max(idle);
    }
    eprintln!(
        "measured: longest idle of any host after the heal: {worst:?}; {} proxy connections",
        proxy.accepted()
    );
    for slot in 0..crawl.slots() {
        let log = crawl.log(slot);
        eprintln!("measured: worker {slot} said:\n{log}");
    }
    assert_items_once(&crawl, &site);
    let report = assert_files_equal_the_stream(&redis, &crawl, &outputs);
    eprintln!("{report}");
}
