//! `--warc DIR` on a worker of a shared crawl: the records of the pages this
//! worker completes (and of the robots.txt files it fetches), in WARC files of
//! its own, each record exactly once across `kill -9`, as in the embedded
//! crawl.
//!
//! The marks live in the crawl's `warc` hash, one field per file:
//! `MACHINE:PATH` (the machine's name and the file's canonical path) → the
//! length its durable records reach. A new file is registered there (length
//! 0) before it is created. The records of the pages a worker completes
//! together (those finished by the time it completes one, up to 64: the
//! worker's `COMPLETE_TOGETHER`) are appended and the file synced
//! once, before the first completion script runs; each page's script stores
//! the length its own records reach with the completion, atomically, in file
//! order. A completion the script refuses (the lease had expired: another
//! worker fetches the page again) has its records cut off the file at once:
//! the file goes back to the last stored mark, and the records of the pages
//! after it in the batch are appended and synced again (their marks move
//! down). On start the worker cuts each of its files back to its mark: what a
//! killed worker wrote for completions that never committed goes. The
//! directory is locked: one worker per directory.
//!
//! A completion whose outcome is not known (Ctrl-C or Redis lost in the middle
//! of the call) leaves the file as it is, and the worker completes nothing
//! more in that run: its next start cuts the file back to whatever mark Redis
//! holds. Depends on [`crate::shared::client`] and [`crate::warc`].

use std::collections::VecDeque;
use std::path::Path;

use crate::fetch::Exchange;
use crate::shared::{Shared, SharedError};
use crate::warc::{Appended, WarcError, WarcSettings, WarcSync, WarcWriter};

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
    /// The pages written and synced whose completions are not settled yet, in
    /// file order: each one's records and the length they reach.
    pending: VecDeque<Pending>,
}

/// A page whose records are in the file, synced, before its completion.
struct Pending {
    /// Robots.txt records written before the page's own (they go with it).
    robots: Vec<u8>,
    /// The page's records.
    page: Vec<u8>,
    /// The file's length after them: the mark its completion stores.
    end: u64,
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
            pending: VecDeque::new(),
        })
    }

    /// Keeps the records of robots.txt fetches for the next completion.
    pub fn robots(&mut self, exchanges: Vec<Exchange>) {
        if !exchanges.is_empty() {
            self.robots.extend(crate::warc::encode_exchanges(exchanges));
        }
    }

    /// Appends the records of pages completed together (the robots.txt
    /// records kept go before the first), in this order, and syncs the file
    /// once. Then, for each page in turn, [`WorkerWarc::mark`] for its
    /// completion and [`WorkerWarc::committed`] or [`WorkerWarc::refused`];
    /// at the end, [`WorkerWarc::settled`].
    pub async fn write(
        &mut self,
        shared: &Shared,
        pages: Vec<Vec<u8>>,
    ) -> Result<(), WorkerWarcError> {
        let mut robots = std::mem::take(&mut self.robots);
        for page in pages {
            let pending = Pending {
                robots: std::mem::take(&mut robots),
                page,
                end: 0,
            };
            self.pending.push_back(pending);
        }
        self.append_pending(shared).await
    }

    /// Appends every pending page's records after the file's mark, notes the
    /// length each reaches, and syncs the file once.
    async fn append_pending(&mut self, shared: &Shared) -> Result<(), WorkerWarcError> {
        for pending in &mut self.pending {
            for records in [&pending.robots, &pending.page] {
                if let Appended::NeedsFile(new) = self.writer.append(records)? {
                    shared
                        .register_warc(&field(&self.machine, new.path()))
                        .await?;
                    self.writer.begin(new, records)?;
                }
            }
            pending.end = self.writer.written().unwrap_or(0);
        }
        if let Some(mark) = self.writer.mark()? {
            sync(mark.sync).await?;
        }
        Ok(())
    }

    /// The mark the next pending page's completion stores: its file and the
    /// length its records reach; `None` when no file holds anything yet.
    pub fn mark(&self) -> Option<(String, u64)> {
        let pending = self.pending.front()?;
        let path = self.writer.current_path()?;
        Some((field(&self.machine, path), pending.end))
    }

    /// The next pending page's completion stored its mark.
    pub fn committed(&mut self) {
        if let Some(pending) = self.pending.pop_front() {
            self.writer.marked(pending.end);
        }
    }

    /// True while a completion's outcome is not known (its call failed or
    /// was given up): nothing more may be completed in this run.
    pub fn uncertain(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The next pending page's completion was refused: the file goes back to
    /// the last mark, losing that page's records, and the records of the
    /// pages after it are written and synced again (the robots.txt records
    /// go with the next page, or with the next completion).
    pub async fn refused(&mut self, shared: &Shared) -> Result<(), WorkerWarcError> {
        let Some(refused) = self.pending.pop_front() else {
            return Ok(());
        };
        let robots = match self.pending.front_mut() {
            Some(next) => &mut next.robots,
            None => &mut self.robots,
        };
        robots.splice(0..0, refused.robots);
        self.writer.cut_to_mark()?;
        self.append_pending(shared).await
    }

    /// Every page of the batch is settled: a file past its size limit is
    /// closed, so the next records open a new one.
    pub fn settled(&mut self) {
        self.writer.rotate_if_full();
    }
}

/// Runs `sync` on a blocking thread.
async fn sync(sync: WarcSync) -> Result<(), WorkerWarcError> {
    tokio::task::spawn_blocking(move || sync.run())
        .await
        .map_err(|e| WorkerWarcError::Task(e.to_string()))??;
    Ok(())
}
