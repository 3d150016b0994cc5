//! `crawl --shared`: one worker of a crawl shared through Redis, whose job
//! lives in Redis too (see [`legcrawl::shared::job`]).

use std::process::ExitCode;

use legcrawl::config::CrawlConfig;
use legcrawl::crawlfile::CrawlFile;
use legcrawl::shared::SharedTarget;

use super::report::{exit_status, print_report};
use super::runtime::runtime_and_stop;
use super::{CrawlArgs, check_settings};
use crate::cli::BadInput;
use crate::cli::stderr::say;

/// One worker of a shared crawl (`--shared`): the crawl's job lives in Redis.
/// The worker resolves it with the crawl file and the flags given (see
/// [`legcrawl::shared::job`]), prints one line per change it stores, and runs
/// it; its per-run options and `--output` file (from `config`, the flags over
/// the file) are its own.
pub(super) fn run_shared(
    args: &CrawlArgs,
    config: &CrawlConfig,
    file: Option<CrawlFile>,
    target: &SharedTarget,
) -> anyhow::Result<ExitCode> {
    // A host's password variable missing: one line, before any fetch.
    super::check_hosts(config)?;
    // Not yet exact for a shared crawl: refused rather than done approximately.
    if let Some(path) = &config.output {
        crate::cli::stats::check_path("--output", path)?;
    }
    let unsupported = [
        ("--warc", config.warc.is_some()),
        ("--stats", config.stats.is_some()),
        ("--fresh", args.fresh),
    ];
    if let Some((flag, _)) = unsupported.iter().find(|(_, given)| *given) {
        return Err(BadInput(format!(
            "{flag} is not available with --shared yet (read the crawl's items with: legcrawl dump --shared {} --name {} items)",
            target.shown(), target.name
        ))
        .into());
    }
    check_settings(args, file.as_ref(), config)?;
    let (runtime, stop) = runtime_and_stop()?;
    let flags = |c: &mut CrawlConfig| args.apply_job_flags(c);
    let plan = legcrawl::shared::JobPlan {
        file: file.as_ref(),
        flags: &flags,
        run: config,
    };
    // The first SIGINT/SIGTERM is heard while the worker connects and joins
    // too (a slow or unreachable Redis can hold that up for seconds): it
    // stops the worker there, before it fetched anything.
    let stopped_early = || -> anyhow::Result<Option<legcrawl::engine::RunReport>> {
        say!(
            "legcrawl: stopped while joining the shared crawl {:?}, before fetching anything",
            target.name
        );
        Ok(None)
    };
    let report = runtime.block_on(async {
        let joined = tokio::select! {
            biased;
            () = stop.notified() => return stopped_early(),
            joined = legcrawl::shared::join(target, plan) => joined.map_err(join_error)?,
        };
        if joined.made {
            let from = match &file {
                Some(file) => format!("the crawl file {}", file.path.display()),
                None => "the defaults".into(),
            };
            say!(
                "legcrawl: the shared crawl {:?} has no stored job (an earlier legcrawl started it): its job is made from {from}, its stored seeds and the flags given (`legcrawl dump --shared URL --name {} job` prints it)",
                target.name,
                target.name
            );
        }
        if let Some(previous) = joined.previous {
            for change in &joined.changes {
                say!("legcrawl: job {previous} -> {}: {change}", joined.version);
            }
        }
        match joined
            .run(async move { stop.notified().await })
            .await
            .map_err(anyhow::Error::from)?
        {
            Some(report) => Ok(Some(report)),
            None => stopped_early(),
        }
    })?;
    let Some(report) = report else {
        return Ok(ExitCode::from(130));
    };
    let mut resume = format!(
        "legcrawl crawl --shared {} --name {}",
        target.shown(),
        target.name
    );
    if let Some(cacert) = &target.cacert {
        resume.push_str(&format!(" --shared-cacert {}", cacert.display()));
    }
    print_report(config, &report, &resume);
    Ok(exit_status(&report))
}

/// A worker's failure to take part in the crawl's job, with the exit status
/// of its cause (an engine error keeps its own: bad seeds and legs exit 2).
fn join_error(error: legcrawl::shared::JoinError) -> anyhow::Error {
    use legcrawl::engine::EngineError;
    use legcrawl::shared::SharedError;
    match error {
        // A server that may evict the crawl's keys is a setting to change:
        // exit 2, as for any bad setting.
        legcrawl::shared::JoinError::Engine(EngineError::Shared(
            error @ SharedError::Eviction { .. },
        )) => BadInput(error.to_string()).into(),
        legcrawl::shared::JoinError::Engine(error) => error.into(),
        other => other.into(),
    }
}
