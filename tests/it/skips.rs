//! Issue 27: under the README's bare `cargo test --release`, on a machine
//! without a program a test needs, the skip is seen. The test binary is run
//! again on one Redis test, with `redis-server` made unfindable, and libtest's
//! output capture on as in a plain run: the `SKIPPED` line must be in what the
//! user sees, and `LEGCRAWL_REQUIRE_REDIS=1` must turn it into a failure.

use std::process::{Command, Output};
use std::time::Duration;

use crate::support::cli::run;
use crate::support::redis::{REQUIRE_VAR, SERVER_VAR};

/// A test that needs `redis-server` and skips without it.
const NEEDS_REDIS: &str = "shared_startup::sigterm_right_after_a_worker_connects_exits_130";

/// This test binary, running only [`NEEDS_REDIS`], without `redis-server`.
fn without_redis(require: bool) -> Output {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args(["--exact", NEEDS_REDIS, "--test-threads=1"])
        .env(SERVER_VAR, "/nonexistent/redis-server")
        .env_remove(REQUIRE_VAR);
    if require {
        cmd.env(REQUIRE_VAR, "1");
    }
    run(cmd, Duration::from_secs(60))
}

#[test]
fn a_skip_is_seen_under_a_bare_cargo_test_and_fails_when_required() {
    let out = without_redis(false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the test did not run: {stdout}"
    );
    assert!(
        stderr.contains("*** SKIPPED: ") && stderr.contains("redis-server not found"),
        "the skip is hidden:\nstdout: {stdout}\nstderr: {stderr}"
    );

    let out = without_redis(true);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("1 failed"), "{stdout}");
    assert!(stdout.contains(&format!("{REQUIRE_VAR}=1")), "{stdout}");
}
