//! The cost of a second run over an unchanged site, as a share of the first run's.
//!
//! An in-process hyper 1 server (HTTP/1.1 keep-alive, one runtime thread, bodies
//! precomputed; `benches/support/site.rs`, shared with `benches/crawl.rs`) serves
//! [`PAGES`] pages `/p/{i}.html` (2–4 KB, [`site::LINKS`] links each, page `i` always
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

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use legcrawl::config::{CrawlConfig, Revisit};
use legcrawl::engine::{self, RunReport};
use legcrawl::legs::Leg;
use legcrawl::store::records::RunOutcome;
use median::median;
use site::Server;

#[path = "support/median.rs"]
mod median;
#[path = "support/site.rs"]
mod site;

/// Pages on the site, besides the index.
const PAGES: usize = 5000;
/// Repetitions per variant.
const REPS: usize = 5;
/// Requests in flight.
const CONCURRENCY: usize = 16;
/// Largest share of the first run's time and bytes a second run may cost.
const TARGET: f64 = 0.10;

/// The legs `legcrawl crawl` runs with when the crawl file names none.
fn bundled_legs(config: &CrawlConfig) -> anyhow::Result<Arc<dyn Leg>> {
    // As `legcrawl crawl` builds them: with sitemaps on (the default), a
    // sitemap leg follows the bundled ones.
    let sitemap = legcrawl::legs::Sitemap::new(legcrawl::legs::SitemapSettings::default())?;
    let mut stack = legcrawl::crawlfile::default_legs().push(sitemap);
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
        if report.outcome != RunOutcome::Drained || report.totals.failed != 0 {
            bail!(
                "run ended {:?} with {} failed",
                report.outcome,
                report.totals.failed
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
        self.server.set_validators(variant.validators);
        let config = self.config(&dir.path().join("state"), variant);
        let (first_report, first) = self.run(&config)?;
        let all = (self.pages + 1) as u64;
        ensure!(
            first_report.totals.new == all && first_report.items == all,
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
                && second_report.totals.unchanged == fetched
                && second_report.totals.pages == fetched,
            "{}: second run: {second_report:?}",
            variant.name
        );
        drop(dir);
        Ok((first, second))
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
