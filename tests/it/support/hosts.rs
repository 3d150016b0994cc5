//! A generated site spread over several loopback hosts, one [`TestServer`] each.
//!
//! [`MultiSite::start`] takes the link structure of [`Site::generate`] (page
//! `i` links to `i + 1` and to seven pseudo-random pages) and puts page `i` on
//! host `i % hosts`, served at `127.0.0.{2 + h}` (a port of its own). Links to a
//! page on the same host use the single-host spellings of [`site::spell`];
//! links to another host are absolute (`http://`, scheme-relative, with a
//! fragment). The index `/` of host `h` links to page `h`, so a crawl seeded
//! with every host's `/` that may follow links across hosts
//! ([`MultiSite::crawl_args`]: seeds and `--allow-host` each) reaches every
//! page (through the `i + 1` chain), and [`MultiSite::expected`] is every
//! host's `/` and pages. Every page also links
//! to [`site::OFFSITE`]. `/robots.txt` allows everything; anything else is a 404.
//!
//! Pages are named `host:port/path` ([`MultiSite::key`], [`item_key`]) so that
//! `/p/3.html` on one host and a stray `/p/3.html` on another never compare
//! equal.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::server::{TestRequest, TestResponse, TestServer, handler};
use super::site::{self, OFFSITE, Site, page_path};

/// A delay before the response to each target (path and query).
pub type Delay = Arc<dyn Fn(&str) -> Duration + Send + Sync>;

/// No delay anywhere.
pub fn no_delay() -> Delay {
    Arc::new(|_| Duration::ZERO)
}

/// `ms` milliseconds before every answer.
pub fn fixed(ms: u64) -> Delay {
    Arc::new(move |_| Duration::from_millis(ms))
}

/// `crawl_args` (seeds and `--allow-host`s, [`MultiSite::crawl_args`])
/// followed by `options`, as one argument list.
pub fn args<'a>(crawl_args: &'a [String], options: &[&'a str]) -> Vec<&'a str> {
    crawl_args
        .iter()
        .map(String::as_str)
        .chain(options.iter().copied())
        .collect()
}

/// A site over several hosts; the servers stop when it is dropped.
pub struct MultiSite {
    site: Site,
    servers: Vec<TestServer>,
    authorities: Vec<String>,
}

/// The loopback address of host `h` (`127.0.0.2` onward, leaving `127.0.0.1`
/// to Redis and single-host tests).
pub fn host_ip(h: usize) -> String {
    assert!(h < 250, "at most 250 hosts");
    format!("127.0.0.{}", 2 + h)
}

impl MultiSite {
    /// `pages` pages over `hosts` hosts, links drawn from `seed`, each answer
    /// held back by `delay(target)`.
    pub fn start(pages: usize, hosts: usize, seed: u64, delay: Delay) -> MultiSite {
        let site = Site::generate(pages, seed);
        let names: Arc<OnceLock<Vec<String>>> = Arc::default();
        let servers: Vec<TestServer> = (0..hosts.max(1))
            .map(|h| {
                let site = site.clone();
                let names = Arc::clone(&names);
                let delay = Arc::clone(&delay);
                TestServer::start_on(
                    &host_ip(h),
                    handler(move |req| {
                        let names = names.get().expect("authorities set before serving");
                        let response = respond(&site, names, h, req);
                        response.delay(delay(&req.target))
                    }),
                )
            })
            .collect();
        let authorities: Vec<String> = servers.iter().map(|s| s.addr().to_string()).collect();
        names.set(authorities.clone()).expect("set once");
        MultiSite {
            site,
            servers,
            authorities,
        }
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.servers.len()
    }

    /// The server of host `h`.
    pub fn server(&self, h: usize) -> &TestServer {
        &self.servers[h]
    }

    /// Every server.
    pub fn servers(&self) -> &[TestServer] {
        &self.servers
    }

    /// `http://IP:PORT/` of every host: the seeds.
    pub fn seeds(&self) -> Vec<String> {
        self.authorities
            .iter()
            .map(|a| format!("http://{a}/"))
            .collect()
    }

    /// The seeds, then `--allow-host IP` for each host: without the latter a
    /// crawl follows links only within each page's own host.
    pub fn crawl_args(&self) -> Vec<String> {
        let mut out = self.seeds();
        for h in 0..self.hosts() {
            out.push("--allow-host".into());
            out.push(host_ip(h));
        }
        out
    }

    /// `host:port/path` of `path` on host `h`.
    pub fn key(&self, h: usize, path: &str) -> String {
        format!("{}{path}", self.authorities[h])
    }

    /// Every page a complete crawl fetches, as [`MultiSite::key`]s.
    pub fn expected(&self) -> BTreeSet<String> {
        let indexes = (0..self.hosts()).map(|h| self.key(h, "/"));
        let pages = (0..self.site.len()).map(|i| self.key(i % self.hosts(), &page_path(i)));
        indexes.chain(pages).collect()
    }

    /// Requests for each [`MultiSite::key`] across all hosts, robots.txt left out.
    pub fn fetches(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (h, server) in self.servers.iter().enumerate() {
            for (target, n) in server.all_hits() {
                if target != "/robots.txt" {
                    *out.entry(self.key(h, &target)).or_insert(0) += n;
                }
            }
        }
        out
    }

    /// Total page requests (robots.txt left out).
    pub fn total_fetches(&self) -> u64 {
        self.fetches().values().sum()
    }

    /// Total requests of every kind.
    pub fn requests(&self) -> u64 {
        self.servers.iter().map(TestServer::requests).sum()
    }
}

/// The answer of host `h` (of `names`) to `req`.
fn respond(site: &Site, names: &[String], h: usize, req: &TestRequest) -> TestResponse {
    let hosts = names.len();
    let path = req.path();
    if path == "/robots.txt" {
        return TestResponse::ok("User-agent: *\nAllow: /\n").header("Content-Type", "text/plain");
    }
    if path == "/" {
        let first = if h < site.len() {
            format!("<a href=\"p/{h}.html\">start</a>")
        } else {
            String::new()
        };
        return TestResponse::html(format!(
            "<!DOCTYPE html>\n<html><head><title>Index {h}</title></head>\
             <body>{first} <a href=\"{OFFSITE}\">elsewhere</a></body></html>\n"
        ));
    }
    let Some(i) = path
        .strip_prefix("/p/")
        .and_then(|rest| rest.strip_suffix(".html"))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&i| i < site.len() && i % hosts == h && path == page_path(i))
    else {
        return TestResponse::not_found();
    };
    let own = &names[h];
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Page {i}</title></head>\n\
         <body><h1>Page {i}</h1><ul>\n"
    );
    for (k, &target) in site.links(i).iter().enumerate() {
        let there = target % hosts;
        let href = if there == h {
            site::spell(target, (i + k) % site::SPELLINGS, own)
        } else {
            let other = &names[there];
            match (i + k) % 3 {
                0 => format!("http://{other}/p/{target}.html"),
                1 => format!("//{other}/p/{target}.html"),
                _ => format!("http://{other}/p/{target}.html#x"),
            }
        };
        let _ = writeln!(html, "<li><a href=\"{href}\">page {target}</a></li>");
    }
    let _ = writeln!(
        html,
        "</ul><p><a href=\"{OFFSITE}\">elsewhere</a></p></body></html>"
    );
    TestResponse::html(html)
}

/// An item's `url` as `host:port/path` (query kept), comparable with
/// [`MultiSite::key`].
pub fn item_key(item: &serde_json::Value) -> String {
    url_key(item["url"].as_str().expect("url field"))
}

/// `url` as `host:port/path` (query kept), comparable with [`MultiSite::key`].
pub fn url_key(url: &str) -> String {
    let url = url::Url::parse(url).expect("url parses");
    let authority = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or("")),
        None => url.host_str().unwrap_or("").to_owned(),
    };
    match url.query() {
        Some(q) if !q.is_empty() => format!("{authority}{}?{q}", url.path()),
        _ => format!("{authority}{}", url.path()),
    }
}
