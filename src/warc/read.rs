//! Reading one `response` record back from a WARC file, at the offset its
//! page record keeps: what `legcrawl reparse` gives the legs instead of a
//! fetch.
//!
//! A record is one gzip member (as `record` writes them), so it is read by
//! seeking to its offset and inflating that member alone. Its WARC head names
//! the target URI and the block's length; the block is the HTTP response as
//! received (status line, headers, then the body still in its
//! `Content-Encoding`), parsed with `httparse`, hyper's own parser. Depends
//! on `flate2`, `httparse` and `http` only.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use http::{HeaderMap, HeaderName, HeaderValue};

/// A response as a WARC `response` record keeps it.
#[derive(Debug)]
pub struct StoredResponse {
    /// `WARC-Target-URI`: the URL that answered.
    pub url: String,
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body as received: de-chunked, still content-encoded.
    pub body: Vec<u8>,
    /// `WARC-Truncated`: the body was cut at the size limit.
    pub truncated: bool,
}

/// Why a record could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// What is at the offset is not a `response` record this build can read.
    #[error("{path} at offset {offset}: {reason}")]
    Record {
        /// The file.
        path: PathBuf,
        /// The record's offset.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

/// Most bytes a record may inflate to: the crawl's body limit and a head.
fn inflate_limit(max_body: usize) -> u64 {
    (max_body as u64).saturating_add(1 << 20)
}

/// The `response` record whose gzip member begins at `offset` of `path`; its
/// inflated size is bounded by `max_body` (the crawl's body limit) and a
/// head.
pub fn response_at(path: &Path, offset: u64, max_body: usize) -> Result<StoredResponse, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    let bad = |reason: String| ReadError::Record {
        path: path.to_owned(),
        offset,
        reason,
    };
    let mut file = File::open(path).map_err(io)?;
    file.seek(SeekFrom::Start(offset)).map_err(io)?;
    // One member: `bufread::GzDecoder` stops at its end.
    let mut member = flate2::bufread::GzDecoder::new(BufReader::with_capacity(64 * 1024, file))
        .take(inflate_limit(max_body));
    let mut bytes = Vec::new();
    member
        .read_to_end(&mut bytes)
        .map_err(|e| bad(format!("not a whole gzip member ({e})")))?;
    parse(&bytes).map_err(bad)
}

/// A `response` record's bytes, inflated.
fn parse(bytes: &[u8]) -> Result<StoredResponse, String> {
    let end = find(bytes, b"\r\n\r\n").ok_or("no end of the WARC head")?;
    let head = std::str::from_utf8(&bytes[..end]).map_err(|_| "a WARC head that is not UTF-8")?;
    let mut lines = head.split("\r\n");
    match lines.next() {
        Some(version) if version.starts_with("WARC/") => {}
        _ => return Err("no WARC version line".into()),
    }
    let fields: Vec<(&str, &str)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim(), value.trim()))
        .collect();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| *value)
    };
    match field("WARC-Type") {
        Some("response") => {}
        other => {
            return Err(format!(
                "a {} record, not a response",
                other.unwrap_or("typeless")
            ));
        }
    }
    let url = field("WARC-Target-URI")
        .ok_or("no WARC-Target-URI")?
        .to_owned();
    let length: usize = field("Content-Length")
        .and_then(|n| n.parse().ok())
        .ok_or("no Content-Length")?;
    let block = bytes
        .get(end + 4..end + 4 + length)
        .ok_or("a block shorter than its Content-Length")?;
    let (status, headers, body_at) = http_head(block)?;
    Ok(StoredResponse {
        url,
        status,
        headers,
        body: block[body_at..].to_vec(),
        truncated: field("WARC-Truncated").is_some(),
    })
}

/// The status, headers and head length of the HTTP response that `block`
/// begins with.
fn http_head(block: &[u8]) -> Result<(u16, HeaderMap, usize), String> {
    let mut room = 64;
    loop {
        let mut slots = vec![httparse::EMPTY_HEADER; room];
        let mut response = httparse::Response::new(&mut slots);
        match response.parse(block) {
            Ok(httparse::Status::Complete(len)) => {
                let status = response.code.ok_or("no HTTP status")?;
                let mut headers = HeaderMap::with_capacity(response.headers.len());
                for header in response.headers.iter() {
                    // A header hyper took from the wire reads back; one that
                    // does not is left out rather than failing the page.
                    if let (Ok(name), Ok(value)) = (
                        HeaderName::from_bytes(header.name.as_bytes()),
                        HeaderValue::from_bytes(header.value),
                    ) {
                        headers.append(name, value);
                    }
                }
                return Ok((status, headers, len));
            }
            Ok(httparse::Status::Partial) => return Err("an HTTP head without its end".into()),
            Err(httparse::Error::TooManyHeaders) if room < 16 * 1024 => room *= 4,
            Err(error) => return Err(format!("an HTTP head that does not parse ({error})")),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::Exchange;
    use crate::warc::{Capture, encode_page};
    use std::io::Write;
    use std::time::SystemTime;

    fn exchange(url: &str, body: &[u8]) -> Exchange {
        Exchange {
            url: url.into(),
            request_head: b"GET / HTTP/1.1\r\nhost: a\r\n\r\n".to_vec(),
            request_body: Default::default(),
            response_head:
                b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nx-two: 1\r\nx-two: 2\r\n\r\n"
                    .to_vec(),
            response_body: bytes::Bytes::copy_from_slice(body),
            truncated: false,
            ip: None,
            date: SystemTime::now(),
        }
    }

    #[test]
    fn a_response_reads_back_from_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.warc.gz");
        let captures = [Capture {
            exchange: exchange("http://a/p", b"<p>hello</p>"),
            revisit: None,
        }];
        let (records, at) = encode_page(&captures);
        let mut file = File::create(&path).unwrap();
        // Something before, as in a file with other records.
        file.write_all(&encode_page(&captures).0).unwrap();
        let base = file.metadata().unwrap().len();
        file.write_all(&records).unwrap();
        drop(file);
        let stored = response_at(&path, base + at.unwrap(), 1 << 20).unwrap();
        assert_eq!(stored.url, "http://a/p");
        assert_eq!(stored.status, 200);
        assert_eq!(stored.body, b"<p>hello</p>");
        assert_eq!(stored.headers.get_all("x-two").iter().count(), 2);
        assert!(!stored.truncated);
        // The request record is not a response.
        let error = response_at(&path, base, 1 << 20).unwrap_err();
        assert!(error.to_string().contains("a request record"), "{error}");
        // Nor is the middle of a member.
        let error = response_at(&path, base + 3, 1 << 20).unwrap_err();
        assert!(error.to_string().contains("gzip"), "{error}");
    }

    #[test]
    fn a_revisit_has_no_response_offset() {
        let captures = [Capture {
            exchange: exchange("http://a/p", b""),
            revisit: Some(crate::warc::RevisitOf {
                profile: crate::warc::Profile::ServerNotModified,
                target: "http://a/p".into(),
                date: 0,
            }),
        }];
        assert_eq!(encode_page(&captures).1, None);
    }
}
