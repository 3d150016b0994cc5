//! The `--output FILE.jsonl` sink: committed items, appended, never twice.
//!
//! The file mirrors the item store from the item that was next when the file was
//! first used with this state (recorded in the state). On open, the complete lines
//! already in the file are counted (a torn last line is cut off), and the items
//! committed but not yet written are appended first. Lines are written only after
//! their items are durable. Depends on [`crate::store`].

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::store::{State, StoreError, crash};

/// Errors of the output file.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The output file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The file holds more lines than this state has items for it.
    #[error(
        "{path}: holds {lines} lines but this state has only {items} items for it; is it another crawl's output?"
    )]
    Foreign {
        /// The output file.
        path: PathBuf,
        /// Complete lines found.
        lines: u64,
        /// Items the state has for it.
        items: u64,
    },
    /// Reading the items to catch up failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An open output file and the next item sequence number it expects.
pub struct Sink {
    path: PathBuf,
    file: io::BufWriter<File>,
    next: u64,
}

impl Sink {
    /// Opens (or creates) the file and catches it up with the committed items.
    pub fn open(path: &Path, state: &mut State) -> Result<Sink, SinkError> {
        let (file, lines) = open_lines(path)?;
        let canonical = path.canonicalize().map_err(|source| SinkError::Io {
            path: path.to_owned(),
            source,
        })?;
        let start = state.output_start(&canonical.to_string_lossy())?;
        let next = start + lines;
        if next > state.items_len() {
            return Err(SinkError::Foreign {
                path: path.to_owned(),
                lines,
                items: state.items_len() - start,
            });
        }
        let mut sink = Sink {
            path: path.to_owned(),
            file: io::BufWriter::new(file),
            next,
        };
        sink.catch_up(state)?;
        Ok(sink)
    }

    /// Writes the committed items the file lacks (from the store), then flushes.
    pub fn catch_up(&mut self, state: &State) -> Result<(), SinkError> {
        let mut failure = None;
        let mut next = self.next;
        crash::point("output.append");
        state.for_each_item(self.next, |seq, text| {
            let written = self
                .file
                .write_all(text.as_bytes())
                .and_then(|()| self.file.write_all(b"\n"));
            match written {
                Ok(()) => {
                    next = seq + 1;
                    true
                }
                Err(e) => {
                    failure = Some(e);
                    false
                }
            }
        })?;
        self.next = next;
        if let Some(source) = failure {
            return Err(SinkError::Io {
                path: self.path.clone(),
                source,
            });
        }
        self.file.flush().map_err(|source| SinkError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// Opens (or creates) a JSON-lines file for appending and counts its complete
/// lines; a torn last line (a crash cut it short) is cut off, to be written
/// again by the caller's catch-up.
pub fn open_lines(path: &Path) -> Result<(File, u64), SinkError> {
    let io_err = |source| SinkError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_err)?;
    let (lines, good_len) = count_complete_lines(&mut file).map_err(io_err)?;
    if file.metadata().map_err(io_err)?.len() != good_len {
        crash::point("output.truncate");
        file.set_len(good_len).map_err(io_err)?;
    }
    file.seek(SeekFrom::End(0)).map_err(io_err)?;
    Ok((file, lines))
}

/// Counts complete (newline-terminated) lines and the byte length they cover.
fn count_complete_lines(file: &mut File) -> io::Result<(u64, u64)> {
    file.seek(SeekFrom::Start(0))?;
    let mut reader = BufReader::new(file);
    let (mut lines, mut len) = (0u64, 0u64);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            return Ok((lines, len));
        }
        lines += 1;
        len += n as u64;
    }
}
