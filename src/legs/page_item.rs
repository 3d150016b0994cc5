//! [`PageItem`]: one item describing every fetched response.
//!
//! Decision: an item is emitted for **every** response the legs see, whatever its status
//! or type, so the sink holds a record of every fetch (drop the ones you do not want with
//! [`crate::legs::map_items`]) — except a sitemap fetched as one (its request marked
//! [`super::SITEMAP_META`]: named by robots.txt or by a sitemap index): like robots.txt,
//! it is a control file, kept in the WARC, never among the items. Fields:
//! - `url`: the response URL (the fetcher follows no redirects; see `redirects`);
//! - `status`: the HTTP status code;
//! - `title`: the text of the first `<title>` outside `svg`/`math`, entities decoded,
//!   ASCII whitespace collapsed and trimmed, cut at [`MAX_TITLE_BYTES`]; `null` for a
//!   non-HTML response or a page without a title (`""` for an empty one);
//! - `fetched_at`: when the headers arrived, RFC 3339 UTC with milliseconds
//!   (`2021-01-01T00:00:00.000Z`);
//! - `depth`, `referer` (or `null`): from the request;
//! - `content_type`: the media type without parameters, or `null`;
//! - `bytes`: the body length after content decoding;
//! - `truncated`: present (and `true`) only when the body was cut at the size limit;
//! - `redirects`: present only after redirects: the URLs that redirected here, oldest
//!   first (the engine follows redirects as new requests carrying this chain).
//!
//! The title is found by a tokenizer scan that stops at `</title>`, so it costs little.
//! Depends on `html`, [`crate::item`], [`crate::response`] and [`crate::clock`].

use std::ops::ControlFlow;

use serde_json::Value;

use super::html::{self, StartTag, Visitor};
use super::{Leg, Output};
use crate::clock::rfc3339;
use crate::item::Item;
use crate::response::Response;

/// Longest title kept, in bytes (cut at a character boundary).
pub const MAX_TITLE_BYTES: usize = 1024;

/// Emits one item per response (see the module doc for its fields).
#[derive(Debug, Clone, Copy, Default)]
pub struct PageItem;

impl PageItem {
    /// The page-item leg.
    pub fn new() -> PageItem {
        PageItem
    }
}

impl Leg for PageItem {
    /// Requests pass through unchanged.
    fn rewrites_requests(&self) -> bool {
        false
    }

    fn process_response(&self, response: &Response, out: &mut Output) {
        if response.request.meta.contains_key(super::SITEMAP_META) {
            return;
        }
        let mut item = Item::new();
        item.insert("url".into(), response.url.as_str().into());
        item.insert("status".into(), response.status.into());
        let title = if response.is_html() {
            title(response)
        } else {
            None
        };
        item.insert("title".into(), title.map_or(Value::Null, Value::String));
        item.insert("fetched_at".into(), rfc3339(response.fetched_at).into());
        item.insert("depth".into(), response.request.depth.into());
        item.insert(
            "referer".into(),
            response
                .request
                .referer
                .clone()
                .map_or(Value::Null, Value::String),
        );
        item.insert(
            "content_type".into(),
            response.media_type().map_or(Value::Null, Value::String),
        );
        item.insert("bytes".into(), response.body.len().into());
        if !response.request.redirects.is_empty() {
            item.insert(
                "redirects".into(),
                response.request.redirects.clone().into(),
            );
        }
        if response.truncated {
            item.insert("truncated".into(), true.into());
        }
        out.items.push(item);
    }
}

/// The collapsed text of the page's first title, if it has one.
fn title(response: &Response) -> Option<String> {
    let mut finder = TitleFinder {
        state: TitleState::Before,
        text: String::new(),
    };
    html::scan(&response.text(), &mut finder);
    if matches!(finder.state, TitleState::Before) {
        return None;
    }
    let mut title = String::with_capacity(finder.text.len());
    for word in finder.text.split_ascii_whitespace() {
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(word);
        if title.len() >= MAX_TITLE_BYTES {
            let mut cut = MAX_TITLE_BYTES;
            while !title.is_char_boundary(cut) {
                cut -= 1;
            }
            title.truncate(cut);
            break;
        }
    }
    Some(title)
}

enum TitleState {
    Before,
    /// Inside the title (or after it, if the document ended inside it).
    Inside,
}

struct TitleFinder {
    state: TitleState,
    text: String,
}

impl Visitor for TitleFinder {
    fn wants(&self, name: &[u8]) -> bool {
        name == b"title"
    }

    fn start_tag(&mut self, tag: &StartTag<'_>) -> ControlFlow<()> {
        if !tag.foreign && matches!(self.state, TitleState::Before) {
            self.state = TitleState::Inside;
        }
        ControlFlow::Continue(())
    }

    fn end_tag(&mut self, name: &str) -> ControlFlow<()> {
        match (&self.state, name) {
            (TitleState::Inside, "title") => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        }
    }

    fn text(&mut self, text: &str) -> ControlFlow<()> {
        if matches!(self.state, TitleState::Inside) {
            // Raw, uncollapsed text; stop collecting once well past the limit.
            self.text.push_str(text);
            if self.text.len() > 4 * MAX_TITLE_BYTES {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
#[path = "page_item_tests.rs"]
mod tests;
