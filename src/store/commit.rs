//! The commit protocol: [`State::seal`] → [`Flush`] (on any thread) →
//! [`Receipt`] → [`State::durable`]; [`State::commit`] does all of it on the
//! calling thread.
//!
//! The open group is one [`Batch`](super::table::Batch) that the tables write
//! into; some hold their part back until the seal (queue records, journal
//! entry, item record, page blocks, counters). [`State::seal`] has the pages,
//! frontier, seen, items and runs tables finish their parts, adds the metadata
//! record, and returns the [`Flush`]: `apply_batch` (atomic across crashes),
//! then a sync, then the durable record (crash points `group.apply`,
//! `group.sync`, `group.durable`). Until its [`Receipt`] reaches
//! [`State::durable`], nothing of the group is claimed: its fingerprints and
//! page records are answered from memory, its leases stay leased, its new
//! requests are not leasable and its items are not delivered. Only a flush
//! makes a `Receipt`, and only a `Receipt` sets Bloom bits (crash point
//! `bloom.set`), ends leases and releases items, so the bits never run ahead of
//! the durable frontier. One group is sealed at a time; a failed flush poisons
//! the state.
//!
//! Depends on `table`, `db` (the metadata record), `durable`, `error` and
//! [`crate::crash`].

use std::ops::Range;
use std::time::Instant;

use super::error::StoreError;
use super::table::Durability;
use super::{GROUP_MAX_AGE, GROUP_MAX_PAGES, State};
use crate::crash;

/// What a commit made durable.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CommitOutcome {
    /// Pages completed by the group.
    pub pages: usize,
    /// Item sequence numbers the group stored.
    pub items: Range<u64>,
}

/// The group between [`State::seal`] and [`State::durable`]: its batch is in a
/// [`Flush`]; what the state must answer meanwhile, each table holds as its
/// sealed part.
pub(super) struct Sealed {
    /// Number of the group, counted from 1 in this process.
    seq: u64,
    /// Pages it completed.
    pages: usize,
}

/// Writes one sealed group to the database and makes it durable: one atomic
/// sled batch, then a sync. It owns the batch and a handle on the database, not
/// the state, so it can run on another thread while the state fills the next
/// group. Only [`State::seal`] makes one.
#[must_use = "a sealed group is written only when its Flush runs"]
pub struct Flush {
    db: super::table::Db,
    batch: super::table::Batch,
    seq: u64,
    /// The durable record, and what this group changes in it once synced.
    durable: (
        std::sync::Arc<super::durable::DurableLog>,
        super::durable::DurableDelta,
    ),
}

impl Flush {
    /// Applies the group's batch and syncs the database log; blocks until the
    /// disk has it.
    pub fn run(self) -> Result<Receipt, StoreError> {
        let Flush {
            db,
            batch,
            seq,
            durable: (log, delta),
        } = self;
        crash::point("group.apply");
        // A failure poisons the state: applied or not, synced or not is
        // unknown, so nothing more is written.
        db.commit_now(batch, Durability::Synced(|| crash::point("group.sync")))?;
        // Only after the sync: the record never claims more than sled holds.
        crash::point("group.durable");
        log.record(delta)?;
        Ok(Receipt { seq })
    }
}

/// Proof that a [`Flush`] ran: its group is on disk. Only a flush makes one;
/// hand it to [`State::durable`], which then ends the group's leases, sets its
/// Bloom bits and releases its items.
#[derive(Debug)]
#[must_use = "the group becomes durable only when this is handed to State::durable"]
pub struct Receipt {
    seq: u64,
}

impl State {
    /// True when the open group should be sealed: [`GROUP_MAX_PAGES`]` / 2` pages
    /// (so that one group can fill while the previous one flushes, with at most
    /// `GROUP_MAX_PAGES` pages not durable) or 20 ms old.
    pub fn group_due(&self) -> bool {
        self.group.pages >= GROUP_MAX_PAGES / 2
            || self
                .group
                .opened_at
                .is_some_and(|t| t.elapsed() >= GROUP_MAX_AGE)
    }

    /// Time until the open group is due, `None` when it is empty.
    pub fn group_deadline(&self) -> Option<Instant> {
        self.group.opened_at.map(|t| t + GROUP_MAX_AGE)
    }

    /// Commits the open group on this thread ([`State::seal`], its [`Flush`],
    /// then [`State::durable`]). Fails, changing nothing, while the flush of a
    /// sealed group runs elsewhere.
    pub fn commit(&mut self) -> Result<CommitOutcome, StoreError> {
        self.writable()?;
        if self.sealed.is_some() {
            return Err(StoreError::FlushRunning {
                path: self.db.dir().to_owned(),
            });
        }
        let first = self.items.durable_end();
        let Some(flush) = self.seal()? else {
            return Ok(CommitOutcome {
                pages: 0,
                items: first..first,
            });
        };
        match flush.run() {
            Ok(receipt) => Ok(self.durable(receipt)),
            Err(error) => {
                self.flush_failed(&error);
                Err(error)
            }
        }
    }

    /// Seals the open group and returns the [`Flush`] that writes it, to be run
    /// on any thread; a new group opens. Until [`State::durable`] gets that
    /// flush's [`Receipt`], nothing of the sealed group is claimed (see the
    /// module doc). Only one group is sealed at a time: returns `None`, sealing
    /// nothing, while one is (or when the open group is empty).
    pub fn seal(&mut self) -> Result<Option<Flush>, StoreError> {
        self.writable()?;
        if !self.group.batch.is_dirty() || self.sealed.is_some() {
            return Ok(None);
        }
        // The only steps that read (and so may fail) come first: on error the
        // open group stays as it was.
        let pages = self.pages.plan_seal(&self.db)?;
        self.frontier.seal(&self.db, &mut self.group.batch)?;
        let mut group = std::mem::take(&mut self.group);
        let delta = super::durable::DurableDelta {
            items: self.items.appended_in_open().then(|| self.items.len()),
            pages: (group.pages > 0).then(|| self.runs.counter("pages/completed")),
        };
        self.seen.seal(&mut group.batch);
        self.items.seal(&mut group.batch);
        self.pages.seal(pages, &mut group.batch);
        self.runs.seal(&mut group.batch);
        (self.meta.next_host_id, self.meta.next_queue_seq) = self.frontier.next_ids();
        super::db::META.put(&mut group.batch, &(), &self.meta);
        self.sealed_seq += 1;
        self.sealed = Some(Sealed {
            seq: self.sealed_seq,
            pages: group.pages,
        });
        Ok(Some(Flush {
            db: self.db.clone(),
            batch: group.batch,
            seq: self.sealed_seq,
            durable: (std::sync::Arc::clone(&self.durable_log), delta),
        }))
    }

    /// The sealed group's [`Flush`] failed (or its thread died): the state is
    /// poisoned and writes nothing more ([`StoreError::Poisoned`]). Whether
    /// the group's batch reached the disk is unknown (it was applied
    /// atomically or not at all, then synced or not), so its item numbers and
    /// leases are not handed out again here: the next open finds what the disk
    /// holds, and requeues the rest.
    /// `cause` is what the failure said; the first one is kept, for
    /// [`StoreError::Poisoned`] to name.
    pub fn flush_failed(&mut self, cause: &dyn std::fmt::Display) {
        self.db.poison(cause);
    }

    /// `Ok` unless a write of the state failed before ([`State::flush_failed`]).
    pub(super) fn writable(&self) -> Result<(), StoreError> {
        self.db.writable()
    }

    /// Pages completed but not durable yet: the open group's and the sealed one's.
    pub fn undurable_pages(&self) -> usize {
        self.group.pages + self.sealed.as_ref().map_or(0, |s| s.pages)
    }

    /// Pages in the open (unsealed) group.
    pub fn open_pages(&self) -> usize {
        self.group.pages
    }

    /// True when a group is sealed and not yet durable.
    pub fn has_sealed(&self) -> bool {
        self.sealed.is_some()
    }

    /// The sealed group's [`Flush`] ran: it is in the database and durable. Its
    /// fingerprints reach the mapped Bloom bits (and the exact set's recent
    /// part), its leases end, its new requests become leasable and its items may
    /// be streamed. A `Receipt` of another group changes nothing.
    pub fn durable(&mut self, receipt: Receipt) -> CommitOutcome {
        let first = self.items.durable_end();
        let mut pages = 0;
        if self.sealed.as_ref().is_some_and(|s| s.seq == receipt.seq)
            && let Some(group) = self.sealed.take()
        {
            self.seen.durable();
            self.frontier.durable();
            self.pages.durable();
            self.items.durable();
            self.durable_items.store(
                self.items.durable_end(),
                std::sync::atomic::Ordering::Release,
            );
            pages = group.pages;
        }
        CommitOutcome {
            pages,
            items: first..self.items.durable_end(),
        }
    }
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;
