//! `legcrawl crawl`: flags → [`CrawlConfig`], the bundled legs, signals, summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use legcrawl::config::{CrawlConfig, DedupMode};
use legcrawl::engine::{self, RunReport};
use legcrawl::legs::{self, Leg, Stack};
use legcrawl::store::records::RunOutcome;

use super::{BadInput, DataArg};

/// Arguments of `crawl`.
#[derive(Debug, clap::Args)]
pub struct CrawlArgs {
    /// Seed URLs. Without any, the crawl resumes the seeds and queue stored in --data.
    urls: Vec<String>,
    #[command(flatten)]
    data: DataArg,
    /// Stop after this many pages in this run (it resumes in the next).
    #[arg(long, value_name = "N")]
    max_pages: Option<u64>,
    /// Do not follow links deeper than N (seeds are depth 0).
    #[arg(long, value_name = "N")]
    max_depth: Option<u32>,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 16, value_name = "N")]
    concurrency: usize,
    /// Append committed items to this JSON-lines file (never twice across resumes).
    #[arg(long, value_name = "FILE.jsonl")]
    output: Option<PathBuf>,
    /// Delete the stored state first (scrapy-redis SCHEDULER_PERSIST=False).
    #[arg(long)]
    fresh: bool,
    /// Seen-set mode, fixed when the state is created: exact (Bloom + exact
    /// confirmation) or bloom (Bloom alone, constant size).
    #[arg(long, value_name = "MODE", value_parser = parse_dedup)]
    dedup: Option<DedupMode>,
    /// Bloom filter size as log2 of bits (fixed at creation; default 30 = 128 MiB).
    #[arg(long, value_name = "BITS", value_parser = clap::value_parser!(u8).range(10..=36))]
    bloom_bits: Option<u8>,
    /// Bloom hash functions (fixed at creation; default 6).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u8).range(1..=32))]
    bloom_hashes: Option<u8>,
    /// User-Agent header (also the robots.txt product token).
    #[arg(long, value_name = "UA")]
    user_agent: Option<String>,
    /// Also allow links to this host (repeatable); default: the seeds' hosts.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// Only follow links whose URL matches this regex (repeatable).
    #[arg(long, value_name = "REGEX")]
    allow: Vec<String>,
    /// Never follow links whose URL matches this regex (repeatable).
    #[arg(long, value_name = "REGEX")]
    deny: Vec<String>,
    /// Skip links marked rel=nofollow.
    #[arg(long)]
    obey_nofollow: bool,
    /// Total seconds allowed per request.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    timeout: f64,
    /// Largest decoded body in bytes (longer ones are cut and flagged).
    #[arg(long, default_value_t = 10 * 1024 * 1024, value_name = "BYTES")]
    max_body: usize,
    /// Requests in flight at once to one host.
    #[arg(long, default_value_t = 2, value_name = "N")]
    per_host: usize,
    /// Seconds between the starts of two requests to one host [default: 1 for
    /// remote hosts, 0 for loopback].
    #[arg(long, value_name = "SECS")]
    delay: Option<f64>,
    /// Randomize each per-host delay between 0.5x and 1.5x.
    #[arg(long)]
    jitter: bool,
    /// Retries of a failed request (timeouts, connection errors, 408/429/5xx).
    #[arg(long, default_value_t = 2, value_name = "N")]
    retries: u32,
    /// Send a From header with this contact e-mail.
    #[arg(long, value_name = "EMAIL")]
    from: Option<String>,
    /// Seconds a body read may stall before the request fails.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    read_timeout: f64,
    /// Do not fetch or obey robots.txt (only for sites you run yourself).
    #[arg(long)]
    ignore_robots: bool,
    /// Seconds in-flight requests may finish after the first Ctrl-C.
    #[arg(long, default_value_t = 2.0, value_name = "SECS")]
    grace: f64,
}

fn parse_dedup(value: &str) -> Result<DedupMode, String> {
    DedupMode::parse(value).ok_or_else(|| format!("unknown dedup mode {value:?} (exact or bloom)"))
}

fn seconds(name: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        BadInput(format!(
            "--{name} must be a non-negative number of seconds, got {value}"
        ))
        .into()
    })
}

impl CrawlArgs {
    /// Validates the flags into a configuration.
    fn config(&self) -> anyhow::Result<CrawlConfig> {
        if self.concurrency == 0 || self.per_host == 0 {
            return Err(BadInput("--concurrency and --per-host must be at least 1".into()).into());
        }
        let delay = match self.delay {
            Some(secs) => Some(seconds("delay", secs)?),
            None => None,
        };
        let defaults = CrawlConfig::default();
        Ok(CrawlConfig {
            data_dir: self.data.data.clone(),
            seeds: self.urls.clone(),
            max_pages: self.max_pages,
            max_depth: self.max_depth,
            concurrency: self.concurrency,
            allowed_hosts: self.allow_hosts.clone(),
            user_agent: self.user_agent.clone().unwrap_or(defaults.user_agent),
            request_timeout: seconds("timeout", self.timeout)?,
            read_timeout: seconds("read-timeout", self.read_timeout)?,
            per_host: self.per_host,
            delay,
            jitter: self.jitter,
            max_retries: self.retries,
            from: self.from.clone(),
            obey_robots: !self.ignore_robots,
            max_body_bytes: self.max_body,
            dedup: self.dedup,
            bloom_bits: self.bloom_bits,
            bloom_hashes: self.bloom_hashes,
            follow_nofollow: !self.obey_nofollow,
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            shutdown_grace: seconds("grace", self.grace)?,
            output: self.output.clone(),
            ..defaults
        })
    }
}

/// The bundled legs the CLI crawls with: links, canonical URLs, a page item.
fn bundled_legs(config: &CrawlConfig) -> anyhow::Result<Arc<dyn Leg>> {
    let mut stack = Stack::new()
        .push(legs::LinkExtractor::new())
        .push(legs::Canonicalize::default())
        .push(legs::PageItem::new());
    stack
        .configure(config)
        .map_err(|e| BadInput(e.to_string()))?;
    Ok(Arc::new(stack))
}

pub fn run(args: CrawlArgs) -> anyhow::Result<ExitCode> {
    let config = args.config()?;
    if args.fresh {
        super::reset::delete_state(&config.data_dir)?;
    }
    let legs = bundled_legs(&config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let stop = Arc::new(tokio::sync::Notify::new());
    install_signal_handler(Arc::clone(&stop))?;
    let report = runtime.block_on(engine::run(
        &config,
        legs,
        async move { stop.notified().await },
    ))?;
    print_report(&config, &report);
    Ok(match report.outcome {
        RunOutcome::Interrupted => ExitCode::from(130),
        _ => ExitCode::SUCCESS,
    })
}

/// First SIGINT/SIGTERM: graceful stop. Second: exit at once (the state is
/// consistent at every instant; only uncommitted work is redone).
fn install_signal_handler(stop: Arc<tokio::sync::Notify>) -> anyhow::Result<()> {
    let signals = AtomicUsize::new(0);
    ctrlc::set_handler(move || {
        if signals.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("legcrawl: stopping (in-flight requests get a moment to finish; Ctrl-C again to quit now)");
            stop.notify_one();
        } else {
            eprintln!("legcrawl: quitting now; the state is consistent, uncommitted pages will be fetched again");
            std::process::exit(130);
        }
    })
    .context("installing the Ctrl-C handler")
}

fn print_report(config: &CrawlConfig, r: &RunReport) {
    let rate = r.pages as f64 / r.elapsed.as_secs_f64().max(0.001);
    eprintln!(
        "run {}: {} — {} pages ({rate:.0}/s), {} items, {} queued, {} duplicates filtered, {} failed, {} left in the frontier ({:.1} s)",
        r.run,
        r.outcome.as_str(),
        r.pages,
        r.items,
        r.enqueued,
        r.filtered,
        r.failed,
        r.frontier,
        r.elapsed.as_secs_f64()
    );
    if matches!(r.outcome, RunOutcome::Interrupted | RunOutcome::Limit) && r.frontier > 0 {
        eprintln!(
            "state saved in {}; resume with: legcrawl crawl --data {}",
            config.data_dir.display(),
            config.data_dir.display()
        );
    }
}
