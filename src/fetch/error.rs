//! Why a fetch produced no [`crate::response::Response`].
//!
//! Every variant carries the URL it is about (as the request spelled it), so an
//! error printed far from the fetch still says what failed. HTTP error statuses
//! (404, 500, ...) are not errors: they come back as responses.

use std::time::Duration;

/// A boxed error source from the HTTP stack.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Which step of connecting to a server failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectKind {
    /// The host name did not resolve (no such host, no network, no resolver).
    Dns,
    /// The address answered with a refusal: nothing listens on that port.
    Refused,
    /// TCP connected but the TLS handshake failed (a bad certificate, or an
    /// `https` URL for a port that speaks plain HTTP).
    Tls,
    /// The proxy could not be reached, refused the tunnel, or asked for
    /// credentials (407); the detail names the proxy, never its password.
    Proxy,
    /// Anything else (unreachable network, connect timeout, ...).
    Other,
}

impl ConnectKind {
    /// A few words for logs: `dns`, `refused`, `tls`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectKind::Dns => "dns",
            ConnectKind::Refused => "refused",
            ConnectKind::Tls => "tls",
            ConnectKind::Proxy => "proxy",
            ConnectKind::Other => "other",
        }
    }
}

/// The one-line message of [`FetchError::Connect`].
fn connect_message(url: &str, kind: ConnectKind, detail: &str) -> String {
    match kind {
        ConnectKind::Dns => format!("cannot resolve the host of {url} (DNS: {detail})"),
        ConnectKind::Refused => format!("connection refused for {url} (nothing listens there)"),
        ConnectKind::Tls if detail.contains("InvalidContentType") || detail.contains("corrupt") => {
            format!(
                "TLS handshake failed for {url}: the server does not speak TLS there (a plain-HTTP port?)"
            )
        }
        ConnectKind::Tls => format!("TLS handshake failed for {url}: {detail}"),
        ConnectKind::Proxy => format!("{detail} (for {url})"),
        ConnectKind::Other => format!("cannot connect for {url}: {detail}"),
    }
}

/// A failed fetch.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL does not parse as an absolute URL.
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL's scheme is neither `http` nor `https`.
    #[error("unsupported scheme {scheme:?} in {url}")]
    UnsupportedScheme {
        /// The URL as given.
        url: String,
        /// The scheme found.
        scheme: String,
    },
    /// The URL is longer than the configured maximum.
    #[error("URL of {len} bytes is too long: {url_prefix}...")]
    UrlTooLong {
        /// The first bytes of the URL (at most 100).
        url_prefix: String,
        /// Length of the whole URL in bytes.
        len: usize,
    },
    /// The request's method or a header (name or value) is not valid HTTP.
    #[error("invalid request for {url}: {reason}")]
    InvalidRequest {
        /// The URL as given.
        url: String,
        /// What is wrong with the request.
        reason: String,
    },
    /// A fetcher setting (user agent, `From`, an extra header) is not a valid header.
    #[error("invalid fetch setting {name}: {reason}")]
    InvalidSetting {
        /// Which setting.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No connection could be made (DNS, refused, TLS handshake). The message
    /// names which, so "no such host" and "TLS to a plain-HTTP port" read apart.
    #[error("{}", connect_message(url, *kind, detail))]
    Connect {
        /// The URL as given.
        url: String,
        /// Which step of connecting failed.
        kind: ConnectKind,
        /// The innermost cause, as the resolver, the OS or rustls said it.
        detail: String,
        /// The underlying error.
        cause: BoxError,
    },
    /// The whole exchange (connect, headers, body) took longer than the request timeout.
    #[error("request for {url} timed out after {after:?}")]
    Timeout {
        /// The URL as given.
        url: String,
        /// The request timeout that ran out.
        after: Duration,
    },
    /// The server sent nothing for longer than the read timeout while the body was due.
    #[error("reading the body of {url} stalled for {after:?}")]
    ReadTimeout {
        /// The URL as given.
        url: String,
        /// The read timeout that ran out.
        after: Duration,
    },
    /// The exchange failed after connecting: the server closed or reset the
    /// connection, or sent something that is not HTTP (a bad status line, a bad
    /// header, bad chunked framing). `reason` says which.
    #[error("bad response from {url}: {reason}")]
    Read {
        /// The URL as given.
        url: String,
        /// What was wrong, from the HTTP stack's error chain.
        reason: String,
        /// The underlying error.
        cause: BoxError,
    },
    /// The body did not have the length its `Content-Length` declared.
    #[error("body of {url} has {got} bytes, Content-Length said {expected}")]
    LengthMismatch {
        /// The URL as given.
        url: String,
        /// The declared `Content-Length`.
        expected: u64,
        /// Bytes (still encoded) actually received.
        got: u64,
    },
    /// The body could not be decoded per its `Content-Encoding`: corrupt data,
    /// bytes after the end of the compressed stream, or an encoding (or a list of
    /// encodings such as `gzip, gzip`) the fetcher does not undo.
    #[error("cannot decode the body of {url}: {source}")]
    Decode {
        /// The URL as given.
        url: String,
        /// The decoder's error, or what is unsupported.
        source: std::io::Error,
    },
}

impl FetchError {
    /// True for failures that may go away on a later attempt: timeouts, connect
    /// and read errors. Bad URLs, length mismatches and decoding errors are not.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            FetchError::Connect { .. }
                | FetchError::Timeout { .. }
                | FetchError::ReadTimeout { .. }
                | FetchError::Read { .. }
        )
    }

    /// The URL the error is about (the prefix for [`FetchError::UrlTooLong`], empty
    /// for [`FetchError::InvalidSetting`]).
    pub fn url(&self) -> &str {
        match self {
            FetchError::InvalidUrl { url, .. }
            | FetchError::UnsupportedScheme { url, .. }
            | FetchError::InvalidRequest { url, .. }
            | FetchError::Connect { url, .. }
            | FetchError::Timeout { url, .. }
            | FetchError::ReadTimeout { url, .. }
            | FetchError::Read { url, .. }
            | FetchError::LengthMismatch { url, .. }
            | FetchError::Decode { url, .. } => url,
            FetchError::UrlTooLong { url_prefix, .. } => url_prefix,
            FetchError::InvalidSetting { .. } => "",
        }
    }
}
