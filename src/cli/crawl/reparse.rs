//! `legcrawl reparse`: the stored job (or `--config`'s, stored as a new
//! version as `crawl` stores it) → its legs → [`engine::run_reparse`] over
//! the embedded state, then the run's line and exit status, as `crawl`'s.

use std::path::PathBuf;
use std::process::ExitCode;

use legcrawl::config::CrawlConfig;
use legcrawl::crawlfile;
use legcrawl::engine;
use legcrawl::job;
use legcrawl::page::scope::{Scope, leg_config};

use super::report::{exit_status, write_stats};
use super::runtime::runtime_and_stop;
use super::{bundled_legs, check_outputs};
use crate::cli::stderr::say;
use crate::cli::{BadInput, DataArg, counted};

/// Arguments of `reparse`.
#[derive(Debug, clap::Args)]
pub struct ReparseArgs {
    #[command(flatten)]
    data: DataArg,
    /// Replace the stored job with this crawl file's (new legs, say), as
    /// `crawl --config` does, then run its legs.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// A shared crawl (refused: its responses are in each worker's own WARC
    /// files).
    #[arg(long, value_name = "URL")]
    shared: Option<String>,
}

/// Runs `legcrawl reparse`.
pub fn run(args: ReparseArgs) -> anyhow::Result<ExitCode> {
    let file = match &args.config {
        Some(path) => Some(crawlfile::load(path).map_err(|e| BadInput(e.to_string()))?),
        None => None,
    };
    if args.shared.is_some() || file.as_ref().is_some_and(|f| f.config.shared.is_some()) {
        return Err(BadInput(
            "reparse works on an embedded state only for now: a shared crawl's responses are in each worker's own WARC files (see docs/shared.md, \"Not yet\")".into(),
        )
        .into());
    }
    let data_dir = match (args.data.given(), &file) {
        (Some(dir), _) => dir.clone(),
        (None, Some(file)) => file.config.data_dir.clone(),
        (None, None) => args.data.dir(),
    };
    let draft = CrawlConfig {
        data_dir,
        ..CrawlConfig::default()
    };
    let mut state = engine::open_state(&draft)?;
    crate::cli::beside::start(&mut state);
    let Some(stored) = state.latest_job()? else {
        return Err(BadInput(format!(
            "{}: no job is stored here: crawl first",
            state.dir().display()
        ))
        .into());
    };
    let facts = engine::job_facts(&state, &[])?;
    let resolved = job::resolve(
        Some((stored.version, stored.text.as_str())),
        file.as_ref(),
        |_| {},
        &facts,
    )?;
    for change in &resolved.changes {
        say!(
            "legcrawl: job {} -> {}: {change}",
            stored.version,
            stored.version + 1
        );
    }
    let config = resolved.config.with_run_options(&draft);
    check_outputs(&config)?;
    let scope = Scope::of_crawl(&config, &facts.seeds, &[]);
    let legs = bundled_legs(
        &leg_config(&config, &scope),
        resolved.legs,
        resolved.sitemap_leg,
    )?;
    let (runtime, stop) = runtime_and_stop()?;
    let result = runtime
        .block_on(engine::run_reparse(
            state,
            &config,
            legs,
            &resolved.text,
            async move { stop.notified().await },
        ))
        .map_err(anyhow::Error::from);
    if let Some(path) = &config.stats {
        write_stats(path, &config, result.as_ref().map(|(report, _)| report));
    }
    let (report, reparsed) = result?;
    let rate = reparsed.pages as f64 / report.elapsed.as_secs_f64().max(0.001);
    let deleted = match report.deleted {
        0 => String::new(),
        n => format!(" ({n} deleted)"),
    };
    say!(
        "run {} (reparse): {} — {} ({rate:.0}/s): {}{deleted}, {} queued for the next crawl ({:.1} s)",
        report.run,
        report.outcome.as_str(),
        counted(reparsed.pages, "page", "pages"),
        counted(report.items, "item", "items"),
        report.enqueued,
        report.elapsed.as_secs_f64()
    );
    if reparsed.unreadable > 0 {
        say!(
            "legcrawl: {} could not be read back from the WARC files (see the lines above); they keep their items",
            counted(reparsed.unreadable, "stored response", "stored responses")
        );
    }
    if reparsed.not_stored > 0 {
        say!(
            "legcrawl: {} no stored response (fetched before the crawl wrote WARC files): the legs run over them when they change",
            counted(reparsed.not_stored, "page has", "pages have")
        );
    }
    let resume = format!("legcrawl reparse --data {}", config.data_dir.display());
    if report.outcome == legcrawl::store::records::RunOutcome::Interrupted {
        say!("state saved; go on with: {resume}");
    }
    Ok(exit_status(&report))
}
