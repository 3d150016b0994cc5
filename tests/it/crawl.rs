//! End-to-end crawls with the real binary against an in-process site on 127.0.0.1:
//! completeness, dedup counts, kill -9 resume, SIGINT/SIGTERM, exit codes.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::cli::{self, crawl, dump_items, dump_summary, item_path, legcrawl, run};
use crate::support::mode::{Crawler, Mode};
use crate::support::{Site, TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);

fn item_paths(data: &Path) -> Vec<String> {
    dump_items(data).iter().map(item_path).collect()
}

fn assert_each_once(paths: &[String], expected: &BTreeSet<String>) {
    crate::support::assert_each_once(paths, expected, "items");
}

#[test]
fn crawl_finds_exactly_the_reachable_pages_once_embedded() {
    crawl_finds_exactly_the_reachable_pages_once(Mode::Embedded);
}

#[test]
fn crawl_finds_exactly_the_reachable_pages_once_shared() {
    crawl_finds_exactly_the_reachable_pages_once(Mode::Shared);
}

fn crawl_finds_exactly_the_reachable_pages_once(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "crawl_finds_exactly_the_reachable_pages_once") else {
        return;
    };
    let site = Site::generate(3000, 7);
    let server = TestServer::start(site.handler());
    crawler.crawl_ok(&[&server.url("/"), "--bloom-bits", "20", "--per-host", "16"]);
    assert_each_once(&crawler.item_paths(), &site.reachable());
    for path in site.reachable() {
        assert_eq!(
            server.hits(&path),
            1,
            "{path} fetched {} times",
            server.hits(&path)
        );
    }
    let summary = crawler.summary();
    assert_eq!(summary["items"], 3001);
    assert_eq!(summary["frontier"], 0);
    assert_eq!(summary["in_flight"], 0);
    let runs = crawler.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["outcome"], "drained");
    let items = crawler.items();
    assert!(
        items
            .iter()
            .all(|i| !i["url"].as_str().unwrap().contains("offsite.invalid")),
        "the off-site link was followed"
    );
    // A second run looks at the seed again (nothing else is due yet); it has not
    // changed, so nothing is stored.
    let before = server.requests();
    crawler.crawl_ok(&[]);
    assert_eq!(server.requests(), before + 1);
    assert_eq!(crawler.summary()["items"], 3001);
}

#[test]
fn scrapy_redis_example_filters_exactly_ten_embedded() {
    scrapy_redis_example_filters_exactly_ten(Mode::Embedded);
}

#[test]
fn scrapy_redis_example_filters_exactly_ten_shared() {
    scrapy_redis_example_filters_exactly_ten(Mode::Shared);
}

fn scrapy_redis_example_filters_exactly_ten(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "scrapy_redis_example_filters_exactly_ten") else {
        return;
    };
    // 10 seeds; each seed page links to itself and to 9 new pages: 100 requests of
    // which 10 repeat a seed, so exactly 10 are filtered.
    let server = TestServer::start(handler(|req| {
        let path = req.path().to_owned();
        if let Some(i) = path
            .strip_prefix("/s/")
            .and_then(|n| n.parse::<usize>().ok())
        {
            let mut body = format!("<title>seed {i}</title><a href=\"/s/{i}\">self</a>");
            for j in 0..9 {
                body.push_str(&format!("<a href=\"/t/{}\">t</a>", i * 9 + j));
            }
            TestResponse::html(body)
        } else {
            TestResponse::html("<title>leaf</title>")
        }
    }));
    let seeds: Vec<String> = (0..10).map(|i| server.url(&format!("/s/{i}"))).collect();
    let mut args: Vec<&str> = seeds.iter().map(String::as_str).collect();
    args.extend(["--bloom-bits", "20"]);
    let out = crawler.crawl_ok(&args);
    let summary = crawler.summary();
    assert_eq!(
        summary["filtered"],
        10,
        "{summary} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(summary["items"], 100);
}

#[test]
fn output_file_gets_every_item_once_embedded() {
    output_file_gets_every_item_once(Mode::Embedded);
}

#[test]
fn output_file_gets_every_item_once_shared() {
    output_file_gets_every_item_once(Mode::Shared);
}

fn output_file_gets_every_item_once(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "output_file_gets_every_item_once") else {
        return;
    };
    let site = Site::generate(500, 3);
    let server = TestServer::start(site.handler());
    let output = crawler.file("items.jsonl");
    crawler.crawl_ok(&[
        &server.url("/"),
        "--bloom-bits",
        "20",
        "--max-pages",
        "200",
        "--output",
        &output,
    ]);
    let lines = cli::parse_lines(&std::fs::read(&output).unwrap());
    assert_eq!(lines.len(), 200);
    crawler.crawl_ok(&["--output", &output]);
    let lines = cli::parse_lines(&std::fs::read(&output).unwrap());
    let paths: Vec<String> = lines.iter().map(item_path).collect();
    assert_each_once(&paths, &site.reachable());
}

/// A site whose every response waits a little, so crawls last long enough to be
/// interrupted.
fn slow_site(pages: usize, delay: Duration) -> (Site, TestServer) {
    let site = Site::generate(pages, 11);
    let inner = site.handler();
    let server = TestServer::start(handler(move |req| inner(req).delay(delay)));
    (site, server)
}

#[test]
fn kill_nine_thirty_times_then_exactly_the_site_embedded() {
    kill_nine_thirty_times_then_exactly_the_site(Mode::Embedded);
}

#[test]
fn kill_nine_thirty_times_then_exactly_the_site_shared() {
    kill_nine_thirty_times_then_exactly_the_site(Mode::Shared);
}

/// kill -9 thirty times at random moments, then one run to the end: every
/// page once in the items and in the `--output` file, and the refetches
/// bounded by invariant 3. `--lease-ttl 1s` lets a shared worker take back
/// the leases its killed predecessor held soon (the embedded state has none).
fn kill_nine_thirty_times_then_exactly_the_site(mode: Mode) {
    const KILLS: u64 = 30;
    const CONCURRENCY: u64 = 8;
    let Some(crawler) = Crawler::start(mode, "kill_nine_thirty_times_then_exactly_the_site") else {
        return;
    };
    let (site, server) = slow_site(2500, Duration::from_millis(8));
    let output = crawler.file("out.jsonl");
    let seed = server.url("/");
    let mut rng = crate::support::kill_seed("kill_nine_thirty_times_then_exactly_the_site");
    let args = [
        &seed,
        "--concurrency",
        "8",
        "--bloom-bits",
        "20",
        "--lease-ttl",
        "1s",
        "--output",
        &output,
    ];
    crawler.kill_nine_rounds(&args, KILLS, || server.requests(), &mut rng, 200);
    crawler.crawl_ok(&args);
    assert_each_once(&crawler.item_paths(), &site.reachable());
    let lines = cli::parse_lines(&std::fs::read(&output).unwrap());
    assert_each_once(
        &lines.iter().map(item_path).collect::<Vec<_>>(),
        &site.reachable(),
    );
    // Invariant 3: refetches are bounded by what was in flight or uncommitted at each kill.
    let pages = site.reachable().len() as u64;
    let fetches: u64 = site.reachable().iter().map(|p| server.hits(p)).sum();
    let bound = pages + KILLS * (CONCURRENCY + legcrawl::store::GROUP_MAX_PAGES as u64);
    assert!(
        fetches <= bound,
        "{fetches} fetches for {pages} pages exceeds {bound}"
    );
    eprintln!(
        "{fetches} fetches for {pages} pages ({} refetched)",
        fetches - pages
    );
}

fn interrupt_then_resume(sig: i32) {
    let (site, server) = slow_site(1500, Duration::from_millis(10));
    let data = tempfile::tempdir().unwrap();
    let seed = server.url("/");
    let child = legcrawl(
        data.path(),
        &[
            "crawl",
            &seed,
            "--concurrency",
            "8",
            "--per-host",
            "8",
            "--bloom-bits",
            "20",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until it has made progress, then look at it live.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests() < 100 {
        assert!(Instant::now() < deadline, "crawl made no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(1200));
    let live = dump_summary(data.path());
    assert!(
        live["live"]["pid"].as_u64() == Some(child.id() as u64),
        "live summary while running: {live}"
    );
    let sent = Instant::now();
    cli::signal(child.id(), sig);
    let out = cli::wait_output(child, Duration::from_secs(10));
    let took = sent.elapsed();
    assert_eq!(
        out.status.code(),
        Some(130),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(3), "exit took {took:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("resume with"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let resumed = run(legcrawl(data.path(), &["crawl"]), LIMIT);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    for path in site.reachable() {
        assert_eq!(
            server.hits(&path),
            1,
            "{path} fetched {} times across the interrupt",
            server.hits(&path)
        );
    }
    assert_each_once(&item_paths(data.path()), &site.reachable());
}

#[test]
fn sigint_exits_130_and_resume_fetches_nothing_twice() {
    interrupt_then_resume(libc::SIGINT);
}

#[test]
fn sigterm_is_a_graceful_stop_too() {
    interrupt_then_resume(libc::SIGTERM);
}

#[test]
fn sigint_reaches_a_crawl_started_in_the_background_by_a_script() {
    // Non-interactive shells start background jobs with SIGINT ignored; legcrawl
    // must still stop gracefully on `kill -INT`.
    let (_site, server) = slow_site(1500, Duration::from_millis(10));
    let data = tempfile::tempdir().unwrap();
    let pidfile = data.path().join("pid");
    let codefile = data.path().join("code");
    let script = format!(
        "\"{bin}\" crawl --data \"{d}\" {seed} --bloom-bits 20 --concurrency 4 --per-host 4 2>/dev/null & echo $! > \"{p}\"; wait $!; echo $? > \"{c}\"",
        bin = cli::bin(),
        d = data.path().join("state").display(),
        seed = server.url("/"),
        p = pidfile.display(),
        c = codefile.display()
    );
    let mut shell = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests() < 50 {
        assert!(
            Instant::now() < deadline,
            "background crawl made no progress"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    cli::signal(pid, libc::SIGINT);
    let status = cli::wait_status(&mut shell, Duration::from_secs(10));
    assert!(status.success());
    assert_eq!(std::fs::read_to_string(&codefile).unwrap().trim(), "130");
}

#[test]
fn bad_input_is_one_line_and_exit_two() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious.txt"), "keep me").unwrap();
    for args in [
        vec!["dump"],
        vec!["dump", "items"],
        vec!["crawl", "http://127.0.0.1:9/"],
    ] {
        let out = run(legcrawl(dir.path(), &args), LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("not a legcrawl state"), "{err}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing was created"
    );
    let missing = dir.path().join("none");
    let out = run(legcrawl(&missing, &["dump"]), LIMIT);
    assert_eq!(out.status.code(), Some(2));
    let state = dir.path().join("state");
    let out = crawl(&state, &["not a url"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = crawl(&state, &[]);
    assert_eq!(out.status.code(), Some(2), "no seeds anywhere");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no URLs to start one"));
    let out = crawl(&state, &["--dedup", "fuzzy"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Issue 14, item 14: without a terminal (a cron log), progress is a log line
/// at the default level every `LEGCRAWL_PROGRESS_EVERY` seconds (10 by default).
#[test]
fn without_a_terminal_progress_is_a_log_line_now_and_then() {
    let (_site, server) = slow_site(40, Duration::from_millis(60));
    let data = tempfile::tempdir().unwrap();
    let mut cmd = legcrawl(
        data.path(),
        &[
            "crawl",
            &server.url("/"),
            "--concurrency",
            "1",
            "--ignore-robots",
        ],
    );
    cmd.env("LEGCRAWL_PROGRESS_EVERY", "0.5")
        .env_remove("RUST_LOG");
    let out = run(cmd, Duration::from_secs(60));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let progress: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.contains("legcrawl::progress") && l.contains("pages (") && l.contains("queue")
        })
        .collect();
    assert!(!progress.is_empty(), "no progress line: {stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "no colours in a log file: {stderr}"
    );
}

/// Issue 12: `dump summary` shows the state's size on disk and the memory the
/// last run used.
#[test]
fn dump_summary_shows_size_on_disk_and_the_last_runs_memory() {
    let (_site, server) = slow_site(5, Duration::ZERO);
    let data = tempfile::tempdir().unwrap();
    let out = crawl(data.path(), &[&server.url("/"), "--bloom-bits", "20"]);
    assert!(out.status.success());
    let summary = dump_summary(data.path());
    let bloom = std::fs::metadata(data.path().join("bloom.bin"))
        .unwrap()
        .len();
    let disk = summary["disk_bytes"].as_u64().unwrap();
    assert!(disk >= bloom, "{summary}");
    let peak = summary["last_run_peak_rss_kib"].as_u64().unwrap();
    assert!(peak > 1024, "a run takes more than a MiB: {summary}");
    let text = run(legcrawl(data.path(), &["dump", "summary"]), LIMIT);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("size on disk") && text.contains("last run's peak memory"),
        "{text}"
    );
}
