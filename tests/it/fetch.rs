//! The fetcher against the in-process test server: statuses, decoding, limits,
//! timeouts, length checks, URL checks, connection errors and request headers;
//! and `legcrawl fetch`'s timeout flags on the real binary.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_compression::Level;
use async_compression::tokio::write::{BrotliEncoder, DeflateEncoder, GzipEncoder, ZlibEncoder};
use bytes::Bytes;
use legcrawl::fetch::{FetchError, FetchSettings, Fetcher};
use legcrawl::request::Request;
use tokio::io::AsyncWriteExt;

use crate::support::cli;
use crate::support::{BodyMode, Site, TestRequest, TestResponse, TestServer, handler};

const MIB: usize = 1024 * 1024;

/// Settings with timeouts short enough that a broken test fails quickly.
fn settings() -> FetchSettings {
    FetchSettings {
        request_timeout: Duration::from_secs(10),
        read_timeout: Duration::from_secs(5),
        ..FetchSettings::default()
    }
}

fn fetcher() -> Fetcher {
    Fetcher::new(settings()).unwrap()
}

/// A server answering every request with `response`.
fn serve(response: TestResponse) -> TestServer {
    TestServer::start(handler(move |_| response.clone()))
}

async fn get(fetcher: &Fetcher, url: &str) -> Result<legcrawl::response::Response, FetchError> {
    fetcher.fetch(&Request::get(url)).await
}

async fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzipEncoder::new(Vec::new());
    encoder.write_all(data).await.unwrap();
    encoder.shutdown().await.unwrap();
    encoder.into_inner()
}

async fn brotli(data: &[u8]) -> Vec<u8> {
    let mut encoder = BrotliEncoder::new(Vec::new());
    encoder.write_all(data).await.unwrap();
    encoder.shutdown().await.unwrap();
    encoder.into_inner()
}

async fn zlib(data: &[u8]) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new());
    encoder.write_all(data).await.unwrap();
    encoder.shutdown().await.unwrap();
    encoder.into_inner()
}

async fn raw_deflate(data: &[u8]) -> Vec<u8> {
    let mut encoder = DeflateEncoder::new(Vec::new());
    encoder.write_all(data).await.unwrap();
    encoder.shutdown().await.unwrap();
    encoder.into_inner()
}

/// A page body long enough to compress.
fn sample_html() -> Vec<u8> {
    let mut html = String::from("<!DOCTYPE html><html><head><title>Sample</title></head><body>");
    for i in 0..2000 {
        html.push_str(&format!("<p>line {i} of the sample page</p>"));
    }
    html.push_str("</body></html>");
    html.into_bytes()
}

#[tokio::test]
async fn ok_keeps_status_headers_and_body() {
    let server =
        serve(TestResponse::html("<html><title>Hi</title></html>").header("X-Test", "yes"));
    let url = server.url("/a?b=1");
    let response = get(&fetcher(), &url).await.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.headers["x-test"], "yes");
    assert_eq!(
        response.body,
        Bytes::from_static(b"<html><title>Hi</title></html>")
    );
    assert!(!response.truncated);
    assert!(response.is_html());
    assert_eq!(response.url.as_str(), url);
    assert_eq!(response.request.url, url);
    assert_eq!(server.hits("/a"), 1);
    assert_eq!(server.hits("/a?b=1"), 1);
}

#[tokio::test]
async fn not_found_is_a_response() {
    let server = serve(TestResponse::not_found());
    let response = get(&fetcher(), &server.url("/missing")).await.unwrap();
    assert_eq!(response.status, 404);
    assert_eq!(response.body, Bytes::from_static(b"not found"));
    assert!(!response.is_success());
}

#[tokio::test]
async fn redirect_is_returned_with_its_location() {
    let server = serve(TestResponse::redirect(301, "/elsewhere"));
    let response = get(&fetcher(), &server.url("/old")).await.unwrap();
    assert_eq!(response.status, 301);
    assert_eq!(response.headers["location"], "/elsewhere");
    assert_eq!(
        server.hits("/elsewhere"),
        0,
        "the fetcher must not follow redirects"
    );
}

#[tokio::test]
async fn encoded_bodies_are_decoded() {
    let html = sample_html();
    let cases = [
        ("gzip", gzip(&html).await),
        ("x-gzip", gzip(&html).await),
        ("br", brotli(&html).await),
        ("deflate", zlib(&html).await),
        ("deflate", raw_deflate(&html).await),
    ];
    let fetcher = fetcher();
    for (encoding, encoded) in cases {
        assert!(encoded.len() < html.len() / 4, "{encoding} should compress");
        let server = serve(TestResponse::html(encoded).header("Content-Encoding", encoding));
        let response = get(&fetcher, &server.url("/")).await.unwrap();
        assert_eq!(response.body.len(), html.len(), "{encoding}");
        assert!(response.body == html, "{encoding} decoded differently");
        assert!(!response.truncated);
    }
}

#[tokio::test]
async fn chunked_encoded_body_is_decoded() {
    let html = sample_html();
    let encoded = gzip(&html).await;
    let mode = BodyMode::Chunked {
        size: 100,
        pause: Duration::ZERO,
    };
    let server = serve(
        TestResponse::html(encoded)
            .header("Content-Encoding", "gzip")
            .mode(mode),
    );
    let response = get(&fetcher(), &server.url("/")).await.unwrap();
    assert!(response.body == html);
}

#[tokio::test]
async fn unknown_encoding_keeps_the_raw_bytes() {
    let server = serve(TestResponse::ok("\u{1}\u{2}opaque").header("Content-Encoding", "zstd"));
    let response = get(&fetcher(), &server.url("/")).await.unwrap();
    assert_eq!(response.body, Bytes::from_static(b"\x01\x02opaque"));
}

#[tokio::test]
async fn corrupt_gzip_is_a_decode_error() {
    let server =
        serve(TestResponse::ok("this is not gzip at all").header("Content-Encoding", "gzip"));
    let error = get(&fetcher(), &server.url("/")).await.unwrap_err();
    assert!(matches!(error, FetchError::Decode { .. }), "{error:?}");
    assert!(!error.is_retryable());
}

/// 1 GiB of zeros as one gzip member (about 1 MiB), made by streaming zeros
/// through the encoder so the test never holds the decoded gigabyte.
async fn gzip_bomb() -> Vec<u8> {
    let mut encoder = GzipEncoder::with_quality(Vec::new(), Level::Best);
    let zeros = vec![0u8; MIB];
    for _ in 0..1024 {
        encoder.write_all(&zeros).await.unwrap();
    }
    encoder.shutdown().await.unwrap();
    encoder.into_inner()
}

/// The decoder reads through `take(limit + 1)`, so memory stays near the limit
/// by construction; the test checks the cut and that it came back at all.
#[tokio::test]
async fn gzip_bomb_is_cut_at_the_limit() {
    let bomb = gzip_bomb().await;
    assert!(bomb.len() < 4 * MIB, "bomb is {} bytes", bomb.len());
    let server = serve(TestResponse::html(bomb.clone()).header("Content-Encoding", "gzip"));
    let fetcher = Fetcher::new(FetchSettings {
        max_body_bytes: 10 * MIB,
        ..settings()
    })
    .unwrap();
    let response = get(&fetcher, &server.url("/bomb")).await.unwrap();
    assert!(response.truncated);
    assert_eq!(response.body.len(), 10 * MIB);
    assert!(response.body.iter().all(|&b| b == 0));
}

#[tokio::test]
async fn identity_body_over_the_limit_is_truncated() {
    let fetcher = Fetcher::new(FetchSettings {
        max_body_bytes: 1000,
        ..settings()
    })
    .unwrap();
    let body = vec![b'x'; 5000];
    for mode in [
        BodyMode::Full,
        BodyMode::Chunked {
            size: 300,
            pause: Duration::ZERO,
        },
    ] {
        let server = serve(TestResponse::ok(body.clone()).mode(mode.clone()));
        let response = get(&fetcher, &server.url("/")).await.unwrap();
        assert!(response.truncated, "{mode:?}");
        assert_eq!(response.body.len(), 1000, "{mode:?}");
    }
    let server = serve(TestResponse::ok(vec![b'y'; 1000]).mode(BodyMode::Chunked {
        size: 100,
        pause: Duration::ZERO,
    }));
    let response = get(&fetcher, &server.url("/")).await.unwrap();
    assert!(!response.truncated, "a body of exactly the limit is whole");
    assert_eq!(response.body.len(), 1000);
}

#[tokio::test]
async fn stall_after_headers_is_a_read_timeout() {
    let server = serve(TestResponse::html("<html>partial").mode(BodyMode::Stall));
    let short = Duration::from_millis(300);
    let fetcher = Fetcher::new(FetchSettings {
        read_timeout: short,
        ..settings()
    })
    .unwrap();
    let started = Instant::now();
    let error = get(&fetcher, &server.url("/stall")).await.unwrap_err();
    assert!(
        matches!(&error, FetchError::ReadTimeout { after, .. } if *after == short),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "bounded by the read timeout, not the server"
    );
}

#[tokio::test]
async fn slow_headers_hit_the_request_timeout() {
    let server = serve(TestResponse::ok("late").delay(Duration::from_secs(5)));
    let limit = Duration::from_millis(300);
    let fetcher = Fetcher::new(FetchSettings {
        request_timeout: limit,
        ..settings()
    })
    .unwrap();
    let error = get(&fetcher, &server.url("/slow")).await.unwrap_err();
    assert!(
        matches!(&error, FetchError::Timeout { after, .. } if *after == limit),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert_eq!(error.url(), server.url("/slow"));
}

/// `legcrawl fetch ARGS` on the real binary, at most a minute.
fn fetch_command(args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(cli::bin());
    cmd.arg("fetch").args(args).env("RUST_LOG", "error");
    cli::run(cmd, Duration::from_secs(60))
}

#[test]
fn cli_timeouts_take_units_or_seconds_and_refuse_zero() {
    let server = TestServer::start(handler(|request| match request.path() {
        "/slow" => TestResponse::ok("late").delay(Duration::from_secs(5)),
        _ => TestResponse::html("<title>fast</title>"),
    }));
    let fast = server.url("/fast");
    let accepted = [
        ["--timeout", "500ms"],
        ["--timeout", "2"],
        ["--read-timeout", "1m30s"],
        ["--read-timeout", "0.5"],
    ];
    for [flag, value] in accepted {
        let out = fetch_command(&[flag, value, "--ignore-robots", &fast]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{flag} {value}: {err}");
        assert_eq!(out.stdout, b"<title>fast</title>", "{flag} {value}");
    }
    assert_eq!(server.hits("/fast"), accepted.len() as u64);

    // 500ms is half a second: the slow page's headers (5 s away) are not waited for.
    let started = Instant::now();
    let out = fetch_command(&[
        "--timeout",
        "500ms",
        "--ignore-robots",
        &server.url("/slow"),
    ]);
    let elapsed = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        elapsed < Duration::from_secs(4),
        "waited {elapsed:?}: {err}"
    );

    // Zero or not a duration: one line naming the flag, exit 2, nothing fetched.
    for flag in ["--timeout", "--read-timeout"] {
        for (value, says) in [
            ("0", "must be more than 0"),
            ("0ms", "must be more than 0"),
            ("0.0", "must be more than 0"),
            ("soon", "expected a duration such as"),
            ("5 sec", "expected a duration such as"),
        ] {
            let out = fetch_command(&[flag, value, "--ignore-robots", &fast]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{flag} {value}: {err}");
            assert!(
                err.starts_with(&format!("legcrawl: {flag}: {says}")),
                "{flag} {value}: {err}"
            );
        }
    }
    assert_eq!(
        server.hits("/fast"),
        accepted.len() as u64,
        "refused before fetching"
    );
}

#[tokio::test]
async fn lying_content_length_is_a_length_mismatch() {
    let server = serve(
        TestResponse::ok("only twenty bytes!!!").mode(BodyMode::LyingLength { declared: 100 }),
    );
    let error = get(&fetcher(), &server.url("/short")).await.unwrap_err();
    match error {
        FetchError::LengthMismatch { expected, got, .. } => {
            assert_eq!(expected, 100);
            assert!(got <= 20, "got {got}");
        }
        other => panic!("expected LengthMismatch, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_urls_are_refused_before_any_connection() {
    let fetcher = Fetcher::new(FetchSettings {
        max_url_len: 100,
        ..settings()
    })
    .unwrap();
    let error = get(&fetcher, "ftp://127.0.0.1/file").await.unwrap_err();
    assert!(
        matches!(&error, FetchError::UnsupportedScheme { scheme, .. } if scheme == "ftp"),
        "{error:?}"
    );
    let error = get(&fetcher, "http://").await.unwrap_err();
    assert!(matches!(error, FetchError::InvalidUrl { .. }), "{error:?}");
    let long = format!("http://127.0.0.1/{}", "a".repeat(200));
    let error = get(&fetcher, &long).await.unwrap_err();
    assert!(
        matches!(error, FetchError::UrlTooLong { len, .. } if len == long.len()),
        "{error:?}"
    );
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn refused_connection_is_a_retryable_connect_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let error = get(&fetcher(), &url).await.unwrap_err();
    assert!(matches!(error, FetchError::Connect { .. }), "{error:?}");
    assert!(error.is_retryable());
    assert_eq!(error.url(), url);
}

/// A handler that records each request it sees.
fn recording(seen: &Arc<Mutex<Vec<TestRequest>>>, response: TestResponse) -> TestServer {
    let seen = Arc::clone(seen);
    TestServer::start(handler(move |request| {
        seen.lock().unwrap().push(request.clone());
        response.clone()
    }))
}

#[tokio::test]
async fn request_headers_reach_the_server() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = recording(&seen, TestResponse::ok("ok"));
    let fetcher = Fetcher::new(FetchSettings {
        user_agent: "testbot/1.0".into(),
        from: Some("ops@example.org".into()),
        extra_headers: vec![
            ("X-Crawl".into(), "nightly".into()),
            ("Accept-Language".into(), "fr".into()),
        ],
        ..settings()
    })
    .unwrap();
    let mut request = Request::get(server.url("/h"));
    request.headers.push(("Accept".into(), "text/plain".into()));
    fetcher.fetch(&request).await.unwrap();
    let seen = seen.lock().unwrap();
    let request = &seen[0];
    assert_eq!(request.header("user-agent"), Some("testbot/1.0"));
    assert_eq!(request.header("from"), Some("ops@example.org"));
    assert_eq!(request.header("accept-encoding"), Some("gzip, br, deflate"));
    assert_eq!(request.header("x-crawl"), Some("nightly"));
    assert_eq!(
        request.header("accept-language"),
        Some("fr"),
        "extra headers replace defaults"
    );
    assert_eq!(
        request.header("accept"),
        Some("text/plain"),
        "request headers replace defaults"
    );
    assert_eq!(request.headers.get_all("accept").iter().count(), 1);
    assert_eq!(request.host, server.addr().to_string());
}

#[tokio::test]
async fn method_and_body_are_sent() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = recording(&seen, TestResponse::ok("done"));
    let mut request = Request::get(server.url("/form"));
    request.method = "POST".into();
    request.body = b"a=1&b=2".to_vec();
    request.headers.push((
        "Content-Type".into(),
        "application/x-www-form-urlencoded".into(),
    ));
    let response = fetcher().fetch(&request).await.unwrap();
    assert_eq!(response.status, 200);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].body, Bytes::from_static(b"a=1&b=2"));
}

#[tokio::test]
async fn head_and_no_content_have_empty_bodies() {
    let server = TestServer::start(handler(|request| match request.path() {
        "/empty" => TestResponse::status(204),
        _ => TestResponse::ok("a body a HEAD must not read"),
    }));
    let fetcher = fetcher();
    let mut head = Request::get(server.url("/page"));
    head.method = "HEAD".into();
    let response = fetcher.fetch(&head).await.unwrap();
    assert_eq!(response.status, 200);
    assert!(response.body.is_empty());
    let response = get(&fetcher, &server.url("/empty")).await.unwrap();
    assert_eq!(response.status, 204);
    assert!(response.body.is_empty());
}

#[tokio::test]
async fn connections_are_reused() {
    let server = serve(TestResponse::html("<html>small</html>"));
    let fetcher = fetcher();
    for i in 0..20 {
        get(&fetcher, &server.url(&format!("/r/{i}")))
            .await
            .unwrap();
    }
    assert_eq!(server.requests(), 20);
    assert!(
        server.connections() < 10,
        "{} connections for 20 sequential requests",
        server.connections()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_fetches_of_a_site() {
    let site = Site::generate(100, 3);
    let server = TestServer::start(site.handler());
    let fetcher = fetcher();
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let fetcher = fetcher.clone();
            let url = server.url(&format!("/p/{i}.html"));
            tokio::spawn(async move { get(&fetcher, &url).await.map(|response| response.body) })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let body = task.await.unwrap().unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(text.contains(&format!("<title>Page {i}</title>")));
    }
    assert_eq!(server.requests(), 100);
    assert!(server.max_in_flight() >= 1);
    assert!(server.bytes_sent() > 0);
}

/// Throughput figures, not assertions: run with
/// `cargo test --release --test it fetch::throughput -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark; prints pages/s"]
fn throughput() {
    let site = Site::generate(1000, 1);
    let server = TestServer::start(site.handler());
    let urls: Arc<Vec<String>> = Arc::new(
        (0..1000)
            .map(|i| server.url(&format!("/p/{i}.html")))
            .collect(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for concurrency in [16, 32, 64] {
        let fetcher = Fetcher::new(FetchSettings {
            pool_idle_per_host: concurrency,
            ..settings()
        })
        .unwrap();
        let total = 100_000;
        let started = Instant::now();
        let bytes = runtime.block_on(fetch_many(&fetcher, &urls, total, concurrency));
        let elapsed = started.elapsed();
        println!(
            "{total} pages ({bytes} bytes) in {elapsed:.2?} with {concurrency} in flight: {:.0} pages/s",
            total as f64 / elapsed.as_secs_f64()
        );
    }
    println!(
        "server: {} connections, {} requests",
        server.connections(),
        server.requests()
    );
}

/// Fetches `total` URLs from `urls` round-robin with `concurrency` tasks; returns body bytes.
async fn fetch_many(
    fetcher: &Fetcher,
    urls: &Arc<Vec<String>>,
    total: usize,
    concurrency: usize,
) -> usize {
    let tasks: Vec<_> = (0..concurrency)
        .map(|worker| {
            let (fetcher, urls) = (fetcher.clone(), Arc::clone(urls));
            tokio::spawn(async move {
                let mut bytes = 0;
                for n in (worker..total).step_by(concurrency) {
                    bytes += get(&fetcher, &urls[n % urls.len()])
                        .await
                        .unwrap()
                        .body
                        .len();
                }
                bytes
            })
        })
        .collect();
    let mut bytes = 0;
    for task in tasks {
        bytes += task.await.unwrap();
    }
    bytes
}
