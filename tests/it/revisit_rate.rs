//! The estimated revisit policy (the default) through the binary, over
//! simulated nights: `LEGCRAWL_CLOCK_OFFSET` moves each night's run a day on.
//! A page that never changes is asked ever less often; a page that changes
//! every night is asked every night once its changes are known; a page the
//! server says stays fresh for ten days (`Cache-Control: max-age`) is not
//! asked before. Both modes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::support::cli;
use crate::support::mode::{Crawler, Mode};
use crate::support::{TestResponse, TestServer, handler};

/// Simulated nights.
const NIGHTS: u64 = 14;

#[test]
fn a_stable_page_is_asked_less_and_less_and_a_daily_page_every_night() {
    let night = Arc::new(AtomicU64::new(0));
    let today = Arc::clone(&night);
    let server = TestServer::start(handler(move |request| match request.path() {
        "/" => TestResponse::html(
            "<title>index</title><a href=/stable>stable</a> <a href=/daily>daily</a> \
             <a href=/cached>cached</a>",
        ),
        "/cached" => TestResponse::html(format!(
            "<title>cached</title><p>Version of night {}.</p>",
            today.load(Ordering::SeqCst)
        ))
        .header("Cache-Control", "public, max-age=864000"),
        "/stable" => TestResponse::html("<title>stable</title><p>The same every night.</p>"),
        "/daily" => TestResponse::html(format!(
            "<title>daily</title><p>News of night {}.</p>",
            today.load(Ordering::SeqCst)
        )),
        _ => TestResponse::not_found(),
    }));
    let seed = server.url("/");
    for mode in [Mode::Embedded, Mode::Shared] {
        let Some(crawler) = Crawler::start(mode, "revisit_rate") else {
            return;
        };
        let (mut stable, mut daily, mut cached) = (Vec::new(), Vec::new(), Vec::new());
        for n in 0..NIGHTS {
            night.store(n, Ordering::SeqCst);
            let before = (
                server.hits("/stable"),
                server.hits("/daily"),
                server.hits("/cached"),
            );
            let mut command = crawler.command(&[seed.as_str()]);
            command.env("LEGCRAWL_CLOCK_OFFSET", (n * 86_400).to_string());
            let out = cli::run(command, cli::LIMIT);
            cli::assert_ok(&format!("{mode:?} night {n}"), &out);
            if server.hits("/stable") > before.0 {
                stable.push(n);
            }
            if server.hits("/daily") > before.1 {
                daily.push(n);
            }
            if server.hits("/cached") > before.2 {
                cached.push(n);
            }
        }
        // It changes every night, but its server says it stays fresh for ten
        // days: asked on nights 0 and 10 only.
        assert_eq!(
            cached,
            [0, 10],
            "{mode:?}: the cached page was asked on {cached:?}"
        );
        // Each run makes one request a page at most.
        let gaps: Vec<u64> = stable.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(
            stable.first(),
            Some(&0),
            "{mode:?}: stable asked on {stable:?}"
        );
        assert!(
            gaps.windows(2).all(|w| w[1] >= w[0]) && gaps.last() > gaps.first(),
            "{mode:?}: the stable page's gaps should grow: asked on nights {stable:?}"
        );
        assert!(
            stable.len() <= 5,
            "{mode:?}: the stable page was asked {} times in {NIGHTS} nights: {stable:?}",
            stable.len()
        );
        let learnt: Vec<u64> = (4..NIGHTS).collect();
        assert!(
            learnt.iter().all(|n| daily.contains(n)),
            "{mode:?}: the daily page should be asked every night from night 4: {daily:?}"
        );
        // dump pages says why, with the estimated rate.
        let pages = String::from_utf8_lossy(&crawler.dump(&["pages", "--json"])).into_owned();
        let why = |path: &str| -> (String, f64) {
            let line = pages
                .lines()
                .find(|line| line.contains(&format!("\"url\":\"{}\"", server.url(path))))
                .unwrap_or_else(|| panic!("{mode:?}: no record of {path} in {pages}"));
            let record: serde_json::Value = serde_json::from_str(line).expect("JSON");
            (
                record["due_why"].as_str().unwrap_or_default().to_owned(),
                record["change_rate"].as_f64().unwrap_or(-1.0),
            )
        };
        let (stable_why, stable_rate) = why("/stable");
        let (daily_why, daily_rate) = why("/daily");
        let (cached_why, _) = why("/cached");
        assert!(
            cached_why.starts_with("fresh for 10d by the server's Cache-Control"),
            "{mode:?}: {cached_why:?}"
        );
        assert!(
            stable_why.starts_with("estimated") && daily_why.starts_with("estimated"),
            "{mode:?}: {stable_why:?} / {daily_why:?}"
        );
        assert!(
            stable_rate < 0.1 && daily_rate >= 1.0,
            "{mode:?}: estimated rates: stable {stable_rate}, daily {daily_rate} a day"
        );
        assert!(daily_why.ends_with("every 1d"), "{mode:?}: {daily_why}");
        // Read at the real time, days before the simulated fetches, nothing
        // is due yet.
        assert_eq!(crawler.summary()["due_now"], 0, "{mode:?}");
    }
}
