//! How a crawl reaches its sites: `proxy`, `cacert`, `cookies` and
//! `[hosts."HOST"]`.
//!
//! ```toml
//! proxy = "http://user:password@proxy.example:3128"   # or "none"; absent: the environment
//! cacert = "company-ca.pem"                           # CAs trusted besides the built-in and system roots
//! cookies = true                                      # keep Set-Cookie cookies across runs
//! [hosts."intranet.example"]                          # that host on ports 80 (http) and 443 (https)
//! headers = { "X-Team" = "docs" }
//! user = "crawler"
//! password_env = "INTRANET_PASSWORD"                  # the variable's name, never its value
//! [hosts."127.0.0.1:8080"]                            # that host on port 8080 only
//! ```
//! Reading ([`HostSection`], [`check`], [`apply`]) and writing back into a job
//! ([`render_top`], [`render_hosts`]; the `cacert` path absolute, like every
//! path of a job). The `cacert` file is read when a run starts (see
//! [`crate::fetch`]), not here: a stored job still reads when the file is gone. Depends on [`crate::config`] and [`crate::fetch::proxy`] (the
//! proxy URL check).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::{Table, Value};

use crate::config::{CrawlConfig, HostRule, ProxyChoice};

/// The `proxy` value that turns proxies off (what `--no-proxy` stores).
pub const NO_PROXY: &str = "none";

/// One `[hosts."HOST"]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct HostSection {
    headers: BTreeMap<String, String>,
    user: Option<String>,
    password_env: Option<String>,
}

/// The [`ProxyChoice`] a `proxy` value means.
pub fn proxy_choice(value: &str) -> Result<ProxyChoice, String> {
    if value == NO_PROXY {
        return Ok(ProxyChoice::Off);
    }
    crate::fetch::proxy::check_proxy_url(value)?;
    Ok(ProxyChoice::Url(value.to_owned()))
}

/// The top-level access keys of a crawl file.
pub(super) struct Access {
    /// `proxy`.
    pub(super) proxy: Option<String>,
    /// `cacert`.
    pub(super) cacert: Option<PathBuf>,
    /// `cookies`.
    pub(super) cookies: Option<bool>,
    /// `[hosts."HOST"]`.
    pub(super) hosts: BTreeMap<String, HostSection>,
}

/// What is wrong with the access settings, as (dotted key, message).
pub(super) fn check(
    proxy: Option<&String>,
    cacert: Option<&PathBuf>,
    hosts: &BTreeMap<String, HostSection>,
) -> Option<(String, String)> {
    if let Some(Err(message)) = proxy.map(|p| proxy_choice(p)) {
        return Some(("proxy".into(), message));
    }
    if cacert.is_some_and(|path| path.as_os_str().is_empty()) {
        return Some(("cacert".into(), "names no file".into()));
    }
    for (host, section) in hosts {
        let key = |name: &str| format!("hosts.{host}.{name}");
        if let Err(message) = HostRule::parse_key(host) {
            return Some((format!("hosts.{host}"), message));
        }
        for (name, value) in &section.headers {
            let path = key(&format!("headers.{name}"));
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Some((path, format!("{name:?} is not a header name")));
            }
            if http::HeaderValue::from_str(value).is_err() {
                return Some((path, format!("the value of {name} is not a header value")));
            }
        }
        match (&section.user, &section.password_env) {
            (None, Some(_)) => {
                return Some((key("password_env"), "needs a user".into()));
            }
            (_, Some(var)) if var.is_empty() || var.contains(['=', '\0']) => {
                return Some((
                    key("password_env"),
                    format!("{var:?} is not an environment variable name"),
                ));
            }
            (Some(user), _) if user.contains(':') || http::HeaderValue::from_str(user).is_err() => {
                return Some((
                    key("user"),
                    "a user name cannot hold ':' or control characters".into(),
                ));
            }
            _ => {}
        }
    }
    None
}

/// Writes the given settings into `config` (after [`check`]).
pub(super) fn apply(config: &mut CrawlConfig, access: Access) {
    if let Some(choice) = access.proxy.and_then(|p| proxy_choice(&p).ok()) {
        config.proxy = choice;
    }
    if let Some(cacert) = access.cacert {
        config.cacert = Some(cacert);
    }
    if let Some(cookies) = access.cookies {
        config.cookies = cookies;
    }
    if !access.hosts.is_empty() {
        config.hosts = access
            .hosts
            .into_iter()
            .filter_map(|(key, section)| {
                let (host, port) = HostRule::parse_key(&key).ok()?;
                Some(HostRule {
                    host,
                    port,
                    headers: section.headers.into_iter().collect(),
                    user: section.user,
                    password_env: section.password_env,
                })
            })
            .collect();
    }
}

/// The top-level keys of a job: `proxy` unless it is the environment's,
/// `cacert` when set, `cookies` when off.
pub(super) fn render_top(config: &CrawlConfig, root: &mut Table) {
    match &config.proxy {
        ProxyChoice::Environment => {}
        ProxyChoice::Off => {
            root.insert("proxy".into(), Value::String(NO_PROXY.into()));
        }
        ProxyChoice::Url(url) => {
            root.insert("proxy".into(), Value::String(url.clone()));
        }
    }
    if let Some(cacert) = &config.cacert {
        root.insert("cacert".into(), super::render::path_value(cacert));
    }
    // Written only when off, like `proxy` only when set: a job stored before
    // these settings existed reads the same, and prints no change line.
    if !config.cookies {
        root.insert("cookies".into(), Value::Boolean(false));
    }
}

/// The `[hosts]` table of a job, when it has host rules.
pub(super) fn render_hosts(config: &CrawlConfig, root: &mut Table) {
    if config.hosts.is_empty() {
        return;
    }
    let mut hosts = Table::new();
    for rule in &config.hosts {
        let mut table = Table::new();
        if !rule.headers.is_empty() {
            let headers = rule
                .headers
                .iter()
                .map(|(name, value)| (name.clone(), Value::String(value.clone())))
                .collect();
            table.insert("headers".into(), Value::Table(headers));
        }
        if let Some(user) = &rule.user {
            table.insert("user".into(), Value::String(user.clone()));
        }
        if let Some(var) = &rule.password_env {
            table.insert("password_env".into(), Value::String(var.clone()));
        }
        hosts.insert(rule.key(), Value::Table(table));
    }
    root.insert("hosts".into(), Value::Table(hosts));
}

#[cfg(test)]
mod tests {
    use crate::crawlfile::{CrawlFileError, parse};

    fn error(text: &str) -> String {
        match parse(text, "c.toml".as_ref()) {
            Err(e @ CrawlFileError::Invalid { .. }) => e.to_string(),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn bad_access_settings_name_their_key_and_hide_the_password() {
        let e = error("proxy = \"socks5://u:hidden@p:1\"\n");
        assert!(e.contains("proxy:") && !e.contains("hidden"), "{e}");
        let e = error("[hosts.\"http://a.example:8080\"]\nuser = \"u\"\n");
        assert!(e.contains("HOST:PORT"), "{e}");
        let e = error("[hosts.\"a.example:0\"]\nuser = \"u\"\n");
        assert!(e.contains("1 to 65535"), "{e}");
        let e = error("cacert = \"\"\n");
        assert!(e.contains("cacert: names no file"), "{e}");
        let e = error("[hosts.\"a.example\"]\npassword_env = \"PW\"\n");
        assert!(e.contains("needs a user"), "{e}");
        let e = error("[hosts.\"a.example\"]\npassword = \"x\"\n");
        assert!(e.contains("password"), "{e}");
        let ok = parse("proxy = \"none\"\n", "c.toml".as_ref()).expect("parses");
        assert_eq!(ok.config.proxy, crate::config::ProxyChoice::Off);
    }

    #[test]
    fn cacert_and_origins_are_written_back_as_given() {
        let text = "seeds = [\"https://a.example/\"]\ncacert = \"certs/ca.pem\"\n\
                    [hosts.\"A.example:8443\"]\nuser = \"u\"\n[hosts.\"b.example\"]\nuser = \"v\"\n";
        let file = parse(text, "c.toml".as_ref()).expect("parses");
        assert_eq!(file.config.cacert.as_deref(), Some("certs/ca.pem".as_ref()));
        let origins: Vec<_> = file
            .config
            .hosts
            .iter()
            .map(|r| (r.host.as_str(), r.port))
            .collect();
        assert_eq!(origins, [("a.example", Some(8443)), ("b.example", None)]);
        let job = crate::crawlfile::job_text(&file.config, None, &[]);
        let again = parse(&job, "job".as_ref()).expect("the job reads back");
        let absolute = std::path::absolute("certs/ca.pem").expect("an absolute path");
        assert_eq!(again.config.cacert, Some(absolute));
        assert_eq!(again.config.hosts, file.config.hosts);
        assert!(job.contains("[hosts.\"a.example:8443\"]"), "{job}");
    }
}
