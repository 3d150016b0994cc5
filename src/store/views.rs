//! Read-only answers of the state that the view layer ([`crate::view`])
//! turns into `dump`'s: the summary, the queue's head, the seen set, runs.
//!
//! Every record read here is decoded with its format version checked; a record
//! that cannot be read is an error naming it, never skipped. Depends on
//! `frontier`, `queue`, `runs`, `records`, `error`, [`crate::canon`],
//! [`crate::fingerprint`] and [`crate::request`].

use serde::Serialize;

use super::error::StoreError;
use super::records::RunRecord;
use super::{State, records};
use crate::canon;
use crate::fingerprint::{self, Fingerprint};
use crate::request::Request;

/// The run counter of the run's peak resident memory, in KiB.
pub const PEAK_RSS: &str = "memory/peak_rss_kib";

/// The one-screen summary of a state (`dump summary`).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct Summary {
    /// Queued requests (in flight included).
    pub frontier: u64,
    /// Requests leased and not yet committed.
    pub in_flight: u64,
    /// Distinct fingerprints recorded in the seen set.
    pub seen: u64,
    /// Items stored.
    pub items: u64,
    /// Bloom filter size now, log2 of bits.
    pub bloom_bits: u8,
    /// The filter grows with the crawl (see [`super::sizing`]).
    pub bloom_sized: bool,
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
    /// Bytes the state directory takes on disk (allocated blocks).
    #[serde(default)]
    pub disk_bytes: u64,
    /// Peak resident memory of the last run that ended, in KiB (`VmHWM`; it
    /// includes the touched pages of the mapped Bloom file), when it recorded one.
    #[serde(default)]
    pub last_run_peak_rss_kib: Option<u64>,
    /// The newest version of the crawl's job (`dump job` prints it); `None`
    /// before a crawl stored one.
    #[serde(default)]
    pub job: Option<u64>,
    /// Hosts that could not be reached in their last runs, parked or not.
    #[serde(default)]
    pub unreachable: Vec<super::UnreachableHost>,
    /// Seeds whose host is parked now: a new cycle does not queue them.
    #[serde(default)]
    pub parked_seeds: Vec<String>,
}

/// Bytes the files under `dir` take on disk (allocated blocks); what cannot be
/// read counts as nothing.
fn disk_usage(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.blocks() * 512;
            }
        }
    }
    total
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
        let runs = super::runs::RUN
            .last(&self.db, None)?
            .map_or(0, |(id, _)| id);
        let unreachable = self.unreachable_hosts()?;
        let bloom = &self.seen.bloom;
        Ok(Summary {
            frontier: self.frontier_len(),
            in_flight: self.in_flight() as u64,
            seen: self.counter("seen/unique"),
            items: self.items.len(),
            bloom_bits: bloom.params().bits,
            bloom_sized: self.meta.bloom_sized,
            bloom_hashes: self.meta.bloom_hashes,
            bloom_fill_ratio: bloom.fill_ratio(),
            bloom_fpr_estimate: bloom.fpr_estimate(),
            bloom_false_positives: self.counter("bloom/false_positive"),
            filtered: self.counter("dupefilter/filtered"),
            robots_disallowed: self.counter("robots/disallowed"),
            dedup: self.dedup().as_str().to_owned(),
            hosts: self.frontier.hosts_len() as u64,
            runs,
            pages: self.counter("pages/completed"),
            disk_bytes: disk_usage(self.dir()),
            last_run_peak_rss_kib: self
                .runs
                .previous(&self.db)?
                .and_then(|run| run.counters.get(PEAK_RSS).copied()),
            job: self.latest_job()?.map(|job| job.version),
            parked_seeds: self.parked_seeds(&unreachable, records::unix_now())?,
            unreachable,
        })
    }

    /// The stored seeds whose host is parked at `now`.
    fn parked_seeds(
        &self,
        hosts: &[super::UnreachableHost],
        now: u64,
    ) -> Result<Vec<String>, StoreError> {
        let parked: Vec<&str> = hosts
            .iter()
            .filter(|host| host.parked_at(now))
            .map(|host| host.host.as_str())
            .collect();
        if parked.is_empty() {
            return Ok(Vec::new());
        }
        let mut seeds = self.seeds()?;
        seeds.retain(|url| parked.contains(&super::frontier::host_of(url).as_str()));
        Ok(seeds)
    }

    /// The first `limit` queued requests in lease order, host by host.
    pub fn frontier_head(&self, limit: usize) -> Result<Vec<FrontierEntry>, StoreError> {
        let mut out = Vec::new();
        for (&host_id, queue) in &self.frontier.hosts {
            if out.len() >= limit {
                break;
            }
            self.frontier
                .for_each_queued(&self.db, host_id, |record, seq, request| {
                    out.push(FrontierEntry {
                        host: queue.name.clone(),
                        seq,
                        leased: queue
                            .leased
                            .contains(&super::queue::queue_entry_key(record, seq)),
                        request,
                    });
                    out.len() < limit
                })?;
        }
        Ok(out)
    }

    /// Calls `each` with the JSON text of every durable item, in order, from `from`.
    /// Stops early when `each` returns false.
    pub fn for_each_item(
        &self,
        from: u64,
        each: impl FnMut(u64, &str) -> bool,
    ) -> Result<(), StoreError> {
        self.items.for_each(&self.db, from, each)
    }

    /// What the seen set says about a GET of `url`.
    pub fn seen_answer(
        &self,
        url: &str,
        fingerprint_headers: &[String],
    ) -> Result<SeenAnswer, StoreError> {
        let canonical = canon::canonicalize_str(url).unwrap_or_else(|_| url.to_owned());
        let fp: Fingerprint = fingerprint::fingerprint(&Request::get(url), fingerprint_headers);
        let exact = match self.dedup() {
            super::DedupMode::Bloom => None,
            super::DedupMode::Exact => Some(self.seen.exact.contains(&fp)),
        };
        Ok(SeenAnswer {
            url: url.to_owned(),
            canonical,
            fingerprint: fingerprint::to_hex(&fp),
            bloom: self.seen.bloom.contains(&fp),
            exact,
        })
    }

    /// Every run record, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.runs.all(&self.db)
    }
}
