//! Issue 24, shared mode: the job of a shared crawl lives in Redis and every
//! worker runs it, against a real `redis-server` (started by the test, see
//! `support::redis`; skipped loudly when missing unless
//! `LEGCRAWL_REQUIRE_REDIS=1`) and servers on loopback hosts
//! (`support::hosts`), judged by the servers' own logs.
//!
//! Checked here: a running worker follows links to a host another worker
//! added as a seed; a delay given to a worker started later slows every
//! worker (`support::politeness`); a worker given only `--shared` and
//! `--name` runs the stored job (scope and delay); `dump --shared ... job`
//! prints a crawl file that `crawl --config` takes back as the same job, and
//! `--run N|last` the version a run began under; and, one call at a time, the
//! job's compare-and-set and its politeness holding for every caller.

use std::time::{Duration, Instant};

use legcrawl::config::CrawlConfig;
use legcrawl::shared::client::NewRequest;
use legcrawl::shared::{Shared, SharedTarget};

use crate::support::cli::{self, run};
use crate::support::hosts::{MultiSite, args, fixed, host_ip};
use crate::support::politeness::judge;
use crate::support::redis::RedisServer;
use crate::support::runtime;
use crate::support::scripts::request;
use crate::support::server::{Logged, TestResponse, TestServer, handler};
use crate::support::workers::{Crawl, assert_items_once, serial, wait_for_requests};

/// Longest any one crawl of these tests may take.
const LIMIT: Duration = Duration::from_secs(120);

/// The requests `server` answered, by target, robots.txt left out.
fn hits(server: &TestServer) -> Vec<(String, u64)> {
    server
        .all_hits()
        .into_iter()
        .filter(|(target, _)| target != "/robots.txt")
        .collect()
}

/// Asserts that `server` answered each of `expected` exactly once and
/// nothing else (robots.txt aside).
fn assert_served_once(server: &TestServer, expected: &[String], what: &str) {
    let got = hits(server);
    let twice: Vec<&(String, u64)> = got.iter().filter(|(_, n)| *n > 1).collect();
    assert!(
        twice.is_empty(),
        "{what}: fetched more than once: {twice:?}"
    );
    let mut targets: Vec<&String> = got.iter().map(|(t, _)| t).collect();
    targets.sort();
    let mut want: Vec<&String> = expected.iter().collect();
    want.sort();
    assert_eq!(targets, want, "{what}: the pages fetched");
}

/// The worker runs `dump --shared runs --json` lists, oldest first.
fn runs(crawl: &Crawl) -> Vec<serde_json::Value> {
    cli::parse_lines(&crawl.dump(&["runs", "--json"]))
}

/// The job versions each run ran under (`jobs` of its record).
fn versions(run: &serde_json::Value) -> Vec<u64> {
    run["jobs"]
        .as_array()
        .map(|all| all.iter().filter_map(serde_json::Value::as_u64).collect())
        .unwrap_or_default()
}

/// Lines of a worker's log that announce a change of the job.
fn change_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|line| line.starts_with("legcrawl: job "))
        .collect()
}

/// Waits (bounded) until the crawl's newest job version is `version`;
/// returns the moment it was seen.
fn wait_for_job_version(redis: &RedisServer, crawl: &mut Crawl, version: u64) -> Instant {
    let key = format!("{}job", crawl.prefix());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = redis
            .command(&["HGET", &key, "version"])
            .ok()
            .and_then(|r| r.text())
            .and_then(|v| v.parse::<u64>().ok());
        if seen == Some(version) {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "job version {version} not stored within 30 s (newest {seen:?})\n{}",
            crawl.logs_tail()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Issue 24 (found item 4): worker 1 crawls a chain of pages on host A, each
/// linking to every page of host B; worker 2 joins, adds B's index as a seed
/// (the crawl's job changes) and leaves at once. B's pages are linked only
/// from A's pages, so they are fetched only if worker 1, still crawling A,
/// takes up the new job and follows links to the host another worker added.
#[test]
fn a_running_worker_follows_links_to_a_host_another_worker_added_as_a_seed() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_job::follows_added_seed_host") else {
        return;
    };
    const CHAIN: usize = 60;
    const B_PAGES: usize = 12;
    let b = TestServer::start_on(
        &host_ip(1),
        handler(|req| match req.path() {
            "/" => TestResponse::html("<html><head><title>B</title></head><body>B</body></html>"),
            path => match path
                .strip_prefix("/b/")
                .and_then(|k| k.parse::<usize>().ok())
            {
                Some(k) if k < B_PAGES => TestResponse::html(format!(
                    "<html><head><title>B {k}</title></head><body>page {k}</body></html>"
                )),
                _ => TestResponse::not_found(),
            },
        }),
    );
    let b_addr = b.addr();
    // Each page of A answers after 120 ms: the chain takes about 7 s.
    let a = TestServer::start_on(
        &host_ip(0),
        handler(move |req| {
            let links_to_b: String = (0..B_PAGES)
                .map(|k| format!("<a href=\"http://{b_addr}/b/{k}\">b{k}</a>\n"))
                .collect();
            let page = |next: Option<usize>| {
                let next = next.map_or(String::new(), |n| format!("<a href=\"/a/{n}\">next</a>"));
                TestResponse::html(format!(
                    "<html><head><title>A</title></head><body>{next}\n{links_to_b}</body></html>"
                ))
                .delay(Duration::from_millis(120))
            };
            match req.path() {
                "/" => page(Some(0)),
                path => match path
                    .strip_prefix("/a/")
                    .and_then(|i| i.parse::<usize>().ok())
                {
                    Some(i) if i < CHAIN => page(Some(i + 1).filter(|&n| n < CHAIN)),
                    _ => TestResponse::not_found(),
                },
            }
        }),
    );
    let mut crawl = Crawl::new(&redis.url(), "addseed");
    let seed_a = a.url("/");
    let first = crawl.spawn(&[seed_a.as_str(), "--concurrency", "2"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while hits(&a).len() < 3 {
        assert!(Instant::now() < deadline, "{}", crawl.logs_tail());
        std::thread::sleep(Duration::from_millis(5));
    }
    // A worker that only adds a seed: it changes the job and fetches nothing.
    let seed_b = b.url("/");
    let second = crawl.spawn(&[seed_b.as_str(), "--max-pages", "0"]);
    let status = crawl.wait(second, LIMIT);
    assert!(
        status.success(),
        "worker 2: {status}\n{}",
        crawl.logs_tail()
    );
    let log = crawl.log(second);
    let changes = change_lines(&log);
    assert!(
        changes
            .iter()
            .any(|l| l.starts_with("legcrawl: job 1 -> 2: seeds: ")),
        "worker 2 says it added its seed to the job: {changes:?}\n{log}"
    );
    crawl.wait_all_ok(LIMIT);
    let chain: Vec<String> = std::iter::once("/".to_owned())
        .chain((0..CHAIN).map(|i| format!("/a/{i}")))
        .collect();
    assert_served_once(&a, &chain, "host A");
    let b_pages: Vec<String> = std::iter::once("/".to_owned())
        .chain((0..B_PAGES).map(|k| format!("/b/{k}")))
        .collect();
    assert_served_once(&b, &b_pages, "host B (linked only from A's pages)");
    assert_eq!(
        change_lines(&crawl.log(first)),
        Vec::<&str>::new(),
        "worker 1 stored the first job: nothing changed"
    );
    let runs = runs(&crawl);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let one = runs
        .iter()
        .find(|r| r["counters"]["pages/completed"].as_u64().unwrap_or(0) > 0)
        .expect("worker 1's run");
    assert_eq!(versions(one), [1, 2], "worker 1 took up version 2: {one}");
}

/// Issue 24 (found item 4): worker 1 crawls with no delay; worker 2, started
/// later with only `--delay 0.1`, changes the crawl's job, and from then on
/// every start on each host is 100 ms after the last, whichever worker made
/// it, as the servers see it.
#[test]
fn a_delay_given_to_a_later_worker_slows_every_worker() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_job::later_delay") else {
        return;
    };
    let site = MultiSite::start(160, 2, 41, fixed(10));
    let mut crawl = Crawl::new(&redis.url(), "laterdelay");
    let crawl_args = site.crawl_args();
    let argv = args(
        &crawl_args,
        &[
            "--concurrency",
            "4",
            "--per-host",
            "1",
            "--delay",
            "0",
            "--ignore-robots",
        ],
    );
    let first = crawl.spawn(&argv);
    wait_for_requests(&site, 40, &mut crawl);
    let second = crawl.spawn(&["--delay", "0.1"]);
    let changed = wait_for_job_version(&redis, &mut crawl, 2);
    crawl.wait_all_ok(LIMIT);
    assert_items_once(&crawl, &site);
    let log = crawl.log(second);
    assert!(
        change_lines(&log).contains(&"legcrawl: job 1 -> 2: politeness.delay: 0 -> 100ms"),
        "worker 2 names its change: {log}"
    );
    let delay = Duration::from_millis(100);
    // Leases taken just before the change may arrive just after it.
    let settled = changed + Duration::from_millis(300);
    for (h, server) in site.servers().iter().enumerate() {
        let (before, after): (Vec<Logged>, Vec<Logged>) =
            server.log().into_iter().partition(|l| l.start < changed);
        let after: Vec<Logged> = after.into_iter().filter(|l| l.start >= settled).collect();
        let fast = judge(&before, 1, delay);
        assert!(
            fast.failure(delay).is_some(),
            "host {h}: before the change the crawl ran without a delay (the check has teeth): {fast:?}"
        );
        let judged = judge(&after, 1, delay);
        eprintln!(
            "host {h}: {} gaps after the change, smallest {:?}, {} short",
            judged.gaps,
            judged.min_gap,
            judged.short.len()
        );
        assert!(
            judged.gaps >= 10,
            "host {h}: too few requests after the change"
        );
        if let Some(failure) = judged.failure(delay) {
            panic!("host {h}, after --delay 0.1 on a later worker: {failure}");
        }
    }
    let runs = runs(&crawl);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let first_run = runs
        .iter()
        .find(|r| versions(r).first() == Some(&1))
        .unwrap_or_else(|| panic!("a run that began under version 1: {runs:?}"));
    assert_eq!(versions(first_run), [1, 2], "worker 1 took up version 2");
    // Which worker leases a request is the lease race's choice: worker 2 may
    // get none (worker 1 polls as often, with four slots). The servers' logs
    // after the change are judged whoever made each request, so the delay
    // held for worker 1, which never gave it, in either case.
    assert!(
        first_run["counters"]["pages/completed"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "worker 1 crawled: {runs:?}\n{}",
        crawl.log(first)
    );
}

/// A site on one host: `/` links to `/in/0` and `/out/0`; `/in/i` to
/// `/in/{i+1}` (up to `pages`) and `/out/i`; `/out/i` to `/out/{i+1}`.
fn in_and_out_site(pages: usize) -> TestServer {
    TestServer::start_on(
        &host_ip(0),
        handler(move |req| {
            let path = req.path();
            let link = |kind: &str, i: usize| {
                if i < pages {
                    format!("<a href=\"/{kind}/{i}\">{kind} {i}</a>\n")
                } else {
                    String::new()
                }
            };
            let body = if path == "/" {
                format!("{}{}", link("in", 0), link("out", 0))
            } else if let Some(i) = path
                .strip_prefix("/in/")
                .and_then(|i| i.parse::<usize>().ok())
            {
                if i >= pages {
                    return TestResponse::not_found();
                }
                format!("{}{}", link("in", i + 1), link("out", i))
            } else if let Some(i) = path
                .strip_prefix("/out/")
                .and_then(|i| i.parse::<usize>().ok())
            {
                if i >= pages {
                    return TestResponse::not_found();
                }
                link("out", i + 1)
            } else {
                return TestResponse::not_found();
            };
            TestResponse::html(format!(
                "<html><head><title>{path}</title></head><body>{body}</body></html>"
            ))
        }),
    )
}

/// Issue 24: a worker started with only `--shared` and `--name` after the
/// first runs the job the first stored: its `--allow` and `--delay` hold, and
/// it changes nothing.
#[test]
fn a_worker_given_only_the_crawl_runs_the_stored_job() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_job::stored_job") else {
        return;
    };
    const PAGES: usize = 20;
    let site = in_and_out_site(PAGES);
    let mut crawl = Crawl::new(&redis.url(), "stored");
    let seed = site.url("/");
    let first = crawl.spawn(&[
        seed.as_str(),
        "--allow",
        "/in/",
        "--per-host",
        "1",
        "--delay",
        "0.05",
        "--ignore-robots",
        "--max-pages",
        "3",
    ]);
    let status = crawl.wait(first, LIMIT);
    assert!(
        status.success(),
        "worker 1: {status}\n{}",
        crawl.logs_tail()
    );
    assert!(
        hits(&site).len() >= 3,
        "worker 1 fetched its 3 pages: {:?}",
        hits(&site)
    );
    let second = crawl.spawn(&[]);
    crawl.wait_all_ok(LIMIT);
    let expected: Vec<String> = std::iter::once("/".to_owned())
        .chain((0..PAGES).map(|i| format!("/in/{i}")))
        .collect();
    assert_served_once(&site, &expected, "the stored job's --allow /in/");
    let delay = Duration::from_millis(50);
    if let Some(failure) = judge(&site.log(), 1, delay).failure(delay) {
        panic!("the stored job's --per-host 1 --delay 0.05: {failure}");
    }
    let log = crawl.log(second);
    assert_eq!(
        change_lines(&log),
        Vec::<&str>::new(),
        "a worker given nothing changes nothing"
    );
    let summary = crawl.summary();
    assert_eq!(summary["frontier"], 0, "{summary}");
}

/// Issue 24: `dump --shared ... job` prints the stored job as a crawl file;
/// `crawl --config` with it (shared or not) takes it as the same job, and
/// `--run N|last` prints the version a worker run began under.
#[test]
fn dump_shared_job_prints_a_crawl_file_that_crawl_config_takes_back() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_job::dump_job") else {
        return;
    };
    let site = in_and_out_site(3);
    let mut crawl = Crawl::new(&redis.url(), "dumpjob");
    let seed = site.url("/");
    let first = crawl.spawn(&[
        seed.as_str(),
        "--allow",
        "/in/",
        "--deny",
        "/in/2",
        "--max-depth",
        "5",
        "--per-host",
        "3",
        "--delay",
        "20ms",
        "--user-agent",
        "jobbot/1.0",
        "--ignore-robots",
    ]);
    let status = crawl.wait(first, LIMIT);
    assert!(
        status.success(),
        "worker 1: {status}\n{}",
        crawl.logs_tail()
    );
    let text = String::from_utf8(crawl.dump(&["job"])).expect("UTF-8 job");
    assert!(
        text.starts_with("# legcrawl job version 1 of the shared crawl \"dumpjob\""),
        "{text}"
    );
    for line in [
        "allow = [\"/in/\"]",
        "deny = [\"/in/2\"]",
        "max_depth = 5",
        "per_host = 3",
        "delay = \"20ms\"",
        "user_agent = \"jobbot/1.0\"",
        "obey_robots = false",
    ] {
        assert!(
            text.lines().any(|l| l.trim() == line),
            "{line:?} in\n{text}"
        );
    }
    assert!(text.contains(&seed), "the seed in\n{text}");
    let file = crawl.dir().join("job.toml");
    std::fs::write(&file, &text).expect("write job.toml");
    let file_arg = file.display().to_string();
    // The same job comes back: a worker given it changes nothing.
    let again = crawl.spawn(&["--config", file_arg.as_str(), "--max-pages", "0"]);
    let status = crawl.wait(again, LIMIT);
    assert!(
        status.success(),
        "--config job.toml: {status}\n{}",
        crawl.logs_tail()
    );
    assert_eq!(
        change_lines(&crawl.log(again)),
        Vec::<&str>::new(),
        "the dumped job, given back with --config, is the same job"
    );
    // A change through a third worker is version 2; runs name their versions.
    let third = crawl.spawn(&["--delay", "30ms", "--max-pages", "0"]);
    assert!(crawl.wait(third, LIMIT).success(), "{}", crawl.logs_tail());
    let newest = String::from_utf8(crawl.dump(&["job"])).unwrap();
    assert!(newest.starts_with("# legcrawl job version 2 "), "{newest}");
    assert!(newest.contains("delay = \"30ms\""), "{newest}");
    let by_run = |pick: &str| String::from_utf8(crawl.dump(&["job", "--run", pick])).unwrap();
    assert!(
        by_run("1").starts_with("# legcrawl job version 1 "),
        "{}",
        by_run("1")
    );
    assert!(
        by_run("2").starts_with("# legcrawl job version 1 "),
        "{}",
        by_run("2")
    );
    assert!(
        by_run("last").starts_with("# legcrawl job version 2 "),
        "{}",
        by_run("last")
    );
    let json: serde_json::Value =
        serde_json::from_slice(&crawl.dump(&["job", "--json"])).expect("job JSON");
    assert_eq!(json["version"], 2, "{json}");
    assert_eq!(
        json["text"].as_str(),
        newest.split_once('\n').map(|(_, t)| t)
    );
    let missing = crawl.dump_output(&["job", "--run", "9"]);
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    let message = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(message.lines().count(), 1, "one line: {message}");
    assert!(message.contains("no run 9"), "{message}");
    // A local crawl takes the same file (`data` is not part of a job).
    let data = tempfile::tempdir().expect("data dir");
    let mut local = cli::legcrawl(
        data.path(),
        &["crawl", "--config", file_arg.as_str(), "--max-pages", "1"],
    );
    local.current_dir(crawl.dir());
    let out = run(local, LIMIT);
    assert!(
        out.status.success(),
        "crawl --config job.toml --data D: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A worker's plan with `run` (seeds, per-run options) and `flags`.
fn plan<'a>(
    run: &'a CrawlConfig,
    flags: &'a (dyn Fn(&mut CrawlConfig) + Sync),
) -> legcrawl::engine::worker::JobPlan<'a> {
    legcrawl::engine::worker::JobPlan {
        file: None,
        flags,
        run,
    }
}

/// The job's store, one call at a time: a crawl begun before jobs were
/// stored (seeds, no job) is refused in one line and left as it was (no
/// migration is kept, issue 28); the
/// job's per-host limit and delay hold for every caller of the lease script,
/// whatever limit it connected with; two workers changing the job at once
/// both get their change in (compare-and-set, the second resolves again).
#[test]
fn job_versions_are_compare_and_set_and_their_politeness_is_the_crawls() {
    let Some(server) = RedisServer::start("shared_job::compare_and_set") else {
        return;
    };
    runtime().block_on(async {
        // An earlier legcrawl: seeds stored, no job. Refused, nothing stored.
        let earlier = SharedTarget::new(&server.url(), "earlier").expect("target");
        let seeded = Shared::connect(&earlier, 4).await.expect("connect");
        let seed = request("http://a.test/", Duration::from_secs(5));
        assert_eq!(seeded.add_seeds(&[seed]).await.unwrap().queued, 1);
        let run = CrawlConfig {
            seeds: vec!["http://a.test/0".into()],
            ..CrawlConfig::default()
        };
        let refused = legcrawl::engine::worker::join(&earlier, plan(&run, &|_| {}))
            .await
            .err()
            .expect("a crawl with seeds and no job is refused");
        let message = refused.to_string();
        assert!(
            message.contains("no stored job") && message.contains("legcrawl commit"),
            "{message}"
        );
        assert!(seeded.current_job().await.unwrap().is_none(), "no job made");

        let target = SharedTarget::new(&server.url(), "cas").expect("target");
        let flags = |c: &mut CrawlConfig| {
            c.per_host = 1;
            c.delay = Some(Duration::from_millis(300));
        };
        let joined = legcrawl::engine::worker::join(&target, plan(&run, &flags))
            .await
            .expect("join");
        assert_eq!((joined.version, joined.previous), (1, None));
        // A worker's seeds, stored with its own --delay 5 as the host's delay.
        let old = Shared::connect(&target, 4).await.expect("connect");
        let seeds: Vec<NewRequest> = (0..3)
            .map(|i| request(&format!("http://a.test/{i}"), Duration::from_secs(5)))
            .collect();
        assert_eq!(old.add_seeds(&seeds).await.unwrap().queued, 3);
        // `old` connected with --per-host 4: the job's 1 holds, and its delay.
        let ttl = Duration::from_secs(30);
        let first = old.lease("w1", 8, ttl).await.unwrap();
        assert_eq!(first.leases.len(), 1, "the job's per_host 1");
        let tokens: Vec<u64> = first.leases.iter().map(|l| l.token).collect();
        old.release("w1", &tokens).await.unwrap();
        let wait = old
            .lease("w2", 8, ttl)
            .await
            .unwrap()
            .wait
            .expect("waiting");
        assert!(
            wait > Duration::from_millis(200) && wait <= Duration::from_millis(300),
            "the job's delay, not the host's 5 s: {wait:?}"
        );
        // Two workers change the job at once: one is version 2, the other
        // resolves against it and is version 3, with both changes.
        let faster = |c: &mut CrawlConfig| c.delay = Some(Duration::from_millis(50));
        let named = |c: &mut CrawlConfig| c.user_agent = "casbot/2".into();
        let (a, b) = tokio::join!(
            legcrawl::engine::worker::join(&target, plan(&run, &faster)),
            legcrawl::engine::worker::join(&target, plan(&run, &named)),
        );
        let (a, b) = (a.expect("join a"), b.expect("join b"));
        let mut versions = [(a.previous, a.version), (b.previous, b.version)];
        versions.sort();
        assert_eq!(versions, [(Some(1), 2), (Some(2), 3)]);
        let newest = old.current_job().await.unwrap().expect("a job");
        assert_eq!(newest.version, 3);
        assert!(newest.text.contains("delay = \"50ms\""), "{}", newest.text);
        assert!(newest.text.contains("casbot/2"), "{}", newest.text);
        assert_eq!(old.job(1).await.unwrap().map(|j| j.version), Some(1));
        // Nothing given, nothing changed: no new version.
        let same = legcrawl::engine::worker::join(&target, plan(&run, &|_| {}))
            .await
            .expect("join");
        assert_eq!((same.version, same.changes.len()), (3, 0));
        assert_eq!(old.job_version().await.unwrap(), 3);
    });
}
