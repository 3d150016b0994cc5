//! `legcrawl dump`: the views of a state, for people (tables) and scripts (JSON).
//!
//! A state a crawl holds is read through that crawl (see `beside`), except
//! the summary, which the crawl publishes (`status.json`) with its live
//! numbers.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use legcrawl::clock::rfc3339_secs;
use legcrawl::store::records::unix_now;
use legcrawl::store::{Blocked, StoreError};
use legcrawl::view::rows::SummaryMore;
use legcrawl::view::{CrawlView, RunRow, SeenAnswer, Summary, ViewError};

use super::dump_view::{View, check_seen_url, print_page_rows, print_queued, say_empty_frontier};
use super::stderr::say;
use super::{BadInput, StateArgs, finish};

/// Arguments of `dump`. Its options are global: accepted before or after the view.
#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    #[command(flatten)]
    state: StateArgs,
    /// Print JSON (one object for summary and seen; one per line otherwise).
    #[arg(long, global = true)]
    json: bool,
    /// At most this many entries (frontier, items, runs).
    #[arg(long, global = true, value_name = "N")]
    limit: Option<usize>,
    /// Read the crawl shared through this Redis server (redis://HOST:PORT/DB)
    /// instead of a state directory.
    #[arg(long, global = true, value_name = "URL")]
    shared: Option<String>,
    /// The shared crawl's name.
    #[arg(long, global = true, value_name = "NAME")]
    name: Option<String>,
    /// The CA certificate (PEM) that signed a rediss:// server's certificate.
    #[arg(long, global = true, value_name = "FILE")]
    shared_cacert: Option<std::path::PathBuf>,
    /// A client certificate (PEM) for a rediss:// server that asks for one
    /// (mutual TLS), with --shared-key.
    #[arg(long, global = true, value_name = "FILE")]
    shared_cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, global = true, value_name = "FILE")]
    shared_key: Option<std::path::PathBuf>,
    #[command(subcommand)]
    view: Option<View>,
}

/// Runs `dump`: opens the crawl's view (a state directory, or with
/// `--shared` a crawl in Redis) and prints the view asked for.
pub fn run(args: DumpArgs) -> anyhow::Result<ExitCode> {
    let view = args.view.clone().unwrap_or(View::Summary);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let crawl = if args.shared.is_some() || args.name.is_some() {
        let target = super::crawl::shared_target(
            args.shared.clone(),
            args.name.clone(),
            &super::crawl::TlsFiles {
                cacert: args.shared_cacert.as_deref(),
                cert: args.shared_cert.as_deref(),
                key: args.shared_key.as_deref(),
            },
        )?;
        runtime
            .block_on(CrawlView::open_shared(&target))
            .map_err(lift)?
    } else {
        // While a crawl holds the state, the summary it publishes answers;
        // every other view, the crawl itself (see `beside`).
        let dir = args.state.dir()?;
        let published = matches!(view, View::Summary);
        // A crawl that listens answers at once (opening would first wait
        // for its lock); a crawl that began listening meanwhile, after.
        let beside = |view: &View| super::beside::ask(&dir, view.clone(), args.limit, args.json);
        if !published && let Some(code) = beside(&view)? {
            return Ok(code);
        }
        match CrawlView::open_dir(&dir, published) {
            Ok(crawl) => crawl,
            Err(busy @ ViewError::Store(StoreError::Busy { .. })) => {
                return match beside(&view)? {
                    Some(code) => Ok(code),
                    None => Err(lift(busy)),
                };
            }
            Err(error) => return Err(lift(error)),
        }
    };
    // A damaged shared crawl: what is left is printed, then the line that
    // says it is not the crawl, and the exit is not 0.
    let damage = runtime.block_on(crawl.damage()).map_err(lift)?;
    let code = runtime.block_on(async {
        let mut out = BufWriter::new(io::stdout().lock());
        let written = print_view(&mut out, &crawl, view, args.limit, args.json).await;
        finish(written.and_then(|()| out.flush().map_err(Into::into)))
    })?;
    match damage {
        Some(error) => Err(error.into()),
        None => Ok(code),
    }
}

/// Prints `view` of `crawl` (here, or in a crawl for a dump beside it).
pub(super) async fn print_view(
    out: &mut impl Write,
    crawl: &CrawlView,
    view: View,
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    match view {
        View::Summary => print_summary(out, &crawl.summary().await.map_err(lift)?, json),
        View::Frontier => print_frontier(out, crawl, limit.unwrap_or(20), json).await,
        View::Items(items) => super::export::print_items(out, crawl, &items, limit, json).await,
        View::Seen { url } => {
            check_seen_url(&url)?;
            print_seen(out, &crawl.seen(&url).await.map_err(lift)?, json)
        }
        View::Pages { due } => {
            let pages = crawl.pages(due, limit.unwrap_or(usize::MAX)).await;
            print_page_rows(out, pages.map_err(lift)?, json)
        }
        View::Runs => print_runs(out, &crawl.runs().await.map_err(lift)?, limit, json),
        View::Job(job) => super::dump_job::print_job(out, crawl, &job, json).await,
        View::Blocked => print_blocked(out, &crawl.blocked().map_err(lift)?, json),
    }
}

/// A view's error as the exit code wants it: a question without an answer
/// is bad input (2); a store error keeps its type (its own code).
pub(super) fn lift(error: ViewError) -> anyhow::Error {
    match error {
        ViewError::NoAnswer(message) => BadInput(message).into(),
        ViewError::Store(error) => error.into(),
        error => error.into(),
    }
}

/// The summary as a table of names and values (the rows both modes have,
/// then each mode's own), or one JSON object.
fn print_summary(out: &mut impl Write, s: &Summary, json: bool) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(s)?)?;
        return Ok(());
    }
    if let SummaryMore::State(more) = &s.more
        && let Some(live) = &more.live
    {
        writeln!(
            out,
            "live: run {} (pid {}), {} this run, status written {}",
            live.run,
            live.pid,
            super::counted(live.run_pages, "page", "pages"),
            rfc3339_secs(live.updated_at)
        )?;
    }
    if let SummaryMore::Shared(more) = &s.more {
        writeln!(out, "{:<30} {}", "shared crawl", more.name)?;
    }
    let rows: [(&str, String); 11] = [
        ("frontier", s.frontier.to_string()),
        ("in flight", s.in_flight.to_string()),
        ("seen", s.seen.to_string()),
        ("items", s.items.to_string()),
        ("pages", s.pages.to_string()),
        ("filtered", s.filtered.to_string()),
        ("robots disallowed", s.robots_disallowed.to_string()),
        ("hosts", s.hosts.to_string()),
        ("runs", s.runs.to_string()),
        (
            "job",
            s.job
                .map_or_else(|| "none yet".into(), |v| format!("version {v} (dump job)")),
        ),
        ("dedup", s.dedup.clone()),
    ];
    for (name, value) in rows {
        writeln!(out, "{name:<30} {value}")?;
    }
    match (s.due_now, s.revisit_budget) {
        (Some(due), None) => writeln!(
            out,
            "{:<30} {due} due pages, besides the seeds and the queued (dump pages --due)",
            "next run asks"
        )?,
        (Some(due), Some(budget)) => writeln!(
            out,
            "{:<30} at most {budget} pages by the revisit budget, due or not (of {due} due pages), besides the seeds, the queued and the pages under a fixed interval",
            "next run asks"
        )?,
        _ => {}
    }
    match &s.more {
        SummaryMore::State(more) => print_state_rows(out, more),
        SummaryMore::Shared(more) => print_shared_rows(out, more),
    }
}

/// The rows only a state directory has: its Bloom filter, disk use and
/// unreachable hosts.
fn print_state_rows(
    out: &mut impl Write,
    s: &legcrawl::view::rows::StateSummary,
) -> anyhow::Result<()> {
    let sized = if s.bloom_sized {
        " (sized to the crawl)"
    } else {
        ""
    };
    let rows: [(&str, String); 5] = [
        (
            "bloom",
            format!("2^{} bits, {} hashes{sized}", s.bloom_bits, s.bloom_hashes),
        ),
        (
            "bloom fill",
            format!(
                "{:.6} (estimated FPR {:.3e})",
                s.bloom_fill_ratio, s.bloom_fpr_estimate
            ),
        ),
        (
            "bloom false positives caught",
            s.bloom_false_positives.to_string(),
        ),
        (
            "size on disk",
            format!("{:.1} MiB", s.disk_bytes as f64 / 1048576.0),
        ),
        (
            "last run's peak memory",
            s.last_run_peak_rss_kib.map_or_else(
                || "-".to_owned(),
                |kib| format!("{:.1} MiB", kib as f64 / 1024.0),
            ),
        ),
    ];
    for (name, value) in rows {
        writeln!(out, "{name:<30} {value}")?;
    }
    for host in &s.unreachable {
        let parked = match host.parked_until {
            Some(until) if host.parked_at(unix_now()) => {
                format!(", parked until {}", rfc3339_secs(until))
            }
            Some(_) => ", tried again by the next crawl".to_owned(),
            None => String::new(),
        };
        let value = format!(
            "{}: {} run(s) in a row, since {} ({}){parked}",
            host.host,
            host.runs,
            rfc3339_secs(host.since),
            host.error
        );
        writeln!(out, "{:<30} {value}", "unreachable host")?;
    }
    for seed in &s.parked_seeds {
        writeln!(
            out,
            "{:<30} {seed} (`legcrawl seeds add` it to try it at the next crawl)",
            "parked seed"
        )?;
    }
    Ok(())
}

/// The rows only a shared crawl has: page records, parked hosts, workers.
fn print_shared_rows(
    out: &mut impl Write,
    s: &legcrawl::view::rows::SharedMore,
) -> anyhow::Result<()> {
    writeln!(out, "{:<30} {}", "page records", s.page_records)?;
    writeln!(out, "{:<30} {}", "parked hosts", s.parked_hosts)?;
    writeln!(out, "{:<30} {}", "workers", s.workers.len())?;
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
    crawl: &CrawlView,
    limit: usize,
    json: bool,
) -> anyhow::Result<()> {
    let head = crawl.frontier_head(limit).await.map_err(lift)?;
    if head.len() >= limit {
        let queued = crawl.summary().await.map_err(lift)?.frontier;
        if (head.len() as u64) < queued {
            say!(
                "showing the first {} of {queued} queued requests (--limit N for more)",
                head.len()
            );
        }
    }
    if head.is_empty() {
        say_empty_frontier();
    }
    for entry in head {
        let line = json.then(|| serde_json::to_string(&entry)).transpose()?;
        print_queued(out, line, entry.place, &entry.request)?;
    }
    Ok(())
}

fn print_seen(out: &mut impl Write, answer: &SeenAnswer, json: bool) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(&answer)?)?;
        return Ok(());
    }
    let exact = match answer.exact {
        Some(true) => "seen",
        Some(false) => "not seen",
        None => "not kept (dedup = bloom)",
    };
    writeln!(out, "url          {}", answer.url)?;
    writeln!(out, "canonical    {}", answer.canonical)?;
    writeln!(out, "fingerprint  {}", answer.fingerprint)?;
    if let Some(bloom) = answer.bloom {
        let said = if bloom { "maybe seen" } else { "not seen" };
        writeln!(out, "bloom        {said}")?;
    }
    writeln!(out, "exact        {exact}")?;
    if let Some(page) = &answer.page {
        writeln!(
            out,
            "page         status {}, {} fetches, version {}",
            page.status, page.fetches, page.version
        )?;
    }
    Ok(())
}

/// One row per run, the last `limit`: a table, or one JSON object each.
fn print_runs(
    out: &mut impl Write,
    runs: &[RunRow],
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    let skip = limit.map_or(0, |l| runs.len().saturating_sub(l));
    if runs.is_empty() {
        say!("no run recorded yet");
    }
    if !json {
        writeln!(
            out,
            "{:>4}  {:>3}  {:<20}  {:<20}  {:<11}  {:>7}  {:>7}  {:>7}  {:>9}  {:>5}  {:>6}  {:>7}  {:>7}  {:>7}  {:>8}  {:>9}  by",
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
            "fetched",
            "items",
            "filtered",
            "bytes"
        )?;
    }
    for run in &runs[skip..] {
        if json {
            writeln!(out, "{}", serde_json::to_string(run)?)?;
            continue;
        }
        let c = &run.columns;
        writeln!(
            out,
            "{:>4}  {:>3}  {:<20}  {:<20}  {:<11}  {:>7}  {:>7}  {:>7}  {:>9}  {:>5}  {:>6}  {:>7}  {:>7}  {:>7}  {:>8}  {:>9}  {}",
            run.id,
            run.job.map_or_else(|| "-".to_owned(), |v| v.to_string()),
            run.started,
            run.ended.as_deref().unwrap_or("-"),
            run.outcome,
            c.totals.pages,
            c.totals.new,
            c.totals.changed,
            c.totals.unchanged,
            c.totals.gone,
            c.totals.failed,
            c.totals.blocked,
            c.fetched,
            c.items,
            c.filtered,
            c.bytes,
            run.by()
        )?;
    }
    Ok(())
}

fn print_blocked(out: &mut impl Write, blocked: &[Blocked], json: bool) -> anyhow::Result<()> {
    for b in blocked {
        if json {
            writeln!(out, "{}", serde_json::to_string(b)?)?;
        } else {
            writeln!(
                out,
                "{:<8} {:>5}x  {}  {}",
                b.reason,
                b.count,
                rfc3339_secs(b.at),
                b.url
            )?;
        }
    }
    Ok(())
}
