//! Issue 27, "Sitemaps by default": a sitemap URL's `lastmod` feeds the
//! revisit policy. Under `--revisit-after 0` (every page due every run), a
//! page whose `lastmod` is older than its last fetch gets no request in the
//! incremental run; once the sitemap says it changed after that fetch, the
//! next run asks it again, and only it — also when the sitemap is long
//! enough that its entries are queued in parts while the leg runs, and in a
//! shared crawl (whose workers read the page records from Redis).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::mode::{Crawler, Mode};
use crate::support::{TestResponse, TestServer, handler};

/// Pages only the sitemap lists, each with its `lastmod` (`/a`'s can change),
/// followed by `padding` entries on another host (out of scope, but they make
/// the sitemap's first entries a part of their own, see `page::parts`).
fn site(lastmod_a: Arc<Mutex<String>>, padding: usize) -> TestServer {
    let padding: String = (0..padding)
        .map(|k| format!("<url><loc>http://elsewhere.invalid/{k}</loc></url>"))
        .collect();
    TestServer::start(handler(move |req| match req.path() {
        "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\nSitemap: /sitemap.xml\n")
            .header("content-type", "text/plain"),
        "/" => TestResponse::html("<title>home</title>no links here"),
        "/sitemap.xml" => {
            let a = lastmod_a.lock().map(|a| a.clone()).unwrap_or_default();
            TestResponse::ok(format!(
                "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                 <url><loc>/a</loc><lastmod>{a}</lastmod></url>\
                 <url><loc>/b</loc><lastmod>2020-01-01</lastmod></url>\
                 <url><loc>/c</loc></url>{padding}</urlset>"
            ))
            .header("content-type", "application/xml")
        }
        path => TestResponse::html(format!("<title>{path}</title>")),
    }))
}

/// `secs` since the epoch as a W3C Datetime in UTC (days to a civil date as
/// in Howard Hinnant's `civil_from_days`).
fn w3c(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap();
    let rest = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[test]
fn w3c_dates_for_the_site() {
    assert_eq!(w3c(0), "1970-01-01T00:00:00Z");
    assert_eq!(w3c(1_704_161_045), "2024-01-02T02:04:05Z");
}

#[test]
fn a_page_whose_sitemap_lastmod_is_older_than_its_fetch_is_not_asked_again_embedded() {
    lastmod_runs(Mode::Embedded, 0);
}

#[test]
fn a_page_whose_sitemap_lastmod_is_older_than_its_fetch_is_not_asked_again_shared() {
    lastmod_runs(Mode::Shared, 0);
}

#[test]
fn the_same_when_the_sitemap_entries_are_queued_in_parts_embedded() {
    // More entries than a part (`LINK_CHUNK`, 4,096).
    lastmod_runs(Mode::Embedded, 5_000);
}

#[test]
fn the_same_when_the_sitemap_entries_are_queued_in_parts_shared() {
    lastmod_runs(Mode::Shared, 5_000);
}

/// Four runs of `crawl` in `mode`, the sitemap padded with `padding`
/// out-of-scope entries.
fn lastmod_runs(mode: Mode, padding: usize) {
    let Some(crawler) = Crawler::start(mode, "lastmod_runs") else {
        return;
    };
    let crawl = |args: &[&str]| {
        crawler.crawl_ok(args);
    };
    let lastmod_a = Arc::new(Mutex::new("2020-01-01T00:00:00Z".to_owned()));
    let server = site(Arc::clone(&lastmod_a), padding);
    let seed = server.url("/");
    let hits = |paths: &[&str]| -> Vec<u64> { paths.iter().map(|p| server.hits(p)).collect() };
    let pages = ["/", "/sitemap.xml", "/a", "/b", "/c"];

    // `--revisit-after` is an option of one run: every run gives it.
    let every_run = ["--revisit-after", "0"];
    crawl(&[&seed, every_run[0], every_run[1]]);
    assert_eq!(hits(&pages), [1, 1, 1, 1, 1], "{pages:?}");

    // Every page is due, but the sitemap says /a and /b did not change since
    // they were fetched: no request for them. /c has no lastmod: asked again.
    let before = server.requests();
    crawl(&every_run);
    assert_eq!(hits(&pages), [2, 2, 1, 1, 2], "{pages:?}");
    assert_eq!(server.requests() - before, 3, "the seed, the sitemap, /c");

    // The sitemap now says /a changed after its fetch (whole seconds: wait
    // for the clock to pass that fetch, and the next run to pass lastmod).
    std::thread::sleep(Duration::from_millis(1100));
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    *lastmod_a.lock().unwrap() = w3c(now.as_secs());
    std::thread::sleep(Duration::from_millis(1100));
    crawl(&every_run);
    assert_eq!(hits(&pages), [3, 3, 2, 1, 3], "{pages:?}: /a again");

    // Fetched after that lastmod: settled again.
    crawl(&every_run);
    assert_eq!(hits(&pages), [4, 4, 2, 1, 4], "{pages:?}");
}
