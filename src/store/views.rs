//! Read-only views of the state for `legcrawl dump`.
//!
//! Every record read here is decoded with its format version checked; a record
//! that cannot be read is an error naming it (invariant 4), never skipped.

use serde::Serialize;

use super::records::RunRecord;
use super::{State, StoreError, frontier, keys};
use crate::canon;
use crate::fingerprint::{self, Fingerprint};
use crate::item;
use crate::request::Request;

/// The one-screen summary of a state (`dump summary`).
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Summary {
    /// Queued requests (in flight included).
    pub frontier: u64,
    /// Requests leased and not yet committed.
    pub in_flight: u64,
    /// Distinct fingerprints recorded in the seen set.
    pub seen: u64,
    /// Items stored.
    pub items: u64,
    /// Bloom filter size, log2 of bits.
    pub bloom_bits: u8,
    /// Bloom hash count.
    pub bloom_hashes: u8,
    /// Fraction of Bloom bits set.
    pub bloom_fill_ratio: f64,
    /// Estimated false-positive rate now (fill ratio ^ hashes).
    pub bloom_fpr_estimate: f64,
    /// Bloom false positives caught by the exact set.
    pub bloom_false_positives: u64,
    /// Requests dropped as duplicates.
    pub filtered: u64,
    /// Requests robots.txt kept us from fetching (see `dump blocked`).
    pub robots_disallowed: u64,
    /// `exact` or `bloom`.
    pub dedup: String,
    /// Hosts known to the frontier.
    pub hosts: u64,
    /// Runs recorded.
    pub runs: u64,
    /// Pages completed over all runs.
    pub pages: u64,
}

/// One entry at the head of the queue (`dump frontier`).
#[derive(Clone, Debug, Serialize)]
pub struct FrontierEntry {
    /// Host of the request.
    pub host: String,
    /// Queue sequence number.
    pub seq: u64,
    /// True when leased by the process that holds this state.
    pub leased: bool,
    /// The request.
    pub request: Request,
}

/// What the seen set says about a URL (`dump seen URL`).
#[derive(Clone, Debug, Serialize)]
pub struct SeenAnswer {
    /// The URL as given.
    pub url: String,
    /// Its canonical form.
    pub canonical: String,
    /// Hex fingerprint of a GET of it.
    pub fingerprint: String,
    /// The Bloom filter's answer ("maybe seen").
    pub bloom: bool,
    /// The exact set's answer; `None` in `bloom` mode (no exact set is kept).
    pub exact: Option<bool>,
}

impl State {
    /// The summary of this state.
    pub fn summary(&self) -> Result<Summary, StoreError> {
        let runs = self.last_u64_key(keys::RUN)?.unwrap_or(0);
        Ok(Summary {
            frontier: self.frontier_len(),
            in_flight: self.leased as u64,
            seen: self.counter("seen/unique"),
            items: self.next_item,
            bloom_bits: self.meta.bloom_bits,
            bloom_hashes: self.meta.bloom_hashes,
            bloom_fill_ratio: self.bloom.fill_ratio(),
            bloom_fpr_estimate: self.bloom.fpr_estimate(),
            bloom_false_positives: self.counter("bloom/false_positive"),
            filtered: self.counter("dupefilter/filtered"),
            robots_disallowed: self.counter("robots/disallowed"),
            dedup: self.dedup.as_str().to_owned(),
            hosts: self.hosts.len() as u64,
            runs,
            pages: self.counter("pages/completed"),
        })
    }

    /// The first `limit` queued requests in lease order, host by host.
    pub fn frontier_head(&self, limit: usize) -> Result<Vec<FrontierEntry>, StoreError> {
        let mut out = Vec::new();
        for (&host_id, queue) in &self.hosts {
            for entry in self.db.scan_prefix(keys::queue_host_prefix(host_id)) {
                let (key, value) = entry.map_err(|e| self.db_error(e))?;
                let record = <[u8; keys::QUEUE_KEY_LEN]>::try_from(key.as_ref())
                    .map_err(|_| self.corrupt("queue", &key, "bad key length"))?;
                for entry in frontier::record_entries(&value) {
                    if out.len() >= limit {
                        return Ok(out);
                    }
                    let (seq, bytes) =
                        entry.map_err(|reason| self.corrupt("queue", &key, reason))?;
                    let request = Request::decode(bytes)
                        .map_err(|e| self.corrupt("queue", &key, &e.to_string()))?;
                    out.push(FrontierEntry {
                        host: queue.name.clone(),
                        seq,
                        leased: queue.leased.contains(&keys::queue_entry_key(&record, seq)),
                        request,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Calls `each` with the JSON text of every durable item, in order, from `from`.
    /// Stops early when `each` returns false.
    pub fn for_each_item(
        &self,
        from: u64,
        mut each: impl FnMut(u64, &str) -> bool,
    ) -> Result<(), StoreError> {
        // The record holding `from` starts at or before it.
        let at_from = keys::with_u64(keys::ITEM, from);
        let start = match self
            .db
            .range([keys::ITEM].as_slice()..=at_from.as_slice())
            .next_back()
        {
            Some(entry) => entry.map_err(|e| self.db_error(e))?.0.to_vec(),
            None => at_from,
        };
        let end = [keys::ITEM + 1];
        for entry in self.db.range(start.as_slice()..end.as_slice()) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let first = keys::u64_after_prefix(&key)
                .ok_or_else(|| self.corrupt("item", &key, "short key"))?;
            for (seq, entry) in (first..).zip(self.item_entries(&key, &value)?) {
                let bytes = entry.map_err(|reason| self.corrupt("item", &key, reason))?;
                if seq < from {
                    continue;
                }
                // Items of sealed groups are readable here but not durable yet.
                if seq >= self.durable_items {
                    return Ok(());
                }
                let text = item::json_text(bytes)
                    .map_err(|e| self.corrupt("item", &key, &e.to_string()))?;
                if !each(seq, text) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// What the seen set says about a GET of `url`.
    pub fn seen_answer(
        &self,
        url: &str,
        fingerprint_headers: &[String],
    ) -> Result<SeenAnswer, StoreError> {
        let canonical = canon::canonicalize_str(url).unwrap_or_else(|_| url.to_owned());
        let fp: Fingerprint = fingerprint::fingerprint(&Request::get(url), fingerprint_headers);
        let exact = match self.dedup {
            crate::config::DedupMode::Bloom => None,
            crate::config::DedupMode::Exact => Some(self.exact_contains(&fp)?),
        };
        Ok(SeenAnswer {
            url: url.to_owned(),
            canonical,
            fingerprint: fingerprint::to_hex(&fp),
            bloom: self.bloom.contains(&fp),
            exact,
        })
    }

    /// Every run record, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let mut runs = Vec::new();
        for entry in self.db.scan_prefix([keys::RUN]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            runs.push(self.decode_record("run", &key, &value)?);
        }
        Ok(runs)
    }
}
