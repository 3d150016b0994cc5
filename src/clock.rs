//! Wall-clock formatting: RFC 3339 timestamps in UTC without a date crate.
//!
//! Depends on nothing else in the crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339_secs(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Formats a `SystemTime` as RFC 3339 UTC with millisecond precision.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let base = rfc3339_secs(since.as_secs());
    format!("{}.{:03}Z", &base[..base.len() - 1], since.subsec_millis())
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day)
/// (Howard Hinnant's civil-from-days algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_dates() {
        assert_eq!(rfc3339_secs(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_secs(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_secs(1_796_212_800), "2026-12-02T12:00:00Z");
        assert_eq!(rfc3339_secs(4_102_444_799), "2099-12-31T23:59:59Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_212_800_123);
        assert_eq!(rfc3339(t), "2026-12-02T12:00:00.123Z");
    }
}
