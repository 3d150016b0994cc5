//! What the shared worker lagged behind the embedded crawl in, checked from
//! one test body in both modes (the embedded state, and a shared crawl in a
//! real `redis-server`): `--jitter` as the server sees the gaps, a redirect
//! target fetched once per cycle, serve's recent errors, a host parked for
//! its robots.txt, and the same items and counters for the same site.

use std::time::Duration;

use crate::support::mode::{Crawler, Mode};
use crate::support::{TestResponse, TestServer, arrivals, handler, hub_site};

/// Pages after the first: 20 gaps between 21 requests.
const PAGES: usize = 20;

#[test]
fn jitter_varies_the_delay_between_half_and_one_and_a_half_embedded() {
    jitter_varies_the_delay(Mode::Embedded);
}

#[test]
fn jitter_varies_the_delay_between_half_and_one_and_a_half_shared() {
    jitter_varies_the_delay(Mode::Shared);
}

fn jitter_varies_the_delay(mode: Mode) {
    let server = hub_site(PAGES);
    let seed = server.url("/");
    let args = [
        seed.as_str(),
        "--per-host",
        "1",
        "--delay",
        "0.1",
        "--jitter",
    ];
    let Some(crawler) = Crawler::start(mode, "jitter") else {
        return;
    };
    crawler.crawl_ok(&args);
    let times = arrivals(&server);
    assert_eq!(times.len(), PAGES + 1, "{mode:?}: every page once");
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    eprintln!("{mode:?}: gaps {gaps:?}");
    // The gaps are 50 to 150 ms. A stalled server thread stamps a request
    // late, which shortens the gap after it: so the span is judged whole (at
    // least 20 half delays), and jitter by its short gaps. Without jitter no
    // gap is below the 100 ms delay; with it, each is below 90 ms with odds
    // of 0.4, so all 20 above it would happen once in 27,000 runs.
    let span = times[PAGES] - times[0];
    assert!(
        span >= Duration::from_millis(PAGES as u64 * 50 * 9 / 10),
        "{mode:?}: {} requests within {span:?} with --delay 0.1 --jitter",
        PAGES + 1
    );
    let short = gaps
        .iter()
        .filter(|gap| **gap < Duration::from_millis(90))
        .count();
    assert!(
        short > 0,
        "{mode:?}: no gap below 90 ms with --delay 0.1 --jitter: {gaps:?}"
    );
}

#[test]
fn a_redirect_target_is_fetched_once_per_cycle_embedded() {
    a_redirect_target_is_fetched_once_per_cycle(Mode::Embedded);
}

#[test]
fn a_redirect_target_is_fetched_once_per_cycle_shared() {
    a_redirect_target_is_fetched_once_per_cycle(Mode::Shared);
}

fn a_redirect_target_is_fetched_once_per_cycle(mode: Mode) {
    // The seed redirects to the real hub; a page redirects to another page.
    let server = TestServer::start(handler(|req| match req.path() {
        "/" => TestResponse::redirect(301, "/home"),
        "/home" => {
            TestResponse::html("<title>home</title><a href=\"/old\">old</a><a href=\"/a\">a</a>")
        }
        "/old" => TestResponse::redirect(301, "/new"),
        "/a" | "/new" => TestResponse::html("<title>leaf</title>"),
        _ => TestResponse::not_found(),
    }));
    let seed = server.url("/");
    let every = ["--revisit-after", "0"];
    let Some(crawler) = Crawler::start(mode, "redirect_once") else {
        return;
    };
    crawler.crawl_ok(&[seed.as_str(), every[0], every[1]]);
    for path in ["/", "/home", "/old", "/new", "/a"] {
        assert_eq!(server.hits(path), 1, "{mode:?}: {path} in the first run");
    }
    // Every page is due again; the seed's redirect to /home, due too, is
    // dropped rather than fetched a second time.
    crawler.crawl_ok(&every);
    for path in ["/", "/home", "/old", "/new", "/a"] {
        assert_eq!(server.hits(path), 2, "{mode:?}: {path} once per cycle");
    }
}

#[test]
fn serve_shows_the_recent_errors_embedded() {
    serve_shows_the_recent_errors(Mode::Embedded);
}

#[test]
fn serve_shows_the_recent_errors_shared() {
    serve_shows_the_recent_errors(Mode::Shared);
}

/// A page linking to one that answers 500, one that answers 404 and one that
/// cannot be connected to: serve lists the three with the same reasons in
/// both modes, oldest first, and nothing for the pages that answered.
fn serve_shows_the_recent_errors(mode: Mode) {
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let dead = format!("http://{closed}/gone");
    let page = format!(
        "<html><body><a href='/broken'>b</a><a href='/missing'>m</a><a href='{dead}'>d</a></body></html>"
    );
    let server = TestServer::start(handler(move |request| match request.path() {
        "/" => TestResponse::html(page.clone()),
        "/broken" => TestResponse::status(500),
        _ => TestResponse::not_found(),
    }));
    let Some(crawler) = Crawler::start(mode, "errors") else {
        return;
    };
    let seed = server.url("/");
    crawler.crawl_ok(&[seed.as_str(), "--retries", "0", "--ignore-robots"]);
    let serve = crawler.serve();
    let mut rows = Vec::new();
    crate::support::serve::wait_for(Duration::from_secs(30), "the errors to show", || {
        rows = serve.get("/api/errors").json()["errors"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        rows.len() >= 3
    });
    assert_eq!(rows.len(), 3, "{mode:?}: {rows:?}");
    let reason = |url: &str| {
        let row = rows
            .iter()
            .find(|row| row["url"] == url)
            .unwrap_or_else(|| panic!("{mode:?}: no error for {url}: {rows:?}"));
        assert!(
            row["at"].as_u64().is_some_and(|at| at > 0),
            "{mode:?}: {row}"
        );
        row["reason"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(reason(&server.url("/broken")), "HTTP 500", "{mode:?}");
    assert_eq!(reason(&server.url("/missing")), "HTTP 404", "{mode:?}");
    let refused = reason(&dead);
    assert!(
        refused.starts_with("connection refused for"),
        "{mode:?}: {refused}"
    );
}

/// The same site and flags crawled on each frontier give the same items and
/// the same run counters, in a first run and in a second that revisits every
/// page: a page of links, a redirect, a page that answers 404 and one 500, a
/// disallowed path and a sitemap robots.txt names.
#[test]
fn the_same_site_gives_the_same_items_and_counters_in_both_modes() {
    let server = TestServer::start(handler(|request| match request.path() {
        "/robots.txt" => {
            let host = request.header("host").unwrap_or_default();
            TestResponse::ok(format!(
                "User-agent: *\nDisallow: /private\nSitemap: http://{host}/sitemap.xml\n"
            ))
            .header("content-type", "text/plain")
        }
        "/sitemap.xml" => {
            let host = request.header("host").unwrap_or_default();
            TestResponse::ok(format!(
                "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                 <url><loc>http://{host}/from-sitemap</loc></url></urlset>"
            ))
            .header("content-type", "application/xml")
        }
        "/" => TestResponse::html(
            "<title>home</title><a href=/a>a</a><a href=/b>b</a><a href=/moved>m</a>\
             <a href=/missing>x</a><a href=/broken>y</a><a href=/private/p>p</a>",
        ),
        "/moved" => TestResponse::redirect(301, "/c"),
        "/missing" => TestResponse::not_found(),
        "/broken" => TestResponse::status(500),
        path => TestResponse::html(format!("<title>{path}</title><a href=/>home</a>")),
    }));
    let seed = server.url("/");
    let args = [seed.as_str(), "--retries", "0"];
    let mut seen = Vec::new();
    for mode in [Mode::Embedded, Mode::Shared] {
        let Some(crawler) = Crawler::start(mode, "parity") else {
            return;
        };
        crawler.crawl_ok(&args);
        crawler.crawl_ok(&[seed.as_str(), "--retries", "0", "--revisit-after", "0"]);
        let mut items: Vec<(String, String)> = crawler
            .items()
            .iter()
            .map(|item| {
                (
                    crate::support::cli::item_path(item),
                    item["title"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        items.sort();
        let runs = crawler.runs();
        assert_eq!(runs.len(), 2, "{mode:?}: {runs:?}");
        let counters: Vec<std::collections::BTreeMap<String, u64>> = runs
            .iter()
            .map(|run| {
                run["counters"]
                    .as_object()
                    .map(|counters| {
                        counters
                            .iter()
                            .map(|(name, n)| (name.clone(), n.as_u64().unwrap_or(0)))
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        seen.push((mode, items, counters));
    }
    let (_, embedded_items, embedded_runs) = &seen[0];
    let (_, shared_items, shared_runs) = &seen[1];
    assert_eq!(embedded_items, shared_items, "the same items");
    assert!(
        embedded_items
            .iter()
            .any(|(path, _)| path == "/from-sitemap"),
        "{embedded_items:?}"
    );
    assert!(
        !embedded_items
            .iter()
            .any(|(path, _)| path == "/sitemap.xml"),
        "a sitemap is a control file, not an item: {embedded_items:?}"
    );
    for (run, (embedded, shared)) in embedded_runs.iter().zip(shared_runs).enumerate() {
        same_counters(run + 1, embedded, shared);
    }
}

/// Asserts that run `run`'s counters are the same in both modes.
fn same_counters(
    run: usize,
    embedded: &std::collections::BTreeMap<String, u64>,
    shared: &std::collections::BTreeMap<String, u64>,
) {
    let names: std::collections::BTreeSet<&String> = embedded.keys().chain(shared.keys()).collect();
    // Measured, not counted: present in both.
    let measured = "memory/peak_rss_kib";
    let differ: Vec<String> = names
        .into_iter()
        .filter(|name| match name.as_str() {
            name if name == measured => !(embedded.contains_key(name) && shared.contains_key(name)),
            _ => embedded.get(*name) != shared.get(*name),
        })
        .map(|name| {
            format!(
                "{name}: embedded {:?}, shared {:?}",
                embedded.get(name),
                shared.get(name)
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "run {run}'s counters differ:\n{}",
        differ.join("\n")
    );
}

#[test]
fn a_host_whose_robots_keeps_failing_waits_for_the_next_run_embedded() {
    a_host_whose_robots_keeps_failing_waits_for_the_next_run(Mode::Embedded);
}

#[test]
fn a_host_whose_robots_keeps_failing_waits_for_the_next_run_shared() {
    a_host_whose_robots_keeps_failing_waits_for_the_next_run(Mode::Shared);
}

/// robots.txt answers 500 every time: after three tries the host is parked
/// for the run (its request kept for the next), the run ends by itself, and
/// its counters say so the same way in both modes.
fn a_host_whose_robots_keeps_failing_waits_for_the_next_run(mode: Mode) {
    let server = TestServer::start(handler(|request| match request.path() {
        "/robots.txt" => TestResponse::status(500),
        _ => TestResponse::html("<title>page</title>"),
    }));
    let Some(crawler) = Crawler::start(mode, "parked") else {
        return;
    };
    // No page limit: the run must end by itself, keeping the request for later.
    let seed = server.url("/");
    let out = crawler.crawl(&[seed.as_str(), "--robots-retry", "0.2"]);
    assert!(out.status.code().is_some(), "{mode:?}: {out:?}");
    assert_eq!(server.hits("/"), 0, "{mode:?}");
    assert!(
        (1..=3).contains(&server.hits("/robots.txt")),
        "{mode:?}: robots.txt asked {} times",
        server.hits("/robots.txt")
    );
    assert!(crawler.items().is_empty(), "{mode:?}");
    let runs = crawler.runs();
    assert_eq!(runs.len(), 1, "{mode:?}: {runs:?}");
    let counters = &runs[0]["counters"];
    assert_eq!(counters["robots/host_parked"], 1, "{mode:?}: {counters}");
    assert_eq!(counters["robots/unavailable"], 3, "{mode:?}: {counters}");
}
