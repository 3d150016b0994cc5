//! The answers of a state directory: its database opened by this process,
//! or for the summary the `status.json` a running crawl publishes. Depends
//! on the store's read methods and [`crate::status`].

use std::ops::Range;
use std::path::Path;

use super::rows::{FrontierEntry, JobMore, JobView, RunRow, SeenAnswer, Summary};
use super::{ItemPick, RunRef, ViewError, run_index};
use crate::fingerprint::Fingerprint;
use crate::store::records::unix_now;
use crate::store::{Each, PageRecord, State, StoreError};

/// The summary a running crawl published (`status.json`), while it holds
/// the state; the busy error when it published none lately.
pub(super) fn live_summary(dir: &Path) -> Result<Summary, ViewError> {
    let live = crate::status::read_live(dir).ok_or_else(|| StoreError::Busy {
        path: dir.to_owned(),
    })?;
    Ok(Summary::of_state(live.summary.clone(), Some(live)))
}

pub(super) fn frontier_head(state: &State, limit: usize) -> Result<Vec<FrontierEntry>, ViewError> {
    let mut head: Vec<FrontierEntry> = Vec::new();
    for entry in state.frontier_head(limit)? {
        let place = match head.last() {
            Some(last) if last.host == entry.host => last.place + 1,
            _ => 1,
        };
        head.push(FrontierEntry {
            host: entry.host,
            place,
            leased: entry.leased,
            request: entry.request,
            seq: Some(entry.seq),
        });
    }
    Ok(head)
}

pub(super) fn for_each_item<E>(
    state: &State,
    pick: ItemPick,
    mut each: impl FnMut(&str) -> Result<bool, E>,
) -> Result<(), E>
where
    E: From<ViewError> + From<StoreError>,
{
    let range = item_range(state, pick)?;
    state.deliver(&mut Each::new(range.start, |seq, text| {
        if seq >= range.end {
            return Ok(false);
        }
        each(text)
    }))
}

/// The item sequence numbers `pick` selects. Items are numbered one by one
/// as they are stored, and each run record notes the count at its start
/// (`first_item`): run N's items are those up to run N+1's first.
fn item_range(state: &State, pick: ItemPick) -> Result<Range<u64>, ViewError> {
    let end = state.items_len();
    let (wanted, since) = match pick {
        ItemPick::Run(run) => (run, false),
        ItemPick::All | ItemPick::SinceRun(RunRef::Number(0)) => return Ok(0..end),
        ItemPick::SinceRun(run) => (run, true),
    };
    let runs = runs(state)?;
    let at = run_index(&runs, wanted, &state.dir().display().to_string())?;
    let next_start = match runs.get(at + 1) {
        Some(next) => first_item(next)?,
        None => end,
    };
    if since {
        return Ok(next_start..end);
    }
    Ok(first_item(&runs[at])?..next_start)
}

/// Where `run`'s items start; a one-line answer for runs recorded without it.
fn first_item(run: &RunRow) -> Result<u64, ViewError> {
    match run.more {
        super::rows::RunMore::State {
            first_item: Some(first),
            ..
        } => Ok(first),
        _ => Err(ViewError::NoAnswer(format!(
            "run {} was recorded by an older legcrawl that did not note where its items start; \
             --run and --since-run work for the runs recorded since",
            run.id
        ))),
    }
}

pub(super) fn seen(state: &State, url: &str) -> Result<SeenAnswer, ViewError> {
    let answer = state.seen_answer(url, &[])?;
    let fp = crate::fingerprint::fingerprint(&crate::request::Request::get(url), &[]);
    Ok(SeenAnswer {
        page: state.page(&fp)?,
        url: answer.url,
        canonical: answer.canonical,
        fingerprint: answer.fingerprint,
        exact: answer.exact,
        bloom: Some(answer.bloom),
    })
}

/// All page records (in the order first recorded), or with `due` the
/// seeds' and those due now (soonest first).
pub(super) fn pages(
    state: &State,
    due: bool,
    limit: usize,
) -> Result<Vec<(Fingerprint, PageRecord)>, ViewError> {
    let mut pages = Vec::new();
    if !due {
        state.for_each_page(|fp, record| {
            pages.push((fp, record.clone()));
            pages.len() < limit
        })?;
        return Ok(pages);
    }
    let seeds = state.seed_fingerprints(&[])?;
    for &fp in &seeds {
        if let Some(record) = state.page(&fp)? {
            pages.push((fp, record));
        }
    }
    state.for_each_due(unix_now(), |fp, record| {
        if !seeds.contains(&fp) && !record.gone {
            pages.push((fp, record));
        }
        pages.len() < limit
    })?;
    pages.truncate(limit);
    Ok(pages)
}

pub(super) fn runs(state: &State) -> Result<Vec<RunRow>, ViewError> {
    Ok(state.runs()?.iter().map(RunRow::of_record).collect())
}

pub(super) fn job(state: &State, run: Option<RunRef>) -> Result<JobView, ViewError> {
    let dir = state.dir().display().to_string();
    let record = match run {
        None => state.latest_job()?.ok_or_else(|| {
            ViewError::NoAnswer(format!(
                "{dir}: no job stored yet (a crawl stores one when it begins)"
            ))
        })?,
        Some(run) => {
            let runs = runs(state)?;
            let row = &runs[run_index(&runs, run, &dir)?];
            let Some(version) = row.job else {
                return Err(ViewError::NoAnswer(format!(
                    "{dir}: run {} was recorded before jobs were stored",
                    row.id
                )));
            };
            state.job(version)?.ok_or_else(|| StoreError::Corrupt {
                path: state.dir().to_owned(),
                what: format!("run {}", row.id),
                reason: format!("it names job version {version}, which is not stored"),
            })?
        }
    };
    Ok(JobView {
        version: record.version,
        created_at: record.created_at,
        text: record.text,
        note: format!(" with run {}", record.first_run),
        more: JobMore::State {
            first_run: record.first_run,
        },
    })
}
