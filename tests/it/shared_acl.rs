//! Issue 25, ACL users: a worker and `dump --shared` work as an ACL user that
//! has exactly the commands and key pattern docs/shared.md lists.
//!
//! The test reads the `ACL SETUSER crawler …` line from docs/shared.md itself
//! (so the documented list is the tested one), makes that user on a real
//! `redis-server`, and crawls as it with the password in the URL, then reads
//! the crawl back with the password in `REDISCLI_AUTH`. The items are exact,
//! the worker exits 0, and its only complaint is that it could not check the
//! server's settings (no `+config|get`). A user without one of the listed
//! commands is refused: a line saying what was refused, exit 1.

use std::time::Duration;

use crate::support::assert_each_once;
use crate::support::cli::{parse_lines, run};
use crate::support::hosts::{self, MultiSite, args, item_key};
use crate::support::redis::{RedisServer, Resp};
use crate::support::workers::{Crawl, assert_fetched_once, serial};

/// Longest any one run may take.
const LIMIT: Duration = Duration::from_secs(180);
const PASSWORD: &str = "acl-pw-Q4w9";

/// The words of the documented `ACL SETUSER crawler …` line.
fn documented_acl() -> Vec<String> {
    let guide = include_str!("../../docs/shared.md");
    let line = guide
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("ACL SETUSER crawler "))
        .expect("docs/shared.md lists the ACL user's line");
    line.split_whitespace().map(str::to_owned).collect()
}

/// Makes the user from `words` (with the test's password).
fn set_user(redis: &RedisServer, words: &[String]) {
    let words: Vec<String> = words
        .iter()
        .map(|w| {
            if w == ">PASSWORD" {
                format!(">{PASSWORD}")
            } else {
                w.clone()
            }
        })
        .collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let reply = redis.command(&refs).expect("ACL SETUSER");
    assert_eq!(reply, Resp::Simple("OK".into()), "{refs:?}");
}

#[test]
fn an_acl_user_with_the_documented_commands_and_keys_crawls() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("shared_acl") else {
        return;
    };
    let words = documented_acl();
    assert!(words.contains(&"~legcrawl:*".to_owned()), "{words:?}");
    set_user(&redis, &words);
    let port = redis.port();
    let site = MultiSite::start(60, 2, 19, hosts::no_delay());
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "4"]);

    // A user without XADD (the completion script's) is refused at its first
    // completion.
    let lacking: Vec<String> = words.iter().filter(|w| *w != "+xadd").cloned().collect();
    set_user(&redis, &lacking);
    let url = format!("redis://crawler:{PASSWORD}@127.0.0.1:{port}/0");
    let lacking_crawl = Crawl::new(&url, "acl-lacking");
    // A site of its own: the pages it fetches are not the checked crawl's.
    let lacking_site = MultiSite::start(10, 1, 23, hosts::no_delay());
    let lacking_args = lacking_site.crawl_args();
    let lacking_argv = args(&lacking_args, &["--concurrency", "4"]);
    let out = run(lacking_crawl.crawl_command(&lacking_argv), LIMIT);
    let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    // Redis does not name a command refused inside a script.
    assert!(
        err.contains("refused completing a page") && err.contains("can't run this command"),
        "says what was refused: {err}"
    );
    assert!(!err.contains(PASSWORD), "{err}");

    // The documented user: the password in the URL.
    set_user(&redis, &words);
    let mut crawl = Crawl::new(&url, "acl");
    crawl.spawn(&argv);
    crawl.wait_all_ok(LIMIT);
    let log = crawl.log(0);
    assert!(!log.contains(PASSWORD), "{log}");
    for line in log.lines().filter(|l| l.contains("WARN")) {
        assert!(
            line.contains("CONFIG GET is not allowed"),
            "only the settings warning: {log}"
        );
    }

    // dump as the same user, the password in REDISCLI_AUTH.
    let mut dump = std::process::Command::new(crate::support::cli::bin());
    dump.args([
        "dump",
        "--shared",
        &format!("redis://crawler@127.0.0.1:{port}/0"),
    ])
    .args(["--name", "acl", "items"])
    .env("REDISCLI_AUTH", PASSWORD)
    .env("RUST_LOG", "error");
    let out = run(dump, LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keys: Vec<String> = parse_lines(&out.stdout).iter().map(item_key).collect();
    assert_each_once(
        &keys,
        &site.expected(),
        "dump --shared items as the ACL user",
    );
    assert_fetched_once(&site);

    // Every key the crawl made is under the user's pattern.
    let all = redis.keys("*");
    assert!(
        all.iter().all(|k| k.starts_with("legcrawl:{acl")),
        "{all:?}"
    );
}
