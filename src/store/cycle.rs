//! Cycle starts: a new cycle queues the stored seeds and the pages the
//! revisit policy makes due (all of them, or under a revisit budget the ones
//! worth most), and a cycle start cut short by a crash is finished by the next
//! run. Composed over the runs, pages, seen and frontier tables like `ops`.
//! Depends on the tables, [`crate::fingerprint`], [`crate::request`] and
//! [`crate::crash`].

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashSet};

use super::State;
use super::error::StoreError;
use super::ops::seed_request;
use super::pages::{CycleStart, PageRecord};
use crate::crash;
use crate::fingerprint::Fingerprint;
use crate::request::Request;

/// Pages queued under a budget per commit (crash point `cycle.budget`).
pub const BUDGET_CHUNK: usize = 256;

/// A cycle's revisit budget: of the pages it governs, at most `revisits` are
/// queued in a cycle, those whose revisit is worth most.
pub struct Budget<'a> {
    /// The most revisits of governed pages a cycle queues.
    pub revisits: u64,
    /// What revisiting a page at the cycle's start (unix seconds) is worth,
    /// in any unit that orders pages (0 or less: nothing, never queued under
    /// the budget); `None` for a page the budget does not govern, which is
    /// queued when it is due, as without a budget.
    pub worth: &'a dyn Fn(&PageRecord, u64) -> Option<f64>,
}

/// The `n` pages worth most of those offered, as a revisit budget chooses
/// them: more worth first, and of equal worth the lower fingerprint, so that
/// the choice is the same whenever it is made. Holds `n` entries at most.
pub struct TopWorth<T> {
    n: usize,
    heap: BinaryHeap<Reverse<Entry<T>>>,
}

impl<T> TopWorth<T> {
    /// Keeps at most `n`.
    pub fn new(n: u64) -> TopWorth<T> {
        TopWorth {
            n: usize::try_from(n).unwrap_or(usize::MAX),
            heap: BinaryHeap::new(),
        }
    }

    /// Offers the page `fp`, worth `worth`, with what to keep of it.
    pub fn offer(&mut self, worth: f64, fp: Fingerprint, item: T) {
        if self.n == 0 {
            return;
        }
        self.heap.push(Reverse(Entry { worth, fp, item }));
        if self.heap.len() > self.n {
            self.heap.pop();
        }
    }

    /// The pages kept, worth most first.
    pub fn into_best(self) -> Vec<(Fingerprint, T)> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(entry)| (entry.fp, entry.item))
            .collect()
    }
}

/// One page [`TopWorth`] holds.
struct Entry<T> {
    worth: f64,
    fp: Fingerprint,
    item: T,
}

impl<T> Ord for Entry<T> {
    /// More worth first; of equal worth, the lower fingerprint.
    fn cmp(&self, other: &Self) -> Ordering {
        self.worth
            .total_cmp(&other.worth)
            .then_with(|| other.fp.cmp(&self.fp))
    }
}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T> Eq for Entry<T> {}

/// Cycle starts.
impl State {
    /// Starts a crawl cycle at `now`: queues every stored seed and every page
    /// due by `now` again (`dont_filter`). A seed whose host still has queued
    /// requests is skipped (a host held over from the last run finishes first, so
    /// its seed is not queued twice), and so is a seed whose host is parked at
    /// `now` after failing on the network run after run. A due page leaves the due index in the batch
    /// that queues it, so it can never be queued twice, and a cycle start cut
    /// short by a crash is finished by [`State::resume_cycle`]. Commits.
    ///
    /// With a `budget`, the pages it governs are queued by worth, not by due
    /// time (see [`Budget`]); the revisits left to queue are kept with the
    /// cycle, so that a resumed start queues the rest of the same choice.
    pub fn start_cycle(
        &mut self,
        now: u64,
        fingerprint_headers: &[String],
        budget: Option<&Budget<'_>>,
    ) -> Result<CycleStart, StoreError> {
        self.runs.start_cycle(&mut self.group.batch, now);
        self.runs
            .set_budget_left(&mut self.group.batch, budget.map(|b| b.revisits));
        let mut start = CycleStart::default();
        let mut busy = HashSet::new();
        let parked: HashSet<String> = super::unreachable::all(&self.db)?
            .into_iter()
            .filter(|host| host.parked_at(now))
            .map(|host| host.host)
            .collect();
        for url in self.seeds()? {
            let request = seed_request(url);
            let host = super::frontier::host_of(&request.url);
            if parked.contains(&host) {
                start.parked += 1;
                continue;
            }
            if let Some(id) = self.frontier.host_id_of(&host)
                && (busy.contains(&id) || self.frontier.host_has_queued(&self.db, id)?)
            {
                busy.insert(id);
                start.held += 1;
                continue;
            }
            self.enqueue(&request, fingerprint_headers)?;
            start.seeds += 1;
        }
        // The first commit of the cycle (in `queue_due` or below) holds its start.
        crash::point("cycle.start");
        let budget = budget.map(|b| (b, b.revisits));
        start.due = self.queue_due(now, now, fingerprint_headers, budget)?;
        self.runs.count("cycle/started", 1);
        self.runs.count("revisit/seeds", start.seeds);
        self.commit()?;
        Ok(start)
    }

    /// Resumes the current cycle: queues the pages that were due before the
    /// second it started and are still in the due index (a crash cut the cycle
    /// start short). A page fetched in this cycle is due no earlier than that
    /// second, so nothing is queued twice. A cycle started with a budget
    /// queues what is left of it, with `budget`'s worth, chosen as the start
    /// chose (a page fetched in this cycle is worth nothing to it). Returns
    /// how many. Commits.
    pub fn resume_cycle(
        &mut self,
        fingerprint_headers: &[String],
        budget: Option<&Budget<'_>>,
    ) -> Result<u64, StoreError> {
        let Some(started) = self.runs.cycle_start(&self.db)? else {
            return Ok(0);
        };
        let budget = match budget {
            Some(budget) => self.runs.budget_left(&self.db)?.map(|left| (budget, left)),
            None => None,
        };
        let queued = self.queue_due(
            started.saturating_sub(1),
            started,
            fingerprint_headers,
            budget,
        )?;
        self.commit()?;
        Ok(queued)
    }

    /// Queues every page due by `until` that is not a seed (a gone page is due
    /// only when it is to be asked again, see `Schedule::gone_due`), each in
    /// the batch that removes its due-index entry. Reads one due second at a
    /// time (as many pages as were fetched or failed in one second) and
    /// commits every 1,024 pages, whatever the number due.
    ///
    /// With a budget and the revisits `left` of it, the pages it governs are
    /// not queued by due time: of those in the due index (due or not) that
    /// were fetched before the cycle `started`, the `left` worth most at
    /// `started` are queued (ties go to the lower fingerprint), in that order,
    /// the count left kept in each chunk's batch ([`BUDGET_CHUNK`] pages, crash
    /// point `cycle.budget`). The choice is the same whenever it is made
    /// during the cycle: pages already queued left the index and the count.
    fn queue_due(
        &mut self,
        until: u64,
        started: u64,
        fingerprint_headers: &[String],
        budget: Option<(&Budget<'_>, u64)>,
    ) -> Result<u64, StoreError> {
        let seeds: HashSet<Fingerprint> = self
            .seed_fingerprints(fingerprint_headers)?
            .into_iter()
            .collect();
        // Under a budget the whole index is read: a page not yet due may be
        // worth more than a due one.
        let last = if budget.is_some() { u64::MAX } else { until };
        // A page chosen: its place in the due index and its request.
        let mut best: TopWorth<(u64, Request)> = TopWorth::new(budget.map_or(0, |(_, left)| left));
        let mut queued = 0;
        let mut waiting = 0;
        let mut from = 0;
        while let Some(unit) = self.pages.next_due(&self.db, from, last)? {
            for fp in unit.fps {
                // A seed keeps its place: the cycle queued it as a seed.
                if seeds.contains(&fp) {
                    continue;
                }
                let record = self.page(&fp)?;
                if let (Some((budget, left)), Some(record)) = (budget, &record)
                    && let Some(worth) = (budget.worth)(record, started)
                {
                    if worth > 0.0 && record.last_fetched < started && left > 0 {
                        best.offer(worth, fp, (unit.due, record.revisit_request()));
                    }
                    continue;
                }
                if unit.due > until {
                    continue;
                }
                self.pages.unqueue_due(&mut self.group.batch, unit.due, fp);
                if let Some(record) = record {
                    self.enqueue(&record.revisit_request(), fingerprint_headers)?;
                    queued += 1;
                }
                // Long due lists are committed in parts, to keep each batch small.
                waiting += 1;
                if waiting == 1024 {
                    self.commit()?;
                    waiting = 0;
                }
            }
            match unit.due.checked_add(1) {
                Some(next) => from = next,
                None => break,
            }
        }
        self.runs.count("revisit/due", queued);
        if let Some((_, mut left)) = budget {
            let chosen = best.into_best();
            let last = chosen.len();
            let mut chunk = 0;
            for (n, (fp, (due, request))) in chosen.into_iter().enumerate() {
                self.pages.unqueue_due(&mut self.group.batch, due, fp);
                self.enqueue(&request, fingerprint_headers)?;
                left -= 1;
                self.runs.set_budget_left(&mut self.group.batch, Some(left));
                chunk += 1;
                if chunk == BUDGET_CHUNK || n + 1 == last {
                    // Counted in the batch that queues them.
                    self.runs.count("revisit/due", chunk as u64);
                    self.runs.count("revisit/budgeted", chunk as u64);
                    crash::point("cycle.budget");
                    self.commit()?;
                    queued += chunk as u64;
                    chunk = 0;
                }
            }
        }
        Ok(queued)
    }
}
