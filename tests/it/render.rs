//! `--render` through the binary, both modes, in the machine's headless
//! Chromium: a site whose pages are empty shells built by their scripts
//! (links, titles, a heading from an XHR) is crawled whole with `--render`,
//! and as one shell without it. What the browser asks for obeys the crawl:
//! robots.txt (a disallowed script is never requested), the page's host (a
//! tracker on another host is never requested), no images; the page itself
//! is requested once (the browser is given the response already fetched). A
//! revisit of unchanged pages renders nothing. No Chromium process is left
//! once the crawl has ended. Without a browser, `--render` is one line and
//! exit 2.

use std::collections::BTreeMap;

use crate::support::cli;
use crate::support::mode::{Crawler, Mode};
use crate::support::serve::find_browser;
use crate::support::{TestResponse, TestServer, handler};

const PAGES: usize = 5;

/// The shell of every page: a title the scripts replace, no links.
fn shell(scripts: &str) -> TestResponse {
    TestResponse::html(format!(
        "<!DOCTYPE html><html><head><title>Loading…</title>{scripts}</head>\
         <body><div id=root></div><img src=/logo.png></body></html>"
    ))
}

/// The JavaScript site, and the tracker host its home page also loads.
fn site() -> (TestServer, TestServer) {
    site_with(std::time::Duration::ZERO)
}

/// [`site`], its home page's script answered after `slow`.
fn site_with(slow: std::time::Duration) -> (TestServer, TestServer) {
    let tracker = TestServer::start_on(
        "127.0.0.2",
        handler(|_| TestResponse::ok("/* tracking */").header("Content-Type", "text/javascript")),
    );
    let tracker_js = format!("http://127.0.0.2:{}/track.js", tracker.addr().port());
    let server = TestServer::start(handler(move |request| {
        match request.path() {
        "/robots.txt" => TestResponse::ok("User-agent: *\nDisallow: /private.js\n"),
        "/" => shell(&format!(
            "<script defer src=/app.js></script><script src=/private.js></script>\
             <script src={tracker_js}></script>"
        )),
        "/app.js" => TestResponse::ok(format!(
            "document.title = 'Home';\
             const root = document.getElementById('root');\
             for (let i = 0; i < {PAGES}; i++) {{\
               const a = document.createElement('a');\
               a.href = '/p/' + i; a.textContent = 'page ' + i; root.appendChild(a);\
             }}\
             fetch('/api/heading.json').then(r => r.json()).then(d => {{\
               const h = document.createElement('h1'); h.textContent = d.heading; root.appendChild(h);\
             }});"
        ))
        .header("Content-Type", "text/javascript")
        .delay(slow),
        "/api/heading.json" => TestResponse::ok("{\"heading\": \"Built by scripts\"}")
            .header("Content-Type", "application/json"),
        "/page.js" => TestResponse::ok(
            "document.title = 'Page ' + location.pathname.split('/').pop();",
        )
        .header("Content-Type", "text/javascript"),
        path if path.starts_with("/p/") => shell("<script src=/page.js></script>"),
        _ => TestResponse::not_found(),
    }
    }));
    (server, tracker)
}

/// The items' titles by path.
fn titles(crawler: &Crawler) -> BTreeMap<String, String> {
    crawler
        .items()
        .iter()
        .map(|item| {
            let title = item["title"].as_str().unwrap_or_default().to_owned();
            (cli::item_path(item), title)
        })
        .collect()
}

/// Chromium processes whose command line names the profile directories
/// legcrawl makes.
fn browsers_left() -> Vec<String> {
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("legcrawl-chromium-") {
            left.push(cmdline);
        }
    }
    left
}

/// Held by each test that renders, so that a test that looks for a browser
/// left behind sees only its own crawl's.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The titles a rendered crawl of [`site`] finds.
fn rendered_titles() -> BTreeMap<String, String> {
    let mut expected = BTreeMap::from([("/".to_owned(), "Home".to_owned())]);
    for i in 0..PAGES {
        expected.insert(format!("/p/{i}"), format!("Page {i}"));
    }
    expected
}

fn a_site_built_by_scripts_is_crawled_whole_and_politely(mode: Mode) {
    if find_browser().is_none() {
        return;
    }
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Some(plain) = Crawler::start(mode, "render") else {
        return;
    };
    let (server, tracker) = site();
    let seed = server.url("/");
    plain.crawl_ok(&[&seed, "--delay", "0"]);
    assert_eq!(
        titles(&plain),
        BTreeMap::from([("/".to_owned(), "Loading…".to_owned())]),
        "{mode:?}: without --render the legs read the shell"
    );

    let crawler = plain.another("rendered");
    let before = server.hits("/");
    let out = crawler.crawl_ok(&[&seed, "--delay", "0", "--render"]);
    let expected = rendered_titles();
    assert_eq!(
        titles(&crawler),
        expected,
        "{mode:?}: rendered titles and links"
    );
    // The page itself was fetched once (robots.txt and politeness as always);
    // the browser was given that response.
    assert_eq!(
        server.hits("/") - before,
        1,
        "{mode:?}: the home page fetched once"
    );
    assert!(server.hits("/app.js") >= 1 && server.hits("/page.js") >= 1);
    assert!(
        server.hits("/api/heading.json") >= 1,
        "{mode:?}: the XHR went through legcrawl"
    );
    assert_eq!(
        server.hits("/private.js"),
        0,
        "{mode:?}: robots.txt holds for scripts"
    );
    assert_eq!(server.hits("/logo.png"), 0, "{mode:?}: no images");
    assert_eq!(
        tracker.requests(),
        0,
        "{mode:?}: no request to another host"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("could not render"), "{mode:?}: {stderr}");
    // The run's counters say what rendering did: each page rendered, and the
    // home page's disallowed script, tracker and each page's image refused.
    let runs = crawler.runs();
    let counters = &runs.last().expect("a run")["counters"];
    assert_eq!(
        counters["render/pages"],
        PAGES as u64 + 1,
        "{mode:?}: {counters}"
    );
    assert!(
        counters["render/blocked"].as_u64() >= Some(PAGES as u64 + 3),
        "{mode:?}: {counters}"
    );
    assert!(
        counters.get("render/failed").is_none(),
        "{mode:?}: {counters}"
    );
    assert!(
        browsers_left().is_empty(),
        "{mode:?}: {:?}",
        browsers_left()
    );

    // A revisit of unchanged pages asks the server and renders nothing.
    let scripts = server.hits("/app.js") + server.hits("/page.js");
    crawler.crawl_ok(&[&seed, "--delay", "0", "--render", "--revisit-after", "0"]);
    assert_eq!(
        server.hits("/app.js") + server.hits("/page.js"),
        scripts,
        "{mode:?}: unchanged pages are not rendered again"
    );
    assert_eq!(titles(&crawler), expected, "{mode:?}: the items stay");
    assert!(
        browsers_left().is_empty(),
        "{mode:?}: {:?}",
        browsers_left()
    );
}

#[test]
fn a_site_built_by_scripts_is_crawled_whole_and_politely_embedded() {
    a_site_built_by_scripts_is_crawled_whole_and_politely(Mode::Embedded);
}

#[test]
fn a_site_built_by_scripts_is_crawled_whole_and_politely_shared() {
    a_site_built_by_scripts_is_crawled_whole_and_politely(Mode::Shared);
}

/// kill -9 of legcrawl while a page renders: its browser dies with it, and
/// the next run renders the page again and ends with every page once.
fn a_kill_while_rendering_leaves_no_browser_and_resumes_exactly(mode: Mode) {
    if find_browser().is_none() {
        return;
    }
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Some(crawler) = Crawler::start(mode, "render_kill") else {
        return;
    };
    let (server, _tracker) = site_with(std::time::Duration::from_secs(3));
    let seed = server.url("/");
    let args = [seed.as_str(), "--delay", "0", "--render"];
    let mut child = crawler
        .command(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn legcrawl");
    crate::support::wait_until("the browser asks for the script", cli::LIMIT, || {
        server.hits("/app.js") > 0
    });
    assert!(!browsers_left().is_empty(), "{mode:?}: a browser renders");
    child.kill().expect("kill -9");
    child.wait().expect("reap");
    crate::support::wait_until(
        "the browser to die with legcrawl",
        std::time::Duration::from_secs(10),
        || browsers_left().is_empty(),
    );
    crawler.crawl_ok(&args);
    let paths = crawler.item_paths();
    let want: std::collections::BTreeSet<String> = rendered_titles().into_keys().collect();
    crate::support::assert_each_once(&paths, &want, &format!("{mode:?} after the kill"));
    assert_eq!(titles(&crawler), rendered_titles(), "{mode:?}");
    assert!(
        browsers_left().is_empty(),
        "{mode:?}: {:?}",
        browsers_left()
    );
}

#[test]
fn a_kill_while_rendering_leaves_no_browser_and_resumes_exactly_embedded() {
    a_kill_while_rendering_leaves_no_browser_and_resumes_exactly(Mode::Embedded);
}

#[test]
fn a_kill_while_rendering_leaves_no_browser_and_resumes_exactly_shared() {
    a_kill_while_rendering_leaves_no_browser_and_resumes_exactly(Mode::Shared);
}

/// Without a browser, `--render` is one line naming the package, exit 2,
/// before anything is fetched.
#[test]
fn render_without_a_browser_is_one_line_and_exit_2() {
    let Some(crawler) = Crawler::start(Mode::Embedded, "render_without_a_browser") else {
        return;
    };
    let (server, _tracker) = site();
    let mut command = crawler.command(&[&server.url("/"), "--render"]);
    command.env("LEGCRAWL_CHROMIUM", "/nonexistent/chromium");
    let out = cli::run(command, cli::LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--render needs Chromium"), "{stderr}");
    assert_eq!(server.requests(), 0, "nothing fetched: {stderr}");
}
