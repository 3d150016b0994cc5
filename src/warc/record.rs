//! Building WARC 1.1 records, each as its own gzip member.
//!
//! A record is the `WARC/1.1` line, its named fields, `Content-Length`, a blank
//! line, the block and two CRLFs, compressed alone so that a reader can seek
//! to any record and a file cut at a record boundary stays valid. Each record
//! is put together in a per-thread buffer and compressed in one call by
//! libdeflate (level 1) into a complete gzip member (RFC 1952), with one
//! compressor per thread: no streaming state to reset between records.
//! Digests are SHA-1 in base32 (`sha1:` + RFC 4648), over the whole block
//! (`WARC-Block-Digest`) and over the HTTP body as received
//! (`WARC-Payload-Digest`). Record ids are random (v4) `urn:uuid:`s. Pure: no
//! I/O beyond memory. Depends on [`crate::fetch::Exchange`] (in a
//! [`super::Capture`]) and [`crate::clock`].

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use libdeflater::{CompressionLvl, Compressor};
use sha1::{Digest, Sha1};

use super::{Capture, Profile};
use crate::clock::rfc3339_secs;

/// `sha1:` and the base32 of the SHA-1 of `parts`, concatenated.
pub fn sha1_digest(parts: &[&[u8]]) -> String {
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update(part);
    }
    let digest: [u8; 20] = hasher.finalize().into();
    format!("sha1:{}", data_encoding::BASE32.encode(&digest))
}

/// A new `<urn:uuid:...>` record id.
fn record_id() -> String {
    format!("<urn:uuid:{}>", uuid::Uuid::new_v4())
}

/// `YYYY-MM-DDTHH:MM:SSZ` of `time` (whole seconds, as the page record keeps
/// them, so that `WARC-Refers-To-Date` can name a capture exactly).
pub fn warc_date(time: SystemTime) -> String {
    rfc3339_secs(unix_secs(time))
}

/// Whole Unix seconds of `time` (0 before the epoch).
pub fn unix_secs(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The deflate level: libdeflate's 1, its fastest that still compresses.
const LEVEL: i32 = 1;

/// Past this many bytes a thread's scratch buffer is freed after use, so that
/// one huge record does not keep its size for the rest of the run.
const SCRATCH_KEEP: usize = 1 << 20;

/// This thread's compressor and the buffer a record is put together in.
struct Gzip {
    compressor: Compressor,
    input: Vec<u8>,
}

thread_local! {
    /// Allocated once per thread: libdeflate compresses a whole buffer in one
    /// call with no state carried between calls, so nothing is reset.
    static GZIP: RefCell<Gzip> = RefCell::new(Gzip {
        compressor: Compressor::new(match CompressionLvl::new(LEVEL) {
            Ok(level) => level,
            Err(_) => CompressionLvl::fastest(),
        }),
        input: Vec::new(),
    });
}

/// Appends `parts`, concatenated, to `out` as one gzip member (libdeflate's
/// header: no name, no time, XFL "fastest", OS unknown).
fn gzip(parts: &[&[u8]], out: &mut Vec<u8>) {
    GZIP.with(|cell| {
        let Gzip { compressor, input } = &mut *cell.borrow_mut();
        input.clear();
        for part in parts {
            input.extend_from_slice(part);
        }
        let at = out.len();
        out.resize(at + compressor.gzip_compress_bound(input.len()), 0);
        let written = match compressor.gzip_compress(input, &mut out[at..]) {
            Ok(written) => written,
            // The bound is libdeflate's own worst case for this input.
            Err(error) => unreachable!("gzip into a buffer of its bound failed: {error}"),
        };
        out.truncate(at + written);
        if input.capacity() > SCRATCH_KEEP {
            *input = Vec::new();
        }
    });
}

/// One record as a gzip member appended to `out`: the header `fields` (in
/// order), then `Content-Length` and the block made of `block`'s parts.
fn member(fields: &[(&str, &str)], block: &[&[u8]], out: &mut Vec<u8>) {
    let len: usize = block.iter().map(|part| part.len()).sum();
    let mut head = String::with_capacity(512);
    head.push_str("WARC/1.1\r\n");
    for (name, value) in fields {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str(&format!("Content-Length: {len}\r\n\r\n"));
    let mut parts = Vec::with_capacity(block.len() + 2);
    parts.push(head.as_bytes());
    parts.extend_from_slice(block);
    parts.push(b"\r\n\r\n");
    gzip(&parts, out);
}

/// The `warcinfo` record that opens the file `filename`: the software and the
/// crawl's settings as `name: value` lines (`application/warc-fields`).
pub fn warcinfo(filename: &str, date: SystemTime, info: &[(String, String)]) -> Vec<u8> {
    let mut block = String::new();
    for (name, value) in info {
        block.push_str(name);
        block.push_str(": ");
        // A field is one line.
        block.push_str(&value.replace(['\r', '\n'], " "));
        block.push_str("\r\n");
    }
    let digest = sha1_digest(&[block.as_bytes()]);
    let mut out = Vec::new();
    member(
        &[
            ("WARC-Type", "warcinfo"),
            ("WARC-Record-ID", &record_id()),
            ("WARC-Date", &warc_date(date)),
            ("WARC-Filename", filename),
            ("WARC-Block-Digest", &digest),
            ("Content-Type", "application/warc-fields"),
        ],
        &[block.as_bytes()],
        &mut out,
    );
    out
}

/// The records of one capture: a `request` record, then a `response` record
/// (or, for an unchanged page, a `revisit` record: with the response head
/// only for `identical-payload-digest`, with no block and the 304's
/// `WARC-Etag`/`WARC-Last-Modified` for `server-not-modified`), the request
/// pointing at the response with `WARC-Concurrent-To`. Returns them with the
/// offset of the second record (the response or revisit) among them.
pub fn capture(capture: &Capture) -> (Vec<u8>, usize) {
    let exchange = &capture.exchange;
    let date = warc_date(exchange.date);
    let ip = exchange.ip.map(|ip| ip.to_string());
    let response_id = record_id();
    let len = exchange.request_head.len()
        + exchange.request_body.len()
        + exchange.response_head.len()
        + exchange.response_body.len();
    let mut out = Vec::with_capacity(len / 2 + 2048);
    {
        let block_digest = sha1_digest(&[&exchange.request_head, &exchange.request_body]);
        let payload_digest = sha1_digest(&[&exchange.request_body]);
        let mut fields = vec![
            ("WARC-Type", "request"),
            ("WARC-Target-URI", exchange.url.as_str()),
            ("WARC-Date", date.as_str()),
        ];
        let id = record_id();
        fields.push(("WARC-Record-ID", &id));
        fields.push(("WARC-Concurrent-To", &response_id));
        if let Some(ip) = &ip {
            fields.push(("WARC-IP-Address", ip));
        }
        fields.push(("WARC-Block-Digest", &block_digest));
        fields.push(("WARC-Payload-Digest", &payload_digest));
        fields.push(("Content-Type", "application/http; msgtype=request"));
        member(
            &fields,
            &[&exchange.request_head, &exchange.request_body],
            &mut out,
        );
    }
    let payload_digest = sha1_digest(&[&exchange.response_body]);
    let refers_date = capture
        .revisit
        .as_ref()
        .map(|revisit| rfc3339_secs(revisit.date));
    let mut fields = vec![
        (
            "WARC-Type",
            if capture.revisit.is_some() {
                "revisit"
            } else {
                "response"
            },
        ),
        ("WARC-Target-URI", exchange.url.as_str()),
        ("WARC-Date", date.as_str()),
        ("WARC-Record-ID", response_id.as_str()),
    ];
    if let Some(ip) = &ip {
        fields.push(("WARC-IP-Address", ip));
    }
    let profile = capture.revisit.as_ref().map(|r| r.profile);
    // The 304's validators, kept as Heritrix keeps them when its block is
    // empty (see the module doc of `crate::warc`).
    let validators: Vec<(&str, String)> = match profile {
        Some(Profile::ServerNotModified) => [
            ("WARC-Etag", "etag"),
            ("WARC-Last-Modified", "last-modified"),
        ]
        .into_iter()
        .filter_map(|(field, header)| Some((field, head_value(&exchange.response_head, header)?)))
        .collect(),
        _ => Vec::new(),
    };
    let block: Vec<&[u8]> = match (&capture.revisit, &refers_date) {
        (Some(revisit), Some(refers_date)) => {
            fields.push(("WARC-Profile", revisit.profile.uri()));
            fields.push(("WARC-Refers-To-Target-URI", &revisit.target));
            fields.push(("WARC-Refers-To-Date", refers_date));
            for (field, value) in &validators {
                fields.push((field, value));
            }
            match revisit.profile {
                // No block: a 304 head would replay as the page's answer.
                Profile::ServerNotModified => Vec::new(),
                Profile::IdenticalPayloadDigest => vec![&exchange.response_head],
            }
        }
        _ => vec![&exchange.response_head, &exchange.response_body],
    };
    let block_digest = sha1_digest(&block);
    fields.push(("WARC-Block-Digest", &block_digest));
    let identical = matches!(
        capture.revisit.as_ref().map(|r| r.profile),
        Some(Profile::IdenticalPayloadDigest)
    );
    if capture.revisit.is_none() || identical {
        fields.push(("WARC-Payload-Digest", &payload_digest));
    }
    if exchange.truncated && capture.revisit.is_none() {
        fields.push(("WARC-Truncated", "length"));
    }
    if profile != Some(Profile::ServerNotModified) {
        fields.push(("Content-Type", "application/http; msgtype=response"));
    }
    let second = out.len();
    member(&fields, &block, &mut out);
    (out, second)
}

/// The value of header `name` (lower case) in an HTTP head, trimmed; `None`
/// when absent or not text.
fn head_value(head: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(head).ok()?;
    text.split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then(|| value.trim().to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_sha1_base32() {
        // SHA-1 of "" is da39a3ee5e6b4b0d3255bfef95601890afd80709.
        assert_eq!(sha1_digest(&[]), "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
        assert_eq!(sha1_digest(&[b"a", b"bc"]), sha1_digest(&[b"abc"]));
    }

    #[test]
    fn members_are_gzip_appended_and_the_compressor_is_reused() {
        let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for data in [&b""[..], b"abc", &big[..], b"again"] {
            let mut member = b"before".to_vec();
            gzip(&[data, b"tail"], &mut member);
            assert!(
                member.starts_with(b"before"),
                "appended after what was there"
            );
            let member = &member[b"before".len()..];
            let mut back = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(member), &mut back)
                .unwrap();
            assert_eq!(&back[..data.len()], data);
            assert_eq!(&back[data.len()..], b"tail");
        }
    }

    fn unzip(bytes: &[u8]) -> String {
        let mut text = String::new();
        let mut decoder = flate2::bufread::MultiGzDecoder::new(bytes);
        std::io::Read::read_to_string(&mut decoder, &mut text).unwrap();
        text
    }

    fn revisit(profile: Profile, head: &[u8]) -> String {
        let capture = Capture {
            exchange: crate::fetch::Exchange {
                url: "http://a.test/".to_owned(),
                request_head: b"GET / HTTP/1.1\r\nhost: a.test\r\n\r\n".to_vec(),
                request_body: bytes::Bytes::new(),
                response_head: head.to_vec(),
                response_body: bytes::Bytes::new(),
                truncated: false,
                ip: None,
                date: UNIX_EPOCH,
            },
            revisit: Some(super::super::RevisitOf {
                profile,
                target: "http://a.test/".to_owned(),
                date: 0,
            }),
        };
        let text = unzip(&super::capture(&capture).0);
        let at = text.find("WARC-Type: revisit").unwrap();
        text[at..].to_owned()
    }

    #[test]
    fn a_not_modified_revisit_has_no_block_and_keeps_the_validators() {
        let head = b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nlast-modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\n";
        let text = revisit(Profile::ServerNotModified, head);
        assert!(text.contains("WARC-Etag: \"v1\"\r\n"), "{text}");
        assert!(
            text.contains("WARC-Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n"),
            "{text}"
        );
        assert!(text.contains("WARC-Refers-To-Date: 1970-01-01T00:00:00Z\r\n"));
        assert!(
            text.ends_with("Content-Length: 0\r\n\r\n\r\n\r\n"),
            "{text}"
        );
        assert!(!text.contains("HTTP/1.1 304"));
        assert!(!text.contains("Content-Type"));
        assert!(!text.contains("WARC-Payload-Digest"));

        let head = b"HTTP/1.1 200 OK\r\nETag: \"v1\"\r\n\r\n";
        let text = revisit(Profile::IdenticalPayloadDigest, head);
        assert!(text.contains("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(!text.contains("WARC-Etag"), "{text}");
    }

    #[test]
    fn a_member_is_one_gzip_stream_of_one_record() {
        let bytes = warcinfo(
            "x.warc.gz",
            UNIX_EPOCH,
            &[("software".into(), "t\n1".into())],
        );
        let mut text = String::new();
        let mut decoder = flate2::bufread::GzDecoder::new(&bytes[..]);
        std::io::Read::read_to_string(&mut decoder, &mut text).unwrap();
        assert!(text.starts_with("WARC/1.1\r\nWARC-Type: warcinfo\r\n"));
        assert!(text.contains("WARC-Date: 1970-01-01T00:00:00Z\r\n"));
        assert!(text.ends_with("\r\n\r\nsoftware: t 1\r\n\r\n\r\n"));
        assert!(text.contains("Content-Length: 15\r\n"));
    }
}
