//! Tests of the skimmer: fixed inputs, and a differential test against html5ever's
//! tokenizer run over the whole input (the reference the skimmer must agree with).

use proptest::prelude::*;

use super::*;

/// Records wanted start tags (`!` marks foreign), and text and `</title>` inside a title.
struct Record {
    wanted: &'static [&'static str],
    log: Vec<String>,
    in_title: bool,
    stop_at: Option<&'static str>,
}

const ALL: &[&str] = &[
    "a", "base", "link", "img", "iframe", "title", "meta", "svg", "p",
];

impl Record {
    fn new(wanted: &'static [&'static str]) -> Record {
        Record {
            wanted,
            log: Vec::new(),
            in_title: false,
            stop_at: None,
        }
    }
}

impl Visitor for Record {
    fn wants(&self, name: &[u8]) -> bool {
        self.wanted.iter().any(|w| w.as_bytes() == name)
    }

    fn start_tag(&mut self, tag: &StartTag<'_>) -> ControlFlow<()> {
        if self.wants(tag.name.as_bytes()) {
            let mark = if tag.foreign { "!" } else { "" };
            let attrs: Vec<String> = tag
                .attrs
                .iter()
                .map(|(n, v)| format!(" {n}={v:?}"))
                .collect();
            self.log
                .push(format!("<{mark}{}{}>", tag.name, attrs.concat()));
            self.in_title |= tag.name == "title" && !tag.foreign;
        }
        match self.stop_at == Some(tag.name) {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    }

    fn end_tag(&mut self, name: &str) -> ControlFlow<()> {
        if name == "title" && self.in_title {
            self.log.push("</title>".into());
            self.in_title = false;
        }
        ControlFlow::Continue(())
    }

    fn text(&mut self, text: &str) -> ControlFlow<()> {
        if self.in_title {
            self.log.push(text.to_owned());
        }
        ControlFlow::Continue(())
    }
}

fn skim(html: &str) -> String {
    let mut visitor = Record::new(ALL);
    scan(html, &mut visitor);
    visitor.log.concat()
}

/// The whole input through html5ever's tokenizer, with the same raw-text and
/// foreign-content rules, reporting every token.
fn reference(html: &str) -> String {
    struct Full<'v> {
        visitor: RefCell<&'v mut Record>,
        depth: Cell<u32>,
    }
    impl TokenSink for Full<'_> {
        type Handle = ();
        fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
            let mut visitor = self.visitor.borrow_mut();
            match token {
                Token::TagToken(tag) => {
                    let root = matches!(&*tag.name, "svg" | "math");
                    match tag.kind {
                        TagKind::StartTag if root && !tag.self_closing => {
                            self.depth.set(self.depth.get() + 1)
                        }
                        TagKind::EndTag if root => {
                            self.depth.set(self.depth.get().saturating_sub(1))
                        }
                        _ => {}
                    }
                    let foreign = self.depth.get() > 0;
                    let _ = report(&mut **visitor, &tag, foreign);
                    next_state(&tag, foreign)
                }
                Token::CharacterTokens(text) => {
                    let _ = visitor.text(&text);
                    TokenSinkResult::Continue
                }
                _ => TokenSinkResult::Continue,
            }
        }
    }
    let mut visitor = Record::new(ALL);
    let tokenizer = Tokenizer::new(
        Full {
            visitor: RefCell::new(&mut visitor),
            depth: Cell::new(0),
        },
        TokenizerOpts::default(),
    );
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&queue);
    tokenizer.end();
    drop(tokenizer);
    visitor.log.concat()
}

fn agree(html: &str) {
    assert_eq!(skim(html), reference(html), "input {html:?}");
}

#[test]
fn raw_text_elements_hide_markup() {
    let html = "<script>if (a<b) x='<a href=y>'</scRIPT foo='>'><a href=1><STYLE>a{}<a href=2></style >\
        <textarea><a href=3></textarea><xmp><a href=4></xmp><noscript><a href=5></noscript>";
    assert_eq!(skim(html), r#"<a href="1"><a href="5">"#);
    agree(html);
    assert_eq!(skim("<script></script<a href=1>"), "");
    assert_eq!(skim("<plaintext><a href=1>"), "");
}

#[test]
fn comments_and_bogus_markup() {
    let html = "<!-- <a href=1> --><a href=2><!--><a href=3><!---><a href=4><!-- --!><a href=5>\
        <!DOCTYPE html><?php <a href=6> ?><a href=7></ <a href=8>><a href=9></><a href=10>\
        <!-- a --- b ---><a href=11><![CDATA[<a href=12>]]><a href=13>";
    assert_eq!(
        skim(html),
        r#"<a href="2"><a href="3"><a href="4"><a href="5"><a href="7"><a href="9"><a href="10"><a href="11"><a href="13">"#
    );
    agree(html);
    assert_eq!(
        skim("<a href=1><!-- never closed <a href=2>"),
        r#"<a href="1">"#
    );
}

#[test]
fn attribute_values_may_hold_markup() {
    let html = r#"<a title="x > y" href=1><a title='<a href=2>' href=3><a title=it's href=4><a href=5/>
        <a href =  6 ><A HREF="&amp;&lt;&#x41;&copy">"#;
    assert_eq!(
        skim(html),
        r#"<a title="x > y" href="1"><a title="<a href=2>" href="3"><a title="it's" href="4"><a href="5/"><a href="6"><a href="&<A©">"#
    );
    agree(html);
    assert_eq!(skim("<a href='never closed><a href=2>"), "");
}

#[test]
fn foreign_content_is_marked_and_not_raw() {
    let html = "<svg><title>icon</title><style><a href=1></style></svg><title>real &amp; t</title><math/><a href=2>";
    assert_eq!(
        skim(html),
        r#"<!svg><!title><!a href="1"><title>real & t</title><a href="2">"#
    );
    agree(html);
}

#[test]
fn titles_report_text_and_end_tag() {
    agree("<title>a <b>b</b> &lt;</title><title>second</title>");
    agree("<title lang=en>plain <a href=x> </titlex></TITLE >after<a href=y>");
    agree("<title>a\r\nb</title><title>\0</title><title></title>");
    agree("<title>never closed <a href=x>");
    agree("<title>x</title foo>y");
    assert_eq!(skim("<TITLE>x</Title>"), "<title>x</title>");
}

#[test]
fn visitor_can_stop_and_long_utf8_regions_stay_whole() {
    let mut visitor = Record::new(ALL);
    visitor.stop_at = Some("base");
    scan("<a href=1><base href=2><a href=3>", &mut visitor);
    assert_eq!(visitor.log.concat(), r#"<a href="1"><base href="2">"#);
    let long = format!("<title>{}</title>", "é".repeat(3 * CHUNK_BYTES));
    assert_eq!(
        skim(&long).chars().filter(|&c| c == 'é').count(),
        3 * CHUNK_BYTES
    );
}

#[test]
fn broken_markup_never_panics() {
    for html in [
        "<",
        "<a",
        "<a href=\"x",
        "<!--",
        "<!",
        "<!-",
        "<script>",
        "</",
        "</a",
        "<a\0b>",
        "&#xffffff;<p",
        "<a/",
        "<a =>",
    ] {
        agree(html);
    }
    assert!(has_token(" Next\tnoFollow ", "nofollow"));
    assert!(!has_token("nofollowed", "nofollow"));
}

/// Pieces random documents are made of. Script-data escapes (`<!--` inside a script) are
/// a documented simplification, so comment openers and scripts are never mixed.
const MARKUP: &[&str] = &[
    "<a href=x>",
    "<a title='>' href=\"y\">",
    "<base href=/b/>",
    "<img src=i>",
    "<p>",
    "</p>",
    "<svg>",
    "</svg>",
    "<svg/>",
    "<math>",
    "</math>",
    "<title>",
    "</title>",
    "<style>",
    "</style>",
    "<textarea>",
    "</textarea>",
    "<iframe>",
    "</iframe>",
    "<",
    ">",
    "/",
    "=",
    "\"",
    "'",
    " ",
    "a",
    "href",
    "&amp;",
    "é",
    "\n",
    "<?",
    "</",
    "!",
    "&lt;",
    "&#38;",
    "&amp",
    "&copy",
    "&",
    "\r",
    "\0",
    "HREF",
    "<A HREF=X href=y>",
    "<a href=1 HREF=2 title=\"&quot;&apos;&gt;\">",
    "<a\thref\n=\x0c'z'/>",
    "<a href=",
    "<a title=\"",
    "<base href='",
    "<A Rel=",
    "<meta charset=utf-8>",
    "<plaintext>",
    "<link rel=next href=n>",
];

fn document(with_scripts: bool) -> impl Strategy<Value = String> {
    let extra: &'static [&'static str] = if with_scripts {
        &["<script>", "</script>", "</script "]
    } else {
        &["<!--", "<!", "-->", "--", "-"]
    };
    proptest::collection::vec(
        prop_oneof![4 => proptest::sample::select(MARKUP), 1 => proptest::sample::select(extra)],
        0..40,
    )
    .prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn skimmer_agrees_with_the_full_tokenizer_with_scripts(html in document(true)) {
        prop_assert_eq!(skim(&html), reference(&html), "input {:?}", html);
    }

    #[test]
    fn skimmer_agrees_with_the_full_tokenizer_with_comments(html in document(false)) {
        prop_assert_eq!(skim(&html), reference(&html), "input {:?}", html);
    }
}

proptest! {
    #[test]
    fn word_at_a_time_memchr_finds_the_first_byte(
        bytes in proptest::collection::vec(prop_oneof![Just(b'<'), Just(0x3c ^ 0x80), any::<u8>()], 0..40),
        from in 0usize..45,
    ) {
        let expected = bytes
            .get(from..)
            .and_then(|rest| rest.iter().position(|&b| b == b'<'))
            .map(|n| from + n);
        prop_assert_eq!(skim::memchr(b'<', &bytes, from), expected);
    }
}
