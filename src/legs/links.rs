//! [`LinkExtractor`]: follows the links of HTML pages (the SEP's regex link extractor).
//!
//! Runs only on 2xx HTML responses ([`Response::is_html`]). The body is decoded with
//! [`crate::charset`] and scanned at tokenizer level, no DOM (`html.rs`: a byte skimmer
//! plus html5ever's tokenizer for the tags read). Links are read from
//! `a[href]`, `area[href]`, `link[rel~=next][href]` and, when enabled, `img[src]` and
//! `iframe[src]`. The first `<base href>` of the document is the base of every link, as
//! in browsers (even links before it). URLs are resolved with [`Url::join`] (queries in
//! the page's encoding, as browsers do), fragments are dropped, and only `http`/`https`
//! URLs are kept — links back to the page itself included: dropping them would be
//! dedup, which is the scheduler's job (and its `dupefilter/filtered` count). A link is then kept when it passes, in
//! order: `rel=nofollow` (and `<meta name=robots content=nofollow|none>` for the whole
//! page) unless nofollow links are followed; the host scope; the allow regexes (any,
//! when there are some); the deny regexes (none). No link is emitted from a page at
//! depth >= `max_depth`. Emitted requests are `Request::follow(&response.request, url)`,
//! in document order, duplicates included (the scheduler deduplicates).
//!
//! Depends on `html`, `resolve`, [`crate::canon::split`], [`crate::charset`],
//! [`crate::config`], [`crate::request`] and [`crate::response`].

use std::borrow::Cow;
use std::ops::ControlFlow;

use regex::Regex;
use url::Url;

use super::html::{self, StartTag, Visitor, has_token};
use super::{Leg, LegError, Output, resolve};
use crate::canon::split::split;
use crate::config::CrawlConfig;
use crate::request::Request;
use crate::response::Response;

/// The name used in [`LegError`]s.
const LEG: &str = "links";

/// Extracts followable links from HTML pages.
///
/// Settings made with the builder methods are kept by [`Leg::configure`]; the others
/// (allow, deny, allowed hosts, nofollow, max depth) are taken from the [`CrawlConfig`].
#[derive(Debug, Clone, Default)]
pub struct LinkExtractor {
    allow: Vec<Regex>,
    deny: Vec<Regex>,
    /// Lower-case host names; empty means "the host of the page's request URL".
    allowed_hosts: Vec<String>,
    follow_nofollow: bool,
    max_depth: Option<u32>,
    images: bool,
    iframes: bool,
    /// When not empty, only links inside elements matching one of these selectors.
    restrict: Vec<scraper::Selector>,
    pinned: Pinned,
}

/// Which settings were set explicitly and must survive `configure`.
#[derive(Debug, Clone, Copy, Default)]
struct Pinned {
    allow: bool,
    deny: bool,
    allowed_hosts: bool,
    follow_nofollow: bool,
    max_depth: bool,
}

impl LinkExtractor {
    /// An extractor with no regexes, seed-host scoping, `nofollow` links skipped, no depth
    /// limit, and neither images nor iframes.
    pub fn new() -> LinkExtractor {
        LinkExtractor::default()
    }

    /// Only follow URLs matching one of `patterns` (empty: all).
    pub fn allow<S: AsRef<str>>(mut self, patterns: &[S]) -> Result<LinkExtractor, LegError> {
        self.allow = compile(patterns)?;
        self.pinned.allow = true;
        Ok(self)
    }

    /// Never follow URLs matching one of `patterns`.
    pub fn deny<S: AsRef<str>>(mut self, patterns: &[S]) -> Result<LinkExtractor, LegError> {
        self.deny = compile(patterns)?;
        self.pinned.deny = true;
        Ok(self)
    }

    /// Only follow links to these hosts (empty: the host of the page's request URL).
    pub fn allowed_hosts<S: AsRef<str>>(mut self, hosts: &[S]) -> Result<LinkExtractor, LegError> {
        self.allowed_hosts = normalize_hosts(hosts)?;
        self.pinned.allowed_hosts = true;
        Ok(self)
    }

    /// Follow links marked `rel=nofollow` (and pages marked robots `nofollow`).
    pub fn follow_nofollow(mut self, follow: bool) -> LinkExtractor {
        self.follow_nofollow = follow;
        self.pinned.follow_nofollow = true;
        self
    }

    /// Emit no links from pages at this depth or deeper (`None`: no limit).
    pub fn max_depth(mut self, max_depth: Option<u32>) -> LinkExtractor {
        self.max_depth = max_depth;
        self.pinned.max_depth = true;
        self
    }

    /// Also follow `img[src]`.
    pub fn images(mut self, on: bool) -> LinkExtractor {
        self.images = on;
        self
    }

    /// Only follow links inside elements matching one of these CSS selectors (like
    /// Scrapy's `restrict_css`; e.g. `["#content", "nav.pager"]`). Empty: the whole page.
    pub fn restrict_css<S: AsRef<str>>(
        mut self,
        selectors: &[S],
    ) -> Result<LinkExtractor, LegError> {
        self.restrict = selectors
            .iter()
            .map(|s| {
                scraper::Selector::parse(s.as_ref()).map_err(|error| LegError::Invalid {
                    leg: LEG,
                    message: format!("restrict_css: bad selector {:?}: {error}", s.as_ref()),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// Also follow `iframe[src]`.
    pub fn iframes(mut self, on: bool) -> LinkExtractor {
        self.iframes = on;
        self
    }

    /// True when an absolute, fragment-free URL (`url`, with host `host`) passes host
    /// scope, allow and deny.
    fn in_scope(&self, host: Option<&str>, url: &str, default_host: Option<&str>) -> bool {
        let Some(host) = host else {
            return false;
        };
        let host_ok = if self.allowed_hosts.is_empty() {
            default_host == Some(host)
        } else {
            self.allowed_hosts.iter().any(|allowed| allowed == host)
        };
        host_ok
            && (self.allow.is_empty() || self.allow.iter().any(|re| re.is_match(url)))
            && !self.deny.iter().any(|re| re.is_match(url))
    }
}

impl Leg for LinkExtractor {
    fn configure(&mut self, config: &CrawlConfig) -> Result<(), LegError> {
        if !self.pinned.allow {
            self.allow = compile(&config.allow)?;
        }
        if !self.pinned.deny {
            self.deny = compile(&config.deny)?;
        }
        if !self.pinned.allowed_hosts {
            self.allowed_hosts = normalize_hosts(&config.allowed_hosts)?;
        }
        if !self.pinned.follow_nofollow {
            self.follow_nofollow = config.follow_nofollow;
        }
        if !self.pinned.max_depth {
            self.max_depth = config.max_depth;
        }
        Ok(())
    }

    /// Requests pass through unchanged.
    fn rewrites_requests(&self) -> bool {
        false
    }

    fn process_response(&self, response: &Response, out: &mut Output) {
        if !response.is_content() || !response.is_html() {
            return;
        }
        if self
            .max_depth
            .is_some_and(|max| response.request.depth >= max)
        {
            return;
        }
        let content_type = response
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let (text, encoding) = crate::charset::decode(content_type, &response.body);
        let mut links = Links {
            extractor: self,
            base: None,
            hrefs: Hrefs::default(),
            page_nofollow: false,
        };
        html::scan(&text, &mut links);
        if links.page_nofollow {
            return;
        }
        if !self.restrict.is_empty() {
            links.hrefs = self.restricted_hrefs(&text);
        }
        let page = strip_fragment(&response.url);
        let base = links
            .base
            .and_then(|href| page.join(&href).ok())
            .filter(is_web)
            .unwrap_or(page);
        let request_host = request_host(response);
        let request_host = request_host.as_deref();
        // Browsers encode a link's query in the page's encoding.
        let encode: &dyn Fn(&str) -> Cow<'_, [u8]> = &|s| encoding.encode(s).0;
        let mut options = Url::options().base_url(Some(&base));
        let utf8 = encoding.output_encoding() == encoding_rs::UTF_8;
        if !utf8 {
            options = options.encoding_override(Some(encode));
        }
        // Plain links against a plain base are joined without the parser.
        let plain_base = split(base.as_str()).filter(|_| utf8);
        for href in links.hrefs.iter() {
            let joined = plain_base
                .as_ref()
                .and_then(|base| resolve::join(base, href));
            let link = match joined {
                Some((text, host)) => self
                    .in_scope(Some(host), &text, request_host)
                    .then_some(text),
                None => self.parse_link(&options, href, request_host),
            };
            if let Some(link) = link {
                out.push_request(Request::follow(&response.request, link));
            }
        }
    }
}

impl LinkExtractor {
    /// Resolves `href` with the parser; the absolute URL when it is followed.
    fn parse_link(
        &self,
        options: &url::ParseOptions<'_>,
        href: &str,
        request_host: Option<&str>,
    ) -> Option<String> {
        let mut url = options.parse(href).ok()?;
        url.set_fragment(None);
        let follow = is_web(&url) && self.in_scope(url.host_str(), url.as_str(), request_host);
        follow.then(|| url.into())
    }

    /// The link values inside the `restrict_css` regions, in document order per
    /// region (a DOM parse with scraper: only when regions are configured).
    fn restricted_hrefs(&self, text: &str) -> Hrefs {
        let document = scraper::Html::parse_document(text);
        let mut hrefs = Hrefs::default();
        for region in &self.restrict {
            for element in document.select(region) {
                for node in std::iter::once(element)
                    .chain(element.descendants().filter_map(scraper::ElementRef::wrap))
                {
                    if let Some(href) = self.link_of(node.value()) {
                        hrefs.push(href);
                    }
                }
            }
        }
        hrefs
    }

    /// The followable link of one element, by the same rules as the scan.
    fn link_of<'e>(&self, element: &'e scraper::node::Element) -> Option<&'e str> {
        let rel = element.attr("rel").unwrap_or("");
        let followable = self.follow_nofollow || !has_token(rel, "nofollow");
        match element.name() {
            "a" | "area" if followable => element.attr("href"),
            "link" if followable && has_token(rel, "next") => element.attr("href"),
            "img" if self.images => element.attr("src"),
            "iframe" if self.iframes => element.attr("src"),
            _ => None,
        }
    }
}

/// Raw link values in document order, end to end in one string: a page's
/// million links cost their bytes and four more each, not a `String` apiece.
#[derive(Default)]
struct Hrefs {
    text: String,
    ends: Vec<u32>,
}

impl Hrefs {
    fn push(&mut self, href: &str) {
        // A body is capped well below 4 GiB (`--max-body`); past that the
        // rest of the links are dropped rather than misread.
        if let Ok(end) = u32::try_from(self.text.len() + href.len()) {
            self.text.push_str(href);
            self.ends.push(end);
        }
    }

    fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.text[start as usize..end as usize])
    }
}

/// Collects raw link values during the scan; resolution waits for the `<base>`.
struct Links<'a> {
    extractor: &'a LinkExtractor,
    base: Option<String>,
    hrefs: Hrefs,
    page_nofollow: bool,
}

impl Visitor for Links<'_> {
    fn wants(&self, name: &[u8]) -> bool {
        match name {
            b"a" | b"area" | b"link" => true,
            b"base" => self.base.is_none(),
            b"meta" => !self.extractor.follow_nofollow,
            b"img" => self.extractor.images,
            b"iframe" => self.extractor.iframes,
            _ => false,
        }
    }

    fn start_tag(&mut self, tag: &StartTag<'_>) -> ControlFlow<()> {
        let skip_nofollow = !self.extractor.follow_nofollow;
        let rel = tag.attr("rel").unwrap_or("");
        let followable = !(skip_nofollow && has_token(rel, "nofollow"));
        let value = match tag.name {
            "a" | "area" if followable => tag.attr("href"),
            "link" if followable && has_token(rel, "next") => tag.attr("href"),
            "img" if self.extractor.images => tag.attr("src"),
            "iframe" if self.extractor.iframes => tag.attr("src"),
            "base" if self.base.is_none() => {
                self.base = tag.attr("href").map(str::to_owned);
                None
            }
            "meta" if skip_nofollow => {
                let robots = tag
                    .attr("name")
                    .is_some_and(|n| n.eq_ignore_ascii_case("robots"));
                let content = tag.attr("content").unwrap_or("");
                if robots
                    && (has_list_token(content, "nofollow") || has_list_token(content, "none"))
                {
                    self.page_nofollow = true;
                    return ControlFlow::Break(());
                }
                None
            }
            _ => None,
        };
        if let Some(value) = value {
            self.hrefs.push(value);
        }
        ControlFlow::Continue(())
    }
}

/// True when the comma-separated robots directive list contains `token`.
fn has_list_token(list: &str, token: &str) -> bool {
    list.split(',')
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

fn is_web(url: &Url) -> bool {
    matches!(url.scheme(), "http" | "https")
}

fn strip_fragment(url: &Url) -> Url {
    let mut url = url.clone();
    url.set_fragment(None);
    url
}

/// The host of the URL the page was requested with (the scope when no hosts are set).
fn request_host(response: &Response) -> Option<Cow<'_, str>> {
    if let Some(parts) = split(&response.request.url) {
        return Some(Cow::Borrowed(parts.host));
    }
    match Url::parse(&response.request.url) {
        Ok(url) => url.host_str().map(|host| Cow::Owned(host.to_owned())),
        Err(_) => response.url.host_str().map(Cow::Borrowed),
    }
}

fn compile<S: AsRef<str>>(patterns: &[S]) -> Result<Vec<Regex>, LegError> {
    patterns
        .iter()
        .map(|pattern| {
            let pattern = pattern.as_ref();
            Regex::new(pattern).map_err(|source| LegError::BadRegex {
                leg: LEG,
                pattern: pattern.to_owned(),
                source,
            })
        })
        .collect()
}

/// Host names as `Url` writes them (lower case, IDNA), from `host` or `host:port`.
fn normalize_hosts<S: AsRef<str>>(hosts: &[S]) -> Result<Vec<String>, LegError> {
    hosts
        .iter()
        .map(|host| {
            let given = host.as_ref().trim();
            Url::parse(&format!("http://{given}/"))
                .ok()
                .filter(|url| url.path() == "/" && url.username().is_empty())
                .and_then(|url| url.host_str().map(str::to_owned))
                .ok_or_else(|| LegError::Invalid {
                    leg: LEG,
                    message: format!("allowed host {given:?} is not a host name"),
                })
        })
        .collect()
}

#[cfg(test)]
#[path = "links_tests.rs"]
mod tests;
