//! Issue 25, item 5: `dump --shared ... items --run N|last` and `--since-run
//! N|last` select the items of worker runs (a run that does not exist is one
//! line, exit 2); `dump --shared ... runs` is a table like the embedded
//! `dump runs`, JSON records with `--json`. A crawl that lost keys is dumped
//! as it is left, then one line names what it lost, exit 1 (issue 46). Real
//! `redis-server`, real workers.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::cli;
use crate::support::hosts::{MultiSite, args, fixed, item_key};
use crate::support::mode::{Crawler, Mode};
use crate::support::redis::{RedisServer, Resp};
use crate::support::workers::{Crawl, serial};

const LIMIT: Duration = Duration::from_secs(120);

fn keys(crawl: &Crawl, selection: &[&str]) -> Vec<String> {
    let mut argv = vec!["items"];
    argv.extend(selection);
    cli::parse_lines(&crawl.dump(&argv))
        .iter()
        .map(item_key)
        .collect()
}

#[test]
fn dump_shared_selects_items_by_run_and_prints_runs_as_a_table() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("dump_shared_selects_items_by_run") else {
        return;
    };
    let first = MultiSite::start(60, 2, 3, fixed(0));
    let mut crawl = Crawl::new(&redis.url(), "runs");
    let first_args = first.crawl_args();
    crawl.spawn(&args(&first_args, &["--concurrency", "4"]));
    crawl.wait_all_ok(LIMIT);
    let second = MultiSite::start(40, 2, 5, fixed(0));
    let second_args = second.crawl_args();
    crawl.spawn(&args(&second_args, &["--concurrency", "4"]));
    crawl.wait_all_ok(LIMIT);

    let all = keys(&crawl, &[]);
    let run1 = keys(&crawl, &["--run", "1"]);
    let run2 = keys(&crawl, &["--run", "2"]);
    assert_eq!(
        run1.iter().cloned().collect::<BTreeSet<_>>(),
        first.expected(),
        "run 1's items are the first site's"
    );
    assert_eq!(run1.len(), first.expected().len(), "each once");
    let second_pages: BTreeSet<String> = run2.iter().cloned().collect();
    assert!(
        second.expected().is_subset(&second_pages),
        "run 2 crawled the second site"
    );
    assert_eq!(
        run1.len() + run2.len(),
        all.len(),
        "the runs' items are all"
    );
    assert_eq!(keys(&crawl, &["--run", "last"]), run2);
    assert_eq!(keys(&crawl, &["--since-run", "1"]), run2);
    assert_eq!(keys(&crawl, &["--since-run", "0"]), all);
    assert_eq!(keys(&crawl, &["--since-run", "last"]), Vec::<String>::new());

    let missing = crawl.dump_output(&["items", "--run", "3"]);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no run 3"), "{err}");

    let table = String::from_utf8(crawl.dump(&["runs"])).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two runs: {table}");
    assert!(lines[0].trim_start().starts_with("run"), "{table}");
    assert!(
        lines[1].trim_start().starts_with("1 ") && lines[1].contains("drained"),
        "{table}"
    );
    let json = crawl.dump(&["runs", "--json"]);
    let records = cli::parse_lines(&json);
    assert_eq!(records.len(), 2);
    assert!(records[0]["items_until"].is_string(), "{}", records[0]);
}

/// Issue 25, item 6: a worker killed with kill -9 leaves `dump summary`
/// after three of its lease TTLs, and the live worker's renewal unlists it.
#[test]
fn a_dead_worker_leaves_the_summary_after_a_few_lease_ttls() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("a_dead_worker_leaves_the_summary") else {
        return;
    };
    let site = MultiSite::start(400, 2, 9, fixed(40));
    let mut crawl = Crawl::new(&redis.url(), "dead");
    let site_args = site.crawl_args();
    let argv = args(&site_args, &["--concurrency", "2", "--lease-ttl", "1"]);
    let doomed = crawl.spawn(&argv);
    crawl.spawn(&argv);
    crate::support::workers::wait_for_requests(&site, 30, &mut crawl);
    let listed = |crawl: &Crawl| crawl.summary()["workers"].as_array().map_or(0, Vec::len);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while listed(&crawl) < 2 {
        assert!(std::time::Instant::now() < deadline, "{}", crawl.summary());
        std::thread::sleep(Duration::from_millis(50));
    }
    crawl.kill_nine(doomed);
    // Three TTLs of 1 s, a renewal of the live worker (every third of its
    // TTL), and some slack.
    std::thread::sleep(Duration::from_millis(4500));
    let summary = crawl.summary();
    assert_eq!(listed(&crawl), 1, "{summary}");
    let hlen = redis.command(&["HLEN", "legcrawl:{dead}:workers"]).unwrap();
    assert_eq!(
        hlen,
        crate::support::redis::Resp::Int(1),
        "unlisted in Redis"
    );
}

/// The `--json` views compared, and the fields only a state directory's
/// (first) or only a shared crawl's (second) answer adds.
const VIEWS: &[(&[&str], &[&str], &[&str])] = &[
    (
        &["summary"],
        &[
            "bloom_bits",
            "bloom_sized",
            "bloom_hashes",
            "bloom_fill_ratio",
            "bloom_fpr_estimate",
            "bloom_false_positives",
            "disk_bytes",
            "last_run_peak_rss_kib",
            "unreachable",
            "parked_seeds",
        ],
        &[
            "name",
            "page_records",
            "parked_hosts",
            "workers",
            "counters",
        ],
    ),
    (
        &["runs"],
        &["updated_at", "first_item"],
        &["worker", "seconds", "jobs", "items_after", "items_until"],
    ),
    (&["frontier"], &["seq"], &[]),
    (&["items"], &[], &[]),
    (&["pages"], &[], &[]),
    (&["seen", "SEED"], &["bloom"], &[]),
    (&["job"], &["first_run"], &["worker"]),
];

/// The top-level keys of every `--json` view in `VIEWS` (the union over its
/// lines), after crawling `site` into `crawler`: one body for both modes.
fn view_keys(crawler: &Crawler, site: &MultiSite) -> Vec<BTreeSet<String>> {
    let mode = crawler.mode();
    let seed = site.seeds()[0].clone();
    let site_args = site.crawl_args();
    // Stopped early, so that the frontier still holds requests.
    crawler.crawl_ok(&args(&site_args, &["--max-pages", "5"]));
    let dump = |view: &[&str]| -> Vec<u8> {
        let mut argv: Vec<&str> = view
            .iter()
            .map(|&a| if a == "SEED" { seed.as_str() } else { a })
            .collect();
        argv.push("--json");
        crawler.dump(&argv)
    };
    VIEWS
        .iter()
        .map(|(view, _, _)| {
            let lines = cli::parse_lines(&dump(view));
            assert!(!lines.is_empty(), "{mode:?}: dump {view:?} printed nothing");
            lines
                .iter()
                .flat_map(|line| {
                    line.as_object()
                        .unwrap_or_else(|| panic!("{mode:?}: dump {view:?}: {line}"))
                        .keys()
                        .cloned()
                })
                .collect()
        })
        .collect()
}

/// The same small site crawled both ways gives `dump --json` views with the
/// same fields; each mode's additions are the ones listed in `VIEWS`.
#[test]
fn the_dump_views_have_the_same_fields_in_both_modes() {
    let Some(shared) = Crawler::start(Mode::Shared, "the_dump_views_have_the_same_fields") else {
        return;
    };
    let embedded = Crawler::start(Mode::Embedded, "the_dump_views_have_the_same_fields")
        .expect("an embedded crawler needs nothing");
    let site = MultiSite::start(30, 1, 11, fixed(0));
    let embedded = view_keys(&embedded, &site);
    let shared = view_keys(&shared, &site);
    for (k, (view, embedded_only, shared_only)) in VIEWS.iter().enumerate() {
        let only = |keys: &BTreeSet<String>, added: &[&str], what: &str| {
            for name in added {
                assert!(
                    keys.contains(*name),
                    "{what} dump {view:?} lacks {name}: {keys:?}"
                );
            }
            keys.iter()
                .filter(|k| !added.contains(&k.as_str()))
                .cloned()
                .collect::<BTreeSet<String>>()
        };
        assert_eq!(
            only(&embedded[k], embedded_only, "embedded"),
            only(&shared[k], shared_only, "shared"),
            "dump {view:?} --json: the fields both modes share"
        );
    }
}

/// Issue 46, item 8: `dump --shared` of a crawl that lost keys (as eviction
/// under `allkeys-*` loses them: whole keys, gone; here deleted one by one)
/// prints what is left, then one line that names what was lost, and exits 1;
/// an intact crawl is dumped with exit 0 and nothing on stderr. A crawl whose
/// meta hash is gone while its other keys are there is damaged, not "no
/// shared crawl named …".
#[test]
fn dump_of_a_crawl_that_lost_keys_says_what_and_exits_non_zero() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("dump_of_a_damaged_crawl") else {
        return;
    };
    let site = MultiSite::start(40, 2, 9, fixed(0));
    let mut crawl = Crawl::new(&redis.url(), "damaged");
    let site_args = site.crawl_args();
    crawl.spawn(&args(&site_args, &["--concurrency", "4"]));
    crawl.wait_all_ok(LIMIT);
    let pages = site.expected().len();
    let intact = crawl.dump_output(&["summary"]);
    assert!(intact.status.success(), "{intact:?}");
    assert!(intact.stderr.is_empty(), "{intact:?}");
    let key = |suffix: &str| format!("{}{suffix}", crawl.prefix());

    // The seeds, then all but 10 items.
    assert_eq!(
        redis.command(&["DEL", &key("seeds")]).ok(),
        Some(Resp::Int(1))
    );
    let out = crawl.dump_output(&["summary"]);
    let err = cli::one_line("summary without seeds", &out, 1);
    eprintln!("{err}");
    assert!(!out.stdout.is_empty(), "the counts left are printed");
    assert!(
        err.contains("\"damaged\"") && err.contains("is damaged"),
        "{err}"
    );
    assert!(err.contains("its seeds"), "{err}");
    redis
        .command(&["XTRIM", &key("items"), "MAXLEN", "10"])
        .expect("XTRIM");
    let out = crawl.dump_output(&["items"]);
    let err = cli::one_line("items trimmed", &out, 1);
    eprintln!("{err}");
    assert_eq!(cli::parse_lines(&out.stdout).len(), 10);
    assert!(
        err.contains(&format!("{} of its {pages} items", pages - 10)),
        "{err}"
    );

    // The meta hash: damaged, not a typo.
    assert_eq!(
        redis.command(&["DEL", &key("meta")]).ok(),
        Some(Resp::Int(1))
    );
    let out = crawl.dump_output(&["summary"]);
    let err = cli::one_line("summary without meta", &out, 1);
    eprintln!("{err}");
    assert!(err.contains("its meta hash"), "{err}");
    assert!(!err.contains("no shared crawl named"), "{err}");
}
