//! `legcrawl reset`: delete a state (scrapy-redis `SCHEDULER_PERSIST=False`, made explicit).

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use anyhow::Context;
use legcrawl::store::{self, StoreError};

use super::stderr::{self, say};
use super::{BadInput, StateArgs};

/// Arguments of `reset`.
#[derive(Debug, clap::Args)]
pub struct ResetArgs {
    #[command(flatten)]
    state: StateArgs,
    /// Do not ask for confirmation.
    #[arg(long)]
    yes: bool,
}

pub fn run(args: ResetArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.state.dir()?;
    if store::holds_nothing(dir) {
        // Nothing is asked and nothing deleted; a mistyped path shows here.
        say!(
            "Nothing to reset: {} holds no legcrawl state.",
            dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if !confirm_delete(dir, args.yes, "reset")? {
        say!("Not reset.");
        return Ok(ExitCode::from(1));
    }
    delete_state(dir)?;
    say!("Reset {}.", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// True when the state in `dir` may be deleted: `yes` was given, or a user at
/// the terminal typed `yes`. Without a terminal and without `yes`, a one-line
/// refusal naming `what` asked (`reset`, `--fresh`), exit 2.
pub fn confirm_delete(dir: &std::path::Path, yes: bool, what: &str) -> anyhow::Result<bool> {
    confirm_deleting(
        &format!("the state in {}", dir.display()),
        &format!("the crawl state in {}", dir.display()),
        yes,
        what,
    )
}

/// As [`confirm_delete`], for any state: `refused` names it in the refusal
/// ("the state in DIR"), `asked` in the question ("the crawl state in DIR").
pub fn confirm_deleting(refused: &str, asked: &str, yes: bool, what: &str) -> anyhow::Result<bool> {
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(BadInput(format!(
            "refusing to delete {refused} for {what} without --yes (stdin is not a terminal)"
        ))
        .into());
    }
    stderr::prompt(format_args!("Delete {asked}? Type 'yes' to confirm: "));
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("reading the confirmation")?;
    Ok(answer.trim() == "yes")
}

/// Deletes a legcrawl state directory; refuses anything else. A missing directory is fine.
pub fn delete_state(dir: &std::path::Path) -> anyhow::Result<()> {
    if store::holds_nothing(dir) {
        return Ok(());
    }
    if !dir.join(store::MARKER_FILE).is_file() {
        return Err(StoreError::NotState {
            path: dir.to_owned(),
        }
        .into());
    }
    // Opening takes sled's lock: a running crawl makes this fail with Busy. Other
    // errors (say, another format version) do not prevent deleting the state.
    if let Err(error @ StoreError::Busy { .. }) =
        store::State::open(dir, &store::OpenOptions::default())
    {
        return Err(error.into());
    }
    std::fs::remove_dir_all(dir).with_context(|| format!("deleting {}", dir.display()))
}
