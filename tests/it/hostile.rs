//! Hostile and unreachable servers, on the real binary: credentials in URLs,
//! undecodable and malformed responses, cut bodies, robots.txt redirect loops,
//! connection errors (`.invalid` names never resolve; a closed 127.0.0.1 port
//! refuses), and the log's colours.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use async_compression::tokio::write::{BrotliEncoder, GzipEncoder};
use tokio::io::AsyncWriteExt;

use crate::support::cli::{self, crawl_env, dump_items, fetch, legcrawl, run, stderr};
use crate::support::{TestResponse, TestServer, handler};

/// Crawls here log at the binary's default level (`RUST_LOG` unset).
const DEFAULT_LOG: &[(&str, Option<&str>)] = &[("RUST_LOG", None)];
const LIMIT: Duration = Duration::from_secs(60);

/// Every byte under `dir`, concatenated (to look for a string anywhere in a state).
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(all_bytes(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.extend(bytes);
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

async fn encode_gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzipEncoder::new(Vec::new());
    encoder.write_all(data).await.unwrap();
    encoder.shutdown().await.unwrap();
    encoder.into_inner()
}

async fn encode_brotli(data: &[u8]) -> Vec<u8> {
    let mut encoder = BrotliEncoder::new(Vec::new());
    encoder.write_all(data).await.unwrap();
    encoder.shutdown().await.unwrap();
    encoder.into_inner()
}

/// A 127.0.0.1 port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A one-connection server that answers the first request with `raw` bytes.
fn raw_server(raw: &'static [u8]) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let thread = std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(raw);
        }
    });
    (url, thread)
}

#[test]
fn credentials_are_never_stored_queued_or_sent() {
    let server = TestServer::start(handler(|req| {
        let port = req.header("host").unwrap_or_default().to_owned();
        match req.path() {
            "/" => TestResponse::html(format!(
                "<title>home</title><a href='http://link:secret1@{port}/a'>a</a> <a href='/r'>r</a>"
            )),
            "/r" => TestResponse::redirect(302, &format!("http://redir:secret2@{port}/b")),
            "/a" | "/b" => TestResponse::html("<title>page</title>"),
            _ => TestResponse::not_found(),
        }
    }));
    let seed = server.url("/").replace("://", "://seed:secret0@");
    let data = tempfile::tempdir().unwrap();
    let out = crawl_env(data.path(), &[&seed], DEFAULT_LOG);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let paths: Vec<String> = dump_items(data.path()).iter().map(cli::item_path).collect();
    for path in ["/", "/a", "/b"] {
        assert!(paths.iter().any(|p| p == path), "{path} in {paths:?}");
    }
    let mut dumped = Vec::new();
    for view in ["items", "pages", "frontier", "summary", "runs"] {
        dumped.extend(run(legcrawl(data.path(), &["dump", view]), LIMIT).stdout);
    }
    dumped.extend(all_bytes(data.path()));
    for secret in ["secret0", "secret1", "secret2"] {
        assert!(
            !contains(&dumped, secret),
            "{secret} is in the state or a dump"
        );
    }
    assert_eq!(server.hits("/a"), 1);
    assert_eq!(server.hits("/b"), 1);
}

#[test]
fn undecodable_bodies_fail_the_page_with_a_reason() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let html = b"<title>decoded</title>".to_vec();
    let twice = runtime.block_on(async { encode_gzip(&encode_gzip(&html).await).await });
    let mut trailing = runtime.block_on(encode_brotli(&html));
    trailing.extend_from_slice(b"trailing garbage");
    let server = TestServer::start(handler(move |req| match req.path() {
        "/" => TestResponse::html("<a href='/gz2'>1</a><a href='/brt'>2</a>"),
        "/gz2" => TestResponse::ok(twice.clone())
            .header("Content-Type", "text/html")
            .header("Content-Encoding", "gzip, gzip"),
        "/brt" => TestResponse::ok(trailing.clone())
            .header("Content-Type", "text/html")
            .header("Content-Encoding", "br"),
        _ => TestResponse::not_found(),
    }));
    let data = tempfile::tempdir().unwrap();
    let out = crawl_env(data.path(), &[&server.url("/")], DEFAULT_LOG);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("several encodings"), "{err}");
    assert!(err.contains("bytes after the end"), "{err}");
    assert!(err.contains("2 failed"), "{err}");
    let paths: Vec<String> = dump_items(data.path()).iter().map(cli::item_path).collect();
    assert_eq!(paths, ["/"], "undecodable pages store no item");

    for path in ["/gz2", "/brt"] {
        let out = fetch(&["--ignore-robots", &server.url(path)]);
        assert_eq!(out.status.code(), Some(5), "{path}: {}", stderr(&out));
        assert!(stderr(&out).contains("cannot decode"), "{}", stderr(&out));
    }
}

#[test]
fn a_malformed_response_is_named() {
    let (url, server) = raw_server(b"HTTP/1.1 200 OK\r\nBroken Header\r\n\r\nhi");
    let out = fetch(&["--ignore-robots", &url]);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(5));
    let err = stderr(&out);
    assert!(err.contains("invalid HTTP header"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn fetch_says_when_it_cut_a_body() {
    const LIMIT_BYTES: usize = 10 * 1024 * 1024;
    let big = vec![b'x'; LIMIT_BYTES + 100];
    let server = TestServer::start(handler(move |_| TestResponse::ok(big.clone())));
    let out = fetch(&["--ignore-robots", &server.url("/big")]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_eq!(out.stdout.len(), LIMIT_BYTES);
    assert!(stderr(&out).contains("was cut"), "{}", stderr(&out));
}

#[test]
fn fetch_connection_errors_read_apart() {
    let server = TestServer::start(handler(|_| TestResponse::html("plain")));
    let tls = server.url("/").replace("http://", "https://");
    let refused = format!("http://127.0.0.1:{}/", closed_port());
    let cases = [
        ("http://no-such-host.invalid/", "cannot resolve the host"),
        (refused.as_str(), "connection refused"),
        (tls.as_str(), "TLS handshake failed"),
    ];
    for (url, expected) in cases {
        let out = fetch(&["--ignore-robots", url]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(3), "{url}: {err}");
        assert!(err.contains(expected), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn fetch_refuses_a_zero_timeout_and_shows_the_final_url() {
    for flag in ["--timeout", "--read-timeout"] {
        let out = fetch(&[flag, "0", "http://127.0.0.1:1/"]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(err.contains(flag) && err.lines().count() == 1, "{err}");
    }
    let server = TestServer::start(handler(|req| match req.path() {
        "/start" => TestResponse::redirect(301, "/final"),
        _ => TestResponse::html("end"),
    }));
    let out = fetch(&["-I", "--ignore-robots", &server.url("/start")]);
    assert_eq!(out.status.code(), Some(0));
    let head = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(head.starts_with("HTTP 200"), "{head}");
    assert!(
        head.lines()
            .any(|l| l == format!("URL: {}", server.url("/final"))),
        "{head}"
    );
}

#[test]
fn a_robots_redirect_loop_is_a_server_error() {
    let server = TestServer::start(handler(|req| match req.path() {
        "/robots.txt" => TestResponse::redirect(302, "/r2"),
        "/r2" => TestResponse::redirect(302, "/robots.txt"),
        _ => TestResponse::html("page"),
    }));
    let out = fetch(&[&server.url("/page")]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("server error"), "{}", stderr(&out));
    assert_eq!(server.hits("/robots.txt"), 1, "the loop is seen at once");
    assert_eq!(server.hits("/page"), 0);
}

#[test]
fn unreachable_hosts_are_reported_once_and_given_up_within_seconds() {
    let server = TestServer::start(handler(|_| TestResponse::html("<title>up</title>")));
    let refused = format!("http://127.0.0.1:{}/", closed_port());
    let data = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = crawl_env(
        data.path(),
        &["http://no-such-host.invalid/", &refused, &server.url("/")],
        DEFAULT_LOG,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(err.matches("cannot resolve the host").count(), 1, "{err}");
    assert_eq!(err.matches("connection refused").count(), 1, "{err}");
    assert!(err.contains("2 hosts unreachable"), "{err}");
    assert!(!err.contains('\x1b'), "no colour codes in a file: {err:?}");
    let frontier = run(legcrawl(data.path(), &["dump", "frontier"]), LIMIT);
    let frontier = String::from_utf8_lossy(&frontier.stdout);
    assert!(frontier.contains("no-such-host.invalid"), "{frontier}");
    assert!(frontier.contains(&refused), "{frontier}");
    assert_eq!(dump_items(data.path()).len(), 1);
}

#[test]
fn until_idle_ends_a_run_while_robots_txt_keeps_failing() {
    let server = TestServer::start(handler(|req| match req.path() {
        "/robots.txt" => TestResponse::status(503),
        _ => TestResponse::html("page"),
    }));
    let data = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = crawl_env(
        data.path(),
        &["--until-idle", &server.url("/")],
        DEFAULT_LOG,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert!(err.contains("--until-idle"), "{err}");
    assert_eq!(server.hits("/"), 0);
    let frontier = run(legcrawl(data.path(), &["dump", "frontier"]), LIMIT);
    assert!(String::from_utf8_lossy(&frontier.stdout).contains(&server.url("/")));
}

#[test]
fn a_bloom_filter_left_dirty_is_recounted_quietly() {
    let server = TestServer::start(handler(|_| TestResponse::html("<title>t</title>")));
    let data = tempfile::tempdir().unwrap();
    assert_eq!(
        crawl_env(data.path(), &[&server.url("/")], DEFAULT_LOG)
            .status
            .code(),
        Some(0)
    );
    // What a `kill -9` leaves: the header's clean flag (offset 24) at 0.
    let bloom = data.path().join("bloom.bin");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&bloom)
        .unwrap();
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(24)).unwrap();
    file.write_all(&[0]).unwrap();
    drop(file);
    let mut dump = legcrawl(data.path(), &["dump", "summary"]);
    dump.env_remove("RUST_LOG");
    let out = run(dump, LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("not flushed"),
        "the recount is a debug-level notice: {}",
        stderr(&out)
    );
    let mut dump = legcrawl(data.path(), &["dump", "summary"]);
    dump.env("RUST_LOG", "debug");
    let out = run(dump, LIMIT);
    assert!(stderr(&out).contains("not flushed"), "{}", stderr(&out));
}
