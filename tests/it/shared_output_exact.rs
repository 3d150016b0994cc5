//! Per-worker `--output` of a shared crawl across `kill -9`: three workers on
//! a four-host loopback site, one of them killed again and again at random
//! moments (seed printed, replayable with `LEGCRAWL_KILL_SEED`) and restarted
//! on the same file; at the end the workers' files, joined, hold exactly the
//! crawl's item stream (read from Redis itself), each item once, none missing.
//! A real `redis-server` started by the test (skipped loudly when missing,
//! unless `LEGCRAWL_REQUIRE_REDIS=1`), the real binary as workers.

use std::time::{Duration, Instant};

use crate::support::hosts::{MultiSite, args, fixed};
use crate::support::redis::RedisServer;
use crate::support::stream::{assert_files_equal_the_stream, lines, stream};
use crate::support::workers::{Crawl, serial};
use crate::support::{kill_seed, splitmix64};

/// Longest the crawl may take.
const LIMIT: Duration = Duration::from_secs(180);
/// Kills of the one worker.
const KILLS: usize = 8;

#[test]
fn one_worker_killed_again_and_again_files_equal_the_stream() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_output_exact") else {
        return;
    };
    let site = MultiSite::start(4000, 4, 46, fixed(15));
    let mut crawl = Crawl::new(&redis.url(), "wkout");
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
                &["--concurrency", "4", "--per-host", "3", "--lease-ttl", "2"],
            );
            argv.extend(["--output", output.as_str()]);
            argv
        })
        .collect();
    for argv in &argvs {
        crawl.spawn(argv);
    }
    let mut rng = kill_seed("one_worker_killed_again_and_again_files_equal_the_stream");
    let victim = (splitmix64(&mut rng) % 3) as usize;
    let mut kills = 0;
    let mut last = 0;
    // Kills spread over the whole crawl.
    let gap = site.expected().len() as u64 / (KILLS as u64 + 2);
    for round in 0..KILLS {
        // Each kill lands mid-crawl, spread over it: the crawl fetched a
        // share of its pages since the last one, then a random moment later.
        let deadline = Instant::now() + Duration::from_secs(30);
        while site.requests() <= last + gap && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(splitmix64(&mut rng) % 400));
        if (0..3).any(|slot| crawl.try_wait(slot).is_some()) {
            eprintln!("round {round}: a worker ended; no more kills");
            break;
        }
        let status = crawl.kill_nine(victim);
        assert_eq!(status.code(), None, "{}", crawl.logs_tail());
        kills += 1;
        last = site.requests();
        eprintln!("round {round}: killed worker {victim} after {last} requests");
        crawl.respawn(victim, &argvs[victim]);
    }
    crawl.wait_all_ok(LIMIT);
    assert!(kills >= KILLS / 2, "only {kills} kills landed mid-crawl");

    let report = assert_files_equal_the_stream(&redis, &crawl, &outputs);
    eprintln!("{kills} kills of worker {victim}\n{report}");
    let all = stream(&redis, &crawl);
    assert_eq!(
        all.len(),
        site.expected().len(),
        "the stream holds each page's item once"
    );
}

/// A worker started on a file another live worker writes (its predecessor
/// not yet gone, or a second worker given the same path) would count lines
/// the other is still adding: it waits a bounded time for the file, then is
/// refused in one line, and the files stay exact. The site is slow enough
/// (some 20 s) that the first worker still runs when the wait ends.
#[test]
fn a_second_worker_on_a_file_in_use_is_refused() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_output_in_use") else {
        return;
    };
    let site = MultiSite::start(1500, 4, 47, fixed(100));
    let mut crawl = Crawl::new(&redis.url(), "inuse");
    let crawl_args = site.crawl_args();
    let outputs: Vec<String> = (0..2)
        .map(|slot| {
            crawl
                .dir()
                .join(format!("w{slot}.jsonl"))
                .display()
                .to_string()
        })
        .collect();
    let argvs: Vec<Vec<&str>> = outputs
        .iter()
        .map(|output| {
            let mut argv = args(&crawl_args, &["--concurrency", "4", "--per-host", "3"]);
            argv.extend(["--output", output.as_str()]);
            argv
        })
        .collect();
    for argv in &argvs {
        crawl.spawn(argv);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while lines(std::path::Path::new(&outputs[0])).len() < 50 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let second = crawl.spawn(&argvs[0]);
    let status = crawl.wait(second, LIMIT);
    let log = crawl.log(second);
    crawl.wait_all_ok(LIMIT);
    let report = assert_files_equal_the_stream(&redis, &crawl, &outputs);
    eprintln!("{report}");
    assert!(
        !status.success() && log.contains("another process"),
        "the second worker on {} ended {status}:\n{log}",
        outputs[0]
    );
}

/// A worker's file that holds more lines than the shared crawl has items
/// for it (here a line appended by hand; in the field, completions Redis lost
/// in the second before the worker's last witness record) is refused in one
/// line that names both causes, exit 1, and the file is left as it was.
#[test]
fn a_file_ahead_of_redis_is_refused_naming_a_loss_or_another_crawl() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_output_ahead") else {
        return;
    };
    let site = MultiSite::start(40, 1, 48, fixed(0));
    let mut crawl = Crawl::new(&redis.url(), "ahead");
    let crawl_args = site.crawl_args();
    let output = crawl.dir().join("w.jsonl").display().to_string();
    let mut argv = args(&crawl_args, &[]);
    argv.extend(["--output", output.as_str()]);
    let first = crawl.spawn(&argv);
    assert!(crawl.wait(first, LIMIT).success(), "{}", crawl.log(first));
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&output)
        .expect("the worker's output");
    std::io::Write::write_all(&mut file, b"{\"url\":\"http://elsewhere.test/\"}\n")
        .expect("append");
    drop(file);
    let before = std::fs::read(&output).expect("read the output");
    let second = crawl.spawn(&argv);
    let status = crawl.wait(second, LIMIT);
    let log = crawl.log(second);
    assert_eq!(status.code(), Some(1), "{log}");
    let said: Vec<&str> = log.lines().filter(|l| l.contains("holds")).collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains("Redis lost its latest completions")
            && said[0].contains("another crawl's output")
            && said[0].contains("move it aside"),
        "{log}"
    );
    assert_eq!(std::fs::read(&output).expect("read the output"), before);
}
