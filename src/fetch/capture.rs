//! The exchange as it went over the wire, kept for the WARC archive.
//!
//! With [`super::FetchSettings::capture`] on, each fetch that got a response
//! also yields an [`Exchange`]: the request head as the fetcher built it (with
//! the `Host` header hyper adds), the response's status line and headers, and
//! the body bytes as received — de-chunked but still in their
//! `Content-Encoding` (the legs see the decoded body; an archive keeps what
//! the server sent). Header names are as hyper keeps them (lower case);
//! `Transfer-Encoding` is left out of the response head, because the body it
//! describes is stored de-chunked. Depends on `http` and `bytes` only.

use std::net::IpAddr;
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, Version};

/// One HTTP exchange, as sent and received.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The URL asked for (no fragment, no credentials): the WARC target.
    pub url: String,
    /// Request line, headers and the blank line, as sent.
    pub request_head: Vec<u8>,
    /// The request body (empty for `GET`).
    pub request_body: Bytes,
    /// Status line, headers (without `Transfer-Encoding`) and the blank line.
    pub response_head: Vec<u8>,
    /// The body as received: de-chunked, still content-encoded.
    pub response_body: Bytes,
    /// The body was cut (size limit) before its end.
    pub truncated: bool,
    /// The server's address, when the connection told it.
    pub ip: Option<IpAddr>,
    /// When the response headers arrived.
    pub date: SystemTime,
}

/// `GET /path?q HTTP/1.1`, `host: ...`, then `headers`, as an HTTP/1 head.
pub(crate) fn request_head(
    method: &Method,
    target: &str,
    host: &str,
    version: Version,
    headers: &HeaderMap,
) -> Vec<u8> {
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(method.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(target.as_bytes());
    head.push(b' ');
    head.extend_from_slice(version_text(version).as_bytes());
    head.extend_from_slice(b"\r\nhost: ");
    head.extend_from_slice(host.as_bytes());
    head.extend_from_slice(b"\r\n");
    push_headers(&mut head, headers, |_| true);
    head.extend_from_slice(b"\r\n");
    head
}

/// `HTTP/1.1 200 OK` and the headers but `Transfer-Encoding`, as an HTTP/1 head.
pub(crate) fn response_head(
    version: Version,
    status: StatusCode,
    reason: Option<&[u8]>,
    headers: &HeaderMap,
) -> Vec<u8> {
    let mut head = Vec::with_capacity(512);
    head.extend_from_slice(version_text(version).as_bytes());
    head.push(b' ');
    head.extend_from_slice(status.as_str().as_bytes());
    head.push(b' ');
    match reason {
        Some(reason) => head.extend_from_slice(reason),
        None => head.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes()),
    }
    head.extend_from_slice(b"\r\n");
    push_headers(&mut head, headers, |name| {
        name != http::header::TRANSFER_ENCODING
    });
    head.extend_from_slice(b"\r\n");
    head
}

fn push_headers(head: &mut Vec<u8>, headers: &HeaderMap, keep: impl Fn(&http::HeaderName) -> bool) {
    for (name, value) in headers {
        if keep(name) {
            head.extend_from_slice(name.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
    }
}

/// The protocol as a status line writes it (`HTTP/2.0` for HTTP/2, as
/// `http::Version` names it; readers take any `HTTP/x` token).
/// The HTTP version a request went out in: the request's own (hyper writes
/// HTTP/1.1 on an HTTP/1 connection whatever the server answers, 1.0 included),
/// or HTTP/2 when the connection negotiated it (the answer then says so).
pub(crate) fn sent_version(request: Version, response: Version) -> Version {
    if response == Version::HTTP_2 {
        Version::HTTP_2
    } else {
        request
    }
}

fn version_text(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_sent_is_the_requests_unless_h2_was_negotiated() {
        assert_eq!(
            sent_version(Version::HTTP_11, Version::HTTP_10),
            Version::HTTP_11
        );
        assert_eq!(
            sent_version(Version::HTTP_11, Version::HTTP_2),
            Version::HTTP_2
        );
    }

    #[test]
    fn heads_are_http1_text() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", "text/html".parse().unwrap());
        headers.insert("transfer-encoding", "chunked".parse().unwrap());
        let head = response_head(Version::HTTP_11, StatusCode::OK, None, &headers);
        assert_eq!(head, b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\n");
        let head = request_head(
            &Method::GET,
            "/a?b",
            "e.com:81",
            Version::HTTP_11,
            &HeaderMap::new(),
        );
        assert_eq!(head, b"GET /a?b HTTP/1.1\r\nhost: e.com:81\r\n\r\n");
    }
}
