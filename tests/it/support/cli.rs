//! Running the real `legcrawl` binary from tests, with bounded waits.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Path of the binary cargo built for this test run.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_legcrawl")
}

/// A `legcrawl` command with `--data` added after the subcommand.
pub fn legcrawl(data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg(args[0]).arg("--data").arg(data).args(&args[1..]);
    cmd.env("RUST_LOG", "error");
    cmd
}

/// How long one `legcrawl` run of [`crawl`], [`fetch`] or a `dump` view may
/// take before the test fails (the longest limit the test files used).
pub const LIMIT: Duration = Duration::from_secs(120);

/// The standard error of a finished run, as text (for failure messages).
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `legcrawl crawl --data DATA ARGS` (with `RUST_LOG=error`), not yet run.
pub fn crawl_command(data: &Path, args: &[&str]) -> Command {
    legcrawl(data, &[&["crawl"], args].concat())
}

/// `legcrawl crawl --data DATA ARGS` run to completion (at most [`LIMIT`]),
/// whatever its exit code.
pub fn crawl(data: &Path, args: &[&str]) -> Output {
    run(crawl_command(data, args), LIMIT)
}

/// [`crawl`], asserting it exited 0 (its stderr in the failure).
pub fn crawl_ok(data: &Path, args: &[&str]) -> Output {
    let out = crawl(data, args);
    assert_ok(&format!("crawl {args:?}"), &out);
    out
}

/// [`crawl`] with each variable of `env` set (`Some`) or removed (`None`)
/// first, e.g. `("RUST_LOG", None)` for the binary's default logging.
pub fn crawl_env(data: &Path, args: &[&str], env: &[(&str, Option<&str>)]) -> Output {
    let mut cmd = crawl_command(data, args);
    for (name, value) in env {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    run(cmd, LIMIT)
}

/// Asserts that `out` exited 0; `what` names the run, the failure shows its
/// stderr.
pub fn assert_ok(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what}: {}: {}",
        out.status,
        stderr(out)
    );
}

/// `legcrawl fetch ARGS` (with `RUST_LOG=error`) run to completion.
pub fn fetch(args: &[&str]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.arg("fetch").args(args).env("RUST_LOG", "error");
    run(cmd, LIMIT)
}

/// `dump runs --json`, parsed: one record per run, oldest first.
pub fn dump_runs(data: &Path) -> Vec<serde_json::Value> {
    let out = run(legcrawl(data, &["dump", "runs", "--json"]), LIMIT);
    assert_ok("dump runs", &out);
    parse_lines(&out.stdout)
}

/// `dump pages --json` (only the due ones with `due`), by item path.
pub fn dump_pages(data: &Path, due: bool) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut args = vec!["dump", "pages", "--json"];
    if due {
        args.push("--due");
    }
    let out = run(legcrawl(data, &args), LIMIT);
    assert_ok("dump pages", &out);
    parse_lines(&out.stdout)
        .into_iter()
        .map(|record| (item_path(&record), record))
        .collect()
}

/// The counter `name` of a run record of `dump runs --json` (0 when absent).
pub fn counter(run: &serde_json::Value, name: &str) -> u64 {
    run["counters"][name].as_u64().unwrap_or(0)
}

/// Asserts that `out` exited with `code` and said one line on stderr;
/// returns that line (trimmed). `what` names the run in failures.
pub fn one_line(what: &str, out: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line, got {err:?}");
    err
}

/// Runs to completion (at most `limit`), capturing output.
pub fn run(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn legcrawl");
    wait_output(child, limit)
}

/// Waits for a spawned child (with piped output) at most `limit`; kills it and
/// panics if it takes longer.
pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    // Drain the pipes while waiting, or a child with much to say blocks forever.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let status = wait_status(&mut child, limit);
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Waits for a child at most `limit`; kills it and panics if it takes longer.
pub fn wait_status(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("poll child") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("legcrawl did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends a signal to a process.
pub fn signal(pid: u32, signal: i32) {
    let rc = unsafe_kill(pid, signal);
    assert_eq!(rc, 0, "kill({pid}, {signal}) failed");
}

#[allow(unsafe_code)]
fn unsafe_kill(pid: u32, signal: i32) -> i32 {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid as libc::pid_t, signal) }
}

/// The items of `dump items`, parsed.
pub fn dump_items(data: &Path) -> Vec<serde_json::Value> {
    let out = run(legcrawl(data, &["dump", "items"]), Duration::from_secs(60));
    assert!(
        out.status.success(),
        "dump items failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_lines(&out.stdout)
}

/// The whole change feed, every record stored (`dump items --since-run 0`),
/// parsed: the versions a page's items had, and deletion records.
pub fn dump_feed(data: &Path) -> Vec<serde_json::Value> {
    let out = run(
        legcrawl(data, &["dump", "items", "--since-run", "0"]),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "dump items failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_lines(&out.stdout)
}

/// JSON lines → values.
pub fn parse_lines(bytes: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// `dump summary --json`, parsed.
pub fn dump_summary(data: &Path) -> serde_json::Value {
    let out = run(
        legcrawl(data, &["dump", "summary", "--json"]),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "dump summary failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("summary JSON")
}

/// The path (with query) of an item's `url`.
pub fn item_path(item: &serde_json::Value) -> String {
    let url = url::Url::parse(item["url"].as_str().expect("url field")).expect("item url parses");
    match url.query() {
        Some(q) if !q.is_empty() => format!("{}?{q}", url.path()),
        _ => url.path().to_owned(),
    }
}
