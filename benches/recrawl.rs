//! The cost of a second run over an unchanged site, as a share of the first run's.
//!
//! An in-process hyper 1 server (HTTP/1.1 keep-alive, one runtime thread, bodies
//! precomputed; the site generator is the one of `benches/crawl.rs`) serves
//! [`PAGES`] pages `/p/{i}.html` (2–4 KB, [`LINKS`] links each, page `i` always
//! links to `i + 1`) plus the index `/`. With validators on, every answer carries
//! `ETag: "i"` and a matching `If-None-Match` gets an empty 304. The server counts
//! requests and body bytes sent.
//!
//! Each repetition of a variant crawls the site into a fresh state directory
//! (the first run: every page new), then runs again over the unchanged site
//! (the second run), both with `engine::run` and the bundled legs on a 2-worker
//! runtime. Variants of the second run:
//! - `default`: the default adaptive policy (pages due after a day): only the
//!   seed is fetched again (a 304);
//! - `every_run/etag`: `--revisit-after 0` with ETags: every page is asked again
//!   and answers 304;
//! - `every_run/no_validators`: `--revisit-after 0`, no validators: every page
//!   answers 200 with the same body, found unchanged by its content hash.
//!
//! Reported: medians over the repetitions of each run's wall time and body
//! bytes, and of the second run's share of the first's. The target: the
//! second run over an unchanged site costs under 10 % of the first run's time
//! and bytes (it holds for `default`; the `every_run` variants show what asking
//! every page again costs).
//!
//! Run: `cargo bench --bench recrawl`. Environment: `RECRAWL_BENCH_REPS`
//! (default 5), `RECRAWL_BENCH_PAGES` (default 5000), `RECRAWL_BENCH_ONLY` (a
//! substring of the variant names).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use legcrawl::config::{CrawlConfig, Revisit};
use legcrawl::engine::{self, RunReport};
use legcrawl::legs::{self, Leg, Stack};
use legcrawl::store::records::RunOutcome;
use tokio::sync::oneshot;

/// Pages on the site, besides the index.
const PAGES: usize = 5000;
/// Links on each page.
const LINKS: usize = 10;
/// Repetitions per variant.
const REPS: usize = 5;
/// Requests in flight.
const CONCURRENCY: usize = 16;
/// Largest share of the first run's time and bytes a second run may cost.
const TARGET: f64 = 0.10;
/// Filler sentence, repeated to bring pages to 2–4 KB.
const FILLER: &str = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod \
    tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud \
    exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. ";

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The site's bodies and their ETags: index 0 is `/`, index `i + 1` is `/p/{i}.html`.
struct Site {
    bodies: Vec<(Bytes, http::HeaderValue)>,
}

impl Site {
    fn generate(pages: usize, authority: &str) -> Site {
        let mut rng = 0x5eed_u64;
        let index = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index</title>\
                     </head><body><h1>Index</h1><a href=\"p/0.html\">start</a></body></html>\n";
        let bodies = std::iter::once(index.to_owned())
            .chain((0..pages).map(|i| page(i, pages, authority, &mut rng)))
            .enumerate()
            .map(|(k, body)| {
                let etag = http::HeaderValue::from_str(&format!("\"{k}\""))
                    .unwrap_or(http::HeaderValue::from_static("\"x\""));
                (Bytes::from(body), etag)
            })
            .collect();
        Site { bodies }
    }

    fn get(&self, path: &str) -> Option<&(Bytes, http::HeaderValue)> {
        if path == "/" {
            return self.bodies.first();
        }
        let i: usize = path
            .strip_prefix("/p/")?
            .strip_suffix(".html")?
            .parse()
            .ok()?;
        self.bodies.get(i + 1)
    }
}

/// Page `i`: a title, filler paragraphs (2–4 KB in all) and [`LINKS`] links.
fn page(i: usize, pages: usize, authority: &str, rng: &mut u64) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Page {i} of the bench site</title></head>\
         <body><header><h1>Page {i}</h1></header><main>\n"
    );
    let paragraphs = 6 + i % 5;
    for k in 0..LINKS {
        let target = if k == 0 {
            (i + 1) % pages
        } else {
            (splitmix64(rng) % pages as u64) as usize
        };
        let href = match k % 4 {
            0 => format!("{target}.html"),
            1 => format!("/p/{target}.html"),
            2 => format!("../p/{target}.html"),
            _ => format!("http://{authority}/p/{target}.html"),
        };
        let _ = write!(html, "<p><a href=\"{href}\">Page {target}</a> ");
        if k < paragraphs {
            html.push_str(FILLER);
        }
        html.push_str("</p>\n");
    }
    html.push_str("</main><footer><p>&copy; bench</p></footer></body></html>\n");
    html
}

/// What the server counts and how it answers.
#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    not_modified: AtomicU64,
    /// Send ETags (and answer 304 to a matching `If-None-Match`).
    validators: AtomicBool,
}

/// The bench server: one thread, one current-thread runtime; stops when dropped.
struct Server {
    addr: SocketAddr,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(pages: usize) -> anyhow::Result<Server> {
        let listener = StdListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let site = Arc::new(Site::generate(pages, &addr.to_string()));
        let counters = Arc::new(Counters::default());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("server runtime")?;
        let (stop, stopped) = oneshot::channel();
        let shared = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("bench-server".into())
            .spawn(move || runtime.block_on(accept_loop(listener, site, shared, stopped)))?;
        Ok(Server {
            addr,
            counters,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// (requests, body bytes, 304s) so far.
    fn totals(&self) -> (u64, u64, u64) {
        let c = &self.counters;
        (
            c.requests.load(Ordering::Relaxed),
            c.bytes.load(Ordering::Relaxed),
            c.not_modified.load(Ordering::Relaxed),
        )
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

async fn accept_loop(
    listener: StdListener,
    site: Arc<Site>,
    counters: Arc<Counters>,
    mut stop: oneshot::Receiver<()>,
) {
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
        let (site, counters) = (Arc::clone(&site), Arc::clone(&counters));
        tokio::spawn(async move {
            let service =
                service_fn(move |request| std::future::ready(answer(&site, &counters, &request)));
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(
    site: &Site,
    counters: &Counters,
    request: &http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, Infallible> {
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let mut response = http::Response::new(Full::new(Bytes::new()));
    let Some((body, etag)) = site.get(request.uri().path()) else {
        *response.status_mut() = http::StatusCode::NOT_FOUND;
        return Ok(response);
    };
    if counters.validators.load(Ordering::Relaxed) {
        if request.headers().get(http::header::IF_NONE_MATCH) == Some(etag) {
            counters.not_modified.fetch_add(1, Ordering::Relaxed);
            *response.status_mut() = http::StatusCode::NOT_MODIFIED;
            response
                .headers_mut()
                .insert(http::header::ETAG, etag.clone());
            return Ok(response);
        }
        response
            .headers_mut()
            .insert(http::header::ETAG, etag.clone());
    }
    counters
        .bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    *response.body_mut() = Full::new(body.clone());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    Ok(response)
}

/// The legs `legcrawl crawl` runs with (as in `src/cli/crawl.rs`).
fn bundled_legs(config: &CrawlConfig) -> anyhow::Result<Arc<dyn Leg>> {
    let mut stack = Stack::new()
        .push(legs::LinkExtractor::default())
        .push(legs::Canonicalize::default())
        .push(legs::PageItem);
    stack.configure(config)?;
    Ok(Arc::new(stack))
}

/// The second run's policy and the server's validators.
#[derive(Clone, Copy, Debug)]
struct Variant {
    name: &'static str,
    revisit: Revisit,
    validators: bool,
}

const VARIANTS: [Variant; 3] = [
    Variant {
        name: "default",
        revisit: Revisit::Adaptive {
            initial: Duration::from_secs(24 * 3600),
            min: Duration::from_secs(3600),
            max: Duration::from_secs(30 * 24 * 3600),
        },
        validators: true,
    },
    Variant {
        name: "every_run/etag",
        revisit: Revisit::EveryRun,
        validators: true,
    },
    Variant {
        name: "every_run/no_validators",
        revisit: Revisit::EveryRun,
        validators: false,
    },
];

/// One run as measured.
#[derive(Clone, Copy, Debug)]
struct Measure {
    wall: Duration,
    requests: u64,
    bytes: u64,
    not_modified: u64,
}

struct Bench {
    runtime: tokio::runtime::Runtime,
    server: Server,
    pages: usize,
}

impl Bench {
    fn config(&self, dir: &std::path::Path, variant: Variant) -> CrawlConfig {
        CrawlConfig {
            data_dir: dir.to_path_buf(),
            seeds: vec![self.server.url("/")],
            concurrency: CONCURRENCY,
            per_host: CONCURRENCY,
            bloom_bits: Some(24),
            revisit: variant.revisit,
            ..CrawlConfig::default()
        }
    }

    /// One engine run, measured at the server.
    fn run(&self, config: &CrawlConfig) -> anyhow::Result<(RunReport, Measure)> {
        let legs = bundled_legs(config)?;
        let (requests, bytes, not_modified) = self.server.totals();
        let started = Instant::now();
        let report = self
            .runtime
            .block_on(engine::run(config, legs, std::future::pending()))?;
        let wall = started.elapsed();
        let (r, b, n) = self.server.totals();
        if report.outcome != RunOutcome::Drained || report.failed != 0 {
            bail!(
                "run ended {:?} with {} failed",
                report.outcome,
                report.failed
            );
        }
        let measure = Measure {
            wall,
            requests: r - requests,
            bytes: b - bytes,
            not_modified: n - not_modified,
        };
        Ok((report, measure))
    }

    /// A first and a second run of `variant` in a fresh state directory.
    fn pair(&self, variant: Variant) -> anyhow::Result<(Measure, Measure)> {
        let dir = tempfile::Builder::new()
            .prefix("legcrawl-recrawl-")
            .tempdir()?;
        self.server
            .counters
            .validators
            .store(variant.validators, Ordering::Relaxed);
        let config = self.config(&dir.path().join("state"), variant);
        let (first_report, first) = self.run(&config)?;
        let all = (self.pages + 1) as u64;
        ensure!(
            first_report.new == all && first_report.items == all,
            "{}: first run: {first_report:?}",
            variant.name
        );
        let (second_report, second) = self.run(&config)?;
        let fetched = if matches!(variant.revisit, Revisit::EveryRun) {
            all
        } else {
            1
        };
        ensure!(
            second_report.items == 0
                && second_report.unchanged == fetched
                && second_report.pages == fetched,
            "{}: second run: {second_report:?}",
            variant.name
        );
        drop(dir);
        Ok((first, second))
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(value) => value.parse().with_context(|| format!("{name}={value:?}")),
        Err(_) => Ok(default),
    }
}

fn report(variant: Variant, pairs: &[(Measure, Measure)]) {
    let of =
        |f: &dyn Fn(&(Measure, Measure)) -> f64| median(&pairs.iter().map(f).collect::<Vec<_>>());
    let first_wall = of(&|(a, _)| a.wall.as_secs_f64());
    let second_wall = of(&|(_, b)| b.wall.as_secs_f64());
    let time_ratio = of(&|(a, b)| b.wall.as_secs_f64() / a.wall.as_secs_f64());
    let bytes_ratio = of(&|(a, b)| b.bytes as f64 / a.bytes.max(1) as f64);
    let (first, second) = pairs[0];
    let verdict = |r: f64| if r < TARGET { "met" } else { "NOT met" };
    println!(
        "{:<24} {:>9.3} s {:>9.3} s {:>8.2} % ({}) {:>10} B {:>10} B {:>8.2} % ({}) {:>6} req {:>6} 304",
        variant.name,
        first_wall,
        second_wall,
        time_ratio * 100.0,
        verdict(time_ratio),
        first.bytes,
        second.bytes,
        bytes_ratio * 100.0,
        verdict(bytes_ratio),
        second.requests,
        second.not_modified,
    );
}

fn main() -> anyhow::Result<()> {
    let reps = env_usize("RECRAWL_BENCH_REPS", REPS)?.max(1);
    let pages = env_usize("RECRAWL_BENCH_PAGES", PAGES)?.max(2);
    let only = std::env::var("RECRAWL_BENCH_ONLY").unwrap_or_default();
    let variants: Vec<Variant> = VARIANTS
        .into_iter()
        .filter(|v| v.name.contains(&only))
        .collect();
    ensure!(
        !variants.is_empty(),
        "RECRAWL_BENCH_ONLY={only:?} matches no variant"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-crawler")
        .enable_all()
        .build()
        .context("crawler runtime")?;
    let bench = Bench {
        runtime,
        server: Server::start(pages)?,
        pages,
    };
    println!(
        "site: {} URLs, {reps} repetitions per variant after one warm-up pair, concurrency \
         {CONCURRENCY}, temp dir {}, load average {}",
        pages + 1,
        std::env::temp_dir().display(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    bench.pair(variants[0])?;
    let mut pairs = vec![Vec::new(); variants.len()];
    for _ in 0..reps {
        for (variant, runs) in variants.iter().zip(pairs.iter_mut()) {
            runs.push(bench.pair(*variant)?);
        }
    }
    println!(
        "\n{:<24} {:>11} {:>11} {:>19} {:>12} {:>12} {:>19} {:>10} {:>10}",
        "second run",
        "first wall",
        "second wall",
        "time 2nd/1st",
        "first bytes",
        "second bytes",
        "bytes 2nd/1st",
        "2nd reqs",
        "2nd 304s"
    );
    for (variant, runs) in variants.iter().zip(&pairs) {
        report(*variant, runs);
    }
    println!(
        "\nmedians over {reps} repetitions; target: second run < {:.0} % of the first",
        TARGET * 100.0
    );
    Ok(())
}
