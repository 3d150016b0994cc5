//! `legcrawl crawl`: flags → the run's job ([`legcrawl::job`]) and its
//! per-run options → [`CrawlConfig`], the legs, signals, summary, exit status.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use legcrawl::config::{CrawlConfig, DedupMode, Revisit, RevisitRule};
use legcrawl::crawlfile::{self, CrawlFile, units};
use legcrawl::engine;
use legcrawl::job;
use legcrawl::legs::Leg;
use legcrawl::page::scope::{Scope, leg_config};
use legcrawl::shared::SharedTarget;

pub mod reparse;
mod report;
mod runtime;
mod shared;

use report::{exit_status, print_report, write_stats};
use runtime::runtime_and_stop;

use super::stderr::say;
use super::{BadInput, DataArg, counted};

/// Where `crawl --help` lists the settings that define a crawl (stored in the
/// state as its job) and the options of one run.
const JOB: &str = "Job settings (stored in the state: given once, they hold for every later run)";
const RUN: &str = "Options of this run only";

/// Arguments of `crawl`.
#[derive(Debug, clap::Args)]
pub struct CrawlArgs {
    /// Seed URLs, added to the state's seeds. Without any, the crawl runs the
    /// job stored in --data.
    urls: Vec<String>,
    #[command(flatten)]
    data: DataArg,
    /// Replace the stored job with this TOML crawl file's (see data/examples/;
    /// `legcrawl dump job` prints one); every flag given on the command line
    /// overrides the file. Its per-run options apply to this run.
    #[arg(long, value_name = "FILE", help_heading = JOB)]
    config: Option<PathBuf>,
    /// Stop after this many pages in this run (it resumes in the next).
    #[arg(long, value_name = "N", help_heading = RUN)]
    max_pages: Option<u64>,
    /// Do not follow links deeper than N (seeds are depth 0).
    #[arg(long, value_name = "N", help_heading = JOB)]
    max_depth: Option<u32>,
    /// Requests in flight at once [default: 16].
    #[arg(long, value_name = "N", help_heading = JOB)]
    concurrency: Option<usize>,
    /// Append committed items to this JSON-lines file; each run appends what
    /// was committed since, never twice, even after the file was moved away.
    #[arg(long, value_name = "FILE.jsonl", help_heading = JOB)]
    output: Option<PathBuf>,
    /// Write WARC 1.1 files of every fetch (request, response, revisit records,
    /// one gzip member each) into this directory, created if missing; a record
    /// is there exactly when its page's completion is durable.
    #[arg(long, value_name = "DIR", help_heading = JOB)]
    warc: Option<PathBuf>,
    /// Begin a new WARC file past this size ("512MiB", "1GB", bytes) [default: 1GB].
    #[arg(long, value_name = "SIZE", value_parser = units::size_arg, help_heading = JOB)]
    warc_max_size: Option<u64>,
    /// Write a JSON report of each run here when it ends (also after Ctrl-C): run,
    /// outcome, times, the end-of-run totals and every counter. A failure to write it
    /// is reported and does not change the exit code.
    #[arg(long, value_name = "FILE.json", help_heading = JOB)]
    stats: Option<PathBuf>,
    /// Delete the stored state (job included) first and start again from the
    /// seeds given (scrapy-redis SCHEDULER_PERSIST=False); asks first unless --yes.
    #[arg(long, help_heading = RUN)]
    fresh: bool,
    /// With --fresh: delete without asking.
    #[arg(long, requires = "fresh", help_heading = RUN)]
    yes: bool,
    /// Seen-set mode, fixed when the state is created: exact (Bloom + exact
    /// confirmation) or bloom (Bloom alone, constant size).
    #[arg(long, value_name = "MODE", value_parser = parse_dedup, help_heading = JOB)]
    dedup: Option<DedupMode>,
    /// Bloom filter size as log2 of bits, fixed at creation (default: sized to the
    /// crawl in exact mode, from 2^20 bits; 30 = 128 MiB in bloom mode).
    #[arg(long, value_name = "BITS", value_parser = clap::value_parser!(u8).range(10..=36), help_heading = JOB)]
    bloom_bits: Option<u8>,
    /// Bloom hash functions (fixed at creation; default 6).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u8).range(1..=32), help_heading = JOB)]
    bloom_hashes: Option<u8>,
    /// User-Agent header (also the robots.txt product token).
    #[arg(long, value_name = "UA", help_heading = JOB)]
    user_agent: Option<String>,
    /// Also allow links to this host (repeatable; replaces the stored list);
    /// default: the seeds' hosts.
    #[arg(long = "allow-host", value_name = "HOST", help_heading = JOB)]
    allow_hosts: Vec<String>,
    /// Only follow links whose URL matches this regex (repeatable; replaces
    /// the stored list).
    #[arg(long, value_name = "REGEX", help_heading = JOB)]
    allow: Vec<String>,
    /// Never follow links whose URL matches this regex (repeatable; replaces
    /// the stored list).
    #[arg(long, value_name = "REGEX", help_heading = JOB)]
    deny: Vec<String>,
    /// Skip links marked rel=nofollow.
    #[arg(long, help_heading = JOB)]
    obey_nofollow: bool,
    /// Stay below the seeds' directories, as wget -np: on a seed's host, only
    /// links within the directory of one of its seeds are followed (seeds,
    /// redirects and sitemap files are exempt).
    #[arg(long, help_heading = JOB)]
    no_parent: bool,
    /// Also fetch each page's stylesheets, scripts, images and icons, and the
    /// url()s and @imports of stylesheets, as wget -p, whatever the depth,
    /// host and allow/deny rules say (robots.txt still applies); they are
    /// archived with --warc and make no items.
    #[arg(long, help_heading = JOB)]
    page_requisites: bool,
    /// Do not queue the Sitemap: lines of robots.txt files, nor read sitemap
    /// files unless a sitemap leg is configured.
    #[arg(long, help_heading = JOB)]
    no_sitemaps: bool,
    /// Send this header with every request, "Name: value" (repeatable;
    /// replaces the stored headers).
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = parse_header, help_heading = JOB)]
    headers: Vec<(String, String)>,
    /// Make items from answers with this error status too, as from 2xx ones
    /// (repeatable, e.g. 404; replaces the stored list). By default an error
    /// answer is counted and recorded but makes no items and runs no item legs.
    #[arg(long = "keep-status", value_name = "CODE", value_parser = parse_keep_status, help_heading = JOB)]
    keep_status: Vec<u16>,
    #[command(flatten, next_help_heading = JOB)]
    proxy: super::access::ProxyArgs,
    #[command(flatten, next_help_heading = JOB)]
    trust: super::access::TrustArgs,
    /// Do not keep or send cookies (by default the cookies servers set are
    /// kept in the state, session cookies too, and sent back by RFC 6265's
    /// rules in this and later runs).
    #[arg(long, help_heading = JOB)]
    no_cookies: bool,
    /// Time allowed per request, headers and body ("30s", "500ms", seconds)
    /// [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = units::positive_duration_arg, help_heading = JOB)]
    timeout: Option<Duration>,
    /// Time a body read may stall before the request fails [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = units::positive_duration_arg, help_heading = JOB)]
    read_timeout: Option<Duration>,
    /// Largest decoded body ("5MB", "10MiB", bytes); longer ones are cut and
    /// flagged [default: 10MiB].
    #[arg(long, value_name = "SIZE", value_parser = units::size_arg, help_heading = JOB)]
    max_body: Option<u64>,
    /// Requests in flight at once to one host [default: 2].
    #[arg(long, value_name = "N", help_heading = JOB)]
    per_host: Option<usize>,
    /// Time between the starts of two requests to one host ("1s", "250ms",
    /// seconds) [default: 1s for remote hosts, 0 for loopback].
    #[arg(long, value_name = "DURATION", value_parser = units::duration_arg, help_heading = JOB)]
    delay: Option<Duration>,
    /// Randomize each per-host delay between 0.5x and 1.5x.
    #[arg(long, help_heading = JOB)]
    jitter: bool,
    /// Retries of a failed request (timeouts, connection errors, 408/429/5xx) [default: 2].
    #[arg(long, value_name = "N", help_heading = JOB)]
    retries: Option<u32>,
    /// Send a From header with this contact e-mail.
    #[arg(long, value_name = "EMAIL", help_heading = JOB)]
    from: Option<String>,
    /// Wait before asking again for a robots.txt that answered 5xx or could not be
    /// reached [default: 60s]; after three such answers the host waits for the next run.
    #[arg(long, value_name = "DURATION", value_parser = units::duration_arg, help_heading = JOB)]
    robots_retry: Option<Duration>,
    /// Do not fetch or obey robots.txt (only for sites you run yourself).
    #[arg(long, help_heading = JOB)]
    ignore_robots: bool,
    /// Time in-flight requests may finish after the first Ctrl-C [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = units::duration_arg, help_heading = RUN)]
    grace: Option<Duration>,
    /// This run's revisit policy instead of the job's (the crawl file's
    /// `[revisit] after`; not stored): a duration ("12h", "7d"; "0" asks every
    /// recorded page again in this run), "never", "estimated" (by each page's
    /// estimated change rate, for a daily crawl, within 1h..30d) or "adaptive"
    /// (Nutch's schedule: 1d, x0.8 on a change, x1.4 without, within 1h..30d;
    /// also "nutch") [default: the job's, estimated]. Seeds are fetched again
    /// in every run.
    #[arg(long, value_name = "WHEN", value_parser = parse_revisit, help_heading = RUN)]
    revisit_after: Option<Revisit>,
    /// The most revisits of stored pages one cycle makes: the N whose revisit
    /// buys the most expected freshness (by each page's estimated change
    /// rate), due or not, instead of every due page. Pages under a fixed
    /// interval (hubs, rules) are asked when due, outside the budget
    /// [default: no budget].
    #[arg(long, value_name = "N", help_heading = JOB)]
    revisit_budget: Option<u64>,
    /// Render new and changed HTML pages in headless Chromium (the machine's
    /// chromium; `[render]` narrows it to hosts and sets its limits): the
    /// legs read the DOM the page's scripts built. The page's own requests
    /// obey robots.txt and stay on its host.
    #[arg(long, help_heading = JOB)]
    render: bool,
    /// Pages whose URL matches this regex are hubs, fetched again in every run
    /// (repeatable; e.g. index pages, feeds).
    #[arg(long = "revisit", value_name = "REGEX", help_heading = JOB)]
    hubs: Vec<String>,
    /// End the run when nothing can be fetched within a minute (hosts backed off by
    /// Retry-After or a failing robots.txt); what is left waits for the next run.
    #[arg(long, help_heading = RUN)]
    until_idle: bool,
    /// Stop starting requests after this long ("30m", "2h", or seconds); the run
    /// resumes in the next.
    #[arg(long, value_name = "DURATION", value_parser = units::duration_arg, help_heading = RUN)]
    max_duration: Option<Duration>,
    /// Checkpoint the seen set at least this often [default: 30s, or the crawl
    /// file's `dedup.checkpoint`] (also after 2^18 new URLs).
    #[arg(long, value_name = "DURATION", value_parser = units::duration_arg, help_heading = RUN)]
    checkpoint_every: Option<Duration>,
    /// The database's page cache ("64MiB", "1GiB", bytes) [default: 64MiB, or the
    /// crawl file's `[state] cache`]. Peak memory grows with it.
    #[arg(long, value_name = "SIZE", value_parser = units::size_arg, help_heading = RUN)]
    cache_size: Option<u64>,
    /// Share this crawl with other workers through Redis (redis://HOST:PORT/DB):
    /// run the same command on every worker. --data is not used.
    #[arg(long, value_name = "URL", help_heading = RUN)]
    shared: Option<String>,
    /// The shared crawl's name (its keys in Redis start with legcrawl:{NAME}:).
    #[arg(long, value_name = "NAME", help_heading = RUN)]
    name: Option<String>,
    /// The CA certificate (PEM) that signed a rediss:// server's certificate
    /// [default: the system's roots].
    #[arg(long, value_name = "FILE", help_heading = RUN)]
    shared_cacert: Option<PathBuf>,
    /// A client certificate (PEM) for a rediss:// server that asks for one
    /// (mutual TLS), with --shared-key.
    #[arg(long, value_name = "FILE", help_heading = RUN)]
    shared_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", help_heading = RUN)]
    shared_key: Option<PathBuf>,
    /// Time a shared crawl's lease lasts unless renewed; a dead worker's
    /// requests go back to the frontier after it [default: 60s].
    #[arg(long, value_name = "DURATION", value_parser = units::duration_arg, help_heading = RUN)]
    lease_ttl: Option<Duration>,
}

/// The TLS files of a `rediss://` target, as given (flags or crawl file).
#[derive(Debug, Default)]
pub(super) struct TlsFiles<'a> {
    /// `--shared-cacert`.
    pub(super) cacert: Option<&'a Path>,
    /// `--shared-cert`.
    pub(super) cert: Option<&'a Path>,
    /// `--shared-key`.
    pub(super) key: Option<&'a Path>,
}

/// `--shared` and `--name` together, each checked, with the TLS files read,
/// or one line saying what is missing or wrong.
pub(super) fn shared_target(
    redis: Option<String>,
    name: Option<String>,
    tls: &TlsFiles<'_>,
) -> anyhow::Result<SharedTarget> {
    match (redis, name) {
        (Some(redis), Some(name)) => Ok(SharedTarget::new(&redis, &name)
            .and_then(|t| t.with_cacert(tls.cacert))
            .and_then(|t| t.with_client_cert(tls.cert, tls.key))
            .map_err(BadInput)?),
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

/// `--revisit-after`: a duration, `never`, `estimated`, or `adaptive` (also
/// spelled `nutch`).
fn parse_revisit(value: &str) -> Result<Revisit, String> {
    match value {
        "never" => Ok(Revisit::Never),
        "estimated" => Ok(Revisit::default()),
        "adaptive" | "nutch" => Ok(Revisit::nutch()),
        _ => match units::parse_duration(value) {
            Ok(d) if d.is_zero() => Ok(Revisit::EveryRun),
            Ok(d) => Ok(Revisit::After(d)),
            Err(_) => Err(format!(
                "expected \"estimated\", \"adaptive\", \"never\" or a duration such as \"0\" (every run), \"12h\" or \"7d\", got {value:?}"
            )),
        },
    }
}

/// `--header "Name: value"`: a valid header name and value.
fn parse_header(value: &str) -> Result<(String, String), String> {
    let (name, text) = value
        .split_once(':')
        .ok_or_else(|| format!("expected \"Name: value\", got {value:?}"))?;
    let (name, text) = (name.trim(), text.trim());
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(format!("{name:?} is not a header name"));
    }
    if http::HeaderValue::from_str(text).is_err() {
        return Err(format!("the value of {name} is not a header value"));
    }
    Ok((name.to_owned(), text.to_owned()))
}

fn parse_keep_status(value: &str) -> Result<u16, String> {
    let code = value
        .parse::<u16>()
        .map_err(|_| format!("expected an HTTP status code, got {value:?}"))?;
    legcrawl::config::check_keep_status(code)
}

fn parse_dedup(value: &str) -> Result<DedupMode, String> {
    DedupMode::parse(value).ok_or_else(|| format!("unknown dedup mode {value:?} (exact or bloom)"))
}

impl CrawlArgs {
    /// The `--config` crawl file, read and checked.
    fn crawl_file(&self) -> anyhow::Result<Option<CrawlFile>> {
        let Some(path) = &self.config else {
            return Ok(None);
        };
        Ok(Some(
            crawlfile::load(path).map_err(|e| BadInput(e.to_string()))?,
        ))
    }

    /// This run's configuration before the state is opened: `file`'s (or the
    /// defaults), the flags over it, the state directory and the per-run
    /// options. It opens the state and starts a shared crawl; a crawl on the
    /// embedded state then runs the stored job (see [`run`]).
    fn draft(&self, file: Option<&CrawlFile>) -> anyhow::Result<CrawlConfig> {
        if self.concurrency == Some(0) || self.per_host == Some(0) {
            return Err(BadInput("--concurrency and --per-host must be at least 1".into()).into());
        }
        let patterns = [
            ("--allow", "link pattern", &self.allow),
            ("--deny", "link pattern", &self.deny),
            ("--revisit", "revisit rule", &self.hubs),
        ];
        for (flag, what, list) in patterns {
            for pattern in list {
                if let Err(e) = regex::Regex::new(pattern) {
                    // regex's message ends with the reason, after the pattern
                    // drawn over several lines.
                    let text = e.to_string();
                    let reason = text.rsplit("error: ").next().unwrap_or(&text).trim();
                    return Err(BadInput(format!(
                        "{flag}: {what} {pattern:?} is not a valid regex: {reason}"
                    ))
                    .into());
                }
            }
        }
        self.proxy.choice()?;
        if self
            .lease_ttl
            .is_some_and(|ttl| ttl < Duration::from_secs(1))
        {
            return Err(BadInput("--lease-ttl must be at least 1 second".into()).into());
        }
        let mut config = file.map_or_else(CrawlConfig::default, |f| f.config.clone());
        if let Some(dir) = self.data.given() {
            config.data_dir = dir.clone();
        }
        if !self.urls.is_empty() {
            config.seeds = self.urls.clone();
        }
        self.apply_job_flags(&mut config);
        self.apply_run_options(&mut config);
        let tls_flag =
            self.shared_cacert.is_some() || self.shared_cert.is_some() || self.shared_key.is_some();
        if self.shared.is_some() || self.name.is_some() || tls_flag {
            // Each flag overrides its part of the crawl file's `[shared]`.
            let file = config.shared.take();
            let redis = self
                .shared
                .clone()
                .or(file.as_ref().map(|t| t.redis.clone()));
            let name = self.name.clone().or(file.as_ref().map(|t| t.name.clone()));
            let cacert = self
                .shared_cacert
                .clone()
                .or(file.as_ref().and_then(|t| t.cacert.clone()));
            // The certificate and its key go together: a flag replaces both.
            let (cert, key) = match (&self.shared_cert, &self.shared_key, &file) {
                (None, None, Some(t)) => (t.client_cert.clone(), t.client_key.clone()),
                (cert, key, _) => (cert.clone(), key.clone()),
            };
            let tls = TlsFiles {
                cacert: cacert.as_deref(),
                cert: cert.as_deref(),
                key: key.as_deref(),
            };
            config.shared = Some(shared_target(redis, name, &tls)?);
        }
        Ok(config)
    }

    /// Applies the job settings given as flags (each replaces the stored one).
    fn apply_job_flags(&self, config: &mut CrawlConfig) {
        let given = |list: &[String]| (!list.is_empty()).then(|| list.to_vec());
        config.max_depth = self.max_depth.or(config.max_depth);
        set(&mut config.concurrency, self.concurrency);
        set(&mut config.per_host, self.per_host);
        config.delay = self.delay.or(config.delay);
        if self.jitter {
            config.jitter = true;
        }
        set(&mut config.max_retries, self.retries);
        config.from = self.from.clone().or(config.from.take());
        if self.ignore_robots {
            config.obey_robots = false;
        }
        set(&mut config.robots_retry, self.robots_retry);
        config.revisit_budget = self.revisit_budget.or(config.revisit_budget);
        if self.render && config.render.is_none() {
            config.render = Some(legcrawl::render::RenderSettings::default());
        }
        set(&mut config.allowed_hosts, given(&self.allow_hosts));
        set(&mut config.user_agent, self.user_agent.clone());
        set(&mut config.request_timeout, self.timeout);
        set(&mut config.read_timeout, self.read_timeout);
        set(
            &mut config.max_body_bytes,
            self.max_body
                .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX)),
        );
        config.dedup = self.dedup.or(config.dedup);
        config.bloom_bits = self.bloom_bits.or(config.bloom_bits);
        config.bloom_hashes = self.bloom_hashes.or(config.bloom_hashes);
        if self.obey_nofollow {
            config.follow_nofollow = false;
        }
        if self.no_parent {
            config.no_parent = true;
        }
        if self.page_requisites {
            config.page_requisites = true;
        }
        if self.no_sitemaps {
            config.sitemaps = false;
        }
        if !self.headers.is_empty() {
            config.extra_headers = self.headers.clone();
        }
        if !self.keep_status.is_empty() {
            config.keep_status = legcrawl::config::status_set(self.keep_status.clone());
        }
        // Checked in `draft`.
        if let Ok(Some(choice)) = self.proxy.choice() {
            config.proxy = choice;
        }
        if let Some(cacert) = &self.trust.cacert {
            config.cacert = Some(cacert.clone());
        }
        if self.no_cookies {
            config.cookies = false;
        }
        set(&mut config.allow, given(&self.allow));
        set(&mut config.deny, given(&self.deny));
        config.output = self.output.clone().or(config.output.take());
        config.warc = self.warc.clone().or(config.warc.take());
        set(&mut config.warc_max_size, self.warc_max_size);
        config.stats = self.stats.clone().or(config.stats.take());
        if !self.hubs.is_empty() {
            // Hub rules come first: a hub is fetched every run whatever else
            // matches. A hub given again replaces its stored rule.
            let hubs = self.hubs.iter().map(|pattern| RevisitRule {
                pattern: pattern.clone(),
                revisit: Revisit::EveryRun,
            });
            let rest = std::mem::take(&mut config.revisit_rules)
                .into_iter()
                .filter(|rule| !self.hubs.contains(&rule.pattern));
            config.revisit_rules = hubs.chain(rest).collect();
        }
    }

    /// Applies the per-run options given as flags.
    fn apply_run_options(&self, config: &mut CrawlConfig) {
        config.max_pages = self.max_pages.or(config.max_pages);
        if self.until_idle {
            config.until_idle = true;
        }
        config.max_duration = self.max_duration.or(config.max_duration);
        set(&mut config.shutdown_grace, self.grace);
        set(&mut config.checkpoint_every, self.checkpoint_every);
        set(&mut config.cache_bytes, self.cache_size);
        set(&mut config.lease_ttl, self.lease_ttl);
        config.revisit_this_run = self.revisit_after.or(config.revisit_this_run);
    }
}

/// Sets `slot` when the flag was given.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}

/// The legs the CLI crawls with ([`crawlfile::crawl_legs`]), configured with
/// `config`.
fn bundled_legs(
    config: &CrawlConfig,
    legs: Option<legcrawl::legs::Stack>,
    sitemap_leg: bool,
) -> anyhow::Result<Arc<dyn Leg>> {
    let mut stack =
        crawlfile::crawl_legs(config, legs, sitemap_leg).map_err(|e| BadInput(e.to_string()))?;
    stack
        .configure(config)
        .map_err(|e| BadInput(e.to_string()))?;
    Ok(Arc::new(stack))
}

pub fn run(args: CrawlArgs) -> anyhow::Result<ExitCode> {
    let file = args.crawl_file()?;
    let draft = args.draft(file.as_ref())?;
    if let Some(target) = draft.shared.clone() {
        return shared::run_shared(&args, &draft, file, &target);
    }
    check_outputs(&draft)?;
    check_settings(&args, file.as_ref(), &draft)?;
    // The CA file given (flag or crawl file), before a state is made; a
    // stored job's is checked once it is resolved.
    super::access::check_trust(draft.cacert.as_deref())?;
    if args.fresh {
        // Nothing is deleted unless the crawl can start again right away.
        if draft.seeds.is_empty() {
            return Err(BadInput(format!(
                "--fresh deletes the state in {} and starts again from the seeds given, but no URL (or crawl-file seeds) was given; nothing was deleted",
                draft.data_dir.display()
            ))
            .into());
        }
        let exists = draft.data_dir.join(legcrawl::store::MARKER_FILE).exists();
        if exists && !super::reset::confirm_delete(&draft.data_dir, args.yes, "--fresh")? {
            say!("Not deleted; nothing crawled.");
            return Ok(ExitCode::from(1));
        }
        super::reset::delete_state(&draft.data_dir)?;
    }
    let mut state = engine::open_state(&draft)?;
    // Every dump of this state reads through the crawl until it closes it.
    super::beside::start(&mut state);
    // The job: the crawl file given, else the stored job, then the flags.
    let stored = state.latest_job()?;
    // No run is begun yet: the previous run is the last one recorded. This
    // build stores the job with the first run; runs without one were left by
    // a build before stored jobs, and the one-time job creation went with the
    // other upgrades (issue 28).
    if stored.is_none() && state.previous_run()?.is_some() {
        return Err(BadInput(format!(
            "{}: has runs but no stored job (an earlier build wrote it); the last build that makes its job is legcrawl commit {}: run it once on this state",
            state.dir().display(),
            legcrawl::store::LAST_BUILD_READING_OLD_FORMATS
        ))
        .into());
    }
    let facts = engine::job_facts(&state, &draft.seeds)?;
    let resolved = job::resolve(
        stored.as_ref().map(|j| (j.version, j.text.as_str())),
        file.as_ref(),
        |c| args.apply_job_flags(c),
        &facts,
    )?;
    if let Some(stored) = &stored {
        for change in &resolved.changes {
            say!(
                "legcrawl: job {} -> {}: {change}",
                stored.version,
                stored.version + 1
            );
        }
        if job::legs_key(&stored.text) != job::legs_key(&resolved.text) {
            let since = u32::try_from(stored.version + 1).unwrap_or(u32::MAX);
            say_unseen(&state, since, &draft.data_dir)?;
        }
    }
    let config = resolved.config.with_run_options(&draft);
    check_outputs(&config)?;
    check_hosts(&config)?;
    super::access::check_trust(config.cacert.as_deref())?;
    let scope = Scope::of_crawl(&config, &facts.seeds, &config.seeds);
    let legs = bundled_legs(
        &leg_config(&config, &scope),
        resolved.legs,
        resolved.sitemap_leg,
    )?;
    let (runtime, stop) = runtime_and_stop()?;
    let result = runtime
        .block_on(engine::run_job(
            state,
            &config,
            legs,
            &resolved.text,
            async move { stop.notified().await },
        ))
        .map_err(anyhow::Error::from);
    if let Some(path) = &config.stats {
        write_stats(path, &config, result.as_ref());
    }
    let report = result?;
    // The job is stored: the state's directory is all a resume needs.
    let resume = format!("legcrawl crawl --data {}", config.data_dir.display());
    print_report(&config, &report, &resume);
    Ok(exit_status(&report))
}

/// The line that follows a change of the legs: how many stored pages the
/// legs of job version `since` have not seen, and how they will.
fn say_unseen(state: &legcrawl::store::State, since: u32, data: &Path) -> anyhow::Result<()> {
    let (stored, not_stored) = engine::unseen_by_legs(state, since)?;
    if stored > 0 {
        say!(
            "legcrawl: the new legs have not seen {}: `legcrawl reparse --data {}` runs them over their stored responses (else each page runs them when it changes)",
            counted(stored, "stored page", "stored pages"),
            data.display()
        );
    }
    if not_stored > 0 {
        say!(
            "legcrawl: the new legs have not seen {} whose responses are not stored (crawl with --warc DIR to keep them): each runs them when it changes",
            counted(not_stored, "page", "pages")
        );
    }
    Ok(())
}

/// Bad settings are refused before the state (or Redis) is touched: the job
/// the flags and `file` make over the defaults must resolve, and its legs
/// configure, with the run options of `draft`.
fn check_settings(
    args: &CrawlArgs,
    file: Option<&CrawlFile>,
    draft: &CrawlConfig,
) -> anyhow::Result<()> {
    let facts = job::StateFacts::default();
    let trial = job::resolve(None, file, |c| args.apply_job_flags(c), &facts)
        .map_err(|e| BadInput(e.to_string()))?;
    bundled_legs(
        &trial.config.with_run_options(draft),
        trial.legs,
        trial.sitemap_leg,
    )?;
    Ok(())
}

/// Every host rule's password variable is set: a missing one stops the run
/// before anything is fetched (exit 2), naming the variable.
fn check_hosts(config: &CrawlConfig) -> anyhow::Result<()> {
    match config
        .hosts
        .iter()
        .find_map(legcrawl::fetch::hosts::rule_error)
    {
        Some(message) => Err(BadInput(message).into()),
        None => Ok(()),
    }
}

/// The files and directory a run writes must be writable where they are.
fn check_outputs(config: &CrawlConfig) -> anyhow::Result<()> {
    if let Some(path) = &config.stats {
        super::stats::check_path("--stats", path)?;
    }
    if let Some(path) = &config.output {
        super::stats::check_path("--output", path)?;
    }
    if let Some(dir) = &config.warc {
        super::stats::check_dir("--warc", dir)?;
    }
    Ok(())
}
