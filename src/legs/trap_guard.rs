//! [`TrapGuard`]: drops requests whose URL looks like a crawler trap.
//!
//! Calendars, session-id loops and relative-link mistakes generate endless URLs such as
//! `/a/b/a/b/a/b/...` or `?x=1&y=2&...`. This leg is a pure `process_request` filter:
//! a request whose URL trips one of the limits is dropped (the engine counts what legs
//! drop; this leg only decides). Checks, on the URL as written in the request:
//! - **length** in bytes, over `max_url_len`;
//! - **path depth**: non-empty `/`-separated path segments, over `max_path_depth`;
//! - **repeated segments**: the same non-empty segment (compared byte for byte, as
//!   written) occurring more than `max_segment_repeats` times (`/a/b/a/b/a` has `a` ×3);
//! - **query parameters**: non-empty `&`-separated pieces, over `max_query_params`.
//!
//! A limit of `0` turns its check off. A request whose URL does not parse is passed on
//! untouched (the fetcher reports it). Depends on [`crate::legs`] and `url`.

use std::collections::HashMap;

use url::Url;

use super::{Leg, LegError};
use crate::config::CrawlConfig;
use crate::request::Request;
use crate::response::Response;

/// The limits of a [`TrapGuard`]; `0` turns a check off.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrapGuardSettings {
    /// Most non-empty path segments (default 16).
    pub max_path_depth: usize,
    /// Most occurrences of one path segment (default 3).
    pub max_segment_repeats: usize,
    /// Most query parameters (default 32).
    pub max_query_params: usize,
    /// Longest URL in bytes (default 0: the crawl's `max_url_len`, set by `configure`).
    pub max_url_len: usize,
}

impl Default for TrapGuardSettings {
    fn default() -> TrapGuardSettings {
        TrapGuardSettings {
            max_path_depth: 16,
            max_segment_repeats: 3,
            max_query_params: 32,
            max_url_len: 0,
        }
    }
}

/// Drops requests that trip one of its [`TrapGuardSettings`] limits.
///
/// ```
/// use legcrawl::legs::{Leg, TrapGuard, TrapGuardSettings};
/// use legcrawl::request::Request;
///
/// let guard = TrapGuard::new(TrapGuardSettings {
///     max_segment_repeats: 2,
///     ..TrapGuardSettings::default()
/// })
/// .unwrap();
/// assert!(guard.trips("http://e.test/a/b/a/b/a"));
/// assert!(!guard.trips("http://e.test/a/b/a/b"));
/// ```
#[derive(Clone, Debug)]
pub struct TrapGuard {
    settings: TrapGuardSettings,
}

impl TrapGuard {
    /// A guard with these limits (every value is valid; the `Result` is for symmetry
    /// with the other legs' constructors).
    pub fn new(settings: TrapGuardSettings) -> Result<TrapGuard, LegError> {
        Ok(TrapGuard { settings })
    }

    /// The limits in force.
    pub fn settings(&self) -> &TrapGuardSettings {
        &self.settings
    }

    /// True when `url` trips a limit (and would be dropped).
    pub fn trips(&self, url: &str) -> bool {
        let s = &self.settings;
        if s.max_url_len > 0 && url.len() > s.max_url_len {
            return true;
        }
        let Ok(parsed) = Url::parse(url) else {
            return false;
        };
        let segments: Vec<&str> = parsed
            .path_segments()
            .map(|segments| segments.filter(|seg| !seg.is_empty()).collect())
            .unwrap_or_default();
        if s.max_path_depth > 0 && segments.len() > s.max_path_depth {
            return true;
        }
        if s.max_segment_repeats > 0 && most_repeats(&segments) > s.max_segment_repeats {
            return true;
        }
        let params = parsed
            .query()
            .map_or(0, |q| q.split('&').filter(|p| !p.is_empty()).count());
        s.max_query_params > 0 && params > s.max_query_params
    }
}

/// The largest number of times one segment occurs.
fn most_repeats(segments: &[&str]) -> usize {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut most = 0;
    for segment in segments {
        let count = counts.entry(segment).or_default();
        *count += 1;
        most = most.max(*count);
    }
    most
}

impl Leg for TrapGuard {
    /// Takes the crawl's `max_url_len` when the settings leave it at 0.
    fn configure(&mut self, config: &CrawlConfig) -> Result<(), LegError> {
        if self.settings.max_url_len == 0 {
            self.settings.max_url_len = config.max_url_len;
        }
        Ok(())
    }

    fn process_request(&self, request: Request, _response: &Response) -> Option<Request> {
        if self.trips(&request.url) {
            tracing::debug!(url = %request.url, "trap guard dropped a request");
            None
        } else {
            Some(request)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legs::test_response;

    fn guard(settings: TrapGuardSettings) -> TrapGuard {
        TrapGuard::new(settings).unwrap()
    }

    #[test]
    fn each_limit_trips_just_past_its_value() {
        let g = guard(TrapGuardSettings {
            max_path_depth: 3,
            max_segment_repeats: 2,
            max_query_params: 2,
            max_url_len: 40,
        });
        assert!(!g.trips("http://e.test/a/b/c"));
        assert!(g.trips("http://e.test/a/b/c/d"));
        assert!(
            !g.trips("http://e.test/a//b/"),
            "empty segments do not count"
        );
        assert!(!g.trips("http://e.test/a/b/a"));
        assert!(g.trips("http://e.test/a/a/a"));
        assert!(!g.trips("http://e.test/?a=1&b=2&&"));
        assert!(g.trips("http://e.test/?a=1&b=2&c"));
        assert!(g.trips("http://e.test/0123456789012345678901234567"));
    }

    #[test]
    fn zero_turns_a_check_off_and_configure_fills_the_url_limit() {
        let mut g = guard(TrapGuardSettings {
            max_path_depth: 0,
            max_segment_repeats: 0,
            max_query_params: 0,
            max_url_len: 0,
        });
        let deep = format!("http://e.test/{}?{}", "a/".repeat(100), "x&".repeat(100));
        assert!(!g.trips(&deep));
        let config = CrawlConfig {
            max_url_len: 30,
            ..CrawlConfig::default()
        };
        g.configure(&config).unwrap();
        assert!(g.trips(&deep));
    }

    #[test]
    fn drops_only_tripping_requests_and_passes_unparsable_ones() {
        let g = guard(TrapGuardSettings::default());
        let response = test_response("http://e.test/", Some("text/html"), "");
        let trap = format!("http://e.test/{}", "cal/".repeat(4));
        assert!(g.process_request(Request::get(trap), &response).is_none());
        let fine = Request::get("http://e.test/docs/intro");
        assert!(g.process_request(fine, &response).is_some());
        let odd = Request::get("not a url");
        assert!(g.process_request(odd, &response).is_some());
    }

    #[test]
    fn settings_reject_unknown_keys() {
        let error = serde_json::from_str::<TrapGuardSettings>(r#"{"max_depth": 2}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `max_depth`"), "{error}");
    }
}
