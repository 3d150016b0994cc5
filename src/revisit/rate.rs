//! The `estimated` revisit policy: each page's change rate, estimated from
//! what its fetches saw, and the revisit interval that buys the most
//! freshness per request at that rate.
//!
//! # The model
//! A page changes as a Poisson process of unknown rate λ (Cho and
//! Garcia-Molina, "Estimating frequency of change", 2003). The estimate is a
//! distribution over [`RATES`] candidate rates, log-spaced from once in two
//! years to 12 times a day, uniform before any evidence. Each fetch adds the
//! log-likelihood of what it saw under each rate ([`observe`]):
//! - no change over `t` seconds (a 304, or the same content): `-λt`;
//! - a change over `t` seconds: `ln(1 - e^(-λt))`, which counts the changes a
//!   visit cannot see (two changes between visits look like one);
//! - a change whose `Last-Modified` falls between the two fetches, at `L`:
//!   changed before `L`, unchanged since: `ln(1 - e^(-λ(L - t0))) - λ(now - L)`;
//! - the first fetch, with a `Last-Modified` older than a minute: the content
//!   has been unchanged for its age `a`, and the time since the last change of
//!   a Poisson process is exponential: `ln λ - λa`.
//!
//! The evidence is kept relative to the best rate and floored at
//! [`FLOOR`] nats below it, so that no single observation (a wrong
//! `Last-Modified`, a page whose rate changed) outweighs a handful of later
//! ones.
//!
//! # The choice
//! A crawl runs every `period` (a day by default). A page revisited every `k`
//! periods, right after the run that fetches it, is fresh then and at the
//! next `j` runs with probability `q^j`, `q = e^(-λ·period)`: over the `k`
//! runs it is fresh `S_k = (1 - q^k)/(1 - q)` times, for one request. The
//! policy chooses the `k` that maximises `(S_k - PRICE)/k` in expectation
//! over the estimate (the freshness bought per run, less the request's price
//! in page-runs of freshness): a page that changes at every run is asked at
//! every run, one that never changes ever less often, up to the policy's
//! longest interval (Cho and Garcia-Molina's result that revisits should
//! follow the change rate, but not without limit).
//!
//! Depends on [`crate::store`] (the evidence kept in a page record).

use std::time::Duration;

use crate::store::ChangeEvidence;

/// Candidate change rates.
pub const RATES: usize = 14;
/// The slowest candidate rate: once in this many days.
const SLOWEST_DAYS: f64 = 730.0;
/// The fastest candidate rate: once in this many hours.
const FASTEST_HOURS: f64 = 2.0;
/// The price of a request, in page-runs of freshness: a revisit is worth making
/// when it is expected to keep the page fresh for more runs than this. Chosen
/// on `benches/revisit.rs` (docs/incremental.md): the Nutch schedule's
/// freshness with fewer requests.
pub const PRICE: f64 = 0.44;
/// How far below the best rate's log-likelihood the evidence of another may
/// fall, in nats.
pub const FLOOR: f64 = 20.0;
/// A `Last-Modified` this close to the fetch (seconds) says nothing: many
/// servers send the time of the request.
const FRESH_DATE: u64 = 60;
/// Stored log-likelihoods are in thousandths.
const SCALE: f64 = 1000.0;

/// The candidate rate `j`, in changes per second.
fn rate(j: usize) -> f64 {
    let slow = (1.0 / (SLOWEST_DAYS * 86_400.0)).ln();
    let fast = (1.0 / (FASTEST_HOURS * 3600.0)).ln();
    (slow + (fast - slow) * j as f64 / (RATES - 1) as f64).exp()
}

/// What one good answer of a page said about its changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The first: `age` seconds since its `Last-Modified`, when it sent one
    /// older than a minute.
    First {
        /// Seconds since the content last changed, as the server dates it.
        age: Option<u64>,
    },
    /// The same content `elapsed` seconds after the previous fetch.
    Unchanged {
        /// Seconds since the previous fetch.
        elapsed: u64,
    },
    /// Other content `elapsed` seconds after the previous fetch.
    Changed {
        /// Seconds since the previous fetch.
        elapsed: u64,
        /// Seconds since the new content's `Last-Modified`, when that falls
        /// after the previous fetch and more than a minute before this one.
        age: Option<u64>,
    },
}

impl Seen {
    /// What a fetch at `now` saw, given the previous good fetch at `before`
    /// (`None` for the first), whether the content changed, and the answer's
    /// `Last-Modified` header. A date that cannot be read, or that does not
    /// fit the fetch times, is left out.
    pub fn of(before: Option<u64>, now: u64, changed: bool, last_modified: Option<&str>) -> Seen {
        let modified = last_modified
            .and_then(super::http_date_secs)
            .filter(|&at| at.saturating_add(FRESH_DATE) <= now);
        match before {
            None => Seen::First {
                age: modified.map(|at| now - at),
            },
            Some(before) if !changed => Seen::Unchanged {
                elapsed: now.saturating_sub(before),
            },
            Some(before) => Seen::Changed {
                elapsed: now.saturating_sub(before),
                age: modified.filter(|&at| at > before).map(|at| now - at),
            },
        }
    }
}

/// Adds what `seen` says to `evidence` (see the module doc).
pub fn observe(evidence: &mut ChangeEvidence, seen: Seen) {
    let mut loglik = current(evidence);
    for (j, value) in loglik.iter_mut().enumerate() {
        let lambda = rate(j);
        *value += match seen {
            Seen::First { age: None } => 0.0,
            Seen::First { age: Some(age) } => lambda.ln() - lambda * age as f64,
            Seen::Unchanged { elapsed } => -lambda * elapsed as f64,
            Seen::Changed { elapsed, age: None } => changed_within(lambda, elapsed as f64),
            Seen::Changed {
                elapsed,
                age: Some(age),
            } => {
                let before = elapsed.saturating_sub(age) as f64;
                changed_within(lambda, before) - lambda * age as f64
            }
        };
    }
    store(evidence, &loglik);
}

/// `ln(1 - e^(-λt))`: the log-probability of at least one change in `t`
/// seconds (a change in no time at all is as unlikely as the floor allows).
fn changed_within(lambda: f64, t: f64) -> f64 {
    let p = -(-lambda * t.max(1.0)).exp_m1();
    p.max(f64::MIN_POSITIVE).ln()
}

/// The evidence as log-likelihoods (nats), uniform when there is none.
fn current(evidence: &ChangeEvidence) -> [f64; RATES] {
    let mut loglik = [0.0; RATES];
    if evidence.loglik.len() == RATES {
        for (value, &stored) in loglik.iter_mut().zip(&evidence.loglik) {
            *value = f64::from(stored) / SCALE;
        }
    }
    loglik
}

/// Keeps `loglik` relative to its best rate, floored (see the module doc).
fn store(evidence: &mut ChangeEvidence, loglik: &[f64; RATES]) {
    let best = loglik.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    evidence.loglik = loglik
        .iter()
        .map(|&value| {
            let relative = (value - best).max(-FLOOR);
            if relative.is_finite() {
                (relative * SCALE).round() as i32
            } else {
                (-FLOOR * SCALE) as i32
            }
        })
        .collect();
}

/// The estimate: the probability of each candidate rate.
pub fn posterior(evidence: &ChangeEvidence) -> [f64; RATES] {
    let loglik = current(evidence);
    let best = loglik.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut p = loglik.map(|value| (value - best).exp());
    let total: f64 = p.iter().sum();
    for value in &mut p {
        *value /= total;
    }
    p
}

/// The estimated change rate, in changes per day: the estimate's median, so
/// that a few unlikely fast rates do not dominate it.
pub fn changes_per_day(evidence: &ChangeEvidence) -> f64 {
    let p = posterior(evidence);
    let mut sum = 0.0;
    for (j, value) in p.iter().enumerate() {
        sum += value;
        if sum >= 0.5 {
            return rate(j) * 86_400.0;
        }
    }
    rate(RATES - 1) * 86_400.0
}

/// The revisit interval for a page with `evidence`, for a crawl that runs
/// every `period`, within `min..=max`: a whole number of periods (see the
/// module doc).
pub fn interval(
    evidence: &ChangeEvidence,
    period: Duration,
    min: Duration,
    max: Duration,
) -> Duration {
    let max = max.max(min);
    let period = period.max(Duration::from_secs(1));
    let most = (max.as_secs_f64() / period.as_secs_f64())
        .floor()
        .clamp(1.0, 10_000.0) as u32;
    let p = posterior(evidence);
    let q: [f64; RATES] = std::array::from_fn(|j| (-rate(j) * period.as_secs_f64()).exp());
    // q^(k-1) and S_k for each rate, as k grows.
    let mut power = [1.0; RATES];
    let mut fresh = [0.0; RATES];
    let (mut best_k, mut best_value) = (1, f64::NEG_INFINITY);
    for k in 1..=most {
        let mut expected = 0.0;
        for j in 0..RATES {
            fresh[j] += power[j];
            power[j] *= q[j];
            expected += p[j] * fresh[j];
        }
        let value = (expected - PRICE) / f64::from(k);
        if value > best_value {
            (best_k, best_value) = (k, value);
        }
    }
    (period * best_k).clamp(min, max)
}

/// What a revisit of a page with `evidence`, `age` seconds after its last
/// fetch, is worth under a revisit budget: the price of a request at which
/// asking it now breaks even with asking it a period later. Asked every `a`
/// periods a page is fresh `S_a` runs per request (see the module doc); the
/// choice of [`interval`] moves from `a` to `a + 1` periods at the price
/// `S_a - a·q^a` (Whittle's index for this problem), in expectation over the
/// estimate. It is 0 at once and grows with the age. The due times ask a page
/// once its worth reaches [`PRICE`]; a budget of `N` asks the `N` worth most,
/// as if the price rose until only `N` pages were worth it. A page that
/// changes at every run is worth about the chance it changed; a stable page
/// little until it has waited long.
pub fn worth(evidence: &ChangeEvidence, age: u64, period: Duration) -> f64 {
    let period = period.max(Duration::from_secs(1)).as_secs_f64();
    let periods = age as f64 / period;
    let p = posterior(evidence);
    let mut total = 0.0;
    for (j, weight) in p.iter().enumerate() {
        let x = rate(j) * period;
        // S_a = (1 - q^a) / (1 - q), q = e^(-x), without cancelling.
        let fresh = (-x * periods).exp_m1() / (-x).exp_m1();
        total += weight * (fresh - periods * (-x * periods).exp());
    }
    total.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    fn days(d: u64) -> Duration {
        Duration::from_secs(d * DAY)
    }

    fn choose(evidence: &ChangeEvidence) -> u64 {
        interval(evidence, days(1), Duration::from_secs(3600), days(30)).as_secs() / DAY
    }

    #[test]
    fn the_candidate_rates_span_two_years_to_two_hours() {
        assert!((rate(0) * 730.0 * DAY as f64 - 1.0).abs() < 1e-9);
        assert!((rate(RATES - 1) * 7200.0 - 1.0).abs() < 1e-9);
        assert!((1..RATES).all(|j| rate(j) > rate(j - 1)));
    }

    #[test]
    fn no_change_night_after_night_lowers_the_rate_and_lengthens_the_interval() {
        let mut evidence = ChangeEvidence::default();
        observe(&mut evidence, Seen::First { age: None });
        let mut rates = vec![changes_per_day(&evidence)];
        let mut intervals = vec![choose(&evidence)];
        for _ in 0..12 {
            let elapsed = intervals.last().copied().unwrap_or(1) * DAY;
            observe(&mut evidence, Seen::Unchanged { elapsed });
            rates.push(changes_per_day(&evidence));
            intervals.push(choose(&evidence));
        }
        assert!(rates.windows(2).all(|w| w[1] <= w[0]), "{rates:?}");
        assert!(intervals.windows(2).all(|w| w[1] >= w[0]), "{intervals:?}");
        // A page unchanged for months is worth a visit every two weeks or so
        // (at a rate of once a year, the best k is about sqrt(2 PRICE / λ)).
        assert!(intervals.last().is_some_and(|&k| k >= 10), "{intervals:?}");
        assert!(rates[rates.len() - 1] < 1.0 / 60.0, "{rates:?}");
    }

    #[test]
    fn a_page_that_changes_at_every_run_is_asked_at_every_run() {
        let mut evidence = ChangeEvidence::default();
        observe(&mut evidence, Seen::First { age: None });
        for _ in 0..5 {
            observe(
                &mut evidence,
                Seen::Changed {
                    elapsed: DAY,
                    age: None,
                },
            );
        }
        assert_eq!(choose(&evidence), 1);
        assert!(
            changes_per_day(&evidence) >= 1.0,
            "{}",
            changes_per_day(&evidence)
        );
    }

    /// Evidence of `nights` nightly fetches that each saw a change, or none.
    fn nightly(nights: usize, changed: bool) -> ChangeEvidence {
        let mut evidence = ChangeEvidence::default();
        observe(&mut evidence, Seen::First { age: None });
        for _ in 0..nights {
            let elapsed = DAY;
            observe(
                &mut evidence,
                if changed {
                    Seen::Changed { elapsed, age: None }
                } else {
                    Seen::Unchanged { elapsed }
                },
            );
        }
        evidence
    }

    fn worth_at(evidence: &ChangeEvidence, age_days: u64) -> f64 {
        worth(evidence, age_days * DAY, days(1))
    }

    #[test]
    fn a_revisit_is_worth_more_the_longer_a_page_waited_and_nothing_at_once() {
        for evidence in [nightly(6, true), nightly(6, false), nightly(0, false)] {
            let worths: Vec<f64> = (0..40).map(|d| worth_at(&evidence, d)).collect();
            assert_eq!(worths[0], 0.0);
            assert!(worths.windows(2).all(|w| w[1] >= w[0]), "{worths:?}");
        }
        // A page that changes every night is worth about the chance it
        // changed since: it is asked again the next night.
        let daily = worth_at(&nightly(6, true), 1);
        assert!((0.5..=1.0).contains(&daily), "{daily}");
    }

    #[test]
    fn a_daily_page_due_is_worth_more_than_a_stable_page_asked_yesterday() {
        let daily = worth_at(&nightly(6, true), 1);
        let stable = worth_at(&nightly(6, false), 1);
        assert!(daily > 5.0 * stable, "daily {daily}, stable {stable}");
        // Left long enough, the stable page is worth a request at the
        // policy's own price: when the interval the policy chose for it is up.
        let stable = nightly(6, false);
        let chosen = choose(&stable);
        assert!((2..30).contains(&chosen), "{chosen}");
        assert!(worth_at(&stable, chosen - 1) < PRICE, "{chosen}");
        assert!(worth_at(&stable, chosen) >= PRICE, "{chosen}");
    }

    #[test]
    fn a_weekly_page_is_asked_between_the_daily_and_the_stable_ones() {
        let mut evidence = ChangeEvidence::default();
        observe(&mut evidence, Seen::First { age: None });
        for night in 1..=28 {
            let seen = if night % 7 == 0 {
                Seen::Changed {
                    elapsed: DAY,
                    age: None,
                }
            } else {
                Seen::Unchanged { elapsed: DAY }
            };
            observe(&mut evidence, seen);
        }
        let rate = changes_per_day(&evidence);
        assert!((1.0 / 14.0..=1.0 / 3.0).contains(&rate), "{rate}");
        let k = choose(&evidence);
        assert!((2..=7).contains(&k), "{k}");
    }

    #[test]
    fn an_old_last_modified_makes_a_new_page_slow_at_once() {
        let mut dated = ChangeEvidence::default();
        observe(
            &mut dated,
            Seen::First {
                age: Some(400 * DAY),
            },
        );
        let mut undated = ChangeEvidence::default();
        observe(&mut undated, Seen::First { age: None });
        assert!(changes_per_day(&dated) < 1.0 / 100.0);
        assert!(choose(&dated) > choose(&undated));
    }

    #[test]
    fn a_misleading_date_is_outweighed_by_a_few_changes() {
        let mut evidence = ChangeEvidence::default();
        observe(
            &mut evidence,
            Seen::First {
                age: Some(3000 * DAY),
            },
        );
        let mut nights = 0;
        while choose(&evidence) > 1 && nights < 10 {
            let elapsed = choose(&evidence) * DAY;
            observe(&mut evidence, Seen::Changed { elapsed, age: None });
            nights += 1;
        }
        assert!(nights <= 6, "{nights} changes to believe them");
    }

    #[test]
    fn a_change_dated_just_before_the_fetch_means_a_fast_page() {
        let mut dated = ChangeEvidence::default();
        observe(&mut dated, Seen::First { age: None });
        observe(
            &mut dated,
            Seen::Changed {
                elapsed: 10 * DAY,
                age: Some(3600),
            },
        );
        let mut undated = ChangeEvidence::default();
        observe(&mut undated, Seen::First { age: None });
        observe(
            &mut undated,
            Seen::Changed {
                elapsed: 10 * DAY,
                age: None,
            },
        );
        // A change in the last hour of ten days: the page has been unchanged
        // for an hour only, so the evidence for slow rates is weaker.
        assert!(changes_per_day(&dated) <= changes_per_day(&undated) * 4.0);
        assert!(changes_per_day(&undated) > 1.0 / 30.0);
    }

    #[test]
    fn seen_reads_the_date_only_where_it_fits() {
        let at = 1_700_000_000;
        let date = httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_secs(at));
        let date = Some(date.as_str());
        assert_eq!(
            Seen::of(None, at + 10, false, date),
            Seen::First { age: None }
        );
        assert_eq!(
            Seen::of(None, at + DAY, false, date),
            Seen::First { age: Some(DAY) }
        );
        assert_eq!(
            Seen::of(Some(at - DAY), at + 3600, true, date),
            Seen::Changed {
                elapsed: DAY + 3600,
                age: Some(3600)
            }
        );
        // Dated before the previous fetch: the change is not dated.
        assert_eq!(
            Seen::of(Some(at + 5), at + DAY, true, date),
            Seen::Changed {
                elapsed: DAY - 5,
                age: None
            }
        );
        assert_eq!(
            Seen::of(Some(at), at + DAY, false, Some("not a date")),
            Seen::Unchanged { elapsed: DAY }
        );
    }

    #[test]
    fn the_evidence_is_relative_and_floored() {
        let mut evidence = ChangeEvidence::default();
        observe(&mut evidence, Seen::Unchanged { elapsed: 365 * DAY });
        assert_eq!(evidence.loglik.len(), RATES);
        assert_eq!(evidence.loglik.iter().max(), Some(&0));
        assert_eq!(evidence.loglik.iter().min(), Some(&-20_000));
        let p = posterior(&evidence);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn intervals_are_whole_periods_within_the_bounds() {
        let evidence = ChangeEvidence::default();
        let hourly = interval(
            &evidence,
            Duration::from_secs(3600),
            Duration::from_secs(3600),
            days(30),
        );
        assert_eq!(hourly.as_secs() % 3600, 0);
        let bounded = interval(&evidence, days(1), days(2), days(3));
        assert!((days(2)..=days(3)).contains(&bounded));
        // A longest interval below the period is still kept.
        assert_eq!(
            interval(
                &evidence,
                days(1),
                Duration::from_secs(60),
                Duration::from_secs(600)
            ),
            Duration::from_secs(600)
        );
    }
}
