//! The one crawl configuration every part reads.
//!
//! CLI flags and the crawl file ([`crate::crawlfile`]) both become a
//! [`CrawlConfig`]. Units are in the field docs. Depends on [`crate::store`]
//! (the dedup mode, checkpoint and cache defaults) and [`crate::shared_target`]
//! (the Redis target and lease default); `url` redacts a proxy password.

use std::path::PathBuf;
use std::time::Duration;

/// The per-host delay for remote hosts when none is configured.
pub const DEFAULT_DELAY: Duration = Duration::from_secs(1);

/// A host's delay when the crawl sets none: none on loopback (a test server
/// or a local mirror), else [`DEFAULT_DELAY`].
pub fn default_delay(host: &str) -> Duration {
    if is_loopback(host) {
        Duration::ZERO
    } else {
        DEFAULT_DELAY
    }
}

/// True for `localhost`, 127.0.0.0/8 and `::1` (with or without a port).
pub fn is_loopback(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !name.ends_with(':') && port.chars().all(|c| c.is_ascii_digit()) => {
            name
        }
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
/// Default size at which a WARC file is rotated: 1 GB (10^9 bytes), as Heritrix.
pub const DEFAULT_WARC_MAX_SIZE: u64 = 1_000_000_000;

/// The seen set's mode: the store's, fixed when a state is created (the
/// store owns it, so that the configuration depends on the store and not
/// the other way).
pub use crate::store::DedupMode;

/// Which proxy the fetcher goes through (`--proxy`, `--no-proxy`, the crawl
/// file's `proxy`).
#[derive(Clone, PartialEq, Eq, Default)]
pub enum ProxyChoice {
    /// The environment of each run, as curl reads it: `HTTP_PROXY`,
    /// `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` and their lowercase forms
    /// (the default; not stored in the job).
    #[default]
    Environment,
    /// No proxy, whatever the environment says (`--no-proxy`, `proxy = "none"`).
    Off,
    /// This proxy (`http://[user:password@]host:port`) for http and https
    /// URLs; the environment's `NO_PROXY` still applies, as with curl's `-x`.
    Url(String),
}

impl ProxyChoice {
    /// The choice as printed anywhere: `environment`, `none`, or the URL with
    /// its password as `***`.
    pub fn shown(&self) -> String {
        match self {
            ProxyChoice::Environment => "environment".into(),
            ProxyChoice::Off => "none".into(),
            ProxyChoice::Url(url) => redact_password(url),
        }
    }
}

impl std::fmt::Debug for ProxyChoice {
    /// Never prints a password (configs are printed in debug logs).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProxyChoice({})", self.shown())
    }
}

/// `url` with the password of its `user:password@` shown as `***`, also in a
/// text that does not parse as a URL.
pub fn redact_password(url: &str) -> String {
    if let Ok(mut parsed) = url::Url::parse(url)
        && parsed.password().is_some()
        && parsed.set_password(Some("***")).is_ok()
    {
        return parsed.to_string().replace("%2A%2A%2A", "***");
    }
    // `user:password@host` as written: the password is between the first `:`
    // after the scheme and the last `@`.
    let Some(at) = url.rfind('@') else {
        return url.to_owned();
    };
    let start = url.find("://").map_or(0, |i| i + 3);
    match url[start..at].find(':') {
        Some(colon) => format!("{}***{}", &url[..start + colon + 1], &url[at..]),
        None => url.to_owned(),
    }
}

/// Per-origin request settings (`[hosts."intranet.example"]`,
/// `[hosts."127.0.0.1:8080"]`): headers and HTTP Basic credentials sent only
/// to that origin.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HostRule {
    /// The host, lower case, without a port (an IPv6 address in brackets, as
    /// URLs write it); never its subdomains.
    pub host: String,
    /// The port: `Some(port)` is that port whatever the scheme; `None` is the
    /// scheme's default port (80 for http, 443 for https) and no other.
    pub port: Option<u16>,
    /// Headers sent to this origin (after the crawl's `[headers]`, replacing
    /// those of the same name).
    pub headers: Vec<(String, String)>,
    /// The Basic user name.
    pub user: Option<String>,
    /// The environment variable holding the Basic password, read at run
    /// start; its value is never stored.
    pub password_env: Option<String>,
}

impl HostRule {
    /// The rule's `[hosts]` key: `host` or `host:port`.
    pub fn key(&self) -> String {
        match self.port {
            Some(port) => format!("{}:{port}", self.host),
            None => self.host.clone(),
        }
    }

    /// Reads a `[hosts]` key, `HOST` or `HOST:PORT` (an IPv6 address in
    /// brackets: `[::1]:8080`), into the host (lower case) and the port;
    /// `Err` says what is wrong in one line.
    pub fn parse_key(key: &str) -> Result<(String, Option<u16>), String> {
        let bad = |why: &str| {
            format!(
                "{key:?} is not a host or HOST:PORT ({why}); write the host alone for its default ports (80 for http, 443 for https), or HOST:PORT for one port"
            )
        };
        if key.is_empty() || key.contains(['/', '@', ' ', '?', '#', '\\']) {
            return Err(bad("no scheme, user or path"));
        }
        let (host, port) = if let Some(rest) = key.strip_prefix('[') {
            let (address, after) = rest
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address ends with ]"))?;
            if address.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(bad("not an IPv6 address in the brackets"));
            }
            let port = match after {
                "" => None,
                _ => Some(
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| bad("a port follows ':'"))?,
                ),
            };
            (format!("[{address}]"), port)
        } else {
            match key.split_once(':') {
                None => (key.to_owned(), None),
                Some((_, port)) if port.contains(':') => {
                    return Err(bad("an IPv6 address is written in brackets, [::1]:8080"));
                }
                Some((host, port)) => (host.to_owned(), Some(port)),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            None => None,
            Some(text) => match text.parse::<u16>() {
                Ok(port) if port > 0 && text.chars().all(|c| c.is_ascii_digit()) => Some(port),
                _ => return Err(bad("the port is a number from 1 to 65535")),
            },
        };
        Ok((host.to_ascii_lowercase(), port))
    }

    /// Where a rule with `key` applies, in words for change lines:
    /// `127.0.0.1:8080 only`, or `intranet.example on ports 80 (http) and
    /// 443 (https) only`. `None` when `key` is not a `[hosts]` key.
    pub fn origin_words(key: &str) -> Option<String> {
        match HostRule::parse_key(key).ok()? {
            (host, Some(port)) => Some(format!("{host}:{port} only")),
            (host, None) => Some(format!(
                "{host} on ports 80 (http) and 443 (https) only; other ports take [hosts.\"{host}:PORT\"]"
            )),
        }
    }
}

/// Which pages `--render` renders, and how (`[render]`; see [`crate::render`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderSettings {
    /// The hosts whose pages are rendered; empty: every host of the job.
    pub hosts: Vec<String>,
    /// A loaded page is done once no request of it has been open this long.
    pub idle: Duration,
    /// A page is done at this time, whatever it still loads.
    pub timeout: Duration,
    /// Pages rendered at once (browser tabs).
    pub tabs: usize,
}

impl Default for RenderSettings {
    fn default() -> RenderSettings {
        RenderSettings {
            hosts: Vec::new(),
            idle: Duration::from_millis(500),
            timeout: Duration::from_secs(15),
            tabs: 2,
        }
    }
}

/// Everything a crawl run is configured with.
#[derive(Clone, Debug)]
pub struct CrawlConfig {
    /// State directory (default `data/default`).
    pub data_dir: PathBuf,
    /// Seed URLs given on this run; empty means "the seeds stored in the state".
    pub seeds: Vec<String>,
    /// Stop after this many pages fetched in this run.
    pub max_pages: Option<u64>,
    /// Do not follow links deeper than this (seeds are depth 0).
    pub max_depth: Option<u32>,
    /// Requests in flight at once (default 16).
    pub concurrency: usize,
    /// Hosts links may lead to; empty means "the hosts of the seeds".
    pub allowed_hosts: Vec<String>,
    /// `User-Agent` header and robots.txt product token.
    pub user_agent: String,
    /// Total time allowed for one request, headers and body (default 30 s).
    pub request_timeout: Duration,
    /// Longest pause between two reads of a body (default 10 s).
    pub read_timeout: Duration,
    /// Largest decoded body kept; longer bodies are cut and flagged (default 10 MiB).
    pub max_body_bytes: usize,
    /// Headers whose values take part in the request fingerprint (names, any case).
    pub fingerprint_headers: Vec<String>,
    /// Seen-set mode. Fixed when the state is created (default [`DedupMode::Exact`]);
    /// `None` means "as stored"; a different explicit value for an existing state is refused.
    pub dedup: Option<DedupMode>,
    /// Bloom filter size as a power of two of bits, fixed (default: sized to the crawl
    /// in exact mode, 30 = 128 MiB in bloom mode). Same rule as `dedup`.
    pub bloom_bits: Option<u8>,
    /// Bloom filter hash count (default 6). Same rule as `dedup`.
    pub bloom_hashes: Option<u8>,
    /// How often the seen set is checkpointed (Bloom bits synced, the journal
    /// sealed into the exact set and truncated), at most; default 30 s. A
    /// checkpoint also starts after 2^18 journaled fingerprints. Shorter means
    /// less journal to replay after a crash and more writes.
    pub checkpoint_every: Duration,
    /// sled's page cache, in bytes (default 64 MiB; sled's own default is 1 GiB).
    /// Peak memory grows with it; a smaller cache means more reads of the state
    /// from the disk (or the OS page cache).
    pub cache_bytes: u64,
    /// Follow links marked `rel=nofollow`.
    pub follow_nofollow: bool,
    /// wget's `--no-parent`: on a seed's host, a link is followed only when
    /// its path is within the directory of one of the host's seeds (the path
    /// up to its last `/`). Seeds, redirect targets and sitemap files are
    /// exempt; hosts without a seed are not limited.
    pub no_parent: bool,
    /// wget's `--page-requisites`: every fetched HTML page also queues its
    /// stylesheets, scripts, images (`srcset` too) and icons, and every
    /// fetched stylesheet its `url()`s and `@import`s, whatever the depth,
    /// host and allow/deny rules say (robots.txt and politeness still apply).
    /// Requisites make no items (see [`crate::legs::requisites`]).
    pub page_requisites: bool,
    /// Queue the `Sitemap:` lines of every robots.txt fetched, and read
    /// sitemap files whatever legs are configured (default true;
    /// `--no-sitemaps`).
    pub sitemaps: bool,
    /// Link URLs must match one of these regexes to be followed (empty: all).
    pub allow: Vec<String>,
    /// Link URLs matching any of these regexes are not followed.
    pub deny: Vec<String>,
    /// How long in-flight fetches may finish after the first Ctrl-C (default 2 s).
    pub shutdown_grace: Duration,
    /// Stream committed items to this JSON-lines file.
    pub output: Option<PathBuf>,
    /// Write WARC 1.1 files of every fetch into this directory (see
    /// [`crate::warc`]); records are there exactly when their page's
    /// completion is durable.
    pub warc: Option<PathBuf>,
    /// A WARC file is closed, and the next one begun, at the first group
    /// boundary past this many bytes (default [`DEFAULT_WARC_MAX_SIZE`]).
    pub warc_max_size: u64,
    /// Error statuses (non-2xx answers) whose pages still make items and run
    /// the item legs, like 2xx answers (`--keep-status`; default none, as
    /// Scrapy's HttpError handling). Every answer is counted and recorded.
    pub keep_status: Vec<u16>,
    /// Where `legcrawl crawl` writes its end-of-run report (one JSON object: run,
    /// outcome, times, totals, counters) after the run ends. The engine does not
    /// read it.
    pub stats: Option<PathBuf>,
    /// Optional `From` header: a contact e-mail for site operators.
    pub from: Option<String>,
    /// Extra request headers sent with every request (name, value).
    pub extra_headers: Vec<(String, String)>,
    /// Longest URL fetched or followed, in bytes (default 8192).
    pub max_url_len: usize,
    /// The proxy requests go through (default: the environment's, as curl).
    pub proxy: ProxyChoice,
    /// Per-origin headers and Basic credentials, sent only to their origin.
    pub hosts: Vec<HostRule>,
    /// A PEM file of CA certificates trusted besides the built-in roots and
    /// the system's (`--cacert`, the crawl file's `cacert`); a path as given,
    /// relative to the directory the crawl runs in.
    pub cacert: Option<PathBuf>,
    /// Keep the cookies servers set (RFC 6265) and send them back, across
    /// runs (default true; `--no-cookies`).
    pub cookies: bool,
    /// Retries of a failed request (timeouts, connection errors, 408/429/5xx; default 2).
    pub max_retries: u32,
    /// First retry backoff; doubles with every retry of the same request (default 1 s).
    pub retry_backoff: Duration,
    /// Requests in flight at once to one host (default 2).
    pub per_host: usize,
    /// Least time between the starts of two requests to one host. `None` (the
    /// default) means [`DEFAULT_DELAY`] for remote hosts and none for loopback
    /// hosts (`localhost`, 127.0.0.0/8, `::1`), which are your own machine.
    pub delay: Option<Duration>,
    /// Randomize each per-host delay between 0.5× and 1.5× of `delay`.
    pub jitter: bool,
    /// Obey robots.txt (default true).
    pub obey_robots: bool,
    /// How long a fetched robots.txt is trusted before it is fetched again (default 24 h).
    pub robots_ttl: Duration,
    /// Largest `Crawl-delay` honoured (default 30 s); longer values are capped.
    pub max_crawl_delay: Duration,
    /// Wait before asking again for a robots.txt that answered 5xx or could not be
    /// reached (default 60 s). After three such answers in a row a host is left
    /// alone for the rest of the run, its requests kept for the next one.
    pub robots_retry: Duration,
    /// When a fetched page is fetched again in a later run (default
    /// [`Revisit::default`], estimated). Seeds are fetched again in every run whatever
    /// this says.
    pub revisit: Revisit,
    /// Per-URL revisit policies, first match wins; URLs matching none use `revisit`.
    pub revisit_rules: Vec<RevisitRule>,
    /// This run's policy for the pages no rule matches, instead of `revisit`
    /// (`--revisit-after`): an option of one run, never part of the job, so
    /// `--revisit-after 0` asks every recorded page again in its run only.
    pub revisit_this_run: Option<Revisit>,
    /// The most revisits of stored pages a cycle queues (`--revisit-budget`,
    /// `[revisit] budget`): the pages whose revisit is worth most, due or not
    /// (see [`crate::revisit::Schedule::worth`]). Pages under a fixed interval,
    /// never fetched well, or gone are queued when due, outside it. `None`
    /// (the default): every due page.
    pub revisit_budget: Option<u64>,
    /// Render new and changed HTML pages in headless Chromium before the legs
    /// read them (`--render`, `[render]`); `None` (the default): the legs read
    /// the HTML the server sent.
    pub render: Option<RenderSettings>,
    /// End the run when nothing is in flight and no queued request may start within
    /// [`IDLE_WAIT`] (hosts backed off or parked); what is left waits for the next run.
    pub until_idle: bool,
    /// Stop leasing after this much time in this run (it resumes in the next).
    pub max_duration: Option<Duration>,
    /// A crawl shared by workers through Redis (`--shared`, `[shared]`); `None`
    /// (the default) crawls with the embedded state in `data_dir`.
    pub shared: Option<crate::shared_target::SharedTarget>,
    /// How long a shared crawl's lease lasts unless renewed (default
    /// [`crate::shared_target::DEFAULT_LEASE_TTL`]).
    pub lease_ttl: Duration,
}

/// With [`CrawlConfig::until_idle`], a run ends when no request can start within
/// this long (longer than the largest `Crawl-delay` honoured by default).
pub const IDLE_WAIT: Duration = Duration::from_secs(60);

/// Answers with these statuses are retried (with the request's retry count),
/// then fail; they cannot be kept (`--keep-status`).
pub const RETRY_STATUSES: [u16; 6] = [408, 429, 500, 502, 503, 504];

/// Checks one `--keep-status` code: an error status (400 to 599) that is not
/// retried; `Err` says why not.
pub fn check_keep_status(code: u16) -> Result<u16, String> {
    if RETRY_STATUSES.contains(&code) {
        Err(format!("{code} is retried, then fails; it cannot be kept"))
    } else if (400..=599).contains(&code) {
        Ok(code)
    } else {
        Err(format!(
            "{code} is not an error status (400 to 599); 2xx answers always make items"
        ))
    }
}

/// `codes` sorted, each once (the order a job stores them in).
pub fn status_set(mut codes: Vec<u16>) -> Vec<u16> {
    codes.sort_unstable();
    codes.dedup();
    codes
}

/// When a page fetched in one run is due again in a later one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Revisit {
    /// In every run (hub pages: indexes, feeds, front pages).
    EveryRun,
    /// A fixed interval after each fetch.
    After(Duration),
    /// Nutch-style adaptive interval: it starts at `initial`, shrinks by 20 % each
    /// time the page is found changed and grows by 40 % each time it is not,
    /// staying within `min..=max`.
    Adaptive {
        /// Interval after the first fetch.
        initial: Duration,
        /// Shortest interval.
        min: Duration,
        /// Longest interval.
        max: Duration,
    },
    /// Never: a page is fetched once (scrapy-redis's pure incremental mode).
    Never,
    /// By each page's estimated change rate ([`crate::revisit::rate`]): the
    /// interval, a whole number of `period`s within `min..=max`, that buys the
    /// most freshness per request.
    Estimated {
        /// How often the crawl runs (the unit of the intervals chosen).
        period: Duration,
        /// Shortest interval.
        min: Duration,
        /// Longest interval.
        max: Duration,
    },
}

impl Revisit {
    /// Nutch's adaptive schedule with its usual bounds: one day first, between
    /// one hour and 30 days.
    pub fn nutch() -> Revisit {
        Revisit::Adaptive {
            initial: Duration::from_secs(24 * 3600),
            min: Duration::from_secs(3600),
            max: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

impl Default for Revisit {
    /// Estimated from each page's changes, for a crawl run daily, between one
    /// hour and 30 days.
    fn default() -> Revisit {
        Revisit::Estimated {
            period: Duration::from_secs(24 * 3600),
            min: Duration::from_secs(3600),
            max: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// A revisit policy for the URLs matching a regex.
#[derive(Clone, Debug, PartialEq)]
pub struct RevisitRule {
    /// Regex searched in the request URL.
    pub pattern: String,
    /// The policy for matching URLs.
    pub revisit: Revisit,
}

impl Default for CrawlConfig {
    fn default() -> CrawlConfig {
        CrawlConfig {
            data_dir: PathBuf::from("data/default"),
            seeds: Vec::new(),
            max_pages: None,
            max_depth: None,
            concurrency: 16,
            allowed_hosts: Vec::new(),
            user_agent: concat!("legcrawl/", env!("CARGO_PKG_VERSION")).to_owned(),
            request_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(10),
            max_body_bytes: 10 * 1024 * 1024,
            fingerprint_headers: Vec::new(),
            dedup: None,
            bloom_bits: None,
            bloom_hashes: None,
            checkpoint_every: crate::store::CHECKPOINT_EVERY,
            cache_bytes: crate::store::DEFAULT_CACHE_BYTES,
            follow_nofollow: true,
            no_parent: false,
            page_requisites: false,
            sitemaps: true,
            keep_status: Vec::new(),
            allow: Vec::new(),
            deny: Vec::new(),
            shutdown_grace: Duration::from_secs(2),
            output: None,
            warc: None,
            warc_max_size: DEFAULT_WARC_MAX_SIZE,
            stats: None,
            from: None,
            extra_headers: Vec::new(),
            max_url_len: 8192,
            proxy: ProxyChoice::Environment,
            hosts: Vec::new(),
            cacert: None,
            cookies: true,
            max_retries: 2,
            retry_backoff: Duration::from_secs(1),
            per_host: 2,
            delay: None,
            jitter: false,
            obey_robots: true,
            robots_ttl: Duration::from_secs(24 * 3600),
            max_crawl_delay: Duration::from_secs(30),
            robots_retry: Duration::from_secs(60),
            revisit: Revisit::default(),
            revisit_rules: Vec::new(),
            revisit_this_run: None,
            revisit_budget: None,
            render: None,
            until_idle: false,
            max_duration: None,
            shared: None,
            lease_ttl: crate::shared_target::DEFAULT_LEASE_TTL,
        }
    }
}

impl CrawlConfig {
    /// A job's settings (`self`) with `run`'s state directory, seeds and
    /// per-run options: what one run crawls with. The one list of the
    /// options that are never part of a job.
    pub fn with_run_options(self, run: &CrawlConfig) -> CrawlConfig {
        CrawlConfig {
            data_dir: run.data_dir.clone(),
            seeds: run.seeds.clone(),
            max_pages: run.max_pages,
            max_duration: run.max_duration,
            until_idle: run.until_idle,
            shutdown_grace: run.shutdown_grace,
            checkpoint_every: run.checkpoint_every,
            cache_bytes: run.cache_bytes,
            shared: run.shared.clone(),
            lease_ttl: run.lease_ttl,
            revisit_this_run: run.revisit_this_run,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_keys_name_one_origin() {
        let parse = HostRule::parse_key;
        assert_eq!(
            parse("Intranet.Example"),
            Ok(("intranet.example".into(), None))
        );
        assert_eq!(
            parse("127.0.0.1:8080"),
            Ok(("127.0.0.1".into(), Some(8080)))
        );
        assert_eq!(parse("[::1]:81"), Ok(("[::1]".into(), Some(81))));
        assert_eq!(parse("[::1]"), Ok(("[::1]".into(), None)));
        for bad in [
            "", "a:0", "a:x", "a:+1", "a:70000", "::1", "http://a", "u@a", "a/b", "[x]:1",
        ] {
            let error = parse(bad).expect_err(bad);
            assert!(error.contains("HOST:PORT"), "{bad}: {error}");
        }
        let rule = HostRule {
            host: "a.example".into(),
            port: Some(8080),
            ..HostRule::default()
        };
        assert_eq!(rule.key(), "a.example:8080");
        assert!(HostRule::origin_words("a.example").is_some_and(|w| w.contains("80 (http)")));
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_password("http://ann:s3cret@proxy.example:3128/"),
            "http://ann:***@proxy.example:3128/"
        );
        assert_eq!(redact_password("ann:s3cret@proxy:1"), "ann:***@proxy:1");
        assert_eq!(redact_password("http://proxy:1/"), "http://proxy:1/");
        assert_eq!(
            redact_password("http://ann@proxy:1/"),
            "http://ann@proxy:1/"
        );
    }
}
