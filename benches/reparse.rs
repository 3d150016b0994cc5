//! `legcrawl reparse` throughput in pages/s: the legs run again over the
//! stored responses of a whole crawl, read back from its WARC files.
//!
//! The in-process bench site of `benches/crawl.rs` (`benches/support/site.rs`:
//! [`PAGES`] pages of 2–4 KB plus the index) is crawled with the bundled legs
//! and `--warc` into a fresh state directory (not timed). Then
//! `engine::run_reparse` runs the same bundled legs, under a job version whose
//! `[[legs]]` spell them out (so that every stored page counts as not seen by
//! the legs in force), on the crawler's 2-worker runtime: timed from the call
//! (the state's open excluded, its first visit of the page records included)
//! to its return. Each repetition checks that every page was reparsed and made
//! its item, none unreadable, none without a stored response, and that the
//! server was asked nothing.
//!
//! Reported: the median over the repetitions of pages/s, against the issue's
//! target of 10,000 pages/s on the 20,001-URL site.
//!
//! Run: `cargo bench --bench reparse`. Environment: `REPARSE_BENCH_REPS`
//! (default 5), `REPARSE_BENCH_PAGES` (default 20000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use legcrawl::config::CrawlConfig;
use legcrawl::engine;
use legcrawl::legs::Leg;
use legcrawl::store::records::RunOutcome;
use median::median;
use site::Server;

#[path = "support/median.rs"]
mod median;
#[path = "support/site.rs"]
mod site;

/// Pages on the site, besides the index.
const PAGES: usize = 20_000;
/// Repetitions.
const REPS: usize = 5;
/// Requests (and reparsed pages) in flight.
const CONCURRENCY: usize = 16;
/// The target.
const TARGET: f64 = 10_000.0;
/// The bundled legs, spelled out as a crawl file spells them.
const SPELLED_LEGS: &str = "\n[[legs]]\nkind = \"links\"\n\n[[legs]]\nkind = \"canonicalize\"\n\n[[legs]]\nkind = \"page_item\"\n";

/// The legs `legcrawl crawl` runs with when the crawl file names none.
fn bundled_legs(config: &CrawlConfig) -> anyhow::Result<Arc<dyn Leg>> {
    let sitemap = legcrawl::legs::Sitemap::new(legcrawl::legs::SitemapSettings::default())?;
    let mut stack = legcrawl::crawlfile::default_legs().push(sitemap);
    stack.configure(config)?;
    Ok(Arc::new(stack))
}

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(value) => value.parse().with_context(|| format!("{name}={value:?}")),
        Err(_) => Ok(default),
    }
}

/// One crawl (not timed) and its reparse (timed): the reparse's wall time.
fn rep(
    runtime: &tokio::runtime::Runtime,
    server: &Server,
    pages: usize,
) -> anyhow::Result<Duration> {
    let dir = tempfile::Builder::new()
        .prefix("legcrawl-reparse-")
        .tempdir()?;
    let config = CrawlConfig {
        data_dir: dir.path().join("state"),
        seeds: vec![server.url("/")],
        concurrency: CONCURRENCY,
        per_host: CONCURRENCY,
        bloom_bits: Some(24),
        warc: Some(dir.path().join("warc")),
        ..CrawlConfig::default()
    };
    let all = (pages + 1) as u64;
    let crawled = runtime.block_on(engine::run(
        &config,
        bundled_legs(&config)?,
        std::future::pending(),
    ))?;
    ensure!(
        crawled.outcome == RunOutcome::Drained && crawled.totals.new == all,
        "the crawl: {crawled:?}"
    );
    let state = engine::open_state(&CrawlConfig {
        seeds: Vec::new(),
        ..config.clone()
    })?;
    let job = state
        .latest_job()?
        .context("the crawl stored its job")?
        .text;
    let job = format!("{job}{SPELLED_LEGS}");
    let legs = bundled_legs(&config)?;
    let asked = server.totals().0;
    let started = Instant::now();
    let (report, reparsed) = runtime.block_on(engine::run_reparse(
        state,
        &config,
        legs,
        &job,
        std::future::pending(),
    ))?;
    let wall = started.elapsed();
    if report.outcome != RunOutcome::Drained {
        bail!("the reparse ended {:?}", report.outcome);
    }
    ensure!(
        reparsed.pages == all
            && report.items == all
            && reparsed.unreadable == 0
            && reparsed.not_stored == 0,
        "the reparse: {reparsed:?}, {report:?}"
    );
    ensure!(server.totals().0 == asked, "the reparse asked the server");
    Ok(wall)
}

fn main() -> anyhow::Result<()> {
    let reps = env_usize("REPARSE_BENCH_REPS", REPS)?.max(1);
    let pages = env_usize("REPARSE_BENCH_PAGES", PAGES)?.max(2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-crawler")
        .enable_all()
        .build()
        .context("crawler runtime")?;
    let server = Server::start(pages)?;
    println!(
        "site: {} URLs, {reps} repetitions after one warm-up, concurrency {CONCURRENCY}, \
         temp dir {}, load average {}",
        pages + 1,
        std::env::temp_dir().display(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    rep(&runtime, &server, pages)?;
    let mut rates = Vec::new();
    for i in 0..reps {
        let wall = rep(&runtime, &server, pages)?;
        let rate = (pages + 1) as f64 / wall.as_secs_f64();
        println!("rep {i}: {:.3} s, {rate:.0} pages/s", wall.as_secs_f64());
        rates.push(rate);
    }
    let rate = median(&rates);
    println!(
        "\nreparse: median {rate:.0} pages/s over {reps} repetitions; target {TARGET:.0} pages/s: {}",
        if rate >= TARGET { "met" } else { "NOT met" }
    );
    Ok(())
}
