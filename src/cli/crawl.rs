//! `legcrawl crawl`: flags → [`CrawlConfig`], the bundled legs, signals, summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use legcrawl::config::{CrawlConfig, CrawlFileCopy, DedupMode, Revisit, RevisitRule};
use legcrawl::crawlfile;
use legcrawl::engine::{self, RunReport};
use legcrawl::legs::{Leg, Stack};
use legcrawl::shared::SharedTarget;
use legcrawl::store::records::RunOutcome;

use super::stderr::say;
use super::{BadInput, DataArg};

/// Arguments of `crawl`.
#[derive(Debug, clap::Args)]
pub struct CrawlArgs {
    /// Seed URLs. Without any, the crawl resumes the seeds and queue stored in --data.
    urls: Vec<String>,
    #[command(flatten)]
    data: DataArg,
    /// Read settings and legs from this TOML crawl file (see data/examples/); every
    /// flag given on the command line overrides the file.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Stop after this many pages in this run (it resumes in the next).
    #[arg(long, value_name = "N")]
    max_pages: Option<u64>,
    /// Do not follow links deeper than N (seeds are depth 0).
    #[arg(long, value_name = "N")]
    max_depth: Option<u32>,
    /// Requests in flight at once [default: 16].
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
    /// Append committed items to this JSON-lines file (never twice across resumes).
    #[arg(long, value_name = "FILE.jsonl")]
    output: Option<PathBuf>,
    /// Write WARC 1.1 files of every fetch (request, response, revisit records,
    /// one gzip member each) into this directory, created if missing; a record
    /// is there exactly when its page's completion is durable.
    #[arg(long, value_name = "DIR")]
    warc: Option<PathBuf>,
    /// Begin a new WARC file past this size (bytes, or "512MiB", "1GB")
    /// [default: 1GB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    warc_max_size: Option<u64>,
    /// Write a JSON report of the run here when it ends (also after Ctrl-C): run,
    /// outcome, times, the end-of-run totals and every counter. A failure to write it
    /// is reported and does not change the exit code.
    #[arg(long, value_name = "FILE.json")]
    stats: Option<PathBuf>,
    /// Delete the stored state first and start again from the seeds given
    /// (scrapy-redis SCHEDULER_PERSIST=False); asks first unless --yes.
    #[arg(long)]
    fresh: bool,
    /// With --fresh: delete without asking.
    #[arg(long, requires = "fresh")]
    yes: bool,
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
    /// Total seconds allowed per request [default: 30].
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Seconds a body read may stall before the request fails [default: 10].
    #[arg(long, value_name = "SECS")]
    read_timeout: Option<f64>,
    /// Largest decoded body in bytes; longer ones are cut and flagged [default: 10 MiB].
    #[arg(long, value_name = "BYTES")]
    max_body: Option<usize>,
    /// Requests in flight at once to one host [default: 2].
    #[arg(long, value_name = "N")]
    per_host: Option<usize>,
    /// Seconds between the starts of two requests to one host [default: 1 for
    /// remote hosts, 0 for loopback].
    #[arg(long, value_name = "SECS")]
    delay: Option<f64>,
    /// Randomize each per-host delay between 0.5x and 1.5x.
    #[arg(long)]
    jitter: bool,
    /// Retries of a failed request (timeouts, connection errors, 408/429/5xx) [default: 2].
    #[arg(long, value_name = "N")]
    retries: Option<u32>,
    /// Send a From header with this contact e-mail.
    #[arg(long, value_name = "EMAIL")]
    from: Option<String>,
    /// Seconds before asking again for a robots.txt that answered 5xx or could not be
    /// reached [default: 60]; after three such answers the host waits for the next run.
    #[arg(long, value_name = "SECS")]
    robots_retry: Option<f64>,
    /// Do not fetch or obey robots.txt (only for sites you run yourself).
    #[arg(long)]
    ignore_robots: bool,
    /// Seconds in-flight requests may finish after the first Ctrl-C [default: 2].
    #[arg(long, value_name = "SECS")]
    grace: Option<f64>,
    /// When fetched pages are fetched again by later runs: a duration ("12h", "7d",
    /// "0" = every run), "never", or "adaptive" [default: adaptive, 1d within 1h..30d].
    /// Seeds are fetched again in every run regardless.
    #[arg(long, value_name = "WHEN", value_parser = parse_revisit)]
    revisit_after: Option<Revisit>,
    /// Pages whose URL matches this regex are hubs, fetched again in every run
    /// (repeatable; e.g. index pages, feeds).
    #[arg(long = "revisit", value_name = "REGEX")]
    hubs: Vec<String>,
    /// End the run when nothing can be fetched within a minute (hosts backed off by
    /// Retry-After or a failing robots.txt); what is left waits for the next run.
    #[arg(long)]
    until_idle: bool,
    /// Stop starting requests after this long ("30m", "2h", or seconds); the run
    /// resumes in the next.
    #[arg(long, value_name = "DURATION", value_parser = parse_span)]
    max_duration: Option<Duration>,
    /// Checkpoint the seen set at least this often [default: 30s, or the crawl
    /// file's `dedup.checkpoint`] (also after 2^18 new URLs).
    #[arg(long, value_name = "DURATION", value_parser = parse_span)]
    checkpoint_every: Option<Duration>,
    /// The database's page cache ("64MiB", "1GiB", bytes) [default: 64MiB, or the
    /// crawl file's `[state] cache`]. Peak memory grows with it.
    #[arg(long, value_name = "SIZE", value_parser = crawlfile::units::parse_size)]
    cache_size: Option<u64>,
    /// Share this crawl with other workers through Redis (redis://HOST:PORT/DB):
    /// run the same command on every worker. --data is not used.
    #[arg(long, value_name = "URL")]
    shared: Option<String>,
    /// The shared crawl's name (its keys in Redis start with legcrawl:{NAME}:).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Seconds a shared crawl's lease lasts unless renewed; a dead worker's
    /// requests go back to the frontier after it [default: 60].
    #[arg(long, value_name = "SECS")]
    lease_ttl: Option<f64>,
}

/// `--shared` and `--name` together, each checked, or one line saying which
/// is missing.
pub(super) fn shared_target(
    redis: Option<String>,
    name: Option<String>,
) -> anyhow::Result<SharedTarget> {
    match (redis, name) {
        (Some(redis), Some(name)) => Ok(SharedTarget::new(&redis, &name).map_err(BadInput)?),
        (None, _) => Err(BadInput(
            "--name needs --shared redis://HOST:PORT/DB (or a crawl file's [shared] redis)".into(),
        )
        .into()),
        (_, None) => Err(BadInput(
            "--shared needs --name CRAWL, the shared crawl's name (or a crawl file's [shared] name)"
                .into(),
        )
        .into()),
    }
}

/// `--revisit-after`: a duration, `never` or `adaptive`.
fn parse_revisit(value: &str) -> Result<Revisit, String> {
    match value {
        "never" => Ok(Revisit::Never),
        "adaptive" => Ok(Revisit::default()),
        _ => match parse_span(value) {
            Ok(d) if d.is_zero() => Ok(Revisit::EveryRun),
            Ok(d) => Ok(Revisit::After(d)),
            Err(_) => Err(format!(
                "expected \"adaptive\", \"never\" or a duration such as \"0\" (every run), \"12h\" or \"7d\", got {value:?}"
            )),
        },
    }
}

/// A duration as the crawl file writes it ("90s", "1h30m"), or plain seconds.
fn parse_span(value: &str) -> Result<Duration, String> {
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("expected a non-negative duration, got {value:?}"));
    }
    crawlfile::units::parse_duration(value)
}

fn parse_size(value: &str) -> Result<u64, String> {
    match crawlfile::units::parse_size(value)? {
        0 => Err("must be more than 0".into()),
        size => Ok(size),
    }
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
    /// Validates the flags into a configuration: the `--config` file's (or the
    /// defaults), then every flag given on the command line over it. Also returns the
    /// file's legs, if it has any.
    fn config(&self) -> anyhow::Result<(CrawlConfig, Option<Stack>)> {
        let (mut config, file_legs) = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| {
                    let path = path.clone();
                    BadInput(crawlfile::CrawlFileError::Read { path, source }.to_string())
                })?;
                let file = crawlfile::parse(&text, path).map_err(|e| BadInput(e.to_string()))?;
                let mut config = file.config;
                config.crawl_file = Some(CrawlFileCopy {
                    path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
                    text,
                });
                (config, file.legs)
            }
            // A shared crawl keeps nothing in a local directory.
            None if self.shared.is_some() || self.name.is_some() => (CrawlConfig::default(), None),
            None => self.remembered_config()?,
        };
        if let Some(dir) = self.data.given() {
            config.data_dir = dir.clone();
        }
        if self.config.is_some() && config.shared.is_none() {
            note_changed_settings(&config)?;
        }
        let given = |list: &[String]| (!list.is_empty()).then(|| list.to_vec());
        set(&mut config.seeds, given(&self.urls));
        config.max_pages = self.max_pages.or(config.max_pages);
        config.max_depth = self.max_depth.or(config.max_depth);
        if self.concurrency == Some(0) || self.per_host == Some(0) {
            return Err(BadInput("--concurrency and --per-host must be at least 1".into()).into());
        }
        set(&mut config.concurrency, self.concurrency);
        set(&mut config.per_host, self.per_host);
        if let Some(delay) = self.delay {
            config.delay = Some(seconds("delay", delay)?);
        }
        if self.jitter {
            config.jitter = true;
        }
        set(&mut config.max_retries, self.retries);
        config.from = self.from.clone().or(config.from);
        if self.ignore_robots {
            config.obey_robots = false;
        }
        if let Some(retry) = self.robots_retry {
            config.robots_retry = seconds("robots-retry", retry)?;
        }
        set(&mut config.allowed_hosts, given(&self.allow_hosts));
        set(&mut config.user_agent, self.user_agent.clone());
        if let Some(timeout) = self.timeout {
            config.request_timeout = seconds("timeout", timeout)?;
        }
        if let Some(read_timeout) = self.read_timeout {
            config.read_timeout = seconds("read-timeout", read_timeout)?;
        }
        set(&mut config.max_body_bytes, self.max_body);
        config.dedup = self.dedup.or(config.dedup);
        config.bloom_bits = self.bloom_bits.or(config.bloom_bits);
        config.bloom_hashes = self.bloom_hashes.or(config.bloom_hashes);
        if self.obey_nofollow {
            config.follow_nofollow = false;
        }
        set(&mut config.allow, given(&self.allow));
        set(&mut config.deny, given(&self.deny));
        if let Some(grace) = self.grace {
            config.shutdown_grace = seconds("grace", grace)?;
        }
        config.output = self.output.clone().or(config.output);
        config.warc = self.warc.clone().or(config.warc);
        set(&mut config.warc_max_size, self.warc_max_size);
        config.stats = self.stats.clone().or(config.stats);
        set(&mut config.revisit, self.revisit_after);
        // Hub rules come first: a hub is fetched every run whatever else matches.
        let hubs = self.hubs.iter().map(|pattern| RevisitRule {
            pattern: pattern.clone(),
            revisit: Revisit::EveryRun,
        });
        config.revisit_rules = hubs.chain(config.revisit_rules).collect();
        if self.until_idle {
            config.until_idle = true;
        }
        config.max_duration = self.max_duration.or(config.max_duration);
        if let Some(every) = self.checkpoint_every {
            config.checkpoint_every = every;
        }
        set(&mut config.cache_bytes, self.cache_size);
        if self.shared.is_some() || self.name.is_some() {
            // Either flag overrides its half of the crawl file's `[shared]`.
            let file = config.shared.take();
            let redis = self
                .shared
                .clone()
                .or(file.as_ref().map(|t| t.redis.clone()));
            let name = self.name.clone().or(file.map(|t| t.name));
            config.shared = Some(shared_target(redis, name)?);
        }
        if let Some(ttl) = self.lease_ttl {
            config.lease_ttl = seconds("lease-ttl", ttl)?;
            if config.lease_ttl < Duration::from_secs(1) {
                return Err(BadInput("--lease-ttl must be at least 1 second".into()).into());
            }
        }
        Ok((config, file_legs))
    }
}

impl CrawlArgs {
    /// Without `--config`: the crawl file the state in the directory remembers
    /// (its data directory stays the one asked for), else the defaults.
    fn remembered_config(&self) -> anyhow::Result<(CrawlConfig, Option<Stack>)> {
        let dir = self.data.dir();
        let Some(copy) = legcrawl::store::remembered_crawl_file(&dir)? else {
            return Ok((CrawlConfig::default(), None));
        };
        let file = crawlfile::parse(&copy.text, &copy.path).map_err(|e| {
            BadInput(format!(
                "{e} (in the copy {} keeps)",
                dir.join(legcrawl::store::CRAWL_FILE).display()
            ))
        })?;
        tracing::info!(
            file = %copy.path.display(),
            "continuing with the crawl file this state runs with"
        );
        let mut config = file.config;
        config.data_dir = dir;
        // Remembered again as it is (nothing is written), or after --fresh.
        config.crawl_file = Some(copy);
        Ok((config, file.legs))
    }
}

/// With `--config` on a state that remembers another crawl file whose scope or
/// politeness settings differ: one line saying which, and that the new file's
/// hold from now on.
fn note_changed_settings(config: &CrawlConfig) -> anyhow::Result<()> {
    let Some(copy) = legcrawl::store::remembered_crawl_file(&config.data_dir)? else {
        return Ok(());
    };
    if config.crawl_file.as_ref() == Some(&copy) {
        return Ok(());
    }
    let Ok(before) = crawlfile::parse(&copy.text, &copy.path) else {
        return Ok(());
    };
    let (a, b) = (&before.config, config);
    let changed: Vec<&str> = [
        ("allow", a.allow != b.allow),
        ("deny", a.deny != b.deny),
        ("allowed hosts", a.allowed_hosts != b.allowed_hosts),
        ("max depth", a.max_depth != b.max_depth),
        ("delay", a.delay != b.delay || a.jitter != b.jitter),
        ("per host", a.per_host != b.per_host),
        ("concurrency", a.concurrency != b.concurrency),
        ("robots", a.obey_robots != b.obey_robots),
        ("user agent", a.user_agent != b.user_agent),
        ("nofollow", a.follow_nofollow != b.follow_nofollow),
    ]
    .into_iter()
    .filter_map(|(name, differs)| differs.then_some(name))
    .collect();
    if !changed.is_empty() {
        say!(
            "legcrawl: this state ran with {} until now; {} changes its {} (the new settings hold from now on)",
            copy.path.display(),
            config
                .crawl_file
                .as_ref()
                .map_or_else(|| "this run".into(), |c| c.path.display().to_string()),
            changed.join(", "),
        );
    }
    Ok(())
}

/// `1.2 MB`-style byte counts for the summary line.
fn human_bytes(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", bytes as f64 / 1e6),
        _ => format!("{:.2} GB", bytes as f64 / 1e9),
    }
}

/// Sets `slot` when the flag was given.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}

/// The legs the CLI crawls with: the crawl file's, else the bundled ones (links,
/// canonical URLs, a page item), configured with `config`.
fn bundled_legs(config: &CrawlConfig, file_legs: Option<Stack>) -> anyhow::Result<Arc<dyn Leg>> {
    let mut stack = file_legs.unwrap_or_else(crawlfile::default_legs);
    stack
        .configure(config)
        .map_err(|e| BadInput(e.to_string()))?;
    Ok(Arc::new(stack))
}

pub fn run(args: CrawlArgs) -> anyhow::Result<ExitCode> {
    let (config, file_legs) = args.config()?;
    if let Some(target) = config.shared.clone() {
        return run_shared(&args, &config, file_legs, &target);
    }
    if let Some(path) = &config.stats {
        super::stats::check_path("--stats", path)?;
    }
    if let Some(path) = &config.output {
        super::stats::check_path("--output", path)?;
    }
    if let Some(dir) = &config.warc {
        super::stats::check_dir("--warc", dir)?;
    }
    if args.fresh {
        // Nothing is deleted unless the crawl can start again right away.
        if config.seeds.is_empty() {
            return Err(BadInput(format!(
                "--fresh deletes the state in {} and starts again from the seeds given, but no URL (or crawl-file seeds) was given; nothing was deleted",
                config.data_dir.display()
            ))
            .into());
        }
        let exists = config.data_dir.join(legcrawl::store::MARKER_FILE).exists();
        if exists && !super::reset::confirm_delete(&config.data_dir, args.yes, "--fresh")? {
            say!("Not deleted; nothing crawled.");
            return Ok(ExitCode::from(1));
        }
        super::reset::delete_state(&config.data_dir)?;
    }
    let legs = bundled_legs(&config, file_legs)?;
    let (runtime, stop) = runtime_and_stop()?;
    let result = runtime
        .block_on(engine::run(
            &config,
            legs,
            async move { stop.notified().await },
        ))
        .map_err(anyhow::Error::from);
    if let Some(path) = &config.stats {
        write_stats(path, &config, result.as_ref());
    }
    let report = result?;
    // A command that continues this crawl: without --config, a state runs with
    // the crawl file it remembers.
    let resume = match (&args.config, args.data.given()) {
        (Some(file), Some(dir)) => format!(
            "legcrawl crawl --config {} --data {}",
            file.display(),
            dir.display()
        ),
        (Some(file), None) => format!("legcrawl crawl --config {}", file.display()),
        (None, _) => format!("legcrawl crawl --data {}", config.data_dir.display()),
    };
    print_report(&config, &report, &resume);
    Ok(match report.outcome {
        RunOutcome::Interrupted => ExitCode::from(130),
        _ => ExitCode::SUCCESS,
    })
}

/// One worker of a shared crawl (`--shared`).
fn run_shared(
    args: &CrawlArgs,
    config: &CrawlConfig,
    file_legs: Option<Stack>,
    target: &SharedTarget,
) -> anyhow::Result<ExitCode> {
    // Not yet exact for a shared crawl: refused rather than done approximately.
    if let Some(path) = &config.output {
        super::stats::check_path("--output", path)?;
    }
    let unsupported = [
        ("--warc", config.warc.is_some()),
        ("--stats", config.stats.is_some()),
        ("--fresh", args.fresh),
    ];
    if let Some((flag, _)) = unsupported.iter().find(|(_, given)| *given) {
        return Err(BadInput(format!(
            "{flag} is not available with --shared yet (read the crawl's items with: legcrawl dump --shared {} --name {} items)",
            target.redis, target.name
        ))
        .into());
    }
    let legs = bundled_legs(config, file_legs)?;
    let (runtime, stop) = runtime_and_stop()?;
    let report = runtime.block_on(legcrawl::shared::run(
        config,
        target,
        config.lease_ttl,
        legs,
        async move { stop.notified().await },
    ))?;
    let resume = format!(
        "legcrawl crawl --shared {} --name {}",
        target.redis, target.name
    );
    print_report(config, &report, &resume);
    Ok(match report.outcome {
        RunOutcome::Interrupted => ExitCode::from(130),
        _ => ExitCode::SUCCESS,
    })
}

/// Writes the `--stats` report; a failure is one line on stderr, not a failed crawl.
fn write_stats(
    path: &std::path::Path,
    config: &CrawlConfig,
    result: Result<&RunReport, &anyhow::Error>,
) {
    if let Err(error) = super::stats::write(path, &config.data_dir, result) {
        say!(
            "legcrawl: could not write the run report to {}: {error:#}",
            path.display()
        );
    }
}

/// The crawl's runtime, and what the first Ctrl-C notifies.
fn runtime_and_stop() -> anyhow::Result<(tokio::runtime::Runtime, Arc<tokio::sync::Notify>)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let stop = Arc::new(tokio::sync::Notify::new());
    install_signal_handler(Arc::clone(&stop))?;
    Ok((runtime, stop))
}

/// First SIGINT/SIGTERM: graceful stop. Second: exit at once (the state is
/// consistent at every instant; only uncommitted work is redone).
fn install_signal_handler(stop: Arc<tokio::sync::Notify>) -> anyhow::Result<()> {
    let signals = AtomicUsize::new(0);
    ctrlc::set_handler(move || {
        if signals.fetch_add(1, Ordering::SeqCst) == 0 {
            say!("legcrawl: stopping (in-flight requests get a moment to finish; Ctrl-C again to quit now)");
            stop.notify_one();
        } else {
            say!("legcrawl: quitting now; the state is consistent, uncommitted pages will be fetched again");
            std::process::exit(130);
        }
    })
    .context("installing the Ctrl-C handler")
}

fn print_report(config: &CrawlConfig, r: &RunReport, resume: &str) {
    let t = &r.totals;
    let rate = t.pages as f64 / r.elapsed.as_secs_f64().max(0.001);
    let unreachable = match r.unreachable {
        0 => String::new(),
        1 => ", 1 host unreachable".to_owned(),
        n => format!(", {n} hosts unreachable"),
    };
    say!(
        "run {} ({}): {} — {} pages ({rate:.0}/s, {}): {} new, {} changed, {} unchanged ({} not modified), {} gone, {} failed, {} blocked; {} items, {} queued, {} duplicates filtered, {} left in the frontier{unreachable} ({:.1} s)",
        r.run,
        match (&config.shared, r.new_cycle) {
            (Some(_), _) => "shared",
            (None, true) => "new cycle",
            (None, false) => "resumed",
        },
        r.outcome.as_str(),
        t.pages,
        human_bytes(r.bytes),
        t.new,
        t.changed,
        t.unchanged,
        t.not_modified,
        t.gone,
        t.failed,
        t.blocked,
        r.items,
        r.enqueued,
        r.filtered,
        r.frontier,
        r.elapsed.as_secs_f64()
    );
    if matches!(
        r.outcome,
        RunOutcome::Interrupted | RunOutcome::Limit | RunOutcome::Idle
    ) && r.frontier > 0
    {
        let place = match &config.shared {
            Some(target) => format!("the shared crawl {:?} in Redis", target.name),
            None => config.data_dir.display().to_string(),
        };
        say!("state saved in {place}; resume with: {resume}");
    }
}
