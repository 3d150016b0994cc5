//! Why an exchange failed: hyper's error chain turned into a [`FetchError`]
//! that names the step (DNS, refused, TLS, the proxy) and the reason.
//!
//! Depends on `error`, `proxy` (a [`ProxyError`] in the chain is the
//! proxy's failure, whatever else it holds) and `trust` (a refused server
//! certificate, in words).

use tracing::debug;

use super::error::{ConnectKind, FetchError};
use super::proxy::ProxyError;

/// A failure before the response headers: connecting, or the exchange itself.
pub(super) fn send_error(url: &str, error: hyper_util::client::legacy::Error) -> FetchError {
    debug!(url, error = ?error, "request failed");
    if error.is_connect() {
        let https = url
            .get(..6)
            .is_some_and(|s| s.eq_ignore_ascii_case("https:"));
        let (kind, detail) = classify_connect(&error, https);
        FetchError::Connect {
            url: url.to_owned(),
            kind,
            detail,
            cause: Box::new(error),
        }
    } else {
        FetchError::Read {
            url: url.to_owned(),
            reason: reason_of(&error),
            cause: Box::new(error),
        }
    }
}

/// The messages of `error`'s source chain (without `error` itself).
fn chain<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut out = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        out.push(cause);
        source = cause.source();
    }
    out
}

/// Which step of connecting failed, and the innermost message. hyper-util names
/// its step (`dns error`, `tcp connect error`); a failure of an `https` URL past
/// those steps is the TLS handshake.
fn classify_connect(
    error: &(dyn std::error::Error + 'static),
    https: bool,
) -> (ConnectKind, String) {
    let causes = chain(error);
    if let Some(proxy) = causes.iter().find_map(|c| c.downcast_ref::<ProxyError>()) {
        return (ConnectKind::Proxy, proxy.to_string());
    }
    let certificate = causes
        .iter()
        .find_map(|cause| rustls_error(*cause))
        .and_then(super::trust::certificate_words);
    if let Some(words) = certificate {
        return (ConnectKind::Tls, words);
    }
    let detail = causes
        .last()
        .map_or_else(|| error.to_string(), |cause| cause.to_string());
    let io_kind = |kind| {
        causes.iter().any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == kind)
        })
    };
    let said = |prefix: &str| causes.iter().any(|c| c.to_string().starts_with(prefix));
    let kind = if io_kind(std::io::ErrorKind::ConnectionRefused) {
        ConnectKind::Refused
    } else if said("dns error") {
        ConnectKind::Dns
    } else if https && !said("tcp ") {
        ConnectKind::Tls
    } else {
        ConnectKind::Other
    };
    (kind, detail)
}

/// The rustls error in `error` or inside it: rustls's errors come wrapped
/// in an `io::Error`, whose `source` skips the wrapped error itself.
fn rustls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    // Bounded: a chain of wrappers is short.
    for _ in 0..8 {
        let current = next?;
        if let Some(found) = current.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        next = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => current.source(),
        };
    }
    None
}

/// What went wrong in an exchange, from hyper's error chain: its messages
/// ("invalid HTTP header parsed", "connection closed before message
/// completed", ...) joined with `: `, hyper-util's generic wrapper left out.
pub(super) fn reason_of(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let top = error.to_string();
    if !top.starts_with("client error") {
        parts.push(top);
    }
    for cause in chain(error) {
        let text = cause.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
    }
    if parts.is_empty() {
        "the connection failed".to_owned()
    } else {
        parts.join(": ")
    }
}

/// True when the connection ended before the body did (hyper's incomplete body).
pub(super) fn is_unexpected_eof(error: &hyper::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::UnexpectedEof;
        }
        source = cause.source();
    }
    false
}
