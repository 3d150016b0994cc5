//! Per-origin headers and HTTP Basic credentials (`[hosts."intranet.example"]`,
//! `[hosts."127.0.0.1:8080"]`).
//!
//! A [`HostRule`] applies to one origin and to nothing else: its exact host,
//! on its port — a rule without a port on the scheme's default port only (80
//! for http, 443 for https) — so another service on another port of the same
//! host, and its robots.txt, never get the credentials. Not subdomains, and
//! not another origin a redirect leads to (the engine and `legcrawl fetch`
//! follow a redirect as a new request, whose origin is looked up again here).
//! The Basic password is read from the environment variable the rule names
//! when the fetcher is built, at run start; a missing variable is an error
//! then, before anything is fetched. Header values and the password are
//! marked sensitive and never logged.
//!
//! Depends on [`crate::config`] and `error`.

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

use super::error::FetchError;
use crate::config::HostRule;

/// The headers one origin gets, validated once.
#[derive(Clone)]
pub struct HostHeaders {
    host: String,
    /// `None`: the scheme's default port.
    port: Option<u16>,
    headers: HeaderMap,
}

/// Why a host rule cannot be used: one line naming the origin and the
/// setting, never a value.
pub fn rule_error(rule: &HostRule) -> Option<String> {
    let at = |key: &str| format!("hosts.{:?}.{key}", rule.key());
    match (&rule.user, &rule.password_env) {
        (None, Some(_)) => return Some(format!("{}: password_env needs a user", at("user"))),
        (_, Some(var)) if std::env::var_os(var).is_none() => {
            return Some(format!(
                "{}: the environment variable {var} is not set (it holds the password of {})",
                at("password_env"),
                rule.key()
            ));
        }
        _ => {}
    }
    None
}

/// Builds the table, reading each password from its environment variable.
pub fn build(rules: &[HostRule]) -> Result<Vec<HostHeaders>, FetchError> {
    let invalid = |reason: String| FetchError::InvalidSetting {
        name: "hosts".into(),
        reason,
    };
    let mut table = Vec::with_capacity(rules.len());
    for rule in rules {
        let origin = rule.key();
        if let Some(reason) = rule_error(rule) {
            return Err(invalid(reason));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &rule.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("{origin:?}: {name:?} is not a header name")))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                invalid(format!(
                    "{origin:?}: the value of {name} is not a header value"
                ))
            })?;
            value.set_sensitive(true);
            headers.append(name, value);
        }
        if let Some(user) = &rule.user {
            let password = match &rule.password_env {
                Some(var) => std::env::var(var).unwrap_or_default(),
                None => String::new(),
            };
            let token = data_encoding::BASE64.encode(format!("{user}:{password}").as_bytes());
            let mut value = HeaderValue::from_str(&format!("Basic {token}"))
                .map_err(|_| invalid(format!("{origin:?}: the user is not valid in a header")))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        table.push(HostHeaders {
            host: rule.host.to_ascii_lowercase(),
            port: rule.port,
            headers,
        });
    }
    Ok(table)
}

/// Adds the headers of the rule for `url`'s origin (if any) to `headers`,
/// replacing those of the same name.
pub fn apply(table: &[HostHeaders], url: &Url, headers: &mut HeaderMap) {
    let Some(host) = url.host_str() else { return };
    let host = host.trim_end_matches('.');
    let ours = |r: &&HostHeaders| r.host.eq_ignore_ascii_case(host);
    // A rule naming the port wins over one for the default ports; `Url`
    // keeps no port when the URL's is its scheme's default.
    let rule = table
        .iter()
        .filter(ours)
        .find(|r| r.port.is_some() && r.port == url.port_or_known_default())
        .or_else(|| {
            table
                .iter()
                .filter(ours)
                .find(|r| r.port.is_none() && url.port().is_none())
        });
    if let Some(rule) = rule {
        for name in rule.headers.keys() {
            headers.remove(name);
        }
        for (name, value) in &rule.headers {
            headers.append(name, value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The headers `table` gives a request for `url`.
    fn sent(table: &[HostHeaders], url: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        apply(table, &Url::parse(url).expect("a URL"), &mut headers);
        headers
    }

    #[test]
    fn a_rule_applies_to_its_exact_host_only() {
        let rules = [HostRule {
            host: "intranet.example".into(),
            headers: vec![("X-Team".into(), "docs".into())],
            user: Some("ann".into()),
            ..HostRule::default()
        }];
        let table = build(&rules).expect("table");
        assert!(sent(&table, "http://www.intranet.example/").is_empty());
        assert!(sent(&table, "http://other.example/").is_empty());
        let headers = sent(&table, "https://Intranet.Example./x");
        assert_eq!(headers["x-team"], "docs");
        assert_eq!(headers[AUTHORIZATION], "Basic YW5uOg==");
    }

    #[test]
    fn a_rule_applies_to_its_port_only() {
        let rule = |port| HostRule {
            host: "127.0.0.1".into(),
            port,
            user: Some("ann".into()),
            ..HostRule::default()
        };
        // No port: the scheme's default port, and no other.
        let table = build(&[rule(None)]).expect("table");
        for url in [
            "http://127.0.0.1/",
            "http://127.0.0.1:80/",
            "https://127.0.0.1/robots.txt",
        ] {
            assert!(sent(&table, url).contains_key(AUTHORIZATION), "{url}");
        }
        for url in [
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:443/",
            "https://127.0.0.1:80/",
        ] {
            assert!(sent(&table, url).is_empty(), "{url}");
        }
        // A port: that port, whatever the scheme.
        let table = build(&[rule(Some(8080))]).expect("table");
        assert!(sent(&table, "http://127.0.0.1:8080/robots.txt").contains_key(AUTHORIZATION));
        assert!(sent(&table, "https://127.0.0.1:8080/").contains_key(AUTHORIZATION));
        for url in ["http://127.0.0.1/", "http://127.0.0.1:8081/robots.txt"] {
            assert!(sent(&table, url).is_empty(), "{url}");
        }
        let mut both = rule(Some(443));
        both.headers = vec![("X-Port".into(), "443".into())];
        let table = build(&[rule(None), both]).expect("table");
        assert_eq!(sent(&table, "https://127.0.0.1/")["x-port"], "443");
        assert!(!sent(&table, "http://127.0.0.1/").contains_key("x-port"));
    }

    #[test]
    fn a_missing_password_variable_is_named_without_a_value() {
        let rule = HostRule {
            host: "intranet.example".into(),
            user: Some("ann".into()),
            password_env: Some("LEGCRAWL_TEST_SURELY_UNSET_VAR".into()),
            ..HostRule::default()
        };
        let error = rule_error(&rule).expect("an error");
        assert!(error.contains("LEGCRAWL_TEST_SURELY_UNSET_VAR"), "{error}");
        assert!(build(&[rule]).is_err());
    }
}
