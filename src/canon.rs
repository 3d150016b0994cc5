//! w3lib-style URL canonicalization: every rule lives in this one module.
//!
//! Two URLs that a server would treat as the same resource should canonicalize to the
//! same string, because the canonical form is what [`crate::fingerprint`] hashes and the
//! seen set dedups on. The module depends only on the `url` crate (and `tracing`); it
//! knows nothing about requests, storage or legs.
//!
//! # Rules ([`Rules::default`], the fingerprint set)
//! What the `url` crate's parser already does (WHATWG URL standard), and which the test
//! table pins down:
//! - scheme and (for special schemes such as http, https, ftp) host are lower-cased;
//!   IDN hosts become punycode (`bücher.example` → `xn--bcher-kva.example`); IPv6 hosts
//!   are compressed and lower-cased (`[2001:DB8:0:0:0:0:0:1]` → `[2001:db8::1]`);
//! - default ports are removed (80 for http and ws, 443 for https and wss, 21 for ftp);
//! - dot segments are resolved, including their encoded forms (`%2E%2E`);
//! - an empty path becomes `/` for special schemes;
//! - non-ASCII characters and spaces in path and query are percent-encoded as UTF-8.
//!
//! What this module adds:
//! - the host of a non-special URL (`foo://Example.COM/`) is ASCII lower-cased too;
//! - percent-encoding is normalized ([`Rules::normalize_percent`]) in userinfo, host,
//!   path, query and kept fragment: an escape of an unreserved character
//!   (`A-Z a-z 0-9 - . _ ~`) is decoded (`%7E` → `~`), every other valid escape gets
//!   upper-case hex (`%2f` → `%2F`). Reserved characters are never decoded (`%2F`,
//!   `%26`, `%3D`, `%2B` keep their meaning). Invalid escapes (`%zz`, a trailing `%4`)
//!   are kept byte for byte;
//! - the fragment is dropped ([`Rules::drop_fragment`]);
//! - query arguments (`&`-separated pieces) are sorted by key with a **stable** sort
//!   ([`Rules::sort_query`]): the key is the piece up to its first `=` (the whole piece
//!   when there is none), compared byte-wise in its **raw form after percent
//!   normalization** (so `%62` and `b` sort alike when normalization is on; `+` and
//!   `%20` are different keys). Repeated keys keep their relative order;
//! - arguments whose key matches one of [`Rules::strip_query_params`] are removed;
//! - empty pieces (`a=1&&b=2&`) are dropped and an empty query (`?` alone) is removed.
//!   Arguments with empty values are kept exactly as written: `a=` stays `a=`, `b`
//!   stays `b`; `+` is never turned into `%20` or back.
//!
//! Query rules apply only to URLs with a hierarchical path. For URLs with an opaque
//! path (`mailto:`, `data:`, `javascript:`) the query is part of the payload, so only
//! percent normalization and fragment removal apply. Nothing here panics on any input.
//!
//! # Differences from `w3lib.url.canonicalize_url` (w3lib 2.5.0)
//! w3lib agrees on 41 of the test table's 58 cases (checked with Python, which the
//! tests do not need). The differences, all deliberate:
//! - w3lib sorts by (key, value); we sort by key only, stably, so the order of
//!   repeated keys (which servers may rely on) is preserved: `b=2&a=3&b=1&a=1` gives
//!   `a=1&a=3&b=1&b=2` there and `a=3&a=1&b=2&b=1` here;
//! - w3lib decodes and re-encodes the whole query: `a=&b` becomes `a=&b=`, `%20`
//!   becomes `+`, `a=b=c` becomes `a=b%3Dc`, a stray `%4` becomes `%254`, and reserved
//!   characters in values become escapes (`/b:c@d` → `%2Fb%3Ac%40d`). We keep every
//!   argument as written except for the percent-normalization rule above;
//! - w3lib decodes most escapes in the path (`%21` → `!`, `%3A` → `:`); we decode only
//!   unreserved characters, as RFC 3986 §6.2.2.2 allows;
//! - w3lib keeps default ports (`:80`, `:443`, `:21`) and leading zeros of IPv4
//!   addresses; we follow the `url` crate and normalize both;
//! - w3lib sorts `mailto:` queries and drops empty pieces of `data:` payloads; we leave
//!   opaque-path queries alone, and lower-case non-special hosts after decoding.
//!
//! # Invariants
//! - `canonicalize(&canonicalize(u)) == canonicalize(u)` (idempotence, property-tested);
//! - `canonicalize_str(s)` is byte-equal to `canonicalize(&Url::parse(s)?).as_str()`;
//! - the output of [`canonicalize`] is ASCII whenever the input URL's serialization is.
//!
//! # Speed
//! Canonicalization runs for every extracted link. It writes the canonical serialization
//! once into one `String` (no allocation beyond it unless the query must be sorted or
//! stripped). [`canonicalize_with`] returns a clone when nothing changed, and otherwise
//! patches a clone with the `url` crate's setters, which re-parse only the changed
//! path, query or fragment; only a changed userinfo or host escape costs a full
//! re-parse. [`canonicalize_str`] never re-parses, and does not parse at all when
//! [`split::split`] can read its input (a plain `http`/`https` URL that the parser would
//! leave as it is, the common case for extracted links); [`is_canonical`] answers
//! "would canonicalization leave this string alone?" the same way. Both give exactly
//! what the parsing path gives (property-tested).

use std::borrow::Cow;

use url::{Position, Url};

pub mod split;

/// Which canonicalization steps apply on top of what the `url` parser always does.
///
/// `Rules::default()` turns on every rule used for fingerprints and leaves the strip
/// list empty.
#[derive(Clone, Debug)]
pub struct Rules {
    /// Sort query arguments by key (stable; repeated keys keep their order).
    pub sort_query: bool,
    /// Decode escapes of unreserved characters and upper-case all other escapes.
    pub normalize_percent: bool,
    /// Remove the `#fragment`.
    pub drop_fragment: bool,
    /// Remove query arguments whose key matches one of these glob patterns
    /// (`"utm_*"`, `"sessionid"`). `*` matches any run of characters (also empty);
    /// every other character matches itself, case-sensitively. Keys are matched in the
    /// form they are written in the output (after percent normalization when it is on).
    pub strip_query_params: Vec<String>,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules {
            sort_query: true,
            normalize_percent: true,
            drop_fragment: true,
            strip_query_params: Vec::new(),
        }
    }
}

/// Why [`canonicalize_str`] could not canonicalize its input.
#[derive(Debug, thiserror::Error)]
pub enum CanonError {
    /// The input is not an absolute URL.
    #[error("cannot canonicalize {input:?}: {source}")]
    Parse {
        /// The string that was given.
        input: String,
        /// What the URL parser objected to.
        source: url::ParseError,
    },
}

/// Canonicalizes `url` with [`Rules::default`].
pub fn canonicalize(url: &Url) -> Url {
    canonicalize_with(url, &Rules::default())
}

/// Canonicalizes `url` with the given rules.
pub fn canonicalize_with(url: &Url, rules: &Rules) -> Url {
    let canonical = Canonical::of(&Pieces::of_url(url), rules);
    if canonical.text == url.as_str() {
        return url.clone();
    }
    if let Some(out) = canonical.apply_to(url) {
        return out;
    }
    match Url::parse(&canonical.text) {
        Ok(out) => out,
        Err(error) => {
            // Cannot happen: the canonical string only differs from a valid
            // serialization in ways the parser accepts. Keep the input rather than panic.
            let text = &canonical.text;
            tracing::warn!(url = url.as_str(), %text, %error, "canonical URL does not re-parse");
            url.clone()
        }
    }
}

/// Parses `input` as an absolute URL and returns its canonical serialization under
/// [`Rules::default`].
///
/// Inputs that [`split::split`] accepts are not parsed at all.
pub fn canonicalize_str(input: &str) -> Result<String, CanonError> {
    let rules = Rules::default();
    if let Some(parts) = split::split(input) {
        return Ok(Canonical::of(&Pieces::of_parts(&parts), &rules).text);
    }
    match Url::parse(input) {
        Ok(url) => Ok(Canonical::of(&Pieces::of_url(&url), &rules).text),
        Err(source) => Err(CanonError::Parse {
            input: input.to_owned(),
            source,
        }),
    }
}

/// True when `input` is an absolute URL that [`canonicalize_with`] leaves exactly as it
/// is, decided without parsing. False means "not known": the input is outside the
/// subset [`split::split`] reads, or canonicalization changes it.
pub fn is_canonical(input: &str, rules: &Rules) -> bool {
    split::split(input).is_some_and(|parts| parts_are_canonical(&parts, rules))
}

/// `input` without its `user:pass@` credentials, so that no stored URL, item or
/// dump holds them and no request sends them (to the host they name, or to
/// another one a redirect points at). Credentials are not a canonicalization rule
/// but a policy of the engine and the fetcher, which call this on every seed, link
/// and redirect target. An input without an `@`, or that does not parse, comes
/// back unchanged (borrowed); one with credentials is re-serialized by the parser.
pub fn strip_credentials(input: &str) -> Cow<'_, str> {
    if !input.contains('@') {
        return Cow::Borrowed(input);
    }
    match Url::parse(input) {
        Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
            // Both fail only for URLs that cannot have credentials, which have none.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            Cow::Owned(url.into())
        }
        _ => Cow::Borrowed(input),
    }
}

/// Whether `Canonical::of(&Pieces::of_parts(parts), rules).text == parts.text`, decided
/// without writing it. A split URL has no userinfo, a lower-case host without escapes
/// and a hierarchical path, so only path, query and fragment can change.
fn parts_are_canonical(parts: &split::Parts<'_>, rules: &Rules) -> bool {
    let norm = rules.normalize_percent;
    if norm && has_changing_escape(parts.path) {
        return false;
    }
    if let Some(query) = parts.query {
        // Empty pieces (and so an empty query) are dropped; then the written query
        // equals the input's, so sorting and stripping change it exactly when they
        // reorder or remove a piece.
        let pieces_kept = !query.is_empty()
            && !query.starts_with('&')
            && !query.ends_with('&')
            && !query.contains("&&");
        if !pieces_kept || (norm && has_changing_escape(query)) {
            return false;
        }
        let strips = !rules.strip_query_params.is_empty()
            && split_byte(query, b'&').any(|piece| stripped(piece, rules));
        if strips || (rules.sort_query && !is_sorted_by_key(query)) {
            return false;
        }
    }
    match parts.fragment {
        Some(_) if rules.drop_fragment => false,
        Some(fragment) => !norm || !has_changing_escape(fragment),
        None => true,
    }
}

/// Whether [`push_part`] with normalization would change `part`: a valid escape of an
/// unreserved character, or one with a lower-case hex digit.
fn has_changing_escape(part: &str) -> bool {
    let bytes = part.as_bytes();
    let mut rest = bytes;
    while let Some(i) = rest.iter().position(|&b| b == b'%') {
        if let Some(&[hi, lo]) = rest.get(i + 1..i + 3)
            && let (Some(h), Some(l)) = (hex(hi), hex(lo))
        {
            if is_unreserved(h << 4 | l) || hi.is_ascii_lowercase() || lo.is_ascii_lowercase() {
                return true;
            }
            rest = &rest[i + 3..];
            continue;
        }
        rest = &rest[i + 1..];
    }
    false
}

/// The serialized parts of a URL that canonicalization reads.
struct Pieces<'a> {
    /// Scheme, `:`, `//` when there is a host, and userinfo with its `@`.
    before_host: &'a str,
    host: &'a str,
    /// `:port`, or nothing.
    port: &'a str,
    path: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
    /// The path is opaque (`mailto:`, `data:`): the query is payload.
    opaque: bool,
}

impl<'a> Pieces<'a> {
    fn of_url(url: &'a Url) -> Pieces<'a> {
        Pieces {
            before_host: &url[..Position::BeforeHost],
            host: &url[Position::BeforeHost..Position::AfterHost],
            port: &url[Position::AfterHost..Position::BeforePath],
            path: url.path(),
            query: url.query(),
            fragment: url.fragment(),
            opaque: url.cannot_be_a_base(),
        }
    }

    /// The length of the serialization the pieces come from.
    fn len(&self) -> usize {
        let optional = |part: Option<&str>| part.map_or(0, |p| p.len() + 1);
        self.before_host.len()
            + self.host.len()
            + self.port.len()
            + self.path.len()
            + optional(self.query)
            + optional(self.fragment)
    }

    /// The same pieces as [`Pieces::of_url`] gives for `Url::parse(parts.text)`.
    fn of_parts(parts: &split::Parts<'a>) -> Pieces<'a> {
        let text = parts.text;
        let host_start = parts.scheme.len() + 3;
        let host_end = host_start + parts.host.len();
        Pieces {
            before_host: &text[..host_start],
            host: parts.host,
            port: &text[host_end..parts.path_start],
            path: parts.path,
            query: parts.query,
            fragment: parts.fragment,
            opaque: false,
        }
    }
}

/// A canonical serialization and where its parts are: `text[..path.start]` is
/// scheme, userinfo, host and port, `text[path]` the path, `text[path.end..query_end]`
/// the `?query` (or nothing) and `text[query_end..]` the `#fragment` (or nothing).
struct Canonical {
    text: String,
    path: std::ops::Range<usize>,
    query_end: usize,
}

impl Canonical {
    /// Writes the canonical serialization of a URL from its pieces, without parsing.
    fn of(url: &Pieces<'_>, rules: &Rules) -> Canonical {
        let norm = rules.normalize_percent;
        let mut out = String::with_capacity(url.len());
        push_part(&mut out, url.before_host, norm);
        let host_start = out.len();
        push_part(&mut out, url.host, norm);
        lowercase_outside_escapes(&mut out, host_start);
        out.push_str(url.port);
        let path_start = out.len();
        push_part(&mut out, url.path, norm);
        let mut path_end = out.len();
        if let Some(query) = url.query {
            if url.opaque {
                out.push('?');
                push_part(&mut out, query, norm);
            } else {
                push_query(&mut out, query, rules);
            }
        }
        let mut query_end = out.len();
        match url.fragment {
            Some(fragment) if !rules.drop_fragment => {
                out.push('#');
                push_part(&mut out, fragment, norm);
            }
            _ if url.opaque && query_end == path_end => {
                // The parser strips trailing spaces of an opaque path once nothing follows.
                out.truncate(out.trim_end_matches(' ').len());
                path_end = out.len();
                query_end = out.len();
            }
            _ => {}
        }
        Canonical {
            text: out,
            path: path_start..path_end,
            query_end,
        }
    }

    /// Turns a clone of `url` into the canonical URL with the `url` crate's setters,
    /// which re-parse only the parts that changed. `None` when the scheme-to-port
    /// prefix changed or the setters would not give exactly `self.text`; the caller
    /// then re-parses the whole text.
    fn apply_to(&self, url: &Url) -> Option<Url> {
        if self.text[..self.path.start] != url[..Position::BeforePath] {
            return None;
        }
        let mut out = url.clone();
        let fragment = self.text[self.query_end..].strip_prefix('#');
        if fragment != url.fragment() {
            out.set_fragment(fragment);
        }
        let query = self.text[self.path.end..self.query_end].strip_prefix('?');
        if query != url.query() {
            out.set_query(query);
        }
        let path = &self.text[self.path.clone()];
        if path != url.path() {
            out.set_path(path);
        }
        (out.as_str() == self.text).then_some(out)
    }
}

/// Appends `?` and the processed query, or nothing when no argument remains.
fn push_query(out: &mut String, query: &str, rules: &Rules) {
    let mark = out.len();
    out.push('?');
    let start = out.len();
    for piece in split_byte(query, b'&').filter(|piece| !piece.is_empty()) {
        if out.len() > start {
            out.push('&');
        }
        push_part(out, piece, rules.normalize_percent);
    }
    let written = &out[start..];
    let needs_strip = !rules.strip_query_params.is_empty()
        && split_byte(written, b'&').any(|piece| stripped(piece, rules));
    let needs_sort = rules.sort_query && !is_sorted_by_key(written);
    if needs_strip || needs_sort {
        let mut pieces: Vec<&str> = split_byte(written, b'&')
            .filter(|piece| !needs_strip || !stripped(piece, rules))
            .collect();
        if rules.sort_query {
            // `sort_by` is stable: repeated keys keep their relative order.
            pieces.sort_by(|a, b| key(a).cmp(key(b)));
        }
        let rebuilt = pieces.join("&");
        out.truncate(start);
        out.push_str(&rebuilt);
    }
    if out.len() == start {
        out.truncate(mark);
    }
}

/// The key of a query piece: everything before its first `=`.
fn key(piece: &str) -> &str {
    find_byte(piece, b'=').map_or(piece, |i| &piece[..i])
}

/// The index of the first `byte` (ASCII) in `s`. A plain loop: the strings are short,
/// and `str::find(char)` costs more in setup than it saves.
fn find_byte(s: &str, byte: u8) -> Option<usize> {
    s.bytes().position(|b| b == byte)
}

/// Splits `s` at every `sep` (ASCII); like `str::split`, cheaper on short strings.
fn split_byte(s: &str, sep: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let current = rest?;
        match find_byte(current, sep) {
            Some(i) => {
                rest = Some(&current[i + 1..]);
                Some(&current[..i])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// Whether the `&`-joined pieces are already in key order.
fn is_sorted_by_key(query: &str) -> bool {
    let mut pieces = split_byte(query, b'&');
    let Some(mut previous) = pieces.next() else {
        return true;
    };
    for piece in pieces {
        if key(previous) > key(piece) {
            return false;
        }
        previous = piece;
    }
    true
}

/// Whether `piece` is removed by the strip list.
fn stripped(piece: &str, rules: &Rules) -> bool {
    let key = key(piece);
    rules
        .strip_query_params
        .iter()
        .any(|pattern| glob_match(pattern.as_bytes(), key.as_bytes()))
}

/// Glob match where `*` matches any run of bytes and every other byte itself.
///
/// Greedy with one backtrack point: linear in practice, `O(p·t)` at worst.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            backtrack = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star, from)) = backtrack {
            p = star + 1;
            t = from + 1;
            backtrack = Some((star, from + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&byte| byte == b'*')
}

/// Appends `part`, normalizing its percent escapes when `normalize` is set.
fn push_part(out: &mut String, part: &str, normalize: bool) {
    let mut rest = part;
    while let (true, Some(i)) = (normalize, find_byte(rest, b'%')) {
        out.push_str(&rest[..i]);
        let escape = match rest.as_bytes().get(i + 1..i + 3) {
            Some(&[hi, lo]) => hex(hi).zip(hex(lo)).map(|(hi, lo)| hi << 4 | lo),
            _ => None,
        };
        // `i + 1` and `i + 3` sit just after ASCII bytes, hence on char boundaries.
        let Some(value) = escape else {
            out.push('%');
            rest = &rest[i + 1..];
            continue;
        };
        if is_unreserved(value) {
            out.push(char::from(value));
        } else {
            out.push('%');
            out.push(char::from(HEX_UPPER[usize::from(value >> 4)]));
            out.push(char::from(HEX_UPPER[usize::from(value & 0xf)]));
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// The value of one hex digit.
fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// RFC 3986 unreserved characters: decoding their escapes never changes meaning.
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

/// ASCII lower-cases `out[from..]` except the two hex digits of each valid escape.
fn lowercase_outside_escapes(out: &mut String, from: usize) {
    if !out[from..].bytes().any(|byte| byte.is_ascii_uppercase()) {
        return;
    }
    let mut start = from;
    while let Some(offset) = out[start..].find('%') {
        let percent = start + offset;
        out[start..percent].make_ascii_lowercase();
        let valid = matches!(out.as_bytes().get(percent + 1..percent + 3),
            Some(&[hi, lo]) if hex(hi).is_some() && hex(lo).is_some());
        // Both ends sit just after ASCII bytes, hence on char boundaries.
        start = percent + if valid { 3 } else { 1 };
    }
    out[start..].make_ascii_lowercase();
}

#[cfg(test)]
mod tests;
