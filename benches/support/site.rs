//! The generated bench site and its in-process server, shared by `benches/crawl.rs`
//! and `benches/recrawl.rs` (included with `#[path]`; benches cannot import
//! `tests/it/support`).
//!
//! A deterministic site of `pages` pages `/p/{i}.html` (2–4 KB, a `<title>`,
//! [`LINKS`] links in four spellings: relative, root-relative, `../` and absolute;
//! page `i` always links to `i + 1`) plus the index `/`, served by hyper 1
//! (HTTP/1.1 keep-alive) on one thread with a current-thread runtime, bodies
//! precomputed. Every page has the ETag `"i"`; with validators on, answers carry
//! it and a matching `If-None-Match` gets an empty 304. The server counts
//! requests, body bytes sent and 304s.

// Each bench uses part of this module.
#![allow(dead_code)]

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

/// Links on each page.
pub const LINKS: usize = 10;
/// Filler sentence, repeated to bring pages to 2–4 KB.
const FILLER: &str = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod \
    tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud \
    exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. ";

/// The next value of a SplitMix64 generator whose state is `state`.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The site's bodies and ETags: index 0 is `/`, index `i + 1` is `/p/{i}.html`.
struct Site {
    bodies: Vec<(Bytes, http::HeaderValue)>,
}

impl Site {
    /// `pages` pages whose absolute links name `authority` (`127.0.0.1:PORT`).
    fn generate(pages: usize, authority: &str) -> Site {
        let mut rng = 0x5eed_u64;
        let index = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index</title>\
                     </head><body><h1>Index</h1><a href=\"p/0.html\">start</a></body></html>\n";
        let bodies = std::iter::once(index.to_owned())
            .chain((0..pages).map(|i| page(i, pages, authority, &mut rng)))
            .enumerate()
            .map(|(k, body)| {
                let etag = http::HeaderValue::from_str(&format!("\"{k}\""))
                    .unwrap_or(http::HeaderValue::from_static("\"x\""));
                (Bytes::from(body), etag)
            })
            .collect();
        Site { bodies }
    }

    /// The body and ETag at `path`, if it is on the site.
    fn get(&self, path: &str) -> Option<&(Bytes, http::HeaderValue)> {
        if path == "/" {
            return self.bodies.first();
        }
        let i: usize = path
            .strip_prefix("/p/")?
            .strip_suffix(".html")?
            .parse()
            .ok()?;
        self.bodies.get(i + 1)
    }

    /// Mean, smallest and largest page body (the index excluded), in bytes.
    fn sizes(&self) -> (usize, usize, usize) {
        let pages = &self.bodies[1..];
        let len = |(body, _): &(Bytes, http::HeaderValue)| body.len();
        let total: usize = pages.iter().map(len).sum();
        let min = pages.iter().map(len).min().unwrap_or(0);
        let max = pages.iter().map(len).max().unwrap_or(0);
        (total / pages.len().max(1), min, max)
    }
}

/// Page `i`: a title, filler paragraphs (2–4 KB in all) and [`LINKS`] links.
fn page(i: usize, pages: usize, authority: &str, rng: &mut u64) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Page {i} of the bench site</title>\
         <link rel=\"stylesheet\" href=\"/static/site.css\"></head>\
         <body><header><h1>Page {i}</h1></header><main>\n"
    );
    let paragraphs = 6 + i % 5;
    for k in 0..LINKS {
        let target = if k == 0 {
            (i + 1) % pages
        } else {
            (splitmix64(rng) % pages as u64) as usize
        };
        let href = match k % 4 {
            0 => format!("{target}.html"),
            1 => format!("/p/{target}.html"),
            2 => format!("../p/{target}.html"),
            _ => format!("http://{authority}/p/{target}.html"),
        };
        let _ = write!(html, "<p><a href=\"{href}\">Page {target}</a> ");
        if k < paragraphs {
            html.push_str(FILLER);
        }
        html.push_str("</p>\n");
    }
    html.push_str("</main><footer><p>&copy; bench</p></footer></body></html>\n");
    html
}

/// What the server counts and how it answers.
#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    not_modified: AtomicU64,
    /// Send ETags (and answer 304 to a matching `If-None-Match`).
    validators: AtomicBool,
}

/// The bench server: one thread, one current-thread runtime; stops when dropped.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Mean, smallest and largest page body, in bytes.
    pub sizes: (usize, usize, usize),
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds 127.0.0.1, generates a site of `pages` pages and serves it
    /// (validators off).
    pub fn start(pages: usize) -> anyhow::Result<Server> {
        let listener = StdListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let site = Arc::new(Site::generate(pages, &addr.to_string()));
        let sizes = site.sizes();
        let counters = Arc::new(Counters::default());
        let shared = Arc::clone(&counters);
        let handler: Handler = Arc::new(move |request| answer(&site, &shared, request));
        let (stop, thread) = serve(listener, handler)?;
        Ok(Server {
            addr,
            sizes,
            counters,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The absolute URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// (requests, body bytes, 304s) so far.
    pub fn totals(&self) -> (u64, u64, u64) {
        let c = &self.counters;
        (
            c.requests.load(Ordering::Relaxed),
            c.bytes.load(Ordering::Relaxed),
            c.not_modified.load(Ordering::Relaxed),
        )
    }

    /// Turns ETags and 304 answers on or off.
    pub fn set_validators(&self, on: bool) {
        self.counters.validators.store(on, Ordering::Relaxed);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How a server answers a request.
pub type Handler =
    Arc<dyn Fn(&http::Request<Incoming>) -> http::Response<Full<Bytes>> + Send + Sync>;

/// Serves `listener` (non-blocking) with `handler` on a thread of its own with
/// a current-thread runtime, HTTP/1.1 keep-alive, until the sender is used or
/// dropped; join the thread after.
pub fn serve(
    listener: StdListener,
    handler: Handler,
) -> anyhow::Result<(oneshot::Sender<()>, JoinHandle<()>)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("server runtime")?;
    let (stop, stopped) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("bench-server".into())
        .spawn(move || runtime.block_on(accept_loop(listener, handler, stopped)))?;
    Ok((stop, thread))
}

async fn accept_loop(listener: StdListener, handler: Handler, mut stop: oneshot::Receiver<()>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let handler = Arc::clone(&handler);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                std::future::ready(Ok::<_, Infallible>(handler(&request)))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(
    site: &Site,
    counters: &Counters,
    request: &http::Request<Incoming>,
) -> http::Response<Full<Bytes>> {
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let mut response = http::Response::new(Full::new(Bytes::new()));
    let Some((body, etag)) = site.get(request.uri().path()) else {
        *response.status_mut() = http::StatusCode::NOT_FOUND;
        return response;
    };
    if counters.validators.load(Ordering::Relaxed) {
        response
            .headers_mut()
            .insert(http::header::ETAG, etag.clone());
        if request.headers().get(http::header::IF_NONE_MATCH) == Some(etag) {
            counters.not_modified.fetch_add(1, Ordering::Relaxed);
            *response.status_mut() = http::StatusCode::NOT_MODIFIED;
            return response;
        }
    }
    counters
        .bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    *response.body_mut() = Full::new(body.clone());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}
