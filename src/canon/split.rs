//! Reading a URL string without the URL parser, for the strings the parser would
//! leave exactly as they are.
//!
//! [`split`] recognizes a conservative subset of absolute `http`/`https` URLs: those
//! for which `Url::parse(s)` succeeds and serializes to `s` byte for byte, so that the
//! parsed URL's host, port, path, query and fragment are plain slices of `s`. Links a
//! crawler extracts are nearly all of this shape, and splitting one costs a single pass
//! over its bytes where a parse costs an allocation, IDNA and host processing.
//! Anything outside the subset gives `None` and the caller parses it, so the
//! subset only has to be *sound*, never complete. Depends on nothing.
//!
//! # The subset
//! `scheme "://" host [":" port] path ["?" query] ["#" fragment]` where
//! - scheme is `http` or `https`, lower case;
//! - host is non-empty labels of `a-z 0-9 -` joined by `.`, no label starting with
//!   `xn--`; when the last label could be a number (all digits, or `0x` and hex
//!   digits) the host must be a dotted quad in the parser's own form (four decimal
//!   parts `0..=255` without leading zeros);
//! - port, when present, is 1–5 digits without a leading zero, at most 65535, and not
//!   the scheme's default (80, 443);
//! - path starts with `/`, holds only unreserved characters, sub-delims, `:`, `@`,
//!   `/` and `%` followed by two hex digits, no escape of `.` (`%2e`), and no `.` or
//!   `..` segment;
//! - query and fragment hold only unreserved characters, sub-delims except `'`, `:`,
//!   `@`, `/`, `?` and `%` with two hex digits.
//!
//! No user info, no IP literal, no backslash, whitespace, control or non-ASCII byte.
//! Each rule removes a case where the parser rewrites its input. Soundness is
//! property-tested against the `url` crate in `canon/tests.rs`.

/// The parts of a URL accepted by [`split`], as slices of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts<'a> {
    /// The whole input.
    pub text: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// The host, as `Url::host_str` gives it.
    pub host: &'a str,
    /// The explicit port (never the default one), as `Url::port` gives it.
    pub port: Option<u16>,
    /// Where the path starts in `text` (just after host and port).
    pub path_start: usize,
    /// The path, as `Url::path` gives it.
    pub path: &'a str,
    /// The query without `?`, as `Url::query` gives it.
    pub query: Option<&'a str>,
    /// The fragment without `#`, as `Url::fragment` gives it.
    pub fragment: Option<&'a str>,
}

/// The parts of `s` when it is in the subset the module doc describes: then
/// `Url::parse(s)` succeeds, serializes to `s`, and its parts equal these.
pub fn split(s: &str) -> Option<Parts<'_>> {
    let (scheme, host_start) = match s.as_bytes().get(..8) {
        Some(b"https://") => ("https", 8),
        _ if s.starts_with("http://") => ("http", 7),
        _ => return None,
    };
    let bytes = s.as_bytes();
    let path_start = host_start + find(&bytes[host_start..], b'/')?;
    let authority = &s[host_start..path_start];
    let (host, port) = match find(authority.as_bytes(), b':') {
        Some(colon) => (
            &authority[..colon],
            Some(port_number(&authority[colon + 1..], scheme)?),
        ),
        None => (authority, None),
    };
    if !is_plain_host(host) {
        return None;
    }
    let rest = &bytes[path_start..];
    let fragment_at = find(rest, b'#').map(|i| path_start + i);
    let before_fragment = fragment_at.unwrap_or(s.len());
    let query_at = find(&bytes[path_start..before_fragment], b'?').map(|i| path_start + i);
    let path = &s[path_start..query_at.unwrap_or(before_fragment)];
    let query = query_at.map(|q| &s[q + 1..before_fragment]);
    let fragment = fragment_at.map(|f| &s[f + 1..]);
    let plain = is_plain_path(path)
        && query.is_none_or(is_plain_query)
        && fragment.is_none_or(is_plain_query);
    plain.then_some(Parts {
        text: s,
        scheme,
        host,
        port,
        path_start,
        path,
        query,
        fragment,
    })
}

/// The index of the first `byte` in `bytes`: a plain loop, cheaper than `str::find`
/// on strings this short.
pub fn find(bytes: &[u8], byte: u8) -> Option<usize> {
    bytes.iter().position(|&b| b == byte)
}

/// The port, when written as the parser writes it and not the default one.
fn port_number(digits: &str, scheme: &str) -> Option<u16> {
    let bytes = digits.as_bytes();
    let plain =
        (1..=5).contains(&bytes.len()) && bytes[0] != b'0' && bytes.iter().all(u8::is_ascii_digit);
    if !plain {
        return None;
    }
    let port = u16::try_from(decimal(bytes)).ok()?;
    let default = if scheme == "https" { 443 } else { 80 };
    (port != default).then_some(port)
}

/// The value of at most five ASCII digits (checked by the caller).
fn decimal(digits: &[u8]) -> u32 {
    digits
        .iter()
        .fold(0, |value, &d| value * 10 + u32::from(d - b'0'))
}

/// A lower-case ASCII domain the parser keeps as is, or a dotted quad in its form.
fn is_plain_host(host: &str) -> bool {
    let bytes = host.as_bytes();
    let mut labels = 0;
    let mut start = 0;
    let last = loop {
        let end = find(&bytes[start..], b'.').map_or(bytes.len(), |i| start + i);
        let label = &bytes[start..end];
        let fine = !label.is_empty()
            && !label.starts_with(b"xn--")
            && label
                .iter()
                .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !fine {
            return false;
        }
        labels += 1;
        if end == bytes.len() {
            break label;
        }
        start = end + 1;
    };
    let numeric = last.iter().all(u8::is_ascii_digit)
        || last
            .strip_prefix(b"0x")
            .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit));
    !numeric || (labels == 4 && bytes.split(|&b| b == b'.').all(is_quad_part))
}

/// One part of a dotted quad as the parser writes it: `0..=255`, no leading zero.
fn is_quad_part(part: &[u8]) -> bool {
    (part.len() == 1 || part.first() != Some(&b'0'))
        && (1..=3).contains(&part.len())
        && part.iter().all(u8::is_ascii_digit)
        && decimal(part) <= 255
}

/// Character classes: bit 0 allowed in a path, bit 1 in a query or fragment.
const CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let unreserved = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~');
        let common = unreserved || matches!(c, b'!' | b'$' | b'&' | b'(' | b')' | b'*');
        let common = common || matches!(c, b'+' | b',' | b';' | b'=' | b':' | b'@' | b'/');
        let path = common || c == b'\'';
        let query = common || c == b'?';
        table[b] = (path as u8) | ((query as u8) << 1);
        b += 1;
    }
    table
};
const PATH: u8 = 1;
const QUERY: u8 = 2;

/// Only characters of class `class` and valid escapes; in a path (`PATH`) also no
/// `%2e`, and no `.` or `..` segment unless `dots` allows them.
fn is_plain(part: &str, class: u8, dots: bool) -> bool {
    let bytes = part.as_bytes();
    let mut i = 0;
    let mut segment = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let Some(&[hi, lo]) = bytes.get(i + 1..i + 3) else {
                return false;
            };
            let dot = class == PATH && hi == b'2' && (lo | 0x20) == b'e';
            if dot || !hi.is_ascii_hexdigit() || !lo.is_ascii_hexdigit() {
                return false;
            }
            i += 3;
            continue;
        }
        if CLASS[usize::from(b)] & class == 0 {
            return false;
        }
        if b == b'/' && class == PATH {
            if !dots && is_dots(&bytes[segment..i]) {
                return false;
            }
            segment = i + 1;
        }
        i += 1;
    }
    dots || class != PATH || !is_dots(&bytes[segment..])
}

fn is_dots(segment: &[u8]) -> bool {
    segment == b"." || segment == b".."
}

/// A path the parser keeps as is: allowed characters, no dot segment, no `%2e`.
fn is_plain_path(path: &str) -> bool {
    path.starts_with('/') && is_plain(path, PATH, false)
}

/// Only characters a path of the subset may hold, and no `%2e` (an escaped dot that
/// the parser may treat as a dot segment). Literal `.` and `..` segments may occur.
pub fn is_plain_path_text(path: &str) -> bool {
    is_plain(path, PATH, true)
}

/// Only characters a query of the subset may hold.
pub fn is_plain_query(query: &str) -> bool {
    is_plain(query, QUERY, true)
}
