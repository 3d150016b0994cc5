//! Durations (`"30s"`) and sizes (`"10MiB"`) as the crawl file writes them.
//!
//! A duration is one or more `<number><unit>` parts, summed: units `ms`, `s`, `m`, `h`,
//! `d` (`"1m30s"`, `"250ms"`, `"1.5s"`, `"24h"`); `"0"` alone is zero. A size is a
//! whole number of bytes (a TOML integer or a string such as `"512"`), optionally with
//! a unit: `B`, `KB`/`MB`/`GB` (powers of 1000) or `KiB`/`MiB`/`GiB` (powers of 1024).
//! Both parsers are total: every input gives a value or a message saying what is
//! expected. Depends on nothing in the crate.

use std::time::Duration;

use serde::Deserialize;

/// What [`parse_duration`] accepts, for messages.
pub(super) const DURATION_FORM: &str =
    "a duration such as \"30s\", \"250ms\", \"1m30s\" or \"24h\"";
/// What [`parse_size`] accepts, for messages.
const SIZE_FORM: &str = "a size such as 1048576, \"512KiB\" or \"10MiB\"";

/// Parses a duration (see the module doc).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("expected {DURATION_FORM}, got {text:?}");
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(bad());
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

/// A [`Duration`] read from a string with [`parse_duration`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileDuration(pub Duration);

impl<'de> Deserialize<'de> for FileDuration {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<FileDuration, D::Error> {
        let text = String::deserialize(de)
            .map_err(|_| serde::de::Error::custom(format!("expected {DURATION_FORM}")))?;
        parse_duration(&text)
            .map(FileDuration)
            .map_err(serde::de::Error::custom)
    }
}

/// A byte count read from an integer or a string with [`parse_size`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileSize(pub u64);

impl<'de> Deserialize<'de> for FileSize {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<FileSize, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(de)
            .map_err(|_| serde::de::Error::custom(format!("expected {SIZE_FORM}")))?
        {
            Raw::Bytes(n) => Ok(FileSize(n)),
            Raw::Text(text) => parse_size(&text)
                .map(FileSize)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("30s"), Ok(ms(30_000)));
        assert_eq!(parse_duration("250ms"), Ok(ms(250)));
        assert_eq!(parse_duration("1m30s"), Ok(ms(90_000)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1500)));
        assert_eq!(parse_duration("24h"), Ok(ms(86_400_000)));
        assert_eq!(parse_duration("2d"), Ok(ms(172_800_000)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "30", "s", "5 sec", "1x", "-1s", "1..2s", "1e999s"] {
            let error = parse_duration(bad).unwrap_err();
            assert!(error.starts_with("expected a duration"), "{bad:?}: {error}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("10MiB"), Ok(10 << 20));
        assert_eq!(parse_size("10 MiB"), Ok(10 << 20));
        assert_eq!(parse_size("2KB"), Ok(2000));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        for bad in ["", "MiB", "1.5MiB", "10mb", "-1", "99999999999999999999GiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn deserializers_accept_their_forms() {
        let d: FileDuration = serde_json::from_str("\"1m\"").unwrap();
        assert_eq!(d.0, Duration::from_secs(60));
        assert!(serde_json::from_str::<FileDuration>("30").is_err());
        let s: FileSize = serde_json::from_str("4096").unwrap();
        assert_eq!(s.0, 4096);
        let s: FileSize = serde_json::from_str("\"4KiB\"").unwrap();
        assert_eq!(s.0, 4096);
        let error = serde_json::from_str::<FileSize>("true").unwrap_err();
        assert!(error.to_string().contains("expected a size"));
    }
}
