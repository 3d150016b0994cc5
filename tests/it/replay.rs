//! Issue 27, "Revisits replay": a crawl with `--warc --page-requisites`, then
//! an incremental run whose every answer is a 304, both runs' WARCs in one
//! pywb collection: the newest capture of the page (pywb's default, a
//! `server-not-modified` revisit) replays the original page, and so do its
//! stylesheet and image, byte for byte. The same for a site without
//! validators, whose unchanged answers become `identical-payload-digest`
//! revisits (the 200 head, the original's payload).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::support::cli::{legcrawl, run};
use crate::support::pywb::{self, Wayback};
use crate::support::warc;
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);

const PAGE: &str = "<!doctype html><html><head><title>Replayed</title>\
    <link rel=stylesheet href=/site.css></head><body><h1>The original page</h1>\
    <img src=/logo.png></body></html>";
const CSS: &str = "body { background: url(/bg.png) } h1 { color: #333 }";
const LOGO: &[u8] = b"\x89PNG\r\n\x1a\nlogo bytes";
const BG: &[u8] = b"\x89PNG\r\n\x1a\nbackground bytes";

/// The site: with `etags`, every resource has an ETag and answers a matching
/// `If-None-Match` with a 304 that repeats it (RFC 9110); 304s are counted.
/// Without, every answer is a 200 with the same bytes.
fn site(not_modified: Arc<AtomicU64>, etags: bool) -> TestServer {
    TestServer::start(handler(move |req| {
        let (body, kind): (&[u8], &str) = match req.path() {
            "/robots.txt" => (b"User-agent: *\nAllow: /\n", "text/plain"),
            "/" => (PAGE.as_bytes(), "text/html; charset=utf-8"),
            "/site.css" => (CSS.as_bytes(), "text/css"),
            "/logo.png" => (LOGO, "image/png"),
            "/bg.png" => (BG, "image/png"),
            _ => return TestResponse::not_found(),
        };
        let etag = format!("\"v1{}\"", req.path());
        if !etags {
            return TestResponse::ok(body).header("Content-Type", kind);
        }
        if req.header("if-none-match") == Some(etag.as_str()) {
            not_modified.fetch_add(1, Ordering::SeqCst);
            return TestResponse::status(304).header("ETag", &etag);
        }
        TestResponse::ok(body)
            .header("Content-Type", kind)
            .header("ETag", &etag)
    }))
}

#[test]
fn revisits_replay_the_original_page_and_its_requisites_in_pywb() {
    replay(true);
}

#[test]
fn identical_payload_revisits_replay_the_original_too() {
    replay(false);
}

/// Two runs, then each resource's newest capture replayed (see the module doc).
fn replay(etags: bool) {
    let Some(bin) = pywb::bin_dir() else {
        return;
    };
    let not_modified = Arc::new(AtomicU64::new(0));
    let server = site(Arc::clone(&not_modified), etags);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let warcs = dir.path().join("warc");
    let seed = server.url("/");
    let args = [
        "crawl",
        seed.as_str(),
        "--warc",
        warcs.to_str().unwrap(),
        "--page-requisites",
        "--revisit-after",
        "0",
    ];
    let out = run(legcrawl(&data, &args), LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // pywb's timestamps have whole seconds: the runs' captures must differ.
    std::thread::sleep(Duration::from_millis(1100));
    let out = run(legcrawl(&data, &args), LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for path in ["/", "/site.css", "/logo.png", "/bg.png"] {
        assert_eq!(server.hits(path), 2, "{path}: once a run");
    }
    if etags {
        assert!(
            not_modified.load(Ordering::SeqCst) >= 4,
            "the second run got 304s"
        );
    }
    let records = warc::read_dir(&warcs);
    let profile = if etags {
        "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    } else {
        "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    };
    for path in ["/", "/site.css", "/logo.png", "/bg.png"] {
        let url = server.url(path);
        let revisit = records
            .iter()
            .find(|r| r.kind() == "revisit" && r.target() == url)
            .unwrap_or_else(|| panic!("{url}: no revisit record"));
        assert_eq!(revisit.field("WARC-Profile"), Some(profile), "{url}");
        if etags {
            let etag = format!("\"v1{path}\"");
            assert_eq!(revisit.field("WARC-Etag"), Some(etag.as_str()), "{url}");
        }
    }

    let root = tempfile::tempdir().unwrap();
    let wayback = Wayback::start(&bin, root.path(), &warc::files(&warcs));
    for (path, body) in [
        ("/", PAGE.as_bytes()),
        ("/site.css", CSS.as_bytes()),
        ("/logo.png", LOGO),
        ("/bg.png", BG),
    ] {
        let url = server.url(path);
        // The newest capture of the URL, as pywb's index has it, is the revisit.
        let cdx = wayback.get(&format!("/coll/cdx?url={}", pywb::query_value(&url)));
        assert_eq!(cdx.status, 200, "{url}: cdx");
        let cdx = String::from_utf8_lossy(&cdx.body).into_owned();
        let lines: Vec<&str> = cdx.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 2, "{url}: two captures\n{cdx}");
        let newest = lines[1];
        assert!(
            newest.contains("warc/revisit"),
            "{url}: newest is the revisit\n{cdx}"
        );
        let timestamp = newest.split(' ').nth(1).unwrap_or_default();
        // pywb's default (no timestamp: the newest capture), and that capture
        // named by its timestamp; `id_`: the archived bytes, not rewritten.
        for replay in [
            format!("/coll/id_/{url}"),
            format!("/coll/{timestamp}id_/{url}"),
        ] {
            let answer = wayback.get(&replay);
            assert_eq!(answer.status, 200, "{replay}: {answer:?}");
            assert!(answer.header("Memento-Datetime").is_some(), "{replay}");
            assert_eq!(
                answer.body,
                body,
                "{replay}: the original bytes, got {:?}",
                String::from_utf8_lossy(&answer.body)
            );
        }
    }
    drop(wayback);
}
