//! Unit tests for [`Robots`]: one table of (robots.txt, agent, path, expected)
//! cases, one rule of RFC 9309 (or of our own) per case, then the limits.

use std::time::Duration;

use url::Url;

use super::*;

const AGENT: &str = "legcrawl/0.1 (+https://example.com/bot)";

/// (what the case shows, robots.txt, agent, path and query, allowed).
const CASES: &[(&str, &str, &str, &str, bool)] = &[
    ("empty file allows", "", AGENT, "/x", true),
    ("no group allows", "Disallow: /\n", AGENT, "/x", true),
    (
        "star group applies",
        "User-agent: *\nDisallow: /private\n",
        AGENT,
        "/private/a",
        false,
    ),
    (
        "star group other path",
        "User-agent: *\nDisallow: /private\n",
        AGENT,
        "/public",
        true,
    ),
    (
        "own group beats star",
        "User-agent: *\nDisallow: /\n\nUser-agent: legcrawl\nDisallow: /x\n",
        AGENT,
        "/y",
        true,
    ),
    (
        "own empty disallow beats star",
        "User-agent: legcrawl\nDisallow:\n\nUser-agent: *\nDisallow: /\n",
        AGENT,
        "/y",
        true,
    ),
    (
        "other agent's group ignored",
        "User-agent: otherbot\nDisallow: /\n",
        AGENT,
        "/y",
        true,
    ),
    (
        "product token of the UA line",
        "User-agent: legcrawl/2.0\nDisallow: /\n",
        AGENT,
        "/y",
        false,
    ),
    (
        "agent name case-insensitive",
        "User-agent: LegCrawl\nDisallow: /\n",
        "LEGCRAWL",
        "/y",
        false,
    ),
    (
        "prefix of our token does not match",
        "User-agent: leg\nDisallow: /\n",
        AGENT,
        "/y",
        true,
    ),
    (
        "longer token does not match",
        "User-agent: legcrawler\nDisallow: /\n",
        AGENT,
        "/y",
        true,
    ),
    (
        "directive names case-insensitive",
        "USER-AGENT: *\nDISALLOW: /a\nallow: /a/b\n",
        AGENT,
        "/a/c",
        false,
    ),
    (
        "directive names case-insensitive allow",
        "uSeR-aGeNt: *\nDISALLOW: /a\nALLOW: /a/b\n",
        AGENT,
        "/a/b",
        true,
    ),
    (
        "paths case-sensitive",
        "User-agent: *\nDisallow: /Private\n",
        AGENT,
        "/private",
        true,
    ),
    (
        "paths case-sensitive hit",
        "User-agent: *\nDisallow: /Private\n",
        AGENT,
        "/Private",
        false,
    ),
    (
        "longest match wins (allow longer)",
        "User-agent: *\nDisallow: /a\nAllow: /a/b\n",
        AGENT,
        "/a/b/c",
        true,
    ),
    (
        "longest match wins (disallow longer)",
        "User-agent: *\nAllow: /a\nDisallow: /a/b\n",
        AGENT,
        "/a/b/c",
        false,
    ),
    (
        "order does not matter",
        "User-agent: *\nAllow: /a/b\nDisallow: /a\n",
        AGENT,
        "/a/b",
        true,
    ),
    (
        "allow wins a tie",
        "User-agent: *\nDisallow: /page\nAllow: /page\n",
        AGENT,
        "/page",
        true,
    ),
    (
        "allow wins a tie of wildcards",
        "User-agent: *\nDisallow: /*.htm\nAllow: /a*htm\n",
        AGENT,
        "/a.htm",
        true,
    ),
    (
        "star wildcard",
        "User-agent: *\nDisallow: /*.php\n",
        AGENT,
        "/a/b.php?x=1",
        false,
    ),
    (
        "dollar anchor hit",
        "User-agent: *\nDisallow: /*.php$\n",
        AGENT,
        "/b.php",
        false,
    ),
    (
        "dollar anchor miss",
        "User-agent: *\nDisallow: /*.php$\n",
        AGENT,
        "/b.php?x",
        true,
    ),
    (
        "query is matched",
        "User-agent: *\nDisallow: /*?sid=\n",
        AGENT,
        "/p?sid=1",
        false,
    ),
    (
        "groups of one agent merge",
        "User-agent: legcrawl\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n\nUser-agent: legcrawl\nDisallow: /b\n",
        AGENT,
        "/b",
        false,
    ),
    (
        "merged groups keep the rest allowed",
        "User-agent: legcrawl\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n\nUser-agent: legcrawl\nDisallow: /b\n",
        AGENT,
        "/c",
        true,
    ),
    (
        "star groups merge",
        "User-agent: *\nDisallow: /a\n\nUser-agent: x\nDisallow: /c\n\nUser-agent: *\nDisallow: /b\n",
        AGENT,
        "/b",
        false,
    ),
    (
        "several agents share a group",
        "User-agent: x\nUser-agent: legcrawl\nDisallow: /shared\n",
        AGENT,
        "/shared",
        false,
    ),
    (
        "blank lines do not end a group",
        "User-agent: *\n\nDisallow: /a\n",
        AGENT,
        "/a",
        false,
    ),
    (
        "sitemap does not end a group",
        "User-agent: *\nSitemap: https://e.com/s.xml\nDisallow: /a\n",
        AGENT,
        "/a",
        false,
    ),
    (
        "robots.txt always allowed",
        "User-agent: *\nDisallow: /\n",
        AGENT,
        "/robots.txt",
        true,
    ),
    (
        "disallow all",
        "User-agent: *\nDisallow: /\n",
        AGENT,
        "/",
        false,
    ),
    (
        "percent-encoded pattern vs raw",
        "User-agent: *\nDisallow: /%7Ejoe\n",
        AGENT,
        "/~joe/x",
        false,
    ),
    (
        "utf-8 pattern vs encoded path",
        "User-agent: *\nDisallow: /foo/bar/ツ\n",
        AGENT,
        "/foo/bar/%E3%83%84",
        false,
    ),
    (
        "comments stripped",
        "User-agent: * # all\nDisallow: /a # no\n",
        AGENT,
        "/a",
        false,
    ),
    (
        "crlf line ends",
        "User-agent: *\r\nDisallow: /a\r\n",
        AGENT,
        "/a",
        false,
    ),
    (
        "cr line ends",
        "User-agent: *\rDisallow: /a\r",
        AGENT,
        "/a",
        false,
    ),
    (
        "bom",
        "\u{FEFF}User-agent: *\nDisallow: /a\n",
        AGENT,
        "/a",
        false,
    ),
    (
        "junk lines skipped",
        "<html>\nUser-agent: *\n}}{{ junk\nnot a directive\nFoo: bar\nDisallow: /a\n",
        AGENT,
        "/a",
        false,
    ),
    (
        "misspelt disallow",
        "User-agent: *\nDisalow: /a\n",
        AGENT,
        "/a",
        false,
    ),
    (
        "star prefix is not the star agent",
        "User-agent: *bot\nDisallow: /\n",
        AGENT,
        "/a",
        true,
    ),
];

#[test]
fn table() {
    for (what, body, agent, path, expected) in CASES {
        let robots = Robots::parse(body.as_bytes(), agent);
        let url = Url::parse(&format!("http://example.com{path}")).unwrap();
        assert_eq!(robots.allowed(&url), *expected, "{what}: {body:?} {path}");
    }
}

fn parse(body: &str) -> Robots {
    Robots::parse(body.as_bytes(), AGENT)
}

#[test]
fn empty_path_is_root() {
    let robots = parse("User-agent: *\nDisallow: /$\n");
    assert!(!robots.allowed(&Url::parse("http://e.com").unwrap()));
    assert!(robots.allowed(&Url::parse("http://e.com/a").unwrap()));
}

#[test]
fn fragment_is_not_matched() {
    let robots = parse("User-agent: *\nDisallow: /a$\n");
    assert!(!robots.allowed(&Url::parse("http://e.com/a#frag").unwrap()));
}

#[test]
fn crawl_delay_of_the_chosen_group() {
    let body =
        "User-agent: *\nCrawl-delay: 9\n\nUser-agent: legcrawl\nCrawl-delay: 2.5\nCrawl-delay: 7\n";
    assert_eq!(parse(body).crawl_delay(), Some(Duration::from_millis(2500)));
    let star = "User-agent: *\ncrawl-DELAY: 3\n";
    assert_eq!(parse(star).crawl_delay(), Some(Duration::from_secs(3)));
    assert_eq!(
        parse("User-agent: *\nCrawl-delay: soon\n").crawl_delay(),
        None
    );
    assert_eq!(
        parse("User-agent: *\nCrawl-delay: -1\n").crawl_delay(),
        None
    );
    assert_eq!(
        parse("User-agent: *\nCrawl-delay: 1e300\n").crawl_delay(),
        Some(Duration::MAX)
    );
    assert_eq!(parse("Crawl-delay: 5\n").crawl_delay(), None);
}

#[test]
fn sitemaps_from_anywhere() {
    let body =
        "Sitemap: https://e.com/a.xml\nUser-agent: x\nDisallow: /\nsitemap: https://e.com/b.xml\n";
    assert_eq!(
        parse(body).sitemaps(),
        ["https://e.com/a.xml", "https://e.com/b.xml"]
    );
}

#[test]
fn blanket_rules() {
    let url = Url::parse("http://e.com/a").unwrap();
    assert!(Robots::allow_all().allowed(&url));
    assert!(!Robots::disallow_all().allowed(&url));
    assert!(!Robots::disallow_all().allowed(&Url::parse("http://e.com/").unwrap()));
}

#[test]
fn cut_at_500_kib() {
    let mut body = b"User-agent: *\nDisallow: /early\n".to_vec();
    body.resize(MAX_ROBOTS_BYTES - 10, b'#');
    body.push(b'\n');
    // This line straddles the limit: it is dropped, not read as `Disallow: /`.
    body.extend_from_slice(b"Disallow: /late\n");
    body.extend_from_slice(b"Disallow: /after\n");
    let robots = Robots::parse(&body, AGENT);
    let at = |path: &str| robots.allowed(&Url::parse(&format!("http://e.com{path}")).unwrap());
    assert!(!at("/early"));
    assert!(at("/late"));
    assert!(at("/l"));
    assert!(at("/after"));
}

#[test]
fn cut_exactly_at_a_line_end_keeps_the_line() {
    let mut body = b"User-agent: *\n".to_vec();
    let rule = b"Disallow: /last";
    body.resize(MAX_ROBOTS_BYTES - rule.len(), b'\n');
    body.extend_from_slice(rule);
    body.extend_from_slice(b"\nDisallow: /beyond\n");
    let robots = Robots::parse(&body, AGENT);
    assert!(!robots.allowed(&Url::parse("http://e.com/last").unwrap()));
    assert!(robots.allowed(&Url::parse("http://e.com/beyond").unwrap()));
}

#[test]
fn binary_junk_does_not_panic() {
    let mut state = 7u64;
    let mut body = Vec::new();
    for _ in 0..4096 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        body.push((state >> 56) as u8);
    }
    body.extend_from_slice(b"\nUser-agent: *\nDisallow: /%zz\xFF*$\n");
    let robots = Robots::parse(&body, AGENT);
    assert!(robots.allowed(&Url::parse("http://e.com/x").unwrap()));
}
