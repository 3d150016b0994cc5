//! End-to-end runs of the bundled example crawl files (data/examples/) and of every
//! leg kind, through the real binary, against small local copies of the kind of site
//! each one describes.
//!
//! Each example's text is read from the repository, its real-looking origin replaced
//! by the local server's, and run with `crawl --config`. Every run is made fast with
//! flags over the file (`--delay 0`, a small Bloom filter) and its relative `output`
//! lands in the test's temporary directory (the run's working directory).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha1::{Digest, Sha1};

use crate::support::cli::{self, dump_items, legcrawl, run};
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(60);

/// The text of `data/examples/{name}`.
fn example(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/examples")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

/// `text` with `https://{host}` replaced by the server's origin and the bare `host`
/// (in `allowed_hosts`) by `127.0.0.1`.
fn localize(text: &str, host: &str, server: &TestServer) -> String {
    let text = text.replace(&format!("https://{host}"), &server.url(""));
    assert!(text.contains(&server.url("")), "the example names {host}");
    text.replace(host, "127.0.0.1")
}

/// Writes `text` as `crawl.toml` in `dir`, runs `crawl --config` with state in
/// `dir/{state}` and `dir` as working directory, asserts success, returns the items.
fn crawl_file(dir: &Path, state: &str, text: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let config = dir.join("crawl.toml");
    std::fs::write(&config, text).unwrap();
    let data = dir.join(state);
    let mut all = vec![
        "crawl",
        "--config",
        config.to_str().unwrap(),
        "--delay",
        "0",
        "--bloom-bits",
        "20",
    ];
    all.extend_from_slice(args);
    let mut cmd = legcrawl(&data, &all);
    cmd.current_dir(dir);
    let out = run(cmd, LIMIT);
    assert_eq!(
        out.status.code(),
        Some(0),
        "crawl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dump_items(&data)
}

/// The items by path (with query), asserting no path has two.
fn by_path(items: &[serde_json::Value]) -> BTreeMap<String, serde_json::Value> {
    let mut map = BTreeMap::new();
    for item in items {
        let path = cli::item_path(item);
        assert!(
            map.insert(path.clone(), item.clone()).is_none(),
            "two items for {path}"
        );
    }
    map
}

/// The SHA-1 hex of `["{url}"]`: the id `item_id` with `fields = ["url"]` gives.
fn url_id(url: &str) -> String {
    let digest = Sha1::digest(serde_json::json!([url]).to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn page(title: &str, links: &[&str]) -> TestResponse {
    let links: String = links
        .iter()
        .map(|href| format!("<a href=\"{href}\">{href}</a>\n"))
        .collect();
    TestResponse::html(format!(
        "<html><head><title>{title}</title></head><body>{links}</body></html>"
    ))
}

/// A documentation site: sections, downloads, an archive, a blog, tracking
/// parameters, a relative-link loop and an endless "next page" chain.
fn docs_site(headers: Arc<Mutex<Vec<(String, String)>>>) -> TestServer {
    TestServer::start(handler(move |req| {
        let path = req.path();
        if path == "/" {
            let mut seen = headers.lock().unwrap();
            for name in ["user-agent", "accept-language", "from"] {
                seen.push((name.into(), req.header(name).unwrap_or("").into()));
            }
        }
        if let Some(n) = path.strip_prefix("/docs/deep/") {
            let next = n.parse::<u32>().unwrap_or(0) + 1;
            return page(&format!("Deep {n}"), &[&format!("/docs/deep/{next}")]);
        }
        if path.starts_with("/docs/loop/") {
            return page("Loop", &["loop/"]);
        }
        match path {
            "/" => page(
                "Example Docs",
                &[
                    "/docs/",
                    "/docs/guide/intro?utm_source=home&utm_medium=web",
                    "/blog/",
                    "/docs/manual.pdf",
                    "/docs/download.zip",
                    "/docs/archive/v1",
                ],
            ),
            "/docs/" => page(
                "Docs",
                &[
                    "guide/intro",
                    "guide/install?sessionid=abc123",
                    "api/?b=2&a=1",
                    "api/?a=1&b=2",
                    "ref#functions",
                    "loop/",
                    "deep/1",
                    "http://localhost:9/docs/elsewhere",
                ],
            ),
            "/docs/guide/intro" => page("Intro", &["install", "../", "../manual.pdf"]),
            "/docs/guide/install" => page("Install", &["intro?utm_campaign=x"]),
            "/docs/api/" => page("API", &["../ref"]),
            "/docs/ref" => page("Reference", &[]),
            _ => TestResponse::not_found(),
        }
    }))
}

#[test]
fn docs_example_mirrors_the_docs_pages_and_skips_downloads() {
    let headers = Arc::new(Mutex::new(Vec::new()));
    let server = docs_site(Arc::clone(&headers));
    let dir = tempfile::tempdir().unwrap();
    let text = localize(&example("docs.toml"), "docs.example.org", &server);
    let items = by_path(&crawl_file(dir.path(), "state", &text, &[]));
    let expected = [
        "/",
        "/docs/",
        "/docs/api/?a=1&b=2",
        "/docs/deep/1",
        "/docs/deep/2",
        "/docs/deep/3",
        "/docs/deep/4",
        "/docs/guide/install",
        "/docs/guide/intro",
        "/docs/loop/",
        "/docs/loop/loop/",
        "/docs/ref",
    ];
    assert_eq!(items.keys().collect::<Vec<_>>(), expected);
    assert_eq!(items["/docs/guide/intro"]["title"], "Intro");
    assert_eq!(items["/docs/guide/intro"]["status"], 200);
    assert_eq!(items["/docs/deep/4"]["depth"], 5);
    assert_eq!(items["/"]["depth"], 0);
    // Denied, outside the allow regex, too deep, trapped: never fetched.
    for path in [
        "/docs/manual.pdf",
        "/docs/download.zip",
        "/docs/archive/v1",
        "/blog/",
        "/docs/deep/5",
        "/docs/loop/loop/loop/",
    ] {
        assert_eq!(server.hits(path), 0, "{path} was fetched");
    }
    // Canonical URLs are what is fetched: once each, tracking parameters gone.
    for path in ["/docs/guide/intro", "/docs/guide/install", "/docs/api/"] {
        assert_eq!(server.hits(path), 1, "{path}");
    }
    assert_eq!(server.hits("/docs/api/?a=1&b=2"), 1);
    for (target, _) in server.all_hits() {
        assert!(
            !target.contains("utm_") && !target.contains("sessionid"),
            "{target}"
        );
    }
    let sent = headers.lock().unwrap().clone();
    assert_eq!(
        sent,
        [
            (
                "user-agent".into(),
                "docs-mirror/1.0 (+https://example.org/bot)".into()
            ),
            ("accept-language".into(), "en".into()),
            ("from".into(), "me@example.org".into()),
        ]
    );
    // The file's relative `output` is written in the working directory.
    let output = std::fs::read(dir.path().join("docs.jsonl")).unwrap();
    assert_eq!(cli::parse_lines(&output).len(), expected.len());
}

/// The news feeds: RSS entries (one with tracking parameters, a live ticker, an
/// undated page, another host) and Atom entries (a duplicate, a fragment, `self` and
/// `replies` links). `extra` adds an entry to the RSS feed.
fn news_site(extra: Arc<AtomicBool>) -> TestServer {
    TestServer::start(handler(move |req| {
        let origin = format!("http://{}", req.host);
        match req.path() {
            "/feed.xml" => {
                let mut entries = vec![
                    format!("{origin}/2026/01/10/storm?utm_source=rss&at_medium=feed"),
                    format!("{origin}/2026/01/11/election"),
                    format!("{origin}/live/2026/scores"),
                    format!("{origin}/about"),
                    "http://localhost:9/2026/01/10/elsewhere".to_owned(),
                ];
                if extra.load(Ordering::SeqCst) {
                    entries.push("/2026/01/13/late".to_owned());
                }
                let items: String = entries
                    .iter()
                    .map(|link| format!("<item><title>t</title><link>{link}</link></item>"))
                    .collect();
                TestResponse::ok(format!(
                    "<?xml version=\"1.0\"?><rss version=\"2.0\"><channel>\
                     <title>News</title><link>{origin}/</link>{items}</channel></rss>"
                ))
                .header("Content-Type", "application/rss+xml")
            }
            "/atom.xml" => TestResponse::ok(format!(
                "<?xml version=\"1.0\"?><feed xmlns=\"http://www.w3.org/2005/Atom\">\
                 <link rel=\"self\" href=\"{origin}/atom.xml\"/>\
                 <entry><link href=\"{origin}/2026/01/11/election\"/></entry>\
                 <entry><link rel=\"alternate\" href=\"/2026/01/12/markets#comments\"/>\
                 <link rel=\"replies\" href=\"/2026/01/12/markets/comments\"/></entry>\
                 </feed>"
            ))
            .header("Content-Type", "application/atom+xml"),
            path if path.starts_with("/2026/") => page(
                &format!("Article {path}"),
                &["/2026/01/01/related", "/2026/"],
            ),
            _ => TestResponse::not_found(),
        }
    }))
}

#[test]
fn news_example_follows_feed_entries_with_stable_ids() {
    let extra = Arc::new(AtomicBool::new(false));
    let server = news_site(Arc::clone(&extra));
    let dir = tempfile::tempdir().unwrap();
    let text = localize(&example("news.toml"), "news.example.com", &server);
    let items = by_path(&crawl_file(dir.path(), "first", &text, &[]));
    // page_item records every response: the two feeds and the three articles.
    let articles = [
        "/2026/01/10/storm",
        "/2026/01/11/election",
        "/2026/01/12/markets",
    ];
    let mut expected: Vec<&str> = vec!["/atom.xml", "/feed.xml"];
    expected.extend(articles);
    expected.sort();
    assert_eq!(
        items.keys().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
    for (path, item) in &items {
        let url = item["url"].as_str().unwrap();
        assert_eq!(item["id"], url_id(url), "{path}: the id is SHA-1 of [url]");
    }
    assert_eq!(items["/2026/01/11/election"]["depth"], 1);
    assert_eq!(items["/feed.xml"]["content_type"], "application/rss+xml");
    for path in articles {
        assert_eq!(server.hits(path), 1, "{path} fetched once");
    }
    for path in [
        "/live/2026/scores",
        "/about",
        "/2026/01/12/markets/comments",
        "/2026/01/01/related",
        "/2026/",
    ] {
        assert_eq!(server.hits(path), 0, "{path} was fetched");
    }
    for (target, _) in server.all_hits() {
        assert!(
            !target.contains("utm_") && !target.contains("at_"),
            "{target}"
        );
    }
    // Another state directory, another run: the same ids.
    let again = by_path(&crawl_file(dir.path(), "second", &text, &[]));
    let ids = |items: &BTreeMap<String, serde_json::Value>| {
        items
            .iter()
            .map(|(path, item)| (path.clone(), item["id"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&again), ids(&items));
}

/// The example says "Run it from cron: every run fetches only the entries it has not
/// seen". A second run on the same state re-reads the feeds (seeds start every
/// cycle) and fetches the new entry only.
#[test]
fn news_example_run_again_fetches_only_new_entries() {
    let extra = Arc::new(AtomicBool::new(false));
    let server = news_site(Arc::clone(&extra));
    let dir = tempfile::tempdir().unwrap();
    let text = localize(&example("news.toml"), "news.example.com", &server);
    let first = crawl_file(dir.path(), "state", &text, &[]);
    extra.store(true, Ordering::SeqCst);
    let second = crawl_file(dir.path(), "state", &text, &[]);
    assert_eq!(
        server.hits("/feed.xml"),
        2,
        "the second run reads the feed again"
    );
    assert_eq!(
        server.hits("/2026/01/13/late"),
        1,
        "the new entry is fetched"
    );
    assert_eq!(
        server.hits("/2026/01/11/election"),
        1,
        "old entries are not"
    );
    assert!(second.len() > first.len());
}

fn product(name: &str, price: &str, image: &str) -> TestResponse {
    TestResponse::html(format!(
        "<html><head><title>{name} | Shop</title></head><body>\
         <h1 class=\"product-name\">{name}</h1>\
         <img class=\"product-image\" src=\"{image}\">\
         <p>Price: <span class=\"price\">{price}</span></p>\
         <div class=\"description\">  A fine\n  {name}. </div>\
         <a href=\"/category/cups\">Cups</a><a href=\"/account/login\">login</a>\
         </body></html>"
    ))
}

/// A shop: category pages with pagination, a sort link and facet filters that add
/// one more query parameter on every page; product pages; a product without a name.
fn shop_site() -> TestServer {
    TestServer::start(handler(|req| {
        let target = req.target.as_str();
        if req.path() == "/category/mugs" && req.query().is_some_and(|q| q.contains("f")) {
            let n = req.query().unwrap_or("").split('&').count();
            return page(
                "Filtered",
                &[&format!("{target}&f{n}=1"), "/product/red-mug"],
            );
        }
        match target {
            "/category/mugs" => page(
                "Mugs",
                &[
                    "/product/red-mug",
                    "/product/blue-mug",
                    "/category/mugs?page=2",
                    "/category/mugs?sort=price",
                    "/category/mugs?f0=1",
                    "/category/cups",
                    "/about",
                ],
            ),
            "/category/mugs?page=2" => {
                page("Mugs 2", &["/product/green-mug", "/product/gift-card"])
            }
            "/category/cups" => page("Cups", &["/product/tea-cup", "/product/red-mug/reviews"]),
            "/product/red-mug" => product("Red mug", "9.50", "/img/red.jpg"),
            "/product/blue-mug" => product("Blue mug", "12.00", "img/blue.jpg"),
            "/product/green-mug" => product("Green mug", "8.00", "/img/green.jpg"),
            "/product/tea-cup" => product("Tea cup", "4.25", "/img/cup.jpg"),
            "/product/gift-card" => page("Gift card", &["/category/mugs"]),
            "/product/red-mug/reviews" => page("Reviews", &["/product/red-mug", "/help"]),
            _ => TestResponse::not_found(),
        }
    }))
}

#[test]
fn shop_example_makes_product_items_from_category_pages() {
    let server = shop_site();
    let dir = tempfile::tempdir().unwrap();
    let text = localize(&example("shop.toml"), "shop.example.com", &server);
    let items = by_path(&crawl_file(dir.path(), "state", &text, &[]));
    let origin = server.url("");
    // One line per item: path, name, price, description, image (resolved: absolute).
    let got: Vec<String> = items
        .iter()
        .map(|(path, i)| {
            let text = |key: &str| i[key].as_str().unwrap_or("(missing)");
            let image = text("image").strip_prefix(&origin).unwrap_or("(relative)");
            let fields = [text("name"), text("price"), text("description"), image];
            format!("{path} | {}", fields.join(" | "))
        })
        .collect();
    assert_eq!(
        got,
        [
            "/product/blue-mug | Blue mug | 12.00 | A fine Blue mug. | /product/img/blue.jpg",
            "/product/green-mug | Green mug | 8.00 | A fine Green mug. | /img/green.jpg",
            "/product/red-mug | Red mug | 9.50 | A fine Red mug. | /img/red.jpg",
            "/product/tea-cup | Tea cup | 4.25 | A fine Tea cup. | /img/cup.jpg",
        ]
    );
    for item in items.values() {
        assert_eq!(item["id"], url_id(item["url"].as_str().unwrap()));
    }
    // Followed (through a rule or `otherwise`), but no item: no rule's css_items.
    assert_eq!(server.hits("/product/gift-card"), 1);
    assert_eq!(server.hits("/product/red-mug/reviews"), 1);
    assert_eq!(server.hits("/product/red-mug"), 1, "fetched once");
    // Outside every allow regex, denied by the category rule, or a facet trap.
    for path in ["/about", "/account/login", "/help", "/img/red.jpg"] {
        assert_eq!(server.hits(path), 0, "{path} was fetched");
    }
    let targets: Vec<String> = server.all_hits().into_iter().map(|(t, _)| t).collect();
    assert!(!targets.iter().any(|t| t.contains("sort=")), "{targets:?}");
    let most_params = targets
        .iter()
        .filter_map(|t| t.split_once('?'))
        .map(|(_, q)| q.split('&').count())
        .max();
    assert_eq!(most_params, Some(4), "max_query_params = 4: {targets:?}");
}

/// gzip of `text`.
fn gzip(text: &str) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).unwrap();
    encoder.finish().unwrap()
}

fn urlset(origin: &str, paths: &[&str]) -> String {
    let urls: String = paths
        .iter()
        .map(|p| format!("<url><loc> {origin}{p} </loc></url>"))
        .collect();
    format!(
        "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
         {urls}</urlset>"
    )
}

#[test]
fn sitemap_leg_goes_from_robots_txt_through_an_index_to_a_gzip_sitemap() {
    let server = TestServer::start(handler(|req| {
        let origin = format!("http://{}", req.host);
        match req.path() {
            "/robots.txt" => TestResponse::ok(
                "User-agent: *\nDisallow: /blocked/\n\nsitemap: /sitemap_index.xml # all\n",
            )
            .header("Content-Type", "text/plain"),
            "/sitemap_index.xml" => TestResponse::ok(format!(
                "<?xml version=\"1.0\"?><sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
                 <sitemap><loc>{origin}/sitemaps/pages.xml.gz</loc></sitemap>\
                 <sitemap><loc>{origin}/sitemaps/news.xml</loc></sitemap></sitemapindex>"
            ))
            .header("Content-Type", "application/xml"),
            "/sitemaps/pages.xml.gz" => TestResponse::ok(gzip(&urlset(
                &origin,
                &["/p/1", "/p/2", "/private/3", "/blocked/4"],
            )))
            .header("Content-Type", "application/octet-stream"),
            "/sitemaps/news.xml" => TestResponse::ok(urlset(&origin, &["/news/1", "/p/1"]))
                .header("Content-Type", "text/xml"),
            _ => page("A page", &["/p/linked"]),
        }
    }));
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "seeds = [\"{}\"]\n\
         [[legs]]\nkind = \"sitemap\"\ndeny = [\"/private/\"]\n\
         [[legs]]\nkind = \"page_item\"\n",
        server.url("/robots.txt")
    );
    let items = by_path(&crawl_file(dir.path(), "state", &text, &[]));
    let paths: Vec<&str> = items.keys().map(String::as_str).collect();
    // The sitemaps are control files, never items (the seed is an item: it
    // was asked for).
    assert_eq!(paths, ["/news/1", "/p/1", "/p/2", "/robots.txt"]);
    assert_eq!(items["/p/1"]["depth"], 3, "robots → index → sitemap → page");
    assert_eq!(server.hits("/p/1"), 1);
    assert_eq!(server.hits("/private/3"), 0, "denied by the leg");
    assert_eq!(server.hits("/blocked/4"), 0, "disallowed by robots.txt");
    assert_eq!(server.hits("/p/linked"), 0, "no links leg");
    assert_eq!(
        server.hits("/robots.txt"),
        2,
        "the robots cache and the seed"
    );
}

#[test]
fn trap_guard_bounds_relative_link_and_calendar_traps() {
    let server = TestServer::start(handler(|req| {
        let path = req.path();
        if path == "/" {
            return page("Home", &["/x/", "/cal/2026/01/"]);
        }
        if path.starts_with("/x/") {
            return page("Loop", &["a/", "b/"]);
        }
        // A calendar whose "next month" link is relative: /cal/2026/01/02/03/...
        if let Some(rest) = path.strip_prefix("/cal/") {
            let month: u32 = rest
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .and_then(|m| m.parse().ok())
                .unwrap_or(0);
            return page("Calendar", &[&format!("{:02}/", month % 12 + 1)]);
        }
        TestResponse::not_found()
    }));
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "seeds = [\"{}\"]\n\
         [[legs]]\nkind = \"trap_guard\"\nmax_path_depth = 6\nmax_segment_repeats = 2\n\
         [[legs]]\nkind = \"links\"\n\
         [[legs]]\nkind = \"page_item\"\n",
        server.url("/")
    );
    let items = crawl_file(dir.path(), "state", &text, &["--per-host", "4"]);
    let paths: BTreeSet<String> = items.iter().map(cli::item_path).collect();
    let segments = |p: &str| p.split('/').filter(|s| !s.is_empty()).count();
    let loops: Vec<&String> = paths.iter().filter(|p| p.starts_with("/x/")).collect();
    // Every sequence of a and b with at most two of each: 1 + 2 + 4 + 6 + 6.
    assert_eq!(loops.len(), 19, "{loops:?}");
    let cal: Vec<&String> = paths.iter().filter(|p| p.starts_with("/cal/")).collect();
    // /cal/2026/01/ to /cal/2026/01/02/03/04/ (6 segments).
    assert_eq!(cal.len(), 4, "{cal:?}");
    assert!(paths.iter().all(|p| segments(p) <= 6), "{paths:?}");
    assert_eq!(
        server.requests() as usize,
        items.len() + 1,
        "robots.txt and the items"
    );
}
