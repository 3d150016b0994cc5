//! `--output FILE.jsonl` on a worker of a shared crawl: the items this worker
//! committed, appended, never twice, so that the workers' files together hold
//! exactly the crawl's items.
//!
//! Each file has an id, the machine's name and the file's canonical path, and
//! the completion script tags every item it appends to the crawl's stream
//! with the id of the file its worker writes. A line is written only after its
//! completion committed; on open the file's complete lines are counted (a torn
//! last line is cut off) and the stream's items with the file's id beyond that
//! count are appended first — what a killed worker committed but did not
//! write. One file per worker: two processes writing one file would each
//! count the other's lines, so a worker holds an exclusive lock (`flock`) on
//! its file from before the count until it exits; a worker whose file is
//! locked (its killed predecessor not yet gone, or another worker given the
//! same path) waits [`LOCK_WAIT`] for it, then is refused. Depends on
//! [`crate::shared::client`] and the sink's line counting.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::engine::sink::{SinkError, open_lines};
use crate::shared::{Shared, SharedError};

/// How long a worker waits for its output file while another process holds
/// it: long enough for a killed process to be gone.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);
/// How often it tries the lock meanwhile.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// An open output file of one worker.
pub struct WorkerOutput {
    /// Holds the file's lock (released when the process ends).
    _lock: File,
    id: String,
    path: PathBuf,
    file: BufWriter<File>,
    /// Complete lines in the file.
    lines: u64,
}

/// How writing a worker's output failed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The file.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// Reading the crawl's items.
    #[error(transparent)]
    Shared(#[from] SharedError),
}

impl WorkerOutput {
    /// Opens (or creates) the file and appends the items its id has in the
    /// crawl's stream beyond its lines.
    pub async fn open(
        path: &Path,
        host: &str,
        shared: &Shared,
    ) -> Result<WorkerOutput, OutputError> {
        let lock = lock(path).await?;
        let (file, lines) = open_lines(path)?;
        let canonical = path.canonicalize().map_err(|source| SinkError::Io {
            path: path.to_owned(),
            source,
        })?;
        let mut output = WorkerOutput {
            _lock: lock,
            id: format!("{host}:{}", canonical.display()),
            path: path.to_owned(),
            file: BufWriter::new(file),
            lines,
        };
        output.catch_up(shared).await?;
        Ok(output)
    }

    /// The id the completion script tags this file's items with.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Appends the stream's items of this file beyond its lines (after a kill,
    /// or a completion whose answer was lost), then flushes.
    pub async fn catch_up(&mut self, shared: &Shared) -> Result<(), OutputError> {
        let mut seen = 0u64;
        let mut failure = None;
        let lines = self.lines;
        let file = &mut self.file;
        shared
            .scan_items(|_, item, out| {
                if out != Some(self.id.as_str()) {
                    return true;
                }
                seen += 1;
                if seen <= lines {
                    return true;
                }
                match file
                    .write_all(item.as_bytes())
                    .and_then(|()| file.write_all(b"\n"))
                {
                    Ok(()) => true,
                    Err(error) => {
                        failure = Some(error);
                        false
                    }
                }
            })
            .await?;
        if let Some(source) = failure {
            return Err(self.io(source));
        }
        if seen < lines {
            return Err(SinkError::Foreign {
                path: self.path.clone(),
                lines,
                items: seen,
            }
            .into());
        }
        self.lines = seen;
        self.file.flush().map_err(|e| self.io(e))?;
        Ok(())
    }

    /// Appends one committed page's items and flushes.
    pub fn append(&mut self, items: &[String]) -> Result<(), OutputError> {
        for item in items {
            let written = self
                .file
                .write_all(item.as_bytes())
                .and_then(|()| self.file.write_all(b"\n"));
            written.map_err(|e| self.io(e))?;
            self.lines += 1;
        }
        self.file.flush().map_err(|e| self.io(e))
    }

    fn io(&self, source: io::Error) -> OutputError {
        SinkError::Io {
            path: self.path.clone(),
            source,
        }
        .into()
    }
}

/// Opens `path` (made if missing) and takes its exclusive lock, waiting at
/// most [`LOCK_WAIT`] while another process holds it.
async fn lock(path: &Path) -> Result<File, SinkError> {
    let io_error = |source| SinkError::Io {
        path: path.to_owned(),
        source,
    };
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_error)?;
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                tokio::time::sleep(LOCK_POLL).await;
            }
            Err(TryLockError::WouldBlock) => {
                return Err(io_error(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "another process writes this file (still after {} s); \
                         each worker needs an --output file of its own",
                        LOCK_WAIT.as_secs()
                    ),
                )));
            }
            Err(TryLockError::Error(source)) => return Err(io_error(source)),
        }
    }
}

impl From<OutputError> for crate::engine::EngineError {
    fn from(error: OutputError) -> Self {
        match error {
            OutputError::Sink(e) => e.into(),
            OutputError::Shared(e) => e.into(),
        }
    }
}
