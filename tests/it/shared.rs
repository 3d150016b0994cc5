//! Issue 13: several worker processes share one crawl through a real
//! `redis-server` (started by the test on a free port, see `support::redis`;
//! skipped loudly when missing unless `LEGCRAWL_REQUIRE_REDIS=1`), crawling a
//! site spread over several loopback hosts (`support::hosts`).
//!
//! Checked: every page once in `dump --shared items` and once on the servers;
//! kill -9 of workers at random moments (seed printed, replayable with
//! `LEGCRAWL_KILL_SEED`) costs at most their leases in refetches; `--per-host`
//! and `--delay` hold for the crawl as a whole, as the servers see it; Ctrl-C
//! returns a worker's leases at once; a Redis restart (AOF on) loses nothing;
//! bad input is one line with exit 2 (1 when Redis cannot be reached).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::cli::{self, run};
use crate::support::hosts::{self, Delay, MultiSite, item_key};
use crate::support::redis::{RedisServer, Resp};
use crate::support::server::Logged;
use crate::support::workers::Crawl;
use crate::support::{assert_each_once, kill_seed, splitmix64};

/// Longest any one crawl of these tests may take.
const LIMIT: Duration = Duration::from_secs(180);

/// A fixed delay before every answer.
fn fixed(ms: u64) -> Delay {
    Arc::new(move |_| Duration::from_millis(ms))
}

/// `seeds` (with `--allow-host`s, [`MultiSite::crawl_args`]) followed by
/// `options`, as one argument list.
fn args<'a>(seeds: &'a [String], options: &[&'a str]) -> Vec<&'a str> {
    seeds
        .iter()
        .map(String::as_str)
        .chain(options.iter().copied())
        .collect()
}

/// Asserts that `dump --shared items` has each page of `site` exactly once.
fn assert_items_once(crawl: &Crawl, site: &MultiSite) {
    let keys: Vec<String> = crawl.items().iter().map(item_key).collect();
    assert_each_once(&keys, &site.expected(), "dump --shared items");
}

/// Asserts that the servers saw each page exactly once and nothing else.
fn assert_fetched_once(site: &MultiSite) {
    let fetches = site.fetches();
    let twice: BTreeMap<&String, &u64> = fetches.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{} pages fetched more than once: {:?}",
        twice.len(),
        twice.iter().take(10).collect::<Vec<_>>()
    );
    let keys: Vec<String> = fetches.keys().cloned().collect();
    assert_each_once(&keys, &site.expected(), "pages the servers answered");
}

/// Waits (bounded) until the servers have answered `n` requests; fails at
/// once if a worker ends meanwhile.
fn wait_for_requests(site: &MultiSite, n: u64, crawl: &mut Crawl) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while site.requests() < n {
        for slot in 0..crawl.slots() {
            if let Some(status) = crawl.try_wait(slot) {
                panic!(
                    "worker {slot} ended {status} after {} requests\n{}",
                    site.requests(),
                    crawl.logs_tail()
                );
            }
        }
        assert!(
            Instant::now() < deadline,
            "only {} requests after 60 s\n{}",
            site.requests(),
            crawl.logs_tail()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Checks of the harness itself, which need no shared-crawl implementation:
/// the AOF survives a kill -9 of Redis, a server without it forgets.
#[test]
fn harness_redis_restarts_on_its_port_and_keeps_its_aof() {
    let Some(mut aof) = RedisServer::start_aof("harness_redis_restarts") else {
        return;
    };
    let Some(mut plain) = RedisServer::start("harness_redis_restarts") else {
        return;
    };
    assert_ne!(aof.port(), plain.port());
    for server in [&aof, &plain] {
        let set = server.command(&["SET", "legcrawl:{t}:k", "v"]).unwrap();
        assert_eq!(set, Resp::Simple("OK".into()));
    }
    let port = aof.port();
    aof.restart(Duration::from_millis(100));
    plain.restart(Duration::from_millis(100));
    assert_eq!(aof.port(), port, "same port after restart");
    assert!(aof.is_up() && plain.is_up());
    let kept = aof.command(&["GET", "legcrawl:{t}:k"]).unwrap();
    assert_eq!(kept.text().as_deref(), Some("v"), "AOF kept the write");
    assert_eq!(aof.keys("legcrawl:*"), vec!["legcrawl:{t}:k".to_owned()]);
    let lost = plain.command(&["GET", "legcrawl:{t}:k"]).unwrap();
    assert_eq!(lost, Resp::Bulk(None), "persistence off forgets");
    aof.kill();
    assert!(!aof.is_up(), "killed");
}

/// The multi-host site is what the tests assume: each host serves its own
/// pages, and a local (non-shared) crawl of all seeds finds exactly
/// [`MultiSite::expected`], each page once; and the politeness check passes
/// the local crawler's `--per-host 1 --delay 0.05`.
#[test]
fn harness_multi_host_site_is_crawled_whole_by_a_local_crawl() {
    let site = MultiSite::start(80, 4, 3, hosts::no_delay());
    let data = tempfile::tempdir().unwrap();
    let seeds = site.crawl_args();
    let mut all = vec!["crawl"];
    all.extend(seeds.iter().map(String::as_str));
    all.extend(["--bloom-bits", "20", "--ignore-robots"]);
    all.extend(["--per-host", "1", "--delay", "0.05", "--concurrency", "8"]);
    let out = run(cli::legcrawl(data.path(), &all), LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keys: Vec<String> = cli::dump_items(data.path()).iter().map(item_key).collect();
    assert_each_once(&keys, &site.expected(), "local crawl");
    assert_fetched_once(&site);
    for (h, server) in site.servers().iter().enumerate() {
        assert_eq!(server.addr().ip().to_string(), hosts::host_ip(h));
        let log = server.log();
        assert!(
            log.iter().all(|l| l.done.is_some()),
            "every answer finished"
        );
        let bad = politeness_violations(&log, 1, Duration::from_millis(50));
        assert!(bad.is_empty(), "host {h}: {bad:?}");
    }
}

#[test]
fn three_workers_crawl_a_four_host_site_each_page_once() {
    let Some(redis) = RedisServer::start("three_workers_crawl_a_four_host_site") else {
        return;
    };
    let site = MultiSite::start(3000, 4, 5, hosts::no_delay());
    let mut crawl = Crawl::new(&redis.url(), "three");
    let seeds = site.crawl_args();
    let argv = args(&seeds, &["--concurrency", "8", "--per-host", "4"]);
    let started = Instant::now();
    for _ in 0..3 {
        crawl.spawn(&argv);
    }
    crawl.wait_all_ok(LIMIT);
    eprintln!(
        "3 workers, {} pages in {:?}",
        site.expected().len(),
        started.elapsed()
    );
    assert_items_once(&crawl, &site);
    assert_fetched_once(&site);
    let summary = crawl.summary();
    assert_eq!(summary["frontier"], 0, "{summary}");
    assert_eq!(summary["in_flight"], 0, "{summary}");
    assert_eq!(summary["items"], site.expected().len(), "{summary}");
    assert!(
        crawl.dump(&["frontier"]).is_empty(),
        "dump --shared frontier of a drained crawl"
    );
    let foreign: Vec<String> = redis
        .keys("*")
        .into_iter()
        .filter(|k| !k.starts_with(&crawl.prefix()))
        .collect();
    assert!(
        foreign.is_empty(),
        "keys outside {}: {foreign:?}",
        crawl.prefix()
    );
    assert_eq!(
        crawl.local_files(),
        Vec::new(),
        "no local state in shared mode"
    );
}

#[test]
fn kill_nine_workers_at_random_moments_then_each_page_once() {
    const KILLS: usize = 8;
    const CONCURRENCY: u64 = 4;
    let Some(redis) = RedisServer::start("kill_nine_workers") else {
        return;
    };
    let site = MultiSite::start(3000, 4, 21, fixed(25));
    let mut crawl = Crawl::new(&redis.url(), "kill");
    let seeds = site.crawl_args();
    let argv = args(
        &seeds,
        &["--concurrency", "4", "--per-host", "3", "--lease-ttl", "2"],
    );
    for _ in 0..3 {
        crawl.spawn(&argv);
    }
    let mut rng = kill_seed("kill_nine_workers_at_random_moments_then_each_page_once");
    let mut kills = 0u64;
    'rounds: for round in 0..KILLS {
        std::thread::sleep(Duration::from_millis(100 + splitmix64(&mut rng) % 500));
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
        eprintln!(
            "round {round}: killed worker {slot} after {} requests",
            site.requests()
        );
        crawl.respawn(slot, &argv);
    }
    crawl.wait_all_ok(LIMIT);
    assert_items_once(&crawl, &site);
    let pages = site.expected().len() as u64;
    let fetches = site.total_fetches();
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

/// Requests of one host that broke `--per-host per_host` (another arrived
/// while `per_host` were in flight) or `--delay delay` (less than
/// `delay - TOLERANCE` after the previous start), as messages.
///
/// The tolerance: the server times arrivals, not the instant a worker took its
/// turn in Redis. Between the two lie the connection (a new one or a reused
/// one), the kernel's loopback and the wake-up of a thread on a 2-core machine
/// shared by three workers and the servers: a few hundred microseconds, rarely
/// a few milliseconds. Two requests whose turns were `delay` apart can arrive
/// closer by the difference of those latencies; 5 ms covers it, and is a tenth
/// of the delay tested, so a worker ignoring the shared schedule (gaps near 0)
/// still fails.
fn politeness_violations(log: &[Logged], per_host: usize, delay: Duration) -> Vec<String> {
    const TOLERANCE: Duration = Duration::from_millis(5);
    let mut log = log.to_vec();
    log.sort_by_key(|l| l.start);
    let mut bad = Vec::new();
    for (i, this) in log.iter().enumerate() {
        let busy = log[..i]
            .iter()
            .filter(|l| l.overlaps_start_of(this))
            .count();
        if busy >= per_host {
            bad.push(format!(
                "{} started with {busy} in flight (--per-host {per_host})",
                this.target
            ));
        }
        if i > 0 {
            let gap = this.start - log[i - 1].start;
            if gap + TOLERANCE < delay {
                bad.push(format!(
                    "{} started {gap:?} after {} (--delay {delay:?})",
                    this.target,
                    log[i - 1].target
                ));
            }
        }
    }
    bad
}

/// The smallest gap between two starts on one host.
fn min_gap(log: &[Logged]) -> Option<Duration> {
    let mut starts: Vec<Instant> = log.iter().map(|l| l.start).collect();
    starts.sort();
    starts.windows(2).map(|w| w[1] - w[0]).min()
}

#[test]
fn shared_politeness_one_in_flight_and_the_delay_per_host_across_workers() {
    let Some(redis) = RedisServer::start("shared_politeness") else {
        return;
    };
    // Answers take 0 to 80 ms, so both the delay (50 ms) and the one-in-flight
    // rule are the binding limit at times.
    let answer: Delay = Arc::new(|target| {
        let n = target
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31) ^ u64::from(b));
        Duration::from_millis(n % 5 * 20)
    });
    let site = MultiSite::start(240, 4, 9, answer);
    let mut crawl = Crawl::new(&redis.url(), "polite");
    let seeds = site.crawl_args();
    let argv = args(
        &seeds,
        &[
            "--concurrency",
            "4",
            "--per-host",
            "1",
            "--delay",
            "0.05",
            "--ignore-robots",
        ],
    );
    for _ in 0..3 {
        crawl.spawn(&argv);
    }
    crawl.wait_all_ok(LIMIT);
    assert_items_once(&crawl, &site);
    for (h, server) in site.servers().iter().enumerate() {
        let log = server.log();
        eprintln!(
            "host {h}: {} requests, smallest gap between starts {:?}",
            log.len(),
            min_gap(&log)
        );
        let bad = politeness_violations(&log, 1, Duration::from_millis(50));
        assert!(
            bad.is_empty(),
            "host {h}: {} violations across 3 workers: {:?}",
            bad.len(),
            &bad[..bad.len().min(10)]
        );
    }
}

#[test]
fn shared_per_host_limit_holds_across_workers() {
    let Some(redis) = RedisServer::start("shared_per_host_limit") else {
        return;
    };
    let site = MultiSite::start(200, 4, 13, fixed(60));
    let mut crawl = Crawl::new(&redis.url(), "perhost");
    let seeds = site.crawl_args();
    let argv = args(
        &seeds,
        &[
            "--concurrency",
            "4",
            "--per-host",
            "2",
            "--delay",
            "0",
            "--ignore-robots",
        ],
    );
    for _ in 0..3 {
        crawl.spawn(&argv);
    }
    crawl.wait_all_ok(LIMIT);
    assert_items_once(&crawl, &site);
    let mut peak = 0;
    for (h, server) in site.servers().iter().enumerate() {
        let log = server.log();
        let bad = politeness_violations(&log, 2, Duration::ZERO);
        assert!(
            bad.is_empty(),
            "host {h}: {} violations of --per-host 2 across 3 workers: {:?}",
            bad.len(),
            &bad[..bad.len().min(10)]
        );
        peak = peak.max(log.iter().map(|l| l.in_flight).max().unwrap_or(0));
    }
    assert!(
        peak >= 2,
        "no host ever had two requests in flight (peak {peak}): the check had no teeth"
    );
}

#[test]
fn sigint_on_a_worker_returns_its_leases_at_once() {
    const CONCURRENCY: u64 = 4;
    let Some(redis) = RedisServer::start("sigint_on_a_worker") else {
        return;
    };
    let site = MultiSite::start(1200, 4, 17, fixed(30));
    let mut crawl = Crawl::new(&redis.url(), "sigint");
    let seeds = site.crawl_args();
    // A lease TTL far longer than the test allows the other worker: if the
    // interrupted worker's leases were left to expire, the crawl could not
    // drain before them.
    let argv = args(
        &seeds,
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
    eprintln!("live summary: {live}");
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
    assert_eq!(status.code(), Some(130), "{}", crawl.log(a));
    assert!(took < Duration::from_secs(5), "exit took {took:?}");
    let after = crawl.summary();
    eprintln!("summary after the interrupt ({took:?}): {after}");
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
    // Invariant 3: after a clean stop nothing is fetched twice.
    assert_fetched_once(&site);
}

#[test]
fn redis_restart_with_aof_mid_crawl_loses_nothing() {
    let Some(mut redis) = RedisServer::start_aof("redis_restart_with_aof") else {
        return;
    };
    let site = MultiSite::start(2000, 4, 23, fixed(10));
    let mut crawl = Crawl::new(&redis.url(), "restart");
    let seeds = site.crawl_args();
    let argv = args(
        &seeds,
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

#[test]
fn workers_output_files_add_up_to_the_items() {
    let Some(redis) = RedisServer::start("workers_output_files") else {
        return;
    };
    let site = MultiSite::start(400, 2, 29, hosts::no_delay());
    let mut crawl = Crawl::new(&redis.url(), "output");
    let seeds = site.crawl_args();
    let outputs: Vec<String> = (0..3)
        .map(|i| {
            crawl
                .dir()
                .join(format!("w{i}.jsonl"))
                .display()
                .to_string()
        })
        .collect();
    for output in &outputs {
        let mut argv = args(&seeds, &["--concurrency", "4"]);
        argv.extend(["--output", output.as_str()]);
        crawl.spawn(&argv);
    }
    crawl.wait_all_ok(LIMIT);
    let mut keys = Vec::new();
    for output in &outputs {
        let bytes = std::fs::read(output).unwrap_or_default();
        keys.extend(cli::parse_lines(&bytes).iter().map(item_key));
    }
    assert_each_once(&keys, &site.expected(), "union of the workers' --output");
    assert_items_once(&crawl, &site);
}

#[test]
fn crawl_file_shared_section_names_redis_and_crawl() {
    let Some(redis) = RedisServer::start("crawl_file_shared_section") else {
        return;
    };
    let site = MultiSite::start(60, 2, 31, hosts::no_delay());
    let crawl = Crawl::new(&redis.url(), "fromfile");
    let file = crawl.dir().join("crawl.toml");
    std::fs::write(
        &file,
        format!(
            "[shared]\nredis = \"{}\"\nname = \"fromfile\"\n",
            redis.url()
        ),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(cli::bin());
    cmd.arg("crawl")
        .args(site.crawl_args())
        .arg("--config")
        .arg(&file)
        .current_dir(crawl.dir())
        .env("RUST_LOG", "error");
    let out = run(cmd, LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_items_once(&crawl, &site);
    assert!(
        !redis.keys(&format!("{}*", crawl.prefix())).is_empty(),
        "nothing under {}",
        crawl.prefix()
    );
}

#[test]
fn two_crawls_in_one_redis_keep_to_their_own_keys() {
    let Some(redis) = RedisServer::start("two_crawls_in_one_redis") else {
        return;
    };
    let first = MultiSite::start(150, 2, 37, hosts::no_delay());
    let second = MultiSite::start(90, 2, 41, hosts::no_delay());
    let mut alpha = Crawl::new(&redis.url(), "alpha");
    let mut beta = Crawl::new(&redis.url(), "beta");
    let (seeds_a, seeds_b) = (first.crawl_args(), second.crawl_args());
    alpha.spawn(&args(&seeds_a, &[]));
    alpha.spawn(&args(&seeds_a, &[]));
    beta.spawn(&args(&seeds_b, &[]));
    alpha.wait_all_ok(LIMIT);
    beta.wait_all_ok(LIMIT);
    assert_items_once(&alpha, &first);
    assert_items_once(&beta, &second);
    let keys = redis.keys("*");
    let stray: Vec<&String> = keys
        .iter()
        .filter(|k| !k.starts_with(&alpha.prefix()) && !k.starts_with(&beta.prefix()))
        .collect();
    assert!(stray.is_empty(), "keys of neither crawl: {stray:?}");
    for crawl in [&alpha, &beta] {
        assert!(
            keys.iter().any(|k| k.starts_with(&crawl.prefix())),
            "no key under {}",
            crawl.prefix()
        );
    }
}

/// Exit code and the one line of stderr of `crawl ARGS`.
fn bad_crawl(args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new(cli::bin());
    let dir = tempfile::tempdir().unwrap();
    cmd.arg("crawl")
        .args(args)
        .current_dir(dir.path())
        .env("RUST_LOG", "error");
    let out = run(cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    assert_eq!(
        err.lines().count(),
        1,
        "{args:?}: one line on stderr, got {err:?}"
    );
    assert!(
        crate::support::listing(dir.path()).is_empty(),
        "{args:?} left files behind"
    );
    (out.status.code(), err)
}

#[test]
fn bad_shared_url_or_missing_name_is_one_line_and_exit_two() {
    let seed = "http://127.0.0.2:9/";
    for argv in [
        vec![seed, "--shared", "notaurl", "--name", "x"],
        vec![seed, "--shared", "http://127.0.0.1:6379/0", "--name", "x"],
        vec![seed, "--shared", "redis://127.0.0.1:1/0"],
    ] {
        let (code, err) = bad_crawl(&argv);
        assert_eq!(code, Some(2), "{argv:?}: {err}");
    }
}

#[test]
fn unreachable_redis_at_start_is_one_line_and_exit_one() {
    // A port nothing listens on: bound a moment ago, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}/0");
    let started = Instant::now();
    let (code, err) = bad_crawl(&["http://127.0.0.2:9/", "--shared", &url, "--name", "x"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?} to give up",
        started.elapsed()
    );
}

/// The politeness check itself, on made-up spans: it sees an overlap and a
/// short gap, and passes spans that keep both rules.
#[test]
fn politeness_check_sees_overlaps_and_short_gaps() {
    let t0 = Instant::now();
    let span = |target: &str, start: u64, end: u64| Logged {
        target: target.into(),
        start: t0 + Duration::from_millis(start),
        done: Some(t0 + Duration::from_millis(end)),
        in_flight: 1,
    };
    let polite = [span("/a", 0, 30), span("/b", 50, 120), span("/c", 120, 130)];
    assert!(politeness_violations(&polite, 1, Duration::from_millis(50)).is_empty());
    let overlap = [span("/a", 0, 70), span("/b", 60, 80)];
    let bad = politeness_violations(&overlap, 1, Duration::from_millis(50));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(politeness_violations(&overlap, 2, Duration::from_millis(50)).is_empty());
    let close = [span("/a", 0, 1), span("/b", 40, 41)];
    let bad = politeness_violations(&close, 1, Duration::from_millis(50));
    assert_eq!(bad.len(), 1, "{bad:?}");
    let within_tolerance = [span("/a", 0, 1), span("/b", 46, 47)];
    assert!(politeness_violations(&within_tolerance, 1, Duration::from_millis(50)).is_empty());
}
