//! Memory and state size of a large frontier: 10,000,000 queued requests, then
//! 1,000,000 pages crawled (issue 12, "bounded memory").
//!
//! An in-process hyper server on 127.0.0.1 serves ten *dense* pages `/d/{k}`,
//! each with [`DENSE_LINKS`] links to pages `/p/{n}` it really serves (page `n`
//! is about 1 KB: a title, filler text and four links to other `/p/` pages, all
//! already queued, so each fetch also asks the seen set about four duplicates).
//! The crawler is the real binary (`legcrawl crawl`), run as a child process, so
//! that the server's memory is not counted:
//! 1. `crawl /d/0 ... /d/9 --concurrency 1 --max-pages 10`: the dense pages one
//!    at a time (each holds its body and its links while it is processed; one
//!    in flight at a time is what bounds that), queuing 10,000,000 requests;
//! 2. `crawl --max-pages 1000000 --concurrency 16 --per-host 16`: resumes and
//!    fetches 1,000,000 of them.
//!
//! Between the two, a `crawl --concurrency 16 --per-host 16` is killed with
//! SIGKILL once it has completed a tenth of phase 2's pages, and the first
//! `State::open` after the kill is timed (sled recovers the killed run's log in
//! place, with no copy of `db/`), then a second one; phase 2 resumes that state.
//!
//! While each runs it samples the child's `RssAnon` (anonymous memory: the
//! mapped Bloom file is not counted) every 20 ms from /proc/PID/status, and the
//! run's progress (`status.json`, written once a second). It reports, per phase,
//! the peak `RssAnon` sample and the run's `VmHWM` (as `dump summary` records
//! it; it includes the touched pages of the mapped Bloom file); the size on disk
//! of `db/` with `runs/` (the state's records) and `bloom.bin` after each phase, per queued request and per fetched
//! page; the time `State::open` takes on the finished state (three opens) and
//! `legcrawl dump summary`'s wall time; and pages/s over the first and the last
//! tenth of phase 2 (interpolated between progress samples).
//!
//! Run: `cargo bench --bench frontier_memory` (full size: about four minutes on
//! a 2-core machine, 2026-12-04, and ~3 GB of temp space). `FRONTIER_BENCH_SCALE=0.05` scales links and
//! pages down for a quick try; `FRONTIER_BENCH_KEEP=1` keeps the state directory;
//! `FRONTIER_BENCH_PAGES` sets phase 2's pages (say 2000000, to follow memory
//! further; at most the requests queued);
//! `FRONTIER_BENCH_ARGS` adds flags to both crawls (say `--cache-size 16MiB`);
//! `FRONTIER_BENCH_WRAP` runs each crawl under a profiler (say `heaptrack -o
//! /tmp/hp`; the memory figures are then the profiler's, not the crawl's).
//! Nothing touches the internet.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use legcrawl::store::{OpenOptions, State};
use tokio::sync::oneshot;

#[path = "support/status.rs"]
mod status;

/// Dense pages.
const DENSE_PAGES: u64 = 10;
/// Links on each dense page at full size.
const DENSE_LINKS: u64 = 1_000_000;
/// Pages fetched in phase 2 at full size.
const CRAWL_PAGES: u64 = 1_000_000;
/// How often the child's memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// Filler text of a small page.
const FILLER: &str = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod \
    tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud \
    exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. ";

/// What the server serves: `links` links per dense page, `links * 10` small pages.
#[derive(Clone, Copy)]
struct Site {
    links: u64,
}

impl Site {
    fn pages(self) -> u64 {
        self.links * DENSE_PAGES
    }

    fn body(self, path: &str) -> Option<String> {
        if let Some(k) = path.strip_prefix("/d/").and_then(|k| k.parse::<u64>().ok()) {
            return (k < DENSE_PAGES).then(|| self.dense(k));
        }
        let n = path.strip_prefix("/p/")?.parse::<u64>().ok()?;
        (n < self.pages()).then(|| self.small(n))
    }

    fn dense(self, k: u64) -> String {
        let mut html = String::with_capacity(24 * self.links as usize + 200);
        let _ = write!(
            html,
            "<!DOCTYPE html>\n<html><head><title>Dense {k}</title></head><body>\n"
        );
        for n in k * self.links..(k + 1) * self.links {
            let _ = writeln!(html, "<a href=\"/p/{n}\">.</a>");
        }
        html.push_str("</body></html>\n");
        html
    }

    fn small(self, n: u64) -> String {
        let mut html = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>Page {n} of the frontier bench</title></head><body><h1>Page {n}</h1>\n"
        );
        for j in 1..=4u64 {
            let target = (n.wrapping_mul(7919) + j * 104_729) % self.pages();
            let _ = writeln!(
                html,
                "<p><a href=\"/p/{target}\">Page {target}</a> {FILLER}</p>"
            );
        }
        html.push_str("</body></html>\n");
        html
    }
}

/// The bench server: one thread, one current-thread runtime; stops when dropped.
struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(site: Site) -> anyhow::Result<Server> {
        let listener = StdListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("server runtime")?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("bench-server".into())
            .spawn(move || runtime.block_on(accept_loop(listener, site, stopped)))?;
        Ok(Server {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(listener: StdListener, site: Site, mut stop: oneshot::Receiver<()>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(move |request| std::future::ready(answer(site, &request)));
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(
    site: Site,
    request: &http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, Infallible> {
    let mut response = http::Response::new(Full::new(Bytes::new()));
    match site.body(request.uri().path()) {
        Some(body) => {
            *response.body_mut() = Full::new(Bytes::from(body));
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/html; charset=utf-8"),
            );
        }
        None => *response.status_mut() = http::StatusCode::NOT_FOUND,
    }
    Ok(response)
}

/// Pages this run completed, from the live status file.
fn run_pages(data: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(data.join("status.json")).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value.get("run_pages")?.as_u64()
}

/// What one phase saw.
struct Phase {
    wall: Duration,
    peak_anon_kib: u64,
    /// `(seconds since start, pages completed, RssAnon KiB then)`, as the
    /// status file said.
    progress: Vec<(f64, u64, u64)>,
}

/// Runs the child to its end, sampling its memory and progress.
fn watch(mut child: Child, data: &Path) -> anyhow::Result<Phase> {
    let pid = child.id().to_string();
    let started = Instant::now();
    let mut peak_anon_kib = 0;
    let mut anon_kib = 0;
    let mut progress = vec![(0.0, 0, 0)];
    let mut last_probe = Instant::now();
    loop {
        if let Ok(kib) = status::status_kib(&pid, "RssAnon:") {
            peak_anon_kib = peak_anon_kib.max(kib);
            anon_kib = kib;
        }
        if last_probe.elapsed() >= Duration::from_millis(100) {
            last_probe = Instant::now();
            if let Some(pages) = run_pages(data)
                && progress.last().is_none_or(|&(_, p, _)| p != pages)
            {
                progress.push((started.elapsed().as_secs_f64(), pages, anon_kib));
            }
        }
        if let Some(status) = child.try_wait()? {
            ensure!(status.success(), "legcrawl crawl ended {status}");
            break;
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    Ok(Phase {
        wall: started.elapsed(),
        peak_anon_kib,
        progress,
    })
}

/// Seconds at which `pages` were completed, interpolated between samples.
fn time_at(progress: &[(f64, u64, u64)], pages: u64) -> Option<f64> {
    let after = progress.iter().position(|&(_, p, _)| p >= pages)?;
    if after == 0 {
        return Some(progress[0].0);
    }
    let (t0, p0, _) = progress[after - 1];
    let (t1, p1, _) = progress[after];
    Some(t0 + (t1 - t0) * (pages - p0) as f64 / (p1 - p0).max(1) as f64)
}

/// Bytes of the files under `path` (their lengths).
fn size_of(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| size_of(&e.path())).sum())
        .unwrap_or(0)
}

fn legcrawl(data: &Path, log: &Path) -> anyhow::Result<Command> {
    let wrap = std::env::var("FRONTIER_BENCH_WRAP").unwrap_or_default();
    let mut wrap = wrap.split_whitespace();
    let mut command = match wrap.next() {
        Some(profiler) => {
            let mut command = Command::new(profiler);
            command.args(wrap).arg(env!("CARGO_BIN_EXE_legcrawl"));
            command
        }
        None => Command::new(env!("CARGO_BIN_EXE_legcrawl")),
    };
    let extra = std::env::var("FRONTIER_BENCH_ARGS").unwrap_or_default();
    command
        .arg("crawl")
        .arg("--data")
        .arg(data)
        .args(["--ignore-robots", "--max-body", "67108864"])
        .args(extra.split_whitespace())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?);
    Ok(command)
}

/// `dump summary --json` of the state, and how long the command took.
fn summary(data: &Path) -> anyhow::Result<(serde_json::Value, Duration)> {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_legcrawl"))
        .args(["dump", "summary", "--json", "--data"])
        .arg(data)
        .output()?;
    let took = started.elapsed();
    ensure!(
        output.status.success(),
        "dump summary: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((serde_json::from_slice(&output.stdout)?, took))
}

fn field(summary: &serde_json::Value, name: &str) -> u64 {
    summary.get(name).and_then(|v| v.as_u64()).unwrap_or(0)
}

/// Seconds each of `n` opens of the state in `data` took (each closed before the next).
fn time_opens(data: &Path, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut opens = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let state = State::open(data, &OpenOptions::default())?;
        opens.push(started.elapsed().as_secs_f64());
        drop(state);
    }
    Ok(opens)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn scale() -> anyhow::Result<f64> {
    let scale = match std::env::var("FRONTIER_BENCH_SCALE") {
        Ok(value) => value
            .parse::<f64>()
            .with_context(|| format!("FRONTIER_BENCH_SCALE={value:?}"))?,
        Err(_) => 1.0,
    };
    ensure!(
        scale > 0.0 && scale <= 1.0,
        "FRONTIER_BENCH_SCALE must be in (0, 1]"
    );
    Ok(scale)
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing else is read from the arguments.
    let scale = scale()?;
    let links = ((DENSE_LINKS as f64 * scale) as u64).max(10);
    let crawl = match std::env::var("FRONTIER_BENCH_PAGES") {
        Ok(value) => {
            let pages: u64 = value
                .parse()
                .with_context(|| format!("FRONTIER_BENCH_PAGES={value:?}"))?;
            ensure!(
                (10..=DENSE_PAGES * links).contains(&pages),
                "FRONTIER_BENCH_PAGES must be in 10..={}",
                DENSE_PAGES * links
            );
            pages
        }
        Err(_) => ((CRAWL_PAGES as f64 * scale) as u64).max(10),
    };
    let site = Site { links };
    let server = Server::start(site)?;
    let dir = tempfile::Builder::new()
        .prefix("legcrawl-frontier-memory-")
        .tempdir()?;
    let data = dir.path().join("state");
    println!(
        "frontier_memory: {DENSE_PAGES} dense pages x {links} links, then {crawl} pages; \
         server {}, state {}, load average {}",
        server.addr,
        data.display(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );

    // Phase 1: the dense pages, one at a time.
    let mut command = legcrawl(&data, &dir.path().join("phase1.log"))?;
    for k in 0..DENSE_PAGES {
        command.arg(server.url(&format!("/d/{k}")));
    }
    command.args([
        "--concurrency",
        "1",
        "--max-pages",
        &DENSE_PAGES.to_string(),
    ]);
    let one = watch(command.spawn()?, &data)?;
    let (after_dense, _) = summary(&data)?;
    let queued = field(&after_dense, "frontier");
    let runs_one = size_of(&data.join("runs"));
    let db_one = size_of(&data.join("db")) + runs_one;
    let bloom = size_of(&data.join("bloom.bin"));
    ensure!(
        queued >= DENSE_PAGES * links,
        "phase 1 queued {queued}, expected {}",
        DENSE_PAGES * links
    );

    // A run killed with SIGKILL after a tenth of phase 2's pages, then the
    // first open after it (sled recovers the run's log; no copy of `db/`),
    // timed in this process, and a second open (clean). Phase 2 resumes it.
    let kill_at = (crawl / 10).max(1);
    let mut command = legcrawl(&data, &dir.path().join("killed.log"))?;
    command.args(["--concurrency", "16", "--per-host", "16"]);
    let mut child = command.spawn()?;
    let killed_started = Instant::now();
    loop {
        if run_pages(&data).is_some_and(|pages| pages >= kill_at) {
            break;
        }
        if let Some(status) = child.try_wait()? {
            bail!("the crawl to be killed ended by itself ({status})");
        }
        ensure!(
            killed_started.elapsed() < Duration::from_secs(3600),
            "the crawl to be killed did not reach {kill_at} pages in an hour"
        );
        std::thread::sleep(SAMPLE_EVERY);
    }
    child.kill()?;
    child.wait()?;
    // For comparison, a copy of the killed state whose open mark is taken
    // away, so that its open takes the path every open after a crash took
    // before the mark: a trial open of a copy of `db/`, read whole. (`durable`
    // holds its two record slots in its first 128 bytes, then the mark.)
    let unmarked = dir.path().join("unmarked");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&data)
        .arg(&unmarked)
        .status()?;
    ensure!(copied.success(), "cp -a of the killed state: {copied}");
    std::fs::OpenOptions::new()
        .write(true)
        .open(unmarked.join("durable"))?
        .set_len(128)?;
    let opens_after_kill = time_opens(&data, 2)?;
    let trial_open = time_opens(&unmarked, 1)?[0];
    std::fs::remove_dir_all(&unmarked)?;
    let (after_one, _) = summary(&data)?;
    let killed_pages = field(&after_one, "pages");
    let queued_at_kill = field(&after_one, "frontier");

    // Phase 2: resume and crawl.
    let mut command = legcrawl(&data, &dir.path().join("phase2.log"))?;
    command.args([
        "--concurrency",
        "16",
        "--per-host",
        "16",
        "--max-pages",
        &crawl.to_string(),
    ]);
    let two = watch(command.spawn()?, &data)?;
    let runs_two = size_of(&data.join("runs"));
    let db_two = size_of(&data.join("db")) + runs_two;

    // Opening the finished state: first in this process (the first open after
    // the crawl, then two more), then `dump summary` as a user would.
    let opens = time_opens(&data, 3)?;
    let (after_two, dump_took) = summary(&data)?;
    let pages = field(&after_two, "pages") - field(&after_one, "pages");
    ensure!(
        pages == crawl,
        "phase 2 completed {pages} pages, expected {crawl}"
    );

    // The status file is written once a second and removed at the end: the
    // windows are the first tenth after the first sample and the last tenth
    // before the last one (so neither counts opening or closing the state).
    let tenth = crawl / 10;
    let rate = |from: u64, to: u64| -> Option<f64> {
        let (a, b) = (time_at(&two.progress, from)?, time_at(&two.progress, to)?);
        (b > a).then(|| (to - from) as f64 / (b - a))
    };
    let first = two.progress.get(1).map_or(0, |&(_, p, _)| p);
    let last = two.progress.last().map_or(0, |&(_, p, _)| p);
    let start_rate = rate(first, first + tenth);
    let end_rate = rate(last.saturating_sub(tenth), last);
    let Some((start_rate, end_rate)) = start_rate.zip(end_rate) else {
        bail!(
            "too few progress samples for pages/s windows (use a larger FRONTIER_BENCH_SCALE): {:?}",
            two.progress
        );
    };
    let hwm = |s: &serde_json::Value| field(s, "last_run_peak_rss_kib");
    println!();
    println!("phase                         wall s   peak RssAnon MiB   VmHWM MiB");
    println!(
        "1: {DENSE_PAGES} dense pages, c=1     {:>9.1}   {:>16.1}   {:>9.1}",
        one.wall.as_secs_f64(),
        mib(one.peak_anon_kib),
        mib(hwm(&after_dense))
    );
    println!(
        "2: {crawl} pages, c=16      {:>9.1}   {:>16.1}   {:>9.1}",
        two.wall.as_secs_f64(),
        mib(two.peak_anon_kib),
        mib(hwm(&after_two))
    );
    println!();
    println!(
        "queued after phase 1: {queued}; db/ + runs/ {:.1} MiB (runs/ {:.1}) = {:.1} B per \
         queued request; bloom.bin {:.1} MiB",
        db_one as f64 / 1048576.0,
        runs_one as f64 / 1048576.0,
        db_one as f64 / queued as f64,
        bloom as f64 / 1048576.0
    );
    // Growth over both runs after phase 1 (the killed one and phase 2).
    let fetched = field(&after_two, "pages") - field(&after_dense, "pages");
    let per_page = (db_two as f64 - db_one as f64) / fetched as f64;
    println!(
        "after phase 2: {} pages, {} items, {} queued; db/ + runs/ {:.1} MiB (runs/ {:.1}); \
         growth {:.1} B per fetched page (items included)",
        field(&after_two, "pages"),
        field(&after_two, "items"),
        field(&after_two, "frontier"),
        db_two as f64 / 1048576.0,
        runs_two as f64 / 1048576.0,
        per_page
    );
    println!(
        "open after kill -9 (a run killed at {killed_pages} pages, {queued_at_kill} queued): \
         State::open {:.3} s, then {:.3} s; the same state without its open mark (a trial \
         open of a copy of db/, as every open after a crash before): {trial_open:.3} s",
        opens_after_kill[0], opens_after_kill[1]
    );
    println!(
        "open of the finished state: State::open {} s; `dump summary` {:.3} s",
        opens
            .iter()
            .map(|s| format!("{s:.3}"))
            .collect::<Vec<_>>()
            .join(" / "),
        dump_took.as_secs_f64()
    );
    println!(
        "pages/s: pages {first}..{} {start_rate:.0}, pages {}..{last} {end_rate:.0} \
         (end/start {:.2}); whole phase {:.0}",
        first + tenth,
        last - tenth,
        end_rate / start_rate,
        pages as f64 / two.wall.as_secs_f64()
    );
    // Anonymous memory as the crawl goes: flat, or growing with the pages?
    let mut line = String::from("phase 2 RssAnon MiB by pages done:");
    for k in 1..=10 {
        let at = two
            .progress
            .iter()
            .find(|&&(_, p, _)| p >= crawl * k / 10)
            .or(two.progress.last());
        if let Some(&(_, pages, kib)) = at {
            let _ = write!(line, " {pages}: {:.0};", mib(kib));
        }
    }
    println!("{line}");
    let peak = one.peak_anon_kib.max(two.peak_anon_kib);
    let open = opens.iter().copied().fold(0.0, f64::max);
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!();
    println!(
        "targets: peak RssAnon {:.1} MiB <= 256 MB: {}; open {open:.3} s < 1 s: {}; \
         open after kill -9 {:.3} s < 1 s: {}; \
         end within 20 % of start: {}; {per_page:.0} B per fetched page <= 1 KB: {}",
        mib(peak),
        verdict(peak * 1024 <= 256_000_000),
        verdict(open < 1.0),
        opens_after_kill[0],
        verdict(opens_after_kill[0] < 1.0),
        verdict(end_rate >= 0.8 * start_rate),
        verdict(per_page <= 1024.0)
    );
    if std::env::var_os("FRONTIER_BENCH_KEEP").is_some() {
        let kept: PathBuf = dir.keep();
        println!("state kept in {}", kept.join("state").display());
    }
    Ok(())
}
