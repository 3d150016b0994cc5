//! Issue 24: a crawl is a stored job. A resume runs the stored job exactly
//! (scope, delay, output), settings given change it one line each, `dump job`
//! round-trips through `crawl --config`, a crash between the job and the run's
//! begin stores neither, a state without a job gets one made once, and the
//! exit codes of `crawl`.

use std::process::Output;
use std::time::Duration;

use crate::support::cli::{
    assert_ok, dump_items, dump_runs, item_path, legcrawl, parse_lines, run, stderr,
};
use crate::support::mode::{Crawler, Mode};
use crate::support::politeness::judge;
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);

/// The lines a run prints for changes of its job.
fn change_lines(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("legcrawl: job "))
        .map(str::to_owned)
        .collect()
}

/// A site of two sections: `/a/N` links to `/a/N+1` and to `/b/N`, for N up
/// to 30; every page has a title.
fn two_sections() -> TestServer {
    TestServer::start(handler(|req| {
        let path = req.path().to_owned();
        let n: u32 = path
            .rsplit('/')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        match path.as_str() {
            "/" => TestResponse::html("<title>home</title><a href=/a/1>a</a><a href=/b/1>b</a>"),
            p if p.starts_with("/a/") && n < 30 => TestResponse::html(format!(
                "<title>a{n}</title><a href=/a/{}>next</a><a href=/b/{n}>b</a>",
                n + 1
            )),
            _ => TestResponse::html(format!("<title>{path}</title>")),
        }
    }))
}

/// Ctrl-C is a run stopped half-way; `--max-pages` stops one as surely and
/// without a race, and a resume treats both alike (the cycle goes on).
#[test]
fn a_resume_keeps_scope_delay_and_output() {
    let server = two_sections();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let output = dir.path().join("out.jsonl");
    let seed = server.url("/");
    let out = run(
        legcrawl(
            &data,
            &[
                "crawl",
                &seed,
                "--allow",
                "/a/",
                "--max-depth",
                "4",
                "--per-host",
                "1",
                "--delay",
                "60ms",
                "--output",
                output.to_str().unwrap(),
                "--max-pages",
                "3",
            ],
        ),
        LIMIT,
    );
    assert_ok("legcrawl", &out);
    assert!(
        stderr(&out).contains(&format!(
            "resume with: legcrawl crawl --data {}",
            data.display()
        )),
        "{}",
        stderr(&out)
    );
    // The resume gives nothing but the state.
    let out = run(legcrawl(&data, &["crawl"]), LIMIT);
    assert_ok("legcrawl", &out);
    assert_eq!(change_lines(&out), Vec::<String>::new());
    let hits = server.all_hits();
    let outside: Vec<_> = hits
        .iter()
        .filter(|(path, _)| path.starts_with("/b/") || path.starts_with("/a/5"))
        .collect();
    assert!(
        outside.is_empty(),
        "fetched outside /a/ or deeper than 4: {outside:?}"
    );
    assert_eq!(server.hits("/a/4"), 1, "the crawl went on to depth 4");
    // The delay held over both runs, as the server saw the requests.
    let log: Vec<_> = server
        .log()
        .into_iter()
        .filter(|l| l.target != "/robots.txt")
        .collect();
    let judged = judge(&log, 1, Duration::from_millis(60));
    assert_eq!(judged.failure(Duration::from_millis(60)), None);
    // The output kept growing: every item is in it, once.
    let items = dump_items(&data);
    assert_eq!(items.len(), 5, "/, /a/1 to /a/4");
    let written = parse_lines(&std::fs::read(&output).unwrap());
    let mut paths: Vec<String> = written.iter().map(item_path).collect();
    paths.sort();
    assert_eq!(paths, ["/", "/a/1", "/a/2", "/a/3", "/a/4"]);
    // Both runs ran job version 1.
    let jobs: Vec<_> = dump_runs(&data).iter().map(|r| r["job"].clone()).collect();
    assert_eq!(jobs, [serde_json::json!(1), serde_json::json!(1)]);
}

#[test]
fn a_setting_given_changes_the_job_from_that_run_on_one_line_each() {
    let server = two_sections();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let seed = server.url("/");
    let first = ["crawl", &seed, "--allow", "/a/", "--delay", "30ms"];
    assert_ok("legcrawl", &run(legcrawl(&data, &first), LIMIT));
    let out = run(
        legcrawl(&data, &["crawl", "--delay", "10ms", "--deny", "/a/2"]),
        LIMIT,
    );
    assert_ok("legcrawl", &out);
    assert_eq!(
        change_lines(&out),
        [
            "legcrawl: job 1 -> 2: scope.deny: [] -> [\"/a/2\"]",
            "legcrawl: job 1 -> 2: politeness.delay: 30ms -> 10ms",
        ]
    );
    // The same flags again change nothing; a run without them keeps them.
    let out = run(
        legcrawl(&data, &["crawl", "--delay", "10ms", "--deny", "/a/2"]),
        LIMIT,
    );
    assert_eq!(change_lines(&out), Vec::<String>::new());
    assert_ok("legcrawl", &run(legcrawl(&data, &["crawl"]), LIMIT));
    let jobs: Vec<_> = dump_runs(&data).iter().map(|r| r["job"].clone()).collect();
    assert_eq!(jobs, [1, 2, 2, 2].map(|v| serde_json::json!(v)));
    // Each version is kept: run 1's says 30ms, the newest 10ms.
    let out = run(legcrawl(&data, &["dump", "job", "--run", "1"]), LIMIT);
    assert_ok("legcrawl", &out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("delay = \"30ms\""), "{text}");
    let out = run(legcrawl(&data, &["dump", "job"]), LIMIT);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("delay = \"10ms\""), "{text}");
    assert!(text.contains("deny = [\"/a/2\"]"), "{text}");
    let out = run(legcrawl(&data, &["dump", "job", "--run", "9"]), LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn dump_job_is_a_crawl_file_that_gives_the_same_job_back() {
    let server = two_sections();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let seed = server.url("/");
    let output = dir.path().join("items.jsonl");
    let out = run(
        legcrawl(
            &data,
            &[
                "crawl",
                &seed,
                "--bloom-bits",
                "16",
                "--allow",
                "/a/",
                "--max-depth",
                "2",
                "--delay",
                "5ms",
                "--per-host",
                "3",
                "--timeout",
                "4500ms",
                "--max-body",
                "5MB",
                "--user-agent",
                "jobtest/1",
                "--revisit-after",
                "12h",
                "--revisit",
                "/a/1$",
                "--output",
                output.to_str().unwrap(),
            ],
        ),
        LIMIT,
    );
    assert_ok("legcrawl", &out);
    let dumped = run(legcrawl(&data, &["dump", "job"]), LIMIT);
    assert_ok("legcrawl", &dumped);
    let file = dir.path().join("job.toml");
    std::fs::write(&file, &dumped.stdout).unwrap();
    let text = String::from_utf8_lossy(&dumped.stdout).into_owned();
    for expected in [
        "max_body = \"5MB\"",
        "timeout = \"4s500ms\"",
        "user_agent = \"jobtest/1\"",
        "bloom_bits = 16",
    ] {
        assert!(text.contains(expected), "{expected} in {text}");
    }
    // `--revisit-after` is an option of one run: not in the job.
    assert!(!text.contains("after = \"12h\""), "{text}");
    // The file as the job: nothing changes.
    let out = run(
        legcrawl(&data, &["crawl", "--config", file.to_str().unwrap()]),
        LIMIT,
    );
    assert_ok("legcrawl", &out);
    assert_eq!(change_lines(&out), Vec::<String>::new());
    // A new state from the file has the same job.
    let other = dir.path().join("other");
    assert_ok(
        "legcrawl",
        &run(
            legcrawl(&other, &["crawl", "--config", file.to_str().unwrap()]),
            LIMIT,
        ),
    );
    let again = run(legcrawl(&other, &["dump", "job", "--json"]), LIMIT);
    let before = run(legcrawl(&data, &["dump", "job", "--json"]), LIMIT);
    let text = |out: &Output| {
        let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        value["text"].as_str().unwrap().to_owned()
    };
    assert_eq!(text(&again), text(&before));
}

/// Crash point `run.job`: a run that changes the job and dies before its
/// begin is written stores neither; the next run without the flag runs the
/// job as it was.
#[test]
fn a_crash_between_the_job_and_the_run_begin_stores_neither() {
    let server = two_sections();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let seed = server.url("/");
    assert_ok(
        "legcrawl",
        &run(
            legcrawl(&data, &["crawl", &seed, "--allow", "/a/1$"]),
            LIMIT,
        ),
    );
    let mut crash = legcrawl(&data, &["crawl", "--allow", "/b/"]);
    crash.env("LEGCRAWL_CRASH_AT", "run.job:1");
    let out = run(crash, LIMIT);
    assert!(!out.status.success(), "{}", stderr(&out));
    assert_eq!(change_lines(&out).len(), 1, "{}", stderr(&out));
    assert_eq!(dump_runs(&data).len(), 1, "no run 2 was begun");
    let out = run(legcrawl(&data, &["crawl"]), LIMIT);
    assert_ok("legcrawl", &out);
    assert_eq!(change_lines(&out), Vec::<String>::new());
    let jobs: Vec<_> = dump_runs(&data).iter().map(|r| r["job"].clone()).collect();
    assert_eq!(jobs, [serde_json::json!(1), serde_json::json!(1)]);
    assert_eq!(server.hits("/b/1"), 0);
}

/// A state an earlier build wrote has runs and no job: the one-time job
/// creation went with the other upgrades (issue 28), so the crawl refuses it
/// in one line naming the last build that makes its job, exit 2, and begins
/// no run.
#[test]
fn a_state_without_a_job_is_refused_in_one_line() {
    let server = two_sections();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    {
        // What an earlier build left: a run without a job, and a seed.
        let options = legcrawl::store::OpenOptions {
            create: true,
            begin_run: true,
            bloom_bits: Some(16),
            ..Default::default()
        };
        let mut state = legcrawl::store::State::open(&data, &options).unwrap();
        state.add_seeds(&[server.url("/")], &[]).unwrap();
        state
            .end_run(legcrawl::store::records::RunOutcome::Limit)
            .unwrap();
    }
    let out = run(legcrawl(&data, &["crawl"]), LIMIT);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("no stored job")
            && err.contains(legcrawl::store::LAST_BUILD_READING_OLD_FORMATS),
        "{err}"
    );
    assert_eq!(dump_runs(&data).len(), 1, "no run begun");
    assert_eq!(server.hits("/"), 0);
}

#[test]
fn crawl_exit_four_when_every_request_fails_on_the_network_embedded() {
    crawl_exit_four_when_every_request_fails_on_the_network(Mode::Embedded);
}

#[test]
fn crawl_exit_four_when_every_request_fails_on_the_network_shared() {
    crawl_exit_four_when_every_request_fails_on_the_network(Mode::Shared);
}

/// Exit 4 when every request failed on the network, as wget: a refused
/// connection, and a TLS handshake that fails.
fn crawl_exit_four_when_every_request_fails_on_the_network(mode: Mode) {
    let Some(refused_crawl) = Crawler::start(mode, "crawl_exit_four") else {
        return;
    };
    // A port nobody listens on: every request is refused.
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        format!("http://127.0.0.1:{port}/")
    };
    let out = refused_crawl.crawl(&[&refused]);
    assert_eq!(out.status.code(), Some(4), "{mode:?}: {}", stderr(&out));
    assert!(
        stderr(&out).contains("failed on the network"),
        "{mode:?}: {}",
        stderr(&out)
    );
    // https:// to a plain-HTTP port: every TLS handshake fails.
    let server = two_sections();
    let tls = server.url("/").replace("http://", "https://");
    let out = refused_crawl.another("tls").crawl(&[&tls]);
    assert_eq!(out.status.code(), Some(4), "{mode:?}: {}", stderr(&out));
}

#[test]
fn crawl_exit_codes_two_and_zero_embedded() {
    crawl_exit_codes_two_and_zero(Mode::Embedded);
}

#[test]
fn crawl_exit_codes_two_and_zero_shared() {
    crawl_exit_codes_two_and_zero(Mode::Shared);
}

/// Bad input exits 2 before any state is made; a run that fetched pages, and
/// one that found nothing due, exit 0.
fn crawl_exit_codes_two_and_zero(mode: Mode) {
    let Some(zero) = Crawler::start(mode, "crawl_exit_codes_two_and_zero") else {
        return;
    };
    let server = two_sections();
    // --timeout 0 is refused at once, before a state is made.
    let out = run(
        zero.command(&[&server.url("/"), "--timeout", "0"]),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!zero.exists());
    // Pages fetched: 0, and the nothing-due run after it too.
    let ok = zero.another("ok");
    let seed = server.url("/a/29");
    assert_eq!(ok.crawl(&[&seed]).status.code(), Some(0));
    let out = ok.crawl(&["--revisit-after", "never"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
