//! What a running crawl shows: a progress line on a terminal, or without one (a
//! cron log) a log line every [`LOG_EVERY`] (`LEGCRAWL_PROGRESS_EVERY` seconds),
//! the status file that lets `dump summary` answer while the crawl holds the
//! state, and the snapshot `legcrawl serve` shows (see [`super::watch`]), written
//! with it and once more, with the run's outcome, when the run ends.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::politeness::Politeness;
use super::watch::{self, Watch};
use crate::page::PageResult;
use crate::status::{self, Status, snapshot};
use crate::store::records::RunOutcome;
use crate::store::{Lease, State, Summary};

/// How often the status file is rewritten.
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// Without a terminal, a progress log line this often...
const LOG_EVERY: Duration = Duration::from_secs(10);
/// The log target of those lines, on at the default log level.
pub const PROGRESS_TARGET: &str = "legcrawl::progress";
/// ...unless this environment variable gives other seconds.
pub const LOG_EVERY_ENV: &str = "LEGCRAWL_PROGRESS_EVERY";

/// Progress display and status publication.
pub struct Progress {
    dir: PathBuf,
    bar: Option<ProgressBar>,
    /// Without a bar: how often a progress line is logged, and when it was.
    log_every: Duration,
    last_log: Instant,
    last_status: Option<Instant>,
    started: Instant,
    /// What the snapshot for `serve` is made of.
    watch: Watch,
}

impl Progress {
    /// A progress display (a bar only when stderr is a terminal).
    pub fn new(dir: &Path, robots_on: bool) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        let log_every = std::env::var(LOG_EVERY_ENV)
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
            .unwrap_or(LOG_EVERY);
        Progress {
            dir: dir.to_owned(),
            bar,
            log_every,
            last_log: Instant::now(),
            last_status: None,
            started: Instant::now(),
            watch: Watch::new(robots_on),
        }
    }

    /// Counts a finished lease for the snapshot (see [`Watch::observe`]).
    pub fn observe(&mut self, lease: &Lease, result: &PageResult) {
        self.watch.observe(lease, result);
    }

    /// Called after each commit.
    pub fn committed(&mut self, state: &State, politeness: &Politeness, _pages: usize) {
        if self.last_status.is_none_or(|t| t.elapsed() >= STATUS_EVERY) {
            self.update(state, politeness);
        }
    }

    /// Refreshes the bar, the status file and the snapshot.
    pub fn update(&mut self, state: &State, politeness: &Politeness) {
        let pages = state.run_counter("pages/completed");
        let line = || {
            let secs = self.started.elapsed().as_secs_f64().max(0.001);
            format!(
                "{pages} pages ({:.0}/s), queue {}, in flight {}, errors {}",
                pages as f64 / secs,
                state.frontier_len(),
                state.in_flight(),
                state.run_counter("fetch/failed")
            )
        };
        if let Some(bar) = &self.bar {
            bar.set_message(line());
        } else if self.last_log.elapsed() >= self.log_every {
            self.last_log = Instant::now();
            tracing::info!(target: PROGRESS_TARGET, "{}", line());
        }
        if self.last_status.is_some_and(|t| t.elapsed() < STATUS_EVERY) {
            return;
        }
        self.last_status = Some(Instant::now());
        let Ok(summary) = state.summary() else { return };
        let status = Status {
            pid: std::process::id(),
            updated_at: crate::store::records::unix_now(),
            run: state.run().map_or(0, |r| r.id),
            run_pages: pages,
            summary,
        };
        if let Err(error) = status::write(&self.dir, &status) {
            tracing::warn!(%error, "could not write the status file");
        }
        self.write_snapshot(state, politeness, status.summary);
    }

    /// Writes the snapshot now, whenever the last one was (the loop's end: what
    /// the last second did is in it before the run's outcome is added).
    pub fn publish(&mut self, state: &State, politeness: &Politeness) {
        match state.summary() {
            Ok(summary) => self.write_snapshot(state, politeness, summary),
            Err(error) => tracing::warn!(%error, "could not read the state for the snapshot"),
        }
    }

    fn write_snapshot(&mut self, state: &State, politeness: &Politeness, summary: Summary) {
        let published = self
            .watch
            .snapshot(state, Some(politeness), summary, snapshot::unix_ms())
            .map(|snapshot| snapshot::write(&self.dir, &snapshot));
        match published {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "could not write the snapshot file"),
            Err(error) => tracing::warn!(%error, "could not read the state for the snapshot"),
        }
    }

    /// Clears the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// At the end of a run: removes the status file (`dump summary` trusts only a
/// live writer) and writes the final snapshot with the run's outcome.
pub fn publish_end(state: &State, outcome: RunOutcome) {
    status::remove(state.dir());
    let last = snapshot::read(state.dir()).ok().flatten();
    let written = watch::final_snapshot(state, last, outcome.as_str())
        .map(|snapshot| snapshot::write(state.dir(), &snapshot));
    match written {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "could not write the final snapshot"),
        Err(error) => tracing::warn!(%error, "could not read the state for the final snapshot"),
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
