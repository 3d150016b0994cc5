//! The end of a run: its one-line report, the resume hint, the `--stats`
//! file and the exit status.

use std::process::ExitCode;

use legcrawl::config::CrawlConfig;
use legcrawl::engine::RunReport;
use legcrawl::store::records::RunOutcome;

use crate::cli::counted;
use crate::cli::stderr::say;

/// The exit status of a run that ended: 130 interrupted, 4 when every request
/// failed on the network (wget's code), 8 when no page answered well and some
/// request was answered with an error status ([`RunReport::errors_only`];
/// wget's "server issued an error response"), 3 when a shared worker saw
/// Redis lose committed completions during its run ([`RunReport::lost`]:
/// the crawl went on, but pages were fetched again and output files may
/// hold their items twice), else 0.
pub(super) fn exit_status(report: &RunReport) -> ExitCode {
    match report.outcome {
        RunOutcome::Interrupted => ExitCode::from(130),
        _ if report.lost.is_some() => ExitCode::from(3),
        _ if report.network_failed => {
            say!(
                "legcrawl: no request was answered: every one failed on the network (refused, DNS, TLS or timeout; see the lines above)"
            );
            ExitCode::from(4)
        }
        _ if report.errors_only => {
            say!(
                "legcrawl: no page answered well: the server answered with error statuses only (4xx/5xx: a wrong seed URL, a server error, a refused proxy password; see the line above)"
            );
            ExitCode::from(8)
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Writes the `--stats` report; a failure is one line on stderr, not a failed crawl.
pub(super) fn write_stats(
    path: &std::path::Path,
    config: &CrawlConfig,
    result: Result<&RunReport, &anyhow::Error>,
) {
    if let Err(error) = crate::cli::stats::write(path, &config.data_dir, result) {
        say!(
            "legcrawl: could not write the run report to {}: {}",
            path.display(),
            crate::cli::one_line(&error)
        );
    }
}

/// The end-of-run line, and the resume hint when requests are left.
pub(super) fn print_report(config: &CrawlConfig, r: &RunReport, resume: &str) {
    let t = &r.totals;
    let rate = t.pages as f64 / r.elapsed.as_secs_f64().max(0.001);
    let unreachable = match r.unreachable {
        0 => String::new(),
        1 => ", 1 host unreachable".to_owned(),
        n => format!(", {n} hosts unreachable"),
    };
    let out_of_scope = match t.out_of_scope {
        0 => String::new(),
        n => format!(", {n} out of scope"),
    };
    let deleted = match r.deleted {
        0 => String::new(),
        n => format!(" ({n} deleted)"),
    };
    // A run that saw Redis go back does not end as a plain success.
    let outcome = match r.lost {
        None => r.outcome.as_str().to_owned(),
        Some((lost, (from, to))) => format!(
            "{} after a loss (Redis went back from commit {from} to {to} and lost {lost} committed completions: their pages were fetched again; an --output file's lines of them are moved aside)",
            r.outcome.as_str()
        ),
    };
    say!(
        "run {} ({}): {outcome} — {} ({rate:.0}/s, {}): {} new, {} changed, {} unchanged ({} not modified), {} gone, {} failed, {} blocked{out_of_scope}; {}{deleted}, {} queued, {} filtered, {} left in the frontier{unreachable} ({:.1} s)",
        r.run,
        match (&config.shared, r.new_cycle) {
            (Some(_), _) => "shared",
            (None, true) => "new cycle",
            (None, false) => "resumed",
        },
        counted(t.pages, "page", "pages"),
        human_bytes(r.bytes),
        t.new,
        t.changed,
        t.unchanged,
        t.not_modified,
        t.gone,
        t.failed,
        t.blocked,
        counted(r.items, "item", "items"),
        r.enqueued,
        counted(r.filtered, "duplicate", "duplicates"),
        r.frontier,
        r.elapsed.as_secs_f64()
    );
    if matches!(
        r.outcome,
        RunOutcome::Interrupted | RunOutcome::Limit | RunOutcome::Idle
    ) && r.frontier > 0
    {
        let place = match &config.shared {
            Some(target) => format!("the shared crawl {:?} in Redis", target.name),
            None => config.data_dir.display().to_string(),
        };
        say!("state saved in {place}; resume with: {resume}");
    }
}

/// `1.2 MB`-style byte counts for the summary line.
fn human_bytes(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", bytes as f64 / 1e6),
        _ => format!("{:.2} GB", bytes as f64 / 1e9),
    }
}
