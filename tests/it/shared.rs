//! Issue 13: several worker processes share one crawl through a real
//! `redis-server` (started by the test on a free port, see `support::redis`;
//! skipped loudly when missing unless `LEGCRAWL_REQUIRE_REDIS=1`), crawling a
//! site spread over several loopback hosts (`support::hosts`).
//!
//! Checked here: every page once in `dump --shared items` and once on the
//! servers; `--per-host` and `--delay` hold for the crawl as a whole, as the
//! servers see it (`support::politeness`); the key prefix; the crawl file's
//! `[shared]`; bad input is one line with exit 2 (1 when Redis cannot be
//! reached). Faults (kill -9, Ctrl-C, Redis restarts) are in `shared_faults.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::assert_each_once;
use crate::support::cli::{self, run};
use crate::support::hosts::{self, Delay, MultiSite, args, fixed, item_key};
use crate::support::politeness::judge;
use crate::support::redis::{RedisServer, Resp};
use crate::support::workers::{Crawl, assert_fetched_once, assert_items_once, serial};

/// Longest any one crawl of these tests may take.
const LIMIT: Duration = Duration::from_secs(180);

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
/// [`MultiSite::expected`], each page once; and the politeness check
/// (`support::politeness`) passes the local crawler's `--per-host 1 --delay 0.1`.
#[test]
fn harness_multi_host_site_is_crawled_whole_by_a_local_crawl() {
    let site = MultiSite::start(80, 4, 3, hosts::no_delay());
    let data = tempfile::tempdir().unwrap();
    let seeds = site.crawl_args();
    let mut all = vec!["crawl"];
    all.extend(seeds.iter().map(String::as_str));
    all.extend(["--bloom-bits", "20", "--ignore-robots"]);
    all.extend(["--per-host", "1", "--delay", "0.1", "--concurrency", "8"]);
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
        let delay = Duration::from_millis(100);
        let judged = judge(&log, 1, delay);
        eprintln!(
            "local crawl, host {h}: smallest gap {:?}, {} short",
            judged.min_gap,
            judged.short.len()
        );
        assert_eq!(judged.failure(delay), None, "host {h}");
    }
}

#[test]
fn three_workers_crawl_a_four_host_site_each_page_once() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("three_workers_crawl_a_four_host_site") else {
        return;
    };
    let site = MultiSite::start(3000, 4, 5, hosts::no_delay());
    let mut crawl = Crawl::new(&redis.url(), "three");
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "8", "--per-host", "4"]);
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
fn shared_politeness_one_in_flight_and_the_delay_per_host_across_workers() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_politeness") else {
        return;
    };
    // Answers take 0 to 160 ms, so both the delay (100 ms) and the
    // one-in-flight rule are the binding limit at times.
    let answer: Delay = Arc::new(|target| {
        let n = target
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31) ^ u64::from(b));
        Duration::from_millis(n % 5 * 40)
    });
    let site = MultiSite::start(160, 4, 9, answer);
    let mut crawl = Crawl::new(&redis.url(), "polite");
    let crawl_args = site.crawl_args();
    let argv = args(
        &crawl_args,
        &[
            "--concurrency",
            "4",
            "--per-host",
            "1",
            "--delay",
            "0.1",
            "--ignore-robots",
        ],
    );
    for _ in 0..3 {
        crawl.spawn(&argv);
    }
    crawl.wait_all_ok(LIMIT);
    assert_items_once(&crawl, &site);
    let delay = Duration::from_millis(100);
    for (h, server) in site.servers().iter().enumerate() {
        let judged = judge(&server.log(), 1, delay);
        eprintln!(
            "host {h}: {} gaps, smallest {:?}, {} short by more than the tolerance",
            judged.gaps,
            judged.min_gap,
            judged.short.len()
        );
        if let Some(failure) = judged.failure(delay) {
            panic!("host {h}, 3 workers, --per-host 1 --delay 0.1: {failure}");
        }
    }
}

#[test]
fn shared_per_host_limit_holds_across_workers() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_per_host_limit") else {
        return;
    };
    let site = MultiSite::start(200, 4, 13, fixed(60));
    let mut crawl = Crawl::new(&redis.url(), "perhost");
    let crawl_args = site.crawl_args();
    let argv = args(
        &crawl_args,
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
        let judged = judge(&server.log(), 2, Duration::ZERO);
        if let Some(failure) = judged.failure(Duration::ZERO) {
            panic!("host {h}, 3 workers, --per-host 2: {failure}");
        }
        peak = peak.max(judged.peak);
    }
    assert_eq!(
        peak, 2,
        "no host ever had two requests in flight: the check had no teeth"
    );
}

/// Issue 13: `--output` on a worker writes the items that worker committed.
#[test]
fn workers_output_files_add_up_to_the_items() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("workers_output_files") else {
        return;
    };
    let site = MultiSite::start(400, 2, 29, hosts::no_delay());
    let mut crawl = Crawl::new(&redis.url(), "output");
    let crawl_args = site.crawl_args();
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
        let mut argv = args(&crawl_args, &["--concurrency", "4"]);
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
    let _serial = serial();
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
    let _serial = serial();
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
fn bad_shared_url_is_one_line_and_exit_two() {
    let seed = "http://127.0.0.2:9/";
    for argv in [
        vec![seed, "--shared", "notaurl", "--name", "x"],
        vec![seed, "--shared", "http://127.0.0.1:6379/0", "--name", "x"],
        vec![seed, "--shared", "redis://127.0.0.1:1/0", "--name", "a{b}"],
    ] {
        let (code, err) = bad_crawl(&argv);
        assert_eq!(code, Some(2), "{argv:?}: {err}");
    }
}

#[test]
fn missing_name_is_one_line_and_exit_two() {
    let (code, err) = bad_crawl(&["http://127.0.0.2:9/", "--shared", "redis://127.0.0.1:1/0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--name"), "{err}");
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

/// A host whose robots.txt cannot be reached (a closed port) is parked after
/// three failures, its request set aside: the rest of the crawl drains and
/// every worker exits 0 instead of waiting for it forever (one that met only
/// the dead host too: another fetched pages meanwhile). The next worker to
/// start tries the host again and parks it again; nothing is lost.
#[test]
fn a_host_whose_robots_txt_keeps_failing_is_parked_and_the_crawl_drains() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("a_host_whose_robots_txt_keeps_failing") else {
        return;
    };
    let site = MultiSite::start(60, 2, 37, hosts::no_delay());
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let dead = format!("http://127.0.0.1:{closed}/");
    let mut crawl = Crawl::new(&redis.url(), "parked");
    let mut crawl_args = site.crawl_args();
    crawl_args.extend([dead, "--allow-host".into(), "127.0.0.1".into()]);
    let argv = args(&crawl_args, &["--robots-retry", "0.1", "--retries", "0"]);
    crawl.spawn(&argv);
    crawl.spawn(&argv);
    crawl.wait_all_ok(LIMIT);
    assert_items_once(&crawl, &site);
    let summary = crawl.summary();
    assert_eq!(summary["parked_hosts"], 1, "{summary}");
    assert_eq!(summary["frontier"], 0, "{summary}");
    assert_eq!(summary["in_flight"], 0, "{summary}");
    // A later worker tries the host again, parks it again, and ends. The
    // dead host is all the drained crawl has for it: every request of its
    // run failed on the network, so it exits 4, as an embedded run would.
    let slot = crawl.spawn(&argv);
    let status = crawl.wait(slot, LIMIT);
    assert_eq!(status.code(), Some(4), "{}", crawl.logs_tail());
    let summary = crawl.summary();
    assert_eq!(summary["parked_hosts"], 1, "{summary}");
    assert_eq!(summary["counters"]["robots/hosts_unparked"], 1, "{summary}");
}

/// A page with more links than one part (`LINK_CHUNK`): its task hands them to
/// the worker in parts while its legs run, each part queued by its own script
/// call under the page's lease, ahead of the completion. Two workers crawl it
/// whole: every link queued once, every page fetched once, one item each.
#[test]
fn a_dense_page_is_queued_in_parts_and_crawled_once_by_two_workers() {
    use legcrawl::store::LINK_CHUNK;

    let _serial = serial();
    let Some(redis) = RedisServer::start("a_dense_page_is_queued_in_parts") else {
        return;
    };
    let links = 2 * LINK_CHUNK + 100;
    let server = crate::dense::serve_dense(links);
    let mut crawl = Crawl::new(&redis.url(), "dense");
    let seed = server.url("/");
    let argv = [
        seed.as_str(),
        "--ignore-robots",
        "--concurrency",
        "8",
        "--per-host",
        "8",
    ];
    crawl.spawn(&argv);
    crawl.spawn(&argv);
    crawl.wait_all_ok(LIMIT);
    let summary = crawl.summary();
    assert_eq!(summary["items"], links + 1, "{summary}");
    assert_eq!(summary["frontier"], 0, "{summary}");
    assert_eq!(summary["seen"], links + 1, "{summary}");
    let hits = server.all_hits();
    let twice: Vec<_> = hits.iter().filter(|(_, n)| *n > 1).collect();
    assert!(twice.is_empty(), "fetched more than once: {twice:?}");
    assert_eq!(hits.len(), links + 1, "every page fetched");
}

/// Issue 25, item 8: at most 150 bytes of Redis memory per queued request,
/// frontier and seen set together. One worker with `--max-pages 1` fetches a
/// page of 50,000 links, so they stay queued; Redis's `used_memory` after the
/// run minus before it, divided by the requests queued. The run's fixed costs
/// are included (about 0.9 MB here: cached scripts, job, records): 136.6 B on
/// Redis 7.0.15 when written, of which 93 B the queue and 25 B the seen set
/// by `MEMORY USAGE`.
#[test]
fn a_queued_request_costs_at_most_150_bytes_of_redis_memory() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("a_queued_request_costs_at_most_150_bytes") else {
        return;
    };
    let links = 50_000;
    let server = crate::dense::serve_dense(links);
    let used_memory = || -> u64 {
        let info = redis.command(&["INFO", "memory"]).unwrap().text().unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("INFO memory has used_memory")
    };
    let before = used_memory();
    let mut crawl = Crawl::new(&redis.url(), "memory");
    let seed = server.url("/");
    crawl.spawn(&[
        seed.as_str(),
        "--ignore-robots",
        "--max-pages",
        "1",
        "--concurrency",
        "1",
    ]);
    crawl.wait_all_ok(LIMIT);
    let after = used_memory();
    let summary = crawl.summary();
    let queued = summary["frontier"].as_u64().unwrap_or(0);
    assert!(
        queued + 1 >= links as u64,
        "the links stay queued: {summary}"
    );
    let per = after.saturating_sub(before) as f64 / queued as f64;
    eprintln!("{per:.1} B of Redis memory per queued request ({queued} queued)");
    assert!(
        per <= 150.0,
        "{per:.1} bytes of Redis memory per queued request (used_memory {before} -> {after}, {queued} queued)"
    );
    // `dump seen` finds a link in the seen set's buckets, and not a URL never linked.
    let seen = String::from_utf8(crawl.dump(&["seen", &server.url("/p/12345")])).unwrap();
    assert!(seen.contains("exact        seen"), "{seen}");
    let unseen = String::from_utf8(crawl.dump(&["seen", &server.url("/q/1")])).unwrap();
    assert!(unseen.contains("not seen"), "{unseen}");
}

/// A crawl whose keys are in the layout of earlier builds (`schema` 1 in its
/// `meta`) is refused by a worker and by `dump` in one line, exit 2, naming
/// the last build that reads it; nothing is written to it.
#[test]
fn a_crawl_of_an_earlier_key_layout_is_refused_in_one_line() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("a_crawl_of_an_earlier_key_layout") else {
        return;
    };
    let server = crate::dense::serve_dense(3);
    let mut crawl = Crawl::new(&redis.url(), "layout");
    let seed = server.url("/");
    let argv = [seed.as_str(), "--ignore-robots", "--max-pages", "1"];
    crawl.spawn(&argv);
    crawl.wait_all_ok(LIMIT);
    let meta = format!("{}meta", crawl.prefix());
    let schema = redis.command(&["HGET", &meta, "schema"]).unwrap().text();
    assert_eq!(schema.as_deref(), Some("2"), "this build's layout");
    redis.command(&["HSET", &meta, "schema", "1"]).unwrap();
    let keys = redis.keys(&format!("{}*", crawl.prefix()));
    let frontier = redis.command(&["HGET", &meta, "frontier"]).unwrap();
    let refused = |out: std::process::Output, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
        assert!(
            err.contains("layout 1") && err.contains(legcrawl::shared::LAST_BUILD_READING_SCHEMA_1),
            "{what}: {err}"
        );
    };
    refused(run(crawl.crawl_command(&argv), LIMIT), "crawl");
    refused(crawl.dump_output(&["summary"]), "dump summary");
    refused(crawl.dump_output(&["frontier"]), "dump frontier");
    assert_eq!(
        redis.keys(&format!("{}*", crawl.prefix())),
        keys,
        "nothing written"
    );
    assert_eq!(
        redis.command(&["HGET", &meta, "frontier"]).unwrap(),
        frontier
    );
}
