//! Issue 25: a shared crawl on the Redis that teams run. Lost state is found
//! and stops the worker (Redis restarted empty, `FLUSHALL`, a deleted key),
//! never reported drained; fencing tokens stay unique when the token counter
//! comes back lower; an evicting server is refused and one without
//! persistence warned of (a warning only where `CONFIG` is denied); `BUSY`
//! is waited out and `OOM` stops the worker with one line. Real
//! `redis-server`s configured each way, real workers (`support::workers`).

use std::time::{Duration, Instant};

use legcrawl::shared::client::NewRequest;
use legcrawl::shared::{Shared, SharedTarget};

use crate::support::hosts::{MultiSite, args, fixed};
use crate::support::redis::{RedisServer, Resp};
use crate::support::scripts::seed;
use crate::support::workers::{Crawl, assert_items_once, serial, wait_for_requests};

/// Longest a worker may take to notice a loss or to finish.
const LIMIT: Duration = Duration::from_secs(60);

/// The one line a worker says when the crawl's state is gone.
const GONE: &str = "state is gone from Redis";

/// Asserts `slot` exited 1 having said the crawl's state is gone, once, as
/// its last line, naming the crawl, never "drained".
fn assert_gone(crawl: &mut Crawl, slot: usize) {
    let status = crawl.wait(slot, LIMIT);
    let log = crawl.log(slot);
    assert_eq!(status.code(), Some(1), "{log}");
    let said: Vec<&str> = log.lines().filter(|l| l.contains(GONE)).collect();
    assert_eq!(said.len(), 1, "one line saying the state is gone: {log}");
    assert!(said[0].contains(&format!("{:?}", crawl.name)), "{log}");
    assert_eq!(log.lines().last(), Some(said[0]), "{log}");
    assert!(!log.contains("drained"), "{log}");
}

fn worker_args(site: &MultiSite) -> Vec<String> {
    site.crawl_args()
}

#[test]
fn redis_restarted_empty_mid_crawl_stops_the_worker() {
    let _serial = serial();
    let Some(mut redis) = RedisServer::start("redis_restarted_empty") else {
        return;
    };
    let site = MultiSite::start(600, 2, 7, fixed(30));
    let mut crawl = Crawl::new(&redis.url(), "empty");
    let crawl_args = worker_args(&site);
    let argv = args(&crawl_args, &["--concurrency", "2", "--lease-ttl", "3"]);
    let slot = crawl.spawn(&argv);
    wait_for_requests(&site, 40, &mut crawl);
    redis.restart(Duration::from_millis(300));
    assert_gone(&mut crawl, slot);
    // It wrote nothing into the empty server.
    assert_eq!(redis.keys("legcrawl:*"), Vec::<String>::new());
}

#[test]
fn a_deleted_key_or_flushall_mid_crawl_stops_the_workers() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("deleted_key_or_flushall") else {
        return;
    };
    let site = MultiSite::start(900, 3, 11, fixed(30));
    let crawl_args = worker_args(&site);
    let argv = args(&crawl_args, &["--concurrency", "2", "--lease-ttl", "3"]);
    let mut crawls: Vec<Crawl> = ["meta", "seeds", "flush"]
        .iter()
        .map(|name| Crawl::new(&redis.url(), name))
        .collect();
    for crawl in &mut crawls {
        crawl.spawn(&argv);
    }
    for crawl in &mut crawls {
        wait_for_requests(&site, 60, crawl);
    }
    for (i, key) in ["meta", "seeds"].iter().enumerate() {
        let key = format!("{}{key}", crawls[i].prefix());
        assert_eq!(redis.command(&["DEL", &key]).unwrap(), Resp::Int(1));
        assert_gone(&mut crawls[i], 0);
    }
    assert_eq!(
        redis.command(&["FLUSHALL"]).unwrap(),
        Resp::Simple("OK".into())
    );
    assert_gone(&mut crawls[2], 0);
}

/// A restart that lost the tail of the data brings the token counter back
/// lower: tokens handed out after it are still above every earlier one (the
/// server's time is in their high bits).
#[test]
fn fencing_tokens_stay_unique_when_the_counter_comes_back_lower() {
    let Some(server) = RedisServer::start("fencing_tokens_unique") else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let target = SharedTarget::new(&server.url(), "tokens").unwrap();
        let shared = Shared::connect(&target, 8).await.unwrap();
        let seeds: Vec<NewRequest> = (0..6)
            .map(|i| seed(&format!("http://a.test/{i}")))
            .collect();
        shared.add_seeds(&seeds).await.unwrap();
        let ttl = Duration::from_secs(30);
        let first: Vec<u64> = shared
            .lease("w", 3, ttl)
            .await
            .unwrap()
            .leases
            .iter()
            .map(|l| l.token)
            .collect();
        assert_eq!(first.len(), 3);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(first[0] >= (now_ms - 60_000) * 1024, "{first:?}");
        // The counter as an older snapshot would have it.
        server
            .command(&["HSET", "legcrawl:{tokens}:meta", "token", "1"])
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let after: Vec<u64> = shared
            .lease("w", 3, ttl)
            .await
            .unwrap()
            .leases
            .iter()
            .map(|l| l.token)
            .collect();
        assert_eq!(after.len(), 3);
        let highest = first.iter().max().unwrap();
        assert!(
            after.iter().all(|t| t > highest),
            "{first:?} then {after:?}"
        );
    });
}

/// `crawl ARGS` with the site's seeds against `redis`, to completion.
fn crawl_once(redis_url: &str, name: &str, site: &MultiSite) -> std::process::Output {
    let crawl = Crawl::new(redis_url, name);
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "4"]);
    crate::support::cli::run(crawl.crawl_command(&argv), LIMIT)
}

#[test]
fn an_evicting_server_is_refused_and_risky_settings_are_warned_of() {
    let _serial = serial();
    let site = MultiSite::start(20, 1, 5, fixed(0));
    let Some(lru) = RedisServer::start_with_config(
        "evicting_server_refused",
        &[("maxmemory-policy", "allkeys-lru")],
    ) else {
        return;
    };
    let out = crawl_once(&lru.url(), "lru", &site);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("maxmemory-policy allkeys-lru"), "{err}");
    assert_eq!(
        lru.keys("legcrawl:*"),
        Vec::<String>::new(),
        "nothing stored"
    );

    // An ACL user without +config: the policy cannot be read, a warning says
    // so, and the crawl runs.
    let setuser = lru
        .command(&[
            "ACL",
            "SETUSER",
            "crawler",
            "on",
            ">s3cret-pw",
            "~*",
            "&*",
            "+@all",
            "-config",
        ])
        .unwrap();
    assert_eq!(setuser, Resp::Simple("OK".into()));
    let url = format!("redis://crawler:s3cret-pw@127.0.0.1:{}/0", lru.port());
    let out = crawl_once(&url, "acl", &site);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("CONFIG GET is not allowed"), "{err}");
    assert!(!err.contains("s3cret-pw"), "{err}");

    let Some(bare) = RedisServer::start_without_persistence("no_persistence_warned") else {
        return;
    };
    let out = crawl_once(&bare.url(), "bare", &site);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("keeps no copy on disk"), "{err}");
    let Some(kept) = RedisServer::start("persistence_not_warned") else {
        return;
    };
    let out = crawl_once(&kept.url(), "kept", &site);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("copy on disk") && !err.contains("CONFIG"),
        "{err}"
    );
    // Buckets that would not stay listpacks: a warning naming the setting.
    let set = kept
        .command(&["CONFIG", "SET", "hash-max-listpack-entries", "32"])
        .unwrap();
    assert_eq!(set, Resp::Simple("OK".into()));
    let out = crawl_once(&kept.url(), "small-listpacks", &site);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("hash-max-listpack-entries 32")
            && err.contains("CONFIG SET hash-max-listpack-entries 128"),
        "{err}"
    );
}

/// A Lua busy loop of `ms` on its own connection: every other client gets
/// `BUSY` meanwhile (past the server's busy-reply-threshold).
fn hold_busy(redis: &RedisServer, ms: u64) {
    let script = format!(
        "local t0 = redis.call('TIME') \
         while true do \
           local t = redis.call('TIME') \
           if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > {} then break end \
         end \
         return 1",
        ms * 1000
    );
    let reply = redis.command(&["EVAL", &script, "0"]).unwrap();
    assert_eq!(reply, Resp::Int(1));
}

#[test]
fn busy_is_waited_out_and_oom_stops_the_worker() {
    let _serial = serial();
    let Some(redis) =
        RedisServer::start_with_config("busy_and_oom", &[("busy-reply-threshold", "50")])
    else {
        return;
    };
    let site = MultiSite::start(300, 2, 13, fixed(5));
    let mut crawl = Crawl::new(&redis.url(), "busy");
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "4"]);
    crawl.spawn(&argv);
    wait_for_requests(&site, 20, &mut crawl);
    for _ in 0..3 {
        hold_busy(&redis, 1200);
        std::thread::sleep(Duration::from_millis(100));
    }
    crawl.wait_all_ok(LIMIT);
    assert!(
        crawl.log(0).contains("BUSY"),
        "the worker met BUSY at least once: {}",
        crawl.log(0)
    );
    assert_items_once(&crawl, &site);

    // OOM: maxmemory below what is used, under noeviction.
    let big = MultiSite::start(3000, 2, 17, fixed(5));
    let mut crawl = Crawl::new(&redis.url(), "oom");
    let big_args = big.crawl_args();
    let argv = args(&big_args, &["--concurrency", "4"]);
    let slot = crawl.spawn(&argv);
    wait_for_requests(&big, 20, &mut crawl);
    let info = redis.command(&["INFO", "memory"]).unwrap().text().unwrap();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    // Below what is used: noeviction refuses every write from now on.
    let limit = (used - 64 * 1024).to_string();
    redis
        .command(&["CONFIG", "SET", "maxmemory", &limit])
        .unwrap();
    let started = Instant::now();
    let status = crawl.wait(slot, LIMIT);
    let log = crawl.log(slot);
    assert_eq!(status.code(), Some(1), "{log}");
    assert_eq!(log.trim().lines().count(), 1, "one line: {log}");
    assert!(log.contains("out of memory"), "{log}");
    eprintln!(
        "OOM stopped the worker {:?} after maxmemory was set",
        started.elapsed()
    );
}
