//! [`FeedLinks`]: follows the entries of RSS and Atom feeds.
//!
//! Runs on 2xx responses whose media type is `application/rss+xml`,
//! `application/atom+xml`, `application/xml` or `text/xml`; with `sniff` on, also on
//! any other non-HTML response whose first 1024 bytes contain `<rss`, `<feed`, `:feed`
//! (a prefixed Atom root) or `<rdf:RDF`. The body is decoded by `xml::decode` (BOM, `Content-Type` charset, XML
//! declaration, UTF-8) and streamed with quick-xml, no DOM. Documents whose root is not
//! `rss`, `rdf:RDF` or (any prefix) `feed` yield nothing.
//!
//! Links read, in document order:
//! - RSS 2.0 / 1.0: the text of `item/link` (unprefixed), and with `guids` on, the text
//!   of `item/guid` unless it has `isPermaLink="false"`; an item without a `link`
//!   gives its permalink `guid` (no `isPermaLink="false"`) whatever `guids` says, as
//!   RSS 2.0 defines such a guid as the item's URL;
//! - Atom: `entry/link/@href` whose `rel` is absent or `alternate`.
//!
//! Every value is resolved against the nearest `xml:base` (itself resolved against the
//! outer one, down to the response URL), fragments are dropped, only `http`/`https`
//! URLs are kept, then the allow regexes (any, when there are some) and the deny
//! regexes (none) decide. Malformed XML stops the pass at the error; the links found
//! before it are kept. Emits `Request::follow(&response.request, url)`, duplicates
//! included (the scheduler deduplicates). Host scope and depth are the engine's.
//!
//! An entry's date (Atom `updated`, else `published`; RSS `pubDate`, else
//! `dc:date`) goes with its links as the sitemap leg's `lastmod`
//! ([`super::LASTMOD_META`]), so the revisit policy treats it as a sitemap
//! `lastmod`: a page whose entry is older than its last fetch is not asked
//! again until a feed dates it newer.
//! Depends on [`crate::request`], [`crate::response`] and the `xml` helpers.
//!
//! # Example
//! ```
//! use legcrawl::legs::{self, FeedLinks, FeedSettings};
//! # use legcrawl::{request::Request, response::Response};
//! # let response = Response {
//! #     request: Request::get("http://blog.example/feed"),
//! #     url: url::Url::parse("http://blog.example/feed").unwrap(),
//! #     status: 200,
//! #     headers: http::HeaderMap::new(),
//! #     body: bytes::Bytes::from_static(br#"<rss version="2.0"><channel>
//! #       <item><link>/posts/1</link></item>
//! #       <item><link>http://blog.example/drafts/2</link></item>
//! #     </channel></rss>"#),
//! #     truncated: false,
//! #     fetched_at: std::time::UNIX_EPOCH,
//! #     kept: false,
//! # };
//! let settings = FeedSettings { deny: vec!["/drafts/".into()], ..FeedSettings::default() };
//! let leg = FeedLinks::new(settings)?;
//! let out = legs::run(&leg, &response); // an RSS body, sniffed (no Content-Type)
//! let urls: Vec<_> = out.requests.iter().map(|r| r.url.as_str()).collect();
//! assert_eq!(urls, ["http://blog.example/posts/1"]);
//! # Ok::<(), legcrawl::legs::LegError>(())
//! ```

use std::ops::ControlFlow;

use quick_xml::events::BytesStart;
use url::Url;

use super::xml::{self, UrlFilter, XmlVisitor};
use super::{Leg, LegError, Output};
use crate::request::Request;
use crate::response::Response;

/// The name used in [`LegError`]s.
const LEG: &str = "feed";

/// How many leading body bytes are searched when sniffing for a feed.
const SNIFF_BYTES: usize = 1024;

/// Media types that are always parsed.
const FEED_TYPES: [&str; 4] = [
    "application/rss+xml",
    "application/atom+xml",
    "application/xml",
    "text/xml",
];

/// The settings of [`FeedLinks`], as read from the config file.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeedSettings {
    /// Also parse non-HTML responses of other (or no) media types whose first
    /// 1024 bytes contain `<rss`, `<feed`, `:feed` or `<rdf:RDF`. Default `true`.
    pub sniff: bool,
    /// Also follow RSS `item/guid` values that are permalinks (no `isPermaLink="false"`).
    /// Default `false`.
    pub guids: bool,
    /// Regexes (Rust `regex` syntax, unanchored) on the absolute URL; when non-empty, a
    /// link must match one. Default empty.
    pub allow: Vec<String>,
    /// Regexes on the absolute URL; a link matching any is dropped. Default empty.
    pub deny: Vec<String>,
}

impl Default for FeedSettings {
    fn default() -> FeedSettings {
        FeedSettings {
            sniff: true,
            guids: false,
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }
}

/// Extracts entry links from RSS and Atom feeds (see the module doc).
#[derive(Clone, Debug)]
pub struct FeedLinks {
    sniff: bool,
    guids: bool,
    filter: UrlFilter,
}

impl FeedLinks {
    /// Builds the leg; fails with [`LegError::BadRegex`] naming the first bad pattern.
    pub fn new(settings: FeedSettings) -> Result<FeedLinks, LegError> {
        Ok(FeedLinks {
            sniff: settings.sniff,
            guids: settings.guids,
            filter: UrlFilter::new(LEG, &settings.allow, &settings.deny)?,
        })
    }

    /// True when the response should be parsed as a feed.
    fn wants(&self, response: &Response) -> bool {
        if !response.is_content() {
            return false;
        }
        let media = response.media_type();
        if media.as_deref().is_some_and(|m| FEED_TYPES.contains(&m)) {
            return true;
        }
        self.sniff && !response.is_html() && sniffs_as_feed(&response.body)
    }
}

/// True when the first [`SNIFF_BYTES`] bytes hold a feed root element.
fn sniffs_as_feed(body: &[u8]) -> bool {
    let head = &body[..body.len().min(SNIFF_BYTES)];
    [&b"<rss"[..], b"<feed", b"<rdf:RDF", b":feed"]
        .iter()
        .any(|needle| head.windows(needle.len()).any(|w| w == *needle))
}

impl Leg for FeedLinks {
    fn process_response(&self, response: &Response, out: &mut Output) {
        if !self.wants(response) {
            return;
        }
        let content_type = response
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let text = xml::decode(content_type, &response.body);
        let mut page = response.url.clone();
        page.set_fragment(None);
        let mut feed = Feed {
            leg: self,
            kind: Kind::Unknown,
            page,
            bases: Vec::new(),
            guid_permalink: true,
            item_link: false,
            item_guid: None,
            urls: Vec::new(),
            entry_start: 0,
            entry_date: (None, None),
        };
        if let Err(error) = xml::walk(&text, &mut feed) {
            tracing::debug!(url = %response.url, %error, "feed: stopped at malformed XML");
        }
        for (url, date) in feed.urls {
            let mut request = Request::follow(&response.request, url);
            super::sitemap::with_lastmod(&mut request, date);
            out.push_request(request);
        }
    }
}

/// Which vocabulary the root element announced.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Unknown,
    Rss,
    Atom,
}

/// Walk state: the `xml:base` stack and the accepted URLs.
struct Feed<'a> {
    leg: &'a FeedLinks,
    kind: Kind,
    /// The response URL without fragment: the outermost base.
    page: Url,
    /// The base of each open element, innermost last.
    bases: Vec<Url>,
    /// The `isPermaLink` of the `guid` being read.
    guid_permalink: bool,
    /// The RSS item being read has a `link`.
    item_link: bool,
    /// The permalink `guid` of the RSS item being read, if any.
    item_guid: Option<String>,
    /// The accepted URLs, each with its entry's date (Unix seconds).
    urls: Vec<(String, Option<u64>)>,
    /// Where the entry being read starts in `urls`.
    entry_start: usize,
    /// The entry's date: (preferred, fallback).
    entry_date: (Option<u64>, Option<u64>),
}

impl Feed<'_> {
    fn base(&self) -> &Url {
        self.bases.last().unwrap_or(&self.page)
    }

    /// Resolves `value` against the current base and keeps it if it passes.
    fn push(&mut self, value: &str) {
        let value = value.trim();
        if value.is_empty() {
            return;
        }
        let Ok(mut url) = self.base().join(value) else {
            return;
        };
        url.set_fragment(None);
        if xml::is_web(&url) && self.leg.filter.accepts(url.as_str()) {
            self.urls.push((url.into(), None));
        }
    }

    /// An entry (Atom `entry`, RSS `item`) begins.
    fn begin_entry(&mut self) {
        self.entry_start = self.urls.len();
        self.entry_date = (None, None);
    }

    /// The entry ends: its links get its date.
    fn end_entry(&mut self) {
        let date = self.entry_date.0.or(self.entry_date.1);
        for (_, at) in &mut self.urls[self.entry_start..] {
            *at = date;
        }
        self.entry_start = self.urls.len();
    }

    /// True when `path` ends with `parent/child` (local names for Atom).
    fn at(path: &[String], parent: &str, child: &str, prefixed: bool) -> bool {
        fn name(n: &str, prefixed: bool) -> &str {
            if prefixed { xml::local(n) } else { n }
        }
        matches!(path, [.., p, c] if name(p, prefixed) == parent && name(c, prefixed) == child)
    }
}

impl XmlVisitor for Feed<'_> {
    fn open(&mut self, path: &[String], tag: &BytesStart<'_>) -> ControlFlow<()> {
        if path.len() == 1 {
            self.kind = match path[0].as_str() {
                "rss" | "rdf:RDF" | "RDF" => Kind::Rss,
                name if xml::local(name) == "feed" => Kind::Atom,
                _ => return ControlFlow::Break(()),
            };
        }
        let base = match xml::attr(tag, "xml:base") {
            Some(href) => self
                .base()
                .join(href.trim())
                .unwrap_or_else(|_| self.base().clone()),
            None => self.base().clone(),
        };
        self.bases.push(base);
        match self.kind {
            Kind::Atom if path.last().is_some_and(|n| xml::local(n) == "entry") => {
                self.begin_entry();
            }
            Kind::Atom if Self::at(path, "entry", "link", true) => {
                let rel = xml::attr(tag, "rel");
                let alternate = rel.as_deref().is_none_or(|r| r.trim() == "alternate");
                if let (true, Some(href)) = (alternate, xml::attr(tag, "href")) {
                    self.push(&href);
                }
            }
            Kind::Rss if path.last().is_some_and(|n| n == "item") => {
                self.item_link = false;
                self.item_guid = None;
                self.begin_entry();
            }
            Kind::Rss if Self::at(path, "item", "guid", false) => {
                self.guid_permalink = xml::attr(tag, "isPermaLink")
                    .is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"));
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn close(&mut self, path: &[String], text: &str) -> ControlFlow<()> {
        if self.kind == Kind::Atom {
            if Self::at(path, "entry", "updated", true) {
                self.entry_date.0 = super::sitemap::parse_lastmod(text);
            } else if Self::at(path, "entry", "published", true) {
                self.entry_date.1 = super::sitemap::parse_lastmod(text);
            } else if path.last().is_some_and(|n| xml::local(n) == "entry") {
                self.end_entry();
            }
        }
        if self.kind == Kind::Rss {
            if Self::at(path, "item", "pubDate", false) {
                self.entry_date.0 = parse_rfc2822(text);
            } else if Self::at(path, "item", "dc:date", false) {
                self.entry_date.1 = super::sitemap::parse_lastmod(text);
            }
            let permalink = self.guid_permalink && Self::at(path, "item", "guid", false);
            let link = Self::at(path, "item", "link", false);
            if permalink {
                self.item_guid = Some(text.to_owned());
            }
            if link {
                self.item_link = true;
            }
            if (permalink && self.leg.guids) || link {
                self.push(text);
            }
            if path.last().is_some_and(|n| n == "item")
                && !self.item_link
                && !self.leg.guids
                && let Some(guid) = self.item_guid.take()
            {
                // No <link>: the permalink guid is the item's URL.
                self.push(&guid);
            }
            if path.last().is_some_and(|n| n == "item") {
                self.end_entry();
            }
        }
        self.bases.pop();
        ControlFlow::Continue(())
    }
}

/// An RSS `pubDate` (RFC 822/2822, `Sat, 07 Sep 2002 00:00:01 GMT` or with a
/// numeric zone) as Unix seconds; `None` when it is not one, or before 1970.
fn parse_rfc2822(text: &str) -> Option<u64> {
    let at =
        time::OffsetDateTime::parse(text.trim(), &time::format_description::well_known::Rfc2822)
            .ok()?;
    u64::try_from(at.unix_timestamp()).ok()
}

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;
