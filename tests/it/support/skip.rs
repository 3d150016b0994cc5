//! A test that needs a program this machine lacks (redis-server, warcio, a
//! proxy, a browser) passes without it, but says so where it is seen.
//!
//! libtest captures what a passing test prints with `eprintln!`, so a skip
//! said that way is never seen. [`skipped`] writes to the process's standard
//! error itself, past the capture, so the line stands among the test
//! results of a bare `cargo test`. A variable such as
//! `LEGCRAWL_REQUIRE_REDIS=1` (which `.ci/run` sets) turns the skip into a
//! failure instead.

use std::io::Write;

/// Fails the test when `require_var` is `1`; else writes a loud `SKIPPED`
/// line naming `what` did not run and `why`, outside libtest's capture.
pub fn skipped(require_var: &str, what: &str, why: &str) {
    let required = std::env::var(require_var).is_ok_and(|v| v == "1");
    assert!(!required, "{require_var}=1 but {why}");
    let line = format!(
        "\n*** SKIPPED: {what} did not run: {why} (set {require_var}=1 to fail instead) ***\n"
    );
    // Not `eprintln!`: libtest captures that for passing tests.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
