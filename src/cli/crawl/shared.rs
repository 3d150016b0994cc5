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
    // A host's password variable missing, or a CA file that cannot be
    // read: one line, before any fetch. (A job taken from Redis is checked
    // when the worker builds its fetcher: exit 2 as well.)
    super::check_hosts(config)?;
    crate::cli::access::check_trust(config.cacert.as_deref())?;
    // The output files' paths checked before anything is done.
    if let Some(path) = &config.output {
        crate::cli::stats::check_path("--output", path)?;
    }
    if let Some(path) = &config.stats {
        crate::cli::stats::check_path("--stats", path)?;
    }
    if let Some(dir) = &config.warc {
        crate::cli::stats::check_dir("--warc", dir)?;
    }
    check_settings(args, file.as_ref(), config)?;
    let (runtime, stop) = runtime_and_stop()?;
    if args.fresh && !erase_for_fresh(&runtime, args.yes, config, target)? {
        say!("Not deleted; nothing crawled.");
        return Ok(ExitCode::from(1));
    }
    // The crawl the output file's witness record names is deleted: the
    // record goes with it (the worker starts the new crawl's).
    if args.fresh
        && let Some(output) = &config.output
    {
        legcrawl::shared::witness::forget(&legcrawl::shared::witness::beside(output))?;
    }
    let flags = |c: &mut CrawlConfig| args.apply_job_flags(c);
    let plan = legcrawl::engine::worker::JobPlan {
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
    let since = legcrawl::store::records::unix_now();
    let result = runtime.block_on(async {
        let joined = tokio::select! {
            biased;
            () = stop.notified() => return stopped_early(),
            joined = legcrawl::engine::worker::join(target, plan) => joined.map_err(join_error)?,
        };
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
    });
    if let Some(path) = &config.stats {
        write_stats(&runtime, path, target, since, &result);
    }
    let Some(report) = result? else {
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
    if let (Some(cert), Some(key)) = (&target.client_cert, &target.client_key) {
        resume.push_str(&format!(
            " --shared-cert {} --shared-key {}",
            cert.display(),
            key.display()
        ));
    }
    print_report(config, &report, &resume);
    Ok(exit_status(&report))
}

/// `--fresh`: deletes the shared crawl's keys, after the confirmation `reset`
/// asks for (`--yes`, or `yes` typed at a terminal; without a terminal, a
/// refusal, exit 2). Refused, deleting nothing, when no seed was given (the
/// crawl could not start again) or a worker is running the crawl (it renewed
/// within its lease TTL). False when the user did not confirm.
fn erase_for_fresh(
    runtime: &tokio::runtime::Runtime,
    yes: bool,
    config: &CrawlConfig,
    target: &SharedTarget,
) -> anyhow::Result<bool> {
    let crawl = format!("the shared crawl {:?} at {}", target.name, target.shown());
    if config.seeds.is_empty() {
        return Err(BadInput(format!(
            "--fresh deletes {crawl} and starts again from the seeds given, but no URL (or crawl-file seeds) was given; nothing was deleted"
        ))
        .into());
    }
    let shared = runtime.block_on(async {
        let shared = legcrawl::shared::Shared::inspect(target, 1).await?;
        if !shared.has_state().await? {
            return Ok::<_, legcrawl::shared::SharedError>(None);
        }
        let running: Vec<String> = shared
            .summary()
            .await?
            .workers
            .into_iter()
            .filter(|w| {
                let ttl = w
                    .record
                    .as_ref()
                    .and_then(|r| r.get("lease_ttl_ms"))
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(60_000);
                w.last_seen_ms.is_some_and(|ms| ms <= ttl)
            })
            .map(|w| w.id)
            .collect();
        Ok(Some((shared, running)))
    })?;
    let Some((shared, running)) = shared else {
        return Ok(true);
    };
    if !running.is_empty() {
        return Err(BadInput(format!(
            "--fresh refuses to delete {crawl} while workers run it ({}); stop them first; nothing was deleted",
            running.join(", ")
        ))
        .into());
    }
    if !crate::cli::reset::confirm_deleting(&crawl, &crawl, yes, "--fresh")? {
        return Ok(false);
    }
    let deleted = runtime.block_on(shared.erase())?;
    say!("legcrawl: deleted {crawl} ({deleted} keys)");
    Ok(true)
}

/// Writes the `--stats` report of this worker's run (when one was recorded);
/// a failure is one line on stderr, not a failed crawl.
fn write_stats(
    runtime: &tokio::runtime::Runtime,
    path: &std::path::Path,
    target: &SharedTarget,
    since: u64,
    result: &anyhow::Result<Option<legcrawl::engine::RunReport>>,
) {
    let report = match result {
        Ok(Some(report)) => Ok(report),
        Ok(None) => return,
        Err(error) => Err(error),
    };
    let written = runtime.block_on(crate::cli::stats::write_shared(path, target, since, report));
    if let Err(error) = written {
        say!(
            "legcrawl: could not write the run report to {}: {}",
            path.display(),
            target.scrub(&crate::cli::one_line(&error))
        );
    }
}

/// A worker's failure to take part in the crawl's job, with the exit status
/// of its cause (an engine error keeps its own: bad seeds and legs exit 2).
fn join_error(error: legcrawl::engine::worker::JoinError) -> anyhow::Error {
    use legcrawl::engine::EngineError;
    use legcrawl::shared::SharedError;
    match error {
        // A server that may evict the crawl's keys is a setting to change:
        // exit 2, as for any bad setting.
        legcrawl::engine::worker::JoinError::Engine(EngineError::Shared(
            error @ SharedError::Eviction { .. },
        )) => BadInput(error.to_string()).into(),
        // A crawl made by an earlier build in another key layout: no
        // migration is kept, it is refused as an older state format is.
        legcrawl::engine::worker::JoinError::Engine(EngineError::Shared(
            error @ SharedError::OldSchema { .. },
        )) => BadInput(error.to_string()).into(),
        legcrawl::engine::worker::JoinError::Engine(error) => error.into(),
        // No migration is kept: a crawl of an earlier build is refused as a
        // state of an older format is (exit 2).
        error @ legcrawl::engine::worker::JoinError::WithoutJob { .. } => {
            BadInput(error.to_string()).into()
        }
        other => other.into(),
    }
}
