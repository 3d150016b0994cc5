//! The `legcrawl` command: argument parsing, exit codes and error reporting.
//!
//! Only the binary uses `anyhow`; every failure is printed as one line
//! (`legcrawl: <reason>`) and mapped to an exit code by [`cli::exit_code`].

mod cli;

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;

/// jemalloc, not glibc's malloc: a crawl frees much of what a page with many
/// links or a commit group allocated, on threads that come and go (the blocking
/// pool), and glibc's per-thread arenas kept that memory. Peak anonymous memory
/// of the frontier bench's phase 1 (ten pages of a million links) was about
/// twice the live heap with glibc, and half of that with jemalloc (docs/state.md,
/// *Memory*).
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read by jemalloc at its first allocation (a C string;
/// `_RJEM_MALLOC_CONF` in the environment still overrides them):
/// - `narenas:1`: one arena instead of four per CPU. Each arena keeps its own
///   freed pages and fragments, and a crawl's threads (the tokio workers, the
///   blocking pool running flushes and checkpoints, sled's I/O threads) each
///   used one;
/// - `dirty_decay_ms:1000`, `muzzy_decay_ms:0`: freed pages go back to the
///   system within about a second instead of ten. Sled's 512 KiB I/O buffers
///   and a large page's body are freed at a high rate, and the pages they
///   leave were counted in the resident set for that long.
///
/// Measured on the frontier bench at full size (`cargo bench --bench
/// frontier_memory`, with `--cache-size 16MiB`): phase 1's peak `RssAnon`
/// went from 469 to 255 MiB (the live heap's peak, by heaptrack, is about 250
/// MB at the default cache), and phase 2's pages/s did not drop (2,715 against
/// 2,649 for the whole phase).
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[allow(unsafe_code)]
// SAFETY: jemalloc reads this symbol as a `const char *` to a NUL-terminated
// string (a weak default in jemalloc, replaced by this definition); a
// `&'static u8` has that representation and points to the first byte of a
// string that ends in NUL and lives as long as the program.
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: Option<&'static u8> =
    Some(&c"narenas:1,dirty_decay_ms:1000,muzzy_decay_ms:0".to_bytes_with_nul()[0]);

fn main() -> ExitCode {
    let args = match cli::Args::try_parse() {
        Ok(args) => args,
        Err(error) => return usage_error(&error),
    };
    cli::init_tracing(args.verbose);
    // sled panics on some damaged databases: one line and exit 2, not a backtrace.
    legcrawl::store::repair::quiet_sled_panics();
    let result = std::panic::catch_unwind(|| cli::run(args));
    match result {
        Ok(Ok(code)) => code,
        Ok(Err(error)) => {
            cli::stderr::say!("legcrawl: {}", cli::one_line(&error));
            ExitCode::from(cli::exit_code(&error))
        }
        Err(payload) => match legcrawl::store::repair::sled_panic_report() {
            Some(line) => {
                cli::stderr::say!("legcrawl: {line}");
                ExitCode::from(2)
            }
            // Not sled's: a bug, already reported by the default hook.
            None => std::panic::resume_unwind(payload),
        },
    }
}

/// A command line clap refused: help and version as clap prints them (exit
/// 0), any mistake as one line naming it (exit 2), like every other error.
fn usage_error(error: &clap::Error) -> ExitCode {
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        // Printed to stdout (help, version) or stderr (a bare `legcrawl`).
        let _ = error.print();
        return ExitCode::from(match error.kind() {
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => 2,
            _ => 0,
        });
    }
    let text = error.render().to_string();
    let line = text
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("bad command line");
    let line = line.strip_prefix("error: ").unwrap_or(line);
    cli::stderr::say!("legcrawl: {line} (see --help)");
    ExitCode::from(2)
}
