//! Byte-level HTML skimming: where each piece of markup ends, and attribute spans.
//!
//! Follows the HTML tokenizer's states (WHATWG §13.2.5) only as far as needed to find
//! the end of comments, bogus comments, doctypes, tags and raw-text contents, and the
//! name and value spans of a tag's attributes. All indices fall on ASCII bytes, so
//! slicing the `&str` the bytes came from at them is always valid. No allocation.
//! Depends on nothing else in the crate.

/// What starts at a `<`.
pub(super) enum Markup {
    /// A literal `<`.
    Text,
    /// A comment, doctype or bogus comment ending just before this index.
    Skip(usize),
    /// Markup that runs to the end of the input (nothing more is emitted).
    Eof,
    /// `<name ...>`; `end` is just past the `>`.
    StartTag {
        name_end: usize,
        end: usize,
        self_closing: bool,
    },
    /// `</name ...>`; `end` is just past the `>`.
    EndTag { name_end: usize, end: usize },
}

/// Classifies the markup starting at the `<` at `start`.
pub(super) fn markup_at(bytes: &[u8], start: usize) -> Markup {
    let at = |i: usize| bytes.get(start + i).copied();
    let to_gt = |from: usize| match memchr(b'>', bytes, from) {
        Some(gt) => Markup::Skip(gt + 1),
        None => Markup::Eof,
    };
    let tag = |name_start: usize| {
        let name_end = name_end(bytes, name_start);
        (name_end, tag_end(bytes, name_end, None))
    };
    match at(1) {
        Some(b'!') if bytes[start + 2..].starts_with(b"--") => {
            comment_end(bytes, start + 4).map_or(Markup::Eof, Markup::Skip)
        }
        Some(b'!') | Some(b'?') => to_gt(start + 2),
        Some(b'/') => match at(2) {
            Some(c) if c.is_ascii_alphabetic() => match tag(start + 2) {
                (name_end, Some((gt, _))) => Markup::EndTag {
                    name_end,
                    end: gt + 1,
                },
                (_, None) => Markup::Eof,
            },
            Some(b'>') => Markup::Skip(start + 3),
            Some(_) => to_gt(start + 2),
            None => Markup::Text,
        },
        Some(c) if c.is_ascii_alphabetic() => match tag(start + 1) {
            (name_end, Some((gt, self_closing))) => Markup::StartTag {
                name_end,
                end: gt + 1,
                self_closing,
            },
            (_, None) => Markup::Eof,
        },
        _ => Markup::Text,
    }
}

/// HTML whitespace (CR included: the tokenizer sees it as LF).
pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0C' | b'\r' | b' ')
}

fn name_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| is_space(b) || b == b'/' || b == b'>')
        .map_or(bytes.len(), |n| from + n)
}

/// Byte ranges of one attribute's name and value (empty value when it has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct AttrSpan {
    pub(super) name: (usize, usize),
    pub(super) value: (usize, usize),
}

/// From just after a tag name, the index of the `>` closing the tag and whether it is
/// self-closing; `None` at end of input. Appends attribute spans to `spans` if given.
pub(super) fn tag_end(
    bytes: &[u8],
    from: usize,
    spans: Option<&mut Vec<AttrSpan>>,
) -> Option<(usize, bool)> {
    let mut parser = TagParser {
        state: S::BeforeName,
        span: AttrSpan::default(),
        slash: false,
        spans,
    };
    let mut i = from;
    while i < bytes.len() {
        let after_slash = std::mem::take(&mut parser.slash);
        let step = match parser.state {
            S::Quoted(_) | S::Unquoted | S::BeforeValue => parser.value_step(bytes, i),
            S::BeforeName | S::Name | S::AfterName => parser.name_step(bytes[i], i, after_slash),
        };
        match step {
            Step::Next(next) => i = next,
            Step::Done(gt, self_closing) => return Some((gt, self_closing)),
            Step::Eof => return None,
        }
    }
    None
}

/// Tokenizer states inside a tag, after its name.
#[derive(Clone, Copy, PartialEq)]
enum S {
    BeforeName,
    Name,
    AfterName,
    BeforeValue,
    Quoted(u8),
    Unquoted,
}

/// What one step of [`TagParser`] decided.
enum Step {
    /// Go on at this index.
    Next(usize),
    /// The tag ends at this `>`; self-closing or not.
    Done(usize, bool),
    /// The input ends inside the tag.
    Eof,
}

struct TagParser<'s> {
    state: S,
    /// The attribute being read.
    span: AttrSpan,
    /// The previous byte was a `/` that may make the tag self-closing.
    slash: bool,
    spans: Option<&'s mut Vec<AttrSpan>>,
}

impl TagParser<'_> {
    fn push(&mut self) {
        if let Some(spans) = self.spans.as_deref_mut() {
            spans.push(self.span);
        }
    }

    /// One step in the value states.
    fn value_step(&mut self, bytes: &[u8], i: usize) -> Step {
        let b = bytes[i];
        self.state = match self.state {
            S::Quoted(q) => {
                let Some(close) = memchr(q, bytes, i) else {
                    return Step::Eof;
                };
                self.span.value.1 = close;
                self.push();
                self.state = S::BeforeName;
                return Step::Next(close + 1);
            }
            S::Unquoted if b == b'>' || is_space(b) => {
                self.span.value.1 = i;
                self.push();
                if b == b'>' {
                    return Step::Done(i, false);
                }
                S::BeforeName
            }
            S::BeforeValue if b == b'>' => {
                self.push();
                return Step::Done(i, false);
            }
            S::BeforeValue if b == b'"' || b == b'\'' => {
                self.span.value = (i + 1, i + 1);
                S::Quoted(b)
            }
            S::BeforeValue if !is_space(b) => {
                self.span.value = (i, i);
                S::Unquoted
            }
            state => state,
        };
        Step::Next(i + 1)
    }

    /// One step in the attribute-name states; `AfterName` means an attribute is pending.
    fn name_step(&mut self, b: u8, i: usize, after_slash: bool) -> Step {
        let ends_name = is_space(b) || matches!(b, b'=' | b'/' | b'>');
        if self.state == S::Name {
            if !ends_name {
                return Step::Next(i + 1);
            }
            self.span.name.1 = i;
            self.state = S::AfterName;
        }
        let pending = self.state == S::AfterName;
        self.state = match b {
            b'>' | b'/' => {
                if pending {
                    self.push();
                }
                if b == b'>' {
                    return Step::Done(i, after_slash);
                }
                self.slash = true;
                S::BeforeName
            }
            b'=' if pending => S::BeforeValue,
            _ if is_space(b) => self.state,
            _ => {
                if pending {
                    self.push();
                }
                self.span = AttrSpan {
                    name: (i, i + 1),
                    value: (i, i),
                };
                S::Name
            }
        };
        Step::Next(i + 1)
    }
}

/// From just after `<!--`, the index just past the comment's end.
pub(super) fn comment_end(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    if rest.starts_with(b">") {
        return Some(from + 1);
    }
    if rest.starts_with(b"->") {
        return Some(from + 2);
    }
    let mut i = from;
    loop {
        let dash = memchr(b'-', bytes, i)?;
        let after = &bytes[dash..];
        if after.starts_with(b"-->") {
            return Some(dash + 3);
        }
        if after.starts_with(b"--!>") {
            return Some(dash + 4);
        }
        i = dash + 1;
    }
}

/// The index of the `<` of the first `</name` (any case) followed by space, `/` or `>`.
pub(super) fn find_end_tag(bytes: &[u8], from: usize, name: &[u8]) -> Option<usize> {
    let mut i = from;
    loop {
        let lt = memchr(b'<', bytes, i)?;
        let after = &bytes[lt + 1..];
        if after.len() > name.len() + 1
            && after[0] == b'/'
            && after[1..=name.len()].eq_ignore_ascii_case(name)
            && (is_space(after[name.len() + 1]) || matches!(after[name.len() + 1], b'/' | b'>'))
        {
            return Some(lt);
        }
        i = lt + 1;
    }
}

/// The first index at or after `from` holding `needle`.
///
/// Tests eight bytes at a time (SWAR): `(x - 0x01…) & !x & 0x80…` is non-zero exactly
/// when the word `x` (the bytes XOR the needle) has a zero byte, and its lowest set bit
/// marks the first one (a borrow can only flag bytes above a real zero).
pub(super) fn memchr(needle: u8, bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let hay = bytes.get(from..)?;
    let repeated = u64::from_le_bytes([needle; 8]);
    let mut chunks = hay.chunks_exact(8);
    let mut offset = from;
    for chunk in &mut chunks {
        let word = chunk
            .iter()
            .rev()
            .fold(0u64, |word, &b| word << 8 | u64::from(b));
        let x = word ^ repeated;
        let found = x.wrapping_sub(ONES) & !x & HIGHS;
        if found != 0 {
            // trailing_zeros of a non-zero u64 is below 64, so this is at most 7.
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    let rest = chunks.remainder();
    rest.iter().position(|&b| b == needle).map(|n| offset + n)
}

/// Tag names longer than this are never wanted, raw or foreign.
pub(super) const MAX_NAME: usize = 16;

/// `raw` in ASCII lower case in `buf`, or empty when longer than [`MAX_NAME`].
pub(super) fn lower<'b>(raw: &[u8], buf: &'b mut [u8; MAX_NAME]) -> &'b [u8] {
    if raw.len() > MAX_NAME {
        return &[];
    }
    let out = &mut buf[..raw.len()];
    out.copy_from_slice(raw);
    out.make_ascii_lowercase();
    out
}

/// An attribute value with the common character references decoded, or `None` when it
/// holds one that needs the full tokenizer (anything but `&amp; &lt; &gt; &quot; &apos;`
/// and a bare `&`).
pub(super) fn decode_value(raw: &str) -> Option<std::borrow::Cow<'_, str>> {
    let Some(first) = raw.find('&') else {
        return Some(std::borrow::Cow::Borrowed(raw));
    };
    let mut out = String::with_capacity(raw.len());
    out.push_str(&raw[..first]);
    let mut rest = &raw[first..];
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let (decoded, len) = match after.as_bytes().first() {
            None => ('&', 0),
            Some(&b) if is_space(b) || b == b'&' || b == b'<' => ('&', 0),
            _ if after.starts_with("amp;") => ('&', 4),
            _ if after.starts_with("lt;") => ('<', 3),
            _ if after.starts_with("gt;") => ('>', 3),
            _ if after.starts_with("quot;") => ('"', 5),
            _ if after.starts_with("apos;") => ('\'', 5),
            _ => return None,
        };
        out.push(decoded);
        rest = &after[len..];
    }
    out.push_str(rest);
    Some(std::borrow::Cow::Owned(out))
}
