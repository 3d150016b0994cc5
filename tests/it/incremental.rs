//! Incremental re-crawls with the real binary against a site that changes between
//! runs ([`ChangingSite`]): what a second run fetches and stores under each revisit
//! policy, conditional GET, versioned items, gone pages, per-run counters, and
//! resuming a revisit cycle after `kill -9`, SIGINT and `--max-pages`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::changing::{self, ChangingSite, Removal, Validators, page_path};
use crate::support::cli::{
    self, counter, dump_feed, dump_pages, dump_runs, item_path, legcrawl, run,
};
use crate::support::{TestServer, sorted, splitmix64};

const LIMIT: Duration = Duration::from_secs(120);
/// Flags every crawl here gets: a small Bloom filter, no robots.txt (so the
/// server's counts are the pages alone).
const BASE: [&str; 3] = ["--bloom-bits", "20", "--ignore-robots"];

/// `crawl ARGS` plus [`BASE`], not yet run.
fn crawl_cmd(data: &Path, args: &[&str]) -> std::process::Command {
    cli::crawl_command(data, &[args, &BASE].concat())
}

/// `crawl ARGS` plus [`BASE`], which must succeed.
fn crawl(data: &Path, args: &[&str]) -> Output {
    cli::crawl_ok(data, &[args, &BASE].concat())
}

/// The last run's record.
fn last_run(data: &Path) -> Value {
    dump_runs(data).pop().expect("at least one run")
}

/// Every stored item as (path, version), in store order (deletion records
/// left out).
fn versions(data: &Path) -> Vec<(String, u64)> {
    dump_feed(data)
        .iter()
        .filter(|item| item.get("deleted").is_none())
        .map(|item| {
            let version = item["version"].as_u64().expect("every item has a version");
            (item_path(item), version)
        })
        .collect()
}

/// The items stored after the first `skip`, as a sorted list of (path, version).
fn new_items(data: &Path, skip: usize) -> Vec<(String, u64)> {
    let mut items: Vec<_> = versions(data).into_iter().skip(skip).collect();
    items.sort();
    items
}

/// Page paths of `numbers`, with version `v`, sorted.
fn expect_items(numbers: &[usize], v: u64) -> Vec<(String, u64)> {
    numbers.iter().map(|&i| (page_path(i), v)).collect()
}

/// Body bytes the site sends for page `i` at revision 1 (no validators matter).
fn body_len(i: usize) -> u64 {
    changing::page_body(i, 1).len() as u64
}

/// A first, complete crawl of a fresh site; returns the server.
fn first_crawl(site: &ChangingSite, data: &Path, extra: &[&str]) -> TestServer {
    let server = site.serve();
    let seed = server.url("/");
    let mut args = vec![seed.as_str()];
    args.extend_from_slice(extra);
    crawl(data, &args);
    let first = last_run(data);
    assert_eq!(first["outcome"], "drained");
    let n = site.live().len() as u64;
    assert_eq!(counter(&first, "pages/new"), n + 1, "{first}");
    assert_eq!(counter(&first, "items/stored"), n + 1, "{first}");
    server
}

#[test]
fn unchanged_second_run_fetches_only_the_seed() {
    let site = ChangingSite::new(40);
    let data = tempfile::tempdir().unwrap();
    let server = first_crawl(&site, data.path(), &[]);
    let items = versions(data.path());
    assert_eq!(items.len(), 41);
    assert!(items.iter().all(|(_, v)| *v == 1), "first versions are 1");
    let (requests, bytes) = (server.requests(), server.bytes_sent());

    // As from cron: the same command line again, seed included.
    crawl(data.path(), &[&server.url("/")]);
    assert_eq!(server.requests(), requests + 1, "only the seed is fetched");
    assert_eq!(server.hits("/"), 2);
    assert_eq!(
        server.bytes_sent(),
        bytes,
        "the seed's ETag gets a 304: no body"
    );
    assert_eq!(site.not_modified(), 1);
    assert_eq!(
        versions(data.path()).len(),
        41,
        "no items in the second run"
    );
    let second = last_run(data.path());
    assert_eq!(second["outcome"], "drained");
    assert_eq!(counter(&second, "cycle/started"), 1);
    assert_eq!(counter(&second, "revisit/seeds"), 1);
    assert_eq!(counter(&second, "revisit/due"), 0);
    assert_eq!(counter(&second, "pages/fetched"), 1);
    assert_eq!(counter(&second, "pages/not_modified"), 1);
    assert_eq!(counter(&second, "pages/new"), 0);
    assert_eq!(counter(&second, "items/stored"), 0);
    assert_eq!(counter(&second, "fetch/bytes"), 0);
}

/// Issue 14, item 3: the policy in force at a cycle's start decides what is due.
/// A crawl under the default (adaptive, one day) policy, then `--revisit-after 0`:
/// every recorded page is asked again in that run, not only the seed; then the
/// default again (`--revisit-after adaptive`: a policy given is stored with the
/// job, so a run without the flag keeps it): nothing but the seed, as the day is
/// not over.
#[test]
fn a_new_revisit_policy_decides_what_the_next_cycle_asks() {
    let site = ChangingSite::new(30);
    let data = tempfile::tempdir().unwrap();
    let server = first_crawl(&site, data.path(), &[]);
    let requests = server.requests();

    crawl(data.path(), &["--revisit-after", "0"]);
    let second = last_run(data.path());
    assert_eq!(
        server.requests(),
        requests + 31,
        "every recorded page is asked again: {second}"
    );
    assert_eq!(
        counter(&second, "revisit/rescheduled"),
        31,
        "the seed page too: {second}"
    );
    assert_eq!(counter(&second, "revisit/due"), 30, "{second}");
    assert_eq!(counter(&second, "revisit/seeds"), 1, "{second}");
    assert_eq!(
        counter(&second, "items/stored"),
        0,
        "nothing changed: {second}"
    );

    // The same policy again: due times were already computed under it.
    let requests = server.requests();
    crawl(data.path(), &["--revisit-after", "0"]);
    assert_eq!(server.requests(), requests + 31);
    assert_eq!(counter(&last_run(data.path()), "revisit/rescheduled"), 0);

    // Back to the default: the pages are due a day after their last fetch.
    let requests = server.requests();
    crawl(data.path(), &["--revisit-after", "adaptive"]);
    let fourth = last_run(data.path());
    assert_eq!(server.requests(), requests + 1, "only the seed: {fourth}");
    assert_eq!(counter(&fourth, "revisit/rescheduled"), 31, "{fourth}");
    assert_eq!(counter(&fourth, "revisit/due"), 0, "{fourth}");
    for (path, record) in dump_pages(data.path(), false) {
        let (due, last) = (record["next_due"].as_u64(), record["last_fetched"].as_u64());
        assert!(
            due.zip(last).is_some_and(|(due, last)| due >= last + 3000),
            "{path} is due an hour or more after its last fetch: {record}"
        );
    }
}

#[test]
fn every_run_revisit_uses_304_where_validators_exist() {
    const N: usize = 40;
    let site = ChangingSite::new(N);
    let data = tempfile::tempdir().unwrap();
    let server = first_crawl(&site, data.path(), &["--revisit-after", "0"]);
    let first_bytes = server.bytes_sent();
    assert_eq!(
        counter(&last_run(data.path()), "fetch/bytes"),
        first_bytes,
        "fetch/bytes counts the bodies the server sent"
    );
    let (first_304, first_conditional) = (site.not_modified(), site.conditional());
    assert_eq!((first_304, first_conditional), (0, 0));

    crawl(data.path(), &["--revisit-after", "0"]);
    for i in 0..N {
        assert_eq!(server.hits(&page_path(i)), 2, "page {i} fetched again");
    }
    assert_eq!(server.hits("/"), 2);
    assert_eq!(versions(data.path()).len(), N + 1, "nothing stored again");
    let with = (0..N)
        .filter(|&i| changing::validators_of(i) != Validators::None)
        .count() as u64;
    let without = N as u64 - with;
    // The hub has an ETag too.
    assert_eq!(site.conditional(), with + 1, "validators were sent back");
    assert_eq!(site.not_modified(), with + 1);
    let expected_bytes: u64 = (0..N)
        .filter(|&i| changing::validators_of(i) == Validators::None)
        .map(body_len)
        .sum();
    let second_bytes = server.bytes_sent() - first_bytes;
    assert_eq!(
        second_bytes, expected_bytes,
        "only pages without validators"
    );
    assert!(
        second_bytes * 10 < first_bytes * 6,
        "{second_bytes} of {first_bytes}"
    );
    let second = last_run(data.path());
    assert_eq!(counter(&second, "pages/fetched"), N as u64 + 1);
    assert_eq!(counter(&second, "pages/not_modified"), with + 1);
    assert_eq!(counter(&second, "pages/unchanged"), without);
    assert_eq!(counter(&second, "pages/changed"), 0);
    assert_eq!(counter(&second, "items/stored"), 0);
    assert_eq!(counter(&second, "fetch/bytes"), second_bytes);
    assert_eq!(counter(&second, "revisit/due"), N as u64);
    let records = dump_pages(data.path(), false);
    assert_eq!(records.len(), N + 1);
    for (path, record) in &records {
        assert_eq!(record["fetches"], 2, "{path}: {record}");
        assert_eq!(record["version"], 1, "{path}: {record}");
        assert_eq!(record["status"], 200, "{path}: {record}");
    }
    assert!(records["/p/0.html"]["etag"].is_string());
    assert!(records["/p/2.html"]["last_modified"].is_string());
    assert!(records["/p/1.html"]["etag"].is_null());
}

#[test]
fn edits_additions_removals_emit_exactly_what_changed() {
    const N: usize = 30;
    let site = ChangingSite::new(N);
    let data = tempfile::tempdir().unwrap();
    let server = first_crawl(&site, data.path(), &["--revisit-after", "0"]);
    let stored = versions(data.path()).len();
    // Edited: ETag (4, 8), Last-Modified (2), none (1, 7).
    let edited = [1, 2, 4, 7, 8];
    for &i in &edited {
        site.edit(i);
    }
    site.add(30);
    site.add(31);
    site.remove(5, Removal::NotFound);
    site.remove(6, Removal::Gone);
    site.remove(12, Removal::NotFound);

    crawl(data.path(), &["--revisit-after", "0"]);
    let second = last_run(data.path());
    // The hub changed (its links) and the edited pages changed: each stored once
    // more, as version 2. A removed page's error answer is no content (issue 27):
    // it makes no item, but its item gets a deletion record (issue 41), of the
    // version it withdraws.
    let mut expected = vec![("/".to_owned(), 2)];
    expected.extend(expect_items(&edited, 2));
    expected.extend(expect_items(&[30, 31], 1));
    assert_eq!(new_items(data.path(), stored), sorted(expected));
    let items = dump_feed(data.path());
    let deletions: Vec<String> = items[stored..]
        .iter()
        .filter(|item| item.get("deleted").is_some())
        .inspect(|item| {
            assert_eq!(item["deleted"], "gone", "{item}");
            assert_eq!(item["place"], 0, "{item}");
        })
        .map(item_path)
        .collect();
    assert_eq!(
        sorted(deletions),
        sorted(
            expect_items(&[5, 6, 12], 1)
                .into_iter()
                .map(|(p, _)| p)
                .collect()
        )
    );
    for item in items[stored..]
        .iter()
        .filter(|item| item.get("deleted").is_none())
    {
        if item["version"] == 2 {
            assert!(item["previous_hash"].is_string(), "{item}");
        } else {
            assert!(item.get("previous_hash").is_none(), "{item}");
        }
        assert_eq!(item["status"], 200, "{item}");
    }
    assert_eq!(counter(&second, "pages/fetched"), 33);
    assert_eq!(counter(&second, "pages/new"), 2);
    // Each page counts under one outcome: a deleted page is gone, not changed.
    assert_eq!(counter(&second, "pages/changed"), 1 + 5);
    assert_eq!(counter(&second, "pages/gone"), 3, "a 404 or a 410 is gone");
    // Issue 14, item 8: the outcomes sum to the pages, which are the finished
    // leases (none was put back here).
    let pages_total = ["new", "changed", "unchanged", "gone", "failed", "blocked"]
        .iter()
        .map(|c| second[c].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(second["pages"].as_u64(), Some(pages_total), "{second}");
    assert_eq!(pages_total, counter(&second, "pages/completed"), "{second}");
    assert_eq!(counter(&second, "items/stored"), 8 + 3);
    assert_eq!(counter(&second, "items/deleted"), 3);
    // The hub links to 27 known pages and two new ones.
    assert_eq!(counter(&second, "dupefilter/filtered"), 27);
    let unchanged = counter(&second, "pages/unchanged") + counter(&second, "pages/not_modified");
    assert_eq!(unchanged, 30 - 5 - 3);
    let records = dump_pages(data.path(), false);
    assert_eq!(records["/p/4.html"]["version"], 2);
    assert_eq!(records["/p/4.html"]["changes"], 1);
    assert_eq!(records["/p/30.html"]["version"], 1);
    assert_eq!(records["/p/6.html"]["status"], 410);
    assert_eq!(records["/p/6.html"]["gone"], true);
    assert_eq!(records["/p/5.html"]["status"], 404);
    assert_eq!(records["/p/5.html"]["missing"], 1);
    assert_eq!(records["/p/5.html"]["gone"], false);
    // The record keeps the last good content.
    assert_eq!(records["/p/5.html"]["version"], 1);

    // Third run, no further change: the 404s are asked once more and become
    // gone; under "every run" (the longest interval of that policy) the 410 is
    // asked again too; nothing is stored.
    let stored = versions(data.path()).len();
    crawl(data.path(), &["--revisit-after", "0"]);
    assert_eq!(server.hits("/p/5.html"), 3);
    assert_eq!(server.hits("/p/12.html"), 3);
    assert_eq!(server.hits("/p/6.html"), 3);
    let third = last_run(data.path());
    assert_eq!(counter(&third, "pages/gone"), 3);
    assert_eq!(counter(&third, "pages/changed"), 0);
    assert_eq!(counter(&third, "items/stored"), 0);
    assert_eq!(counter(&third, "pages/fetched"), 1 + 29 + 3);
    assert_eq!(versions(data.path()).len(), stored);
    let records = dump_pages(data.path(), false);
    for path in ["/p/5.html", "/p/12.html"] {
        assert_eq!(records[path]["gone"], true, "{}", records[path]);
        assert_eq!(records[path]["missing"], 2);
        assert!(records[path]["next_due"].is_u64(), "{}", records[path]);
    }

    // Fourth run: page 5 is back as it was. It comes back without being made a
    // seed, no longer gone; its item was deleted from the feed when it went,
    // so it is new again there: a changed page, version 2 (issue 41).
    site.restore(5);
    crawl(data.path(), &["--revisit-after", "0"]);
    let fourth = last_run(data.path());
    assert_eq!(server.hits("/p/5.html"), 4);
    assert_eq!(counter(&fourth, "pages/gone"), 2, "12 and 6");
    assert_eq!(
        counter(&fourth, "items/stored"),
        2,
        "the hub, which links 5 again, and page 5"
    );
    let records = dump_pages(data.path(), false);
    assert_eq!(records["/p/5.html"]["gone"], false);
    assert_eq!(records["/p/5.html"]["status"], 200);
    assert_eq!(records["/p/5.html"]["version"], 2);
}

#[test]
fn a_gone_page_waits_for_the_longest_interval_of_its_policy() {
    let site = ChangingSite::new(3);
    let data = tempfile::tempdir().unwrap();
    // Adaptive within 1h..30d: the hub is a hub (every run), pages adapt.
    let args = ["--revisit", "/$", "--revisit-after", "adaptive"];
    let server = first_crawl(&site, data.path(), &args);
    site.remove(1, Removal::Gone);
    // Pages are due after a day: pretend by making them every-run for one run.
    crawl(data.path(), &["--revisit-after", "0"]);
    assert_eq!(server.hits("/p/1.html"), 2);
    let records = dump_pages(data.path(), false);
    assert_eq!(records["/p/1.html"]["gone"], true);
    // Back under the adaptive policy, the gone page is due after its maximum,
    // 30 days: not asked by the next runs.
    crawl(data.path(), &["--revisit-after", "adaptive"]);
    crawl(data.path(), &["--revisit-after", "adaptive"]);
    assert_eq!(server.hits("/p/1.html"), 2);
    let records = dump_pages(data.path(), false);
    let record = &records["/p/1.html"];
    let (last, due) = (
        record["last_fetched"].as_u64().unwrap(),
        record["next_due"].as_u64().unwrap(),
    );
    let thirty_days = 30 * 86_400;
    assert_eq!(due, last + thirty_days - 3600, "{record}");
}

/// Checks the guarantees after an interrupted revisit cycle: every (page,
/// version) stored exactly once, and every live page's current revision stored.
fn assert_each_version_once(site: &ChangingSite, data: &Path) {
    let items = versions(data);
    let mut counts: BTreeMap<&(String, u64), usize> = BTreeMap::new();
    for item in &items {
        *counts.entry(item).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "stored more than once: {twice:?}");
    let stored: BTreeSet<&(String, u64)> = counts.keys().copied().collect();
    for i in site.live() {
        let revision = u64::from(site.revision(i).unwrap());
        let want = (page_path(i), revision);
        assert!(stored.contains(&want), "missing {want:?}");
        let newer = (page_path(i), revision + 1);
        assert!(!stored.contains(&newer), "unexpected {newer:?}");
    }
}

/// A 200-page site crawled once, then edited (every fifth page), extended by 10
/// pages and with 5 removed, and slowed down so that a revisit run lasts seconds.
fn changed_slow_site(data: &Path) -> (ChangingSite, TestServer) {
    let site = ChangingSite::new(200);
    let server = first_crawl(&site, data, &["--revisit-after", "0"]);
    for i in (0..200).step_by(5) {
        site.edit(i);
    }
    for i in 200..210 {
        site.add(i);
    }
    for i in [3, 33, 63, 93, 123] {
        site.remove(i, Removal::NotFound);
    }
    site.set_delay(Some(Duration::from_millis(15)));
    (site, server)
}

const SLOW_ARGS: [&str; 6] = [
    "--revisit-after",
    "0",
    "--concurrency",
    "4",
    "--per-host",
    "4",
];

#[test]
fn kill_nine_during_a_revisit_then_each_version_once() {
    const KILLS: usize = 5;
    let data = tempfile::tempdir().unwrap();
    let (site, server) = changed_slow_site(data.path());
    let mut rng = crate::support::kill_seed("kill_nine_during_a_revisit_then_each_version_once");
    let (runs_before, requests_before) = (dump_runs(data.path()).len(), server.requests());
    for round in 0..KILLS {
        let mut child = crawl_cmd(data.path(), &SLOW_ARGS)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let at_start = server.requests();
        // The kill lands after a random 1..=20 requests of the round: five
        // rounds fetch fewer pages than the cycle has, so every kill lands
        // mid-cycle (a kill after the run drained, while it exits, would
        // leave the next run a new cycle to start).
        let target = 1 + splitmix64(&mut rng) % 20;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while server.requests() - at_start < target && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The kill must land mid-crawl: the run still going, and fetching.
        assert!(
            child.try_wait().unwrap().is_none(),
            "round {round}: the run ended before its kill"
        );
        child.kill().unwrap();
        let status = child.wait().unwrap();
        let fetched = server.requests() - at_start;
        eprintln!("round {round}: {status}, {fetched} requests in the round");
        assert!(
            fetched > 0,
            "round {round}: killed before it fetched anything"
        );
    }
    site.set_delay(None);
    crawl(data.path(), &SLOW_ARGS);
    let after = dump_runs(data.path());
    let outcomes: Vec<Value> = after.iter().map(|r| r["outcome"].clone()).collect();
    eprintln!("outcomes {outcomes:?}");
    assert_eq!(outcomes.last().unwrap(), "drained");
    // The kills and the last run make one revisit cycle, not one per kill;
    // its fetches are the site's pages (the live ones, the index, the five
    // removed ones) once, plus what was in flight or not yet durable at
    // each kill (invariant 3), the seed again in every run.
    let cycles: u64 = after[runs_before..]
        .iter()
        .map(|r| counter(r, "cycle/started"))
        .sum();
    assert!(
        cycles <= 1,
        "{cycles} cycles started in one interrupted revisit"
    );
    let cycle_pages = site.live().len() as u64 + 1 + 5;
    let run_count = KILLS as u64 + 1;
    let bound =
        cycle_pages + KILLS as u64 * (4 + legcrawl::store::GROUP_MAX_PAGES as u64) + run_count;
    let fetches = server.requests() - requests_before;
    assert!(
        fetches <= bound,
        "{fetches} fetches in one revisit cycle of {cycle_pages} pages with {KILLS} kills exceeds {bound}"
    );
    assert_each_version_once(&site, data.path());
    // The removed pages were seen missing: their 404 made no item (issue 27),
    // and their record says so.
    let items = versions(data.path());
    let records = dump_pages(data.path(), false);
    for i in [3, 33, 63, 93, 123] {
        let of_page: Vec<_> = items.iter().filter(|(p, _)| *p == page_path(i)).collect();
        assert_eq!(of_page.len(), 1, "page {i}: {of_page:?}");
        assert_eq!(records[&page_path(i)]["status"], 404, "page {i}");
    }
    // A further run finds nothing new.
    let stored = items.len();
    crawl(data.path(), &SLOW_ARGS);
    assert_eq!(versions(data.path()).len(), stored);
    assert_eq!(counter(&last_run(data.path()), "pages/changed"), 0);
}

#[test]
fn sigint_during_a_revisit_then_the_cycle_resumes() {
    let data = tempfile::tempdir().unwrap();
    let (site, server) = changed_slow_site(data.path());
    let before: BTreeMap<String, u64> = server.all_hits().into_iter().collect();
    let child = crawl_cmd(data.path(), &SLOW_ARGS)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = server.requests();
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests() < start + 40 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    cli::signal(child.id(), libc::SIGINT);
    let out = cli::wait_output(child, LIMIT);
    assert_eq!(
        out.status.code(),
        Some(130),
        "interrupted run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let interrupted = last_run(data.path());
    assert_eq!(interrupted["outcome"], "interrupted");
    assert_eq!(counter(&interrupted, "cycle/started"), 1);
    assert!(
        counter(&interrupted, "pages/fetched") < 200,
        "{interrupted}"
    );

    crawl(data.path(), &SLOW_ARGS);
    let resumed = last_run(data.path());
    assert_eq!(resumed["outcome"], "drained");
    assert_eq!(
        counter(&resumed, "cycle/started"),
        0,
        "resumed, not restarted"
    );
    // Across the two runs every page (and the hub) was fetched exactly once.
    let after: BTreeMap<String, u64> = server.all_hits().into_iter().collect();
    for (target, hits) in &after {
        let earlier = before.get(target).copied().unwrap_or(0);
        assert_eq!(
            hits - earlier,
            1,
            "{target} fetched {} times",
            hits - earlier
        );
    }
    assert_eq!(after.len(), 211, "the hub and 210 pages");
    assert_each_version_once(&site, data.path());
}

#[test]
fn max_pages_in_a_revisit_cycle_resumes_it_next_run() {
    const N: usize = 30;
    let site = ChangingSite::new(N);
    let data = tempfile::tempdir().unwrap();
    let server = first_crawl(&site, data.path(), &["--revisit-after", "0"]);
    crawl(data.path(), &["--revisit-after", "0", "--max-pages", "10"]);
    let limited = last_run(data.path());
    assert_eq!(limited["outcome"], "limit");
    assert_eq!(counter(&limited, "cycle/started"), 1);
    assert_eq!(counter(&limited, "pages/fetched"), 10);
    assert_eq!(server.hits("/"), 2);

    crawl(data.path(), &["--revisit-after", "0"]);
    let resumed = last_run(data.path());
    assert_eq!(resumed["outcome"], "drained");
    assert_eq!(counter(&resumed, "cycle/started"), 0);
    assert_eq!(counter(&resumed, "pages/fetched"), N as u64 + 1 - 10);
    assert_eq!(server.hits("/"), 2, "the seed is not fetched again");
    for i in 0..N {
        assert_eq!(server.hits(&page_path(i)), 2, "page {i}");
    }

    crawl(data.path(), &["--revisit-after", "0"]);
    let next = last_run(data.path());
    assert_eq!(
        counter(&next, "cycle/started"),
        1,
        "a drained cycle is followed by a new one"
    );
    assert_eq!(counter(&next, "pages/fetched"), N as u64 + 1);
    assert_eq!(server.hits("/"), 3);
    assert_eq!(versions(data.path()).len(), N + 1);
}

#[test]
fn max_duration_stops_a_run_and_the_next_resumes() {
    let site = ChangingSite::new(60);
    let data = tempfile::tempdir().unwrap();
    let server = first_crawl(&site, data.path(), &["--revisit-after", "0"]);
    // 61 answers of 100 ms each, two at a time, take 3 s: far beyond the bound.
    site.set_delay(Some(Duration::from_millis(100)));
    let args = [
        "--revisit-after",
        "0",
        "--concurrency",
        "2",
        "--per-host",
        "2",
    ];
    let mut bounded = args.to_vec();
    bounded.extend(["--max-duration", "0.5"]);
    crawl(data.path(), &bounded);
    let limited = last_run(data.path());
    assert_eq!(limited["outcome"], "limit");
    assert!(counter(&limited, "pages/fetched") < 61, "{limited}");
    site.set_delay(None);
    crawl(data.path(), &args);
    let resumed = last_run(data.path());
    assert_eq!(resumed["outcome"], "drained");
    assert_eq!(counter(&resumed, "cycle/started"), 0);
    assert_eq!(
        counter(&limited, "pages/fetched") + counter(&resumed, "pages/fetched"),
        61
    );
    assert_eq!(server.hits("/"), 2);
}

#[test]
fn revisit_rule_hubs_are_fetched_every_run() {
    const N: usize = 20;
    let site = ChangingSite::new(N);
    let data = tempfile::tempdir().unwrap();
    let rule = ["--revisit", r"/p/[0-4]\.html$"];
    let server = first_crawl(&site, data.path(), &rule);
    site.edit(3);
    site.edit(7);
    let stored = versions(data.path()).len();
    crawl(data.path(), &rule);
    for i in 0..N {
        let want = if i < 5 { 2 } else { 1 };
        assert_eq!(server.hits(&page_path(i)), want, "page {i}");
    }
    // Page 7 changed too, but it is not due (adaptive default): not seen yet.
    assert_eq!(new_items(data.path(), stored), expect_items(&[3], 2));
    let second = last_run(data.path());
    assert_eq!(counter(&second, "revisit/due"), 5);
    assert_eq!(counter(&second, "pages/fetched"), 6);
    let due = dump_pages(data.path(), true);
    let due: Vec<&String> = due.keys().collect();
    assert_eq!(
        due,
        [
            "/",
            "/p/0.html",
            "/p/1.html",
            "/p/2.html",
            "/p/3.html",
            "/p/4.html"
        ]
    );
}

#[test]
fn revisit_never_fetches_only_the_seed_and_new_links() {
    const N: usize = 20;
    let site = ChangingSite::new(N);
    let data = tempfile::tempdir().unwrap();
    let never = ["--revisit-after", "never"];
    let server = first_crawl(&site, data.path(), &never);
    for (path, record) in dump_pages(data.path(), false) {
        if path != "/" {
            assert!(record["next_due"].is_null(), "{path}: {record}");
        }
    }
    site.edit(2);
    site.add(20);
    let stored = versions(data.path()).len();
    crawl(data.path(), &never);
    assert_eq!(server.hits("/"), 2, "seeds are fetched every run");
    assert_eq!(server.hits("/p/2.html"), 1, "never revisited");
    assert_eq!(server.hits("/p/20.html"), 1);
    let mut expected = vec![("/".to_owned(), 2)];
    expected.extend(expect_items(&[20], 1));
    assert_eq!(new_items(data.path(), stored), sorted(expected));
    let second = last_run(data.path());
    assert_eq!(counter(&second, "revisit/due"), 0);
    assert_eq!(counter(&second, "revisit/seeds"), 1);
    assert_eq!(counter(&second, "pages/new"), 1);
    assert_eq!(counter(&second, "pages/changed"), 1);
}

#[test]
fn dump_pages_due_and_tables() {
    let site = ChangingSite::new(10);
    let data = tempfile::tempdir().unwrap();
    let server = first_crawl(&site, data.path(), &[]);
    let seed = server.url("/");
    // Default (estimated, whole days): only the seed is due.
    let due = dump_pages(data.path(), true);
    assert_eq!(due.keys().collect::<Vec<_>>(), ["/"]);
    assert_eq!(due["/"]["url"], seed.as_str());
    let all = dump_pages(data.path(), false);
    assert_eq!(all.len(), 11);
    for (path, record) in &all {
        for field in [
            "url",
            "final_url",
            "status",
            "etag",
            "last_modified",
            "content_hash",
            "first_fetched",
            "last_fetched",
            "last_changed",
            "fetches",
            "changes",
            "version",
            "interval",
            "next_due",
            "missing",
            "gone",
            "request",
            "fingerprint",
            "change_rate",
            "due_why",
        ] {
            assert!(
                record.get(field).is_some(),
                "{path} has no {field}: {record}"
            );
        }
        assert_eq!(record["content_hash"].as_str().unwrap().len(), 40);
        // Whole days: a daily crawl's periods.
        let interval = record["interval"].as_u64().unwrap();
        assert!(
            interval >= 24 * 3600 && interval % (24 * 3600) == 0,
            "{path}: {record}"
        );
        assert!(
            record["due_why"].as_str().unwrap().starts_with("estimated"),
            "{path}: {record}"
        );
    }
    let table = run(legcrawl(data.path(), &["dump", "pages"]), LIMIT);
    assert!(table.status.success());
    let text = String::from_utf8(table.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 12, "a header and one line per page:\n{text}");
    assert!(
        lines[0].contains("status") && lines[0].contains("url"),
        "{}",
        lines[0]
    );
    for line in &lines[1..] {
        assert!(line.trim_start().starts_with("200"), "{line}");
        assert!(line.contains(&server.url("")), "{line}");
        assert!(!line.starts_with('{'), "not JSON: {line}");
    }
    let table = run(legcrawl(data.path(), &["dump", "pages", "--due"]), LIMIT);
    let text = String::from_utf8(table.stdout).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.lines().nth(1).unwrap().trim_end().ends_with(&seed));
    let table = run(legcrawl(data.path(), &["dump", "runs"]), LIMIT);
    let text = String::from_utf8(table.stdout).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.lines().nth(1).unwrap().contains("drained"), "{text}");
}

#[test]
fn a_redirect_target_is_fetched_once_per_cycle() {
    // The seed redirects to the real hub; a page redirects to another page.
    let server = TestServer::start(crate::support::handler(|req| match req.path() {
        "/" => crate::support::TestResponse::redirect(301, "/home"),
        "/home" => crate::support::TestResponse::html(
            "<title>home</title><a href=\"/old\">old</a><a href=\"/a\">a</a>",
        ),
        "/old" => crate::support::TestResponse::redirect(301, "/new"),
        "/a" | "/new" => crate::support::TestResponse::html("<title>leaf</title>"),
        _ => crate::support::TestResponse::not_found(),
    }));
    let data = tempfile::tempdir().unwrap();
    let seed = server.url("/");
    let every = ["--revisit-after", "0"];
    crawl(data.path(), &[seed.as_str(), every[0], every[1]]);
    for path in ["/", "/home", "/old", "/new", "/a"] {
        assert_eq!(server.hits(path), 1, "{path} in the first run");
    }
    crawl(data.path(), &every);
    for path in ["/", "/home", "/old", "/new", "/a"] {
        assert_eq!(server.hits(path), 2, "{path}: once per cycle");
    }
    // Default policy: the seed (a redirect) is fetched again, and so is the hub
    // behind it; nothing else is due.
    let data = tempfile::tempdir().unwrap();
    crawl(data.path(), &[seed.as_str()]);
    crawl(data.path(), &[]);
    for (path, hits) in [("/", 4), ("/home", 4), ("/old", 3), ("/new", 3), ("/a", 3)] {
        assert_eq!(server.hits(path), hits, "{path} with the default policy");
    }
}

#[test]
fn until_idle_then_a_held_host_gets_no_seed_requeued() {
    // /b answers 503 with Retry-After: 120 once: the retry waits beyond the
    // minute --until-idle allows, so the run ends idle with it queued.
    let failed_once = std::sync::atomic::AtomicBool::new(false);
    let server = TestServer::start(crate::support::handler(move |req| match req.path() {
        "/" => crate::support::TestResponse::html(
            "<title>hub</title><a href=\"/a\">a</a><a href=\"/b\">b</a>",
        ),
        "/a" => crate::support::TestResponse::html("<title>a</title>"),
        "/b" if !failed_once.swap(true, std::sync::atomic::Ordering::SeqCst) => {
            crate::support::TestResponse::status(503).header("Retry-After", "120")
        }
        "/b" => crate::support::TestResponse::html("<title>b</title>"),
        _ => crate::support::TestResponse::not_found(),
    }));
    let data = tempfile::tempdir().unwrap();
    let seed = server.url("/");
    let args = ["--revisit-after", "0", "--until-idle"];
    crawl(data.path(), &[seed.as_str(), args[0], args[1], args[2]]);
    let idle = last_run(data.path());
    assert_eq!(idle["outcome"], "idle", "{idle}");
    assert_eq!(server.hits("/b"), 1);

    // A new cycle, but the host still has the retry queued: its seed is not
    // queued again (the host finishes first); /a is due and queued nowhere else,
    // so it is queued; the retry is fetched.
    crawl(data.path(), &args);
    let held = last_run(data.path());
    assert_eq!(counter(&held, "cycle/started"), 1, "{held}");
    assert_eq!(counter(&held, "revisit/seeds"), 0, "{held}");
    assert_eq!(counter(&held, "revisit/due"), 1, "{held}");
    assert_eq!(counter(&held, "pages/fetched"), 2);
    assert_eq!(held["outcome"], "drained");
    assert_eq!(
        (server.hits("/"), server.hits("/a"), server.hits("/b")),
        (1, 2, 2)
    );

    crawl(data.path(), &args);
    let next = last_run(data.path());
    assert_eq!(counter(&next, "revisit/seeds"), 1);
    assert_eq!(counter(&next, "revisit/due"), 2);
    assert_eq!(
        (server.hits("/"), server.hits("/a"), server.hits("/b")),
        (2, 3, 3)
    );
    let mut expected = vec![
        ("/".to_owned(), 1),
        ("/a".to_owned(), 1),
        ("/b".to_owned(), 1),
    ];
    expected.sort();
    assert_eq!(sorted(versions(data.path())), expected);
}

/// The page-id run files in `data/runs`.
fn page_id_runs(data: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(data.join("runs")) else {
        return Vec::new();
    };
    entries
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "ids"))
        .collect()
}

/// Makes the metadata record and the marker say `format`, and closes `db`.
fn set_format(data: &Path, db: &sled::Db, format: u32) {
    use legcrawl::store::records::{self, Meta};
    let mut meta: Meta = records::decode(&db.get(b"m").expect("get").expect("meta")).expect("meta");
    meta.format = format;
    db.insert(b"m", records::encode(&meta)).expect("insert");
    db.flush().expect("flush");
    std::fs::write(
        data.join("LEGCRAWL"),
        format!("legcrawl state format {format}\n"),
    )
    .expect("marker");
}

/// Revisits every page of `site` (crawled once into `data`, `n` pages and the
/// seed) and checks each page was found by its stored record: fetched a second
/// time, with its validators sent back, nothing stored as new, two fetches on
/// its record. Returns the records.
fn revisit_finds_every_record(
    site: &ChangingSite,
    server: &TestServer,
    data: &Path,
    n: usize,
) -> BTreeMap<String, Value> {
    crawl(data, &["--revisit-after", "0"]);
    for i in 0..n {
        assert_eq!(server.hits(&page_path(i)), 2, "page {i} fetched again");
    }
    let with = (0..n)
        .filter(|&i| changing::validators_of(i) != Validators::None)
        .count() as u64;
    assert_eq!(site.not_modified(), with + 1, "validators were sent back");
    assert_eq!(versions(data).len(), n + 1, "nothing stored again");
    let after = dump_pages(data, false);
    assert_eq!(after.len(), n + 1);
    for (path, record) in &after {
        assert_eq!(record["fetches"], 2, "{path}: {record}");
    }
    after
}

/// A state of an older format (2 to 4: no release ever wrote one) is
/// refused by every command in one line that names the format and the last
/// build that reads it, with exit 2, and nothing in it changes: no upgrade
/// path is kept.
#[test]
fn a_state_of_an_older_format_is_refused_in_one_line_and_left_as_it_is() {
    const N: usize = 5;
    let site = ChangingSite::new(N);
    for format in [2u32, 3, 4] {
        let data = tempfile::tempdir().unwrap();
        let _server = first_crawl(&site, data.path(), &["--revisit-after", "0"]);
        {
            let db = sled::open(data.path().join("db")).expect("open sled");
            set_format(data.path(), &db, format);
        }
        let files_before = tree_bytes(data.path());
        for args in [&["dump", "summary"][..], &["crawl"], &["repair"]] {
            let out = run(legcrawl(data.path(), args), LIMIT);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
            assert!(
                err.contains(&format!("state format {format}"))
                    && err.contains(legcrawl::store::LAST_BUILD_READING_OLD_FORMATS),
                "{args:?}: {err}"
            );
        }
        assert_eq!(
            tree_bytes(data.path()),
            files_before,
            "format {format}: untouched"
        );
    }
}

/// Every file under `dir` (but the lock-free marker's temp) with its bytes.
fn tree_bytes(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                files.insert(path, bytes);
            }
        }
    }
    files
}

/// A page-id run file deleted, cut short, with its header zeroed (found by any
/// open) or with a byte of its body flipped (found by `repair`, which reads
/// the runs whole) is rebuilt from the page records, with one line saying so;
/// a crash before the rebuilt index is listed rebuilds again on the next
/// open; and a revisit then finds every page by its id.
#[test]
fn a_damaged_page_id_run_is_rebuilt_from_the_page_records() {
    const N: usize = 30;
    for how in ["deleted", "cut", "header zeroed", "body flipped"] {
        let site = ChangingSite::new(N);
        let data = tempfile::tempdir().unwrap();
        let server = first_crawl(&site, data.path(), &["--revisit-after", "0"]);
        let before = dump_pages(data.path(), false);
        let runs = page_id_runs(data.path());
        assert_eq!(
            runs.len(),
            1,
            "{how}: the crawl's checkpoint sealed the ids"
        );
        let file = &runs[0];
        let mut bytes = std::fs::read(file).unwrap();
        match how {
            "deleted" => std::fs::remove_file(file).unwrap(),
            "cut" => std::fs::write(file, &bytes[..bytes.len() - 5]).unwrap(),
            "header zeroed" => {
                bytes[..32].fill(0);
                std::fs::write(file, &bytes).unwrap();
            }
            _ => {
                // The last record's id: a lookup would find the wrong block.
                let at = bytes.len() - 1;
                bytes[at] ^= 0x01;
                std::fs::write(file, &bytes).unwrap();
            }
        }
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let args: &[&str] = if how == "body flipped" {
            &["repair"]
        } else {
            &["dump", "summary"]
        };
        // Aborted before the rebuilt index is listed: the damage is still
        // what the index lists, so the next command rebuilds again.
        let mut cmd = legcrawl(data.path(), args);
        cmd.env(legcrawl::crash::CRASH_AT_ENV, "repair.ids_index:1");
        let out = run(cmd, LIMIT);
        assert_eq!(out.status.code(), None, "{how}: aborted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("crash point repair.ids_index:1"),
            "{how}: aborted at the point"
        );
        // The rebuild on open says so in a warning.
        let mut cmd = legcrawl(data.path(), args);
        cmd.env("RUST_LOG", "warn,sled=off");
        let out = run(cmd, LIMIT);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{how}: {err}");
        assert!(
            err.contains(&name) && err.contains("rebuilt the page-id index from the page records"),
            "{how}: {err}"
        );
        assert!(err.contains(&format!("({} pages)", N + 1)), "{how}: {err}");
        assert_eq!(dump_pages(data.path(), false), before, "{how}");
        eprintln!("{how}: revisit");
        revisit_finds_every_record(&site, &server, data.path(), N);
        // Every page-id run left on disk is listed (the damaged one, and those
        // of the aborted rebuild, were removed by the crawl's checkpoint).
        let db = sled::open(data.path().join("db")).expect("open sled");
        let index = db.get(b"k").expect("get").expect("a page-id index");
        assert_eq!(
            (index.len() - 9) / 16,
            page_id_runs(data.path()).len(),
            "{how}"
        );
    }
}
