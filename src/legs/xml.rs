//! Shared plumbing of the XML legs ([`super::FeedLinks`], [`super::Sitemap`]).
//!
//! - [`decode`]: body bytes to text. First match wins: a byte-order mark; the
//!   `charset` of `Content-Type` (RFC 7303 gives it precedence); the `encoding` of the
//!   XML declaration; UTF-8. Unknown labels are skipped, bad bytes become U+FFFD.
//! - [`walk`]: a streaming pass (quick-xml, no DOM) that reports element opens and
//!   closes with the element path and the text read since the previous tag (text,
//!   CDATA and entity references joined), so leaf values like `<loc>` arrive whole.
//!   Malformed XML ends the walk at the first error; what was reported stays reported.
//! - [`UrlFilter`]: allow/deny regex lists on absolute URLs.
//!
//! Depends on [`super::LegError`] and [`crate::charset`] (the `Content-Type`
//! charset); uses `encoding_rs` (the same rules as [`crate::charset`], with the
//! XML declaration in place of `<meta>`), `quick-xml` and `regex`. No I/O.

use std::borrow::Cow;
use std::ops::ControlFlow;

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE};
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use regex::Regex;

use super::LegError;

/// How many leading bytes may hold the XML declaration.
const DECL_BYTES: usize = 1024;

/// Decodes an XML body as described in the module doc.
pub(super) fn decode<'a>(content_type: Option<&str>, body: &'a [u8]) -> Cow<'a, str> {
    if let Some((encoding, bom_len)) = Encoding::for_bom(body) {
        return encoding.decode_without_bom_handling(&body[bom_len..]).0;
    }
    let encoding = content_type
        .and_then(crate::charset::header_charset)
        .or_else(|| declared_encoding(body))
        .unwrap_or(UTF_8);
    encoding.decode_without_bom_handling(body).0
}

/// The `encoding="..."` of a leading `<?xml ...?>` declaration. A UTF-16 label in
/// bytes that were readable as ASCII is wrong, so it means UTF-8.
fn declared_encoding(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(DECL_BYTES)];
    let start = head.iter().position(|b| !b.is_ascii_whitespace())?;
    let decl = head[start..].strip_prefix(b"<?xml")?;
    let decl = &decl[..find(decl, b"?>")?];
    let at = find(decl, b"encoding")?;
    let rest = trim_start(&decl[at + b"encoding".len()..]);
    let rest = trim_start(rest.strip_prefix(b"=")?);
    let (&quote, rest) = rest.split_first()?;
    if quote != b'"' && quote != b'\'' {
        return None;
    }
    let label = &rest[..rest.iter().position(|&b| b == quote)?];
    let encoding = Encoding::for_label(label)?;
    Some(if encoding == UTF_16LE || encoding == UTF_16BE {
        UTF_8
    } else {
        encoding
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[skip..]
}

/// The local part of a qualified name (`atom:link` → `link`).
pub(super) fn local(name: &str) -> &str {
    name.rsplit_once(':').map_or(name, |(_, local)| local)
}

/// The unescaped value of attribute `name` (qualified, exact), if present and well formed.
pub(super) fn attr(tag: &BytesStart<'_>, name: &str) -> Option<String> {
    let attribute = tag.try_get_attribute(name).ok()??;
    let value = match attribute.normalized_value(quick_xml::XmlVersion::Implicit1_0) {
        Ok(value) => value.into_owned(),
        Err(_) => attribute.value.into_owned(),
    };
    Some(value)
}

/// Receives the elements of a [`walk`]; `Break` ends the walk early.
pub(super) trait XmlVisitor {
    /// An element opened; `path` ends with its qualified name.
    fn open(&mut self, path: &[String], tag: &BytesStart<'_>) -> ControlFlow<()>;
    /// An element closed; `path` still ends with its name, `text` is the character
    /// data since the previous tag (the whole content of a leaf element).
    fn close(&mut self, path: &[String], text: &str) -> ControlFlow<()>;
}

/// Why a walk ended before the end of the document.
#[derive(Debug, thiserror::Error)]
#[error("malformed XML at byte {position}: {source}")]
pub(super) struct WalkError {
    /// Byte offset in the decoded text where the reader gave up.
    pub position: u64,
    /// What quick-xml reported.
    pub source: quick_xml::Error,
}

/// Streams `text` into `visitor` (see the module doc). Element nesting is not checked
/// (a mismatched end tag closes the innermost element), so only syntax errors stop it.
pub(super) fn walk(text: &str, visitor: &mut impl XmlVisitor) -> Result<(), WalkError> {
    let mut reader = Reader::from_str(text);
    let config = reader.config_mut();
    config.check_end_names = false;
    config.allow_unmatched_ends = true;
    config.allow_dangling_amp = true;
    let mut path: Vec<String> = Vec::new();
    let mut chars = String::new();
    loop {
        let event = reader.read_event().map_err(|source| WalkError {
            position: reader.error_position(),
            source,
        })?;
        let flow = match event {
            Event::Start(tag) => {
                chars.clear();
                path.push(tag.name().as_ref().to_owned());
                visitor.open(&path, &tag)
            }
            Event::Empty(tag) => {
                chars.clear();
                path.push(tag.name().as_ref().to_owned());
                let mut flow = visitor.open(&path, &tag);
                if flow.is_continue() {
                    flow = visitor.close(&path, "");
                }
                path.pop();
                flow
            }
            Event::End(_) => {
                let flow = if path.is_empty() {
                    ControlFlow::Continue(())
                } else {
                    visitor.close(&path, &chars)
                };
                path.pop();
                chars.clear();
                flow
            }
            Event::Text(text) => {
                chars.push_str(&text.xml10_content());
                ControlFlow::Continue(())
            }
            Event::CData(data) => {
                chars.push_str(&data.xml10_content());
                ControlFlow::Continue(())
            }
            Event::GeneralRef(reference) => {
                push_reference(&mut chars, &reference);
                ControlFlow::Continue(())
            }
            Event::Eof => return Ok(()),
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {
                ControlFlow::Continue(())
            }
        };
        if flow.is_break() {
            return Ok(());
        }
    }
}

/// Appends the character an entity or character reference stands for; unknown
/// entities (no DTD is read) are kept as written.
fn push_reference(chars: &mut String, reference: &quick_xml::events::BytesRef<'_>) {
    let name: &str = reference;
    if let Ok(Some(c)) = reference.resolve_char_ref() {
        chars.push(c);
    } else if let Some(value) = quick_xml::escape::resolve_xml_entity(name) {
        chars.push_str(value);
    } else {
        chars.push('&');
        chars.push_str(name);
        chars.push(';');
    }
}

/// Allow and deny regexes on absolute URLs.
#[derive(Clone, Debug, Default)]
pub(super) struct UrlFilter {
    allow: Vec<Regex>,
    deny: Vec<Regex>,
}

impl UrlFilter {
    /// Compiles both lists; the error names `leg` and the first bad pattern.
    pub fn new(leg: &'static str, allow: &[String], deny: &[String]) -> Result<Self, LegError> {
        Ok(UrlFilter {
            allow: compile(leg, allow)?,
            deny: compile(leg, deny)?,
        })
    }

    /// True when `url` matches an allow regex (or there are none) and no deny regex.
    pub fn accepts(&self, url: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|re| re.is_match(url)))
            && !self.deny.iter().any(|re| re.is_match(url))
    }
}

/// Compiles every pattern; the error names `leg` and the bad pattern.
fn compile(leg: &'static str, patterns: &[String]) -> Result<Vec<Regex>, LegError> {
    patterns
        .iter()
        .map(|pattern| {
            Regex::new(pattern).map_err(|source| LegError::BadRegex {
                leg,
                pattern: pattern.clone(),
                source,
            })
        })
        .collect()
}

/// True for `http` and `https` URLs.
pub(super) fn is_web(url: &url::Url) -> bool {
    matches!(url.scheme(), "http" | "https")
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect(Vec<(String, String)>);
    impl XmlVisitor for Collect {
        fn open(&mut self, _path: &[String], _tag: &BytesStart<'_>) -> ControlFlow<()> {
            ControlFlow::Continue(())
        }
        fn close(&mut self, path: &[String], text: &str) -> ControlFlow<()> {
            self.0.push((path.join("/"), text.to_owned()));
            ControlFlow::Continue(())
        }
    }

    #[test]
    fn text_cdata_and_references_are_joined() {
        let mut seen = Collect(Vec::new());
        let xml = "<a><b>x&amp;y&#x41;&nbsp;<![CDATA[<z>]]></b><c/></a>";
        walk(xml, &mut seen).unwrap();
        assert_eq!(seen.0[0], ("a/b".into(), "x&yA&nbsp;<z>".into()));
        assert_eq!(seen.0[1], ("a/c".into(), String::new()));
        assert_eq!(seen.0[2].0, "a");
    }

    #[test]
    fn broken_xml_keeps_what_came_before() {
        let mut seen = Collect(Vec::new());
        let error = walk("<a><b>1</b><b>2</c><b>3</b><!-- never closed", &mut seen).unwrap_err();
        assert!(error.to_string().starts_with("malformed XML at byte"));
        let texts: Vec<_> = seen.0.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(&texts[..3], ["1", "2", "3"]);
    }

    #[test]
    fn encoding_order() {
        let (body, _, _) = encoding_rs::WINDOWS_1251
            .encode("<?xml version='1.0' encoding='windows-1251'?><a>Мир</a>");
        assert!(decode(None, &body).ends_with("Мир</a>"));
        assert!(decode(Some("text/xml; charset=koi8-r"), &body).contains('<'));
        assert!(!decode(Some("text/xml; charset=koi8-r"), &body).contains("Мир"));
        assert_eq!(
            declared_encoding(b"<?xml encoding=\"utf-16\"?>"),
            Some(UTF_8)
        );
        assert_eq!(declared_encoding(b"<?xml encoding=\"nope\"?>"), None);
        assert_eq!(declared_encoding(b"<?xml version=\"1.0\"?>"), None);
        assert_eq!(declared_encoding(b""), None);
        assert_eq!(decode(None, b"\xEF\xBB\xBF<a/>"), "<a/>");
    }
}
