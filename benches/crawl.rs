//! Crawl throughput in pages/s: the real engine with persistence next to the bare
//! fetcher, so the cost of the state and the legs is visible.
//!
//! An in-process hyper 1 server (HTTP/1.1 keep-alive, one runtime thread, bodies
//! precomputed) serves a deterministic site of [`PAGES`] pages `/p/{i}.html`
//! (2–4 KB, a `<title>`, [`site::LINKS`] links in four spellings, page `i` always links
//! to `i + 1`) plus the index `/`, so a complete crawl fetches `PAGES + 1` URLs.
//! The crawler runs on its own 2-worker runtime, like one box in production.
//!
//! Variants, run round-robin (after one discarded warm-up round) so drift from
//! other load on the machine hits all of them alike:
//! - `engine/bloom24`, `engine/bloom30`: `engine::run` with the bundled legs
//!   (as `legcrawl crawl` builds them) and a fresh state directory under the
//!   system temp dir per iteration; each iteration must end `Drained` with every
//!   page completed, none failed, and every URL served exactly once.
//! - `engine/bloom24+warc`: as `engine/bloom24`, writing WARC files (`--warc`)
//!   into the iteration's temp dir: the cost of capturing, compressing and
//!   syncing the archive.
//! - `engine/bloom24+output`: as `engine/bloom24`, streaming the items to a
//!   JSON-lines file (`--output`) as their groups become durable: the cost of
//!   the sink (each line written, and synced once a group, before its cursor).
//!   Checked: one line per item the state holds.
//! - `engine/bloom24+serve`: as `engine/bloom24`, with `legcrawl serve` on the
//!   state (in-process, on its own one-thread runtime) scraped every second from
//!   the start of the run by a client thread: `/metrics` and the six JSON
//!   endpoints the page polls. Run it paired with `engine/bloom24`
//!   (`CRAWL_BENCH_VARIANTS=engine/bloom24,engine/bloom24+serve`) and with more
//!   pages, so that a run spans several scrapes; the pairs' ratios are printed.
//! - `bare_fetcher`: the same `Fetcher` (fresh per iteration), 16 tasks pulling
//!   the `PAGES + 1` URLs from a shared index; bodies read, no legs, no store.
//! - `fetch_plus_legs`: as `bare_fetcher`, plus `legs::run` with the bundled legs.
//!
//! Timed: from before `engine::run` (state open included) or the first fetch to
//! the last completion; temp-dir removal is not timed. CPU is the whole process
//! (server included) from `/proc/self/stat`.
//!
//! Run: `cargo bench --bench crawl` (about 30 s). Environment:
//! `CRAWL_BENCH_ITERS` (default 7), `CRAWL_BENCH_PAGES` (default 5000),
//! `CRAWL_BENCH_ONLY` (a substring of the variant names to run),
//! `CRAWL_BENCH_VARIANTS` (exact names, comma-separated; wins over `ONLY`).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use legcrawl::config::CrawlConfig;
use legcrawl::engine;
use legcrawl::fetch::{FetchSettings, Fetcher};
use legcrawl::legs::{self, Leg};
use legcrawl::request::Request;
use legcrawl::store::records::RunOutcome;
use site::Server;

#[path = "support/scraped.rs"]
mod scraped;
#[path = "support/site.rs"]
mod site;

/// Pages on the site, besides the index.
const PAGES: usize = 5000;
/// Measured iterations per variant.
const ITERS: usize = 7;
/// Requests in flight, for the engine and the fetcher variants alike.
const CONCURRENCY: usize = 16;
/// Throughput the engine must reach, pages/s.
const TARGET_PAGES_PER_S: f64 = 5000.0;
/// Largest share of the bare fetcher's throughput state and legs may cost.
const TARGET_OVERHEAD: f64 = 0.30;

/// The legs `legcrawl crawl` runs with when the crawl file names none.
fn bundled_legs(config: &CrawlConfig) -> anyhow::Result<Arc<dyn Leg>> {
    // As `legcrawl crawl` builds them: with sitemaps on (the default), a
    // sitemap leg follows the bundled ones.
    let sitemap = legcrawl::legs::Sitemap::new(legcrawl::legs::SitemapSettings::default())?;
    let mut stack = legcrawl::crawlfile::default_legs().push(sitemap);
    stack.configure(config)?;
    Ok(Arc::new(stack))
}

/// What is being measured.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Engine {
        bloom_bits: u8,
        warc: bool,
        output: bool,
        serve: bool,
    },
    BareFetcher,
    FetchPlusLegs,
}

impl Variant {
    fn name(self) -> String {
        match self {
            Variant::Engine {
                bloom_bits,
                warc,
                output,
                serve,
            } => format!(
                "engine/bloom{bloom_bits}{}{}{}",
                if warc { "+warc" } else { "" },
                if output { "+output" } else { "" },
                if serve { "+serve" } else { "" }
            ),
            Variant::BareFetcher => "bare_fetcher".into(),
            Variant::FetchPlusLegs => "fetch_plus_legs".into(),
        }
    }
}

/// Everything an iteration needs.
struct Bench {
    runtime: tokio::runtime::Runtime,
    server: Server,
    pages: usize,
    urls: Arc<Vec<Request>>,
}

/// One measured iteration.
#[derive(Clone, Copy, Debug)]
struct Sample {
    pages: u64,
    wall: Duration,
    cpu: Duration,
}

impl Sample {
    fn rate(&self) -> f64 {
        self.pages as f64 / self.wall.as_secs_f64()
    }
}

/// User + system CPU time of this process so far (all threads).
fn process_cpu() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the `(comm)`: state is field 3; utime, stime are 14 and 15.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    // CLK_TCK is 100 on Linux for every architecture this runs on.
    Duration::from_millis(ticks * 10)
}

impl Bench {
    fn new(pages: usize) -> anyhow::Result<Bench> {
        let server = Server::start(pages)?;
        let (mean, min, max) = server.sizes;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bench-crawler")
            .enable_all()
            .build()
            .context("crawler runtime")?;
        let urls = std::iter::once(server.url("/"))
            .chain((0..pages).map(|i| server.url(&format!("/p/{i}.html"))))
            .map(Request::get)
            .collect();
        println!(
            "site: {} URLs, page bodies {mean} B mean ({min}..{max}), server {}",
            pages + 1,
            server.addr
        );
        Ok(Bench {
            runtime,
            server,
            pages,
            urls: Arc::new(urls),
        })
    }

    fn run(&self, variant: Variant) -> anyhow::Result<Sample> {
        let served = self.server.totals().0;
        let cpu = process_cpu();
        let (pages, wall) = match variant {
            Variant::Engine {
                bloom_bits,
                warc,
                output,
                serve,
            } => self.engine(bloom_bits, warc, output, serve)?,
            Variant::BareFetcher => self.fetch_all(None)?,
            Variant::FetchPlusLegs => {
                let legs = bundled_legs(&self.config(std::path::Path::new("unused"), 24))?;
                self.fetch_all(Some(legs))?
            }
        };
        let cpu = process_cpu().saturating_sub(cpu);
        let expected = (self.pages + 1) as u64;
        let served = self.server.totals().0 - served;
        // The engine also asks for /robots.txt once (the bench site answers 404).
        let robots = u64::from(matches!(variant, Variant::Engine { .. }));
        ensure!(
            pages == expected && served == expected + robots,
            "{}: {pages} pages completed, {served} requests served, expected {expected}",
            variant.name()
        );
        Ok(Sample { pages, wall, cpu })
    }

    fn config(&self, data_dir: &std::path::Path, bloom_bits: u8) -> CrawlConfig {
        CrawlConfig {
            data_dir: data_dir.to_path_buf(),
            seeds: vec![self.server.url("/")],
            concurrency: CONCURRENCY,
            // One host: let it use the whole concurrency, as the bare fetcher does.
            per_host: CONCURRENCY,
            bloom_bits: Some(bloom_bits),
            ..CrawlConfig::default()
        }
    }

    /// A full engine run in a fresh state directory; checks it crawled everything.
    fn engine(
        &self,
        bloom_bits: u8,
        warc: bool,
        output: bool,
        serve: bool,
    ) -> anyhow::Result<(u64, Duration)> {
        let dir = tempfile::Builder::new()
            .prefix("legcrawl-bench-")
            .tempdir()?;
        let mut config = self.config(&dir.path().join("state"), bloom_bits);
        if warc {
            config.warc = Some(dir.path().join("warc"));
        }
        if output {
            config.output = Some(dir.path().join("items.jsonl"));
        }
        let legs = bundled_legs(&config)?;
        let watcher = serve
            .then(|| scraped::Watcher::start(&config.data_dir))
            .transpose()?;
        let started = Instant::now();
        let report = self
            .runtime
            .block_on(engine::run(&config, legs, std::future::pending()))?;
        let wall = started.elapsed();
        if let Some(watcher) = watcher {
            let scrapes = watcher.stop()?;
            ensure!(scrapes > 0, "serve was never scraped");
        }
        if report.outcome != RunOutcome::Drained || report.totals.failed != 0 {
            bail!(
                "engine run ended {:?} with {} failed",
                report.outcome,
                report.totals.failed
            );
        }
        if let Some(path) = &config.output {
            let lines = std::fs::read_to_string(path)?.lines().count() as u64;
            let state = legcrawl::store::State::open(
                &config.data_dir,
                &legcrawl::store::OpenOptions::default(),
            )?;
            ensure!(
                lines == state.items_len() && lines > 0,
                "--output holds {lines} lines for {} items",
                state.items_len()
            );
        }
        drop(dir);
        Ok((report.totals.pages, wall))
    }

    /// Every URL once, [`CONCURRENCY`] tasks pulling from a shared index.
    fn fetch_all(&self, legs: Option<Arc<dyn Leg>>) -> anyhow::Result<(u64, Duration)> {
        let fetcher = Fetcher::new(FetchSettings::from_config(
            &self.config(std::path::Path::new("unused"), 24),
        ))?;
        let next = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let pages = self.runtime.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..CONCURRENCY {
                let (fetcher, next, urls) =
                    (fetcher.clone(), Arc::clone(&next), Arc::clone(&self.urls));
                let legs = legs.clone();
                tasks.spawn(
                    async move { fetch_worker(&fetcher, &next, &urls, legs.as_deref()).await },
                );
            }
            let mut pages = 0;
            while let Some(joined) = tasks.join_next().await {
                pages += joined??;
            }
            anyhow::Ok(pages)
        })?;
        Ok((pages, started.elapsed()))
    }
}

/// Fetches URLs from `urls` until the shared index runs out; returns pages fetched.
async fn fetch_worker(
    fetcher: &Fetcher,
    next: &AtomicUsize,
    urls: &[Request],
    legs: Option<&dyn Leg>,
) -> anyhow::Result<u64> {
    let mut pages = 0;
    loop {
        let Some(request) = urls.get(next.fetch_add(1, Ordering::Relaxed)) else {
            return Ok(pages);
        };
        let response = fetcher.fetch(request).await?;
        ensure!(
            response.status == 200 && !response.body.is_empty(),
            "{}: status {}, {} bytes",
            request.url,
            response.status,
            response.body.len()
        );
        if let Some(legs) = legs {
            let output = legs::run(legs, &response);
            ensure!(!output.items.is_empty(), "{}: no item", request.url);
            black_box(output);
        }
        black_box(&response.body);
        pages += 1;
    }
}

/// Pages/s of every sample, per variant.
fn samples_rates(samples: &[Vec<Sample>]) -> Vec<Vec<f64>> {
    samples
        .iter()
        .map(|runs| runs.iter().map(Sample::rate).collect())
        .collect()
}

/// Median, min and max of `values` (not empty).
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    (median, sorted[0], sorted[n - 1])
}

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(value) => value.parse().with_context(|| format!("{name}={value:?}")),
        Err(_) => Ok(default),
    }
}

/// Prints one line per variant; returns the median pages/s of each.
fn summarize(variants: &[Variant], samples: &[Vec<Sample>]) -> Vec<f64> {
    println!(
        "\n{:<18} {:>10} {:>10} {:>10} {:>12} {:>14}",
        "variant", "median/s", "min/s", "max/s", "median wall", "CPU ms/1k pg"
    );
    let mut medians = Vec::new();
    for (variant, runs) in variants.iter().zip(samples) {
        let rates: Vec<f64> = runs.iter().map(Sample::rate).collect();
        let (median, min, max) = spread(&rates);
        let walls: Vec<f64> = runs.iter().map(|s| s.wall.as_secs_f64()).collect();
        let cpu: Vec<f64> = runs
            .iter()
            .map(|s| s.cpu.as_secs_f64() * 1e6 / s.pages as f64)
            .collect();
        println!(
            "{:<18} {median:>10.0} {min:>10.0} {max:>10.0} {:>10.3} s {:>14.1}",
            variant.name(),
            spread(&walls).0,
            spread(&cpu).0
        );
        medians.push(median);
    }
    medians
}

fn verdict(variants: &[Variant], medians: &[f64]) {
    let rate = |wanted: Variant| {
        variants
            .iter()
            .position(|v| *v == wanted)
            .map(|i| medians[i])
    };
    let Some(bare) = rate(Variant::BareFetcher) else {
        return;
    };
    println!();
    if let Some(legs) = rate(Variant::FetchPlusLegs) {
        println!(
            "fetch_plus_legs / bare_fetcher = {:.3} (legs cost {:.1} %)",
            legs / bare,
            (1.0 - legs / bare) * 100.0
        );
    }
    for (variant, engine) in variants.iter().zip(medians) {
        if !matches!(variant, Variant::Engine { .. }) {
            continue;
        }
        let ratio = engine / bare;
        let overhead = 1.0 - ratio;
        println!(
            "{} / bare_fetcher = {ratio:.3}: state + legs cost {:.1} % (target < {:.0} %: {}); \
             {engine:.0} pages/s (target >= {TARGET_PAGES_PER_S:.0}: {})",
            variant.name(),
            overhead * 100.0,
            TARGET_OVERHEAD * 100.0,
            if overhead < TARGET_OVERHEAD {
                "met"
            } else {
                "NOT met"
            },
            if *engine >= TARGET_PAGES_PER_S {
                "met"
            } else {
                "NOT met"
            },
        );
    }
}

fn main() -> anyhow::Result<()> {
    let iters = env_usize("CRAWL_BENCH_ITERS", ITERS)?.max(1);
    let pages = env_usize("CRAWL_BENCH_PAGES", PAGES)?.max(2);
    let only = std::env::var("CRAWL_BENCH_ONLY").unwrap_or_default();
    let variants: Vec<Variant> = [
        Variant::Engine {
            bloom_bits: 24,
            warc: false,
            output: false,
            serve: false,
        },
        Variant::Engine {
            bloom_bits: 24,
            warc: true,
            output: false,
            serve: false,
        },
        Variant::Engine {
            bloom_bits: 24,
            warc: false,
            output: true,
            serve: false,
        },
        Variant::Engine {
            bloom_bits: 30,
            warc: false,
            output: false,
            serve: false,
        },
        Variant::BareFetcher,
        Variant::FetchPlusLegs,
        Variant::Engine {
            bloom_bits: 24,
            warc: false,
            output: false,
            serve: true,
        },
    ]
    .into_iter()
    .filter(|v| match std::env::var("CRAWL_BENCH_VARIANTS") {
        Ok(names) => names.split(',').any(|name| name.trim() == v.name()),
        // The serve variant only when asked for (it wants longer runs).
        Err(_) => v.name().contains(&only) && !v.name().ends_with("+serve"),
    })
    .collect();
    ensure!(
        !variants.is_empty(),
        "CRAWL_BENCH_ONLY={only:?} matches no variant"
    );
    let bench = Bench::new(pages)?;
    println!(
        "{iters} iterations per variant after one warm-up round, concurrency {CONCURRENCY}, \
         temp dir {}, load average {}",
        std::env::temp_dir().display(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let mut samples = vec![Vec::new(); variants.len()];
    for round in 0..=iters {
        for (variant, runs) in variants.iter().zip(samples.iter_mut()) {
            let sample = bench.run(*variant)?;
            if round > 0 {
                runs.push(sample);
            }
        }
    }
    let medians = summarize(&variants, &samples);
    verdict(&variants, &medians);
    let names: Vec<String> = variants.iter().map(|v| v.name()).collect();
    let rates = samples_rates(&samples);
    warc_pairs(&names, &rates);
    scraped::pairs(&names, &rates);
    Ok(())
}

/// Prints the median of the per-round ratios `engine/bloom24+warc` /
/// `engine/bloom24` when both ran: alternating pairs cancel most of the
/// drift from other load on the machine.
fn warc_pairs(names: &[String], rates: &[Vec<f64>]) {
    let find = |name: &str| names.iter().position(|n| n == name);
    let (Some(base), Some(warc)) = (find("engine/bloom24"), find("engine/bloom24+warc")) else {
        return;
    };
    let ratios: Vec<f64> = rates[base]
        .iter()
        .zip(&rates[warc])
        .map(|(b, w)| w / b)
        .collect();
    let (median, min, max) = spread(&ratios);
    println!(
        "\nWARC: median pair ratio (bloom24+warc / bloom24) = {median:.3} over {} pairs \
         (min {min:.3}, max {max:.3}; target >= 0.8: {})",
        ratios.len(),
        if median >= 0.8 { "met" } else { "NOT met" }
    );
}
