//! Judging one host's request log ([`TestServer::log`]) against `--per-host`
//! and `--delay`, as the server saw the requests.
//!
//! **In flight** is exact: a request counts as in flight from its arrival until
//! the server handed the last frame of its answer to hyper
//! ([`Logged::done`]), which is before the client could have read the whole
//! answer, so a crawler that waits for one answer before the next request never
//! shows an overlap here.
//!
//! **Delay** needs a tolerance, and a shape. The server stamps arrivals; the
//! crawler took its turn (in the shared case, on the Redis clock, in whole
//! milliseconds) a little earlier, by its own send latency: a new or reused
//! connection, the loopback, and the wait of a worker thread for a core. On an
//! idle machine that is well under a millisecond, and [`TOLERANCE`] (5 ms)
//! covers it with the Redis clock's millisecond. On a loaded 2-core machine (three
//! workers, Redis, the servers, other tests) a thread can wait tens of
//! milliseconds for a core: one late arrival shortens the gap after it (and
//! lengthens the one before). Measured on this machine (load average 8, other
//! builds): the single-process local crawler shows gaps 10–25 ms short of a
//! 50 ms delay (harness test
//! `harness_multi_host_site_is_crawled_whole_by_a_local_crawl`), and main's own
//! `polite::per_host_delay_spaces_request_starts` saw gaps of 30–190 ms with
//! `--delay 0.2`: the server itself stalls (CPU quota), and a request read late
//! is stamped late. A crawler that ignores the shared schedule makes many gaps
//! near zero, all the time. So the rule is: at most [`SHORT_SHARE`] of the
//! gaps (plus one) more than [`TOLERANCE`] short of the delay. Two turns
//! handed out at once by a race would also show as two requests in flight
//! under `--per-host 1`, which is checked exactly.
//!
//! [`TestServer::log`]: super::server::TestServer::log

use std::time::Duration;

use super::server::Logged;

/// Allowed shortfall of a gap on an idle machine: send latency and the Redis
/// clock's whole milliseconds.
pub const TOLERANCE: Duration = Duration::from_millis(5);
/// Share of the gaps that may be short by more than [`TOLERANCE`] (a late
/// stamp under load).
pub const SHORT_SHARE: f64 = 0.1;

/// What one host's log shows.
#[derive(Debug, Default)]
pub struct Judged {
    /// Requests that arrived while `per_host` others were in flight.
    pub crowded: Vec<String>,
    /// Gaps between two starts more than [`TOLERANCE`] shorter than the delay.
    pub short: Vec<(Duration, String)>,
    /// Gaps between two starts (requests − 1).
    pub gaps: usize,
    /// The smallest gap.
    pub min_gap: Option<Duration>,
    /// The most requests seen in flight at one arrival (itself included).
    pub peak: usize,
}

impl Judged {
    /// Why the log breaks `--per-host` / `--delay`, or `None` when it keeps them.
    pub fn failure(&self, delay: Duration) -> Option<String> {
        if !self.crowded.is_empty() {
            return Some(format!(
                "{} requests arrived over the in-flight limit: {:?}",
                self.crowded.len(),
                &self.crowded[..self.crowded.len().min(10)]
            ));
        }
        let allowed = (self.gaps as f64 * SHORT_SHARE) as usize + 1;
        if self.short.len() > allowed {
            return Some(format!(
                "{} of {} gaps more than {TOLERANCE:?} short of {delay:?} (allowed {allowed}), \
                 smallest {:?}: {:?}",
                self.short.len(),
                self.gaps,
                self.min_gap,
                &self.short[..self.short.len().min(10)]
            ));
        }
        None
    }
}

/// Judges `log` (one host) against `per_host` requests in flight and `delay`
/// between two starts.
pub fn judge(log: &[Logged], per_host: usize, delay: Duration) -> Judged {
    let mut log = log.to_vec();
    log.sort_by_key(|l| l.start);
    let mut judged = Judged::default();
    for (i, this) in log.iter().enumerate() {
        let busy = log[..i]
            .iter()
            .filter(|l| l.overlaps_start_of(this))
            .count();
        judged.peak = judged.peak.max(busy + 1);
        if busy >= per_host {
            judged
                .crowded
                .push(format!("{} with {busy} in flight", this.target));
        }
        if i > 0 {
            let gap = this.start - log[i - 1].start;
            judged.gaps += 1;
            judged.min_gap = Some(judged.min_gap.map_or(gap, |m| m.min(gap)));
            if gap + TOLERANCE < delay {
                let what = format!("{} after {}", this.target, log[i - 1].target);
                judged.short.push((gap, what));
            }
        }
    }
    judged
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn sees_overlaps_and_short_gaps() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let span = |target: &str, start: u64, end: u64| Logged {
            target: target.into(),
            start: t0 + ms(start),
            done: Some(t0 + ms(end)),
            in_flight: 1,
        };
        let polite = [span("/a", 0, 30), span("/b", 50, 120), span("/c", 120, 130)];
        let judged = judge(&polite, 1, ms(50));
        assert!(judged.failure(ms(50)).is_none(), "{judged:?}");
        assert_eq!((judged.gaps, judged.peak), (2, 1));
        let overlap = [span("/a", 0, 70), span("/b", 60, 80)];
        assert_eq!(judge(&overlap, 1, ms(50)).crowded.len(), 1);
        assert!(judge(&overlap, 2, ms(50)).failure(ms(50)).is_none());
        // A few late stamps among many are short gaps, allowed.
        let mut many: Vec<Logged> = (0..40).map(|i| span("/x", i * 100, i * 100 + 1)).collect();
        many[10].start = t0 + ms(1090);
        many[20].start = t0 + ms(2060);
        let judged = judge(&many, 1, ms(100));
        assert_eq!(judged.short.len(), 2, "{judged:?}");
        assert_eq!(judged.failure(ms(100)), None);
        // Many short gaps: a schedule ignored.
        let rushed: Vec<Logged> = (0..40).map(|i| span("/x", i * 80, i * 80 + 1)).collect();
        assert!(judge(&rushed, 1, ms(100)).failure(ms(100)).is_some());
        let within = [span("/a", 0, 1), span("/b", 46, 47)];
        assert!(judge(&within, 1, ms(50)).short.is_empty());
    }
}
