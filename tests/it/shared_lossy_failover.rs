//! Issue 46, a failover that loses acknowledged writes: a replica is
//! promoted while the old primary goes on taking writes, then the old
//! primary dies and the workers are sent to the new one. Real processes: a
//! primary P and its replica R (`REPLICAOF`), the workers reaching Redis
//! through a TCP proxy (`support::tcp_proxy`) that the test points from P
//! to R, as a failover's address change (a virtual IP, a DNS name, a
//! Sentinel-aware proxy) does.
//!
//! R is promoted (`REPLICAOF NO ONE`: it stops taking P's stream), the
//! workers go on writing to P for [`SPLIT`], P is killed with `kill -9` and
//! the proxy points at R, which holds the crawl as it was at the promotion.
//! Every completion acknowledged by P in those seconds is lost. Each worker
//! that lost completions says so in one line (`the shared crawl "…" lost N
//! committed completions (Redis went back from A to B …)`), the one without
//! `--output` as well as those with one; no worker dies; each exits 3 with a
//! run line that says it drained after a loss (0 if it lost none); the lost
//! pages are fetched again, so the stream holds each page once; each
//! `--output` file is reconciled (its lost lines moved aside), and the files,
//! joined, equal the stream's items written to files, each in stream order.

use std::time::{Duration, Instant};

use crate::support::hosts::{MultiSite, args, fixed};
use crate::support::redis::{RedisServer, Resp};
use crate::support::stream::{
    assert_files_equal_the_written_stream, lines, lost_count, lost_files, stream,
};
use crate::support::tcp_proxy::TcpProxy;
use crate::support::workers::{Crawl, assert_items_once, idle_after, serial, wait_for_requests};

/// Longest a worker may take to finish.
const LIMIT: Duration = Duration::from_secs(120);
/// How long the old primary goes on taking writes after the promotion.
const SPLIT: Duration = Duration::from_secs(3);
/// Longest the replica may take to be in sync with its primary.
const SYNC_WAIT: Duration = Duration::from_secs(10);
/// The longest a host may go without a request once the workers reach R.
const HEAL_BOUND: Duration = Duration::from_secs(10);
/// The words of the one line a worker says when Redis went back.
const LOST: &str = "committed completions (Redis went back from";

/// A field of `INFO replication` on `redis`.
fn replication(redis: &RedisServer, field: &str) -> Option<String> {
    let info = redis
        .command(&["INFO", "replication"])
        .ok()
        .and_then(|r| r.text())?;
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_owned())
}

#[test]
fn a_promoted_replica_behind_its_primary_is_named_by_each_worker_and_the_crawl_ends_exact() {
    let _serial = serial();
    let Some(mut primary) = RedisServer::start("shared_lossy_failover_primary") else {
        return;
    };
    let Some(replica) = RedisServer::start("shared_lossy_failover_replica") else {
        return;
    };
    let port = primary.port().to_string();
    assert_eq!(
        replica.command(&["REPLICAOF", "127.0.0.1", &port]).unwrap(),
        Resp::Simple("OK".into())
    );
    let deadline = Instant::now() + SYNC_WAIT;
    while replication(&replica, "master_link_status").as_deref() != Some("up") {
        assert!(Instant::now() < deadline, "the replica did not sync");
        std::thread::sleep(Duration::from_millis(50));
    }
    let proxy = TcpProxy::start(primary.port());

    // Three hosts, one request at a time each, 25 ms an answer: some 120
    // pages a second, so the crawl of 1,500 pages runs well past the split.
    let site = MultiSite::start(1500, 3, 53, fixed(25));
    let mut crawl = Crawl::new(&proxy.redis_url(), "split");
    let crawl_args = site.crawl_args();
    // Two workers write output files; the third writes none.
    let outputs: Vec<String> = (0..2).map(|i| format!("out-{i}.jsonl")).collect();
    let common = ["--concurrency", "4", "--per-host", "1"];
    let mut argv: Vec<Vec<&str>> = outputs
        .iter()
        .map(|out| {
            let mut options = common.to_vec();
            options.extend(["--output", out.as_str()]);
            args(&crawl_args, &options)
        })
        .collect();
    argv.push(args(&crawl_args, &common));
    for a in &argv {
        crawl.spawn(a);
    }
    wait_for_requests(&site, 200, &mut crawl);

    // The failover: R stops following P and takes writes of its own; P goes
    // on acknowledging the workers' writes, which R never gets.
    let entries_then = stream(&primary, &crawl).len();
    assert_eq!(
        replica.command(&["REPLICAOF", "NO", "ONE"]).unwrap(),
        Resp::Simple("OK".into())
    );
    let requests_then = site.requests();
    std::thread::sleep(SPLIT);
    // P takes no more writes from here (they wait, and die with it), so that
    // its stream, read now, holds every completion it acknowledged alone.
    assert_eq!(
        primary
            .command(&["CLIENT", "PAUSE", "60000", "WRITE"])
            .unwrap(),
        Resp::Simple("OK".into())
    );
    let entries_on_p = stream(&primary, &crawl).len();
    primary.kill();
    proxy.point_to(replica.port());
    let healed = Instant::now();
    let entries_on_r = stream(&replica, &crawl).len();
    eprintln!(
        "measured: {} requests answered while P went on alone; the stream had {entries_then} \
         items at the promotion, {entries_on_p} on P when it died, {entries_on_r} on R",
        site.requests() - requests_then
    );
    assert!(
        entries_on_p > entries_on_r,
        "P took no write after the promotion: nothing was lost, nothing tested"
    );

    let mut lost_total = 0;
    for (slot, a) in argv.iter().enumerate() {
        let status = crawl.wait(slot, LIMIT);
        let log = crawl.log(slot);
        let said: Vec<&str> = log.lines().filter(|l| l.contains(LOST)).collect();
        assert!(said.len() <= 1, "worker {slot}: one line at most\n{log}");
        let has_output = a.contains(&"--output");
        if said.is_empty() {
            // A worker witnesses its own completions only: one that made
            // none on P alone lost nothing, and says nothing.
            assert_eq!(status.code(), Some(0), "worker {slot}\n{log}");
            eprintln!("measured: worker {slot}: none of its completions was lost");
            continue;
        }
        assert!(
            said[0].contains(&format!("the shared crawl {:?} lost ", crawl.name)),
            "{log}"
        );
        let lost = lost_count(said[0]);
        eprintln!(
            "measured: worker {slot} (output: {has_output}): {}",
            said[0]
        );
        assert_eq!(status.code(), Some(3), "worker {slot}\n{log}");
        let run = log
            .lines()
            .find(|l| l.starts_with("run "))
            .unwrap_or_else(|| panic!("worker {slot}: no run line\n{log}"));
        assert!(run.contains("after a loss"), "{run}");
        if has_output {
            let out = &outputs[slot];
            let aside = lost_files(crawl.dir(), out);
            let moved: usize = aside.iter().map(|p| lines(p).len()).sum();
            eprintln!("measured: worker {slot}: {moved} lines moved aside in {aside:?}");
            assert_eq!(aside.len(), 1, "worker {slot}\n{log}");
            assert_eq!(
                moved as u64, lost,
                "worker {slot}: lines moved aside\n{log}"
            );
        }
        lost_total += lost;
    }
    // The worker without an output file names its loss too (it completed
    // pages all through the 3 s).
    let bare = argv.len() - 1;
    assert!(
        crawl.log(bare).contains(LOST),
        "the worker without --output did not name the loss\n{}",
        crawl.log(bare)
    );
    assert!(lost_total > 0, "no completion lost: nothing was tested");
    // Every completion P acknowledged alone (one item a page) is named.
    assert_eq!(
        lost_total as usize,
        entries_on_p - entries_on_r,
        "completions lost against those named\n{}",
        crawl.logs_tail()
    );
    // No host waits long for a page whose completion was lost (the lease
    // TTL is the default, 60 s).
    let ended = Instant::now();
    for (h, (after, idle)) in idle_after(&site, healed).into_iter().enumerate() {
        eprintln!(
            "measured: host {h}: {after} requests after the switch, longest idle {idle:?}, \
             crawl ended {:?} after it",
            ended - healed
        );
        assert!(
            idle <= HEAL_BOUND,
            "host {h} idle {idle:?}\n{}",
            crawl.logs_tail()
        );
    }
    assert_items_once(&crawl, &site);
    let report = assert_files_equal_the_written_stream(&replica, &crawl, &outputs);
    eprintln!(
        "measured: {lost_total} completions lost in all; {} fetches for {} pages\n{report}",
        site.total_fetches(),
        site.expected().len()
    );
}
