//! What a caller asks of the state, composed over the tables: dedup and
//! enqueue (seen + frontier + counters), completions (frontier + seen + items +
//! pages + counters), seeds, page records and the revisit policy's due times
//! (runs, pages, seen and frontier), runs, robots; cycle starts are in
//! `cycle`. Each table reads through the state's `Db` and
//! writes into the open group's `Batch`, and none calls another; the state's
//! other composing methods are in `commit`, `checkpoint`, `side` and `views`.
//!
//! Depends on the tables, `records`, [`crate::fingerprint`], [`crate::item`],
//! [`crate::request`] and [`crate::crash`].

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::StoreError;
use super::pages::PageRecord;
use super::records::{RunOutcome, RunRecord};
use super::{Blocked, Lease, Seen, State, robots};
use crate::crash;
use crate::fingerprint::{self, Fingerprint};
use crate::item::Item;
use crate::request::Request;

/// Page records [`State::follow_revisit_policy`] reads before it applies and
/// commits their moves (whole blocks: a few more).
pub(super) const POLICY_CHUNK: usize = 1024;

/// What a finished lease produced.
#[derive(Debug)]
pub struct Completion {
    /// The lease being completed.
    pub lease: Lease,
    /// New requests found (deduped here, never by legs).
    pub requests: Vec<Request>,
    /// Items to store.
    pub items: Vec<Item>,
    /// Counter increments for this page (`fetch/status/200`, ...).
    pub counters: Vec<(&'static str, u64)>,
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

/// Dedup, enqueue and completions.
impl State {
    /// Answers whether `fp` was seen, without recording it.
    pub fn check_seen(&self, fp: &Fingerprint) -> Result<Seen, StoreError> {
        Ok(self.seen.check(fp))
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
        let seen = self.seen.check(&fp);
        match seen {
            Seen::Duplicate if !request.dont_filter => {
                tally.filtered += 1;
                return Ok(false);
            }
            Seen::FalsePositive => tally.false_positive += 1,
            _ => {}
        }
        if seen != Seen::Duplicate {
            self.seen.record(fp);
            tally.unique += 1;
        }
        self.frontier.push(&mut self.group.batch, request);
        tally.enqueued += 1;
        self.opened();
        Ok(true)
    }

    fn add_tally(&mut self, tally: &Tally) {
        self.runs.count("dupefilter/filtered", tally.filtered);
        self.runs
            .count("bloom/false_positive", tally.false_positive);
        self.runs.count("seen/unique", tally.unique);
        self.runs.count("frontier/enqueued", tally.enqueued);
        self.runs.gauge("frontier/queued", tally.enqueued, 0);
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
        self.enqueue_all(&requests, fingerprint_headers)?;
        self.items.append(&mut self.group.batch, &items);
        self.runs.count("items/stored", items.len() as u64);
        self.runs.count("pages/completed", 1);
        for (name, by) in counters {
            self.runs.count(name, by);
        }
        if lease.is_queued() {
            self.runs.gauge("frontier/queued", 0, 1);
        }
        self.frontier.complete(&mut self.group.batch, &lease);
        self.group.pages += 1;
        self.opened();
        Ok(())
    }

    /// Queues a part of a page's links in the open group, ahead of the page's
    /// completion, which comes with its last part (see [`super::LINK_CHUNK`]):
    /// a caller commits the group after each part, so a page with a million
    /// links never holds them all in one group. Crash point `links.chunk`.
    pub fn queue_links(
        &mut self,
        requests: &[Request],
        fingerprint_headers: &[String],
    ) -> Result<(), StoreError> {
        crash::point("links.chunk");
        self.enqueue_all(requests, fingerprint_headers)
    }

    /// Dedups and queues `requests` in the open group: their fingerprints first,
    /// with their Bloom probes loaded in one pass, then one by one.
    fn enqueue_all(
        &mut self,
        requests: &[Request],
        fingerprint_headers: &[String],
    ) -> Result<(), StoreError> {
        let fps: Vec<Fingerprint> = requests
            .iter()
            .map(|r| fingerprint::fingerprint(r, fingerprint_headers))
            .collect();
        self.seen.warm(&fps);
        let mut tally = Tally::default();
        let enqueued = requests
            .iter()
            .zip(fps)
            .try_for_each(|(r, fp)| self.enqueue_counted(r, fp, &mut tally).map(drop));
        self.add_tally(&tally);
        enqueued
    }

    /// Starts the open group's age (see [`State::group_due`]).
    fn opened(&mut self) {
        self.group.opened_at.get_or_insert_with(Instant::now);
    }
}

/// Leases.
impl State {
    /// Hosts that may have an unleased queued request, with their in-flight counts.
    /// A per-host scheduler picks among these and calls [`State::lease_from`].
    pub fn ready_hosts(&self) -> impl Iterator<Item = (u32, &str, usize)> + '_ {
        self.frontier.ready_hosts()
    }

    /// The host name of a host id.
    pub fn host_name(&self, host_id: u32) -> Option<&str> {
        self.frontier.host_name(host_id)
    }

    /// The id of a host the frontier knows (by name, with its port when not the
    /// scheme's); `None` for a host never queued.
    pub fn host_id(&self, host: &str) -> Option<u32> {
        self.frontier.host_id_of(host)
    }

    /// Leases the best queued request of one host, if it has an unleased one.
    /// Requests added in the open (uncommitted) group are not visible yet.
    pub fn lease_from(&mut self, host_id: u32) -> Result<Option<Lease>, StoreError> {
        self.frontier.lease_from(&self.db, host_id)
    }

    /// Leases the best queued request over all hosts: highest priority, then the
    /// oldest. Costs one short range read per host with queued requests.
    pub fn lease(&mut self) -> Result<Option<Lease>, StoreError> {
        self.frontier.lease(&self.db)
    }

    /// Gives a lease back unfinished (e.g. after the shutdown grace period). The
    /// request stays where it was in the queue.
    pub fn release(&mut self, lease: Lease) {
        self.frontier.release(lease);
    }
}

/// Seeds.
impl State {
    /// Adds seed URLs. A URL new to the seed list is queued with `dont_filter`
    /// (and its fingerprint recorded); a known seed is not queued again. Commits.
    pub fn add_seeds(
        &mut self,
        urls: &[String],
        fingerprint_headers: &[String],
    ) -> Result<usize, StoreError> {
        let mut added = 0;
        for url in urls {
            if self.runs.is_seed(&self.db, url)? {
                continue;
            }
            self.runs.add_seed(&mut self.group.batch, url);
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

    /// The fingerprints of the stored seeds' requests (`seed_request`), in seed order.
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
        self.runs.seeds(&self.db)
    }

    /// Removes seeds from the seed list, with the seed requests of theirs still
    /// queued (an unreachable seed otherwise stays queued run after run). A
    /// removed seed's request is recorded as blocked (`removed`), so that its
    /// seen fingerprint stays accounted for. Commits; returns how many seeds and
    /// queued requests went.
    pub fn remove_seeds(&mut self, urls: &[String]) -> Result<(usize, usize), StoreError> {
        let (mut seeds, mut queued) = (0, 0);
        for url in urls {
            if !self.runs.is_seed(&self.db, url)? {
                continue;
            }
            self.runs.remove_seed(&mut self.group.batch, url);
            seeds += 1;
            let host = super::frontier::host_of(url);
            if let Some(host_id) = self.frontier.host_id_of(&host) {
                let found = self
                    .frontier
                    .queued_entries(&self.db, host_id, |request| request.url == *url)?;
                queued += found.len();
                self.runs.gauge("frontier/queued", 0, found.len() as u64);
                // Taken out of their records at the seal, as completed leases are.
                self.frontier.drop_entries(&mut self.group.batch, found);
            }
            self.record_blocked(url, "removed")?;
        }
        self.commit()?;
        Ok((seeds, queued))
    }
}

/// Page records and crawl cycles.
impl State {
    /// The page record of `fp`: the open group's, then the sealed group's (neither
    /// durable yet), then the stored one.
    pub fn page(&self, fp: &Fingerprint) -> Result<Option<PageRecord>, StoreError> {
        self.pages.get(&self.db, fp)
    }

    /// Stores (replaces) the page record of `fp` in the open group, moving its
    /// due-index entry from `previous_due` to the record's `next_due`.
    pub fn put_page(
        &mut self,
        fp: Fingerprint,
        record: PageRecord,
        previous_due: Option<u64>,
    ) -> Result<(), StoreError> {
        self.pages
            .put(&mut self.group.batch, fp, record, previous_due);
        self.opened();
        Ok(())
    }

    /// Puts `fp` back in the due index at `due`: its revisit ended without a new
    /// record (the fetch failed for good, or robots.txt refused it). Give a `due`
    /// no earlier than now, so that a resumed cycle does not queue it again.
    pub fn keep_due(&mut self, fp: &Fingerprint, due: u64) {
        self.pages.keep_due(&mut self.group.batch, fp, due);
        self.opened();
    }

    /// Visits every page record, in the order pages were first recorded; stops
    /// early when `f` returns false.
    pub fn for_each_page(
        &self,
        f: impl FnMut(Fingerprint, &PageRecord) -> bool,
    ) -> Result<(), StoreError> {
        self.pages.for_each(&self.db, f)
    }

    /// Visits the stored page records from position `from` (empty: the
    /// first) on, in [`State::for_each_page`]'s order, a block at a time,
    /// until `f` has seen at least `at_least` of them; returns the position
    /// to go on from (`None`: the end was reached). Records of the open and
    /// sealed groups are not seen (read a page again with [`State::page`]).
    pub fn visit_pages_from(
        &self,
        from: &[u8],
        at_least: usize,
        f: impl FnMut(Fingerprint, &PageRecord),
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.pages.visit_from(&self.db, from, at_least, f)
    }

    /// How many pages are due at or before `until` (unix seconds): the due
    /// index's entries, no record read.
    pub fn count_due(&self, until: u64) -> Result<u64, StoreError> {
        let (mut from, mut count) = (0, 0u64);
        while let Some(unit) = self.pages.next_due(&self.db, from, until)? {
            count += unit.fps.len() as u64;
            match unit.due.checked_add(1) {
                Some(next) => from = next,
                None => break,
            }
        }
        Ok(count)
    }

    /// Visits the page records due at or before `until` (unix seconds), soonest
    /// first; stops early when `f` returns false.
    pub fn for_each_due(
        &self,
        until: u64,
        mut f: impl FnMut(Fingerprint, PageRecord) -> bool,
    ) -> Result<(), StoreError> {
        let mut from = 0;
        while let Some(unit) = self.pages.next_due(&self.db, from, until)? {
            for fp in unit.fps {
                let Some(record) = self.page(&fp)? else {
                    return Err(StoreError::Corrupt {
                        path: self.db.dir().to_owned(),
                        what: format!("due index at {}", unit.due),
                        reason: format!("no page record of {}", crate::fingerprint::to_hex(&fp)),
                    });
                };
                if !f(fp, record) {
                    return Ok(());
                }
            }
            match unit.due.checked_add(1) {
                Some(next) => from = next,
                None => break,
            }
        }
        Ok(())
    }

    /// Makes the due index follow the revisit policy in force, described by
    /// `policy`: when it differs from the one the index was computed under (or
    /// none was recorded), every page's due time becomes what `due` says for its
    /// record (`None`: never again), so that the policy in force decides what a
    /// cycle re-asks (`--revisit-after 0` makes every recorded page due). A page
    /// out of the due index — queued for this cycle, or in flight — keeps its
    /// place. Returns how many pages moved. Reads and commits `POLICY_CHUNK`
    /// pages at a time (memory holds one chunk's moves, not the pages') and
    /// records the policy last, so a crash midway redoes the pass (it is
    /// idempotent).
    pub fn follow_revisit_policy(
        &mut self,
        policy: &str,
        due: impl Fn(&PageRecord) -> Option<u64>,
    ) -> Result<u64, StoreError> {
        if self.pages.policy(&self.db)?.as_deref() == Some(policy) {
            return Ok(0);
        }
        // The pages are visited about a thousand at a time, each chunk's moves
        // applied and committed before the next is read, so that memory holds
        // one chunk whatever the number of pages.
        let mut from = Vec::new();
        let mut moved = 0;
        loop {
            // `(fingerprint, due now, due under the policy)` of the pages that move.
            let mut moves = Vec::new();
            let next = self
                .pages
                .visit_from(&self.db, &from, POLICY_CHUNK, |fp, record| {
                    // A gone page too: the schedule says when it is asked again.
                    let next = due(record);
                    if next != record.next_due {
                        moves.push((fp, record.next_due, next));
                    }
                })?;
            // The pages in the index at each due time the moves leave, read
            // once a second.
            let mut due_at: HashMap<u64, HashSet<Fingerprint>> = HashMap::new();
            for (fp, previous, next) in moves {
                if let Some(at) = previous {
                    let there = match due_at.entry(at) {
                        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(self.pages.due_at(&self.db, at)?.into_iter().collect())
                        }
                    };
                    if !there.contains(&fp) {
                        continue;
                    }
                }
                let Some(mut record) = self.pages.get(&self.db, &fp)? else {
                    continue;
                };
                record.next_due = next;
                self.pages.put(&mut self.group.batch, fp, record, previous);
                moved += 1;
            }
            self.commit()?;
            match next {
                Some(position) => from = position,
                None => break,
            }
        }
        self.pages.set_policy(&mut self.group.batch, policy);
        self.runs.count("revisit/rescheduled", moved);
        self.commit()?;
        Ok(moved)
    }
}

/// Runs and counters.
impl State {
    /// A global counter.
    pub fn counter(&self, name: &str) -> u64 {
        self.runs.counter(name)
    }

    /// A counter of the current run.
    pub fn run_counter(&self, name: &str) -> u64 {
        self.runs.run_counter(name)
    }

    /// The current run record, if a run was begun.
    pub fn run(&self) -> Option<&RunRecord> {
        self.runs.run()
    }

    /// The run before the current one (or the last run, when none is current).
    pub fn previous_run(&self) -> Result<Option<RunRecord>, StoreError> {
        self.runs.previous(&self.db)
    }

    /// Notes a peak of the current run (say, its memory): its run counter
    /// `name` becomes `value` if that is more. Not a global counter.
    pub fn note_run_peak(&mut self, name: &str, value: u64) {
        self.runs.note_run_max(name, value);
    }

    /// Ends the current run: commits, records how it ended, and checkpoints.
    /// A run that did not fail, once all of that succeeded, has sled advance
    /// its snapshot at the close (see `repair`); a failed one (a full disk, an
    /// I/O error) leaves the database to the next open's checks untouched.
    pub fn end_run(&mut self, outcome: RunOutcome) -> Result<(), StoreError> {
        self.commit()?;
        self.runs.end(&self.db, outcome)?;
        self.checkpoint()?;
        if outcome != RunOutcome::Failed {
            self.close.snapshot_at_close();
        }
        Ok(())
    }
}

/// Robots records and output files.
impl State {
    /// Every stored robots.txt record.
    pub fn robots_records<T: Serialize + DeserializeOwned>(&self) -> Result<Vec<T>, StoreError> {
        robots::records(&self.db)
    }

    /// Stores (replaces) the robots.txt record of `origin`, in the open group.
    pub fn put_robots<T: Serialize + DeserializeOwned>(&mut self, origin: &str, record: &T) {
        robots::put(&mut self.group.batch, origin, record);
    }

    /// Records that `url` was not fetched for `reason`, in the open group.
    pub fn record_blocked(&mut self, url: &str, reason: &str) -> Result<(), StoreError> {
        robots::block(&self.db, &mut self.group.batch, url, reason)
    }

    /// Every blocked request, in URL order.
    pub fn blocked(&self) -> Result<Vec<Blocked>, StoreError> {
        robots::blocked(&self.db)
    }
}
