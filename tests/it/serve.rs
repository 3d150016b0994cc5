//! `legcrawl serve` on the real binary: every endpoint on a state without a
//! snapshot, beside a running crawl and after it; the metrics through a real
//! Prometheus text parser (PyPI `prometheus_client`); a headless Chromium
//! rendering the page; escaping of what crawled pages say; the listen and token
//! rules; exit codes.
//!
//! The test client speaks HTTP/1.0 over a loopback socket (one request per
//! connection, the body runs to the close): enough to read what serve answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::cli::{self, legcrawl, wait_status};
use crate::support::redis::RedisServer;
use crate::support::{Site, TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(60);

/// A running `legcrawl serve`, stopped (SIGTERM) on drop.
struct Serve {
    child: Child,
    addr: SocketAddr,
    /// What it printed on stderr after its first line.
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Serve {
    /// `serve --data DATA --listen 127.0.0.1:0 EXTRA`, once it said where it listens.
    fn start(data: &Path, extra: &[&str]) -> Serve {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Serve::spawn(legcrawl(data, &args))
    }

    /// `cmd` (a `serve` command), once it said where it listens.
    fn spawn(mut cmd: Command) -> Serve {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let kept = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            if let Some(Ok(line)) = lines.next() {
                kept.lock().unwrap().push_str(&line);
                let _ = tx.send(line);
            }
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push_str(&line);
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("serve's first line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        Serve { child, addr, log }
    }

    fn get(&self, path: &str) -> Answer {
        get(self.addr, "GET", path, &[])
    }

    /// Stops it with SIGTERM and returns its exit code.
    fn stop(mut self) -> Option<i32> {
        cli::signal(self.child.id(), libc::SIGTERM);
        let code = wait_status(&mut self.child, LIMIT).code();
        std::mem::forget(self);
        code
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        assert_eq!(self.status, 200, "{}", self.body);
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

fn get(addr: SocketAddr, method: &str, path: &str, headers: &[&str]) -> Answer {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut request = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("read");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// Polls `what` every 100 ms until it holds (at most `limit`).
fn wait_for(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A generated site of `pages` pages, each answer delayed by `delay_ms`.
fn slow_site(pages: usize, delay_ms: u64) -> TestServer {
    let site = Site::generate(pages, 7).handler();
    TestServer::start(handler(move |request| {
        site(request).delay(Duration::from_millis(delay_ms))
    }))
}

/// `crawl URL --data DATA ARGS`, spawned.
fn spawn_crawl(data: &Path, url: &str, args: &[&str]) -> Child {
    let mut all = vec!["crawl", url];
    all.extend_from_slice(args);
    legcrawl(data, &all)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn crawl")
}

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

/// Parsed `/metrics`: `(name, labels, value)` per sample.
struct Metrics(Vec<(String, serde_json::Map<String, serde_json::Value>, f64)>);

impl Metrics {
    /// The sample of `name` whose label `label` is `value` (any, with `""`).
    fn value(&self, name: &str, label: &str, value: &str) -> f64 {
        self.0
            .iter()
            .find(|(n, labels, _)| n == name && (label.is_empty() || labels[label] == value))
            .map_or(f64::NAN, |s| s.2)
    }
}

/// Python with `prometheus_client`: `$LEGCRAWL_PYTHON`, else the venv `.ci/run` makes.
fn prom_python() -> Option<PathBuf> {
    let python = std::env::var_os("LEGCRAWL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/warcio-venv/bin/python")
        });
    let ok = Command::new(&python)
        .args(["-c", "import prometheus_client.parser"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(python);
    }
    assert!(
        std::env::var_os("LEGCRAWL_REQUIRE_PROMPARSER").is_none(),
        "LEGCRAWL_REQUIRE_PROMPARSER is set but {} cannot import prometheus_client",
        python.display()
    );
    eprintln!(
        "SKIPPED: no python with prometheus_client (pip install prometheus-client==0.26.0 into target/warcio-venv)"
    );
    None
}

/// `/metrics` read by the Prometheus project's own text parser (None: skipped).
fn metrics_of(serve: &Serve) -> Option<Metrics> {
    let text = serve.get("/metrics");
    assert_eq!(text.status, 200);
    assert!(
        text.header("content-type")
            .unwrap_or("")
            .starts_with("text/plain; version=0.0.4")
    );
    let python = prom_python()?;
    let script = "import sys, json\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        out = []\n\
        for family in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in family.samples:\n\
        \x20       out.append([s.name, s.labels, s.value])\n\
        print(json.dumps(out))\n";
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.body.as_bytes())
        .unwrap();
    let out = cli::wait_output(child, LIMIT);
    assert!(
        out.status.success(),
        "the parser refused /metrics: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        text.body
    );
    let samples: Vec<(String, serde_json::Map<String, serde_json::Value>, f64)> =
        serde_json::from_slice(&out.stdout).expect("parser output");
    Some(Metrics(samples))
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
    let site = slow_site(400, 50);
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path(), &[]);
    let mut crawl = spawn_crawl(dir.path(), &site.url("/"), &["--concurrency", "2"]);
    wait_for(LIMIT, "the crawl to publish", || {
        serve.get("/api/hosts").json()["hosts"]
            .as_array()
            .is_some_and(|h| !h.is_empty())
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

/// Debian's `chromium` (or `$LEGCRAWL_CHROMIUM`); None, loudly, without one
/// unless `LEGCRAWL_REQUIRE_BROWSER` is set.
fn find_browser() -> Option<PathBuf> {
    let candidates = std::env::var_os("LEGCRAWL_CHROMIUM")
        .map(|p| vec![PathBuf::from(p)])
        .unwrap_or_else(|| {
            vec![
                "/usr/bin/chromium".into(),
                "/usr/bin/chromium-browser".into(),
            ]
        });
    if let Some(found) = candidates.into_iter().find(|p| p.exists()) {
        return Some(found);
    }
    assert!(
        std::env::var_os("LEGCRAWL_REQUIRE_BROWSER").is_none(),
        "LEGCRAWL_REQUIRE_BROWSER is set but chromium is not installed (apt-get install chromium)"
    );
    eprintln!("SKIPPED: chromium not found (apt-get install chromium, or set LEGCRAWL_CHROMIUM)");
    None
}

/// The DOM of the page at `fragment` after its script ran, when there is a browser.
fn browser_dom(serve: &Serve, fragment: &str) -> Option<String> {
    let chromium = find_browser()?;
    dump_dom(&chromium, serve, fragment)
}

/// Headless chromium's `--dump-dom` of the page, killed after 60 s.
fn dump_dom(chromium: &Path, serve: &Serve, fragment: &str) -> Option<String> {
    let profile = tempfile::tempdir().unwrap();
    let child = Command::new(chromium)
        .args(chromium_flags(profile.path()))
        .arg("--virtual-time-budget=5000")
        .arg("--dump-dom")
        .arg(format!("http://{}/{fragment}", serve.addr))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chromium");
    let out = cli::wait_output(child, LIMIT);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Flags for a hermetic headless chromium (no network but the page's own).
fn chromium_flags(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
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
