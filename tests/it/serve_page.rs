//! `legcrawl serve`'s page after a crawl, for a state directory and a shared
//! crawl: the first paint (drawn on the server) writes times as RFC 3339, the
//! runs table has a column for every outcome and they add up to the pages,
//! and in a browser the runs chart has axes and a bar for a small count.

use legcrawl::clock::rfc3339_secs;
use serde_json::Value;

use crate::support::mode::{Crawler, Mode};
use crate::support::serve::{LIMIT, Serve, browser_dom, wait_for};
use crate::support::{TestResponse, TestServer, handler};

/// A site of three pages, one of them a link to a page that is not there.
fn site_with_a_gone_page() -> TestServer {
    TestServer::start(handler(|request| match request.path() {
        "/" => TestResponse::html(
            "<html><head><title>home</title></head><body>\
             <a href='/a'>a</a> <a href='/b'>b</a> <a href='/missing'>m</a></body></html>",
        ),
        "/a" | "/b" => {
            TestResponse::html("<html><head><title>page</title></head><body>x</body></html>")
        }
        _ => TestResponse::not_found(),
    }))
}

fn count(pages: &Value, name: &str) -> u64 {
    pages[name].as_u64().unwrap_or(0)
}

#[test]
fn the_first_paint_adds_up_and_shows_readable_times_embedded() {
    the_first_paint_adds_up_and_shows_readable_times(Mode::Embedded);
}

#[test]
fn the_first_paint_adds_up_and_shows_readable_times_shared() {
    the_first_paint_adds_up_and_shows_readable_times(Mode::Shared);
}

fn the_first_paint_adds_up_and_shows_readable_times(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "serve_page") else {
        return;
    };
    let site = site_with_a_gone_page();
    let serve = Serve::of(&crawler);
    crawler.crawl_ok(&[&site.url("/")]);
    wait_for(LIMIT, "the run and its error to show", || {
        let runs = serve.get("/api/runs").json();
        let errors = serve.get("/api/errors").json();
        runs["runs"].as_array().is_some_and(|r| r.len() == 1)
            && runs["runs"][0]["outcome"] != "running"
            && errors["errors"].as_array().is_some_and(|e| !e.is_empty())
    });
    let run = serve.get("/api/runs").json()["runs"][0].clone();
    let pages = &run["pages"];
    assert!(count(pages, "gone") >= 1, "{mode:?}: {run}");
    let named = ["new", "changed", "unchanged", "gone", "failed", "blocked"];
    let sum: u64 = named.iter().map(|n| count(pages, n)).sum();
    let rest = count(pages, "pages") - sum;
    let page = serve.get("/").body;
    let head: String = [
        "pages",
        "new",
        "changed",
        "unchanged",
        "gone",
        "failed",
        "blocked",
    ]
    .iter()
    .chain(&["out of scope", "items"])
    .map(|h| format!("<th>{h}</th>"))
    .collect();
    assert!(
        page.contains(&head),
        "{mode:?}: the runs table's head in {page}"
    );
    let cells: String = std::iter::once(count(pages, "pages"))
        .chain(named.iter().map(|n| count(pages, n)))
        .chain([rest, run["items"].as_u64().unwrap_or(0)])
        .map(|n| format!("<td>{n}</td>"))
        .collect();
    assert!(
        page.contains(&cells),
        "{mode:?}: the run's row {cells} in {page}"
    );
    // Times as RFC 3339, never Unix seconds.
    let started = run["started_at"].as_u64().unwrap_or(0);
    let error_at = serve.get("/api/errors").json()["errors"][0]["at"]
        .as_u64()
        .unwrap_or(0);
    for secs in [started, error_at] {
        assert!(secs > 0, "{mode:?}");
        assert!(
            page.contains(&format!("<td>{}</td>", rfc3339_secs(secs))),
            "{mode:?}: {page}"
        );
        assert!(
            !page.contains(&secs.to_string()),
            "{mode:?}: raw Unix seconds in {page}"
        );
    }
    // In a browser: the runs chart has axes with labels and a bar for the gone page.
    if mode == Mode::Embedded
        && let Some(dom) = browser_dom(&serve, "#runs")
    {
        for label in [
            ">pages (log scale)<",
            ">run<",
            "class=\"bar gone\"",
            "class=\"axis-line\"",
        ] {
            assert!(dom.contains(label), "{label} in the runs chart: {dom}");
        }
        assert!(
            dom.contains(&format!("<td>{}</td>", rfc3339_secs(started))),
            "{dom}"
        );
    }
    assert_eq!(serve.stop(), Some(0));
}
