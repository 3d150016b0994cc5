//! `legcrawl repair`: check a state whole and rebuild what can be rebuilt.
//!
//! Opening the state already refuses a database that lost committed data and
//! rebuilds a damaged Bloom filter in `exact` mode (and a page-id index whose
//! run file is missing or cut short); `repair` then reads every record of the
//! database, reads the page-id runs whole (rebuilding the index from the page
//! records if one is damaged) and, in `exact` mode, rebuilds the Bloom filter
//! from the exact seen set even when it looked whole. It says what it did, one
//! line.

use std::process::ExitCode;

use legcrawl::store::{OpenOptions, State};

use super::StateArgs;
use super::stderr::say;

/// Arguments of `repair`.
#[derive(Debug, clap::Args)]
pub struct RepairArgs {
    #[command(flatten)]
    state: StateArgs,
}

pub fn run(args: RepairArgs) -> anyhow::Result<ExitCode> {
    let dir = args.state.dir()?;
    let mut state = State::open(&dir, &OpenOptions::default())?;
    let report = state.repair()?;
    let bloom = match report.rebuilt {
        Some(fingerprints) => format!(
            "rebuilt bloom.bin from the exact seen set ({fingerprints} fingerprints; {} bits set, {} before)",
            report.ones.1, report.ones.0
        ),
        None => format!(
            "bloom dedup mode: bloom.bin is the only record of the seen set and was kept as it is ({} bits set)",
            report.ones.1
        ),
    };
    let ids = match report.page_ids {
        None => "page-id runs whole".to_owned(),
        Some((damage, pages)) => {
            format!("{damage}; rebuilt the page-id index from the page records ({pages} pages)")
        }
    };
    say!(
        "repaired {}: read all {} database records ({} items); {ids}; {bloom}",
        dir.display(),
        report.records,
        report.items
    );
    Ok(ExitCode::SUCCESS)
}
