//! Page records — what the last fetch of each page saw — and the revisit index.
//!
//! A page record is keyed by the request fingerprint (`p` · fingerprint) and
//! written in the completion group of the fetch that produced it, so it is
//! durable exactly when the page's items are. The due index (`v` · due time ·
//! fingerprint) orders pages by when they are due again; a new cycle reads it up
//! to "now" and re-queues what it finds, so the cost of a run is the number of
//! pages due, never the number of pages known. The store does not decide when a
//! page is due (that is [`crate::revisit`]); it keeps the record and the index
//! in step. Records are written in a compact binary form ([`encode_page`]);
//! the JSON form of earlier states is still read ([`decode_page`]), so no
//! migration is needed. Depends on [`crate::request`] and [`crate::fingerprint`].

use std::collections::HashSet;

use bincode::de::Decoder;
use bincode::enc::Encoder;
use bincode::error::{DecodeError, EncodeError};
use bincode::{Decode, Encode};
use serde::{Deserialize, Serialize};

use super::{State, StoreError, keys, records};
use crate::fingerprint::{self, Fingerprint};
use crate::request::Request;

/// Everything the last fetch of one page told us, and when it is due again.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PageRecord {
    /// The requested URL (the page's identity, with the request below).
    pub url: String,
    /// The URL that answered (after the fetcher's own handling; redirects are
    /// separate pages).
    pub final_url: String,
    /// HTTP status of the last fetch (304 keeps the status of the content it
    /// confirmed).
    pub status: u16,
    /// The `ETag` the server sent with the current content.
    pub etag: Option<String>,
    /// The `Last-Modified` the server sent with the current content.
    pub last_modified: Option<String>,
    /// SHA-1 (hex) of the current content (for a redirect: of its target).
    pub content_hash: String,
    /// Unix seconds of the first fetch.
    pub first_fetched: u64,
    /// Unix seconds of the last fetch.
    pub last_fetched: u64,
    /// Unix seconds when the content was last found new or changed.
    pub last_changed: u64,
    /// Fetches so far (304s included).
    pub fetches: u32,
    /// Times the content was found changed after the first fetch.
    pub changes: u32,
    /// Version of the current content (1 for the first); items carry it.
    pub version: u32,
    /// The revisit interval in force, in seconds.
    pub interval: u64,
    /// Unix seconds from which the page is due again; `None` = never.
    pub next_due: Option<u64>,
    /// 404/410 answers in a row.
    pub missing: u32,
    /// Gone (410, or 404 twice in a row): not revisited again.
    pub gone: bool,
    /// How to ask for the page again.
    pub request: StoredRequest,
}

/// The parts of a [`Request`] a revisit needs (the URL is [`PageRecord::url`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Encode, Decode)]
pub struct StoredRequest {
    /// HTTP method.
    pub method: String,
    /// Body (empty for `GET`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub body: Vec<u8>,
    /// Headers the request carried (conditional headers excluded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// Depth at which the page was found.
    pub depth: u32,
    /// Priority.
    pub priority: i32,
    /// Page it was found on.
    pub referer: Option<String>,
    /// Leg metadata.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub meta: std::collections::BTreeMap<String, String>,
}

/// True for the headers the engine adds to a revisit (`If-None-Match`,
/// `If-Modified-Since`); they are never stored with the request.
pub fn is_conditional_header(name: &str) -> bool {
    ["if-none-match", "if-modified-since"]
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

impl StoredRequest {
    /// The stored parts of `request` (without conditional headers).
    pub fn of(request: &Request) -> StoredRequest {
        StoredRequest {
            method: request.method.clone(),
            body: request.body.clone(),
            headers: request
                .headers
                .iter()
                .filter(|(name, _)| !is_conditional_header(name))
                .cloned()
                .collect(),
            depth: request.depth,
            priority: request.priority,
            referer: request.referer.clone(),
            meta: request.meta.clone(),
        }
    }
}

impl PageRecord {
    /// The request that fetches this page again: `dont_filter`, no retries.
    pub fn revisit_request(&self) -> Request {
        let stored = &self.request;
        let mut request = Request::get(self.url.clone());
        request.method = stored.method.clone();
        request.body = stored.body.clone();
        request.headers = stored.headers.clone();
        request.depth = stored.depth;
        request.priority = stored.priority;
        request.referer = stored.referer.clone();
        request.meta = stored.meta.clone();
        request.dont_filter = true;
        request
    }
}

/// What [`State::start_cycle`] queued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CycleStart {
    /// Stored seeds queued again.
    pub seeds: u64,
    /// Due pages queued again.
    pub due: u64,
    /// Seeds skipped because their host still had queued requests.
    pub held: u64,
}

/// Encodes a page record as it is stored: [`keys::PAGE_RECORD_VERSION`], then bincode.
pub fn encode_page(record: &PageRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + record.url.len());
    out.push(keys::PAGE_RECORD_VERSION);
    // Encoding into a Vec cannot fail for these field types.
    if let Err(error) =
        bincode::encode_into_std_write(record, &mut out, bincode::config::standard())
    {
        unreachable!("encoding a page record into memory failed: {error}");
    }
    out
}

/// Decodes a stored page record: the binary form of [`encode_page`], or the JSON
/// form ([`records::RECORD_VERSION`]) that states of format 2 were written with.
pub fn decode_page(bytes: &[u8]) -> Result<PageRecord, String> {
    match bytes.first() {
        Some(&keys::PAGE_RECORD_VERSION) => {
            let (record, used) =
                bincode::decode_from_slice(&bytes[1..], bincode::config::standard())
                    .map_err(|e| e.to_string())?;
            if used + 1 != bytes.len() {
                return Err(format!("{} bytes after the record", bytes.len() - used - 1));
            }
            Ok(record)
        }
        _ => records::decode(bytes).map_err(|e| e.to_string()),
    }
}

/// Tag of a content hash stored as 20 raw bytes (the usual lowercase SHA-1 hex).
const HASH_RAW: u8 = 0;
/// Tag of a content hash stored as its string (anything else).
const HASH_TEXT: u8 = 1;

/// The 20 bytes a lowercase 40-digit hex string spells, if it is one.
fn raw_hash(hex: &str) -> Option<[u8; 20]> {
    let digits = hex.as_bytes();
    if digits.len() != 40 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut raw = [0u8; 20];
    for (byte, pair) in raw.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(raw)
}

fn hex_of(raw: &[u8; 20]) -> String {
    use std::fmt::Write;
    raw.iter().fold(String::with_capacity(40), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The binary form: the fields in declaration order, except that `final_url` is
/// `None` when it equals `url` and the content hash is 20 raw bytes when it is
/// lowercase SHA-1 hex (tagged, so any other string round-trips too).
impl Encode for PageRecord {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        self.url.encode(e)?;
        (self.final_url != self.url)
            .then_some(&self.final_url)
            .encode(e)?;
        self.status.encode(e)?;
        self.etag.encode(e)?;
        self.last_modified.encode(e)?;
        match raw_hash(&self.content_hash) {
            Some(raw) => (HASH_RAW, raw).encode(e)?,
            None => (HASH_TEXT, &self.content_hash).encode(e)?,
        }
        (self.first_fetched, self.last_fetched, self.last_changed).encode(e)?;
        (self.fetches, self.changes, self.version).encode(e)?;
        (self.interval, self.next_due, self.missing, self.gone).encode(e)?;
        self.request.encode(e)
    }
}

impl<C> Decode<C> for PageRecord {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        let url = String::decode(d)?;
        let final_url = Option::<String>::decode(d)?.unwrap_or_else(|| url.clone());
        let status = u16::decode(d)?;
        let etag = Option::<String>::decode(d)?;
        let last_modified = Option::<String>::decode(d)?;
        let content_hash = match u8::decode(d)? {
            HASH_RAW => hex_of(&<[u8; 20]>::decode(d)?),
            HASH_TEXT => String::decode(d)?,
            tag => {
                return Err(DecodeError::OtherString(format!(
                    "unknown content hash tag {tag}"
                )));
            }
        };
        let (first_fetched, last_fetched, last_changed) = Decode::decode(d)?;
        let (fetches, changes, version) = Decode::decode(d)?;
        let (interval, next_due, missing, gone) = Decode::decode(d)?;
        Ok(PageRecord {
            url,
            final_url,
            status,
            etag,
            last_modified,
            content_hash,
            first_fetched,
            last_fetched,
            last_changed,
            fetches,
            changes,
            version,
            interval,
            next_due,
            missing,
            gone,
            request: StoredRequest::decode(d)?,
        })
    }
}

fn due_key(due: u64, fp: &Fingerprint) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + 8 + fp.len());
    key.push(keys::DUE);
    key.extend_from_slice(&due.to_be_bytes());
    key.extend_from_slice(fp);
    key
}

impl State {
    /// The page record of `fp`: the open group's, then the sealed group's (neither
    /// durable yet), then the stored one.
    pub fn page(&self, fp: &Fingerprint) -> Result<Option<PageRecord>, StoreError> {
        let sealed = self.sealed.as_ref().and_then(|s| s.page_records.get(fp));
        if let Some(record) = self.group.page_records.get(fp).or(sealed) {
            return Ok(Some(record.clone()));
        }
        let key = keys::with_prefix(keys::PAGE, fp);
        match self.db.get(&key).map_err(|e| self.db_error(e))? {
            Some(value) => Ok(Some(self.decode_page(fp, &value)?)),
            None => Ok(None),
        }
    }

    /// Stores (replaces) the page record of `fp` in the open group, moving its
    /// due-index entry from `previous_due` to the record's `next_due`.
    pub fn put_page(&mut self, fp: Fingerprint, record: PageRecord, previous_due: Option<u64>) {
        if let Some(due) = previous_due {
            self.group.batch.remove(due_key(due, &fp));
        }
        if let Some(due) = record.next_due {
            self.group.batch.insert(due_key(due, &fp), &[]);
        }
        self.group
            .batch
            .insert(keys::with_prefix(keys::PAGE, &fp), encode_page(&record));
        self.group.page_records.insert(fp, record);
        self.group.dirty = true;
        self.opened();
    }

    /// Visits every page record in fingerprint order; stops early when `f` returns false.
    pub fn for_each_page(
        &self,
        mut f: impl FnMut(Fingerprint, &PageRecord) -> bool,
    ) -> Result<(), StoreError> {
        for entry in self.db.scan_prefix([keys::PAGE]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let fp: Fingerprint = key
                .get(1..21)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| self.corrupt("page", &key, "bad key length"))?;
            let record = self.decode_page(&fp, &value)?;
            if !f(fp, &record) {
                break;
            }
        }
        Ok(())
    }

    /// Visits the page records due at or before `until` (unix seconds), soonest
    /// first; stops early when `f` returns false.
    pub fn for_each_due(
        &self,
        until: u64,
        mut f: impl FnMut(Fingerprint, PageRecord) -> bool,
    ) -> Result<(), StoreError> {
        for entry in self.due_keys(until) {
            let (key, fp) = entry?;
            let Some(record) = self.page(&fp)? else {
                return Err(self.corrupt("due index", &key, "no page record"));
            };
            if !f(fp, record) {
                break;
            }
        }
        Ok(())
    }

    /// Starts a crawl cycle at `now`: queues every stored seed and every page
    /// due by `now` again (`dont_filter`). A seed whose host still has queued
    /// requests is skipped (a host held over from the last run finishes first, so
    /// its seed is not queued twice). A due page leaves the due index in the batch
    /// that queues it, so it can never be queued twice, and a cycle start cut
    /// short by a crash is finished by [`State::resume_cycle`]. Commits.
    pub fn start_cycle(
        &mut self,
        now: u64,
        fingerprint_headers: &[String],
    ) -> Result<CycleStart, StoreError> {
        self.group
            .batch
            .insert(keys::CYCLE, keys::versioned(&now.to_be_bytes()));
        self.group.dirty = true;
        let busy: HashSet<u32> = self
            .hosts
            .keys()
            .copied()
            .filter(|&id| self.host_has_queued(id))
            .collect();
        let mut start = CycleStart::default();
        for url in self.seeds()? {
            let request = super::seen::seed_request(url);
            let host = super::frontier::host_of(&request.url);
            if self.host_ids.get(&host).is_some_and(|id| busy.contains(id)) {
                start.held += 1;
                continue;
            }
            self.enqueue(&request, fingerprint_headers)?;
            start.seeds += 1;
        }
        // The first commit of the cycle (in `queue_due` or below) holds its start.
        super::crash::point("cycle.start");
        start.due = self.queue_due(now, fingerprint_headers)?;
        self.count("cycle/started", 1);
        self.count("revisit/seeds", start.seeds);
        self.commit()?;
        Ok(start)
    }

    /// Resumes the current cycle: queues the pages that were due before the
    /// second it started and are still in the due index (a crash cut the cycle
    /// start short). A page fetched in this cycle is due no earlier than that
    /// second, so nothing is queued twice. Returns how many. Commits.
    pub fn resume_cycle(&mut self, fingerprint_headers: &[String]) -> Result<u64, StoreError> {
        let started = match self.db.get(keys::CYCLE).map_err(|e| self.db_error(e))? {
            None => return Ok(0),
            Some(value) => {
                let bytes: [u8; 8] = keys::versioned_body(&value).ok_or_else(|| {
                    self.corrupt("cycle", keys::CYCLE, "not a version byte and 8 bytes")
                })?;
                u64::from_be_bytes(bytes)
            }
        };
        let queued = self.queue_due(started.saturating_sub(1), fingerprint_headers)?;
        self.commit()?;
        Ok(queued)
    }

    /// Puts `fp` back in the due index at `due`: its revisit ended without a new
    /// record (the fetch failed for good, or robots.txt refused it). Give a `due`
    /// no earlier than now, so that a resumed cycle does not queue it again.
    pub fn keep_due(&mut self, fp: &Fingerprint, due: u64) {
        self.group.batch.insert(due_key(due, fp), &[]);
        self.group.dirty = true;
        self.opened();
    }

    /// Queues every page due by `until` that is not a seed and not gone, each in
    /// the batch that removes its due-index entry; commits every 1,024.
    fn queue_due(&mut self, until: u64, fingerprint_headers: &[String]) -> Result<u64, StoreError> {
        let seeds: HashSet<Fingerprint> = self
            .seed_fingerprints(fingerprint_headers)?
            .into_iter()
            .collect();
        let mut due = Vec::new();
        for entry in self.due_keys(until) {
            let (key, fp) = entry?;
            if !seeds.contains(&fp) {
                due.push((key, fp));
            }
        }
        let mut queued = 0;
        for (key, fp) in due {
            let record = self.page(&fp)?;
            self.group.batch.remove(key);
            self.group.dirty = true;
            let Some(record) = record.filter(|r| !r.gone) else {
                continue;
            };
            self.enqueue(&record.revisit_request(), fingerprint_headers)?;
            queued += 1;
            // Long due lists are committed in chunks, to keep each batch small.
            if queued % 1024 == 0 {
                self.commit()?;
            }
        }
        self.count("revisit/due", queued);
        Ok(queued)
    }

    /// The due-index keys up to `until` (unix seconds), soonest first, with the
    /// fingerprint each names.
    fn due_keys(
        &self,
        until: u64,
    ) -> impl Iterator<Item = Result<(sled::IVec, Fingerprint), StoreError>> + '_ {
        let end = due_key(until.saturating_add(1), &[0u8; 20]);
        self.db.range(vec![keys::DUE]..end).map(|entry| {
            let (key, _) = entry.map_err(|e| self.db_error(e))?;
            let fp: Fingerprint = key
                .get(9..29)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| self.corrupt("due index", &key, "bad key length"))?;
            Ok((key, fp))
        })
    }

    fn decode_page(&self, fp: &Fingerprint, value: &[u8]) -> Result<PageRecord, StoreError> {
        decode_page(value).map_err(|reason| StoreError::Corrupt {
            path: self.dir.clone(),
            what: format!("page {}", fingerprint::to_hex(fp)),
            reason,
        })
    }

    fn host_has_queued(&self, host_id: u32) -> bool {
        self.db
            .scan_prefix(keys::queue_host_prefix(host_id))
            .keys()
            .next()
            .is_some()
    }
}

#[cfg(test)]
#[path = "pages_tests.rs"]
mod tests;
