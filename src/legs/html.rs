//! Tokenizer-level HTML scanning shared by the bundled legs (no tree is built).
//!
//! [`scan`] feeds text to html5ever's tokenizer and hands start/end tags and text to a
//! [`Visitor`], which can stop the scan early. Without a tree builder nobody tells the
//! tokenizer about raw-text elements, so the sink does it: `script` switches to script
//! data, `style`/`xmp`/`iframe`/`noembed`/`noframes` to raw text, `title`/`textarea` to
//! RCDATA and `plaintext` to plain text, as the HTML tree builder would; markup inside
//! them is text, never tags. `noscript` is parsed as markup (scripting disabled), so
//! links in it are seen. Inside `svg`/`math` (tracked by a simple depth count) no raw-text
//! switch happens and tags are reported as foreign. Never returns `Script` or
//! `EncodingIndicator` to the tokenizer, so its `end()` cannot panic.

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::{LocalName, local_name};

/// Bytes handed to the tokenizer at a time; bounds the work done after a visitor stops.
const CHUNK_BYTES: usize = 2048;

/// Receives the tokens of one document.
pub(crate) trait Visitor {
    /// A start or end tag; `foreign` is true inside `svg` or `math`.
    fn tag(&mut self, tag: Tag, foreign: bool) -> ControlFlow<()>;

    /// A run of character data (entities already decoded).
    fn text(&mut self, _text: &str) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

/// Tokenizes `html`, calling `visitor` until the input ends or the visitor breaks.
pub(crate) fn scan<V: Visitor>(html: &str, visitor: &mut V) {
    let sink = Sink {
        visitor: RefCell::new(visitor),
        foreign: Cell::new(0),
        stopped: Cell::new(false),
    };
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let queue = BufferQueue::default();
    let mut rest = html;
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
            return;
        }
    }
    tokenizer.end();
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
    list.split_ascii_whitespace()
        .any(|t| t.eq_ignore_ascii_case(token))
}

struct Sink<'v, V> {
    visitor: RefCell<&'v mut V>,
    /// Open `svg`/`math` elements.
    foreign: Cell<u32>,
    stopped: Cell<bool>,
}

impl<V> Sink<'_, V> {
    /// Updates the foreign depth for `tag` and says which state the tokenizer goes to next.
    fn track(&self, tag: &Tag) -> TokenSinkResult<()> {
        let depth = self.foreign.get();
        let is_foreign_root = matches!(tag.name, local_name!("svg") | local_name!("math"));
        match tag.kind {
            TagKind::StartTag if is_foreign_root && !tag.self_closing => {
                self.foreign.set(depth + 1)
            }
            TagKind::EndTag if is_foreign_root => self.foreign.set(depth.saturating_sub(1)),
            _ => {}
        }
        if depth > 0 || tag.kind != TagKind::StartTag {
            return TokenSinkResult::Continue;
        }
        match tag.name {
            local_name!("script") => TokenSinkResult::RawData(RawKind::ScriptData),
            local_name!("style")
            | local_name!("xmp")
            | local_name!("iframe")
            | local_name!("noembed")
            | local_name!("noframes") => TokenSinkResult::RawData(RawKind::Rawtext),
            local_name!("title") | local_name!("textarea") => {
                TokenSinkResult::RawData(RawKind::Rcdata)
            }
            local_name!("plaintext") => TokenSinkResult::Plaintext,
            _ => TokenSinkResult::Continue,
        }
    }
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
                let next = self.track(&tag);
                let foreign = self.foreign.get() > 0;
                (visitor.tag(tag, foreign), next)
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
mod tests {
    use super::*;

    /// Records start tags (with `!` when foreign) and text.
    #[derive(Default)]
    struct Record {
        log: Vec<String>,
        stop_at: Option<&'static str>,
    }

    impl Visitor for Record {
        fn tag(&mut self, tag: Tag, foreign: bool) -> ControlFlow<()> {
            let kind = if tag.kind == TagKind::StartTag {
                ""
            } else {
                "/"
            };
            let mark = if foreign { "!" } else { "" };
            self.log.push(format!("<{kind}{mark}{}>", &*tag.name));
            if self.stop_at == Some(&*tag.name) {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn text(&mut self, text: &str) -> ControlFlow<()> {
            self.log.push(text.to_owned());
            ControlFlow::Continue(())
        }
    }

    fn record(html: &str) -> String {
        let mut visitor = Record::default();
        scan(html, &mut visitor);
        visitor.log.concat()
    }

    #[test]
    fn raw_text_elements_hide_markup() {
        assert_eq!(
            record("<script>if (a<b) x='<a href=y>'</script><p>"),
            "<script>if (a<b) x='<a href=y>'</script><p>"
        );
        assert_eq!(record("<STYLE>a{}<a></style>"), "<style>a{}<a></style>");
        assert_eq!(
            record("<title>A &amp; <b>B</b></title>"),
            "<title>A & <b>B</b></title>"
        );
        assert_eq!(
            record("<noscript><a></noscript>"),
            "<noscript><a></noscript>"
        );
    }

    #[test]
    fn foreign_content_is_marked_and_not_raw() {
        assert_eq!(
            record("<svg><style><a></a></style></svg><b>"),
            "<!svg><!style><!a></!a></!style></svg><b>"
        );
    }

    #[test]
    fn visitor_can_stop_and_utf8_chunks_stay_whole() {
        let mut visitor = Record {
            stop_at: Some("i"),
            ..Record::default()
        };
        scan("<b><i><u>", &mut visitor);
        assert_eq!(visitor.log.concat(), "<b><i>");
        let long = format!("<p>{}</p>", "é".repeat(3 * CHUNK_BYTES));
        assert_eq!(
            record(&long).chars().filter(|&c| c == 'é').count(),
            3 * CHUNK_BYTES
        );
    }

    #[test]
    fn broken_markup_never_panics() {
        for html in [
            "<",
            "<a href=\"x",
            "<!--",
            "<script>",
            "</",
            "<a\0b>",
            "<![CDATA[x",
            "&#xffffff;<p",
        ] {
            record(html);
        }
        assert!(has_token(" Next\tnoFollow ", "nofollow"));
        assert!(!has_token("nofollowed", "nofollow"));
    }
}
