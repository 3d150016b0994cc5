//! Checkpoints, off the crawl loop: sync the Bloom bits of durable groups, seal
//! the exact set's recent fingerprints into a run, then drop the journal they cover.
//!
//! A checkpoint is a multi-step operation, so it follows the pattern of a
//! manifest switch: new data is written under names nothing points to yet (the
//! new run's chunks), then one batch switches the pointer (the run index) and
//! removes the journal entries the synced bits and the new run now cover, then
//! the old data (runs merged into the new one) is removed — but only by the next
//! checkpoint, after the state has stopped reading them. Every step boundary is a
//! named crash point ([`super::crash`]).
//!
//! The state hands out a [`Checkpoint`] ([`State::start_checkpoint`]) that owns
//! everything the steps need (a database handle, a sync handle on the Bloom file,
//! the sorted fingerprints to seal, the index as it was), so it can run on a
//! blocking thread while the crawl goes on; meanwhile the fingerprints being
//! sealed are still answered from memory. [`State::checkpointed`] takes the
//! result. On open, chunks of runs the index does not list (left by a crash
//! before the switch, or merged runs not yet removed) are never read, are
//! removed by the next checkpoint, and their ids are never reused.

use std::path::PathBuf;
use std::time::Instant;

use super::exact::{CHUNK_FPS, MERGE_FANOUT, chunk_key, encode_chunk, encode_index, tier};
use super::seen::SeenSet;
use super::table::Db;
use super::{State, StoreError, crash, keys};
use crate::bloom::BloomSync;
use crate::config::DedupMode;
use crate::fingerprint::Fingerprint;

/// The run index: `(run id, fingerprints)`, oldest first.
type RunIndex = Vec<(u64, u64)>;

/// Chunk records written per batch while sealing or merging.
const CHUNKS_PER_BATCH: usize = 64;

/// One checkpoint's work, detached from the state (see the module doc).
#[must_use = "a checkpoint does nothing until it runs and its result reaches State::checkpointed"]
pub struct Checkpoint {
    db: sled::Db,
    dir: PathBuf,
    bloom: BloomSync,
    /// Journal entries of groups below this number are covered.
    journal_end: u64,
    /// The fingerprints to seal, sorted (empty in `bloom` mode).
    seal: Vec<Fingerprint>,
    /// The run index as the state reads it now.
    runs: Vec<(u64, u64)>,
    /// The id of the run this checkpoint writes.
    run_id: u64,
    /// Runs whose chunks nothing reads any more.
    garbage: Vec<u64>,
}

/// What a [`Checkpoint`] did; hand it to [`State::checkpointed`].
#[derive(Debug)]
#[must_use = "the state reads the new run index only once this reaches State::checkpointed"]
pub struct Checkpointed {
    /// The run index now on disk.
    runs: Vec<(u64, u64)>,
    /// Runs merged into the new one: garbage once the state reads the new index.
    merged: Vec<u64>,
    /// Garbage runs this checkpoint removed.
    collected: Vec<u64>,
}

impl Checkpoint {
    /// Runs the steps; blocks on the disk. On error nothing the state reads has
    /// changed (the index switch is one batch).
    pub fn run(self) -> Result<Checkpointed, StoreError> {
        self.collect_garbage()?;
        crash::point("checkpoint.msync");
        self.bloom.sync()?;
        let (runs, merged) = if self.seal.is_empty() {
            (self.runs.clone(), Vec::new())
        } else {
            self.write_new_run()?
        };
        let mut batch = sled::Batch::default();
        if !self.seal.is_empty() {
            batch.insert(keys::EXACT_INDEX, encode_index(&runs));
        }
        let end = keys::with_u64(keys::JOURNAL, self.journal_end);
        for entry in self.db.range(vec![keys::JOURNAL]..end) {
            let (key, _) = entry.map_err(|e| self.db_error(e))?;
            batch.remove(key);
        }
        crash::point("checkpoint.index");
        self.db.apply_batch(batch).map_err(|e| self.db_error(e))?;
        crash::point("checkpoint.sync");
        self.db.flush().map_err(|e| self.db_error(e))?;
        Ok(Checkpointed {
            runs,
            merged,
            collected: self.garbage,
        })
    }

    /// Removes the chunks of runs nothing reads (merged by the last checkpoint,
    /// or orphaned by a crash before an index switch).
    fn collect_garbage(&self) -> Result<(), StoreError> {
        for &run in &self.garbage {
            let mut batch = sled::Batch::default();
            for entry in self.db.scan_prefix(keys::with_u64(keys::EXACT_RUN, run)) {
                let (key, _) = entry.map_err(|e| self.db_error(e))?;
                batch.remove(key);
            }
            crash::point("checkpoint.gc");
            self.db.apply_batch(batch).map_err(|e| self.db_error(e))?;
        }
        Ok(())
    }

    /// Merges full tiers into the sealed fingerprints and writes them as the new
    /// run; returns the index that lists it and the runs it replaced.
    fn write_new_run(&self) -> Result<(RunIndex, Vec<u64>), StoreError> {
        let mut fps = self.seal.clone();
        let mut runs = self.runs.clone();
        let mut merged = Vec::new();
        loop {
            let top = tier(fps.len() as u64);
            let same = runs.iter().rev().take_while(|r| tier(r.1) == top).count();
            if same + 1 < MERGE_FANOUT {
                break;
            }
            for (run, _) in runs.split_off(runs.len() - same) {
                self.read_run(run, &mut fps)?;
                merged.push(run);
            }
            fps.sort_unstable();
            fps.dedup();
        }
        for group in fps.chunks(CHUNK_FPS * CHUNKS_PER_BATCH) {
            let mut batch = sled::Batch::default();
            for chunk in group.chunks(CHUNK_FPS) {
                batch.insert(chunk_key(self.run_id, &chunk[0]), encode_chunk(chunk));
            }
            crash::point("checkpoint.run");
            self.db.apply_batch(batch).map_err(|e| self.db_error(e))?;
        }
        runs.push((self.run_id, fps.len() as u64));
        Ok((runs, merged))
    }

    /// Appends every fingerprint of `run` to `fps`.
    fn read_run(&self, run: u64, fps: &mut Vec<Fingerprint>) -> Result<(), StoreError> {
        for entry in self.db.scan_prefix(keys::with_u64(keys::EXACT_RUN, run)) {
            let (key, chunk) = entry.map_err(|e| self.db_error(e))?;
            let body = super::exact::chunk_body(&chunk).ok_or_else(|| StoreError::Corrupt {
                path: self.dir.clone(),
                what: format!("exact chunk {key:?}"),
                reason: "length is not a version byte and a multiple of 20".into(),
            })?;
            fps.extend(body.chunks_exact(20).map(|fp| {
                let mut one = [0u8; 20];
                one.copy_from_slice(fp);
                one
            }));
        }
        Ok(())
    }

    fn db_error(&self, source: sled::Error) -> StoreError {
        StoreError::Db {
            path: self.dir.clone(),
            source,
        }
    }
}

impl SeenSet {
    /// True when a checkpoint should start: none runs, and the journal holds
    /// [`super::CHECKPOINT_MAX_JOURNALED`] fingerprints, or something waits for a
    /// checkpoint and the last one is older than the checkpoint interval.
    pub(super) fn checkpoint_due(&self) -> bool {
        !self.checkpointing
            && (self.journaled >= super::CHECKPOINT_MAX_JOURNALED
                || ((self.journaled > 0 || !self.exact.garbage.is_empty())
                    && self.last_checkpoint.elapsed() >= self.checkpoint_every))
    }

    /// Detaches a checkpoint of everything durable so far (see
    /// [`State::start_checkpoint`]).
    pub(super) fn start_checkpoint(&mut self, db: &Db) -> Result<Option<Checkpoint>, StoreError> {
        if self.checkpointing || (self.journaled == 0 && self.exact.garbage.is_empty()) {
            return Ok(None);
        }
        let bloom = self.bloom.sync_handle()?;
        let mut seal = Vec::new();
        if self.dedup == DedupMode::Exact {
            self.exact.sealing = std::mem::take(&mut self.exact.recent);
            seal.extend(self.exact.sealing.iter().copied());
            seal.sort_unstable();
        }
        let run_id = self.exact.next_run;
        self.exact.next_run += 1;
        self.checkpointing = true;
        self.journaled = 0;
        self.last_checkpoint = Instant::now();
        Ok(Some(Checkpoint {
            db: db.tree().clone(),
            dir: db.dir().to_owned(),
            bloom,
            journal_end: self.journal_end,
            seal,
            runs: self.exact.runs.clone(),
            run_id,
            // Left listed here until the checkpoint says it removed them, so a
            // failed one leaves them for the next.
            garbage: self.exact.garbage.clone(),
        }))
    }

    /// A [`Checkpoint`] finished (see [`State::checkpointed`]).
    pub(super) fn checkpointed(&mut self, done: Checkpointed) {
        self.exact.runs = done.runs;
        self.exact
            .garbage
            .retain(|run| !done.collected.contains(run));
        self.exact.garbage.extend(done.merged);
        self.exact.sealing.clear();
        self.checkpointing = false;
    }

    /// A [`Checkpoint`] failed (see [`State::checkpoint_failed`]).
    pub(super) fn checkpoint_failed(&mut self) {
        let sealing = std::mem::take(&mut self.exact.sealing);
        self.journaled += sealing.len() as u64;
        self.exact.recent.extend(sealing.iter().copied());
        self.checkpointing = false;
    }

    /// Marks the Bloom header clean (after a checkpoint synced everything).
    fn mark_clean(&mut self) -> Result<(), StoreError> {
        if !self.bloom.is_clean() {
            crash::point("checkpoint.header");
            self.bloom.flush()?;
        }
        Ok(())
    }
}

impl State {
    /// True when a checkpoint should start: none runs, and the journal holds
    /// [`super::CHECKPOINT_MAX_JOURNALED`] fingerprints, or something waits for a
    /// checkpoint and the last one is older than the checkpoint interval.
    pub fn checkpoint_due(&self) -> bool {
        self.seen.checkpoint_due()
    }

    /// Detaches a checkpoint of everything durable so far, to run on any thread;
    /// `None` when one runs already or there is nothing to do. Until its result
    /// reaches [`State::checkpointed`], the fingerprints it seals are answered
    /// from memory and the old index stays the one read.
    pub fn start_checkpoint(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        self.seen.start_checkpoint(&self.db)
    }

    /// A [`Checkpoint`] finished: the new run index is read from now on, and the
    /// runs it replaced are left for the next checkpoint to remove.
    pub fn checkpointed(&mut self, done: Checkpointed) {
        self.seen.checkpointed(done);
    }

    /// A [`Checkpoint`] failed (or its thread died): what it was sealing is
    /// answered from memory again, its journal entries are still on disk, and
    /// the garbage runs it did not remove are left for the next one. (The run it
    /// was writing, if any, is found by the next open: listed by the index or
    /// garbage, which only the index on disk can tell.)
    pub fn checkpoint_failed(&mut self) {
        self.seen.checkpoint_failed();
    }

    /// Commits, then checkpoints on this thread: the journal is emptied, the
    /// exact set sealed, runs no longer read are removed, and the Bloom header is
    /// marked clean. Fails, changing nothing, while a detached checkpoint runs.
    pub fn checkpoint(&mut self) -> Result<(), StoreError> {
        if self.seen.checkpointing {
            return Err(StoreError::CheckpointRunning {
                path: self.db.dir().to_owned(),
            });
        }
        self.commit()?;
        // The second pass removes what the first one merged.
        for _ in 0..2 {
            if let Some(job) = self.start_checkpoint()? {
                match job.run() {
                    Ok(done) => self.checkpointed(done),
                    Err(error) => {
                        self.checkpoint_failed();
                        return Err(error);
                    }
                }
            }
        }
        self.seen.mark_clean()
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
