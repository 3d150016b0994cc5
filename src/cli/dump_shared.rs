//! `legcrawl dump --shared URL --name NAME`: the views of a crawl shared
//! through Redis, in the same shapes as a local state's where they mean the
//! same (items, pages), read while workers run.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use legcrawl::fingerprint;
use legcrawl::shared::views::SharedSummary;
use legcrawl::shared::{Shared, SharedTarget};

use super::dump::{View, check_seen_url, print_page_rows, print_queued};
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
        let shared = Shared::connect(target, 1).await?;
        // A name no worker ever used is most likely a typo: say so, do not
        // print zeros.
        if !shared.exists().await? {
            return Err(BadInput(format!(
                "no shared crawl named {:?} in Redis at {}",
                target.name, target.redis
            ))
            .into());
        }
        let mut out = BufWriter::new(io::stdout().lock());
        let written = match view {
            View::Summary => print_summary(&mut out, &shared.summary().await?, json),
            View::Frontier => print_frontier(&mut out, &shared, limit.unwrap_or(20), json).await,
            // Shared runs do not note where their items start: refuse rather than
            // print every item.
            View::Items(items) if items.selects_runs() => Err(BadInput(
                "--run and --since-run are not available for a shared crawl yet".into(),
            )
            .into()),
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
            View::Runs => print_runs(&mut out, &shared, limit).await,
            View::Job(_) => Err(BadInput(
                "dump job is not available for a shared crawl yet".into(),
            )
            .into()),
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
    for entry in head {
        let line = json.then(|| serde_json::to_string(&entry)).transpose()?;
        print_queued(out, line, entry.seq, &entry.request)?;
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

async fn print_runs(
    out: &mut impl Write,
    shared: &Shared,
    limit: Option<usize>,
) -> anyhow::Result<()> {
    let runs = shared.runs().await?;
    let skip = limit.map_or(0, |l| runs.len().saturating_sub(l));
    if runs.is_empty() {
        say!("no worker run has ended yet");
    }
    for run in runs.iter().skip(skip) {
        writeln!(out, "{run}")?;
    }
    Ok(())
}
