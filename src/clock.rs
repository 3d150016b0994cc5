//! The wall clock: [`now`] (which a simulation may shift, see [`OFFSET_VAR`])
//! and RFC 3339 timestamps in UTC without a date crate.
//!
//! Depends on nothing else in the crate.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The environment variable that shifts [`now`] by a number of seconds
/// (negative shifts back). Simulations of many nights run the real binary
/// under it (`benches/revisit.rs`, the revisit tests); a crawl run by people
/// never sets it. A value that is not a whole number is ignored.
pub const OFFSET_VAR: &str = "LEGCRAWL_CLOCK_OFFSET";

/// The wall-clock time: the system's, shifted by [`OFFSET_VAR`] when it is set.
/// Every time a crawl stores or compares (fetch and due times, run records,
/// robots.txt ages, WARC dates) is read here.
pub fn now() -> SystemTime {
    static OFFSET: OnceLock<i64> = OnceLock::new();
    let offset = *OFFSET.get_or_init(|| {
        std::env::var(OFFSET_VAR)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    });
    let system = SystemTime::now();
    let shift = Duration::from_secs(offset.unsigned_abs());
    let shifted = if offset >= 0 {
        system.checked_add(shift)
    } else {
        system.checked_sub(shift)
    };
    shifted.unwrap_or(system)
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339_secs(unix_secs: u64) -> String {
    format!("{}Z", date_time(i128::from(unix_secs)))
}

/// `time` as RFC 3339 UTC with milliseconds, e.g. `2021-01-01T00:00:00.000Z`.
pub fn rfc3339(time: SystemTime) -> String {
    let millis: i128 = match time.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_millis() as i128,
        Err(before) => -(before.duration().as_millis() as i128),
    };
    let (secs, ms) = (millis.div_euclid(1000), millis.rem_euclid(1000));
    format!("{}.{ms:03}Z", date_time(secs))
}

/// `YYYY-MM-DDTHH:MM:SS` of a (possibly negative) count of Unix seconds.
fn date_time(secs: i128) -> String {
    let (days, secs_of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60
    )
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01.
///
/// Works in 400-year eras (146,097 days each) counted from 0000-03-01, so that the leap
/// day is the last day of each shifted year: the day of the era gives the year of the
/// era, the day of that March-based year gives the month by the 153-days-per-5-months
/// rule, and January and February move to the next calendar year.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    const DAYS_PER_ERA: i64 = 146_097;
    // 1970-01-01 is day 719,468 counted from 0000-03-01.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(DAYS_PER_ERA);
    let day_of_era = shifted.rem_euclid(DAYS_PER_ERA);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // 0 = March ... 11 = February
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn whole_seconds() {
        assert_eq!(rfc3339_secs(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_secs(1_796_212_800), "2026-12-02T12:00:00Z");
    }

    #[test]
    fn rfc3339_formatting() {
        let at = |secs: u64, ms: u64| UNIX_EPOCH + Duration::from_millis(secs * 1000 + ms);
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(951_782_400, 7)), "2000-02-29T00:00:00.007Z");
        assert_eq!(rfc3339(at(951_868_799, 999)), "2000-02-29T23:59:59.999Z");
        assert_eq!(rfc3339(at(1_709_210_096, 0)), "2024-02-29T12:34:56.000Z");
        assert_eq!(rfc3339(at(4_107_542_400, 0)), "2100-03-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(253_402_300_799, 0)), "9999-12-31T23:59:59.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_millis(1)),
            "1969-12-31T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(86_400 * 365)),
            "1969-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn civil_from_days_round_trips_every_day_of_four_centuries() {
        // Walk day by day from 1900-01-01 for 146,097 days, checking the calendar rules.
        let mut expected = (1900i64, 1u32, 1u32);
        let start = -25_567; // days from 1970-01-01 back to 1900-01-01
        for days in start..start + 146_097 {
            assert_eq!(civil_from_days(days), expected, "day {days}");
            let (y, m, d) = expected;
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let month_len = match m {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            expected = match (d == month_len, m == 12) {
                (false, _) => (y, m, d + 1),
                (true, false) => (y, m + 1, 1),
                (true, true) => (y + 1, 1, 1),
            };
        }
    }
}
