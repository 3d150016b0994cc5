//! Error answers and the rough edges a new user meets (issue 27): a non-2xx
//! answer is counted and recorded but makes no item unless `--keep-status`
//! keeps its status; `--max-pages` counts pages, not retries; the run line
//! says "1 page"; an unwritable state, `--stats` or `--warc` is named in one
//! line before anything runs; an empty frontier says so.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::cli::{crawl_ok, dump_items, item_path, legcrawl, parse_lines, run};
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(60);

/// A hub linking pages that answer 200, 404, 403, 410 and 501.
fn site() -> TestServer {
    TestServer::start(handler(|req| match req.path() {
        "/" => TestResponse::html(
            "<html><head><title>hub</title></head><body>\
             <a href=\"/ok\">ok</a> <a href=\"/missing\">missing</a> \
             <a href=\"/forbidden\">forbidden</a> <a href=\"/gone\">gone</a> \
             <a href=\"/odd\">odd</a></body></html>",
        ),
        "/ok" => TestResponse::html("<html><head><title>ok</title></head></html>"),
        "/missing" => with_status(
            404,
            TestResponse::html(
                "<html><head><title>Not found</title></head><body><a href=\"/from-404\">x</a></body></html>",
            ),
        ),
        "/forbidden" => with_status(403, TestResponse::html("<title>Forbidden</title>")),
        "/gone" => with_status(410, TestResponse::html("<title>Gone</title>")),
        "/odd" => with_status(501, TestResponse::html("<title>Not implemented</title>")),
        "/from-404" => TestResponse::html("<title>linked from a 404 page</title>"),
        _ => TestResponse::not_found(),
    }))
}

fn with_status(status: u16, response: TestResponse) -> TestResponse {
    TestResponse { status, ..response }
}

fn stats(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn records(data: &Path) -> Vec<Value> {
    let out = run(legcrawl(data, &["dump", "pages", "--json"]), LIMIT);
    assert!(out.status.success());
    parse_lines(&out.stdout)
}

fn record<'a>(records: &'a [Value], path: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["url"].as_str().is_some_and(|u| u.ends_with(path)))
        .unwrap_or_else(|| panic!("no record of {path}"))
}

#[test]
fn error_answers_are_counted_and_recorded_but_make_no_items() {
    let server = site();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let report = dir.path().join("run.json");
    let seed = server.url("/");
    let out = crawl_ok(&data, &[seed.as_str(), "--stats", report.to_str().unwrap()]);
    let items = dump_items(&data);
    let paths: Vec<String> = items.iter().map(item_path).collect();
    assert_eq!(paths, ["/", "/ok"], "only 2xx answers make items");
    // No item legs ran on the 404 page: its link was not followed.
    assert_eq!(server.hits("/from-404"), 0);
    let stats = stats(&report);
    let totals = &stats["totals"];
    assert_eq!(totals["new"], 2, "{stats}");
    assert_eq!(totals["gone"], 2, "the 404 and the 410: {stats}");
    assert_eq!(totals["failed"], 2, "the 403 and the 501: {stats}");
    assert_eq!(totals["pages"], 6, "{stats}");
    assert_eq!(stats["counters"]["status/4xx"], 3, "{stats}");
    let records = records(&data);
    for (path, status) in [
        ("/missing", 404),
        ("/forbidden", 403),
        ("/gone", 410),
        ("/odd", 501),
    ] {
        let r = record(&records, path);
        assert_eq!(r["status"], status, "{r}");
        assert_eq!(r["fetches"], 0, "no good answer yet: {r}");
    }
    assert_eq!(record(&records, "/gone")["gone"], true);
    let line = String::from_utf8_lossy(&out.stderr);
    assert!(line.contains("2 gone, 2 failed"), "{line}");
    assert!(
        line.contains("6 pages") && line.contains("2 items"),
        "{line}"
    );
}

#[test]
fn keep_status_makes_items_of_the_statuses_it_names_and_is_part_of_the_job() {
    let server = site();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let seed = server.url("/");
    crawl_ok(
        &data,
        &[
            seed.as_str(),
            "--keep-status",
            "404",
            "--keep-status",
            "403",
        ],
    );
    let items = dump_items(&data);
    let mut paths: Vec<String> = items.iter().map(item_path).collect();
    paths.sort();
    assert_eq!(paths, ["/", "/forbidden", "/from-404", "/missing", "/ok"]);
    let missing = items.iter().find(|i| item_path(i) == "/missing").unwrap();
    assert_eq!(
        (&missing["status"], &missing["title"]),
        (&Value::from(404), &Value::from("Not found"))
    );
    // The job keeps it: `dump job` writes it, sorted.
    let job = run(legcrawl(&data, &["dump", "job"]), LIMIT);
    let text = String::from_utf8_lossy(&job.stdout);
    let job: toml::Table = text.parse().unwrap();
    assert_eq!(
        job["keep_status"],
        toml::Value::Array(vec![403.into(), 404.into()]),
        "{text}"
    );
}

#[test]
fn bad_keep_status_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    for (code, says) in [
        ("503", "is retried"),
        ("200", "not an error status"),
        ("x", "status code"),
    ] {
        let out = run(
            legcrawl(
                &data,
                &["crawl", "http://127.0.0.1:9/", "--keep-status", code],
            ),
            LIMIT,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{code}: {err}");
        assert!(
            err.contains(says) && err.trim().lines().count() == 1,
            "{code}: {err}"
        );
        assert!(!data.exists(), "{code}: the state was created");
    }
    let file = dir.path().join("crawl.toml");
    std::fs::write(
        &file,
        "seeds = [\"http://127.0.0.1:9/\"]\nkeep_status = [429]\n",
    )
    .unwrap();
    let out = run(
        legcrawl(&data, &["crawl", "--config", file.to_str().unwrap()]),
        LIMIT,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("keep_status") && err.contains("429 is retried"),
        "{err}"
    );
}

#[test]
fn max_pages_counts_pages_not_retries() {
    // Every page but the hub answers 503 twice, then 200: retries come back
    // to the frontier and must not use up --max-pages.
    let hits = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
        String,
        u32,
    >::new()));
    let seen = hits.clone();
    let server = TestServer::start(handler(move |req| {
        let path = req.path().to_owned();
        if path == "/robots.txt" {
            return TestResponse::not_found();
        }
        if path == "/" {
            return TestResponse::html(
                "<a href=\"/a\">a</a><a href=\"/b\">b</a><a href=\"/c\">c</a><a href=\"/d\">d</a>",
            );
        }
        let mut hits = seen.lock().unwrap();
        let n = hits.entry(path).or_default();
        *n += 1;
        if *n <= 2 {
            TestResponse::status(503)
        } else {
            TestResponse::html("<title>page</title>")
        }
    }));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let seed = server.url("/");
    crawl_ok(
        &data,
        &[
            seed.as_str(),
            "--max-pages",
            "3",
            "--retries",
            "3",
            "--per-host",
            "1",
        ],
    );
    // Three pages finished: the hub and two others, each after its retries.
    assert_eq!(dump_items(&data).len(), 3);
    let hits = hits.lock().unwrap();
    assert!(hits.values().filter(|&&n| n == 3).count() >= 2, "{hits:?}");
}

#[test]
fn one_page_is_one_page() {
    let server = TestServer::start(handler(|_| TestResponse::html("<title>only</title>")));
    let dir = tempfile::tempdir().unwrap();
    let seed = server.url("/");
    let out = crawl_ok(dir.path(), &[seed.as_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(" 1 page (") && err.contains("; 1 item,"),
        "{err}"
    );
}

#[test]
fn an_empty_frontier_says_so() {
    let server = TestServer::start(handler(|_| TestResponse::html("<title>only</title>")));
    let dir = tempfile::tempdir().unwrap();
    let seed = server.url("/");
    crawl_ok(dir.path(), &[seed.as_str()]);
    let out = run(legcrawl(dir.path(), &["dump", "frontier"]), LIMIT);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the frontier is empty"), "{err}");
}

/// `cmd` run as another user who cannot write what this one made: `nobody`
/// through setpriv(1) when the tests run as root (root writes anywhere),
/// else this user, once `dirs` are made read-only.
fn as_other_user(mut cmd: Command, dirs: &[&Path]) -> Command {
    if is_root() {
        let mut wrapped = Command::new("setpriv");
        wrapped.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        wrapped.arg(cmd.get_program()).args(cmd.get_args());
        for (key, value) in cmd.get_envs() {
            if let Some(value) = value {
                wrapped.env(key, value);
            }
        }
        for dir in dirs {
            chmod(dir, 0o755);
        }
        wrapped
    } else {
        for dir in dirs {
            chmod(dir, 0o555);
        }
        cmd.env("RUST_LOG", "error");
        cmd
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"))
    })
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_state_this_user_cannot_write_is_named_in_one_line() {
    let server = TestServer::start(handler(|_| TestResponse::html("<title>only</title>")));
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let data = dir.path().join("state");
    let seed = server.url("/");
    crawl_ok(&data, &[seed.as_str()]);
    let out = run(
        as_other_user(legcrawl(&data, &["dump", "summary"]), &[&data]),
        LIMIT,
    );
    chmod(&data, 0o755);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot write") && err.contains("state's owner"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!err.contains("(os error 13): Permission denied"), "{err}");
    // Nothing was lost: the owner reads it as before.
    assert_eq!(dump_items(&data).len(), 1);
}

#[test]
fn a_state_directory_this_user_cannot_create_is_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    let data = locked.join("parent").join("state");
    let out = run(
        as_other_user(
            legcrawl(&data, &["crawl", "http://127.0.0.1:9/"]),
            &[&locked],
        ),
        LIMIT,
    );
    chmod(&locked, 0o755);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot create the state directory") && err.contains("permission denied"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!data.exists());
}

#[test]
fn an_unwritable_stats_or_warc_place_is_refused_before_the_crawl() {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o777);
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    let data = dir.path().join("state");
    for (flag, target) in [
        ("--stats", locked.join("run.json")),
        ("--warc", locked.join("warc")),
    ] {
        let cmd = legcrawl(
            &data,
            &[
                "crawl",
                "http://127.0.0.1:9/",
                flag,
                target.to_str().unwrap(),
            ],
        );
        let out = run(as_other_user(cmd, &[&locked]), LIMIT);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(
            err.contains(flag) && err.contains("cannot write"),
            "{flag}: {err}"
        );
        assert!(
            !data.exists(),
            "{flag}: the state was created before the refusal"
        );
    }
    chmod(&locked, 0o755);
}
