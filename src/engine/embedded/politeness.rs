//! Per-host politeness: how many requests a host may have in flight, and when
//! the next one may start.
//!
//! Each host has a slot: requests in flight (at most `per_host`) and the earliest
//! start of its next request (`delay` after the previous start, stretched by
//! robots.txt `Crawl-delay`, `Retry-After` and retry backoff). The engine asks
//! [`Politeness::ready_at`] before leasing from a host, so one slow or
//! rate-limited host never holds the others back. Pure bookkeeping: no I/O, the
//! clock is passed in. Depends on [`crate::config`] only.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::config::{CrawlConfig, default_delay};

/// robots.txt failures in a row (5xx, unreachable) after which a host is parked
/// for the rest of the run, so a scheduled run ends instead of waiting forever.
pub const ROBOTS_ATTEMPTS: u32 = 3;

/// Connection failures in a row (DNS, refused, TLS; by a fetch or by robots.txt)
/// after which a host that never answered this run is parked for the rest of it.
pub const CONNECT_ATTEMPTS: u32 = 3;

/// What a connection failure meant for its host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unreachable {
    /// The first failure of the host this run: the one to report.
    pub first: bool,
    /// This failure parked the host for the rest of the run.
    pub parked: bool,
}

/// A host's politeness as the status snapshot shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotView {
    /// The delay between two starts (robots.txt `Crawl-delay` included).
    pub delay: Duration,
    /// Time until its next request may start (backoff and `Retry-After` show here).
    pub wait: Duration,
    /// Left alone for the rest of the run.
    pub parked: bool,
}

/// One host's politeness state.
#[derive(Debug)]
struct Slot {
    in_flight: usize,
    next_start: Instant,
    /// The configured (or loopback-free) delay.
    delay: Duration,
    /// robots.txt `Crawl-delay`, already capped.
    crawl_delay: Option<Duration>,
    /// robots.txt answers in a row that were 5xx or unreachable.
    robots_failures: u32,
    /// Connection failures in a row.
    connect_failures: u32,
    /// True once a connection failure was reported (once per host per run).
    connect_reported: bool,
    /// True once anything answered (a response, or robots.txt fetched): such a
    /// host is not given up on for connection failures.
    answered: bool,
    /// Left alone for the rest of the run (unreachable, or `park`).
    parked: bool,
}

/// Politeness bookkeeping for every host of a crawl.
#[derive(Debug)]
pub struct Politeness {
    per_host: usize,
    delay: Option<Duration>,
    jitter: bool,
    slots: HashMap<u32, Slot>,
    rng: u64,
    /// When the previous run on the state last fetched, at the latest (see
    /// [`Politeness::after_previous_run`]).
    previous_end: Option<Instant>,
}

impl Politeness {
    /// Politeness as `config` asks (`per_host`, `delay`, `jitter`).
    pub fn new(config: &CrawlConfig) -> Politeness {
        Politeness {
            per_host: config.per_host.max(1),
            delay: config.delay,
            jitter: config.jitter,
            slots: HashMap::new(),
            rng: 0x853c_49e6_748f_ea9b,
            previous_end: None,
        }
    }

    /// The previous run on this state ended (or last committed) at `ended`:
    /// no host starts before that moment plus its delay, so that a run
    /// resumed at once, after Ctrl-C or a kill, keeps the delay its
    /// predecessor kept. Costs nothing when the previous run ended longer ago
    /// than the delay.
    pub fn after_previous_run(&mut self, ended: std::time::SystemTime) {
        let ago = crate::clock::now()
            .duration_since(ended)
            .unwrap_or(Duration::ZERO);
        self.previous_end = Instant::now().checked_sub(ago);
    }

    fn slot(&mut self, host_id: u32, host: &str, now: Instant) -> &mut Slot {
        let delay = self.delay.unwrap_or_else(|| default_delay(host));
        let next_start = self.previous_end.map_or(now, |end| now.max(end + delay));
        self.slots.entry(host_id).or_insert(Slot {
            in_flight: 0,
            next_start,
            delay,
            crawl_delay: None,
            robots_failures: 0,
            connect_failures: 0,
            connect_reported: false,
            answered: false,
            parked: false,
        })
    }

    /// When the host may start its next request: `None` if it is at its in-flight
    /// limit (a finishing request will wake the engine), else the instant (≤ now
    /// means "now").
    pub fn ready_at(&mut self, host_id: u32, host: &str, now: Instant) -> Option<Instant> {
        let per_host = self.per_host;
        let slot = self.slot(host_id, host, now);
        (slot.in_flight < per_host).then_some(slot.next_start)
    }

    /// True when a request to the host may start now.
    pub fn may_start(&mut self, host_id: u32, host: &str, now: Instant) -> bool {
        self.ready_at(host_id, host, now)
            .is_some_and(|at| at <= now)
    }

    /// Records the start of a request to the host.
    pub fn started(&mut self, host_id: u32, host: &str, now: Instant) {
        let jitter = self.jitter.then(|| next_unit(&mut self.rng));
        let slot = self.slot(host_id, host, now);
        slot.in_flight += 1;
        let base = slot.delay.max(slot.crawl_delay.unwrap_or(Duration::ZERO));
        let wait = match jitter {
            Some(unit) => base.mul_f64(0.5 + unit),
            None => base,
        };
        slot.next_start = slot.next_start.max(now + wait);
    }

    /// Records the end of a request to the host.
    pub fn finished(&mut self, host_id: u32) {
        if let Some(slot) = self.slots.get_mut(&host_id) {
            slot.in_flight = slot.in_flight.saturating_sub(1);
        }
    }

    /// No request to the host starts before `now + wait` (Retry-After, backoff).
    pub fn back_off(&mut self, host_id: u32, host: &str, now: Instant, wait: Duration) {
        let slot = self.slot(host_id, host, now);
        slot.next_start = slot.next_start.max(now + wait);
    }

    /// Records a robots.txt that answered 5xx or could not be reached. Returns true
    /// when that makes [`ROBOTS_ATTEMPTS`] in a row: the host is then parked.
    pub fn robots_unavailable(&mut self, host_id: u32, host: &str, now: Instant) -> bool {
        let slot = self.slot(host_id, host, now);
        slot.robots_failures += 1;
        slot.robots_failures == ROBOTS_ATTEMPTS
    }

    /// Records a request that robots.txt let through (the host answers again).
    pub fn robots_ok(&mut self, host_id: u32) {
        if let Some(slot) = self.slots.get_mut(&host_id) {
            slot.robots_failures = 0;
        }
    }

    /// Records a connection failure (DNS, refused, TLS). The host is parked when
    /// that makes [`CONNECT_ATTEMPTS`] in a row and nothing of it answered this run.
    pub fn connect_failed(&mut self, host_id: u32, host: &str, now: Instant) -> Unreachable {
        let slot = self.slot(host_id, host, now);
        slot.connect_failures += 1;
        let first = !slot.connect_reported;
        slot.connect_reported = true;
        let parked = !slot.parked && !slot.answered && slot.connect_failures >= CONNECT_ATTEMPTS;
        slot.parked |= parked;
        Unreachable { first, parked }
    }

    /// Records that the host answered (a response, or robots.txt had): its
    /// connection failures start again from zero and it is never given up on.
    pub fn answered(&mut self, host_id: u32) {
        if let Some(slot) = self.slots.get_mut(&host_id) {
            slot.connect_failures = 0;
            slot.answered = true;
        }
    }

    /// Leaves the host alone for the rest of the run; true if it was not already.
    pub fn park(&mut self, host_id: u32, host: &str, now: Instant) -> bool {
        let slot = self.slot(host_id, host, now);
        !std::mem::replace(&mut slot.parked, true)
    }

    /// True for a host left alone for the rest of the run (robots.txt kept failing,
    /// it could not be connected to, or it was parked): its requests stay queued
    /// for the next run instead of holding this one open.
    pub fn is_parked(&self, host_id: u32) -> bool {
        self.slots
            .get(&host_id)
            .is_some_and(|slot| slot.parked || slot.robots_failures >= ROBOTS_ATTEMPTS)
    }

    /// What the host's slot says at `now`, for the status snapshot: `None` for
    /// a host not started this run.
    pub fn view(&self, host_id: u32, now: Instant) -> Option<SlotView> {
        let slot = self.slots.get(&host_id)?;
        Some(SlotView {
            delay: slot.delay.max(slot.crawl_delay.unwrap_or(Duration::ZERO)),
            wait: slot.next_start.saturating_duration_since(now),
            parked: self.is_parked(host_id),
        })
    }

    /// Sets the host's robots.txt `Crawl-delay` (already capped by the caller).
    pub fn set_crawl_delay(
        &mut self,
        host_id: u32,
        host: &str,
        now: Instant,
        delay: Option<Duration>,
    ) {
        self.slot(host_id, host, now).crawl_delay = delay;
    }
}

/// A uniform number in [0, 1) from a splitmix64 state.
fn next_unit(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DEFAULT_DELAY, is_loopback};

    fn politeness(per_host: usize, delay: Option<Duration>) -> Politeness {
        Politeness::new(&CrawlConfig {
            per_host,
            delay,
            ..CrawlConfig::default()
        })
    }

    #[test]
    fn a_resumed_run_keeps_the_delay_after_the_previous_run() {
        let mut p = politeness(1, Some(Duration::from_millis(300)));
        p.after_previous_run(std::time::SystemTime::now());
        let t0 = Instant::now();
        assert!(!p.may_start(1, "a.test", t0), "too soon after the last run");
        assert!(p.may_start(2, "b.test", t0 + Duration::from_millis(300)));
        // Long ago: no wait.
        let mut p = politeness(1, Some(Duration::from_millis(300)));
        p.after_previous_run(std::time::SystemTime::now() - Duration::from_secs(1));
        assert!(p.may_start(1, "a.test", Instant::now()));
    }

    #[test]
    fn per_host_limit_and_delay() {
        let mut p = politeness(2, Some(Duration::from_millis(100)));
        let t0 = Instant::now();
        assert!(p.may_start(1, "a.test", t0));
        p.started(1, "a.test", t0);
        assert!(
            !p.may_start(1, "a.test", t0),
            "delay holds the second start"
        );
        let t1 = t0 + Duration::from_millis(100);
        assert!(p.may_start(1, "a.test", t1));
        p.started(1, "a.test", t1);
        let t2 = t1 + Duration::from_millis(200);
        assert_eq!(
            p.ready_at(1, "a.test", t2),
            None,
            "two in flight: at the limit"
        );
        p.finished(1);
        assert!(p.may_start(1, "a.test", t2));
        assert!(p.may_start(2, "b.test", t0), "another host is independent");
    }

    #[test]
    fn crawl_delay_and_backoff_stretch_the_wait() {
        let mut p = politeness(4, Some(Duration::ZERO));
        let t0 = Instant::now();
        p.set_crawl_delay(1, "a.test", t0, Some(Duration::from_secs(2)));
        p.started(1, "a.test", t0);
        assert_eq!(
            p.ready_at(1, "a.test", t0),
            Some(t0 + Duration::from_secs(2))
        );
        p.back_off(1, "a.test", t0, Duration::from_secs(5));
        assert_eq!(
            p.ready_at(1, "a.test", t0),
            Some(t0 + Duration::from_secs(5))
        );
    }

    #[test]
    fn unreachable_hosts_are_parked_unless_they_answered() {
        let mut p = politeness(2, None);
        let now = Instant::now();
        let first = p.connect_failed(1, "a.invalid", now);
        assert_eq!(
            first,
            Unreachable {
                first: true,
                parked: false
            }
        );
        for _ in 1..CONNECT_ATTEMPTS - 1 {
            assert!(!p.connect_failed(1, "a.invalid", now).parked);
        }
        assert_eq!(
            p.connect_failed(1, "a.invalid", now),
            Unreachable {
                first: false,
                parked: true
            }
        );
        assert!(p.is_parked(1));
        // Parked once: later failures (in-flight requests) do not park it again.
        assert!(!p.connect_failed(1, "a.invalid", now).parked);
        // A host that answered once is never given up on for connection failures.
        p.started(2, "b.example", now);
        p.answered(2);
        for _ in 0..2 * CONNECT_ATTEMPTS {
            assert!(!p.connect_failed(2, "b.example", now).parked);
        }
        assert!(!p.is_parked(2));
        assert!(p.park(2, "b.example", now));
        assert!(!p.park(2, "b.example", now));
        assert!(p.is_parked(2));
    }

    #[test]
    fn loopback_hosts_get_no_default_delay() {
        let mut p = politeness(4, None);
        let t0 = Instant::now();
        p.started(1, "127.0.0.1:8080", t0);
        assert!(p.may_start(1, "127.0.0.1:8080", t0));
        p.started(2, "example.com", t0);
        assert_eq!(p.ready_at(2, "example.com", t0), Some(t0 + DEFAULT_DELAY));
        for host in [
            "localhost",
            "LOCALHOST:80",
            "127.1.2.3",
            "[::1]:8080",
            "::1",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["example.com", "10.0.0.1:80", "[::2]:1"] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn jitter_stays_within_half_to_one_and_a_half() {
        let mut p = Politeness::new(&CrawlConfig {
            per_host: 100,
            delay: Some(Duration::from_millis(100)),
            jitter: true,
            ..CrawlConfig::default()
        });
        let t0 = Instant::now();
        for i in 0..50 {
            p.started(i, "a.test", t0);
            let at = p.ready_at(i, "a.test", t0).unwrap() - t0;
            assert!(
                at >= Duration::from_millis(50) && at < Duration::from_millis(150),
                "{at:?}"
            );
        }
    }
}
