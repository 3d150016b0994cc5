//! Issue 27, first part: what real deployments need — `--no-parent` (a docs
//! subtree, not the whole host) and `--header` (a header on every request),
//! both stored with the job.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::cli::{legcrawl, run, stderr};
use crate::support::mode::{Crawler, Mode};
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);

/// Each request's path and its `X-Crawl-Team` header, as the server saw them.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A host with a book under `/book/` that links up and out of it, and a page
/// that redirects out of it; every request's `X-Crawl-Team` goes to `seen`.
fn book_site(seen: Seen) -> TestServer {
    TestServer::start(handler(move |req| {
        if let Ok(mut seen) = seen.lock() {
            let team = req.header("x-crawl-team").map(str::to_owned);
            seen.push((req.path().to_owned(), team));
        }
        book_page(req.path())
    }))
}

fn book_page(path: &str) -> TestResponse {
    match path {
        "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\n"),
        "/" => TestResponse::html("<title>home</title><a href=/book/>book</a>"),
        "/book/" => TestResponse::html(
            "<title>book</title><a href=ch1.html>1</a><a href=/book/part/ch2.html>2</a>\
             <a href=../>up</a><a href=/blog/post>blog</a><a href=/bookish>bookish</a>\
             <a href=moved>moved</a>",
        ),
        "/book/ch1.html" => TestResponse::html("<title>ch1</title><a href=/book/>book</a>"),
        "/book/part/ch2.html" => TestResponse::html("<title>ch2</title><a href=/>home</a>"),
        "/book/moved" => TestResponse::redirect(301, "/archive/book.html"),
        "/archive/book.html" => TestResponse::html("<title>archived</title>"),
        _ => TestResponse::html("<title>outside</title>"),
    }
}

#[test]
fn no_parent_keeps_a_crawl_below_its_seed_and_is_stored_embedded() {
    no_parent_keeps_a_crawl_below_its_seed_and_is_stored(Mode::Embedded);
}

#[test]
fn no_parent_keeps_a_crawl_below_its_seed_and_is_stored_shared() {
    no_parent_keeps_a_crawl_below_its_seed_and_is_stored(Mode::Shared);
}

fn no_parent_keeps_a_crawl_below_its_seed_and_is_stored(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "no_parent_keeps_a_crawl_below_its_seed") else {
        return;
    };
    let server = book_site(Seen::default());
    let seed = server.url("/book/");
    crawler.crawl_ok(&[&seed, "--no-parent", "--max-pages", "2"]);
    // The resume gives nothing: the stored job keeps --no-parent.
    crawler.crawl_ok(&[]);
    let mut paths = crawler.item_paths();
    paths.sort();
    // The redirect out of the book is followed (as wget follows it).
    assert_eq!(
        paths,
        [
            "/archive/book.html",
            "/book/",
            "/book/ch1.html",
            "/book/part/ch2.html"
        ]
    );
    for outside in ["/", "/blog/post", "/bookish"] {
        assert_eq!(server.hits(outside), 0, "{outside} is outside /book/");
    }
    let job = String::from_utf8_lossy(&crawler.dump(&["job"])).into_owned();
    assert!(job.contains("no_parent = true"), "{job}");
}

#[test]
fn a_header_given_is_sent_with_every_request_and_stored() {
    let seen = Seen::default();
    let server = book_site(Arc::clone(&seen));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let seed = server.url("/book/");
    let out = run(
        legcrawl(
            &data,
            &[
                "crawl",
                &seed,
                "--header",
                "X-Crawl-Team: archive",
                "--no-parent",
            ],
        ),
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let job = run(legcrawl(&data, &["dump", "job"]), LIMIT);
    let text = String::from_utf8_lossy(&job.stdout).into_owned();
    assert!(
        text.contains("[headers]\nX-Crawl-Team = \"archive\""),
        "{text}"
    );
    // Checked by the server on the next run's requests, which give no flag.
    let before = seen.lock().unwrap().len();
    let out = run(legcrawl(&data, &["crawl", "--revisit-after", "0"]), LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.len() > before + 3,
        "the second run asked again: {seen:?}"
    );
    let missing: Vec<&String> = seen
        .iter()
        .filter(|(_, team)| team.as_deref() != Some("archive"))
        .map(|(path, _)| path)
        .collect();
    assert!(
        missing.is_empty(),
        "requests without the header: {missing:?}"
    );
    // A malformed header is one line, exit 2, before any state is made.
    let other = dir.path().join("other");
    for bad in ["no colon", "Bad Name: x", "X: a\u{7f}b"] {
        let out = run(legcrawl(&other, &["crawl", &seed, "--header", bad]), LIMIT);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
        assert!(!other.exists());
    }
}

/// A site whose pages are only reachable through the sitemap its robots.txt
/// names (a sitemap index, then a urlset).
fn sitemap_site() -> TestServer {
    TestServer::start(handler(|req| {
        match req.path() {
        "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\nSitemap: /sitemap-index.xml\n")
            .header("content-type", "text/plain"),
        "/" => TestResponse::html("<title>home</title>no links here"),
        "/sitemap-index.xml" => TestResponse::ok(
            "<?xml version=\"1.0\"?><sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
             <sitemap><loc>/pages.xml</loc></sitemap></sitemapindex>",
        )
        .header("content-type", "application/xml"),
        "/pages.xml" => TestResponse::ok(
            "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
             <url><loc>/docs/a</loc></url><url><loc>/docs/b</loc></url></urlset>",
        )
        .header("content-type", "application/xml"),
        // A sitemap served as plain text: its content says what it is.
        "/plain-map" => TestResponse::ok(
            "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
             <url><loc>/docs/plain</loc></url></urlset>",
        )
        .header("content-type", "text/plain"),
        path => TestResponse::html(format!("<title>{path}</title>")),
    }
    }))
}

#[test]
fn sitemaps_named_by_robots_txt_are_read_by_default_embedded() {
    sitemaps_named_by_robots_txt_are_read_by_default(Mode::Embedded);
}

#[test]
fn sitemaps_named_by_robots_txt_are_read_by_default_shared() {
    sitemaps_named_by_robots_txt_are_read_by_default(Mode::Shared);
}

fn sitemaps_named_by_robots_txt_are_read_by_default(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "sitemaps_named_by_robots_txt") else {
        return;
    };
    let server = sitemap_site();
    let seed = server.url("/");
    crawler.crawl_ok(&[&seed]);
    for path in ["/sitemap-index.xml", "/pages.xml", "/docs/a", "/docs/b"] {
        assert_eq!(server.hits(path), 1, "{path}");
    }
    // Off: only the seed.
    let off = crawler.another("off");
    off.crawl_ok(&[&seed, "--no-sitemaps"]);
    assert_eq!(server.hits("/docs/a"), 1, "not fetched again");
    assert_eq!(server.hits("/sitemap-index.xml"), 1);
    let job = String::from_utf8_lossy(&off.dump(&["job"])).into_owned();
    assert!(job.contains("sitemaps = false"), "{job}");
    // A sitemap given as the seed is read whatever the legs.
    let map = server.url("/pages.xml");
    crawler.another("direct").crawl_ok(&[&map, "--no-sitemaps"]);
    assert_eq!(
        server.hits("/docs/a"),
        1,
        "with --no-sitemaps a seed sitemap is not read either"
    );
    crawler.another("again").crawl_ok(&[&map]);
    assert_eq!(server.hits("/docs/a"), 2, "the seed sitemap was read");
    assert_eq!(server.hits("/docs/b"), 2);
    // Recognised by its root element, whatever its media type says.
    crawler
        .another("plain")
        .crawl_ok(&[&server.url("/plain-map")]);
    assert_eq!(
        server.hits("/docs/plain"),
        1,
        "the text/plain sitemap was read"
    );
}
