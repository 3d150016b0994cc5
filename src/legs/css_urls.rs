//! The URLs a stylesheet loads: `url(...)`, `@import`, `image-set()` strings.
//!
//! Tokenized with `cssparser` (Servo's CSS Syntax Level 3 tokenizer), so
//! quotes, backslash escapes, comments and the recovery from bad URLs are the
//! browsers': `url(a\)b.png)` is `a)b.png`, `/* url(x) */` is nothing, and an
//! unquoted URL with a quote in it is a bad-url token, skipped. Blocks
//! (`{}`, `()`, `[]`, functions) are descended into, at most [`MAX_NESTING`]
//! deep (cssparser has a limit of its own too) so that a hostile stylesheet
//! cannot exhaust the stack. The values are
//! returned raw (not resolved): `data:` and other non-web URLs are dropped by
//! the caller when it resolves them. Depends on nothing else in the crate.

use cssparser::{ParseError, Parser, Token};

/// Blocks nested deeper than this are skipped.
pub(crate) const MAX_NESTING: usize = 64;

/// The URL values `css` refers to, in source order (duplicates kept).
pub(crate) fn urls(css: &str) -> Vec<String> {
    let mut parser = Parser::new(css);
    let mut out = Vec::new();
    collect(&mut parser, 0, Context::Plain, &mut out);
    out
}

/// What a quoted string means in the block being read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// A string is just a string.
    Plain,
    /// Inside `url(...)` or `image-set(...)`: a string is a URL.
    Url,
}

fn collect(parser: &mut Parser<'_>, depth: usize, context: Context, out: &mut Vec<String>) {
    // True right after `@import`: its first string is a URL.
    let mut import = false;
    loop {
        let token = match parser.next() {
            Ok(token) => token.clone(),
            Err(_) => return,
        };
        let after_import = std::mem::take(&mut import);
        let nested = match &token {
            Token::UnquotedUrl(url) => {
                out.push(url.to_string());
                None
            }
            Token::QuotedString(value) if after_import || context == Context::Url => {
                out.push(value.to_string());
                None
            }
            Token::AtKeyword(name) => {
                import = name.eq_ignore_ascii_case("import");
                None
            }
            Token::Function(name) => Some(
                match name.eq_ignore_ascii_case("url")
                    || name.eq_ignore_ascii_case("image-set")
                    || name.eq_ignore_ascii_case("-webkit-image-set")
                {
                    true => Context::Url,
                    false => Context::Plain,
                },
            ),
            Token::ParenthesisBlock | Token::SquareBracketBlock | Token::CurlyBracketBlock => {
                Some(Context::Plain)
            }
            _ => None,
        };
        if let Some(inner) = nested
            && depth < MAX_NESTING
        {
            let _ = parser.parse_nested_block(|block| {
                collect(block, depth + 1, inner, out);
                Ok::<(), ParseError<()>>(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_imports_with_quotes_escapes_and_comments() {
        let css = r#"
            @charset "utf-8";
            @import "base.css";
            @import url(print.css) print;
            @IMPORT url( 'spaced.css' );
            /* url(commented.png) @import "no.css"; */
            body { background: url(bg.png) no-repeat; content: "not a url"; }
            .a { background-image: url("q u o t e d.png"), url('single.png'); }
            .b { background: url(esc\)aped.png); }
            .c { background: url(data:image/png;base64,AAAA); }
            @media screen { .d { background: url(  nested.gif  ) } }
            .e { background-image: image-set("one.png" 1x, url(two.png) 2x); }
            .f { background: url(bad"url.png); }
            @font-face { font-family: x; src: url(font.woff2) format("woff2"); }
        "#;
        assert_eq!(
            urls(css),
            [
                "base.css",
                "print.css",
                "spaced.css",
                "bg.png",
                "q u o t e d.png",
                "single.png",
                "esc)aped.png",
                "data:image/png;base64,AAAA",
                "nested.gif",
                "one.png",
                "two.png",
                "font.woff2",
            ]
        );
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let deep = format!(
            "{}url(deep.png){}",
            "(".repeat(100_000),
            ")".repeat(100_000)
        );
        assert!(urls(&deep).is_empty());
        let shallow = format!("{}url(ok.png){}", "[".repeat(10), "]".repeat(10));
        assert_eq!(urls(&shallow), ["ok.png"]);
    }
}
