//! `--jitter`, from one test body in both modes (the embedded state and a
//! shared crawl in a real `redis-server`): each gap between two requests to a
//! host is the delay times a factor in [0.5, 1.5), as the server sees it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::cli::{legcrawl, run};
use crate::support::redis::RedisServer;
use crate::support::workers::{Crawl, serial};
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);

/// Pages after the first: 20 gaps between 21 requests.
const PAGES: usize = 20;

#[derive(Clone, Copy, Debug)]
enum Mode {
    Embedded,
    Shared,
}

#[test]
fn jitter_varies_the_delay_between_half_and_one_and_a_half_embedded() {
    jitter_varies_the_delay(Mode::Embedded);
}

#[test]
fn jitter_varies_the_delay_between_half_and_one_and_a_half_shared() {
    jitter_varies_the_delay(Mode::Shared);
}

fn jitter_varies_the_delay(mode: Mode) {
    let _serial = serial();
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = Arc::clone(&arrivals);
    let server = TestServer::start(handler(move |req| {
        if req.path() == "/robots.txt" {
            return TestResponse::not_found();
        }
        seen.lock().unwrap().push(Instant::now());
        let body = match req.path() {
            "/" => (0..PAGES)
                .map(|i| format!("<a href=/p/{i}>x</a>"))
                .collect::<String>(),
            _ => String::new(),
        };
        TestResponse::html(body)
    }));
    let seed = server.url("/");
    let args = [
        seed.as_str(),
        "--per-host",
        "1",
        "--delay",
        "0.1",
        "--jitter",
    ];
    let data = tempfile::tempdir().unwrap();
    let (redis, crawl);
    let command = match mode {
        Mode::Embedded => {
            let mut all = vec!["crawl", "--bloom-bits", "20"];
            all.extend_from_slice(&args);
            legcrawl(data.path(), &all)
        }
        Mode::Shared => {
            redis = RedisServer::start("jitter");
            let Some(redis) = &redis else {
                return;
            };
            crawl = Crawl::new(&redis.url(), "jitter");
            crawl.crawl_command(&args)
        }
    };
    let out = run(command, LIMIT);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{mode:?} crawl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let times = arrivals.lock().unwrap().clone();
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
