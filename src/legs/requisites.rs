//! Page requisites (wget's `-p`): what a page needs to be shown, as requests.
//!
//! Not a leg: the engine calls [`of`] on every fetched 2xx response when the
//! crawl has [`crate::config::CrawlConfig::page_requisites`] on, after (and
//! whatever) the legs. An HTML page (not itself a requisite) gives its
//! stylesheets (`link[rel~=stylesheet][href]`), icons
//! (`link[rel~=icon|apple-touch-icon|apple-touch-icon-precomposed][href]`),
//! scripts (`script[src]`) and images (`img[src]`, `img[srcset]`,
//! `source[srcset]`, so `<picture>` too); a stylesheet (`text/css`, requisite
//! or not) gives its `url()`s and `@import`s (`css_urls`). So
//! requisites of requisites are followed only through stylesheets: a
//! requisite's HTML is not read for anything.
//!
//! URLs are resolved against the document's first `<base href>` (HTML) or the
//! response URL, fragments dropped, non-web URLs (`data:`, `javascript:`)
//! skipped. Each becomes a [`Request::follow`] of the page marked with
//! [`REQUISITE_META`] in its `meta` (the stored request encoding is
//! unchanged); the scope lets such a request through whatever its depth,
//! host, `--no-parent` and allow/deny say, and the engine runs no legs on its
//! response, so a requisite makes no items. Depends on [`crate::request`],
//! [`crate::response`], [`crate::charset`] and the HTML scanner.

use std::borrow::Cow;
use std::ops::ControlFlow;

use url::Url;

use super::css_urls;
use super::html::{self, StartTag, Visitor, has_token};
use crate::request::Request;
use crate::response::Response;

/// The `meta` key that marks a page requisite (value `"1"`).
pub const REQUISITE_META: &str = "requisite";

/// True when `request` was queued as a page requisite.
pub fn is_requisite(request: &Request) -> bool {
    request.meta.contains_key(REQUISITE_META)
}

/// The requisite requests of `response` (see the module doc); none for a
/// non-2xx answer, nor for HTML fetched as a requisite.
pub fn of(response: &Response) -> Vec<Request> {
    if !response.is_success() {
        return Vec::new();
    }
    let (raw, base, encoding) = if is_css(response) {
        let urls = css_urls::urls(&response.text());
        (urls, strip_fragment(&response.url), None)
    } else if response.is_html() && !is_requisite(&response.request) {
        let content_type = response
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let (text, encoding) = crate::charset::decode(content_type, &response.body);
        let mut tags = Tags::default();
        html::scan(&text, &mut tags);
        let page = strip_fragment(&response.url);
        let base = tags
            .base
            .and_then(|href| page.join(&href).ok())
            .filter(is_web)
            .unwrap_or(page);
        (tags.urls, base, Some(encoding))
    } else {
        return Vec::new();
    };
    // Browsers encode a URL's query in the document's encoding.
    let encode: &dyn Fn(&str) -> Cow<'_, [u8]> =
        &|s| encoding.map_or(Cow::Borrowed(s.as_bytes()), |e| e.encode(s).0);
    let mut options = Url::options().base_url(Some(&base));
    if encoding.is_some_and(|e| e.output_encoding() != encoding_rs::UTF_8) {
        options = options.encoding_override(Some(encode));
    }
    let mut requests: Vec<Request> = Vec::new();
    for value in raw {
        let Ok(mut url) = options.parse(value.trim()) else {
            continue;
        };
        if !is_web(&url) {
            continue;
        }
        url.set_fragment(None);
        let url = String::from(url);
        if requests.iter().any(|r| r.url == url) {
            continue;
        }
        let mut request = Request::follow(&response.request, url);
        request
            .meta
            .insert(REQUISITE_META.to_owned(), "1".to_owned());
        requests.push(request);
    }
    requests
}

/// A stylesheet: served as `text/css`, or without a type from a `.css` path.
fn is_css(response: &Response) -> bool {
    match response.media_type() {
        Some(media) => media == "text/css",
        None => response.url.path().ends_with(".css"),
    }
}

fn is_web(url: &Url) -> bool {
    matches!(url.scheme(), "http" | "https") && url.host().is_some()
}

fn strip_fragment(url: &Url) -> Url {
    let mut url = url.clone();
    url.set_fragment(None);
    url
}

/// The URL values of an HTML document's requisite tags, in document order.
#[derive(Default)]
struct Tags {
    base: Option<String>,
    urls: Vec<String>,
}

impl Visitor for Tags {
    fn wants(&self, name: &[u8]) -> bool {
        match name {
            b"link" | b"script" | b"img" | b"source" => true,
            b"base" => self.base.is_none(),
            _ => false,
        }
    }

    fn start_tag(&mut self, tag: &StartTag<'_>) -> ControlFlow<()> {
        if tag.foreign {
            return ControlFlow::Continue(());
        }
        match tag.name {
            "base" => self.base = tag.attr("href").map(str::to_owned),
            "link" => {
                let rel = tag.attr("rel").unwrap_or("");
                let wanted = [
                    "stylesheet",
                    "icon",
                    "apple-touch-icon",
                    "apple-touch-icon-precomposed",
                ];
                if wanted.iter().any(|token| has_token(rel, token))
                    && let Some(href) = tag.attr("href")
                {
                    self.urls.push(href.to_owned());
                }
            }
            "script" => self.urls.extend(tag.attr("src").map(str::to_owned)),
            "img" | "source" => {
                if tag.name == "img" {
                    self.urls.extend(tag.attr("src").map(str::to_owned));
                }
                if let Some(srcset) = tag.attr("srcset") {
                    self.urls.extend(srcset_urls(srcset).map(str::to_owned));
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The URLs of a `srcset` value, by the HTML standard's parsing of it: each
/// candidate is a run of non-space characters (trailing commas end it, and
/// then it has no descriptors), then descriptors up to a comma outside
/// parentheses.
pub(crate) fn srcset_urls(srcset: &str) -> impl Iterator<Item = &str> {
    let is_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\x0c' | '\r');
    let mut rest = srcset;
    std::iter::from_fn(move || {
        loop {
            rest = rest.trim_start_matches(|c: char| is_space(c) || c == ',');
            if rest.is_empty() {
                return None;
            }
            let end = rest.find(is_space).unwrap_or(rest.len());
            let (candidate, after) = rest.split_at(end);
            let url = candidate.trim_end_matches(',');
            rest = after;
            if url.len() == candidate.len() {
                // Descriptors follow, up to a comma outside parentheses.
                let mut depth = 0usize;
                let mut stop = rest.len();
                for (i, c) in rest.char_indices() {
                    match c {
                        '(' => depth += 1,
                        ')' => depth = depth.saturating_sub(1),
                        ',' if depth == 0 => {
                            stop = i;
                            break;
                        }
                        _ => {}
                    }
                }
                rest = &rest[stop..];
            }
            if !url.is_empty() {
                return Some(url);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legs::test_response;

    fn urls(requests: &[Request]) -> Vec<&str> {
        requests.iter().map(|r| r.url.as_str()).collect()
    }

    #[test]
    fn srcset_candidates() {
        let got: Vec<&str> = srcset_urls(
            " a.png 1x, b.png 2x,c.png,, d,e.png 100w , f(1).png (x, y) 3x, data:image/png;base64,AA,, g.png",
        )
        .collect();
        assert_eq!(
            got,
            [
                "a.png",
                "b.png",
                "c.png",
                "d,e.png",
                "f(1).png",
                "data:image/png;base64,AA",
                "g.png"
            ]
        );
    }

    #[test]
    fn an_html_page_gives_its_styles_scripts_images_and_icons() {
        let html = r#"<!doctype html><html><head>
            <link rel="stylesheet" href="/s.css"><link rel="Shortcut Icon" href="fav.ico">
            <link rel=apple-touch-icon href=touch.png><link rel=next href=/p2>
            <link rel=alternate href=/feed.xml><script src="app.js#x"></script>
            <script>var x = '<img src=no.png>';</script></head><body>
            <a href=/link.html>a</a><img src=i.png srcset="i2.png 2x, i3.png 3x">
            <picture><source srcset="p.webp"><img src="data:image/gif;base64,R0"></picture>
            <img src="javascript:void(0)"><img src="http://127.0.0.2:9/cdn.png">
            <svg><image href="svg.png"/></svg><img src=i.png></body></html>"#;
        let response = test_response("http://a.test/dir/page", Some("text/html"), html);
        let requests = of(&response);
        assert_eq!(
            urls(&requests),
            [
                "http://a.test/s.css",
                "http://a.test/dir/fav.ico",
                "http://a.test/dir/touch.png",
                "http://a.test/dir/app.js",
                "http://a.test/dir/i.png",
                "http://a.test/dir/i2.png",
                "http://a.test/dir/i3.png",
                "http://a.test/dir/p.webp",
                "http://127.0.0.2:9/cdn.png",
            ]
        );
        assert!(
            requests
                .iter()
                .all(|r| is_requisite(r) && r.depth == 1 && r.referer.is_some())
        );
    }

    #[test]
    fn base_href_and_css_and_requisite_html() {
        let html = r#"<base href="http://cdn.test/b/"><img src=x.png>"#;
        let response = test_response("http://a.test/", Some("text/html"), html);
        assert_eq!(urls(&of(&response)), ["http://cdn.test/b/x.png"]);

        let css = r#"@import "more.css"; a { background: url(../bg.png#f) } b { background: url(data:x) }"#;
        let mut response = test_response("http://a.test/css/site.css", Some("text/css"), css);
        response
            .request
            .meta
            .insert(REQUISITE_META.into(), "1".into());
        assert_eq!(
            urls(&of(&response)),
            ["http://a.test/css/more.css", "http://a.test/bg.png"]
        );

        let mut requisite_html = test_response("http://a.test/", Some("text/html"), html);
        requisite_html
            .request
            .meta
            .insert(REQUISITE_META.into(), "1".into());
        assert!(of(&requisite_html).is_empty());
        let mut error = test_response("http://a.test/x.css", Some("text/css"), css);
        error.status = 404;
        assert!(of(&error).is_empty());
    }
}
