//! The commit protocol: a completion group is sealed, its batch is applied and
//! synced by a [`Flush`] (on any thread), and only the [`Receipt`] of that
//! flush makes the group's effects true in memory.
//!
//! The open group (`Group`) collects what completions, enqueues, page records,
//! robots answers and counters write. [`State::seal`] closes it into one sled
//! batch (queue records, the item record, the Bloom journal entry, page records,
//! counters, metadata and the run record) and hands back the [`Flush`] that
//! writes it: `apply_batch` (atomic across crashes) then a sync, crash points
//! `group.apply` and `group.sync` before each. Until the flush's [`Receipt`]
//! reaches [`State::durable`], nothing of the group is claimed: its
//! fingerprints are answered from a sealed overlay, its page records from
//! memory, its leases stay leased, its new requests are not leasable and its
//! items are not streamed. A `Receipt` only a flush can make is what sets
//! Bloom bits (crash point `bloom.set`), ends leases and releases items, so the
//! type system says what invariant 2 says: the bits never run ahead of the
//! durable frontier. One group is sealed at a time.
//! [`State::commit`] does all of it on the calling thread. Depends on the
//! state's tables and [`super::crash`] only.

use std::ops::Range;
use std::time::Instant;

use super::{GROUP_MAX_AGE, GROUP_MAX_PAGES, State, StoreError, crash, keys, records};
use crate::config::DedupMode;
use crate::fingerprint::Fingerprint;

/// What a commit made durable.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CommitOutcome {
    /// Pages completed by the group.
    pub pages: usize,
    /// Item sequence numbers the group stored.
    pub items: Range<u64>,
}

/// Fingerprints whose Bloom probes are brought into the cache at once before
/// they are set (a chunk's lines stay well within L1/L2).
const WARM_CHUNK: usize = 16;

/// The group between [`State::seal`] and [`State::durable`]: its batch is in a
/// [`Flush`], so nothing of it is in the database yet as far as this process may
/// assume; what the state must answer meanwhile (dedup, page records) it
/// answers from here.
pub(super) struct Sealed {
    /// Number of the group, counted from 1 in this process.
    seq: u64,
    /// Its fingerprints, in order (their journal entry is in its batch).
    fingerprints: Vec<Fingerprint>,
    /// The same fingerprints as a set, checked by dedup until they reach the bits.
    pub(super) overlay: crate::fingerprint::FingerprintSet,
    /// Its page records, read by [`State::page`] until they are in the database.
    pub(super) page_records: crate::fingerprint::FingerprintMap<super::pages::PageRecord>,
    /// Its completed leases, `(host id, record key, entry key)`.
    completed: Vec<super::frontier::QueueEntry>,
    /// Hosts it queued requests for, with the smallest new entry key.
    touched_hosts: std::collections::BTreeMap<u32, [u8; keys::QUEUE_KEY_LEN]>,
    /// Pages it completed.
    pages: usize,
    /// The item sequence number after its last item.
    items_end: u64,
    /// The number of its journal entry, when it recorded fingerprints.
    journal: Option<u64>,
}

/// Writes one sealed group to the database and makes it durable: one atomic
/// sled batch, then a sync. It owns the batch and a handle on the database, not
/// the state, so it can run on another thread while the state fills the next
/// group. Only [`State::seal`] makes one.
#[must_use = "a sealed group is written only when its Flush runs"]
pub struct Flush {
    db: sled::Db,
    dir: std::path::PathBuf,
    batch: sled::Batch,
    seq: u64,
    /// The durable record, and what this group changes in it once synced.
    durable: (
        std::sync::Arc<super::repair::DurableLog>,
        super::repair::DurableDelta,
    ),
}

impl Flush {
    /// Applies the group's batch and syncs the database log; blocks until the
    /// disk has it.
    pub fn run(self) -> Result<Receipt, StoreError> {
        let Flush {
            db,
            dir,
            batch,
            seq,
            durable: (log, delta),
        } = self;
        crash::point("group.apply");
        let done = db.apply_batch(batch).and_then(|()| {
            crash::point("group.sync");
            db.flush().map(drop)
        });
        if let Err(source) = done {
            return Err(StoreError::Db { path: dir, source });
        }
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
        if self.sealed.is_some() {
            return Err(StoreError::FlushRunning {
                path: self.dir.clone(),
            });
        }
        let first = self.durable_items;
        let Some(flush) = self.seal()? else {
            return Ok(CommitOutcome {
                pages: 0,
                items: first..first,
            });
        };
        match flush.run() {
            Ok(receipt) => Ok(self.durable(receipt)),
            Err(error) => {
                self.flush_failed();
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
        if !self.group.dirty || self.sealed.is_some() {
            return Ok(None);
        }
        // The previous group is in the database: its rewrites are what we read.
        let completed = std::mem::take(&mut self.group.completed);
        if let Err(error) = self.rewrite_completed(&completed) {
            self.group.completed = completed;
            return Err(error);
        }
        let mut group = std::mem::take(&mut self.group);
        let delta = super::repair::DurableDelta {
            items: group.first_item.map(|_| self.next_item),
            pages: (group.pages > 0).then(|| self.counters.get("pages/completed")),
        };
        for (_, record) in group.queue.drain() {
            group.batch.insert(&record.key[..], record.bytes);
        }
        if let Some(first) = group.record_first {
            let items = std::mem::take(&mut group.items);
            group.batch.insert(keys::with_u64(keys::ITEM, first), items);
        }
        let mut journal = None;
        if !group.fingerprints.is_empty() {
            let per_part = keys::MAX_VALUE_BYTES / 20;
            for (part, fps) in group.fingerprints.chunks(per_part).enumerate() {
                let mut key = keys::with_u64(keys::JOURNAL, self.next_group);
                key.extend_from_slice(&(part as u16).to_be_bytes());
                let mut value = Vec::with_capacity(1 + fps.len() * 20);
                value.push(keys::JOURNAL_VERSION);
                for fp in fps {
                    value.extend_from_slice(fp);
                }
                group.batch.insert(key, value);
            }
            journal = Some(self.next_group);
            self.next_group += 1;
        }
        for (name, value) in self.counters.take_dirty() {
            group.batch.insert(
                keys::with_prefix(keys::COUNTER, name.as_bytes()),
                &keys::versioned_u64(value),
            );
        }
        group.batch.insert(keys::META, records::encode(&self.meta));
        if let Some(run) = self.run.as_mut() {
            run.updated_at = records::unix_now();
            run.counters = self.run_counters.values().clone();
            group
                .batch
                .insert(keys::with_u64(keys::RUN, run.id), records::encode(run));
        }
        self.sealed_seq += 1;
        let flush = Flush {
            db: self.db.clone(),
            dir: self.dir.clone(),
            batch: group.batch,
            seq: self.sealed_seq,
            durable: (std::sync::Arc::clone(&self.durable_log), delta),
        };
        self.sealed = Some(Sealed {
            seq: self.sealed_seq,
            fingerprints: group.fingerprints,
            overlay: group.overlay,
            page_records: group.page_records,
            completed,
            touched_hosts: group.touched_hosts,
            pages: group.pages,
            items_end: self.next_item,
            journal,
        });
        Ok(Some(flush))
    }

    /// The sealed group's [`Flush`] failed (or its thread died): the group is
    /// forgotten here. Its batch was applied atomically or not at all, so the
    /// database stays consistent either way; its leases stay leased for the rest
    /// of this process (the caller is expected to stop), and whatever of it did
    /// reach the disk is found by the next open (journal replay, item watermark).
    pub fn flush_failed(&mut self) {
        self.sealed = None;
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
        let first = self.durable_items;
        let mut pages = 0;
        if self.sealed.as_ref().is_some_and(|s| s.seq == receipt.seq)
            && let Some(group) = self.sealed.take()
        {
            if !group.fingerprints.is_empty() {
                crash::point("bloom.set");
            }
            for chunk in group.fingerprints.chunks(WARM_CHUNK) {
                self.bloom.warm(chunk);
                for fp in chunk {
                    self.bloom.insert(fp);
                }
            }
            if self.dedup == DedupMode::Exact {
                self.exact.recent.extend(group.fingerprints.iter().copied());
            }
            self.journaled += group.fingerprints.len() as u64;
            if let Some(journal) = group.journal {
                self.journal_end = journal + 1;
            }
            for (host_id, _, key) in &group.completed {
                if let Some(queue) = self.hosts.get_mut(host_id)
                    && queue.leased.remove(key)
                {
                    self.leased -= 1;
                }
            }
            for (host_id, smallest) in &group.touched_hosts {
                if let Some(queue) = self.hosts.get_mut(host_id) {
                    queue.maybe_ready = true;
                    // A new key before the cursor (a higher priority) must be seen.
                    if queue.cursor.is_some_and(|(_, entry)| *smallest < entry) {
                        queue.cursor = None;
                    }
                }
            }
            pages = group.pages;
            self.durable_items = group.items_end;
        }
        CommitOutcome {
            pages,
            items: first..self.durable_items,
        }
    }
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;
