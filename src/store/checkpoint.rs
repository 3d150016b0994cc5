//! Checkpoints, off the crawl loop: sync the Bloom bits of durable groups, seal
//! the exact set's recent fingerprints and the page-id index's recent ids into
//! new runs, then switch both run indexes and drop the journal entries they
//! cover in one batch.
//!
//! [`State::start_checkpoint`] hands out a [`Checkpoint`] that owns what the
//! steps need, so it runs on the `Committer`'s thread while the crawl goes on
//! (the fingerprints being sealed are still answered from memory);
//! [`State::checkpointed`] takes the result. A new run file is complete and
//! synced before the batch lists it; runs no index lists (a crash before the
//! switch, runs merged away) are never read and are removed by the next
//! checkpoint; run ids are never reused. Every step boundary is a named crash
//! point ([`crate::crash`]).
//!
//! Depends on `seen`, `exact`, `pageids`, `sorted`, `table`, [`crate::bloom`]
//! and [`crate::fingerprint`].

use std::time::Instant;

use super::State;
use super::error::StoreError;
use super::exact::Exact;
use super::pageids::{IDS_MAX_RECENT, IdsDone, IdsJob};
use super::seen::SeenSet;
use super::sorted::{SealJob, Sealed};
use super::table::{Batch, Db, Durability};
use crate::bloom::BloomSync;
use crate::crash;
use crate::fingerprint::Fingerprint;

/// One checkpoint's work, detached from the state (see the module doc).
#[must_use = "a checkpoint does nothing until it runs and its result reaches State::checkpointed"]
pub struct Checkpoint {
    db: Db,
    bloom: BloomSync,
    /// Journal entries of groups below this number are covered.
    journal_end: u64,
    /// The fingerprints to seal, sorted (empty in `bloom` mode).
    seal: Vec<Fingerprint>,
    /// The exact set's run to write (and garbage to remove).
    exact: SealJob,
    /// The page-id index's share, if it has something to do.
    ids: Option<IdsJob>,
}

/// What a [`Checkpoint`] did; hand it to [`State::checkpointed`].
#[derive(Debug)]
#[must_use = "the state reads the new run index only once this reaches State::checkpointed"]
pub struct Checkpointed {
    /// What it did with the exact set's runs.
    exact: Sealed,
    /// What it did with the page-id index.
    ids: Option<IdsDone>,
}

impl Checkpoint {
    /// Runs the steps; blocks on the disk. On error nothing the state reads has
    /// changed (the index switch is one batch).
    pub fn run(self) -> Result<Checkpointed, StoreError> {
        crash::point("checkpoint.msync");
        self.bloom.sync()?;
        let mut batch = Batch::default();
        let exact = Exact::seal(self.exact, &self.seal, &mut batch)?;
        let ids = match self.ids {
            Some(job) => Some(job.run(&mut batch)?),
            None => None,
        };
        super::seen::JOURNAL.delete_below(&self.db, &mut batch, &(self.journal_end, 0))?;
        crash::point("checkpoint.index");
        self.db.commit_now(
            batch,
            Durability::Synced(|| crash::point("checkpoint.sync")),
        )?;
        Ok(Checkpointed { exact, ids })
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
                || ((self.journaled > 0 || self.exact.runs.has_garbage() || ids_waiting)
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
        if self.checkpointing
            || (self.journaled == 0 && !self.exact.runs.has_garbage() && !ids_waiting)
        {
            return Ok(None);
        }
        let bloom = self.bloom.sync_handle()?;
        // In `bloom` mode nothing is recent: the job only removes garbage.
        let (seal, exact) = self.exact.start_seal();
        self.checkpointing = true;
        self.journaled = 0;
        self.last_checkpoint = Instant::now();
        Ok(Some(Checkpoint {
            db: db.clone(),
            bloom,
            journal_end: self.journal_end,
            seal,
            exact,
            ids: None,
        }))
    }

    /// A [`Checkpoint`] finished (see [`State::checkpointed`]).
    pub(super) fn checkpointed(&mut self, done: Sealed) {
        self.exact.sealed(done);
        self.checkpointing = false;
    }

    /// A [`Checkpoint`] failed (see [`State::checkpoint_failed`]).
    pub(super) fn checkpoint_failed(&mut self) {
        self.journaled += self.exact.seal_failed();
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
    /// `IDS_MAX_RECENT`: wait for it (and start the next) before adding
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
    pub fn checkpointed(&mut self, done: Checkpointed) {
        if let Some(ids) = done.ids {
            self.pages.ids_mut().checkpointed(ids);
        }
        self.seen.checkpointed(done.exact);
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
