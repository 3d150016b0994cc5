//! One robots.txt path pattern: RFC 9309 §2.2.2 normalization and matching.
//!
//! Depends on nothing else in the crate. Invariants: a pattern and a URL path are
//! normalized by the same [`normalize`] before they meet, so `%7E`, `~` and a raw
//! non-ASCII byte compare as the RFC says; `*` matches any run of octets and a
//! trailing `$` anchors the end (a `$` elsewhere is a literal octet); matching is
//! linear-ish in the path (no backtracking blow-up: consecutive `*` collapse and
//! each segment is found leftmost once).

/// A normalized `Allow`/`Disallow` value, ready to match paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pattern {
    /// The parts between `*`s (the first must be a prefix of the path).
    segments: Vec<Vec<u8>>,
    /// A trailing `$` was present: the path must end where the pattern ends.
    anchored: bool,
    /// Octets of the normalized pattern, `*` and `$` included: the rule's priority.
    len: usize,
}

impl Pattern {
    /// The pattern for a raw rule value (already trimmed, not empty).
    pub(crate) fn new(raw: &[u8]) -> Pattern {
        let normalized = normalize(raw);
        let len = normalized.len();
        let (body, anchored) = match normalized.split_last() {
            Some((b'$', rest)) => (rest, true),
            _ => (&normalized[..], false),
        };
        let parts: Vec<&[u8]> = body.split(|&b| b == b'*').collect();
        let has_star = parts.len() > 1;
        let ends_with_star = has_star && parts.last().is_some_and(|part| part.is_empty());
        let mut segments: Vec<Vec<u8>> = vec![parts[0].to_vec()];
        if has_star {
            // Inner empty parts come from `**` runs and add nothing.
            segments.extend(
                parts[1..]
                    .iter()
                    .filter(|p| !p.is_empty())
                    .map(|p| p.to_vec()),
            );
            if ends_with_star {
                // Anything may follow the final `*`, `$` or not.
                segments.push(Vec::new());
            }
        }
        Pattern {
            segments,
            anchored: anchored && !ends_with_star,
            len,
        }
    }

    /// Octets in the normalized pattern: longer is more specific.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether `path` (normalized with [`normalize`]) matches.
    pub(crate) fn matches(&self, path: &[u8]) -> bool {
        let Some((first, rest)) = self.segments.split_first() else {
            return !self.anchored || path.is_empty();
        };
        if !path.starts_with(first) {
            return false;
        }
        let mut pos = first.len();
        let Some((last, middle)) = rest.split_last() else {
            return !self.anchored || pos == path.len();
        };
        for segment in middle {
            match find(&path[pos..], segment) {
                Some(at) => pos += at + segment.len(),
                None => return false,
            }
        }
        if self.anchored {
            path.len() >= pos + last.len() && path.ends_with(last)
        } else {
            find(&path[pos..], last).is_some()
        }
    }
}

/// Leftmost position of `needle` in `haystack` (0 for an empty needle).
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// RFC 9309 §2.2.2 normalization, applied alike to patterns and URL paths:
/// `%XX` of an unreserved character is decoded, other `%XX` get upper-case hex,
/// and octets outside printable ASCII (controls, space, DEL, non-ASCII) are
/// percent-encoded. Everything else is kept as is.
pub(crate) fn normalize(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let byte = input[i];
        if byte == b'%' {
            if let Some(value) = hex_pair(input.get(i + 1..i + 3)) {
                if is_unreserved(value) {
                    out.push(value);
                } else {
                    push_encoded(&mut out, value);
                }
                i += 3;
                continue;
            }
            out.push(byte);
        } else if byte <= b' ' || byte >= 0x7F {
            push_encoded(&mut out, byte);
        } else {
            out.push(byte);
        }
        i += 1;
    }
    out
}

fn hex_pair(pair: Option<&[u8]>) -> Option<u8> {
    let pair = pair?;
    let high = (pair[0] as char).to_digit(16)?;
    let low = (pair[1] as char).to_digit(16)?;
    u8::try_from(high * 16 + low).ok()
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn push_encoded(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.extend_from_slice(&[
        b'%',
        HEX[usize::from(byte >> 4)],
        HEX[usize::from(byte & 15)],
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, path: &str) -> bool {
        Pattern::new(pattern.as_bytes()).matches(&normalize(path.as_bytes()))
    }

    #[test]
    fn prefix_star_and_dollar() {
        let cases = [
            ("/fish", "/fish", true),
            ("/fish", "/fish.html", true),
            ("/fish", "/Fish.asp", false),
            ("/fish", "/catfish", false),
            ("/fish*", "/fishheads/yummy.html", true),
            ("/fish/", "/fish", false),
            ("/*.php", "/index.php", true),
            ("/*.php", "/folder/filename.php?parameters", true),
            ("/*.php", "/windows.PHP", false),
            ("/*.php$", "/filename.php", true),
            ("/*.php$", "/filename.php?parameters", false),
            ("/*.php$", "/filename.php/", false),
            ("/fish*.php", "/fishheads/catfish.php?parameters", true),
            ("/fish*.php", "/Fish.PHP", false),
            ("/fish*$", "/shark/fish", false),
            ("/fish$", "/fish", true),
            ("/fish$", "/fishy", false),
            ("*", "/anything", true),
            ("/a**b", "/a-x-b", true),
            ("/a*b*c$", "/abc", true),
            ("/a*b*c$", "/abcab", false),
            ("/a*bc$", "/abc", true),
            ("/ab*b$", "/ab", false),
            ("/$", "/", true),
            ("/$", "/a", false),
            ("/a$b", "/a$b", true),
            ("/*$", "/x", true),
        ];
        for (pattern, path, expected) in cases {
            assert_eq!(m(pattern, path), expected, "{pattern} vs {path}");
        }
    }

    #[test]
    fn percent_encoding_per_rfc_example() {
        assert!(m("/foo/bar/ツ", "/foo/bar/%E3%83%84"));
        assert!(m("/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"));
        assert!(m("/foo/bar/%e3%83%84", "/foo/bar/%E3%83%84"));
        assert!(m("/foo/bar/%62%61%7A", "/foo/bar/baz"));
        assert!(m("/foo/bar/baz", "/foo/bar/%62%61%7A"));
        assert!(m("/~joe", "/%7Ejoe"));
        // A reserved character stays encoded: %2F is not '/'.
        assert!(!m("/a/b", "/a%2Fb"));
        assert!(m("/a%2fb", "/a%2Fb"));
    }

    #[test]
    fn priority_is_the_normalized_length() {
        assert_eq!(Pattern::new(b"/a*$").len(), 4);
        assert_eq!(Pattern::new("/ツ".as_bytes()).len(), 10);
    }
}
