//! Unit tests of [`LinkExtractor`] on fixed HTML, broken markup included.

use super::*;
use crate::legs::{run, test_response};

const PAGE: &str = "http://example.com/dir/page.html";

fn links_with(extractor: &LinkExtractor, html: &str) -> Vec<String> {
    let response = test_response(PAGE, Some("text/html; charset=utf-8"), html.to_owned());
    urls(extractor, &response)
}

fn urls(extractor: &LinkExtractor, response: &Response) -> Vec<String> {
    run(extractor, response)
        .requests
        .into_iter()
        .map(|r| r.url)
        .collect()
}

fn links(html: &str) -> Vec<String> {
    links_with(&LinkExtractor::new(), html)
}

#[test]
fn reads_a_area_and_link_next_resolving_relative_urls() {
    let html = r#"<a href="a.html">A</a> <area href="/b"> <link rel="next" href="?p=2">
        <link rel=stylesheet href=s.css> <a name=x>no href</a> <A HREF='../c#frag'>"#;
    assert_eq!(
        links(html),
        [
            "http://example.com/dir/a.html",
            "http://example.com/b",
            "http://example.com/dir/page.html?p=2",
            "http://example.com/c",
        ]
    );
}

#[test]
fn requests_follow_the_page() {
    let mut response = test_response(PAGE, Some("text/html"), "<a href=x>");
    response.request.depth = 3;
    let out = run(&LinkExtractor::new(), &response);
    assert_eq!(out.requests.len(), 1);
    assert_eq!(out.requests[0].depth, 4);
    assert_eq!(out.requests[0].referer.as_deref(), Some(PAGE));
    assert_eq!(out.requests[0].method, "GET");
}

#[test]
fn first_base_href_applies_to_every_link() {
    let html = r#"<a href="early"><base href="/other/"><base href="/ignored/"><a href="late">"#;
    assert_eq!(
        links(html),
        [
            "http://example.com/other/early",
            "http://example.com/other/late"
        ]
    );
    // A base without href does not count; a javascript: base is ignored.
    assert_eq!(
        links(r#"<base target=_top><base href="/b/"><a href=x>"#),
        ["http://example.com/b/x"]
    );
    assert_eq!(
        links(r#"<base href="javascript:void(0)"><a href=x>"#),
        ["http://example.com/dir/x"]
    );
}

#[test]
fn keeps_self_links_and_drops_fragments_and_non_web_schemes() {
    let html = r##"<a href="#top"> <a href=""> <a href="page.html#x"> <a href="javascript:go()">
        <a href="mailto:a@example.com"> <a href="tel:+1"> <a href="data:text/html,hi">
        <a href="ftp://example.com/f"> <a href="http://[bad"> <a href="HTTPS://EXAMPLE.COM/Up">"##;
    let page = "http://example.com/dir/page.html";
    assert_eq!(links(html), [page, page, page, "https://example.com/Up"]);
}

#[test]
fn nofollow_is_skipped_unless_followed() {
    let html =
        r#"<a rel="external NoFollow" href=/n> <link rel="next nofollow" href=/n2> <a href=/y>"#;
    assert_eq!(links(html), ["http://example.com/y"]);
    let follow = LinkExtractor::new().follow_nofollow(true);
    assert_eq!(
        links_with(&follow, html),
        [
            "http://example.com/n",
            "http://example.com/n2",
            "http://example.com/y"
        ]
    );
}

#[test]
fn meta_robots_nofollow_silences_the_page() {
    let html = r#"<meta name="ROBOTS" content="noindex, nofollow"><a href=/x>"#;
    assert!(links(html).is_empty());
    assert!(links(r#"<meta name=robots content=none><a href=/x>"#).is_empty());
    assert_eq!(
        links(r#"<meta name=robots content=noindex><a href=/x>"#).len(),
        1
    );
    assert_eq!(
        links_with(&LinkExtractor::new().follow_nofollow(true), html).len(),
        1
    );
}

#[test]
fn scope_defaults_to_the_request_host() {
    let html = r#"<a href="http://example.com/a"> <a href="http://www.example.com/b"> <a href="//other.org/c">
        <a href="https://example.com:8443/d">"#;
    assert_eq!(
        links(html),
        ["http://example.com/a", "https://example.com:8443/d"]
    );
    // After a redirect the scope is still the host that was requested.
    let mut response = test_response(
        "http://www.example.com/",
        Some("text/html"),
        html.to_owned(),
    );
    response.request.url = PAGE.to_owned();
    assert_eq!(urls(&LinkExtractor::new(), &response).len(), 2);
}

#[test]
fn allowed_hosts_replace_the_default_scope() {
    let extractor = LinkExtractor::new()
        .allowed_hosts(&["Other.ORG", "www.example.com:80"])
        .unwrap();
    let html = r#"<a href="http://example.com/a"> <a href="http://www.example.com/b"> <a href="//other.org/c">"#;
    assert_eq!(
        links_with(&extractor, html),
        ["http://www.example.com/b", "http://other.org/c"]
    );
    let error = LinkExtractor::new()
        .allowed_hosts(&["http://x/y"])
        .unwrap_err();
    assert!(matches!(error, LegError::Invalid { leg: "links", .. }));
}

#[test]
fn allow_and_deny_regexes_test_absolute_urls() {
    let extractor = LinkExtractor::new()
        .allow(&[r"/product\.php\?", r"^http://example\.com/cat/"])
        .unwrap()
        .deny(&[r"id=13\b"])
        .unwrap();
    let html = r#"<a href="/product.php?id=1"> <a href="/product.php?id=13"> <a href="cat/x"> <a href="/about">
        <a href="/cat/9">"#;
    assert_eq!(
        links_with(&extractor, html),
        [
            "http://example.com/product.php?id=1",
            "http://example.com/cat/9"
        ]
    );
}

#[test]
fn configure_reads_the_crawl_config_but_keeps_pinned_settings() {
    let config = CrawlConfig {
        allow: vec!["/keep".into()],
        deny: vec!["/keep/no".into()],
        allowed_hosts: vec!["example.com".into(), "b.example.com".into()],
        follow_nofollow: false,
        max_depth: Some(5),
        ..CrawlConfig::default()
    };
    let mut extractor = LinkExtractor::new().follow_nofollow(true);
    extractor.configure(&config).unwrap();
    let html = r#"<a href=/keep/1> <a href=/keep/no> <a href=/drop> <a rel=nofollow href="http://b.example.com/keep">"#;
    assert_eq!(
        links_with(&extractor, html),
        ["http://example.com/keep/1", "http://b.example.com/keep"]
    );
    assert_eq!(extractor.max_depth, Some(5));
}

#[test]
fn bad_regex_names_the_pattern() {
    let config = CrawlConfig {
        deny: vec!["ok".into(), "a(b".into()],
        ..CrawlConfig::default()
    };
    let error = LinkExtractor::new().configure(&config).unwrap_err();
    match error {
        LegError::BadRegex { leg, pattern, .. } => {
            assert_eq!((leg, pattern.as_str()), ("links", "a(b"))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(LinkExtractor::new().allow(&["["]).is_err());
}

#[test]
fn max_depth_stops_link_emission() {
    let extractor = LinkExtractor::new().max_depth(Some(2));
    let mut response = test_response(PAGE, Some("text/html"), "<a href=x>");
    response.request.depth = 1;
    assert_eq!(urls(&extractor, &response).len(), 1);
    response.request.depth = 2;
    assert!(urls(&extractor, &response).is_empty());
    assert!(
        urls(
            &LinkExtractor::new().max_depth(Some(0)),
            &test_response(PAGE, None, "<html><a href=x>")
        )
        .is_empty()
    );
}

#[test]
fn only_successful_html_responses() {
    let extractor = LinkExtractor::new();
    assert!(
        urls(
            &extractor,
            &test_response(PAGE, Some("application/json"), "<a href=x>")
        )
        .is_empty()
    );
    assert!(
        urls(
            &extractor,
            &test_response(PAGE, Some("image/png"), "<a href=x>")
        )
        .is_empty()
    );
    let mut response = test_response(PAGE, Some("text/html"), "<a href=x>");
    response.status = 404;
    assert!(urls(&extractor, &response).is_empty());
    // No Content-Type but an HTML-looking body: sniffed as HTML.
    assert_eq!(
        urls(
            &extractor,
            &test_response(PAGE, None, "<!DOCTYPE html><a href=x>")
        )
        .len(),
        1
    );
    assert_eq!(
        urls(
            &extractor,
            &test_response(PAGE, Some("application/xhtml+xml"), "<a href=x>")
        )
        .len(),
        1
    );
}

#[test]
fn images_and_iframes_are_opt_in() {
    let html =
        r#"<img src="i.png"><iframe src="f.html"><a href="inside">no</a></iframe><a href=a>"#;
    assert_eq!(links(html), ["http://example.com/dir/a"]);
    let all = LinkExtractor::new().images(true).iframes(true);
    assert_eq!(
        links_with(&all, html),
        [
            "http://example.com/dir/i.png",
            "http://example.com/dir/f.html",
            "http://example.com/dir/a"
        ]
    );
}

#[test]
fn broken_markup() {
    let html = "<html><body><p>unclosed <a href=one>x<a href='two'\n>y</b></i>\
        <!-- <a href=commented> --><script>document.write('<a href=\"scripted\">')</script>\
        <a href = \"  three \t\"><a href=four&amp;five&lt>\
        <textarea><a href=text></textarea><a href=\"six";
    assert_eq!(
        links(html),
        [
            "http://example.com/dir/one",
            "http://example.com/dir/two",
            "http://example.com/dir/three",
            "http://example.com/dir/four&five%3C",
        ]
    );
    assert!(links("").is_empty());
    assert!(links("<a href").is_empty());
    assert!(
        links("\u{0}\u{feff}<<<>>>&&&#;<a/href=/z/>")
            .iter()
            .all(|u| u.starts_with("http://example.com/"))
    );
}

#[test]
fn non_ascii_links_in_a_legacy_encoding() {
    let html = "<a href=\"/путь?q=слово\">";
    let (bytes, _, _) = encoding_rs::WINDOWS_1251.encode(html);
    let response = test_response(
        PAGE,
        Some("text/html; charset=windows-1251"),
        bytes.into_owned(),
    );
    // The path is UTF-8 percent-encoded, the query in the page's encoding (as browsers do).
    assert_eq!(
        urls(&LinkExtractor::new(), &response),
        ["http://example.com/%D0%BF%D1%83%D1%82%D1%8C?q=%F1%EB%EE%E2%EE"]
    );
    assert_eq!(
        links(html),
        ["http://example.com/%D0%BF%D1%83%D1%82%D1%8C?q=%D1%81%D0%BB%D0%BE%D0%B2%D0%BE"]
    );
}

#[test]
fn duplicates_are_kept_for_the_scheduler() {
    assert_eq!(links("<a href=x><a href=x>").len(), 2);
}

#[test]
fn restrict_css_keeps_only_links_inside_the_regions() {
    let html = r#"<html><body><nav><a href=/nav>n</a></nav>
        <div id=content><p><a href=/one>1</a> <a rel=nofollow href=/nf>x</a></p>
        <a href=/two>2</a></div><div class="pager"><link rel=next href=/page2><a href=/p3>3</a></div>
        <footer><a href=/foot>f</a></footer>"#;
    let leg = LinkExtractor::new()
        .restrict_css(&["#content", "div.pager"])
        .unwrap();
    assert_eq!(
        links_with(&leg, html),
        [
            "http://example.com/one",
            "http://example.com/two",
            "http://example.com/page2",
            "http://example.com/p3"
        ]
    );
    let err = LinkExtractor::new().restrict_css(&["div[["]).err().unwrap();
    assert!(err.to_string().contains("div[["), "{err}");
}
