//! A run's pages by outcome, from its counters: the one place that says what
//! the end-of-run line, `dump runs` and `--stats` count, so they agree.
//!
//! Every lease that finishes counts exactly once, under one outcome: new,
//! changed, unchanged (a 304 is also `not_modified`), gone, failed, blocked
//! (robots.txt), or out of scope (queued or stored before the job's scope
//! narrowed: not fetched). A lease put back in the frontier (a retry, robots.txt
//! unavailable, a host unreachable for this run) has not finished and counts as
//! `pages/requeued`, not in the pages.
//!
//! It also says when a run saw only error answers ([`error_answers_only`],
//! what makes `legcrawl crawl` exit 8). Depends on nothing else in the crate.

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
    /// Requests dropped unfetched because the job's scope no longer holds
    /// them (`pages/out_of_scope`).
    pub out_of_scope: u64,
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
            out_of_scope: count("pages/out_of_scope"),
        };
        totals.pages = totals.new
            + totals.changed
            + totals.unchanged
            + totals.gone
            + totals.failed
            + totals.blocked
            + totals.out_of_scope;
        totals
    }

    /// Pages that answered with their content: 2xx, 304, or a status the
    /// crawl keeps (new + changed + unchanged).
    pub fn answered_well(&self) -> u64 {
        self.new + self.changed + self.unchanged
    }
}

/// The answers of a run with an HTTP error status (4xx or 5xx, every attempt
/// counted: `status/4xx` + `status/5xx`), from its counters.
pub fn error_answers(count: impl Fn(&str) -> u64) -> u64 {
    count("status/4xx") + count("status/5xx")
}

/// True when a run's counters (`count`) say that no page answered well (see
/// [`PageTotals::answered_well`]) and at least one request was answered with
/// an error status: a mistyped seed (404), a site that only answers 5xx, a
/// proxy that refuses the password (407). `legcrawl crawl` exits 8 then, as
/// wget does for "server issued an error response"; a crawl with some broken
/// links answered other pages well and does not.
pub fn error_answers_only(count: impl Fn(&str) -> u64) -> bool {
    PageTotals::of(&count).answered_well() == 0 && error_answers(&count) > 0
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
        assert_eq!(totals.answered_well(), 2 + 3 + 9);
    }

    fn counts(pairs: &[(&'static str, u64)]) -> impl Fn(&str) -> u64 {
        let pairs = pairs.to_vec();
        move |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |(_, v)| *v)
        }
    }

    #[test]
    fn only_error_answers_is_a_run_without_a_good_answer_and_with_an_error_status() {
        // A mistyped seed: one 404, found gone.
        assert!(error_answers_only(counts(&[
            ("status/4xx", 1),
            ("pages/gone", 1)
        ])));
        // A site that answers 503 only: every attempt counted, the page failed.
        assert!(error_answers_only(counts(&[
            ("status/5xx", 3),
            ("fetch/failed", 1)
        ])));
        // Some broken links beside pages that answered.
        assert!(!error_answers_only(counts(&[
            ("status/2xx", 5),
            ("pages/new", 5),
            ("status/4xx", 2),
            ("pages/gone", 2)
        ])));
        // A revisit answered 304 beside a 404.
        assert!(!error_answers_only(counts(&[
            ("pages/not_modified", 1),
            ("status/4xx", 1)
        ])));
        // Nothing due, or everything failed on the network: no error status.
        assert!(!error_answers_only(counts(&[])));
        assert!(!error_answers_only(counts(&[
            ("fetch/network_error", 3),
            ("fetch/failed", 1)
        ])));
    }
}
