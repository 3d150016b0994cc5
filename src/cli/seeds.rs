//! `legcrawl seeds`: list, add and remove the seeds a state starts each cycle from.
//!
//! A seed that can never be reached (a mistyped host, a site gone) would
//! otherwise be queued again every cycle and slow every later run. Removing a
//! seed also drops its own request from the frontier and lists it in `dump
//! blocked` as `removed`; the rest of its host's queue is left alone. A host
//! that could not be reached in several runs in a row is parked by the crawl
//! (`dump summary` lists it); adding one of its seeds again ends the park.

use std::io::Write;
use std::process::ExitCode;

use legcrawl::store::{OpenOptions, State};

use super::stderr::say;
use super::{BadInput, StateArgs, finish};

/// What `seeds` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Action {
    /// Print the stored seeds, one per line.
    List,
    /// Store new seeds (queued at once, fetched by the next crawl); a seed
    /// whose host is parked as unreachable is tried again by the next crawl.
    Add,
    /// Remove seeds, and their queued requests.
    Remove,
}

/// Arguments of `seeds`.
#[derive(Debug, clap::Args)]
pub struct SeedsArgs {
    #[command(flatten)]
    state: StateArgs,
    /// list (the default), add or remove.
    #[arg(value_enum, default_value = "list")]
    action: Action,
    /// The seed URLs to add or remove.
    urls: Vec<String>,
}

pub fn run(args: SeedsArgs) -> anyhow::Result<ExitCode> {
    if args.action == Action::List && !args.urls.is_empty() {
        return Err(
            BadInput("seeds list takes no URL (did you mean add or remove?)".into()).into(),
        );
    }
    if args.action != Action::List && args.urls.is_empty() {
        return Err(BadInput("give the seed URLs to add or remove".into()).into());
    }
    let dir = args.state.dir()?;
    let mut state = State::open(&dir, &OpenOptions::default())?;
    match args.action {
        Action::List => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let written = state
                .seeds()?
                .iter()
                .try_for_each(|url| writeln!(out, "{url}"))
                .and_then(|()| out.flush());
            finish(written.map_err(Into::into))
        }
        Action::Add => {
            for url in &args.urls {
                let ok = url::Url::parse(url)
                    .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
                if !ok {
                    return Err(
                        BadInput(format!("seed {url:?} is not an absolute http(s) URL")).into(),
                    );
                }
            }
            let added = state.add_seeds(&args.urls, &[])?;
            say!("added {added} seed(s) to {}", dir.display());
            // A known seed added again: its host, if parked, is tried at the next run.
            for host in state.try_hosts_again(&args.urls)? {
                say!("{host} was parked as unreachable: the next crawl tries it again");
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Remove => {
            let stored = state.seeds()?;
            if let Some(url) = args.urls.iter().find(|url| !stored.contains(url)) {
                return Err(BadInput(format!(
                    "{url} is not a seed of {} (`legcrawl seeds` lists them); nothing was removed",
                    dir.display()
                ))
                .into());
            }
            let (seeds, queued) = state.remove_seeds(&args.urls)?;
            say!(
                "removed {seeds} seed(s) from {} and {queued} queued request(s) of theirs",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
