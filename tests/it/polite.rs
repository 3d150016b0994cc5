//! Politeness and robustness of real crawls and of `legcrawl fetch`, against
//! in-process servers on 127.0.0.1: robots.txt (rules, cache across runs, 5xx),
//! per-host concurrency and delay as the server sees them, retries, redirects,
//! charsets, and every exit code of `fetch`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::cli::{self, dump_items, dump_summary, fetch, legcrawl, run};
use crate::support::{BodyMode, TestResponse, TestServer, arrivals, handler, hub_site};

const LIMIT: Duration = Duration::from_secs(120);

/// `crawl --bloom-bits 20 ARGS`, which must exit 0.
fn crawl(data: &Path, args: &[&str]) -> std::process::Output {
    cli::crawl_ok(data, &[&["--bloom-bits", "20"], args].concat())
}

fn run_counters(data: &Path) -> serde_json::Value {
    let runs = cli::dump_runs(data);
    runs.last().expect("a run")["counters"].clone()
}

fn item_for<'a>(items: &'a [serde_json::Value], path: &str) -> &'a serde_json::Value {
    items
        .iter()
        .find(|i| cli::item_path(i) == path)
        .unwrap_or_else(|| panic!("no item for {path}: {items:?}"))
}

#[test]
fn robots_rules_are_obeyed_recorded_and_cached_across_runs() {
    let server = TestServer::start(handler(|req| match req.path() {
        "/robots.txt" => {
            TestResponse::ok("User-agent: *\nDisallow: /private/\nAllow: /private/open\n")
        }
        "/" => TestResponse::html(
            "<a href=/private/secret>s</a><a href=/private/open>o</a><a href=/pub>p</a>",
        ),
        _ => TestResponse::html("<title>leaf</title>"),
    }));
    let data = tempfile::tempdir().unwrap();
    crawl(data.path(), &[&server.url("/")]);
    assert_eq!(
        server.hits("/private/secret"),
        0,
        "a disallowed page was fetched"
    );
    assert_eq!(
        server.hits("/private/open"),
        1,
        "Allow with the longer match wins"
    );
    assert_eq!(server.hits("/pub"), 1);
    let blocked = run(legcrawl(data.path(), &["dump", "blocked", "--json"]), LIMIT);
    let blocked = cli::parse_lines(&blocked.stdout);
    assert_eq!(blocked.len(), 1);
    assert!(
        blocked[0]["url"]
            .as_str()
            .unwrap()
            .ends_with("/private/secret")
    );
    assert_eq!(blocked[0]["reason"], "robots");
    assert_eq!(dump_summary(data.path())["robots_disallowed"], 1);
    // The run's pages add up: three new and one blocked (issue 14, item 8).
    let out = run(legcrawl(data.path(), &["dump", "runs", "--json"]), LIMIT);
    let first = cli::parse_lines(&out.stdout).remove(0);
    assert_eq!(
        (
            &first["pages"],
            &first["new"],
            &first["blocked"],
            &first["fetched"]
        ),
        (&4.into(), &3.into(), &1.into(), &3.into()),
        "{first}"
    );
    // A later run on the same host reuses the stored robots.txt.
    crawl(data.path(), &[&server.url("/second")]);
    assert_eq!(server.hits("/second"), 1);
    assert_eq!(
        server.hits("/robots.txt"),
        1,
        "robots.txt fetched again instead of the cached copy"
    );
}

#[test]
fn robots_server_error_holds_the_host_without_losing_requests() {
    let server = TestServer::start(handler(|req| match req.path() {
        "/robots.txt" => TestResponse::status(503),
        _ => TestResponse::html("<title>page</title>"),
    }));
    let data = tempfile::tempdir().unwrap();
    // A put-back request is not a page (`--max-pages` would not end this run):
    // a time bound does, while the host waits a minute for its robots.txt.
    crawl(data.path(), &[&server.url("/"), "--max-duration", "1"]);
    assert_eq!(
        server.hits("/"),
        0,
        "fetched while robots.txt was unavailable"
    );
    let summary = dump_summary(data.path());
    assert_eq!(summary["frontier"], 1, "the request waits in the frontier");
    assert_eq!(run_counters(data.path())["robots/unavailable"], 1);
}

#[test]
fn per_host_concurrency_is_what_the_server_sees() {
    let server = TestServer::start(handler(|req| {
        let body = match req.path() {
            "/" => (0..40)
                .map(|i| format!("<a href=/p/{i}>x</a>"))
                .collect::<String>(),
            _ => "<title>p</title>".to_owned(),
        };
        TestResponse::html(body).delay(Duration::from_millis(40))
    }));
    let data = tempfile::tempdir().unwrap();
    crawl(
        data.path(),
        &[&server.url("/"), "--concurrency", "16", "--per-host", "3"],
    );
    assert_eq!(dump_summary(data.path())["items"], 41);
    let peak = server.max_in_flight();
    assert!(
        peak <= 3,
        "{peak} requests in flight at once to one host with --per-host 3"
    );
    assert!(
        peak >= 2,
        "requests to the host never overlapped (peak {peak})"
    );
}

#[test]
fn per_host_delay_spaces_request_starts() {
    let server = hub_site(5);
    let data = tempfile::tempdir().unwrap();
    crawl(
        data.path(),
        &[&server.url("/"), "--per-host", "4", "--delay", "0.2"],
    );
    let times = arrivals(&server);
    assert_eq!(times.len(), 6);
    // The server stamps a request when it reads it; on a loaded machine a
    // stalled server thread stamps one late, which shortens the gap after it
    // and lengthens the one before (see `support::politeness`). So: the whole
    // span holds five delays, and no gap is anywhere near what four requests
    // let loose at once would show.
    let span = times[5] - times[0];
    assert!(
        span >= Duration::from_millis(5 * 190),
        "six requests within {span:?} with --delay 0.2"
    );
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(100),
            "two requests {gap:?} apart with --delay 0.2"
        );
    }
}

#[test]
fn retry_then_success_and_retry_exhaustion_are_recorded() {
    let flaky = Arc::new(Mutex::new(0u32));
    let count = Arc::clone(&flaky);
    let broken = Arc::new(Mutex::new(true));
    let is_broken = Arc::clone(&broken);
    let server = TestServer::start(handler(move |req| match req.path() {
        "/" => TestResponse::html("<a href=/flaky>f</a><a href=/broken>b</a>"),
        "/flaky" => {
            let mut n = count.lock().unwrap();
            *n += 1;
            if *n == 1 {
                TestResponse::status(503)
            } else {
                TestResponse::html("<title>ok now</title>")
            }
        }
        "/broken" if *is_broken.lock().unwrap() => TestResponse::status(500),
        "/broken" => TestResponse::html("<title>fixed</title>"),
        _ => TestResponse::not_found(),
    }));
    let data = tempfile::tempdir().unwrap();
    let out = crawl(data.path(), &[&server.url("/")]);
    assert_eq!(server.hits("/flaky"), 2);
    assert_eq!(server.hits("/broken"), 3, "one fetch and two retries");
    // Issue 14, item 7: a page out of retries is failed — counted, no item.
    let items = dump_items(data.path());
    assert_eq!(item_for(&items, "/flaky")["status"], 200);
    assert!(
        items.iter().all(|i| cli::item_path(i) != "/broken"),
        "no item for a failed page: {items:?}"
    );
    let counters = run_counters(data.path());
    assert_eq!(counters["retry/scheduled"], 3);
    assert_eq!(counters["retry/exhausted"], 1);
    assert_eq!(counters["fetch/failed"], 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("3 pages") && stderr.contains("2 new") && stderr.contains("1 failed"),
        "the end-of-run line adds up: {stderr}"
    );
    // Its record says so, and it is due next cycle.
    let pages = run(legcrawl(data.path(), &["dump", "pages", "--json"]), LIMIT);
    let pages = cli::parse_lines(&pages.stdout);
    let record = pages
        .iter()
        .find(|p| cli::item_path(p) == "/broken")
        .expect("a record of the failure");
    assert_eq!(record["status"], 500);
    assert_eq!(record["fetches"], 0);
    assert!(record["next_due"].as_u64() <= record["last_fetched"].as_u64());

    // The next run asks it again; fixed, it is a new page with its item.
    *broken.lock().unwrap() = false;
    crawl(data.path(), &[]);
    assert_eq!(server.hits("/broken"), 4);
    let fixed = dump_items(data.path());
    let fixed = item_for(&fixed, "/broken");
    assert_eq!(fixed["status"], 200);
    assert_eq!(fixed["version"], 1);
    let counters = run_counters(data.path());
    assert_eq!(counters["pages/new"], 1, "{counters}");
    assert!(counters.get("fetch/failed").is_none(), "{counters}");
}

#[test]
fn redirect_chain_loop_and_eleventh_hop() {
    let server = TestServer::start(handler(|req| {
        let path = req.path().to_owned();
        match path.as_str() {
            "/" => {
                TestResponse::html("<a href=/r/1>r</a><a href=/loop/a>l</a><a href=/chain/0>c</a>")
            }
            "/r/1" => TestResponse::redirect(301, "/r/2"),
            "/r/2" => {
                TestResponse::redirect(302, &format!("http://{}/r/3", req.header("host").unwrap()))
            }
            "/r/3" => TestResponse::redirect(307, "/final"),
            "/final" => TestResponse::html("<title>final</title>"),
            "/loop/a" => TestResponse::redirect(302, "/loop/b"),
            "/loop/b" => TestResponse::redirect(302, "/loop/a"),
            _ => match path
                .strip_prefix("/chain/")
                .and_then(|n| n.parse::<u32>().ok())
            {
                Some(n) if n < 11 => TestResponse::redirect(301, &format!("/chain/{}", n + 1)),
                Some(_) => TestResponse::html("<title>end of chain</title>"),
                None => TestResponse::not_found(),
            },
        }
    }));
    let data = tempfile::tempdir().unwrap();
    crawl(data.path(), &[&server.url("/")]);
    let items = dump_items(data.path());
    let last = item_for(&items, "/final");
    assert_eq!(last["title"], "final");
    let chain: Vec<&str> = last["redirects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        chain,
        [server.url("/r/1"), server.url("/r/2"), server.url("/r/3")]
    );
    assert_eq!(server.hits("/loop/a"), 1);
    assert_eq!(server.hits("/loop/b"), 1);
    assert_eq!(server.hits("/chain/10"), 1, "ten redirects are followed");
    assert_eq!(server.hits("/chain/11"), 0, "the 11th is not");
    let counters = run_counters(data.path());
    assert_eq!(counters["redirect/loop"], 1);
    assert_eq!(counters["redirect/too_many"], 1);
}

#[test]
fn koi8r_and_windows1251_pages_give_correct_titles() {
    let (koi8, _, _) = encoding_rs::KOI8_R.encode("<title>Привет, мир</title>");
    let (cp1251, _, _) =
        encoding_rs::WINDOWS_1251.encode("<meta charset=windows-1251><title>Новости</title>");
    let (koi8, cp1251) = (koi8.into_owned(), cp1251.into_owned());
    let server = TestServer::start(handler(move |req| match req.path() {
        "/" => TestResponse::html("<a href=/koi8>k</a><a href=/cp1251>w</a>"),
        "/koi8" => {
            TestResponse::ok(koi8.clone()).header("Content-Type", "text/html; charset=koi8-r")
        }
        "/cp1251" => TestResponse::ok(cp1251.clone()).header("Content-Type", "text/html"),
        _ => TestResponse::not_found(),
    }));
    let data = tempfile::tempdir().unwrap();
    crawl(data.path(), &[&server.url("/")]);
    let items = dump_items(data.path());
    assert_eq!(item_for(&items, "/koi8")["title"], "Привет, мир");
    assert_eq!(item_for(&items, "/cp1251")["title"], "Новости");
}

#[test]
fn fetch_exit_codes() {
    let server = TestServer::start(handler(|req| match req.path() {
        "/robots.txt" => TestResponse::ok("User-agent: legcrawl\nDisallow: /no\n"),
        "/ok" => TestResponse::html("hello body"),
        "/missing" => TestResponse::status(404)
            .header("Content-Type", "text/plain")
            .mode(BodyMode::Full),
        "/err" => TestResponse::ok("the error document").header("Content-Type", "text/plain"),
        "/short" => TestResponse::ok("only this").mode(BodyMode::LyingLength { declared: 1000 }),
        "/stall" => TestResponse::ok("partial").mode(BodyMode::Stall),
        _ => TestResponse::not_found(),
    }));
    let ok = fetch(&[&server.url("/ok")]);
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(ok.stdout, b"hello body");
    let head = fetch(&["-I", &server.url("/ok")]);
    assert!(String::from_utf8_lossy(&head.stdout).starts_with("HTTP 200"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body.html");
    assert_eq!(
        fetch(&["-o", file.to_str().unwrap(), &server.url("/ok")])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"hello body");
    let missing = fetch(&[&server.url("/missing")]);
    assert_eq!(missing.status.code(), Some(2), "HTTP error status");
    assert!(
        missing.stdout.is_empty(),
        "the error document goes to stderr, not stdout"
    );
    assert_eq!(
        fetch(&[&server.url("/no/thing")]).status.code(),
        Some(4),
        "robots.txt forbids"
    );
    assert_eq!(
        fetch(&["http://127.0.0.1:9/"]).status.code(),
        Some(3),
        "connection refused"
    );
    assert_eq!(fetch(&["not a url"]).status.code(), Some(3), "bad URL");
    assert_eq!(
        fetch(&["ftp://127.0.0.1/"]).status.code(),
        Some(3),
        "unsupported scheme"
    );
    assert_eq!(
        fetch(&[&server.url("/short")]).status.code(),
        Some(6),
        "Content-Length mismatch"
    );
    let stalled = fetch(&["--read-timeout", "0.3", &server.url("/stall")]);
    assert_eq!(
        stalled.status.code(),
        Some(5),
        "read error: {}",
        String::from_utf8_lossy(&stalled.stderr)
    );
    assert_eq!(
        fetch(&["--ignore-robots", &server.url("/no/thing")])
            .status
            .code(),
        Some(2)
    );
}
