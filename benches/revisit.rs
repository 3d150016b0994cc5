//! Revisit policies over simulated nights: freshness against requests.
//!
//! A site of [`PAGES`] pages `/p/{i}` whose contents change at known, mixed
//! rates ([`CLASSES`]: on average daily to yearly, each page's changes a
//! Poisson process drawn from a seeded generator, with a last change before
//! the first night as old as its rate makes it), plus an index `/` that links
//! them all. An in-process hyper server answers from the simulated time with
//! the page's current version, an `ETag` (a matching `If-None-Match` gets a
//! 304) and, on a dated site, a `Last-Modified` of its last change; it counts
//! the requests for pages.
//!
//! Each variant crawls the site on [`NIGHTS`] simulated nights, through the
//! real binary, each night a day later: `LEGCRAWL_CLOCK_OFFSET` moves the
//! crawl's clock, and the server's simulated time with it. After each night,
//! `legcrawl dump pages --json` gives each page's stored content hash, and the
//! night's freshness is the share of pages whose stored content is the live
//! one. Reported per variant: the mean freshness over the nights and the page
//! requests over all of them (the first night's included).
//!
//! Variants: `estimated` (the default policy), `adaptive` (Nutch's schedule),
//! `every night` (`--revisit-after 0`), `estimated` on a site that sends no
//! `Last-Modified`, and `estimated` with a revisit budget of 27 % (about
//! what the policy spends on its own), 20 % and 10 % of the pages a night
//! (`--revisit-budget`).
//!
//! The target (issue 45): the default policy keeps Nutch's freshness within
//! half a point with at least 15 % fewer requests; the bench fails otherwise.
//!
//! Run: `cargo bench --bench revisit`. Environment: `REVISIT_BENCH_PAGES`
//! (default 1000), `REVISIT_BENCH_NIGHTS` (default 30), `REVISIT_BENCH_SEED`
//! (default 1), `REVISIT_BENCH_ONLY` (a substring of the variant names).

use std::collections::HashMap;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use http_body_util::Full;
use legcrawl::revisit::content_hash;

#[path = "support/site.rs"]
mod site;

use site::splitmix64;

/// Pages on the site, besides the index.
const PAGES: usize = 1000;
/// Simulated nights.
const NIGHTS: u32 = 30;
/// Mean days between a page's changes, and the share of pages (%) of each.
const CLASSES: [(f64, u64); 6] = [
    (1.0, 10),
    (3.0, 10),
    (7.0, 20),
    (30.0, 20),
    (90.0, 20),
    (365.0, 20),
];
/// The oldest last change before the first night, in days.
const OLDEST_DAYS: f64 = 3.0 * 365.0;
const DAY: f64 = 86_400.0;
/// Largest share of Nutch's requests the default policy may make.
const TARGET_REQUESTS: f64 = 0.85;
/// Freshness the default policy may lose against Nutch's.
const TARGET_FRESHNESS: f64 = 0.005;

/// A uniform draw in (0, 1].
fn uniform(rng: &mut u64) -> f64 {
    ((splitmix64(rng) >> 11) as f64 + 1.0) / (1u64 << 53) as f64
}

/// One page's history: when it last changed before the first night, and when
/// it changes after (seconds from the first night), in order.
struct History {
    mean_days: f64,
    before: f64,
    changes: Vec<f64>,
}

impl History {
    /// The version live at `at` (changes so far) and when it was made.
    fn live(&self, at: f64) -> (usize, f64) {
        let version = self.changes.partition_point(|&c| c <= at);
        let since = match version {
            0 => self.before,
            v => self.changes[v - 1],
        };
        (version, since)
    }
}

/// The simulated site (see the module doc).
struct Sim {
    pages: Vec<History>,
    /// Unix seconds of the first night's start (real time).
    start: f64,
    /// The simulated clock's shift from real time, seconds.
    offset: AtomicI64,
    dated: bool,
    requests: AtomicU64,
}

impl Sim {
    fn new(pages: usize, nights: u32, seed: u64, dated: bool) -> Sim {
        let mut rng = seed;
        let total: u64 = CLASSES.iter().map(|c| c.1).sum();
        let horizon = f64::from(nights + 1) * DAY;
        let pages = (0..pages)
            .map(|_| {
                let mut pick = splitmix64(&mut rng) % total;
                let mean_days = CLASSES
                    .iter()
                    .find(|(_, share)| {
                        let here = pick < *share;
                        pick = pick.saturating_sub(*share);
                        here
                    })
                    .map_or(CLASSES[0].0, |c| c.0);
                let mean = mean_days * DAY;
                let before = -(-uniform(&mut rng).ln() * mean).min(OLDEST_DAYS * DAY);
                let mut changes = Vec::new();
                let mut at = 0.0;
                loop {
                    at += -uniform(&mut rng).ln() * mean;
                    if at > horizon {
                        break;
                    }
                    changes.push(at);
                }
                History {
                    mean_days,
                    before,
                    changes,
                }
            })
            .collect();
        Sim {
            pages,
            start: unix_now(),
            offset: AtomicI64::new(0),
            dated,
            requests: AtomicU64::new(0),
        }
    }

    /// Simulated seconds since the first night.
    fn now(&self) -> f64 {
        unix_now() + self.offset.load(Ordering::SeqCst) as f64 - self.start
    }

    fn body(i: usize, version: usize) -> String {
        format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Page {i}</title></head>\
             <body><h1>Page {i}</h1><p>Version {version} of page {i}.</p></body></html>\n"
        )
    }

    fn index(&self) -> String {
        let mut html =
            String::from("<!DOCTYPE html>\n<html><head><title>Index</title></head><body>\n");
        for i in 0..self.pages.len() {
            html.push_str(&format!("<a href=\"/p/{i}\">{i}</a>\n"));
        }
        html.push_str("</body></html>\n");
        html
    }

    fn answer(
        &self,
        request: &http::Request<hyper::body::Incoming>,
    ) -> http::Response<Full<Bytes>> {
        let path = request.uri().path();
        let mut response = http::Response::new(Full::new(Bytes::new()));
        let html = http::HeaderValue::from_static("text/html; charset=utf-8");
        if path == "/" {
            *response.body_mut() = Full::new(Bytes::from(self.index()));
            response
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, html);
            return response;
        }
        let page = path
            .strip_prefix("/p/")
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|&i| i < self.pages.len());
        let Some(i) = page else {
            *response.status_mut() = http::StatusCode::NOT_FOUND;
            return response;
        };
        self.requests.fetch_add(1, Ordering::SeqCst);
        let (version, since) = self.pages[i].live(self.now());
        let headers = response.headers_mut();
        if let Ok(etag) = http::HeaderValue::from_str(&format!("\"{i}-{version}\"")) {
            if request.headers().get(http::header::IF_NONE_MATCH) == Some(&etag) {
                *response.status_mut() = http::StatusCode::NOT_MODIFIED;
                return response;
            }
            headers.insert(http::header::ETAG, etag);
        }
        if self.dated {
            let at = UNIX_EPOCH + std::time::Duration::from_secs_f64((self.start + since).max(0.0));
            if let Ok(date) = http::HeaderValue::from_str(&httpdate::fmt_http_date(at)) {
                headers.insert(http::header::LAST_MODIFIED, date);
            }
        }
        headers.insert(http::header::CONTENT_TYPE, html);
        *response.body_mut() = Full::new(Bytes::from(Sim::body(i, version)));
        response
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One variant: the policy given to every night's run, the site's dates,
/// and a revisit budget (a share of the pages per night).
struct Variant {
    name: &'static str,
    revisit: &'static str,
    dated: bool,
    budget: Option<f64>,
}

const VARIANTS: [Variant; 7] = [
    Variant {
        name: "estimated",
        revisit: "estimated",
        dated: true,
        budget: None,
    },
    Variant {
        name: "adaptive (Nutch)",
        revisit: "adaptive",
        dated: true,
        budget: None,
    },
    Variant {
        name: "every night",
        revisit: "0",
        dated: true,
        budget: None,
    },
    Variant {
        name: "estimated, no Last-Modified",
        revisit: "estimated",
        dated: false,
        budget: None,
    },
    Variant {
        name: "estimated, budget 27 %/night",
        revisit: "estimated",
        dated: true,
        budget: Some(0.27),
    },
    Variant {
        name: "estimated, budget 20 %/night",
        revisit: "estimated",
        dated: true,
        budget: Some(0.20),
    },
    Variant {
        name: "estimated, budget 10 %/night",
        revisit: "estimated",
        dated: true,
        budget: Some(0.10),
    },
];

/// Freshness by night, and page requests (with those per class of page).
struct Outcome {
    freshness: Vec<f64>,
    requests: u64,
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_legcrawl")
}

/// The stored content hash of every page (by page index).
fn stored(data: &std::path::Path, offset: i64) -> anyhow::Result<HashMap<usize, String>> {
    let output = Command::new(bin())
        .args(["dump", "pages", "--json", "--data"])
        .arg(data)
        .env("LEGCRAWL_CLOCK_OFFSET", offset.to_string())
        .stderr(Stdio::inherit())
        .output()
        .context("running legcrawl dump pages")?;
    ensure!(
        output.status.success(),
        "dump pages failed: {}",
        output.status
    );
    let mut hashes = HashMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let record: serde_json::Value = serde_json::from_str(line)?;
        let url = record["url"].as_str().unwrap_or_default();
        let Some(i) = url.rsplit_once("/p/").and_then(|(_, i)| i.parse().ok()) else {
            continue;
        };
        let hash = record["content_hash"].as_str().unwrap_or_default();
        hashes.insert(i, hash.to_owned());
    }
    Ok(hashes)
}

fn run(variant: &Variant, pages: usize, nights: u32, seed: u64) -> anyhow::Result<Outcome> {
    let sim = Arc::new(Sim::new(pages, nights, seed, variant.dated));
    let listener = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let answering = Arc::clone(&sim);
    let (stop, thread) = site::serve(listener, Arc::new(move |request| answering.answer(request)))?;
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("state");
    let mut freshness = Vec::new();
    for night in 0..nights {
        let offset = i64::from(night) * 86_400;
        sim.offset.store(offset, Ordering::SeqCst);
        let mut command = Command::new(bin());
        command.arg("crawl");
        if let Some(share) = variant.budget {
            let budget = (pages as f64 * share).round() as u64;
            command.args(["--revisit-budget", &budget.to_string()]);
        }
        let status = command
            .arg(format!("http://{addr}/"))
            .arg("--data")
            .arg(&data)
            .args([
                "--revisit-after",
                variant.revisit,
                "--concurrency",
                "16",
                "--per-host",
                "16",
            ])
            .env("LEGCRAWL_CLOCK_OFFSET", offset.to_string())
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("running legcrawl crawl")?;
        if !status.success() {
            bail!("{}: night {night}: crawl exited {status}", variant.name);
        }
        let hashes = stored(&data, offset)?;
        let now = sim.now();
        let fresh = (0..pages)
            .filter(|&i| {
                let (version, _) = sim.pages[i].live(now);
                hashes.get(&i) == Some(&content_hash(Sim::body(i, version).as_bytes()))
            })
            .count();
        freshness.push(fresh as f64 / pages as f64);
    }
    let _ = stop.send(());
    let _ = thread.join();
    Ok(Outcome {
        freshness,
        requests: sim.requests.load(Ordering::SeqCst),
    })
}

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let pages = setting("REVISIT_BENCH_PAGES", PAGES);
    let nights = setting("REVISIT_BENCH_NIGHTS", NIGHTS);
    let seed = setting("REVISIT_BENCH_SEED", 1u64);
    let only = std::env::var("REVISIT_BENCH_ONLY").unwrap_or_default();
    let mix = Sim::new(pages, nights, seed, true);
    let mut classes: Vec<(f64, usize, usize)> = CLASSES.iter().map(|c| (c.0, 0, 0)).collect();
    for page in &mix.pages {
        if let Some(class) = classes.iter_mut().find(|c| c.0 == page.mean_days) {
            class.1 += 1;
            class.2 += page
                .changes
                .iter()
                .filter(|&&c| c < f64::from(nights) * DAY)
                .count();
        }
    }
    println!("revisit: {pages} pages, {nights} nights, seed {seed}");
    for (days, count, changes) in &classes {
        println!(
            "  changes every {days:>3} days on average: {count:>4} pages, {changes:>5} changes"
        );
    }
    let mut results = Vec::new();
    for variant in VARIANTS.iter().filter(|v| v.name.contains(only.as_str())) {
        let outcome = run(variant, pages, nights, seed)?;
        let mean = outcome.freshness.iter().sum::<f64>() / outcome.freshness.len().max(1) as f64;
        println!(
            "{:<30} freshness {mean:.4}  requests {:>6}",
            variant.name, outcome.requests
        );
        results.push((variant.name, mean, outcome.requests));
    }
    let find = |name: &str| results.iter().find(|r| r.0 == name).copied();
    if let (Some(ours), Some(nutch)) = (find("estimated"), find("adaptive (Nutch)")) {
        let share = ours.2 as f64 / nutch.2.max(1) as f64;
        let lost = nutch.1 - ours.1;
        println!(
            "estimated against Nutch: {:.1} % of its requests ({:+.1} %), freshness {:+.2} points",
            share * 100.0,
            (share - 1.0) * 100.0,
            -lost * 100.0
        );
        ensure!(
            share <= TARGET_REQUESTS && lost <= TARGET_FRESHNESS,
            "target missed: at most {:.0} % of Nutch's requests within {:.1} points of its freshness",
            TARGET_REQUESTS * 100.0,
            TARGET_FRESHNESS * 100.0
        );
    }
    Ok(())
}
