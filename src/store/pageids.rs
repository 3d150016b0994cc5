//! The page-id index: the id of each recorded page by its fingerprint, which
//! `pages` needs to find a page's block.
//!
//! A fingerprint is a hash, so an index keyed by it in sled gets one small
//! entry per page at a random place: sled 0.34 keeps per-node bookkeeping in
//! memory for every leaf, cached or not, and its cache counts a leaf of small
//! entries at far less than it takes in memory, so such a namespace grew the
//! process by about 130 bytes per page whatever the cache setting (see
//! `benches/sled_memory.rs`). The index lives outside sled instead, the way the
//! exact seen set does:
//! - the blocks (`P`) already hold each page's fingerprint next to its id, so
//!   the index is derived data: ids below the *watermark* are in sorted runs of
//!   (fingerprint, id) in files (`runs/{id:016x}.ids`, see `runfile`), and ids
//!   from it on are in memory ([`PageIds::recent`]), rebuilt from the blocks
//!   on open;
//! - a checkpoint (see `checkpoint`) seals the recent ids into a run, merged
//!   size-tiered like the exact set's, and lists it with the new watermark in
//!   the index record (`k`) in the batch that switches the exact set's index;
//! - a run file found damaged (on open: missing, cut short, a bad header;
//!   by `legcrawl repair`: a bad checksum) is not a lost index: the whole index
//!   is written again from the blocks ([`PageIds::rebuild`]), with a warning.
//!
//! Invariants: a run or the index never lists an id whose block was not
//! durable first (only ids of durable groups reach `recent`); ids of durable
//! groups are below those of any group not yet durable, so "every durable id
//! below the watermark is in a run" holds for the largest recent id plus one;
//! run files the index does not list are garbage, never read, removed by the
//! next checkpoint, and run ids are never reused. Depends on `runfile`,
//! `pageblock`, `table`, `keys` and `crash`.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::StoreError;
use super::pageblock::Block;
use super::runfile::{self, Kind, RunFile, RunFileWriter};
use super::table::{Batch, Db, Durability};
use super::{crash, keys};
use crate::fingerprint::{Fingerprint, FingerprintMap};

/// Recent ids that make a checkpoint due (and hold new completions back while
/// one runs, see [`super::State::checkpoint_behind`]): 2^17 entries of 28
/// bytes in a hash map, about 6 MiB, and as many again sorted while sealed.
pub(super) const IDS_MAX_RECENT: usize = 1 << 17;
/// Version byte of the index record.
const INDEX_VERSION: u8 = 1;

/// The index record: version, watermark, then (run id, ids) pairs, oldest first.
pub(super) fn encode_index(watermark: u64, runs: &[(u64, u64)]) -> Vec<u8> {
    let mut value = Vec::with_capacity(9 + runs.len() * 16);
    value.push(INDEX_VERSION);
    value.extend_from_slice(&watermark.to_be_bytes());
    for (run, count) in runs {
        value.extend_from_slice(&run.to_be_bytes());
        value.extend_from_slice(&count.to_be_bytes());
    }
    value
}

/// The watermark and runs of an index record; `None` for another layout.
pub(super) fn decode_index(value: &[u8]) -> Option<(u64, Vec<(u64, u64)>)> {
    let (&INDEX_VERSION, rest) = value.split_first()? else {
        return None;
    };
    let (watermark, body) = rest.split_first_chunk::<8>()?;
    if body.len() % 16 != 0 {
        return None;
    }
    let runs = body
        .chunks_exact(16)
        .map(|pair| {
            let (run, count) = pair.split_at(8);
            Some((
                u64::from_be_bytes(run.try_into().ok()?),
                u64::from_be_bytes(count.try_into().ok()?),
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((u64::from_be_bytes(*watermark), runs))
}

/// A run record: the fingerprint, then the id (big-endian).
pub(super) fn record(fp: &Fingerprint, id: u64) -> [u8; 28] {
    let mut record = [0u8; 28];
    record[..20].copy_from_slice(fp);
    record[20..].copy_from_slice(&id.to_be_bytes());
    record
}

/// The (fingerprint, id) pairs of the page blocks from the key `start` on, a
/// block at a time, in id order.
fn blocks_from(
    db: &Db,
    start: Vec<u8>,
) -> impl Iterator<Item = Result<Vec<(Fingerprint, u64)>, StoreError>> + '_ {
    db.range(start..vec![keys::PAGE_BY_ID + 1])
        .map(move |entry| {
            let (key, value) = entry?;
            let block = Block::stored(db, &key, &value)?;
            Ok((block.first..)
                .zip(block.entries)
                .map(|(id, (fp, _))| (fp, id))
                .collect())
        })
}

/// The page-id index (see the module doc).
#[derive(Debug, Default)]
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
    sealing: Arc<Vec<(Fingerprint, u64)>>,
    /// Runs, oldest first: `(run id, ids)`.
    runs: Vec<(u64, u64)>,
    /// The runs' files, mapped.
    files: HashMap<u64, Arc<RunFile>>,
    /// The same files in the order a lookup searches them: largest first (a
    /// fingerprint is in one run at most, and the largest runs hold most).
    search: Vec<Arc<RunFile>>,
    /// Run files the index does not list: removed by the next checkpoint.
    garbage_files: Vec<u64>,
    /// Next run id: above every run id on disk.
    next_run: u64,
    /// A checkpoint seals [`PageIds::sealing`].
    checkpointing: bool,
}

/// A checkpoint's share of the page-id index, detached with it.
#[derive(Debug)]
pub(super) struct IdsJob {
    /// The recent ids, sorted; empty when only garbage waits.
    pub(super) seal: Arc<Vec<(Fingerprint, u64)>>,
    /// The watermark the index says once the seal is listed.
    pub(super) watermark: u64,
    /// The runs as the state reads them now.
    pub(super) runs: Vec<(u64, u64)>,
    /// Their files.
    pub(super) files: HashMap<u64, Arc<RunFile>>,
    /// The id of the run this checkpoint writes.
    pub(super) run_id: u64,
    /// Run files nothing reads any more.
    pub(super) garbage_files: Vec<u64>,
}

/// What the checkpoint did with an [`IdsJob`].
#[derive(Debug)]
pub(super) struct IdsDone {
    /// The runs the index on disk lists now.
    pub(super) runs: Vec<(u64, u64)>,
    /// The watermark it says.
    pub(super) watermark: u64,
    /// The new run's file, mapped, when one was written.
    pub(super) new_file: Option<(u64, Arc<RunFile>)>,
    /// Runs merged into the new one: garbage once the state reads the new index.
    pub(super) merged: Vec<u64>,
    /// Garbage files this checkpoint removed.
    pub(super) collected_files: Vec<u64>,
}

impl PageIds {
    /// Loads the index: its record, its run files (headers and lengths
    /// checked), the run files it does not list (garbage), and the ids of the
    /// blocks from its watermark on, read into memory. `blocks_end` is the id
    /// after the last stored block's.
    pub(super) fn load(db: &Db, blocks_end: u64) -> Result<PageIds, StoreError> {
        let mut ids = PageIds::default();
        let mut damaged = None;
        if let Some(value) = db.get(keys::PAGE_ID_INDEX)? {
            let (watermark, runs) = decode_index(&value)
                .ok_or_else(|| db.corrupt("page id index", keys::PAGE_ID_INDEX, "bad layout"))?;
            for &(id, count) in &runs {
                ids.next_run = ids.next_run.max(id.saturating_add(1));
                match RunFile::open_kind(db.dir(), Kind::PageIds, id, count) {
                    Ok(file) => {
                        ids.files.insert(id, Arc::new(file));
                    }
                    Err(StoreError::RunDamaged { path, reason }) => {
                        damaged.get_or_insert((path, reason));
                    }
                    Err(error) => return Err(error),
                }
            }
            ids.runs = runs;
            ids.watermark = watermark;
        }
        ids.floor = ids.watermark;
        for id in runfile::ids_on_disk_of(db.dir(), Kind::PageIds)? {
            if !ids.files.contains_key(&id) {
                ids.garbage_files.push(id);
            }
            ids.next_run = ids.next_run.max(id.saturating_add(1));
        }
        if let Some((path, reason)) = damaged {
            let pages = ids.rebuild(db, blocks_end)?;
            tracing::warn!(
                "{}: {reason}; rebuilt the page-id index from the page records ({pages} pages)",
                path.display()
            );
        }
        ids.order_search();
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
        let mut damage = None;
        for file in self.files.values() {
            match file.verify() {
                Ok(()) => {}
                Err(StoreError::RunDamaged { path, reason }) => {
                    damage = Some(format!("{}: {reason}", path.display()));
                    break;
                }
                Err(error) => return Err(error),
            }
        }
        match damage {
            None => Ok(None),
            Some(damage) => Ok(Some((damage, self.rebuild(db, blocks_end)?))),
        }
    }

    /// Writes the index again from the page blocks: their (fingerprint, id)
    /// pairs in chunks of [`IDS_MAX_RECENT`], each sorted and written as a run
    /// file (synced), then one record lists them all with the watermark at
    /// `blocks_end` (crash point `repair.ids_index`). The runs listed before
    /// are garbage from then on; a crash before the switch leaves them listed
    /// (and the new files garbage), so the next open rebuilds again. Memory
    /// holds one chunk. Returns the number of pages indexed.
    pub(super) fn rebuild(&mut self, db: &Db, blocks_end: u64) -> Result<u64, StoreError> {
        let mut runs = Vec::new();
        let mut files = HashMap::new();
        let mut chunk: Vec<(Fingerprint, u64)> = Vec::new();
        let mut pages = 0;
        for block in blocks_from(db, vec![keys::PAGE_BY_ID]) {
            let block = block?;
            pages += block.len() as u64;
            chunk.extend(block);
            if chunk.len() >= IDS_MAX_RECENT {
                self.write_chunk(db, &mut chunk, &mut runs, &mut files)?;
            }
        }
        if !chunk.is_empty() {
            self.write_chunk(db, &mut chunk, &mut runs, &mut files)?;
        }
        let mut batch = Batch::default();
        batch.put(keys::PAGE_ID_INDEX, encode_index(blocks_end, &runs));
        crash::point("repair.ids_index");
        db.commit_now(batch, Durability::Synced(|| ()))?;
        let old = std::mem::replace(&mut self.runs, runs);
        self.garbage_files.extend(old.iter().map(|&(run, _)| run));
        self.files = files;
        self.order_search();
        self.watermark = blocks_end;
        self.floor = blocks_end;
        self.recent.clear();
        Ok(pages)
    }

    /// Sorts `chunk` and writes it as a new run file (synced) for
    /// [`PageIds::rebuild`], adding it to `runs` and `files`; empties `chunk`.
    fn write_chunk(
        &mut self,
        db: &Db,
        chunk: &mut Vec<(Fingerprint, u64)>,
        runs: &mut Vec<(u64, u64)>,
        files: &mut HashMap<u64, Arc<RunFile>>,
    ) -> Result<(), StoreError> {
        chunk.sort_unstable();
        let id = self.next_run;
        self.next_run += 1;
        let mut writer = RunFileWriter::create_kind(db.dir(), Kind::PageIds, id)?;
        for (fp, page) in chunk.iter() {
            if let Err(error) = writer.push_record(&record(fp, *page)) {
                writer.abandon();
                return Err(error);
            }
        }
        let count = writer.finish()?;
        let file = RunFile::open_kind(db.dir(), Kind::PageIds, id, count)?;
        files.insert(id, Arc::new(file));
        runs.push((id, count));
        chunk.clear();
        Ok(())
    }

    /// Reads the ids of the blocks from the watermark on into `recent`.
    fn read_blocks(&mut self, db: &Db) -> Result<(), StoreError> {
        let from = keys::with_u64(keys::PAGE_BY_ID, self.watermark);
        // The block holding the watermark may start before it.
        let start = match db.range(vec![keys::PAGE_BY_ID]..from.clone()).next_back() {
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
        self.search.iter().find_map(|file| file.page_id(fp))
    }

    /// Puts the run files in [`PageIds::search`]'s order (after the runs
    /// changed).
    fn order_search(&mut self) {
        let mut order = self.runs.clone();
        order.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        self.search = order
            .iter()
            .filter_map(|(run, _)| self.files.get(run).cloned())
            .collect();
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
        !self.recent.is_empty() || !self.garbage_files.is_empty()
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
        self.sealing = Arc::new(seal);
        self.floor = watermark;
        self.checkpointing = true;
        let run_id = self.next_run;
        self.next_run += 1;
        Some(IdsJob {
            seal: Arc::clone(&self.sealing),
            watermark,
            runs: self.runs.clone(),
            files: self.files.clone(),
            run_id,
            garbage_files: self.garbage_files.clone(),
        })
    }

    /// The checkpoint listed the sealed ids: the new index is read from now
    /// on, and the runs it merged wait for the next checkpoint to remove them.
    pub(super) fn checkpointed(&mut self, done: IdsDone) {
        self.runs = done.runs;
        self.watermark = done.watermark;
        self.garbage_files
            .retain(|run| !done.collected_files.contains(run));
        if let Some((id, file)) = done.new_file {
            self.files.insert(id, file);
        }
        for run in done.merged {
            if self.files.remove(&run).is_some() {
                self.garbage_files.push(run);
            }
        }
        self.order_search();
        self.sealing = Arc::default();
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
        let value = encode_index(77, &[(1, 10), (5, 300)]);
        assert_eq!(decode_index(&value), Some((77, vec![(1, 10), (5, 300)])));
        assert_eq!(decode_index(&encode_index(0, &[])), Some((0, vec![])));
        assert_eq!(decode_index(&value[..value.len() - 1]), None);
        assert_eq!(decode_index(&[9]), None);
    }
}
