//! The `legcrawl` command: argument parsing, exit codes and error reporting.
//!
//! Only the binary uses `anyhow`; every failure is printed as one line
//! (`legcrawl: <reason>`) and mapped to an exit code by [`cli::exit_code`].

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    cli::init_tracing(args.verbose);
    match cli::run(args) {
        Ok(code) => code,
        Err(error) => {
            cli::stderr::say!("legcrawl: {error:#}");
            ExitCode::from(cli::exit_code(&error))
        }
    }
}
