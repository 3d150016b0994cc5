//! The seen set and the completion step: dedup, group commit, Bloom journal.
//!
//! Dedup answers, in order: the open group's overlay (exact), then the mapped
//! Bloom filter; a Bloom "maybe" is confirmed against the exact set (`exact`)
//! unless the state runs in `bloom` mode. The fingerprints recorded in a group are
//! written to the group's batch once, as one journal entry, and reach the mapped
//! bits (and the exact set's in-memory recent part) only after the batch is
//! flushed. Group commit has two stages: [`State::seal`] applies the batch (this
//! process then reads it; its fingerprints move to a sealed overlay), and a
//! [`Flush`], which may run on another thread, makes it durable; only then does
//! [`State::durable`] end its leases, set its bits and release its items. A checkpoint msyncs the bits, seals the recent fingerprints into an
//! exact run and drops the journal entries it covers, in one batch; opening replays
//! whatever journal is left (setting bits is idempotent).

use std::ops::Range;
use std::time::Instant;

use super::{GROUP_MAX_AGE, GROUP_MAX_PAGES, State, StoreError, keys, records};
use crate::config::DedupMode;
use crate::fingerprint::{self, Fingerprint};
use crate::item::{self, Item};
use crate::request::Request;

/// What a finished lease produced.
#[derive(Debug)]
pub struct Completion {
    /// The lease being completed.
    pub lease: super::Lease,
    /// New requests found (deduped here, never by legs).
    pub requests: Vec<Request>,
    /// Items to store.
    pub items: Vec<Item>,
    /// Counter increments for this page (`fetch/status/200`, ...).
    pub counters: Vec<(&'static str, u64)>,
}

/// The seen set's answer for one fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Never seen.
    New,
    /// Seen before (exactly, or by the Bloom filter alone in `bloom` mode).
    Duplicate,
    /// The Bloom filter said "maybe" but the exact set said no: a caught false positive.
    FalsePositive,
}

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

/// What a batch of enqueues counted (see [`State::enqueue`]).
#[derive(Default)]
struct Tally {
    filtered: u64,
    false_positive: u64,
    unique: u64,
    enqueued: u64,
}

/// A group applied to the database but not yet known durable (see [`State::seal`]).
pub(super) struct Sealed {
    /// Number of the group, counted from 1 in this process.
    seq: u64,
    /// Its fingerprints, in order (their journal entry is in its batch).
    fingerprints: Vec<Fingerprint>,
    /// The same fingerprints as a set, checked by dedup until they reach the bits.
    overlay: crate::fingerprint::FingerprintSet,
    /// Its completed leases, `(host id, record key, entry key)`.
    completed: Vec<(u32, [u8; keys::QUEUE_KEY_LEN], [u8; keys::QUEUE_KEY_LEN])>,
    /// Pages it completed.
    pages: usize,
    /// The item sequence number after its last item.
    items_end: u64,
}

/// A flush of the database that makes the groups sealed before it was taken
/// durable ([`State::flush_handle`]). It holds a handle on the database, not the
/// state, so it can run on another thread while the state takes the next group.
pub struct Flush {
    db: sled::Db,
    dir: std::path::PathBuf,
    through: u64,
}

impl Flush {
    /// Writes and syncs the database log; blocks until the disk has it.
    pub fn run(self) -> Result<Flushed, StoreError> {
        match self.db.flush() {
            Ok(_) => Ok(Flushed {
                through: self.through,
            }),
            Err(source) => Err(StoreError::Db {
                path: self.dir,
                source,
            }),
        }
    }
}

/// Proof that a [`Flush`] ran; hand it to [`State::durable`].
#[derive(Debug)]
#[must_use = "the groups become durable only when this is handed to State::durable"]
pub struct Flushed {
    through: u64,
}

/// The request a seed is queued as: a `GET` that bypasses the seen set.
pub fn seed_request(url: String) -> Request {
    let mut request = Request::get(url);
    request.dont_filter = true;
    request
}

impl State {
    /// Answers whether `fp` was seen, without recording it.
    pub fn check_seen(&self, fp: &Fingerprint) -> Result<Seen, StoreError> {
        if self.group.overlay.contains(fp) || self.sealed.iter().any(|s| s.overlay.contains(fp)) {
            return Ok(Seen::Duplicate);
        }
        if !self.bloom.contains(fp) {
            return Ok(Seen::New);
        }
        match self.dedup {
            DedupMode::Bloom => Ok(Seen::Duplicate),
            DedupMode::Exact => Ok(if self.exact_contains(fp)? {
                Seen::Duplicate
            } else {
                Seen::FalsePositive
            }),
        }
    }

    /// Offers a request to the frontier: dedup (unless `dont_filter`), record its
    /// fingerprint, queue it — all in the open group. Returns true if queued.
    pub fn enqueue(
        &mut self,
        request: &Request,
        fingerprint_headers: &[String],
    ) -> Result<bool, StoreError> {
        let mut tally = Tally::default();
        let fp = fingerprint::fingerprint(request, fingerprint_headers);
        let queued = self.enqueue_counted(request, fp, &mut tally);
        self.add_tally(&tally);
        queued
    }

    /// [`State::enqueue`], counting into `tally` instead of the counters (a
    /// counter update is two map lookups by name; a page's links share one).
    fn enqueue_counted(
        &mut self,
        request: &Request,
        fp: Fingerprint,
        tally: &mut Tally,
    ) -> Result<bool, StoreError> {
        let seen = self.check_seen(&fp)?;
        match seen {
            Seen::Duplicate if !request.dont_filter => {
                tally.filtered += 1;
                return Ok(false);
            }
            Seen::FalsePositive => tally.false_positive += 1,
            _ => {}
        }
        if seen != Seen::Duplicate {
            self.group.overlay.insert(fp);
            self.group.fingerprints.push(fp);
            tally.unique += 1;
        }
        self.push_queue(request);
        tally.enqueued += 1;
        self.opened();
        Ok(true)
    }

    fn add_tally(&mut self, tally: &Tally) {
        self.count("dupefilter/filtered", tally.filtered);
        self.count("bloom/false_positive", tally.false_positive);
        self.count("seen/unique", tally.unique);
        self.count("frontier/enqueued", tally.enqueued);
    }

    /// Adds seed URLs. A URL new to the seed list is queued with `dont_filter`
    /// (and its fingerprint recorded); a known seed is not queued again. Commits.
    pub fn add_seeds(
        &mut self,
        urls: &[String],
        fingerprint_headers: &[String],
    ) -> Result<usize, StoreError> {
        let mut added = 0;
        for url in urls {
            let key = keys::with_prefix(keys::SEED, url.as_bytes());
            if self.db.contains_key(&key).map_err(|e| self.db_error(e))? {
                continue;
            }
            self.group.batch.insert(key, &[]);
            self.enqueue(&seed_request(url.clone()), fingerprint_headers)?;
            added += 1;
            // Long seed lists are committed in chunks, to keep each batch small.
            if added % 1024 == 0 {
                self.commit()?;
            }
        }
        self.commit()?;
        Ok(added)
    }

    /// The fingerprints of the stored seeds' requests ([`seed_request`]), in seed order.
    pub fn seed_fingerprints(
        &self,
        fingerprint_headers: &[String],
    ) -> Result<Vec<Fingerprint>, StoreError> {
        Ok(self
            .seeds()?
            .into_iter()
            .map(|url| fingerprint::fingerprint(&seed_request(url), fingerprint_headers))
            .collect())
    }

    /// The stored seed list.
    pub fn seeds(&self) -> Result<Vec<String>, StoreError> {
        let mut seeds = Vec::new();
        for entry in self.db.scan_prefix([keys::SEED]) {
            let (key, _) = entry.map_err(|e| self.db_error(e))?;
            seeds.push(String::from_utf8_lossy(&key[1..]).into_owned());
        }
        Ok(seeds)
    }

    /// Completes a lease in the open group: its queue entry goes, its items and
    /// new requests come, atomically with the rest of the group.
    pub fn complete(
        &mut self,
        completion: Completion,
        fingerprint_headers: &[String],
    ) -> Result<(), StoreError> {
        let Completion {
            lease,
            requests,
            items,
            counters,
        } = completion;
        let fps: Vec<Fingerprint> = requests
            .iter()
            .map(|r| fingerprint::fingerprint(r, fingerprint_headers))
            .collect();
        self.bloom.warm(&fps);
        let mut tally = Tally::default();
        let enqueued = requests
            .iter()
            .zip(fps)
            .try_for_each(|(r, fp)| self.enqueue_counted(r, fp, &mut tally).map(drop));
        self.add_tally(&tally);
        enqueued?;
        for item in &items {
            let seq = self.next_item;
            self.next_item += 1;
            self.group.first_item.get_or_insert(seq);
            if self.group.record_first.is_none() {
                self.group.record_first = Some(seq);
                self.group.items.push(keys::ITEM_RECORD_VERSION);
            }
            let bytes = item::encode(item);
            self.group
                .items
                .extend_from_slice(&(bytes.len() as u32).to_be_bytes());
            self.group.items.extend_from_slice(&bytes);
            if self.group.items.len() >= keys::MAX_VALUE_BYTES {
                self.close_item_record();
            }
        }
        self.count("items/stored", items.len() as u64);
        self.count("pages/completed", 1);
        for (name, by) in counters {
            self.count(name, by);
        }
        self.counters.sub("frontier/queued", 1);
        self.group
            .completed
            .push((lease.host_id, lease.record, lease.key));
        self.group.pages += 1;
        self.group.dirty = true;
        self.opened();
        Ok(())
    }

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

    /// Commits the open group and every sealed one: [`State::seal`], a flush on
    /// this thread, then [`State::durable`].
    pub fn commit(&mut self) -> Result<CommitOutcome, StoreError> {
        self.seal()?;
        match self.flush_handle() {
            Some(flush) => {
                let flushed = flush.run()?;
                Ok(self.durable(flushed))
            }
            None => Ok(CommitOutcome::default()),
        }
    }

    /// Seals the open group: its batch is applied to the database, so this
    /// process reads it (its new requests can be leased), but nothing of it is
    /// claimed durable yet — its fingerprints stay in a sealed overlay, its
    /// leases stay leased and its items unstreamed until a [`Flush`] covering it
    /// has run and been handed to [`State::durable`]. Sled recovers batches in
    /// order, so a durable group implies every group sealed before it. Returns
    /// false when the open group was empty.
    pub fn seal(&mut self) -> Result<bool, StoreError> {
        if !self.group.dirty {
            return Ok(false);
        }
        let completed = std::mem::take(&mut self.group.completed);
        if let Err(error) = self.rewrite_completed(&completed) {
            self.group.completed = completed;
            return Err(error);
        }
        let mut group = std::mem::take(&mut self.group);
        for (_, record) in group.queue.drain() {
            group.batch.insert(&record.key[..], record.bytes);
        }
        if let Some(first) = group.record_first {
            let items = std::mem::take(&mut group.items);
            group.batch.insert(keys::with_u64(keys::ITEM, first), items);
        }
        if !group.fingerprints.is_empty() {
            let per_part = keys::MAX_VALUE_BYTES / 20;
            for (part, fps) in group.fingerprints.chunks(per_part).enumerate() {
                let mut key = keys::with_u64(keys::JOURNAL, self.next_group);
                key.extend_from_slice(&(part as u16).to_be_bytes());
                group.batch.insert(key, fps.concat());
            }
            self.next_group += 1;
        }
        for (name, value) in self.counters.take_dirty() {
            group.batch.insert(
                keys::with_prefix(keys::COUNTER, name.as_bytes()),
                &value.to_le_bytes(),
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
        self.db
            .apply_batch(group.batch)
            .map_err(|e| self.db_error(e))?;
        // Visible to this process now: the new entries may be leased.
        for (host_id, smallest) in &group.touched_hosts {
            if let Some(queue) = self.hosts.get_mut(host_id) {
                queue.maybe_ready = true;
                // A new key before the cursor (a higher priority) must be seen.
                if queue.cursor.is_some_and(|(_, entry)| *smallest < entry) {
                    queue.cursor = None;
                }
            }
        }
        self.sealed_seq += 1;
        self.sealed.push_back(Sealed {
            seq: self.sealed_seq,
            fingerprints: group.fingerprints,
            overlay: group.overlay,
            completed,
            pages: group.pages,
            items_end: self.next_item,
        });
        Ok(true)
    }

    /// A flush that makes every group sealed so far durable, to be run on any
    /// thread (it waits for the disk); `None` when no sealed group awaits one.
    pub fn flush_handle(&self) -> Option<Flush> {
        self.sealed.back().map(|last| Flush {
            db: self.db.clone(),
            dir: self.dir.clone(),
            through: last.seq,
        })
    }

    /// Pages completed but not durable yet: the open group's and the sealed ones'.
    pub fn undurable_pages(&self) -> usize {
        self.group.pages + self.sealed.iter().map(|s| s.pages).sum::<usize>()
    }

    /// Pages in the open (unsealed) group.
    pub fn open_pages(&self) -> usize {
        self.group.pages
    }

    /// True when a sealed group awaits a flush.
    pub fn has_sealed(&self) -> bool {
        !self.sealed.is_empty()
    }

    /// The groups a finished [`Flush`] covered are durable: their fingerprints
    /// reach the mapped Bloom bits (and the exact set's recent part), their
    /// leases end, and their items may be streamed. Groups already made durable
    /// by a later flush are skipped, so a stale `Flushed` is harmless.
    pub fn durable(&mut self, flushed: Flushed) -> CommitOutcome {
        let first = self.durable_items;
        let mut pages = 0;
        while self
            .sealed
            .front()
            .is_some_and(|s| s.seq <= flushed.through)
        {
            let Some(group) = self.sealed.pop_front() else {
                break;
            };
            for chunk in group.fingerprints.chunks(WARM_CHUNK) {
                self.bloom.warm(chunk);
                for fp in chunk {
                    self.bloom.insert(fp);
                }
            }
            if self.dedup == DedupMode::Exact {
                self.exact.recent.extend(group.fingerprints.iter().copied());
            }
            self.checkpoint_pending |= !group.fingerprints.is_empty();
            self.journaled += group.fingerprints.len() as u64;
            for (host_id, _, key) in &group.completed {
                if let Some(queue) = self.hosts.get_mut(host_id)
                    && queue.leased.remove(key)
                {
                    self.leased -= 1;
                }
            }
            pages += group.pages;
            self.durable_items = group.items_end;
        }
        CommitOutcome {
            pages,
            items: first..self.durable_items,
        }
    }

    /// Commits, msyncs the Bloom map, then truncates the journal it covers.
    pub fn checkpoint(&mut self) -> Result<(), StoreError> {
        self.commit()?;
        if !self.checkpoint_pending {
            return Ok(());
        }
        self.bloom.flush()?;
        let mut batch = sled::Batch::default();
        if self.dedup == DedupMode::Exact {
            self.seal_exact(&mut batch)?;
        }
        for entry in self.db.scan_prefix([keys::JOURNAL]) {
            let (key, _) = entry.map_err(|e| self.db_error(e))?;
            batch.remove(key);
        }
        self.db.apply_batch(batch).map_err(|e| self.db_error(e))?;
        self.db.flush().map_err(|e| self.db_error(e))?;
        self.sealed_exact();
        self.checkpoint_pending = false;
        self.journaled = 0;
        self.last_checkpoint = Instant::now();
        Ok(())
    }

    /// True when a checkpoint should run (see [`super::CHECKPOINT_EVERY`]).
    pub fn checkpoint_due(&self) -> bool {
        self.checkpoint_pending
            && (self.journaled >= super::CHECKPOINT_MAX_JOURNALED
                || self.last_checkpoint.elapsed() >= super::CHECKPOINT_EVERY)
    }

    /// Sets the bits of every journaled fingerprint; returns the next group number.
    pub(super) fn replay_journal(&mut self) -> Result<u64, StoreError> {
        let mut next = 0;
        for entry in self.db.scan_prefix([keys::JOURNAL]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let seq = keys::u64_after_prefix(&key)
                .ok_or_else(|| self.corrupt("journal", &key, "short key"))?;
            if value.len() % 20 != 0 {
                return Err(self.corrupt("journal", &key, "length is not a multiple of 20"));
            }
            for chunk in value.chunks_exact(20) {
                let mut fp = [0u8; 20];
                fp.copy_from_slice(chunk);
                self.bloom.insert(&fp);
                if self.dedup == DedupMode::Exact {
                    self.exact.recent.insert(fp);
                }
            }
            self.checkpoint_pending = true;
            self.journaled += (value.len() / 20) as u64;
            next = seq + 1;
        }
        Ok(next)
    }

    /// Puts the item record being filled into the batch; the next item starts one.
    fn close_item_record(&mut self) {
        if let Some(first) = self.group.record_first.take() {
            let items = std::mem::take(&mut self.group.items);
            self.group
                .batch
                .insert(keys::with_u64(keys::ITEM, first), items);
        }
    }

    pub(super) fn count(&mut self, name: &str, by: u64) {
        self.counters.add(name, by);
        self.run_counters.add(name, by);
    }

    pub(super) fn opened(&mut self) {
        self.group.opened_at.get_or_insert_with(Instant::now);
    }
}

#[cfg(test)]
#[path = "seal_tests.rs"]
mod seal_tests;
