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
//! same path) waits [`LOCK_WAIT`] for it, then is refused.
//!
//! When Redis went back (the worker's witness says so: `Shared::lost_completions`
//! grew, or the witness record beside the file names a loss), the file's
//! first lines are still the items Redis has for its id, and the lines after
//! them are of completions Redis lost: they are moved aside, into
//! `FILE.lost-after-redis-went-back-TIME.jsonl` beside the file, never left
//! as duplicates, and the file goes on from what Redis has (the lost pages are
//! fetched again, their items written again once). Depends on
//! [`crate::shared::client`] and the sink's line counting.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
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
    /// `Shared::lost_completions` when the file was last reconciled: a
    /// higher value means Redis went back since.
    losses: u64,
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
    /// crawl's stream beyond its lines. `after_loss`: the worker's witness
    /// says Redis went back while the file was written, so lines beyond the
    /// items Redis has for it are moved aside ([`WorkerOutput::reconcile`]),
    /// not refused as another crawl's.
    pub async fn open(
        path: &Path,
        host: &str,
        shared: &Shared,
        after_loss: bool,
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
            losses: shared.lost_completions(),
        };
        match after_loss {
            true => output.reconcile(shared, 0).await?,
            false => output.catch_up(shared).await?,
        }
        Ok(output)
    }

    /// `Shared::lost_completions` when the file was last reconciled.
    pub fn losses(&self) -> u64 {
        self.losses
    }

    /// Writes the items of a completion that committed: appended, or, when
    /// Redis went back since the file was last reconciled, the file is
    /// reconciled first. `in_stream`: the completion is still in Redis (it
    /// committed after the loss was seen); when Redis lost it too, its items
    /// are not written (its page is fetched again).
    pub async fn committed(
        &mut self,
        shared: &Shared,
        items: &[String],
        in_stream: bool,
    ) -> Result<(), OutputError> {
        if shared.lost_completions() == self.losses {
            return self.append(items);
        }
        let unwritten = if in_stream { items.len() as u64 } else { 0 };
        self.reconcile(shared, unwritten).await
    }

    /// After a completion whose earlier attempt committed (its answer was
    /// lost): its `unwritten` items, the last of the file's id in the
    /// stream, are appended from the stream, after a reconciliation when
    /// Redis went back meanwhile.
    pub async fn committed_before(
        &mut self,
        shared: &Shared,
        unwritten: u64,
    ) -> Result<(), OutputError> {
        if shared.lost_completions() == self.losses {
            return self.catch_up(shared).await;
        }
        self.reconcile(shared, unwritten).await
    }

    /// Reconciles the file when Redis went back since it was last
    /// reconciled (every line written is of a completion that answered).
    pub async fn after_loss(&mut self, shared: &Shared) -> Result<(), OutputError> {
        if shared.lost_completions() == self.losses {
            return Ok(());
        }
        self.reconcile(shared, 0).await
    }

    /// Makes the file hold exactly the items the crawl's stream has for its
    /// id, after Redis went back: the file's lines beyond the stream's count
    /// less `unwritten` (items of a completion that committed but is not
    /// written yet) are of completions Redis lost; they are moved aside
    /// ([`lost_path`]), one line says where, and the stream's items beyond
    /// what is left are appended.
    pub async fn reconcile(&mut self, shared: &Shared, unwritten: u64) -> Result<(), OutputError> {
        // Read first: a loss seen during the scan is reconciled next time.
        self.losses = shared.lost_completions();
        let mut items = 0u64;
        shared
            .scan_items(|_, _, out| {
                if out == Some(self.id.as_str()) {
                    items += 1;
                }
                true
            })
            .await?;
        let keep = items.saturating_sub(unwritten);
        if self.lines > keep {
            let moved = self.lines - keep;
            let aside = self.move_aside(keep)?;
            tracing::warn!(
                "{}: {moved} lines of completions Redis lost (it went back) moved aside to {}; \
                 their pages are fetched again and their items written again once",
                self.path.display(),
                aside.display()
            );
        }
        self.catch_up(shared).await
    }

    /// Moves the file's lines after its first `keep` into a new file beside
    /// it (synced), then cuts the file back to those `keep` lines; returns
    /// the new file's path.
    fn move_aside(&mut self, keep: u64) -> Result<PathBuf, OutputError> {
        self.file.flush().map_err(|e| self.io(e))?;
        let mut reader = File::open(&self.path).map_err(|e| self.io(e))?;
        let at = line_end(&mut reader, keep).map_err(|e| self.io(e))?;
        reader.seek(SeekFrom::Start(at)).map_err(|e| self.io(e))?;
        let aside = lost_path(&self.path, crate::store::records::unix_now());
        let io_aside = |source| SinkError::Io {
            path: aside.clone(),
            source,
        };
        let mut moved = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&aside)
            .map_err(io_aside)?;
        io::copy(&mut reader, &mut moved).map_err(io_aside)?;
        moved.sync_all().map_err(io_aside)?;
        crate::crash::point("output.truncate");
        let file = self.file.get_ref();
        file.set_len(at).map_err(|e| self.io(e))?;
        file.sync_all().map_err(|e| self.io(e))?;
        self.lines = keep;
        Ok(aside)
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
            return Err(SinkError::AheadOfRedis {
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

/// The byte offset where the first `lines` lines of `file` end (its length
/// when it has fewer).
fn line_end(file: &mut File, lines: u64) -> io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut reader = BufReader::new(file);
    let (mut at, mut buf) = (0u64, Vec::new());
    for _ in 0..lines {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        at += n as u64;
    }
    Ok(at)
}

/// Where the lines of completions Redis lost are moved: beside `output`,
/// named for what they are and when (`unix_secs`, UTC), a number added when
/// that name is taken (`FILE.lost-after-redis-went-back-20261207T172658Z.jsonl`).
pub fn lost_path(output: &Path, unix_secs: u64) -> PathBuf {
    let time: String = crate::clock::rfc3339_secs(unix_secs)
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let mut n = 0;
    loop {
        let mut name = output.as_os_str().to_owned();
        name.push(format!(".lost-after-redis-went-back-{time}"));
        if n > 0 {
            name.push(format!("-{n}"));
        }
        name.push(".jsonl");
        let path = PathBuf::from(name);
        if !path.exists() {
            return path;
        }
        n += 1;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_lines_go_to_a_file_named_for_what_they_are() {
        let dir = std::env::temp_dir().join(format!("legcrawl-lost-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let output = dir.join("out.jsonl");
        let first = lost_path(&output, 1_796_665_991);
        let name = first.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            name,
            "out.jsonl.lost-after-redis-went-back-20261207T175311Z.jsonl"
        );
        std::fs::write(&first, "").unwrap();
        let second = lost_path(&output, 1_796_665_991);
        assert!(second.to_string_lossy().ends_with("175311Z-1.jsonl"));

        std::fs::write(&output, "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n").unwrap();
        let mut file = File::open(&output).unwrap();
        assert_eq!(line_end(&mut file, 0).unwrap(), 0);
        assert_eq!(line_end(&mut file, 2).unwrap(), 16);
        assert_eq!(line_end(&mut file, 9).unwrap(), 24);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
