//! One test body, both frontiers: a [`Crawler`] runs `legcrawl crawl` and its
//! `dump` views either on an embedded state (`--data DIR`, [`Mode::Embedded`])
//! or on a shared crawl in a real `redis-server` (`--shared URL --name NAME`,
//! [`Mode::Shared`]), so that a test written once against it checks both.
//!
//! A shared [`Crawler`] holds [`workers::serial`] while it lives (shared tests
//! run one at a time) and is `None` when `redis-server` is missing (a loud
//! `SKIPPED` line, or a failure under `LEGCRAWL_REQUIRE_REDIS=1`). Both modes
//! log at `RUST_LOG=error`, so stderr means the same in both.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::rc::Rc;
use std::time::Duration;

use super::cli;
use super::redis::RedisServer;
use super::workers::{self, Crawl};

/// Where a crawl keeps its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The embedded state: `--data DIR`.
    Embedded,
    /// A shared crawl in Redis: `--shared redis://127.0.0.1:PORT/0 --name NAME`.
    Shared,
}

/// The state a crawl under test runs on, in either [`Mode`]: builds its
/// `crawl` and `dump` commands and reads its views.
pub struct Crawler {
    mode: Mode,
    /// Temp dir for outputs; the embedded state is its `state` folder.
    dir: tempfile::TempDir,
    /// Shared mode: the crawl (name, Redis URL, the workers' directory).
    shared: Option<Crawl>,
    /// Shared mode: the server, stopped when its last crawler drops.
    redis: Option<Rc<RedisServer>>,
    /// Shared mode: held so that shared tests do not share the cores.
    _serial: Option<Rc<workers::Serial>>,
}

impl Crawler {
    /// A new, empty crawl for test `test` in `mode`; `None` (skipped) when
    /// `mode` is shared and `redis-server` is missing.
    pub fn start(mode: Mode, test: &str) -> Option<Crawler> {
        let dir = tempfile::tempdir().expect("temp dir");
        let (shared, redis, serial) = match mode {
            Mode::Embedded => (None, None, None),
            Mode::Shared => {
                let serial = workers::serial();
                let redis = RedisServer::start(test)?;
                let crawl = Crawl::new(&redis.url(), "crawl");
                (Some(crawl), Some(Rc::new(redis)), Some(Rc::new(serial)))
            }
        };
        Some(Crawler {
            mode,
            dir,
            shared,
            redis,
            _serial: serial,
        })
    }

    /// Another, empty crawl in the same mode (in shared mode in the same
    /// Redis, called `name`), with its own [`Crawler::dir`].
    pub fn another(&self, name: &str) -> Crawler {
        Crawler {
            mode: self.mode,
            dir: tempfile::tempdir().expect("temp dir"),
            shared: self
                .redis
                .as_ref()
                .map(|redis| Crawl::new(&redis.url(), name)),
            redis: self.redis.clone(),
            _serial: self._serial.clone(),
        }
    }

    /// The mode this crawler runs in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// A temp dir that lives as long as the crawler, for outputs and files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `path` under [`Crawler::dir`], as a string argument.
    pub fn file(&self, name: &str) -> String {
        self.dir()
            .join(name)
            .to_str()
            .expect("UTF-8 path")
            .to_owned()
    }

    /// The embedded state directory (`None` in shared mode).
    pub fn data(&self) -> Option<PathBuf> {
        (self.mode == Mode::Embedded).then(|| self.dir().join("state"))
    }

    /// The Redis server of a shared crawl (`None` when embedded).
    pub fn redis(&self) -> Option<&RedisServer> {
        self.redis.as_deref()
    }

    /// The shared crawl (its name, key prefix and workers' directory; `None`
    /// when embedded).
    pub fn shared(&self) -> Option<&Crawl> {
        self.shared.as_ref()
    }

    /// Whether the crawl has any state: the embedded state directory exists,
    /// or Redis holds a key of the shared crawl.
    pub fn exists(&self) -> bool {
        match (&self.shared, &self.redis) {
            (Some(crawl), Some(redis)) => !redis.keys(&format!("{}*", crawl.prefix())).is_empty(),
            _ => self.dir().join("state").exists(),
        }
    }

    /// `legcrawl crawl ARGS` plus the state's flags, not yet run.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = match &self.shared {
            None => cli::crawl_command(&self.dir().join("state"), args),
            Some(crawl) => crawl.crawl_command(args),
        };
        cmd.env("RUST_LOG", "error");
        cmd
    }

    /// Starts `crawl ARGS` `kills` times and kills each run with `kill -9` a
    /// random moment (under `max_ms`, drawn from `rng`) after the round's
    /// first request, as `requests` (a server's request count) shows it; a
    /// new shared worker first waits out its killed predecessor's leases.
    /// Asserts each run was still going when killed.
    pub fn kill_nine_rounds(
        &self,
        args: &[&str],
        kills: u64,
        requests: impl Fn() -> u64,
        rng: &mut u64,
        max_ms: u64,
    ) {
        for round in 0..kills {
            let mut child = self
                .command(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("spawn legcrawl");
            let at_start = requests();
            super::wait_until(&format!("a request in round {round}"), cli::LIMIT, || {
                requests() > at_start
            });
            std::thread::sleep(Duration::from_millis(super::splitmix64(rng) % max_ms));
            // The kill must land mid-crawl: the run still going.
            assert!(
                child.try_wait().expect("poll").is_none(),
                "round {round}: the run ended before its kill"
            );
            child.kill().expect("kill -9");
            let status = child.wait().expect("wait");
            eprintln!(
                "round {round}: {status}, {} requests in the round, {} so far",
                requests() - at_start,
                requests()
            );
        }
    }

    /// `crawl ARGS` run to completion (at most [`cli::LIMIT`]).
    pub fn crawl(&self, args: &[&str]) -> Output {
        cli::run(self.command(args), cli::LIMIT)
    }

    /// [`Crawler::crawl`], asserting exit 0.
    pub fn crawl_ok(&self, args: &[&str]) -> Output {
        let out = self.crawl(args);
        cli::assert_ok(&format!("{:?} crawl {args:?}", self.mode), &out);
        out
    }

    /// `legcrawl dump ARGS` on this crawl, run to completion.
    pub fn dump_output(&self, args: &[&str]) -> Output {
        match &self.shared {
            None => cli::run(
                cli::legcrawl(&self.dir().join("state"), &[&["dump"], args].concat()),
                cli::LIMIT,
            ),
            Some(crawl) => crawl.dump_output(args),
        }
    }

    /// `legcrawl serve` on this crawl (a loopback port), once it listens.
    pub fn serve(&self) -> super::serve::Serve {
        match &self.shared {
            None => super::serve::Serve::start(&self.dir().join("state"), &[]),
            Some(crawl) => {
                let mut cmd = Command::new(cli::bin());
                cmd.args(["serve", "--listen", "127.0.0.1:0", "--shared"])
                    .arg(&crawl.redis)
                    .arg("--name")
                    .arg(&crawl.name)
                    .env("RUST_LOG", "warn")
                    .env_remove("REDISCLI_AUTH");
                super::serve::Serve::spawn(cmd)
            }
        }
    }

    /// `dump ARGS`, asserting exit 0; its stdout.
    pub fn dump(&self, args: &[&str]) -> Vec<u8> {
        let out = self.dump_output(args);
        cli::assert_ok(&format!("{:?} dump {args:?}", self.mode), &out);
        out.stdout
    }

    /// `dump items`, parsed.
    pub fn items(&self) -> Vec<serde_json::Value> {
        cli::parse_lines(&self.dump(&["items"]))
    }

    /// The path (with query) of every item of `dump items`.
    pub fn item_paths(&self) -> Vec<String> {
        self.items().iter().map(cli::item_path).collect()
    }

    /// `dump summary --json`, parsed.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::from_slice(&self.dump(&["summary", "--json"])).expect("summary JSON")
    }

    /// `dump runs --json`, parsed: one record per run.
    pub fn runs(&self) -> Vec<serde_json::Value> {
        cli::parse_lines(&self.dump(&["runs", "--json"]))
    }
}
