//! A state on a file system that refuses writes: mounted read-only, or full.
//! Either way the crawl says so in words, on one line, and names the file
//! system, not the user (root on a read-only mount is not helped by being
//! the owner). Needs root and mount(8) for a small tmpfs; without them the
//! tests skip loudly, and `LEGCRAWL_REQUIRE_TMPFS=1` makes a skip a failure.

use std::path::Path;
use std::process::Output;

use crate::damage::SmallFs;
use crate::support::cli::{self, LIMIT, legcrawl, stderr};
use crate::support::{Site, TestServer};

/// The lines of a run's stderr that are its error (`legcrawl: ...`).
fn error_lines(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("legcrawl: "))
        .map(str::to_owned)
        .collect()
}

/// True when `text` shows an I/O error in Rust's debug form.
fn debug_form(text: &str) -> bool {
    [
        "Os {",
        "Custom {",
        "kind:",
        "StorageFull",
        "ReadOnlyFilesystem",
    ]
    .iter()
    .any(|form| text.contains(form))
}

/// A small crawl into `state` (a few pages of `server`).
fn small_crawl(state: &Path, server: &TestServer) {
    let seed = server.url("/");
    let args = ["crawl", &seed, "--bloom-bits", "16", "--max-pages", "10"];
    let out = cli::run(legcrawl(state, &args), LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_state_on_a_read_only_mount_names_the_file_system_not_the_user() {
    let Some(fs) = SmallFs::mount("8m", "a_state_on_a_read_only_mount") else {
        return;
    };
    let site = Site::generate(40, 5);
    let server = TestServer::start(site.handler());
    let state = fs.path().join("state");
    small_crawl(&state, &server);
    let remounted = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(fs.path())
        .status()
        .is_ok_and(|s| s.success());
    assert!(remounted, "remount read-only");
    let new_state = fs.path().join("new");
    let seed = server.url("/");
    for args in [
        vec!["dump", "summary"],
        vec!["crawl"],
        vec!["dump", "items"],
    ] {
        let out = cli::run(legcrawl(&state, &args), LIMIT);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains("read-only file system"), "{args:?}: {err}");
        assert!(!err.contains("owner"), "{args:?}: {err}");
        assert!(!err.contains("this user"), "{args:?}: {err}");
    }
    // A state to be made there: the same words.
    let out = cli::run(legcrawl(&new_state, &["crawl", &seed]), LIMIT);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("read-only file system"), "{err}");
}

#[test]
fn a_full_state_disk_is_one_line_of_words() {
    let Some(fs) = SmallFs::mount("4m", "a_full_state_disk") else {
        return;
    };
    let site = Site::generate(400, 6);
    let server = TestServer::start(site.handler());
    let state = fs.path().join("state");
    small_crawl(&state, &server);
    // Fill the file system to the last byte: halving chunks, then single pages.
    let mut chunk: usize = 4 << 20;
    let mut n = 0;
    while chunk >= 1 && n < 200 {
        let written = std::fs::write(fs.path().join(format!("filler{n}")), vec![1u8; chunk]);
        if written.is_err() {
            let _ = std::fs::remove_file(fs.path().join(format!("filler{n}")));
            chunk /= 2;
        }
        n += 1;
    }
    let mut command = legcrawl(&state, &["crawl"]);
    // As a user runs it: warnings shown too.
    command.env_remove("RUST_LOG");
    let out = cli::run(command, LIMIT);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!debug_form(&err), "an error in debug form: {err}");
    let lines = error_lines(&out);
    assert_eq!(lines.len(), 1, "one error line: {err}");
    assert!(lines[0].contains("No space left on device"), "{err}");
    assert!(
        lines[0].contains(&state.display().to_string()),
        "names the state: {err}"
    );
    // The run's end not recorded for the same full disk is not said twice.
    assert!(
        !err.contains("could not be recorded as failed"),
        "one cause, one line: {err}"
    );
}
