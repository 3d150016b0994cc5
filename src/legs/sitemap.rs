//! [`Sitemap`]: finds pages through robots.txt `Sitemap:` lines and sitemaps.org files.
//!
//! Three inputs, all on 2xx responses only:
//! - **robots.txt** (a response whose URL path is exactly `/robots.txt`): every
//!   `Sitemap:` line (directive name in any case, `#` comments stripped), resolved
//!   against the robots URL, becomes a sitemap request.
//! - **sitemap XML**: `urlset/url/loc` values become page requests, and
//!   `sitemapindex/sitemap/loc` values become sitemap requests (when `follow_sitemaps`).
//!   A response is read as a sitemap when its request carries `meta["sitemap"]`, or its
//!   body is gzip, or its media type is XML (`application/xml`, `text/xml`) or gzip
//!   (`application/gzip`, `application/x-gzip`), or its first KiB opens a `urlset` or
//!   `sitemapindex` element (whatever its media type), or it has no media type and its
//!   path ends in `.xml` or `.xml.gz`; other HTML responses are skipped. Other XML
//!   roots yield nothing (the pass stops at the root element).
//! - **gzip sitemaps**: a body starting with the gzip magic bytes `1f 8b` (a `.xml.gz`
//!   file served without `Content-Encoding`; the fetcher already undid that one) is
//!   decompressed in memory with `flate2`, at most `max_bytes` bytes (sitemaps.org's
//!   limit is 50 MiB uncompressed). A corrupt or over-long stream is parsed as far as
//!   it was decompressed.
//!
//! Per file at most `max_urls` `<loc>` entries (or `Sitemap:` lines) are read
//! (sitemaps.org: 50,000); the rest is ignored with a debug log. Values are trimmed,
//! resolved against the response URL, stripped of fragments and kept when `http`/`https`.
//! Page URLs must then pass `allow`/`deny`, sitemap URLs `sitemap_allow`. Sitemap
//! requests are marked `meta["sitemap"] = "1"` (see [`SITEMAP_META`]) so this leg (and
//! later processing) knows them. An entry's `<lastmod>` (W3C Datetime: `YYYY`,
//! `YYYY-MM`, `YYYY-MM-DD`, or a date and time with `Z` or an offset, seconds
//! optional) goes with its request as `meta["lastmod"]`, Unix seconds (see
//! [`LASTMOD_META`]); the revisit policy reads it ([`crate::revisit`]). A value
//! that is not such a date is left out. Everything is `Request::follow(&response.request, url)`,
//! duplicates included; host scope and depth are the engine's.
//!
//! Depends on [`crate::request`], [`crate::response`], `flate2`, `time` and the
//! `xml` helpers.
//!
//! # Example
//! ```
//! use legcrawl::legs::{self, Sitemap, SitemapSettings};
//! # use legcrawl::{request::Request, response::Response};
//! # let response = |url: &str, body: &'static str| Response {
//! #     request: Request::get(url),
//! #     url: url::Url::parse(url).unwrap(),
//! #     status: 200,
//! #     headers: http::HeaderMap::new(),
//! #     body: bytes::Bytes::from_static(body.as_bytes()),
//! #     truncated: false,
//! #     fetched_at: std::time::UNIX_EPOCH,
//! #     kept: false,
//! # };
//! let leg = Sitemap::new(SitemapSettings::default())?;
//! let robots = response("http://e.com/robots.txt", "User-agent: *\nSitemap: /sitemap.xml\n");
//! let out = legs::run(&leg, &robots);
//! assert_eq!(out.requests[0].url, "http://e.com/sitemap.xml");
//! assert_eq!(out.requests[0].meta["sitemap"], "1");
//!
//! let sitemap = response(
//!     "http://e.com/sitemap.xml",
//!     "<urlset><url><loc>http://e.com/a</loc></url><url><loc>http://e.com/b</loc></url></urlset>",
//! );
//! let urls: Vec<_> = legs::run(&leg, &sitemap).requests.into_iter().map(|r| r.url).collect();
//! assert_eq!(urls, ["http://e.com/a", "http://e.com/b"]);
//! # Ok::<(), legcrawl::legs::LegError>(())
//! ```

use std::borrow::Cow;
use std::io::Read;
use std::ops::ControlFlow;

use quick_xml::events::BytesStart;
use url::Url;

use super::xml::{self, UrlFilter, XmlVisitor};
use super::{Leg, LegError, Output};
use crate::request::Request;
use crate::response::Response;

/// The name used in [`LegError`]s.
const LEG: &str = "sitemap";

/// The request `meta` key (value `"1"`) that marks a request for a sitemap file.
pub const SITEMAP_META: &str = "sitemap";

/// The request `meta` key of a sitemap entry's `<lastmod>`, as Unix seconds
/// (a decimal number): when the site says the page last changed.
pub const LASTMOD_META: &str = "lastmod";

/// The sitemaps.org limit on entries per file: the default of `max_urls`.
const DEFAULT_MAX_URLS: usize = 50_000;

/// The sitemaps.org limit on uncompressed size (50 MiB): the default of `max_bytes`.
const DEFAULT_MAX_BYTES: usize = 50 * 1024 * 1024;

/// The settings of [`Sitemap`], as read from the config file.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SitemapSettings {
    /// Read `Sitemap:` lines from `/robots.txt` responses. Default `true`.
    pub robots_txt: bool,
    /// Follow the `<sitemap><loc>` entries of sitemap index files. Default `true`.
    pub follow_sitemaps: bool,
    /// Regexes (Rust `regex` syntax, unanchored) on sitemap URLs (index entries and
    /// robots.txt lines); when non-empty, one must match. Default empty (all).
    pub sitemap_allow: Vec<String>,
    /// Regexes on page URLs (`<url><loc>`); when non-empty, one must match. Default empty.
    pub allow: Vec<String>,
    /// Regexes on page URLs; a page matching any is dropped. Default empty.
    pub deny: Vec<String>,
    /// Most `<loc>` entries (or `Sitemap:` lines) read from one file, at least 1.
    /// Default 50,000 (the sitemaps.org limit).
    pub max_urls: usize,
    /// Most bytes a gzip sitemap is decompressed to, at least 1. Default
    /// 50 MiB (52,428,800, the sitemaps.org limit).
    pub max_bytes: usize,
}

impl Default for SitemapSettings {
    fn default() -> SitemapSettings {
        SitemapSettings {
            robots_txt: true,
            follow_sitemaps: true,
            sitemap_allow: Vec::new(),
            allow: Vec::new(),
            deny: Vec::new(),
            max_urls: DEFAULT_MAX_URLS,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// Turns robots.txt `Sitemap:` lines, sitemap indexes and sitemaps into requests.
#[derive(Clone, Debug)]
pub struct Sitemap {
    robots_txt: bool,
    follow_sitemaps: bool,
    sitemaps: UrlFilter,
    pages: UrlFilter,
    max_urls: usize,
    max_bytes: usize,
}

impl Sitemap {
    /// Builds the leg; fails naming the first bad regex, or a zero limit.
    pub fn new(settings: SitemapSettings) -> Result<Sitemap, LegError> {
        for (name, value) in [
            ("max_urls", settings.max_urls),
            ("max_bytes", settings.max_bytes),
        ] {
            if value == 0 {
                return Err(LegError::Invalid {
                    leg: LEG,
                    message: format!("{name} must be at least 1"),
                });
            }
        }
        Ok(Sitemap {
            robots_txt: settings.robots_txt,
            follow_sitemaps: settings.follow_sitemaps,
            sitemaps: UrlFilter::new(LEG, &settings.sitemap_allow, &[])?,
            pages: UrlFilter::new(LEG, &settings.allow, &settings.deny)?,
            max_urls: settings.max_urls,
            max_bytes: settings.max_bytes,
        })
    }

    /// `Sitemap:` lines of a robots.txt body, in order.
    fn robots(&self, response: &Response, out: &mut Output) {
        let text = response.text();
        let mut read = 0;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            if !name.trim().eq_ignore_ascii_case("sitemap") {
                continue;
            }
            if read == self.max_urls {
                tracing::debug!(url = %response.url, max = self.max_urls, "sitemap: robots.txt lines capped");
                break;
            }
            read += 1;
            if let Some(url) = resolve(&response.url, value)
                && self.sitemaps.accepts(&url)
            {
                out.push_request(sitemap_request(response, url));
            }
        }
    }

    /// `<loc>` entries of a sitemap or sitemap index.
    fn sitemap(&self, response: &Response, out: &mut Output) {
        let body = self.body(response);
        let content_type = response
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .filter(|_| !is_gzip(&response.body));
        let text = xml::decode(content_type, &body);
        let mut walk = Walk {
            leg: self,
            page: &response.url,
            root: Root::Other,
            read: 0,
            entry: Entry::default(),
            pages: Vec::new(),
            sitemaps: Vec::new(),
        };
        if let Err(error) = xml::walk(&text, &mut walk) {
            tracing::debug!(url = %response.url, %error, "sitemap: stopped at malformed XML");
            // The entry the error cut keeps its `<loc>`, if it had one.
            walk.end_entry();
        }
        if walk.read == self.max_urls {
            tracing::debug!(url = %response.url, max = self.max_urls, "sitemap: entries capped");
        }
        for (url, lastmod) in walk.pages {
            let mut request = Request::follow(&response.request, url);
            with_lastmod(&mut request, lastmod);
            out.push_request(request);
        }
        for (url, lastmod) in walk.sitemaps {
            let mut request = sitemap_request(response, url);
            with_lastmod(&mut request, lastmod);
            out.push_request(request);
        }
    }

    /// The body, decompressed (up to `max_bytes`) when it is gzip.
    fn body<'a>(&self, response: &'a Response) -> Cow<'a, [u8]> {
        if !is_gzip(&response.body) {
            return Cow::Borrowed(&response.body);
        }
        let mut out = Vec::new();
        let limit = u64::try_from(self.max_bytes).unwrap_or(u64::MAX);
        let mut reader = flate2::read::MultiGzDecoder::new(&response.body[..]).take(limit);
        // On error, `out` keeps what was decompressed before it.
        if let Err(error) = reader.read_to_end(&mut out) {
            tracing::debug!(url = %response.url, %error, "sitemap: corrupt gzip, keeping the decoded part");
        } else if out.len() == self.max_bytes {
            tracing::debug!(url = %response.url, max = self.max_bytes, "sitemap: gzip cut at max_bytes");
        }
        Cow::Owned(out)
    }
}

impl Leg for Sitemap {
    fn process_response(&self, response: &Response, out: &mut Output) {
        if !response.is_content() {
            return;
        }
        if response.url.path() == "/robots.txt" {
            if self.robots_txt {
                self.robots(response, out);
            }
        } else if looks_like_sitemap(response) {
            self.sitemap(response, out);
        }
    }

    /// Requests pass through unchanged: a crawl's requests need not be moved
    /// through this leg (it sits in every crawl's legs by default).
    fn rewrites_requests(&self) -> bool {
        false
    }
}

fn is_gzip(body: &[u8]) -> bool {
    body.starts_with(&[0x1f, 0x8b])
}

/// The gate described in the module doc.
fn looks_like_sitemap(response: &Response) -> bool {
    if response.request.meta.contains_key(SITEMAP_META) || is_gzip(&response.body) {
        return true;
    }
    match response.media_type().as_deref() {
        Some("application/xml" | "text/xml" | "application/gzip" | "application/x-gzip") => true,
        Some(_) => has_sitemap_root(&response.body),
        None => {
            let path = response.url.path();
            has_sitemap_root(&response.body)
                || (!response.is_html() && (path.ends_with(".xml") || path.ends_with(".xml.gz")))
        }
    }
}

/// Bytes of a body looked at for a sitemap's root element.
const SNIFF_BYTES: usize = 1024;

/// True when the first [`SNIFF_BYTES`] of `body` open a `urlset` or
/// `sitemapindex` element: a sitemap served as `text/plain`, `text/html` or
/// `application/octet-stream` is still read (the walk itself reads only those
/// two roots, so a page that merely mentions them yields nothing).
fn has_sitemap_root(body: &[u8]) -> bool {
    let head = &body[..body.len().min(SNIFF_BYTES)];
    let text = String::from_utf8_lossy(head);
    text.contains("<urlset") || text.contains("<sitemapindex")
}

/// `value` trimmed, resolved against `base`, without fragment, if it is a web URL.
fn resolve(base: &Url, value: &str) -> Option<String> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    let mut url = base.join(value).ok()?;
    url.set_fragment(None);
    xml::is_web(&url).then(|| url.into())
}

/// Puts `lastmod` (Unix seconds) on `request` as [`LASTMOD_META`], if there is one.
pub(super) fn with_lastmod(request: &mut Request, lastmod: Option<u64>) {
    if let Some(lastmod) = lastmod {
        request
            .meta
            .insert(LASTMOD_META.to_owned(), lastmod.to_string());
    }
}

/// A W3C Datetime (the sitemaps.org `<lastmod>` format) as Unix seconds: a
/// date alone is its first second in UTC, a time without seconds its first
/// second; fractions of a second are dropped. `None` for anything else, or a
/// date before 1970.
pub fn parse_lastmod(text: &str) -> Option<u64> {
    let text = text.trim();
    let (date, time) = match text.split_once(['T', 't']) {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    // A time needs a full date before it.
    if time.is_some() && date.len() != 10 {
        return None;
    }
    let mut parts = date.split('-');
    let year: i32 = digits(parts.next()?, 4)?;
    let month: u8 = parts.next().map_or(Some(1), |m| digits(m, 2))?;
    let day: u8 = parts.next().map_or(Some(1), |d| digits(d, 2))?;
    if parts.next().is_some() {
        return None;
    }
    let date =
        time::Date::from_calendar_date(year, time::Month::try_from(month).ok()?, day).ok()?;
    let at = match time {
        None => date.midnight().assume_utc(),
        Some(time) => {
            let (clock, offset) = split_offset(time)?;
            let mut fields = clock.split(':');
            let hour: u8 = digits(fields.next()?, 2)?;
            let minute: u8 = digits(fields.next()?, 2)?;
            let second: u8 = match fields.next() {
                None => 0,
                Some(s) => digits(s.split('.').next()?, 2)?,
            };
            if fields.next().is_some() {
                return None;
            }
            let clock = time::Time::from_hms(hour, minute, second).ok()?;
            date.with_time(clock).assume_offset(offset)
        }
    };
    u64::try_from(at.unix_timestamp()).ok()
}

/// `hh:mm[:ss[.s]]` and its zone (`Z`, `+hh:mm`, `-hh:mm`).
fn split_offset(time: &str) -> Option<(&str, time::UtcOffset)> {
    if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        return Some((clock, time::UtcOffset::UTC));
    }
    let at = time.rfind(['+', '-'])?;
    let (clock, zone) = time.split_at(at);
    let sign: i8 = if zone.starts_with('-') { -1 } else { 1 };
    let (hours, minutes) = zone[1..].split_once(':')?;
    let hours: i8 = digits(hours, 2)?;
    let minutes: i8 = digits(minutes, 2)?;
    let offset = time::UtcOffset::from_hms(sign * hours, sign * minutes, 0).ok()?;
    Some((clock, offset))
}

/// `text` as a number of exactly `len` ASCII digits.
fn digits<T: std::str::FromStr>(text: &str, len: usize) -> Option<T> {
    if text.len() == len && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

fn sitemap_request(response: &Response, url: String) -> Request {
    let mut request = Request::follow(&response.request, url);
    request.meta.insert(SITEMAP_META.to_owned(), "1".to_owned());
    request
}

/// Which kind of sitemap file the root element announced.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Root {
    Other,
    UrlSet,
    Index,
}

/// The `<loc>` and `<lastmod>` of the entry being read.
#[derive(Default)]
struct Entry {
    loc: Option<String>,
    lastmod: Option<u64>,
}

/// Walk state: the accepted page and sitemap URLs (with their lastmod), and
/// how many entries were read.
struct Walk<'a> {
    leg: &'a Sitemap,
    page: &'a Url,
    root: Root,
    read: usize,
    entry: Entry,
    pages: Vec<(String, Option<u64>)>,
    sitemaps: Vec<(String, Option<u64>)>,
}

impl Walk<'_> {
    /// Ends the entry being read: its URL, when it has an accepted one, is
    /// kept. Returns true when an entry with a `<loc>` ended (it counts
    /// against `max_urls`, accepted or not).
    fn end_entry(&mut self) -> bool {
        let Entry { loc, lastmod } = std::mem::take(&mut self.entry);
        let Some(loc) = loc else {
            return false;
        };
        let url = resolve(self.page, &loc);
        match self.root {
            Root::UrlSet => {
                if let Some(url) = url.filter(|u| self.leg.pages.accepts(u)) {
                    self.pages.push((url, lastmod));
                }
            }
            Root::Index => {
                let follow = self.leg.follow_sitemaps;
                if let Some(url) = url.filter(|u| follow && self.leg.sitemaps.accepts(u)) {
                    self.sitemaps.push((url, lastmod));
                }
            }
            Root::Other => return false,
        }
        true
    }

    /// True when `entry` is the entry element of this kind of file.
    fn is_entry(&self, entry: &str) -> bool {
        matches!(
            (self.root, xml::local(entry)),
            (Root::UrlSet, "url") | (Root::Index, "sitemap")
        )
    }
}

impl XmlVisitor for Walk<'_> {
    fn open(&mut self, path: &[String], _tag: &BytesStart<'_>) -> ControlFlow<()> {
        if let [root] = path {
            self.root = match xml::local(root) {
                "urlset" => Root::UrlSet,
                "sitemapindex" => Root::Index,
                _ => return ControlFlow::Break(()),
            };
        }
        ControlFlow::Continue(())
    }

    fn close(&mut self, path: &[String], text: &str) -> ControlFlow<()> {
        match path {
            [_, entry, field] if self.is_entry(entry) => {
                match xml::local(field) {
                    "loc" => self.entry.loc = Some(text.to_owned()),
                    "lastmod" => self.entry.lastmod = parse_lastmod(text),
                    _ => {}
                }
                return ControlFlow::Continue(());
            }
            [_, entry] if self.is_entry(entry) => {
                if !self.end_entry() {
                    return ControlFlow::Continue(());
                }
            }
            _ => return ControlFlow::Continue(()),
        }
        self.read += 1;
        if self.read == self.leg.max_urls {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

#[cfg(test)]
#[path = "sitemap_tests.rs"]
mod tests;
