//! The engine's side of hosts that cannot be served this run: connection
//! failures (reported once per host, the host given up after a few in a row)
//! and robots.txt that keeps failing (or fails under `--until-idle`).
//!
//! The bookkeeping is [`super::politeness`]'s; the `Embedded` methods here run in
//! the completion of each lease and decide what to log and park. A parked host's
//! requests stay queued for the next run.
//!
//! Across runs: a host given up as unreachable gets a failed run in the state
//! ([`crate::store::UnreachableHost`]); after [`PARK_AFTER_RUNS`] in a row it
//! is parked for a day, then two, four... up to [`PARK_LONGEST_DAYS`] days
//! ([`parked_until`]): a new cycle does not queue its seeds and a run does not
//! try its queued requests, so a site that is gone costs a nightly crawl
//! nothing until it is tried again. Any answer from it clears the record, and
//! `legcrawl seeds add` of one of its seeds tries it at the next run. Depends
//! on the embedded frontier and [`crate::store`].

use std::collections::HashSet;
use std::time::Instant;

use super::politeness::Politeness;
use super::{Embedded, EngineError, politeness};
use crate::clock::rfc3339_secs;
use crate::page::PageResult;
use crate::request::Request;
use crate::store::State;
use crate::store::records::unix_now;

/// Runs in a row in which a host could not be reached before it is parked.
pub const PARK_AFTER_RUNS: u32 = 3;

/// The longest a host is parked for, in days.
pub const PARK_LONGEST_DAYS: u64 = 32;

const DAY: u64 = 24 * 3600;

/// Until when a host that failed `runs` runs in a row, the last at `now`, is
/// parked: `None` below [`PARK_AFTER_RUNS`]; then one day, doubling with each
/// further failed run up to [`PARK_LONGEST_DAYS`]. An hour per day is taken
/// off, so that a crawl run at the same time every night is not a few seconds
/// too early and kept waiting a whole period more.
pub fn parked_until(runs: u32, now: u64) -> Option<u64> {
    let doublings = runs.checked_sub(PARK_AFTER_RUNS)?;
    let days = 1u64
        .checked_shl(doublings)
        .unwrap_or(u64::MAX)
        .min(PARK_LONGEST_DAYS);
    Some(now.saturating_add(days * DAY - days * 3600))
}

/// Parks, for this run, the hosts whose record says they are parked now, and
/// returns every host with a record (an answer from one clears it).
pub(super) fn park_unreachable(
    state: &State,
    politeness: &mut Politeness,
) -> Result<HashSet<String>, EngineError> {
    let now = unix_now();
    let hosts = state.unreachable_hosts()?;
    for host in hosts.iter().filter(|host| host.parked_at(now)) {
        let until = rfc3339_secs(host.parked_until.unwrap_or(now));
        tracing::warn!(
            host = %host.host,
            runs = host.runs,
            "host unreachable in its last runs: parked until {until} (`legcrawl seeds add` of one of its seeds tries it at the next run)"
        );
        if let Some(id) = state.host_id(&host.host) {
            politeness.park(id, &host.host, Instant::now());
        }
    }
    Ok(hosts.into_iter().map(|host| host.host).collect())
}

/// What a result's connection failure (if any) did to its host.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ConnectNote {
    /// This result parked the host as unreachable.
    pub(super) parked: bool,
    /// The host is parked: a request that failed to connect is kept for the next run.
    pub(super) put_back: bool,
}

/// Puts `request` back for the next run: a connection failure on a host given
/// up for this run is not a failed page (the retries it used are forgotten).
pub(super) fn keep_for_next_run(
    request: &Request,
    requests: &mut Vec<Request>,
    counters: &mut Vec<(&'static str, u64)>,
) {
    counters.retain(|(name, _)| !matches!(*name, "fetch/failed" | "retry/exhausted"));
    counters.push(("fetch/unreachable_kept", 1));
    let mut later = request.clone();
    later.retries = 0;
    later.dont_filter = true;
    requests.push(later);
}

impl Embedded<'_> {
    /// Reports a host that cannot be connected to (at warn, once per host per run)
    /// and parks it after [`politeness::CONNECT_ATTEMPTS`] failures in a row when
    /// nothing of it answered this run.
    pub(super) fn note_connect(
        &mut self,
        host_id: u32,
        result: &PageResult,
    ) -> Result<ConnectNote, EngineError> {
        if result.answered {
            self.politeness.answered(host_id);
            // Nothing to look up (or allocate) on the usual path: no host failed.
            if !self.unreachable.is_empty()
                && let Some(host) = self.state.host_name(host_id)
                && self.unreachable.contains(host)
            {
                let host = host.to_owned();
                self.unreachable.remove(&host);
                if self.state.note_reachable(&host)? {
                    tracing::info!(%host, "host answers again");
                }
            }
        }
        let (Some(error), Some(host)) = (
            result.unreachable.as_deref(),
            self.state.host_name(host_id).map(str::to_owned),
        ) else {
            return Ok(ConnectNote::default());
        };
        let seen = self
            .politeness
            .connect_failed(host_id, &host, Instant::now());
        if seen.first {
            tracing::warn!(%host, "{error}");
        }
        if seen.parked {
            tracing::warn!(
                %host,
                attempts = politeness::CONNECT_ATTEMPTS,
                "host unreachable: leaving its requests for the next run"
            );
            self.note_unreachable_run(&host, error)?;
        }
        Ok(ConnectNote {
            parked: seen.parked,
            put_back: self.politeness.is_parked(host_id),
        })
    }

    /// Counts this run as one more in which `host` could not be reached (in
    /// the open group), and says so when that parks it.
    fn note_unreachable_run(&mut self, host: &str, error: &str) -> Result<(), EngineError> {
        let Some(run) = self.state.run().map(|run| run.id) else {
            return Ok(());
        };
        let record = self
            .state
            .note_unreachable(host, run, unix_now(), error, |runs| {
                parked_until(runs, unix_now())
            })?;
        self.unreachable.insert(host.to_owned());
        if let Some(until) = record.parked_until {
            tracing::warn!(
                %host,
                runs = record.runs,
                "host unreachable in {} runs in a row: parked until {} (its seeds are not queued and its requests wait)",
                record.runs,
                rfc3339_secs(until)
            );
        }
        Ok(())
    }

    /// Parks a host whose robots.txt keeps failing (see [`politeness::ROBOTS_ATTEMPTS`]);
    /// true when this result parked it.
    pub(super) fn note_robots(&mut self, host_id: u32, result: &PageResult) -> bool {
        if !result.robots_unavailable {
            if result.blocked.is_none() {
                self.politeness.robots_ok(host_id);
            }
            return false;
        }
        let Some(host) = self.state.host_name(host_id).map(str::to_owned) else {
            return false;
        };
        let now = Instant::now();
        let parked = self.politeness.robots_unavailable(host_id, &host, now);
        // `--until-idle` ends a run when nothing can start within IDLE_WAIT; a
        // robots.txt retry that long away is such a wait, so the host waits for
        // the next run at once instead of after every attempt.
        if self.active.config.until_idle
            && result
                .backoff
                .is_some_and(|wait| wait >= crate::config::IDLE_WAIT)
            && !self.politeness.is_parked(host_id)
        {
            self.politeness.park(host_id, &host, now);
            tracing::warn!(
                %host,
                "robots.txt is unavailable and --until-idle is set: leaving this host's requests for the next run"
            );
            return true;
        }
        if parked {
            tracing::warn!(
                %host,
                attempts = politeness::ROBOTS_ATTEMPTS,
                "robots.txt keeps failing: leaving this host's requests for the next run"
            );
        }
        parked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_parked_from_the_third_failed_run_for_doubling_days() {
        let hours = |runs| parked_until(runs, 1000).map(|until| (until - 1000) / 3600);
        assert_eq!(hours(1), None);
        assert_eq!(hours(PARK_AFTER_RUNS - 1), None);
        // A day less an hour, then two days less two hours...
        assert_eq!(hours(PARK_AFTER_RUNS), Some(23));
        assert_eq!(hours(PARK_AFTER_RUNS + 1), Some(46));
        assert_eq!(hours(PARK_AFTER_RUNS + 5), Some(32 * 23));
        assert_eq!(hours(PARK_AFTER_RUNS + 6), Some(32 * 23));
        assert_eq!(hours(u32::MAX), Some(32 * 23));
    }
}
