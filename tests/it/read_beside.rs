//! Every `dump` view beside a running crawl (embedded state): the crawl
//! answers through the socket in its state directory, with what is durable.
//! A stale socket after `kill -9` is no answer: the idle state reads as
//! before, and the next crawl listens again.

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::{self, legcrawl, parse_lines, run, wait_output};
use crate::support::{Site, TestServer, handler};

/// The longest one dump may take here.
const DUMP_LIMIT: Duration = Duration::from_secs(60);

/// A site slow enough that a crawl of it surely runs for several seconds
/// (1,500 pages, 20 ms each, 4 at a time: about 8 s).
fn slow_site() -> (Site, TestServer) {
    let site = Site::generate(1500, 41);
    let inner = site.handler();
    let server = TestServer::start(handler(move |req| {
        inner(req).delay(Duration::from_millis(20))
    }));
    (site, server)
}

/// Starts a crawl of `server` on `data` in the background.
fn start_crawl(data: &Path, seed: Option<&str>) -> Child {
    let mut args = vec!["crawl"];
    args.extend(seed);
    args.extend(["--concurrency", "4", "--per-host", "4"]);
    legcrawl(data, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the crawl")
}

/// Waits until the crawl made `pages` requests more than `before` and its
/// first durable items are in (at most 30 s).
fn wait_for_progress(server: &TestServer, before: u64, pages: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests() < before + pages {
        assert!(Instant::now() < deadline, "the crawl made no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    // A group is durable within 20 ms of its first completion.
    std::thread::sleep(Duration::from_millis(200));
}

/// `legcrawl dump ARGS --data DATA`, which must exit 0.
fn dump(data: &Path, args: &[&str]) -> Output {
    let out = run(legcrawl(data, &[&["dump"], args].concat()), DUMP_LIMIT);
    assert!(
        out.status.success(),
        "dump {args:?}: {:?}: {}",
        out.status.code(),
        cli::stderr(&out)
    );
    out
}

/// The crawl is still running (it was, all along what is checked between two
/// calls).
fn assert_running(crawl: &mut Child, when: &str) {
    assert!(
        crawl.try_wait().expect("poll the crawl").is_none(),
        "the crawl ended {when}; the site is too fast for this test"
    );
}

/// The lines of `out`'s stdout.
fn lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `dump items` lines: each a JSON object with a URL, none twice.
fn check_items(what: &str, items: &[String]) {
    let mut urls = std::collections::HashSet::new();
    for line in items {
        let item: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{what}: not a JSON line ({e}): {line}"));
        let url = item["url"].as_str().expect("an item has a url").to_owned();
        assert!(urls.insert(url), "{what}: an item twice: {line}");
    }
}

/// `prefix` is where `all` starts.
fn assert_prefix(what: &str, prefix: &[String], all: &[String]) {
    assert!(
        prefix.len() <= all.len() && prefix == &all[..prefix.len()],
        "{what}: {} items beside the crawl are not the first of the {} it stored",
        prefix.len(),
        all.len()
    );
}

#[test]
fn every_dump_view_reads_beside_a_running_crawl() {
    let (_site, server) = slow_site();
    let data = tempfile::tempdir().expect("temp dir");
    let seed = server.url("/");
    let mut crawl = start_crawl(data.path(), Some(&seed));
    wait_for_progress(&server, 0, 100);
    assert_running(&mut crawl, "before the dumps");
    assert!(data.path().join("read.sock").exists(), "no socket");

    let first = lines(&dump(data.path(), &["items"]));
    assert!(
        first.len() >= 20,
        "only {} items beside the crawl",
        first.len()
    );
    check_items("dump items", &first);

    let csv = dump(data.path(), &["items", "--format", "csv"]);
    let mut reader = csv::Reader::from_reader(csv.stdout.as_slice());
    let header = reader.headers().expect("a header row").clone();
    assert_eq!(
        &header.iter().take(4).collect::<Vec<_>>(),
        &["url", "status", "title", "fetched_at"]
    );
    let rows: Vec<csv::StringRecord> = reader
        .records()
        .collect::<Result<_, _>>()
        .expect("CSV rows");
    assert!(
        rows.len() >= first.len(),
        "{} CSV rows, {} items before",
        rows.len(),
        first.len()
    );
    assert!(
        rows.iter().all(|row| row[1] == *"200"),
        "every page answered 200"
    );

    let runs = parse_lines(&dump(data.path(), &["runs", "--json"]).stdout);
    let last = runs.last().expect("a run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(last["outcome"], "running", "{last}");
    assert_eq!(last["pid"].as_u64(), Some(u64::from(crawl.id())), "{last}");

    let pages = lines(&dump(data.path(), &["pages"]));
    assert!(pages[0].starts_with("status"), "{:?}", pages.first());
    assert!(
        pages.len() > first.len(),
        "{} page rows, {} items before",
        pages.len() - 1,
        first.len()
    );
    let pages_json = parse_lines(&dump(data.path(), &["pages", "--json"]).stdout);
    assert!(
        pages_json.iter().all(|p| p["status"] == 200),
        "{:?}",
        pages_json.first()
    );

    let frontier = parse_lines(&dump(data.path(), &["frontier", "--json", "--limit", "5"]).stdout);
    assert_eq!(frontier.len(), 5, "{frontier:?}");
    assert!(frontier.iter().all(|e| {
        e["request"]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with(&seed))
    }));

    let summary: serde_json::Value =
        serde_json::from_slice(&dump(data.path(), &["summary", "--json"]).stdout).expect("JSON");
    assert_eq!(
        summary["live"]["pid"].as_u64(),
        Some(u64::from(crawl.id())),
        "{summary}"
    );

    let seen: serde_json::Value =
        serde_json::from_slice(&dump(data.path(), &["seen", &seed, "--json"]).stdout)
            .expect("JSON");
    assert_eq!(seen["exact"], true, "{seen}");
    let job = String::from_utf8_lossy(&dump(data.path(), &["job"]).stdout).into_owned();
    assert!(job.contains(&seed), "{job}");
    dump(data.path(), &["blocked"]);
    let run_items = lines(&dump(data.path(), &["items", "--run", "last"]));
    check_items("dump items --run last", &run_items);

    // A dump that goes away mid-stream (it read one frame) disturbs nothing.
    let mut gone = legcrawl(data.path(), &["dump", "items"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start a dump");
    let mut one = [0u8; 1];
    std::io::Read::read_exact(gone.stdout.as_mut().expect("stdout"), &mut one).expect("a byte");
    gone.kill().expect("kill the dump");
    let _ = gone.wait();
    // A view asked for wrongly is the same error as on an idle state.
    let wrong = run(
        legcrawl(data.path(), &["dump", "items", "--run", "99"]),
        DUMP_LIMIT,
    );
    assert_eq!(wrong.status.code(), Some(2), "{}", cli::stderr(&wrong));
    assert!(
        cli::stderr(&wrong).contains("no run 99"),
        "{}",
        cli::stderr(&wrong)
    );

    let second = lines(&dump(data.path(), &["items"]));
    check_items("dump items, again", &second);
    assert_prefix("the first dump in the second", &first, &second);
    assert!(
        second.len() > first.len(),
        "the crawl stored nothing meanwhile"
    );
    assert_running(&mut crawl, "during the dumps");

    cli::signal(crawl.id(), libc::SIGINT);
    let out = wait_output(crawl, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(130), "{}", cli::stderr(&out));
    assert!(
        !data.path().join("read.sock").exists(),
        "the socket was left"
    );
    let stored = lines(&dump(data.path(), &["items"]));
    assert_prefix("dump items beside the crawl", &second, &stored);
    assert_prefix("dump items --run last", &run_items, &stored);
    let runs = parse_lines(&dump(data.path(), &["runs", "--json"]).stdout);
    assert_eq!(runs[0]["outcome"], "interrupted", "{runs:?}");
}

#[test]
fn a_stale_socket_after_kill_nine_reads_the_idle_state_and_the_next_crawl_listens() {
    let (site, server) = slow_site();
    let data = tempfile::tempdir().expect("temp dir");
    let seed = server.url("/");
    let mut crawl = start_crawl(data.path(), Some(&seed));
    wait_for_progress(&server, 0, 100);
    assert_running(&mut crawl, "before the kill");
    let socket = data.path().join("read.sock");
    crawl.kill().expect("kill -9");
    let _ = crawl.wait();
    assert!(socket.exists(), "kill -9 leaves the socket file");

    // The idle state reads as before, at once.
    let started = Instant::now();
    let idle = lines(&dump(data.path(), &["items"]));
    check_items("dump items after kill -9", &idle);
    assert!(!idle.is_empty());
    let runs = parse_lines(&dump(data.path(), &["runs", "--json"]).stdout);
    assert_eq!(runs[0]["outcome"], "killed", "{runs:?}");
    dump(data.path(), &["frontier"]);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );

    // The next crawl listens again, and dumps read through it.
    let before = server.requests();
    let mut resumed = start_crawl(data.path(), None);
    wait_for_progress(&server, before, 50);
    assert_running(&mut resumed, "before the dump");
    let beside = lines(&dump(data.path(), &["items"]));
    check_items("dump items beside the resumed crawl", &beside);
    assert_prefix("the idle items in those beside", &idle, &beside);
    let runs = parse_lines(&dump(data.path(), &["runs", "--json"]).stdout);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[1]["outcome"], "running", "{runs:?}");
    let out = wait_output(resumed, Duration::from_secs(90));
    assert_eq!(out.status.code(), Some(0), "{}", cli::stderr(&out));
    assert!(!socket.exists(), "the socket was left");
    let stored = lines(&dump(data.path(), &["items"]));
    assert_prefix("dump items beside the resumed crawl", &beside, &stored);
    check_items("the finished crawl's items", &stored);
    assert_eq!(
        stored.len(),
        site.reachable().len(),
        "every page's item once"
    );
}

#[test]
fn a_dump_beside_a_held_state_without_a_crawl_says_busy_at_once() {
    let (_site, server) = slow_site();
    let data = tempfile::tempdir().expect("temp dir");
    cli::crawl_ok(data.path(), &[&server.url("/"), "--max-pages", "5"]);
    // A socket file nobody listens on, and the state held by something that
    // answers no dump (here this test, by the directory's lock).
    let socket = data.path().join("read.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("bind"));
    assert!(socket.exists());
    let held = std::fs::File::open(data.path()).expect("open the directory");
    held.try_lock().expect("take the state's lock");
    let started = Instant::now();
    let busy = run(legcrawl(data.path(), &["dump", "runs"]), DUMP_LIMIT);
    drop(held);
    assert_eq!(busy.status.code(), Some(2), "{}", cli::stderr(&busy));
    assert!(
        cli::stderr(&busy).contains("busy"),
        "{}",
        cli::stderr(&busy)
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
