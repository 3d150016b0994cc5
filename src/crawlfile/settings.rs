//! The crawl settings of a crawl file (everything but `[[legs]]`) and how they fill a
//! [`CrawlConfig`].
//!
//! Every field is optional: an absent field leaves the [`CrawlConfig::default`] value.
//! Checks that serde cannot express (ranges, header syntax) name the key through the
//! document's spans. Depends on [`crate::config`], [`crate::shared_target`] (`[shared]`'s
//! target) and the sibling modules.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;

use serde::Deserialize;

use super::Pattern;
use super::kinds::Located;
use super::span::Entry;
use super::units::{FileDuration, FileSize};
use crate::config::{CrawlConfig, DedupMode, Revisit, RevisitRule, status_set};

/// The top level of a crawl file, `legs` excepted.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct FileSettings {
    seeds: Option<Vec<String>>,
    data: Option<PathBuf>,
    output: Option<Output>,
    stats: Option<PathBuf>,
    keep_status: Option<Vec<u16>>,
    scope: Scope,
    limits: Limits,
    politeness: Politeness,
    headers: BTreeMap<String, String>,
    /// `proxy = "http://..."` or `"none"` (see `access`).
    proxy: Option<String>,
    /// `cacert = "FILE"`: CA certificates trusted besides the others.
    cacert: Option<PathBuf>,
    /// `cookies = false` turns cookies off.
    cookies: Option<bool>,
    /// `[hosts."HOST"]`: per-origin headers and credentials.
    hosts: BTreeMap<String, super::access::HostSection>,
    dedup: Dedup,
    revisit: RevisitSection,
    /// `[render]`: new and changed HTML pages go through headless Chromium.
    render: Option<RenderSection>,
    state: StateSection,
    shared: Option<SharedSection>,
}

/// `[render]`: its presence turns rendering on (like `--render`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RenderSection {
    /// Render only these hosts' pages (default: every host of the job).
    hosts: Option<Vec<String>>,
    /// A loaded page is done once no request of it has been open this long.
    idle: Option<FileDuration>,
    /// A page is done at this time.
    timeout: Option<FileDuration>,
    /// Pages rendered at once.
    tabs: Option<usize>,
}

impl RenderSection {
    fn settings(self) -> crate::render::RenderSettings {
        let mut settings = crate::render::RenderSettings::default();
        set(&mut settings.hosts, self.hosts);
        set(&mut settings.idle, self.idle.map(|d| d.0));
        set(&mut settings.timeout, self.timeout.map(|d| d.0));
        set(&mut settings.tabs, self.tabs);
        settings
    }
}

/// `[shared]`: the crawl is shared by workers through Redis (like `--shared`
/// and `--name`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SharedSection {
    /// `redis://HOST:PORT/DB`.
    redis: String,
    /// The crawl's name in Redis.
    name: String,
    /// How long a lease lasts unless renewed ("60s").
    lease_ttl: Option<FileDuration>,
    /// The CA certificate (PEM) of a `rediss://` server.
    cacert: Option<PathBuf>,
    /// A client certificate (PEM) for a server that asks for one (mutual TLS).
    cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    key: Option<PathBuf>,
}

/// `[state]`: how the state directory is used.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct StateSection {
    /// sled's page cache ("64MiB").
    cache: Option<FileSize>,
}

/// `output = "FILE.jsonl"`, or the `[output]` table.
#[derive(Debug)]
enum Output {
    /// The JSON-lines file of items.
    Jsonl(PathBuf),
    /// `[output]`: `jsonl`, `warc`, `warc_max_size`.
    Table(OutputTable),
}

/// `[output]`: where items and WARC files go.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct OutputTable {
    /// The JSON-lines file of items (what `output = "..."` names).
    jsonl: Option<PathBuf>,
    /// The WARC directory (like --warc).
    warc: Option<PathBuf>,
    /// Size past which a new WARC file is begun (like --warc-max-size).
    warc_max_size: Option<FileSize>,
}

impl<'de> Deserialize<'de> for Output {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Output, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Output;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a JSON-lines file name, or an [output] table (jsonl, warc, warc_max_size)",
                )
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Output, E> {
                Ok(Output::Jsonl(PathBuf::from(text)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Output, A::Error> {
                OutputTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(Output::Table)
            }
        }
        de.deserialize_any(Visit)
    }
}

/// `[revisit]`: when pages fetched by one run are fetched again by later ones.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RevisitSection {
    /// The default policy: `"estimated"`, `"adaptive"` (or `"nutch"`),
    /// `"never"`, or a duration (`"0"` = every run).
    after: Option<When>,
    /// Adaptive policy: first interval.
    initial: Option<FileDuration>,
    /// Estimated policy: how often the crawl runs.
    period: Option<FileDuration>,
    /// Estimated and adaptive policies: the bounds of the interval.
    min: Option<FileDuration>,
    max: Option<FileDuration>,
    /// The most revisits a cycle makes of the pages those policies schedule.
    budget: Option<u64>,
    /// URLs matching these regexes are hubs, fetched every run.
    hubs: Option<Vec<Pattern>>,
    /// Per-URL policies, first match wins (after the hubs).
    rules: Option<Vec<RevisitEntry>>,
}

/// One `[[revisit.rules]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RevisitEntry {
    pattern: Pattern,
    after: When,
}

/// A revisit policy as the file writes it.
#[derive(Clone, Copy, Debug)]
enum When {
    Estimated,
    Adaptive,
    Never,
    Every(std::time::Duration),
}

impl<'de> Deserialize<'de> for When {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<When, D::Error> {
        de.deserialize_any(WhenVisitor)
    }
}

/// [`When`]'s visitor: `"adaptive"`, `"never"`, or a duration as [`FileDuration`]
/// reads it (a string, or a number of seconds).
struct WhenVisitor;

impl WhenVisitor {
    /// A number of seconds, read by [`FileDuration`] (which refuses negatives).
    fn every<'de, E: serde::de::Error>(
        secs: impl serde::de::IntoDeserializer<'de, E>,
    ) -> Result<When, E> {
        FileDuration::deserialize(secs.into_deserializer()).map(|d| When::Every(d.0))
    }
}

impl<'de> serde::de::Visitor<'de> for WhenVisitor {
    type Value = When;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\"estimated\", \"adaptive\", \"never\" or {}",
            super::units::DURATION_FORM
        )
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<When, E> {
        match text {
            "estimated" => Ok(When::Estimated),
            "adaptive" | "nutch" => Ok(When::Adaptive),
            "never" => Ok(When::Never),
            _ => super::units::parse_duration(text)
                .map(When::Every)
                .map_err(|_| {
                    E::custom(format!(
                        "expected \"estimated\", \"adaptive\", \"never\" or {}, got {text:?}",
                        super::units::DURATION_FORM
                    ))
                }),
        }
    }

    fn visit_u64<E: serde::de::Error>(self, secs: u64) -> Result<When, E> {
        Self::every(secs)
    }

    fn visit_i64<E: serde::de::Error>(self, secs: i64) -> Result<When, E> {
        Self::every(secs)
    }

    fn visit_f64<E: serde::de::Error>(self, secs: f64) -> Result<When, E> {
        Self::every(secs)
    }
}

impl RevisitSection {
    /// The default policy and the rules (hubs first).
    fn policies(self) -> (Revisit, Vec<RevisitRule>) {
        let Revisit::Adaptive { initial, min, max } = Revisit::nutch() else {
            unreachable!("Nutch's schedule is adaptive");
        };
        let Revisit::Estimated { period, .. } = Revisit::default() else {
            unreachable!("the default revisit policy is estimated");
        };
        let (min, max) = (self.min.map_or(min, |d| d.0), self.max.map_or(max, |d| d.0));
        let adaptive = Revisit::Adaptive {
            initial: self.initial.map_or(initial, |d| d.0),
            min,
            max,
        };
        let estimated = Revisit::Estimated {
            period: self.period.map_or(period, |d| d.0),
            min,
            max,
        };
        let policy = |when: When| match when {
            When::Estimated => estimated,
            When::Adaptive => adaptive,
            When::Never => Revisit::Never,
            When::Every(d) if d.is_zero() => Revisit::EveryRun,
            When::Every(d) => Revisit::After(d),
        };
        let hubs = self.hubs.into_iter().flatten().map(|p| RevisitRule {
            pattern: p.0,
            revisit: Revisit::EveryRun,
        });
        let rules = self.rules.into_iter().flatten().map(|r| RevisitRule {
            pattern: r.pattern.0,
            revisit: policy(r.after),
        });
        let default = self.after.map_or(estimated, policy);
        (default, hubs.chain(rules).collect())
    }
}

/// `[scope]`: which links are followed (read by `links` legs without settings of
/// their own).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Scope {
    allowed_hosts: Option<Vec<String>>,
    max_depth: Option<u32>,
    allow: Option<Vec<Pattern>>,
    deny: Option<Vec<Pattern>>,
    follow_nofollow: Option<bool>,
    no_parent: Option<bool>,
    page_requisites: Option<bool>,
    sitemaps: Option<bool>,
}

/// `[limits]`: how much and how fast.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Limits {
    max_pages: Option<u64>,
    concurrency: Option<NonZeroUsize>,
    timeout: Option<FileDuration>,
    read_timeout: Option<FileDuration>,
    max_body: Option<FileSize>,
    max_url_len: Option<FileSize>,
    max_retries: Option<u32>,
    retry_backoff: Option<FileDuration>,
    grace: Option<FileDuration>,
    max_duration: Option<FileDuration>,
    until_idle: Option<bool>,
}

/// `[politeness]`: how the crawl treats each host.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Politeness {
    per_host: Option<NonZeroUsize>,
    delay: Option<FileDuration>,
    jitter: Option<bool>,
    obey_robots: Option<bool>,
    robots_ttl: Option<FileDuration>,
    /// Wait before asking again for a robots.txt that failed (5xx, unreachable).
    robots_retry: Option<FileDuration>,
    max_crawl_delay: Option<FileDuration>,
    user_agent: Option<String>,
    from: Option<String>,
}

/// `[dedup]`: the seen set (fixed when the state is created).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Dedup {
    mode: Option<ModeName>,
    bloom_bits: Option<u8>,
    bloom_hashes: Option<u8>,
    fingerprint_headers: Option<Vec<String>>,
    checkpoint: Option<FileDuration>,
}

/// [`DedupMode`] as the file names it.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ModeName {
    Exact,
    Bloom,
}

/// Sets `slot` when the file gave a value.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}

impl FileSettings {
    /// Checks what serde could not, then writes every given value into `config`.
    pub fn apply(self, config: &mut CrawlConfig, entries: &[Entry]) -> Result<(), Located> {
        self.check(entries)?;
        set(&mut config.seeds, self.seeds);
        set(&mut config.data_dir, self.data);
        match self.output {
            Some(Output::Jsonl(path)) => config.output = Some(path),
            Some(Output::Table(table)) => {
                config.output = table.jsonl.or(config.output.take());
                config.warc = table.warc.or(config.warc.take());
                set(&mut config.warc_max_size, table.warc_max_size.map(|s| s.0));
            }
            None => {}
        }
        config.stats = self.stats.or(config.stats.take());
        set(&mut config.keep_status, self.keep_status.map(status_set));
        let s = self.scope;
        set(&mut config.allowed_hosts, s.allowed_hosts);
        config.max_depth = s.max_depth.or(config.max_depth);
        set(&mut config.allow, s.allow.map(strings));
        set(&mut config.deny, s.deny.map(strings));
        set(&mut config.follow_nofollow, s.follow_nofollow);
        set(&mut config.no_parent, s.no_parent);
        set(&mut config.page_requisites, s.page_requisites);
        set(&mut config.sitemaps, s.sitemaps);
        let l = self.limits;
        config.max_pages = l.max_pages.or(config.max_pages);
        set(
            &mut config.concurrency,
            l.concurrency.map(NonZeroUsize::get),
        );
        set(&mut config.request_timeout, l.timeout.map(|d| d.0));
        set(&mut config.read_timeout, l.read_timeout.map(|d| d.0));
        set(&mut config.max_body_bytes, l.max_body.map(|s| clamp(s.0)));
        set(&mut config.max_url_len, l.max_url_len.map(|s| clamp(s.0)));
        set(&mut config.max_retries, l.max_retries);
        set(&mut config.retry_backoff, l.retry_backoff.map(|d| d.0));
        set(&mut config.shutdown_grace, l.grace.map(|d| d.0));
        config.max_duration = l.max_duration.map(|d| d.0).or(config.max_duration);
        set(&mut config.until_idle, l.until_idle);
        let p = self.politeness;
        set(&mut config.per_host, p.per_host.map(NonZeroUsize::get));
        config.delay = p.delay.map(|d| d.0).or(config.delay);
        set(&mut config.jitter, p.jitter);
        set(&mut config.obey_robots, p.obey_robots);
        set(&mut config.robots_ttl, p.robots_ttl.map(|d| d.0));
        set(&mut config.robots_retry, p.robots_retry.map(|d| d.0));
        set(&mut config.max_crawl_delay, p.max_crawl_delay.map(|d| d.0));
        set(&mut config.user_agent, p.user_agent);
        config.from = p.from.or(config.from.take());
        config.extra_headers.extend(self.headers);
        let access = super::access::Access {
            proxy: self.proxy,
            cacert: self.cacert,
            cookies: self.cookies,
            hosts: self.hosts,
        };
        super::access::apply(config, access);
        let d = self.dedup;
        config.dedup = d.mode.map(|mode| match mode {
            ModeName::Exact => DedupMode::Exact,
            ModeName::Bloom => DedupMode::Bloom,
        });
        config.bloom_bits = d.bloom_bits.or(config.bloom_bits);
        config.bloom_hashes = d.bloom_hashes.or(config.bloom_hashes);
        set(&mut config.fingerprint_headers, d.fingerprint_headers);
        set(&mut config.checkpoint_every, d.checkpoint.map(|d| d.0));
        config.revisit_budget = self.revisit.budget;
        config.render = self.render.map(RenderSection::settings);
        (config.revisit, config.revisit_rules) = self.revisit.policies();
        set(&mut config.cache_bytes, self.state.cache.map(|s| s.0));
        if let Some(shared) = self.shared {
            // Checked in `check`.
            config.shared = crate::shared_target::SharedTarget::new(&shared.redis, &shared.name)
                .and_then(|t| t.with_cacert(shared.cacert.as_deref()))
                .and_then(|t| t.with_client_cert(shared.cert.as_deref(), shared.key.as_deref()))
                .ok();
            set(&mut config.lease_ttl, shared.lease_ttl.map(|d| d.0));
        }
        Ok(())
    }

    /// Range and syntax checks, placed at the offending key.
    fn check(&self, entries: &[Entry]) -> Result<(), Located> {
        let at = |path: &str, message: String| {
            let span = entries
                .iter()
                .find(|entry| entry.path == path)
                .map_or(0..0, |entry| entry.value.clone());
            Err(Located { span, message })
        };
        if let Some(Output::Table(table)) = &self.output
            && table.warc_max_size.is_some_and(|s| s.0 == 0)
        {
            return at("output.warc_max_size", "must be more than 0".into());
        }
        // Zero would fail every request, or refuse every page or URL: the flags
        // refuse it too (`units::positive_duration_arg`, `units::size_arg`).
        let (l, is_zero) = (&self.limits, |d: FileDuration| d.0.is_zero());
        let zero = [
            ("limits.timeout", l.timeout.map(is_zero)),
            ("limits.read_timeout", l.read_timeout.map(is_zero)),
            ("limits.max_body", l.max_body.map(|s| s.0 == 0)),
            ("limits.max_url_len", l.max_url_len.map(|s| s.0 == 0)),
            ("state.cache", self.state.cache.map(|s| s.0 == 0)),
        ];
        if let Some((key, _)) = zero.iter().find(|(_, zero)| *zero == Some(true)) {
            return at(key, "must be more than 0".into());
        }
        if let Some(Err(message)) = self.keep_status.as_ref().and_then(|codes| {
            codes
                .iter()
                .map(|&code| crate::config::check_keep_status(code))
                .find(Result::is_err)
        }) {
            return at("keep_status", message);
        }
        if let Some(shared) = &self.shared {
            match crate::shared_target::SharedTarget::new(&shared.redis, &shared.name) {
                Err(message) => return at("shared", message),
                Ok(target) => {
                    let target = match target.with_cacert(shared.cacert.as_deref()) {
                        Ok(target) => target,
                        Err(message) => return at("shared.cacert", message),
                    };
                    let (cert, key) = (shared.cert.as_deref(), shared.key.as_deref());
                    if let Err(message) = target.with_client_cert(cert, key) {
                        let place = if cert.is_some() {
                            "shared.cert"
                        } else {
                            "shared.key"
                        };
                        return at(place, message);
                    }
                }
            }
            if shared
                .lease_ttl
                .is_some_and(|d| d.0 < std::time::Duration::from_secs(1))
            {
                return at("shared.lease_ttl", "must be at least 1s".into());
            }
        }
        if let Some(bits) = self.dedup.bloom_bits.filter(|b| !(10..=36).contains(b)) {
            return at("dedup.bloom_bits", format!("must be 10 to 36, got {bits}"));
        }
        if let Some(k) = self.dedup.bloom_hashes.filter(|k| !(1..=32).contains(k)) {
            return at("dedup.bloom_hashes", format!("must be 1 to 32, got {k}"));
        }
        let r = &self.revisit;
        if let (Some(min), Some(max)) = (r.min, r.max)
            && min.0 > max.0
        {
            return at("revisit.min", "must not be longer than revisit.max".into());
        }
        for (name, value) in &self.headers {
            let path = format!("headers.{name}");
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return at(&path, format!("{name:?} is not a header name"));
            }
            if http::HeaderValue::from_str(value).is_err() {
                return at(&path, format!("{value:?} is not a header value"));
            }
        }
        if let Some((key, message)) =
            super::access::check(self.proxy.as_ref(), self.cacert.as_ref(), &self.hosts)
        {
            return at(&key, message);
        }
        for (i, seed) in self.seeds.iter().flatten().enumerate() {
            if let Err(e) = url::Url::parse(seed) {
                return at(
                    &format!("seeds[{i}]"),
                    format!("{seed:?} is not a URL: {e}"),
                );
            }
        }
        Ok(())
    }
}

fn strings(patterns: Vec<Pattern>) -> Vec<String> {
    patterns.into_iter().map(|p| p.0).collect()
}

/// A byte count as `usize` (saturating on 32-bit targets).
fn clamp(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX)
}
