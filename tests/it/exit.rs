//! Exit 8 of `crawl` in both modes: a run in which no page answered well and
//! some request was answered with an error status (a mistyped seed's 404, a
//! site that answers only 5xx) exits 8, as wget does; a crawl with some broken
//! links beside pages that answered exits 0.

use crate::support::cli::stderr;
use crate::support::mode::{Crawler, Mode};
use crate::support::{TestResponse, TestServer, handler};

/// A site whose pages at `/ok*` answer and every other path is 404
/// (robots.txt too: no rules); `/` links to two answering pages and two
/// broken links.
fn site_with_broken_links() -> TestServer {
    TestServer::start(handler(|req| match req.path() {
        "/" => TestResponse::html(
            "<title>home</title><a href=/ok/1>1</a><a href=/ok/2>2</a>\
             <a href=/missing>missing</a><a href=/gone>gone</a>",
        ),
        p if p.starts_with("/ok/") => TestResponse::html(format!("<title>{p}</title>")),
        _ => TestResponse::not_found(),
    }))
}

/// A site whose every page answers `status` (robots.txt is 404: no rules).
fn site_answering(status: u16) -> TestServer {
    TestServer::start(handler(move |req| match req.path() {
        "/robots.txt" => TestResponse::not_found(),
        _ => TestResponse {
            status,
            ..TestResponse::html("<title>error</title><a href=/other>other</a>")
        },
    }))
}

#[test]
fn crawl_exit_eight_when_only_error_statuses_answered_embedded() {
    crawl_exit_eight_when_only_error_statuses_answered(Mode::Embedded);
}

#[test]
fn crawl_exit_eight_when_only_error_statuses_answered_shared() {
    crawl_exit_eight_when_only_error_statuses_answered(Mode::Shared);
}

fn crawl_exit_eight_when_only_error_statuses_answered(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "crawl_exit_eight") else {
        return;
    };
    // A mistyped seed: the site is there, the page is not.
    let site = site_with_broken_links();
    let typo = crawler.another("typo");
    let out = typo.crawl(&[&site.url("/okk/1")]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(8), "{mode:?}: {said}");
    assert!(said.contains("1 gone"), "{mode:?}: {said}");
    assert!(said.contains("error statuses only"), "{mode:?}: {said}");
    assert_eq!(said.trim().lines().count(), 2, "{mode:?}: {said}");
    // A server that fails every page: 500 (retried once, then failed), and
    // 501 (not retried).
    for status in [500, 501] {
        let server = site_answering(status);
        let broken = crawler.another(&format!("broken{status}"));
        let out = broken.crawl(&[&server.url("/"), "--retries", "1"]);
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(8), "{mode:?} {status}: {said}");
        assert!(said.contains("1 failed"), "{mode:?} {status}: {said}");
    }
    // Some broken links beside pages that answered: 0.
    let out = crawler.crawl(&[&site.url("/")]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{mode:?}: {said}");
    assert!(said.contains("3 new"), "{mode:?}: {said}");
    assert!(said.contains("2 gone"), "{mode:?}: {said}");
    assert!(!said.contains("error statuses only"), "{mode:?}: {said}");
}
