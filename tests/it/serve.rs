//! `legcrawl serve` on the real binary: every endpoint on a state without a
//! snapshot, beside a running crawl and after it; the metrics through a real
//! Prometheus text parser (PyPI `prometheus_client`); a headless Chromium
//! rendering the page; escaping of what crawled pages say; the listen and token
//! rules; exit codes; the last run's end and outcome, and a killed crawl shown
//! as stale, never running, for a state directory and a shared crawl.
//!
//! The helpers (serve, its client, the parser, the browser) are in
//! `support::serve`.

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use crate::support::cli::{self, legcrawl, wait_status};
use crate::support::mode::{Crawler, Mode};
use crate::support::redis::RedisServer;
use crate::support::serve::{
    LIMIT, Serve, browser_dom, dump_dom, find_browser, get, metrics_of, slow_site, spawn_crawl,
    wait_for,
};
use crate::support::{TestResponse, TestServer, handler};

const ENDPOINTS: &[&str] = &[
    "/api/overview",
    "/api/hosts",
    "/api/runs",
    "/api/items",
    "/api/items?q=p%2F1",
    "/api/frontier",
    "/api/errors",
];

#[test]
fn serve_without_a_crawl_says_so_and_answers_every_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path(), &[]);
    for path in ENDPOINTS {
        let json = serve.get(path).json();
        assert_eq!(json["phase"], "none", "{path}: {json}");
        assert_eq!(json["message"], "no crawl has published here yet");
    }
    let page = serve.get("/");
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("no crawl has published here yet"),
        "{}",
        page.body
    );
    assert!(page.header("content-security-policy").is_some());
    let metrics = serve.get("/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.body.contains("legcrawl_snapshot_published 0"),
        "{}",
        metrics.body
    );
    assert_eq!(serve.get("/assets/app.js").status, 200);
    assert_eq!(serve.get("/assets/app.css").status, 200);
    assert_eq!(serve.get("/nothing").status, 404);
    assert_eq!(get(serve.addr, "HEAD", "/api/overview", &[]).status, 200);
    // Nothing served changes state: no other method is routed.
    for method in ["POST", "PUT", "DELETE"] {
        assert_eq!(get(serve.addr, method, "/api/overview", &[]).status, 405);
    }
    assert_eq!(serve.stop(), Some(0), "SIGTERM stops serve with 0");
}

#[test]
fn serve_follows_a_crawl_that_starts_and_ends_beside_it() {
    let site = slow_site(120, 50);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    // serve starts before the state exists.
    let serve = Serve::start(&data, &[]);
    assert_eq!(serve.get("/api/overview").json()["phase"], "none");
    let mut crawl = spawn_crawl(&data, &site.url("/"), &["--concurrency", "2"]);
    wait_for(LIMIT, "the crawl to show as running", || {
        let o = serve.get("/api/overview").json();
        o["phase"] == "running" && o["pages"]["pages"].as_u64().unwrap_or(0) > 0
    });
    let hosts = serve.get("/api/hosts").json();
    let host = site.addr().to_string();
    assert!(
        hosts["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["host"] == host.as_str()),
        "{hosts}"
    );
    let first = metrics_of(&serve);
    for path in ENDPOINTS {
        assert_eq!(serve.get(path).json()["phase"], "running", "{path}");
    }
    let page = serve.get("/");
    assert!(page.body.contains(&host), "the hosts table names the host");
    wait_for(LIMIT, "pages to rise", || {
        let later = metrics_of(&serve);
        match (&first, later) {
            (Some(first), Some(later)) => {
                later.value("legcrawl_pages_fetched_total", "outcome", "new")
                    > first.value("legcrawl_pages_fetched_total", "outcome", "new")
            }
            _ => true,
        }
    });
    assert!(wait_status(&mut crawl, LIMIT).success());
    wait_for(Duration::from_secs(10), "the run's end to show", || {
        serve.get("/api/overview").json()["phase"] == "ended"
    });
    let overview = serve.get("/api/overview").json();
    assert_eq!(overview["outcome"], "drained", "{overview}");
    assert_eq!(overview["pages"]["new"], 121, "{overview}");
    assert_eq!(overview["in_flight"], 0);
    let runs = serve.get("/api/runs").json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs["runs"][0]["outcome"], "drained");
    assert_eq!(runs["runs"][0]["pages"]["new"], 121);
    let items = serve.get("/api/items?q=p/1").json();
    let listed = items["items"].as_array().unwrap();
    assert!(!listed.is_empty(), "{items}");
    assert!(
        listed
            .iter()
            .all(|i| i["url"].as_str().unwrap().contains("p/1"))
    );
    assert_eq!(
        serve.get("/api/errors").json()["errors"],
        serde_json::json!([])
    );
    if let Some(metrics) = metrics_of(&serve) {
        assert_eq!(
            metrics.value("legcrawl_pages_fetched_total", "outcome", "new"),
            121.0
        );
        assert_eq!(metrics.value("legcrawl_in_flight", "", ""), 0.0);
        assert_eq!(
            metrics.value("legcrawl_run_info", "outcome", "drained"),
            1.0
        );
    }
    // dump summary trusts only a live writer, as before: status.json is gone,
    // the snapshot stays for serve.
    assert!(!data.join("status.json").exists());
    assert!(data.join("snapshot.json").exists());
    let summary = cli::dump_summary(&data);
    assert_eq!(summary["in_flight"], 0, "{summary}");
    assert_eq!(serve.stop(), Some(0));
}

#[test]
fn a_non_loopback_listen_needs_a_token_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (listen, needle) in [
        ("0.0.0.0:0", "--token"),
        ("192.0.2.1:9477", "not a loopback address"),
        ("nonsense", "not an address"),
    ] {
        let out = cli::run(legcrawl(dir.path(), &["serve", "--listen", listen]), LIMIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{listen}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(needle), "{listen}: {stderr}");
    }
    // A port that is taken: exit 1, one line.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let out = cli::run(legcrawl(dir.path(), &["serve", "--listen", &listen]), LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot listen on"), "{stderr}");
}

#[test]
fn with_a_token_every_request_but_the_assets_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cret-token";
    let serve = Serve::start(dir.path(), &["--token", secret]);
    for path in ["/", "/metrics", "/api/overview", "/api/items?q=x"] {
        assert_eq!(serve.get(path).status, 401, "{path}");
        let wrong = get(
            serve.addr,
            "GET",
            path,
            &["Authorization: Bearer s3cret-tokem"],
        );
        assert_eq!(wrong.status, 401, "{path}");
        let bearer = format!("Authorization: Bearer {secret}");
        assert_eq!(
            get(serve.addr, "GET", path, &[&bearer]).status,
            200,
            "{path}"
        );
        let sep = if path.contains('?') { '&' } else { '?' };
        assert_eq!(
            serve.get(&format!("{path}{sep}token={secret}")).status,
            200,
            "{path}"
        );
    }
    assert_eq!(serve.get("/assets/app.js").status, 200);
    let log = std::sync::Arc::clone(&serve.log);
    assert_eq!(serve.stop(), Some(0));
    let log = log.lock().unwrap().clone();
    assert!(log.contains("serving"), "{log}");
    assert!(!log.contains(secret), "the token is never printed: {log}");
}

/// A site whose page has a `<script>` title and a link whose URL breaks out of
/// an attribute; the link answers 500, so it shows among the errors too.
fn hostile_site() -> TestServer {
    TestServer::start(handler(|request| match request.path() {
        "/" => TestResponse::html(
            "<html><head><title><script>alert('title')</script></title></head><body>\
             <a href='/x%22%3E%3Cimg%20src=x%20onerror=alert(1)%3E'>x</a>\
             <a href='/ok'>ok</a></body></html>",
        ),
        "/ok" => TestResponse::html("<title>\"><img src=x onerror=alert(2)></title>ok"),
        "/robots.txt" => TestResponse::not_found(),
        _ => TestResponse::status(500),
    }))
}

#[test]
fn what_crawled_pages_say_is_escaped_everywhere() {
    let site = hostile_site();
    let dir = tempfile::tempdir().unwrap();
    let out = cli::run(
        legcrawl(dir.path(), &["crawl", &site.url("/"), "--retries", "0"]),
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let serve = Serve::start(dir.path(), &[]);
    let page = serve.get("/");
    assert!(
        page.body.contains("/x%22%3E%3Cimg"),
        "the failed URL is listed: {}",
        page.body
    );
    for raw in ["<script>alert", "<img src=x", "<img"] {
        assert!(!page.body.contains(raw), "raw {raw:?} in the page");
    }
    let items = serve.get("/api/items");
    assert_eq!(items.header("content-type"), Some("application/json"));
    assert_eq!(items.header("x-content-type-options"), Some("nosniff"));
    let titles: Vec<String> = items.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["item"]["title"].as_str().map(str::to_owned))
        .collect();
    assert!(titles.iter().any(|t| t.contains("<script>")), "{titles:?}");
    if let Some(dom) = browser_dom(&serve, "#items") {
        assert!(
            !dom.contains("<img"),
            "an <img> element was made from data: {dom}"
        );
        assert!(
            !dom.contains("<script>alert"),
            "a <script> element was made from data"
        );
        assert!(
            dom.contains("&lt;script&gt;alert"),
            "the title is shown as text: {dom}"
        );
    }
}

#[test]
fn a_browser_shows_the_hosts_and_counts_beside_a_running_crawl() {
    let Some(chromium) = find_browser() else {
        return;
    };
    // Far more pages than can be fetched before the browser has read the
    // page, however loaded the machine: the crawl is stopped right after.
    let site = slow_site(5000, 200);
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path(), &[]);
    let mut crawl = spawn_crawl(dir.path(), &site.url("/"), &["--concurrency", "2"]);
    // The first snapshot comes before any page: wait for one with pages.
    wait_for(LIMIT, "the crawl to publish pages", || {
        serve.get("/api/overview").json()["pages"]["pages"]
            .as_u64()
            .is_some_and(|n| n > 0)
    });
    let dom = dump_dom(&chromium, &serve, "#hosts").expect("chromium ran");
    cli::signal(crawl.id(), libc::SIGINT);
    let _ = wait_status(&mut crawl, LIMIT);
    let host = site.addr().to_string();
    assert!(
        dom.contains(&format!("<td>{host}</td>")),
        "the hosts table names the host: {dom}"
    );
    let pages = dom
        .split("id=\"c-pages\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_default()
        .replace(',', "");
    assert!(
        pages.parse::<u64>().is_ok_and(|n| n > 0),
        "the page count shows: {pages:?}"
    );
    assert!(
        dom.contains("data-phase=\"running\""),
        "the crawl shows as running"
    );
    assert!(dom.contains("<polyline"), "the pages/s chart is drawn");
}

#[test]
fn serve_reads_a_shared_crawl_without_printing_its_password() {
    let _serial = crate::support::workers::serial();
    let password = "pw-serve-Zq7x";
    let Some(redis) = RedisServer::start_with_password("serve_shared", password) else {
        return;
    };
    let url = format!("redis://:{password}@127.0.0.1:{}/0", redis.port());
    let mut cmd = Command::new(cli::bin());
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--shared",
        &url,
        "--name",
        "watched",
    ])
    .env("RUST_LOG", "warn");
    let serve = Serve::spawn(cmd);
    wait_for(LIMIT, "the first read of Redis", || {
        serve.get("/api/overview").json()["message"] != "reading the shared crawl..."
    });
    assert_eq!(serve.get("/api/overview").json()["phase"], "none");
    let site = crate::support::hosts::MultiSite::start(30, 2, 5, crate::support::hosts::no_delay());
    let crawl_args = site.crawl_args();
    let mut crawl = crate::support::workers::Crawl::new(&url, "watched");
    crawl.spawn(&crate::support::hosts::args(
        &crawl_args,
        &["--concurrency", "4"],
    ));
    crawl.wait_all_ok(LIMIT);
    wait_for(LIMIT, "the worker's run to show", || {
        serve.get("/api/runs").json()["runs"]
            .as_array()
            .is_some_and(|r| r.len() == 1)
    });
    let overview = serve.get("/api/overview").json();
    assert_eq!(overview["phase"], "ended", "{overview}");
    let expected = site.expected().len() as u64;
    assert_eq!(
        overview["pages"]["new"].as_u64(),
        Some(expected),
        "{overview}"
    );
    let runs = serve.get("/api/runs").json();
    assert_eq!(
        runs["runs"][0]["pages"]["new"].as_u64(),
        Some(expected),
        "{runs}"
    );
    // The hosts of the shared tables, their per-run counts not kept ("-").
    let hosts = serve.get("/api/hosts").json();
    let rows = hosts["hosts"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 2, "the site's two hosts: {hosts}");
    assert!(
        rows.iter()
            .all(|h| h["queued"] == 0 && h["fetched"].is_null()),
        "{hosts}"
    );
    // The stream's newest items, newest last, and a search among them.
    let items = serve.get("/api/items").json();
    let listed = items["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(listed.len() as u64, expected.min(200), "{items}");
    assert!(
        listed
            .iter()
            .all(|i| i["url"].as_str().is_some_and(|u| u.starts_with("http"))),
        "{items}"
    );
    // Pages over time: a sample per poll once the crawl is there.
    wait_for(LIMIT, "two polls' samples of pages over time", || {
        serve.get("/api/overview").json()["rate"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    });
    for path in ENDPOINTS {
        let answer = serve.get(path);
        assert_eq!(answer.status, 200, "{path}");
        assert!(!answer.body.contains(password), "{path} shows the password");
    }
    let page = serve.get("/");
    assert!(
        page.body.contains("redis://:***@"),
        "the page names the server redacted"
    );
    assert!(!page.body.contains(password));
    if let Some(metrics) = metrics_of(&serve) {
        assert_eq!(
            metrics.value("legcrawl_pages_fetched_total", "outcome", "new"),
            expected as f64
        );
    }
    let log = std::sync::Arc::clone(&serve.log);
    assert_eq!(serve.stop(), Some(0));
    let log = log.lock().unwrap().clone();
    assert!(log.contains("redis://:***@"), "{log}");
    assert!(
        !log.contains(password),
        "the password is never printed: {log}"
    );
}

#[test]
fn the_last_run_end_and_outcome_are_in_the_metrics_embedded() {
    the_last_run_end_and_outcome_are_in_the_metrics(Mode::Embedded);
}

#[test]
fn the_last_run_end_and_outcome_are_in_the_metrics_shared() {
    the_last_run_end_and_outcome_are_in_the_metrics(Mode::Shared);
}

/// After a run, `/metrics` says when the last run ended and how, for an
/// alert on a nightly crawl; the Prometheus parser reads it.
fn the_last_run_end_and_outcome_are_in_the_metrics(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "serve_last_run") else {
        return;
    };
    let site = slow_site(5, 0);
    let serve = Serve::of(&crawler);
    let before = unix_now();
    crawler.crawl_ok(&[&site.url("/")]);
    let after = unix_now();
    let drained = "legcrawl_last_run_outcome{outcome=\"drained\"} 1";
    wait_for(LIMIT, "the run's end in /metrics", || {
        serve.get("/metrics").body.lines().any(|l| l == drained)
    });
    let text = serve.get("/metrics").body;
    for line in [
        "# TYPE legcrawl_last_run_end_timestamp_seconds gauge",
        "# TYPE legcrawl_last_run_outcome gauge",
        "legcrawl_crawl_running 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{mode:?}: no {line:?} in\n{text}"
        );
    }
    if let Some(metrics) = metrics_of(&serve) {
        let ended = metrics.value("legcrawl_last_run_end_timestamp_seconds", "", "");
        assert!(
            (before as f64..=after as f64).contains(&ended),
            "{mode:?}: ended at {ended}, not between {before} and {after}"
        );
        assert_eq!(
            metrics.value("legcrawl_last_run_outcome", "outcome", "drained"),
            1.0
        );
    }
    assert_eq!(serve.stop(), Some(0));
}

#[test]
fn a_crawl_killed_with_kill_nine_shows_as_stale_never_running_embedded() {
    a_crawl_killed_with_kill_nine_shows_as_stale_never_running(Mode::Embedded);
}

#[test]
fn a_crawl_killed_with_kill_nine_shows_as_stale_never_running_shared() {
    a_crawl_killed_with_kill_nine_shows_as_stale_never_running(Mode::Shared);
}

/// A crawl killed with `kill -9` is never shown as running once it is stale:
/// at once for a state directory (its writer is gone), within the lease TTL
/// for a shared worker (it stopped renewing). Its run's outcome shows as
/// `stale` beside `legcrawl_crawl_running 0`, in `/metrics` and the API.
fn a_crawl_killed_with_kill_nine_shows_as_stale_never_running(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "serve_kill_nine") else {
        return;
    };
    let site = slow_site(200, 100);
    let serve = Serve::of(&crawler);
    let seed = site.url("/");
    let mut args = vec![seed.as_str(), "--concurrency", "2"];
    if mode == Mode::Shared {
        args.extend(["--lease-ttl", "2s"]);
    }
    let mut crawl = crawler
        .command(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn crawl");
    wait_for(LIMIT, "the crawl to show as running", || {
        serve.get("/api/overview").json()["phase"] == "running"
    });
    cli::signal(crawl.id(), libc::SIGKILL);
    let _ = wait_status(&mut crawl, LIMIT);
    let stale = |overview: &serde_json::Value| overview["phase"] == "stale";
    if mode == Mode::Embedded {
        // The writer is gone: stale at the first look.
        let overview = serve.get("/api/overview").json();
        assert!(stale(&overview), "{overview}");
    }
    wait_for(
        Duration::from_secs(20),
        "the killed crawl to show as stale",
        || stale(&serve.get("/api/overview").json()),
    );
    if let Some(metrics) = metrics_of(&serve) {
        assert_eq!(metrics.value("legcrawl_crawl_running", "", ""), 0.0);
        assert_eq!(metrics.value("legcrawl_run_info", "outcome", "stale"), 1.0);
    }
    let overview = serve.get("/api/overview").json();
    let said = overview["message"].as_str().unwrap_or_default();
    let expected = match mode {
        Mode::Embedded => "stopped publishing",
        Mode::Shared => "stopped renewing",
    };
    assert!(said.contains(expected), "{overview}");
    // From then on, nothing says the run is running.
    for _ in 0..10 {
        let overview = serve.get("/api/overview").json();
        assert_ne!(overview["phase"], "running", "{overview}");
        assert_ne!(overview["outcome"], "running", "{overview}");
        let runs = serve.get("/api/runs").json();
        assert!(
            runs["runs"]
                .as_array()
                .is_none_or(|runs| runs.iter().all(|r| r["outcome"] != "running")),
            "{runs}"
        );
        let metrics = serve.get("/metrics").body;
        assert!(
            metrics.lines().any(|l| l == "legcrawl_crawl_running 0"),
            "{metrics}"
        );
        assert!(!metrics.contains("outcome=\"running\""), "{metrics}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(serve.stop(), Some(0));
}

/// Unix seconds now.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
