//! `crawl --shared ... --stats FILE.json`: the end-of-run report of this
//! worker's run, read back from the run record the worker appended to the
//! crawl's runs in Redis (so it agrees with `dump --shared ... runs`).
//!
//! The same JSON object as the embedded crawl's report ([`super::stats`]),
//! with these differences: `data` gives way to `shared` (the Redis URL, its
//! password redacted), `name` (the crawl) and `worker` (this worker's id);
//! `run` numbers the crawl's worker runs; `counters` and `totals` are this
//! worker's (what it committed), and `totals.frontier` is the crawl's queue
//! when the worker last leased. Written after the run ended (drained, limit,
//! interrupted, or failed once its run was recorded), replacing the file
//! atomically; nothing is written when no run was recorded (stopped while
//! joining, or the crawl's state gone from Redis).

use std::collections::BTreeMap;
use std::path::Path;

use legcrawl::clock::rfc3339_secs;
use legcrawl::engine::RunReport;
use legcrawl::shared::{Shared, SharedTarget};
use serde::Serialize;

use super::stats::{Totals, replace_with_json};

/// The report of one worker's run.
#[derive(Debug, Serialize)]
struct SharedStats {
    run: u64,
    outcome: String,
    shared: String,
    name: String,
    worker: String,
    started_at: u64,
    ended_at: Option<u64>,
    started: String,
    ended: Option<String>,
    elapsed_seconds: f64,
    /// `None` when the run failed (the end-of-run line is not printed then).
    totals: Option<Totals>,
    error: Option<String>,
    counters: BTreeMap<String, u64>,
}

/// Writes the report of this process's run of the crawl at `target`: the one
/// `report` describes, or after an error the newest run this process
/// recorded since `since` (unix seconds). Returns false, writing nothing,
/// when there is no such run.
pub async fn write(
    path: &Path,
    target: &SharedTarget,
    since: u64,
    report: Result<&RunReport, &anyhow::Error>,
) -> anyhow::Result<bool> {
    let shared = Shared::inspect(target, 1).await?;
    let found = match report {
        Ok(report) if report.run > 0 => shared.run_record(Some(report.run)).await?,
        Ok(_) => None,
        Err(_) => {
            let runs = shared.runs().await?;
            let ours = format!(":{}", std::process::id());
            runs.into_iter()
                .enumerate()
                .rev()
                .find(|(_, r)| {
                    r["worker"].as_str().is_some_and(|w| w.ends_with(&ours))
                        && r["started_at"].as_u64().is_some_and(|at| at >= since)
                })
                .map(|(i, record)| (i as u64 + 1, record))
        }
    };
    let Some((run, record)) = found else {
        return Ok(false);
    };
    let started_at = record["started_at"].as_u64().unwrap_or(since);
    let ended_at = record["ended_at"].as_u64();
    let counters = record["counters"]
        .as_object()
        .map(|map| {
            map.iter()
                .filter_map(|(name, n)| Some((name.clone(), n.as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    let stats = SharedStats {
        run,
        outcome: record["outcome"].as_str().unwrap_or("failed").to_owned(),
        shared: target.shown(),
        name: target.name.clone(),
        worker: record["worker"].as_str().unwrap_or_default().to_owned(),
        started_at,
        ended_at,
        started: rfc3339_secs(started_at),
        ended: ended_at.map(rfc3339_secs),
        elapsed_seconds: match report {
            Ok(report) => report.elapsed.as_secs_f64(),
            Err(_) => record["seconds"].as_f64().unwrap_or(0.0),
        },
        totals: report.ok().map(Totals::of),
        error: report.err().map(|e| target.scrub(&crate::cli::one_line(e))),
        counters,
    };
    replace_with_json(path, &stats)?;
    Ok(true)
}
