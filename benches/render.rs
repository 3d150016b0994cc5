//! `--render` throughput: a site of empty shells, each built by its script,
//! crawled with every page rendered in the machine's headless Chromium.
//!
//! An in-process hyper server (`benches/support/site.rs`'s `serve`) answers
//! `/` and `/p/{i}` with the same shell (a `<title>` the script replaces, no
//! links) and `/app.js`, which sets the title to the page's number and adds
//! [`LINKS`] links (page `i` links to `i + 1` … `i + LINKS`, modulo the
//! site), as a client-side router would. Without rendering the crawl finds one
//! page; with it, every page.
//!
//! Each repetition crawls the whole site into a fresh state directory with
//! `engine::run`, the bundled legs and `render` set (2 tabs, 100 ms idle),
//! on a 2-worker runtime, and checks that every page was stored (only a
//! rendered page has links). Reported: the median pages/s over the repetitions, and the issue's
//! target (10 pages/s with every page rendered, on 2 cores).
//!
//! Run: `cargo bench --bench render`. Environment: `RENDER_BENCH_REPS`
//! (default 3), `RENDER_BENCH_PAGES` (default 200), `RENDER_BENCH_TABS`
//! (default 2). Needs Chromium (`apt-get install chromium`).

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use http_body_util::Full;
use legcrawl::config::CrawlConfig;
use legcrawl::engine;
use legcrawl::legs::Leg;
use legcrawl::render::RenderSettings;
use legcrawl::store::records::RunOutcome;
use median::median;

#[path = "support/median.rs"]
mod median;
#[path = "support/site.rs"]
mod site;

/// Links each page's script adds.
const LINKS: usize = 5;
/// Pages on the site, besides the index.
const PAGES: usize = 200;
/// Repetitions.
const REPS: usize = 3;
/// The target, with every page rendered.
const TARGET: f64 = 10.0;

/// The shell every page is.
const SHELL: &str = "<!DOCTYPE html><html><head><title>Loading…</title>\
    <script defer src=\"/app.js\"></script></head><body><div id=\"root\"></div></body></html>";

/// The script that builds every page.
fn app_js(pages: usize) -> String {
    format!(
        "const n = Number(location.pathname.split('/').pop()) || 0;\
         document.title = 'Page ' + n;\
         const root = document.getElementById('root');\
         for (let k = 1; k <= {LINKS}; k++) {{\
           const a = document.createElement('a');\
           a.href = '/p/' + ((n + k) % {pages}); a.textContent = 'page ' + k;\
           root.appendChild(a);\
         }}"
    )
}

fn main() -> anyhow::Result<()> {
    let env = |name: &str, default: usize| -> anyhow::Result<usize> {
        std::env::var(name).map_or(Ok(default), |v| {
            v.parse()
                .with_context(|| format!("{name}={v:?} is not a count"))
        })
    };
    let reps = env("RENDER_BENCH_REPS", REPS)?.max(1);
    let pages = env("RENDER_BENCH_PAGES", PAGES)?.max(2);
    let tabs = env("RENDER_BENCH_TABS", 2)?.max(1);
    let script = Bytes::from(app_js(pages));
    let handler: site::Handler = Arc::new(move |request| {
        let (body, kind) = match request.uri().path() {
            "/app.js" => (script.clone(), "text/javascript"),
            "/" => (Bytes::from_static(SHELL.as_bytes()), "text/html"),
            path if path.starts_with("/p/") => (Bytes::from_static(SHELL.as_bytes()), "text/html"),
            _ => {
                let mut missing = http::Response::new(Full::new(Bytes::new()));
                *missing.status_mut() = http::StatusCode::NOT_FOUND;
                return missing;
            }
        };
        let mut response = http::Response::new(Full::new(body));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(kind),
        );
        response
    });
    let listener = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let (_stop, _server) = site::serve(listener, handler)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-crawler")
        .enable_all()
        .build()
        .context("crawler runtime")?;
    println!(
        "site: {} shells, {reps} repetitions, {tabs} tabs, load average {}",
        pages,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let mut rates = Vec::new();
    for rep in 0..reps {
        let dir = tempfile::Builder::new()
            .prefix("legcrawl-render-")
            .tempdir()?;
        let config = CrawlConfig {
            data_dir: dir.path().join("state"),
            seeds: vec![format!("http://{addr}/")],
            concurrency: tabs,
            per_host: tabs,
            delay: Some(Duration::ZERO),
            render: Some(RenderSettings {
                tabs,
                idle: Duration::from_millis(100),
                ..RenderSettings::default()
            }),
            ..CrawlConfig::default()
        };
        let legs: Arc<dyn Leg> = {
            let mut stack = legcrawl::crawlfile::default_legs();
            stack.configure(&config)?;
            Arc::new(stack)
        };
        let started = Instant::now();
        let report = runtime.block_on(engine::run(&config, legs, std::future::pending()))?;
        let wall = started.elapsed();
        if report.outcome != RunOutcome::Drained || report.totals.failed != 0 {
            bail!(
                "run ended {:?} with {} failed",
                report.outcome,
                report.totals.failed
            );
        }
        // Only rendered pages have links: the index and every page, or one.
        let all = pages as u64 + 1;
        ensure!(
            report.items == all,
            "{} items of {all}: pages were not rendered",
            report.items
        );
        let rate = all as f64 / wall.as_secs_f64();
        println!("repetition {rep}: {all} pages rendered in {wall:.2?}: {rate:.1} pages/s");
        rates.push(rate);
    }
    let rate = median(&rates);
    println!(
        "render: median {rate:.1} pages/s with every page rendered ({} the target of {TARGET})",
        if rate >= TARGET { "meets" } else { "below" }
    );
    Ok(())
}
