//! [`PageItem`]: one item describing every fetched response.
//!
//! Decision: an item is emitted for **every** response the legs see, whatever its status
//! or type, so the sink holds a record of every fetch (drop the ones you do not want with
//! [`crate::legs::map_items`]). Fields:
//! - `url`: the final URL (after redirects the fetcher followed);
//! - `status`: the HTTP status code;
//! - `title`: the text of the first `<title>` outside `svg`/`math`, entities decoded,
//!   ASCII whitespace collapsed and trimmed, cut at [`MAX_TITLE_BYTES`]; `null` for a
//!   non-HTML response or a page without a title (`""` for an empty one);
//! - `fetched_at`: when the headers arrived, RFC 3339 UTC with milliseconds
//!   (`2021-01-01T00:00:00.000Z`);
//! - `depth`, `referer` (or `null`): from the request;
//! - `content_type`: the media type without parameters, or `null`;
//! - `bytes`: the body length after content decoding;
//! - `truncated`: present (and `true`) only when the body was cut at the size limit.
//!
//! The title is found by a tokenizer scan that stops at `</title>`, so it costs little.

use std::ops::ControlFlow;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::html::{self, StartTag, Visitor};
use super::{Leg, Output};
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
    fn process_response(&self, response: &Response, out: &mut Output) {
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

/// `time` as RFC 3339 UTC with milliseconds, e.g. `2021-01-01T00:00:00.000Z`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let millis: i128 = match time.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_millis() as i128,
        Err(before) => -(before.duration().as_millis() as i128),
    };
    let (secs, ms) = (millis.div_euclid(1000), millis.rem_euclid(1000));
    let (days, secs_of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60
    )
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01.
///
/// Works in 400-year eras (146,097 days each) counted from 0000-03-01, so that the leap
/// day is the last day of each shifted year: the day of the era gives the year of the
/// era, the day of that March-based year gives the month by the 153-days-per-5-months
/// rule, and January and February move to the next calendar year.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    const DAYS_PER_ERA: i64 = 146_097;
    // 1970-01-01 is day 719,468 counted from 0000-03-01.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(DAYS_PER_ERA);
    let day_of_era = shifted.rem_euclid(DAYS_PER_ERA);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // 0 = March ... 11 = February
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

#[cfg(test)]
#[path = "page_item_tests.rs"]
mod tests;
