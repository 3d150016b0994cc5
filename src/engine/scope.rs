//! The engine's request filter: hosts in scope, depth limit, schemes.
//!
//! Legs propose requests; this decides which may enter the frontier (as Scrapy's
//! offsite middleware does), so a custom leg cannot lead a crawl off its sites.
//! Depends on [`crate::config`], [`crate::request`], and on [`crate::canon::split`] to read most URLs
//! without parsing them.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::config::CrawlConfig;
use crate::request::Request;

/// `config` as a crawl's legs are configured with it: without allowed hosts
/// of its own, a `links` leg follows links to `hosts` (see
/// [`Scope::crawl_hosts`]), so a link from one seed's host to another seed's
/// is followed, as the scope allows it.
pub fn leg_config(config: &CrawlConfig, hosts: &[String]) -> CrawlConfig {
    let mut config = config.clone();
    if config.allowed_hosts.is_empty() {
        config.allowed_hosts = hosts.to_vec();
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
    /// Not an absolute http(s) URL.
    BadUrl,
}

impl Rejected {
    /// The counter this rejection increments.
    pub fn counter(self) -> &'static str {
        match self {
            Rejected::Offsite => "scope/offsite",
            Rejected::TooDeep => "scope/too_deep",
            Rejected::BadUrl => "scope/bad_url",
        }
    }
}

/// Hosts and depth a crawl stays within.
#[derive(Clone, Debug)]
pub struct Scope {
    hosts: HashSet<String>,
    max_depth: Option<u32>,
}

impl Scope {
    /// A scope of the given hosts (lower case, without port) and depth limit.
    pub fn new(hosts: impl IntoIterator<Item = String>, max_depth: Option<u32>) -> Scope {
        Scope {
            hosts: hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect(),
            max_depth,
        }
    }

    /// The host of each seed URL (those that parse).
    pub fn hosts_of<'a>(urls: impl IntoIterator<Item = &'a String>) -> Vec<String> {
        urls.into_iter()
            .filter_map(|u| url::Url::parse(u).ok())
            .filter_map(|u| u.host_str().map(str::to_owned))
            .collect()
    }

    /// The hosts a crawl may visit: `allowed` (its allowed hosts), or else the
    /// hosts of `seeds` (all the crawl's); the hosts of `given` (this run's
    /// seeds) always. Sorted, without repeats.
    pub fn crawl_hosts(allowed: &[String], seeds: &[String], given: &[String]) -> Vec<String> {
        let mut hosts = match allowed.is_empty() {
            true => Scope::hosts_of(seeds),
            false => allowed.to_vec(),
        };
        hosts.extend(Scope::hosts_of(given));
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// Accepts or rejects a proposed request.
    pub fn check(&self, request: &Request) -> Result<(), Rejected> {
        if self.max_depth.is_some_and(|max| request.depth > max) {
            return Err(Rejected::TooDeep);
        }
        if let Some(parts) = crate::canon::split::split(&request.url) {
            // An http(s) URL with a host, as the parser would read it.
            return self.host_check(Some(parts.host));
        }
        let url = url::Url::parse(&request.url).map_err(|_| Rejected::BadUrl)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Rejected::BadUrl);
        }
        self.host_check(url.host_str())
    }

    fn host_check(&self, host: Option<&str>) -> Result<(), Rejected> {
        match host {
            Some(host) if self.hosts.contains(host) => Ok(()),
            _ => Err(Rejected::Offsite),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
