//! Issue 27, proxies: `--proxy`, `--no-proxy`, the crawl file's `proxy` and
//! the environment (`HTTP_PROXY`, `NO_PROXY`, ...), through a real tinyproxy
//! the test starts (skipped loudly without it, unless
//! `LEGCRAWL_REQUIRE_PROXY=1`). The site is in-process on 127.0.0.1 and sees
//! the `Via` header tinyproxy adds; the proxy's log shows each request line
//! (absolute-form for http, `CONNECT host:port` for https).

use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::cli::{bin, crawl_command, legcrawl, run, stderr};
use crate::support::tinyproxy::{Tinyproxy, VIA_NAME};
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);
/// Every proxy variable curl reads: removed from each command, so the
/// environment of the test run does not leak in.
const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Each request's path and whether it came through the test proxy.
type Seen = Arc<Mutex<Vec<(String, bool)>>>;

/// A small site (robots.txt, `/` linking to `/a`) that records what it serves.
fn site() -> (TestServer, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let server = TestServer::start(handler(move |req| {
        let via = req.header("via").is_some_and(|v| v.contains(VIA_NAME));
        if let Ok(mut log) = log.lock() {
            log.push((req.path().to_owned(), via));
        }
        match req.path() {
            "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\n"),
            "/" => TestResponse::html("<title>home</title><a href=/a>a</a>"),
            "/a" => TestResponse::html("<title>a</title>"),
            _ => TestResponse::not_found(),
        }
    }));
    (server, seen)
}

/// Takes what the site saw so far: (requests, how many came through the proxy).
fn take(seen: &Seen) -> (usize, usize) {
    let mut seen = seen.lock().expect("seen lock");
    let counts = (seen.len(), seen.iter().filter(|(_, via)| *via).count());
    seen.clear();
    counts
}

/// `legcrawl ARGS` with no proxy variable but those in `env`, logging
/// warnings (where a failing host's line goes, as by default).
fn command(mut cmd: Command, env: &[(&str, &str)]) -> Command {
    cmd.env("RUST_LOG", "warn");
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    cmd
}

/// `crawl --retries 0 ARGS` under [`command`]'s environment.
fn crawl(data: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    run(
        command(
            crawl_command(data, &[&["--retries", "0"], args].concat()),
            env,
        ),
        LIMIT,
    )
}

#[test]
fn proxy_flag_is_stored_with_the_job_and_no_proxy_turns_it_off() {
    let Some(proxy) = Tinyproxy::start("proxy_flag_is_stored_with_the_job") else {
        return;
    };
    let (server, seen) = site();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let out = crawl(&data, &[], &["--proxy", &proxy.url(None), &server.url("/")]);
    assert!(out.status.success(), "{}", stderr(&out));
    // robots.txt, / and /a, each through the proxy.
    assert_eq!(take(&seen), (3, 3));
    let lines = proxy.requests();
    let page = format!("GET {} HTTP/1.1", server.url("/a"));
    assert!(lines.contains(&page), "{lines:?}");
    // The next run with no flag runs the stored job: through the proxy again.
    let out = crawl(&data, &[], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (requests, via) = take(&seen);
    assert!(requests > 0 && via == requests, "{requests} {via}");
    // --no-proxy is stored too (`proxy = "none"`), and bypasses it.
    let out = crawl(&data, &[], &["--no-proxy"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains(&format!("proxy: {} -> none", proxy.url(None))),
        "{said}"
    );
    let (requests, via) = take(&seen);
    assert!(requests > 0 && via == 0, "{requests} {via}");
    let job = run(legcrawl(&data, &["dump", "job"]), LIMIT);
    let job = String::from_utf8_lossy(&job.stdout).into_owned();
    assert!(job.contains("proxy = \"none\""), "{job}");
}

#[test]
fn the_environment_chooses_the_proxy_unless_no_proxy_names_the_host() {
    let Some(proxy) = Tinyproxy::start("the_environment_chooses_the_proxy") else {
        return;
    };
    let (server, seen) = site();
    let dir = tempfile::tempdir().unwrap();
    let url = proxy.url(None);
    // Loopback is not exempt: HTTP_PROXY applies to 127.0.0.1.
    let out = crawl(
        &dir.path().join("a"),
        &[("HTTP_PROXY", &url)],
        &[&server.url("/")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let got = take(&seen);
    assert_eq!(got, (3, 3), "{}\n{:?}", stderr(&out), proxy.log());
    // The lowercase form, with NO_PROXY naming the host: straight to the site.
    let env = [
        ("http_proxy", url.as_str()),
        ("NO_PROXY", "localhost,127.0.0.1"),
    ];
    let out = crawl(&dir.path().join("b"), &env, &[&server.url("/")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(take(&seen), (3, 0));
    // --no-proxy overrides the environment.
    let out = crawl(
        &dir.path().join("c"),
        &[("ALL_PROXY", &url)],
        &["--no-proxy", &server.url("/")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(take(&seen), (3, 0));
    // The environment is not stored: the next run without it goes direct.
    let out = crawl(&dir.path().join("a"), &[], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (requests, via) = take(&seen);
    assert!(requests > 0 && via == 0, "{requests} {via}");
}

#[test]
fn basic_proxy_auth_works_and_a_refusal_is_one_line_without_the_password() {
    let (user, password) = ("crawler", "pr0xy-s3cret");
    let Some(proxy) = Tinyproxy::start_with_auth("basic_proxy_auth", user, password) else {
        return;
    };
    let (server, seen) = site();
    let dir = tempfile::tempdir().unwrap();
    let good = proxy.url(Some((user, password)));
    let data = dir.path().join("a");
    let out = crawl(&data, &[], &["--proxy", &good, &server.url("/")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(take(&seen), (3, 3));
    assert!(!stderr(&out).contains(password));
    // No credentials: the proxy's 407 is one line naming the proxy; every
    // request failed at the proxy, so the run exits 4.
    let named = format!(
        "proxy {}: 407 Proxy Authentication Required",
        proxy.url(None)
    );
    let out = crawl(&data, &[], &["--proxy", &proxy.url(None)]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(said.contains(&named), "{said}");
    assert!(!said.contains(password), "the change line: {said}");
    assert!(
        said.contains(&format!("proxy: http://{user}:***@")),
        "{said}"
    );
    // A wrong password (tinyproxy answers it with 401, not 407) never reaches
    // the site and is never printed; over https the tunnel is refused.
    let wrong = "wr0ng-s3cret";
    let bad = proxy.url(Some((user, wrong)));
    let out = crawl(&data, &[], &["--proxy", &bad]);
    let said = stderr(&out);
    assert!(!said.contains(wrong) && !said.contains(password), "{said}");
    let target = format!("https://127.0.0.1:{}/", server.addr().port());
    let out = crawl(&dir.path().join("b"), &[("HTTPS_PROXY", &bad)], &[&target]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(!said.contains(wrong), "{said}");
    assert_eq!(take(&seen), (0, 0));
    let job = run(legcrawl(&data, &["dump", "job"]), LIMIT);
    let items = run(legcrawl(&data, &["dump", "items"]), LIMIT);
    for out in [job, items] {
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!text.contains(password), "{text}");
    }
    // Through the environment, `fetch` says the same, exit 3.
    let mut fetch = command(Command::new(bin()), &[("HTTP_PROXY", &proxy.url(None))]);
    fetch.args(["fetch", &server.url("/")]);
    let out = run(fetch, LIMIT);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains(&named), "{said}");
}

#[test]
fn https_goes_through_a_connect_tunnel() {
    let Some(proxy) = Tinyproxy::start("https_goes_through_a_connect_tunnel") else {
        return;
    };
    // A plain-HTTP server asked for https: the tunnel opens, TLS then fails
    // (no test certificate is trusted), which is enough to see the CONNECT.
    let (server, _seen) = site();
    let port = server.addr().port();
    let target = format!("https://127.0.0.1:{port}/");
    let dir = tempfile::tempdir().unwrap();
    let out = crawl(
        &dir.path().join("a"),
        &[("HTTPS_PROXY", &proxy.url(None))],
        &[&target],
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let connect = format!("CONNECT 127.0.0.1:{port} HTTP/1.1");
    let lines = proxy.requests();
    assert!(lines.contains(&connect), "{lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("GET")), "{lines:?}");
}

#[test]
fn fetch_obeys_the_proxy_settings() {
    let Some(proxy) = Tinyproxy::start("fetch_obeys_the_proxy_settings") else {
        return;
    };
    let (server, seen) = site();
    let url = proxy.url(None);
    let fetch = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = command(Command::new(bin()), env);
        cmd.arg("fetch").args(args).arg(server.url("/a"));
        run(cmd, LIMIT)
    };
    let out = fetch(&[], &["--proxy", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(take(&seen), (2, 2));
    let out = fetch(&[("HTTP_PROXY", &url)], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(take(&seen), (2, 2));
    let out = fetch(&[("HTTP_PROXY", &url)], &["--no-proxy"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(take(&seen), (2, 0));
    let out = fetch(&[], &["--proxy", "ftp://u:hidden@127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!stderr(&out).contains("hidden"), "{}", stderr(&out));
}
