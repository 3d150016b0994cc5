//! The robots.txt cache against the in-process test server: statuses, redirects,
//! unreachable hosts, one fetch per origin under concurrency, persistence
//! records with an injected clock, and the `Crawl-delay` cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use legcrawl::fetch::{FetchSettings, Fetcher};
use legcrawl::robots::{RobotsCache, RobotsRecord, RobotsSettings, Verdict};
use url::Url;

use crate::support::{TestResponse, TestServer, handler};

const START: u64 = 1_700_000_000;
const ALLOWED: Verdict = Verdict::Allowed { crawl_delay: None };

/// A clock the test moves by hand.
#[derive(Clone)]
struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    fn new() -> ManualClock {
        ManualClock(Arc::new(AtomicU64::new(START)))
    }

    fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_secs(), Ordering::SeqCst);
    }
}

fn settings(clock: &ManualClock) -> RobotsSettings {
    let time = Arc::clone(&clock.0);
    RobotsSettings {
        ttl: Duration::from_secs(3600),
        unavailable_retry: Duration::from_secs(60),
        max_crawl_delay: Duration::from_secs(5),
        now: Arc::new(move || time.load(Ordering::SeqCst)),
        ..RobotsSettings::new("legcrawl/0.1 (+https://example.com/bot)")
    }
}

fn cache(clock: &ManualClock) -> RobotsCache {
    let fetch = FetchSettings {
        request_timeout: Duration::from_secs(10),
        read_timeout: Duration::from_secs(5),
        ..FetchSettings::default()
    };
    RobotsCache::new(Fetcher::new(fetch).unwrap(), settings(clock))
}

/// A server whose `/robots.txt` answers `robots` and every other path 200.
fn site(robots: TestResponse) -> TestServer {
    TestServer::start(handler(move |request| {
        if request.path() == "/robots.txt" {
            robots.clone()
        } else {
            TestResponse::html("<p>page</p>")
        }
    }))
}

fn url(server: &TestServer, path: &str) -> Url {
    Url::parse(&server.url(path)).unwrap()
}

fn origin(server: &TestServer) -> String {
    format!("http://{}", server.addr())
}

#[tokio::test]
async fn rules_of_a_200_decide() {
    let body = "User-agent: *\nDisallow: /\n\nUser-agent: LegCrawl\nDisallow: /private\nAllow: /private/open\n";
    let server = site(TestResponse::ok(body));
    let cache = cache(&ManualClock::new());
    assert_eq!(cache.check(&url(&server, "/public")).await, ALLOWED);
    assert_eq!(
        cache.check(&url(&server, "/private/x")).await,
        Verdict::Disallowed
    );
    assert_eq!(cache.check(&url(&server, "/private/open/1")).await, ALLOWED);
    assert_eq!(cache.check(&url(&server, "/robots.txt")).await, ALLOWED);
    assert_eq!(server.hits("/robots.txt"), 1);
    assert_eq!(cache.fetches(), 1);
    let records = cache.take_new_records();
    assert_eq!(
        records,
        [RobotsRecord {
            origin: origin(&server),
            fetched_at: START,
            status: 200,
            body: body.as_bytes().to_vec(),
        }]
    );
    assert!(cache.take_new_records().is_empty());
}

#[tokio::test]
async fn not_found_allows_everything() {
    let server = site(TestResponse::not_found());
    let cache = cache(&ManualClock::new());
    assert_eq!(cache.check(&url(&server, "/anything")).await, ALLOWED);
    assert_eq!(cache.check(&url(&server, "/else")).await, ALLOWED);
    assert_eq!(cache.fetches(), 1);
    assert_eq!(cache.take_new_records()[0].status, 404);
}

#[tokio::test]
async fn server_error_is_unavailable_until_the_retry() {
    let server = site(TestResponse::status(500));
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let page = url(&server, "/a");
    let held = Verdict::Unavailable {
        retry_after: Duration::from_secs(60),
        unreachable: None,
    };
    assert_eq!(cache.check(&page).await, held);
    clock.advance(Duration::from_secs(20));
    let later = Verdict::Unavailable {
        retry_after: Duration::from_secs(40),
        unreachable: None,
    };
    assert_eq!(cache.check(&page).await, later);
    assert_eq!(server.hits("/robots.txt"), 1);
    clock.advance(Duration::from_secs(40));
    assert_eq!(cache.check(&page).await, held);
    assert_eq!(server.hits("/robots.txt"), 2);
    assert_eq!(cache.take_new_records().len(), 2);
}

#[tokio::test]
async fn too_many_requests_is_unavailable() {
    let server = site(TestResponse::status(429));
    let cache = cache(&ManualClock::new());
    let verdict = cache.check(&url(&server, "/a")).await;
    assert!(
        matches!(verdict, Verdict::Unavailable { .. }),
        "{verdict:?}"
    );
}

#[tokio::test]
async fn refused_connection_is_unavailable() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let cache = cache(&ManualClock::new());
    let page = Url::parse(&format!("http://127.0.0.1:{port}/a")).unwrap();
    let verdict = cache.check(&page).await;
    assert!(
        matches!(verdict, Verdict::Unavailable { .. }),
        "{verdict:?}"
    );
    let records = cache.take_new_records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].status, 0);
    assert_eq!(records[0].origin, format!("http://127.0.0.1:{port}"));
}

#[tokio::test]
async fn redirect_chain_of_three_across_hosts_is_followed() {
    let other = TestServer::start(handler(|request| match request.path() {
        "/a" => TestResponse::redirect(302, "/b"),
        "/b" => TestResponse::redirect(307, "c"),
        "/c" => TestResponse::ok("User-agent: *\nDisallow: /no\n"),
        _ => TestResponse::not_found(),
    }));
    let first = site(TestResponse::redirect(301, &other.url("/a")));
    let cache = cache(&ManualClock::new());
    assert_eq!(cache.check(&url(&first, "/no")).await, Verdict::Disallowed);
    assert_eq!(cache.check(&url(&first, "/yes")).await, ALLOWED);
    assert_eq!(cache.fetches(), 4);
    assert_eq!(other.hits("/c"), 1);
    let records = cache.take_new_records();
    assert_eq!(records[0].origin, origin(&first));
    assert_eq!(records[0].status, 200);
}

/// A server whose robots.txt redirects `hops` times (`/r1` ... `/r{hops}`) before
/// a robots.txt that disallows `/no`.
fn redirecting(hops: u32) -> TestServer {
    TestServer::start(handler(move |request| {
        let at = match request.path() {
            "/robots.txt" => 0,
            path => path
                .strip_prefix("/r")
                .and_then(|n| n.parse().ok())
                .unwrap_or(u32::MAX),
        };
        if at < hops {
            TestResponse::redirect(301, &format!("/r{}", at + 1))
        } else if at == hops {
            TestResponse::ok("User-agent: *\nDisallow: /no\n")
        } else {
            TestResponse::html("<p>page</p>")
        }
    }))
}

#[tokio::test]
async fn five_redirects_are_followed() {
    let server = redirecting(5);
    let cache = cache(&ManualClock::new());
    assert_eq!(cache.check(&url(&server, "/no")).await, Verdict::Disallowed);
    assert_eq!(cache.fetches(), 6);
}

#[tokio::test]
async fn six_redirects_are_unavailable() {
    let server = redirecting(6);
    let cache = cache(&ManualClock::new());
    let verdict = cache.check(&url(&server, "/yes")).await;
    assert!(
        matches!(verdict, Verdict::Unavailable { .. }),
        "{verdict:?}"
    );
    assert_eq!(cache.fetches(), 6);
    assert_eq!(server.hits("/r6"), 0);
    assert_eq!(cache.take_new_records()[0].status, 301);
}

#[tokio::test]
async fn concurrent_checks_fetch_once() {
    let slow =
        TestResponse::ok("User-agent: *\nDisallow: /odd\n").delay(Duration::from_millis(200));
    let server = site(slow);
    let cache = cache(&ManualClock::new());
    let mut tasks = Vec::new();
    for i in 0..64 {
        let cache = cache.clone();
        let page = url(&server, if i % 2 == 0 { "/even" } else { "/odd" });
        tasks.push(tokio::spawn(async move { (i, cache.check(&page).await) }));
    }
    for task in tasks {
        let (i, verdict) = task.await.unwrap();
        let expected = if i % 2 == 0 {
            ALLOWED
        } else {
            Verdict::Disallowed
        };
        assert_eq!(verdict, expected, "task {i}");
    }
    assert_eq!(server.hits("/robots.txt"), 1);
    assert_eq!(cache.fetches(), 1);
    assert_eq!(cache.take_new_records().len(), 1);
}

#[tokio::test]
async fn origins_are_cached_apart() {
    let closed = site(TestResponse::ok("User-agent: *\nDisallow: /\n"));
    let open = site(TestResponse::not_found());
    let cache = cache(&ManualClock::new());
    assert_eq!(cache.check(&url(&closed, "/a")).await, Verdict::Disallowed);
    assert_eq!(cache.check(&url(&open, "/a")).await, ALLOWED);
    assert_eq!(cache.fetches(), 2);
}

fn record(server: &TestServer, fetched_at: u64, status: u16, body: &str) -> RobotsRecord {
    RobotsRecord {
        origin: origin(server),
        fetched_at,
        status,
        body: body.as_bytes().to_vec(),
    }
}

#[tokio::test]
async fn a_fresh_record_is_reused_without_fetching() {
    let server = site(TestResponse::ok("User-agent: *\nDisallow: /server\n"));
    let cache = cache(&ManualClock::new());
    let stored = "User-agent: *\nDisallow: /stored\n";
    cache.preload(vec![record(&server, START - 1800, 200, stored)]);
    assert_eq!(
        cache.check(&url(&server, "/stored")).await,
        Verdict::Disallowed
    );
    assert_eq!(cache.check(&url(&server, "/server")).await, ALLOWED);
    assert_eq!(cache.fetches(), 0);
    assert_eq!(server.hits("/robots.txt"), 0);
    assert!(cache.take_new_records().is_empty());
}

#[tokio::test]
async fn an_expired_record_is_fetched_again() {
    let server = site(TestResponse::ok("User-agent: *\nDisallow: /server\n"));
    let cache = cache(&ManualClock::new());
    let stored = "User-agent: *\nDisallow: /stored\n";
    cache.preload(vec![record(&server, START - 3600, 200, stored)]);
    assert_eq!(cache.check(&url(&server, "/stored")).await, ALLOWED);
    assert_eq!(
        cache.check(&url(&server, "/server")).await,
        Verdict::Disallowed
    );
    assert_eq!(cache.fetches(), 1);
    assert_eq!(cache.take_new_records()[0].fetched_at, START);
}

#[tokio::test]
async fn an_unavailable_record_is_not_reused() {
    let server = site(TestResponse::not_found());
    let cache = cache(&ManualClock::new());
    cache.preload(vec![record(&server, START, 503, "")]);
    assert_eq!(cache.check(&url(&server, "/a")).await, ALLOWED);
    assert_eq!(cache.fetches(), 1);
}

#[tokio::test]
async fn the_ttl_expires_with_the_clock() {
    let server = site(TestResponse::ok("User-agent: *\nDisallow: /no\n"));
    let clock = ManualClock::new();
    let cache = cache(&clock);
    assert_eq!(cache.check(&url(&server, "/no")).await, Verdict::Disallowed);
    clock.advance(Duration::from_secs(3599));
    assert_eq!(cache.check(&url(&server, "/no")).await, Verdict::Disallowed);
    assert_eq!(cache.fetches(), 1);
    clock.advance(Duration::from_secs(1));
    assert_eq!(cache.check(&url(&server, "/no")).await, Verdict::Disallowed);
    assert_eq!(cache.fetches(), 2);
}

#[tokio::test]
async fn crawl_delay_is_capped() {
    let slow = site(TestResponse::ok("User-agent: *\nCrawl-delay: 100\n"));
    let mild = site(TestResponse::ok("User-agent: *\nCrawl-delay: 2\n"));
    let cache = cache(&ManualClock::new());
    let capped = Verdict::Allowed {
        crawl_delay: Some(Duration::from_secs(5)),
    };
    assert_eq!(cache.check(&url(&slow, "/a")).await, capped);
    let honoured = Verdict::Allowed {
        crawl_delay: Some(Duration::from_secs(2)),
    };
    assert_eq!(cache.check(&url(&mild, "/a")).await, honoured);
}
