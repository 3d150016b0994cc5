//! Issue 27, "Archives that replay": `--page-requisites` (wget's `-p`). A page's
//! stylesheets, scripts, images (`srcset`, `<picture>`) and icons, and the
//! `url()`s and `@import`s of its stylesheets, are fetched whatever the depth,
//! deny rules, `--no-parent` and host scope say, make no items, and are stored
//! with the job; links at the depth limit are still not followed, and a
//! requisite's HTML is not read.

use std::time::Duration;

use crate::support::cli::{dump_items, item_path, legcrawl, run, stderr};
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);

/// The page's HTML; `cdn` is the other host's origin.
fn page(cdn: &str) -> String {
    format!(
        r#"<!doctype html><html><head><title>docs</title>
        <link rel="stylesheet" href="site.css"><link rel="icon" href="/favicon.ico">
        <script src="/js/app.js"></script></head><body>
        <img src="img/a.png" srcset="img/a2.png 2x, img/a3.png 3x">
        <picture><source srcset="img/p.webp"><img src="img/p.png"></picture>
        <img src="{cdn}/cdn.png"><img src="/private/denied.png"><img src="odd">
        <a href="next.html">next</a></body></html>"#
    )
}

fn css(path: &str) -> TestResponse {
    let body = match path {
        "/docs/site.css" => {
            "@import \"more.css\";\n/* url(commented.png) */\n\
             body { background: url( 'img/bg.png' ) }\n\
             .x { background: url(data:image/png;base64,AAAA) }"
        }
        _ => "@font-face { font-family: f; src: url(/fonts/f.woff2) format(\"woff2\") }",
    };
    TestResponse::ok(body).header("content-type", "text/css")
}

#[test]
fn page_requisites_are_fetched_whatever_depth_and_scope_say_and_make_no_items() {
    let cdn = TestServer::start_on(
        "127.0.0.2",
        handler(|req| match req.path() {
            "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\n"),
            _ => TestResponse::ok(&b"\x89PNG cdn"[..]).header("content-type", "image/png"),
        }),
    );
    let cdn_origin = cdn.url("").trim_end_matches('/').to_owned();
    let html = page(&cdn_origin);
    let server = TestServer::start(handler(move |req| match req.path() {
        "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\n"),
        "/docs/" => TestResponse::html(html.clone()),
        "/docs/site.css" | "/docs/more.css" => css(req.path()),
        // Served as HTML: a requisite's HTML is archived, not read.
        "/docs/odd" => TestResponse::html("<img src=/docs/never.png><a href=/docs/never.html>"),
        "/js/app.js" => {
            TestResponse::ok("console.log(1)").header("content-type", "text/javascript")
        }
        _ => TestResponse::ok(&b"\x89PNG"[..]).header("content-type", "image/png"),
    }));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let seed = server.url("/docs/");
    let out = run(
        legcrawl(
            &data,
            &[
                "crawl",
                &seed,
                "--page-requisites",
                "--max-depth",
                "0",
                "--no-parent",
                "--deny",
                "private",
            ],
        ),
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    for path in [
        "/docs/site.css",
        "/docs/more.css",
        "/docs/img/bg.png",
        "/fonts/f.woff2",
        "/favicon.ico",
        "/js/app.js",
        "/docs/img/a.png",
        "/docs/img/a2.png",
        "/docs/img/a3.png",
        "/docs/img/p.webp",
        "/docs/img/p.png",
        "/private/denied.png",
        "/docs/odd",
    ] {
        assert_eq!(server.hits(path), 1, "{path} fetched once");
    }
    assert_eq!(cdn.hits("/cdn.png"), 1, "the other host's image");
    assert_eq!(cdn.hits("/robots.txt"), 1, "the other host's robots.txt");
    for path in [
        "/docs/next.html",
        "/docs/never.png",
        "/docs/never.html",
        "/commented.png",
    ] {
        assert_eq!(server.hits(path), 0, "{path} not fetched");
    }
    let paths: Vec<String> = dump_items(&data).iter().map(item_path).collect();
    assert_eq!(paths, ["/docs/"], "requisites make no items");
    let job = run(legcrawl(&data, &["dump", "job"]), LIMIT);
    let text = String::from_utf8_lossy(&job.stdout).into_owned();
    assert!(text.contains("page_requisites = true"), "{text}");
}
