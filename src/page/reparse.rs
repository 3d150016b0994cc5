//! `legcrawl reparse`'s page: the legs run over a page's stored response,
//! read back from the crawl's WARC files where its page record says
//! ([`crate::store::WarcAt`]), instead of a fetch. The result is completed as
//! a fetched page's is, so the items, the deletion records of the items the
//! legs no longer make and the links they find go the same way
//! (`record::page_write`, `accept`).
//!
//! The response is what the fetch received: its headers, and its body decoded
//! from its `Content-Encoding` by the fetcher's own decoders, within the
//! job's body limit. A page whose record cannot be read back (its file moved
//! away or damaged) is left as it was, named in the log. Depends on
//! [`crate::warc`]'s reader, [`crate::fetch`]'s decoders and the legs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use super::parts::Parts;
use super::result::Reparse;
use super::{PageResult, RetryPolicy};
use crate::fetch::{Encoding, decode_stored};
use crate::legs::Leg;
use crate::request::Request;
use crate::response::Response;
use crate::store::PageRecord;

/// Where a reparse finds the stored responses: the crawl's WARC files by id.
#[derive(Debug, Default)]
pub struct StoredResponses {
    /// The files, by their id in the state.
    pub files: HashMap<u32, PathBuf>,
    /// The job's body limit (`--max-body`).
    pub max_body: usize,
}

/// Runs `legs` over the stored response of `prior` (`request`'s page
/// record); see the module doc.
pub(crate) async fn reparse(
    stored: &StoredResponses,
    legs: &Arc<dyn Leg>,
    request: &Request,
    retry: RetryPolicy,
    prior: Option<PageRecord>,
    parts: Option<&Parts>,
) -> PageResult {
    let read = match &prior {
        Some(record) => read_back(stored, request, record).await,
        None => Err("no page record".to_owned()),
    };
    let mut result = PageResult {
        prior,
        ..PageResult::default()
    };
    match read {
        Ok(response) => {
            super::extract(legs, request, &response, retry, parts, &mut result);
            result.reparse = Some(Reparse::Done);
        }
        Err(reason) => {
            tracing::warn!(url = %request.url, %reason, "the page's stored response cannot be read back; it is left as it was");
            result.counters.push(("reparse/unreadable", 1));
            result.reparse = Some(Reparse::Unreadable);
        }
    }
    result
}

/// The response `record` keeps in the WARC files, as the legs saw it.
async fn read_back(
    stored: &StoredResponses,
    request: &Request,
    record: &PageRecord,
) -> Result<Response, String> {
    let at = record.response.ok_or("no stored response")?;
    let path = stored
        .files
        .get(&at.file)
        .ok_or_else(|| format!("WARC file {} is not known to this state", at.file))?;
    let (path, max_body) = (path.clone(), stored.max_body);
    // File reading and inflating off the runtime's threads.
    let kept =
        tokio::task::spawn_blocking(move || crate::warc::response_at(&path, at.offset, max_body))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
    let encoding = Encoding::from_header(kept.headers.get(http::header::CONTENT_ENCODING))?;
    let (body, cut) = decode_stored(&kept.body, encoding, stored.max_body)
        .await
        .map_err(|e| format!("its body does not decode: {e}"))?;
    let url = url::Url::parse(&kept.url).map_err(|e| format!("{}: {e}", kept.url))?;
    Ok(Response {
        request: request.clone(),
        url,
        status: kept.status,
        kept: !(200..300).contains(&kept.status),
        headers: kept.headers,
        body,
        truncated: kept.truncated || cut,
        // When this content was fetched (found new or changed).
        fetched_at: UNIX_EPOCH + Duration::from_secs(record.last_changed),
    })
}
