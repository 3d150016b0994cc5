//! Partial loss of a shared crawl's state is named, not crawled over in
//! silence (issue 46): the commit sequence every completion advances, kept
//! by each worker in memory and in the witness record beside its `--output`
//! file, shows Redis going back. Real `redis-server`s, real workers
//! (`support::workers`).
//!
//! - An AOF under `appendfsync everysec` whose last second is cut off (what a
//!   machine crash leaves): every worker names the loss in one line, goes on,
//!   exits 3 with a run line that says it, and the stream holds each page
//!   once. Each worker's `--output` file is reconciled: the lines of its
//!   lost completions are moved aside into a file beside it that says so
//!   (one line names it), and the files, joined, equal the stream exactly;
//!   a worker started again on its output file goes on (exit 0).
//! - An AOF tail lost while the one worker was killed too: the worker started
//!   again names the loss from its witness record, moves its file's lines of
//!   lost completions aside before it writes, and its file equals the
//!   stream.
//! - The crawl lost while no worker ran (`FLUSHALL`): the next worker with
//!   the same witness refuses to start a new crawl (one line, exit 1,
//!   nothing written to Redis); with `--fresh` it starts over.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::hosts::{MultiSite, args, fixed, no_delay};
use crate::support::redis::{RedisServer, Resp};
use crate::support::stream::{assert_files_equal_the_stream, lines, lost_count, lost_files};
use crate::support::workers::{Crawl, assert_items_once, serial, wait_for_requests};

/// Longest a worker may take to finish.
const LIMIT: Duration = Duration::from_secs(120);

/// The words of the one line a worker says when Redis went back.
const LOST: &str = "committed completions (Redis went back from";

/// The AOF file commands are appended to (`appendonlydir/*.incr.aof`).
fn incr_file(dir: &Path) -> PathBuf {
    let aof_dir = dir.join("appendonlydir");
    let entries = std::fs::read_dir(&aof_dir).expect("the AOF directory");
    let mut incr: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    incr.sort();
    incr.pop().expect("an incr AOF file")
}

/// A Redis that appends to its AOF and syncs it every second, as a machine
/// crash finds it (`None`: skipped).
fn aof_redis(name: &str) -> Option<RedisServer> {
    RedisServer::start_with_config(
        name,
        &[
            ("appendonly", "yes"),
            ("appendfsync", "everysec"),
            ("save", ""),
            ("aof-load-truncated", "yes"),
        ],
    )
}

/// Cuts the AOF file `incr` back to its first `kept` bytes.
fn cut_aof(incr: &Path, kept: u64) {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(incr)
        .expect("open the AOF");
    file.set_len(kept).expect("cut the AOF's tail");
}

#[test]
fn a_lost_aof_tail_is_named_by_each_worker_that_lost_completions_and_crawled_again() {
    let _serial = serial();
    let Some(mut redis) = aof_redis("witness_aof_tail") else {
        return;
    };
    let site = MultiSite::start(900, 3, 23, fixed(20));
    let mut crawl = Crawl::new(&redis.url(), "tail");
    let crawl_args = site.crawl_args();
    let outputs: Vec<String> = (0..3).map(|i| format!("out-{i}.jsonl")).collect();
    let argv: Vec<Vec<&str>> = outputs
        .iter()
        .map(|out| {
            args(
                &crawl_args,
                &["--concurrency", "4", "--lease-ttl", "3", "--output", out],
            )
        })
        .collect();
    for a in &argv {
        crawl.spawn(a);
    }
    wait_for_requests(&site, 250, &mut crawl);
    // What the disk holds one second before the crash: the rest is cut off,
    // as a machine crash under `appendfsync everysec` loses it. The file's
    // length seen from outside is that of whole writes, so whole commands
    // (a cut inside a MULTI block would be rolled back to its start by
    // `aof-load-truncated` too).
    let incr = incr_file(redis.dir());
    let kept = std::fs::metadata(&incr).expect("AOF length").len();
    let requests_then = site.requests();
    std::thread::sleep(Duration::from_secs(1));
    redis.kill();
    let full = std::fs::metadata(&incr).expect("AOF length").len();
    cut_aof(&incr, kept);
    let requests_lost = site.requests() - requests_then;
    redis.start_again();
    eprintln!(
        "measured: cut {} of {full} AOF bytes ({requests_lost} requests answered in that second)",
        full - kept
    );

    let mut lost_total = 0;
    let mut moved_total = 0;
    for (slot, out) in outputs.iter().enumerate() {
        let status = crawl.wait(slot, LIMIT);
        let log = crawl.log(slot);
        let said: Vec<&str> = log.lines().filter(|l| l.contains(LOST)).collect();
        assert!(said.len() <= 1, "worker {slot}: one line at most\n{log}");
        if said.is_empty() {
            // A worker witnesses its own completions only: one that made
            // none in the lost second had nothing lost, and says nothing.
            assert_eq!(status.code(), Some(0), "worker {slot}\n{log}");
            assert!(log.contains("drained —"), "worker {slot}\n{log}");
            assert!(
                lost_files(crawl.dir(), out).is_empty(),
                "worker {slot}: nothing to move aside\n{log}"
            );
            eprintln!("measured: worker {slot}: none of its completions was lost");
            continue;
        }
        assert!(
            said[0].contains(&format!("the shared crawl {:?} lost ", crawl.name)),
            "{log}"
        );
        eprintln!("measured: worker {slot}: {}", said[0]);
        let lost = lost_count(said[0]);
        assert_eq!(status.code(), Some(3), "worker {slot}\n{log}");
        let run = log
            .lines()
            .find(|l| l.starts_with("run "))
            .unwrap_or_else(|| panic!("worker {slot}: no run line\n{log}"));
        assert!(run.contains("after a loss"), "{run}");
        assert!(!run.contains("drained —"), "{run}");
        // Its lost completions' lines (one item a page) are in the one
        // file beside its output that says what they are, named in one line.
        let aside = lost_files(crawl.dir(), out);
        let moved: usize = aside.iter().map(|p| lines(p).len()).sum();
        let named: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("moved aside to"))
            .collect();
        eprintln!(
            "measured: worker {slot}: {lost} completions lost, {moved} lines moved aside in {aside:?}"
        );
        assert!(aside.len() <= 1, "worker {slot}: {aside:?}\n{log}");
        assert_eq!(named.len(), aside.len(), "worker {slot}\n{log}");
        if let Some(file) = aside.first() {
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
            assert!(named[0].contains(&name.unwrap_or_default()), "{log}");
        }
        assert_eq!(
            moved as u64, lost,
            "worker {slot}: lines moved aside\n{log}"
        );
        for line in aside.iter().flat_map(|p| lines(p)) {
            let item: serde_json::Value = serde_json::from_str(&line).expect("an item line");
            assert!(item.get("url").is_some(), "{line}");
        }
        lost_total += lost;
        moved_total += moved;
    }
    assert!(
        lost_total > 0,
        "the cut lost no completion: nothing was tested"
    );
    // The crawl went on from what Redis kept: each page once in the stream,
    // and the workers' files hold exactly it.
    assert_items_once(&crawl, &site);
    let report = assert_files_equal_the_stream(&redis, &crawl, &outputs);
    eprintln!(
        "measured: {} fetches for {} pages, {moved_total} lines moved aside\n{report}",
        site.total_fetches(),
        site.expected().len()
    );

    // A worker started again on its output file goes on from it: nothing
    // more is moved aside, the files stay the stream.
    for (slot, a) in argv.iter().enumerate() {
        crawl.respawn(slot, a);
        let status = crawl.wait(slot, LIMIT);
        let log = crawl.log(slot);
        assert!(!log.contains("another crawl's output"), "{log}");
        assert_eq!(status.code(), Some(0), "worker {slot} again\n{log}");
        assert!(lost_files(crawl.dir(), &outputs[slot]).len() <= 1, "{log}");
    }
    assert_files_equal_the_stream(&redis, &crawl, &outputs);
}

#[test]
fn a_worker_started_after_a_lost_aof_tail_moves_its_lost_lines_aside() {
    let _serial = serial();
    let Some(mut redis) = aof_redis("witness_restart_tail") else {
        return;
    };
    let site = MultiSite::start(600, 2, 29, fixed(20));
    let mut crawl = Crawl::new(&redis.url(), "restart");
    let crawl_args = site.crawl_args();
    let outputs = vec!["out.jsonl".to_owned()];
    let argv = args(
        &crawl_args,
        &["--concurrency", "4", "--output", "out.jsonl"],
    );
    let slot = crawl.spawn(&argv);
    wait_for_requests(&site, 150, &mut crawl);
    // The AOF as it is now; the worker then completes pages for 1.5 s, so
    // its witness record (kept every second) is past this point when both
    // it and Redis die, and the AOF loses everything after it.
    let incr = incr_file(redis.dir());
    let kept = std::fs::metadata(&incr).expect("AOF length").len();
    std::thread::sleep(Duration::from_millis(1500));
    crawl.kill_nine(slot);
    redis.kill();
    cut_aof(&incr, kept);
    redis.start_again();

    crawl.respawn(slot, &argv);
    let status = crawl.wait(slot, LIMIT);
    let log = crawl.log(slot);
    let said: Vec<&str> = log.lines().filter(|l| l.contains(LOST)).collect();
    assert_eq!(said.len(), 1, "one line naming the loss\n{log}");
    let aside = lost_files(crawl.dir(), "out.jsonl");
    assert_eq!(aside.len(), 1, "{aside:?}\n{log}");
    let moved = lines(&aside[0]).len();
    eprintln!("measured: {}; {moved} lines moved aside", said[0]);
    // The record may be older than the last lines: it can undercount.
    assert!(moved as u64 >= lost_count(said[0]), "{log}");
    assert!(log.contains("moved aside to"), "{log}");
    assert!(!log.contains("another crawl's output"), "{log}");
    assert_eq!(status.code(), Some(3), "{log}");
    assert_items_once(&crawl, &site);
    assert_files_equal_the_stream(&redis, &crawl, &outputs);
}

#[test]
fn a_crawl_lost_while_no_worker_ran_is_not_started_over_without_fresh() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("witness_lost_between_runs") else {
        return;
    };
    let site = MultiSite::start(60, 2, 5, no_delay());
    let mut crawl = Crawl::new(&redis.url(), "between");
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--output", "items.jsonl"]);
    let slot = crawl.spawn(&argv);
    let status = crawl.wait(slot, LIMIT);
    assert_eq!(status.code(), Some(0), "{}", crawl.log(slot));
    let witness = crawl.dir().join("items.jsonl.witness");
    assert!(witness.exists(), "no witness record beside the output");

    assert_eq!(
        redis.command(&["FLUSHALL"]).unwrap(),
        Resp::Simple("OK".into())
    );
    crawl.respawn(slot, &argv);
    let status = crawl.wait(slot, LIMIT);
    let log = crawl.log(slot);
    assert_eq!(status.code(), Some(1), "{log}");
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line\n{log}");
    assert!(lines[0].contains("is not in Redis"), "{log}");
    assert!(lines[0].contains("--fresh"), "{log}");
    assert!(!log.contains("run 1"), "{log}");
    // Nothing was made anew in Redis.
    assert_eq!(redis.keys("legcrawl:*"), Vec::<String>::new());

    // With --fresh it starts over (the lost crawl's lines moved aside first,
    // as the refusal says).
    std::fs::rename(
        crawl.dir().join("items.jsonl"),
        crawl.dir().join("items.lost.jsonl"),
    )
    .expect("move the output aside");
    let fresh = args(
        &crawl_args,
        &["--output", "items.jsonl", "--fresh", "--yes"],
    );
    crawl.respawn(slot, &fresh);
    let status = crawl.wait(slot, LIMIT);
    let log = crawl.log(slot);
    assert_eq!(status.code(), Some(0), "{log}");
    assert_items_once(&crawl, &site);
    let started = Instant::now();
    // The record now names the new crawl: a worker started again runs it.
    crawl.respawn(slot, &args(&crawl_args, &["--output", "items.jsonl"]));
    let status = crawl.wait(slot, LIMIT);
    assert_eq!(status.code(), Some(0), "{}", crawl.log(slot));
    assert!(started.elapsed() < LIMIT);
}
