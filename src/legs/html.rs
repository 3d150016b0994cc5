//! HTML scanning shared by the bundled legs: a byte-level skimmer plus html5ever's tokenizer.
//!
//! Running html5ever's tokenizer over a whole page costs more than the crawler's budget
//! per page (it builds every tag name and attribute char by char; see `benches/legs.rs`),
//! and the legs read only a handful of elements. So [`scan`] splits the work:
//! - the skimmer ([`super::skim`]) walks the page with fast searches for `<` and follows
//!   the tokenizer's states only as far as needed to find where each piece of markup
//!   ends: comments (`<!-- -->`, `<!-->`, `--!>`), doctypes and bogus comments, start and
//!   end tags (quoted values may hold `>`), and the contents of raw-text elements outside
//!   `svg`/`math`: `script`, `style`, `xmp`, `iframe`, `noembed`, `noframes`, `title`,
//!   `textarea` (skipped to their end tag) and `plaintext` (the rest of the page);
//! - a start tag the [`Visitor`] wants is reported from the skimmer's attribute spans when
//!   that is exact (no NUL or CR in the tag, no character reference other than
//!   `&amp; &lt; &gt; &quot; &apos;`); otherwise the tag alone is handed to html5ever's
//!   tokenizer, which decodes it. A wanted RCDATA element (`title`) is reported with its
//!   text and end tag: straight from the input when html5ever would not change the text
//!   (no character reference, NUL or CR, the end tag present), else tokenized whole by
//!   html5ever, which decodes it.
//!
//! Known simplifications (the rest is tested against html5ever's tokenizer run over the
//! whole input, on random documents): `noscript` is parsed as markup (scripting
//! disabled), so links in it are seen; the script-data escape states (`<!--<script>`
//! inside a script) are not modelled; `svg`/`math` nesting is a plain depth count without
//! the tree builder's break-out rules. The sink never returns `Script` or
//! `EncodingIndicator` to html5ever, so its `end()` cannot panic.
//! Depends on `skim` and `html5ever`; nothing else in the crate.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

use super::skim::{self, AttrSpan, MAX_NAME, Markup};

/// Bytes handed to html5ever at a time; bounds the work done after a visitor stops.
const CHUNK_BYTES: usize = 2048;

/// A start tag as visitors see it: lower-case names, decoded values, duplicates dropped.
#[derive(Debug)]
pub(crate) struct StartTag<'a> {
    /// Tag name, ASCII lower case.
    pub(crate) name: &'a str,
    /// Attributes in source order, the first of each name only.
    pub(crate) attrs: &'a [(Cow<'a, str>, Cow<'a, str>)],
    /// Inside `svg` or `math`.
    pub(crate) foreign: bool,
}

impl StartTag<'_> {
    /// The value of attribute `name` (lower case).
    pub(crate) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| &**v)
    }
}

/// Receives the wanted tags of one document.
pub(crate) trait Visitor {
    /// True when start tags named `name` (ASCII lower case) are to be reported.
    fn wants(&self, name: &[u8]) -> bool;

    /// A wanted start tag.
    fn start_tag(&mut self, tag: &StartTag<'_>) -> ControlFlow<()>;

    /// An end tag inside a wanted RCDATA element (its own, unless the input ends first).
    fn end_tag(&mut self, _name: &str) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    /// Character data inside a wanted RCDATA element (references already decoded).
    fn text(&mut self, _text: &str) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

/// The kinds of element content that are not markup.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Raw {
    /// `title`, `textarea`: text with character references, up to the end tag.
    Rcdata,
    /// `style`, `xmp`, `iframe`, `noembed`, `noframes`: text up to the end tag.
    Rawtext,
    /// `script`.
    Script,
    /// `plaintext`: the rest of the document.
    Plaintext,
}

/// The raw-text kind of an HTML element by its lower-case name.
pub(crate) fn raw_kind(name: &[u8]) -> Option<Raw> {
    match name {
        b"script" => Some(Raw::Script),
        b"style" | b"xmp" | b"iframe" | b"noembed" | b"noframes" => Some(Raw::Rawtext),
        b"title" | b"textarea" => Some(Raw::Rcdata),
        b"plaintext" => Some(Raw::Plaintext),
        _ => None,
    }
}

/// Scans `html`, reporting wanted tags to `visitor` until the input ends or it breaks.
pub(crate) fn scan<V: Visitor>(html: &str, visitor: &mut V) {
    let bytes = html.as_bytes();
    let mut scanner = Scanner {
        html,
        foreign: 0,
        spans: Vec::new(),
        attrs: Vec::new(),
    };
    let mut pos = 0;
    while let Some(start) = skim::memchr(b'<', bytes, pos) {
        pos = match skim::markup_at(bytes, start) {
            Markup::Text => start + 1,
            Markup::Skip(end) => end,
            Markup::Eof => return,
            Markup::EndTag { name_end, end } => {
                let mut buf = [0; MAX_NAME];
                if matches!(
                    skim::lower(&bytes[start + 2..name_end], &mut buf),
                    b"svg" | b"math"
                ) {
                    scanner.foreign = scanner.foreign.saturating_sub(1);
                }
                end
            }
            Markup::StartTag {
                name_end,
                end,
                self_closing,
            } => {
                let tag = Found {
                    start,
                    name_end,
                    end,
                    self_closing,
                };
                match scanner.start_tag(tag, visitor) {
                    Some(next) => next,
                    None => return,
                }
            }
        };
    }
}

/// A start tag found by the skimmer: `<` at `start`, name up to `name_end`, `>` before `end`.
#[derive(Clone, Copy)]
struct Found {
    start: usize,
    name_end: usize,
    end: usize,
    self_closing: bool,
}

/// Scan state, with buffers reused from tag to tag.
struct Scanner<'h> {
    html: &'h str,
    /// Open `svg`/`math` elements.
    foreign: u32,
    spans: Vec<AttrSpan>,
    attrs: Vec<(Cow<'h, str>, Cow<'h, str>)>,
}

impl<'h> Scanner<'h> {
    /// Handles one start tag; returns where to go on, or `None` to stop the scan.
    fn start_tag<V: Visitor>(&mut self, tag: Found, visitor: &mut V) -> Option<usize> {
        let bytes = self.html.as_bytes();
        let mut buf = [0; MAX_NAME];
        let name = skim::lower(&bytes[tag.start + 1..tag.name_end], &mut buf);
        if matches!(name, b"svg" | b"math") && !tag.self_closing {
            self.foreign += 1;
        }
        let foreign = self.foreign > 0;
        let raw = if foreign { None } else { raw_kind(name) };
        // Where the element's raw content ends: the `<` of its end tag.
        let content_end = || {
            raw.and_then(|_| skim::find_end_tag(bytes, tag.end, name))
                .unwrap_or(bytes.len())
        };
        if visitor.wants(name) {
            if raw == Some(Raw::Rcdata) {
                let content_end = content_end();
                let closed = match skim::markup_at(bytes, content_end) {
                    Markup::EndTag { end, .. } => Some(end),
                    _ => None,
                };
                if let Some(end) = closed {
                    let name = std::str::from_utf8(name).unwrap_or_default();
                    let text = &self.html[tag.end..content_end];
                    if self.plain_rcdata(tag, name, text, visitor)? {
                        return Some(end);
                    }
                }
                let region_end = closed.unwrap_or(bytes.len());
                tokenize(&self.html[tag.start..region_end], foreign, visitor).continue_value()?;
                return Some(region_end);
            }
            let name = std::str::from_utf8(name).unwrap_or_default();
            let flow = match self.fast_attrs(tag) {
                true => visitor.start_tag(&StartTag {
                    name,
                    attrs: &self.attrs,
                    foreign,
                }),
                false => tokenize(&self.html[tag.start..tag.end], foreign, visitor),
            };
            flow.continue_value()?;
        }
        match raw {
            None => Some(tag.end),
            Some(Raw::Plaintext) => None,
            Some(_) => Some(content_end()),
        }
    }

    /// Reports an RCDATA element closed by its end tag, whose `text` html5ever would
    /// pass on unchanged (no character reference, NUL or CR), without the tokenizer:
    /// start tag, text, end tag. `Some(false)` when it must be tokenized instead
    /// (nothing was reported), `None` when the visitor stopped.
    fn plain_rcdata<V: Visitor>(
        &mut self,
        tag: Found,
        name: &str,
        text: &str,
        visitor: &mut V,
    ) -> Option<bool> {
        let plain = !text.bytes().any(|b| matches!(b, b'&' | b'\0' | b'\r'));
        if !plain || !self.fast_attrs(tag) {
            return Some(false);
        }
        let start = StartTag {
            name,
            attrs: &self.attrs,
            foreign: false,
        };
        visitor.start_tag(&start).continue_value()?;
        if !text.is_empty() {
            visitor.text(text).continue_value()?;
        }
        visitor.end_tag(name).continue_value()?;
        Some(true)
    }

    /// Fills `self.attrs` from the skimmer's spans; false when html5ever must decode the tag.
    fn fast_attrs(&mut self, tag: Found) -> bool {
        let tag_bytes = &self.html.as_bytes()[tag.start..tag.end];
        if tag_bytes.iter().any(|&b| b == b'\0' || b == b'\r') {
            return false;
        }
        self.spans.clear();
        self.attrs.clear();
        if skim::tag_end(self.html.as_bytes(), tag.name_end, Some(&mut self.spans)).is_none() {
            return false;
        }
        for span in &self.spans {
            let raw_name = &self.html[span.name.0..span.name.1];
            let name = match raw_name.bytes().any(|b| b.is_ascii_uppercase()) {
                true => Cow::Owned(raw_name.to_ascii_lowercase()),
                false => Cow::Borrowed(raw_name),
            };
            if self.attrs.iter().any(|(seen, _)| *seen == name) {
                continue;
            }
            let Some(value) = skim::decode_value(&self.html[span.value.0..span.value.1]) else {
                return false;
            };
            self.attrs.push((name, value));
        }
        true
    }
}

/// Runs html5ever's tokenizer over `region`, switching to raw-text states (outside
/// foreign content) as the tree builder would, and reports its tags and text.
fn tokenize<V: Visitor>(region: &str, foreign: bool, visitor: &mut V) -> ControlFlow<()> {
    let sink = Sink {
        visitor: RefCell::new(visitor),
        foreign,
        stopped: Cell::new(false),
    };
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let queue = BufferQueue::default();
    let mut rest = region;
    while !rest.is_empty() {
        let mut cut = rest.len().min(CHUNK_BYTES);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        queue.push_back(StrTendril::from_slice(&rest[..cut]));
        rest = &rest[cut..];
        // The sink never blocks on scripts, so this always returns `Done`.
        let _ = tokenizer.feed(&queue);
        if tokenizer.sink.stopped.get() {
            return ControlFlow::Break(());
        }
    }
    tokenizer.end();
    ControlFlow::Continue(())
}

/// True when the space-separated token list `list` contains `token` (ASCII case-insensitive).
pub(crate) fn has_token(list: &str, token: &str) -> bool {
    list.split_ascii_whitespace()
        .any(|t| t.eq_ignore_ascii_case(token))
}

/// The tokenizer state html5ever's tree builder would pick after `tag`.
fn next_state(tag: &Tag, foreign: bool) -> TokenSinkResult<()> {
    if foreign || tag.kind != TagKind::StartTag {
        return TokenSinkResult::Continue;
    }
    match raw_kind(tag.name.as_bytes()) {
        Some(Raw::Script) => TokenSinkResult::RawData(RawKind::ScriptData),
        Some(Raw::Rawtext) => TokenSinkResult::RawData(RawKind::Rawtext),
        Some(Raw::Rcdata) => TokenSinkResult::RawData(RawKind::Rcdata),
        Some(Raw::Plaintext) => TokenSinkResult::Plaintext,
        None => TokenSinkResult::Continue,
    }
}

/// Reports an html5ever tag to the visitor in the [`StartTag`] form.
fn report<V: Visitor>(visitor: &mut V, tag: &Tag, foreign: bool) -> ControlFlow<()> {
    if tag.kind == TagKind::EndTag {
        return visitor.end_tag(&tag.name);
    }
    let attrs: Vec<(Cow<'_, str>, Cow<'_, str>)> = tag
        .attrs
        .iter()
        .map(|attr| {
            (
                Cow::Borrowed(&*attr.name.local),
                Cow::Borrowed(&*attr.value),
            )
        })
        .collect();
    visitor.start_tag(&StartTag {
        name: &tag.name,
        attrs: &attrs,
        foreign,
    })
}

struct Sink<'v, V> {
    visitor: RefCell<&'v mut V>,
    foreign: bool,
    stopped: Cell<bool>,
}

impl<V: Visitor> TokenSink for Sink<'_, V> {
    type Handle = ();

    fn process_token(&self, token: Token, _line_number: u64) -> TokenSinkResult<()> {
        if self.stopped.get() {
            return TokenSinkResult::Continue;
        }
        let mut visitor = self.visitor.borrow_mut();
        let (flow, next) = match token {
            Token::TagToken(tag) => (
                report(&mut **visitor, &tag, self.foreign),
                next_state(&tag, self.foreign),
            ),
            Token::CharacterTokens(text) => (visitor.text(&text), TokenSinkResult::Continue),
            _ => (ControlFlow::Continue(()), TokenSinkResult::Continue),
        };
        if flow.is_break() {
            self.stopped.set(true);
        }
        next
    }
}

#[cfg(test)]
#[path = "html_tests.rs"]
mod tests;
