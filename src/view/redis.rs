//! The answers of a crawl shared through Redis, from the read methods of
//! [`crate::shared`] (plain commands, and the seen-set script that writes
//! nothing), so they work while workers run.

use super::rows::{FrontierEntry, JobMore, JobView, RunMore, RunRow, SeenAnswer};
use super::{ItemPick, RunRef, ViewError, run_index};
use crate::fingerprint::{self, Fingerprint};
use crate::shared::views::stream_id;
use crate::shared::{Shared, SharedError};
use crate::store::PageRecord;

/// A crawl no worker made is most likely a typo, and one of another key
/// layout is not read: each one line, the asker's to fix.
pub(super) async fn check(shared: &Shared) -> Result<(), ViewError> {
    if !shared.exists().await? {
        let target = shared.target();
        // Keys of the crawl without its meta hash: a damaged crawl, not a typo.
        if let Some(error) = damaged(shared).await? {
            return Err(error.into());
        }
        return Err(ViewError::NoAnswer(format!(
            "no shared crawl named {:?} in Redis at {}",
            target.name,
            target.shown()
        )));
    }
    shared.check_schema().await.map_err(|error| match error {
        error @ SharedError::OldSchema { .. } => ViewError::NoAnswer(error.to_string()),
        error => error.into(),
    })
}

/// The error that names what the crawl lost ([`Shared::lost`]), if it lost
/// anything.
pub(super) async fn damaged(shared: &Shared) -> Result<Option<SharedError>, SharedError> {
    let lost = shared.lost().await?;
    if lost.is_empty() {
        return Ok(None);
    }
    let target = shared.target();
    Ok(Some(SharedError::Damaged {
        name: target.name.clone(),
        url: target.shown(),
        lost: lost.join(", "),
    }))
}

pub(super) async fn frontier_head(
    shared: &Shared,
    limit: usize,
) -> Result<Vec<FrontierEntry>, ViewError> {
    Ok(shared
        .frontier_head(limit)
        .await?
        .into_iter()
        .map(|entry| FrontierEntry {
            host: entry.host,
            place: entry.place,
            // The queues hold only requests not leased.
            leased: false,
            request: entry.request,
            seq: None,
        })
        .collect())
}

/// The items `pick` selects: every item of the stream, or those a worker
/// run committed (after its `items_after`, up to its `items_until`, by its
/// worker), or those after a run ended.
pub(super) async fn for_each_item<E>(
    shared: &Shared,
    pick: ItemPick,
    mut each: impl FnMut(&str) -> Result<bool, E>,
) -> Result<(), E>
where
    E: From<ViewError>,
{
    let (run, since) = match pick {
        ItemPick::All | ItemPick::SinceRun(RunRef::Number(0)) => (None, None),
        ItemPick::Run(run) => (Some(run), None),
        ItemPick::SinceRun(run) => (None, Some(run)),
    };
    let mut failed = None;
    let mut call = |text: &str| match each(text) {
        Ok(more) => more,
        Err(error) => {
            failed = Some(error);
            false
        }
    };
    let Some(pick) = run.or(since) else {
        shared
            .for_each_item(|_, item| call(item))
            .await
            .map_err(ViewError::from)?;
        return failed.map_or(Ok(()), Err);
    };
    let runs = runs(shared).await?;
    let place = format!("the shared crawl {:?}", shared.target().name);
    let row = &runs[run_index(&runs, pick, &place)?];
    let RunMore::Shared {
        worker,
        items_after: Some(after),
        items_until: Some(until),
        ..
    } = &row.more
    else {
        return Err(ViewError::NoAnswer(format!(
            "run {} of {place} was recorded before runs noted their items",
            row.id
        ))
        .into());
    };
    let (start, end, only) = match run {
        Some(_) => (after, stream_id(until), Some(worker.as_str())),
        None => (until, None, None),
    };
    shared
        .scan_items_from(&format!("({start}"), |entry| {
            if end.is_some_and(|end| stream_id(entry.id).is_none_or(|id| id > end)) {
                return false;
            }
            if only.is_some() && entry.worker != only {
                return true;
            }
            call(entry.item)
        })
        .await
        .map_err(ViewError::from)?;
    failed.map_or(Ok(()), Err)
}

pub(super) async fn seen(shared: &Shared, url: &str) -> Result<SeenAnswer, ViewError> {
    let fp = fingerprint::fingerprint(&crate::request::Request::get(url), &[]);
    let (seen, page) = shared.seen(&fp).await?;
    Ok(SeenAnswer {
        url: url.to_owned(),
        canonical: crate::canon::canonicalize_str(url).unwrap_or_else(|_| url.to_owned()),
        fingerprint: fingerprint::to_hex(&fp),
        exact: Some(seen),
        page,
        bloom: None,
    })
}

/// Up to `limit` page records (in no order), or with `due` those due now,
/// soonest first (the seeds are queued every cycle anyway).
pub(super) async fn pages(
    shared: &Shared,
    due: bool,
    limit: usize,
) -> Result<Vec<(Fingerprint, PageRecord)>, ViewError> {
    if !due {
        return Ok(shared.pages(limit).await?);
    }
    let now = crate::store::records::unix_now();
    let fps = shared.due(now, limit).await?;
    let records = shared.page_records(&fps).await?;
    Ok(fps
        .into_iter()
        .zip(records)
        .filter_map(|(fp, r)| Some((fp, r?)))
        .collect())
}

/// The workers' runs, numbered from 1 in the order they ended.
pub(super) async fn runs(shared: &Shared) -> Result<Vec<RunRow>, ViewError> {
    Ok(shared
        .runs()
        .await?
        .iter()
        .enumerate()
        .map(|(k, record)| RunRow::of_json(k as u64 + 1, record))
        .collect())
}

pub(super) async fn job(shared: &Shared, run: Option<RunRef>) -> Result<JobView, ViewError> {
    let place = format!("the shared crawl {:?}", shared.target().name);
    let Some(pick) = run else {
        let job = shared.current_job().await?.ok_or_else(|| {
            ViewError::NoAnswer(format!(
                "{place} has no job stored yet (a worker stores one when it starts)"
            ))
        })?;
        return Ok(job_view(job, String::new()));
    };
    let runs = runs(shared).await?;
    let row = &runs[run_index(&runs, pick, &place)?];
    let Some(version) = row.job else {
        return Err(ViewError::NoAnswer(format!(
            "run {} of {place} was recorded before jobs were stored",
            row.id
        )));
    };
    let job = shared
        .job(version)
        .await?
        .ok_or_else(|| SharedError::Corrupt {
            name: shared.target().name.clone(),
            what: format!(
                "run {} names job version {version}, which is not stored",
                row.id
            ),
        })?;
    let later: Vec<String> = match &row.more {
        RunMore::Shared { jobs, .. } => jobs
            .iter()
            .filter(|&&v| v != version)
            .map(u64::to_string)
            .collect(),
        RunMore::State { .. } => Vec::new(),
    };
    let note = match later.as_slice() {
        [] => format!(", which run {} began under", row.id),
        _ => format!(
            ", which run {} began under (it then took up version {})",
            row.id,
            later.join(", ")
        ),
    };
    Ok(job_view(job, note))
}

fn job_view(job: crate::shared::StoredJob, note: String) -> JobView {
    JobView {
        version: job.version,
        created_at: job.created_at,
        text: job.text,
        note: format!(" by worker {}{note}", job.worker),
        more: JobMore::Shared { worker: job.worker },
    }
}
