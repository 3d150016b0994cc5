//! The end-of-run report of `crawl --stats FILE.json` (Scrapy's stats dump), and
//! the checks of the files and directories a crawl will write.
//!
//! The report is built from the run's row in the crawl's view
//! ([`legcrawl::view::RunRow`], what `dump runs` prints), for a state directory
//! and a shared crawl alike: the same fields in both, but for what each mode
//! adds: `data` (the state directory), or `shared` (the Redis URL, its
//! password redacted), `name` and `worker`. A shared crawl's `run`
//! numbers its workers' runs, and its `counters` and `totals` are this
//! worker's. The file is written after the run ended (drained, limit, idle,
//! interrupted by the first Ctrl-C, or failed once its run was recorded),
//! replacing the file atomically (a temporary file beside it, then a rename);
//! nothing is written when no run was recorded. A second Ctrl-C quits at once
//! and writes no report.

use std::collections::BTreeMap;
use std::path::Path;

use legcrawl::engine::RunReport;
use legcrawl::page::PageTotals;
use legcrawl::shared::SharedTarget;
use legcrawl::view::rows::RunMore;
use legcrawl::view::{CrawlView, RunRow};
use serde::Serialize;

use super::BadInput;

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
    outcome: &'a str,
    /// The state directory (a shared crawl has none: it adds `shared`).
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<String>,
    started_at: u64,
    ended_at: Option<u64>,
    started: &'a str,
    ended: Option<&'a str>,
    elapsed_seconds: f64,
    /// `None` when the run failed (the end-of-run line is not printed then).
    totals: Option<Totals>,
    error: Option<String>,
    counters: &'a BTreeMap<String, u64>,
    /// A shared crawl's server, name and worker.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    shared: Option<SharedFields>,
}

/// What a shared crawl's report adds.
#[derive(Debug, Serialize)]
struct SharedFields {
    shared: String,
    name: String,
    worker: String,
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
    let crawl = match CrawlView::open_dir(data, false) {
        Ok(crawl) => crawl,
        // A crawl that failed may have failed to open the state: no run began.
        Err(_) if report.is_err() => return Ok(false),
        Err(error) => {
            return Err(super::dump::lift(error))
                .map_err(|e| e.context(format!("reading the run record in {}", data.display())));
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let runs = runtime.block_on(crawl.runs()).map_err(super::dump::lift)?;
    let data = data.display().to_string();
    write_report(
        path,
        &runs,
        0,
        report,
        |_| (Some(data.clone()), None),
        |text| text,
    )
}

/// Writes the report of this process's run of the shared crawl at `target`:
/// the one `report` describes, or after an error the newest run this process
/// recorded since `since` (unix seconds). Returns false, writing nothing,
/// when there is no such run.
pub async fn write_shared(
    path: &Path,
    target: &SharedTarget,
    since: u64,
    report: Result<&RunReport, &anyhow::Error>,
) -> anyhow::Result<bool> {
    let shared = legcrawl::shared::Shared::inspect(target, 1).await?;
    let runs = CrawlView::of_shared(shared)
        .runs()
        .await
        .map_err(super::dump::lift)?;
    let shared = |run: &RunRow| {
        let worker = match &run.more {
            RunMore::Shared { worker, .. } => worker.clone(),
            RunMore::State { .. } => String::new(),
        };
        let fields = SharedFields {
            shared: target.shown(),
            name: target.name.clone(),
            worker,
        };
        (None, Some(fields))
    };
    write_report(path, &runs, since, report, shared, |text| {
        target.scrub(&text)
    })
}

/// Writes the report of the run among `runs` that `report` names, or after
/// an error the newest one of this process begun at `since` or later.
fn write_report(
    path: &Path,
    runs: &[RunRow],
    since: u64,
    report: Result<&RunReport, &anyhow::Error>,
    place: impl Fn(&RunRow) -> (Option<String>, Option<SharedFields>),
    scrub: impl Fn(String) -> String,
) -> anyhow::Result<bool> {
    let ours = Some(std::process::id());
    let run = match report {
        Ok(report) => runs.iter().find(|r| r.id == report.run),
        Err(_) => runs
            .iter()
            .rev()
            .find(|r| r.pid == ours && r.started_at >= since),
    };
    let Some(run) = run else {
        return Ok(false);
    };
    let (data, shared) = place(run);
    let stats = Stats {
        run: run.id,
        outcome: &run.outcome,
        data,
        started_at: run.started_at,
        ended_at: run.ended_at,
        started: &run.started,
        ended: run.ended.as_deref(),
        elapsed_seconds: match report {
            Ok(report) => report.elapsed.as_secs_f64(),
            Err(_) => run.seconds(),
        },
        totals: report.ok().map(Totals::of),
        error: report.err().map(|e| scrub(super::one_line(e))),
        counters: &run.counters,
        shared,
    };
    replace_with_json(path, &stats)?;
    Ok(true)
}

/// Writes `value` as pretty JSON to `path`, replacing it atomically (a
/// temporary file beside it, then a rename).
fn replace_with_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
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
