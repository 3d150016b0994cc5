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
//! Invariant: the exact set never holds a fingerprint whose journal entry was not
//! durable first (it only seals what commits made durable). Only runs listed in
//! the index are read; runs on disk the index does not list (a crash before the
//! index switch, or runs merged away) are found on open and removed by the next
//! checkpoint, and a run id is never reused, so a lookup never lands on one of
//! them. Depends on [`crate::fingerprint`], `runfile` and the state's key layout.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::StoreError;
use super::keys;
use super::runfile::{self, RunFile};
use super::table::Db;
use crate::fingerprint::Fingerprint;

/// Fingerprints per unit of run size for [`tier`]: the chunk size the tiers
/// were defined with, kept when chunks became smaller so that the runs of an
/// existing state keep their tiers (and merge when they did).
const TIER_UNIT_FPS: u64 = 4096;
/// Runs of one tier merged into one.
pub(super) const MERGE_FANOUT: usize = 4;
/// Version byte of the run index record (its entries carry a place byte, as
/// when some runs were kept in sled; every run is a file now).
const INDEX_VERSION: u8 = 2;
/// The place byte of a run in an index entry: a file in `runs/`.
const PLACE_FILE: u8 = 1;

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
    /// The files of [`Exact::runs`], mapped.
    pub(super) files: HashMap<u64, Arc<RunFile>>,
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

/// The run index record: each run (a file in `runs/`) with its size.
pub(super) fn encode_index(runs: &[(u64, u64)]) -> Vec<u8> {
    let mut index = Vec::with_capacity(1 + runs.len() * 17);
    index.push(INDEX_VERSION);
    for (run, count) in runs {
        index.extend_from_slice(&run.to_be_bytes());
        index.extend_from_slice(&count.to_be_bytes());
        index.push(PLACE_FILE);
    }
    index
}

/// The entries of a run index record: `(run id, fingerprints)`, oldest
/// first; `None` for any other layout (a run kept in sled, as states before
/// 2026-12-03 kept some, included).
pub(super) fn decode_index(value: &[u8]) -> Option<Vec<(u64, u64)>> {
    let (&INDEX_VERSION, body) = value.split_first()? else {
        return None;
    };
    if body.len() % 17 != 0 {
        return None;
    }
    body.chunks_exact(17)
        .map(|entry| {
            let id = u64::from_be_bytes(entry[..8].try_into().ok()?);
            let count = u64::from_be_bytes(entry[8..16].try_into().ok()?);
            (entry[16] == PLACE_FILE).then_some((id, count))
        })
        .collect()
}

impl Exact {
    /// Loads the run index (one read), opens the run files it lists (their
    /// headers and lengths are checked, see `runfile`) and finds the run
    /// files it does not list (one listing of `runs/`): they are garbage, and
    /// no new run takes their ids.
    pub(super) fn load(db: &Db) -> Result<Exact, StoreError> {
        let mut exact = Exact::default();
        if let Some(value) = db.get(keys::EXACT_INDEX)? {
            let entries = decode_index(&value)
                .ok_or_else(|| db.corrupt("exact run index", keys::EXACT_INDEX, "bad layout"))?;
            for (id, count) in entries {
                exact.runs.push((id, count));
                exact.next_run = exact.next_run.max(id + 1);
                let run = RunFile::open(db.dir(), id, count)?;
                exact.files.insert(id, Arc::new(run));
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
        !self.garbage_files.is_empty()
    }

    /// True when a sealed run, the fingerprints being sealed or the recent set
    /// holds `fp`.
    pub(super) fn contains(&self, fp: &Fingerprint) -> bool {
        if self.recent.contains(fp) || self.sealing.contains(fp) {
            return true;
        }
        // The answer does not depend on the order; the cost does. A lookup that
        // misses the page cache reads from disk, and a fingerprint is in one run at most
        // (merges never duplicate one), so the largest run, which holds most of
        // them, is searched first: a duplicate is then found after about one
        // search instead of one per smaller, newer run before it. The rest
        // follow newest first; nothing is allocated (this runs for every
        // Bloom "maybe").
        let largest = self.runs.iter().max_by_key(|(run, count)| (*count, *run));
        largest
            .into_iter()
            .chain(
                self.runs
                    .iter()
                    .rev()
                    .filter(|entry| Some(*entry) != largest),
            )
            .filter_map(|(run, _)| self.files.get(run))
            .any(|file| file.contains(fp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_group_runs_by_log4_of_their_chunks() {
        assert_eq!(tier(1), 0);
        assert_eq!(tier(3 * TIER_UNIT_FPS), 0);
        assert_eq!(tier(4 * TIER_UNIT_FPS), 1);
        assert_eq!(tier(16 * TIER_UNIT_FPS), 2);
    }
}
