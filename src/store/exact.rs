//! The exact seen set of `exact` dedup mode, kept as sorted runs of
//! fingerprints, not as sled keys.
//!
//! - Fingerprints committed since the last checkpoint are exactly the ones in
//!   the Bloom journal; they are kept in memory ([`Exact::recent`]) and rebuilt
//!   from the journal on open.
//! - A checkpoint (see `checkpoint`) *seals* them into a run (see `sorted`),
//!   then lists the run in the run index (`e`) in the batch that truncates the
//!   journal.
//!
//! Invariant: the exact set never holds a fingerprint whose journal entry was
//! not durable first. Depends on `sorted`, `runfile`, `table`, `error` and
//! [`crate::fingerprint`].

use super::error::StoreError;
use super::runfile::Kind;
use super::sorted::{Listing, SealJob, Sealed, SortedRuns, record};
use super::table::{Batch, Codec, Db, Table};
use crate::fingerprint::{Fingerprint, FingerprintSet};

/// The run index (one key `e`): the sealed runs, oldest first.
pub(super) const INDEX: Table<(), RunIndex> = Table::new(b'e', "exact run index");

/// The run index record: a version byte, then per run its id, its
/// fingerprints (u64 each, big-endian) and a place byte.
pub(super) struct RunIndex;

impl RunIndex {
    /// Version byte of the record (each entry carries a place byte).
    const VERSION: u8 = 2;
    /// The place byte of a run in an index entry: a file in `runs/`.
    const PLACE_FILE: u8 = 1;
}

impl Codec for RunIndex {
    type Value = Listing;

    fn encode(runs: &Listing) -> Vec<u8> {
        let mut index = Vec::with_capacity(1 + runs.len() * 17);
        index.push(Self::VERSION);
        for (run, count) in runs {
            index.extend_from_slice(&run.to_be_bytes());
            index.extend_from_slice(&count.to_be_bytes());
            index.push(Self::PLACE_FILE);
        }
        index
    }

    fn decode(value: &[u8]) -> Result<Listing, String> {
        let bad = || "bad layout".to_owned();
        let (&Self::VERSION, body) = value.split_first().ok_or_else(bad)? else {
            return Err(bad());
        };
        if body.len() % 17 != 0 {
            return Err(bad());
        }
        body.chunks_exact(17)
            .map(|entry| {
                let word = |at: usize| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&entry[at..at + 8]);
                    u64::from_be_bytes(w)
                };
                (entry[16] == Self::PLACE_FILE)
                    .then(|| (word(0), word(8)))
                    .ok_or_else(bad)
            })
            .collect()
    }
}

/// The runs the stored index lists (none without one).
pub(super) fn listed(db: &Db) -> Result<Listing, StoreError> {
    Ok(INDEX.get(db, &())?.unwrap_or_default())
}

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

impl Exact {
    /// Loads the run index (one read) and opens its runs; a damaged run file
    /// is refused ([`StoreError::RunDamaged`]).
    pub(super) fn load(db: &Db) -> Result<Exact, StoreError> {
        let (runs, damage) = SortedRuns::open(db.dir(), Kind::Seen, listed(db)?)?;
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
        let records = seal.iter().map(|fp| record(fp, 0));
        let done = job.run(records, seal.len() as u64)?;
        if done.wrote_run() {
            INDEX.put(batch, &(), &done.listed);
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
        let value = RunIndex::encode(&vec![(1, 10), (5, 300)]);
        assert_eq!(RunIndex::decode(&value), Ok(vec![(1, 10), (5, 300)]));
        assert_eq!(RunIndex::decode(&RunIndex::encode(&vec![])), Ok(vec![]));
        assert!(RunIndex::decode(&value[..value.len() - 1]).is_err());
        assert!(RunIndex::decode(&[9]).is_err());
    }
}
