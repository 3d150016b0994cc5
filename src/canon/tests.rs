//! Tests of [`super`]: one table of cases, property tests, and one test per rule flag.

use proptest::prelude::*;
use proptest::string::string_regex;
use url::Url;

use super::*;

/// Input → canonical form under `Rules::default()`. One case per line, so not rustfmt-ed.
#[rustfmt::skip]
const CASES: &[(&str, &str)] = &[
    // Scheme and host case, empty path.
    ("HTTP://Example.COM/", "http://example.com/"),
    ("http://example.com", "http://example.com/"),
    ("https://EXAMPLE.com/Path/Case", "https://example.com/Path/Case"),
    ("FOO://Example.COM/a?b&a#f", "foo://example.com/a?a&b"),
    ("foo://Ex%41mple.COM/", "foo://example.com/"),
    // Ports.
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("http://example.com:443/a", "http://example.com:443/a"),
    ("https://example.com:8443/a", "https://example.com:8443/a"),
    ("http://example.com:/a", "http://example.com/a"),
    ("ftp://Example.com:21/a", "ftp://example.com/a"),
    // Query sorting, stable for repeated keys.
    ("http://example.com/a?b=2&a=1", "http://example.com/a?a=1&b=2"),
    ("http://example.com/?c=3&a=1&b=2", "http://example.com/?a=1&b=2&c=3"),
    ("http://example.com/?b=2&a=3&b=1&a=1", "http://example.com/?a=3&a=1&b=2&b=1"),
    ("http://example.com/?a=1&A=2", "http://example.com/?A=2&a=1"),
    ("http://example.com/?ab=1&a=2", "http://example.com/?a=2&ab=1"),
    ("http://example.com/?%62=1&a=2", "http://example.com/?a=2&b=1"),
    ("http://example.com/?a=b=c&a", "http://example.com/?a=b=c&a"),
    // Empty values, empty pieces, empty query.
    ("http://example.com/?b&a=", "http://example.com/?a=&b"),
    ("http://example.com/?a=&a", "http://example.com/?a=&a"),
    ("http://example.com/?a=1&&b=2&", "http://example.com/?a=1&b=2"),
    ("http://example.com/a?", "http://example.com/a"),
    ("http://example.com/a?#x", "http://example.com/a"),
    ("http://example.com/a?&&", "http://example.com/a"),
    // Fragments.
    ("http://example.com/a#frag", "http://example.com/a"),
    ("http://example.com/a?b=1#frag", "http://example.com/a?b=1"),
    ("http://example.com/#", "http://example.com/"),
    // `+`, reserved escapes, unreserved escapes, hex case.
    ("http://example.com/?q=a+b&p=c%2Bd", "http://example.com/?p=c%2Bd&q=a+b"),
    ("http://example.com/?a=%2f&b=%26", "http://example.com/?a=%2F&b=%26"),
    ("http://example.com/?q=%3d&a", "http://example.com/?a&q=%3D"),
    ("http://example.com/?a=%7e", "http://example.com/?a=~"),
    ("http://example.com/%7Euser/", "http://example.com/~user/"),
    ("http://example.com/%7euser/", "http://example.com/~user/"),
    ("http://example.com/a%2fb", "http://example.com/a%2Fb"),
    ("http://example.com/%41%62%2D%2E%5F%30", "http://example.com/Ab-._0"),
    ("http://example.com/caf%c3%a9", "http://example.com/caf%C3%A9"),
    ("http://example.com/a?q=%E2%82%ac", "http://example.com/a?q=%E2%82%AC"),
    ("http://example.com/%zz?a=%4", "http://example.com/%zz?a=%4"),
    ("http://example.com/a%2", "http://example.com/a%2"),
    // Unicode and spaces in path and query.
    ("http://example.com/café", "http://example.com/caf%C3%A9"),
    ("http://example.com/?q=café", "http://example.com/?q=caf%C3%A9"),
    ("http://example.com/a b?q=a b", "http://example.com/a%20b?q=a%20b"),
    // Dot segments.
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),
    ("http://example.com/a/%2E%2E/b", "http://example.com/b"),
    ("http://example.com/../a", "http://example.com/a"),
    ("http://example.com/a/..x", "http://example.com/a/..x"),
    // IDN hosts.
    ("http://Bücher.Example/", "http://xn--bcher-kva.example/"),
    ("https://例え.テスト/パス", "https://xn--r8jz45g.xn--zckzah/%E3%83%91%E3%82%B9"),
    // IP hosts.
    ("http://[2001:DB8:0:0:0:0:0:1]:80/", "http://[2001:db8::1]/"),
    ("http://[::1]:8080/a?b=1", "http://[::1]:8080/a?b=1"),
    ("http://192.168.000.1:80/", "http://192.168.0.1/"),
    // Userinfo.
    ("http://User:Pa%3aSs@Example.com/", "http://User:Pa%3ASs@example.com/"),
    ("https://u@example.com:443/?b&a", "https://u@example.com/?a&b"),
    // Backslashes in special URLs.
    ("http:\\\\example.com\\a", "http://example.com/a"),
    // Opaque paths: query untouched except for escapes.
    ("mailto:Someone@Example.com?subject=Hi&body=x", "mailto:Someone@Example.com?subject=Hi&body=x"),
    ("data:text/plain,b?&a=%7e#x", "data:text/plain,b?&a=~"),
    ("data:text/plain,a #x", "data:text/plain,a"),
    ("javascript:void(0)", "javascript:void(0)"),
];

/// When the prefix is unchanged, the setter path must reproduce the text exactly, so
/// that `canonicalize_with` never needs its full re-parse for such URLs.
fn assert_setters_exact(url: &Url, rules: &Rules) {
    let canonical = Canonical::of(&Pieces::of_url(url), rules);
    if canonical.text[..canonical.path.start] == url[..Position::BeforePath] {
        let applied = canonical.apply_to(url);
        assert_eq!(
            applied.as_ref().map(Url::as_str),
            Some(canonical.text.as_str()),
            "{url}"
        );
    }
}

#[test]
fn table() {
    assert!(CASES.len() >= 35);
    let mut failures = Vec::new();
    for &(input, expected) in CASES {
        let url = Url::parse(input).unwrap();
        let got = canonicalize(&url);
        let text = canonicalize_str(input).unwrap();
        assert_setters_exact(&url, &Rules::default());
        assert_setters_exact(&url, &with(|r| r.drop_fragment = false));
        if got.as_str() != expected || text != expected {
            failures.push(format!(
                "{input:?}: url {:?}, str {text:?}, want {expected:?}",
                got.as_str()
            ));
        }
        assert_eq!(
            canonicalize(&got).as_str(),
            expected,
            "not idempotent: {input:?}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn parse_errors_name_the_input() {
    let error = canonicalize_str("/relative/path").unwrap_err();
    assert!(error.to_string().contains("/relative/path"), "{error}");
    assert!(canonicalize_str("http://[::1").is_err());
}

fn with(edit: impl FnOnce(&mut Rules)) -> Rules {
    let mut rules = Rules::default();
    edit(&mut rules);
    rules
}

fn canon_with(input: &str, rules: &Rules) -> String {
    canonicalize_with(&Url::parse(input).unwrap(), rules).into()
}

#[test]
fn sort_query_off_keeps_order_but_cleans_up() {
    let rules = with(|r| r.sort_query = false);
    assert_eq!(
        canon_with("http://e.com/?b=1&&a=%7e#f", &rules),
        "http://e.com/?b=1&a=~"
    );
    assert_eq!(canon_with("http://e.com/?", &rules), "http://e.com/");
}

#[test]
fn normalize_percent_off_keeps_escapes() {
    let rules = with(|r| r.normalize_percent = false);
    assert_eq!(
        canon_with("http://e.com/%7e%2f?b=%7e&a#f", &rules),
        "http://e.com/%7e%2f?a&b=%7e"
    );
    // Without decoding, `%62` and `b` are different keys.
    assert_eq!(
        canon_with("http://e.com/?b=1&%62=2", &rules),
        "http://e.com/?%62=2&b=1"
    );
}

#[test]
fn drop_fragment_off_keeps_a_normalized_fragment() {
    let rules = with(|r| r.drop_fragment = false);
    assert_eq!(
        canon_with("http://e.com/?b&a#x%7e%2f", &rules),
        "http://e.com/?a&b#x~%2F"
    );
    assert_eq!(canon_with("http://e.com/?#", &rules), "http://e.com/#");
}

#[test]
fn everything_off_leaves_only_parser_rules() {
    let rules = Rules {
        sort_query: false,
        normalize_percent: false,
        drop_fragment: false,
        strip_query_params: Vec::new(),
    };
    let input = "HTTP://E.com:80/a/../%7e?b&a#F%7e";
    assert_eq!(canon_with(input, &rules), "http://e.com/%7e?b&a#F%7e");
}

#[test]
fn strip_query_params_globs() {
    let rules =
        with(|r| r.strip_query_params = vec!["utm_*".into(), "sessionid".into(), "*_ts".into()]);
    let cases = [
        (
            "http://e.com/?utm_source=x&b=1&utm_medium=y&a=2",
            "http://e.com/?a=2&b=1",
        ),
        (
            "http://e.com/?sessionid=1&sessionids=2&xsessionid=3",
            "http://e.com/?sessionids=2&xsessionid=3",
        ),
        ("http://e.com/?utm_=1&utm=2", "http://e.com/?utm=2"),
        ("http://e.com/?sessionid", "http://e.com/"),
        ("http://e.com/?utm%5Fsource=1&q", "http://e.com/?q"),
        ("http://e.com/?a_ts=1&ts=2&_ts", "http://e.com/?ts=2"),
        ("http://e.com/?UTM_source=1", "http://e.com/?UTM_source=1"),
    ];
    for (input, expected) in cases {
        assert_eq!(canon_with(input, &rules), expected, "{input}");
    }
    let middle = with(|r| r.strip_query_params = vec!["a*b*c".into()]);
    assert_eq!(
        canon_with("http://e.com/?abbc&axbyc=1&abcd&ac", &middle),
        "http://e.com/?abcd&ac"
    );
}

#[test]
fn glob_matcher() {
    let m = |p: &str, t: &str| glob_match(p.as_bytes(), t.as_bytes());
    assert!(m("*", ""));
    assert!(m("", ""));
    assert!(!m("", "a"));
    assert!(m("a*", "a"));
    assert!(m("*a*a*", "banana"));
    assert!(!m("*a*a*a*a", "banana"));
    assert!(m("ü*", "über"));
    assert!(!m("a", "ab"));
}

/// Query pieces: a key from a small alphabet (with escapes) and an optional value.
fn piece() -> impl Strategy<Value = String> {
    (
        "[a-c]{1,2}(%7e|%2f|%41|~)?",
        proptest::option::of("[a-z0-9+%é /]{0,4}"),
    )
        .prop_map(|(k, v)| v.map_or(k.clone(), |v| format!("{k}={v}")))
}

/// Absolute URLs with varied hosts, ports, paths, queries and fragments.
fn any_url() -> impl Strategy<Value = String> {
    let scheme = prop_oneof!["http", "HTTPS", "ftp", "foo"];
    let host = prop_oneof!["Example.COM", "bücher.de", "[::1]", "10.0.0.1", "a-b.c"];
    let port = prop_oneof![
        Just(String::new()),
        Just(":80".into()),
        Just(":443".into()),
        Just(":8080".into())
    ];
    let path = "(/([a-zA-Z0-9]|%[0-9a-fA-F]{2}|\\.|\\.\\.|é| ){0,4}){0,4}";
    let query =
        proptest::option::of(proptest::collection::vec(piece(), 0..5).prop_map(|p| p.join("&")));
    let fragment = proptest::option::of("[a-z%0-9]{0,4}");
    (scheme, host, port, path, query, fragment).prop_map(|(s, h, p, path, q, f)| {
        let q = q.map_or(String::new(), |q| format!("?{q}"));
        let f = f.map_or(String::new(), |f| format!("#{f}"));
        format!("{s}://{h}{p}{path}{q}{f}")
    })
}

/// Flips the case of the hex digits of every valid escape.
fn swap_hex_case(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes.get(i..i + 3) {
            Some(&[b'%', hi, lo]) if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit() => {
                let flip = |c: u8| {
                    if c.is_ascii_uppercase() {
                        c.to_ascii_lowercase()
                    } else {
                        c.to_ascii_uppercase()
                    }
                };
                out.extend([b'%', flip(hi), flip(lo)]);
                i += 3;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn idempotent_and_str_agrees(input in any_url()) {
        let Ok(url) = Url::parse(&input) else { return Ok(()) };
        let once = canonicalize(&url);
        prop_assert_eq!(&canonicalize(&once), &once);
        prop_assert_eq!(canonicalize_str(&input).unwrap(), once.as_str());
        prop_assert_eq!(once.fragment(), None);
        assert_setters_exact(&url, &Rules::default());
        assert_setters_exact(&url, &with(|r| r.drop_fragment = false));
    }

    #[test]
    fn fragment_never_matters(input in any_url(), fragment in "[a-zA-Z0-9%?#/]{0,6}") {
        let Ok(url) = Url::parse(&input) else { return Ok(()) };
        let mut other = url.clone();
        other.set_fragment(Some(&fragment));
        prop_assert_eq!(canonicalize(&url), canonicalize(&other));
    }

    #[test]
    fn permuting_distinct_keys_never_matters(
        pairs in proptest::collection::btree_map("[a-z%0-9~]{1,4}", "[a-z0-9=+%]{0,3}", 0..6),
        shuffle in any::<u64>(),
    ) {
        // Keys must stay distinct after percent normalization (`%76` is `v`).
        let mut seen = std::collections::HashSet::new();
        let pieces: Vec<String> = pairs
            .iter()
            .filter(|(k, _)| {
                let mut normalized = String::new();
                push_part(&mut normalized, k, true);
                seen.insert(normalized)
            })
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut permuted = pieces.clone();
        // A deterministic Fisher–Yates shuffle driven by `shuffle`.
        let mut state = shuffle | 1;
        for i in (1..permuted.len()).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            permuted.swap(i, (state >> 33) as usize % (i + 1));
        }
        let a = canonicalize_str(&format!("http://e.com/p?{}", pieces.join("&")));
        let b = canonicalize_str(&format!("http://e.com/p?{}", permuted.join("&")));
        prop_assert_eq!(a.unwrap(), b.unwrap());
    }

    #[test]
    fn hex_case_never_matters(input in any_url()) {
        let swapped = swap_hex_case(&input);
        let (Ok(a), Ok(b)) = (Url::parse(&input), Url::parse(&swapped)) else { return Ok(()) };
        prop_assert_eq!(canonicalize(&a), canonicalize(&b));
    }
}

/// URL-ish strings near the edges of [`split::split`]'s subset: hosts that look like
/// numbers or punycode, odd ports, dot segments and escapes of `.`, characters the
/// parser encodes.
fn near_plain_url() -> impl Strategy<Value = String> {
    let scheme = prop_oneof![4 => "https?://", 1 => "(HTTP://|ftp://|http:/|http:\\\\)"];
    let host = prop_oneof![
        4 => "([a-z0-9-]{0,4}\\.){0,3}[a-z-]{1,5}",
        1 => "(xn--[a-z0-9]{0,4}|[0-9]{1,4}|0x[0-9a-fA-F]{0,3})(\\.[0-9a-zA-Z]{0,4}){0,4}",
        1 => "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,4}\\.?",
        1 => "[a-zA-Z0-9._%@\\[\\]:-]{0,8}",
    ];
    let port = prop_oneof![4 => "", 1 => ":[0-9]{0,6}"];
    let plain = "([a-zA-Z0-9._~!$&'()*+,;=:@-]|%[0-9a-fA-F]{2}|\\.\\.?)";
    let wild = "([a-zA-Z0-9.]|%2[eE]|%[g-z]|\\.|[ \\\\\"<>^`{}|é\t%])";
    let path = prop_oneof![
        4 => string_regex(&format!("(/{plain}{{0,5}}){{1,4}}")).unwrap(),
        1 => string_regex(&format!("(/({plain}|{wild}){{0,4}}){{0,4}}")).unwrap(),
    ];
    let query = prop_oneof![
        2 => "",
        4 => "\\?[a-z0-9=&%.~!$()*+,;:@/?-]{0,8}",
        1 => "\\?[a-z0-9=&%' \"<>#]{0,8}",
    ];
    let fragment = prop_oneof![4 => "", 1 => "#[a-z0-9%'?/#. ]{0,5}"];
    (scheme, host, port, path, query, fragment)
        .prop_map(|(s, h, p, path, q, f)| format!("{s}{h}{p}{path}{q}{f}"))
}

#[test]
fn split_matches_the_parser_on_the_table() {
    let plain = [
        "http://example.com/",
        "https://a-b.example.com:8443/p/a.html?b=1&a=%2f#x",
        "http://127.0.0.1:8080/p/3.html",
        "http://1and1.com/~u/",
    ];
    let inputs = CASES.iter().flat_map(|(input, output)| [*input, *output]);
    let mut accepted = 0;
    for input in inputs.chain(plain) {
        assert_split_sound(input);
        accepted += usize::from(split::split(input).is_some());
    }
    assert!(
        accepted >= 30,
        "{accepted} table URLs read without the parser"
    );
    for input in plain {
        assert!(split::split(input).is_some(), "{input}");
    }
}

/// `split` accepts only what the parser keeps as is, and the fast paths agree with it.
fn assert_split_sound(input: &str) {
    let rules = [
        Rules::default(),
        with(|r| r.sort_query = false),
        with(|r| r.drop_fragment = false),
        with(|r| r.normalize_percent = false),
        with(|r| r.strip_query_params = vec!["b*".into(), "%41".into()]),
    ];
    let parsed = Url::parse(input);
    if let Some(parts) = split::split(input) {
        let url = parsed.as_ref().unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(url.as_str(), input);
        assert_eq!(url.scheme(), parts.scheme, "{input}");
        assert_eq!(url.host_str(), Some(parts.host), "{input}");
        assert_eq!(url.port(), parts.port, "{input}");
        assert_eq!(
            url[..Position::BeforePath].len(),
            parts.path_start,
            "{input}"
        );
        assert_eq!(url.path(), parts.path, "{input}");
        assert_eq!(url.query(), parts.query, "{input}");
        assert_eq!(url.fragment(), parts.fragment, "{input}");
    }
    match &parsed {
        Ok(url) => {
            let slow = Canonical::of(&Pieces::of_url(url), &Rules::default()).text;
            assert_eq!(canonicalize_str(input).unwrap(), slow, "{input}");
            for rules in &rules {
                // The quick answer is exactly the one the written form gives.
                let written = split::split(input)
                    .is_some_and(|p| Canonical::of(&Pieces::of_parts(&p), rules).text == input);
                assert_eq!(is_canonical(input, rules), written, "{input}");
                if is_canonical(input, rules) {
                    assert_eq!(canonicalize_with(url, rules).as_str(), input, "{input}");
                }
            }
        }
        Err(_) => assert!(canonicalize_str(input).is_err(), "{input}"),
    }
}

/// The generator must reach the fast path often, or `split_is_sound` proves little.
#[test]
fn near_plain_urls_often_split() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = near_plain_url();
    let accepted = (0..2000)
        .filter(|_| {
            let input = strategy.new_tree(&mut runner).unwrap().current();
            split::split(&input).is_some()
        })
        .count();
    assert!(accepted > 250, "{accepted} of 2000 split");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn split_is_sound(input in near_plain_url()) {
        assert_split_sound(&input);
    }

    #[test]
    fn split_is_sound_on_any_url(input in any_url()) {
        assert_split_sound(&input);
    }
}

#[test]
fn credentials_are_stripped() {
    for (input, expected) in [
        ("http://user:pass@a.example/x?q#f", "http://a.example/x?q#f"),
        ("https://user@a.example:8443/", "https://a.example:8443/"),
        ("http://:pw@a.example/", "http://a.example/"),
        (
            "http://a.example/mail@x?to=b@c",
            "http://a.example/mail@x?to=b@c",
        ),
        ("http://a.example/plain", "http://a.example/plain"),
        ("not a url @", "not a url @"),
    ] {
        assert_eq!(strip_credentials(input), expected, "{input}");
    }
    assert!(matches!(
        strip_credentials("http://a.example/p@q"),
        std::borrow::Cow::Borrowed(_)
    ));
}
