//! A worker's liveness is its heartbeat, not its leases' TTL: the leases of a
//! worker not heard from for the bound (6 s) go back to the frontier, whatever
//! their TTL. Against a real `redis-server` (skipped loudly when missing,
//! unless `LEGCRAWL_REQUIRE_REDIS=1`): the scripts one call at a time (a dead
//! worker's lease released and its completion refused; a Redis that was away
//! takes no live worker for dead), then every worker of a crawl killed with
//! `kill -9` at once and three new ones started 1 s later on a slow loopback
//! site, judged on the servers' logs.

use std::time::{Duration, Instant};

use legcrawl::shared::client::{Completed, PageCompletion};
use legcrawl::shared::{Shared, SharedTarget};

use crate::support::hosts::{Delay, MultiSite, args, fixed};
use crate::support::politeness::judge;
use crate::support::redis::RedisServer;
use crate::support::runtime;
use crate::support::scripts::seed;
use crate::support::workers::{Crawl, assert_items_once, serial, wait_for_requests};

/// The bound: a restart of every worker costs at most this much
/// before each host is fetched again.
const RESTART_BOUND: Duration = Duration::from_secs(10);

/// Longest the crawl of the restart test may take.
const LIMIT: Duration = Duration::from_secs(180);

async fn connect(server: &RedisServer, name: &str) -> Shared {
    let target = SharedTarget::new(&server.url(), name).expect("target");
    Shared::connect(&target, 2).await.expect("connect")
}

/// A counter of crawl `name` in `server` (0 when absent).
fn counter(server: &RedisServer, name: &str, counter: &str) -> u64 {
    let key = format!("legcrawl:{{{name}}}:counters");
    server
        .command(&["HGET", &key, counter])
        .ok()
        .and_then(|reply| reply.text())
        .and_then(|text| text.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_dead_workers_lease_goes_back_within_the_bound_and_its_completion_is_refused() {
    let Some(server) = RedisServer::start("shared_heartbeat::dead") else {
        return;
    };
    runtime().block_on(async {
        let shared = connect(&server, "dead").await;
        shared.add_seeds(&[seed("http://a.test/")]).await.unwrap();
        // w1 leases for a minute, then is never heard from again.
        let ttl = Duration::from_secs(60);
        let first = shared.lease("w1", 4, ttl).await.unwrap();
        assert_eq!(first.leases.len(), 1);
        let old = first.leases[0].token;
        let died = Instant::now();
        // w2 beats every second; one of its beats returns w1's lease.
        let released = loop {
            assert!(
                died.elapsed() < RESTART_BOUND,
                "w1's lease is still held after {:?}",
                died.elapsed()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
            let beat = shared.beat("w2").await.unwrap();
            if beat.released > 0 {
                assert_eq!(beat.released, 1);
                break died.elapsed();
            }
        };
        eprintln!("w1's lease went back {released:?} after its last sign of life");
        assert!(
            released >= Duration::from_secs(5),
            "w1 was taken for dead after only {released:?}"
        );
        // The request is leased again (to w2), and w1's late completion
        // writes nothing.
        let again = shared.lease("w2", 4, ttl).await.unwrap();
        assert_eq!(again.leases.len(), 1);
        assert_eq!(again.leases[0].request.url, "http://a.test/");
        let page = PageCompletion {
            token: old,
            items: vec![serde_json::json!({"url": "http://a.test/"}).to_string()],
            ..PageCompletion::default()
        };
        assert_eq!(
            shared.complete("w1", &page).await.unwrap(),
            Completed::Stale
        );
        // w1 coming back is told it had been taken for dead.
        assert!(shared.beat("w1").await.unwrap().was_absent);
        assert!(!shared.beat("w1").await.unwrap().was_absent);
    });
    assert_eq!(counter(&server, "dead", "leases/orphaned"), 1);
    assert_eq!(counter(&server, "dead", "items/stored"), 0);
}

#[test]
fn a_redis_that_was_away_takes_no_live_worker_for_dead() {
    let Some(server) = RedisServer::start("shared_heartbeat::away") else {
        return;
    };
    runtime().block_on(async {
        let shared = connect(&server, "away").await;
        shared.add_seeds(&[seed("http://a.test/")]).await.unwrap();
        let first = shared
            .lease("w1", 4, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(first.leases.len(), 1);
        // Nothing reaches the crawl for longer than the bound (as while
        // Redis is stopped, or no worker runs): the silence is nobody's.
        tokio::time::sleep(Duration::from_millis(7500)).await;
        let beat = shared.beat("w2").await.unwrap();
        assert_eq!(beat.released, 0, "w1 taken for dead after a gap");
        let page = PageCompletion {
            token: first.leases[0].token,
            ..PageCompletion::default()
        };
        assert!(
            matches!(
                shared.complete("w1", &page).await.unwrap(),
                Completed::Done { .. }
            ),
            "w1's lease survived the gap"
        );
    });
    assert_eq!(counter(&server, "away", "leases/orphaned"), 0);
}

#[test]
fn every_worker_killed_at_once_then_new_ones_fetch_within_seconds_politely() {
    const PER_HOST: usize = 2;
    let delay = Duration::from_millis(100);
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_heartbeat::restart") else {
        return;
    };
    // A slow site: each answer takes 250 ms, so both of a host's slots are
    // nearly always held, and at the kill the dead workers' leases hold them.
    let slow: Delay = fixed(250);
    let site = MultiSite::start(480, 4, 46, slow);
    let mut crawl = Crawl::new(&redis.url(), "restart");
    let crawl_args = site.crawl_args();
    let per_host = PER_HOST.to_string();
    // The lease TTL is the default, 60 s: only the heartbeat can free the
    // dead workers' slots within the bound.
    let argv = args(
        &crawl_args,
        &[
            "--concurrency",
            "4",
            "--per-host",
            &per_host,
            "--delay",
            "0.1",
            "--ignore-robots",
        ],
    );
    for _ in 0..3 {
        crawl.spawn(&argv);
    }
    wait_for_requests(&site, 120, &mut crawl);
    for slot in 0..3 {
        crawl.kill_nine(slot);
    }
    let killed = Instant::now();
    let before = site.requests();
    std::thread::sleep(Duration::from_secs(1));
    let restarted = Instant::now();
    for slot in 0..3 {
        crawl.respawn(slot, &argv);
    }
    crawl.wait_all_ok(LIMIT);

    // Every host is fetched again within the bound of the new workers' start.
    for (h, server) in site.servers().iter().enumerate() {
        let first = server
            .log()
            .iter()
            .map(|l| l.start)
            .filter(|&start| start > killed)
            .min()
            .expect("the host is fetched after the restart");
        let idle = first.saturating_duration_since(restarted);
        eprintln!("host {h}: first request {idle:?} after the new workers started");
        assert!(
            idle <= RESTART_BOUND,
            "host {h} idle {idle:?} after the restart ({before} requests before the kill)\n{}",
            crawl.logs_tail()
        );
    }
    // The dead workers' leases were returned by the heartbeat (the TTL of
    // 60 s had not run out).
    let orphaned = counter(&redis, "restart", "leases/orphaned");
    eprintln!("leases of dead workers returned: {orphaned}");
    assert!(orphaned > 0, "no lease of a dead worker was returned");
    // Politeness held across the handover, on the servers' clocks.
    for (h, server) in site.servers().iter().enumerate() {
        let judged = judge(&server.log(), PER_HOST, delay);
        eprintln!(
            "host {h}: {} gaps, smallest {:?}, peak {} in flight",
            judged.gaps, judged.min_gap, judged.peak
        );
        if let Some(failure) = judged.failure(delay) {
            panic!("host {h}, --per-host {PER_HOST} --delay 0.1, across a restart: {failure}");
        }
    }
    assert_items_once(&crawl, &site);
}
