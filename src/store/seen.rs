//! The seen set and the completion step: dedup, group commit, Bloom journal.
//!
//! Dedup answers, in order: the open and the sealed group's overlays (exact), then the mapped
//! Bloom filter; a Bloom "maybe" is confirmed against the exact set (`exact`)
//! unless the state runs in `bloom` mode. The fingerprints recorded in a group are
//! written to the group's batch once, as one journal entry, and reach the mapped
//! bits (and the exact set's in-memory recent part) only after the batch is
//! flushed. Group commit has two stages: [`State::seal`] closes the group and
//! sets its batch aside (its fingerprints move to a sealed overlay), and a
//! [`Flush`], which may run on another thread, applies and syncs that batch;
//! only then does [`State::durable`] end its leases, set its bits, make its new
//! requests leasable and release its items. One group is sealed at a time.
//! A checkpoint (see `checkpoint`, off the crawl loop) syncs the bits, seals
//! the recent fingerprints into an exact run and drops the journal entries it
//! covers; opening replays whatever journal is left (setting bits is idempotent).

use std::ops::Range;
use std::time::Instant;

use super::{GROUP_MAX_AGE, GROUP_MAX_PAGES, State, StoreError, crash, keys, records};
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

/// The group between [`State::seal`] and [`State::durable`]: its batch is in a
/// [`Flush`] (or still here, before [`State::flush_handle`] took it), so nothing of
/// it is in the database yet as far as this process may assume; what the state
/// must answer meanwhile (dedup, page records) it answers from here.
pub(super) struct Sealed {
    /// Number of the group, counted from 1 in this process.
    seq: u64,
    /// The batch, until a flush takes it.
    batch: Option<sled::Batch>,
    /// Its fingerprints, in order (their journal entry is in its batch).
    fingerprints: Vec<Fingerprint>,
    /// The same fingerprints as a set, checked by dedup until they reach the bits.
    overlay: crate::fingerprint::FingerprintSet,
    /// Its page records, read by [`State::page`] until they are in the database.
    pub(super) page_records: crate::fingerprint::FingerprintMap<super::pages::PageRecord>,
    /// Its completed leases, `(host id, record key, entry key)`.
    completed: Vec<(u32, [u8; keys::QUEUE_KEY_LEN], [u8; keys::QUEUE_KEY_LEN])>,
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
/// sled batch, then a flush ([`State::flush_handle`]). It owns the batch and a
/// handle on the database, not the state, so it can run on another thread while
/// the state fills the next group.
pub struct Flush {
    db: sled::Db,
    dir: std::path::PathBuf,
    batch: sled::Batch,
    seq: u64,
}

impl Flush {
    /// Applies the group's batch and syncs the database log; blocks until the
    /// disk has it.
    pub fn run(self) -> Result<Flushed, StoreError> {
        let Flush {
            db,
            dir,
            batch,
            seq,
        } = self;
        crash::point("group.apply");
        let done = db.apply_batch(batch).and_then(|()| {
            crash::point("group.sync");
            db.flush().map(drop)
        });
        match done {
            Ok(()) => Ok(Flushed { seq }),
            Err(source) => Err(StoreError::Db { path: dir, source }),
        }
    }
}

/// Proof that a [`Flush`] ran; hand it to [`State::durable`].
#[derive(Debug)]
#[must_use = "the group becomes durable only when this is handed to State::durable"]
pub struct Flushed {
    seq: u64,
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
        if self.group.overlay.contains(fp)
            || self.sealed.as_ref().is_some_and(|s| s.overlay.contains(fp))
        {
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

    /// Commits everything completed so far, on this thread: a group sealed but
    /// not flushed yet, then the open group ([`State::seal`], its [`Flush`], then
    /// [`State::durable`]). Fails, changing nothing, while the flush of a sealed
    /// group runs elsewhere.
    pub fn commit(&mut self) -> Result<CommitOutcome, StoreError> {
        if self.sealed.as_ref().is_some_and(|s| s.batch.is_none()) {
            return Err(StoreError::FlushRunning {
                path: self.dir.clone(),
            });
        }
        let first = self.durable_items;
        let mut pages = 0;
        // A group sealed but not flushed yet goes first, then the open one.
        for _ in 0..2 {
            self.seal()?;
            let Some(flush) = self.flush_handle() else {
                break;
            };
            match flush.run() {
                Ok(flushed) => pages += self.durable(flushed).pages,
                Err(error) => {
                    self.flush_failed();
                    return Err(error);
                }
            }
        }
        Ok(CommitOutcome {
            pages,
            items: first..self.durable_items,
        })
    }

    /// Seals the open group: its batch is built and set aside for a [`Flush`]
    /// ([`State::flush_handle`]); a new group opens. Until [`State::durable`]
    /// sees that flush, nothing of the sealed group is claimed: its fingerprints
    /// are answered from its overlay, its page records from memory, its leases
    /// stay leased, its new requests are not leasable and its items are not
    /// streamed. Only one group is sealed at a time: returns false, sealing
    /// nothing, while one is (or when the open group is empty).
    pub fn seal(&mut self) -> Result<bool, StoreError> {
        if !self.group.dirty || self.sealed.is_some() {
            return Ok(false);
        }
        // The previous group is in the database: its rewrites are what we read.
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
        self.sealed = Some(Sealed {
            seq: self.sealed_seq,
            batch: Some(group.batch),
            fingerprints: group.fingerprints,
            overlay: group.overlay,
            page_records: group.page_records,
            completed,
            touched_hosts: group.touched_hosts,
            pages: group.pages,
            items_end: self.next_item,
            journal,
        });
        Ok(true)
    }

    /// The flush of the sealed group, to be run on any thread (it waits for the
    /// disk); `None` when no group is sealed or its flush was already taken.
    pub fn flush_handle(&mut self) -> Option<Flush> {
        let sealed = self.sealed.as_mut()?;
        let batch = sealed.batch.take()?;
        Some(Flush {
            db: self.db.clone(),
            dir: self.dir.clone(),
            batch,
            seq: sealed.seq,
        })
    }

    /// The sealed group's [`Flush`] failed (or its thread died): the group is
    /// forgotten here. Its batch was applied atomically or not at all, so the
    /// database stays consistent either way; its leases stay leased for the rest
    /// of this process (the caller is expected to stop), and whatever of it did
    /// reach the disk is found by the next open (journal replay, item watermark).
    pub fn flush_failed(&mut self) {
        if self.sealed.as_ref().is_some_and(|s| s.batch.is_none()) {
            self.sealed = None;
        }
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
    /// be streamed. A `Flushed` of another group changes nothing.
    pub fn durable(&mut self, flushed: Flushed) -> CommitOutcome {
        let first = self.durable_items;
        let mut pages = 0;
        if self.sealed.as_ref().is_some_and(|s| s.seq == flushed.seq)
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

    /// Sets the bits of every journaled fingerprint; returns the next group number.
    pub(super) fn replay_journal(&mut self) -> Result<u64, StoreError> {
        let mut next = 0;
        crash::point("open.replay");
        for entry in self.db.scan_prefix([keys::JOURNAL]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let seq = keys::u64_after_prefix(&key)
                .ok_or_else(|| self.corrupt("journal", &key, "short key"))?;
            let body = match value.len() % 20 {
                // Written before journal entries had a version byte.
                0 => &value[..],
                1 if value[0] == keys::JOURNAL_VERSION => &value[1..],
                _ => {
                    return Err(self.corrupt(
                        "journal",
                        &key,
                        "length is not a version byte and a multiple of 20",
                    ));
                }
            };
            for chunk in body.chunks_exact(20) {
                let mut fp = [0u8; 20];
                fp.copy_from_slice(chunk);
                self.bloom.insert(&fp);
                if self.dedup == DedupMode::Exact {
                    self.exact.recent.insert(fp);
                }
            }
            self.journaled += (body.len() / 20) as u64;
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
