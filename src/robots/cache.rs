//! [`RobotsCache`]: robots.txt fetched once per origin, kept for a TTL, and
//! persisted by the engine as [`RobotsRecord`]s.
//!
//! Depends on [`crate::fetch`], [`crate::request`], [`crate::config`] and
//! `rules`. Invariants: at most one robots.txt fetch per origin is in flight (a
//! per-origin `RwLock` is held for writing across the fetch, so concurrent
//! checks wait and then reuse its result); an entry is trusted until
//! `fetched_at + ttl` (or `+ unavailable_retry` when robots.txt was
//! unavailable), judged by the injected clock; every fetch made yields exactly
//! one record for [`RobotsCache::take_new_records`] (with the fetcher
//! capturing, also its HTTP exchanges, redirect hops included, handed over
//! together with the record by [`RobotsCache::take_new`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, UNIX_EPOCH};

use http::header::LOCATION;
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;
use tracing::debug;
use url::Url;

use super::rules::{MAX_ROBOTS_BYTES, Robots};
use crate::config::CrawlConfig;
use crate::fetch::{Exchange, FetchError, Fetcher};
use crate::request::Request;

/// Redirects followed for one robots.txt (RFC 9309 §2.3.1.2: at least five).
pub const MAX_REDIRECTS: usize = 5;
/// Default for [`RobotsSettings::ttl`]: 24 hours.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// Default for [`RobotsSettings::unavailable_retry`]: 60 seconds.
pub const DEFAULT_UNAVAILABLE_RETRY: Duration = Duration::from_secs(60);
/// How soon robots.txt of a host that could not be connected to (DNS, refused,
/// TLS) is asked again: short, so the engine counts its connection failures and
/// gives an unreachable host up within seconds, not minutes.
pub const UNREACHABLE_RETRY: Duration = Duration::from_secs(2);
/// Default for [`RobotsSettings::max_crawl_delay`]: 30 seconds.
pub const DEFAULT_MAX_CRAWL_DELAY: Duration = Duration::from_secs(30);

/// The current time in unix seconds; injected so tests control expiry.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The wall clock, in unix seconds (0 if the system clock is before 1970).
pub fn system_clock() -> Clock {
    Arc::new(|| {
        crate::clock::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs())
    })
}

/// How the cache fetches and trusts robots.txt.
#[derive(Clone)]
pub struct RobotsSettings {
    /// Our user agent; its product token picks the group (see [`Robots::parse`]).
    pub agent: String,
    /// How long a fetched robots.txt (or a 4xx "allow all") is trusted (default 24 h).
    pub ttl: Duration,
    /// How long a 5xx / unreachable "disallow all" holds before robots.txt is
    /// tried again (default 60 s; rounded up to whole seconds).
    pub unavailable_retry: Duration,
    /// Largest `Crawl-delay` honoured; longer ones are cut to it (default 30 s).
    pub max_crawl_delay: Duration,
    /// Unix seconds now (default [`system_clock`]).
    pub now: Clock,
}

impl RobotsSettings {
    /// Defaults for `agent`: [`DEFAULT_TTL`], [`DEFAULT_UNAVAILABLE_RETRY`],
    /// [`DEFAULT_MAX_CRAWL_DELAY`] and the system clock.
    pub fn new(agent: impl Into<String>) -> RobotsSettings {
        RobotsSettings {
            agent: agent.into(),
            ttl: DEFAULT_TTL,
            unavailable_retry: DEFAULT_UNAVAILABLE_RETRY,
            max_crawl_delay: DEFAULT_MAX_CRAWL_DELAY,
            now: system_clock(),
        }
    }

    /// The settings of a crawl with `config`: its user agent, `robots_ttl` and
    /// `max_crawl_delay`; the default retry and the system clock.
    pub fn from_config(config: &CrawlConfig) -> RobotsSettings {
        RobotsSettings {
            ttl: config.robots_ttl,
            max_crawl_delay: config.max_crawl_delay,
            unavailable_retry: config.robots_retry,
            ..RobotsSettings::new(config.user_agent.clone())
        }
    }
}

impl fmt::Debug for RobotsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsSettings")
            .field("agent", &self.agent)
            .field("ttl", &self.ttl)
            .field("unavailable_retry", &self.unavailable_retry)
            .field("max_crawl_delay", &self.max_crawl_delay)
            .finish_non_exhaustive()
    }
}

/// What robots.txt says about one URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Fetch it, waiting at least `crawl_delay` (already capped) between requests
    /// to this origin when robots.txt asks for one.
    Allowed {
        /// The capped `Crawl-delay` of our group, if any.
        crawl_delay: Option<Duration>,
    },
    /// robots.txt forbids it: record it, do not fetch it.
    Disallowed,
    /// robots.txt could not be had (5xx, 429, unreachable, too many redirects or
    /// a redirect loop): put the request back and try this origin again after
    /// `retry_after`.
    Unavailable {
        /// How long until robots.txt is fetched again.
        retry_after: Duration,
        /// Set when no connection could be made (DNS, refused, TLS): the
        /// fetcher's one-line message.
        unreachable: Option<String>,
    },
}

/// One robots.txt fetch, as the engine persists it between runs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RobotsRecord {
    /// `scheme://host:port` (port always written).
    pub origin: String,
    /// When it was fetched, unix seconds.
    pub fetched_at: u64,
    /// Final HTTP status after redirects; 0 when unreachable. A 3xx means too
    /// many redirects or one without a usable `Location`.
    pub status: u16,
    /// The body of a 2xx, cut at [`MAX_ROBOTS_BYTES`]; empty otherwise.
    pub body: Vec<u8>,
}

impl RobotsRecord {
    /// Whether the record says something lasting: a 2xx (parse it) or a 4xx
    /// other than 429 (allow all). Anything else means "unavailable".
    pub fn is_available(&self) -> bool {
        matches!(self.status, 200..=299) || (matches!(self.status, 400..=499) && self.status != 429)
    }
}

/// What the cache knows of one origin.
struct Entry {
    /// `None` while robots.txt is unavailable.
    robots: Option<Arc<Robots>>,
    /// Unix seconds after which robots.txt is fetched again.
    expires_at: u64,
    /// When the record behind this entry was fetched.
    fetched_at: u64,
    /// Why no connection could be made, when that is why robots.txt is unavailable.
    unreachable: Option<String>,
}

type Slot = Arc<RwLock<Option<Entry>>>;

struct Inner {
    fetcher: Fetcher,
    settings: RobotsSettings,
    /// One slot per origin; the slot's lock serializes its fetches.
    origins: Mutex<HashMap<String, Slot>>,
    /// Records fetched since the last [`RobotsCache::take_new`], with the
    /// exchanges of their fetches (one lock: a record and its exchanges are
    /// always taken together).
    new_records: Mutex<NewRecords>,
    /// HTTP requests made for robots.txt (redirect hops included).
    fetches: AtomicU64,
}

/// robots.txt per origin, shared by every crawl task. Cheap to clone.
#[derive(Clone)]
pub struct RobotsCache {
    inner: Arc<Inner>,
}

impl fmt::Debug for RobotsCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsCache")
            .field("settings", &self.inner.settings)
            .field("fetches", &self.fetches())
            .finish_non_exhaustive()
    }
}

impl RobotsCache {
    /// An empty cache fetching with `fetcher` (its user agent, timeouts and body
    /// limit apply to robots.txt too).
    pub fn new(fetcher: Fetcher, settings: RobotsSettings) -> RobotsCache {
        RobotsCache {
            inner: Arc::new(Inner {
                fetcher,
                settings,
                origins: Mutex::new(HashMap::new()),
                new_records: Mutex::new(NewRecords::default()),
                fetches: AtomicU64::new(0),
            }),
        }
    }

    /// The settings this cache was built with.
    pub fn settings(&self) -> &RobotsSettings {
        &self.inner.settings
    }

    /// What robots.txt of `url`'s origin says about `url`, fetching it first if
    /// it is not cached or has expired. URLs that are not http(s) with a host
    /// have no robots.txt and are allowed.
    pub async fn check(&self, url: &Url) -> Verdict {
        let Some(origin) = origin_of(url) else {
            return Verdict::Allowed { crawl_delay: None };
        };
        let slot = self.slot(&origin);
        {
            let entry = slot.read().await;
            if let Some(verdict) = self.fresh_verdict(entry.as_ref(), url) {
                return verdict;
            }
        }
        let mut entry = slot.write().await;
        // Another task may have fetched it while we waited for the lock.
        if let Some(verdict) = self.fresh_verdict(entry.as_ref(), url) {
            return verdict;
        }
        let (record, unreachable, exchanges) = self.fetch_record(&origin).await;
        let mut fresh = self.entry_of(&record);
        if unreachable.is_some() {
            fresh.expires_at = record
                .fetched_at
                .saturating_add(ceil_secs(UNREACHABLE_RETRY));
            fresh.unreachable = unreachable.clone();
        }
        *entry = Some(fresh);
        {
            let mut new = self.lock_records();
            new.records.push(record);
            new.exchanges.extend(exchanges);
        }
        self.fresh_verdict(entry.as_ref(), url)
            .unwrap_or(Verdict::Unavailable {
                retry_after: Duration::ZERO,
                unreachable,
            })
    }

    /// Loads records persisted by an earlier run. Records older than the TTL and
    /// unavailable ones are ignored, and so is a record older than what the
    /// cache already holds for its origin. Preloaded records are not returned by
    /// [`RobotsCache::take_new_records`].
    pub fn preload(&self, records: Vec<RobotsRecord>) {
        let now = self.now();
        let ttl = self.inner.settings.ttl.as_secs();
        for record in records {
            if !record.is_available() || record.fetched_at.saturating_add(ttl) <= now {
                continue;
            }
            let slot = self.slot(&record.origin);
            // Nobody holds a slot before crawling starts; a busy one is being
            // fetched right now, which is fresher than any record.
            let Ok(mut entry) = slot.try_write() else {
                continue;
            };
            if entry
                .as_ref()
                .is_some_and(|e| e.fetched_at >= record.fetched_at)
            {
                continue;
            }
            *entry = Some(self.entry_of(&record));
        }
    }

    /// The records fetched since the last call (unavailable ones included), for
    /// the engine to persist.
    pub fn take_new_records(&self) -> Vec<RobotsRecord> {
        self.take_new().0
    }

    /// [`RobotsCache::take_new_records`], with the HTTP exchanges of those
    /// fetches when the fetcher captures them (for the WARC archive).
    pub fn take_new(&self) -> (Vec<RobotsRecord>, Vec<Exchange>) {
        let new = std::mem::take(&mut *self.lock_records());
        (new.records, new.exchanges)
    }

    /// HTTP requests made for robots.txt so far, redirect hops included.
    pub fn fetches(&self) -> u64 {
        self.inner.fetches.load(Ordering::Relaxed)
    }

    fn now(&self) -> u64 {
        (self.inner.settings.now)()
    }

    fn lock_records(&self) -> std::sync::MutexGuard<'_, NewRecords> {
        self.inner
            .new_records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, origin: &str) -> Slot {
        let mut origins = self
            .inner
            .origins
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(origins.entry(origin.to_owned()).or_default())
    }

    /// The verdict of an entry that has not expired, else `None`.
    fn fresh_verdict(&self, entry: Option<&Entry>, url: &Url) -> Option<Verdict> {
        let entry = entry?;
        let now = self.now();
        if entry.expires_at <= now {
            return None;
        }
        let verdict = match &entry.robots {
            None => Verdict::Unavailable {
                retry_after: Duration::from_secs(entry.expires_at - now),
                unreachable: entry.unreachable.clone(),
            },
            Some(robots) if robots.allowed(url) => Verdict::Allowed {
                crawl_delay: robots
                    .crawl_delay()
                    .map(|delay| delay.min(self.inner.settings.max_crawl_delay)),
            },
            Some(_) => Verdict::Disallowed,
        };
        Some(verdict)
    }

    /// The entry a record stands for: parsed rules, allow-all or unavailable.
    fn entry_of(&self, record: &RobotsRecord) -> Entry {
        let settings = &self.inner.settings;
        let (robots, hold) = match record.status {
            _ if !record.is_available() => (None, ceil_secs(settings.unavailable_retry)),
            200..=299 => (
                Some(Robots::parse(&record.body, &settings.agent)),
                settings.ttl.as_secs(),
            ),
            _ => (Some(Robots::allow_all()), settings.ttl.as_secs()),
        };
        Entry {
            robots: robots.map(Arc::new),
            expires_at: record.fetched_at.saturating_add(hold),
            fetched_at: record.fetched_at,
            unreachable: None,
        }
    }

    /// Fetches `origin`'s robots.txt, following up to [`MAX_REDIRECTS`]
    /// redirects (relative or to other hosts), into a record; with it, the
    /// fetcher's message when no connection could be made.
    async fn fetch_record(&self, origin: &str) -> (RobotsRecord, Option<String>, Vec<Exchange>) {
        let mut exchanges = Vec::new();
        let (status, body, unreachable) = self.fetch_following(origin, &mut exchanges).await;
        let record = RobotsRecord {
            origin: origin.to_owned(),
            fetched_at: self.now(),
            status,
            body,
        };
        (record, unreachable, exchanges)
    }

    /// The final status and (2xx) body of `origin`'s robots.txt; status 0 when
    /// no response came (with the connection error, when that was why). A
    /// redirect loop ends at once with the 3xx: robots.txt is then unavailable,
    /// like a server error. The exchanges of the hops go to `exchanges`.
    async fn fetch_following(
        &self,
        origin: &str,
        exchanges: &mut Vec<Exchange>,
    ) -> (u16, Vec<u8>, Option<String>) {
        let Ok(mut url) = Url::parse(&format!("{origin}/robots.txt")) else {
            return (0, Vec::new(), None);
        };
        let mut visited = Vec::new();
        for hop in 0..=MAX_REDIRECTS {
            self.inner.fetches.fetch_add(1, Ordering::Relaxed);
            let fetched = self
                .inner
                .fetcher
                .fetch_captured(&Request::get(url.as_str()))
                .await;
            let response = match fetched {
                Ok((response, exchange)) => {
                    exchanges.extend(exchange);
                    response
                }
                Err(error) => {
                    debug!(%url, %error, "robots.txt unreachable");
                    let unreachable =
                        matches!(error, FetchError::Connect { .. }).then(|| error.to_string());
                    return (0, Vec::new(), unreachable);
                }
            };
            let status = response.status;
            if !(300..=399).contains(&status) {
                debug!(%url, status, "robots.txt fetched");
                let body = if (200..=299).contains(&status) {
                    let end = response.body.len().min(MAX_ROBOTS_BYTES);
                    response.body[..end].to_vec()
                } else {
                    Vec::new()
                };
                return (status, body, None);
            }
            let next = response
                .headers
                .get(LOCATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|location| url.join(location).ok())
                .filter(|next| matches!(next.scheme(), "http" | "https"));
            visited.push(url.clone());
            match next {
                Some(next) if visited.contains(&next) => {
                    debug!(%url, %next, status, "robots.txt redirects in a loop");
                    return (status, Vec::new(), None);
                }
                Some(next) if hop < MAX_REDIRECTS => url = next,
                _ => {
                    debug!(%url, status, hop, "robots.txt redirect not followed");
                    return (status, Vec::new(), None);
                }
            }
        }
        (0, Vec::new(), None)
    }
}

/// What the fetches since the last [`RobotsCache::take_new`] produced.
#[derive(Default)]
struct NewRecords {
    records: Vec<RobotsRecord>,
    exchanges: Vec<Exchange>,
}

/// `scheme://host:port` of an http(s) URL with a host.
fn origin_of(url: &Url) -> Option<String> {
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    Some(format!("{}://{host}:{port}", url.scheme()))
}

fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let origin = |s: &str| origin_of(&Url::parse(s).unwrap());
        assert_eq!(
            origin("http://E.com/a?b").as_deref(),
            Some("http://e.com:80")
        );
        assert_eq!(
            origin("https://e.com:8443/").as_deref(),
            Some("https://e.com:8443")
        );
        assert_eq!(
            origin("http://[::1]:81/").as_deref(),
            Some("http://[::1]:81")
        );
        assert_eq!(origin("ftp://e.com/"), None);
        assert_eq!(origin("data:text/plain,x"), None);
    }

    #[test]
    fn availability_of_records() {
        let record = |status| RobotsRecord {
            origin: "http://e.com:80".into(),
            fetched_at: 0,
            status,
            body: Vec::new(),
        };
        for (status, available) in [
            (200, true),
            (204, true),
            (404, true),
            (403, true),
            (429, false),
            (500, false),
            (503, false),
            (0, false),
            (301, false),
        ] {
            assert_eq!(record(status).is_available(), available, "{status}");
        }
    }

    #[test]
    fn settings_follow_the_config() {
        let config = CrawlConfig {
            robots_ttl: Duration::from_secs(5),
            max_crawl_delay: Duration::from_secs(2),
            ..CrawlConfig::default()
        };
        let settings = RobotsSettings::from_config(&config);
        assert_eq!(settings.ttl, Duration::from_secs(5));
        assert_eq!(settings.max_crawl_delay, Duration::from_secs(2));
        assert_eq!(settings.agent, config.user_agent);
        assert_eq!(ceil_secs(Duration::from_millis(1500)), 2);
    }
}
