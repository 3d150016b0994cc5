//! Throughput of the bundled legs: `LinkExtractor` + `PageItem` through `legs::run` on a
//! typical 10 KB HTML page with 50 links (40 followable, 10 off-site, nofollow or
//! non-web). One iteration is one page, so criterion's "thrpt" is pages/s.
//!
//! Run: `cargo bench --bench legs -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::{Duration, UNIX_EPOCH};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
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

fn response(body: String) -> Response {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    let url = "https://www.example.com/catalog/index.html";
    Response {
        request: Request::get(url),
        url: url::Url::parse(url).expect("static URL"),
        status: 200,
        headers,
        body: body.into(),
        truncated: false,
        fetched_at: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
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
    group.finish();
}

criterion_group!(benches, bench_legs);
criterion_main!(benches);
