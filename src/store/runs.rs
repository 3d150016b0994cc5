//! The runs table: run records (`r`), the global counters (`c`) and the
//! current run's, the seed list (`d`), the start of the current cycle (`y`)
//! and its revisit budget left (`g`).
//! A run record names the job version it ran under (see `jobs`).
//!
//! Counters are kept in memory and the changed ones written into each group's
//! batch when it is sealed, with the current run record. A run record is
//! written and synced when the run begins (crash point `run.begin`), rewritten
//! in every group (its counters), and written once more with its outcome at the
//! end (`run.end`); a run found "running" on open was killed
//! (`run.close_dead`). Depends on `table`, `records`, `error` and
//! [`crate::crash`].

use std::collections::BTreeMap;

use super::error::StoreError;
use super::records::{self, Counters, RunOutcome, RunRecord, unix_now};
use super::table::{Batch, Count, Db, Durability, Json, Table, U64, Unit};
use crate::crash;

/// The start of the current crawl cycle: `y` → unix seconds.
pub(super) const CYCLE: Table<(), U64> = Table::new(b'y', "cycle start");
/// The revisits the current cycle may still queue under a budget: `g` →
/// count (absent: the cycle has no budget).
pub(super) const BUDGET: Table<(), U64> = Table::new(b'g', "cycle revisit budget");
/// Seeds: `d` · URL → nothing.
pub(super) const SEED: Table<str, Unit> = Table::new(b'd', "seed");
/// Global counters: `c` · name → value.
pub(super) const COUNTER: Table<str, Count> = Table::new(b'c', "counter");
/// Run records: `r` · run id → run record.
pub(super) const RUN: Table<u64, Json<RunRecord>> = Table::new(b'r', "run");

/// The runs table (see the module doc).
#[derive(Default)]
pub(super) struct Runs {
    counters: Counters,
    run_counters: Counters,
    run: Option<RunRecord>,
}

impl Runs {
    /// Loads the global counters.
    pub(super) fn load(db: &Db) -> Result<Runs, StoreError> {
        let values = COUNTER.iter(db).collect::<Result<BTreeMap<_, _>, _>>()?;
        Ok(Runs {
            counters: Counters::from_values(values),
            ..Runs::default()
        })
    }

    /// A global counter.
    pub(super) fn counter(&self, name: &str) -> u64 {
        self.counters.get(name)
    }

    /// A counter of the current run.
    pub(super) fn run_counter(&self, name: &str) -> u64 {
        self.run_counters.get(name)
    }

    /// Adds `by` to the counter `name`, globally and for this run.
    pub(super) fn count(&mut self, name: &str, by: u64) {
        self.counters.add(name, by);
        self.run_counters.add(name, by);
    }

    /// Changes a global gauge (`frontier/queued`) that has no per-run meaning.
    pub(super) fn gauge(&mut self, name: &str, up: u64, down: u64) {
        if up > 0 {
            self.counters.add(name, up);
        }
        if down > 0 {
            self.counters.sub(name, down);
        }
    }

    /// Sets the current run's counter `name` to `value` if that is more (a
    /// peak, which means nothing summed over runs).
    pub(super) fn note_run_max(&mut self, name: &str, value: u64) {
        let now = self.run_counters.get(name);
        self.run_counters.add(name, value.saturating_sub(now));
    }

    /// The current run record, if a run was begun.
    pub(super) fn run(&self) -> Option<&RunRecord> {
        self.run.as_ref()
    }

    /// Writes the changed counters and the current run record into `batch`.
    pub(super) fn seal(&mut self, batch: &mut Batch) {
        for (name, value) in self.counters.take_dirty() {
            COUNTER.put(batch, &name, &value);
        }
        if let Some(run) = self.run.as_mut() {
            run.updated_at = records::unix_now();
            run.counters = self.run_counters.values().clone();
            RUN.put(batch, &run.id, run);
        }
    }

    /// The run before the current one (or the last run, when none is current).
    pub(super) fn previous(&self, db: &Db) -> Result<Option<RunRecord>, StoreError> {
        let end = self.run.as_ref().map(|run| run.id);
        Ok(RUN.last(db, end.as_ref())?.map(|(_, run)| run))
    }

    /// Every run record, oldest first.
    pub(super) fn all(&self, db: &Db) -> Result<Vec<RunRecord>, StoreError> {
        RUN.values(db)
    }

    /// Begins a run whose first item will be `first_item`, under job version
    /// `job`: its record is put into `batch` (which may hold that job's
    /// record), and the batch is written and synced.
    pub(super) fn begin(
        &mut self,
        db: &Db,
        first_item: u64,
        job: Option<u64>,
        mut batch: Batch,
    ) -> Result<(), StoreError> {
        let id = self.next_id(db)?;
        let now = unix_now();
        let run = RunRecord {
            id,
            started_at: now,
            updated_at: now,
            ended_at: None,
            outcome: RunOutcome::Running,
            pid: std::process::id(),
            counters: BTreeMap::new(),
            first_item: Some(first_item),
            job,
        };
        RUN.put(&mut batch, &id, &run);
        crash::point("run.begin");
        db.commit_now(batch, Durability::Synced(|| ()))?;
        self.run = Some(run);
        Ok(())
    }

    /// The number the next run will get.
    pub(super) fn next_id(&self, db: &Db) -> Result<u64, StoreError> {
        Ok(RUN.last(db, None)?.map_or(1, |(id, _)| id + 1))
    }

    /// Records how the current run ended (the caller commits first and
    /// checkpoints after).
    pub(super) fn end(&mut self, db: &Db, outcome: RunOutcome) -> Result<(), StoreError> {
        if let Some(mut run) = self.run.take() {
            run.outcome = outcome;
            run.ended_at = Some(unix_now());
            run.updated_at = unix_now();
            run.counters = self.run_counters.values().clone();
            let mut batch = Batch::default();
            RUN.put(&mut batch, &run.id, &run);
            crash::point("run.end");
            db.commit_now(batch, Durability::NextSync)?;
        }
        Ok(())
    }

    /// Marks runs left "running" by a dead process as killed.
    pub(super) fn close_dead(&self, db: &Db) -> Result<(), StoreError> {
        let mut batch = Batch::default();
        for entry in RUN.iter(db) {
            let (id, mut run) = entry?;
            if run.outcome == RunOutcome::Running {
                run.outcome = RunOutcome::Killed;
                RUN.put(&mut batch, &id, &run);
            }
        }
        crash::point("run.close_dead");
        db.commit_now(batch, Durability::NextSync)
    }

    /// True when `url` is in the seed list.
    pub(super) fn is_seed(&self, db: &Db, url: &str) -> Result<bool, StoreError> {
        SEED.contains(db, url)
    }

    /// Adds `url` to the seed list, in the group.
    pub(super) fn add_seed(&mut self, batch: &mut Batch, url: &str) {
        SEED.put(batch, url, &());
    }

    /// Takes `url` off the seed list, in the group.
    pub(super) fn remove_seed(&mut self, batch: &mut Batch, url: &str) {
        SEED.delete(batch, url);
    }

    /// The stored seed list.
    pub(super) fn seeds(&self, db: &Db) -> Result<Vec<String>, StoreError> {
        SEED.iter(db).map(|entry| Ok(entry?.0)).collect()
    }

    /// Records that the current cycle started at `now` (unix seconds), in the group.
    pub(super) fn start_cycle(&mut self, batch: &mut Batch, now: u64) {
        CYCLE.put(batch, &(), &now);
    }

    /// Records, in the group, the revisits the current cycle may still queue
    /// (`None`: it has no budget).
    pub(super) fn set_budget_left(&mut self, batch: &mut Batch, left: Option<u64>) {
        match left {
            Some(left) => BUDGET.put(batch, &(), &left),
            None => BUDGET.delete(batch, &()),
        }
    }

    /// The revisits the current cycle may still queue, if it has a budget.
    pub(super) fn budget_left(&self, db: &Db) -> Result<Option<u64>, StoreError> {
        BUDGET.get(db, &())
    }

    /// When the current cycle started, if one did.
    pub(super) fn cycle_start(&self, db: &Db) -> Result<Option<u64>, StoreError> {
        CYCLE.get(db, &())
    }
}
