//! A fetched response as the legs see it.
//!
//! Produced by the fetcher, read (never changed) by legs. Depends on
//! [`crate::request`] and [`crate::charset`] (decoding the body).

use std::time::SystemTime;

use bytes::Bytes;
use http::HeaderMap;
use url::Url;

use crate::request::Request;

/// A complete, decoded HTTP response.
#[derive(Clone, Debug)]
pub struct Response {
    /// The request that was leased from the frontier and produced this response.
    pub request: Request,
    /// The URL the body came from: the request's, parsed (the fetcher follows no
    /// redirects).
    pub url: Url,
    /// HTTP status code.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// Body after content decoding (gzip, br, deflate), at most the crawl's size limit.
    pub body: Bytes,
    /// True when the body was cut at the size limit.
    pub truncated: bool,
    /// When the response headers arrived.
    pub fetched_at: SystemTime,
    /// The status is an error status the crawl keeps (`--keep-status`): the
    /// legs take the answer as they take a 2xx ([`Response::is_content`]).
    pub kept: bool,
}

impl Response {
    /// The media type of `Content-Type`, lower case, without parameters (`text/html`).
    pub fn media_type(&self) -> Option<String> {
        let value = self
            .headers
            .get(http::header::CONTENT_TYPE)?
            .to_str()
            .ok()?;
        let media = value.split(';').next()?.trim().to_ascii_lowercase();
        (!media.is_empty()).then_some(media)
    }

    /// True for `text/html` and `application/xhtml+xml`, or when no type was sent and
    /// the body starts like HTML.
    pub fn is_html(&self) -> bool {
        match self.media_type() {
            Some(media) => media == "text/html" || media == "application/xhtml+xml",
            None => {
                let head = &self.body[..self.body.len().min(512)];
                let head = String::from_utf8_lossy(head).to_ascii_lowercase();
                head.contains("<html") || head.contains("<!doctype html")
            }
        }
    }

    /// True for a 2xx status.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// True when the answer is the page's content, which the legs read: a 2xx,
    /// or an error status the crawl keeps.
    pub fn is_content(&self) -> bool {
        self.is_success() || self.kept
    }

    /// The body as text, decoded by [`crate::charset::decode`] (BOM, then the
    /// `Content-Type` charset, then `<meta>`, then UTF-8); borrowed when it is valid UTF-8.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        let content_type = self
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        crate::charset::decode(content_type, &self.body).0
    }
}
