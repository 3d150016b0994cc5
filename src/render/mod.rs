//! Pages that need JavaScript (`--render`, `[render]`): a new or changed HTML
//! page is loaded in headless Chromium and the legs read the DOM it built.
//!
//! The page is fetched as always first (robots.txt, politeness, a conditional
//! GET): an unchanged page never reaches the browser. The browser then loads
//! the response already fetched — its request for the page is answered from
//! it, not sent again — and every other request it makes is intercepted
//! (DevTools `Fetch` domain) and decided here:
//! - images, media and fonts are refused, as is any method but GET;
//! - a host other than the page's (and the job's allowed hosts) is refused:
//!   no analytics, no ads;
//! - robots.txt is obeyed (the crawl's own cache);
//! - the rest is fetched by legcrawl's fetcher (its proxy, credentials per
//!   origin, trusted roots), one request at a time per page, spaced by the
//!   job's delay.
//!
//! A page is done when it has loaded and no request of it has been open for
//! [`RenderSettings::idle`], or at [`RenderSettings::timeout`]. At most
//! [`RenderSettings::tabs`] pages render at once. The browser starts with the
//! first page to render and is killed with its process group when the last
//! [`Renderer`] of the run is dropped (see `browser`). Depends on
//! [`crate::config`] (the settings), [`crate::fetch`], [`crate::robots`],
//! [`crate::response`] and [`crate::request`].

pub mod browser;
mod cdp;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::{Mutex, Semaphore, mpsc};

use crate::config::CrawlConfig;
pub use crate::config::RenderSettings;
use crate::fetch::Fetcher;
use crate::request::Request;
use crate::response::Response;
use crate::robots::{RobotsCache, Verdict};
use browser::Browser;
use cdp::{Cdp, Event};

/// Why a page could not be rendered.
#[derive(Debug)]
pub enum RenderError {
    /// No browser to run: one line naming the package.
    Missing(String),
    /// The browser did not start, or went away.
    Browser(String),
    /// The browser refused a command.
    Protocol(String),
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RenderError::Missing(why) => write!(f, "--render needs Chromium: {why}"),
            RenderError::Browser(why) => write!(f, "the rendering browser failed: {why}"),
            RenderError::Protocol(why) => write!(f, "the rendering browser refused {why}"),
        }
    }
}

impl std::error::Error for RenderError {}

/// What rendering a page did.
#[derive(Debug, Default)]
pub struct Rendered {
    /// The DOM the page's scripts built, serialized.
    pub dom: String,
    /// Requests of the page's that legcrawl fetched for the browser.
    pub fetched: u64,
    /// Requests of the page's that were refused (type, host, method, robots.txt).
    pub blocked: u64,
    /// The page was still loading at the time limit.
    pub timed_out: bool,
}

/// A job's renderer: the browser (started on first use), its tabs, and the
/// rules above. Cheap to clone; the browser dies with the last clone.
#[derive(Clone)]
pub struct Renderer {
    inner: Arc<Inner>,
}

struct Inner {
    settings: RenderSettings,
    /// The job's allowed hosts: their requests are fetched besides those of
    /// the page's own host.
    allowed_hosts: Vec<String>,
    /// The job's delay between requests to a host.
    delay: Duration,
    program: PathBuf,
    /// The running browser, once started; cleared when it fails, so that the
    /// next page starts another.
    live: Mutex<Option<Arc<Live>>>,
    tabs: Semaphore,
}

/// A started browser and the connection to it. The connection goes first.
struct Live {
    cdp: Cdp,
    _browser: Browser,
}

/// What one page's render needs from its job.
struct Context<'a> {
    /// The job's fetcher.
    fetcher: &'a Fetcher,
    /// robots.txt answers (`None` when the job ignores robots.txt).
    robots: Option<&'a RobotsCache>,
    /// Hosts besides the page's whose requests are fetched.
    allowed_hosts: &'a [String],
    /// The job's delay between requests to a host.
    delay: Duration,
}

impl Renderer {
    /// The renderer `config` asks for (`--render`, `[render]`), or `None`;
    /// the browser must be on this machine (it starts with the first page).
    pub fn of(config: &CrawlConfig) -> Result<Option<Renderer>, RenderError> {
        let Some(settings) = &config.render else {
            return Ok(None);
        };
        let program = browser::find()?;
        let tabs = Semaphore::new(settings.tabs.max(1));
        Ok(Some(Renderer {
            inner: Arc::new(Inner {
                settings: settings.clone(),
                allowed_hosts: config.allowed_hosts.clone(),
                delay: config.delay.unwrap_or_default(),
                program,
                live: Mutex::new(None),
                tabs,
            }),
        }))
    }

    /// True when `response` is a page this job renders: an HTML 2xx answer
    /// from one of the settings' hosts (any, when they name none).
    pub fn wants(&self, response: &Response) -> bool {
        let hosts = &self.inner.settings.hosts;
        response.is_success()
            && response.is_html()
            && (hosts.is_empty()
                || response
                    .url
                    .host_str()
                    .is_some_and(|host| hosts.iter().any(|h| h.eq_ignore_ascii_case(host))))
    }

    /// Loads `page` in a tab and returns the DOM its scripts built; its
    /// requests go through `fetcher` and obey `robots`.
    pub async fn render(
        &self,
        page: &Response,
        fetcher: &Fetcher,
        robots: Option<&RobotsCache>,
    ) -> Result<Rendered, RenderError> {
        let job = &Context {
            fetcher,
            robots,
            allowed_hosts: &self.inner.allowed_hosts,
            delay: self.inner.delay,
        };
        let _tab = self
            .inner
            .tabs
            .acquire()
            .await
            .map_err(|_| RenderError::Browser("its tabs were closed".into()))?;
        let live = self.live().await?;
        let rendered = self.in_tab(&live, page, job).await;
        if let Err(RenderError::Browser(_)) = &rendered {
            // Gone or stuck: the next page starts a new one.
            let mut slot = self.inner.live.lock().await;
            if slot.as_ref().is_some_and(|l| Arc::ptr_eq(l, &live)) {
                *slot = None;
            }
        }
        rendered
    }

    /// The running browser, started now if there is none.
    async fn live(&self) -> Result<Arc<Live>, RenderError> {
        let mut slot = self.inner.live.lock().await;
        if let Some(live) = slot.as_ref() {
            return Ok(Arc::clone(live));
        }
        let program = self.inner.program.clone();
        let browser = tokio::task::spawn_blocking(move || Browser::launch(&program))
            .await
            .map_err(|e| RenderError::Browser(format!("its start panicked: {e}")))??;
        let cdp = Cdp::connect(&browser.socket).await?;
        let live = Arc::new(Live {
            cdp,
            _browser: browser,
        });
        *slot = Some(Arc::clone(&live));
        Ok(live)
    }

    /// Renders `page` in a new tab of `live`, closed after it.
    async fn in_tab(
        &self,
        live: &Live,
        page: &Response,
        job: &Context<'_>,
    ) -> Result<Rendered, RenderError> {
        let cdp = &live.cdp;
        let target = cdp
            .call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            .await?;
        let target = text(&target, "targetId")?;
        let attached = cdp
            .call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target, "flatten": true }),
            )
            .await;
        let rendered = match attached.and_then(|a| text(&a, "sessionId")) {
            Ok(session) => {
                let events = cdp.subscribe(&session);
                let rendered = self.load(cdp, &session, events, page, job).await;
                cdp.unsubscribe(&session);
                rendered
            }
            Err(error) => Err(error),
        };
        let _ = cdp
            .call(None, "Target.closeTarget", json!({ "targetId": target }))
            .await;
        rendered
    }

    /// Loads `page` in `session` and reads its DOM once it is done.
    async fn load(
        &self,
        cdp: &Cdp,
        session: &str,
        mut events: mpsc::UnboundedReceiver<Event>,
        page: &Response,
        job: &Context<'_>,
    ) -> Result<Rendered, RenderError> {
        let settings = &self.inner.settings;
        let at = Some(session);
        let every = json!({ "patterns": [{ "urlPattern": "*", "requestStage": "Request" }] });
        cdp.call(at, "Fetch.enable", every).await?;
        cdp.call(at, "Page.enable", json!({})).await?;
        let deadline = Instant::now() + settings.timeout;
        let navigate = cdp.call(at, "Page.navigate", json!({ "url": page.url.as_str() }));
        tokio::pin!(navigate);
        let mut navigated = false;
        let mut document_served = false;
        let mut loaded = false;
        let mut open = 0usize;
        let mut last = Instant::now();
        let mut rendered = Rendered::default();
        // One subresource at a time per page (the host sees one request of
        // it at a time, spaced by the delay).
        let gate = Semaphore::new(1);
        let mut work = futures_util::stream::FuturesUnordered::new();
        loop {
            let wake = if loaded && open == 0 {
                (last + settings.idle).min(deadline)
            } else {
                deadline
            };
            tokio::select! {
                answer = &mut navigate, if !navigated => {
                    navigated = true;
                    if let Some(error) = answer?.get("errorText").and_then(Value::as_str) {
                        return Err(RenderError::Protocol(format!("Page.navigate: {error}")));
                    }
                }
                event = events.recv() => {
                    let Some(event) = event else {
                        return Err(RenderError::Browser("it closed the page".into()));
                    };
                    last = Instant::now();
                    match event.method.as_str() {
                        "Page.loadEventFired" => loaded = true,
                        "Fetch.requestPaused" => {
                            let paused = Paused::of(&event.params);
                            if !document_served && paused.is_document_of(page) {
                                document_served = true;
                                fulfill(cdp, session, &paused.id, page).await?;
                            } else {
                                open += 1;
                                work.push(subresource(cdp, session, paused, page, job, &gate));
                            }
                        }
                        _ => {}
                    }
                }
                Some(outcome) = futures_util::StreamExt::next(&mut work) => {
                    open -= 1;
                    last = Instant::now();
                    match outcome? {
                        Outcome::Fetched => rendered.fetched += 1,
                        Outcome::Blocked => rendered.blocked += 1,
                    }
                }
                () = tokio::time::sleep_until(wake.into()) => {
                    if Instant::now() >= deadline {
                        rendered.timed_out = true;
                        break;
                    }
                    if loaded && open == 0 && last.elapsed() >= settings.idle {
                        break;
                    }
                }
            }
        }
        let dom = cdp
            .call(
                at,
                "Runtime.evaluate",
                json!({ "expression": "document.documentElement.outerHTML", "returnByValue": true }),
            )
            .await?;
        rendered.dom = dom
            .get("result")
            .and_then(|r| r.get("value"))
            .and_then(Value::as_str)
            .map(|html| format!("<!DOCTYPE html>\n{html}"))
            .ok_or_else(|| RenderError::Protocol("Runtime.evaluate: no DOM".into()))?;
        Ok(rendered)
    }
}

/// A request the browser paused for legcrawl to decide.
struct Paused {
    id: String,
    url: String,
    method: String,
    kind: String,
}

impl Paused {
    fn of(params: &Value) -> Paused {
        let field = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let request = params.get("request");
        Paused {
            id: field(params.get("requestId")),
            url: field(request.and_then(|r| r.get("url"))),
            method: field(request.and_then(|r| r.get("method"))),
            kind: field(params.get("resourceType")),
        }
    }

    /// The browser's request for the page itself (which it gets from the
    /// response already fetched).
    fn is_document_of(&self, page: &Response) -> bool {
        let mut page_url = page.url.clone();
        page_url.set_fragment(None);
        self.kind == "Document" && self.url == page_url.as_str()
    }
}

/// What became of a subresource.
enum Outcome {
    Fetched,
    Blocked,
}

/// Decides, fetches and answers one paused subresource request.
async fn subresource(
    cdp: &Cdp,
    session: &str,
    paused: Paused,
    page: &Response,
    job: &Context<'_>,
    gate: &Semaphore,
) -> Result<Outcome, RenderError> {
    let Some(url) = allowed(&paused, page, job).await else {
        refuse(cdp, session, &paused.id).await?;
        return Ok(Outcome::Blocked);
    };
    let _turn = gate
        .acquire()
        .await
        .map_err(|_| RenderError::Browser("the page closed".into()))?;
    let fetched = job.fetcher.fetch(&Request::get(url.as_str())).await;
    let outcome = match fetched {
        Ok(response) => {
            fulfill(cdp, session, &paused.id, &response).await?;
            Outcome::Fetched
        }
        Err(error) => {
            tracing::debug!(url = %url, %error, "a request of a rendered page failed");
            let failed = json!({ "requestId": paused.id, "errorReason": "Failed" });
            cdp.call(Some(session), "Fetch.failRequest", failed).await?;
            Outcome::Fetched
        }
    };
    if !job.delay.is_zero() {
        tokio::time::sleep(job.delay).await;
    }
    Ok(outcome)
}

/// The URL to fetch for `paused`, or `None` when it is refused: not a GET,
/// an image, media or a font, another host than the page's (unless the job
/// allows it), or disallowed by robots.txt.
async fn allowed(paused: &Paused, page: &Response, job: &Context<'_>) -> Option<url::Url> {
    if paused.method != "GET" || matches!(paused.kind.as_str(), "Image" | "Media" | "Font") {
        return None;
    }
    let url = url::Url::parse(&paused.url).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?;
    let same = page
        .url
        .host_str()
        .is_some_and(|h| h.eq_ignore_ascii_case(host));
    if !same
        && !job
            .allowed_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
    {
        return None;
    }
    match job.robots {
        Some(robots) => match robots.check(&url).await {
            Verdict::Allowed { .. } => Some(url),
            Verdict::Disallowed | Verdict::Unavailable { .. } => None,
        },
        None => Some(url),
    }
}

/// Refuses a paused request as the browser's own blocker would.
async fn refuse(cdp: &Cdp, session: &str, id: &str) -> Result<(), RenderError> {
    let params = json!({ "requestId": id, "errorReason": "BlockedByClient" });
    cdp.call(Some(session), "Fetch.failRequest", params).await?;
    Ok(())
}

/// Answers a paused request with `response` (its body is decoded, so the
/// encoding and length headers go).
async fn fulfill(
    cdp: &Cdp,
    session: &str,
    id: &str,
    response: &Response,
) -> Result<(), RenderError> {
    let headers: Vec<Value> = response
        .headers
        .iter()
        .filter(|(name, _)| {
            !matches!(
                name.as_str(),
                "content-encoding" | "content-length" | "transfer-encoding" | "connection"
            )
        })
        .map(|(name, value)| {
            json!({ "name": name.as_str(), "value": String::from_utf8_lossy(value.as_bytes()) })
        })
        .collect();
    let params = json!({
        "requestId": id,
        "responseCode": response.status,
        "responseHeaders": headers,
        "body": base64::engine::general_purpose::STANDARD.encode(&response.body),
    });
    cdp.call(Some(session), "Fetch.fulfillRequest", params)
        .await?;
    Ok(())
}

/// The string field `name` of a command's answer.
fn text(answer: &Value, name: &str) -> Result<String, RenderError> {
    answer
        .get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| RenderError::Protocol(format!("an answer without {name}")))
}
