//! Per-host headers and HTTP Basic credentials (`[hosts."intranet.example"]`).
//!
//! A [`HostRule`] applies to its exact host, on any port, and to nothing else:
//! not to subdomains, and not to another host a redirect leads to (the engine
//! and `legcrawl fetch` follow a redirect as a new request, whose host is
//! looked up again here). The Basic password is read from the environment
//! variable the rule names when the fetcher is built, at run start; a missing
//! variable is an error then, before anything is fetched. Header values and
//! the password are marked sensitive and never logged.
//!
//! Depends on [`crate::config`] and `error`.

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName, HeaderValue};

use super::error::FetchError;
use crate::config::HostRule;

/// The headers one host gets, validated once.
#[derive(Clone)]
pub struct HostHeaders {
    host: String,
    headers: HeaderMap,
}

/// Why a host rule cannot be used: one line naming the host and the setting,
/// never a value.
pub fn rule_error(rule: &HostRule) -> Option<String> {
    let at = |key: &str| format!("hosts.{:?}.{key}", rule.host);
    match (&rule.user, &rule.password_env) {
        (None, Some(_)) => return Some(format!("{}: password_env needs a user", at("user"))),
        (_, Some(var)) if std::env::var_os(var).is_none() => {
            return Some(format!(
                "{}: the environment variable {var} is not set (it holds the password of {})",
                at("password_env"),
                rule.host
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
        if let Some(reason) = rule_error(rule) {
            return Err(invalid(reason));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &rule.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("{:?}: {name:?} is not a header name", rule.host)))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                invalid(format!(
                    "{:?}: the value of {name} is not a header value",
                    rule.host
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
            let mut value = HeaderValue::from_str(&format!("Basic {token}")).map_err(|_| {
                invalid(format!(
                    "{:?}: the user is not valid in a header",
                    rule.host
                ))
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        table.push(HostHeaders {
            host: rule.host.to_ascii_lowercase(),
            headers,
        });
    }
    Ok(table)
}

/// Adds the headers of `host`'s rule (if any) to `headers`, replacing those of
/// the same name.
pub fn apply(table: &[HostHeaders], host: Option<&str>, headers: &mut HeaderMap) {
    let Some(host) = host else { return };
    let host = host.trim_end_matches('.');
    if let Some(rule) = table.iter().find(|r| r.host.eq_ignore_ascii_case(host)) {
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

    #[test]
    fn a_rule_applies_to_its_exact_host_only() {
        let rules = [HostRule {
            host: "intranet.example".into(),
            headers: vec![("X-Team".into(), "docs".into())],
            user: Some("ann".into()),
            password_env: None,
        }];
        let table = build(&rules).expect("table");
        let mut headers = HeaderMap::new();
        apply(&table, Some("www.intranet.example"), &mut headers);
        apply(&table, Some("other.example"), &mut headers);
        assert!(headers.is_empty());
        apply(&table, Some("Intranet.Example"), &mut headers);
        assert_eq!(headers["x-team"], "docs");
        assert_eq!(headers[AUTHORIZATION], "Basic YW5uOg==");
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
