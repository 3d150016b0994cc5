//! Reading one response body: per-chunk read timeout, content decoding, size limit.
//!
//! [`read_body`] pulls the hyper body through [`RawBody`], which counts the raw
//! (still encoded) bytes for the `Content-Length` check and fails a wait for the
//! next chunk that outlasts the read timeout. Encoded bodies go through
//! async-compression's streaming decoders, read through a `take(limit + 1)`, so the
//! decoder never produces more than one byte past the limit: a decompression bomb
//! costs at most about twice the limit in memory (buffer growth) and the CPU time
//! of decoding that much. Unknown encodings are kept as raw bytes; stacked
//! encodings (`gzip, gzip`) and bytes after the end of a compressed stream are
//! decoding errors.
//!
//! Depends on hyper, tokio and async-compression only; knows nothing of requests
//! or URLs (the caller turns [`BodyError`] into a `FetchError`).

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use async_compression::tokio::bufread::{BrotliDecoder, DeflateDecoder, GzipDecoder, ZlibDecoder};
use bytes::{Buf, Bytes, BytesMut};
use http::HeaderValue;
use hyper::body::{Body, Incoming};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Smallest growth step of the body buffer.
const MIN_GROWTH: usize = 8 * 1024;
/// Raw bytes read after a decoder finished, to see the end of the body (and let
/// the connection be reused); past this the rest is dropped unchecked.
const MAX_DRAIN: u64 = 64 * 1024;
/// Guess of the decoded/encoded size ratio, for the buffer's first capacity.
const RATIO_GUESS: u64 = 4;

/// A `Content-Encoding` the fetcher knows how to undo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// No encoding (`identity`, absent, or one we cannot decode: kept raw).
    Identity,
    /// `gzip` or `x-gzip`, possibly several members.
    Gzip,
    /// `br`.
    Brotli,
    /// `deflate`: zlib-wrapped as the RFC says, or raw deflate as some servers send.
    Deflate,
}

impl Encoding {
    /// The encoding named by a `Content-Encoding` value. Absent, `identity` and
    /// unknown names are [`Encoding::Identity`] (the raw bytes are kept);
    /// `identity` inside a list is ignored. Two or more encodings applied in turn
    /// (`gzip, gzip`, `gzip, br`) are an error: they are not decoded, and keeping
    /// the still-encoded bytes as the page would store garbage without a word.
    pub(crate) fn from_header(value: Option<&HeaderValue>) -> Result<Encoding, String> {
        let Some(value) = value.and_then(|value| value.to_str().ok()) else {
            return Ok(Encoding::Identity);
        };
        let codings: Vec<&str> = value
            .split(',')
            .map(str::trim)
            .filter(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case("identity"))
            .collect();
        let [coding] = codings[..] else {
            return if codings.is_empty() {
                Ok(Encoding::Identity)
            } else {
                Err(format!(
                    "Content-Encoding {value:?} applies several encodings in turn, which are not decoded"
                ))
            };
        };
        Ok(
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                Encoding::Gzip
            } else if coding.eq_ignore_ascii_case("br") {
                Encoding::Brotli
            } else if coding.eq_ignore_ascii_case("deflate") {
                Encoding::Deflate
            } else {
                Encoding::Identity
            },
        )
    }
}

/// Why a body could not be read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// No chunk arrived within the read timeout.
    Timeout,
    /// The HTTP stack reported an error (reset, truncated body, protocol error).
    Read {
        /// The error.
        source: hyper::Error,
        /// Raw bytes received before it.
        raw_len: u64,
    },
    /// The decoder rejected the bytes.
    Decode(io::Error),
}

/// A body as read.
#[derive(Debug)]
pub(crate) struct Decoded {
    /// Decoded bytes, at most the limit.
    pub(crate) body: Bytes,
    /// The decoded body was longer than the limit and was cut.
    pub(crate) truncated: bool,
    /// The raw body was read to its end, so `raw_len` is its full length.
    pub(crate) complete: bool,
    /// Raw (still encoded) bytes received.
    pub(crate) raw_len: u64,
    /// With capture asked: the raw bytes received (de-chunked, still encoded),
    /// and whether they were cut short of what was received.
    pub(crate) raw: Option<(Bytes, bool)>,
}

/// The hyper body as a byte source with a read timeout per chunk.
///
/// On failure it returns a bare `io::Error` and keeps the real cause in
/// `failure`, so errors that pass through a decoder can still be told apart
/// from the decoder's own.
struct RawBody {
    body: Incoming,
    /// Unconsumed rest of the current chunk (for `AsyncBufRead`).
    chunk: Bytes,
    read_timeout: Duration,
    /// Fires when the next chunk is overdue; reset whenever one arrives.
    deadline: Pin<Box<Sleep>>,
    raw_len: u64,
    failure: Option<BodyError>,
    /// The raw bytes received so far, when they are kept (at most `capture_cap`).
    capture: Option<BytesMut>,
    capture_cap: usize,
    /// More raw bytes came than `capture_cap`.
    capture_cut: bool,
}

impl RawBody {
    fn new(body: Incoming, read_timeout: Duration) -> RawBody {
        RawBody {
            body,
            chunk: Bytes::new(),
            read_timeout,
            deadline: Box::pin(tokio::time::sleep(read_timeout)),
            raw_len: 0,
            failure: None,
            capture: None,
            capture_cap: 0,
            capture_cut: false,
        }
    }

    /// Keeps every raw chunk from now on, at most `cap` bytes.
    fn keep_raw(&mut self, cap: usize) {
        self.capture = Some(BytesMut::new());
        self.capture_cap = cap;
    }

    /// The raw bytes kept, and whether they were cut.
    fn take_raw(&mut self) -> Option<(Bytes, bool)> {
        let raw = self.capture.take()?;
        Some((raw.freeze(), self.capture_cut))
    }

    /// The next non-empty data chunk, `None` at the end of the body.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        if self.failure.is_some() {
            return Poll::Ready(Err(io::Error::other("body already failed")));
        }
        loop {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if data.is_empty() {
                        continue;
                    }
                    self.raw_len += data.len() as u64;
                    if let Some(kept) = self.capture.as_mut() {
                        let room = self.capture_cap.saturating_sub(kept.len());
                        if data.len() > room {
                            self.capture_cut = true;
                        }
                        kept.extend_from_slice(&data[..data.len().min(room)]);
                    }
                    let next = Instant::now() + self.read_timeout;
                    self.deadline.as_mut().reset(next);
                    return Poll::Ready(Ok(Some(data)));
                }
                Poll::Ready(Some(Err(error))) => {
                    self.failure = Some(BodyError::Read {
                        source: error,
                        raw_len: self.raw_len,
                    });
                    return Poll::Ready(Err(io::Error::other("body read failed")));
                }
                Poll::Ready(None) => return Poll::Ready(Ok(None)),
                Poll::Pending => {
                    ready!(self.deadline.as_mut().poll(cx));
                    self.failure = Some(BodyError::Timeout);
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "body read timed out",
                    )));
                }
            }
        }
    }

    async fn next_chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        if !self.chunk.is_empty() {
            return Ok(Some(std::mem::take(&mut self.chunk)));
        }
        poll_fn(|cx| self.poll_chunk(cx))
            .await
            .map_err(|error| self.failure(error))
    }

    /// The recorded cause of a failure, or `error` as a decoding error.
    fn failure(&mut self, error: io::Error) -> BodyError {
        self.failure.take().unwrap_or(BodyError::Decode(error))
    }

    /// Reads and drops the rest of the body, at most `max` bytes; true if the end was seen.
    async fn drain(&mut self, max: u64) -> Result<bool, BodyError> {
        let stop = self.raw_len.saturating_add(max);
        while self.raw_len <= stop {
            if self.next_chunk().await?.is_none() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl AsyncRead for RawBody {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let available = ready!(Pin::new(&mut *this).poll_fill_buf(cx))?;
        let n = available.len().min(buf.remaining());
        buf.put_slice(&available[..n]);
        this.chunk.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncBufRead for RawBody {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        if this.chunk.is_empty() {
            match ready!(this.poll_chunk(cx))? {
                Some(chunk) => this.chunk = chunk,
                None => return Poll::Ready(Ok(&[])),
            }
        }
        Poll::Ready(Ok(&this.chunk))
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        self.get_mut().chunk.advance(amt);
    }
}

/// Reads `body` to its end or to `limit` decoded bytes, undoing `encoding`.
///
/// `length_hint` is the declared `Content-Length`, used only to size the buffer.
/// With `capture`, the raw bytes are kept too ([`Decoded::raw`]; for an
/// unencoded body they are the body itself, not copied; an encoded one keeps
/// at most `limit` + 64 KiB of them).
pub(crate) async fn read_body(
    body: Incoming,
    encoding: Encoding,
    limit: usize,
    read_timeout: Duration,
    length_hint: Option<u64>,
    capture: bool,
) -> Result<Decoded, BodyError> {
    let mut raw = RawBody::new(body, read_timeout);
    if encoding == Encoding::Identity {
        let hint = length_hint.unwrap_or(0);
        let (body, truncated) = read_identity(&mut raw, limit, clamp_hint(hint, limit)).await?;
        return Ok(Decoded {
            raw: capture.then(|| (body.clone(), truncated)),
            body,
            truncated,
            complete: !truncated,
            raw_len: raw.raw_len,
        });
    }
    if capture {
        raw.keep_raw(limit.saturating_add(MAX_DRAIN as usize));
    }
    let hint = clamp_hint(length_hint.unwrap_or(0).saturating_mul(RATIO_GUESS), limit);
    let peek = raw
        .fill_buf()
        .await
        .map(|head| (!head.is_empty()).then(|| looks_like_zlib(head)));
    let Some(zlib) = peek.map_err(|error| raw.failure(error))? else {
        return Ok(Decoded {
            body: Bytes::new(),
            truncated: false,
            complete: true,
            raw_len: 0,
            raw: raw.take_raw(),
        });
    };
    let result = match encoding {
        Encoding::Gzip => {
            let mut decoder = GzipDecoder::new(&mut raw);
            decoder.multiple_members(true);
            read_limited(decoder, limit, hint).await
        }
        Encoding::Brotli => read_limited(BrotliDecoder::new(&mut raw), limit, hint).await,
        Encoding::Deflate if zlib => read_limited(ZlibDecoder::new(&mut raw), limit, hint).await,
        Encoding::Deflate | Encoding::Identity => {
            read_limited(DeflateDecoder::new(&mut raw), limit, hint).await
        }
    };
    let (body, truncated) = result.map_err(|error| raw.failure(error))?;
    // Raw bytes the decoder took; anything after them is not part of the stream.
    let used = raw.raw_len - raw.chunk.len() as u64;
    let complete = !truncated && raw.drain(MAX_DRAIN).await?;
    if !truncated && raw.raw_len > used {
        return Err(BodyError::Decode(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} bytes after the end of the {encoding:?} data",
                raw.raw_len - used
            ),
        )));
    }
    let raw_bytes = raw.take_raw().map(|(bytes, cut)| (bytes, cut || !complete));
    Ok(Decoded {
        body,
        truncated,
        complete,
        raw_len: raw.raw_len,
        raw: raw_bytes,
    })
}

/// A buffer capacity from a size hint: at least a small step, at most the limit.
fn clamp_hint(hint: u64, limit: usize) -> usize {
    usize::try_from(hint)
        .unwrap_or(usize::MAX)
        .clamp(MIN_GROWTH.min(limit), limit)
}

/// Decodes a body kept as it was received (a WARC record's, still in the
/// `Content-Encoding` its headers name) as [`read_body`] decodes one from the
/// wire: the same decoders, at most `limit` bytes; true when it was cut.
pub(crate) async fn decode_stored(
    raw: &[u8],
    encoding: Encoding,
    limit: usize,
) -> io::Result<(Bytes, bool)> {
    let hint = clamp_hint((raw.len() as u64).saturating_mul(RATIO_GUESS), limit);
    match encoding {
        _ if raw.is_empty() => Ok((Bytes::new(), false)),
        Encoding::Identity => {
            let cut = raw.len() > limit;
            Ok((Bytes::copy_from_slice(&raw[..raw.len().min(limit)]), cut))
        }
        Encoding::Gzip => {
            let mut decoder = GzipDecoder::new(raw);
            decoder.multiple_members(true);
            read_limited(decoder, limit, hint).await
        }
        Encoding::Brotli => read_limited(BrotliDecoder::new(raw), limit, hint).await,
        Encoding::Deflate if looks_like_zlib(raw) => {
            read_limited(ZlibDecoder::new(raw), limit, hint).await
        }
        Encoding::Deflate => read_limited(DeflateDecoder::new(raw), limit, hint).await,
    }
}

/// True when `head` starts with a zlib header (RFC 1950: deflate method, check bits).
fn looks_like_zlib(head: &[u8]) -> bool {
    match head {
        [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
        _ => true,
    }
}

/// An unencoded body: a single chunk is returned without copying.
async fn read_identity(
    raw: &mut RawBody,
    limit: usize,
    hint: usize,
) -> Result<(Bytes, bool), BodyError> {
    let Some(first) = raw.next_chunk().await? else {
        return Ok((Bytes::new(), false));
    };
    if first.len() > limit {
        return Ok((first.slice(..limit), true));
    }
    let Some(mut chunk) = raw.next_chunk().await? else {
        return Ok((first, false));
    };
    let mut out = BytesMut::with_capacity(hint.max(first.len() + chunk.len()).min(limit));
    out.extend_from_slice(&first);
    loop {
        let room = limit - out.len();
        if chunk.len() > room {
            out.extend_from_slice(&chunk[..room]);
            return Ok((out.freeze(), true));
        }
        out.extend_from_slice(&chunk);
        match raw.next_chunk().await? {
            Some(next) => chunk = next,
            None => return Ok((out.freeze(), false)),
        }
    }
}

/// Reads at most `limit + 1` bytes from `reader`; true in the pair when there
/// were more than `limit` (the result is then cut to `limit`).
async fn read_limited<R: AsyncRead + Unpin>(
    reader: R,
    limit: usize,
    hint: usize,
) -> io::Result<(Bytes, bool)> {
    let cap = limit.saturating_add(1);
    let mut reader = reader.take(cap as u64);
    let mut out = BytesMut::with_capacity(hint.min(cap));
    loop {
        if out.len() == out.capacity() {
            let step = out.len().max(MIN_GROWTH).min(cap - out.len());
            out.reserve(step.max(1));
        }
        if reader.read_buf(&mut out).await? == 0 {
            break;
        }
    }
    let truncated = out.len() > limit;
    out.truncate(limit);
    Ok((out.freeze(), truncated))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_from_header() {
        let parse = |value: &str| {
            Encoding::from_header(Some(&HeaderValue::from_str(value).unwrap())).unwrap()
        };
        assert_eq!(parse("gzip"), Encoding::Gzip);
        assert_eq!(parse(" X-GZIP "), Encoding::Gzip);
        assert_eq!(parse("br"), Encoding::Brotli);
        assert_eq!(parse("Deflate"), Encoding::Deflate);
        assert_eq!(parse("identity"), Encoding::Identity);
        assert_eq!(parse("gzip, identity"), Encoding::Gzip);
        assert_eq!(parse("zstd"), Encoding::Identity);
        assert_eq!(Encoding::from_header(None).unwrap(), Encoding::Identity);
        for stacked in ["gzip, br", "gzip, gzip", "zstd,gzip"] {
            let error = Encoding::from_header(Some(&HeaderValue::from_static(stacked)));
            assert!(error.is_err_and(|e| e.contains(stacked)), "{stacked}");
        }
    }

    #[test]
    fn zlib_sniffing() {
        assert!(looks_like_zlib(&[0x78, 0x9c, 0]));
        assert!(looks_like_zlib(&[0x78, 0x01]));
        assert!(!looks_like_zlib(&[0xcb, 0x48]));
        assert!(!looks_like_zlib(&[0x1f, 0x8b]));
    }

    #[test]
    fn hint_is_clamped() {
        assert_eq!(clamp_hint(0, 1 << 20), MIN_GROWTH);
        assert_eq!(clamp_hint(u64::MAX, 1 << 20), 1 << 20);
        assert_eq!(clamp_hint(100, 10), 10);
    }

    #[tokio::test]
    async fn read_limited_cuts_at_limit() {
        let data = vec![7u8; 100_000];
        let (body, truncated) = read_limited(&data[..], 50_000, 0).await.unwrap();
        assert!(truncated);
        assert_eq!(body.len(), 50_000);
        let (body, truncated) = read_limited(&data[..], 100_000, 10).await.unwrap();
        assert!(!truncated);
        assert_eq!(body.len(), 100_000);
    }
}
