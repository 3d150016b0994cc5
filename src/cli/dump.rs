//! `legcrawl dump`: the views of a state, for people (tables) and scripts (JSON).

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use anyhow::Context;
use legcrawl::clock::rfc3339_secs;
use legcrawl::fingerprint::Fingerprint;
use legcrawl::status;
use legcrawl::store::records::{RunRecord, unix_now};
use legcrawl::store::{Blocked, OpenOptions, PageRecord, SeenAnswer, State, StoreError, Summary};

use super::dump_view::{View, check_seen_url, print_page_rows, print_queued, say_empty_frontier};
use super::export;
use super::stats::{RunColumns, RunRow};
use super::stderr::say;
use super::{StateArgs, finish};

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

pub fn run(args: DumpArgs) -> anyhow::Result<ExitCode> {
    let view = args.view.clone().unwrap_or(View::Summary);
    if args.shared.is_some() || args.name.is_some() {
        let target = super::crawl::shared_target(
            args.shared.clone(),
            args.name.clone(),
            &super::crawl::TlsFiles {
                cacert: args.shared_cacert.as_deref(),
                cert: args.shared_cert.as_deref(),
                key: args.shared_key.as_deref(),
            },
        )?;
        return super::dump_shared::run(&target, view, args.limit, args.json);
    }
    let dir = &args.state.dir()?;
    let state = match State::open(dir, &OpenOptions::default()) {
        Ok(state) => state,
        Err(StoreError::Busy { .. }) if matches!(view, View::Summary) => {
            return live_summary(dir, args.json);
        }
        Err(error) => return Err(error.into()),
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let written = match view {
        View::Summary => print_summary(&mut out, &state.summary()?, args.json, None),
        View::Frontier => print_frontier(&mut out, &state, args.limit.unwrap_or(20), args.json),
        View::Items(items) => export::print_items(&mut out, &state, &items, args.limit, args.json),
        View::Seen { url } => print_seen(&mut out, &state, &url, args.json),
        View::Pages { due } => print_pages(&mut out, &state, due, args.limit, args.json),
        View::Runs => print_runs(&mut out, &state.runs()?, args.limit, args.json),
        View::Job(job) => super::dump_job::print_job(&mut out, &state, &job, args.json),
        View::Blocked => print_blocked(&mut out, &state.blocked()?, args.json),
    };
    finish(written.and_then(|()| out.flush().map_err(Into::into)))
}

fn live_summary(dir: &std::path::Path, json: bool) -> anyhow::Result<ExitCode> {
    let live = status::read_live(dir).ok_or_else(|| StoreError::Busy {
        path: dir.to_owned(),
    })?;
    let mut out = io::stdout().lock();
    let note = format!(
        "live: run {} (pid {}), {} this run, status written {}",
        live.run,
        live.pid,
        super::counted(live.run_pages, "page", "pages"),
        rfc3339_secs(live.updated_at)
    );
    if json {
        let mut value = serde_json::to_value(&live.summary)?;
        if let Some(map) = value.as_object_mut() {
            map.insert("live".into(), serde_json::to_value(&live)?);
        }
        finish(writeln!(out, "{value}").map_err(Into::into))
    } else {
        finish(print_summary(&mut out, &live.summary, false, Some(&note)))
    }
}

pub(super) fn print_summary(
    out: &mut impl Write,
    s: &Summary,
    json: bool,
    note: Option<&str>,
) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(s)?)?;
        return Ok(());
    }
    if let Some(note) = note {
        writeln!(out, "{note}")?;
    }
    let rows: [(&str, String); 16] = [
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
        (
            "bloom",
            format!(
                "2^{} bits, {} hashes{}",
                s.bloom_bits,
                s.bloom_hashes,
                if s.bloom_sized {
                    " (sized to the crawl)"
                } else {
                    ""
                }
            ),
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
            Some(until) if host.parked_at(legcrawl::store::records::unix_now()) => {
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

fn print_frontier(
    out: &mut impl Write,
    state: &State,
    limit: usize,
    json: bool,
) -> anyhow::Result<()> {
    let head = state.frontier_head(limit)?;
    let queued = state.frontier_len();
    if (head.len() as u64) < queued {
        say!(
            "showing the first {} of {queued} queued requests (--limit N for more)",
            head.len()
        );
    }
    if head.is_empty() {
        say_empty_frontier();
    }
    for entry in head {
        let line = json.then(|| serde_json::to_string(&entry)).transpose()?;
        print_queued(out, line, entry.seq, &entry.request)?;
    }
    Ok(())
}

fn print_seen(out: &mut impl Write, state: &State, url: &str, json: bool) -> anyhow::Result<()> {
    check_seen_url(url)?;
    let answer = state
        .seen_answer(url, &[])
        .with_context(|| format!("looking up {url}"))?;
    print_seen_answer(out, &answer, json)
}

fn print_seen_answer(out: &mut impl Write, answer: &SeenAnswer, json: bool) -> anyhow::Result<()> {
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
    writeln!(
        out,
        "bloom        {}",
        if answer.bloom {
            "maybe seen"
        } else {
            "not seen"
        }
    )?;
    writeln!(out, "exact        {exact}")?;
    Ok(())
}

/// The page records to show: all (fingerprint order), or with `due` the seeds'
/// and those due now (soonest first).
fn collect_pages(
    state: &State,
    due: bool,
    limit: usize,
) -> anyhow::Result<Vec<(Fingerprint, PageRecord)>> {
    let mut pages = Vec::new();
    if !due {
        state.for_each_page(|fp, record| {
            pages.push((fp, record.clone()));
            pages.len() < limit
        })?;
        return Ok(pages);
    }
    let seeds = state.seed_fingerprints(&[])?;
    for &fp in &seeds {
        if let Some(record) = state.page(&fp)? {
            pages.push((fp, record));
        }
    }
    state.for_each_due(unix_now(), |fp, record| {
        if !seeds.contains(&fp) && !record.gone {
            pages.push((fp, record));
        }
        pages.len() < limit
    })?;
    pages.truncate(limit);
    Ok(pages)
}

fn print_pages(
    out: &mut impl Write,
    state: &State,
    due: bool,
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    let pages = collect_pages(state, due, limit.unwrap_or(usize::MAX))?;
    print_page_rows(out, pages, json)
}

fn print_runs(
    out: &mut impl Write,
    runs: &[RunRecord],
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<()> {
    let skip = limit.map_or(0, |l| runs.len().saturating_sub(l));
    if !json {
        writeln!(
            out,
            "{:>4}  {:>3}  {:<20}  {:<20}  {:<11}  {:>7}  {:>7}  {:>7}  {:>9}  {:>5}  {:>6}  {:>7}  {:>7}  {:>7}  {:>8}  {:>9}",
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
            writeln!(out, "{}", serde_json::to_string(&RunRow::of(run))?)?;
            continue;
        }
        let c = RunColumns::of(run);
        let ended = run.ended_at.map(rfc3339_secs).unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{:>4}  {:>3}  {:<20}  {:<20}  {:<11}  {:>7}  {:>7}  {:>7}  {:>9}  {:>5}  {:>6}  {:>7}  {:>7}  {:>7}  {:>8}  {:>9}",
            run.id,
            run.job.map_or_else(|| "-".to_owned(), |v| v.to_string()),
            rfc3339_secs(run.started_at),
            ended,
            run.outcome.as_str(),
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
            c.bytes
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
