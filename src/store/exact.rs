//! The exact seen set of `exact` dedup mode, kept as sorted runs of fingerprints.
//!
//! Writing one sled key per fingerprint made the exact set the largest cost of a
//! completion (sled 0.34 clones a leaf per insert). Instead:
//! - fingerprints committed since the last checkpoint are exactly the ones in the
//!   Bloom journal; they are kept in memory ([`Exact::recent`]) and rebuilt from the
//!   journal on open;
//! - a checkpoint (see `checkpoint`) *seals* them into a run: a file of sorted
//!   fingerprints (`runs/`, see `runfile`), then lists the run in the run index
//!   (`e`) in the batch that truncates the journal;
//! - runs are merged size-tiered: when [`MERGE_FANOUT`] runs share a tier
//!   (`log4` of their size in units of 4,096 fingerprints) they become one, so a
//!   fingerprint is rewritten about `log4(total / seal)` times and a lookup
//!   searches at most `(MERGE_FANOUT - 1)` runs per tier.
//!
//! States written before run files (up to 2026-12-03) keep their runs in sled:
//! sorted chunks of at most 4,096 fingerprints under `S · run id · first
//! fingerprint`. They are read as they are, and become a file when they merge.
//!
//! Invariant: the exact set never holds a fingerprint whose journal entry was not
//! durable first (it only seals what commits made durable). Only runs listed in
//! the index are read; runs on disk the index does not list (a crash before the
//! index switch, or runs merged away) are found on open and removed by the next
//! checkpoint, and a run id is never reused, so a lookup never lands on one of
//! them. Depends on [`crate::fingerprint`], `runfile` and the state's key layout.

use std::collections::HashMap;
use std::sync::Arc;

use super::runfile::{self, RunFile};
use super::table::Db;
use super::{StoreError, keys};
use crate::fingerprint::Fingerprint;

/// Fingerprints per chunk record at most in the runs the last version that
/// kept runs in sled wrote (2.5 KB; 4,096 before that). Readers take chunks of
/// any size: a lookup reads the chunk whose first fingerprint is the greatest
/// not above the one looked up. (Why runs left sled: see `runfile`; why
/// chunks had become small: sled 0.34 writes a leaf over a quarter of its
/// 512 KiB segment as a blob, and its cache counts a blob at its ~20-byte
/// pointer, so 80 KB chunks made leaves that were never evicted.)
#[cfg(test)]
pub(super) const CHUNK_FPS: usize = 128;
/// Fingerprints per unit of run size for [`tier`]: the chunk size the tiers
/// were defined with, kept when chunks became smaller so that the runs of an
/// existing state keep their tiers (and merge when they did).
const TIER_UNIT_FPS: u64 = 4096;
/// Runs of one tier merged into one.
pub(super) const MERGE_FANOUT: usize = 4;
/// Version byte of a run index record that lists runs kept in sled only.
const INDEX_SLED: u8 = 1;
/// Version byte of a run index record whose entries say where each run is.
const INDEX_VERSION: u8 = 2;
/// Where a run is, in an index entry of [`INDEX_VERSION`]: chunks in sled...
const PLACE_SLED: u8 = 0;
/// ...or a file in `runs/`.
const PLACE_FILE: u8 = 1;
/// Version byte of a chunk record.
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
    /// The runs of [`Exact::runs`] that are files, mapped; the others are
    /// chunks in sled.
    pub(super) files: HashMap<u64, Arc<RunFile>>,
    /// Runs whose chunks are in sled but not listed in the index: removed by
    /// the next checkpoint, never read.
    pub(super) garbage: Vec<u64>,
    /// Run files in `runs/` the index does not list: removed by the next
    /// checkpoint, never read.
    pub(super) garbage_files: Vec<u64>,
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
#[cfg(test)]
pub(super) fn encode_chunk(fps: &[Fingerprint]) -> Vec<u8> {
    let mut value = Vec::with_capacity(1 + fps.len() * FP);
    value.push(CHUNK_VERSION);
    for fp in fps {
        value.extend_from_slice(fp);
    }
    value
}

/// The fingerprints of a chunk record; `None` for any other layout.
pub(super) fn chunk_body(value: &[u8]) -> Option<&[u8]> {
    match value.split_first() {
        Some((&CHUNK_VERSION, body)) if body.len() % FP == 0 => Some(body),
        _ => None,
    }
}

/// The run index record: each run with its size and place.
pub(super) fn encode_index(runs: &[(u64, u64)], files: &HashMap<u64, Arc<RunFile>>) -> Vec<u8> {
    let mut index = Vec::with_capacity(1 + runs.len() * 17);
    index.push(INDEX_VERSION);
    for (run, count) in runs {
        index.extend_from_slice(&run.to_be_bytes());
        index.extend_from_slice(&count.to_be_bytes());
        index.push(if files.contains_key(run) {
            PLACE_FILE
        } else {
            PLACE_SLED
        });
    }
    index
}

/// The entries of a run index record: `(run id, fingerprints, is a file)`,
/// oldest first; `None` when the record has neither known layout.
pub(super) fn decode_index(value: &[u8]) -> Option<Vec<(u64, u64, bool)>> {
    let (&version, body) = value.split_first()?;
    let width = match version {
        INDEX_SLED => 16,
        INDEX_VERSION => 17,
        _ => return None,
    };
    if body.len() % width != 0 {
        return None;
    }
    body.chunks_exact(width)
        .map(|entry| {
            let id = u64::from_be_bytes(entry[..8].try_into().ok()?);
            let count = u64::from_be_bytes(entry[8..16].try_into().ok()?);
            match entry.get(16) {
                None | Some(&PLACE_SLED) => Some((id, count, false)),
                Some(&PLACE_FILE) => Some((id, count, true)),
                Some(_) => None,
            }
        })
        .collect()
}

/// Binary search of a sorted chunk of fingerprints.
pub(super) fn chunk_contains(chunk: &[u8], fp: &Fingerprint) -> bool {
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
    /// Loads the run index (one read), opens the run files it lists (their
    /// headers and lengths are checked, see `runfile`) and finds the runs on
    /// disk it does not list (one seek per run in sled, one listing of
    /// `runs/`): they are garbage, and no new run takes their ids.
    pub(super) fn load(db: &Db) -> Result<Exact, StoreError> {
        let mut exact = Exact::default();
        if let Some(value) = db.get(keys::EXACT_INDEX)? {
            let entries = decode_index(&value)
                .ok_or_else(|| db.corrupt("exact run index", keys::EXACT_INDEX, "bad layout"))?;
            for (id, count, file) in entries {
                exact.runs.push((id, count));
                exact.next_run = exact.next_run.max(id + 1);
                if file {
                    let run = RunFile::open(db.dir(), id, count)?;
                    exact.files.insert(id, Arc::new(run));
                }
            }
        }
        let mut from = vec![keys::EXACT_RUN];
        while let Some(entry) = db.range(from..vec![keys::EXACT_RUN + 1]).next() {
            let (key, _) = entry?;
            let run = keys::u64_after_prefix(&key)
                .ok_or_else(|| db.corrupt("exact chunk", &key, "short key"))?;
            if !exact.runs.iter().any(|&(id, _)| id == run) || exact.files.contains_key(&run) {
                exact.garbage.push(run);
            }
            exact.next_run = exact.next_run.max(run + 1);
            match run.checked_add(1) {
                Some(next) => from = keys::with_u64(keys::EXACT_RUN, next),
                None => break,
            }
        }
        for id in runfile::ids_on_disk(db.dir())? {
            if !exact.files.contains_key(&id) {
                exact.garbage_files.push(id);
            }
            exact.next_run = exact.next_run.max(id.saturating_add(1));
        }
        Ok(exact)
    }

    /// True when runs nothing reads wait for a checkpoint to remove them.
    pub(super) fn has_garbage(&self) -> bool {
        !self.garbage.is_empty() || !self.garbage_files.is_empty()
    }

    /// True when a sealed run, the fingerprints being sealed or the recent set
    /// holds `fp`.
    pub(super) fn contains(&self, db: &Db, fp: &Fingerprint) -> Result<bool, StoreError> {
        if self.recent.contains(fp) || self.sealing.contains(fp) {
            return Ok(true);
        }
        // The answer does not depend on the order; the cost does. A lookup that
        // misses the page cache (or, for an older state's run in sled, sled's
        // cache) reads from disk, and a fingerprint is in one run at most
        // (merges never duplicate one), so the largest run, which holds most of
        // them, is searched first: a duplicate is then found after about one
        // search instead of one per smaller, newer run before it.
        let mut order: Vec<(u64, u64)> = self.runs.clone();
        order.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        for &(run, _) in &order {
            if let Some(file) = self.files.get(&run) {
                if file.contains(fp) {
                    return Ok(true);
                }
                continue;
            }
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
