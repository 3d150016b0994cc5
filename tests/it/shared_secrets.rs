//! Issue 25, item 4: a shared crawl's Redis password is never printed, and it
//! may come from `REDISCLI_AUTH` instead of the URL.
//!
//! Against a real `redis-server --requirepass` (`support::redis`): a worker
//! given the password in the URL and one given it through `REDISCLI_AUTH` both
//! crawl; a wrong or missing password is one line and exit 1 (as an
//! unreachable server at start: the worker never joined the crawl, and no
//! state was touched); and no stdout or stderr of any run — the resume hint of
//! a run stopped by `--max-pages`, `dump`'s "no shared crawl" message, the
//! wrong-password errors — holds the password, and neither do the `warcinfo`
//! records of a worker's WARC files.

use std::process::Output;
use std::time::Duration;

use crate::support::cli::{self, run};
use crate::support::hosts::{self, MultiSite, args};
use crate::support::redis::RedisServer;
use crate::support::workers::{Crawl, serial};

/// Longest any one run may take.
const LIMIT: Duration = Duration::from_secs(120);
const PASSWORD: &str = "pw-Zq7xK2-s3cret";
const WRONG: &str = "not-the-Pw-9xx";

/// Asserts that neither the password nor `also` is in `out`'s stdout or
/// stderr; returns the stderr.
fn clean(what: &str, out: &Output, also: &[&str]) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    for secret in [PASSWORD].iter().chain(also) {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{what}: the password is printed\nstdout: {stdout}\nstderr: {stderr}"
        );
    }
    stderr
}

/// `out` failed with one line on stderr and `code`; returns that line.
fn one_line(what: &str, out: &Output, code: i32, also: &[&str]) -> String {
    clean(what, out, also);
    crate::support::cli::one_line(what, out, code)
}

#[test]
fn the_redis_password_works_from_the_url_or_rediscli_auth_and_is_never_printed() {
    let _serial = serial();
    let Some(redis) = RedisServer::start_with_password("redis_password", PASSWORD) else {
        return;
    };
    let port = redis.port();
    let with_password = format!("redis://:{PASSWORD}@127.0.0.1:{port}/0");
    let site = MultiSite::start(60, 2, 11, hosts::no_delay());
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "4"]);
    let url_crawl = Crawl::new(&with_password, "secret");
    let env_crawl = Crawl::new(&redis.url(), "secret");

    // The password in the URL; stopped by --max-pages: the resume hint. Its
    // WARC files name the crawl's server redacted.
    let warc = tempfile::tempdir().unwrap();
    let warc_dir = warc.path().join("warc");
    let warc_arg = warc_dir.to_str().unwrap();
    let mut cmd = url_crawl
        .crawl_command(&[argv.as_slice(), &["--max-pages", "5", "--warc", warc_arg]].concat());
    cmd.env("RUST_LOG", "info");
    let out = run(cmd, LIMIT);
    let err = clean("worker with the password in the URL", &out, &[]);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("resume with:"), "a resume hint: {err}");
    assert!(
        err.contains(&format!("redis://:***@127.0.0.1:{port}/0")),
        "the hint shows the URL redacted: {err}"
    );
    let records = crate::support::warc::read_dir(&warc_dir);
    let info = records
        .iter()
        .find(|r| r.kind() == "warcinfo")
        .expect("a warcinfo record");
    let info = String::from_utf8_lossy(&info.block);
    assert!(
        info.contains(&format!("shared: redis://:***@127.0.0.1:{port}/0")),
        "{info}"
    );
    for record in &records {
        let text = String::from_utf8_lossy(&record.block);
        assert!(!text.contains(PASSWORD), "the password is in a WARC record");
    }

    // The password from REDISCLI_AUTH, the URL without one: crawls the rest.
    let mut cmd = env_crawl.crawl_command(&[]);
    cmd.env("RUST_LOG", "info").env("REDISCLI_AUTH", PASSWORD);
    let out = run(cmd, LIMIT);
    let err = clean("worker with REDISCLI_AUTH", &out, &[]);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let summary = url_crawl.summary();
    assert_eq!(summary["frontier"], 0, "{summary}");
    assert_eq!(summary["items"], site.expected().len(), "{summary}");

    // A wrong password, in the URL or the environment; none at all.
    let wrong_url = format!("redis://:{WRONG}@127.0.0.1:{port}/0");
    let wrong = Crawl::new(&wrong_url, "secret");
    let err = one_line(
        "wrong password in the URL",
        &run(wrong.crawl_command(&argv), LIMIT),
        1,
        &[WRONG],
    );
    assert!(err.contains("password"), "{err}");
    let mut cmd = env_crawl.crawl_command(&argv);
    cmd.env("REDISCLI_AUTH", WRONG);
    let err = one_line("wrong REDISCLI_AUTH", &run(cmd, LIMIT), 1, &[WRONG]);
    assert!(err.contains("password"), "{err}");
    let err = one_line(
        "no password",
        &run(env_crawl.crawl_command(&argv), LIMIT),
        1,
        &[],
    );
    assert!(err.contains("REDISCLI_AUTH"), "{err}");
    let err = one_line(
        "dump with a wrong password",
        &wrong.dump_output(&["summary"]),
        1,
        &[WRONG],
    );
    assert!(err.contains("password"), "{err}");

    // dump's messages with the password in the URL.
    let typo = Crawl::new(&with_password, "no-such-crawl");
    let err = one_line(
        "dump of a crawl that is not there",
        &typo.dump_output(&["summary"]),
        2,
        &[],
    );
    assert!(err.contains("no shared crawl"), "{err}");
    let mut dump = std::process::Command::new(cli::bin());
    dump.args(["dump", "--shared", &redis.url(), "--name", "no-such-crawl"])
        .args(["summary"])
        .env("REDISCLI_AUTH", PASSWORD);
    let err = one_line(
        "dump with REDISCLI_AUTH, no crawl",
        &run(dump, LIMIT),
        2,
        &[],
    );
    assert!(err.contains("no shared crawl"), "{err}");
}
