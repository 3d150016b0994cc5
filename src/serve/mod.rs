//! `legcrawl serve`: a read-only web page and Prometheus `/metrics` for a crawl
//! state, beside a running crawl or on a stopped one.
//!
//! # Layout
//! - [`source`]: asks a [`crate::view::CrawlView`] what the crawl shows now
//!   (a state directory's published snapshot, or a shared crawl in Redis);
//! - [`api`]: the JSON endpoints the page polls;
//! - [`metrics`]: `/metrics` in the Prometheus text format;
//! - [`page`]: the HTML page (a compiled maud template) and its embedded
//!   script and style sheet;
//! - this module: the axum router, the token check, response headers, and
//!   [`run`] with an injected shutdown (as in mini-redis).
//!
//! Only GET and HEAD are routed (anything else is 405); nothing served changes
//! anything. With a token every request but the static assets needs
//! `Authorization: Bearer T` or `?token=T`, compared in constant time.
//! Depends on [`crate::view`] and the snapshot records of
//! [`crate::status::snapshot`].

pub mod api;
pub mod metrics;
pub mod page;
pub mod source;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use subtle::ConstantTimeEq;

use source::Source;

/// What the handlers share.
#[derive(Debug)]
pub struct App {
    /// Where the snapshot is read.
    pub source: Source,
    /// The token every request must carry, when one was given.
    token: Option<String>,
    /// The crawl as the page names it (its directory, or its server and name).
    shown: String,
}

impl App {
    /// The app for the data directory `dir` (its published snapshot), with
    /// an optional token.
    pub fn new(dir: &std::path::Path, token: Option<String>) -> App {
        let view = crate::view::CrawlView::Published(dir.to_owned());
        App::of(view, dir.display().to_string(), token)
    }

    /// The app that shows `view`, named `shown`, with an optional token.
    pub fn of(view: crate::view::CrawlView, shown: String, token: Option<String>) -> App {
        App {
            source: Source::new(view),
            token,
            shown,
        }
    }
}

/// The router of every endpoint.
pub fn router(app: Arc<App>) -> Router {
    let guarded = Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics_text))
        .route("/api/overview", get(api::overview))
        .route("/api/hosts", get(api::hosts))
        .route("/api/runs", get(api::runs))
        .route("/api/items", get(api::items))
        .route("/api/frontier", get(api::frontier))
        .route("/api/errors", get(api::errors))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            require_token,
        ));
    Router::new()
        .route("/assets/app.js", get(script))
        .route("/assets/app.css", get(style))
        .merge(guarded)
        .layer(middleware::map_response(headers))
        .with_state(app)
}

/// Serves on `listener` until `shutdown` resolves.
pub async fn run(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn index(State(app): State<Arc<App>>) -> Html<String> {
    Html(page::render(&app.source.view().await, &app.shown).into_string())
}

async fn metrics_text(State(app): State<Arc<App>>) -> Response {
    let text = metrics::render(&app.source.view().await);
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response()
}

async fn script() -> Response {
    let kind = "text/javascript; charset=utf-8";
    ([(header::CONTENT_TYPE, kind)], page::APP_JS).into_response()
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        page::APP_CSS,
    )
        .into_response()
}

/// 401 unless the request carries the token (when there is one).
async fn require_token(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let Some(token) = app.token.as_deref() else {
        return next.run(request).await;
    };
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let query = request.uri().query().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.into_owned())
    });
    let matches = |given: &str| bool::from(given.as_bytes().ct_eq(token.as_bytes()));
    if bearer.is_some_and(matches) || query.as_deref().is_some_and(matches) {
        return next.run(request).await;
    }
    let mut response = (StatusCode::UNAUTHORIZED, "a token is required\n").into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Headers on every answer: nothing cached, nothing sniffed, no script but
/// our own, no referrer (a `?token=` stays on this page).
async fn headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    let set = [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
    ];
    for (name, value) in set {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}
