//! Tests of [`super::join`]: it must agree with `Url::join` whenever it answers.

use proptest::prelude::*;
use url::Url;

use super::*;

/// `Url::join` with the fragment dropped, as the link extractor uses it.
fn parser_join(base: &str, href: &str) -> Option<String> {
    let mut url = Url::parse(base).ok()?.join(href).ok()?;
    url.set_fragment(None);
    Some(url.into())
}

/// `join` answers only what the parser would.
fn assert_agrees(base: &str, href: &str) -> bool {
    let Some(parts) = canon::split(base) else {
        return false;
    };
    match join(&parts, href) {
        Some((joined, host)) => {
            assert_eq!(
                canon::split(&joined).map(|p| p.host),
                Some(host),
                "{base} + {href:?}"
            );
            assert!(
                canon::split(&joined).is_some(),
                "{base} + {href:?}: {joined}"
            );
            assert_eq!(
                Some(&joined),
                parser_join(base, href).as_ref(),
                "{base} + {href:?}"
            );
            true
        }
        None => false,
    }
}

#[test]
fn common_links_resolve_without_the_parser() {
    let base = "http://127.0.0.1:8080/p/3.html?x=1";
    for (href, expected) in [
        ("4.html", "http://127.0.0.1:8080/p/4.html"),
        ("/p/5.html", "http://127.0.0.1:8080/p/5.html"),
        ("../q/6.html", "http://127.0.0.1:8080/q/6.html"),
        ("./a/../b/", "http://127.0.0.1:8080/p/b/"),
        ("..", "http://127.0.0.1:8080/"),
        (".", "http://127.0.0.1:8080/p/"),
        ("../../..", "http://127.0.0.1:8080/"),
        ("?page=2", "http://127.0.0.1:8080/p/3.html?page=2"),
        ("#top", "http://127.0.0.1:8080/p/3.html?x=1"),
        ("", "http://127.0.0.1:8080/p/3.html?x=1"),
        (
            "a.html?b=1&c=%2F#f",
            "http://127.0.0.1:8080/p/a.html?b=1&c=%2F",
        ),
        ("a//b", "http://127.0.0.1:8080/p/a//b"),
        ("http://other.com/", "http://other.com/"),
        (
            "https://other.com:8443/a/b?c=d#e f",
            "https://other.com:8443/a/b?c=d",
        ),
    ] {
        let parts = canon::split(base).unwrap();
        let joined = join(&parts, href).map(|(text, _)| text);
        assert_eq!(joined.as_deref(), Some(expected), "{href:?}");
        assert!(assert_agrees(base, href));
    }
}

#[test]
fn unusual_links_are_left_to_the_parser() {
    let parts = canon::split("https://example.com/a/b").unwrap();
    for href in [
        "HTTP://other.com/",
        "http://Other.com/",
        "http://other.com",
        "http://other.com:80/",
        "http://other.com/a b",
        "http://other.com/a/../b",
        "//other.com/x",
        "mailto:a@b.c",
        "javascript:void(0)",
        "a:b/c",
        " x.html",
        "x.html ",
        "a\\b",
        "a\tb",
        "caf\u{e9}",
        "%2e%2e/x",
        "a b",
        "?q=a b",
        "?q='",
    ] {
        assert_eq!(join(&parts, href), None, "{href:?}");
    }
}

fn plain_base() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just("http://a.test"),
            Just("https://b.test:8443"),
            Just("http://10.0.0.1")
        ],
        "(/[a-z0-9]{0,2}(\\.[a-z]{1,2})?){1,4}",
        proptest::option::of("[a-z=&]{0,4}"),
    )
        .prop_map(|(origin, path, query)| match query {
            Some(query) => format!("{origin}{path}?{query}"),
            None => format!("{origin}{path}"),
        })
}

fn any_href() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        12 => "[a-z0-9_~-]{0,3}",
        4 => Just(".".to_owned()),
        4 => Just("..".to_owned()),
        1 => "(%2e|%2E|\\.%2e|:|a:|[ \\t\\\\é'\"<>^`{}|%]|%41)",
    ];
    let query = prop_oneof![
        2 => Just(String::new()),
        2 => "\\?[a-z=&]{0,4}",
        1 => "\\?[a-z=&%2F' ]{0,4}",
    ];
    (
        prop_oneof![
            4 => "",
            4 => "/",
            1 => "//",
            1 => " ",
            2 => "(https?|HTTP)://[a-zA-Z0-9.-]{0,4}(:[0-9]{0,3})?/?",
        ],
        proptest::collection::vec(segment, 0..5).prop_map(|s| s.join("/")),
        query,
        proptest::option::of("[a-z#? ]{0,3}"),
    )
        .prop_map(|(lead, path, query, fragment)| {
            let fragment = fragment.map_or(String::new(), |f| format!("#{f}"));
            format!("{lead}{path}{query}{fragment}")
        })
}

/// The generators must reach the fast path often, or the property proves little.
#[test]
fn random_links_often_resolve() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (bases, hrefs) = (plain_base(), any_href());
    let resolved = (0..2000)
        .filter(|_| {
            let base = bases.new_tree(&mut runner).unwrap().current();
            let href = hrefs.new_tree(&mut runner).unwrap().current();
            assert_agrees(&base, &href)
        })
        .count();
    assert!(resolved > 800, "{resolved} of 2000 resolved");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn join_agrees_with_the_parser(base in plain_base(), href in any_href()) {
        assert_agrees(&base, &href);
    }
}
