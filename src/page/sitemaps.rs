//! Sitemaps by default: the `Sitemap:` lines of every robots.txt the crawl
//! fetches are queued as sitemap requests (`meta["sitemap"]`, depth 1, the
//! robots.txt URL as referer), scoped and deduplicated like links, so a site
//! whose pages are only listed in its sitemap is crawled whole. The
//! sitemap files themselves are read by a sitemap leg, which the CLI adds to
//! a crawl's legs when they have none (see [`crate::legs::Sitemap`]). Off
//! with `--no-sitemaps` ([`crate::config::CrawlConfig::sitemaps`]). Depends on
//! [`crate::robots`], [`crate::request`] and the scope.

use crate::legs::SITEMAP_META;
use crate::request::Request;
use crate::robots::{Robots, RobotsRecord};

use super::scope::{Scope, strip_credentials};

/// The sitemap requests `record` (a fetched robots.txt) lists that `scope`
/// allows, with the counters their choice moved.
pub(crate) fn from_robots(
    record: &RobotsRecord,
    agent: &str,
    scope: &Scope,
    counters: &mut Vec<(&'static str, u64)>,
) -> Vec<Request> {
    if !(200..300).contains(&record.status) {
        return Vec::new();
    }
    let robots_url = format!("{}/robots.txt", record.origin);
    let Ok(base) = url::Url::parse(&robots_url) else {
        return Vec::new();
    };
    let parent = {
        let mut parent = Request::get(robots_url);
        parent.depth = 0;
        parent
    };
    let mut requests = Vec::new();
    for value in Robots::parse(&record.body, agent).sitemaps() {
        let Ok(mut url) = base.join(value.trim()) else {
            counters.push(("sitemap/robots_bad_url", 1));
            continue;
        };
        url.set_fragment(None);
        let mut request = Request::follow(&parent, String::from(url));
        request.meta.insert(SITEMAP_META.to_owned(), "1".to_owned());
        strip_credentials(&mut request, counters);
        match scope.check(&request) {
            Ok(()) => requests.push(request),
            Err(rejected) => counters.push((rejected.counter(), 1)),
        }
    }
    requests
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sitemap_lines_become_scoped_sitemap_requests() {
        let record = RobotsRecord {
            origin: "http://a.test:80".into(),
            fetched_at: 0,
            status: 200,
            body: b"User-agent: *\nDisallow: /private/\nSitemap: /sitemap.xml\n\
                    Sitemap: http://other.test/map.xml\nsitemap: /news.xml#top\n"
                .to_vec(),
        };
        let scope = Scope::new(["a.test".to_owned()], None);
        let mut counters = Vec::new();
        let requests = from_robots(&record, "legcrawl", &scope, &mut counters);
        let urls: Vec<&str> = requests.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(
            urls,
            ["http://a.test/sitemap.xml", "http://a.test/news.xml"]
        );
        assert!(
            requests
                .iter()
                .all(|r| r.meta[SITEMAP_META] == "1" && r.depth == 1)
        );
        assert_eq!(
            requests[0].referer.as_deref(),
            Some("http://a.test:80/robots.txt")
        );
        assert_eq!(counters, [("scope/offsite", 1)]);
        let failed = RobotsRecord {
            status: 503,
            ..record
        };
        assert!(from_robots(&failed, "legcrawl", &scope, &mut counters).is_empty());
    }
}
