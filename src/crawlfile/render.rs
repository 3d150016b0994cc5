//! A [`CrawlConfig`] written back as a crawl file: the text of a stored job.
//!
//! [`job_text`] writes every setting that defines a crawl (seeds, outputs,
//! proxy, cacert, cookies, scope, limits, politeness, headers, hosts, dedup,
//! revisit, legs) in the crawl file's own schema and section order, so that
//! [`super::parse`] reads the same settings back and writing them again gives
//! the same text. Per-run options
//! (`max_pages`, `max_duration`, `until_idle`, `grace`, `[dedup] checkpoint`,
//! `[state]`, `[shared]`) and `data` are not part of a job and are not written.
//! Depends on [`crate::config`], the sibling modules `access` and `units`, and
//! `toml`.

use std::path::Path;
use std::time::Duration;

use toml::{Table, Value};

use crate::config::{CrawlConfig, Revisit};

/// The crawl file of the job `config` defines, with `legs` (a crawl file's
/// `legs` array, as read) and `seeds`. Paths are written absolute, so the job
/// means the same files whatever directory a later run starts in. Bloom and
/// dedup settings are written only when `config` has them (a caller fills them
/// from the state).
pub fn job_text(config: &CrawlConfig, legs: Option<&Value>, seeds: &[String]) -> String {
    let mut root = Table::new();
    root.insert("seeds".into(), strings(seeds));
    super::access::render_top(config, &mut root);
    let mut output = Table::new();
    if let Some(path) = &config.output {
        output.insert("jsonl".into(), path_value(path));
    }
    if let Some(dir) = &config.warc {
        output.insert("warc".into(), path_value(dir));
    }
    output.insert("warc_max_size".into(), size(config.warc_max_size));
    if let Some(path) = &config.stats {
        root.insert("stats".into(), path_value(path));
    }
    root.insert("output".into(), Value::Table(output));
    // Written only when given, so that a job stored before the setting
    // existed reads back the same, without a change line.
    if !config.keep_status.is_empty() {
        let kept = config.keep_status.iter().map(|&c| Value::Integer(c.into()));
        root.insert("keep_status".into(), Value::Array(kept.collect()));
    }

    let mut scope = Table::new();
    scope.insert("allowed_hosts".into(), strings(&config.allowed_hosts));
    if let Some(depth) = config.max_depth {
        scope.insert("max_depth".into(), Value::Integer(depth.into()));
    }
    scope.insert("allow".into(), strings(&config.allow));
    scope.insert("deny".into(), strings(&config.deny));
    scope.insert(
        "follow_nofollow".into(),
        Value::Boolean(config.follow_nofollow),
    );
    scope.insert("no_parent".into(), Value::Boolean(config.no_parent));
    // Written only when on, so that a job stored before the setting existed
    // reads back the same, without a change line.
    if config.page_requisites {
        scope.insert("page_requisites".into(), Value::Boolean(true));
    }
    scope.insert("sitemaps".into(), Value::Boolean(config.sitemaps));
    root.insert("scope".into(), Value::Table(scope));

    let mut limits = Table::new();
    limits.insert("concurrency".into(), count(config.concurrency as u64));
    limits.insert("timeout".into(), duration(config.request_timeout));
    limits.insert("read_timeout".into(), duration(config.read_timeout));
    limits.insert("max_body".into(), size(config.max_body_bytes as u64));
    limits.insert("max_url_len".into(), size(config.max_url_len as u64));
    limits.insert("max_retries".into(), count(config.max_retries.into()));
    limits.insert("retry_backoff".into(), duration(config.retry_backoff));
    root.insert("limits".into(), Value::Table(limits));

    let mut politeness = Table::new();
    politeness.insert("per_host".into(), count(config.per_host as u64));
    if let Some(delay) = config.delay {
        politeness.insert("delay".into(), duration(delay));
    }
    politeness.insert("jitter".into(), Value::Boolean(config.jitter));
    politeness.insert("obey_robots".into(), Value::Boolean(config.obey_robots));
    politeness.insert("robots_ttl".into(), duration(config.robots_ttl));
    politeness.insert("robots_retry".into(), duration(config.robots_retry));
    politeness.insert("max_crawl_delay".into(), duration(config.max_crawl_delay));
    politeness.insert(
        "user_agent".into(),
        Value::String(config.user_agent.clone()),
    );
    if let Some(from) = &config.from {
        politeness.insert("from".into(), Value::String(from.clone()));
    }
    root.insert("politeness".into(), Value::Table(politeness));

    if !config.extra_headers.is_empty() {
        let headers = config
            .extra_headers
            .iter()
            .map(|(name, value)| (name.clone(), Value::String(value.clone())))
            .collect();
        root.insert("headers".into(), Value::Table(headers));
    }
    super::access::render_hosts(config, &mut root);

    let mut dedup = Table::new();
    if let Some(mode) = config.dedup {
        dedup.insert("mode".into(), Value::String(mode.as_str().into()));
    }
    if let Some(bits) = config.bloom_bits {
        dedup.insert("bloom_bits".into(), Value::Integer(bits.into()));
    }
    if let Some(hashes) = config.bloom_hashes {
        dedup.insert("bloom_hashes".into(), Value::Integer(hashes.into()));
    }
    dedup.insert(
        "fingerprint_headers".into(),
        strings(&config.fingerprint_headers),
    );
    root.insert("dedup".into(), Value::Table(dedup));

    root.insert("revisit".into(), Value::Table(revisit(config)));
    if let Some(settings) = &config.render {
        let mut render = Table::new();
        render.insert("hosts".into(), strings(&settings.hosts));
        render.insert("idle".into(), duration(settings.idle));
        render.insert("timeout".into(), duration(settings.timeout));
        render.insert("tabs".into(), count(settings.tabs as u64));
        root.insert("render".into(), Value::Table(render));
    }
    if let Some(legs) = legs {
        root.insert("legs".into(), legs.clone());
    }
    match toml::to_string_pretty(&root) {
        Ok(text) => text,
        // A table of strings, integers, booleans and a parsed `legs` value
        // always serializes.
        Err(error) => unreachable!("writing a job as TOML failed: {error}"),
    }
}

/// `[revisit]`: the default policy as `after`, the bounds of the estimated
/// and adaptive policies (from the default policy, else from the first rule
/// with one, else Nutch's; `initial` only for an adaptive one, `period` only
/// for an estimated one), and every rule (hubs included, as `after = "0"`).
fn revisit(config: &CrawlConfig) -> Table {
    let mut table = Table::new();
    table.insert("after".into(), Value::String(when(config.revisit)));
    let policies = || {
        std::iter::once(config.revisit).chain(config.revisit_rules.iter().map(|rule| rule.revisit))
    };
    let bounded = policies()
        .find(|policy| matches!(policy, Revisit::Adaptive { .. } | Revisit::Estimated { .. }))
        // None has bounds: Nutch's, as jobs stored before the estimated
        // policy say (so that reading one back is no change).
        .unwrap_or_else(Revisit::nutch);
    match bounded {
        Revisit::Adaptive { initial, min, max } => {
            table.insert("initial".into(), duration(initial));
            table.insert("min".into(), duration(min));
            table.insert("max".into(), duration(max));
        }
        Revisit::Estimated { period, min, max } => {
            table.insert("period".into(), duration(period));
            table.insert("min".into(), duration(min));
            table.insert("max".into(), duration(max));
        }
        _ => {}
    }
    // The other kind's own key, when a rule uses it.
    for policy in policies() {
        match policy {
            Revisit::Adaptive { initial, .. } if !table.contains_key("initial") => {
                table.insert("initial".into(), duration(initial));
            }
            Revisit::Estimated { period, .. } if !table.contains_key("period") => {
                table.insert("period".into(), duration(period));
            }
            _ => {}
        }
    }
    let rules: Vec<Value> = config
        .revisit_rules
        .iter()
        .map(|rule| {
            let mut entry = Table::new();
            entry.insert("pattern".into(), Value::String(rule.pattern.clone()));
            entry.insert("after".into(), Value::String(when(rule.revisit)));
            Value::Table(entry)
        })
        .collect();
    table.insert("rules".into(), Value::Array(rules));
    if let Some(budget) = config.revisit_budget {
        table.insert("budget".into(), count(budget));
    }
    table
}

/// A revisit policy as `[revisit] after` writes it.
fn when(policy: Revisit) -> String {
    match policy {
        Revisit::Estimated { .. } => "estimated".into(),
        Revisit::Adaptive { .. } => "adaptive".into(),
        Revisit::Never => "never".into(),
        Revisit::EveryRun => "0".into(),
        Revisit::After(d) => duration_text(d),
    }
}

fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().map(|s| Value::String(s.clone())).collect())
}

/// A count as a TOML integer (saturating: TOML integers are signed 64-bit).
fn count(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `path` made absolute (against the current directory), as a job stores it.
pub(super) fn path_value(path: &Path) -> Value {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    Value::String(absolute.display().to_string())
}

fn duration(d: Duration) -> Value {
    Value::String(duration_text(d))
}

fn size(bytes: u64) -> Value {
    Value::String(size_text(bytes))
}

/// A duration in the crawl file's units: whole milliseconds as parts (`"1h30m"`,
/// `"250ms"`, `"0"`), anything finer as seconds with nine decimals, so that
/// reading it back gives the same duration.
pub fn duration_text(d: Duration) -> String {
    if d.is_zero() {
        return "0".into();
    }
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        let text = format!("{}.{:09}", d.as_secs(), d.subsec_nanos());
        return format!("{}s", text.trim_end_matches('0'));
    }
    let mut rest = d.as_millis();
    let mut text = String::new();
    for (unit, millis) in [
        ("d", 86_400_000u128),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
        ("ms", 1),
    ] {
        let n = rest / millis;
        if n > 0 {
            text.push_str(&format!("{n}{unit}"));
            rest -= n * millis;
        }
    }
    text
}

/// A size in the largest unit that divides it exactly (`"10MiB"`, `"1GB"`), or
/// plain bytes.
pub fn size_text(bytes: u64) -> String {
    if bytes == 0 {
        return "0".into();
    }
    for (unit, factor) in [
        ("GiB", 1u64 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1000),
    ] {
        if bytes.is_multiple_of(factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crawlfile::units::{parse_duration, parse_size};

    #[test]
    fn durations_read_back_the_same() {
        for d in [
            Duration::ZERO,
            Duration::from_millis(250),
            Duration::from_secs(90),
            Duration::from_secs(86_400 + 3600),
            Duration::from_micros(1500),
            Duration::from_nanos(1),
            Duration::new(3, 7),
        ] {
            let text = duration_text(d);
            assert_eq!(parse_duration(&text), Ok(d), "{text}");
        }
        assert_eq!(duration_text(Duration::from_secs(5400)), "1h30m");
        assert_eq!(duration_text(Duration::from_millis(10)), "10ms");
    }

    #[test]
    fn sizes_read_back_the_same() {
        for bytes in [1u64, 512, 1000, 1024, 10 << 20, 1_000_000_000, 8192, 12_345] {
            let text = size_text(bytes);
            assert_eq!(parse_size(&text), Ok(bytes), "{text}");
        }
        assert_eq!(size_text(10 << 20), "10MiB");
        assert_eq!(size_text(1_000_000_000), "1GB");
        assert_eq!(size_text(8192), "8KiB");
    }
}
