//! Checkpoints, off the crawl loop: sync the Bloom bits of durable groups, seal
//! the exact set's recent fingerprints into a run, then drop the journal they
//! cover; seal the page-id index's recent ids into a run of its own (see
//! `pageids`) and list it in the same batch.
//!
//! A checkpoint is a multi-step operation, so it follows the pattern of a
//! manifest switch: new data is written under names nothing points to yet (the
//! new run's file, synced), then one batch switches the pointer (the run index) and
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
//! result. On open, runs the index does not list (files left by a crash
//! before the switch, or merged runs not yet removed) are never read, are
//! removed by the next checkpoint, and their ids are never reused.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::error::StoreError;
use super::exact::{MERGE_FANOUT, encode_index, tier};
use super::options::DedupMode;
use super::pageids::{self, IDS_MAX_RECENT, IdsDone, IdsJob};
use super::runfile::{self, Kind, RunFile, RunFileWriter};
use super::seen::SeenSet;
use super::table::{Batch, Db, Durability};
use super::{State, crash, keys};
use crate::bloom::BloomSync;
use crate::fingerprint::Fingerprint;

/// The run index: `(run id, fingerprints)`, oldest first.
type RunIndex = Vec<(u64, u64)>;

/// One checkpoint's work, detached from the state (see the module doc).
#[must_use = "a checkpoint does nothing until it runs and its result reaches State::checkpointed"]
pub struct Checkpoint {
    db: Db,
    bloom: BloomSync,
    /// Journal entries of groups below this number are covered.
    journal_end: u64,
    /// The fingerprints to seal, sorted (empty in `bloom` mode).
    seal: Vec<Fingerprint>,
    /// The run index as the state reads it now.
    runs: Vec<(u64, u64)>,
    /// Its runs that are files.
    files: HashMap<u64, Arc<RunFile>>,
    /// The id of the run this checkpoint writes.
    run_id: u64,
    /// Run files nothing reads any more.
    garbage_files: Vec<u64>,
    /// The page-id index's share, if it has something to do.
    ids: Option<IdsJob>,
}

/// What a [`Checkpoint`] did; hand it to [`State::checkpointed`].
#[derive(Debug)]
#[must_use = "the state reads the new run index only once this reaches State::checkpointed"]
pub struct Checkpointed {
    /// The run index now on disk.
    runs: Vec<(u64, u64)>,
    /// The new run's file, mapped, when the checkpoint wrote one.
    new_file: Option<(u64, Arc<RunFile>)>,
    /// Runs merged into the new one: garbage once the state reads the new index.
    merged: Vec<u64>,
    /// Garbage run files this checkpoint removed.
    collected_files: Vec<u64>,
    /// What it did with the page-id index.
    ids: Option<IdsDone>,
}

impl Checkpoint {
    /// Runs the steps; blocks on the disk. On error nothing the state reads has
    /// changed (the index switch is one batch).
    pub fn run(self) -> Result<Checkpointed, StoreError> {
        self.collect_garbage()?;
        crash::point("checkpoint.msync");
        self.bloom.sync()?;
        let (runs, merged, new_file) = if self.seal.is_empty() {
            (self.runs.clone(), Vec::new(), None)
        } else {
            let (runs, merged, file) = self.write_exact_run()?;
            (runs, merged, Some((self.run_id, file)))
        };
        let mut batch = Batch::default();
        if new_file.is_some() {
            batch.put(keys::EXACT_INDEX, encode_index(&runs));
        }
        let ids = match &self.ids {
            Some(job) => Some(self.seal_ids(job, &mut batch)?),
            None => None,
        };
        let end = keys::with_u64(keys::JOURNAL, self.journal_end);
        for entry in self.db.range(vec![keys::JOURNAL]..end) {
            let (key, _) = entry?;
            batch.delete(key);
        }
        crash::point("checkpoint.index");
        self.db.commit_now(
            batch,
            Durability::Synced(|| crash::point("checkpoint.sync")),
        )?;
        Ok(Checkpointed {
            runs,
            new_file,
            merged,
            collected_files: self.garbage_files,
            ids,
        })
    }

    /// Writes the sealed fingerprints as the exact set's new run (see
    /// [`Checkpoint::write_new_run`]).
    fn write_exact_run(&self) -> Result<(RunIndex, Vec<u64>, Arc<RunFile>), StoreError> {
        let seal = self.seal.iter().map(|fp| {
            let mut record = [0u8; RECORD];
            record[..20].copy_from_slice(fp);
            record
        });
        self.write_new_run(
            Kind::Seen,
            Sources {
                seal: Box::new(seal),
                count: self.seal.len() as u64,
                runs: &self.runs,
                files: &self.files,
                run_id: self.run_id,
            },
        )
    }

    /// The page-id index's share: removes its garbage files, writes the
    /// sealed ids as a run (merged with full tiers) and puts the index record
    /// that lists it into `batch`.
    fn seal_ids(&self, job: &IdsJob, batch: &mut Batch) -> Result<IdsDone, StoreError> {
        for &run in &job.garbage_files {
            runfile::remove_of(self.db.dir(), Kind::PageIds, run)?;
        }
        if job.seal.is_empty() {
            return Ok(IdsDone {
                runs: job.runs.clone(),
                watermark: job.watermark,
                new_file: None,
                merged: Vec::new(),
                collected_files: job.garbage_files.clone(),
            });
        }
        let seal = job.seal.iter().map(|(fp, id)| pageids::record(fp, *id));
        let (runs, merged, file) = self.write_new_run(
            Kind::PageIds,
            Sources {
                seal: Box::new(seal),
                count: job.seal.len() as u64,
                runs: &job.runs,
                files: &job.files,
                run_id: job.run_id,
            },
        )?;
        batch.put(
            keys::PAGE_ID_INDEX,
            pageids::encode_index(job.watermark, &runs),
        );
        Ok(IdsDone {
            runs,
            watermark: job.watermark,
            new_file: Some((job.run_id, file)),
            merged,
            collected_files: job.garbage_files.clone(),
        })
    }

    /// Removes the run files nothing reads (merged by the last checkpoint, or
    /// orphaned by a crash before an index switch).
    fn collect_garbage(&self) -> Result<(), StoreError> {
        for &run in &self.garbage_files {
            runfile::remove(self.db.dir(), run)?;
        }
        Ok(())
    }

    /// Merges full tiers into the sealed records and writes them as the new
    /// run's file; returns the index that lists it, the runs it replaced and
    /// the file, mapped. The merge streams: runs are read in order (a file
    /// through its map, after its checksum was checked) and the new file is
    /// written as it forms, so
    /// memory stays a few buffers, however large the runs.
    fn write_new_run(
        &self,
        kind: Kind,
        from: Sources<'_>,
    ) -> Result<(RunIndex, Vec<u64>, Arc<RunFile>), StoreError> {
        let mut runs = from.runs.to_vec();
        let mut merged = Vec::new();
        // Runs are disjoint, so the merged size is the sum of their counts.
        let mut size = from.count;
        loop {
            let top = tier(size);
            let same = runs.iter().rev().take_while(|r| tier(r.1) == top).count();
            if same + 1 < MERGE_FANOUT {
                break;
            }
            for (run, count) in runs.split_off(runs.len() - same) {
                merged.push(run);
                size += count;
            }
        }
        let width = kind.width();
        let mut sources = vec![RunReader::Memory(from.seal)];
        for &run in &merged {
            let file = from.files.get(&run).ok_or_else(|| StoreError::Corrupt {
                path: self.db.dir().to_owned(),
                what: format!("run {run}"),
                reason: "listed in the index without its file".into(),
            })?;
            file.verify()?;
            sources.push(RunReader::File {
                body: file.body(),
                at: 0,
                width,
            });
        }
        let mut writer = RunFileWriter::create_kind(self.db.dir(), kind, from.run_id)?;
        let count = match self.merge(&mut sources, &mut writer, width) {
            Ok(()) => writer.finish()?,
            Err(error) => {
                writer.abandon();
                return Err(error);
            }
        };
        runs.push((from.run_id, count));
        let file = RunFile::open_kind(self.db.dir(), kind, from.run_id, count)?;
        Ok((runs, merged, Arc::new(file)))
    }

    /// Writes the union of `sources` (each sorted by fingerprint) to `writer`,
    /// in order: each step takes the smallest fingerprint, and a fingerprint
    /// in several sources is written once, as the first of them (the newest:
    /// the seal comes first) holds it.
    fn merge(
        &self,
        sources: &mut [RunReader<'_>],
        writer: &mut RunFileWriter,
        width: usize,
    ) -> Result<(), StoreError> {
        let mut heads = Vec::with_capacity(sources.len());
        for source in sources.iter_mut() {
            heads.push(source.next_record()?);
        }
        let fp = |record: &Record| -> [u8; 20] {
            let mut fp = [0u8; 20];
            fp.copy_from_slice(&record[..20]);
            fp
        };
        while let Some(smallest) = heads.iter().flatten().map(fp).min() {
            let mut written = false;
            for (head, source) in heads.iter_mut().zip(sources.iter_mut()) {
                if let Some(record) = head.as_ref().filter(|r| fp(r) == smallest) {
                    if !written {
                        writer.push_record(&record[..width])?;
                        written = true;
                    }
                    *head = source.next_record()?;
                }
            }
        }
        Ok(())
    }
}

/// The widest run record: a fingerprint and a page id (an exact-set record
/// uses the first 20 bytes).
const RECORD: usize = 28;
/// A record as a merge carries it.
type Record = [u8; RECORD];

/// The sealed records and the runs a new run may merge with.
struct Sources<'c> {
    /// The records being sealed, sorted.
    seal: Box<dyn Iterator<Item = Record> + 'c>,
    /// How many.
    count: u64,
    /// The runs as the state reads them now, oldest first.
    runs: &'c [(u64, u64)],
    /// Their files.
    files: &'c HashMap<u64, Arc<RunFile>>,
    /// The id of the run to write.
    run_id: u64,
}

/// The records of one merge source, in order: the sorted records being
/// sealed, or a run file's body.
enum RunReader<'c> {
    Memory(Box<dyn Iterator<Item = Record> + 'c>),
    File {
        body: &'c [u8],
        at: usize,
        width: usize,
    },
}

impl<'c> RunReader<'c> {
    /// The next record, `None` at the end.
    fn next_record(&mut self) -> Result<Option<Record>, StoreError> {
        match self {
            RunReader::Memory(records) => Ok(records.next()),
            RunReader::File { body, at, width } => {
                let Some(bytes) = body.get(*at..*at + *width) else {
                    return Ok(None);
                };
                *at += *width;
                let mut record = [0u8; RECORD];
                record[..*width].copy_from_slice(bytes);
                Ok(Some(record))
            }
        }
    }
}

impl SeenSet {
    /// True when a checkpoint should start: none runs, and the journal holds
    /// [`super::CHECKPOINT_MAX_JOURNALED`] fingerprints (or the page-id index
    /// is `ids_full`), or something waits for a checkpoint (here, or in the
    /// page-id index: `ids_waiting`) and the last one is older than the
    /// checkpoint interval.
    pub(super) fn checkpoint_due(&self, ids_waiting: bool, ids_full: bool) -> bool {
        !self.checkpointing
            && (self.journaled >= super::CHECKPOINT_MAX_JOURNALED
                || ids_full
                || ((self.journaled > 0 || self.exact.has_garbage() || ids_waiting)
                    && self.last_checkpoint.elapsed() >= self.checkpoint_every))
    }

    /// Detaches a checkpoint of everything durable so far (see
    /// [`State::start_checkpoint`]); `ids_waiting` says the page-id index has
    /// something for it even if nothing waits here.
    pub(super) fn start_checkpoint(
        &mut self,
        db: &Db,
        ids_waiting: bool,
    ) -> Result<Option<Checkpoint>, StoreError> {
        if self.checkpointing || (self.journaled == 0 && !self.exact.has_garbage() && !ids_waiting)
        {
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
            db: db.clone(),
            bloom,
            journal_end: self.journal_end,
            seal,
            runs: self.exact.runs.clone(),
            files: self.exact.files.clone(),
            run_id,
            // Left listed here until the checkpoint says it removed them, so a
            // failed one leaves them for the next.
            garbage_files: self.exact.garbage_files.clone(),
            ids: None,
        }))
    }

    /// A [`Checkpoint`] finished (see [`State::checkpointed`]).
    pub(super) fn checkpointed(&mut self, done: Checkpointed) {
        let exact = &mut self.exact;
        exact.runs = done.runs;
        exact
            .garbage_files
            .retain(|run| !done.collected_files.contains(run));
        if let Some((id, file)) = done.new_file {
            exact.files.insert(id, file);
        }
        for run in done.merged {
            exact.files.remove(&run);
            exact.garbage_files.push(run);
        }
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
        let ids = self.pages.ids();
        self.seen
            .checkpoint_due(ids.waiting(), ids.recent_len() >= IDS_MAX_RECENT)
    }

    /// True when a checkpoint runs and the fingerprints recorded since it
    /// started reached [`super::CHECKPOINT_MAX_JOURNALED`], or the page ids
    /// [`IDS_MAX_RECENT`]: wait for it (and start the next) before adding
    /// more, so the in-memory parts of the exact set and the page-id index
    /// stay bounded.
    pub fn checkpoint_behind(&self) -> bool {
        self.seen.checkpointing
            && (self.seen.exact.recent.len() as u64 >= super::CHECKPOINT_MAX_JOURNALED
                || self.pages.ids().recent_len() >= IDS_MAX_RECENT)
    }

    /// Detaches a checkpoint of everything durable so far, to run on any thread;
    /// `None` when one runs already or there is nothing to do. Until its result
    /// reaches [`State::checkpointed`], the fingerprints it seals are answered
    /// from memory and the old index stays the one read.
    pub fn start_checkpoint(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        self.writable()?;
        // A sized filter grows first, while no checkpoint holds the old one.
        self.grow_bloom()?;
        let ids_waiting = self.pages.ids().waiting();
        let Some(mut job) = self.seen.start_checkpoint(&self.db, ids_waiting)? else {
            return Ok(None);
        };
        job.ids = self.pages.ids_mut().start_seal();
        Ok(Some(job))
    }

    /// A [`Checkpoint`] finished: the new run index is read from now on, and the
    /// runs it replaced are left for the next checkpoint to remove.
    pub fn checkpointed(&mut self, mut done: Checkpointed) {
        if let Some(ids) = done.ids.take() {
            self.pages.ids_mut().checkpointed(ids);
        }
        self.seen.checkpointed(done);
    }

    /// A [`Checkpoint`] failed (or its thread died): what it was sealing is
    /// answered from memory again, its journal entries are still on disk, and
    /// the garbage runs it did not remove are left for the next one. (The run it
    /// was writing, if any, is found by the next open: listed by the index or
    /// garbage, which only the index on disk can tell.)
    pub fn checkpoint_failed(&mut self) {
        self.seen.checkpoint_failed();
        self.pages.ids_mut().checkpoint_failed();
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
