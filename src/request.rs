//! The crawl request: what the frontier stores and the fetcher sends.
//!
//! A [`Request`] is plain data. It is stored in the frontier as one byte of
//! [`FORMAT_VERSION`] followed by its bincode 2 encoding, so that a later change
//! of layout is a migration, never a silent misread. This module depends on
//! nothing else in the crate.

use std::collections::BTreeMap;

use bincode::{Decode, Encode};
use serde::{Deserialize, Serialize};

/// Version byte written before every encoded request.
pub const FORMAT_VERSION: u8 = 1;

/// One request waiting in, or taken from, the frontier.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize, Deserialize)]
pub struct Request {
    /// HTTP method, upper case (`GET` unless a leg chose otherwise).
    pub method: String,
    /// Absolute URL to fetch, as produced by the legs (not necessarily canonical).
    pub url: String,
    /// Request body; empty for `GET`.
    pub body: Vec<u8>,
    /// Extra headers sent with this request. Only those named in the crawl's
    /// fingerprint header list take part in deduplication.
    pub headers: Vec<(String, String)>,
    /// Link distance from a seed (seeds are 0).
    pub depth: u32,
    /// Higher runs first; FIFO among equal priorities.
    pub priority: i32,
    /// Bypass the seen set (seeds, revisits, retries).
    pub dont_filter: bool,
    /// URL of the page this request was found on.
    pub referer: Option<String>,
    /// How many times this request has already been retried after a failure.
    pub retries: u32,
    /// Redirect hops followed so far, oldest first (for loop detection and the item).
    pub redirects: Vec<String>,
    /// Free-form metadata legs attach to a request and read back from its response.
    pub meta: BTreeMap<String, String>,
}

/// Why a stored request could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The record is empty.
    #[error("empty request record")]
    Empty,
    /// The record was written by another format version.
    #[error("request record has format version {found}, this build reads version {FORMAT_VERSION}")]
    Version {
        /// The version byte found in the record.
        found: u8,
    },
    /// The bytes after the version byte are not a valid request.
    #[error("corrupt request record: {0}")]
    Corrupt(#[from] bincode::error::DecodeError),
}

impl Request {
    /// A plain `GET` of `url` at depth 0 with default priority.
    pub fn get(url: impl Into<String>) -> Request {
        Request {
            method: "GET".to_owned(),
            url: url.into(),
            body: Vec::new(),
            headers: Vec::new(),
            depth: 0,
            priority: 0,
            dont_filter: false,
            referer: None,
            retries: 0,
            redirects: Vec::new(),
            meta: BTreeMap::new(),
        }
    }

    /// A request for `url` found on a page fetched by `parent`: one level deeper,
    /// with `parent`'s URL as referer.
    pub fn follow(parent: &Request, url: impl Into<String>) -> Request {
        let mut request = Request::get(url);
        request.depth = parent.depth.saturating_add(1);
        request.referer = Some(parent.url.clone());
        request
    }

    /// The stored form: version byte, then bincode.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.url.len());
        out.push(FORMAT_VERSION);
        // Encoding into a Vec cannot fail for these field types.
        if let Err(error) =
            bincode::encode_into_std_write(self, &mut out, bincode::config::standard())
        {
            unreachable!("encoding a request into memory failed: {error}");
        }
        out
    }

    /// Reads a request written by [`Request::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Request, DecodeError> {
        let (&version, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
        if version != FORMAT_VERSION {
            return Err(DecodeError::Version { found: version });
        }
        let (request, _) = bincode::decode_from_slice(rest, bincode::config::standard())?;
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut request = Request::get("http://example.com/a?b=1");
        request.meta.insert("leg".into(), "x".into());
        request.headers.push(("Accept".into(), "text/html".into()));
        request.retries = 2;
        let bytes = request.encode();
        assert_eq!(bytes[0], FORMAT_VERSION);
        assert_eq!(Request::decode(&bytes).unwrap(), request);
    }

    #[test]
    fn wrong_version_and_garbage_are_errors() {
        let mut bytes = Request::get("http://e.com/").encode();
        bytes[0] = 9;
        assert!(matches!(
            Request::decode(&bytes),
            Err(DecodeError::Version { found: 9 })
        ));
        assert!(matches!(Request::decode(&[]), Err(DecodeError::Empty)));
        assert!(matches!(
            Request::decode(&[FORMAT_VERSION, 0xff, 0xff]),
            Err(DecodeError::Corrupt(_))
        ));
    }
}
