//! Sorted runs: the one structure behind the exact seen set and the page-id
//! index. A set of immutable run files of one [`Kind`] (see `runfile`), the
//! listing its index record gives (oldest first), the files nothing lists
//! (garbage), and the two-phase switch a checkpoint makes: [`SortedRuns::start`]
//! detaches a [`SealJob`], which removes the garbage and writes the sealed
//! records as a new run, merged size-tiered with full tiers, on any thread;
//! the caller puts the new listing in the batch that switches its index, and
//! [`SortedRuns::switched`] makes the state read it.
//!
//! Merges are size-tiered: when [`MERGE_FANOUT`] runs share a tier (`log4` of
//! their size in units of [`TIER_UNIT`] records) they become one, so a record
//! is rewritten about `log4(total / seal)` times and a lookup searches at most
//! `MERGE_FANOUT - 1` runs per tier.
//!
//! Invariants: only listed runs are read; a run file is complete and synced
//! before any listing names it; files the listing does not name are removed by
//! the next job and never read; run ids are never reused. Depends on
//! `runfile`, `error` and [`crate::fingerprint`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::StoreError;
use super::runfile::{self, Kind, RunFile, RunFileWriter};
use crate::fingerprint::Fingerprint;

/// Records per unit of run size for [`tier`]: the chunk size the tiers were
/// defined with, kept so that the runs of an existing state keep their tiers.
const TIER_UNIT: u64 = 4096;
/// Runs of one tier merged into one.
pub(super) const MERGE_FANOUT: usize = 4;
/// The widest record: a fingerprint and a page id (an exact-set record uses
/// the first 20 bytes).
pub(super) const RECORD: usize = 28;
/// A record as a seal and a merge carry it.
pub(super) type Record = [u8; RECORD];

/// A run record: the fingerprint, then `tail` (big-endian): a page's id in
/// the page-id index, 0 in the exact set.
pub(super) fn record(fp: &crate::fingerprint::Fingerprint, tail: u64) -> Record {
    let mut record = [0u8; RECORD];
    record[..20].copy_from_slice(fp);
    record[20..].copy_from_slice(&tail.to_be_bytes());
    record
}

/// A listing: `(run id, records)`, oldest first.
pub(super) type Listing = Vec<(u64, u64)>;

/// The merge tier of a run of `count` records: `log4` of its size in units of
/// [`TIER_UNIT`].
pub(super) fn tier(count: u64) -> u32 {
    let units = count.div_ceil(TIER_UNIT).max(1);
    units.ilog2() / 2
}

/// The runs of one kind as the state reads them (see the module doc).
#[derive(Debug)]
pub(super) struct SortedRuns {
    kind: Kind,
    dir: PathBuf,
    /// The runs the index lists, oldest first.
    listed: Listing,
    /// Their files, mapped.
    files: HashMap<u64, Arc<RunFile>>,
    /// The same files in the order a lookup searches them: largest first (a
    /// fingerprint is in one run at most, and the largest runs hold most),
    /// then newest first.
    search: Vec<Arc<RunFile>>,
    /// Run files the listing does not name: removed by the next job.
    garbage: Vec<u64>,
    /// Next run id: above every run id on disk, listed or not.
    next_id: u64,
}

impl SortedRuns {
    /// Opens the runs `listed` names in `dir` (their headers and lengths
    /// checked, see `runfile`) and finds the run files it does not name (one
    /// listing of `runs/`). A damaged listed file does not stop the open: the
    /// first damage found is returned beside the runs, for the caller to
    /// refuse or rebuild.
    pub(super) fn open(
        dir: &Path,
        kind: Kind,
        listed: Listing,
    ) -> Result<(SortedRuns, Option<StoreError>), StoreError> {
        let mut runs = SortedRuns::empty(dir, kind);
        let mut damage = None;
        for &(id, count) in &listed {
            runs.next_id = runs.next_id.max(id.saturating_add(1));
            match RunFile::open(dir, kind, id, count) {
                Ok(file) => {
                    runs.files.insert(id, Arc::new(file));
                }
                Err(error @ StoreError::RunDamaged { .. }) => {
                    damage.get_or_insert(error);
                }
                Err(error) => return Err(error),
            }
        }
        runs.listed = listed;
        for id in runfile::ids_on_disk(dir, kind)? {
            // A listed file that is damaged is not garbage: its run is listed.
            if !runs.listed.iter().any(|&(run, _)| run == id) {
                runs.garbage.push(id);
            }
            runs.next_id = runs.next_id.max(id.saturating_add(1));
        }
        runs.order_search();
        Ok((runs, damage))
    }

    /// No runs, in `dir`.
    fn empty(dir: &Path, kind: Kind) -> SortedRuns {
        SortedRuns {
            kind,
            dir: dir.to_owned(),
            listed: Vec::new(),
            files: HashMap::new(),
            search: Vec::new(),
            garbage: Vec::new(),
            next_id: 0,
        }
    }

    /// A new, empty set that takes its run ids after this one's (for a
    /// rebuild: its runs are garbage until [`SortedRuns::adopt`]).
    pub(super) fn successor(&self) -> SortedRuns {
        SortedRuns {
            next_id: self.next_id,
            ..SortedRuns::empty(&self.dir, self.kind)
        }
    }

    /// Reads `other` (a rebuilt set, now listed on disk) from now on; this
    /// set's runs become garbage.
    pub(super) fn adopt(&mut self, other: SortedRuns) {
        let old = std::mem::replace(self, other);
        self.garbage.extend(old.listed.iter().map(|&(run, _)| run));
        self.garbage.extend(old.garbage);
        self.next_id = self.next_id.max(old.next_id);
    }

    /// The runs the index lists, oldest first.
    pub(super) fn listed(&self) -> &[(u64, u64)] {
        &self.listed
    }

    /// Records in all listed runs.
    pub(super) fn total(&self) -> u64 {
        self.listed.iter().map(|&(_, count)| count).sum()
    }

    /// The run files nothing reads, waiting for a job to remove them.
    #[cfg(test)]
    pub(super) fn garbage(&self) -> &[u64] {
        &self.garbage
    }

    /// The id the next run gets.
    #[cfg(test)]
    pub(super) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// True when run files nothing reads wait for a job to remove them.
    pub(super) fn has_garbage(&self) -> bool {
        !self.garbage.is_empty()
    }

    /// True when a listed run holds `fp`.
    pub(super) fn contains(&self, fp: &Fingerprint) -> bool {
        self.search.iter().any(|file| file.contains(fp))
    }

    /// The page id a listed run of page ids gives `fp`, if one holds it.
    pub(super) fn page_id(&self, fp: &Fingerprint) -> Option<u64> {
        self.search.iter().find_map(|file| file.page_id(fp))
    }

    /// Reads every listed run whole against its checksum and order (what
    /// `legcrawl repair` does): the first damage found.
    pub(super) fn verify(&self) -> Result<(), StoreError> {
        self.files.values().try_for_each(|file| file.verify())
    }

    /// Detaches a job that writes the next run (see [`SealJob::run`]).
    pub(super) fn start(&mut self) -> SealJob {
        let run_id = self.next_id;
        self.next_id += 1;
        SealJob {
            kind: self.kind,
            dir: self.dir.clone(),
            listed: self.listed.clone(),
            files: self.files.clone(),
            run_id,
            // Left here until the job says it removed them, so a failed one
            // leaves them for the next.
            garbage: self.garbage.clone(),
        }
    }

    /// A job's listing is on disk: it is read from now on, and the runs it
    /// merged wait for the next job to remove them.
    pub(super) fn switched(&mut self, done: Sealed) {
        self.listed = done.listed;
        self.garbage.retain(|run| !done.collected.contains(run));
        if let Some((id, file)) = done.new_file {
            self.files.insert(id, file);
        }
        for run in done.merged {
            if self.files.remove(&run).is_some() {
                self.garbage.push(run);
            }
        }
        self.order_search();
    }

    /// Puts the files in [`SortedRuns::search`]'s order.
    fn order_search(&mut self) {
        let mut order = self.listed.clone();
        order.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        self.search = order
            .iter()
            .filter_map(|(run, _)| self.files.get(run).cloned())
            .collect();
    }
}

/// One run to write, detached from its [`SortedRuns`] (see the module doc).
#[derive(Debug)]
pub(super) struct SealJob {
    kind: Kind,
    dir: PathBuf,
    /// The listing as the state reads it now.
    listed: Listing,
    /// Its files.
    files: HashMap<u64, Arc<RunFile>>,
    /// The id of the run this job writes.
    run_id: u64,
    /// Run files nothing reads any more.
    garbage: Vec<u64>,
}

/// What a [`SealJob`] did; hand it to [`SortedRuns::switched`] once its
/// listing is on disk.
#[derive(Debug)]
pub(super) struct Sealed {
    /// The listing to put in the index record.
    pub(super) listed: Listing,
    /// The new run's file, mapped, when one was written.
    new_file: Option<(u64, Arc<RunFile>)>,
    /// Runs merged into the new one: garbage once the state reads the listing.
    merged: Vec<u64>,
    /// Garbage files this job removed.
    collected: Vec<u64>,
}

impl Sealed {
    /// True when the listing changed (the index record must be written).
    pub(super) fn wrote_run(&self) -> bool {
        self.new_file.is_some()
    }
}

impl SealJob {
    /// Removes the garbage files, then, when `count > 0`, writes `records`
    /// (sorted by fingerprint, `count` of them) as the new run, merged with
    /// the runs of every tier that becomes full. The merge streams: runs are
    /// read in order through their maps (each checked against its checksum
    /// first) and the new file is written as it forms, so memory stays a few
    /// buffers however large the runs. Nothing the state reads changes.
    pub(super) fn run(
        self,
        records: impl Iterator<Item = Record>,
        count: u64,
    ) -> Result<Sealed, StoreError> {
        for &run in &self.garbage {
            runfile::remove(&self.dir, self.kind, run)?;
        }
        if count == 0 {
            return Ok(Sealed {
                listed: self.listed,
                new_file: None,
                merged: Vec::new(),
                collected: self.garbage,
            });
        }
        let mut listed = self.listed.clone();
        let mut merged = Vec::new();
        // Runs are disjoint, so the merged size is the sum of their counts.
        let mut size = count;
        loop {
            let top = tier(size);
            let same = listed.iter().rev().take_while(|r| tier(r.1) == top).count();
            if same + 1 < MERGE_FANOUT {
                break;
            }
            for (run, count) in listed.split_off(listed.len() - same) {
                merged.push(run);
                size += count;
            }
        }
        let width = self.kind.width();
        let mut sources = vec![Source::Memory(Box::new(records))];
        for &run in &merged {
            let file = self.files.get(&run).ok_or_else(|| StoreError::Corrupt {
                path: self.dir.clone(),
                what: format!("run {run}"),
                reason: "listed in the index without its file".into(),
            })?;
            file.verify()?;
            sources.push(Source::File {
                body: file.body(),
                at: 0,
                width,
            });
        }
        let mut writer = RunFileWriter::create(&self.dir, self.kind, self.run_id)?;
        let count = match merge(&mut sources, &mut writer, width) {
            Ok(()) => writer.finish()?,
            Err(error) => {
                writer.abandon();
                return Err(error);
            }
        };
        listed.push((self.run_id, count));
        let file = RunFile::open(&self.dir, self.kind, self.run_id, count)?;
        Ok(Sealed {
            listed,
            new_file: Some((self.run_id, Arc::new(file))),
            merged,
            collected: self.garbage,
        })
    }
}

/// Writes the union of `sources` (each sorted by fingerprint) to `writer`, in
/// order: each step takes the smallest fingerprint, and a fingerprint in
/// several sources is written once, as the first of them (the newest: the seal
/// comes first) holds it.
fn merge(
    sources: &mut [Source<'_>],
    writer: &mut RunFileWriter,
    width: usize,
) -> Result<(), StoreError> {
    let mut heads: Vec<Option<Record>> = sources.iter_mut().map(Source::next_record).collect();
    let fp = |record: &Record| -> [u8; 20] {
        let mut fp = [0u8; 20];
        fp.copy_from_slice(&record[..20]);
        fp
    };
    while let Some(smallest) = heads.iter().flatten().map(fp).min() {
        let mut written = false;
        for (head, source) in heads.iter_mut().zip(sources.iter_mut()) {
            if let Some(record) = head.as_ref().filter(|r| fp(r) == smallest) {
                if !written {
                    writer.push_record(&record[..width])?;
                    written = true;
                }
                *head = source.next_record();
            }
        }
    }
    Ok(())
}

/// The records of one merge source, in order: the sorted records being
/// sealed, or a run file's body.
enum Source<'c> {
    Memory(Box<dyn Iterator<Item = Record> + 'c>),
    File {
        body: &'c [u8],
        at: usize,
        width: usize,
    },
}

impl Source<'_> {
    /// The next record, `None` at the end.
    fn next_record(&mut self) -> Option<Record> {
        match self {
            Source::Memory(records) => records.next(),
            Source::File { body, at, width } => {
                let bytes = body.get(*at..*at + *width)?;
                *at += *width;
                let mut record = [0u8; RECORD];
                record[..*width].copy_from_slice(bytes);
                Some(record)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_group_runs_by_log4_of_their_chunks() {
        assert_eq!(tier(1), 0);
        assert_eq!(tier(3 * TIER_UNIT), 0);
        assert_eq!(tier(4 * TIER_UNIT), 1);
        assert_eq!(tier(16 * TIER_UNIT), 2);
    }

    fn fp(n: u32) -> Record {
        let mut record = [0u8; RECORD];
        record[..4].copy_from_slice(&n.to_be_bytes());
        record
    }

    #[test]
    fn full_tiers_merge_into_one_run_and_the_merged_files_go_with_the_next_job() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (mut runs, damage) =
            SortedRuns::open(dir.path(), Kind::Seen, Vec::new()).expect("open");
        assert!(damage.is_none());
        for seal in 0..MERGE_FANOUT as u32 {
            let job = runs.start();
            let done = job
                .run([fp(seal), fp(100 + seal)].into_iter(), 2)
                .expect("seal");
            assert!(done.wrote_run());
            runs.switched(done);
        }
        // Four runs of one tier became one of eight records, and the three
        // merged away wait as garbage.
        assert_eq!(runs.listed().len(), 1);
        assert_eq!(runs.total(), 8);
        assert!(runs.has_garbage());
        for n in [0, 3, 100, 103] {
            let mut key = [0u8; 20];
            key.copy_from_slice(&fp(n)[..20]);
            assert!(runs.contains(&key), "{n}");
        }
        let done = runs.start().run(std::iter::empty(), 0).expect("collect");
        assert!(!done.wrote_run());
        runs.switched(done);
        assert!(!runs.has_garbage());
        assert_eq!(
            runfile::ids_on_disk(dir.path(), Kind::Seen).expect("list"),
            vec![runs.listed()[0].0]
        );
        // Reopened from its listing, the set finds nothing else on disk.
        let listed = runs.listed().to_vec();
        let (again, damage) = SortedRuns::open(dir.path(), Kind::Seen, listed).expect("reopen");
        assert!(damage.is_none() && !again.has_garbage());
        assert_eq!(again.total(), 8);
    }
}
