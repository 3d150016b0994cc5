//! Where a shared crawl lives ([`SharedTarget`]): the Redis URL, the crawl's
//! name and the TLS files, checked when the target is made, so a bad one is
//! bad input before any connection. The configuration holds it; the Redis
//! frontier ([`crate::shared`]) connects to it.
//!
//! The password: in the URL (`redis://:PASSWORD@HOST:PORT/DB`, or
//! `redis://USER:PASSWORD@…` for an ACL user), or, when the URL has none, in
//! the environment variable `REDISCLI_AUTH` ([`PASSWORD_VAR`], redis-cli's
//! convention), which keeps it out of the command line and the process list.
//! It is never shown: every message, log line, hint and `dump` line shows the
//! URL through [`SharedTarget::shown`] (`redis://USER:***@HOST:PORT/DB`), and
//! what the server or client says is passed through [`SharedTarget::scrub`].
//!
//! TLS: a `rediss://` URL is spoken through rustls. The server's certificate
//! must be signed by the CA given with `--shared-cacert FILE` (crawl file
//! `[shared] cacert`), else by one of the system's roots. Depends on `url`
//! only.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable the password comes from when the URL has none
/// (as for `redis-cli`).
pub const PASSWORD_VAR: &str = "REDISCLI_AUTH";

/// Where a shared crawl lives. Its `Debug` form shows the URL redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct SharedTarget {
    /// The Redis URL (`redis://HOST:PORT/DB`) as given: it may hold the
    /// password, so it is never shown; show [`SharedTarget::shown`] instead.
    pub redis: String,
    /// The crawl's name: its keys start with `legcrawl:{NAME}:`.
    pub name: String,
    /// The CA certificate file of a `rediss://` server (`--shared-cacert`).
    pub cacert: Option<PathBuf>,
    /// Its certificates (PEM), read by [`SharedTarget::with_cacert`].
    ca_pem: Option<Vec<u8>>,
    /// The client certificate file shown to a `rediss://` server that asks
    /// for one (mutual TLS: `--shared-cert`); its key is `--shared-key`.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key file (`--shared-key`).
    pub client_key: Option<PathBuf>,
    /// The client certificate and key (PEM), read by
    /// [`SharedTarget::with_client_cert`].
    client_pem: Option<(Vec<u8>, Vec<u8>)>,
}

/// How long a lease lasts unless renewed (renewed every third of it while the
/// fetch runs).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(60);

impl SharedTarget {
    /// Checks the URL's scheme and the name's characters (letters, digits,
    /// `.`, `_`, `-`; at most 64), so that every key of the crawl carries one
    /// hash tag and nothing in the name can break the key layout.
    pub fn new(redis: &str, name: &str) -> Result<SharedTarget, String> {
        let shown = redact(redis);
        let url = url::Url::parse(redis).map_err(|e| {
            format!("--shared {shown:?} is not a URL ({e}); expected redis://HOST:PORT/DB")
        })?;
        if !matches!(url.scheme(), "redis" | "rediss" | "redis+unix" | "unix") {
            return Err(format!(
                "--shared {shown:?} is not a Redis URL; expected redis://HOST:PORT/DB"
            ));
        }
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if name.is_empty() || name.len() > 64 || !name.chars().all(ok) {
            return Err(format!(
                "--name {name:?}: a shared crawl's name is 1 to 64 letters, digits, '.', '_' or '-'"
            ));
        }
        Ok(SharedTarget {
            redis: redis.to_owned(),
            name: name.to_owned(),
            cacert: None,
            ca_pem: None,
            client_cert: None,
            client_key: None,
            client_pem: None,
        })
    }

    /// The target with the server's CA read from `path` (PEM; `None`: the
    /// system's roots). The error, one line, says why the file cannot be
    /// used: unreadable, no PEM certificate in it, or a URL that is not
    /// `rediss://`.
    pub fn with_cacert(mut self, path: Option<&Path>) -> Result<SharedTarget, String> {
        let Some(path) = path else {
            self.cacert = None;
            self.ca_pem = None;
            return Ok(self);
        };
        let shown = path.display();
        if !self.redis.starts_with("rediss://") {
            return Err(format!(
                "the Redis CA certificate {shown} is for a TLS server: the URL must start with rediss://, not {}",
                self.shown()
            ));
        }
        let pem = read_pem(path, "CA certificate", CERTIFICATE_PEM)?;
        self.cacert = Some(path.to_owned());
        self.ca_pem = Some(pem);
        Ok(self)
    }

    /// The CA certificates (PEM) given with [`SharedTarget::with_cacert`].
    pub(crate) fn ca_pem(&self) -> Option<&[u8]> {
        self.ca_pem.as_deref()
    }

    /// The target with a client certificate and its key read from `cert`
    /// and `key` (PEM), for a `rediss://` server that asks clients for one
    /// (mutual TLS). Both or neither; the error, one line, says which file
    /// is missing, unreadable or not PEM, or that the URL is not `rediss://`.
    /// The key's contents are never shown.
    pub fn with_client_cert(
        mut self,
        cert: Option<&Path>,
        key: Option<&Path>,
    ) -> Result<SharedTarget, String> {
        let (cert, key) = match (cert, key) {
            (None, None) => {
                (self.client_cert, self.client_key, self.client_pem) = (None, None, None);
                return Ok(self);
            }
            (Some(cert), Some(key)) => (cert, key),
            (Some(_), None) => {
                return Err("a Redis client certificate needs its private key too (--shared-key FILE, crawl file [shared] key)".into());
            }
            (None, Some(_)) => {
                return Err("a Redis client key needs its certificate too (--shared-cert FILE, crawl file [shared] cert)".into());
            }
        };
        if !self.redis.starts_with("rediss://") {
            return Err(format!(
                "the Redis client certificate {} is for a TLS server: the URL must start with rediss://, not {}",
                cert.display(),
                self.shown()
            ));
        }
        let cert_pem = read_pem(cert, "client certificate", CERTIFICATE_PEM)?;
        let key_pem = read_pem(key, "client key", "PRIVATE KEY-----")?;
        self.client_cert = Some(cert.to_owned());
        self.client_key = Some(key.to_owned());
        self.client_pem = Some((cert_pem, key_pem));
        Ok(self)
    }

    /// The client certificate and key (PEM) given with
    /// [`SharedTarget::with_client_cert`].
    pub(crate) fn client_pem(&self) -> Option<(&[u8], &[u8])> {
        self.client_pem
            .as_ref()
            .map(|(cert, key)| (cert.as_slice(), key.as_slice()))
    }
}

/// The line that opens a PEM certificate.
const CERTIFICATE_PEM: &str = "-----BEGIN CERTIFICATE-----";

/// The PEM file `path` (a Redis TLS file, `what`), which must hold `marker`;
/// the error, one line, names the file and never shows its contents.
fn read_pem(path: &Path, what: &str, marker: &str) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let pem =
        std::fs::read(path).map_err(|e| format!("the Redis {what} {shown} cannot be read: {e}"))?;
    if !pem.windows(marker.len()).any(|w| w == marker.as_bytes()) {
        return Err(format!("the Redis {what} {shown} is not PEM (no {marker})"));
    }
    Ok(pem)
}

impl SharedTarget {
    /// The URL as it may be shown: any password replaced by `***`
    /// (`redis://USER:***@HOST:PORT/DB`).
    pub fn shown(&self) -> String {
        redact(&self.redis)
    }

    /// The password from [`PASSWORD_VAR`], if it is set, not empty, and the
    /// URL has none of its own.
    fn env_password(&self) -> Option<String> {
        if url_password(&self.redis).is_some() {
            return None;
        }
        std::env::var(PASSWORD_VAR).ok().filter(|p| !p.is_empty())
    }

    /// How to connect: the URL's settings, with the password from
    /// [`PASSWORD_VAR`] when the URL has none. The error is the client's
    /// reason, scrubbed.
    pub(crate) fn connection_info(&self) -> Result<redis::ConnectionInfo, String> {
        use redis::IntoConnectionInfo;
        let info = self
            .redis
            .as_str()
            .into_connection_info()
            .map_err(|e| self.scrub(&e.to_string()))?;
        Ok(match self.env_password() {
            Some(password) => {
                let settings = info.redis_settings().clone().set_password(password);
                info.set_redis_settings(settings)
            }
            None => info,
        })
    }

    /// `text` (an error the server or client gave) with the URL shown
    /// redacted and every form of the password replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.replace(&self.redis, &self.shown());
        let mut secrets: Vec<String> = Vec::new();
        if let Some(raw) = url_password(&self.redis) {
            // The password as the client decodes it from the URL.
            use redis::IntoConnectionInfo;
            if let Ok(info) = self.redis.as_str().into_connection_info() {
                secrets.extend(info.redis_settings().password().map(str::to_owned));
            }
            secrets.push(raw);
        }
        secrets.extend(self.env_password());
        for secret in secrets.iter().filter(|s| !s.is_empty()) {
            out = out.replace(secret.as_str(), "***");
        }
        out
    }
}

impl std::fmt::Debug for SharedTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTarget")
            .field("redis", &self.shown())
            .field("name", &self.name)
            .field("cacert", &self.cacert)
            .field("client_cert", &self.client_cert)
            .finish()
    }
}

/// The password written in a Redis URL (still percent-encoded): the userinfo
/// after its `:`, or a `pass`/`password` query argument (unix sockets).
fn url_password(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    if let Some(password) = parsed.password().filter(|p| !p.is_empty()) {
        return Some(password.to_owned());
    }
    parsed
        .query_pairs()
        .find(|(k, v)| matches!(k.as_ref(), "pass" | "password") && !v.is_empty())
        .map(|(_, v)| v.into_owned())
}

/// `url` with its password replaced by `***`: the userinfo's part after `:`
/// and `pass`/`password` query arguments. Text that is not a URL but holds an
/// `@` shows nothing before its last `@`.
fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return match url.rfind('@') {
            Some(at) => format!("***{}", &url[at..]),
            None => url.to_owned(),
        };
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let mut out = match rest[..authority_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or("");
            let colon = if rest[..at].contains(':') { ":***" } else { "" };
            format!("{}{user}{colon}{}", &url[..scheme_end], &rest[at..])
        }
        None => url.to_owned(),
    };
    if let Some(query_start) = out.find('?') {
        let (head, query) = out.split_at(query_start + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if matches!(k, "pass" | "password") => format!("{k}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_checked() {
        assert!(SharedTarget::new("redis://127.0.0.1:6379/0", "docs-1.x_y").is_ok());
        let bad_url = SharedTarget::new("127.0.0.1:6379", "docs").unwrap_err();
        assert!(bad_url.contains("--shared"), "{bad_url}");
        let http = SharedTarget::new("http://127.0.0.1/", "docs").unwrap_err();
        assert!(http.contains("not a Redis URL"), "{http}");
        for name in ["", "a{b}", "with space", &"x".repeat(65)] {
            let error = SharedTarget::new("redis://127.0.0.1/", name).unwrap_err();
            assert!(error.contains("--name"), "{error}");
        }
    }

    #[test]
    fn a_ca_file_is_read_when_the_target_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let (pem, junk) = (dir.path().join("ca.pem"), dir.path().join("junk.pem"));
        std::fs::write(
            &pem,
            "-----BEGIN CERTIFICATE-----\nMII=\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        std::fs::write(&junk, "not a certificate").unwrap();
        let tls = SharedTarget::new("rediss://127.0.0.1:6380/0", "docs").unwrap();
        let with = tls.clone().with_cacert(Some(&pem)).unwrap();
        assert_eq!(with.cacert.as_deref(), Some(pem.as_path()));
        assert!(with.ca_pem().is_some_and(|p| p.starts_with(b"-----BEGIN")));
        assert!(tls.clone().with_cacert(None).unwrap().ca_pem().is_none());
        let missing = tls
            .clone()
            .with_cacert(Some(&dir.path().join("none.pem")))
            .unwrap_err();
        assert!(
            missing.contains("none.pem") && missing.contains("cannot be read"),
            "{missing}"
        );
        let not_pem = tls.with_cacert(Some(&junk)).unwrap_err();
        assert!(
            not_pem.contains("not PEM (no -----BEGIN CERTIFICATE-----)"),
            "{not_pem}"
        );
        let plain = SharedTarget::new("redis://:pw@127.0.0.1:6379/0", "docs").unwrap();
        let error = plain.with_cacert(Some(&pem)).unwrap_err();
        assert!(
            error.contains("rediss://") && !error.contains("pw@"),
            "{error}"
        );
    }

    #[test]
    fn passwords_are_never_shown() {
        for (url, shown) in [
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            ("redis://:s3cret@h:1/0", "redis://:***@h:1/0"),
            ("redis://user:s3cret@h:1/2", "redis://user:***@h:1/2"),
            ("redis://user@h:1/2", "redis://user@h:1/2"),
            ("redis://u:p%40ss@h/0", "redis://u:***@h/0"),
            (
                "redis+unix:///tmp/r.sock?db=1&pass=s3cret",
                "redis+unix:///tmp/r.sock?db=1&pass=***",
            ),
            ("x:s3cret@h", "***@h"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
        let target = SharedTarget::new("redis://user:p%40ss@h:1/0", "n").unwrap();
        let debug = format!("{target:?}");
        assert!(!debug.contains("p%40ss"), "{debug}");
        let said = target.scrub("failed on redis://user:p%40ss@h:1/0 with p@ss");
        assert!(!said.contains("p%40ss") && !said.contains("p@ss"), "{said}");
        let bad = SharedTarget::new("redis//:s3cret@h", "n").unwrap_err();
        assert!(!bad.contains("s3cret"), "{bad}");
    }
}
