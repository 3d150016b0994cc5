//! The exact seen set of `exact` dedup mode, kept as sorted runs of fingerprints.
//!
//! Writing one sled key per fingerprint made the exact set the largest cost of a
//! completion (sled 0.34 clones a leaf per insert). Instead:
//! - fingerprints committed since the last checkpoint are exactly the ones in the
//!   Bloom journal; they are kept in memory ([`Exact::recent`]) and rebuilt from the
//!   journal on open;
//! - a checkpoint (see `checkpoint`) *seals* them into a run: sorted chunks of at
//!   most [`CHUNK_FPS`] fingerprints under `S · run id · first fingerprint`, then
//!   lists the run in the run index (`e`) in the batch that truncates the journal;
//! - runs are merged size-tiered: when [`MERGE_FANOUT`] runs share a tier
//!   (`log4` of their size in units of 4,096 fingerprints) they become one, so a fingerprint is rewritten
//!   about `log4(total / seal)` times and a lookup reads at most
//!   `(MERGE_FANOUT - 1)` chunks per tier, one sled range read each.
//!
//! Invariant: the exact set never holds a fingerprint whose journal entry was not
//! durable first (it only seals what commits made durable). Only runs listed in
//! the index are read; chunks of unlisted runs (a crash before the index switch,
//! or runs merged away) are found on open, removed by the next checkpoint, and a
//! run id is never reused, so a lookup never lands on one of them.
//! Depends on [`crate::fingerprint`] and the state's key layout.

use super::table::Db;
use super::{StoreError, keys};
use crate::fingerprint::Fingerprint;

/// Fingerprints per chunk record at most (2.5 KB).
///
/// Small on purpose. sled 0.34 splits a leaf at 16 entries and writes a node
/// image over a quarter of its 512 KiB segment to a blob file, and its cache
/// counts a node by the size of its *log message*: for a blob that is the
/// ~20-byte pointer, not the blob. Chunks of 4,096 fingerprints (80 KB) made
/// leaves of up to 1.3 MB, all blobs, so every chunk a lookup touched stayed
/// in memory for good: measured on `benches/frontier_memory.rs` at full size,
/// 192 MB of a 284 MB heap peak after 30,000 pages of phase 2 was chunks paged
/// in by [`Exact::contains`] (heaptrack, cache 64 MiB), growing towards the
/// whole exact set (200 MB for 10 M fingerprints). At 128 a leaf stays under
/// 48 KB: inline, counted at its size and evicted like any other, and a lookup
/// that misses the cache reads one such leaf instead of a 1.3 MB blob file.
/// Readers take chunks of any size (a lookup reads the chunk whose first
/// fingerprint is the greatest not above the one looked up), so runs written
/// with larger chunks by older versions stay readable and are rewritten in
/// small chunks when they are merged.
pub(super) const CHUNK_FPS: usize = 128;
/// Fingerprints per unit of run size for [`tier`]: the chunk size the tiers
/// were defined with, kept when chunks became smaller so that the runs of an
/// existing state keep their tiers (and merge when they did).
const TIER_UNIT_FPS: u64 = 4096;
/// Runs of one tier merged into one.
pub(super) const MERGE_FANOUT: usize = 4;
/// Version byte of the run index record.
const INDEX_VERSION: u8 = 1;
/// Version byte of a chunk record (chunks written before it have none: their
/// length is a multiple of 20, a versioned one's is not).
const CHUNK_VERSION: u8 = 1;
/// Length of a fingerprint.
const FP: usize = 20;

/// In-memory part of the exact set.
#[derive(Debug, Default)]
pub(super) struct Exact {
    /// Fingerprints made durable since the last checkpoint started.
    pub(super) recent: crate::fingerprint::FingerprintSet,
    /// Fingerprints a running checkpoint seals (answered from here until the
    /// state reads the index that lists their run).
    pub(super) sealing: crate::fingerprint::FingerprintSet,
    /// Sealed runs the state reads, oldest first: `(run id, fingerprints)`.
    pub(super) runs: Vec<(u64, u64)>,
    /// Runs whose chunks are on disk but not listed in the index: removed by the
    /// next checkpoint, never read.
    pub(super) garbage: Vec<u64>,
    /// Next run id: above every run id on disk, listed or not.
    pub(super) next_run: u64,
}

/// The merge tier of a run of `count` fingerprints: `log4` of its size in
/// units of [`TIER_UNIT_FPS`].
pub(super) fn tier(count: u64) -> u32 {
    let units = count.div_ceil(TIER_UNIT_FPS).max(1);
    units.ilog2() / 2
}

pub(super) fn chunk_key(run: u64, first: &[u8]) -> Vec<u8> {
    let mut key = keys::with_u64(keys::EXACT_RUN, run);
    key.extend_from_slice(first);
    key
}

/// A chunk record: the version byte, then the sorted fingerprints.
pub(super) fn encode_chunk(fps: &[Fingerprint]) -> Vec<u8> {
    let mut value = Vec::with_capacity(1 + fps.len() * FP);
    value.push(CHUNK_VERSION);
    for fp in fps {
        value.extend_from_slice(fp);
    }
    value
}

/// The fingerprints of a chunk record (versioned, or of an older state without
/// the version byte); `None` when its length fits neither.
pub(super) fn chunk_body(value: &[u8]) -> Option<&[u8]> {
    match value.len() % FP {
        0 => Some(value),
        1 if value[0] == CHUNK_VERSION => Some(&value[1..]),
        _ => None,
    }
}

/// The run index record.
pub(super) fn encode_index(runs: &[(u64, u64)]) -> Vec<u8> {
    let mut index = vec![INDEX_VERSION];
    for (run, count) in runs {
        index.extend_from_slice(&run.to_be_bytes());
        index.extend_from_slice(&count.to_be_bytes());
    }
    index
}

/// Binary search of a sorted chunk of fingerprints.
fn chunk_contains(chunk: &[u8], fp: &Fingerprint) -> bool {
    let (mut low, mut high) = (0, chunk.len() / FP);
    while low < high {
        let mid = low + (high - low) / 2;
        match chunk[mid * FP..(mid + 1) * FP].cmp(fp.as_slice()) {
            std::cmp::Ordering::Less => low = mid + 1,
            std::cmp::Ordering::Greater => high = mid,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

impl Exact {
    /// Loads the run index (one read) and finds the runs on disk it does not
    /// list (one seek per run): they are garbage, and no new run takes their ids.
    pub(super) fn load(db: &Db) -> Result<Exact, StoreError> {
        let mut exact = Exact::default();
        if let Some(value) = db.get(keys::EXACT_INDEX)? {
            let body = match value.split_first() {
                Some((&INDEX_VERSION, body)) if body.len() % 16 == 0 => body,
                _ => return Err(db.corrupt("exact run index", keys::EXACT_INDEX, "bad layout")),
            };
            for pair in body.chunks_exact(16) {
                let (id, count) = pair.split_at(8);
                let id = u64::from_be_bytes(id.try_into().unwrap_or_default());
                let count = u64::from_be_bytes(count.try_into().unwrap_or_default());
                exact.runs.push((id, count));
                exact.next_run = exact.next_run.max(id + 1);
            }
        }
        let mut from = vec![keys::EXACT_RUN];
        while let Some(entry) = db.range(from..vec![keys::EXACT_RUN + 1]).next() {
            let (key, _) = entry?;
            let run = keys::u64_after_prefix(&key)
                .ok_or_else(|| db.corrupt("exact chunk", &key, "short key"))?;
            if !exact.runs.iter().any(|&(id, _)| id == run) {
                exact.garbage.push(run);
            }
            exact.next_run = exact.next_run.max(run + 1);
            match run.checked_add(1) {
                Some(next) => from = keys::with_u64(keys::EXACT_RUN, next),
                None => break,
            }
        }
        Ok(exact)
    }

    /// True when a sealed run, the fingerprints being sealed or the recent set
    /// holds `fp`.
    pub(super) fn contains(&self, db: &Db, fp: &Fingerprint) -> Result<bool, StoreError> {
        if self.recent.contains(fp) || self.sealing.contains(fp) {
            return Ok(true);
        }
        // The answer does not depend on the order; the cost does. A lookup that
        // misses sled's cache reads a leaf, and a fingerprint is in one run at
        // most (merges never duplicate one), so the largest run, which holds
        // most of them, is read first: a duplicate is then found after about one
        // read instead of one per smaller, newer run before it.
        let mut order: Vec<(u64, u64)> = self.runs.clone();
        order.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        for &(run, _) in &order {
            let start = keys::with_u64(keys::EXACT_RUN, run);
            let end = chunk_key(run, fp);
            let Some(entry) = db.range(start..=end).next_back() else {
                continue;
            };
            let (key, chunk) = entry?;
            let body = chunk_body(&chunk).ok_or_else(|| {
                db.corrupt(
                    "exact chunk",
                    &key,
                    "length is not a version byte and a multiple of 20",
                )
            })?;
            if chunk_contains(body, fp) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_search_finds_exactly_the_members() {
        let fps: Vec<Fingerprint> = (0..100u8).map(|n| [n.wrapping_mul(2); FP]).collect();
        let chunk = fps.concat();
        assert!(fps.iter().all(|fp| chunk_contains(&chunk, fp)));
        assert!(!chunk_contains(&chunk, &[1; FP]));
        assert!(!chunk_contains(&chunk, &[255; FP]));
        assert!(!chunk_contains(&[], &[0; FP]));
    }

    #[test]
    fn tiers_group_runs_by_log4_of_their_chunks() {
        assert_eq!(tier(1), 0);
        assert_eq!(tier(3 * TIER_UNIT_FPS), 0);
        assert_eq!(tier(4 * TIER_UNIT_FPS), 1);
        assert_eq!(tier(16 * TIER_UNIT_FPS), 2);
    }
}
