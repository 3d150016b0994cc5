//! An in-process HTTP test server with counters and scripted misbehaviour.
//!
//! [`TestServer::start`] binds `127.0.0.1:0` ([`TestServer::start_on`] another
//! loopback address, such as `127.0.0.3:0`, so that tests have several hosts;
//! [`TestServer::start_https`] speaks TLS with a test certificate) on
//! the calling thread (so [`TestServer::addr`] is known at once) and serves on a background thread with
//! its own multi-thread tokio runtime, so it works the same from `#[test]`,
//! `#[tokio::test]` and tests that spawn the real binary. HTTP/1.1 and h2c (prior
//! knowledge) are served through hyper-util's auto builder. Dropping the handle
//! stops accepting, cancels every connection (including stalled ones) and joins
//! the thread (bounded by [`SHUTDOWN_GRACE`]).
//!
//! Each request is answered by a synchronous [`Handler`]; the [`TestResponse`] it
//! returns may ask for a delay before headers or a [`BodyMode`] other than a
//! plain body. Counters: requests in total and per target, connections accepted,
//! body bytes sent, and the most requests seen in flight at once (from arrival
//! until the response body is finished or dropped). [`TestServer::log`] keeps
//! every request's arrival and the moment its last body frame was handed to
//! hyper, for politeness checks (see [`Logged`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::sync::oneshot;
use tokio::time::Sleep;

/// Longest a [`BodyMode::Stall`] body stays open before the server aborts it.
pub const MAX_STALL: Duration = Duration::from_secs(60);
/// How long [`BodyMode::LyingLength`] waits after its bytes before closing.
const LIE_PAUSE: Duration = Duration::from_millis(50);
/// Longest the server's runtime may take to stop when the handle drops.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Worker threads of the server runtime unless chosen.
const DEFAULT_WORKERS: usize = 2;

/// Answers one request. Runs on the server's runtime threads: keep it quick.
pub type Handler = Arc<dyn Fn(&TestRequest) -> TestResponse + Send + Sync>;

/// Wraps a closure as a [`Handler`].
pub fn handler(f: impl Fn(&TestRequest) -> TestResponse + Send + Sync + 'static) -> Handler {
    Arc::new(f)
}

/// A request as the handler sees it.
#[derive(Clone, Debug)]
pub struct TestRequest {
    /// Method, upper case.
    pub method: String,
    /// Path and query as sent (`/p/1.html?x=1`).
    pub target: String,
    /// `host:port` the client addressed (`Host` header or h2 authority).
    pub host: String,
    /// Request headers.
    pub headers: HeaderMap,
    /// Request body, fully read.
    pub body: Bytes,
}

impl TestRequest {
    /// The path, without the query.
    pub fn path(&self) -> &str {
        split_target(&self.target).0
    }

    /// The query (after `?`), if the target has one.
    pub fn query(&self) -> Option<&str> {
        split_target(&self.target).1
    }

    /// A header's value as text, if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }
}

/// How the body of a [`TestResponse`] goes on the wire.
#[derive(Clone, Debug, Default)]
pub enum BodyMode {
    /// All at once with a correct `Content-Length` (unless the headers set one).
    #[default]
    Full,
    /// Chunked transfer encoding, `size` bytes per chunk, `pause` between chunks.
    Chunked {
        /// Bytes per chunk (at least 1).
        size: usize,
        /// Wait between two chunks.
        pause: Duration,
    },
    /// Headers, then the body bytes if any, then nothing until [`MAX_STALL`]
    /// (or shutdown), then the connection is aborted.
    Stall,
    /// Declares `Content-Length: declared`, sends the (shorter) body, then closes
    /// the connection.
    LyingLength {
        /// The length announced.
        declared: u64,
    },
}

/// What the handler answers.
#[derive(Clone, Debug)]
pub struct TestResponse {
    /// Status code.
    pub status: u16,
    /// Headers, in order; repeated names are all sent.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Bytes,
    /// Wait before sending headers.
    pub delay: Option<Duration>,
    /// How the body is sent.
    pub mode: BodyMode,
}

impl TestResponse {
    /// A response with `status`, no headers and an empty body.
    pub fn status(status: u16) -> TestResponse {
        TestResponse {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
            delay: None,
            mode: BodyMode::Full,
        }
    }

    /// `200` with `body` and no content type.
    pub fn ok(body: impl Into<Bytes>) -> TestResponse {
        TestResponse {
            body: body.into(),
            ..TestResponse::status(200)
        }
    }

    /// `200 text/html; charset=utf-8` with `body`.
    pub fn html(body: impl Into<Bytes>) -> TestResponse {
        TestResponse::ok(body).header("Content-Type", "text/html; charset=utf-8")
    }

    /// `404` with a short text body.
    pub fn not_found() -> TestResponse {
        TestResponse {
            body: Bytes::from_static(b"not found"),
            ..TestResponse::status(404)
        }
        .header("Content-Type", "text/plain")
    }

    /// A redirect with `status` (301, 302, 307, ...) to `location`.
    pub fn redirect(status: u16, location: &str) -> TestResponse {
        TestResponse::status(status).header("Location", location)
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> TestResponse {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Waits `delay` before sending headers.
    pub fn delay(mut self, delay: Duration) -> TestResponse {
        self.delay = Some(delay);
        self
    }

    /// Sends the body with `mode`.
    pub fn mode(mut self, mode: BodyMode) -> TestResponse {
        self.mode = mode;
        self
    }
}

/// Counters shared by the server tasks and the handle.
#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    connections: AtomicU64,
    bytes_sent: AtomicU64,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Requests per target (path and query as sent).
    hits: Mutex<HashMap<String, u64>>,
    /// Every request, in arrival order.
    log: Mutex<Vec<Logged>>,
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Logged {
    /// Path and query as sent.
    pub target: String,
    /// When its head had arrived (before the handler ran).
    pub start: Instant,
    /// When the last frame of its response body was handed to hyper (so before
    /// the client could have read the whole response), or when the response was
    /// dropped unfinished; `None` while still in flight.
    pub done: Option<Instant>,
    /// Requests in flight at its arrival, itself included (the counter behind
    /// [`TestServer::max_in_flight`], which drops a little later than `done`).
    pub in_flight: usize,
}

impl Logged {
    /// True when `other` arrived while this one was in flight (`other` started
    /// at or after this one).
    pub fn overlaps_start_of(&self, other: &Logged) -> bool {
        other.start >= self.start && self.done.is_none_or(|done| other.start < done)
    }
}

/// Counts one request in flight until dropped; marks its [`Logged::done`].
struct InFlight(Arc<Stats>, usize);

impl InFlight {
    fn enter(stats: &Arc<Stats>, target: &str) -> InFlight {
        let start = Instant::now();
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let mut log = stats.log.lock().expect("log lock");
        log.push(Logged {
            target: target.to_owned(),
            start,
            done: None,
            in_flight: now,
        });
        InFlight(Arc::clone(stats), log.len() - 1)
    }

    /// Records that the last body frame is on its way (first call counts).
    fn finish(&self) {
        let mut log = self.0.log.lock().expect("log lock");
        let entry = &mut log[self.1];
        entry.done.get_or_insert_with(Instant::now);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.finish();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running test server; stops when dropped.
pub struct TestServer {
    addr: SocketAddr,
    /// `https` or `http`, for [`TestServer::url`].
    scheme: &'static str,
    stats: Arc<Stats>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server answering with `handler` on a 2-thread runtime.
    pub fn start(handler: Handler) -> TestServer {
        TestServer::start_with_workers(handler, DEFAULT_WORKERS)
    }

    /// Starts a server whose runtime has `workers` threads.
    pub fn start_with_workers(handler: Handler, workers: usize) -> TestServer {
        TestServer::start_on_with_workers("127.0.0.1", handler, workers)
    }

    /// Starts a server on `ip` (a loopback address such as `127.0.0.3`), port 0.
    pub fn start_on(ip: &str, handler: Handler) -> TestServer {
        TestServer::start_on_with_workers(ip, handler, DEFAULT_WORKERS)
    }

    /// Starts a server on `ip`, port 0, whose runtime has `workers` threads.
    pub fn start_on_with_workers(ip: &str, handler: Handler, workers: usize) -> TestServer {
        let listener = StdListener::bind((ip, 0)).unwrap_or_else(|e| panic!("bind {ip}:0: {e}"));
        TestServer::serve(listener, handler, workers)
    }

    /// Starts a server on `addr` itself (a host that was down comes back).
    pub fn start_at(addr: SocketAddr, handler: Handler) -> TestServer {
        let listener = StdListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
        TestServer::serve(listener, handler, DEFAULT_WORKERS)
    }

    /// Starts a server on `127.0.0.1:0` that speaks TLS with `tls` (see
    /// `support::tls::Pki::server_config`); [`TestServer::url`] is `https`.
    /// A client that refuses the certificate is a handshake that fails,
    /// never a request.
    pub fn start_https(handler: Handler, tls: Arc<rustls::ServerConfig>) -> TestServer {
        let listener = StdListener::bind(("127.0.0.1", 0)).expect("bind 127.0.0.1:0");
        TestServer::serve_with(listener, handler, DEFAULT_WORKERS, Some(tls))
    }

    fn serve(listener: StdListener, handler: Handler, workers: usize) -> TestServer {
        TestServer::serve_with(listener, handler, workers, None)
    }

    fn serve_with(
        listener: StdListener,
        handler: Handler,
        workers: usize,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> TestServer {
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("listener address");
        let stats = Arc::new(Stats::default());
        let (shutdown, stop) = oneshot::channel();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name("test-server")
            .enable_all()
            .build()
            .expect("server runtime");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let shared = Arc::new(Shared {
            handler,
            stats: Arc::clone(&stats),
            addr,
            tls: tls.map(tokio_rustls::TlsAcceptor::from),
        });
        let thread = std::thread::Builder::new()
            .name("test-server-main".into())
            .spawn(move || {
                runtime.block_on(accept_loop(listener, shared, stop));
                runtime.shutdown_timeout(SHUTDOWN_GRACE);
            })
            .expect("server thread");
        TestServer {
            addr,
            scheme,
            stats,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT` (`https` for [`TestServer::start_https`]) followed by
    /// `path` (which should start with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{}", self.scheme, self.addr, path)
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.stats.requests.load(Ordering::SeqCst)
    }

    /// Requests for `path`: with a `?`, exactly that target; without, every
    /// target with that path whatever its query.
    pub fn hits(&self, path: &str) -> u64 {
        let hits = self.stats.hits.lock().expect("hits lock");
        if path.contains('?') {
            return hits.get(path).copied().unwrap_or(0);
        }
        hits.iter()
            .filter(|(target, _)| split_target(target).0 == path)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every target requested and how often, sorted by target.
    pub fn all_hits(&self) -> Vec<(String, u64)> {
        let hits = self.stats.hits.lock().expect("hits lock");
        let mut all: Vec<_> = hits
            .iter()
            .map(|(target, n)| (target.clone(), *n))
            .collect();
        all.sort();
        all
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.stats.connections.load(Ordering::SeqCst)
    }

    /// Response body bytes sent so far (headers not counted).
    pub fn bytes_sent(&self) -> u64 {
        self.stats.bytes_sent.load(Ordering::SeqCst)
    }

    /// The most requests in flight at the same time so far.
    pub fn max_in_flight(&self) -> usize {
        self.stats.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every request so far, in arrival order, with its start and end.
    pub fn log(&self) -> Vec<Logged> {
        self.stats.log.lock().expect("log lock").clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What every connection task needs.
struct Shared {
    handler: Handler,
    stats: Arc<Stats>,
    addr: SocketAddr,
    /// Set for an https server.
    tls: Option<tokio_rustls::TlsAcceptor>,
}

async fn accept_loop(listener: StdListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            // Out of file descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        shared.stats.connections.fetch_add(1, Ordering::SeqCst);
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let tls = shared.tls.clone();
            let service = service_fn(move |request| serve(request, Arc::clone(&shared)));
            let builder = auto::Builder::new(TokioExecutor::new());
            let _ = match tls {
                None => {
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
                Some(acceptor) => {
                    // A refused certificate ends the handshake: no request.
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
            };
        });
    }
}

async fn serve(
    request: http::Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<http::Response<TestBody>, Infallible> {
    let guard = InFlight::enter(
        &shared.stats,
        request.uri().path_and_query().map_or("/", |t| t.as_str()),
    );
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |target| target.as_str())
        .to_owned();
    shared.stats.requests.fetch_add(1, Ordering::SeqCst);
    *shared
        .stats
        .hits
        .lock()
        .expect("hits lock")
        .entry(target.clone())
        .or_insert(0) += 1;
    let host = parts
        .uri
        .authority()
        .map(|authority| authority.to_string())
        .or_else(|| {
            parts
                .headers
                .get(http::header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| shared.addr.to_string());
    let request = TestRequest {
        method: parts.method.to_string(),
        target,
        host,
        headers: parts.headers,
        body,
    };
    let response = (shared.handler)(&request);
    if let Some(delay) = response.delay {
        tokio::time::sleep(delay).await;
    }
    Ok(build_response(response, guard))
}

/// The hyper response for `response`; a header the handler got wrong becomes a 500.
fn build_response(response: TestResponse, guard: InFlight) -> http::Response<TestBody> {
    let stats = Arc::clone(&guard.0);
    let mut headers = HeaderMap::with_capacity(response.headers.len() + 1);
    for (name, value) in &response.headers {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(name), Ok(value)) => {
                headers.append(name, value);
            }
            _ => {
                let body = TestBody::full(Bytes::from(format!("bad test header {name:?}")), guard);
                return with_status(500, HeaderMap::new(), body);
            }
        }
    }
    let state = match response.mode {
        BodyMode::Full => BodyState::Full(Some(response.body)),
        BodyMode::Chunked { size, pause } => BodyState::Chunks {
            rest: response.body,
            size: size.max(1),
            pause,
            wait: None,
        },
        BodyMode::Stall => BodyState::Stall {
            first: Some(response.body),
            until: Box::pin(tokio::time::sleep(MAX_STALL)),
        },
        BodyMode::LyingLength { declared } => {
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(declared));
            BodyState::Short {
                data: Some(response.body),
                then: Box::pin(tokio::time::sleep(LIE_PAUSE)),
            }
        }
    };
    with_status(
        response.status,
        headers,
        TestBody {
            state,
            stats,
            guard,
        },
    )
}

fn with_status(status: u16, headers: HeaderMap, body: TestBody) -> http::Response<TestBody> {
    let mut out = http::Response::new(body);
    *out.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    *out.headers_mut() = headers;
    out
}

/// A response body that can misbehave; counts bytes and holds the in-flight guard.
pub struct TestBody {
    state: BodyState,
    stats: Arc<Stats>,
    guard: InFlight,
}

enum BodyState {
    Full(Option<Bytes>),
    Chunks {
        rest: Bytes,
        size: usize,
        pause: Duration,
        wait: Option<Pin<Box<Sleep>>>,
    },
    Stall {
        first: Option<Bytes>,
        until: Pin<Box<Sleep>>,
    },
    Short {
        data: Option<Bytes>,
        then: Pin<Box<Sleep>>,
    },
}

impl TestBody {
    fn full(body: Bytes, guard: InFlight) -> TestBody {
        TestBody {
            state: BodyState::Full(Some(body)),
            stats: Arc::clone(&guard.0),
            guard,
        }
    }
}

/// Counts and yields one data frame.
fn send(stats: &Stats, data: Bytes) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
    stats
        .bytes_sent
        .fetch_add(data.len() as u64, Ordering::SeqCst);
    Poll::Ready(Some(Ok(Frame::data(data))))
}

impl Body for TestBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        let abort = |what: &str| Poll::Ready(Some(Err(io::Error::other(what.to_owned()))));
        match &mut this.state {
            BodyState::Full(data) => {
                // The one frame is the last: the client may have it all next.
                this.guard.finish();
                match data.take() {
                    Some(data) if !data.is_empty() => send(&this.stats, data),
                    _ => Poll::Ready(None),
                }
            }
            BodyState::Chunks {
                rest,
                size,
                pause,
                wait,
            } => {
                if let Some(sleep) = wait {
                    std::task::ready!(sleep.as_mut().poll(cx));
                    *wait = None;
                }
                if rest.is_empty() {
                    this.guard.finish();
                    return Poll::Ready(None);
                }
                let chunk = rest.split_to((*size).min(rest.len()));
                if rest.is_empty() {
                    this.guard.finish();
                }
                if !pause.is_zero() && !rest.is_empty() {
                    *wait = Some(Box::pin(tokio::time::sleep(*pause)));
                }
                send(&this.stats, chunk)
            }
            BodyState::Stall { first, until } => match first.take() {
                Some(data) if !data.is_empty() => send(&this.stats, data),
                _ => {
                    std::task::ready!(until.as_mut().poll(cx));
                    abort("stall over")
                }
            },
            BodyState::Short { data, then } => match data.take() {
                Some(data) if !data.is_empty() => send(&this.stats, data),
                _ => {
                    std::task::ready!(then.as_mut().poll(cx));
                    abort("lying Content-Length")
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(&self.state, BodyState::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            BodyState::Full(Some(data)) => SizeHint::with_exact(data.len() as u64),
            BodyState::Full(None) => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    }
}
