//! The exact seen set of `exact` dedup mode, kept as sorted runs of fingerprints.
//!
//! Writing one sled key per fingerprint made the exact set the largest cost of a
//! completion (sled 0.34 clones a leaf per insert). Instead:
//! - fingerprints committed since the last checkpoint are exactly the ones in the
//!   Bloom journal; they are kept in memory ([`Exact::recent`]) and rebuilt from the
//!   journal on open;
//! - a checkpoint (see `checkpoint`) *seals* them into a run (see `sorted`: files
//!   of sorted fingerprints in `runs/`, merged size-tiered), then lists the run in
//!   the run index (`e`) in the batch that truncates the journal.
//!
//! Invariant: the exact set never holds a fingerprint whose journal entry was not
//! durable first (it only seals what commits made durable). Depends on
//! [`crate::fingerprint`], `sorted` and `table`.

use super::error::StoreError;
use super::runfile::Kind;
use super::sorted::{Listing, Record, SealJob, Sealed, SortedRuns};
use super::table::{Batch, Db};
use crate::fingerprint::{Fingerprint, FingerprintSet};

/// The run index (one key): [`INDEX_VERSION`], then per run its id, its
/// fingerprints (u64 each, big-endian) and a place byte.
pub(super) const INDEX: &[u8] = b"e";
/// Version byte of the run index record (its entries carry a place byte, as
/// when some runs were kept in sled; every run is a file now).
const INDEX_VERSION: u8 = 2;
/// The place byte of a run in an index entry: a file in `runs/`.
const PLACE_FILE: u8 = 1;

/// In-memory part of the exact set.
#[derive(Debug)]
pub(super) struct Exact {
    /// Fingerprints made durable since the last checkpoint started.
    pub(super) recent: FingerprintSet,
    /// Fingerprints a running checkpoint seals (answered from here until the
    /// state reads the index that lists their run).
    sealing: FingerprintSet,
    /// The sealed runs.
    pub(super) runs: SortedRuns,
}

/// The run index record: each run (a file in `runs/`) with its size.
fn encode_index(runs: &[(u64, u64)]) -> Vec<u8> {
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
/// first; `None` for any other layout.
pub(super) fn decode_index(value: &[u8]) -> Option<Listing> {
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
    /// Loads the run index (one read) and opens its runs; a damaged run file
    /// is refused ([`StoreError::RunDamaged`]).
    pub(super) fn load(db: &Db) -> Result<Exact, StoreError> {
        let listed = match db.get(INDEX)? {
            Some(value) => decode_index(&value)
                .ok_or_else(|| db.corrupt("exact run index", INDEX, "bad layout"))?,
            None => Vec::new(),
        };
        let (runs, damage) = SortedRuns::open(db.dir(), Kind::Seen, listed)?;
        if let Some(damage) = damage {
            return Err(damage);
        }
        Ok(Exact {
            recent: FingerprintSet::default(),
            sealing: FingerprintSet::default(),
            runs,
        })
    }

    /// True when a sealed run, the fingerprints being sealed or the recent set
    /// holds `fp`.
    pub(super) fn contains(&self, fp: &Fingerprint) -> bool {
        self.recent.contains(fp) || self.sealing.contains(fp) || self.runs.contains(fp)
    }

    /// Detaches a checkpoint's share: the recent fingerprints, sorted (answered
    /// from [`Exact::sealing`] until it ends), and the job that writes them.
    pub(super) fn start_seal(&mut self) -> (Vec<Fingerprint>, SealJob) {
        self.sealing = std::mem::take(&mut self.recent);
        let mut seal: Vec<Fingerprint> = self.sealing.iter().copied().collect();
        seal.sort_unstable();
        (seal, self.runs.start())
    }

    /// Runs `job` over `seal` (on the checkpoint's thread) and puts the new
    /// index record into `batch` when the listing changed.
    pub(super) fn seal(
        job: SealJob,
        seal: &[Fingerprint],
        batch: &mut Batch,
    ) -> Result<Sealed, StoreError> {
        let records = seal.iter().map(|fp| {
            let mut record: Record = [0; super::sorted::RECORD];
            record[..20].copy_from_slice(fp);
            record
        });
        let done = job.run(records, seal.len() as u64)?;
        if done.wrote_run() {
            batch.put(INDEX, encode_index(&done.listed));
        }
        Ok(done)
    }

    /// The checkpoint's index is on disk.
    pub(super) fn sealed(&mut self, done: Sealed) {
        self.runs.switched(done);
        self.sealing.clear();
    }

    /// The checkpoint failed: what it sealed is recent again; returns how
    /// many fingerprints that is.
    pub(super) fn seal_failed(&mut self) -> u64 {
        let sealing = std::mem::take(&mut self.sealing);
        self.recent.extend(sealing.iter().copied());
        sealing.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_records_round_trip() {
        let value = encode_index(&[(1, 10), (5, 300)]);
        assert_eq!(decode_index(&value), Some(vec![(1, 10), (5, 300)]));
        assert_eq!(decode_index(&encode_index(&[])), Some(vec![]));
        assert_eq!(decode_index(&value[..value.len() - 1]), None);
        assert_eq!(decode_index(&[9]), None);
    }
}
