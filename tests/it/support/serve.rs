//! `legcrawl serve` under test: the child process, an HTTP/1.0 client over a
//! loopback socket (one request per connection, the body runs to the close:
//! enough to read what serve answers), `/metrics` read by the Prometheus
//! project's own text parser (PyPI `prometheus_client`, in a python named by
//! `LEGCRAWL_PYTHON` or the venv `.ci/run` makes), and Debian's headless
//! `chromium`. Each missing program is a loud SKIPPED unless its
//! `LEGCRAWL_REQUIRE_*` variable is set; every wait is bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::cli::{self, legcrawl, wait_status};
use super::{Site, TestServer, handler};

/// How long any one wait may take.
pub const LIMIT: Duration = Duration::from_secs(60);

/// A running `legcrawl serve`, stopped (SIGTERM) on drop.
pub struct Serve {
    pub child: Child,
    pub addr: SocketAddr,
    /// What it printed on stderr after its first line.
    pub log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Serve {
    /// `serve --data DATA --listen 127.0.0.1:0 EXTRA`, once it said where it listens.
    pub fn start(data: &Path, extra: &[&str]) -> Serve {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Serve::spawn(legcrawl(data, &args))
    }

    /// `serve` of `crawler`'s crawl (its state directory, or its shared
    /// crawl in Redis), once it said where it listens.
    pub fn of(crawler: &super::mode::Crawler) -> Serve {
        match (crawler.data(), crawler.shared()) {
            (Some(data), _) => Serve::start(&data, &[]),
            (None, Some(crawl)) => {
                let mut cmd = std::process::Command::new(cli::bin());
                cmd.args(["serve", "--listen", "127.0.0.1:0", "--shared"])
                    .arg(&crawl.redis)
                    .arg("--name")
                    .arg(&crawl.name)
                    .env("RUST_LOG", "warn");
                Serve::spawn(cmd)
            }
            (None, None) => panic!("a crawler has a state directory or a shared crawl"),
        }
    }

    /// `cmd` (a `serve` command), once it said where it listens.
    pub fn spawn(mut cmd: Command) -> Serve {
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

    pub fn get(&self, path: &str) -> Answer {
        get(self.addr, "GET", path, &[])
    }

    /// Stops it with SIGTERM and returns its exit code.
    pub fn stop(mut self) -> Option<i32> {
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
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        assert_eq!(self.status, 200, "{}", self.body);
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

pub fn get(addr: SocketAddr, method: &str, path: &str, headers: &[&str]) -> Answer {
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
pub fn wait_for(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A generated site of `pages` pages, each answer delayed by `delay_ms`.
pub fn slow_site(pages: usize, delay_ms: u64) -> TestServer {
    let site = Site::generate(pages, 7).handler();
    TestServer::start(handler(move |request| {
        site(request).delay(Duration::from_millis(delay_ms))
    }))
}

/// `crawl URL --data DATA ARGS`, spawned.
pub fn spawn_crawl(data: &Path, url: &str, args: &[&str]) -> Child {
    let mut all = vec!["crawl", url];
    all.extend_from_slice(args);
    legcrawl(data, &all)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn crawl")
}

/// Parsed `/metrics`: `(name, labels, value)` per sample.
pub struct Metrics(pub Vec<(String, serde_json::Map<String, serde_json::Value>, f64)>);

impl Metrics {
    /// The sample of `name` whose label `label` is `value` (any, with `""`).
    pub fn value(&self, name: &str, label: &str, value: &str) -> f64 {
        self.0
            .iter()
            .find(|(n, labels, _)| n == name && (label.is_empty() || labels[label] == value))
            .map_or(f64::NAN, |s| s.2)
    }
}

/// Python with `prometheus_client`: `$LEGCRAWL_PYTHON`, else the venv `.ci/run` makes.
pub fn prom_python() -> Option<PathBuf> {
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
    super::skip::skipped(
        "LEGCRAWL_REQUIRE_PROMPARSER",
        "the Prometheus parser check",
        &format!(
            "{} cannot import prometheus_client (pip install prometheus-client==0.26.0 into target/warcio-venv)",
            python.display()
        ),
    );
    None
}

/// `/metrics` read by the Prometheus project's own text parser (None: skipped).
pub fn metrics_of(serve: &Serve) -> Option<Metrics> {
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

/// Debian's `chromium` (or `$LEGCRAWL_CHROMIUM`); None, loudly, without one
/// unless `LEGCRAWL_REQUIRE_BROWSER` is set.
pub fn find_browser() -> Option<PathBuf> {
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
    super::skip::skipped(
        "LEGCRAWL_REQUIRE_BROWSER",
        "the headless-browser check",
        "chromium not found (apt-get install chromium, or set LEGCRAWL_CHROMIUM)",
    );
    None
}

/// The DOM of the page at `fragment` after its script ran, when there is a browser.
pub fn browser_dom(serve: &Serve, fragment: &str) -> Option<String> {
    let chromium = find_browser()?;
    dump_dom(&chromium, serve, fragment)
}

/// Headless chromium's `--dump-dom` of the page, killed after 60 s.
pub fn dump_dom(chromium: &Path, serve: &Serve, fragment: &str) -> Option<String> {
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
pub fn chromium_flags(profile: &Path) -> Vec<String> {
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
