//! A crawl is a stored job: the settings that define it live in its state.
//!
//! A *job* is everything that defines a crawl — seeds, scope, politeness,
//! limits, revisit policy, dedup settings, legs and outputs — written as a
//! crawl file ([`crate::crawlfile::job_text`]), so that `legcrawl dump job`
//! prints it and `legcrawl crawl --config` reads it back as the same job. The
//! state keeps every version (see [`crate::store::records::JobRecord`]); each
//! run record names the version it ran under.
//!
//! [`resolve`] is the rule a run follows: it starts from the crawl file given
//! (`--config`, which replaces the job), else the stored job, else the
//! defaults; applies the settings given on the command line; writes the
//! result as a job text; reads that text back (so a run runs exactly what is
//! stored); and lists what changed ([`Change`]). Options that bound one run
//! (`max_pages`, `max_duration`, `until_idle`, the Ctrl-C grace, checkpoint
//! and cache tuning) and where the state lives are not part of a job: the
//! caller sets them on the resolved config. Depends on [`crate::config`],
//! [`crate::crawlfile`] and [`crate::legs`].

use std::fmt;

use toml::{Table, Value};

use crate::config::{CrawlConfig, DedupMode, HostRule};
use crate::crawlfile::{self, CrawlFile, CrawlFileError};
use crate::legs::Stack;

/// One setting that differs between two versions of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The setting, as a dotted crawl-file key (`politeness.delay`, `legs[0].kind`).
    pub key: String,
    /// Its value before; `None` when it was not set (its default applied).
    pub before: Option<String>,
    /// Its value now; `None` when it is no longer set.
    pub after: Option<String>,
}

impl fmt::Display for Change {
    /// `politeness.delay: 1s -> 10ms`; an unset side is `(default)`. A
    /// `[hosts]` setting says which origin it goes to:
    /// `hosts."127.0.0.1:8080".user: (default) -> ann (127.0.0.1:8080 only)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |value: &Option<String>| value.clone().unwrap_or_else(|| "(default)".into());
        write!(
            f,
            "{}: {} -> {}",
            self.key,
            side(&self.before),
            side(&self.after)
        )?;
        let origin = self
            .key
            .strip_prefix("hosts.\"")
            .and_then(|rest| rest.split_once('"'))
            .or_else(|| self.key.strip_prefix("hosts.")?.split_once('.'))
            .and_then(|(key, _)| HostRule::origin_words(key));
        match origin {
            Some(words) => write!(f, " ({words})"),
            None => Ok(()),
        }
    }
}

/// The settings of the state a job is resolved against.
#[derive(Clone, Debug, Default)]
pub struct StateFacts {
    /// The seeds the state will hold once this run's seeds are added.
    pub seeds: Vec<String>,
    /// Its dedup mode and Bloom filter (fixed when it was created): log2 of
    /// its bits (`None` when it is sized to the crawl) and its hash count.
    pub dedup: Option<(DedupMode, Option<u8>, u8)>,
}

/// A job resolved for one run.
#[derive(Debug)]
pub struct Resolved {
    /// The job as stored (a crawl file).
    pub text: String,
    /// The job's settings, read back from `text`; per-run options at their
    /// defaults.
    pub config: CrawlConfig,
    /// The job's legs (`None`: the bundled ones).
    pub legs: Option<Stack>,
    /// True when the job's legs hold a `sitemap` leg (see
    /// [`crate::config::CrawlConfig::sitemaps`]).
    pub sitemap_leg: bool,
    /// What differs from the stored job (empty when there was none).
    pub changes: Vec<Change>,
}

/// Why a job could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The stored job text is not a crawl file this build reads.
    #[error("the stored job (version {version}) cannot be read: {source}")]
    Stored {
        /// Its version.
        version: u64,
        /// The parser's message.
        source: CrawlFileError,
    },
    /// The job written from the settings given does not read back (a setting
    /// this build cannot write as a crawl file).
    #[error("the job cannot be written as a crawl file: {0}")]
    Unwritable(CrawlFileError),
}

/// Resolves the job of a run (see the module doc): `file` (a `--config` crawl
/// file) replaces `stored` (the latest stored job: version and text), `flags`
/// then changes what the command line gives. `facts` fills the seeds and the
/// dedup settings from the state.
pub fn resolve(
    stored: Option<(u64, &str)>,
    file: Option<&CrawlFile>,
    flags: impl FnOnce(&mut CrawlConfig),
    facts: &StateFacts,
) -> Result<Resolved, JobError> {
    let (mut config, legs) = match (file, stored) {
        (Some(file), _) => (file.config.clone(), file.legs_toml.clone()),
        (None, Some((version, text))) => {
            let parsed = crawlfile::parse(text, "job".as_ref())
                .map_err(|source| JobError::Stored { version, source })?;
            (parsed.config, parsed.legs_toml)
        }
        (None, None) => (CrawlConfig::default(), None),
    };
    flags(&mut config);
    if let Some((mode, bits, hashes)) = facts.dedup {
        config.dedup = Some(mode);
        config.bloom_bits = bits;
        config.bloom_hashes = Some(hashes);
    }
    let text = crawlfile::job_text(&config, legs.as_ref(), &facts.seeds);
    let read = crawlfile::parse(&text, "job".as_ref()).map_err(JobError::Unwritable)?;
    let changes = match stored {
        Some((_, before)) => changes(before, &text),
        None => Vec::new(),
    };
    let sitemap_leg = read
        .legs_toml
        .as_ref()
        .is_some_and(|legs| crawlfile::names_kind(legs, "sitemap"));
    Ok(Resolved {
        text,
        config: read.config,
        legs: read.legs,
        sitemap_leg,
        changes,
    })
}

/// The settings that differ between two job texts, in the order of `after`
/// (then those only `before` has).
pub fn changes(before: &str, after: &str) -> Vec<Change> {
    let before = flatten_text(before);
    let after = flatten_text(after);
    let mut changes: Vec<Change> = after
        .iter()
        .filter(|(key, value)| lookup(&before, key) != Some(value))
        .map(|(key, value)| Change {
            key: key.clone(),
            before: lookup(&before, key).map(|v| shown(key, v)),
            after: Some(shown(key, value)),
        })
        .collect();
    changes.extend(
        before
            .iter()
            .filter(|(key, _)| lookup(&after, key).is_none())
            .map(|(key, value)| Change {
                key: key.clone(),
                before: Some(shown(key, value)),
                after: None,
            }),
    );
    changes
}

/// What decides the items a job's legs make from a response, to compare two
/// job versions by: the job's `[[legs]]` (none: the bundled legs). Two
/// versions with the same key make the same items from the same page, so a
/// page need not be parsed again when only other settings changed.
pub fn legs_key(text: &str) -> String {
    let table: Table = text.parse().unwrap_or_default();
    table.get("legs").map(Value::to_string).unwrap_or_default()
}

/// Headers whose values are credentials: a change to one is printed as `***`.
const SECRET_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie"];

/// `value` as a change line shows it: a credential header's as `***` (in
/// `[headers]` and in a `[hosts."HOST"] headers` table), the proxy URL with
/// its password as `***`.
fn shown(key: &str, value: &str) -> String {
    if key == "proxy" {
        return crate::config::redact_password(value);
    }
    let header = match key.strip_prefix("headers.") {
        Some(name) => Some(name),
        None if key.starts_with("hosts.") => key.rsplit_once(".headers.").map(|(_, name)| name),
        None => None,
    };
    let secret =
        header.is_some_and(|name| SECRET_HEADERS.contains(&name.to_ascii_lowercase().as_str()));
    match secret {
        true => "***".into(),
        false => value.to_owned(),
    }
}

fn lookup<'a>(flat: &'a [(String, String)], key: &str) -> Option<&'a String> {
    flat.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A job text's settings as (dotted crawl-file key, value) pairs, in its
/// order, each value as a change line shows it (a credential header and a
/// proxy password as `***`): the job in a form a person can read in one line
/// per setting (a WARC `warcinfo` record's fields).
pub fn fields(text: &str) -> Vec<(String, String)> {
    flatten_text(text)
        .into_iter()
        .map(|(key, value)| {
            let shown = shown(&key, &value);
            (key, shown)
        })
        .collect()
}

/// A job text as (dotted key, value) pairs; an unreadable text has none.
fn flatten_text(text: &str) -> Vec<(String, String)> {
    let mut flat = Vec::new();
    if let Ok(table) = text.parse::<Table>() {
        flatten(&table, "", &mut flat);
    }
    flat
}

fn flatten(table: &Table, prefix: &str, flat: &mut Vec<(String, String)>) {
    for (key, value) in table {
        // A key that is not a bare TOML key (a host with dots or a port) is
        // quoted, as a crawl file writes it: `hosts."127.0.0.1:8080".user`.
        let bare = key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let key = match bare && !key.is_empty() {
            true => key.clone(),
            false => format!("{key:?}"),
        };
        let path = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Table(inner) => flatten(inner, &path, flat),
            Value::Array(items)
                if !items.is_empty() && items.iter().all(|item| item.is_table()) =>
            {
                for (i, item) in items.iter().enumerate() {
                    if let Value::Table(inner) = item {
                        flatten(inner, &format!("{path}[{i}]"), flat);
                    }
                }
            }
            Value::String(text) => flat.push((path, text.clone())),
            other => flat.push((path, other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn file(text: &str) -> CrawlFile {
        crawlfile::parse(text, "test.toml".as_ref()).expect("a crawl file")
    }

    #[test]
    fn a_job_reads_back_as_the_same_job() {
        let crawl = file(
            "seeds = [\"https://a.example/\"]\n\
             [scope]\nallow = [\"/a/\"]\nmax_depth = 2\n\
             [politeness]\ndelay = \"10ms\"\nper_host = 4\n\
             [headers]\n\"Accept-Language\" = \"fr\"\n\
             [revisit]\nafter = \"12h\"\nhubs = [\"/index\"]\n\
             [[legs]]\nkind = \"links\"\nallow = [\"/b/\"]\n[[legs]]\nkind = \"page_item\"\n",
        );
        let facts = StateFacts {
            seeds: vec!["https://a.example/".into()],
            dedup: Some((DedupMode::Exact, Some(20), 6)),
        };
        let first = resolve(None, Some(&crawl), |_| {}, &facts).expect("resolves");
        assert_eq!(first.config.delay, Some(Duration::from_millis(10)));
        assert_eq!(first.config.allow, ["/a/"]);
        assert_eq!(first.config.max_depth, Some(2));
        assert_eq!(first.config.bloom_bits, Some(20));
        assert!(first.legs.is_some());
        // The stored text, resolved with nothing given, is the same job.
        let again = resolve(Some((1, &first.text)), None, |_| {}, &facts).expect("resolves");
        assert_eq!(again.text, first.text);
        assert!(again.changes.is_empty(), "{:?}", again.changes);
        // And read as a crawl file (what `dump job` prints), too.
        let dumped = file(&first.text);
        let replaced = resolve(Some((1, &first.text)), Some(&dumped), |_| {}, &facts).unwrap();
        assert_eq!(replaced.text, first.text);
    }

    #[test]
    fn flags_change_the_stored_job_one_line_each() {
        let facts = StateFacts::default();
        let stored = resolve(
            None,
            None,
            |c| c.delay = Some(Duration::from_secs(1)),
            &facts,
        )
        .expect("resolves");
        let next = resolve(
            Some((1, &stored.text)),
            None,
            |c| {
                c.delay = Some(Duration::from_millis(10));
                c.allow = vec!["/a/".into()];
            },
            &facts,
        )
        .expect("resolves");
        let lines: Vec<String> = next.changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "scope.allow: [] -> [\"/a/\"]",
                "politeness.delay: 1s -> 10ms"
            ]
        );
        let unset = changes(&next.text, &stored.text.replace("delay = \"1s\"\n", ""));
        assert!(
            unset
                .iter()
                .any(|c| c.to_string() == "politeness.delay: 10ms -> (default)"),
            "{unset:?}"
        );
    }

    #[test]
    fn keep_status_is_written_only_when_given_and_changes_in_one_line() {
        let facts = StateFacts::default();
        let plain = resolve(None, None, |_| {}, &facts).unwrap();
        assert!(!plain.text.contains("keep_status"), "{}", plain.text);
        let kept = resolve(
            Some((1, &plain.text)),
            None,
            |c| c.keep_status = vec![404],
            &facts,
        )
        .unwrap();
        let lines: Vec<String> = kept.changes.iter().map(ToString::to_string).collect();
        assert_eq!(lines, ["keep_status: (default) -> [404]"]);
        let again = resolve(Some((2, &kept.text)), None, |_| {}, &facts).unwrap();
        assert!(again.changes.is_empty());
        assert_eq!(again.config.keep_status, [404]);
    }

    #[test]
    fn page_requisites_is_written_only_when_on_and_changes_in_one_line() {
        let facts = StateFacts::default();
        let plain = resolve(None, None, |_| {}, &facts).unwrap();
        assert!(!plain.text.contains("page_requisites"), "{}", plain.text);
        let on = resolve(
            Some((1, &plain.text)),
            None,
            |c| c.page_requisites = true,
            &facts,
        )
        .unwrap();
        let lines: Vec<String> = on.changes.iter().map(ToString::to_string).collect();
        assert_eq!(lines, ["scope.page_requisites: (default) -> true"]);
        let again = resolve(Some((2, &on.text)), None, |_| {}, &facts).unwrap();
        assert!(again.changes.is_empty());
        assert!(again.config.page_requisites);
    }

    #[test]
    fn a_credential_header_changes_without_its_value_shown() {
        let facts = StateFacts::default();
        let header = |value: &str| {
            let value = value.to_owned();
            move |c: &mut CrawlConfig| c.extra_headers = vec![("Authorization".into(), value)]
        };
        let stored = resolve(None, None, header("Bearer old-token"), &facts).unwrap();
        let next = resolve(
            Some((1, &stored.text)),
            None,
            header("Bearer new-token"),
            &facts,
        )
        .unwrap();
        let lines: Vec<String> = next.changes.iter().map(ToString::to_string).collect();
        assert_eq!(lines, ["headers.Authorization: *** -> ***"]);
    }

    #[test]
    fn access_settings_round_trip_and_change_without_secrets() {
        let crawl = file(
            "proxy = \"http://ann:pr0xy@proxy.example:3128\"\ncookies = false\n\
             [hosts.\"Intranet.Example\"]\nheaders = { Authorization = \"Bearer t0ken\", \"X-Team\" = \"docs\" }\n\
             user = \"ann\"\npassword_env = \"INTRANET_PW\"\n",
        );
        let facts = StateFacts::default();
        let first = resolve(None, Some(&crawl), |_| {}, &facts).expect("resolves");
        let config = &first.config;
        assert!(!config.cookies);
        assert_eq!(config.hosts.len(), 1);
        assert_eq!(config.hosts[0].host, "intranet.example");
        assert_eq!(config.hosts[0].password_env.as_deref(), Some("INTRANET_PW"));
        let again = resolve(Some((1, &first.text)), None, |_| {}, &facts).unwrap();
        assert_eq!(again.text, first.text);
        assert!(again.changes.is_empty(), "{:?}", again.changes);
        let next = resolve(
            Some((1, &first.text)),
            None,
            |c| {
                c.proxy = crate::config::ProxyChoice::Off;
                c.cookies = true;
                c.hosts[0].headers[0].1 = "Bearer other".into();
            },
            &facts,
        )
        .unwrap();
        let lines: Vec<String> = next.changes.iter().map(ToString::to_string).collect();
        let text = lines.join("\n");
        assert!(
            text.contains("proxy: http://ann:***@proxy.example:3128/ -> none"),
            "{text}"
        );
        assert!(
            text.contains("hosts.\"intranet.example\".headers.Authorization: *** -> *** (intranet.example on ports 80 (http) and 443 (https) only"),
            "{text}"
        );
        assert!(text.contains("cookies: false -> (default)"), "{text}");
        assert!(!text.contains("pr0xy") && !text.contains("t0ken"), "{text}");
    }

    #[test]
    fn per_run_options_are_not_part_of_a_job() {
        let crawl = file("[limits]\nmax_pages = 5\nuntil_idle = true\nmax_duration = \"1m\"\n");
        let resolved = resolve(None, Some(&crawl), |_| {}, &StateFacts::default()).unwrap();
        assert_eq!(resolved.config.max_pages, None);
        assert!(!resolved.config.until_idle);
        assert!(!resolved.text.contains("max_pages"), "{}", resolved.text);
    }
}
