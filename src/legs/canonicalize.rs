//! `Canonicalize`: rewrites every request's URL by named canonicalization rules.
//!
//! Dedup already compares canonical forms (see [`crate::fingerprint`]); this leg
//! changes what is *fetched and stored*. Its default keeps only the rules that
//! cannot change what a server returns (RFC 3986 equivalences: unreserved escapes
//! decoded, hex upper-cased, fragment dropped); sorting the query or stripping
//! parameters such as `utm_*` is opt-in. Depends on [`crate::canon`].

use crate::canon::{self, Rules};
use crate::request::Request;
use crate::response::Response;

use super::Leg;

/// Rewrites request URLs with [`canon::canonicalize_with`].
#[derive(Clone, Debug)]
pub struct Canonicalize {
    rules: Rules,
}

impl Default for Canonicalize {
    /// RFC 3986-safe rules: percent-encoding normalized, fragment dropped.
    fn default() -> Canonicalize {
        Canonicalize {
            rules: Rules {
                sort_query: false,
                normalize_percent: true,
                drop_fragment: true,
                strip_query_params: Vec::new(),
            },
        }
    }
}

impl Canonicalize {
    /// A canonicalizer applying exactly `rules`.
    pub fn with_rules(rules: Rules) -> Canonicalize {
        Canonicalize { rules }
    }
}

impl Leg for Canonicalize {
    fn process_request(&self, mut request: Request, _response: &Response) -> Option<Request> {
        // Most links are already canonical; this answers without parsing them.
        if canon::is_canonical(&request.url, &self.rules) {
            return Some(request);
        }
        if let Ok(url) = url::Url::parse(&request.url) {
            let canonical = canon::canonicalize_with(&url, &self.rules);
            if canonical.as_str() != request.url {
                request.url = canonical.into();
            }
        }
        Some(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legs::test_response;

    #[test]
    fn default_rules_are_safe_and_rules_are_opt_in() {
        let response = test_response("http://a.test/", Some("text/html"), &b""[..]);
        let leg = Canonicalize::default();
        let out = leg
            .process_request(
                Request::get("http://a.test/%7Euser/?b=2&a=1#top"),
                &response,
            )
            .unwrap();
        assert_eq!(out.url, "http://a.test/~user/?b=2&a=1");
        let strict = Canonicalize::with_rules(Rules {
            strip_query_params: vec!["utm_*".into()],
            ..Rules::default()
        });
        let out = strict
            .process_request(
                Request::get("http://a.test/?utm_source=x&b=2&a=1"),
                &response,
            )
            .unwrap();
        assert_eq!(out.url, "http://a.test/?a=1&b=2");
    }
}
