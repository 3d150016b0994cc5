//! Shared-crawl throughput (issue 13): pages/s of 1, 2 and 4 worker processes
//! sharing one crawl through one `redis-server`.
//!
//! The bench starts Debian's `redis-server` itself (persistence off, a free
//! port on 127.0.0.1; the same helper as the tests, `tests/it/support/redis.rs`)
//! and an in-process site (hyper 1, HTTP/1.1 keep-alive, a 2-thread runtime,
//! bodies precomputed) on one or many loopback hosts. The workers are the
//! release binary cargo builds for benches (`CARGO_BIN_EXE_legcrawl`), started
//! as separate processes with the same command line, as on several machines.
//!
//! Scenarios:
//! - `polite`: [`POLITE_HOSTS`] hosts (127.0.0.2 onward), each answer held back
//!   [`POLITE_LATENCY_MS`] ms (a remote site), `--per-host 1 --delay 0.05`,
//!   `--concurrency 8` per worker. The politeness bound is one request per
//!   host per max(latency, delay): 32 × 10/s = 320 pages/s; one worker's own
//!   bound is 8 / 0.1 s = 80 pages/s, so throughput should grow with workers
//!   until the politeness bound.
//! - `redis`: one host, no delay, no latency, `--per-host 64 --concurrency 32`:
//!   what Redis and the workers' round trips allow (on this 2-core machine the
//!   workers, Redis and the server share the cores, so this is CPU-bound too).
//!
//! Timed: from spawning the workers to the last one exiting 0 (process start
//! and the seeds' store included). Each run uses a fresh `FLUSHALL`ed Redis and
//! must end with every page fetched exactly once by the servers and
//! `dump --shared summary` showing one item per page; the table shows the
//! median over the runs and each run's pages/s.
//!
//! scrapy-redis (opt-in, `SHARED_BENCH_SCRAPY=/path/to/venv/bin/scrapy`): the
//! same site and the same Redis, in the same run, crawled by N processes of the
//! spider in `benches/scrapy_redis/` (a `RedisSpider` seeded through the Redis
//! list `bench:start_urls`, scrapy-redis's scheduler, dupefilter and item
//! pipeline; the scenario's per-host concurrency, delay and concurrency as
//! Scrapy settings, which hold per process). A scrapy-redis worker has no
//! crawl-wide notion of done: it stops once idle for
//! `MAX_IDLE_TIME_BEFORE_CLOSE` seconds, polled by Scrapy every 5 s. So two
//! figures: pages/s to the last process's exit (as legcrawl's) and to the last
//! page the site served. Each run must end with every page fetched exactly once
//! and one item per page in `bench:items`. Without the variable the bench says
//! the comparison was skipped.
//!
//! - `calls` (`shared/calls.rs`): the longest single script call (SLOWLOG) for
//!   200,000 seeds stored, a page of 200,000 links and a cycle start of 200,000
//!   seeds (`SHARED_BENCH_CALLS` sets the size).
//!
//! Run: `cargo bench --bench shared` (about three minutes, 17 with scrapy-redis). Environment:
//! `SHARED_BENCH_RUNS` (default 3), `SHARED_BENCH_POLITE_PAGES` (default 1600),
//! `SHARED_BENCH_REDIS_PAGES` (default 6000), `SHARED_BENCH_WARC=1` (each
//! worker writes WARC files into a directory of its own), `SHARED_BENCH_BIN`
//! (the legcrawl binary to run instead of this build's), `SHARED_BENCH_ONLY` (`polite`,
//! `redis`, `calls` or `memory`: the memory line of `calls` alone), `SHARED_BENCH_SCRAPY` (see above), `SHARED_BENCH_SCRAPY_SET`
//! (more Scrapy settings for it, `NAME=VALUE` separated by spaces, e.g.
//! `SCHEDULER_QUEUE_CLASS=scrapy_redis.queue.FifoQueue`).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::TcpListener as StdListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

#[path = "../tests/it/support/redis.rs"]
#[allow(dead_code)]
mod redis;
// The loud SKIPPED line `redis` writes when redis-server is missing.
#[path = "../tests/it/support/skip.rs"]
mod skip;

#[path = "shared/calls.rs"]
mod calls;

/// Hosts of the politeness-bound site.
const POLITE_HOSTS: usize = 32;
/// Server-side latency of each answer on the politeness-bound site.
const POLITE_LATENCY_MS: u64 = 100;
/// Worker counts measured.
const WORKERS: [usize; 3] = [1, 2, 4];
/// Longest one crawl may take before the bench gives up.
const RUN_LIMIT: Duration = Duration::from_secs(300);
/// Links on each page besides the next one.
const LINKS: usize = 7;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One scenario: a site and the workers' options.
struct Scenario {
    name: &'static str,
    hosts: usize,
    pages: usize,
    latency: Duration,
    options: &'static [&'static str],
    /// The same options as Scrapy settings (`-s NAME=VALUE`).
    scrapy: &'static [&'static str],
}

/// The site over `hosts` loopback hosts: page `i` on host `i % hosts`, linking
/// to `i + 1` and [`LINKS`] pseudo-random pages by absolute URL; the index `/`
/// of host `h` links to page `h`.
struct Site {
    /// `IP:PORT` per host.
    authorities: Vec<String>,
    requests: Arc<AtomicU64>,
    /// When the last page (not `robots.txt`) was answered, in ns since `epoch`.
    last: Arc<AtomicU64>,
    epoch: Instant,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Bodies per host: `[index, pages of the host...]` by path.
type Bodies = Vec<std::collections::HashMap<String, Bytes>>;

fn bodies(pages: usize, authorities: &[String]) -> Bodies {
    let hosts = authorities.len();
    let mut rng = 0x5eed_u64;
    let mut out: Bodies = (0..hosts)
        .map(|h| {
            let index = format!(
                "<!DOCTYPE html><html><head><title>Index {h}</title></head>\
                 <body><a href=\"/p/{h}.html\">start</a></body></html>"
            );
            [("/".to_owned(), Bytes::from(index))].into_iter().collect()
        })
        .collect();
    for i in 0..pages {
        let mut html = format!(
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Page {i}</title>\
             </head><body><h1>Page {i}</h1>\n"
        );
        let targets = std::iter::once((i + 1) % pages)
            .chain((0..LINKS).map(|_| (splitmix64(&mut rng) % pages as u64) as usize));
        for target in targets {
            let host = &authorities[target % hosts];
            let _ = writeln!(
                html,
                "<p><a href=\"http://{host}/p/{target}.html\">Page {target}</a> \
                 Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod \
                 tempor incididunt ut labore et dolore magna aliqua.</p>"
            );
        }
        html.push_str("</body></html>\n");
        out[i % hosts].insert(format!("/p/{i}.html"), Bytes::from(html));
    }
    out
}

impl Site {
    fn start(scenario: &Scenario) -> anyhow::Result<Site> {
        let listeners: Vec<StdListener> = (0..scenario.hosts)
            .map(|h| {
                let ip = format!("127.0.0.{}", 2 + h);
                let l =
                    StdListener::bind((ip.as_str(), 0)).with_context(|| format!("bind {ip}"))?;
                l.set_nonblocking(true)?;
                Ok(l)
            })
            .collect::<anyhow::Result<_>>()?;
        let authorities: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.to_string()))
            .collect::<Result<_, _>>()?;
        let bodies = Arc::new(bodies(scenario.pages, &authorities));
        let requests = Arc::new(AtomicU64::new(0));
        let last = Arc::new(AtomicU64::new(0));
        let epoch = Instant::now();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("server runtime")?;
        let (stop, stopped) = oneshot::channel::<()>();
        let latency = scenario.latency;
        let counter = Arc::clone(&requests);
        let answered = Arc::clone(&last);
        let thread = std::thread::Builder::new()
            .name("bench-site".into())
            .spawn(move || {
                runtime.block_on(async move {
                    for (h, listener) in listeners.into_iter().enumerate() {
                        let bodies = Arc::clone(&bodies);
                        let counter = Arc::clone(&counter);
                        let answered = Arc::clone(&answered);
                        tokio::spawn(accept_loop(
                            listener, h, bodies, counter, answered, epoch, latency,
                        ));
                    }
                    let _ = stopped.await;
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        Ok(Site {
            authorities,
            requests,
            last,
            epoch,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Seeds and `--allow-host` for every host.
    fn crawl_args(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .authorities
            .iter()
            .map(|a| format!("http://{a}/"))
            .collect();
        for authority in &self.authorities {
            let ip = authority
                .rsplit_once(':')
                .map_or(authority.as_str(), |p| p.0);
            out.extend(["--allow-host".to_owned(), ip.to_owned()]);
        }
        out
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: StdListener,
    host: usize,
    bodies: Arc<Bodies>,
    requests: Arc<AtomicU64>,
    last: Arc<AtomicU64>,
    epoch: Instant,
    latency: Duration,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        let bodies = Arc::clone(&bodies);
        let requests = Arc::clone(&requests);
        let last = Arc::clone(&last);
        tokio::spawn(async move {
            let service = service_fn(move |request: http::Request<Incoming>| {
                let bodies = Arc::clone(&bodies);
                let requests = Arc::clone(&requests);
                let last = Arc::clone(&last);
                async move {
                    let path = request.uri().path().to_owned();
                    if path != "/robots.txt" {
                        requests.fetch_add(1, Ordering::Relaxed);
                    }
                    if !latency.is_zero() {
                        tokio::time::sleep(latency).await;
                    }
                    let (status, body, kind) = match bodies[host].get(&path) {
                        Some(body) => (200, body.clone(), "text/html; charset=utf-8"),
                        None if path == "/robots.txt" => (
                            200,
                            Bytes::from_static(b"User-agent: *\nAllow: /\n"),
                            "text/plain",
                        ),
                        None => (404, Bytes::from_static(b"not found"), "text/plain"),
                    };
                    if path != "/robots.txt" {
                        let now = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        last.fetch_max(now, Ordering::Relaxed);
                    }
                    let response = http::Response::builder()
                        .status(status)
                        .header("Content-Type", kind)
                        .body(Full::new(body))
                        .expect("response");
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Kills every child still running when dropped.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Workers {
    /// Waits for every worker to exit 0 (its log shown if not), at most
    /// [`RUN_LIMIT`] from `started`; the rest are killed on failure (drop).
    fn wait(&mut self, logs: &std::path::Path, started: Instant) -> anyhow::Result<()> {
        for (w, child) in self.0.iter_mut().enumerate() {
            loop {
                if let Some(status) = child.try_wait()? {
                    let log = std::fs::read_to_string(logs.join(format!("{w}.log")));
                    ensure!(
                        status.success(),
                        "worker {w} ended {status}: {}",
                        log.unwrap_or_default()
                    );
                    break;
                }
                if started.elapsed() > RUN_LIMIT {
                    bail!("the crawl took more than {RUN_LIMIT:?}");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }
}

/// One crawl of `scenario` by `workers` processes: pages/s.
fn measure(
    exe: &str,
    redis: &redis::RedisServer,
    scenario: &Scenario,
    workers: usize,
) -> anyhow::Result<f64> {
    ensure!(
        redis.command(&["FLUSHALL"])? == redis::Resp::Simple("OK".into()),
        "FLUSHALL failed"
    );
    let site = Site::start(scenario)?;
    let mut args = site.crawl_args();
    args.extend(scenario.options.iter().map(|s| (*s).to_owned()));
    args.extend([
        "--shared".into(),
        redis.url(),
        "--name".into(),
        "bench".into(),
    ]);
    // SHARED_BENCH_WARC=1: each worker writes WARC files into a directory
    // of its own (one fdatasync per completion).
    let warc = match std::env::var("SHARED_BENCH_WARC").as_deref() {
        Ok("1") => Some(tempfile::tempdir()?),
        _ => None,
    };
    let next = std::cell::Cell::new(0);
    let (_, wall) = crawl_with(workers, &site, scenario, "legcrawl", || {
        let mut cmd = Command::new(exe);
        cmd.arg("crawl").args(&args).env("RUST_LOG", "error");
        if let Some(dir) = &warc {
            next.set(next.get() + 1);
            cmd.arg("--warc")
                .arg(dir.path().join(format!("w{}", next.get())));
        }
        cmd
    })?;
    let expected = scenario.pages + scenario.hosts;
    let out = Command::new(exe)
        .args(["dump", "--shared", &redis.url(), "--name", "bench"])
        .args(["summary", "--json"])
        .output()?;
    ensure!(
        out.status.success(),
        "dump summary: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    ensure!(
        summary["items"].as_u64() == Some(expected as u64),
        "summary after the crawl: {summary}"
    );
    Ok(expected as f64 / wall.as_secs_f64())
}

/// Starts `workers` processes of `command` on `site` (each one's stderr to a
/// file, shown if it fails), waits for all, and checks the site served each
/// page exactly once. Returns when they started and the wall time to the last
/// exit.
fn crawl_with(
    workers: usize,
    site: &Site,
    scenario: &Scenario,
    who: &str,
    command: impl Fn() -> Command,
) -> anyhow::Result<(Instant, Duration)> {
    let logs = tempfile::tempdir()?;
    let started = Instant::now();
    let mut running = Workers(Vec::new());
    for w in 0..workers {
        let log = std::fs::File::create(logs.path().join(format!("{w}.log")))?;
        let child = command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("spawn {who}"))?;
        running.0.push(child);
    }
    running.wait(logs.path(), started)?;
    let wall = started.elapsed();
    let expected = scenario.pages + scenario.hosts;
    let fetched = site.requests.load(Ordering::Relaxed);
    ensure!(
        fetched == expected as u64,
        "{who}: {fetched} page requests for {expected} pages"
    );
    Ok((started, wall))
}

/// The scrapy-redis column: the `scrapy` command of a virtualenv with Scrapy
/// and scrapy-redis, and the folder of the spider and its settings.
struct Scrapy {
    exe: String,
    dir: std::path::PathBuf,
    /// `SHARED_BENCH_SCRAPY_SET`: more `NAME=VALUE` settings, space-separated.
    extra: Vec<String>,
}

impl Scrapy {
    /// `SHARED_BENCH_SCRAPY`, or why the comparison is skipped.
    fn from_env() -> Result<Scrapy, String> {
        let Ok(exe) = std::env::var("SHARED_BENCH_SCRAPY") else {
            return Err(
                "SHARED_BENCH_SCRAPY is not set (the `scrapy` of a virtualenv \
                        with Scrapy and scrapy-redis, see docs/performance.md)"
                    .into(),
            );
        };
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/scrapy_redis");
        let version = Command::new(&exe)
            .arg("version")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("SHARED_BENCH_SCRAPY={exe}: {e}"))?;
        if !version.status.success() {
            return Err(format!(
                "`{exe} version` failed: {}",
                String::from_utf8_lossy(&version.stderr)
            ));
        }
        let python = std::path::Path::new(&exe).with_file_name("python");
        let redis = Command::new(python)
            .args(["-c", "import scrapy_redis; print(scrapy_redis.__version__)"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("the virtualenv's python: {e}"))?;
        if !redis.status.success() {
            return Err(format!(
                "scrapy-redis is not importable beside {exe}: {}",
                String::from_utf8_lossy(&redis.stderr)
            ));
        }
        println!(
            "scrapy-redis: {exe} ({}, scrapy-redis {})",
            String::from_utf8_lossy(&version.stdout).trim(),
            String::from_utf8_lossy(&redis.stdout).trim()
        );
        let extra: Vec<String> = std::env::var("SHARED_BENCH_SCRAPY_SET")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if !extra.is_empty() {
            println!("scrapy-redis settings added: {}", extra.join(" "));
        }
        Ok(Scrapy { exe, dir, extra })
    }

    /// One crawl of `scenario` by `workers` scrapy-redis processes: pages/s to
    /// the last exit and to the last page served.
    fn measure(
        &self,
        redis: &redis::RedisServer,
        scenario: &Scenario,
        workers: usize,
    ) -> anyhow::Result<(f64, f64)> {
        ensure!(
            redis.command(&["FLUSHALL"])? == redis::Resp::Simple("OK".into()),
            "FLUSHALL failed"
        );
        let site = Site::start(scenario)?;
        let mut push = vec!["RPUSH".to_owned(), "bench:start_urls".to_owned()];
        push.extend(
            site.authorities
                .iter()
                .map(|a| format!("{{\"url\": \"http://{a}/\"}}")),
        );
        let push: Vec<&str> = push.iter().map(String::as_str).collect();
        ensure!(
            matches!(redis.command(&push)?, redis::Resp::Int(n) if n == scenario.hosts as i64),
            "RPUSH of the seeds failed"
        );
        let hosts: Vec<&str> = site
            .authorities
            .iter()
            .map(|a| a.rsplit_once(':').map_or(a.as_str(), |p| p.0))
            .collect();
        let mut args: Vec<String> = vec![
            "runspider".into(),
            "spider.py".into(),
            "-a".into(),
            format!("hosts={}", hosts.join(",")),
            "-s".into(),
            format!("REDIS_URL={}", redis.url()),
        ];
        for setting in scenario
            .scrapy
            .iter()
            .copied()
            .chain(self.extra.iter().map(String::as_str))
        {
            args.extend(["-s".to_owned(), setting.to_owned()]);
        }
        let (started, wall) = crawl_with(workers, &site, scenario, "scrapy-redis", || {
            let mut cmd = Command::new(&self.exe);
            cmd.args(&args)
                .current_dir(&self.dir)
                .env("SCRAPY_SETTINGS_MODULE", "settings")
                .env("PYTHONPATH", &self.dir)
                .env("PYTHONDONTWRITEBYTECODE", "1");
            cmd
        })?;
        let expected = scenario.pages + scenario.hosts;
        let items = redis.command(&["LLEN", "bench:items"])?;
        ensure!(
            items == redis::Resp::Int(expected as i64),
            "scrapy-redis: {items:?} items for {expected} pages"
        );
        let last = site.epoch + Duration::from_nanos(site.last.load(Ordering::Relaxed));
        let to_last = last.saturating_duration_since(started);
        Ok((
            expected as f64 / wall.as_secs_f64(),
            expected as f64 / to_last.as_secs_f64(),
        ))
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(v) => v.parse().with_context(|| format!("{name}={v:?}")),
        Err(_) => Ok(default),
    }
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing else to parse.
    // Another build of the binary, to compare two builds in one run.
    let exe = std::env::var("SHARED_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_legcrawl").to_owned());
    let exe = exe.as_str();
    let runs = env_usize("SHARED_BENCH_RUNS", 3)?.max(1);
    let only = std::env::var("SHARED_BENCH_ONLY").unwrap_or_default();
    let scenarios = [
        Scenario {
            name: "polite",
            hosts: POLITE_HOSTS,
            pages: env_usize("SHARED_BENCH_POLITE_PAGES", 1600)?,
            latency: Duration::from_millis(POLITE_LATENCY_MS),
            options: &["--per-host", "1", "--delay", "0.05", "--concurrency", "8"],
            scrapy: &[
                "CONCURRENT_REQUESTS_PER_DOMAIN=1",
                "DOWNLOAD_DELAY=0.05",
                "CONCURRENT_REQUESTS=8",
            ],
        },
        Scenario {
            name: "redis",
            hosts: 1,
            pages: env_usize("SHARED_BENCH_REDIS_PAGES", 6000)?,
            latency: Duration::ZERO,
            options: &["--per-host", "64", "--delay", "0", "--concurrency", "32"],
            scrapy: &[
                "CONCURRENT_REQUESTS_PER_DOMAIN=64",
                "DOWNLOAD_DELAY=0",
                "CONCURRENT_REQUESTS=32",
            ],
        },
    ];
    if only == "memory" {
        return calls::memory_only();
    }
    if "calls".contains(&only) {
        calls::run()?;
    }
    if only == "calls" {
        return Ok(());
    }
    let Some(redis) = redis::RedisServer::start("benches/shared") else {
        bail!("redis-server not found: `apt-get install redis-server`");
    };
    println!("legcrawl: {exe}; redis-server on port {}", redis.port());
    let scrapy = match Scrapy::from_env() {
        Ok(scrapy) => Some(scrapy),
        Err(why) => {
            println!("scrapy-redis comparison skipped: {why}");
            None
        }
    };
    println!(
        "{:<8} {:>5} {:>7} {:>7} {:>10}  runs (pages/s)",
        "site", "hosts", "pages", "workers", "pages/s"
    );
    for scenario in scenarios.iter().filter(|s| s.name.contains(&only)) {
        for workers in WORKERS {
            let mut rates = Vec::new();
            let mut scrapy_exit = Vec::new();
            let mut scrapy_last = Vec::new();
            for _ in 0..runs {
                rates.push(measure(exe, &redis, scenario, workers)?);
                if let Some(scrapy) = &scrapy {
                    let (exit, last) = scrapy.measure(&redis, scenario, workers)?;
                    scrapy_exit.push(exit);
                    scrapy_last.push(last);
                }
            }
            let each = |rates: &[f64]| {
                let each: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
                each.join(" ")
            };
            println!(
                "{:<8} {:>5} {:>7} {:>7} {:>10.0}  {}",
                scenario.name,
                scenario.hosts,
                scenario.pages + scenario.hosts,
                workers,
                median(&rates),
                each(&rates)
            );
            if scrapy.is_some() {
                println!(
                    "{:<8} {:>5} {:>7} {:>7} {:>10.0}  {}  (scrapy-redis, to the last exit)",
                    "",
                    "",
                    "",
                    "",
                    median(&scrapy_exit),
                    each(&scrapy_exit)
                );
                println!(
                    "{:<8} {:>5} {:>7} {:>7} {:>10.0}  {}  (scrapy-redis, to the last page served)",
                    "",
                    "",
                    "",
                    "",
                    median(&scrapy_last),
                    each(&scrapy_last)
                );
            }
        }
    }
    Ok(())
}
