//! The crawl file (`legcrawl crawl --config crawl.toml`): TOML → [`CrawlConfig`] + legs.
//!
//! [`load`] reads a file and [`parse`] its text into a [`CrawlFile`]: the crawl's
//! settings applied over [`CrawlConfig::default`], and the `[[legs]]` built into a
//! [`Stack`] (`None` when the file has no `legs`: the caller uses its default, see
//! [`default_legs`]). The CLI then applies every flag given on the command line over
//! the file's config. Per-leg settings belong to their leg and are not overridden by
//! flags; a `links` leg without its own `allow`, `deny`, `allowed_hosts`,
//! `follow_nofollow` or `max_depth` takes them from the config (`[scope]` and flags).
//!
//! # Schema
//! ```toml
//! seeds = ["https://docs.example.org/"]   # seed URLs (command-line URLs replace them)
//! data = "data/docs"                       # state directory (relative to the current
//! output = "docs.jsonl"                    #   directory, like --data and --output)
//! stats = "docs-run.json"                  # end-of-run report (like --stats)
//! # or, instead of `output = "..."`, the table (a file cannot have both):
//! [output]       # jsonl = "docs.jsonl" (= output), warc = "warc/" (like --warc),
//!                # warc_max_size = "1GB" (like --warc-max-size)
//!
//! [scope]        # allowed_hosts = [..], max_depth = 5, allow = [regex..],
//!                # deny = [regex..], follow_nofollow = true, no_parent = false,
//!                # sitemaps = true (robots.txt `Sitemap:` lines, sitemap files),
//!                # page_requisites = false (like --page-requisites)
//! [limits]       # max_pages, concurrency, timeout = "30s", read_timeout = "10s",
//!                # max_body = "10MiB", max_url_len = 8192, max_retries = 2,
//!                # retry_backoff = "1s", grace = "2s" (Ctrl-C grace),
//!                # max_duration = "30m", until_idle = true
//! [politeness]   # per_host = 2, delay = "1s", jitter = false, obey_robots = true,
//!                # robots_ttl = "24h", robots_retry = "60s", max_crawl_delay = "30s", user_agent, from
//! [headers]      # "Accept-Language" = "fr": extra headers on every request
//! proxy = "http://proxy.example:3128"  # (a top-level key) or "none"; absent: the
//!                # environment's HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY
//! cacert = "ca.pem"  # (a top-level key) CA certificates (PEM) trusted besides
//!                # the built-in roots, the system's and SSL_CERT_FILE/SSL_CERT_DIR
//! cookies = true # (a top-level key) keep and send back cookies, across runs
//! [hosts."intranet.example"]  # headers = { .. }, user, password_env: sent only
//!                # to that origin: the exact host on ports 80 (http) and 443
//!                # (https); [hosts."HOST:PORT"] on that port; see `access`
//! [dedup]        # mode = "exact" | "bloom", bloom_bits = 30, bloom_hashes = 6,
//!                # fingerprint_headers = [..], checkpoint = "30s" (at most this
//!                # long between two checkpoints of the seen set)
//! [revisit]      # after = "estimated" | "adaptive" | "never" | "12h" | "0"
//!                # (every run); period = "1d" (estimated), initial = "1d"
//!                # (adaptive), min = "1h", max = "30d" (both);
//!                # hubs = [regex..] (every run); rules = [{ pattern, after }]
//! [state]        # cache = "64MiB" (sled's page cache, like --cache-size)
//! [shared]       # redis = "redis://HOST:PORT/DB", name (like --shared, --name),
//!                # lease_ttl = "60s", cacert, cert, key (rediss://)
//!
//! [[legs]]       # in order; each has a `kind` and that kind's settings
//! kind = "links" # allow, deny, allowed_hosts, follow_nofollow, images, iframes, max_depth
//! ```
//! Leg kinds: `links`; `canonicalize` (`rules = ["sort-query-args",
//! "normalize-percent-encoding", "drop-fragment"]`, `strip_query_params = ["utm_*"]`);
//! `page_item`; `item_id` (`fields`, `id_field`); `trap_guard` (`max_path_depth`,
//! `max_segment_repeats`, `max_query_params`, `max_url_len`); `stack` (`legs = [..]`);
//! `callback_rules` (`rules = [{ pattern = "/product/", legs = [..] }]`,
//! `otherwise = [..]`); `feed` ([`legs::FeedSettings`]); `sitemap`
//! ([`legs::SitemapSettings`]); `css_items` ([`legs::CssItemsSettings`]: `item`,
//! `fields = [{ name, selector, attr, all, required }]`). Durations are strings
//! (`"250ms"`, `"30s"`, `"1m30s"`, `"24h"`) or numbers of seconds (`1`, `0.5`),
//! sizes integers or strings (`"10MiB"`, `"5MB"`), see [`units`]: the flags
//! read them with the same parsers.
//!
//! A crawl file is also how a stored job is written ([`job_text`], see
//! [`crate::job`]): `legcrawl dump job` prints one.
//!
//! # Errors
//! Any mistake — a syntax error, an unknown key, a wrong type, a bad duration, regex or
//! header, an unknown leg kind, a leg's own validation — is one [`CrawlFileError`]
//! whose one-line message names the file, the line and column, and the key:
//! `crawl.toml:7:11: limits.timeout: expected a duration such as "30s" ...`.
//!
//! Depends on [`crate::config`], [`crate::legs`], [`crate::canon`],
//! [`crate::fetch::proxy`] (the proxy URL check), [`crate::shared_target`] (the Redis
//! target of `[shared]`) and `toml`.

mod access;
mod kinds;
mod render;
mod settings;
mod span;
pub mod units;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IntoDeserializer;
use toml::de::DeTable;

pub use access::{NO_PROXY, proxy_choice};
pub use kinds::{CanonRule, CanonicalizeSettings, LinkSettings, NoSettings, kind_names};
pub use render::{duration_text, job_text, size_text};

use crate::config::CrawlConfig;
use crate::legs::{self, Stack};
use kinds::Located;

/// A parsed crawl file.
#[derive(Debug)]
pub struct CrawlFile {
    /// Where it was read from (as given).
    pub path: PathBuf,
    /// [`CrawlConfig::default`] with the file's settings applied.
    pub config: CrawlConfig,
    /// The file's `[[legs]]`, unconfigured; `None` when it has none.
    pub legs: Option<Stack>,
    /// The same `legs` array as the file writes it, for a stored job to keep
    /// (see [`job_text`]).
    pub legs_toml: Option<toml::Value>,
}

/// Why a crawl file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CrawlFileError {
    /// The file could not be read.
    #[error("{}: cannot read the crawl file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not a valid crawl file.
    #[error("{}:{line}:{column}: {}{message}", path.display(), key.as_ref().map_or(String::new(), |k| format!("{k}: ")))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the mistake.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// Dotted path of the key at the mistake (`legs[1].allow[0]`), when there is one.
        key: Option<String>,
        /// What is wrong (one line).
        message: String,
    },
}

/// A regex setting, checked when the file is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern(pub String);

impl AsRef<str> for Pattern {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Pattern, D::Error> {
        let text = String::deserialize(de)?;
        match regex::Regex::new(&text) {
            Ok(_) => Ok(Pattern(text)),
            Err(e) => Err(serde::de::Error::custom(format!(
                "bad regex {text:?}: {}",
                one_line(&e.to_string())
            ))),
        }
    }
}

/// The legs the CLI crawls with when a file has no `[[legs]]`: links, canonical URLs
/// (the [`legs::Canonicalize`] default rules), a page item.
pub fn default_legs() -> Stack {
    Stack::new()
        .push(legs::LinkExtractor::new())
        .push(legs::Canonicalize::default())
        .push(legs::PageItem::new())
}

/// The legs a crawl runs, embedded or shared: `legs` (a job's; `None`: the
/// bundled [`default_legs`]), and with `config.sitemaps` a sitemap leg added
/// unless `sitemap_leg` says the job's legs have one, so that sitemap files
/// are read whatever legs are configured. Not configured yet.
pub fn crawl_legs(
    config: &CrawlConfig,
    legs: Option<Stack>,
    sitemap_leg: bool,
) -> Result<Stack, legs::LegError> {
    let stack = legs.unwrap_or_else(default_legs);
    if config.sitemaps && !sitemap_leg {
        return Ok(stack.push(legs::Sitemap::new(legs::SitemapSettings::default())?));
    }
    Ok(stack)
}

/// True when `legs` (a crawl file's `legs` array) holds a leg of `kind`,
/// nested ones (`stack`, `callback_rules`) included.
pub fn names_kind(legs: &toml::Value, kind: &str) -> bool {
    match legs {
        toml::Value::Table(table) => {
            table.get("kind").and_then(toml::Value::as_str) == Some(kind)
                || table.values().any(|value| names_kind(value, kind))
        }
        toml::Value::Array(items) => items.iter().any(|item| names_kind(item, kind)),
        _ => false,
    }
}

/// Reads and parses the crawl file at `path`.
pub fn load(path: &Path) -> Result<CrawlFile, CrawlFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| CrawlFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, path)
}

/// Parses crawl-file `text`; `path` is only used in errors and [`CrawlFile::path`].
pub fn parse(text: &str, path: &Path) -> Result<CrawlFile, CrawlFileError> {
    let mut root = DeTable::parse(text).map_err(|e| {
        invalid(
            text,
            path,
            &[],
            duplicate_named(text, Located::toml(&e, 0..0)),
        )
    })?;
    let entries = span::entries(root.get_ref());
    let fail = |located: Located| invalid(text, path, &entries, located);
    let legs = root.get_mut().remove("legs");
    let root_span = root.span();
    let settings = settings::FileSettings::deserialize(root.into_deserializer())
        .map_err(|e| fail(Located::toml(&e, root_span)))?;
    let mut config = CrawlConfig::default();
    settings.apply(&mut config, &entries).map_err(fail)?;
    let legs = legs.map(kinds::build_list).transpose().map_err(fail)?;
    // The text parsed above, so it parses again.
    let legs_toml = match legs {
        Some(_) => text
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut table| table.remove("legs")),
        None => None,
    };
    Ok(CrawlFile {
        path: path.to_owned(),
        config,
        legs,
        legs_toml,
    })
}

/// TOML's "duplicate key" with the key named; for `output` (a string and an
/// `[output]` table in one file) with what to write instead.
fn duplicate_named(text: &str, mut located: Located) -> Located {
    if located.message.trim() != "duplicate key" {
        return located;
    }
    let key = text
        .get(located.span.clone())
        .map(|k| k.trim().trim_matches(['[', ']', '"', '\'']))
        .unwrap_or_default();
    located.message = if key == "output" {
        "output is given twice: as `output = \"FILE\"` and as an [output] table; write the file in the table as `jsonl = \"FILE\"`".into()
    } else {
        format!("duplicate key {key:?}")
    };
    located
}

/// The [`CrawlFileError::Invalid`] for `located`.
fn invalid(text: &str, path: &Path, entries: &[span::Entry], located: Located) -> CrawlFileError {
    let (line, column) = span::line_column(text, located.span.start);
    CrawlFileError::Invalid {
        path: path.to_owned(),
        line,
        column,
        key: span::key_at(entries, located.span.start).map(str::to_owned),
        message: one_line(&located.message),
    }
}

/// `text` with its lines joined by spaces and runs of spaces collapsed.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
