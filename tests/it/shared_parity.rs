//! Issue 25, a shared crawl's outputs at parity with the embedded state:
//! per-worker `--output` exact across kill -9 (kill moments from a printed
//! seed, replayable with `LEGCRAWL_KILL_SEED`). The set-up is that of
//! `shared.rs`: a real `redis-server` started by the test (skipped loudly when
//! missing, unless `LEGCRAWL_REQUIRE_REDIS=1`), a site over several loopback
//! hosts, the real binary as workers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::support::cli;
use crate::support::hosts::{MultiSite, args, fixed, item_key};
use crate::support::redis::RedisServer;
use crate::support::workers::{Crawl, assert_items_once, serial, wait_for_requests};
use crate::support::{kill_seed, splitmix64};

/// Longest any one crawl of these tests may take.
const LIMIT: Duration = Duration::from_secs(180);

/// Complete lines of the JSONL file at `path` (none when it does not exist).
fn file_lines(path: &str) -> Vec<serde_json::Value> {
    cli::parse_lines(&std::fs::read(path).unwrap_or_default())
}

/// Three workers, each with its own `--output`; one of them killed with
/// SIGKILL ten times at random moments and restarted each time with the same
/// file. At the end the three files together hold exactly the stream's items,
/// each once.
#[test]
fn one_worker_killed_ten_times_outputs_add_up_to_the_stream() {
    const KILLS: usize = 10;
    let _serial = serial();
    let Some(redis) = RedisServer::start("outputs_across_kills") else {
        return;
    };
    // Slow-ish answers: 6 fetches at a time take some 20 s for 1,500 pages, so
    // that the kills land mid-crawl. The per-host limit leaves room for every
    // worker even while a killed worker's leases wait to expire.
    let site = MultiSite::start(1500, 6, 41, fixed(80));
    let mut crawl = Crawl::new(&redis.url(), "outputs");
    let crawl_args = site.crawl_args();
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
                &["--concurrency", "2", "--per-host", "3", "--lease-ttl", "2"],
            );
            argv.extend(["--output", output.as_str()]);
            argv
        })
        .collect();
    for argv in &argvs {
        crawl.spawn(argv);
    }
    let mut rng = kill_seed("one_worker_killed_ten_times_outputs_add_up_to_the_stream");
    wait_for_requests(&site, 20, &mut crawl);
    let mut at_kills = Vec::new();
    for round in 0..KILLS {
        // The killed worker has written since its start, then a random moment.
        let before = file_lines(&outputs[0]).len();
        let deadline = Instant::now() + Duration::from_secs(20);
        while file_lines(&outputs[0]).len() <= before {
            assert!(
                Instant::now() < deadline,
                "round {round}: worker 0 wrote nothing in 20 s\n{}",
                crawl.logs_tail()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(splitmix64(&mut rng) % 300));
        for slot in 0..3 {
            assert!(
                crawl.try_wait(slot).is_none(),
                "round {round}: worker {slot} ended before the kills were done: \
                 make the site slower\n{}",
                crawl.logs_tail()
            );
        }
        let status = crawl.kill_nine(0);
        assert_eq!(status.code(), None, "round {round}: killed, not exited");
        let requests = site.requests();
        let after = file_lines(&outputs[0]).len();
        eprintln!(
            "round {round}: killed worker 0 after {requests} requests, its file {before} -> {after} lines"
        );
        at_kills.push(requests);
        crawl.respawn(0, &argvs[0]);
    }
    crawl.wait_all_ok(LIMIT);
    // The kills landed mid-crawl: the servers answered between every two, and
    // after the last (and the killed worker wrote before each, above).
    let total = site.requests();
    for pair in at_kills.windows(2) {
        assert!(pair[0] < pair[1], "no progress between kills: {at_kills:?}");
    }
    assert!(
        at_kills.last().is_some_and(|&last| last < total),
        "the last kill came after the crawl's end: {at_kills:?}, {total}"
    );
    assert_items_once(&crawl, &site);
    // The union of the files equals the stream, no line twice.
    let stream: HashMap<String, serde_json::Value> = crawl
        .items()
        .into_iter()
        .map(|item| (item_key(&item), item))
        .collect();
    let mut written: HashMap<String, usize> = HashMap::new();
    for output in &outputs {
        for item in file_lines(output) {
            let key = item_key(&item);
            assert_eq!(
                stream.get(&key),
                Some(&item),
                "{output}: a line that is not the stream's item"
            );
            *written.entry(key).or_default() += 1;
        }
    }
    let twice: Vec<_> = written.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "written twice: {twice:?}");
    let missing: Vec<_> = stream
        .keys()
        .filter(|k| !written.contains_key(*k))
        .take(5)
        .collect();
    assert!(missing.is_empty(), "in the stream, in no file: {missing:?}");
}
