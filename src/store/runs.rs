//! Runs and counters: the run records (`r`), the global counters (`c`), and
//! the counters of the current run, kept in memory and written into each
//! group's batch when it is sealed.
//!
//! A run record is written and synced when the run begins (crash point
//! `run.begin`), rewritten in every group (its counters), and written once more
//! with its outcome at the end (`run.end`); a run found "running" on open was
//! killed (`run.close_dead`). Depends on `records` and `keys`.

use std::collections::BTreeMap;

use super::records::{Counters, RunOutcome, RunRecord, unix_now};
use super::{State, StoreError, crash, keys, records};

impl State {
    /// A global counter.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name)
    }

    /// A counter of the current run.
    pub fn run_counter(&self, name: &str) -> u64 {
        self.run_counters.get(name)
    }

    /// The current run record, if a run was begun.
    pub fn run(&self) -> Option<&RunRecord> {
        self.run.as_ref()
    }

    /// The run before the current one (or the last run, when none is current).
    pub fn previous_run(&self) -> Result<Option<RunRecord>, StoreError> {
        let end = match &self.run {
            Some(run) => keys::with_u64(keys::RUN, run.id),
            None => vec![keys::RUN + 1],
        };
        match self.db.range(vec![keys::RUN]..end).next_back() {
            None => Ok(None),
            Some(entry) => {
                let (key, value) = entry.map_err(|e| self.db_error(e))?;
                Ok(Some(self.decode_record("run", &key, &value)?))
            }
        }
    }

    /// Ends the current run: commits, checkpoints and records how it ended.
    pub fn end_run(&mut self, outcome: RunOutcome) -> Result<(), StoreError> {
        self.commit()?;
        if let Some(mut run) = self.run.take() {
            run.outcome = outcome;
            run.ended_at = Some(unix_now());
            run.updated_at = unix_now();
            run.counters = self.run_counters.values().clone();
            let key = keys::with_u64(keys::RUN, run.id);
            crash::point("run.end");
            self.db
                .insert(key, records::encode(&run))
                .map_err(|e| self.db_error(e))?;
        }
        self.checkpoint()
    }

    pub(super) fn begin_run(&mut self) -> Result<(), StoreError> {
        let id = self.last_u64_key(keys::RUN)?.map_or(1, |n| n + 1);
        let now = unix_now();
        let run = RunRecord {
            id,
            started_at: now,
            updated_at: now,
            ended_at: None,
            outcome: RunOutcome::Running,
            pid: std::process::id(),
            counters: BTreeMap::new(),
            first_item: Some(self.next_item),
        };
        let key = keys::with_u64(keys::RUN, id);
        crash::point("run.begin");
        self.db
            .insert(key, records::encode(&run))
            .map_err(|e| self.db_error(e))?;
        self.db.flush().map_err(|e| self.db_error(e))?;
        self.run = Some(run);
        Ok(())
    }

    /// Marks runs left "running" by a dead process as killed.
    pub(super) fn close_dead_runs(&mut self) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        for entry in self.db.scan_prefix([keys::RUN]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let mut run: RunRecord = self.decode_record("run", &key, &value)?;
            if run.outcome == RunOutcome::Running {
                run.outcome = RunOutcome::Killed;
                batch.insert(key, records::encode(&run));
            }
        }
        crash::point("run.close_dead");
        self.db.apply_batch(batch).map_err(|e| self.db_error(e))
    }

    pub(super) fn load_counters(&mut self) -> Result<(), StoreError> {
        let mut values = BTreeMap::new();
        for entry in self.db.scan_prefix([keys::COUNTER]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let name = String::from_utf8_lossy(&key[1..]).into_owned();
            let value = keys::read_versioned_u64(&value).ok_or_else(|| StoreError::Corrupt {
                path: self.dir.clone(),
                what: format!("counter {name}"),
                reason: format!("{} bytes, expected a version byte and 8", value.len()),
            })?;
            values.insert(name, value);
        }
        self.counters = Counters::from_values(values);
        Ok(())
    }

    /// Adds `by` to the counter `name`, globally and for this run.
    pub(super) fn count(&mut self, name: &str, by: u64) {
        self.counters.add(name, by);
        self.run_counters.add(name, by);
    }
}
