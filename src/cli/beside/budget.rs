//! The CPU time the readers beside a crawl may take: a token bucket shared
//! by all of them, filled at [`SHARE`] of one CPU up to [`BURST`]. A reader
//! charges what its thread used (`/proc/thread-self/schedstat`) before each
//! frame it sends, and [`DUMP_PROCESS`] once per dump, and waits out any
//! debt, so dumps beside a crawl (or a loop of them) take about that share
//! of the machine on average, however large the view. A small view answers
//! at once after a quiet time.
//!
//! Scheduling priority does not bound the cost: in `benches/read_beside.rs`
//! (a tight loop of dumps on two cores), readers at `SCHED_IDLE` or nice 19
//! without a budget took a fifth to a third of the crawl's pages/s, and with
//! the budget nice 19 measured worse than the crawl's own priority (a
//! preempted reader holding a lock the crawl's threads want, the
//! allocator's for one), so readers keep the crawl's priority.
//! Plain std.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The share of one CPU the readers may use together, on average.
pub const SHARE: f64 = 0.01;
/// The CPU time the bucket holds at most: what a reader may use at once
/// after a quiet time.
pub const BURST: Duration = Duration::from_millis(50);
/// What each dump is charged besides its reader's CPU time: about what
/// starting the `legcrawl dump` process that asks costs the machine (`perf
/// stat`: 2.7 ms of CPU for `dump runs` beside a crawl, 2.4 ms for
/// `legcrawl --version`). So a loop of small dumps is held to the share too,
/// not only large ones.
pub const DUMP_PROCESS: Duration = Duration::from_millis(3);

/// The shared bucket (see the module doc).
pub struct Budget {
    bucket: Mutex<Bucket>,
}

/// CPU time (seconds) the readers may still use, negative when in debt, as
/// of `at`.
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Budget {
    /// A full bucket.
    pub fn new() -> Budget {
        Budget {
            bucket: Mutex::new(Bucket {
                tokens: BURST.as_secs_f64(),
                at: Instant::now(),
            }),
        }
    }

    /// Charges `used` CPU time; returns how long the reader waits before it
    /// goes on (zero when the bucket still holds time).
    pub fn charge(&self, used: Duration) -> Duration {
        let Ok(mut bucket) = self.bucket.lock() else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let filled = bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * SHARE;
        bucket.tokens = filled.min(BURST.as_secs_f64()) - used.as_secs_f64();
        bucket.at = now;
        if bucket.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-bucket.tokens / SHARE)
        }
    }
}

/// CPU time the calling thread used so far (`/proc/thread-self/schedstat`,
/// its first field); zero where that cannot be read.
pub fn thread_cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_free_and_more_waits_until_the_share_repays_it() {
        let budget = Budget::new();
        assert_eq!(budget.charge(BURST / 2), Duration::ZERO);
        // 5 ms beyond the bucket: 5 ms / 1 % = half a second.
        let wait = budget.charge(BURST / 2 + Duration::from_millis(5));
        let expected = Duration::from_millis(500);
        assert!(
            wait <= expected && wait > expected - Duration::from_millis(50),
            "{wait:?}"
        );
    }

    #[test]
    fn the_calling_threads_cpu_time_grows_with_work() {
        let before = thread_cpu();
        let mut x = 0u64;
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        assert!(thread_cpu() > before, "{x}");
    }
}
