//! [`Robots`]: one robots.txt parsed for one user agent (RFC 9309).
//!
//! Depends on `pattern` only. Invariants: parsing never fails (junk lines are
//! skipped); at most [`MAX_ROBOTS_BYTES`] are read; the group chosen is every
//! group naming our product token (merged), else every `*` group (merged), else
//! none (all allowed); among matching rules the longest pattern wins and `Allow`
//! wins a tie; `/robots.txt` itself is always allowed.

use std::time::Duration;

use url::{Position, Url};

use super::pattern::{Pattern, normalize};

/// Bytes of a robots.txt that are parsed (RFC 9309 §2.5: at least 500 KiB); the
/// rest is ignored, and so is a line cut by this limit.
pub const MAX_ROBOTS_BYTES: usize = 500 * 1024;

/// One `Allow` or `Disallow` line of the chosen group.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    allow: bool,
    pattern: Pattern,
}

/// The rules of one robots.txt that apply to one user agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Robots {
    /// Sorted by pattern length, longest first, `Allow` before `Disallow` on ties,
    /// so the first match decides.
    rules: Vec<Rule>,
    /// The chosen group's first valid `Crawl-delay`.
    crawl_delay: Option<Duration>,
    /// Every `Sitemap` value, whatever its group.
    sitemaps: Vec<String>,
}

/// A recognised line of a robots.txt.
enum Line<'a> {
    UserAgent(&'a [u8]),
    Rule { allow: bool, value: &'a [u8] },
    CrawlDelay(&'a [u8]),
    Sitemap(&'a [u8]),
}

/// A group being read: does it name us or `*`, and what it says.
#[derive(Default)]
struct Group {
    ours: bool,
    star: bool,
    rules: Vec<Rule>,
    crawl_delay: Option<Duration>,
}

impl Robots {
    /// Parses `body` for the crawler called `agent` (a full `User-Agent` such as
    /// `legcrawl/0.1 (+https://…)` is fine: only its product token, the leading
    /// run of letters, `-` and `_`, is matched, case-insensitively). A UTF-8 BOM,
    /// CRLF or CR line ends, comments and junk lines are all accepted.
    pub fn parse(body: &[u8], agent: &str) -> Robots {
        let body = limit(body);
        let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
        let token = product_token(agent.as_bytes());
        let mut groups: Vec<Group> = Vec::new();
        let mut sitemaps = Vec::new();
        // True while the lines just read are `User-agent` lines of one group.
        let mut in_agents = false;
        for line in body
            .split(|&b| b == b'\n' || b == b'\r')
            .filter_map(parse_line)
        {
            match line {
                Line::UserAgent(value) => {
                    if !in_agents {
                        groups.push(Group::default());
                        in_agents = true;
                    }
                    if let Some(group) = groups.last_mut() {
                        group.star |= value.first() == Some(&b'*')
                            && value.get(1).is_none_or(|b| b.is_ascii_whitespace());
                        let theirs = product_token(value);
                        group.ours |= !token.is_empty() && theirs.eq_ignore_ascii_case(token);
                    }
                }
                Line::Rule { allow, value } => {
                    in_agents = false;
                    if let (Some(group), false) = (groups.last_mut(), value.is_empty()) {
                        let pattern = Pattern::new(value);
                        group.rules.push(Rule { allow, pattern });
                    }
                }
                Line::CrawlDelay(value) => {
                    in_agents = false;
                    if let Some(group) = groups.last_mut() {
                        group.crawl_delay = group.crawl_delay.or_else(|| parse_delay(value));
                    }
                }
                Line::Sitemap(value) => {
                    if !value.is_empty() {
                        sitemaps.push(String::from_utf8_lossy(value).into_owned());
                    }
                }
            }
        }
        let mut robots = Robots::choose(groups);
        robots.sitemaps = sitemaps;
        robots
    }

    /// Merges the groups that apply: ours if any names us, else the `*` ones.
    fn choose(groups: Vec<Group>) -> Robots {
        let ours = groups.iter().any(|group| group.ours);
        let mut rules = Vec::new();
        let mut crawl_delay = None;
        for group in groups {
            if (ours && group.ours) || (!ours && group.star) {
                rules.extend(group.rules);
                crawl_delay = crawl_delay.or(group.crawl_delay);
            }
        }
        rules.sort_by_key(|rule| std::cmp::Reverse((rule.pattern.len(), rule.allow)));
        Robots {
            rules,
            crawl_delay,
            sitemaps: Vec::new(),
        }
    }

    /// Rules that allow everything (robots.txt missing: a 4xx).
    pub fn allow_all() -> Robots {
        Robots {
            rules: Vec::new(),
            crawl_delay: None,
            sitemaps: Vec::new(),
        }
    }

    /// Rules that disallow everything but `/robots.txt` (robots.txt unreachable).
    pub fn disallow_all() -> Robots {
        Robots {
            rules: vec![Rule {
                allow: false,
                pattern: Pattern::new(b"/"),
            }],
            crawl_delay: None,
            sitemaps: Vec::new(),
        }
    }

    /// Whether `url` may be fetched: its path and query (never the fragment),
    /// normalized per RFC 9309 §2.2.2, against the longest matching rule.
    pub fn allowed(&self, url: &Url) -> bool {
        let raw = &url[Position::BeforePath..Position::AfterQuery];
        let raw = if raw.is_empty() { "/" } else { raw };
        let path = normalize(raw.as_bytes());
        if path == b"/robots.txt" {
            return true;
        }
        self.rules
            .iter()
            .find(|rule| rule.pattern.matches(&path))
            .is_none_or(|rule| rule.allow)
    }

    /// The chosen group's `Crawl-delay`, uncapped (the cache caps it).
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.crawl_delay
    }

    /// Every `Sitemap` URL listed, in order (they belong to no group).
    pub fn sitemaps(&self) -> &[String] {
        &self.sitemaps
    }
}

/// `body` cut to [`MAX_ROBOTS_BYTES`], dropping a line the cut splits.
fn limit(body: &[u8]) -> &[u8] {
    if body.len() <= MAX_ROBOTS_BYTES {
        return body;
    }
    let head = &body[..MAX_ROBOTS_BYTES];
    if matches!(body[MAX_ROBOTS_BYTES], b'\n' | b'\r') {
        return head;
    }
    match head.iter().rposition(|&b| b == b'\n' || b == b'\r') {
        Some(end) => &head[..end],
        None => &[],
    }
}

/// The leading run of ASCII letters, `-` and `_` (RFC 9309 §2.2.1 product token).
fn product_token(value: &[u8]) -> &[u8] {
    let end = value
        .iter()
        .position(|&b| !(b.is_ascii_alphabetic() || b == b'-' || b == b'_'))
        .unwrap_or(value.len());
    &value[..end]
}

/// One line, comment stripped, as a recognised directive (keys are
/// case-insensitive, with the common misspellings Google's parser accepts).
fn parse_line(line: &[u8]) -> Option<Line<'_>> {
    let line = match line.iter().position(|&b| b == b'#') {
        Some(hash) => &line[..hash],
        None => line,
    };
    let colon = line.iter().position(|&b| b == b':')?;
    let key = line[..colon].trim_ascii().to_ascii_lowercase();
    let value = line[colon + 1..].trim_ascii();
    let parsed = match key.as_slice() {
        b"user-agent" | b"useragent" | b"user agent" => Line::UserAgent(value),
        b"allow" => Line::Rule { allow: true, value },
        b"disallow" | b"dissallow" | b"dissalow" | b"disalow" | b"diasllow" | b"disallaw" => {
            Line::Rule {
                allow: false,
                value,
            }
        }
        b"crawl-delay" | b"crawldelay" | b"crawl delay" => Line::CrawlDelay(value),
        b"sitemap" | b"site-map" => Line::Sitemap(value),
        _ => return None,
    };
    Some(parsed)
}

/// A `Crawl-delay` value in (possibly fractional) seconds; junk is ignored and
/// an absurdly large value saturates.
fn parse_delay(value: &[u8]) -> Option<Duration> {
    let seconds: f64 = std::str::from_utf8(value).ok()?.parse().ok()?;
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
