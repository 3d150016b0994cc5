//! The engine's side of hosts that cannot be served this run: connection
//! failures (reported once per host, the host given up after a few in a row)
//! and robots.txt that keeps failing (or fails under `--until-idle`).
//!
//! The bookkeeping is [`super::politeness`]'s; the `Crawl` methods here run in
//! the completion of each lease and decide what to log and park. A parked host's
//! requests stay queued for the next run. Depends on the engine's `Crawl`.

use std::time::Instant;

use super::page::PageResult;
use super::{Crawl, politeness};
use crate::request::Request;

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

impl Crawl<'_> {
    /// Reports a host that cannot be connected to (at warn, once per host per run)
    /// and parks it after [`politeness::CONNECT_ATTEMPTS`] failures in a row when
    /// nothing of it answered this run.
    pub(super) fn note_connect(&mut self, host_id: u32, result: &PageResult) -> ConnectNote {
        if result.answered {
            self.politeness.answered(host_id);
        }
        let (Some(error), Some(host)) = (
            result.unreachable.as_deref(),
            self.state.host_name(host_id).map(str::to_owned),
        ) else {
            return ConnectNote::default();
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
        }
        ConnectNote {
            parked: seen.parked,
            put_back: self.politeness.is_parked(host_id),
        }
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
        if self.config.until_idle
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
