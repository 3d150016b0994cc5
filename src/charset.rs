//! Character-set detection and decoding of response bodies.
//!
//! One function, [`decode`], turns body bytes into text with `encoding_rs`. The
//! encoding is chosen in this order, first match wins:
//! 1. a byte-order mark (UTF-8, UTF-16LE, UTF-16BE), which is stripped;
//! 2. the `charset=` parameter of the `Content-Type` header;
//! 3. a `<meta charset=...>` or `<meta http-equiv="Content-Type" content="...charset=...">`
//!    found by a byte scan of the first [`PRESCAN_BYTES`] bytes (a `UTF-16` label there
//!    means UTF-8, as in the WHATWG prescan);
//! 4. UTF-8.
//!
//! Unknown labels are skipped, never errors. Malformed byte sequences become U+FFFD.
//! Valid UTF-8 is borrowed, not copied. Depends on nothing else in the crate.

use std::borrow::Cow;

use encoding_rs::{Encoding, UTF_8};

/// How many leading body bytes are scanned for a `<meta>` charset declaration.
pub const PRESCAN_BYTES: usize = 1024;

/// Decodes `body` to text, choosing the encoding as described in the module doc.
///
/// `content_type` is the raw `Content-Type` header value, if any. Returns the text
/// and the encoding that was used.
pub fn decode<'a>(content_type: Option<&str>, body: &'a [u8]) -> (Cow<'a, str>, &'static Encoding) {
    if let Some((encoding, bom_len)) = Encoding::for_bom(body) {
        let (text, _) = encoding.decode_without_bom_handling(&body[bom_len..]);
        return (text, encoding);
    }
    let encoding = content_type
        .and_then(header_charset)
        .or_else(|| meta_charset(body))
        .unwrap_or(UTF_8);
    let (text, _) = encoding.decode_without_bom_handling(body);
    (text, encoding)
}

/// The encoding named by the `charset` parameter of a `Content-Type` value.
pub(crate) fn header_charset(content_type: &str) -> Option<&'static Encoding> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
        Encoding::for_label(value.as_bytes())
    })
}

/// The encoding declared by the first `<meta>` tag carrying a known charset label
/// within the first [`PRESCAN_BYTES`] bytes.
fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(PRESCAN_BYTES)];
    let mut rest = head;
    while let Some(start) = find_ignore_case(rest, b"<meta") {
        let after = &rest[start + 5..];
        let end = after.iter().position(|&b| b == b'>').unwrap_or(after.len());
        if let Some(encoding) = charset_in_tag(&after[..end]) {
            // The WHATWG prescan: a UTF-16 declaration inside ASCII-compatible bytes is wrong.
            if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
                return Some(UTF_8);
            }
            return Some(encoding);
        }
        rest = &after[end..];
    }
    None
}

/// Finds `charset` `=` label inside the attribute bytes of one tag.
fn charset_in_tag(mut tag: &[u8]) -> Option<&'static Encoding> {
    while let Some(at) = find_ignore_case(tag, b"charset") {
        tag = &tag[at + 7..];
        let value = trim_start(tag);
        let Some(value) = value.strip_prefix(b"=") else {
            continue;
        };
        let value = trim_start(value);
        let value = value
            .strip_prefix(b"\"")
            .or_else(|| value.strip_prefix(b"'"))
            .unwrap_or(value);
        let len = value
            .iter()
            .position(|&b| {
                matches!(b, b'"' | b'\'' | b';' | b'/' | b'>') || b.is_ascii_whitespace()
            })
            .unwrap_or(value.len());
        if let Some(encoding) = Encoding::for_label(&value[..len]) {
            return Some(encoding);
        }
    }
    None
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[skip..]
}

/// Position of the first ASCII-case-insensitive occurrence of `needle` (lower case).
fn find_ignore_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > haystack.len() {
        return None;
    }
    (0..=haystack.len() - needle.len())
        .find(|&i| haystack[i..i + needle.len()].eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use encoding_rs::{KOI8_R, UTF_16LE, WINDOWS_1251, WINDOWS_1252};

    #[test]
    fn header_charset_wins_over_meta() {
        let (bytes, _, _) = WINDOWS_1251.encode("<meta charset=koi8-r>Привет");
        let (text, encoding) = decode(Some("text/html; charset=windows-1251"), &bytes);
        assert_eq!(encoding, WINDOWS_1251);
        assert!(text.ends_with("Привет"));
    }

    #[test]
    fn quoted_and_cased_header_parameter() {
        let (bytes, _, _) = KOI8_R.encode("Мир");
        let (text, encoding) = decode(Some("text/html;Charset=\"KOI8-R\""), &bytes);
        assert_eq!(encoding, KOI8_R);
        assert_eq!(text, "Мир");
    }

    #[test]
    fn bom_overrides_header_and_is_stripped() {
        let body = b"\xEF\xBB\xBFcaf\xC3\xA9";
        let (text, encoding) = decode(Some("text/html; charset=windows-1251"), body);
        assert_eq!(encoding, UTF_8);
        assert_eq!(text, "café");
        let (text, encoding) = decode(Some("text/html; charset=utf-8"), b"\xFF\xFEh\0i\0");
        assert_eq!(encoding, UTF_16LE);
        assert_eq!(text, "hi");
    }

    #[test]
    fn bad_label_falls_back_to_utf8() {
        let (text, encoding) = decode(Some("text/html; charset=no-such-thing"), "é".as_bytes());
        assert_eq!(encoding, UTF_8);
        assert_eq!(text, "é");
        let (text, encoding) = decode(None, b"<meta charset=\"bogus\"><p>\xFF</p>");
        assert_eq!(encoding, UTF_8);
        assert!(text.contains('\u{FFFD}'));
    }

    #[test]
    fn meta_forms_are_found() {
        let body =
            b"<html><head><META HTTP-EQUIV=\"Content-Type\" CONTENT=\"text/html; charset=koi8-r\">";
        assert_eq!(decode(None, body).1, KOI8_R);
        let body = b"<head><meta name=x><meta charset='windows-1252'/>";
        assert_eq!(decode(Some("text/html"), body).1, WINDOWS_1252);
        let body = b"<meta charset=utf-16>";
        assert_eq!(decode(None, body).1, UTF_8);
    }

    #[test]
    fn meta_after_prescan_window_is_ignored() {
        let mut body = vec![b' '; PRESCAN_BYTES];
        body.extend_from_slice(b"<meta charset=koi8-r>");
        assert_eq!(decode(None, &body).1, UTF_8);
    }

    #[test]
    fn valid_utf8_is_borrowed_and_empty_body_is_fine() {
        let (text, _) = decode(None, b"plain");
        assert!(matches!(text, Cow::Borrowed("plain")));
        assert_eq!(decode(None, b"").0, "");
        assert_eq!(decode(None, b"<meta").1, UTF_8);
    }
}
