//! Durations (`"30s"`, `0.5`) and sizes (`"10MiB"`, `5000000`): one parser for each,
//! used by the crawl file and by every command-line flag alike.
//!
//! A duration is a plain non-negative number of seconds (`"30"`, `"0.5"`, `"0"`), or
//! one or more `<number><unit>` parts, summed: units `ms`, `s`, `m`, `h`, `d`
//! (`"1m30s"`, `"250ms"`, `"1.5s"`, `"24h"`). The crawl file may also write the
//! seconds as a TOML number (`delay = 1`, `timeout = 2.5`). A size is a whole number
//! of bytes (a TOML integer or a string such as `"512"`), optionally with a unit,
//! with or without a space before it: `B`, `KB`/`MB`/`GB` (powers of 1000) or
//! `KiB`/`MiB`/`GiB` (powers of 1024). Negative numbers, NaN, infinities and
//! exponents are refused. Both parsers are total: every input gives a value or a
//! one-line message saying what is expected.
//!
//! [`duration_arg`], [`positive_duration_arg`] and [`size_arg`] are the same parsers
//! as clap value parsers, the latter two refusing zero. Depends on nothing in the
//! crate.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Visitor};

/// What [`parse_duration`] accepts, for messages.
pub(super) const DURATION_FORM: &str =
    "a duration such as \"30s\", \"250ms\", \"1m30s\", \"24h\" or plain seconds (\"0.5\")";
/// What [`parse_size`] accepts, for messages.
const SIZE_FORM: &str = "a size such as 1048576, \"512KiB\", \"5MB\" or \"10MiB\"";
/// What a clap parser refusing zero says.
const NOT_ZERO: &str = "must be more than 0";

/// Parses a duration (see the module doc).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("expected {DURATION_FORM}, got {text:?}");
    let text = text.trim();
    if text.is_empty() {
        return Err(bad());
    }
    if text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        // Plain seconds. Only digits and dots reach `f64::from_str`, so "NaN",
        // "inf", "-1" and "1e3" are refused above or below, never read as numbers.
        let secs: f64 = text.parse().map_err(|_| bad())?;
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let unit_len = rest[number_len..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len() - number_len);
        let number: f64 = rest[..number_len].parse().map_err(|_| bad())?;
        let unit = match &rest[number_len..number_len + unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            _ => return Err(bad()),
        };
        let part = Duration::try_from_secs_f64(number * unit).map_err(|_| bad())?;
        total = total.checked_add(part).ok_or_else(bad)?;
        rest = &rest[number_len + unit_len..];
    }
    Ok(total)
}

/// Parses a size in bytes (see the module doc).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || format!("expected {SIZE_FORM}, got {text:?}");
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let number: u64 = text[..split].parse().map_err(|_| bad())?;
    let unit: u64 = match text[split..].trim_start() {
        "" | "B" => 1,
        "KB" => 1000,
        "MB" => 1000 * 1000,
        "GB" => 1000 * 1000 * 1000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return Err(bad()),
    };
    number.checked_mul(unit).ok_or_else(bad)
}

/// A clap value parser for a duration flag that may be zero (`--delay 0`,
/// `--max-duration 30m`): [`parse_duration`].
pub fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text)
}

/// A clap value parser for a duration flag that must not be zero, such as
/// `--timeout` and `--read-timeout` (a zero timeout fails every request before it
/// starts): [`parse_duration`], refusing zero with "must be more than 0".
pub fn positive_duration_arg(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err(NOT_ZERO.into()),
        d => Ok(d),
    }
}

/// A clap value parser for a size flag (`--max-body 5MB`, `--cache-size 64MiB`):
/// [`parse_size`], refusing zero with "must be more than 0".
pub fn size_arg(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err(NOT_ZERO.into()),
        size => Ok(size),
    }
}

/// A [`Duration`] read from a string with [`parse_duration`], or from a TOML
/// number of seconds (`delay = 1`, `timeout = 2.5`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileDuration(pub Duration);

impl<'de> Deserialize<'de> for FileDuration {
    fn deserialize<D: de::Deserializer<'de>>(de: D) -> Result<FileDuration, D::Error> {
        de.deserialize_any(DurationVisitor)
    }
}

/// [`FileDuration`]'s visitor: a string, or a number of seconds.
struct DurationVisitor;

/// The message for a number of seconds that is not a duration: negative, NaN,
/// infinite, or too long.
fn not_seconds<E: de::Error>(secs: f64) -> E {
    let why = if secs < 0.0 { " (negative)" } else { "" };
    E::custom(format!("expected {DURATION_FORM}, got {secs}{why}"))
}

impl<'de> Visitor<'de> for DurationVisitor {
    type Value = FileDuration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(DURATION_FORM)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<FileDuration, E> {
        parse_duration(text).map(FileDuration).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, secs: u64) -> Result<FileDuration, E> {
        Ok(FileDuration(Duration::from_secs(secs)))
    }

    fn visit_i64<E: de::Error>(self, secs: i64) -> Result<FileDuration, E> {
        match u64::try_from(secs) {
            Ok(secs) => self.visit_u64(secs),
            Err(_) => Err(not_seconds(secs as f64)),
        }
    }

    fn visit_f64<E: de::Error>(self, secs: f64) -> Result<FileDuration, E> {
        Duration::try_from_secs_f64(secs)
            .map(FileDuration)
            .map_err(|_| not_seconds(secs))
    }
}

/// A byte count read from an integer or a string with [`parse_size`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileSize(pub u64);

impl<'de> Deserialize<'de> for FileSize {
    fn deserialize<D: de::Deserializer<'de>>(de: D) -> Result<FileSize, D::Error> {
        de.deserialize_any(SizeVisitor)
    }
}

/// [`FileSize`]'s visitor: a string, or a whole number of bytes.
struct SizeVisitor;

impl<'de> Visitor<'de> for SizeVisitor {
    type Value = FileSize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SIZE_FORM)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<FileSize, E> {
        parse_size(text).map(FileSize).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, bytes: u64) -> Result<FileSize, E> {
        Ok(FileSize(bytes))
    }

    fn visit_i64<E: de::Error>(self, bytes: i64) -> Result<FileSize, E> {
        u64::try_from(bytes)
            .map(FileSize)
            .map_err(|_| E::custom(format!("expected {SIZE_FORM}, got {bytes}")))
    }

    fn visit_f64<E: de::Error>(self, bytes: f64) -> Result<FileSize, E> {
        Err(E::custom(format!(
            "expected {SIZE_FORM} (a whole number of bytes), got {bytes}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(MS(30_000)));
        assert_eq!(parse_duration("1s"), Ok(MS(1000)));
        assert_eq!(parse_duration("250ms"), Ok(MS(250)));
        assert_eq!(parse_duration("500ms"), Ok(MS(500)));
        assert_eq!(parse_duration("1m30s"), Ok(MS(90_000)));
        assert_eq!(parse_duration("1.5s"), Ok(MS(1500)));
        assert_eq!(parse_duration("24h"), Ok(MS(86_400_000)));
        assert_eq!(parse_duration("2d"), Ok(MS(172_800_000)));
        assert_eq!(parse_duration(" 10s "), Ok(MS(10_000)));
        for bad in [
            "", " ", "s", "5 sec", "1x", "-1s", "1..2s", "1e999s", "1 m", "5S",
        ] {
            let error = parse_duration(bad).unwrap_err();
            assert!(error.starts_with("expected a duration"), "{bad:?}: {error}");
            assert!(error.contains("plain seconds"), "{bad:?}: {error}");
            assert!(!error.contains('\n'), "{bad:?}: {error}");
        }
    }

    #[test]
    fn plain_numbers_are_seconds() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0.0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("30"), Ok(MS(30_000)));
        assert_eq!(parse_duration("0.5"), Ok(MS(500)));
        assert_eq!(parse_duration(".25"), Ok(MS(250)));
        assert_eq!(parse_duration("2.5"), Ok(MS(2500)));
        for bad in [
            "-1", "-0.5", "+1", "NaN", "nan", "inf", "-inf", "infinity", "1e3", ".", "1.2.3",
            "1e999",
        ] {
            let error = parse_duration(bad).unwrap_err();
            assert_eq!(error, format!("expected {DURATION_FORM}, got {bad:?}"));
        }
        let huge = "9".repeat(40);
        assert!(parse_duration(&huge).is_err(), "past Duration::MAX");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("5000000"), Ok(5_000_000));
        assert_eq!(parse_size("5MB"), Ok(5_000_000));
        assert_eq!(parse_size("5MiB"), Ok(5 << 20));
        assert_eq!(parse_size("5 MiB"), Ok(5 << 20));
        assert_eq!(parse_size("10MiB"), Ok(10 << 20));
        assert_eq!(parse_size("2KB"), Ok(2000));
        assert_eq!(parse_size("7B"), Ok(7));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("0"), Ok(0));
        for bad in [
            "",
            "MiB",
            "1.5MiB",
            "10mb",
            "-1",
            "5 M",
            "99999999999999999999GiB",
            "18446744073709551615KB",
        ] {
            let error = parse_size(bad).unwrap_err();
            assert_eq!(error, format!("expected {SIZE_FORM}, got {bad:?}"));
        }
    }

    #[test]
    fn arg_parsers_take_every_form_and_refuse_zero_where_it_means_nothing() {
        assert_eq!(duration_arg("0"), Ok(Duration::ZERO));
        assert_eq!(duration_arg("500ms"), Ok(MS(500)));
        assert_eq!(duration_arg("1m30s"), Ok(MS(90_000)));
        assert_eq!(duration_arg("0.5"), Ok(MS(500)));
        assert!(
            duration_arg("-1")
                .unwrap_err()
                .starts_with("expected a duration")
        );

        assert_eq!(positive_duration_arg("500ms"), Ok(MS(500)));
        assert_eq!(positive_duration_arg("2"), Ok(MS(2000)));
        assert_eq!(positive_duration_arg("1ms"), Ok(MS(1)));
        for zero in ["0", "0s", "0.0", "0ms"] {
            assert_eq!(
                positive_duration_arg(zero),
                Err("must be more than 0".into())
            );
        }
        assert!(
            positive_duration_arg("soon")
                .unwrap_err()
                .starts_with("expected a duration")
        );

        assert_eq!(size_arg("5MB"), Ok(5_000_000));
        assert_eq!(size_arg("5MiB"), Ok(5 << 20));
        assert_eq!(size_arg("5000000"), Ok(5_000_000));
        assert_eq!(size_arg("0"), Err("must be more than 0".into()));
        assert_eq!(size_arg("0MiB"), Err("must be more than 0".into()));
        assert!(size_arg("big").unwrap_err().starts_with("expected a size"));
    }

    #[test]
    fn file_durations_are_strings_or_numbers_of_seconds() {
        let read = |json: &str| serde_json::from_str::<FileDuration>(json).map(|d| d.0);
        assert_eq!(read("\"1m\"").unwrap(), MS(60_000));
        assert_eq!(read("\"30\"").unwrap(), MS(30_000));
        assert_eq!(read("30").unwrap(), MS(30_000));
        assert_eq!(read("0").unwrap(), Duration::ZERO);
        assert_eq!(read("2.5").unwrap(), MS(2500));
        assert_eq!(read("0.5").unwrap(), MS(500));
        for (json, shown) in [("-1", "got -1 (negative)"), ("-0.5", "got -0.5 (negative)")] {
            let error = read(json).unwrap_err().to_string();
            assert!(error.starts_with("expected a duration"), "{json}: {error}");
            assert!(error.contains(shown), "{json}: {error}");
        }
        assert!(read("1e999").is_err(), "infinite");
        let error = read("true").unwrap_err().to_string();
        assert!(error.contains("expected a duration"), "{error}");
        let error = read("\"soon\"").unwrap_err().to_string();
        assert!(error.contains("soon"), "{error}");
    }

    #[test]
    fn file_sizes_are_whole_numbers_or_strings() {
        let read = |json: &str| serde_json::from_str::<FileSize>(json).map(|s| s.0);
        assert_eq!(read("4096").unwrap(), 4096);
        assert_eq!(read("\"4KiB\"").unwrap(), 4096);
        assert_eq!(read("\"5MB\"").unwrap(), 5_000_000);
        assert_eq!(read("\"5 MiB\"").unwrap(), 5 << 20);
        for bad in ["true", "-1", "1.5", "\"1.5MiB\""] {
            let error = read(bad).unwrap_err().to_string();
            assert!(error.contains("expected a size"), "{bad}: {error}");
        }
    }
}
