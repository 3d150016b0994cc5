//! Page records — what the last fetch of each page saw — and the revisit index.
//!
//! A page record is found by its request fingerprint (the page-id index,
//! `pageids`) and stored under its page id in a block (`pageblock`), ids
//! growing with each new page; it is written in the completion group of the
//! fetch that produced it, so it is durable exactly when the page's items are.
//! The due index (`due`) orders pages by when they are due again; a new cycle
//! reads it up to "now" and re-queues what it finds, so a run costs the pages
//! due, never the pages known. When a page is due is [`crate::revisit`]'s
//! decision; this table keeps the record and the index in step. Records are
//! written in a compact binary form ([`encode_page`]).
//!
//! Depends on `pageids`, `pageblock`, `due`, `keys`, `table`, `error`,
//! [`crate::request`] and [`crate::fingerprint`].

use bincode::de::Decoder;
use bincode::enc::Encoder;
use bincode::error::{DecodeError, EncodeError};
use bincode::{Decode, Encode};
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::due::{DueIndex, DueUnit, DueWrites};
use super::error::StoreError;
use super::keys;
use super::pageblock::{BLOCK_MAX_BYTES, Block, PAGE_BY_ID};
use super::pageids::PageIds;
use super::table::{Batch, Db, Table, Text};
use crate::fingerprint::{self, Fingerprint, FingerprintMap};
use crate::request::Request;

/// Version byte of a page record: in a block and in shared mode's Redis hash
/// (distinct from `records::RECORD_VERSION`).
pub(crate) const PAGE_RECORD_VERSION: u8 = 2;
/// The revisit policy the due index was last computed under (one key `V`):
/// its description. A cycle started under another policy moves every page's
/// due time to the new policy's first.
pub(super) const DUE_POLICY: Table<(), Text> = Table::new(b'V', "due policy");

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
    /// The identity of each item the current version made, in their order on
    /// the page: the `item_id` leg's id, or `None` for an item known by its
    /// place (see [`crate::page::feed`]). A later version's items are compared
    /// with these to find the ones that disappeared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Option<String>>,
    /// Why the page's items were withdrawn from the change feed (deletion
    /// records written); `None` while they stand. The page's next good answer
    /// makes its items again, as a changed page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn: Option<Withdrawn>,
    /// The job version whose legs made the current items (0: not recorded,
    /// a page stored before this was kept, read as the first version).
    /// `legcrawl reparse` runs the legs of a newer job over the pages whose
    /// legs are older than the job's own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub legs: u32,
    /// Where the response the current items were made from is, in the crawl's
    /// WARC files (`None`: not archived): what `legcrawl reparse` reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<WarcAt>,
    /// What the page's fetches said about how often it changes, kept for the
    /// revisit policy (`crate::revisit::rate` reads and writes it; the store
    /// keeps it as it is given). Empty before the page's first good answer.
    #[serde(skip)]
    pub evidence: ChangeEvidence,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The evidence of a page's change rate: for each candidate rate the revisit
/// policy weighs, how well it explains what the fetches saw (a log-likelihood
/// in thousandths, the best one 0), and what set the page's due time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub struct ChangeEvidence {
    /// Log-likelihood of each candidate rate, in thousandths (empty: none yet).
    pub loglik: Vec<i32>,
    /// What set the interval in force (a code of the revisit policy's).
    pub why: u8,
}

/// A `response` record's place in the crawl's WARC files.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Encode, Decode)]
pub struct WarcAt {
    /// The file's id in the state (see [`super::State::warc_file`]).
    pub file: u32,
    /// The offset of the record's gzip member in the file.
    pub offset: u64,
}

/// Why a page's items were withdrawn from the change feed.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Encode, Decode)]
#[serde(rename_all = "snake_case")]
pub enum Withdrawn {
    /// The page answered 404 or 410.
    Gone,
    /// The page left the job's scope.
    OutOfScope,
}

impl Withdrawn {
    /// The reason a deletion record names (its `deleted` field).
    pub fn reason(self) -> &'static str {
        match self {
            Withdrawn::Gone => "gone",
            Withdrawn::OutOfScope => "out_of_scope",
        }
    }
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
pub(crate) fn is_conditional_header(name: &str) -> bool {
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

/// What [`super::State::start_cycle`] queued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CycleStart {
    /// Stored seeds queued again.
    pub seeds: u64,
    /// Due pages queued again.
    pub due: u64,
    /// Seeds skipped because their host still had queued requests.
    pub held: u64,
    /// Seeds skipped because their host is parked (see [`super::UnreachableHost`]).
    pub parked: u64,
}

/// Encodes a page record as it is stored: [`PAGE_RECORD_VERSION`], then bincode.
pub(crate) fn encode_page(record: &PageRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + record.url.len());
    out.push(PAGE_RECORD_VERSION);
    encode_body(record, &mut out);
    out
}

/// Appends `record` in bincode to `out`.
fn encode_body(record: &PageRecord, out: &mut Vec<u8>) {
    // Encoding into a Vec cannot fail for these field types.
    if let Err(error) = bincode::encode_into_std_write(record, out, bincode::config::standard()) {
        unreachable!("encoding a page record into memory failed: {error}");
    }
}

/// A record in bincode, then its feed part when it has one ([`FeedPart`]),
/// then its source part when it has one ([`SourcePart`]), then its change
/// evidence when it has some ([`ChangeEvidence`]), nothing after them. Each
/// part is written when it or a later one is set (an empty one otherwise).
fn decode_body(bytes: &[u8]) -> Result<PageRecord, String> {
    let config = bincode::config::standard();
    let (mut record, used): (PageRecord, usize) =
        bincode::decode_from_slice(bytes, config).map_err(|e| e.to_string())?;
    if used < bytes.len() {
        let (feed, more): (FeedPart, usize) =
            bincode::decode_from_slice(&bytes[used..], config).map_err(|e| e.to_string())?;
        record.items = feed.items.into_iter().map(ItemKey::into_id).collect();
        record.withdrawn = feed.withdrawn;
        let used = used + more;
        if used < bytes.len() {
            let (source, more): (SourcePart, usize) =
                bincode::decode_from_slice(&bytes[used..], config).map_err(|e| e.to_string())?;
            record.legs = source.legs;
            record.response = source.response;
            let used = used + more;
            if used < bytes.len() {
                let (evidence, more): (ChangeEvidence, usize) =
                    bincode::decode_from_slice(&bytes[used..], config)
                        .map_err(|e| e.to_string())?;
                if used + more != bytes.len() {
                    return Err(format!(
                        "{} bytes after the record",
                        bytes.len() - used - more
                    ));
                }
                record.evidence = evidence;
            }
        }
    }
    Ok(record)
}

/// The fields of a record that concern the change feed, written after the
/// others only when one of them is set (so a record of a job without items
/// is as long as before they existed).
#[derive(Encode, Decode)]
struct FeedPart {
    items: Vec<ItemKey>,
    withdrawn: Option<Withdrawn>,
}

/// Where the current items came from, written after the feed part (an empty
/// one when the page has none) only when one of them is set.
#[derive(Encode, Decode)]
struct SourcePart {
    legs: u32,
    response: Option<WarcAt>,
}

/// An item's identity as stored: none (its place), an id that is SHA-1 hex
/// (what the `item_id` leg makes) as its 20 bytes, or any other id as text.
#[derive(Encode, Decode)]
enum ItemKey {
    Place,
    Raw([u8; 20]),
    Text(String),
}

impl ItemKey {
    fn of(id: &Option<String>) -> ItemKey {
        match id {
            None => ItemKey::Place,
            Some(id) => match raw_hash(id) {
                Some(raw) => ItemKey::Raw(raw),
                None => ItemKey::Text(id.clone()),
            },
        }
    }

    fn into_id(self) -> Option<String> {
        match self {
            ItemKey::Place => None,
            ItemKey::Raw(raw) => Some(hex_of(&raw)),
            ItemKey::Text(id) => Some(id),
        }
    }
}

/// Decodes a page record of [`encode_page`]'s form.
pub(crate) fn decode_page(bytes: &[u8]) -> Result<PageRecord, String> {
    match bytes.split_first() {
        Some((&PAGE_RECORD_VERSION, body)) => decode_body(body),
        Some((version, _)) => Err(format!("unknown page record version {version}")),
        None => Err("an empty page record".to_owned()),
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
        self.request.encode(e)?;
        let evidence = !self.evidence.loglik.is_empty();
        let source = self.legs != 0 || self.response.is_some() || evidence;
        if !self.items.is_empty() || self.withdrawn.is_some() || source {
            FeedPart {
                items: self.items.iter().map(ItemKey::of).collect(),
                withdrawn: self.withdrawn,
            }
            .encode(e)?;
        }
        if source {
            SourcePart {
                legs: self.legs,
                response: self.response,
            }
            .encode(e)?;
        }
        if evidence {
            self.evidence.encode(e)?;
        }
        Ok(())
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
            // Read by `decode_body`, after the record.
            items: Vec::new(),
            withdrawn: None,
            legs: 0,
            response: None,
            evidence: ChangeEvidence::default(),
        })
    }
}

/// The pages table: page records (`P`, blocks by page id, see `pageblock`),
/// the page ids of fingerprints (`pageids`) and the due index (`due`). The
/// open and the sealed group's records are readable here before they are
/// durable.
///
/// Why ids: a fingerprint is a hash, so a record keyed by it lands at a random
/// place of a namespace that grows with every page, and sled must bring that
/// place's leaf into its cache to insert it. Once the records outgrew the cache
/// (about 300,000 pages at the default 64 MiB) every new page paid a page-in of
/// a leaf of records; in blocks by id they are appended at the end, and the
/// fingerprint → id index is kept in sorted run files.
pub(super) struct Pages {
    open: FingerprintMap<(u64, PageRecord)>,
    sealed: FingerprintMap<(u64, PageRecord)>,
    /// The open group's records by id, encoded: what its seal writes.
    changes: BTreeMap<u64, (Fingerprint, Vec<u8>)>,
    /// The first id the open group may give: ids from it on are new in it.
    group_first: u64,
    /// The id the next new page gets. Ids of a group whose flush failed are
    /// not given again (a gap between blocks).
    next_id: u64,
    /// The ids of the durable pages.
    ids: PageIds,
    /// The due index, and the open group's changes to it.
    due: DueIndex,
}

/// What sealing the open group writes, worked out before anything changes (it
/// reads the blocks that it rewrites).
pub(super) struct PagesSeal {
    writes: Vec<(Vec<u8>, Vec<u8>)>,
    /// Pages whose id came from a group that never became durable, with the
    /// new id they get.
    renamed: Vec<(Fingerprint, u64)>,
    next_id: u64,
    /// The due index's chunks written and removed.
    due: DueWrites,
}

impl Pages {
    /// The table as the database holds it.
    pub(super) fn load(db: &Db) -> Result<Pages, StoreError> {
        let next_id = blocks_end(db)?;
        Ok(Pages {
            open: FingerprintMap::default(),
            sealed: FingerprintMap::default(),
            changes: BTreeMap::new(),
            group_first: next_id,
            next_id,
            ids: PageIds::load(db, next_id)?,
            due: DueIndex::default(),
        })
    }

    /// The page-id index.
    pub(super) fn ids(&self) -> &PageIds {
        &self.ids
    }

    /// The page-id index, to checkpoint.
    pub(super) fn ids_mut(&mut self) -> &mut PageIds {
        &mut self.ids
    }

    /// Reads the page-id index's run files whole (`legcrawl repair`), and
    /// rebuilds the index from the blocks if one is damaged: the damage and
    /// the pages indexed again, `None` when all was well. Commit first.
    pub(super) fn verify_ids(&mut self, db: &Db) -> Result<Option<(String, u64)>, StoreError> {
        self.ids.verify(db, blocks_end(db)?)
    }

    /// The page record of `fp`: the open group's, then the sealed group's (neither
    /// durable yet), then the stored one.
    pub(super) fn get(&self, db: &Db, fp: &Fingerprint) -> Result<Option<PageRecord>, StoreError> {
        if let Some((_, record)) = self.open.get(fp).or_else(|| self.sealed.get(fp)) {
            return Ok(Some(record.clone()));
        }
        if let Some(id) = self.ids.get(fp) {
            let corrupt = |reason: &str| StoreError::Corrupt {
                path: db.dir().to_owned(),
                what: format!("page id {id} of {}", fingerprint::to_hex(fp)),
                reason: reason.to_owned(),
            };
            let block = block_of(db, id)?.ok_or_else(|| corrupt("no page block holds it"))?;
            return match block.entry(id) {
                Some((stored, record)) if stored == fp => decode_body(record)
                    .map(Some)
                    .map_err(|reason| db.corrupt("page block", &block.key(), &reason)),
                _ => Err(corrupt("its block holds another page there")),
            };
        }
        Ok(None)
    }

    /// Stores (replaces) the page record of `fp` in the group, moving its
    /// due-index entry from `previous_due` to the record's `next_due`. A page
    /// recorded for the first time gets the next id. The record itself is
    /// written at the seal ([`Pages::plan_seal`]).
    pub(super) fn put(
        &mut self,
        batch: &mut Batch,
        fp: Fingerprint,
        record: PageRecord,
        previous_due: Option<u64>,
    ) {
        // An id this group already holds was written or found stored by it.
        let id = match self.open.get(&fp) {
            Some((id, _)) => *id,
            None => match self.ids.get(&fp) {
                Some(id) => id,
                None => {
                    // A page new in the sealed group keeps that group's id:
                    // should its flush fail, this group's seal finds no block
                    // for it and gives the page a new one.
                    match self.sealed.get(&fp) {
                        Some((id, _)) => *id,
                        None => {
                            let id = self.next_id;
                            self.next_id += 1;
                            id
                        }
                    }
                }
            },
        };
        if let Some(due) = previous_due {
            self.due.remove(due, fp);
        }
        if let Some(due) = record.next_due {
            self.due.add(due, fp);
        }
        batch.defer();
        let mut body = Vec::with_capacity(160 + record.url.len());
        encode_body(&record, &mut body);
        self.changes.insert(id, (fp, body));
        self.open.insert(fp, (id, record));
    }

    /// Works out the blocks the open group writes: its new pages packed into
    /// new blocks, and each stored block holding a page it recorded again,
    /// rewritten once. Reads only; [`Pages::seal`] applies the result. (The
    /// group sealed before is durable or forgotten by now: one is sealed at a
    /// time.)
    pub(super) fn plan_seal(&self, db: &Db) -> Result<PagesSeal, StoreError> {
        let mut writes = Vec::new();
        let mut touched: BTreeMap<u64, Block> = BTreeMap::new();
        let mut orphans = Vec::new();
        for (&id, (fp, record)) in self.changes.range(..self.group_first) {
            let first = match touched.range(..=id).next_back() {
                Some((&first, block)) if block.contains(id) => first,
                _ => match block_of(db, id)? {
                    Some(block) => {
                        let first = block.first;
                        touched.insert(first, block);
                        first
                    }
                    // Its first record was in a group whose flush failed.
                    None => {
                        orphans.push((fp, record));
                        continue;
                    }
                },
            };
            if let Some(block) = touched.get_mut(&first)
                && !block.replace(id, fp, record.clone())
            {
                return Err(db.corrupt("page block", &block.key(), "holds another page"));
            }
        }
        writes.extend(touched.values().map(|b| (b.key(), b.encode())));
        let mut next_id = self.next_id;
        let mut renamed = Vec::new();
        let mut block: Option<Block> = None;
        let fresh = self
            .changes
            .range(self.group_first..)
            .map(|(&id, (fp, r))| (id, fp, r));
        let mut orphans_renamed = Vec::with_capacity(orphans.len());
        for (fp, record) in orphans {
            let id = next_id;
            next_id += 1;
            renamed.push((*fp, id));
            orphans_renamed.push((id, fp, record));
        }
        let mut packed = Vec::new();
        for (id, fp, record) in fresh.chain(orphans_renamed) {
            match block.as_mut() {
                Some(open) if open.end() == id && open.encoded_len() < BLOCK_MAX_BYTES => {}
                _ => packed.extend(block.replace(Block::new(id))),
            }
            if let Some(open) = block.as_mut() {
                open.entries.push((*fp, record.clone()));
            }
        }
        packed.extend(block);
        writes.extend(packed.iter().map(|b| (b.key(), b.encode())));
        Ok(PagesSeal {
            writes,
            renamed,
            next_id,
            due: self.due.plan(db)?,
        })
    }

    /// The open group is sealed: `plan` goes into its batch, and its records are
    /// read from the sealed map until it is durable.
    pub(super) fn seal(&mut self, plan: PagesSeal, batch: &mut Batch) {
        for (key, value) in plan.writes.into_iter().chain(plan.due.puts) {
            batch.put(key, value);
        }
        for key in plan.due.deletes {
            batch.delete(key);
        }
        self.due.sealed();
        for (fp, id) in plan.renamed {
            if let Some(entry) = self.open.get_mut(&fp) {
                entry.0 = id;
            }
        }
        self.next_id = plan.next_id;
        self.group_first = self.next_id;
        self.changes.clear();
        self.sealed = std::mem::take(&mut self.open);
    }

    /// Puts `fp` in the due index at `due`, in the group.
    pub(super) fn keep_due(&mut self, batch: &mut Batch, fp: &Fingerprint, due: u64) {
        self.due.add(due, *fp);
        batch.defer();
    }

    /// Takes `fp` out of the due index at `due`, in the group.
    pub(super) fn unqueue_due(&mut self, batch: &mut Batch, due: u64, fp: Fingerprint) {
        self.due.remove(due, fp);
        batch.defer();
    }

    /// Visits every stored page record, in the order the pages were first
    /// recorded; stops early when `f` returns false.
    pub(super) fn for_each(
        &self,
        db: &Db,
        mut f: impl FnMut(Fingerprint, &PageRecord) -> bool,
    ) -> Result<(), StoreError> {
        for unit in stored_units(db, &[]) {
            for (fp, record) in unit?.1 {
                if !f(fp, &record) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Visits the stored page records in [`Pages::for_each`]'s order from the
    /// position `from` (empty: the first) on, a whole block at a time, until
    /// `f` has seen at least `at_least` records. Returns the position to go on
    /// from, or `None` when it reached the end. Positions are keys: a block
    /// rewritten since keeps its place.
    pub(super) fn visit_from(
        &self,
        db: &Db,
        from: &[u8],
        at_least: usize,
        mut f: impl FnMut(Fingerprint, &PageRecord),
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let mut seen = 0;
        for unit in stored_units(db, from) {
            let (key, records) = unit?;
            seen += records.len();
            for (fp, record) in &records {
                f(*fp, record);
            }
            if seen >= at_least {
                let mut next = key.to_vec();
                next.push(0);
                return Ok(Some(next));
            }
        }
        Ok(None)
    }

    /// The pages due at the first second from `from` to `until` (unix
    /// seconds) at which any are, as stored (not the open group's changes);
    /// `None` when none are.
    pub(super) fn next_due(
        &self,
        db: &Db,
        from: u64,
        until: u64,
    ) -> Result<Option<DueUnit>, StoreError> {
        self.due.next_second(db, from, until)
    }

    /// The revisit policy the due index was last computed under, if recorded.
    pub(super) fn policy(&self, db: &Db) -> Result<Option<String>, StoreError> {
        DUE_POLICY.get(db, &())
    }

    /// Records, in the group, that the due index follows `policy`.
    pub(super) fn set_policy(&mut self, batch: &mut Batch, policy: &str) {
        DUE_POLICY.put(batch, &(), &policy.to_owned());
    }

    /// The pages in the due index at `due`, as stored (a page taken out of
    /// it is queued for this cycle, or in flight).
    pub(super) fn due_at(&self, db: &Db, due: u64) -> Result<Vec<Fingerprint>, StoreError> {
        self.due.at(db, due)
    }

    /// The sealed group is durable: its records are read from the database,
    /// and the ids of its pages join the page-id index.
    pub(super) fn durable(&mut self) {
        let sealed = std::mem::take(&mut self.sealed);
        self.ids
            .durable(sealed.into_iter().map(|(fp, (id, _))| (fp, id)));
    }
}

/// The id after the last stored block's (0 when there is none).
fn blocks_end(db: &Db) -> Result<u64, StoreError> {
    match db.range([PAGE_BY_ID]..[PAGE_BY_ID + 1]).next_back() {
        None => Ok(0),
        Some(entry) => {
            let (key, value) = entry?;
            Ok(Block::stored(db, &key, &value)?.end())
        }
    }
}

/// The stored block holding `id`, if one does.
fn block_of(db: &Db, id: u64) -> Result<Option<Block>, StoreError> {
    let start = vec![PAGE_BY_ID];
    let end = keys::with_u64(PAGE_BY_ID, id);
    match db.range(start..=end).next_back() {
        None => Ok(None),
        Some(entry) => {
            let (key, value) = entry?;
            let block = Block::stored(db, &key, &value)?;
            Ok(block.contains(id).then_some(block))
        }
    }
}

/// The stored page records from the key `from` on, as units of one key each
/// with the key: the blocks of `P` in id order.
fn stored_units<'d>(
    db: &'d Db,
    from: &[u8],
) -> impl Iterator<Item = Result<(sled::IVec, Vec<(Fingerprint, PageRecord)>), StoreError>> + 'd {
    let blocks_from = from.to_vec().max(vec![PAGE_BY_ID]);
    db.range(blocks_from..vec![PAGE_BY_ID + 1])
        .map(move |entry| {
            let (key, value) = entry?;
            let block = Block::stored(db, &key, &value)?;
            let records = block
                .entries
                .iter()
                .map(|(fp, record)| {
                    decode_body(record)
                        .map(|record| (*fp, record))
                        .map_err(|reason| db.corrupt("page block", &key, &reason))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((key, records))
        })
}

#[cfg(test)]
#[path = "pages_tests.rs"]
mod tests;
