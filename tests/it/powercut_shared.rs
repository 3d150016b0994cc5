//! Power cuts under a worker of a shared crawl: its `--output` file and its
//! `--warc` directory are on the power-cut filesystem, each in a directory of
//! its own; Redis, the crawl's state, is on a disk of its own and keeps
//! running. A sync of a WARC file fails first, then the worker is killed and
//! the power cut at random moments (strict and torn cuts, both from the
//! printed seed), and started again each time;
//! at the end its WARC files hold each page's records once, and its output
//! file each item once.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::powercut::cut_seed;
use crate::support::hosts::{MultiSite, args, fixed, item_key, url_key};
use crate::support::lazyfs::PowerCutFs;
use crate::support::redis::RedisServer;
use crate::support::workers::{Crawl, assert_items_once, serial};
use crate::support::{assert_each_once, cli, splitmix64, warc};

/// Longest the crawl (or one run after it) may take.
const LIMIT: Duration = Duration::from_secs(180);
/// Cuts aimed at the running worker.
const CUTS: u64 = 8;

/// One worker with `--output P/out/w/out.jsonl` and `--warc P/arch/warc` on
/// the power-cut filesystem P, killed and cut `CUTS` times mid-crawl, then
/// run to the end; then the power is cut once more. The WARC files must hold
/// each page's response once and its request once, and still do after one
/// more start of the worker (more requests only with revisits of a seed);
/// that start writes the output file's missing lines from the crawl's item
/// stream, as every start does, and then the output file holds each page's
/// item once, as the crawl does.
#[test]
fn power_cuts_under_a_shared_worker_lose_no_record_and_no_line() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("powercut_shared") else {
        return;
    };
    let Some(mut fs) =
        PowerCutFs::mount("power_cuts_under_a_shared_worker_lose_no_record_and_no_line")
    else {
        return;
    };
    let root = fs.path().to_owned();
    for dir in ["out", "out/w", "arch"] {
        std::fs::create_dir(root.join(dir)).expect("a directory on the power-cut filesystem");
    }
    for dir in ["", "out"] {
        std::fs::File::open(root.join(dir))
            .and_then(|d| d.sync_all())
            .expect("sync a directory on the power-cut filesystem");
    }
    let output = root.join("out/w/out.jsonl").display().to_string();
    let warc_dir = root.join("arch/warc");
    let warc_arg = warc_dir.display().to_string();
    let site = MultiSite::start(600, 2, 49, fixed(10));
    let mut crawl = Crawl::new(&redis.url(), "powercut");
    let crawl_args = site.crawl_args();
    let mut argv = args(
        &crawl_args,
        &["--concurrency", "4", "--per-host", "2", "--lease-ttl", "1"],
    );
    argv.extend([
        "--output",
        output.as_str(),
        "--warc",
        warc_arg.as_str(),
        "--warc-max-size",
        "20KB",
    ]);
    let mut rng = cut_seed();
    // First a sync of a WARC file fails (EIO, its pages lost: see
    // `Disk::fail_sync_of`): the worker stops in one line, and the power is
    // cut.
    let nth = 1 + splitmix64(&mut rng) % 4;
    fs.fail_sync_of("legcrawl-*", nth);
    let slot = crawl.spawn(&argv);
    let status = crawl.wait(slot, LIMIT);
    let log = crawl.log(slot);
    eprintln!("sync {nth} of a WARC file fails: {status}: {}", log.trim());
    assert_eq!(fs.counts().failed_syncs, 1, "the sync did not fail: {log}");
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("Input/output error"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    fs.cut();
    crawl.respawn(slot, &argv);
    let gap = site.expected().len() as u64 / (CUTS + 2);
    let (mut cuts, mut last) = (0, 0);
    for round in 0..CUTS {
        let deadline = Instant::now() + Duration::from_secs(30);
        while site.requests() <= last + gap && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(splitmix64(&mut rng) % 300));
        if let Some(status) = crawl.try_wait(slot) {
            assert!(status.success(), "{status}\n{}", crawl.logs_tail());
            eprintln!("round {round}: the worker finished; no more cuts");
            break;
        }
        crawl.kill_nine(slot);
        let torn = splitmix64(&mut rng) & 1 == 1;
        if torn {
            fs.cut_torn(splitmix64(&mut rng));
        } else {
            fs.cut();
        }
        cuts += 1;
        last = site.requests();
        eprintln!("round {round}: worker killed, power cut (torn: {torn}) after {last} requests");
        crawl.respawn(slot, &argv);
    }
    crawl.wait_all_ok(LIMIT);
    assert!(cuts >= CUTS / 2, "only {cuts} cuts landed mid-crawl");
    // The finished worker's WARC records are durable, with nothing past
    // them that a start would have to cut off; its output file is made
    // whole by the next start.
    fs.cut();
    check_records(&warc_dir, &site);
    let out = cli::run(crawl.crawl_command(&argv), LIMIT);
    assert!(
        out.status.success(),
        "the start after the last cut: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{cuts} cuts; {:?}", fs.counts());
    assert_items_once(&crawl, &site);
    let lines = cli::parse_lines(&std::fs::read(&output).expect("the output file"));
    let keys: Vec<String> = lines.iter().map(item_key).collect();
    assert_each_once(&keys, &site.expected(), "output lines");
    check_records(&warc_dir, &site);
}

/// Each page's response record once in the WARC files of `dir`, and its
/// request record once, or once more per revisit record (a seed fetched again
/// by a later start); digests checked, warcio reads every file.
fn check_records(dir: &Path, site: &MultiSite) {
    let files = warc::files(dir);
    assert!(!files.is_empty(), "no WARC file written");
    let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
    for record in warc::read_dir(dir) {
        warc::check_digests(&record);
        if record.kind() == "warcinfo" || record.target().ends_with("/robots.txt") {
            continue;
        }
        *counts
            .entry((url_key(record.target()), record.kind().to_owned()))
            .or_default() += 1;
    }
    for page in site.expected() {
        let mut take = |kind: &str| counts.remove(&(page.clone(), kind.to_owned()));
        let (requests, responses, revisits) = (take("request"), take("response"), take("revisit"));
        assert_eq!(responses, Some(1), "response records of {page}");
        assert_eq!(
            requests,
            Some(1 + revisits.unwrap_or(0)),
            "request records of {page} ({revisits:?} revisits)"
        );
    }
    assert!(counts.is_empty(), "unexpected records {counts:?}");
    warc::warcio_check(&files);
}
