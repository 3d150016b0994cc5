use super::*;
use crate::legs::{run, test_response};

fn urls(leg: &FeedLinks, url: &str, content_type: Option<&str>, body: &[u8]) -> Vec<String> {
    let response = test_response(url, content_type, body.to_vec());
    run(leg, &response)
        .requests
        .into_iter()
        .map(|r| r.url)
        .collect()
}

fn leg() -> FeedLinks {
    FeedLinks::new(FeedSettings::default()).unwrap()
}

const RSS: &str = r#"<?xml version="1.0"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom">
  <channel>
    <title>T</title>
    <link>http://e.com/</link>
    <atom:link href="http://e.com/feed" rel="self"/>
    <item><title>a</title><link>http://e.com/a?x=1&amp;y=2</link>
      <guid isPermaLink="false">tag:e.com,1</guid></item>
    <item><link><![CDATA[ /b#frag ]]></link><guid>http://e.com/b-guid</guid></item>
    <item><link>mailto:x@e.com</link></item>
    <item><description>no link</description></item>
  </channel>
</rss>"#;

#[test]
fn rss_item_links_in_order_with_cdata_and_entities() {
    let found = urls(
        &leg(),
        "http://e.com/feed",
        Some("application/rss+xml"),
        RSS.as_bytes(),
    );
    assert_eq!(found, ["http://e.com/a?x=1&y=2", "http://e.com/b"]);
    let response = test_response("http://e.com/feed", Some("text/xml"), RSS);
    let out = run(&leg(), &response);
    assert_eq!(out.requests[0].depth, 1);
    assert_eq!(
        out.requests[0].referer.as_deref(),
        Some("http://e.com/feed")
    );
    assert!(out.items.is_empty());
}

#[test]
fn an_item_without_a_link_gives_its_permalink_guid() {
    let feed = r#"<rss version="2.0"><channel>
      <item><title>only a guid</title><guid isPermaLink="true">http://e.com/g1</guid></item>
      <item><guid>/g2</guid><description>default isPermaLink is true</description></item>
      <item><guid isPermaLink="false">http://e.com/not-a-link</guid></item>
      <item><guid>http://e.com/g3-guid</guid><link>http://e.com/g3</link></item>
    </channel></rss>"#;
    let found = urls(
        &leg(),
        "http://e.com/feed",
        Some("application/rss+xml"),
        feed.as_bytes(),
    );
    assert_eq!(
        found,
        ["http://e.com/g1", "http://e.com/g2", "http://e.com/g3"]
    );
}

#[test]
fn guids_are_optional_and_respect_is_perma_link() {
    let settings = FeedSettings {
        guids: true,
        ..FeedSettings::default()
    };
    let leg = FeedLinks::new(settings).unwrap();
    let found = urls(
        &leg,
        "http://e.com/feed",
        Some("application/xml"),
        RSS.as_bytes(),
    );
    assert_eq!(
        found,
        [
            "http://e.com/a?x=1&y=2",
            "http://e.com/b",
            "http://e.com/b-guid"
        ]
    );
}

const ATOM: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="http://e.com/blog/">
  <link href="/" rel="alternate"/>
  <link href="?page=2" rel="next"/>
  <entry>
    <link href="2024/one"/>
    <link rel="edit" href="/edit/1"/>
    <link rel="enclosure" href="/one.mp3"/>
  </entry>
  <entry xml:base="/other/">
    <link rel="alternate" type="text/html" href="two"/>
  </entry>
  <entry><link rel="alternate" href="https://x.org/three"/><link href="ftp://x.org/f"/></entry>
</feed>"#;

#[test]
fn atom_alternate_links_resolved_against_xml_base() {
    let found = urls(
        &leg(),
        "http://e.com/atom",
        Some("application/atom+xml"),
        ATOM.as_bytes(),
    );
    assert_eq!(
        found,
        [
            "http://e.com/blog/2024/one",
            "http://e.com/other/two",
            "https://x.org/three"
        ]
    );
}

#[test]
fn prefixed_atom_and_relative_to_feed_url() {
    let body = r#"<a:feed xmlns:a="http://www.w3.org/2005/Atom">
        <a:entry><a:link href="p/1"/></a:entry></a:feed>"#;
    let found = urls(&leg(), "http://e.com/dir/feed.xml", None, body.as_bytes());
    assert_eq!(found, ["http://e.com/dir/p/1"]);
}

#[test]
fn media_type_and_sniffing_gate() {
    let body = RSS.as_bytes();
    assert_eq!(urls(&leg(), "http://e.com/f", None, body).len(), 2);
    assert_eq!(
        urls(&leg(), "http://e.com/f", Some("text/plain"), body).len(),
        2
    );
    assert!(urls(&leg(), "http://e.com/f", Some("text/html"), body).is_empty());
    let no_sniff = FeedLinks::new(FeedSettings {
        sniff: false,
        ..FeedSettings::default()
    })
    .unwrap();
    assert!(urls(&no_sniff, "http://e.com/f", None, body).is_empty());
    assert_eq!(
        urls(
            &no_sniff,
            "http://e.com/f",
            Some("application/rss+xml"),
            body
        )
        .len(),
        2
    );
    let mut response = test_response("http://e.com/f", Some("application/rss+xml"), RSS);
    response.status = 404;
    assert!(run(&leg(), &response).requests.is_empty());
}

#[test]
fn other_xml_roots_yield_nothing() {
    let body = b"<urlset><url><loc>http://e.com/a</loc></url><item><link>http://e.com/x</link></item></urlset>";
    assert!(urls(&leg(), "http://e.com/s.xml", Some("application/xml"), body).is_empty());
}

#[test]
fn allow_and_deny() {
    let settings = FeedSettings {
        allow: vec!["e\\.com".into()],
        deny: vec!["/b$".into()],
        ..FeedSettings::default()
    };
    let leg = FeedLinks::new(settings).unwrap();
    let found = urls(&leg, "http://e.com/feed", Some("text/xml"), RSS.as_bytes());
    assert_eq!(found, ["http://e.com/a?x=1&y=2"]);
}

#[test]
fn bad_regex_is_named() {
    let settings = FeedSettings {
        deny: vec!["ok".into(), "(".into()],
        ..FeedSettings::default()
    };
    let error = FeedLinks::new(settings).unwrap_err();
    assert!(
        error.to_string().starts_with("leg feed: bad regex \"(\""),
        "{error}"
    );
}

#[test]
fn broken_xml_keeps_links_before_the_error() {
    let body = "<rss><channel><item><link>http://e.com/1</link></item>\
                <item><link>http://e.com/2</link></item><item><link>http://e.com/3</li";
    let found = urls(
        &leg(),
        "http://e.com/feed",
        Some("text/xml"),
        body.as_bytes(),
    );
    assert_eq!(found, ["http://e.com/1", "http://e.com/2"]);
    let body = "<rss><channel><item><link>http://e.com/1</link></item><item <<<>>> &&& </rss>";
    let found = urls(
        &leg(),
        "http://e.com/feed",
        Some("text/xml"),
        body.as_bytes(),
    );
    assert_eq!(found, ["http://e.com/1"]);
}

#[test]
fn windows_1251_declared_feed() {
    let xml = "<?xml version=\"1.0\" encoding=\"windows-1251\"?>\
               <rss><channel><item><title>Привет</title>\
               <link>http://e.ru/новости?q=мир</link></item></channel></rss>";
    let (body, _, unmappable) = encoding_rs::WINDOWS_1251.encode(xml);
    assert!(!unmappable);
    let found = urls(
        &leg(),
        "http://e.ru/rss",
        Some("application/rss+xml"),
        &body,
    );
    let expected = Url::parse("http://e.ru/новости?q=мир").unwrap();
    assert_eq!(found, [expected.as_str()]);
    // A charset in Content-Type wins over the declaration (RFC 7303).
    let found = urls(
        &leg(),
        "http://e.ru/rss",
        Some("text/xml; charset=koi8-r"),
        &body,
    );
    assert_ne!(found, [expected.as_str()]);
}

#[test]
fn utf16_feed_with_bom() {
    let xml = "<rss><channel><item><link>http://e.com/u</link></item></channel></rss>";
    let mut body = vec![0xFF, 0xFE];
    body.extend(xml.encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(
        urls(&leg(), "http://e.com/f", Some("text/xml"), &body),
        ["http://e.com/u"]
    );
}

#[test]
fn empty_and_garbage_bodies() {
    assert!(urls(&leg(), "http://e.com/f", Some("text/xml"), b"").is_empty());
    assert!(
        urls(
            &leg(),
            "http://e.com/f",
            Some("text/xml"),
            b"\x00\xff\xfe garbage <<"
        )
        .is_empty()
    );
    assert!(urls(&leg(), "http://e.com/f", Some("text/xml"), b"<rss/>").is_empty());
}

#[test]
fn large_feed_is_linear() {
    let mut xml = String::from("<rss><channel>");
    for i in 0..20_000 {
        xml.push_str(&format!("<item><link>http://e.com/{i}</link></item>"));
    }
    xml.push_str("</channel></rss>");
    let found = urls(&leg(), "http://e.com/f", Some("text/xml"), xml.as_bytes());
    assert_eq!(found.len(), 20_000);
    assert_eq!(found[19_999], "http://e.com/19999");
}

#[test]
fn settings_deserialize_with_defaults() {
    let settings: FeedSettings = serde_json::from_str(r#"{"guids": true}"#).unwrap();
    assert!(settings.sniff && settings.guids && settings.allow.is_empty());
    assert!(serde_json::from_str::<FeedSettings>(r#"{"nope": 1}"#).is_err());
}

/// Each entry's links carry its date as `lastmod`: Atom `updated` before
/// `published`, RSS `pubDate` (RFC 2822) before `dc:date`; undated entries none.
#[test]
fn entry_dates_go_with_their_links_as_lastmod() {
    let dated = |body: &str, content_type: &str| -> Vec<(String, Option<u64>)> {
        let response = test_response(
            "http://e.com/feed",
            Some(content_type),
            body.as_bytes().to_vec(),
        );
        run(&leg(), &response)
            .requests
            .into_iter()
            .map(|r| (r.url, crate::revisit::lastmod_of(&r.meta)))
            .collect()
    };
    let atom = r#"<feed xmlns="http://www.w3.org/2005/Atom">
      <entry><updated>2024-05-01T10:00:00Z</updated><link href="http://e.com/a"/>
        <published>2020-01-01T00:00:00Z</published></entry>
      <entry><link href="http://e.com/b"/><published>2024-05-02</published></entry>
      <entry><link href="http://e.com/c"/></entry>
    </feed>"#;
    assert_eq!(
        dated(atom, "application/atom+xml"),
        [
            ("http://e.com/a".to_owned(), Some(1_714_557_600)),
            ("http://e.com/b".to_owned(), Some(1_714_608_000)),
            ("http://e.com/c".to_owned(), None),
        ]
    );
    let rss = r#"<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel>
      <item><link>http://e.com/a</link><pubDate>Wed, 01 May 2024 12:00:00 +0200</pubDate></item>
      <item><dc:date>2024-05-02</dc:date><link>http://e.com/b</link></item>
      <item><link>http://e.com/c</link><pubDate>not a date</pubDate></item>
    </channel></rss>"#;
    assert_eq!(
        dated(rss, "application/rss+xml"),
        [
            ("http://e.com/a".to_owned(), Some(1_714_557_600)),
            ("http://e.com/b".to_owned(), Some(1_714_608_000)),
            ("http://e.com/c".to_owned(), None),
        ]
    );
}
