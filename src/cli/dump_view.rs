//! The views `dump` offers, and the shapes it prints that more than one view
//! uses: queued requests, page rows and the URL check of `dump seen`.

use std::io::Write;

use legcrawl::clock::rfc3339_secs;
use legcrawl::fingerprint::{self, Fingerprint};
use legcrawl::store::PageRecord;

use super::BadInput;
use super::export::ItemsArgs;
use super::stderr::say;

/// A view of `dump` (also what a dump asks a running crawl for, see
/// [`super::beside`]).
#[derive(Debug, Clone, clap::Subcommand, serde::Serialize, serde::Deserialize)]
pub(super) enum View {
    /// Counts, Bloom filter fill and estimated false-positive rate (default).
    Summary,
    /// The head of the queue, in lease order per host.
    Frontier,
    /// Stored items as JSON lines or CSV: all, one run's, or those after a run.
    Items(ItemsArgs),
    /// What the seen set says about a URL.
    Seen {
        /// The URL to look up.
        url: String,
    },
    /// Page records: status, validators, fetch and change counts, version, when due.
    Pages {
        /// Only what the next run will fetch again: the seeds and the pages due now.
        #[arg(long)]
        due: bool,
    },
    /// One line per run.
    Runs,
    /// The stored job as a crawl file `crawl --config` accepts: the newest
    /// version, or the one run N ran under.
    Job(super::dump_job::JobArgs),
    /// Requests not fetched because robots.txt disallows them.
    Blocked,
}

/// Says on stderr that the frontier holds nothing (stdout stays a list of
/// requests, empty here), so that an empty answer is not taken for a failure.
pub(super) fn say_empty_frontier() {
    say!("the frontier is empty: no request is queued");
}

/// One queued request: `json` when given, else a line of the table (its
/// place in its host's queue first).
pub(super) fn print_queued(
    out: &mut impl Write,
    json: Option<String>,
    place: u64,
    r: &legcrawl::request::Request,
) -> anyhow::Result<()> {
    match json {
        Some(json) => writeln!(out, "{json}")?,
        None => writeln!(
            out,
            "{place:>8}  p={:<4} d={:<3} {}",
            r.priority, r.depth, r.url
        )?,
    }
    Ok(())
}

/// `dump seen` takes an http(s) URL.
pub(super) fn check_seen_url(url: &str) -> anyhow::Result<()> {
    match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
        Ok(u) => {
            return Err(BadInput(format!(
                "dump seen: {url:?} is not an http or https URL (scheme {:?})",
                u.scheme()
            ))
            .into());
        }
        Err(e) => {
            return Err(BadInput(format!("dump seen: {url:?} is not a URL: {e}")).into());
        }
    }
    Ok(())
}

/// Page records as a table, or one JSON object per line.
pub(super) fn print_page_rows(
    out: &mut impl Write,
    pages: Vec<(Fingerprint, PageRecord)>,
    json: bool,
) -> anyhow::Result<()> {
    if !json {
        writeln!(
            out,
            "{:>6}  {:>7}  {:>7}  {:>4}  {:<4}  {:>7}  {:<20}  {:<20}  {:<9}  url",
            "status", "fetches", "changes", "ver", "val", "rate/d", "last fetched", "due", "why"
        )?;
    }
    for (fp, page) in pages {
        if json {
            let mut value = serde_json::to_value(&page)?;
            if let Some(map) = value.as_object_mut() {
                map.insert("fingerprint".into(), fingerprint::to_hex(&fp).into());
                if page.fetches > 0 {
                    map.insert(
                        "change_rate".into(),
                        legcrawl::revisit::rate::changes_per_day(&page.evidence).into(),
                    );
                }
                map.insert("due_why".into(), legcrawl::revisit::explain(&page).into());
            }
            writeln!(out, "{value}")?;
            continue;
        }
        let validators = match (&page.etag, &page.last_modified) {
            (Some(_), Some(_)) => "E+LM",
            (Some(_), None) => "E",
            (None, Some(_)) => "LM",
            (None, None) => "-",
        };
        let due = match page.next_due {
            _ if page.gone => "gone".to_owned(),
            None => "never".to_owned(),
            Some(at) => rfc3339_secs(at),
        };
        let rate = if page.fetches > 0 {
            legcrawl::revisit::rate_text(legcrawl::revisit::rate::changes_per_day(&page.evidence))
        } else {
            "-".to_owned()
        };
        writeln!(
            out,
            "{:>6}  {:>7}  {:>7}  {:>4}  {:<4}  {:>7}  {:<20}  {:<20}  {:<9}  {}",
            page.status,
            page.fetches,
            page.changes,
            page.version,
            validators,
            rate,
            rfc3339_secs(page.last_fetched),
            due,
            legcrawl::revisit::why_word(&page),
            page.url
        )?;
    }
    Ok(())
}
