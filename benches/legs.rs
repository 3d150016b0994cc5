//! Throughput of the bundled legs: `LinkExtractor` + `PageItem` through `legs::run` on a
//! typical 10 KB HTML page with 50 links (40 followable, 10 off-site, nofollow or
//! non-web). One iteration is one page, so criterion's "thrpt" is pages/s. `bundled/*` is
//! the stack `legcrawl crawl` builds (`LinkExtractor`, `Canonicalize`, `PageItem`) on a
//! page shaped like those of `benches/crawl.rs` (2.6 KB, 10 links in four spellings).
//!
//! Run: `cargo bench --bench legs -- --warm-up-time 1 --measurement-time 3`
//!
//! On a loaded machine, count instructions instead: `LEGS_BENCH_PAGES=20000 perf stat -e
//! instructions:u target/release/deps/legs-HASH` runs only `bundled` that many times
//! (no criterion), so instructions per page are the count divided by the pages.

use std::hint::black_box;
use std::time::{Duration, UNIX_EPOCH};

use criterion::{Criterion, Throughput, criterion_group};
use legcrawl::legs::{self, LinkExtractor, PageItem, Stack};
use legcrawl::request::Request;
use legcrawl::response::Response;

/// A page of about 10 KB: head with meta, CSS, a script; nav, article text and links.
fn page() -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>  Example Store &mdash; Widgets, gadgets and more  </title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"stylesheet\" href=\"/static/site.css\">\
         <link rel=\"next\" href=\"/catalog?page=2\">\
         <script>window.dataLayer = window.dataLayer || []; function g(){dataLayer.push(arguments)}\
         if (a < b && c > d) { document.write('<a href=\"/x\">'); }</script>\
         <style>body{font:14px sans-serif} .nav a{color:#333} .item{margin:0 0 1em}</style>\
         </head><body><header class=\"top\"><nav class=\"nav\"><ul>\n",
    );
    for i in 0..12 {
        html.push_str(&format!(
            "<li><a class=\"nav-link\" href=\"/section/{i}/\">Section {i}</a></li>\n"
        ));
    }
    html.push_str("</ul></nav></header><main id=\"content\">\n");
    for i in 0..27 {
        html.push_str(&format!(
            "<div class=\"item\"><h2><a href=\"products/{i}.html?ref=list&amp;sort=price\">Product \
             number {i}</a></h2><p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do \
             eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, \
             quis nostrud exercitation <b>ullamco</b> laboris.</p><img src=\"/img/{i}.jpg\" \
             alt=\"product {i}\"></div>\n"
        ));
    }
    for i in 0..4 {
        html.push_str(&format!(
            "<a href=\"https://other.example.org/partner/{i}\">partner</a>\n"
        ));
        html.push_str(&format!(
            "<a rel=\"nofollow\" href=\"/login?next={i}\">log in</a>\n"
        ));
    }
    html.push_str("<a href=\"mailto:shop@example.com\">mail</a> <a href=\"#top\">top</a>\n");
    html.push_str("</main><footer><p>&copy; 2024 Example</p></footer></body></html>\n");
    html
}

/// A page like those of `benches/crawl.rs`: a title, filler text, 10 links written
/// `N.html`, `/p/N.html`, `../p/N.html` and `http://127.0.0.1:PORT/p/N.html`.
fn crawl_page() -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Page 17 of the bench site</title>\
         <link rel=\"stylesheet\" href=\"/static/site.css\"></head>\
         <body><header><h1>Page 17</h1></header><main>\n",
    );
    let filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod \
        tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis \
        nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. ";
    for k in 0..10 {
        let target = 18 + k * 397;
        let href = match k % 4 {
            0 => format!("{target}.html"),
            1 => format!("/p/{target}.html"),
            2 => format!("../p/{target}.html"),
            _ => format!("http://127.0.0.1:41234/p/{target}.html"),
        };
        html.push_str(&format!("<p><a href=\"{href}\">Page {target}</a> "));
        if k < 8 {
            html.push_str(filler);
        }
        html.push_str("</p>\n");
    }
    html.push_str("</main><footer><p>&copy; bench</p></footer></body></html>\n");
    html
}

fn response(body: String) -> Response {
    response_at(body, "https://www.example.com/catalog/index.html")
}

fn response_at(body: String, url: &str) -> Response {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    Response {
        request: Request::get(url),
        url: url::Url::parse(url).expect("static URL"),
        status: 200,
        headers,
        body: body.into(),
        truncated: false,
        fetched_at: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        kept: false,
    }
}

/// The floor: html5ever's tokenizer over the page with a sink that drops every token.
fn tokenize_noop(body: &[u8]) {
    use html5ever::tendril::StrTendril;
    use html5ever::tokenizer::{BufferQueue, Token, TokenSink, TokenSinkResult, Tokenizer};
    struct Noop;
    impl TokenSink for Noop {
        type Handle = ();
        fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
            black_box(token);
            TokenSinkResult::Continue
        }
    }
    let text = std::str::from_utf8(body).expect("UTF-8 page");
    let tokenizer = Tokenizer::new(Noop, Default::default());
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(text));
    let _ = tokenizer.feed(&queue);
    tokenizer.end();
}

fn bench_legs(c: &mut Criterion) {
    let body = page();
    let response = response(body);
    let stack = Stack::new()
        .push(LinkExtractor::new())
        .push(PageItem::new());
    let out = legs::run(&stack, &response);
    assert_eq!(out.items.len(), 1);
    // 40 links to other pages plus one back to the page itself (the scheduler dedups it).
    assert_eq!(out.requests.len(), 41, "followable links on the page");
    eprintln!(
        "page: {} bytes, {} requests",
        response.body.len(),
        out.requests.len()
    );

    let mut group = c.benchmark_group("legs");
    group.throughput(Throughput::Elements(1));
    group.bench_function("links+page_item/10KB-50links", |b| {
        b.iter(|| legs::run(&stack, black_box(&response)))
    });
    let links_only = LinkExtractor::new();
    group.bench_function("links/10KB-50links", |b| {
        b.iter(|| legs::run(&links_only, black_box(&response)))
    });
    let page_only = PageItem::new();
    group.bench_function("page_item/10KB", |b| {
        b.iter(|| legs::run(&page_only, black_box(&response)))
    });
    group.bench_function("html5ever-tokenizer-noop/10KB", |b| {
        b.iter(|| tokenize_noop(black_box(&response.body)))
    });
    let crawl = response_at(crawl_page(), "http://127.0.0.1:41234/p/17.html");
    let bundled = bundled();
    assert_eq!(legs::run(&bundled, &crawl).requests.len(), 10);
    eprintln!("crawl page: {} bytes", crawl.body.len());
    group.bench_function("bundled/2.6KB-10links", |b| {
        b.iter(|| legs::run(&bundled, black_box(&crawl)))
    });
    group.finish();
}

/// The legs `legcrawl crawl` builds (unconfigured: seed-host scope, nofollow skipped).
fn bundled() -> Stack {
    legcrawl::crawlfile::default_legs()
}

/// `LEGS_BENCH_PAGES=N`: `bundled` N times and nothing else (see the module doc).
fn count_only(pages: usize) {
    let crawl = response_at(crawl_page(), "http://127.0.0.1:41234/p/17.html");
    let bundled = bundled();
    for _ in 0..pages {
        black_box(legs::run(&bundled, black_box(&crawl)));
    }
}

criterion_group!(benches, bench_legs);

fn main() {
    if let Some(pages) = std::env::var("LEGS_BENCH_PAGES")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        count_only(pages);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
