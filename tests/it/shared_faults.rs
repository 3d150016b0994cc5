//! Issue 13, faults of a shared crawl: workers killed with `kill -9` at random
//! moments (seed printed, replayable with `LEGCRAWL_KILL_SEED`), Ctrl-C on one
//! worker, and Redis itself restarted (AOF on). The set-up is that of
//! `shared.rs`: a real `redis-server` started by the test (skipped loudly when
//! missing, unless `LEGCRAWL_REQUIRE_REDIS=1`), a site over several loopback
//! hosts, the real binary as workers.

use std::time::{Duration, Instant};

use crate::support::assert_each_once;
use crate::support::cli;
use crate::support::hosts::{MultiSite, args, fixed, item_key};
use crate::support::redis::RedisServer;
use crate::support::workers::{
    Crawl, assert_fetched_once, assert_items_once, serial, wait_for_requests,
};
use crate::support::{kill_seed, splitmix64};

/// Longest any one crawl of these tests may take.
const LIMIT: Duration = Duration::from_secs(180);

#[test]
fn kill_nine_workers_at_random_moments_then_each_page_once() {
    const KILLS: usize = 8;
    const CONCURRENCY: u64 = 4;
    let _serial = serial();
    let Some(redis) = RedisServer::start("kill_nine_workers") else {
        return;
    };
    let site = MultiSite::start(3000, 4, 21, fixed(25));
    let mut crawl = Crawl::new(&redis.url(), "kill");
    let crawl_args = site.crawl_args();
    // Each worker slot writes its own --output file, across its restarts.
    let outputs: Vec<String> = (0..3)
        .map(|slot| {
            let path = crawl.dir().join(format!("w{slot}.jsonl"));
            path.display().to_string()
        })
        .collect();
    let argvs: Vec<Vec<&str>> = outputs
        .iter()
        .map(|output| {
            let mut argv = args(
                &crawl_args,
                &["--concurrency", "4", "--per-host", "3", "--lease-ttl", "2"],
            );
            argv.extend(["--output", output.as_str()]);
            argv
        })
        .collect();
    for argv in &argvs {
        crawl.spawn(argv);
    }
    let mut rng = kill_seed("kill_nine_workers_at_random_moments_then_each_page_once");
    let mut kills = 0u64;
    let mut last = 0;
    'rounds: for round in 0..KILLS {
        // Each kill lands mid-crawl: the crawl has fetched again since the
        // last one (a respawned worker may first wait for the killed one's
        // leases to expire), then a random moment later.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while site.requests() <= last && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            site.requests() > last,
            "round {round}: no fetch in 30 s since the last kill: {}",
            crawl.logs_tail()
        );
        std::thread::sleep(Duration::from_millis(50 + splitmix64(&mut rng) % 300));
        for slot in 0..3 {
            if let Some(status) = crawl.try_wait(slot) {
                assert_eq!(status.code(), Some(0), "{}", crawl.logs_tail());
                eprintln!("round {round}: worker {slot} found the crawl drained");
                break 'rounds;
            }
        }
        let slot = (splitmix64(&mut rng) % 3) as usize;
        let status = crawl.kill_nine(slot);
        if status.code().is_some() {
            assert_eq!(status.code(), Some(0), "{}", crawl.logs_tail());
            break;
        }
        kills += 1;
        last = site.requests();
        eprintln!("round {round}: killed worker {slot} after {last} requests");
        crawl.respawn(slot, &argvs[slot]);
    }
    crawl.wait_all_ok(LIMIT);
    assert_eq!(kills, KILLS as u64, "every round killed a worker mid-crawl");
    assert_items_once(&crawl, &site);
    // What a killed worker committed but had not written, its next run wrote.
    let mut keys = Vec::new();
    for output in &outputs {
        let bytes = std::fs::read(output).unwrap_or_default();
        keys.extend(cli::parse_lines(&bytes).iter().map(item_key));
    }
    assert_each_once(
        &keys,
        &site.expected(),
        "union of the killed workers' --output",
    );
    let pages = site.expected().len() as u64;
    let fetches = site.total_fetches();
    // Each kill loses at most the killed worker's leases (its concurrency);
    // every completion is one atomic script, so nothing else is fetched again.
    let bound = pages + kills * CONCURRENCY;
    eprintln!(
        "{kills} kills: {fetches} fetches for {pages} pages ({} again)",
        fetches - pages
    );
    assert!(
        fetches <= bound,
        "{fetches} fetches for {pages} pages after {kills} kills of workers with \
         --concurrency {CONCURRENCY}: more than {bound}"
    );
    let summary = crawl.summary();
    assert_eq!(
        (&summary["frontier"], &summary["in_flight"]),
        (&0.into(), &0.into()),
        "{summary}"
    );
}

/// Two workers crawl with `--lease-ttl 60`; after some progress the first gets
/// SIGINT. Returns the site, the crawl and the interrupted worker's log.
fn interrupt_one_of_two(redis: &RedisServer) -> (MultiSite, Crawl, String) {
    const CONCURRENCY: u64 = 4;
    let site = MultiSite::start(1200, 4, 17, fixed(30));
    let mut crawl = Crawl::new(&redis.url(), "sigint");
    let crawl_args = site.crawl_args();
    // A lease TTL far longer than the test allows the other worker: if the
    // interrupted worker's leases were left to expire, the crawl could not
    // drain before them.
    let argv = args(
        &crawl_args,
        &["--concurrency", "4", "--per-host", "4", "--lease-ttl", "60"],
    );
    let a = crawl.spawn(&argv);
    let b = crawl.spawn(&argv);
    wait_for_requests(&site, 150, &mut crawl);
    // Live view: the workers and their leases while they run.
    let deadline = Instant::now() + Duration::from_secs(5);
    let live = loop {
        let summary = crawl.summary();
        let leased = summary["workers"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["leases"].as_u64() > Some(0)));
        if summary["in_flight"].as_u64() > Some(0) && leased {
            break summary;
        }
        assert!(
            Instant::now() < deadline,
            "no live leases in the summary: {summary}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    for worker in live["workers"].as_array().unwrap() {
        assert!(
            worker["id"].is_string() || worker["id"].is_number(),
            "{live}"
        );
    }
    cli::signal(crawl.pid(a), libc::SIGINT);
    let sent = Instant::now();
    let status = crawl.wait(a, Duration::from_secs(15));
    let took = sent.elapsed();
    let log_a = crawl.log(a);
    assert_eq!(status.code(), Some(130), "{log_a}");
    assert!(took < Duration::from_secs(5), "exit took {took:?}");
    let after = crawl.summary();
    eprintln!("summary {took:?} after the interrupt: {after}");
    assert!(
        after["in_flight"].as_u64().unwrap_or(u64::MAX) <= CONCURRENCY,
        "more leases live than the other worker can hold: {after}"
    );
    let holders = after["workers"].as_array().map_or(0, |w| {
        w.iter().filter(|w| w["leases"].as_u64() > Some(0)).count()
    });
    assert!(
        holders <= 1,
        "the interrupted worker still holds leases: {after}"
    );
    let exited = Instant::now();
    let status = crawl.wait(b, Duration::from_secs(90));
    assert_eq!(status.code(), Some(0), "{}", crawl.log(b));
    let rest = exited.elapsed();
    eprintln!("the other worker drained the crawl {rest:?} after the interrupt");
    assert!(
        rest < Duration::from_secs(40),
        "the other worker took {rest:?}: were the leases left to expire (TTL 60 s)?"
    );
    assert_items_once(&crawl, &site);
    (site, crawl, log_a)
}

#[test]
fn sigint_on_a_worker_returns_its_leases_at_once() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("sigint_on_a_worker_returns_its_leases") else {
        return;
    };
    interrupt_one_of_two(&redis);
}

/// Invariant 3 for a shared crawl: after a clean stop (Ctrl-C) of a worker
/// nothing is fetched twice — what it had in flight finishes within the grace
/// (as `crawl` does without `--shared`), only what it had not started goes
/// back to the frontier.
#[test]
fn sigint_on_a_worker_fetches_nothing_twice() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("sigint_on_a_worker_fetches_nothing_twice") else {
        return;
    };
    let (site, _crawl, log_a) = interrupt_one_of_two(&redis);
    let twice: Vec<(String, u64)> = site.fetches().into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(
        twice.is_empty(),
        "fetched again after a clean stop of a worker: {twice:?}\ninterrupted worker's log:\n{log_a}"
    );
    assert_fetched_once(&site);
}

#[test]
fn redis_restart_with_aof_mid_crawl_loses_nothing() {
    let _serial = serial();
    let Some(mut redis) = RedisServer::start_aof("redis_restart_with_aof") else {
        return;
    };
    let site = MultiSite::start(2000, 4, 23, fixed(10));
    let mut crawl = Crawl::new(&redis.url(), "restart");
    let crawl_args = site.crawl_args();
    let argv = args(
        &crawl_args,
        &["--concurrency", "4", "--per-host", "3", "--lease-ttl", "3"],
    );
    for _ in 0..3 {
        crawl.spawn(&argv);
    }
    wait_for_requests(&site, 400, &mut crawl);
    let before = site.requests();
    redis.restart(Duration::from_secs(2));
    eprintln!("Redis restarted after {before} requests");
    for slot in 0..3 {
        if let Some(status) = crawl.try_wait(slot) {
            panic!(
                "worker {slot} ended {status} during the outage instead of waiting\n{}",
                crawl.logs_tail()
            );
        }
    }
    crawl.wait_all_ok(LIMIT);
    assert!(
        site.requests() > before,
        "no progress after the restart\n{}",
        redis.log_tail()
    );
    assert_items_once(&crawl, &site);
    let summary = crawl.summary();
    assert_eq!(
        (&summary["frontier"], &summary["in_flight"]),
        (&0.into(), &0.into()),
        "{summary}"
    );
    let pages = site.expected().len() as u64;
    eprintln!(
        "{} fetches for {pages} pages across the restart",
        site.total_fetches()
    );
}

/// Ctrl-C is heard while Redis is away: the worker exits 130 promptly (what it
/// held expires after its TTL instead of being returned).
#[test]
fn sigint_while_redis_is_away_still_exits_130() {
    let _serial = serial();
    let Some(mut redis) = RedisServer::start("sigint_while_redis_is_away") else {
        return;
    };
    let site = MultiSite::start(1000, 2, 43, fixed(20));
    let mut crawl = Crawl::new(&redis.url(), "away");
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "4", "--lease-ttl", "3"]);
    let slot = crawl.spawn(&argv);
    wait_for_requests(&site, 50, &mut crawl);
    redis.kill();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        crawl.try_wait(slot).is_none(),
        "the worker gave up when Redis went away\n{}",
        crawl.logs_tail()
    );
    cli::signal(crawl.pid(slot), libc::SIGINT);
    let sent = Instant::now();
    let status = crawl.wait(slot, Duration::from_secs(20));
    let took = sent.elapsed();
    assert_eq!(status.code(), Some(130), "{}", crawl.log(slot));
    assert!(
        took < Duration::from_secs(5),
        "exit took {took:?} with Redis away"
    );
}
