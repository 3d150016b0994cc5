//! A site that changes between runs, for the incremental re-crawl tests.
//!
//! [`ChangingSite::new`] builds `n` pages `/p/{i}.html`; the hub `/` (the seed)
//! links to every live page. Between runs a test edits pages (a new revision,
//! new body), adds pages and removes them (answering 404 or 410). The state sits
//! behind a `Mutex` shared with the handler ([`ChangingSite::handler`]), so edits
//! take effect at once for a running server.
//!
//! Validators depend on the page number: `i % 4 == 0` sends an `ETag`,
//! `i % 4 == 2` a `Last-Modified`, odd pages none (they can only be found
//! unchanged by their content hash). The hub sends an `ETag` that changes with
//! its link set. A request whose `If-None-Match` equals the current `ETag`, or
//! whose `If-Modified-Since` equals the current `Last-Modified`, gets an empty
//! 304. The site counts 304s, full answers, and conditional requests; per-path
//! hits and body bytes are counted by the [`TestServer`] it runs on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::server::{Handler, TestRequest, TestResponse, TestServer, handler};

/// Filler that brings page bodies to about 2 KB.
const FILLER: &str = "Incremental crawls fetch what changed and skip what did not. ";
/// Filler repetitions per page body.
const FILLER_TIMES: usize = 32;

/// What a removed page answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// `404 Not Found` (gone after two in a row).
    NotFound,
    /// `410 Gone` (gone at once).
    Gone,
}

/// Which validators page `i` is served with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validators {
    /// `ETag` only.
    ETag,
    /// `Last-Modified` only.
    LastModified,
    /// Neither.
    None,
}

/// What a page is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Page {
    Live { revision: u32 },
    Removed(Removal),
}

#[derive(Default)]
struct Shared {
    pages: BTreeMap<usize, Page>,
    /// Bumped when the hub's link set changes.
    hub_generation: u32,
    /// Wait before each answer.
    delay: Option<Duration>,
    /// When false, no page (nor the hub) sends validators.
    validators: bool,
    not_modified: u64,
    full: u64,
    conditional: u64,
}

/// A site whose pages can be edited, added and removed while it is served.
#[derive(Clone)]
pub struct ChangingSite {
    shared: Arc<Mutex<Shared>>,
}

/// The validators page `i` is served with (when validators are on).
pub fn validators_of(i: usize) -> Validators {
    match i % 4 {
        0 => Validators::ETag,
        2 => Validators::LastModified,
        _ => Validators::None,
    }
}

/// The path of page `i`.
pub fn page_path(i: usize) -> String {
    format!("/p/{i}.html")
}

/// The body of page `i` at `revision`.
pub fn page_body(i: usize, revision: u32) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><title>Page {i} r{revision}</title></head>\
         <body><h1>Page {i}</h1><p>revision {revision}</p><p>{}</p></body></html>\n",
        FILLER.repeat(FILLER_TIMES)
    )
}

/// An HTTP date for `revision` (day `revision` of January 2024, weekday right).
fn http_date(revision: u32) -> String {
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    let day = (revision % 28) + 1;
    format!(
        "{}, {day:02} Jan 2024 00:00:00 GMT",
        DAYS[(day as usize - 1) % 7]
    )
}

impl ChangingSite {
    /// `n` live pages at revision 1, validators on.
    pub fn new(n: usize) -> ChangingSite {
        let pages = (0..n).map(|i| (i, Page::Live { revision: 1 })).collect();
        ChangingSite {
            shared: Arc::new(Mutex::new(Shared {
                pages,
                validators: true,
                ..Shared::default()
            })),
        }
    }

    /// Starts a [`TestServer`] serving this site.
    pub fn serve(&self) -> TestServer {
        TestServer::start(self.handler())
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().expect("changing site lock")
    }

    /// The handler answering for the site.
    pub fn handler(&self) -> Handler {
        let site = self.clone();
        handler(move |req| {
            let (response, delay) = site.answer(req);
            match delay {
                Some(delay) => response.delay(delay),
                None => response,
            }
        })
    }

    /// Every request waits `delay` before its answer from now on (`None`: no wait).
    pub fn set_delay(&self, delay: Option<Duration>) {
        self.lock().delay = delay;
    }

    /// Turns every validator (page and hub) on or off.
    pub fn set_validators(&self, on: bool) {
        self.lock().validators = on;
    }

    /// A new revision of page `i` (it must be live).
    pub fn edit(&self, i: usize) {
        let mut shared = self.lock();
        match shared.pages.get_mut(&i) {
            Some(Page::Live { revision }) => *revision += 1,
            other => panic!("edit of page {i}, which is {other:?}"),
        }
    }

    /// Adds page `i` (revision 1), linked from the hub.
    pub fn add(&self, i: usize) {
        let mut shared = self.lock();
        let previous = shared.pages.insert(i, Page::Live { revision: 1 });
        assert!(previous.is_none(), "page {i} already exists");
        shared.hub_generation += 1;
    }

    /// Removes page `i`: unlinked from the hub, answering `how`.
    pub fn remove(&self, i: usize, how: Removal) {
        let mut shared = self.lock();
        shared.pages.insert(i, Page::Removed(how));
        shared.hub_generation += 1;
    }

    /// Puts removed page `i` back as it was first (revision 1), linked again.
    pub fn restore(&self, i: usize) {
        let mut shared = self.lock();
        let previous = shared.pages.insert(i, Page::Live { revision: 1 });
        assert!(
            matches!(previous, Some(Page::Removed(_))),
            "restore of page {i}, which is {previous:?}"
        );
        shared.hub_generation += 1;
    }

    /// The live page numbers.
    pub fn live(&self) -> Vec<usize> {
        self.lock()
            .pages
            .iter()
            .filter(|(_, page)| matches!(page, Page::Live { .. }))
            .map(|(i, _)| *i)
            .collect()
    }

    /// The current revision of page `i`, if live.
    pub fn revision(&self, i: usize) -> Option<u32> {
        match self.lock().pages.get(&i) {
            Some(Page::Live { revision }) => Some(*revision),
            _ => None,
        }
    }

    /// 304 answers so far.
    pub fn not_modified(&self) -> u64 {
        self.lock().not_modified
    }

    /// Answers with a body (200, 404, 410) so far.
    pub fn full(&self) -> u64 {
        self.lock().full
    }

    /// Requests that carried `If-None-Match` or `If-Modified-Since` so far.
    pub fn conditional(&self) -> u64 {
        self.lock().conditional
    }

    /// The body the hub serves now.
    pub fn hub_body(&self) -> String {
        let shared = self.lock();
        hub_body(&shared)
    }

    fn answer(&self, req: &TestRequest) -> (TestResponse, Option<Duration>) {
        let mut shared = self.lock();
        let delay = shared.delay;
        let inm = req.header("if-none-match").map(str::to_owned);
        let ims = req.header("if-modified-since").map(str::to_owned);
        if inm.is_some() || ims.is_some() {
            shared.conditional += 1;
        }
        let path = req.path();
        let (body, etag, last_modified) = if path == "/" {
            let etag = format!("\"hub-{}\"", shared.hub_generation);
            (hub_body(&shared), Some(etag), None)
        } else {
            let Some(i) = path
                .strip_prefix("/p/")
                .and_then(|p| p.strip_suffix(".html"))
                .and_then(|n| n.parse::<usize>().ok())
            else {
                shared.full += 1;
                return (TestResponse::not_found(), delay);
            };
            let revision = match shared.pages.get(&i) {
                Some(Page::Live { revision }) => *revision,
                Some(Page::Removed(Removal::Gone)) => {
                    shared.full += 1;
                    let gone = TestResponse {
                        body: "gone".into(),
                        ..TestResponse::status(410)
                    };
                    return (gone, delay);
                }
                Some(Page::Removed(Removal::NotFound)) | None => {
                    shared.full += 1;
                    return (TestResponse::not_found(), delay);
                }
            };
            let (etag, lm) = match validators_of(i) {
                Validators::ETag => (Some(format!("\"p{i}-r{revision}\"")), None),
                Validators::LastModified => (None, Some(http_date(revision))),
                Validators::None => (None, None),
            };
            (page_body(i, revision), etag, lm)
        };
        let (etag, last_modified) = if shared.validators {
            (etag, last_modified)
        } else {
            (None, None)
        };
        let matches = |sent: &Option<String>, have: &Option<String>| {
            sent.is_some() && have.is_some() && sent == have
        };
        if matches(&inm, &etag) || matches(&ims, &last_modified) {
            shared.not_modified += 1;
            return (TestResponse::status(304), delay);
        }
        shared.full += 1;
        let mut response = TestResponse::html(body);
        if let Some(etag) = etag {
            response = response.header("ETag", &etag);
        }
        if let Some(date) = last_modified {
            response = response.header("Last-Modified", &date);
        }
        (response, delay)
    }
}

fn hub_body(shared: &Shared) -> String {
    let mut body =
        String::from("<!DOCTYPE html>\n<html><head><title>Hub</title></head><body><h1>Hub</h1>\n");
    for (i, page) in &shared.pages {
        if matches!(page, Page::Live { .. }) {
            body.push_str(&format!("<a href=\"{}\">page {i}</a>\n", page_path(*i)));
        }
    }
    body.push_str("</body></html>\n");
    body
}
