//! `legcrawl dump job`: the stored job as a crawl file that `crawl --config`
//! accepts (the same job comes back; `data` is not part of it), the newest
//! version or the one a run used.

use std::io::Write;

use legcrawl::clock::rfc3339_secs;
use legcrawl::store::State;
use legcrawl::store::records::JobRecord;

use super::BadInput;
use super::export::RunRef;

/// Arguments of `dump job`.
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// The job version run N ran under ("last": the newest run's) instead of
    /// the newest version.
    #[arg(long, value_name = "N|last", value_parser = RunRef::parse)]
    pub(super) run: Option<RunRef>,
}

/// Prints the job `args` asks for: its text after a comment line naming the
/// version, or with `--json` one object (`version`, `created_at`,
/// `first_run`, `text`).
pub fn print_job(
    out: &mut impl Write,
    state: &State,
    args: &JobArgs,
    json: bool,
) -> anyhow::Result<()> {
    let record = pick(state, args.run)?;
    if json {
        writeln!(out, "{}", serde_json::to_string(&record)?)?;
    } else {
        writeln!(
            out,
            "# legcrawl job version {} of {}, stored {} with run {}",
            record.version,
            state.dir().display(),
            rfc3339_secs(record.created_at),
            record.first_run
        )?;
        out.write_all(record.text.as_bytes())?;
    }
    Ok(())
}

/// The job version `run` names (the newest without one), or one line saying
/// why there is none.
fn pick(state: &State, run: Option<RunRef>) -> anyhow::Result<JobRecord> {
    let dir = state.dir().display();
    let Some(run) = run else {
        return state.latest_job()?.ok_or_else(|| {
            BadInput(format!(
                "{dir}: no job stored yet (a crawl stores one when it begins)"
            ))
            .into()
        });
    };
    let runs = state.runs()?;
    let record = &runs[super::export::run_index(state, &runs, run)?];
    let Some(version) = record.job else {
        return Err(BadInput(format!(
            "{dir}: run {} was recorded before jobs were stored",
            record.id
        ))
        .into());
    };
    state.job(version)?.ok_or_else(|| {
        anyhow::anyhow!(
            "{dir}: run {} names job version {version}, which is not stored",
            record.id
        )
    })
}
