//! A log reader that goes away (`legcrawl -vv crawl ... 2>&1 | head -5`): the
//! real binary with its stderr (and stdout) pipes closed, at once or after a few
//! lines. Logging must never panic, the crawl must end, Ctrl-C must still stop it.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::cli::{self, dump_items, item_path, legcrawl};
use crate::support::{Site, TestServer, handler};

/// Longest any child here may run.
const LIMIT: Duration = Duration::from_secs(60);

/// `legcrawl -vv <args>` logging at debug level (the `RUST_LOG` the helper sets
/// is removed), stdout discarded, stderr piped.
fn verbose(data: &Path, args: &[&str]) -> Command {
    let mut cmd = legcrawl(data, args);
    cmd.arg("-vv").env_remove("RUST_LOG");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Spawns `cmd` and closes its stderr after reading `lines` lines (at once for
/// 0). The reader thread ends when it has read them or the child is gone.
fn spawn_then_close_stderr(mut cmd: Command, lines: usize) -> (Child, JoinHandle<usize>) {
    let mut child = cmd.spawn().expect("spawn legcrawl");
    let stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut read = 0;
        let mut stderr = BufReader::new(stderr);
        let mut line = String::new();
        while read < lines {
            line.clear();
            match stderr.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => read += 1,
            }
        }
        read
        // `stderr` drops here: the read end is closed.
    });
    (child, reader)
}

fn assert_holds_the_site(data: &Path, site: &Site) {
    let items = dump_items(data);
    let paths: Vec<String> = items.iter().map(item_path).collect();
    let unique: BTreeSet<String> = paths.iter().cloned().collect();
    assert_eq!(unique.len(), paths.len(), "an item was stored twice");
    assert_eq!(unique, site.reachable());
}

fn crawl_with_stderr_closed_after(lines: usize) {
    let site = Site::generate(300, 5);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().expect("temp dir");
    let seed = server.url("/");
    let cmd = verbose(data.path(), &["crawl", &seed, "--bloom-bits", "20"]);
    let started = Instant::now();
    let (mut child, reader) = spawn_then_close_stderr(cmd, lines);
    let status = cli::wait_status(&mut child, LIMIT);
    let read = reader.join().expect("the reader thread");
    assert!(
        status.success(),
        "crawl with stderr closed after {read} lines: {status} after {:?}",
        started.elapsed()
    );
    assert_eq!(read, lines, "the crawl logged fewer lines than expected");
    assert_holds_the_site(data.path(), &site);
}

#[test]
fn a_crawl_whose_stderr_is_closed_at_once_still_ends() {
    crawl_with_stderr_closed_after(0);
}

#[test]
fn a_crawl_whose_log_reader_goes_away_still_ends() {
    crawl_with_stderr_closed_after(5);
}

#[test]
fn sigint_stops_a_crawl_whose_stderr_is_closed() {
    let site = Site::generate(1500, 11);
    let inner = site.handler();
    let server = TestServer::start(handler(move |req| {
        inner(req).delay(Duration::from_millis(10))
    }));
    let data = tempfile::tempdir().expect("temp dir");
    let seed = server.url("/");
    let cmd = verbose(
        data.path(),
        &["crawl", &seed, "--bloom-bits", "20", "--concurrency", "4"],
    );
    let (mut child, reader) = spawn_then_close_stderr(cmd, 3);
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests() < 50 {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the crawl made no progress");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(reader.join().expect("the reader thread"), 3);
    let sent = Instant::now();
    cli::signal(child.id(), libc::SIGINT);
    let status = cli::wait_status(&mut child, Duration::from_secs(15));
    assert_eq!(status.code(), Some(130), "{status}");
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(5), "SIGINT took {took:?}");
    assert!(
        (server.requests() as usize) < site.reachable().len(),
        "the crawl finished before the signal: nothing was tested"
    );
}

#[test]
fn dump_with_stdout_and_stderr_closed_exits_zero() {
    let site = Site::generate(200, 9);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().expect("temp dir");
    let out = cli::run(
        legcrawl(
            data.path(),
            &["crawl", &server.url("/"), "--bloom-bits", "20"],
        ),
        LIMIT,
    );
    assert!(out.status.success());
    let mut cmd = verbose(data.path(), &["dump", "items"]);
    cmd.stdout(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn legcrawl dump");
    drop(child.stdout.take());
    drop(child.stderr.take());
    let status = cli::wait_status(&mut child, LIMIT);
    assert!(status.success(), "dump items with closed pipes: {status}");
}
