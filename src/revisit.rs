//! Incremental re-crawls: when a page is due again, and what a fetch of a known
//! page means (new, changed, unchanged, not modified, gone).
//!
//! [`Schedule`] holds the revisit policies ([`Revisit`]: every run, a fixed
//! interval, Nutch's adaptive interval, the estimated change rate of [`rate`],
//! never), picked per URL by the first matching rule. [`Schedule::record`]
//! turns the previous [`PageRecord`] and one [`Observation`] into the next
//! record: validators, content hash, version, counts, change evidence, interval
//! and due time (under the estimated policy, not before the answer's
//! `Cache-Control`/`Expires` lifetime ends). [`explain`] says why a page is due
//! when it is; [`Schedule::worth`] what a revisit is worth to a revisit
//! budget, which spends a cycle's revisits on the pages worth most. Pure functions of their inputs (time is a parameter), so every
//! rule is unit-tested here. Depends on [`crate::config`], [`crate::request`],
//! [`crate::fingerprint`] (hex content hashes), the record types of
//! [`crate::store`], [`crate::crawlfile`] (duration text) and the sitemap leg's
//! `lastmod` key.
//!
//! # Sitemap `lastmod`
//! A page found through a sitemap entry with a `<lastmod>` carries it
//! ([`crate::legs::LASTMOD_META`], kept with the page record's request). A page
//! whose `lastmod` is older than its last fetch is not due, whatever its policy
//! says: the site says the copy held is current ([`Schedule::lastmod_settles`]).
//! It becomes due again when a sitemap read later lists it with a `lastmod` no
//! older than that fetch ([`lastmod_makes_due`]; the engine then queues it).

use std::time::Duration;

use regex::Regex;
use sha1::{Digest, Sha1};

use crate::config::{CrawlConfig, Revisit};
use crate::legs::LASTMOD_META;
use crate::request::Request;
use crate::store::{PageRecord, StoredRequest};

/// The period a revisit budget assumes for a page under the adaptive policy,
/// which has none of its own: a nightly crawl.
const DAY: Duration = Duration::from_secs(86_400);

/// A page is due this fraction of its interval early (at most [`MAX_EARLY`]), so
/// that a daily run does not miss a page fetched a few seconds later the day before.
pub const EARLY_FRACTION: f64 = 0.1;
/// Upper bound of the early margin.
pub const MAX_EARLY: Duration = Duration::from_secs(3600);
/// Adaptive policy: factor applied to the interval when the page changed.
pub const SHRINK: f64 = 0.8;
/// Adaptive policy: factor applied to the interval when it did not.
pub const GROW: f64 = 1.4;
/// 404 answers in a row after which a page is gone (410 is gone at once).
pub const GONE_AFTER_404S: u32 = 2;

/// A revisit rule whose regex does not compile.
#[derive(Debug, thiserror::Error)]
#[error("revisit rule {pattern:?} is not a valid regex: {reason}")]
pub struct RuleError {
    /// The pattern as given.
    pub pattern: String,
    /// The regex error.
    pub reason: String,
}

/// What one fetch of a page saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// HTTP status (304 for a confirmed copy).
    pub status: u16,
    /// The URL that answered.
    pub final_url: String,
    /// The `ETag` header, if any.
    pub etag: Option<String>,
    /// The `Last-Modified` header, if any.
    pub last_modified: Option<String>,
    /// [`content_hash`] of the body (of the `Location` for a redirect); ignored for 304.
    pub content_hash: String,
    /// When the response arrived, Unix seconds: the record's fetch times (and
    /// so the date a WARC revisit record refers to) are this.
    pub fetched_at: u64,
    /// An error answer (not 2xx, and not a kept status): recorded, but not
    /// the page's content (see [`Schedule::record`]).
    pub error: bool,
    /// How long the server says the answer stays fresh, in seconds
    /// ([`fresh_for`]): under the estimated policy the page is not due
    /// before then.
    pub fresh_for: Option<u64>,
}

/// How long an answer stays fresh by its headers, in seconds: `Cache-Control`
/// `s-maxage` or `max-age`, else `Expires` less `Date` (or less `fetched_at`
/// without one); `None` when they say nothing, or forbid reuse (`no-cache`,
/// `no-store`, a zero lifetime).
pub fn fresh_for(
    cache_control: Option<&str>,
    expires: Option<&str>,
    date: Option<&str>,
    fetched_at: u64,
) -> Option<u64> {
    let mut max_age = None;
    for directive in cache_control.into_iter().flat_map(|v| v.split(',')) {
        let directive = directive.trim().to_ascii_lowercase();
        if directive == "no-cache" || directive == "no-store" {
            return None;
        }
        let value = |name: &str| {
            directive
                .strip_prefix(name)
                .and_then(|rest| rest.trim_start().strip_prefix('='))
                .and_then(|v| v.trim().trim_matches('"').parse::<u64>().ok())
        };
        if let Some(secs) = value("s-maxage") {
            max_age = Some(secs);
        } else if let Some(secs) = value("max-age") {
            max_age = max_age.or(Some(secs));
        }
    }
    let lifetime = max_age.or_else(|| {
        let base = date.and_then(http_date_secs).unwrap_or(fetched_at);
        expires
            .and_then(http_date_secs)
            .map(|at| at.saturating_sub(base))
    });
    lifetime.filter(|&secs| secs > 0)
}

/// An HTTP date (`Last-Modified`, `Expires`, `Date`) as Unix seconds; `None`
/// when it is not one, or before 1970.
pub(crate) fn http_date_secs(text: &str) -> Option<u64> {
    let at = httpdate::parse_http_date(text.trim()).ok()?;
    Some(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs())
}

/// What a fetch found, compared with the page record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// No record: the page was never fetched before.
    New,
    /// The content hash differs from the record's.
    Changed,
    /// A 200 with the same content hash.
    Unchanged,
    /// The server answered 304 Not Modified.
    NotModified,
    /// A 404 or 410 answer: the page is not there (deleted, or a broken link).
    Gone,
    /// Another error answer that makes no items (401, 403, 501...): the page
    /// failed, its stored content stays as it was.
    Error,
}

impl Change {
    /// Compares a fetched content hash with the record (a 304 is `NotModified`).
    /// A record of a page that never answered well ([`Schedule::failed`]) is no
    /// record: its first good answer is new. A page whose items were withdrawn
    /// from the change feed (gone, out of scope) is changed by its next good
    /// answer, whatever its content, so that its items are made again.
    pub fn of(prior: Option<&PageRecord>, status: u16, content_hash: &str) -> Change {
        match prior.filter(|p| p.fetches > 0) {
            None => Change::New,
            Some(_) if status == 304 => Change::NotModified,
            Some(prior) if prior.withdrawn.is_some() => Change::Changed,
            Some(prior) if prior.content_hash == content_hash => Change::Unchanged,
            Some(_) => Change::Changed,
        }
    }

    /// True when the page's items are stored (new or changed content).
    pub fn stores_items(self) -> bool {
        matches!(self, Change::New | Change::Changed)
    }

    /// The per-run counter of this outcome.
    pub fn counter(self) -> &'static str {
        match self {
            Change::New => "pages/new",
            Change::Changed => "pages/changed",
            Change::Unchanged => "pages/unchanged",
            Change::NotModified => "pages/not_modified",
            Change::Gone => "pages/gone",
            Change::Error => "fetch/failed",
        }
    }
}

/// SHA-1 of `bytes` as 40 hex characters.
pub fn content_hash(bytes: &[u8]) -> String {
    let digest: [u8; 20] = Sha1::digest(bytes).into();
    crate::fingerprint::to_hex(&digest)
}

/// The `If-None-Match` / `If-Modified-Since` headers a revisit of `prior`
/// sends: none when its items were withdrawn from the change feed, whose
/// next answer must carry the content to make them again.
pub fn conditional_headers(prior: &PageRecord) -> Vec<(String, String)> {
    let mut headers = Vec::with_capacity(2);
    if prior.withdrawn.is_some() {
        return headers;
    }
    if let Some(etag) = &prior.etag {
        headers.push(("If-None-Match".to_owned(), etag.clone()));
    }
    if let Some(date) = &prior.last_modified {
        headers.push(("If-Modified-Since".to_owned(), date.clone()));
    }
    headers
}

/// True when a redirect followed with `dont_filter` (from a seed or a revisit)
/// would fetch its target a second time in this cycle: the target has a page
/// record that is not gone and is due by `now` (so the cycle queued it, or the
/// next will), or was fetched in this run (after the second `run_started`; a
/// fetch within that second may be the last run's, so it does not count). Such
/// a follow is dropped; a target not due is followed (a hub behind a redirected
/// seed is looked at again). Times are unix seconds.
pub fn redirect_is_redundant(target: Option<&PageRecord>, now: u64, run_started: u64) -> bool {
    target.is_some_and(|record| {
        !record.gone
            && (record.last_fetched > run_started || record.next_due.is_some_and(|d| d <= now))
    })
}

/// The sitemap `lastmod` a request carries (Unix seconds), if any.
pub fn lastmod_of(meta: &std::collections::BTreeMap<String, String>) -> Option<u64> {
    meta.get(LASTMOD_META).and_then(|v| v.parse().ok())
}

/// True when a sitemap listing `request` (with its `lastmod`) makes the page
/// of `record` due now: the page was fetched well before, is not gone, and
/// the `lastmod` is no older than that fetch. Such a request is queued even
/// though its URL was seen; one without `lastmod`, or for an unknown page,
/// is an ordinary link.
pub fn lastmod_makes_due(record: Option<&PageRecord>, request: &Request) -> bool {
    match (record, lastmod_of(&request.meta)) {
        (Some(record), Some(lastmod)) => {
            record.fetches > 0 && !record.gone && lastmod >= record.last_fetched
        }
        _ => false,
    }
}

/// The revisit policies of a crawl.
#[derive(Debug, Clone)]
pub struct Schedule {
    default: Revisit,
    rules: Vec<(Regex, Revisit)>,
}

impl Schedule {
    /// Compiles the crawl's revisit rules; pages no rule matches follow this
    /// run's policy ([`CrawlConfig::revisit_this_run`]) or else the job's.
    pub fn new(config: &CrawlConfig) -> Result<Schedule, RuleError> {
        let mut rules = Vec::with_capacity(config.revisit_rules.len());
        for rule in &config.revisit_rules {
            let regex = Regex::new(&rule.pattern).map_err(|e| RuleError {
                pattern: rule.pattern.clone(),
                reason: one_line(&e.to_string()),
            })?;
            rules.push((regex, rule.revisit));
        }
        Ok(Schedule {
            default: config.revisit_this_run.unwrap_or(config.revisit),
            rules,
        })
    }

    /// The policy for `url`: the first matching rule's, else the default.
    pub fn policy(&self, url: &str) -> Revisit {
        self.rules
            .iter()
            .find(|(regex, _)| regex.is_match(url))
            .map_or(self.default, |(_, revisit)| *revisit)
    }

    /// The record of a new page that failed for good (out of retries on an error
    /// status, or no answer: `status` 0): never fetched well (`fetches` 0,
    /// version 0, no content), due again at once, so the next cycle asks it
    /// again; its first good answer is a new page ([`Change::of`]).
    pub fn failed(request: &Request, status: u16, now: u64) -> PageRecord {
        PageRecord {
            url: request.url.clone(),
            final_url: request.url.clone(),
            status,
            etag: None,
            last_modified: None,
            content_hash: String::new(),
            first_fetched: now,
            last_fetched: now,
            last_changed: now,
            fetches: 0,
            changes: 0,
            version: 0,
            interval: 0,
            next_due: Some(now),
            missing: 0,
            gone: false,
            request: StoredRequest::of(request),
            items: Vec::new(),
            withdrawn: None,
            legs: 0,
            response: None,
            evidence: crate::store::ChangeEvidence::default(),
        }
    }

    /// A description of the policies (default and rules, in order): two
    /// schedules with the same description set the same due times.
    pub fn describe(&self) -> String {
        let mut text = format!("default={:?}", self.default);
        for (regex, revisit) in &self.rules {
            text.push_str(&format!(";{}={revisit:?}", regex.as_str()));
        }
        text
    }

    /// When `record`'s page is due under this schedule: its last fetch plus the
    /// interval the policy for its URL gives (an adaptive interval keeps what the
    /// page's history made of it, within the policy's bounds), a little early as
    /// [`Schedule::record`] sets it; `None` for "never again". A gone page is
    /// due again after its policy's longest interval ([`Schedule::gone_due`]).
    pub fn due(&self, record: &PageRecord) -> Option<u64> {
        if record.gone {
            return self.gone_due(&record.url, record.last_fetched);
        }
        if record.fetches == 0 {
            // Failures only: due at once, whatever the policy.
            return Some(record.last_fetched);
        }
        if Schedule::lastmod_settles(record) {
            return None;
        }
        let interval = match self.policy(&record.url) {
            Revisit::EveryRun => Duration::ZERO,
            Revisit::After(d) => d,
            Revisit::Never => return None,
            Revisit::Adaptive { initial, min, max } => {
                let known = Duration::from_secs(record.interval);
                let start = if record.interval == 0 { initial } else { known };
                start.clamp(min, max.max(min))
            }
            Revisit::Estimated { period, min, max } => {
                let chosen = rate::interval(&record.evidence, period, min, max);
                // The server's word that the answer stays fresh, kept with
                // the record (see `Schedule::record`), holds here too.
                if record.evidence.why == WHY_FRESH {
                    chosen.max(Duration::from_secs(record.interval).min(max.max(min)))
                } else {
                    chosen
                }
            }
        };
        Some(
            record
                .last_fetched
                .saturating_add(interval.as_secs())
                .saturating_sub(early(interval)),
        )
    }

    /// What a revisit of `record`'s page at `at` (unix seconds) is worth to a
    /// revisit budget ([`rate::worth`]); `None` when the budget does not
    /// govern it: a page the estimated or adaptive policy does not schedule (a
    /// rule's fixed interval, "every run", "never" is obeyed as written), one
    /// never fetched well, or one gone. A page whose sitemap `lastmod` says it
    /// has not changed is worth nothing.
    pub fn worth(&self, record: &PageRecord, at: u64) -> Option<f64> {
        if record.gone || record.fetches == 0 {
            return None;
        }
        let period = match self.policy(&record.url) {
            Revisit::Estimated { period, .. } => period,
            Revisit::Adaptive { .. } => DAY,
            Revisit::EveryRun | Revisit::After(_) | Revisit::Never => return None,
        };
        if Schedule::lastmod_settles(record) {
            return Some(0.0);
        }
        let age = at.saturating_sub(record.last_fetched);
        Some(rate::worth(&record.evidence, age, period))
    }

    /// True when the sitemap `lastmod` kept with `record` is older than its
    /// last fetch: the page is not due (see the module doc).
    pub fn lastmod_settles(record: &PageRecord) -> bool {
        lastmod_of(&record.request.meta).is_some_and(|lastmod| lastmod < record.last_fetched)
    }

    /// When a page found gone at `at` is asked again, as Nutch does: after the
    /// longest interval its policy allows (an adaptive policy's maximum, a
    /// fixed interval, every run), so that a restored page comes back without
    /// being made a seed; `None` under "never".
    pub fn gone_due(&self, url: &str, at: u64) -> Option<u64> {
        let longest = match self.policy(url) {
            Revisit::EveryRun => Duration::ZERO,
            Revisit::After(d) => d,
            Revisit::Never => return None,
            Revisit::Adaptive { min, max, .. } | Revisit::Estimated { min, max, .. } => {
                max.max(min)
            }
        };
        Some(
            at.saturating_add(longest.as_secs())
                .saturating_sub(early(longest)),
        )
    }

    /// The record after an error answer (`seen.error`), and what it found
    /// ([`Change::Gone`] for 404 and 410, else [`Change::Error`]). The page's
    /// content, validators, version and fetch count stay those of its last good
    /// answer (a page with none keeps `fetches` 0, so that its first good answer
    /// is new); its status, time, and 404/410 streak are the answer's. It is
    /// due again at once (the next cycle), or when gone by [`Schedule::gone_due`].
    fn error_record(
        &self,
        prior: Option<&PageRecord>,
        request: &Request,
        seen: &Observation,
        now: u64,
    ) -> (PageRecord, Change) {
        let mut record = match prior {
            Some(prior) => prior.clone(),
            None => Schedule::failed(request, seen.status, now),
        };
        let missing = matches!(seen.status, 404 | 410);
        record.status = seen.status;
        record.final_url.clone_from(&seen.final_url);
        record.last_fetched = now;
        record.missing = if missing {
            record.missing.saturating_add(1)
        } else {
            0
        };
        record.gone = seen.status == 410 || record.missing >= GONE_AFTER_404S;
        record.next_due = if record.gone {
            self.gone_due(&request.url, now)
        } else {
            Some(now)
        };
        let change = if missing { Change::Gone } else { Change::Error };
        (record, change)
    }

    /// The record after `seen`, and what it found. `now` is unix seconds.
    pub fn record(
        &self,
        prior: Option<&PageRecord>,
        request: &Request,
        seen: &Observation,
        now: u64,
    ) -> (PageRecord, Change) {
        if seen.error {
            return self.error_record(prior, request, seen, now);
        }
        let change = Change::of(prior, seen.status, &seen.content_hash);
        // A record of failures only is no history.
        let prior = prior.filter(|p| p.fetches > 0);
        let policy = self.policy(&request.url);
        let mut evidence = prior.map(|p| p.evidence.clone()).unwrap_or_default();
        // What the content did, whatever the change feed makes of it (a page
        // whose items were withdrawn is "changed" with the same content).
        let content_changed =
            change == Change::Changed && prior.is_some_and(|p| p.content_hash != seen.content_hash);
        rate::observe(
            &mut evidence,
            rate::Seen::of(
                prior.map(|p| p.last_fetched),
                now,
                content_changed,
                seen.last_modified.as_deref(),
            ),
        );
        evidence.why = why_code(policy);
        let interval = next_interval(policy, prior.map(|p| p.interval), change, &evidence);
        let mut record = match prior {
            Some(prior) => prior.clone(),
            None => PageRecord {
                url: request.url.clone(),
                final_url: seen.final_url.clone(),
                status: seen.status,
                etag: None,
                last_modified: None,
                content_hash: seen.content_hash.clone(),
                first_fetched: now,
                last_fetched: now,
                last_changed: now,
                fetches: 0,
                changes: 0,
                version: 1,
                interval: 0,
                next_due: None,
                missing: 0,
                gone: false,
                request: StoredRequest::of(request),
                items: Vec::new(),
                withdrawn: None,
                legs: 0,
                response: None,
                evidence: crate::store::ChangeEvidence::default(),
            },
        };
        record.fetches = record.fetches.saturating_add(1);
        record.last_fetched = now;
        record.evidence = evidence;
        if change != Change::NotModified {
            record.final_url.clone_from(&seen.final_url);
            record.status = seen.status;
            record.etag.clone_from(&seen.etag);
            record.last_modified.clone_from(&seen.last_modified);
            record.content_hash.clone_from(&seen.content_hash);
            record.request = StoredRequest::of(request);
        }
        // The newest sitemap `lastmod` known: the request's, else the one
        // kept (a page fetched again through a link still has its sitemap's).
        let lastmod =
            lastmod_of(&request.meta).or_else(|| prior.and_then(|p| lastmod_of(&p.request.meta)));
        if let Some(lastmod) = lastmod {
            record
                .request
                .meta
                .insert(LASTMOD_META.to_owned(), lastmod.to_string());
        }
        if change == Change::Changed {
            record.changes = record.changes.saturating_add(1);
            record.version = record.version.saturating_add(1);
            record.last_changed = now;
        }
        record.missing = match seen.status {
            404 | 410 => record.missing.saturating_add(1),
            304 => record.missing,
            _ => 0,
        };
        record.gone = seen.status == 410 || record.missing >= GONE_AFTER_404S;
        record.interval = interval.map_or(0, |d| d.as_secs());
        record.next_due = match interval {
            _ if record.gone => self.gone_due(&request.url, now),
            _ if Schedule::lastmod_settles(&record) => None,
            None => None,
            Some(d) => Some(now.saturating_add(d.as_secs()).saturating_sub(early(d))),
        };
        // The server's word that the answer stays fresh: not asked before.
        if let (Revisit::Estimated { max, min, .. }, Some(fresh), Some(due)) =
            (policy, seen.fresh_for, record.next_due)
            && !record.gone
        {
            let fresh = fresh.min(max.max(min).as_secs());
            if now.saturating_add(fresh) > due {
                record.next_due = Some(now.saturating_add(fresh));
                record.interval = fresh;
                record.evidence.why = WHY_FRESH;
            }
        }
        (record, change)
    }
}

/// The `error: ...` line of a regex error (its message draws the pattern over
/// several lines), or the message itself.
fn one_line(message: &str) -> String {
    message
        .lines()
        .find_map(|line| line.trim().strip_prefix("error: "))
        .unwrap_or(message)
        .trim()
        .to_owned()
}

/// The interval after a fetch; `None` for "never again". `evidence` already
/// holds what the fetch saw.
fn next_interval(
    policy: Revisit,
    prior: Option<u64>,
    change: Change,
    evidence: &crate::store::ChangeEvidence,
) -> Option<Duration> {
    match policy {
        Revisit::Estimated { period, min, max } => Some(rate::interval(evidence, period, min, max)),
        Revisit::EveryRun => Some(Duration::ZERO),
        Revisit::After(d) => Some(d),
        Revisit::Never => None,
        Revisit::Adaptive { initial, min, max } => {
            let Some(previous) = prior.filter(|_| change != Change::New) else {
                return Some(initial.clamp(min, max.max(min)));
            };
            let factor = if change == Change::Changed {
                SHRINK
            } else {
                GROW
            };
            // Whole seconds: the record keeps seconds.
            let secs = (previous.max(1) as f64 * factor).round();
            let next = Duration::try_from_secs_f64(secs).unwrap_or(max);
            Some(next.clamp(min, max.max(min)))
        }
    }
}

/// What set a page's interval ([`crate::store::ChangeEvidence::why`]): the
/// kind of policy in force at its last good answer (0: not recorded).
const WHY_EVERY_RUN: u8 = 1;
const WHY_FIXED: u8 = 2;
const WHY_ADAPTIVE: u8 = 3;
const WHY_ESTIMATED: u8 = 4;
const WHY_NEVER: u8 = 5;
const WHY_FRESH: u8 = 6;

fn why_code(policy: Revisit) -> u8 {
    match policy {
        Revisit::EveryRun => WHY_EVERY_RUN,
        Revisit::After(_) => WHY_FIXED,
        Revisit::Adaptive { .. } => WHY_ADAPTIVE,
        Revisit::Estimated { .. } => WHY_ESTIMATED,
        Revisit::Never => WHY_NEVER,
    }
}

/// What decides when a page is due: the record's state first (gone, never
/// answered well, settled by its sitemap `lastmod`), else what set its
/// interval ([`crate::store::ChangeEvidence::why`]).
#[derive(Clone, Copy)]
enum Why {
    Gone,
    Failed,
    Lastmod,
    Code(u8),
}

impl Why {
    fn of(record: &PageRecord) -> Why {
        if record.gone {
            Why::Gone
        } else if record.fetches == 0 {
            Why::Failed
        } else if Schedule::lastmod_settles(record) {
            Why::Lastmod
        } else {
            Why::Code(record.evidence.why)
        }
    }
}

/// Why `record`'s page is due when it is, in words (`dump pages`).
pub fn explain(record: &PageRecord) -> String {
    let every = crate::crawlfile::duration_text(Duration::from_secs(record.interval));
    let rate = || rate_text(rate::changes_per_day(&record.evidence));
    match Why::of(record) {
        Why::Gone => "gone: asked again after the longest interval".into(),
        Why::Failed => "no good answer yet: asked again in the next run".into(),
        Why::Lastmod => "its sitemap lastmod is older than the last fetch: asked when a sitemap lists it as newer".into(),
        Why::Code(WHY_EVERY_RUN) => "every run".into(),
        Why::Code(WHY_ADAPTIVE) => format!("adaptive (Nutch): every {every} since the last fetch"),
        Why::Code(WHY_ESTIMATED) => format!(
            "estimated {} changes/day from {} fetches, {} changes: every {every}",
            rate(),
            record.fetches,
            record.changes
        ),
        Why::Code(WHY_NEVER) => "never asked again".into(),
        Why::Code(WHY_FRESH) => format!(
            "fresh for {every} by the server's Cache-Control or Expires (estimated {} changes/day)",
            rate()
        ),
        Why::Code(_) => format!("every {every}"),
    }
}

/// What decides when `record`'s page is due, in a word (the `dump pages`
/// table's column; [`explain`] says it in full).
pub fn why_word(record: &PageRecord) -> &'static str {
    match Why::of(record) {
        Why::Gone => "gone",
        Why::Failed => "failed",
        Why::Lastmod => "lastmod",
        Why::Code(WHY_EVERY_RUN) => "every-run",
        Why::Code(WHY_ADAPTIVE) => "adaptive",
        Why::Code(WHY_ESTIMATED) => "estimated",
        Why::Code(WHY_NEVER) => "never",
        Why::Code(WHY_FRESH) => "expires",
        Why::Code(_) => "fixed",
    }
}

/// A rate in changes per day with two significant digits.
pub fn rate_text(per_day: f64) -> String {
    if per_day >= 10.0 {
        format!("{per_day:.0}")
    } else if per_day >= 0.1 {
        format!("{per_day:.2}")
    } else {
        format!("{per_day:.1e}")
    }
}

/// How early a page with interval `d` becomes due, in seconds.
fn early(d: Duration) -> u64 {
    d.mul_f64(EARLY_FRACTION).min(MAX_EARLY).as_secs()
}

pub mod rate;

#[cfg(test)]
mod tests;
