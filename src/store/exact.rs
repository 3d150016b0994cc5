//! The exact seen set of `exact` dedup mode, kept as sorted runs of fingerprints.
//!
//! Writing one sled key per fingerprint made the exact set the largest cost of a
//! completion (sled 0.34 clones a leaf per insert). Instead:
//! - fingerprints committed since the last checkpoint are exactly the ones in the
//!   Bloom journal; they are kept in memory ([`Exact::recent`]) and rebuilt from the
//!   journal on open;
//! - a checkpoint *seals* them into a run: sorted chunks of at most [`CHUNK_FPS`]
//!   fingerprints under `S · run id · first fingerprint`, listed in the run index
//!   (`e`), in the same batch that truncates the journal;
//! - runs are merged size-tiered: when [`MERGE_FANOUT`] runs share a tier
//!   (`log4` of their size in chunks) they become one, so a fingerprint is rewritten
//!   about `log4(total / seal)` times and a lookup reads at most
//!   `(MERGE_FANOUT - 1)` chunks per tier, one sled range read each.
//!
//! Invariant: the exact set never holds a fingerprint whose journal entry was not
//! durable first (it only seals what commits made durable). A crash between the
//! batches of a large merge leaves unreferenced chunks (space only, never read).
//! Depends on [`crate::fingerprint`] and the state's key layout.

use super::{State, StoreError, keys};
use crate::fingerprint::Fingerprint;

/// Fingerprints per chunk record at most.
pub const CHUNK_FPS: usize = 4096;
/// Runs of one tier merged into one.
pub const MERGE_FANOUT: usize = 4;
/// Chunk records written per batch while sealing or merging.
const CHUNKS_PER_BATCH: usize = 64;
/// Version byte of the run index record.
const INDEX_VERSION: u8 = 1;
/// Length of a fingerprint.
const FP: usize = 20;

/// In-memory part of the exact set.
#[derive(Debug, Default)]
pub(super) struct Exact {
    /// Fingerprints committed since the last seal.
    pub(super) recent: crate::fingerprint::FingerprintSet,
    /// Sealed runs, oldest first: `(run id, fingerprints)`.
    pub(super) runs: Vec<(u64, u64)>,
    /// Next run id.
    next_run: u64,
}

fn tier(count: u64) -> u32 {
    let chunks = count.div_ceil(CHUNK_FPS as u64).max(1);
    chunks.ilog2() / 2
}

fn chunk_key(run: u64, first: &[u8]) -> Vec<u8> {
    let mut key = keys::with_u64(keys::EXACT_RUN, run);
    key.extend_from_slice(first);
    key
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

impl State {
    /// Loads the run index (one read).
    pub(super) fn load_exact(&mut self) -> Result<(), StoreError> {
        let Some(value) = self
            .db
            .get(keys::EXACT_INDEX)
            .map_err(|e| self.db_error(e))?
        else {
            return Ok(());
        };
        let body = match value.split_first() {
            Some((&INDEX_VERSION, body)) if body.len() % 16 == 0 => body,
            _ => return Err(self.corrupt("exact run index", keys::EXACT_INDEX, "bad layout")),
        };
        for pair in body.chunks_exact(16) {
            let (id, count) = pair.split_at(8);
            let id = u64::from_be_bytes(id.try_into().unwrap_or_default());
            let count = u64::from_be_bytes(count.try_into().unwrap_or_default());
            self.exact.runs.push((id, count));
            self.exact.next_run = self.exact.next_run.max(id + 1);
        }
        Ok(())
    }

    /// True when a sealed run or the recent set holds `fp`.
    pub(super) fn exact_contains(&self, fp: &Fingerprint) -> Result<bool, StoreError> {
        if self.exact.recent.contains(fp) {
            return Ok(true);
        }
        for &(run, _) in self.exact.runs.iter().rev() {
            let start = keys::with_u64(keys::EXACT_RUN, run);
            let end = chunk_key(run, fp);
            let Some(entry) = self.db.range(start..=end).next_back() else {
                continue;
            };
            let (key, chunk) = entry.map_err(|e| self.db_error(e))?;
            if chunk.len() % FP != 0 {
                return Err(self.corrupt("exact chunk", &key, "length is not a multiple of 20"));
            }
            if chunk_contains(&chunk, fp) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Seals the recent fingerprints into a run and merges full tiers. New chunks
    /// are written in their own batches; the index update and the removal of merged
    /// runs go into `batch`, which the caller applies with the journal truncation.
    pub(super) fn seal_exact(&mut self, batch: &mut sled::Batch) -> Result<(), StoreError> {
        if self.exact.recent.is_empty() {
            return Ok(());
        }
        let mut fps: Vec<Fingerprint> = self.exact.recent.iter().copied().collect();
        fps.sort_unstable();
        let mut runs = self.exact.runs.clone();
        loop {
            let top = tier(fps.len() as u64);
            let same = runs.iter().rev().take_while(|r| tier(r.1) == top).count();
            if same + 1 < MERGE_FANOUT {
                break;
            }
            for (run, _) in runs.split_off(runs.len() - same) {
                self.read_run(run, &mut fps, batch)?;
            }
            fps.sort_unstable();
            fps.dedup();
        }
        let id = self.exact.next_run;
        self.write_run(id, &fps)?;
        runs.push((id, fps.len() as u64));
        let mut index = vec![INDEX_VERSION];
        for (run, count) in &runs {
            index.extend_from_slice(&run.to_be_bytes());
            index.extend_from_slice(&count.to_be_bytes());
        }
        batch.insert(keys::EXACT_INDEX, index);
        self.exact.next_run = id + 1;
        self.exact.runs = runs;
        Ok(())
    }

    /// Called once `seal_exact`'s batch is durable.
    pub(super) fn sealed_exact(&mut self) {
        self.exact.recent.clear();
    }

    /// Appends every fingerprint of `run` to `fps` and removes its chunks in `batch`.
    fn read_run(
        &self,
        run: u64,
        fps: &mut Vec<Fingerprint>,
        batch: &mut sled::Batch,
    ) -> Result<(), StoreError> {
        for entry in self.db.scan_prefix(keys::with_u64(keys::EXACT_RUN, run)) {
            let (key, chunk) = entry.map_err(|e| self.db_error(e))?;
            if chunk.len() % FP != 0 {
                return Err(self.corrupt("exact chunk", &key, "length is not a multiple of 20"));
            }
            for fp in chunk.chunks_exact(FP) {
                let mut one = [0u8; FP];
                one.copy_from_slice(fp);
                fps.push(one);
            }
            batch.remove(key);
        }
        Ok(())
    }

    /// Writes the sorted `fps` as the chunks of run `id`.
    fn write_run(&self, id: u64, fps: &[Fingerprint]) -> Result<(), StoreError> {
        for group in fps.chunks(CHUNK_FPS * CHUNKS_PER_BATCH) {
            let mut batch = sled::Batch::default();
            for chunk in group.chunks(CHUNK_FPS) {
                batch.insert(chunk_key(id, &chunk[0]), chunk.concat());
            }
            self.db.apply_batch(batch).map_err(|e| self.db_error(e))?;
        }
        Ok(())
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
        assert_eq!(tier(3 * CHUNK_FPS as u64), 0);
        assert_eq!(tier(4 * CHUNK_FPS as u64), 1);
        assert_eq!(tier(16 * CHUNK_FPS as u64), 2);
    }
}
