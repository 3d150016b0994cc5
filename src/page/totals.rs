//! A run's pages by outcome, from its counters: the one place that says what
//! the end-of-run line, `dump runs` and `--stats` count, so they agree.
//!
//! Every lease that finishes counts exactly once, under one outcome: new,
//! changed, unchanged (a 304 is also `not_modified`), gone, failed, or blocked
//! (robots.txt). A lease put back in the frontier (a retry, robots.txt
//! unavailable, a host unreachable for this run) has not finished and counts as
//! `pages/requeued`, not in the pages. Depends on nothing else in the crate.

use serde::Serialize;

/// A run's pages by outcome (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PageTotals {
    /// Pages that finished: the sum of the outcomes below (`not_modified` is part
    /// of `unchanged`).
    pub pages: u64,
    /// Pages fetched for the first time (`pages/new`).
    pub new: u64,
    /// Known pages found changed (`pages/changed`).
    pub changed: u64,
    /// Known pages found unchanged: same content hash, or 304.
    pub unchanged: u64,
    /// Of `unchanged`, the 304 Not Modified answers (`pages/not_modified`).
    pub not_modified: u64,
    /// Pages found gone in this run (`pages/gone`: a 410, or a 404 twice).
    pub gone: u64,
    /// Pages that failed for good (`fetch/failed`: out of retries, a
    /// connection or decoding error, a panic).
    pub failed: u64,
    /// Pages robots.txt disallowed (`robots/disallowed`).
    pub blocked: u64,
}

impl PageTotals {
    /// The totals of a run whose counter `name` is `count(name)`.
    pub fn of(count: impl Fn(&str) -> u64) -> PageTotals {
        let not_modified = count("pages/not_modified");
        let mut totals = PageTotals {
            pages: 0,
            new: count("pages/new"),
            changed: count("pages/changed"),
            unchanged: count("pages/unchanged") + not_modified,
            not_modified,
            gone: count("pages/gone"),
            failed: count("fetch/failed"),
            blocked: count("robots/disallowed"),
        };
        totals.pages = totals.new
            + totals.changed
            + totals.unchanged
            + totals.gone
            + totals.failed
            + totals.blocked;
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_the_sum_of_the_outcomes() {
        let counts = [
            ("pages/new", 2),
            ("pages/changed", 3),
            ("pages/unchanged", 4),
            ("pages/not_modified", 5),
            ("pages/gone", 1),
            ("fetch/failed", 6),
            ("robots/disallowed", 7),
            ("pages/requeued", 100),
        ];
        let count = |name: &str| {
            counts
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |(_, v)| *v)
        };
        let totals = PageTotals::of(count);
        assert_eq!(totals.unchanged, 9);
        assert_eq!(totals.pages, 2 + 3 + 9 + 1 + 6 + 7);
    }
}
