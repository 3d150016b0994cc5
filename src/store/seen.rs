//! The seen set and the completion step: dedup, enqueue, seeds, completions
//! into the open group, and the journal replay on open.
//!
//! Dedup answers, in order: the open and the sealed group's overlays (exact), then the mapped
//! Bloom filter; a Bloom "maybe" is confirmed against the exact set (`exact`)
//! unless the state runs in `bloom` mode. The fingerprints recorded in a group are
//! written to the group's batch once, as one journal entry, and reach the mapped
//! bits (and the exact set's in-memory recent part) only after the batch is
//! durable (see `commit`). A checkpoint (see `checkpoint`, off the crawl loop)
//! syncs the bits, seals the recent fingerprints into an exact run and drops the
//! journal entries it covers; opening replays whatever journal is left (setting
//! bits is idempotent).

use std::time::Instant;

use super::{State, StoreError, crash, keys};
use crate::config::DedupMode;
use crate::fingerprint::{self, Fingerprint};
use crate::item::Item;
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

/// What a batch of enqueues counted (see [`State::enqueue`]).
#[derive(Default)]
struct Tally {
    filtered: u64,
    false_positive: u64,
    unique: u64,
    enqueued: u64,
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

    /// Removes seeds from the seed list, with the seed requests of theirs still
    /// queued (an unreachable seed otherwise stays queued run after run). A
    /// removed seed's request is recorded as blocked (`removed`), so that its
    /// seen fingerprint stays accounted for. Commits; returns how many seeds and
    /// queued requests went.
    pub fn remove_seeds(&mut self, urls: &[String]) -> Result<(usize, usize), StoreError> {
        let (mut seeds, mut queued) = (0, 0);
        for url in urls {
            let key = keys::with_prefix(keys::SEED, url.as_bytes());
            if !self.db.contains_key(&key).map_err(|e| self.db_error(e))? {
                continue;
            }
            self.group.batch.remove(key);
            self.group.dirty = true;
            seeds += 1;
            let host = super::frontier::host_of(url);
            if let Some(&host_id) = self.host_ids.get(&host) {
                let found = self.queued_entries(host_id, |request| request.url == *url)?;
                queued += found.len();
                self.counters.sub("frontier/queued", found.len() as u64);
                // Taken out of their records at the seal, as completed leases are.
                self.group.completed.extend(found);
            }
            self.record_blocked(url, "removed")?;
        }
        self.commit()?;
        Ok((seeds, queued))
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
        self.append_items(&items);
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

    pub(super) fn opened(&mut self) {
        self.group.opened_at.get_or_insert_with(Instant::now);
    }
}
