//! Issue 25, a shared crawl's outputs at parity with the embedded state:
//! per-worker `--output` and `--warc` exact across kill -9 (kill moments from a printed
//! seed, replayable with `LEGCRAWL_KILL_SEED`). The set-up is that of
//! `shared.rs`: a real `redis-server` started by the test (skipped loudly when
//! missing, unless `LEGCRAWL_REQUIRE_REDIS=1`), a site over several loopback
//! hosts, the real binary as workers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::support::cli;
use crate::support::cli::signal;
use crate::support::hosts::{MultiSite, args, fixed, item_key, url_key};
use crate::support::redis::RedisServer;
use crate::support::workers::{Crawl, assert_items_once, serial, wait_for_requests};
use crate::support::{assert_each_once, kill_seed, splitmix64, strs, warc};

/// Longest any one crawl of these tests may take.
const LIMIT: Duration = Duration::from_secs(180);

/// Complete lines of the JSONL file at `path` (none when it does not exist).
fn file_lines(path: &str) -> Vec<serde_json::Value> {
    cli::parse_lines(&std::fs::read(path).unwrap_or_default())
}

/// Three workers, each with its own `--output` and `--warc` directory; one of
/// them killed with SIGKILL ten times at random moments and restarted each
/// time with the same file and directory. At the end the three files together
/// hold exactly the stream's items, each once, and the three directories'
/// WARC files one request and one response record for each page (the
/// records a killed worker wrote for pages it never completed are cut), which
/// warcio reads.
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
    let warcs: Vec<String> = (0..3)
        .map(|slot| {
            crawl
                .dir()
                .join(format!("warc{slot}"))
                .display()
                .to_string()
        })
        .collect();
    let argvs: Vec<Vec<&str>> = outputs
        .iter()
        .zip(&warcs)
        .map(|(output, warc)| {
            let mut argv = args(
                &crawl_args,
                &["--concurrency", "2", "--per-host", "3", "--lease-ttl", "2"],
            );
            argv.extend(["--output", output.as_str(), "--warc", warc.as_str()]);
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
    // The WARC files: each page's request and response once over the three
    // directories (robots.txt, fetched by each worker, aside).
    let dirs: Vec<&std::path::Path> = warcs.iter().map(std::path::Path::new).collect();
    let (requests, responses) = page_records(&dirs);
    assert_each_once(&responses, &site.expected(), "WARC response records");
    assert_each_once(&requests, &site.expected(), "WARC request records");
}

/// `--stats FILE` on a worker of a shared crawl: the report of its run, as the
/// embedded crawl's (run, outcome, times, totals, counters), with `shared`
/// (password redacted), `name` and `worker` in place of `data`.
#[test]
fn stats_file_of_a_shared_worker_reports_its_run() {
    const PASSWORD: &str = "st4ts-Pw-hidden";
    let _serial = serial();
    let Some(redis) = RedisServer::start_with_password("shared_stats", PASSWORD) else {
        return;
    };
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}/0", redis.port());
    let site = MultiSite::start(40, 2, 13, crate::support::hosts::no_delay());
    let crawl = Crawl::new(&url, "stats");
    let stats = crawl.dir().join("stats.json");
    let crawl_args = site.crawl_args();
    let mut argv = args(&crawl_args, &["--concurrency", "4"]);
    argv.extend(["--stats", stats.to_str().expect("utf-8 path")]);
    let out = cli::run(crawl.crawl_command(&argv), LIMIT);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let text = std::fs::read_to_string(&stats).expect("the stats file is written");
    assert!(
        !text.contains(PASSWORD),
        "the password is in --stats: {text}"
    );
    let report: serde_json::Value = serde_json::from_str(&text).expect("stats JSON");
    let pages = site.expected().len() as u64;
    assert_eq!(report["run"], 1, "{report}");
    assert_eq!(report["outcome"], "drained", "{report}");
    assert_eq!(report["name"], "stats", "{report}");
    assert_eq!(
        report["shared"],
        format!("redis://:***@127.0.0.1:{}/0", redis.port()),
        "{report}"
    );
    assert!(report.get("data").is_none(), "{report}");
    assert_eq!(report["totals"]["pages"], pages, "{report}");
    assert_eq!(report["totals"]["items"], pages, "{report}");
    assert_eq!(report["counters"]["pages/completed"], pages, "{report}");
    assert_eq!(report["counters"]["items/stored"], pages, "{report}");
    assert!(
        report["started_at"].as_u64().is_some() && report["ended"].is_string(),
        "{report}"
    );
    // The same run as `dump --shared ... runs --json` shows.
    let runs = cli::parse_lines(&crawl.dump(&["runs", "--json"]));
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["worker"], report["worker"], "{runs:?}");
    assert_eq!(runs[0]["counters"], report["counters"], "{runs:?}");
}

/// `--fresh --shared`: the crawl's keys are deleted after the confirmation
/// `reset` asks for, and the crawl starts again from the seeds given. Refused,
/// deleting nothing: while a worker runs the crawl, without `--yes` when stdin
/// is not a terminal, and without seeds (each exit 2). Keys of another crawl
/// and other keys in the same database are left alone.
#[test]
fn fresh_deletes_the_shared_crawl_after_confirmation() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_fresh") else {
        return;
    };
    let site = MultiSite::start(40, 2, 17, fixed(100));
    let crawl = Crawl::new(&redis.url(), "fresh");
    // The same crawl's worker, run in the background.
    let mut running = Crawl::new(&redis.url(), "fresh");
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "1"]);
    let pages = site.expected().len();
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();
    let fresh = |extra: &[&str], with_seeds: bool| {
        let mut argv: Vec<&str> = if with_seeds {
            argv.clone()
        } else {
            vec!["--concurrency", "1"]
        };
        argv.push("--fresh");
        argv.extend(extra);
        let mut cmd = crawl.crawl_command(&argv);
        cmd.stdin(std::process::Stdio::null());
        cli::run(cmd, LIMIT)
    };

    // While a worker runs the crawl: refused.
    running.spawn(&argv);
    wait_for_requests(&site, 3, &mut running);
    let refused = fresh(&["--yes"], true);
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains("while workers run it"), "{err}");
    running.wait_all_ok(LIMIT);
    assert_eq!(site.total_fetches(), pages as u64);

    // Left alone: another crawl whose name starts alike, and a plain key.
    redis
        .command(&["SET", "legcrawl:{fresh2}:meta", "x"])
        .expect("SET");
    redis.command(&["SET", "unrelated", "y"]).expect("SET");
    let before = redis.keys(&format!("{}*", crawl.prefix()));
    assert!(before.len() > 5, "{before:?}");
    let refused = fresh(&[], true);
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains("without --yes"), "{err}");
    let refused = fresh(&["--yes"], false);
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains("no URL"), "{err}");
    assert_eq!(redis.keys(&format!("{}*", crawl.prefix())), before);
    assert_eq!(site.total_fetches(), pages as u64, "nothing fetched");

    let out = fresh(&["--yes"], true);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("deleted the shared crawl \"fresh\""), "{err}");
    let summary = crawl.summary();
    assert_eq!(summary["runs"], 1, "a new crawl: {summary}");
    assert_eq!(summary["items"], pages, "{summary}");
    assert!(
        site.fetches().values().all(|&n| n == 2),
        "every page fetched again, once: {:?}",
        site.fetches()
    );
    assert_eq!(
        redis
            .command(&["GET", "unrelated"])
            .expect("GET")
            .text()
            .as_deref(),
        Some("y")
    );
    assert_eq!(
        redis.keys("legcrawl:{fresh2}:*"),
        vec!["legcrawl:{fresh2}:meta".to_owned()]
    );
}

/// The WARC records of `dirs`' files, checked (digests, warcio): the
/// `host:port/path` of each request and each response record of a page
/// (robots.txt aside).
fn page_records(dirs: &[&std::path::Path]) -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    let (mut requests, mut responses) = (Vec::new(), Vec::new());
    for dir in dirs {
        files.extend(warc::files(dir));
        for record in warc::read_dir(dir) {
            warc::check_digests(&record);
            if record.kind() == "warcinfo" || record.target().ends_with("/robots.txt") {
                continue;
            }
            match record.kind() {
                "request" => requests.push(url_key(record.target())),
                "response" => responses.push(url_key(record.target())),
                other => panic!("a {other} record in a one-cycle crawl"),
            }
        }
    }
    assert!(!files.is_empty(), "no WARC file written");
    // warcio reads them all (skipped loudly without it, unless required).
    warc::warcio_check(&files);
    (requests, responses)
}

/// A worker aborted at each WARC crash point in turn — records appended but
/// not synced (`warc.append`), synced but not yet stored as the mark with
/// their completion (`warc.sync`), a file registered in Redis but not yet
/// created (`warc.create`), and the cut itself on the next start
/// (`warc.truncate`) — then run to the end: its WARC files hold each page's
/// request and response once, although the servers answered some pages twice.
#[test]
fn a_worker_aborted_at_each_warc_point_writes_each_record_once() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("warc_points") else {
        return;
    };
    let site = MultiSite::start(120, 2, 43, crate::support::hosts::no_delay());
    let crawl = Crawl::new(&redis.url(), "warc-points");
    let warc_dir = crawl.dir().join("warc");
    let crawl_args = site.crawl_args();
    // Short leases: an aborted worker's come back within a second. Small
    // files: the crawl begins several.
    let mut argv = args(&crawl_args, &["--concurrency", "2", "--lease-ttl", "1"]);
    argv.extend([
        "--warc",
        warc_dir.to_str().unwrap(),
        "--warc-max-size",
        "20KB",
    ]);
    // warc.truncate:1 aborts the start that cuts what warc.sync:7 left.
    for point in [
        "warc.sync:7",
        "warc.truncate:1",
        "warc.append:12",
        "warc.create:2",
        "warc.sync:20",
    ] {
        let mut cmd = crawl.crawl_command(&argv);
        cmd.env("LEGCRAWL_CRASH_AT", point);
        let out = cli::run(cmd, LIMIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(&format!("crash point {point}")),
            "{point}: {}\n{stderr}",
            out.status
        );
    }
    let out = cli::run(crawl.crawl_command(&argv), LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fetched_twice = site.fetches().values().filter(|n| **n > 1).count();
    assert!(
        fetched_twice > 0,
        "no page was fetched again after an abort"
    );
    assert_items_once(&crawl, &site);
    let (requests, responses) = page_records(&[&warc_dir]);
    assert_each_once(&responses, &site.expected(), "WARC response records");
    assert_each_once(&requests, &site.expected(), "WARC request records");
}

/// A worker with `--warc` is stopped (SIGSTOP) past its leases' TTL again and
/// again (stop moments from a printed seed) while another worker crawls on.
/// When it continues, the pages it had finished are completed together: their
/// records are written with one sync, and a completion refused because its
/// lease expired has its records cut off the file and those of the pages
/// after it in the batch written again. Both workers' WARC files then hold each
/// page's request and response once, and some completion was refused.
#[test]
fn records_of_a_refused_completion_are_cut_and_the_rest_written_again() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("warc_refused") else {
        return;
    };
    // Answers after 120 ms: a stopped worker has several fetches in flight.
    let site = MultiSite::start(600, 2, 61, fixed(120));
    let mut crawl = Crawl::new(&redis.url(), "warc-refused");
    let dirs = [crawl.dir().join("warc-a"), crawl.dir().join("warc-b")];
    let crawl_args = site.crawl_args();
    // The same settings for both (they are the crawl's job); each its own
    // WARC directory.
    let argv = |dir: &std::path::Path| {
        let mut argv: Vec<String> = args(&crawl_args, &["--concurrency", "4", "--per-host", "4"])
            .into_iter()
            .map(str::to_owned)
            .collect();
        argv.extend(["--lease-ttl", "1", "--warc"].map(str::to_owned));
        argv.push(dir.to_str().expect("utf-8 path").to_owned());
        argv
    };
    let (argv_a, argv_b) = (argv(&dirs[0]), argv(&dirs[1]));
    let a = crawl.spawn(&strs(&argv_a));
    let b = crawl.spawn(&strs(&argv_b));
    let mut rng = kill_seed("refused completions");
    let mut stops = 0;
    let mut ended = None;
    for _ in 0..12 {
        let running = Duration::from_millis(200 + splitmix64(&mut rng) % 400);
        std::thread::sleep(running);
        ended = crawl.try_wait(a);
        if ended.is_some() {
            break;
        }
        let pid = crawl.pid(a);
        signal(pid, libc::SIGSTOP);
        // Leases are renewed every third of their TTL (1 s): stopped for
        // 0.7 to 1.8 s, some of its leases expire, and maybe not all.
        std::thread::sleep(Duration::from_millis(700 + splitmix64(&mut rng) % 1100));
        signal(pid, libc::SIGCONT);
        stops += 1;
    }
    assert!(stops >= 2, "the worker finished after {stops} stops");
    let a_status = match ended {
        Some(status) => status,
        None => crawl.wait(a, LIMIT),
    };
    let b_status = crawl.wait(b, LIMIT);
    for (slot, status) in [(a, a_status), (b, b_status)] {
        assert!(
            status.success(),
            "worker {slot}: {status}\n{}",
            crawl.logs_tail()
        );
    }
    assert_items_once(&crawl, &site);
    let runs = cli::parse_lines(&crawl.dump(&["runs", "--json"]));
    let lost: u64 = runs
        .iter()
        .filter_map(|run| run["counters"]["leases/lost"].as_u64())
        .sum();
    assert!(
        lost > 0,
        "no completion was refused in {stops} stops: {runs:?}"
    );
    let (requests, responses) = page_records(&[&dirs[0], &dirs[1]]);
    assert_each_once(&responses, &site.expected(), "WARC response records");
    assert_each_once(&requests, &site.expected(), "WARC request records");
}
