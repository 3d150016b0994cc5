//! The `legcrawl` command: argument parsing, exit codes and error reporting.
//!
//! Only the binary uses `anyhow`; every failure is printed as one line
//! (`legcrawl: <reason>`) and mapped to an exit code by [`cli::exit_code`].

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// jemalloc, not glibc's malloc: a crawl frees much of what a page with many
/// links or a commit group allocated, on threads that come and go (the blocking
/// pool), and glibc's per-thread arenas kept that memory. Peak anonymous memory
/// of the frontier bench's phase 1 (ten pages of a million links) was about
/// twice the live heap with glibc, and half of that with jemalloc (README,
/// *Memory*).
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    cli::init_tracing(args.verbose);
    // sled panics on some damaged databases: one line and exit 2, not a backtrace.
    legcrawl::store::repair::quiet_sled_panics();
    let result = std::panic::catch_unwind(|| cli::run(args));
    match result {
        Ok(Ok(code)) => code,
        Ok(Err(error)) => {
            cli::stderr::say!("legcrawl: {error:#}");
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
