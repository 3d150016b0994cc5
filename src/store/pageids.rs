//! The page-id index: the id of each recorded page by its fingerprint, which
//! `pages` needs to find a page's block. It is kept outside sled, as the exact
//! seen set is, so that memory does not grow with the pages
//! (`docs/state.md`, *Memory*):
//! - the blocks (`P`) hold each page's fingerprint next to its id, so the
//!   index is derived data: ids below the *watermark* are in sorted runs of
//!   (fingerprint, id) (`runs/{id:016x}.ids`, see `sorted`), and ids from it on
//!   are in memory ([`PageIds::recent`]), rebuilt from the blocks on open;
//! - a checkpoint (see `checkpoint`) seals the recent ids into a run and lists
//!   it with the new watermark in the index record (`k`), in the batch that
//!   switches the exact set's index;
//! - a damaged run file (on open: missing, cut short, a bad header; by
//!   `legcrawl repair`: a bad checksum) makes the whole index be written again
//!   from the blocks ([`PageIds::rebuild`]), with a warning.
//!
//! Invariants: a run or the index never lists an id whose block was not
//! durable first; ids of durable groups are below those of any group not yet
//! durable; unlisted run files are garbage, and run ids are never reused (see
//! `sorted`). Depends on `sorted`, `runfile`, `pageblock`, `keys`, `table`,
//! `error`, [`crate::fingerprint`] and [`crate::crash`].

use super::error::StoreError;
use super::keys;
use super::pageblock::{Block, PAGE_BY_ID};
use super::runfile::Kind;
use super::sorted::{Listing, SealJob, Sealed, SortedRuns, record};
use super::table::{Batch, Codec, Db, Durability, Table};
use crate::crash;
use crate::fingerprint::{Fingerprint, FingerprintMap};

/// The index record (one key `k`): the watermark (ids below it are in the
/// listed runs) and the runs, oldest first.
pub(super) const INDEX: Table<(), IdsIndex> = Table::new(b'k', "page id index");
/// Recent ids that make a checkpoint due (and hold new completions back while
/// one runs, see [`super::State::checkpoint_behind`]): 2^17 entries of 28
/// bytes in a hash map, about 6 MiB, and as many again sorted while sealed.
pub(super) const IDS_MAX_RECENT: usize = 1 << 17;

/// The index record: a version byte, the watermark, then (run id, ids)
/// pairs, all u64 big-endian.
pub(super) struct IdsIndex;

impl IdsIndex {
    const VERSION: u8 = 1;
}

impl Codec for IdsIndex {
    type Value = (u64, Listing);

    fn encode((watermark, runs): &(u64, Listing)) -> Vec<u8> {
        let mut value = Vec::with_capacity(9 + runs.len() * 16);
        value.push(Self::VERSION);
        value.extend_from_slice(&watermark.to_be_bytes());
        for (run, count) in runs {
            value.extend_from_slice(&run.to_be_bytes());
            value.extend_from_slice(&count.to_be_bytes());
        }
        value
    }

    fn decode(value: &[u8]) -> Result<(u64, Listing), String> {
        let words = match value.split_first() {
            Some((&Self::VERSION, rest)) if rest.len() % 16 == 8 => rest.chunks_exact(8),
            _ => return Err("bad layout".into()),
        };
        let mut words = words.map(|word| {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            u64::from_be_bytes(w)
        });
        let watermark = words.next().unwrap_or_default();
        let mut runs = Vec::new();
        while let (Some(run), Some(count)) = (words.next(), words.next()) {
            runs.push((run, count));
        }
        Ok((watermark, runs))
    }
}

/// The (fingerprint, id) pairs of the page blocks from the key `start` on, a
/// block at a time, in id order.
fn blocks_from(
    db: &Db,
    start: Vec<u8>,
) -> impl Iterator<Item = Result<Vec<(Fingerprint, u64)>, StoreError>> + '_ {
    db.range(start..vec![PAGE_BY_ID + 1]).map(move |entry| {
        let (key, value) = entry?;
        let block = Block::stored(db, &key, &value)?;
        Ok((block.first..)
            .zip(block.entries)
            .map(|(id, (fp, _))| (fp, id))
            .collect())
    })
}

/// A damaged run file as the rebuild's warning names it (`path: reason`);
/// any other error is returned.
fn what_is_damaged(error: StoreError) -> Result<String, StoreError> {
    match error {
        StoreError::RunDamaged { path, reason } => Ok(format!("{}: {reason}", path.display())),
        other => Err(other),
    }
}

/// The page-id index (see the module doc).
#[derive(Debug)]
pub(super) struct PageIds {
    /// Ids below it are in the runs the index on disk lists.
    watermark: u64,
    /// Ids below it are in the runs or in [`PageIds::sealing`]; ids of durable
    /// groups from it on go to [`PageIds::recent`].
    floor: u64,
    /// Ids made durable since the last checkpoint started.
    recent: FingerprintMap<u64>,
    /// The ids a running checkpoint seals, sorted (answered from here until
    /// the state reads the index that lists their run).
    sealing: std::sync::Arc<Vec<(Fingerprint, u64)>>,
    /// The sealed runs.
    runs: SortedRuns,
    /// A checkpoint seals [`PageIds::sealing`].
    checkpointing: bool,
}

/// A checkpoint's share of the page-id index, detached with it.
#[derive(Debug)]
pub(super) struct IdsJob {
    /// The recent ids, sorted; empty when only garbage waits.
    seal: std::sync::Arc<Vec<(Fingerprint, u64)>>,
    /// The watermark the index says once the seal is listed.
    watermark: u64,
    /// The run to write.
    job: SealJob,
}

/// What the checkpoint did with an [`IdsJob`].
#[derive(Debug)]
pub(super) struct IdsDone {
    /// The watermark the index on disk says now.
    watermark: u64,
    /// The runs it lists.
    sealed: Sealed,
}

impl IdsJob {
    /// Writes the sealed ids as a run (merged with full tiers, the garbage
    /// removed first; see `sorted`) and puts the index record that lists it
    /// into `batch`. Runs on the checkpoint's thread.
    pub(super) fn run(self, batch: &mut Batch) -> Result<IdsDone, StoreError> {
        let records = self.seal.iter().map(|(fp, id)| record(fp, *id));
        let sealed = self.job.run(records, self.seal.len() as u64)?;
        if sealed.wrote_run() {
            INDEX.put(batch, &(), &(self.watermark, sealed.listed.clone()));
        }
        Ok(IdsDone {
            watermark: self.watermark,
            sealed,
        })
    }
}

impl PageIds {
    /// Loads the index: its record, its run files (headers and lengths
    /// checked), the run files it does not list (garbage), and the ids of the
    /// blocks from its watermark on, read into memory. `blocks_end` is the id
    /// after the last stored block's.
    pub(super) fn load(db: &Db, blocks_end: u64) -> Result<PageIds, StoreError> {
        let (watermark, listed) = INDEX.get(db, &())?.unwrap_or_default();
        let (runs, damage) = SortedRuns::open(db.dir(), Kind::PageIds, listed)?;
        let mut ids = PageIds {
            watermark,
            floor: watermark,
            recent: FingerprintMap::default(),
            sealing: Default::default(),
            runs,
            checkpointing: false,
        };
        if let Some(damage) = damage {
            // A reader beside the crawl repairs nothing (a checkpoint may
            // have merged a run away since the index was read: it asks again).
            if db.is_reader() {
                return Err(damage);
            }
            let damage = what_is_damaged(damage)?;
            let pages = ids.rebuild(db, blocks_end)?;
            tracing::warn!(
                "{damage}; rebuilt the page-id index from the page records ({pages} pages)"
            );
        }
        ids.read_blocks(db)?;
        Ok(ids)
    }

    /// Reads every listed run file whole against its checksum and order (what
    /// `legcrawl repair` does); a damaged one has the index rebuilt (see
    /// [`PageIds::rebuild`]). Returns the damage found and the pages indexed
    /// again, or `None` when all was well. No checkpoint may run.
    pub(super) fn verify(
        &mut self,
        db: &Db,
        blocks_end: u64,
    ) -> Result<Option<(String, u64)>, StoreError> {
        match self.runs.verify() {
            Ok(()) => Ok(None),
            Err(error) => {
                let damage = what_is_damaged(error)?;
                Ok(Some((damage, self.rebuild(db, blocks_end)?)))
            }
        }
    }

    /// Writes the index again from the page blocks: their (fingerprint, id)
    /// pairs in chunks of [`IDS_MAX_RECENT`], each sorted and sealed as a run
    /// (merged size-tiered as a checkpoint merges), then one record lists them
    /// all with the watermark at `blocks_end` (crash point
    /// `repair.ids_index`). The runs listed before are garbage from then on;
    /// a crash before the switch leaves them listed (and the new files
    /// garbage), so the next open rebuilds again. Memory holds one chunk.
    /// Returns the number of pages indexed.
    pub(super) fn rebuild(&mut self, db: &Db, blocks_end: u64) -> Result<u64, StoreError> {
        let mut rebuilt = self.runs.successor();
        let mut chunk: Vec<(Fingerprint, u64)> = Vec::new();
        let mut pages = 0;
        let mut seal = |chunk: &mut Vec<(Fingerprint, u64)>| {
            chunk.sort_unstable();
            let records = chunk.iter().map(|(fp, id)| record(fp, *id));
            let sealed = rebuilt.start().run(records, chunk.len() as u64)?;
            rebuilt.switched(sealed);
            chunk.clear();
            Ok::<_, StoreError>(())
        };
        for block in blocks_from(db, vec![PAGE_BY_ID]) {
            let block = block?;
            pages += block.len() as u64;
            chunk.extend(block);
            if chunk.len() >= IDS_MAX_RECENT {
                seal(&mut chunk)?;
            }
        }
        if !chunk.is_empty() {
            seal(&mut chunk)?;
        }
        let mut batch = Batch::default();
        INDEX.put(&mut batch, &(), &(blocks_end, rebuilt.listed().to_vec()));
        crash::point("repair.ids_index");
        db.commit_now(batch, Durability::Synced(|| ()))?;
        self.runs.adopt(rebuilt);
        self.watermark = blocks_end;
        self.floor = blocks_end;
        self.recent.clear();
        Ok(pages)
    }

    /// Reads the ids of the blocks from the watermark on into `recent`.
    fn read_blocks(&mut self, db: &Db) -> Result<(), StoreError> {
        let from = keys::with_u64(PAGE_BY_ID, self.watermark);
        // The block holding the watermark may start before it.
        let start = match db.range(vec![PAGE_BY_ID]..from.clone()).next_back() {
            Some(entry) => entry?.0.to_vec(),
            None => from,
        };
        for pages in blocks_from(db, start) {
            for (fp, id) in pages? {
                if id >= self.watermark {
                    self.recent.insert(fp, id);
                }
            }
        }
        Ok(())
    }

    /// The id of `fp`'s page among the durable ones, if it has one.
    pub(super) fn get(&self, fp: &Fingerprint) -> Option<u64> {
        if let Some(&id) = self.recent.get(fp) {
            return Some(id);
        }
        if let Ok(at) = self.sealing.binary_search_by(|(other, _)| other.cmp(fp)) {
            return Some(self.sealing[at].1);
        }
        self.runs.page_id(fp)
    }

    /// The pages of a group that became durable, with their ids: those not
    /// sealed yet join the recent ids.
    pub(super) fn durable(&mut self, pages: impl Iterator<Item = (Fingerprint, u64)>) {
        for (fp, id) in pages {
            if id >= self.floor {
                self.recent.insert(fp, id);
            }
        }
    }

    /// Recent ids waiting for a checkpoint.
    pub(super) fn recent_len(&self) -> usize {
        self.recent.len()
    }

    /// True when a checkpoint has something to do here: ids to seal, or run
    /// files to remove.
    pub(super) fn waiting(&self) -> bool {
        !self.recent.is_empty() || self.runs.has_garbage()
    }

    /// Detaches this index's share of a checkpoint: the recent ids, sorted,
    /// are answered from [`PageIds::sealing`] until it ends. `None` when one
    /// runs already or nothing waits.
    pub(super) fn start_seal(&mut self) -> Option<IdsJob> {
        if self.checkpointing || !self.waiting() {
            return None;
        }
        let mut seal: Vec<(Fingerprint, u64)> = self.recent.drain().collect();
        seal.sort_unstable();
        // Durable ids are below every id not yet durable, so all of them up to
        // the largest sealed one are in a run once this is listed.
        let watermark = seal
            .iter()
            .map(|&(_, id)| id + 1)
            .max()
            .unwrap_or(self.watermark)
            .max(self.watermark);
        self.sealing = std::sync::Arc::new(seal);
        self.floor = watermark;
        self.checkpointing = true;
        Some(IdsJob {
            seal: std::sync::Arc::clone(&self.sealing),
            watermark,
            job: self.runs.start(),
        })
    }

    /// The checkpoint listed the sealed ids: the new index is read from now
    /// on, and the runs it merged wait for the next checkpoint to remove them.
    pub(super) fn checkpointed(&mut self, done: IdsDone) {
        self.runs.switched(done.sealed);
        self.watermark = done.watermark;
        self.sealing = Default::default();
        self.checkpointing = false;
    }

    /// The checkpoint failed: what it sealed is recent again.
    pub(super) fn checkpoint_failed(&mut self) {
        if !self.checkpointing {
            return;
        }
        let sealing = std::mem::take(&mut self.sealing);
        self.recent.extend(sealing.iter().copied());
        self.floor = self.watermark;
        self.checkpointing = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_records_round_trip() {
        let value = IdsIndex::encode(&(77, vec![(1, 10), (5, 300)]));
        assert_eq!(IdsIndex::decode(&value), Ok((77, vec![(1, 10), (5, 300)])));
        assert_eq!(
            IdsIndex::decode(&IdsIndex::encode(&(0, vec![]))),
            Ok((0, vec![]))
        );
        assert!(IdsIndex::decode(&value[..value.len() - 1]).is_err());
        assert!(IdsIndex::decode(&[9]).is_err());
    }
}
