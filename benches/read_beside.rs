//! What `dump` beside a running crawl costs the crawl, in pages/s: the real
//! `legcrawl crawl` (the release binary cargo builds for benches) of the
//! crawl bench's site, alone and with `dump` views asked in a loop beside it
//! through the crawl's socket, in alternating pairs.
//!
//! Each iteration crawls the whole site (`PAGES + 1` URLs) into a fresh
//! temporary state directory (`--concurrency 16 --per-host 16 --bloom-bits
//! 24`) and times the crawl process from its start to its exit. In the
//! `+dump` iteration a thread runs, from when the socket appears until the
//! crawl ends, one view after another (`dump items`, `dump items --format
//! csv`, `dump runs`, `dump pages --limit 100`, `dump frontier`, each output
//! to /dev/null; `READ_BESIDE_VIEWS` names others), each one's exit
//! checked, with `READ_BESIDE_PAUSE_MS` between two (default 0: a tight
//! loop). The order of the pair alternates
//! every round; one warm-up pair is discarded. Printed: the median pages/s
//! of each variant, the median of the pairs' ratios, and the dumps made.
//!
//! Run: `cargo bench --bench read_beside` (about a minute). Environment:
//! `READ_BESIDE_PAGES` (default 20000), `READ_BESIDE_ITERS` (default 7),
//! `READ_BESIDE_PAUSE_MS` (default 0), `READ_BESIDE_VIEWS`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};

#[path = "support/median.rs"]
mod median;
#[path = "support/site.rs"]
mod site;

use median::median;

/// Pages on the site, besides the index.
const PAGES: usize = 20_000;
/// Measured pairs.
const ITERS: usize = 7;
/// The views asked in turn beside the crawl, unless `READ_BESIDE_VIEWS`
/// names others (views separated by `;`, e.g. `items;runs`; `-` alone runs
/// `legcrawl --version` instead of a dump: the cost of starting the process).
const VIEWS: &str = "items;items --format csv;runs;pages --limit 100;frontier";

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_legcrawl")
}

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(value) => value.parse().with_context(|| format!("{name}={value:?}")),
        Err(_) => Ok(default),
    }
}

/// One crawl: its pages/s, and the dumps answered beside it (and their bytes).
struct Sample {
    rate: f64,
    dumps: u64,
    dump_bytes: u64,
}

/// Crawls the site into a fresh state, with dumps beside it when `dumps`.
fn crawl(
    server: &site::Server,
    pages: usize,
    dumps: bool,
    pause: Duration,
) -> anyhow::Result<Sample> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("state");
    let before = server.totals().0;
    let started = Instant::now();
    let mut child = Command::new(bin())
        .args(["crawl", &server.url("/"), "--data"])
        .arg(&data)
        .args([
            "--concurrency",
            "16",
            "--per-host",
            "16",
            "--bloom-bits",
            "24",
        ])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let done = Arc::new(AtomicBool::new(false));
    let reader = dumps.then(|| {
        let (done, data) = (Arc::clone(&done), data.clone());
        std::thread::spawn(move || dump_loop(&data, &done, pause))
    });
    let status = child.wait()?;
    let wall = started.elapsed();
    done.store(true, Ordering::SeqCst);
    let (dumps, dump_bytes) = match reader {
        Some(reader) => reader
            .join()
            .map_err(|_| anyhow::anyhow!("the dump loop panicked"))??,
        None => (0, 0),
    };
    ensure!(status.success(), "the crawl exited {status}");
    let served = server.totals().0 - before;
    // The site's pages, its index and /robots.txt, each once.
    ensure!(
        served == pages as u64 + 2,
        "{served} requests for {} URLs",
        pages + 1
    );
    Ok(Sample {
        rate: (pages + 1) as f64 / wall.as_secs_f64(),
        dumps,
        dump_bytes,
    })
}

/// Asks the views in turn until `done`; returns the dumps answered and
/// their bytes. A dump that fails is an error, unless the crawl's end cut it
/// short or left the state busy for a moment.
fn dump_loop(data: &Path, done: &AtomicBool, pause: Duration) -> anyhow::Result<(u64, u64)> {
    let socket = data.join("read.sock");
    while !socket.exists() {
        if done.load(Ordering::SeqCst) {
            return Ok((0, 0));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let views = std::env::var("READ_BESIDE_VIEWS").unwrap_or_else(|_| VIEWS.to_owned());
    let views: Vec<Vec<&str>> = views
        .split(';')
        .map(|view| view.split_whitespace().collect())
        .collect();
    let (mut dumps, mut bytes) = (0, 0);
    for view in views.iter().cycle() {
        if done.load(Ordering::SeqCst) {
            break;
        }
        let mut command = Command::new(bin());
        match view.as_slice() {
            ["-"] => command.arg("--version"),
            view => command.arg("dump").args(view).arg("--data").arg(data),
        };
        let out = command
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .output()?;
        let said = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            dumps += 1;
            bytes += out.stdout.len() as u64;
        } else if !said.contains("closed the state during this dump") && !said.contains("busy") {
            // Not the race with the crawl's end (which cuts a dump short,
            // or leaves the state busy for a moment): a real failure.
            anyhow::bail!(
                "dump {view:?} beside the crawl exited {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(pause);
    }
    Ok((dumps, bytes))
}

fn main() -> anyhow::Result<()> {
    let pages = env_usize("READ_BESIDE_PAGES", PAGES)?.max(2);
    let iters = env_usize("READ_BESIDE_ITERS", ITERS)?.max(1);
    let pause = Duration::from_millis(env_usize("READ_BESIDE_PAUSE_MS", 0)? as u64);
    let server = site::Server::start(pages)?;
    println!(
        "read_beside: {} URLs, {iters} pairs after one warm-up pair, pause {} ms between dumps, load average {}",
        pages + 1,
        pause.as_millis(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let (mut alone, mut beside, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut dumps, mut dump_bytes) = (Vec::new(), 0u64);
    for round in 0..=iters {
        // Alternate which goes first, so drift hits both alike.
        let (a, b) = if round % 2 == 0 {
            let a = crawl(&server, pages, false, pause)?;
            (a, crawl(&server, pages, true, pause)?)
        } else {
            let b = crawl(&server, pages, true, pause)?;
            (crawl(&server, pages, false, pause)?, b)
        };
        println!(
            "round {round}{}: alone {:.0} pages/s, with dumps {:.0} pages/s ({} dumps, {:.1} MB)",
            if round == 0 { " (warm-up)" } else { "" },
            a.rate,
            b.rate,
            b.dumps,
            b.dump_bytes as f64 / 1e6
        );
        if round > 0 {
            ensure!(b.dumps > 0, "no dump was answered beside the crawl");
            ratios.push(b.rate / a.rate);
            alone.push(a.rate);
            beside.push(b.rate);
            dumps.push(b.dumps as f64);
            dump_bytes += b.dump_bytes;
        }
    }
    let ratio = median(&ratios);
    println!(
        "\nalone: median {:.0} pages/s; with dumps beside: median {:.0} pages/s ({:.0} dumps a crawl, {:.1} MB in all)",
        median(&alone),
        median(&beside),
        median(&dumps),
        dump_bytes as f64 / 1e6
    );
    println!(
        "median pair ratio (with dumps / alone) = {ratio:.3} over {} pairs (min {:.3}, max {:.3}): \
         the dumps cost {:.1} % of pages/s (target <= 2 %: {})",
        ratios.len(),
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
        (1.0 - ratio) * 100.0,
        if ratio >= 0.98 { "met" } else { "NOT met" }
    );
    Ok(())
}
