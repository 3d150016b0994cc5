//! `legcrawl dump job`: the stored job as a crawl file that `crawl --config`
//! accepts (the same job comes back; `data` is not part of it), the newest
//! version or the one a run used.

use std::io::Write;

use legcrawl::clock::rfc3339_secs;
use legcrawl::view::{CrawlView, RunRef};

/// Arguments of `dump job`.
#[derive(Debug, Clone, clap::Args, serde::Serialize, serde::Deserialize)]
pub struct JobArgs {
    /// The job version run N ran under ("last": the newest run's) instead of
    /// the newest version.
    #[arg(long, value_name = "N|last", value_parser = RunRef::parse)]
    pub(super) run: Option<RunRef>,
}

/// Prints the job `args` asks for: its text after a comment line naming the
/// version, or with `--json` one object (`version`, `created_at`, `text`,
/// and `first_run` for a state directory, `worker` for a shared crawl).
pub async fn print_job(
    out: &mut impl Write,
    crawl: &CrawlView,
    args: &JobArgs,
    json: bool,
) -> anyhow::Result<()> {
    let job = crawl.job(args.run).await.map_err(super::dump::lift)?;
    if json {
        writeln!(out, "{}", serde_json::to_string(&job)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "# legcrawl job version {} of {}, stored {}{}",
        job.version,
        crawl.place(),
        rfc3339_secs(job.created_at),
        job.note
    )?;
    out.write_all(job.text.as_bytes())?;
    if !job.text.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}
