//! Machine-readable run reports: the rows of `dump runs --json` and the end-of-run
//! report of `crawl --stats FILE.json` (Scrapy's stats dump).
//!
//! Both are built from the run record the crawl wrote, so they agree with `dump
//! runs`. The stats file is written after the run ended (drained, limit, idle,
//! interrupted by the first Ctrl-C, or failed once its run began), replacing the file
//! atomically (a temporary file beside it, then a rename). A second Ctrl-C quits at
//! once and writes no report.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use legcrawl::clock::rfc3339_secs;
use legcrawl::engine::{PageTotals, RunReport};
use legcrawl::store::records::RunRecord;
use legcrawl::store::{OpenOptions, State};
use serde::Serialize;

use super::BadInput;

/// The columns `dump runs` shows, from a run's counters: the pages by outcome
/// (the same [`PageTotals`] the end-of-run line prints), and what else the run did.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RunColumns {
    /// The pages by outcome.
    #[serde(flatten)]
    pub totals: PageTotals,
    /// Responses received (`pages/fetched`; a retried page counts each answer).
    pub fetched: u64,
    /// Items stored.
    pub items: u64,
    /// Requests dropped as duplicates.
    pub filtered: u64,
    /// Body bytes received.
    pub bytes: u64,
}

impl RunColumns {
    /// The columns of `run`.
    pub fn of(run: &RunRecord) -> RunColumns {
        let count = |name: &str| run.counters.get(name).copied().unwrap_or(0);
        RunColumns {
            totals: PageTotals::of(count),
            fetched: count("pages/fetched"),
            items: count("items/stored"),
            filtered: count("dupefilter/filtered"),
            bytes: count("fetch/bytes"),
        }
    }
}

/// One line of `dump runs --json`: the stored record (`id`, `started_at`, `ended_at`
/// in Unix seconds, `outcome`, `pid`, `first_item`, `counters`), the same times as
/// RFC 3339 text (`started`, `ended`), and the table's columns.
#[derive(Debug, Serialize)]
pub struct RunRow<'a> {
    #[serde(flatten)]
    record: &'a RunRecord,
    started: String,
    ended: Option<String>,
    #[serde(flatten)]
    columns: RunColumns,
}

impl<'a> RunRow<'a> {
    /// The row of `run`.
    pub fn of(run: &'a RunRecord) -> RunRow<'a> {
        RunRow {
            record: run,
            started: rfc3339_secs(run.started_at),
            ended: run.ended_at.map(rfc3339_secs),
            columns: RunColumns::of(run),
        }
    }
}

/// The totals the end-of-run line prints.
#[derive(Debug, Serialize)]
pub(super) struct Totals {
    #[serde(flatten)]
    pages: PageTotals,
    bytes: u64,
    items: u64,
    enqueued: u64,
    filtered: u64,
    frontier: u64,
    new_cycle: bool,
}

impl Totals {
    pub(super) fn of(r: &RunReport) -> Totals {
        Totals {
            pages: r.totals,
            bytes: r.bytes,
            items: r.items,
            enqueued: r.enqueued,
            filtered: r.filtered,
            frontier: r.frontier,
            new_cycle: r.new_cycle,
        }
    }
}

/// The `--stats` report: one JSON object.
#[derive(Debug, Serialize)]
struct Stats<'a> {
    run: u64,
    outcome: &'static str,
    data: String,
    started_at: u64,
    ended_at: Option<u64>,
    started: String,
    ended: Option<String>,
    elapsed_seconds: f64,
    /// `None` when the run failed (the end-of-run line is not printed then).
    totals: Option<Totals>,
    error: Option<String>,
    counters: &'a BTreeMap<String, u64>,
}

/// Refuses a file path (of `flag`: `--stats`, `--output`) whose directory does
/// not exist, or that is a directory, before the crawl creates or opens anything.
pub fn check_path(flag: &str, path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        return Err(BadInput(format!("{flag} {}: is a directory", path.display())).into());
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent
        && !parent.is_dir()
    {
        return Err(BadInput(format!(
            "{flag} {}: directory {} does not exist",
            path.display(),
            parent.display()
        ))
        .into());
    }
    writable(
        flag,
        path,
        if path.exists() {
            path
        } else {
            parent.unwrap_or(Path::new("."))
        },
    )
}

/// Refuses `place` (the file or directory itself, or the directory it would be
/// made in) when this user cannot write it: found before the crawl, not after.
fn writable(flag: &str, path: &Path, place: &Path) -> anyhow::Result<()> {
    use rustix::fs::{Access, access};
    match access(place, Access::WRITE_OK) {
        Err(errno) if errno != rustix::io::Errno::NOENT => Err(BadInput(format!(
            "{flag} {}: cannot write {}: {}",
            path.display(),
            place.display(),
            std::io::Error::from(errno)
        ))
        .into()),
        _ => Ok(()),
    }
}

/// Checks a directory given as `flag` before anything is created: it is a
/// directory, or it does not exist yet and its parent does.
pub fn check_dir(flag: &str, dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(BadInput(format!(
            "{flag} {}: is a file, not a directory",
            dir.display()
        ))
        .into());
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    if !dir.exists()
        && let Some(parent) = parent
        && !parent.is_dir()
    {
        return Err(BadInput(format!(
            "{flag} {}: directory {} does not exist",
            dir.display(),
            parent.display()
        ))
        .into());
    }
    writable(
        flag,
        dir,
        if dir.exists() {
            dir
        } else {
            parent.unwrap_or(Path::new("."))
        },
    )
}

/// Writes the report of the run that just ended in `data`: the one `report`
/// describes, or after an error the run this process began (returns false, writing
/// nothing, when the crawl failed before a run began).
pub fn write(
    path: &Path,
    data: &Path,
    report: Result<&RunReport, &anyhow::Error>,
) -> anyhow::Result<bool> {
    let state = match State::open(data, &OpenOptions::default()) {
        Ok(state) => state,
        // A crawl that failed may have failed to open the state: no run began.
        Err(_) if report.is_err() => return Ok(false),
        Err(error) => {
            return Err(error)
                .with_context(|| format!("reading the run record in {}", data.display()));
        }
    };
    let runs = state.runs()?;
    let run = match report {
        Ok(report) => runs.iter().find(|r| r.id == report.run),
        Err(_) => runs.last().filter(|r| r.pid == std::process::id()),
    };
    let Some(run) = run else {
        return Ok(false);
    };
    let elapsed = match report {
        Ok(report) => report.elapsed.as_secs_f64(),
        Err(_) => run
            .ended_at
            .unwrap_or(run.updated_at)
            .saturating_sub(run.started_at) as f64,
    };
    let stats = Stats {
        run: run.id,
        outcome: run.outcome.as_str(),
        data: data.display().to_string(),
        started_at: run.started_at,
        ended_at: run.ended_at,
        started: rfc3339_secs(run.started_at),
        ended: run.ended_at.map(rfc3339_secs),
        elapsed_seconds: elapsed,
        totals: report.ok().map(Totals::of),
        error: report.err().map(super::one_line),
        counters: &run.counters,
    };
    replace_with_json(path, &stats)?;
    Ok(true)
}

/// Writes `value` as pretty JSON to `path`, replacing it atomically (a
/// temporary file beside it, then a rename).
pub(super) fn replace_with_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let written = std::fs::write(&temporary, text).and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written?;
    Ok(())
}
