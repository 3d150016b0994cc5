//! Command-line arguments (clap derive) and their dispatch.
//!
//! Two stages, as in ripgrep: raw flags here, validated into a
//! [`legcrawl::config::CrawlConfig`] by [`crawl`] before anything runs.
//!
//! Exit codes: 0 success; 1 a runtime failure (I/O, database, a full disk); 2 bad
//! input — a usage error, a bad URL, a directory that is not legcrawl state,
//! another format version, a busy state, a setting that cannot change, or a
//! damaged state that cannot be repaired (a damaged database, one that lost
//! committed data, a damaged Bloom filter in `bloom` mode: the state is left as
//! it is; retrying will not help); 130 interrupted (state saved). `crawl` adds 4
//! (every request failed on the network) and 8 (only error answers); `fetch`
//! has its own codes (see [`fetch`]).

mod access;
mod beside;
mod crawl;
mod dump;
mod dump_job;
mod dump_view;
mod export;
mod fetch;
mod help;
mod repair;
mod reset;
mod seeds;
mod serve;
mod stats;
pub mod stderr;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use legcrawl::engine::EngineError;
use legcrawl::store::StoreError;

/// A polite, incremental web crawler that resumes exactly.
#[derive(Debug, Parser)]
#[command(name = "legcrawl", version, about)]
pub struct Args {
    /// More logging (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Crawl from the given seeds, or resume the stored crawl.
    #[command(after_help = help::CRAWL)]
    Crawl(Box<crawl::CrawlArgs>),
    /// Inspect a crawl state (every view works while a crawl runs on it).
    #[command(after_help = help::DUMP)]
    Dump(dump::DumpArgs),
    /// Fetch one URL politely; body to stdout.
    #[command(after_help = help::FETCH)]
    Fetch(fetch::FetchArgs),
    /// Run the job's legs again over the stored responses (the WARC files)
    /// of the pages older legs made: their items, deletions and links, as a
    /// run, with nothing fetched.
    #[command(after_help = help::REPARSE)]
    Reparse(crawl::reparse::ReparseArgs),
    /// Check a state whole; rebuild its Bloom filter from the exact seen set.
    #[command(after_help = help::REPAIR)]
    Repair(repair::RepairArgs),
    /// Delete a crawl state (asks first unless --yes).
    #[command(after_help = help::RESET)]
    Reset(reset::ResetArgs),
    /// List, add or remove the seeds a state starts each cycle from.
    #[command(after_help = help::SEEDS)]
    Seeds(seeds::SeedsArgs),
    /// Serve a read-only live page and Prometheus /metrics of a crawl state.
    #[command(after_help = help::SERVE)]
    Serve(serve::ServeArgs),
}

/// The `--data` flag shared by every command that opens a state. It is global, so
/// `dump items --data D` and `dump --data D items` mean the same.
#[derive(Debug, clap::Args)]
pub struct DataArg {
    /// State directory [default: data/default, or the crawl file's `data`].
    #[arg(long, value_name = "DIR", global = true)]
    data: Option<PathBuf>,
}

impl DataArg {
    /// The directory given, or the default `data/default`.
    pub fn dir(&self) -> PathBuf {
        self.data
            .clone()
            .unwrap_or_else(|| legcrawl::config::CrawlConfig::default().data_dir)
    }

    /// The directory, only when `--data` was given.
    pub fn given(&self) -> Option<&PathBuf> {
        self.data.as_ref()
    }
}

/// `--data` and `--config` of the commands that only open a state (`dump`,
/// `reset`, `seeds`).
#[derive(Debug, clap::Args)]
pub struct StateArgs {
    #[command(flatten)]
    data: DataArg,
    /// Take the state directory from this crawl file's `data` (--data wins).
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
}

impl StateArgs {
    /// The state directory: `--data`, else the `--config` file's `data`, else
    /// `data/default`. A crawl file that cannot be read is bad input.
    pub fn dir(&self) -> anyhow::Result<PathBuf> {
        if let Some(dir) = self.data.given() {
            return Ok(dir.clone());
        }
        match &self.config {
            Some(path) => {
                let file = legcrawl::crawlfile::load(path).map_err(|e| BadInput(e.to_string()))?;
                Ok(file.config.data_dir)
            }
            None => Ok(self.data.dir()),
        }
    }
}

/// Runs the parsed command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Crawl(a) => crawl::run(*a),
        Command::Dump(a) => dump::run(a),
        Command::Fetch(a) => fetch::run(a),
        Command::Reparse(a) => crawl::reparse::run(a),
        Command::Repair(a) => repair::run(a),
        Command::Reset(a) => reset::run(a),
        Command::Seeds(a) => seeds::run(a),
        Command::Serve(a) => serve::run(a),
    }
}

/// A failure that is the user's input, not the machine's: exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Success, unless writing failed for another reason than a closed stdout
/// (`dump items | head` is not an error).
pub fn finish(result: anyhow::Result<()>) -> anyhow::Result<ExitCode> {
    let broken_pipe = |e: &anyhow::Error| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    };
    match result {
        Err(e) if broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e),
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

/// Maps an error to the process exit code.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    if let Some(answered) = error.downcast_ref::<beside::Answered>() {
        return answered.code;
    }
    if error.downcast_ref::<BadInput>().is_some() {
        return 2;
    }
    let store =
        error
            .downcast_ref::<StoreError>()
            .or_else(|| match error.downcast_ref::<EngineError>() {
                Some(EngineError::Store(e)) => Some(e),
                _ => None,
            });
    if matches!(
        error.downcast_ref::<EngineError>(),
        Some(
            EngineError::BadSeed { .. }
                | EngineError::NoSeeds { .. }
                | EngineError::NothingToCrawl { .. }
                | EngineError::NothingStored { .. }
                | EngineError::Leg(_)
                | EngineError::Revisit(_)
                // --render and no Chromium.
                | EngineError::Render(_)
                // A host's password variable unset, a CA file unreadable.
                | EngineError::Fetch(legcrawl::fetch::FetchError::InvalidSetting { .. })
        )
    ) {
        return 2;
    }
    match store {
        Some(
            StoreError::NotState { .. }
            | StoreError::NotADirectory { .. }
            | StoreError::Unmarked { .. }
            | StoreError::Incomplete { .. }
            | StoreError::Missing { .. }
            | StoreError::Format { .. }
            | StoreError::Busy { .. }
            | StoreError::NotWritable { .. }
            | StoreError::ReadOnlyFs { .. }
            | StoreError::CannotCreate { .. }
            | StoreError::Mismatch { .. }
            | StoreError::Damaged { .. }
            | StoreError::RolledBack { .. }
            | StoreError::RunDamaged { .. }
            | StoreError::BloomLost { .. },
        ) => 2,
        _ => 1,
    }
}

/// Logs to stderr: warnings by default, more with -v, or as RUST_LOG says. A
/// log line that cannot be written (a closed pipe) is dropped, never a panic.
pub fn init_tracing(verbose: u8) {
    // sled's own log lines about a damaged database would be a second line
    // after ours (which names the file and what to do), and redis-rs's about
    // each lost connection, refresh of a cluster's slot map or retried call
    // dozens of lines during one failover, after which ours says it in one
    // (shared::client's retry loop); -vv shows them.
    let default = match verbose {
        // The progress line of a crawl without a terminal (engine::embedded::progress).
        0 => "warn,legcrawl::progress=info,sled=off,redis=off",
        1 => "info,sled=off,redis=off",
        _ => "debug",
    };
    // RUST_LOG=error would show them too; naming sled or redis in it shows
    // that one.
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => {
            let mut spec = spec;
            for quiet in ["sled", "redis"] {
                if !spec.contains(quiet) {
                    spec.push_str(&format!(",{quiet}=off"));
                }
            }
            spec
        }
        _ => default.to_owned(),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(stderr::Quiet)
        // Colour codes only for a person at a terminal, never in a cron log file.
        .with_ansi(std::io::stderr().is_terminal())
        // Its default reports a failed write with `eprintln!`, which panics on a
        // closed stderr.
        .log_internal_errors(false)
        .init();
}

/// `n` and the noun that goes with it: "1 page", "2 pages".
pub(crate) fn counted(n: u64, one: &str, many: &str) -> String {
    match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
}

/// `error` and its causes on one line, as `{:#}` writes them, but without a
/// cause that a message already shows: an error that names its source in its
/// own message ("PATH: Permission denied") is not followed by it again. sled's
/// error is never a cause on the line: the [`StoreError`] that holds it says
/// it in words, and its own display is in debug form (`IO error: Os { .. }`).
pub fn one_line(error: &anyhow::Error) -> String {
    let mut line = error.to_string();
    for cause in error.chain().skip(1) {
        if cause.is::<sled::Error>() {
            break;
        }
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied() -> std::io::Error {
        std::io::Error::from_raw_os_error(13)
    }

    #[test]
    fn a_cause_the_message_already_shows_is_not_repeated() {
        let io = denied();
        // What used to print "Permission denied (os error 13): Permission
        // denied (os error 13)": a context that names its source's text.
        let error = anyhow::Error::new(denied()).context(format!("data/x: {io}"));
        assert_eq!(one_line(&error), format!("data/x: {io}"));
        // A cause the message does not show is still there, once.
        let error = anyhow::Error::new(denied()).context("cannot read crawl.toml");
        assert_eq!(one_line(&error), format!("cannot read crawl.toml: {io}"));
        assert_eq!(one_line(&error).matches("os error 13").count(), 1);
    }

    #[test]
    fn sled_is_said_in_words_once() {
        // As sled hands out a kept I/O error: a copy made from its debug text.
        let kept = std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!("{:?}", std::io::Error::from_raw_os_error(28)),
        );
        let store = StoreError::Db {
            path: PathBuf::from("data/x"),
            source: sled::Error::Io(kept),
        };
        let error = anyhow::Error::new(EngineError::from(store));
        let line = one_line(&error);
        let full = std::io::Error::from_raw_os_error(28).to_string();
        assert_eq!(line, format!("data/x: database error: {full}"));
    }

    #[test]
    fn one_is_singular() {
        assert_eq!(counted(1, "page", "pages"), "1 page");
        assert_eq!(counted(0, "page", "pages"), "0 pages");
        assert_eq!(counted(2, "item", "items"), "2 items");
    }
}
