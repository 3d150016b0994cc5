//! What the shared worker lagged behind the embedded crawl in, checked from
//! one test body in both modes (the embedded state, and a shared crawl in a
//! real `redis-server`): `--jitter` as the server sees the gaps, and a
//! redirect target fetched once per cycle.

use std::time::Duration;

use crate::support::mode::{Crawler, Mode};
use crate::support::{TestResponse, TestServer, arrivals, handler, hub_site};

/// Pages after the first: 20 gaps between 21 requests.
const PAGES: usize = 20;

#[test]
fn jitter_varies_the_delay_between_half_and_one_and_a_half_embedded() {
    jitter_varies_the_delay(Mode::Embedded);
}

#[test]
fn jitter_varies_the_delay_between_half_and_one_and_a_half_shared() {
    jitter_varies_the_delay(Mode::Shared);
}

fn jitter_varies_the_delay(mode: Mode) {
    let server = hub_site(PAGES);
    let seed = server.url("/");
    let args = [
        seed.as_str(),
        "--per-host",
        "1",
        "--delay",
        "0.1",
        "--jitter",
    ];
    let Some(crawler) = Crawler::start(mode, "jitter") else {
        return;
    };
    crawler.crawl_ok(&args);
    let times = arrivals(&server);
    assert_eq!(times.len(), PAGES + 1, "{mode:?}: every page once");
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    eprintln!("{mode:?}: gaps {gaps:?}");
    // The gaps are 50 to 150 ms. A stalled server thread stamps a request
    // late, which shortens the gap after it: so the span is judged whole (at
    // least 20 half delays), and jitter by its short gaps. Without jitter no
    // gap is below the 100 ms delay; with it, each is below 90 ms with odds
    // of 0.4, so all 20 above it would happen once in 27,000 runs.
    let span = times[PAGES] - times[0];
    assert!(
        span >= Duration::from_millis(PAGES as u64 * 50 * 9 / 10),
        "{mode:?}: {} requests within {span:?} with --delay 0.1 --jitter",
        PAGES + 1
    );
    let short = gaps
        .iter()
        .filter(|gap| **gap < Duration::from_millis(90))
        .count();
    assert!(
        short > 0,
        "{mode:?}: no gap below 90 ms with --delay 0.1 --jitter: {gaps:?}"
    );
}

#[test]
fn a_redirect_target_is_fetched_once_per_cycle_embedded() {
    a_redirect_target_is_fetched_once_per_cycle(Mode::Embedded);
}

#[test]
fn a_redirect_target_is_fetched_once_per_cycle_shared() {
    a_redirect_target_is_fetched_once_per_cycle(Mode::Shared);
}

fn a_redirect_target_is_fetched_once_per_cycle(mode: Mode) {
    // The seed redirects to the real hub; a page redirects to another page.
    let server = TestServer::start(handler(|req| match req.path() {
        "/" => TestResponse::redirect(301, "/home"),
        "/home" => {
            TestResponse::html("<title>home</title><a href=\"/old\">old</a><a href=\"/a\">a</a>")
        }
        "/old" => TestResponse::redirect(301, "/new"),
        "/a" | "/new" => TestResponse::html("<title>leaf</title>"),
        _ => TestResponse::not_found(),
    }));
    let seed = server.url("/");
    let every = ["--revisit-after", "0"];
    let Some(crawler) = Crawler::start(mode, "redirect_once") else {
        return;
    };
    crawler.crawl_ok(&[seed.as_str(), every[0], every[1]]);
    for path in ["/", "/home", "/old", "/new", "/a"] {
        assert_eq!(server.hits(path), 1, "{mode:?}: {path} in the first run");
    }
    // Every page is due again; the seed's redirect to /home, due too, is
    // dropped rather than fetched a second time.
    crawler.crawl_ok(&every);
    for path in ["/", "/home", "/old", "/new", "/a"] {
        assert_eq!(server.hits(path), 2, "{mode:?}: {path} once per cycle");
    }
}
