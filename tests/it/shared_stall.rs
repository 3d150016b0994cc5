//! One lost reply must not stall a page for the lease TTL (issue 46, item
//! 4): two workers on a four-host loopback site, the one `redis-server`
//! paused with `SIGSTOP` for 10 s mid-crawl (every call under way then waits
//! or times out, and its reply may be lost), then `SIGCONT`. Judged on the
//! test servers' request logs: after the pause ends, no host goes more than
//! [`HEAL_BOUND`] without a request while the crawl runs (the lease TTL is
//! the default, 60 s, so a lease held unknown would show), and the crawl ends
//! exact. The pause's moment is random (seed printed, replayable with
//! `LEGCRAWL_KILL_SEED`). Real `redis-server`, real workers.

use std::time::{Duration, Instant};

use crate::support::cli::signal;
use crate::support::hosts::{MultiSite, args, fixed};
use crate::support::redis::RedisServer;
use crate::support::workers::{Crawl, assert_items_once, idle_after, serial, wait_for_requests};
use crate::support::{kill_seed, splitmix64};

/// The longest a host may go without a request once the fault healed.
const HEAL_BOUND: Duration = Duration::from_secs(10);
/// How long Redis is paused.
const PAUSE: Duration = Duration::from_secs(10);
/// Longest the crawl may take.
const LIMIT: Duration = Duration::from_secs(180);

#[test]
fn a_paused_redis_stalls_no_host_after_it_resumes() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_stall") else {
        return;
    };
    // Four hosts with a 50 ms delay each: some 80 pages a second, so the
    // crawl of 2,400 pages runs well past the pause.
    let site = MultiSite::start(2400, 4, 47, fixed(5));
    let mut crawl = Crawl::new(&redis.url(), "stall");
    let crawl_args = site.crawl_args();
    let argv = args(
        &crawl_args,
        &["--concurrency", "4", "--per-host", "1", "--delay", "50ms"],
    );
    for _ in 0..2 {
        crawl.spawn(&argv);
    }
    let mut rng = kill_seed("a_paused_redis_stalls_no_host_after_it_resumes");
    wait_for_requests(&site, 300, &mut crawl);
    std::thread::sleep(Duration::from_millis(splitmix64(&mut rng) % 1000));
    let before = site.requests();
    signal(redis.pid(), libc::SIGSTOP);
    std::thread::sleep(PAUSE);
    signal(redis.pid(), libc::SIGCONT);
    let healed = Instant::now();
    eprintln!("paused Redis for {PAUSE:?} after {before} requests");
    crawl.wait_all_ok(LIMIT);
    let ended = Instant::now();

    // On every host: the longest time without a request from the heal on,
    // up to its last request (after it the host had nothing left).
    let mut worst = Duration::ZERO;
    for (h, (after, idle)) in idle_after(&site, healed).into_iter().enumerate() {
        eprintln!(
            "measured: host {h}: {after} requests after the heal, longest idle {idle:?}, \
             crawl ended {:?} after the heal",
            ended - healed
        );
        assert!(
            after > 0,
            "host {h}: no request after the pause (the crawl ended in it)"
        );
        assert!(
            idle <= HEAL_BOUND,
            "host {h} idle {idle:?} after Redis resumed\n{}",
            crawl.logs_tail()
        );
        worst = worst.max(idle);
    }
    let last = site
        .servers()
        .iter()
        .flat_map(|server| server.log().into_iter().map(|l| l.start))
        .max()
        .unwrap_or(healed);
    eprintln!(
        "measured: longest idle of any host after the heal: {worst:?}; last request {:?} \
         before the last worker ended",
        ended.saturating_duration_since(last)
    );
    assert_items_once(&crawl, &site);
}
