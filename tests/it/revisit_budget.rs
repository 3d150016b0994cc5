//! A revisit budget (`--revisit-budget N`) through the binary, both modes: a
//! day after the first crawl, the next cycle asks exactly N of the stored
//! pages, none twice, and the ones worth most (here, where every page has
//! the same history, the ones fetched longest ago). In the embedded state the
//! cycle start is aborted at crash point `cycle.budget` (before its first and
//! its second chunk is committed) and resumed: the resume queues the rest of
//! the same choice, not a new one. In shared mode two workers start together:
//! one starts the cycle, and the other either loses that race or joins the
//! cycle and sends its own choice, which the cycle script caps
//! (`shared_cycle::a_cycle_queues_at_most_its_budget_whatever_the_workers_send`
//! tests the cap itself).

use std::collections::BTreeMap;
use std::time::Duration;

use legcrawl::crash::CRASH_AT_ENV;
use legcrawl::store::BUDGET_CHUNK;

use crate::support::cli;
use crate::support::mode::{Crawler, Mode};
use crate::support::{TestResponse, TestServer, handler};

/// Pages below the seed: more than one chunk of the budget's.
const PAGES: usize = 400;
const BUDGET: usize = 300;
const DAY: u64 = 86_400;
// The budget takes two chunks, and leaves pages out.
const _: () = assert!(BUDGET > BUDGET_CHUNK && PAGES > BUDGET);

fn site() -> TestServer {
    TestServer::start(handler(|request| match request.path() {
        "/" => {
            let links: String = (0..PAGES)
                .map(|n| format!("<a href=/p/{n}>{n}</a> "))
                .collect();
            TestResponse::html(format!("<title>index</title>{links}"))
        }
        path if path.starts_with("/p/") => {
            // Fetches spread over a few seconds, so that pages differ in age.
            std::thread::sleep(Duration::from_millis(4));
            TestResponse::html(format!("<title>{path}</title><p>The same every day.</p>"))
        }
        _ => TestResponse::not_found(),
    }))
}

/// `crawl SEED --revisit-budget BUDGET`, a day on.
fn next_day(crawler: &Crawler, seed: &str) -> std::process::Command {
    let budget = BUDGET.to_string();
    let mut command = crawler.command(&[seed, "--revisit-budget", &budget]);
    command.env("LEGCRAWL_CLOCK_OFFSET", DAY.to_string());
    command
}

/// The last fetch time of each `/p/` page, from `dump pages --json`.
fn fetched_at(crawler: &Crawler, server: &TestServer) -> BTreeMap<String, u64> {
    let pages = String::from_utf8_lossy(&crawler.dump(&["pages", "--json"])).into_owned();
    let root = server.url("/");
    pages
        .lines()
        .filter_map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).expect("JSON");
            let url = record["url"].as_str()?;
            let path = format!("/{}", url.strip_prefix(&root)?);
            path.starts_with("/p/").then(|| {
                let at = record["last_fetched"].as_u64().expect("last_fetched");
                (path, at)
            })
        })
        .collect()
}

fn a_budget_asks_exactly_its_pages_worth_most(mode: Mode, crash_at: Option<u64>) {
    let Some(crawler) = Crawler::start(mode, "revisit_budget") else {
        return;
    };
    let server = site();
    let seed = server.url("/");
    let out = cli::run(crawler.command(&[seed.as_str()]), cli::LIMIT);
    cli::assert_ok(&format!("{mode:?} first crawl"), &out);
    let before = fetched_at(&crawler, &server);
    assert_eq!(before.len(), PAGES, "{mode:?}");
    let hits = |server: &TestServer| -> BTreeMap<String, u64> {
        before
            .keys()
            .map(|path| (path.clone(), server.hits(path)))
            .collect()
    };
    let first = hits(&server);
    let what = format!("{mode:?}, crash at {crash_at:?}");
    match (mode, crash_at) {
        (Mode::Embedded, Some(hit)) => {
            let point = format!("cycle.budget:{hit}");
            let mut command = next_day(&crawler, &seed);
            command.env(CRASH_AT_ENV, &point);
            let out = cli::run(command, cli::LIMIT);
            assert!(!out.status.success(), "{what}: the crash did not happen");
            assert!(
                String::from_utf8_lossy(&out.stderr).contains(&format!("crash point {point}")),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let out = cli::run(next_day(&crawler, &seed), cli::LIMIT);
            cli::assert_ok(&format!("{what}: resumed"), &out);
        }
        (Mode::Shared, _) => {
            // Two workers start together: one starts the cycle; the other
            // loses that race, or joins it and sends its own choice.
            let mut workers: Vec<_> = (0..2)
                .map(|_| {
                    next_day(&crawler, &seed)
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .expect("spawn a worker")
                })
                .collect();
            for worker in &mut workers {
                assert!(
                    cli::wait_status(worker, cli::LIMIT).success(),
                    "{what}: a worker failed"
                );
            }
        }
        _ => {
            let out = cli::run(next_day(&crawler, &seed), cli::LIMIT);
            cli::assert_ok(&what, &out);
        }
    }
    let second = hits(&server);
    let asked: Vec<&String> = before
        .keys()
        .filter(|path| second[*path] > first[*path])
        .collect();
    let twice: Vec<&String> = before
        .keys()
        .filter(|path| second[*path] > first[*path] + 1)
        .collect();
    assert!(twice.is_empty(), "{what}: asked twice: {twice:?}");
    assert_eq!(asked.len(), BUDGET, "{what}: pages asked on the next day");
    // Every page has the same history: the ones fetched longest ago are
    // worth most.
    let newest_asked = asked.iter().map(|path| before[*path]).max();
    let oldest_left = before
        .iter()
        .filter(|(path, _)| !asked.contains(path))
        .map(|(_, at)| *at)
        .min();
    assert!(
        newest_asked <= oldest_left,
        "{what}: a page fetched at {newest_asked:?} was asked before one fetched at {oldest_left:?}"
    );
    // The summary names the budget the job keeps.
    assert_eq!(crawler.summary()["revisit_budget"], BUDGET, "{what}");
    // The runs say what the cycle queued, however often it was started.
    let runs = crawler.runs();
    let due: u64 = runs
        .iter()
        .skip(1)
        .map(|run| run["counters"]["revisit/due"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(due, BUDGET as u64, "{what}: {runs:?}");
}

#[test]
fn a_budget_asks_exactly_its_pages_worth_most_in_both_modes() {
    for mode in [Mode::Embedded, Mode::Shared] {
        a_budget_asks_exactly_its_pages_worth_most(mode, None);
    }
}

#[test]
fn a_cycle_start_aborted_under_a_budget_resumes_the_same_choice() {
    for hit in [1, 2] {
        a_budget_asks_exactly_its_pages_worth_most(Mode::Embedded, Some(hit));
    }
}
