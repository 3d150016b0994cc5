//! HTML scanning shared by the bundled legs: a byte-level skimmer plus html5ever's tokenizer.
//!
//! Running html5ever's tokenizer over a whole page costs more than the crawler's budget
//! per page (it builds every tag name and attribute char by char), and the legs read only
//! a handful of elements. So [`scan`] splits the work:
//! - a skimmer walks the page with `memchr`-speed searches for `<` and follows the HTML
//!   tokenizer's states only as far as needed to find where each piece of markup ends:
//!   comments (`<!-- -->`, including `<!-->` and `--!>`), bogus comments and doctypes
//!   (`<!...>`, `<?...>`, `</ ...>`), start and end tags (quoted attribute values may
//!   contain `>`), and the contents of raw-text elements outside `svg`/`math`: `script`,
//!   `style`, `xmp`, `iframe`, `noembed`, `noframes` (raw text), `title`, `textarea`
//!   (RCDATA, skipped up to their end tag) and `plaintext` (the rest of the page);
//! - each start tag the [`Visitor`] wants is handed, as its own small input, to html5ever's
//!   tokenizer, which does the real tokenization (attribute parsing, character references)
//!   and reports the [`Tag`]. For a wanted RCDATA element (`title`), the whole element is
//!   tokenized, so the visitor also sees its decoded text and end tag.
//!
//! Known simplifications (tested against the full tokenizer on random input): `noscript`
//! is parsed as markup (scripting disabled), so links in it are seen; the script-data
//! escape states (`<!--<script>` inside a script) are not modelled; `svg`/`math` nesting is
//! a plain depth count without the tree builder's break-out rules. The sink never returns
//! `Script` or `EncodingIndicator` to the tokenizer, so its `end()` cannot panic.

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::LocalName;

/// Bytes handed to the tokenizer at a time; bounds the work done after a visitor stops.
const CHUNK_BYTES: usize = 2048;

/// Tag names longer than this are never wanted, raw or foreign.
const MAX_NAME: usize = 16;

/// Receives the wanted tags of one document.
pub(crate) trait Visitor {
    /// True when start tags named `name` (ASCII lower case) are to be tokenized and reported.
    fn wants(&self, name: &[u8]) -> bool;

    /// A wanted start tag, or a tag inside a wanted RCDATA element; `foreign` is true
    /// inside `svg` or `math`.
    fn tag(&mut self, tag: Tag, foreign: bool) -> ControlFlow<()>;

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
    let mut foreign = 0u32;
    let mut pos = 0;
    while let Some(offset) = html[pos..].find('<') {
        let start = pos + offset;
        pos = match markup_at(bytes, start) {
            Markup::Text => start + 1,
            Markup::Skip(end) => end,
            Markup::Eof => return,
            Markup::EndTag { name_end, end } => {
                let mut buf = [0; MAX_NAME];
                if matches!(lower(&bytes[start + 2..name_end], &mut buf), b"svg" | b"math") {
                    foreign = foreign.saturating_sub(1);
                }
                end
            }
            Markup::StartTag { name_end, end, self_closing } => {
                let tag = StartTag { start, name_end, end, self_closing };
                match start_tag(html, tag, &mut foreign, visitor) {
                    Some(next) => next,
                    None => return,
                }
            }
        };
    }
}

/// A start tag found by the skimmer: `<` at `start`, name up to `name_end`, `>` before `end`.
#[derive(Clone, Copy)]
struct StartTag {
    start: usize,
    name_end: usize,
    end: usize,
    self_closing: bool,
}

/// Handles one start tag; returns where to go on, or `None` to stop the scan.
fn start_tag<V: Visitor>(html: &str, tag: StartTag, foreign: &mut u32, visitor: &mut V) -> Option<usize> {
    let bytes = html.as_bytes();
    let mut buf = [0; MAX_NAME];
    let name = lower(&bytes[tag.start + 1..tag.name_end], &mut buf);
    let is_root = matches!(name, b"svg" | b"math");
    if is_root && !tag.self_closing {
        *foreign += 1;
    }
    let in_foreign = *foreign > 0;
    let raw = if in_foreign { None } else { raw_kind(name) };
    // Where the element's raw content ends: the `<` of its end tag.
    let content_end = |from: usize| raw.and_then(|_| find_end_tag(bytes, from, name)).unwrap_or(bytes.len());
    if visitor.wants(name) {
        if raw == Some(Raw::Rcdata) {
            let close = content_end(tag.end);
            let region_end = match markup_at(bytes, close) {
                Markup::EndTag { end, .. } => end,
                _ => bytes.len(),
            };
            tokenize(&html[tag.start..region_end], in_foreign, visitor).continue_value()?;
            return Some(region_end);
        }
        tokenize(&html[tag.start..tag.end], in_foreign, visitor).continue_value()?;
    }
    match raw {
        None => Some(tag.end),
        Some(Raw::Plaintext) => None,
        Some(_) => Some(content_end(tag.end)),
    }
}

/// What starts at a `<`.
enum Markup {
    /// A literal `<`.
    Text,
    /// A comment, doctype or bogus comment ending just before this index.
    Skip(usize),
    /// Markup that runs to the end of the input (nothing more is emitted).
    Eof,
    /// `<name ...>`; `end` is just past the `>`.
    StartTag { name_end: usize, end: usize, self_closing: bool },
    /// `</name ...>`; `end` is just past the `>`.
    EndTag { name_end: usize, end: usize },
}

fn markup_at(bytes: &[u8], start: usize) -> Markup {
    let at = |i: usize| bytes.get(start + i).copied();
    let to_gt = |from: usize| match memchr(b'>', bytes, from) {
        Some(gt) => Markup::Skip(gt + 1),
        None => Markup::Eof,
    };
    match at(1) {
        Some(b'!') if bytes[start + 2..].starts_with(b"--") => match comment_end(bytes, start + 4) {
            Some(end) => Markup::Skip(end),
            None => Markup::Eof,
        },
        Some(b'!') | Some(b'?') => to_gt(start + 2),
        Some(b'/') => match at(2) {
            Some(c) if c.is_ascii_alphabetic() => {
                let name_end = name_end(bytes, start + 2);
                match tag_end(bytes, name_end) {
                    Some((gt, _)) => Markup::EndTag { name_end, end: gt + 1 },
                    None => Markup::Eof,
                }
            }
            Some(b'>') => Markup::Skip(start + 3),
            Some(_) => to_gt(start + 2),
            None => Markup::Text,
        },
        Some(c) if c.is_ascii_alphabetic() => {
            let name_end = name_end(bytes, start + 1);
            match tag_end(bytes, name_end) {
                Some((gt, self_closing)) => Markup::StartTag { name_end, end: gt + 1, self_closing },
                None => Markup::Eof,
            }
        }
        _ => Markup::Text,
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0C' | b'\r' | b' ')
}

fn name_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| is_space(b) || b == b'/' || b == b'>')
        .map_or(bytes.len(), |n| from + n)
}

/// From just after a tag name, the index of the `>` closing the tag and whether it is
/// self-closing, following the tokenizer's attribute states; `None` at end of input.
fn tag_end(bytes: &[u8], from: usize) -> Option<(usize, bool)> {
    #[derive(Clone, Copy, PartialEq)]
    enum S {
        BeforeName,
        Name,
        AfterName,
        BeforeValue,
        Quoted(u8),
        Unquoted,
    }
    let mut state = S::BeforeName;
    let mut slash = false;
    let mut i = from;
    while i < bytes.len() {
        let b = bytes[i];
        let after_slash = std::mem::take(&mut slash);
        state = match (state, b) {
            (S::Quoted(q), _) if b == q => S::BeforeName,
            (S::Quoted(q), _) => {
                i = memchr(q, bytes, i).unwrap_or(bytes.len());
                continue;
            }
            (S::Unquoted, b'>') | (S::BeforeValue, b'>') => return Some((i, false)),
            (S::Unquoted, _) if is_space(b) => S::BeforeName,
            (S::Unquoted, _) => S::Unquoted,
            (S::BeforeValue, b'"' | b'\'') => S::Quoted(b),
            (S::BeforeValue, _) if is_space(b) => S::BeforeValue,
            (S::BeforeValue, _) => S::Unquoted,
            (_, b'>') => return Some((i, after_slash)),
            (_, b'/') => {
                slash = true;
                S::BeforeName
            }
            (S::Name | S::AfterName, b'=') => S::BeforeValue,
            (S::Name, _) if is_space(b) => S::AfterName,
            (S::BeforeName | S::AfterName, _) if is_space(b) => state,
            _ => S::Name,
        };
        i += 1;
    }
    None
}

/// From just after `<!--`, the index just past the comment's end.
fn comment_end(bytes: &[u8], from: usize) -> Option<usize> {
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
fn find_end_tag(bytes: &[u8], from: usize, name: &[u8]) -> Option<usize> {
    let mut i = from;
    loop {
        let lt = memchr(b'<', bytes, i)?;
        let after = &bytes[lt + 1..];
        if after.len() > name.len() + 1
            && after[0] == b'/'
            && after[1..=name.len()].eq_ignore_ascii_case(name)
            && matches!(after[name.len() + 1], b'/' | b'>' | b'\t' | b'\n' | b'\x0C' | b'\r' | b' ')
        {
            return Some(lt);
        }
        i = lt + 1;
    }
}

/// The first index at or after `from` holding `needle`.
fn memchr(needle: u8, bytes: &[u8], from: usize) -> Option<usize> {
    bytes.get(from..)?.iter().position(|&b| b == needle).map(|n| from + n)
}

/// `raw` in ASCII lower case in `buf`, or empty when longer than [`MAX_NAME`].
fn lower<'b>(raw: &[u8], buf: &'b mut [u8; MAX_NAME]) -> &'b [u8] {
    if raw.len() > MAX_NAME {
        return &[];
    }
    let out = &mut buf[..raw.len()];
    out.copy_from_slice(raw);
    out.make_ascii_lowercase();
    out
}

/// Runs html5ever's tokenizer over `region`, switching to raw-text states (outside
/// foreign content) as the tree builder would, and reports every tag and text run.
fn tokenize<V: Visitor>(region: &str, foreign: bool, visitor: &mut V) -> ControlFlow<()> {
    let sink = Sink { visitor: RefCell::new(visitor), foreign, stopped: Cell::new(false) };
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

/// The value of attribute `name` (no namespace) on `tag`.
pub(crate) fn attr<'t>(tag: &'t Tag, name: &LocalName) -> Option<&'t str> {
    tag.attrs
        .iter()
        .find(|attr| attr.name.ns.is_empty() && attr.name.local == *name)
        .map(|attr| &*attr.value)
}

/// True when the space-separated token list `list` contains `token` (ASCII case-insensitive).
pub(crate) fn has_token(list: &str, token: &str) -> bool {
    list.split_ascii_whitespace().any(|t| t.eq_ignore_ascii_case(token))
}

/// The tokenizer state html5ever's tree builder would pick after `tag`.
pub(crate) fn next_state(tag: &Tag, foreign: bool) -> TokenSinkResult<()> {
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
            Token::TagToken(tag) => {
                let next = next_state(&tag, self.foreign);
                (visitor.tag(tag, self.foreign), next)
            }
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
