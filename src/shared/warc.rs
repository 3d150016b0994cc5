//! `--warc DIR` on a worker of a shared crawl: the records of the pages this
//! worker completes (and of the robots.txt files it fetches), in WARC files of
//! its own, each record exactly once across `kill -9`, as in the embedded
//! crawl.
//!
//! The marks live in the crawl's `warc` hash, one field per file:
//! `MACHINE:PATH` (the machine's name and the file's canonical path) → the
//! length its durable records reach. A new file is registered there (length
//! 0) before it is created. A completed page's records are appended and the
//! file synced before the completion script runs; the script stores the
//! file's new length with the completion, atomically. A completion the script
//! refuses (the lease had expired: another worker fetches the page again)
//! has its records cut off the file at once. On start the worker cuts each of
//! its files back to its mark: what a killed worker wrote for completions that
//! never committed goes. The directory is locked: one worker per directory.
//!
//! A completion whose outcome is not known (Ctrl-C or Redis lost in the middle
//! of the call) leaves the file as it is, and the worker completes nothing
//! more in that run: its next start cuts the file back to whatever mark Redis
//! holds. Depends on [`super::client`] and [`crate::warc`].

use std::path::Path;

use super::client::{Shared, SharedError};
use crate::fetch::Exchange;
use crate::warc::{Appended, WarcError, WarcSettings, WarcWriter};

/// How a worker's WARC output failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkerWarcError {
    /// The files.
    #[error(transparent)]
    Warc(#[from] WarcError),
    /// The marks in Redis.
    #[error(transparent)]
    Shared(#[from] SharedError),
    /// The sync task did not finish.
    #[error("syncing a WARC file: {0}")]
    Task(String),
}

impl From<WorkerWarcError> for crate::engine::EngineError {
    fn from(error: WorkerWarcError) -> Self {
        match error {
            WorkerWarcError::Warc(error) => error.into(),
            WorkerWarcError::Shared(error) => error.into(),
            WorkerWarcError::Task(reason) => crate::engine::EngineError::FlushTask { reason },
        }
    }
}

/// The WARC files of one worker.
pub struct WorkerWarc {
    writer: WarcWriter,
    /// `MACHINE:` — the start of every field of this machine.
    machine: String,
    /// Records of robots.txt fetches no completion has taken yet (a refused
    /// one gives them back).
    robots: Vec<u8>,
    /// The mark the last completion was given and the robots.txt records it
    /// carries, until its outcome is known.
    pending: Option<(u64, Vec<u8>)>,
}

/// The `warc` field of the file `path` (canonical) of `machine`.
fn field(machine: &str, path: &Path) -> String {
    format!("{machine}{}", path.display())
}

impl WorkerWarc {
    /// Opens the worker's WARC directory of `settings` on `machine`: locks it,
    /// cuts every file registered there back to its mark and goes on with the
    /// newest.
    pub async fn open(
        settings: WarcSettings,
        machine: &str,
        shared: &Shared,
    ) -> Result<WorkerWarc, WorkerWarcError> {
        let machine = format!("{machine}:");
        let dir = crate::warc::canonical_dir(&settings.dir)?;
        let prefix = format!("{}/", field(&machine, &dir));
        let marks = shared
            .warc_marks(&prefix)
            .await?
            .into_iter()
            // Files of this directory, not of one below it.
            .filter(|(name, _)| !name[prefix.len()..].contains('/'))
            .map(|(name, len)| (name[machine.len()..].into(), len))
            .collect();
        Ok(WorkerWarc {
            writer: WarcWriter::open(settings, marks)?,
            machine,
            robots: Vec::new(),
            pending: None,
        })
    }

    /// Keeps the records of robots.txt fetches for the next completion.
    pub fn robots(&mut self, exchanges: Vec<Exchange>) {
        if !exchanges.is_empty() {
            self.robots.extend(crate::warc::encode_exchanges(exchanges));
        }
    }

    /// Appends a page's records (and the robots.txt records kept), syncs the
    /// file, and returns the mark its completion is to store: `None` when
    /// there is nothing to write. Then [`WorkerWarc::committed`] or
    /// [`WorkerWarc::refused`].
    pub async fn write(
        &mut self,
        shared: &Shared,
        page: &[u8],
    ) -> Result<Option<(String, u64)>, WorkerWarcError> {
        let robots = std::mem::take(&mut self.robots);
        for records in [robots.as_slice(), page] {
            if let Appended::NeedsFile(new) = self.writer.append(records)? {
                shared
                    .register_warc(&field(&self.machine, new.path()))
                    .await?;
                self.writer.begin(new, records)?;
            }
        }
        let Some(mark) = self.writer.mark()? else {
            return Ok(None);
        };
        tokio::task::spawn_blocking(move || mark.sync.run())
            .await
            .map_err(|e| WorkerWarcError::Task(e.to_string()))??;
        self.pending = Some((mark.len, robots));
        Ok(Some((field(&self.machine, &mark.path), mark.len)))
    }

    /// The completion stored the mark [`WorkerWarc::write`] returned.
    pub fn committed(&mut self) {
        if let Some((len, _)) = self.pending.take() {
            self.writer.marked(len);
        }
    }

    /// True while a completion's outcome is not known (its call failed or
    /// was given up): nothing more may be completed in this run.
    pub fn uncertain(&self) -> bool {
        self.pending.is_some()
    }

    /// The completion was refused: its records are cut off the file; the
    /// robots.txt records among them go with the next completion.
    pub fn refused(&mut self) -> Result<(), WorkerWarcError> {
        if let Some((_, robots)) = self.pending.take() {
            self.robots.splice(0..0, robots);
        }
        self.writer.cut_to_mark()?;
        Ok(())
    }
}
