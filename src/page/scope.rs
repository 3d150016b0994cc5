//! The engine's request filter: hosts in scope, depth limit, schemes.
//!
//! Legs propose requests; this decides which may enter the frontier (as Scrapy's
//! offsite middleware does), so a custom leg cannot lead a crawl off its sites.
//! Depends on [`crate::config`], [`crate::request`], [`crate::legs`] (the
//! sitemap mark), and on [`crate::canon::split`] to read most URLs
//! without parsing them.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::config::CrawlConfig;
use crate::request::Request;

/// `config` as a crawl's legs are configured with it: without allowed hosts
/// of its own, a `links` leg follows links to the hosts `scope` allows (see
/// [`Scope::of_crawl`]), so a link from one seed's host to another seed's is
/// followed, as the scope allows it.
pub fn leg_config(config: &CrawlConfig, scope: &Scope) -> CrawlConfig {
    let mut config = config.clone();
    if config.allowed_hosts.is_empty() {
        let mut hosts: Vec<String> = scope.hosts.iter().cloned().collect();
        hosts.sort();
        config.allowed_hosts = hosts;
    }
    config
}

/// Drops `user:pass@` from a link or redirect target, which is then queued
/// without it (no stored URL holds credentials), and counts it.
pub fn strip_credentials(request: &mut Request, counters: &mut Vec<(&'static str, u64)>) {
    if let Cow::Owned(url) = crate::canon::strip_credentials(&request.url) {
        counters.push(("url/credentials_stripped", 1));
        request.url = url;
    }
}

/// Why a proposed request was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Its host is not one the crawl may visit.
    Offsite,
    /// Deeper than `--max-depth`.
    TooDeep,
    /// Outside the directories of its host's seeds (`--no-parent`).
    Parent,
    /// Not an absolute http(s) URL.
    BadUrl,
    /// Matches none of the job's `allow` patterns, or one of its `deny` ones.
    Pattern,
}

impl Rejected {
    /// The counter this rejection increments.
    pub fn counter(self) -> &'static str {
        match self {
            Rejected::Offsite => "scope/offsite",
            Rejected::TooDeep => "scope/too_deep",
            Rejected::Parent => "scope/parent",
            Rejected::BadUrl => "scope/bad_url",
            Rejected::Pattern => "scope/pattern",
        }
    }
}

/// Hosts, depth and (with `--no-parent`) directories a crawl stays within,
/// and the job's `allow`/`deny` patterns that [`Scope::holds`] applies to
/// what is already queued or stored.
#[derive(Clone, Debug)]
pub struct Scope {
    hosts: HashSet<String>,
    max_depth: Option<u32>,
    /// With `--no-parent`: per host of a seed, the directories of its seeds.
    parents: Option<HashMap<String, Vec<String>>>,
    /// The job's `allow` patterns (empty: all).
    allow: Vec<regex::Regex>,
    /// The job's `deny` patterns.
    deny: Vec<regex::Regex>,
}

impl Scope {
    /// A scope of the given hosts (lower case, without port) and depth limit.
    pub fn new(hosts: impl IntoIterator<Item = String>, max_depth: Option<u32>) -> Scope {
        Scope {
            hosts: hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect(),
            max_depth,
            parents: None,
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }

    /// With the job's link patterns: [`Scope::holds`] rejects a URL that
    /// matches none of `allow` (when there are some) or one of `deny`.
    /// Patterns that do not compile are left out (the job's were checked
    /// when it was stored).
    pub fn patterns(mut self, allow: &[String], deny: &[String]) -> Scope {
        let compile = |patterns: &[String]| {
            patterns
                .iter()
                .filter_map(|p| regex::Regex::new(p).ok())
                .collect()
        };
        self.allow = compile(allow);
        self.deny = compile(deny);
        self
    }

    /// wget's `--no-parent` over `seeds`: on a seed's host, a request is in
    /// scope only when its path starts with the directory (the path up to its
    /// last `/`) of one of that host's seeds. Seeds (depth 0), redirect
    /// targets and sitemap files are exempt; other hosts are not limited.
    pub fn no_parent(mut self, seeds: &[String]) -> Scope {
        let mut parents: HashMap<String, Vec<String>> = HashMap::new();
        for seed in seeds {
            let Ok(url) = url::Url::parse(seed) else {
                continue;
            };
            let Some(host) = url.host_str() else {
                continue;
            };
            let path = url.path();
            let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
            parents
                .entry(host.to_ascii_lowercase())
                .or_default()
                .push(dir.to_owned());
        }
        self.parents = Some(parents);
        self
    }

    /// The host of each seed URL (those that parse).
    pub fn hosts_of<'a>(urls: impl IntoIterator<Item = &'a String>) -> Vec<String> {
        urls.into_iter()
            .filter_map(|u| url::Url::parse(u).ok())
            .filter_map(|u| u.host_str().map(str::to_owned))
            .collect()
    }

    /// The scope of a crawl with `config` whose seeds are `seeds` (all of
    /// them, `given` included): its hosts are its allowed hosts, or else the
    /// hosts of `seeds`, and the hosts of `given` (this run's seeds) always;
    /// its depth limit; and, with `no_parent`, the directories of `seeds`.
    /// The one rule of the embedded crawl, the shared worker and the legs.
    pub fn of_crawl(config: &CrawlConfig, seeds: &[String], given: &[String]) -> Scope {
        let mut hosts = match config.allowed_hosts.is_empty() {
            true => Scope::hosts_of(seeds),
            false => config.allowed_hosts.clone(),
        };
        hosts.extend(Scope::hosts_of(given));
        let scope = Scope::new(hosts, config.max_depth).patterns(&config.allow, &config.deny);
        match config.no_parent {
            true => scope.no_parent(seeds),
            false => scope,
        }
    }

    /// Accepts or rejects a proposed request. A page requisite
    /// ([`crate::legs::REQUISITE_META`]) is judged on its scheme only: it is
    /// fetched whatever its depth, host and directory (wget's `-p`).
    pub fn check(&self, request: &Request) -> Result<(), Rejected> {
        if crate::legs::requisites::is_requisite(request) {
            return match crate::canon::split::split(&request.url) {
                Some(_) => Ok(()),
                None => match url::Url::parse(&request.url) {
                    Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(()),
                    _ => Err(Rejected::BadUrl),
                },
            };
        }
        if self.max_depth.is_some_and(|max| request.depth > max) {
            return Err(Rejected::TooDeep);
        }
        if let Some(parts) = crate::canon::split::split(&request.url) {
            // An http(s) URL with a host, as the parser would read it.
            self.host_check(Some(parts.host))?;
            return self.parent_check(request, parts.host, parts.path);
        }
        let url = url::Url::parse(&request.url).map_err(|_| Rejected::BadUrl)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Rejected::BadUrl);
        }
        self.host_check(url.host_str())?;
        self.parent_check(request, url.host_str().unwrap_or_default(), url.path())
    }

    /// True when the job still holds `request`, queued or stored before the
    /// job changed: a seed (depth 0) always; else [`Scope::check`], and for
    /// a request found as a link (not a redirect target, a sitemap or a
    /// requisite) the job's
    /// `allow`/`deny` patterns, which the links leg applies when it finds
    /// links. A request it does not hold is dropped unfetched, and a stored
    /// page's items are withdrawn from the change feed.
    pub fn holds(&self, request: &Request) -> Result<(), Rejected> {
        // A seed is the job's own: whatever the hosts allowed, it is held.
        if request.depth == 0 {
            return Ok(());
        }
        self.check(request)?;
        let exempt = not_a_link(request) || crate::legs::requisites::is_requisite(request);
        let url = request.url.as_str();
        if exempt
            || ((self.allow.is_empty() || self.allow.iter().any(|re| re.is_match(url)))
                && !self.deny.iter().any(|re| re.is_match(url)))
        {
            return Ok(());
        }
        Err(Rejected::Pattern)
    }

    /// What decides [`Scope::holds`], as text: two scopes with the same
    /// description hold the same requests.
    pub fn describe(&self) -> String {
        let mut hosts: Vec<&String> = self.hosts.iter().collect();
        hosts.sort();
        let mut parents: Vec<_> = self.parents.iter().flatten().collect();
        parents.sort();
        let patterns = |list: &[regex::Regex]| -> Vec<String> {
            list.iter().map(|re| re.as_str().to_owned()).collect()
        };
        format!(
            "hosts={hosts:?};depth={:?};parents={parents:?};allow={:?};deny={:?}",
            self.max_depth,
            patterns(&self.allow),
            patterns(&self.deny)
        )
    }

    /// `--no-parent` (see [`Scope::no_parent`]).
    fn parent_check(&self, request: &Request, host: &str, path: &str) -> Result<(), Rejected> {
        let Some(parents) = &self.parents else {
            return Ok(());
        };
        let exempt = not_a_link(request);
        let within = |dirs: &Vec<String>| {
            let path = if path.is_empty() { "/" } else { path };
            dirs.iter().any(|dir| path.starts_with(dir.as_str()))
        };
        match parents.get(host) {
            Some(dirs) if !exempt && !within(dirs) => Err(Rejected::Parent),
            _ => Ok(()),
        }
    }

    fn host_check(&self, host: Option<&str>) -> Result<(), Rejected> {
        match host {
            Some(host) if self.hosts.contains(host) => Ok(()),
            _ => Err(Rejected::Offsite),
        }
    }
}

/// True for a request the link rules (`--no-parent`, the job's
/// `allow`/`deny`) do not judge: a seed, a redirect target, a sitemap file.
fn not_a_link(request: &Request) -> bool {
    request.depth == 0
        || !request.redirects.is_empty()
        || request.meta.contains_key(crate::legs::SITEMAP_META)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_parent_keeps_requests_below_their_hosts_seed_directories() {
        let seeds = [
            "http://a.test/book/".to_owned(),
            "http://a.test/guide/index.html".to_owned(),
        ];
        let hosts = ["a.test".to_owned(), "b.test".to_owned()];
        let scope = Scope::new(hosts, None).no_parent(&seeds);
        let link = |url: &str| {
            let mut request = Request::get(url);
            request.depth = 1;
            request
        };
        for inside in [
            "http://a.test/book/",
            "http://a.test/book/ch1.html",
            "http://a.test/guide/x/y",
            "http://b.test/anywhere",
        ] {
            assert_eq!(scope.check(&link(inside)), Ok(()), "{inside}");
        }
        for outside in [
            "http://a.test/",
            "http://a.test/bookish",
            "http://a.test/guide",
        ] {
            assert_eq!(
                scope.check(&link(outside)),
                Err(Rejected::Parent),
                "{outside}"
            );
        }
        let mut redirected = link("http://a.test/elsewhere");
        redirected.redirects.push("http://a.test/book/old".into());
        assert_eq!(scope.check(&redirected), Ok(()));
        let mut sitemap = link("http://a.test/sitemap.xml");
        sitemap
            .meta
            .insert(crate::legs::SITEMAP_META.into(), "1".into());
        assert_eq!(scope.check(&sitemap), Ok(()));
        assert_eq!(
            scope.check(&Request::get("http://a.test/")),
            Ok(()),
            "a seed"
        );
    }

    #[test]
    fn requisites_pass_whatever_their_depth_host_and_directory() {
        let scope = Scope::new(["a.test".to_owned()], Some(1))
            .no_parent(&["http://a.test/book/".to_owned()]);
        let mut request = Request::get("http://cdn.test/x.css");
        request.depth = 9;
        assert_eq!(scope.check(&request), Err(Rejected::TooDeep));
        request
            .meta
            .insert(crate::legs::REQUISITE_META.into(), "1".into());
        assert_eq!(scope.check(&request), Ok(()));
        request.url = "http://a.test/outside/x.png".into();
        assert_eq!(scope.check(&request), Ok(()));
        request.url = "data:image/png;base64,AA".into();
        assert_eq!(scope.check(&request), Err(Rejected::BadUrl));
    }

    #[test]
    fn hosts_depth_and_schemes() {
        let scope = Scope::new(["Example.com".to_owned()], Some(2));
        let mut request = Request::get("http://example.com:8080/a");
        assert_eq!(scope.check(&request), Ok(()));
        request.depth = 3;
        assert_eq!(scope.check(&request), Err(Rejected::TooDeep));
        assert_eq!(
            scope.check(&Request::get("http://other.com/")),
            Err(Rejected::Offsite)
        );
        assert_eq!(
            scope.check(&Request::get("ftp://example.com/")),
            Err(Rejected::BadUrl)
        );
        assert_eq!(
            scope.check(&Request::get("not a url")),
            Err(Rejected::BadUrl)
        );
    }

    #[test]
    fn split_and_parsed_urls_are_judged_alike() {
        let scope = Scope::new(["example.com".to_owned()], None);
        for (url, verdict) in [
            ("http://example.com/a?b=1", Ok(())),
            ("https://example.com:8443/a", Ok(())),
            ("http://EXAMPLE.com/a b", Ok(())),
            ("http://example.com.evil.test/", Err(Rejected::Offsite)),
            ("https://other.com/", Err(Rejected::Offsite)),
            ("http://u@other.com/", Err(Rejected::Offsite)),
            ("mailto:a@example.com", Err(Rejected::BadUrl)),
        ] {
            assert_eq!(scope.check(&Request::get(url)), verdict, "{url}");
        }
    }
}
