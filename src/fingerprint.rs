//! Request fingerprints: the identity the seen set dedups on.
//!
//! A [`Fingerprint`] is SHA-1 over the method, the canonical URL ([`crate::canon`],
//! default rules), the body, and the headers the crawl opted in to. It depends only on
//! [`crate::request`] and [`crate::canon`]. Fingerprints are stored in the seen set and
//! compared across runs, so **the byte layout below is frozen**: changing it would make
//! every stored crawl re-fetch everything. A new layout would need a new function and a
//! migration of the stored state.
//!
//! # Byte layout (version 1, stable forever)
//! Every *piece* is written as its length in bytes as a big-endian `u64`, then its
//! bytes. The hashed stream is, in order:
//! 1. piece: the method, ASCII upper-cased (`get` → `GET`);
//! 2. piece: the canonical URL from [`crate::canon::canonicalize_str`]; when the URL
//!    does not parse, the raw `request.url` string instead;
//! 3. piece: the body (possibly empty, then just eight zero bytes);
//! 4. for each opted-in header name, ASCII lower-cased, sorted byte-wise and deduped,
//!    that the request carries at least once (names compared case-insensitively with
//!    `request.headers`): a piece with the lower-cased name, then the number of values
//!    as a big-endian `u64`, then one piece per value in the order the values appear in
//!    `request.headers`. Values are hashed as given (no trimming, case kept). Headers
//!    the request lacks contribute nothing.
//!
//! Length prefixes and the value count make the stream decodable, so different
//! requests never feed the same bytes. This differs on purpose from Scrapy, whose
//! fingerprinter hashes a JSON document (`{"body": hex, "headers": {...}, "method":
//! ..., "url": ...}`) and uses w3lib's canonical URL: legcrawl fingerprints are not
//! interchangeable with Scrapy's.
//!
//! # Invariants
//! - Equal canonical URLs, methods (up to ASCII case), bodies and opted-in header
//!   values give equal fingerprints; headers not opted in never matter; neither does
//!   the case of header names, nor the order of the opt-in list.
//! - [`to_hex`] and [`from_hex`] are inverse; hex is 40 lower-case characters.

use sha1::{Digest, Sha1};

use crate::canon;
use crate::request::Request;

/// A SHA-1 request fingerprint.
pub type Fingerprint = [u8; 20];

/// Hashing for sets and maps keyed by [`Fingerprint`]: a fingerprint is already a
/// uniformly spread SHA-1, so its first eight bytes serve as the hash and no
/// SipHash pass is made (the dedup hot path probes such sets for every link).
/// Crafting URLs whose fingerprints collide in those bits costs a SHA-1 search
/// per URL, and could only slow a set down, never change an answer.
#[derive(Clone, Copy, Debug, Default)]
pub struct BuildFingerprintHasher;

/// The [`std::hash::Hasher`] of [`BuildFingerprintHasher`].
#[derive(Clone, Copy, Debug, Default)]
pub struct FingerprintHasher(u64);

impl std::hash::BuildHasher for BuildFingerprintHasher {
    type Hasher = FingerprintHasher;

    fn build_hasher(&self) -> FingerprintHasher {
        FingerprintHasher(0)
    }
}

impl std::hash::Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    /// Folds in the first eight bytes of each write (the array's length prefix is
    /// one such write, a constant); shorter writes are folded byte by byte.
    fn write(&mut self, bytes: &[u8]) {
        match bytes.first_chunk::<8>() {
            Some(head) => self.0 ^= u64::from_le_bytes(*head),
            None => {
                for &b in bytes {
                    self.0 = self.0.rotate_left(8) ^ u64::from(b);
                }
            }
        }
    }
}

/// A set of fingerprints hashed with [`BuildFingerprintHasher`].
pub type FingerprintSet = std::collections::HashSet<Fingerprint, BuildFingerprintHasher>;
/// A map keyed by fingerprints, hashed with [`BuildFingerprintHasher`].
pub type FingerprintMap<V> = std::collections::HashMap<Fingerprint, V, BuildFingerprintHasher>;

/// SHA-1 over method, canonical URL, body and the opted-in headers (see the module doc
/// for the exact bytes). `include_headers` names the headers that take part, in any case
/// and order, duplicates allowed.
pub fn fingerprint(request: &Request, include_headers: &[String]) -> Fingerprint {
    let mut hasher = Sha1::new();
    let method = request.method.to_ascii_uppercase();
    piece(&mut hasher, method.as_bytes());
    match canon::canonicalize_str(&request.url) {
        Ok(url) => piece(&mut hasher, url.as_bytes()),
        Err(_) => piece(&mut hasher, request.url.as_bytes()),
    }
    piece(&mut hasher, &request.body);
    if !include_headers.is_empty() {
        hash_headers(&mut hasher, request, include_headers);
    }
    hasher.finalize().into()
}

/// Feeds the header groups of layout step 4.
fn hash_headers(hasher: &mut Sha1, request: &Request, include_headers: &[String]) {
    let mut names: Vec<String> = include_headers
        .iter()
        .map(|name| name.to_ascii_lowercase())
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in &names {
        let values = || {
            request
                .headers
                .iter()
                .filter(|(header, _)| header.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.as_bytes())
        };
        let count = values().count();
        if count == 0 {
            continue;
        }
        piece(hasher, name.as_bytes());
        // usize → u64 is lossless on every supported target.
        hasher.update((count as u64).to_be_bytes());
        for value in values() {
            piece(hasher, value);
        }
    }
}

/// Feeds one length-prefixed piece.
fn piece(hasher: &mut Sha1, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_be_bytes());
    hasher.update(bytes);
}

/// The fingerprint as 40 lower-case hex characters.
pub fn to_hex(fp: &Fingerprint) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(40);
    for byte in fp {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

/// Parses 40 hex characters (either case) back into a fingerprint; `None` for anything
/// else.
pub fn from_hex(s: &str) -> Option<Fingerprint> {
    let bytes = s.as_bytes();
    if bytes.len() != 40 {
        return None;
    }
    let mut fp = [0u8; 20];
    for (out, pair) in fp.iter_mut().zip(bytes.chunks_exact(2)) {
        let digit = |c: u8| char::from(c).to_digit(16);
        // Each digit is below 16, so the byte cannot overflow.
        *out = u8::try_from(digit(pair[0])? << 4 | digit(pair[1])?).ok()?;
    }
    Some(fp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_sets_hash_by_the_leading_bytes_and_spread_them() {
        use std::hash::BuildHasher;
        let a = fingerprint(&Request::get("http://a.test/1"), &[]);
        let b = fingerprint(&Request::get("http://a.test/2"), &[]);
        let hash = |fp: &Fingerprint| BuildFingerprintHasher.hash_one(fp);
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), hash(&b));
        let mut set = FingerprintSet::default();
        for i in 0..10_000 {
            set.insert(fingerprint(
                &Request::get(format!("http://a.test/{i}")),
                &[],
            ));
        }
        assert_eq!(set.len(), 10_000);
        assert!(set.contains(&a) && set.contains(&b));
        // The low bits (hashbrown's bucket index) take every value of 8 bits.
        let buckets: std::collections::BTreeSet<u64> =
            set.iter().map(|fp| hash(fp) & 0xff).collect();
        assert_eq!(buckets.len(), 256);
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    fn sample() -> Request {
        let mut request = Request::get("HTTP://Example.com:80/p?b=2&a=1#x");
        request.method = "post".into();
        request.body = b"k=v".to_vec();
        request.headers = vec![
            ("Accept".into(), "text/html".into()),
            ("X-Token".into(), "t1".into()),
            ("Cookie".into(), "c".into()),
            ("x-token".into(), "t2".into()),
        ];
        request
    }

    /// Expected values computed once with Python's hashlib over the documented layout,
    /// independently of this code:
    /// ```text
    /// import hashlib, struct
    /// p = lambda b: struct.pack(">Q", len(b)) + b
    /// sha = lambda d: hashlib.sha1(d).hexdigest()
    /// sha(p(b"GET") + p(b"http://example.com/") + p(b""))
    /// sha(p(b"POST") + p(b"http://example.com/p?a=1&b=2") + p(b"k=v")
    ///     + p(b"accept") + struct.pack(">Q", 1) + p(b"text/html")
    ///     + p(b"x-token") + struct.pack(">Q", 2) + p(b"t1") + p(b"t2"))
    /// sha(p(b"GET") + p(b"not a url") + p(b""))
    /// ```
    #[test]
    fn stable_values() {
        let plain = Request::get("http://example.com");
        assert_eq!(
            to_hex(&fingerprint(&plain, &[])),
            "aa562a51b27d4e0e41b4ad80e2316bae075fb228"
        );
        let opted = names(&["X-Token", "accept", "ACCEPT", "absent"]);
        assert_eq!(
            to_hex(&fingerprint(&sample(), &opted)),
            "fc691fe8347f118d37dcef441bbc392078d3ebe0"
        );
        let raw = Request::get("not a url");
        assert_eq!(
            to_hex(&fingerprint(&raw, &[])),
            "41de0d68a4928019e885f730cead95e52ab7d362"
        );
    }

    #[test]
    fn alike_urls_give_alike_fingerprints() {
        let base = fingerprint(&Request::get("http://example.com/a?x=1&y=%7e"), &[]);
        for url in [
            "HTTP://EXAMPLE.com:80/a?y=~&x=1",
            "http://example.com/b/../a?x=1&y=%7E#frag",
            "http://example.com/./a?&y=%7e&&x=1",
        ] {
            assert_eq!(fingerprint(&Request::get(url), &[]), base, "{url}");
        }
        assert_ne!(
            fingerprint(&Request::get("http://example.com/a?x=1"), &[]),
            base
        );
    }

    #[test]
    fn method_body_and_opted_headers_matter() {
        let opted = names(&["x-token", "accept"]);
        let base = fingerprint(&sample(), &opted);
        let mut changes: Vec<Request> = Vec::new();
        let mut r = sample();
        r.method = "PUT".into();
        changes.push(r);
        let mut r = sample();
        r.body = b"k=w".to_vec();
        changes.push(r);
        let mut r = sample();
        r.headers[1].1 = "t9".into();
        changes.push(r);
        let mut r = sample();
        r.headers.swap(1, 3); // the values of a repeated header swap order
        changes.push(r);
        let mut r = sample();
        r.headers.remove(0);
        changes.push(r);
        for (i, changed) in changes.iter().enumerate() {
            assert_ne!(fingerprint(changed, &opted), base, "change {i}");
        }
        // Opting in a header changes it; the method's case does not.
        assert_ne!(fingerprint(&sample(), &names(&["x-token"])), base);
        let mut r = sample();
        r.method = "POST".into();
        assert_eq!(fingerprint(&r, &opted), base);
    }

    #[test]
    fn other_headers_and_name_case_do_not_matter() {
        let opted = names(&["X-TOKEN", "Accept"]);
        let base = fingerprint(&sample(), &opted);
        let mut r = sample();
        r.headers[2].1 = "other cookie".into();
        r.headers.push(("User-Agent".into(), "x".into()));
        r.headers.swap(0, 2); // order across different headers does not matter
        assert_eq!(fingerprint(&r, &opted), base);
        let mut r = sample();
        r.headers[0].0 = "ACCEPT".into();
        r.headers[1].0 = "x-TOKEN".into();
        assert_eq!(
            fingerprint(&r, &names(&["accept", "x-token", "Accept"])),
            base
        );
        // A header the request lacks is the same as not opting in.
        let bare = Request::get("http://e.com/");
        assert_eq!(
            fingerprint(&bare, &names(&["accept"])),
            fingerprint(&bare, &[])
        );
    }

    #[test]
    fn pieces_are_unambiguous() {
        // One value "b", then header b=c, versus three values of header a.
        let mut one = Request::get("http://e.com/");
        one.headers = vec![("a".into(), "b".into()), ("b".into(), "c".into())];
        let mut two = Request::get("http://e.com/");
        two.headers = vec![
            ("a".into(), "b".into()),
            ("a".into(), "b".into()),
            ("a".into(), "c".into()),
        ];
        let opted = names(&["a", "b"]);
        assert_ne!(fingerprint(&one, &opted), fingerprint(&two, &opted));
        let mut body = Request::get("http://e.com/");
        body.body = b"GET".to_vec();
        assert_ne!(
            fingerprint(&body, &[]),
            fingerprint(&Request::get("http://e.com/"), &[])
        );
    }

    #[test]
    fn hex_round_trip() {
        let fp = fingerprint(&sample(), &[]);
        let hex = to_hex(&fp);
        assert_eq!(hex.len(), 40);
        assert!(
            hex.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        );
        assert_eq!(from_hex(&hex), Some(fp));
        assert_eq!(from_hex(&hex.to_ascii_uppercase()), Some(fp));
        assert_eq!(from_hex(&hex[..39]), None);
        assert_eq!(from_hex(&format!("{}g", &hex[..39])), None);
        assert_eq!(from_hex(&format!("{}é", &hex[..38])), None);
        assert_eq!(from_hex(&format!("+{}", &hex[..39])), None);
    }
}
