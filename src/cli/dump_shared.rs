//! `legcrawl dump --shared URL --name NAME`: the views of a crawl shared
//! through Redis, in the same shapes as a local state's where they mean the
//! same (items, pages, job), read while workers run.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use legcrawl::clock::rfc3339_secs;
use legcrawl::fingerprint;
use legcrawl::shared::views::{SharedSummary, stream_id};
use legcrawl::shared::{Shared, SharedTarget, StoredJob};

use super::dump_view::{View, check_seen_url, print_page_rows, print_queued, say_empty_frontier};
use super::export::RunRef;
use super::stderr::say;
use super::{BadInput, finish};

pub(super) fn run(
    target: &SharedTarget,
    view: View,
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let shared = Shared::inspect(target, 1).await?;
        // A name no worker ever used is most likely a typo: say so, do not
        // print zeros.
        if !shared.exists().await? {
            return Err(BadInput(format!(
                "no shared crawl named {:?} in Redis at {}",
                target.name,
                target.shown()
            ))
            .into());
        }
        // A crawl of an earlier key layout: one line, exit 2.
        shared.check_schema().await.map_err(|error| match error {
            error @ legcrawl::shared::SharedError::OldSchema { .. } => {
                anyhow::Error::from(BadInput(error.to_string()))
            }
            error => error.into(),
        })?;
        let mut out = BufWriter::new(io::stdout().lock());
        let written = match view {
            View::Summary => print_summary(&mut out, &shared.summary().await?, json),
            View::Frontier => print_frontier(&mut out, &shared, limit.unwrap_or(20), json).await,
            View::Items(items) if items.selects_runs() => {
                let (run, since) = items.runs();
                print_run_items(&mut out, &shared, run, since, limit).await
            }
            View::Items(_) => print_items(&mut out, &shared, limit).await,
            View::Seen { url } => print_seen(&mut out, &shared, &url, json).await,
            View::Pages { due } => {
                let limit = limit.unwrap_or(usize::MAX);
                let pages = if due {
                    // Due now, soonest first (the seeds are queued every cycle too).
                    let now = legcrawl::store::records::unix_now();
                    let fps = shared.due(now, limit).await?;
                    let records = shared.page_records(&fps).await?;
                    fps.into_iter()
                        .zip(records)
                        .filter_map(|(fp, r)| Some((fp, r?)))
                        .collect()
                } else {
                    shared.pages(limit).await?
                };
                print_page_rows(&mut out, pages, json)
            }
            View::Runs => print_runs(&mut out, &shared, limit, json).await,
            View::Job(job) => print_job(&mut out, &shared, job.run, json).await,
            View::Blocked => Err(BadInput(
                "dump blocked is not kept for a shared crawl (see the robots/disallowed counter in the summary)".into(),
            )
            .into()),
        };
        finish(written.and_then(|()| out.flush().map_err(Into::into)))
    })
}

fn print_summary(out: &mut impl Write, s: &SharedSummary, json: bool) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(s)?)?;
        return Ok(());
    }
    let rows = [
        ("shared crawl", s.name.clone()),
        ("frontier", s.frontier.to_string()),
        ("in flight", s.in_flight.to_string()),
        ("seen", s.seen.to_string()),
        ("items", s.items.to_string()),
        ("pages", s.pages.to_string()),
        ("fetches", s.fetches.to_string()),
        ("filtered", s.filtered.to_string()),
        ("hosts", s.hosts.to_string()),
        ("parked hosts", s.parked_hosts.to_string()),
        ("runs", s.runs.to_string()),
        ("dedup", s.dedup.to_owned()),
        ("workers", s.workers.len().to_string()),
    ];
    for (name, value) in rows {
        writeln!(out, "{name:<30} {value}")?;
    }
    for w in &s.workers {
        let seen = w.last_seen_ms.map_or_else(
            || "never renewed".to_owned(),
            |ms| format!("renewed {:.1} s ago", ms as f64 / 1000.0),
        );
        writeln!(out, "  {:<28} {} leases, {seen}", w.id, w.leases)?;
    }
    Ok(())
}

async fn print_frontier(
    out: &mut impl Write,
    shared: &Shared,
    limit: usize,
    json: bool,
) -> anyhow::Result<()> {
    let head = shared.frontier_head(limit).await?;
    if head.is_empty() {
        say_empty_frontier();
    }
    for entry in head {
        let line = json.then(|| serde_json::to_string(&entry)).transpose()?;
        print_queued(out, line, entry.place, &entry.request)?;
    }
    Ok(())
}

async fn print_items(
    out: &mut impl Write,
    shared: &Shared,
    limit: Option<usize>,
) -> anyhow::Result<()> {
    let mut left = limit.unwrap_or(usize::MAX);
    let mut failed = None;
    shared
        .for_each_item(|_, item| {
            if left == 0 {
                return false;
            }
            left -= 1;
            match writeln!(out, "{item}") {
                Ok(()) => true,
                Err(error) => {
                    failed = Some(error);
                    false
                }
            }
        })
        .await?;
    match failed {
        Some(error) => Err(error.into()),
        None => Ok(()),
    }
}

async fn print_seen(
    out: &mut impl Write,
    shared: &Shared,
    url: &str,
    json: bool,
) -> anyhow::Result<()> {
    check_seen_url(url)?;
    let fp = fingerprint::fingerprint(&legcrawl::request::Request::get(url), &[]);
    let (seen, page) = shared.seen(&fp).await?;
    let hex = fingerprint::to_hex(&fp);
    if json {
        let value = serde_json::json!({
            "url": url,
            "fingerprint": hex,
            "exact": seen,
            "page": page,
        });
        writeln!(out, "{value}")?;
        return Ok(());
    }
    writeln!(out, "url          {url}")?;
    writeln!(out, "fingerprint  {hex}")?;
    writeln!(
        out,
        "exact        {}",
        if seen { "seen" } else { "not seen" }
    )?;
    if let Some(page) = page {
        writeln!(
            out,
            "page         status {}, {} fetches, version {}",
            page.status, page.fetches, page.version
        )?;
    }
    Ok(())
}

/// `dump --shared ... items --run N|last` (the items run N's worker
/// committed during the run) or `--since-run N|last` (the items appended
/// after run N ended; 0: every item). A run that does not exist is one line,
/// exit 2.
async fn print_run_items(
    out: &mut impl Write,
    shared: &Shared,
    run: Option<RunRef>,
    since: Option<RunRef>,
    limit: Option<usize>,
) -> anyhow::Result<()> {
    let name = &shared.target().name;
    let pick = match (run, since) {
        (None, Some(RunRef::Number(0))) | (None, None) => {
            return print_items(out, shared, limit).await;
        }
        (Some(pick), _) | (None, Some(pick)) => pick,
    };
    let runs = shared.runs().await?;
    let index = match pick {
        RunRef::Last => runs.len().checked_sub(1),
        RunRef::Number(n) => usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .filter(|&i| i < runs.len()),
    };
    let Some(index) = index else {
        return Err(BadInput(match (pick, runs.len()) {
            (RunRef::Last, _) | (_, 0) => {
                format!("the shared crawl {name:?} has no worker runs recorded yet")
            }
            (RunRef::Number(n), last) => {
                format!("the shared crawl {name:?} has no run {n} (the last run is {last})")
            }
        })
        .into());
    };
    let record = &runs[index];
    let mark = |field: &str| record.get(field).and_then(serde_json::Value::as_str);
    let (Some(after), Some(until)) = (mark("items_after"), mark("items_until")) else {
        return Err(BadInput(format!(
            "run {} of the shared crawl {name:?} was recorded before runs noted their items",
            index + 1
        ))
        .into());
    };
    let worker = record.get("worker").and_then(serde_json::Value::as_str);
    let (start, end, only) = match run {
        Some(_) => (after, stream_id(until), worker),
        None => (until, None, None),
    };
    let mut left = limit.unwrap_or(usize::MAX);
    let mut failed = None;
    shared
        .scan_items_from(&format!("({start}"), |entry| {
            if end.is_some_and(|end| stream_id(entry.id).is_none_or(|id| id > end)) {
                return false;
            }
            if only.is_some() && entry.worker != only {
                return true;
            }
            if left == 0 {
                return false;
            }
            left -= 1;
            match writeln!(out, "{}", entry.item) {
                Ok(()) => true,
                Err(error) => {
                    failed = Some(error);
                    false
                }
            }
        })
        .await?;
    match failed {
        Some(error) => Err(error.into()),
        None => Ok(()),
    }
}

/// `dump --shared ... runs`: one row per worker run, as the embedded `dump
/// runs` prints them (with the worker's id); `--json`: the records.
async fn print_runs(
    out: &mut impl Write,
    shared: &Shared,
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    let runs = shared.runs().await?;
    let skip = limit.map_or(0, |l| runs.len().saturating_sub(l));
    if runs.is_empty() {
        say!("no worker run has ended yet");
        return Ok(());
    }
    if !json {
        writeln!(
            out,
            "{:>4}  {:>3}  {:<20}  {:<20}  {:<11}  {:>7}  {:>7}  {:>7}  {:>9}  {:>5}  {:>6}  {:>7}  {:>7}  {:>8}  worker",
            "run",
            "job",
            "started",
            "ended",
            "outcome",
            "pages",
            "new",
            "changed",
            "unchanged",
            "gone",
            "failed",
            "blocked",
            "items",
            "filtered"
        )?;
    }
    for (i, run) in runs.iter().enumerate().skip(skip) {
        if json {
            writeln!(out, "{run}")?;
            continue;
        }
        let number = |field: &str| run.get(field).and_then(serde_json::Value::as_u64);
        let counter = |name: &str| {
            run.get("counters")
                .and_then(|c| c.get(name))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        };
        let totals = legcrawl::engine::PageTotals::of(counter);
        let time = |field: &str| number(field).map_or_else(|| "-".to_owned(), rfc3339_secs);
        writeln!(
            out,
            "{:>4}  {:>3}  {:<20}  {:<20}  {:<11}  {:>7}  {:>7}  {:>7}  {:>9}  {:>5}  {:>6}  {:>7}  {:>7}  {:>8}  {}",
            i + 1,
            number("job").map_or_else(|| "-".to_owned(), |v| v.to_string()),
            time("started_at"),
            time("ended_at"),
            run.get("outcome")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("-"),
            totals.pages,
            totals.new,
            totals.changed,
            totals.unchanged,
            totals.gone,
            totals.failed,
            totals.blocked,
            counter("items/stored"),
            counter("dupefilter/filtered"),
            run.get("worker")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("-"),
        )?;
    }
    Ok(())
}

/// `dump --shared ... job [--run N|last]`: the crawl's newest job, or the
/// version worker run `run` began under, as a crawl file that `crawl --config`
/// accepts (after a comment line naming it); with `--json` the stored record
/// (`version`, `created_at`, `worker`, `text`).
async fn print_job(
    out: &mut impl Write,
    shared: &Shared,
    run: Option<RunRef>,
    json: bool,
) -> anyhow::Result<()> {
    let name = &shared.target().name;
    let (job, note) = match run {
        None => {
            let job = shared.current_job().await?.ok_or_else(|| {
                BadInput(format!(
                    "the shared crawl {name:?} has no job stored yet (a worker stores one when it starts)"
                ))
            })?;
            (job, String::new())
        }
        Some(pick) => run_job(shared, pick).await?,
    };
    if json {
        writeln!(out, "{}", serde_json::to_string(&job)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "# legcrawl job version {} of the shared crawl {name:?}, stored {} by worker {}{note}",
        job.version,
        rfc3339_secs(job.created_at),
        job.worker
    )?;
    out.write_all(job.text.as_bytes())?;
    if !job.text.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}

/// The job version worker run `pick` began under, and a note naming the
/// later versions it took up; or one line saying why there is none.
async fn run_job(shared: &Shared, pick: RunRef) -> anyhow::Result<(StoredJob, String)> {
    let name = &shared.target().name;
    let number = match pick {
        RunRef::Last => None,
        RunRef::Number(n) => Some(n),
    };
    let Some((number, record)) = shared.run_record(number).await? else {
        let runs = shared.runs().await?.len();
        return Err(BadInput(match (pick, runs) {
            (RunRef::Last, _) | (_, 0) => {
                format!("the shared crawl {name:?} has no worker runs recorded yet")
            }
            (RunRef::Number(n), last) => {
                format!("the shared crawl {name:?} has no run {n} (the last run is {last})")
            }
        })
        .into());
    };
    let Some(version) = record.get("job").and_then(serde_json::Value::as_u64) else {
        return Err(BadInput(format!(
            "run {number} of the shared crawl {name:?} was recorded before jobs were stored"
        ))
        .into());
    };
    let job = shared.job(version).await?.ok_or_else(|| {
        anyhow::anyhow!("run {number} names job version {version}, which is not stored")
    })?;
    let later: Vec<String> = record
        .get("jobs")
        .and_then(serde_json::Value::as_array)
        .map(|all| {
            all.iter()
                .filter_map(serde_json::Value::as_u64)
                .filter(|&v| v != version)
                .map(|v| v.to_string())
                .collect()
        })
        .unwrap_or_default();
    let note = match later.as_slice() {
        [] => format!(", which run {number} began under"),
        _ => format!(
            ", which run {number} began under (it then took up version {})",
            later.join(", ")
        ),
    };
    Ok((job, note))
}
