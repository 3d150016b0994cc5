use std::io::Write;

use super::*;
use crate::legs::{run, test_response};

fn leg() -> Sitemap {
    Sitemap::new(SitemapSettings::default()).unwrap()
}

/// (url, is a sitemap request) of every request `leg` makes from the response.
fn requests(leg: &Sitemap, response: &Response) -> Vec<(String, bool)> {
    run(leg, response)
        .requests
        .into_iter()
        .map(|r| {
            let marked = r.meta.get(SITEMAP_META).map(String::as_str) == Some("1");
            (r.url, marked)
        })
        .collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn urlset(n: usize) -> String {
    let mut xml = String::from(
        r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#,
    );
    for i in 0..n {
        xml.push_str(&format!(
            "<url><loc>http://e.com/p/{i}</loc><lastmod>2024-01-01</lastmod></url>"
        ));
    }
    xml.push_str("</urlset>");
    xml
}

#[test]
fn robots_txt_sitemap_lines() {
    let body = "User-agent: *\nDisallow: /x\n\
                SITEMAP: http://e.com/s1.xml # main\r\n\
                sitemap:/s2.xml.gz\n# Sitemap: http://e.com/commented\n\
                Sitemap:\nSitemap: ftp://e.com/no\n";
    let response = test_response("http://e.com/robots.txt", Some("text/plain"), body);
    assert_eq!(
        requests(&leg(), &response),
        [
            ("http://e.com/s1.xml".into(), true),
            ("http://e.com/s2.xml.gz".into(), true)
        ]
    );
    let elsewhere = test_response("http://e.com/dir/robots.txt", Some("text/plain"), body);
    assert!(requests(&leg(), &elsewhere).is_empty());
    let off = Sitemap::new(SitemapSettings {
        robots_txt: false,
        ..SitemapSettings::default()
    });
    assert!(requests(&off.unwrap(), &response).is_empty());
}

#[test]
fn urlset_pages_with_entities_cdata_and_depth() {
    let body = "<urlset><url><loc> http://e.com/a?x=1&amp;y=2 </loc></url>\
                <url><loc><![CDATA[http://e.com/b#top]]></loc></url>\
                <url><loc>/relative</loc><image:image><image:loc>http://e.com/i.png</image:loc></image:image></url>\
                <url><loc>javascript:x</loc></url><url><lastmod>x</lastmod></url></urlset>";
    let mut response = test_response("http://e.com/sitemap.xml", Some("application/xml"), body);
    response.request.depth = 2;
    let out = run(&leg(), &response);
    let urls: Vec<_> = out.requests.iter().map(|r| r.url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "http://e.com/a?x=1&y=2",
            "http://e.com/b",
            "http://e.com/relative"
        ]
    );
    assert!(
        out.requests
            .iter()
            .all(|r| r.depth == 3 && r.meta.is_empty())
    );
}

#[test]
fn sitemap_index_entries_are_marked_and_optional() {
    let body = r#"<?xml version="1.0" encoding="UTF-8"?>
        <sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
          <sitemap><loc>http://e.com/s-posts.xml.gz</loc><lastmod>2024</lastmod></sitemap>
          <sitemap><loc>http://e.com/s-tags.xml</loc></sitemap>
        </sitemapindex>"#;
    let response = test_response("http://e.com/sitemap_index.xml", Some("text/xml"), body);
    assert_eq!(
        requests(&leg(), &response),
        [
            ("http://e.com/s-posts.xml.gz".into(), true),
            ("http://e.com/s-tags.xml".into(), true)
        ]
    );
    let settings = SitemapSettings {
        sitemap_allow: vec!["posts".into()],
        ..SitemapSettings::default()
    };
    let only_posts = Sitemap::new(settings).unwrap();
    assert_eq!(
        requests(&only_posts, &response),
        [("http://e.com/s-posts.xml.gz".into(), true)]
    );
    let settings = SitemapSettings {
        follow_sitemaps: false,
        ..SitemapSettings::default()
    };
    assert!(requests(&Sitemap::new(settings).unwrap(), &response).is_empty());
}

#[test]
fn gzip_sitemap_by_magic_bytes() {
    let body = gzip(urlset(3).as_bytes());
    let response = test_response(
        "http://e.com/s.xml.gz",
        Some("application/octet-stream"),
        body,
    );
    let found = requests(&leg(), &response);
    assert_eq!(found.len(), 3);
    assert_eq!(found[2], ("http://e.com/p/2".into(), false));
}

#[test]
fn gzip_size_cap_and_corruption_keep_the_decoded_part() {
    let xml = urlset(1000);
    let settings = SitemapSettings {
        max_bytes: xml.len() / 2,
        ..SitemapSettings::default()
    };
    let capped = Sitemap::new(settings).unwrap();
    let response = test_response("http://e.com/s.xml.gz", None, gzip(xml.as_bytes()));
    let found = requests(&capped, &response).len();
    assert!(found > 400 && found < 600, "{found}");
    let mut corrupt = gzip(xml.as_bytes());
    corrupt.truncate(corrupt.len() / 2);
    let response = test_response("http://e.com/s.xml.gz", None, corrupt);
    let found = requests(&leg(), &response).len();
    assert!(found > 0 && found < 1000, "{found}");
    let response = test_response("http://e.com/s.xml.gz", None, vec![0x1f, 0x8b, 0, 1, 2]);
    assert!(requests(&leg(), &response).is_empty());
}

#[test]
fn url_cap_per_file() {
    let xml = urlset(DEFAULT_MAX_URLS + 10);
    let response = test_response("http://e.com/sitemap.xml", Some("text/xml"), xml);
    let found = requests(&leg(), &response);
    assert_eq!(found.len(), DEFAULT_MAX_URLS);
    assert_eq!(
        found.last().unwrap().0,
        format!("http://e.com/p/{}", DEFAULT_MAX_URLS - 1)
    );
    let settings = SitemapSettings {
        max_urls: 2,
        ..SitemapSettings::default()
    };
    let two = Sitemap::new(settings).unwrap();
    assert_eq!(requests(&two, &response).len(), 2);
    let robots = "Sitemap: /a.xml\nSitemap: /b.xml\nSitemap: /c.xml\n";
    let response = test_response("http://e.com/robots.txt", None, robots);
    assert_eq!(requests(&two, &response).len(), 2);
}

#[test]
fn allow_and_deny_filter_pages_not_the_cap() {
    let settings = SitemapSettings {
        allow: vec!["/p/".into()],
        deny: vec!["/p/1$".into()],
        max_urls: 3,
        ..SitemapSettings::default()
    };
    let leg = Sitemap::new(settings).unwrap();
    let response = test_response("http://e.com/sitemap.xml", Some("text/xml"), urlset(10));
    let urls: Vec<_> = requests(&leg, &response)
        .into_iter()
        .map(|(u, _)| u)
        .collect();
    assert_eq!(urls, ["http://e.com/p/0", "http://e.com/p/2"]);
}

#[test]
fn which_responses_are_read() {
    let xml = urlset(1);
    // No media type, .xml path: read. An HTML page: not read, unless marked as a
    // sitemap; a urlset served as text/html is read (its content decides).
    assert_eq!(
        requests(
            &leg(),
            &test_response("http://e.com/s.xml", None, xml.clone())
        )
        .len(),
        1
    );
    let mislabelled = test_response("http://e.com/s.xml", Some("text/html"), xml.clone());
    assert_eq!(requests(&leg(), &mislabelled).len(), 1);
    let html = test_response(
        "http://e.com/s.xml",
        Some("text/html"),
        "<html><body><urlset-like>not a sitemap</urlset-like></body></html>",
    );
    assert!(requests(&leg(), &html).is_empty());
    let mut marked = test_response("http://e.com/s.xml", Some("text/html"), xml.clone());
    marked.request.meta.insert(SITEMAP_META.into(), "1".into());
    assert_eq!(requests(&leg(), &marked).len(), 1);
    let mut failed = test_response("http://e.com/s.xml", Some("text/xml"), xml);
    failed.status = 500;
    assert!(requests(&leg(), &failed).is_empty());
    let rss = "<rss><channel><item><link>http://e.com/x</link></item></channel></rss>";
    assert!(
        requests(
            &leg(),
            &test_response("http://e.com/f.xml", Some("text/xml"), rss)
        )
        .is_empty()
    );
}

#[test]
fn broken_empty_and_odd_encodings() {
    let body = "<urlset><url><loc>http://e.com/1</loc></url><url><loc>http://e.com/2</loc></url><url><loc>http://e.com/3<!--";
    let response = test_response("http://e.com/s.xml", Some("text/xml"), body);
    assert_eq!(requests(&leg(), &response).len(), 2);
    assert!(
        requests(
            &leg(),
            &test_response("http://e.com/s.xml", Some("text/xml"), "")
        )
        .is_empty()
    );
    assert!(requests(&leg(), &test_response("http://e.com/robots.txt", None, "")).is_empty());
    let xml = "<?xml version='1.0' encoding='windows-1251'?><urlset><url><loc>http://e.ru/статья</loc></url></urlset>";
    let (body, _, _) = encoding_rs::WINDOWS_1251.encode(xml);
    let response = test_response("http://e.ru/s.xml", Some("text/xml"), body.into_owned());
    let expected = Url::parse("http://e.ru/статья").unwrap();
    assert_eq!(requests(&leg(), &response), [(expected.to_string(), false)]);
}

#[test]
fn invalid_settings_are_named() {
    let zero = Sitemap::new(SitemapSettings {
        max_urls: 0,
        ..SitemapSettings::default()
    });
    assert_eq!(
        zero.unwrap_err().to_string(),
        "leg sitemap: max_urls must be at least 1"
    );
    let bad = Sitemap::new(SitemapSettings {
        sitemap_allow: vec!["[".into()],
        ..SitemapSettings::default()
    });
    assert!(
        bad.unwrap_err()
            .to_string()
            .starts_with("leg sitemap: bad regex \"[\"")
    );
    let settings: SitemapSettings = serde_json::from_str(r#"{"max_urls": 10}"#).unwrap();
    assert!(settings.follow_sitemaps && settings.robots_txt && settings.max_urls == 10);
    assert_eq!(settings.max_bytes, DEFAULT_MAX_BYTES);
    assert!(serde_json::from_str::<SitemapSettings>(r#"{"follow": true}"#).is_err());
}

#[test]
fn a_sitemap_is_recognised_by_its_root_whatever_its_media_type() {
    let leg = Sitemap::new(SitemapSettings::default()).unwrap();
    let body = "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><url><loc>/a</loc></url></urlset>";
    for media in ["text/plain", "application/octet-stream", "text/html"] {
        let response = crate::legs::test_response("http://e.com/map", Some(media), body);
        let urls: Vec<String> = crate::legs::run(&leg, &response)
            .requests
            .into_iter()
            .map(|r| r.url)
            .collect();
        assert_eq!(urls, ["http://e.com/a"], "{media}");
    }
    let page = crate::legs::test_response(
        "http://e.com/page",
        Some("text/html"),
        "<html><body><a href=/b>b</a></body></html>",
    );
    assert!(crate::legs::run(&leg, &page).requests.is_empty());
}

#[test]
fn lastmod_goes_with_its_entry_as_unix_seconds() {
    let xml = "<urlset><url><lastmod>2024-01-02T03:04:05+01:00</lastmod><loc>http://e.com/a</loc></url>\
               <url><loc>http://e.com/b</loc><lastmod>2024-01-02</lastmod></url>\
               <url><loc>http://e.com/c</loc><lastmod>yesterday</lastmod></url>\
               <url><loc>http://e.com/d</loc></url></urlset>";
    let response = test_response("http://e.com/s.xml", Some("text/xml"), xml);
    let found: Vec<(String, Option<String>)> = run(&leg(), &response)
        .requests
        .into_iter()
        .map(|r| (r.url, r.meta.get(LASTMOD_META).cloned()))
        .collect();
    let at = |s: &str| Some(s.to_owned());
    assert_eq!(
        found,
        [
            ("http://e.com/a".to_owned(), at("1704161045")),
            ("http://e.com/b".to_owned(), at("1704153600")),
            ("http://e.com/c".to_owned(), None),
            ("http://e.com/d".to_owned(), None),
        ]
    );
    let index = "<sitemapindex><sitemap><loc>http://e.com/s1.xml</loc>\
                 <lastmod>2024-01-02T00:00:00Z</lastmod></sitemap></sitemapindex>";
    let response = test_response("http://e.com/i.xml", Some("text/xml"), index);
    let out = run(&leg(), &response).requests;
    assert_eq!(out[0].meta[SITEMAP_META], "1");
    assert_eq!(out[0].meta[LASTMOD_META], "1704153600");
}

#[test]
fn w3c_datetimes() {
    assert_eq!(parse_lastmod("1970"), Some(0));
    assert_eq!(parse_lastmod("2024"), Some(1_704_067_200));
    assert_eq!(parse_lastmod("2024-02"), Some(1_706_745_600));
    assert_eq!(parse_lastmod(" 2024-01-02 "), Some(1_704_153_600));
    assert_eq!(parse_lastmod("2024-01-02T00:00Z"), Some(1_704_153_600));
    assert_eq!(
        parse_lastmod("2024-01-02T00:00:00.75Z"),
        Some(1_704_153_600)
    );
    assert_eq!(parse_lastmod("2024-01-02T01:30-01:30"), Some(1_704_164_400));
    for bad in [
        "",
        "24-01-02",
        "2024-1-2",
        "2024-13-01",
        "2024-02-30",
        "2024-01T00:00Z",
        "2024-01-02T00:00",
        "2024-01-02T25:00Z",
        "2024-01-02-03",
        "1969-12-31",
        "Tue, 02 Jan 2024 00:00:00 GMT",
    ] {
        assert_eq!(parse_lastmod(bad), None, "{bad:?}");
    }
}
