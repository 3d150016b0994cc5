//! The witness record a worker keeps beside its `--output` file
//! ([`crate::shared::witness`]): read when the worker joins the crawl, to
//! find a crawl Redis lost while no worker ran (refused without `--fresh`) or
//! a commit sequence that went back (named, then crawled on); written while
//! the worker completes pages and when its run ends. A worker without
//! `--output` keeps its witness in memory only (`Shared::commits_seen`).
//! Depends on [`crate::shared`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::shared::witness::{self, KEEP_EVERY, WitnessError, WitnessRecord};
use crate::shared::{Shared, SharedError};

/// A worker's witness record and where it is kept.
pub(super) struct Kept {
    path: PathBuf,
    /// The record as last written.
    record: WitnessRecord,
    /// Completions lost before this run and not yet reconciled in the
    /// output file (from the record read at start).
    lost_before: u64,
    /// `Shared::lost_completions` when the output file was last reconciled:
    /// this run's losses after it are counted.
    reconciled_at: u64,
    /// When the record was last written.
    written_at: Instant,
    /// A write failed and was said once: later ones fail quietly.
    failed: bool,
}

/// Why a worker's witness stopped it from joining.
#[derive(Debug, thiserror::Error)]
pub enum WitnessStop {
    /// The record cannot be read.
    #[error(transparent)]
    Record(#[from] WitnessError),
    /// Redis refused, or lost the crawl the record names.
    #[error(transparent)]
    Shared(#[from] SharedError),
}

impl Kept {
    /// Joins the crawl on `shared` (`Shared::enter`) with the record beside
    /// `output`: a crawl the record names but Redis no longer has is refused
    /// ([`SharedError::Vanished`]); for the epoch it names, the worker starts
    /// from the sequence it kept (a lower one in Redis is named as a loss);
    /// any other record (another crawl's, or this one's before it was made
    /// anew) is replaced.
    pub(super) async fn join(output: &Path, shared: &mut Shared) -> Result<Kept, WitnessStop> {
        let path = witness::beside(output);
        let name = shared.target().name.clone();
        let found = witness::read(&path)?.filter(|r| r.name == name);
        if let Some(record) = &found
            && shared.stored_epoch().await?.is_none()
        {
            return Err(SharedError::Vanished {
                name,
                url: shared.target().shown(),
                record: path.display().to_string(),
                commits: record.commits,
            }
            .into());
        }
        shared.enter().await?;
        let record = match found {
            Some(record) if record.epoch == shared.epoch() && !record.id.is_empty() => {
                shared.use_witness_id(&record.id);
                shared.resume_witness(record.commits).await?;
                record
            }
            _ => WitnessRecord {
                name,
                epoch: shared.epoch().to_owned(),
                id: shared.witness_id().to_owned(),
                ..WitnessRecord::default()
            },
        };
        let mut kept = Kept {
            path,
            lost_before: record.lost,
            reconciled_at: 0,
            record,
            written_at: Instant::now(),
            failed: false,
        };
        kept.keep(shared, true);
        Ok(kept)
    }

    /// Completions lost while the output file was written and not yet
    /// reconciled in it, this run's and earlier runs' (0: none), and the last
    /// time Redis went back.
    pub(super) fn lost(&self, shared: &Shared) -> (u64, Option<(u64, u64)>) {
        let this_run = shared.lost_completions().saturating_sub(self.reconciled_at);
        (
            self.lost_before + this_run,
            shared.went_back_last().or(self.record.went_back),
        )
    }

    /// The output file was reconciled when `Shared::lost_completions` was
    /// `losses`: the losses up to then are no longer the file's.
    pub(super) fn reconciled(&mut self, losses: u64) {
        self.lost_before = 0;
        self.reconciled_at = losses;
    }

    /// Writes the record when it changed, at most every [`KEEP_EVERY`]
    /// unless `now`. A failure is said once, not fatal: a record left older
    /// keeps a lower sequence, which never claims a loss.
    pub(super) fn keep(&mut self, shared: &Shared, now: bool) {
        let (lost, went_back) = self.lost(shared);
        let record = WitnessRecord {
            commits: shared.commits_seen(),
            lost,
            went_back,
            ..self.record.clone()
        };
        if record == self.record && !now {
            return;
        }
        if !now && self.written_at.elapsed() < KEEP_EVERY {
            return;
        }
        match witness::write(&self.path, &record) {
            Ok(()) => {
                self.record = record;
                self.written_at = Instant::now();
            }
            Err(error) if !self.failed => {
                self.failed = true;
                tracing::warn!(%error, "could not keep this worker's witness record of the shared crawl");
            }
            Err(_) => {}
        }
    }
}
