//! Worker processes of one shared crawl (`legcrawl crawl --shared ... --name
//! ...`), and `legcrawl dump --shared` on it.
//!
//! A [`Crawl`] names one crawl in one Redis and owns a temp dir: each worker
//! runs with it as its working directory (so a worker that wrongly writes a
//! local state is seen, [`Crawl::local_files`]) and writes its stderr to
//! `worker-N.log` there, whose tails go into failure messages. Every child is
//! killed when the [`Crawl`] drops, so a failing or timed-out test leaves no
//! worker behind. Also the checks every shared test makes on a [`MultiSite`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use super::assert_each_once;
use super::cli;
use super::hosts::{MultiSite, item_key};

/// How long a `dump --shared` may take.
const DUMP_LIMIT: Duration = Duration::from_secs(60);

/// One shared crawl under test.
pub struct Crawl {
    /// `redis://127.0.0.1:PORT/DB`.
    pub redis: String,
    /// `--name`.
    pub name: String,
    dir: tempfile::TempDir,
    /// Running workers, by slot; `None` once waited for.
    workers: Vec<Option<Child>>,
    /// Workers started so far (numbers the logs).
    started: usize,
    /// Log file of each slot's current process.
    logs: Vec<PathBuf>,
}

impl Crawl {
    /// A crawl called `name` in the Redis at `redis`.
    pub fn new(redis: &str, name: &str) -> Crawl {
        Crawl {
            redis: redis.to_owned(),
            name: name.to_owned(),
            dir: tempfile::tempdir().expect("worker dir"),
            workers: Vec::new(),
            started: 0,
            logs: Vec::new(),
        }
    }

    /// The key prefix every key of this crawl has: `legcrawl:{NAME}:`.
    pub fn prefix(&self) -> String {
        format!("legcrawl:{{{}}}:", self.name)
    }

    /// `legcrawl crawl ARGS --shared REDIS --name NAME` in the crawl's dir.
    pub fn crawl_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(cli::bin());
        cmd.arg("crawl")
            .args(args)
            .arg("--shared")
            .arg(&self.redis)
            .arg("--name")
            .arg(&self.name)
            .current_dir(self.dir.path())
            .env("RUST_LOG", "warn")
            .env_remove("REDISCLI_AUTH");
        cmd
    }

    /// Starts a worker with `args` (seeds and options) in a new slot; returns
    /// the slot.
    pub fn spawn(&mut self, args: &[&str]) -> usize {
        self.workers.push(None);
        self.logs.push(PathBuf::new());
        let slot = self.workers.len() - 1;
        self.respawn(slot, args);
        slot
    }

    /// Starts a worker with `args` in `slot` (whose previous process must be
    /// gone).
    pub fn respawn(&mut self, slot: usize, args: &[&str]) {
        assert!(self.workers[slot].is_none(), "slot {slot} still running");
        self.started += 1;
        let log = self
            .dir
            .path()
            .join(format!("worker-{slot}-{}.log", self.started));
        let file = std::fs::File::create(&log).expect("worker log");
        let child = self
            .crawl_command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn legcrawl worker");
        self.workers[slot] = Some(child);
        self.logs[slot] = log;
    }

    /// Slots so far (running or not).
    pub fn slots(&self) -> usize {
        self.workers.len()
    }

    /// The pid of the process in `slot`.
    pub fn pid(&self, slot: usize) -> u32 {
        self.workers[slot].as_ref().expect("running").id()
    }

    /// The exit status of `slot` if it has ended (then the slot is free).
    pub fn try_wait(&mut self, slot: usize) -> Option<ExitStatus> {
        let child = self.workers[slot].as_mut()?;
        let status = child.try_wait().expect("poll worker")?;
        self.workers[slot] = None;
        Some(status)
    }

    /// kill -9 on `slot`; its exit status (a worker that had already exited
    /// shows its own).
    pub fn kill_nine(&mut self, slot: usize) -> ExitStatus {
        let mut child = self.workers[slot].take().expect("running");
        let _ = child.kill();
        child.wait().expect("wait killed worker")
    }

    /// Waits at most `limit` for `slot` to end; panics (with the logs) after.
    pub fn wait(&mut self, slot: usize, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait(slot) {
                return status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "worker {slot} did not finish within {limit:?}\n{}",
                    self.logs_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for every running worker, all within `limit`; asserts each exited 0.
    pub fn wait_all_ok(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        for slot in 0..self.workers.len() {
            if self.workers[slot].is_none() {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let status = self.wait(slot, left.max(Duration::from_millis(1)));
            assert_eq!(
                status.code(),
                Some(0),
                "worker {slot} ended {status}\n{}",
                self.logs_tail()
            );
        }
    }

    /// The last lines of every worker's current log, for failure messages.
    pub fn logs_tail(&self) -> String {
        let mut out = String::new();
        for (slot, log) in self.logs.iter().enumerate() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("--- worker {slot} ({}):\n", log.display()));
            out.push_str(&lines[lines.len().saturating_sub(15)..].join("\n"));
            out.push('\n');
        }
        out
    }

    /// The text of `slot`'s current log.
    pub fn log(&self, slot: usize) -> String {
        std::fs::read_to_string(&self.logs[slot]).unwrap_or_default()
    }

    /// Files in the workers' working directory other than their logs: a
    /// shared crawl keeps no local state.
    pub fn local_files(&self) -> Vec<(String, u64)> {
        super::listing(self.dir.path())
            .into_iter()
            .filter(|(path, _)| !path.ends_with(".log"))
            .collect()
    }

    /// `legcrawl dump --shared REDIS --name NAME ARGS`, run to completion.
    pub fn dump_output(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(cli::bin());
        cmd.arg("dump")
            .arg("--shared")
            .arg(&self.redis)
            .arg("--name")
            .arg(&self.name)
            .args(args)
            .current_dir(self.dir.path())
            .env("RUST_LOG", "error")
            .env_remove("REDISCLI_AUTH");
        cli::run(cmd, DUMP_LIMIT)
    }

    /// `dump ARGS`, asserting success; its stdout.
    pub fn dump(&self, args: &[&str]) -> Vec<u8> {
        let out = self.dump_output(args);
        assert!(
            out.status.success(),
            "dump --shared {args:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// `dump summary --json`, parsed.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::from_slice(&self.dump(&["summary", "--json"])).expect("summary JSON")
    }

    /// `dump items`, parsed.
    pub fn items(&self) -> Vec<serde_json::Value> {
        cli::parse_lines(&self.dump(&["items"]))
    }

    /// The workers' directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Crawl {
    fn drop(&mut self) {
        for child in self.workers.iter_mut().filter_map(Option::as_mut) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How many shared-crawl tests run their workers at once. Each runs a
/// redis-server and up to three workers; the suite uses about a third of one
/// core on 2 cores, so two at a time keep their timings and kill moments
/// meaningful while they no longer run one after another.
const SHARED_AT_ONCE: usize = 2;

/// Held by each shared-crawl test that runs workers, so that at most
/// [`SHARED_AT_ONCE`] of them share the machine's cores.
pub struct Serial(());

/// Waits for a place among the [`SHARED_AT_ONCE`] shared-crawl tests.
pub fn serial() -> Serial {
    let mut running = SHARED
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    while *running >= SHARED_AT_ONCE {
        running = SHARED
            .1
            .wait(running)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }
    *running += 1;
    Serial(())
}

impl Drop for Serial {
    fn drop(&mut self) {
        let mut running = SHARED
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *running -= 1;
        SHARED.1.notify_one();
    }
}

/// The shared-crawl tests running, and their wake-up.
static SHARED: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// Asserts that `dump --shared items` has each page of `site` exactly once.
pub fn assert_items_once(crawl: &Crawl, site: &MultiSite) {
    let keys: Vec<String> = crawl.items().iter().map(item_key).collect();
    assert_each_once(&keys, &site.expected(), "dump --shared items");
}

/// Asserts that the servers saw each page of `site` exactly once and nothing
/// else (robots.txt aside).
pub fn assert_fetched_once(site: &MultiSite) {
    let fetches = site.fetches();
    let twice: Vec<(&String, &u64)> = fetches.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{} pages fetched more than once: {:?}",
        twice.len(),
        &twice[..twice.len().min(10)]
    );
    let keys: Vec<String> = fetches.keys().cloned().collect();
    assert_each_once(&keys, &site.expected(), "pages the servers answered");
}

/// Waits (at most a minute) until the servers of `site` have answered `n`
/// requests; fails at once if a worker of `crawl` ends meanwhile.
pub fn wait_for_requests(site: &MultiSite, n: u64, crawl: &mut Crawl) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while site.requests() < n {
        for slot in 0..crawl.slots() {
            if let Some(status) = crawl.try_wait(slot) {
                panic!(
                    "worker {slot} ended {status} after {} requests\n{}",
                    site.requests(),
                    crawl.logs_tail()
                );
            }
        }
        assert!(
            Instant::now() < deadline,
            "only {} requests after 60 s\n{}",
            site.requests(),
            crawl.logs_tail()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// For each host of `site`: its requests after `healed` and the longest
/// time it went without one from `healed` on, up to its last request (after
/// it the host had nothing left), from the servers' request logs.
pub fn idle_after(site: &MultiSite, healed: Instant) -> Vec<(usize, Duration)> {
    site.servers()
        .iter()
        .map(|server| {
            let mut starts: Vec<Instant> = server.log().iter().map(|l| l.start).collect();
            starts.sort();
            let mut last = healed;
            let mut idle = Duration::ZERO;
            let mut after = 0;
            for &start in starts.iter().filter(|&&s| s > healed) {
                idle = idle.max(start.saturating_duration_since(last));
                last = start;
                after += 1;
            }
            (after, idle)
        })
        .collect()
}
