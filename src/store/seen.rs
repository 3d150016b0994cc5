//! The seen set and the completion step: dedup, group commit, Bloom journal.
//!
//! Dedup answers, in order: the open group's overlay (exact), then the mapped
//! Bloom filter; a Bloom "maybe" is confirmed against the exact set (`exact`)
//! unless the state runs in `bloom` mode. The fingerprints recorded in a group are
//! written to the group's batch once, as one journal entry, and reach the mapped
//! bits (and the exact set's in-memory recent part) only after the batch is
//! flushed. A checkpoint msyncs the bits, seals the recent fingerprints into an
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

/// The request a seed is queued as: a `GET` that bypasses the seen set.
pub fn seed_request(url: String) -> Request {
    let mut request = Request::get(url);
    request.dont_filter = true;
    request
}

impl State {
    /// Answers whether `fp` was seen, without recording it.
    pub fn check_seen(&self, fp: &Fingerprint) -> Result<Seen, StoreError> {
        if self.group.overlay.contains(fp) {
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
        let fp = fingerprint::fingerprint(request, fingerprint_headers);
        let seen = self.check_seen(&fp)?;
        match seen {
            Seen::Duplicate if !request.dont_filter => {
                self.count("dupefilter/filtered", 1);
                return Ok(false);
            }
            Seen::FalsePositive => self.count("bloom/false_positive", 1),
            _ => {}
        }
        if seen != Seen::Duplicate {
            self.record_fingerprint(fp);
        }
        self.push_queue(request);
        self.count("frontier/enqueued", 1);
        self.opened();
        Ok(true)
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
        for request in &requests {
            self.enqueue(request, fingerprint_headers)?;
        }
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

    /// True when the open group should be committed (64 pages or 20 ms old).
    pub fn group_due(&self) -> bool {
        self.group.pages >= GROUP_MAX_PAGES
            || self
                .group
                .opened_at
                .is_some_and(|t| t.elapsed() >= GROUP_MAX_AGE)
    }

    /// Time until the open group is due, `None` when it is empty.
    pub fn group_deadline(&self) -> Option<Instant> {
        self.group.opened_at.map(|t| t + GROUP_MAX_AGE)
    }

    /// Commits the open group: one atomic batch, one flush, then the group's
    /// fingerprints go to the mapped Bloom bits and its leases end.
    pub fn commit(&mut self) -> Result<CommitOutcome, StoreError> {
        if !self.group.dirty {
            return Ok(CommitOutcome::default());
        }
        let completed = std::mem::take(&mut self.group.completed);
        if let Err(error) = self.rewrite_completed(&completed) {
            self.group.completed = completed;
            return Err(error);
        }
        let mut group = std::mem::take(&mut self.group);
        group.completed = completed;
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
        self.db.flush().map_err(|e| self.db_error(e))?;
        // Durable now: the bits may follow, and the leases may end.
        for fp in &group.fingerprints {
            self.bloom.insert(fp);
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
        for (host_id, smallest) in &group.touched_hosts {
            if let Some(queue) = self.hosts.get_mut(host_id) {
                queue.maybe_ready = true;
                // A new key before the cursor (a higher priority) must be seen.
                if queue.cursor.is_some_and(|(_, entry)| *smallest < entry) {
                    queue.cursor = None;
                }
            }
        }
        let first = group.first_item.unwrap_or(self.next_item);
        Ok(CommitOutcome {
            pages: group.pages,
            items: first..self.next_item,
        })
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

    fn record_fingerprint(&mut self, fp: Fingerprint) {
        self.group.overlay.insert(fp);
        self.group.fingerprints.push(fp);
        self.count("seen/unique", 1);
    }

    pub(super) fn count(&mut self, name: &str, by: u64) {
        self.counters.add(name, by);
        self.run_counters.add(name, by);
    }

    pub(super) fn opened(&mut self) {
        self.group.opened_at.get_or_insert_with(Instant::now);
    }
}
