//! The hyper fetcher: one HTTP exchange per [`crate::request::Request`].
//!
//! [`Fetcher`] owns one pooled hyper-util client (HTTP/1.1 and HTTP/2, http and
//! https through rustls, certificates verified against the roots `trust`
//! gathers) and turns a
//! request into a [`crate::response::Response`] or a [`FetchError`]. It follows no
//! redirects (a 3xx is a response; the engine decides), decodes gzip, br and
//! deflate bodies, and bounds every fetch: `request_timeout` for the whole
//! exchange, `read_timeout` for each wait on the body, `max_body_bytes` for the
//! decoded body (longer bodies are cut and flagged `truncated`, so a compression
//! bomb costs bounded memory and time). It never sends the `user:pass@` of a
//! URL. Errors say what went wrong: which step of connecting failed
//! ([`ConnectKind`]: DNS, refused, TLS), what was malformed in a response, why a
//! body could not be decoded.
//!
//! Depends on [`crate::request`], [`crate::response`] and [`crate::config`] only.
//! Invariants: an HTTP status is never an error; when a body was read to its end
//! and the response declared `Content-Length`, the raw bytes received equal it or
//! the fetch fails with [`FetchError::LengthMismatch`].
//!
//! - `client`: the [`Fetcher`], request building and the exchange.
//! - `body`: reading, decoding and limiting one body.
//! - `classify`: hyper's errors as [`FetchError`]s (which step failed, why).
//! - `capture`: the [`Exchange`] as sent and received, for the WARC archive.
//! - `error`: [`FetchError`].
//! - `cookies`: the cookie jar (RFC 6265, through `cookie_store`).
//! - `hosts`: per-origin headers and Basic credentials.
//! - `trust`: the trusted roots (built-in, system, `SSL_CERT_FILE`,
//!   `SSL_CERT_DIR`, `--cacert`) and certificate errors in words.
//! - `proxy`: which proxy a request goes through, and the connector (CONNECT
//!   tunnels for https).

mod body;
mod capture;
mod classify;
mod client;
pub mod cookies;
mod error;
pub mod hosts;
pub mod proxy;
pub mod trust;

use std::path::PathBuf;
use std::time::Duration;

pub(crate) use body::{Encoding, decode_stored};
pub use capture::Exchange;
pub use client::Fetcher;
pub use error::{BoxError, ConnectKind, FetchError};

use crate::config::{CrawlConfig, HostRule, ProxyChoice};

/// Default longest URL the fetcher sends, in bytes.
pub const DEFAULT_MAX_URL_LEN: usize = 8192;

/// How the fetcher talks to servers. Build it with [`FetchSettings::from_config`].
#[derive(Clone, Debug)]
pub struct FetchSettings {
    /// `User-Agent` header sent with every request.
    pub user_agent: String,
    /// `From` header (an operator e-mail address), sent when set.
    pub from: Option<String>,
    /// Time allowed for a whole exchange: connect, headers and body.
    pub request_timeout: Duration,
    /// Longest wait for the next piece of a body once headers arrived.
    pub read_timeout: Duration,
    /// Largest decoded body kept, in bytes; a longer one is cut and flagged.
    pub max_body_bytes: usize,
    /// Longest URL sent, in bytes (default [`DEFAULT_MAX_URL_LEN`]); longer is an error.
    pub max_url_len: usize,
    /// Headers sent with every request after the defaults, replacing defaults of
    /// the same name (a request's own headers replace these in turn).
    pub extra_headers: Vec<(String, String)>,
    /// Idle connections kept open per host for reuse.
    pub pool_idle_per_host: usize,
    /// Keep each exchange as sent and received ([`Fetcher::fetch_captured`]):
    /// on when the crawl writes WARC files.
    pub capture: bool,
    /// The proxy requests go through.
    pub proxy: ProxyChoice,
    /// Per-origin headers and Basic credentials (their passwords are read
    /// from the environment by [`Fetcher::new`]).
    pub hosts: Vec<HostRule>,
    /// A PEM file of CA certificates trusted besides the built-in and the
    /// system's roots (read by [`Fetcher::new`]).
    pub cacert: Option<PathBuf>,
    /// The cookie jar requests send from and answers store into; `None`:
    /// no cookies.
    pub cookies: Option<cookies::CookieJar>,
}

impl FetchSettings {
    /// The settings a crawl with `config` uses: its user agent, `From`, extra
    /// headers, proxy, host rules, CA file, timeouts, body and URL limits, and `max(concurrency, 8)` idle
    /// connections per host.
    pub fn from_config(config: &CrawlConfig) -> FetchSettings {
        FetchSettings {
            user_agent: config.user_agent.clone(),
            from: config.from.clone(),
            request_timeout: config.request_timeout,
            read_timeout: config.read_timeout,
            max_body_bytes: config.max_body_bytes,
            max_url_len: config.max_url_len,
            extra_headers: config.extra_headers.clone(),
            pool_idle_per_host: config.concurrency.max(8),
            capture: config.warc.is_some(),
            proxy: config.proxy.clone(),
            hosts: config.hosts.clone(),
            cacert: config.cacert.clone(),
            cookies: config.cookies.then(cookies::CookieJar::new),
        }
    }
}

impl Default for FetchSettings {
    fn default() -> FetchSettings {
        FetchSettings::from_config(&CrawlConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_follow_the_config() {
        let config = CrawlConfig {
            concurrency: 64,
            max_body_bytes: 5,
            ..CrawlConfig::default()
        };
        let settings = FetchSettings::from_config(&config);
        assert_eq!(settings.pool_idle_per_host, 64);
        assert_eq!(settings.max_body_bytes, 5);
        assert_eq!(settings.max_url_len, DEFAULT_MAX_URL_LEN);
        assert_eq!(FetchSettings::default().pool_idle_per_host, 16);
        let small = CrawlConfig {
            concurrency: 2,
            ..CrawlConfig::default()
        };
        assert_eq!(FetchSettings::from_config(&small).pool_idle_per_host, 8);
    }
}
