//! The `--output FILE.jsonl` sink ([`OutputFile`], a [`Sink`]): committed
//! items, appended, never twice, and only what was committed since the last
//! run, even when the file was moved away in between.
//!
//! Each output path has a cursor in the state ([`OutputCursor`], keyed by
//! [`cursor_path`]: the path made absolute through its directory, so that it
//! names the path when no file is there): the file written there (device and
//! inode), the bytes written to it (the end of the last complete line) and the
//! next item. On open the file is opened, or created, and:
//! - **the same file** (the same inode, or the cursor's next item as the
//!   line that starts at its bytes: see `same_file`), at least as long as
//!   the cursor says: the complete
//!   lines after the cursor's bytes were written by a run whose cursor did not
//!   become durable (a `kill -9`); they count, and a torn last line (a crash
//!   cut it short) is cut off. More lines than the state has items is
//!   [`SinkError::Foreign`];
//! - **no file, another file** (moved away, replaced) **or a shorter one**
//!   (truncated by its consumer): the sink continues from the cursor's next
//!   item, appending to whatever complete lines the file holds — only the
//!   items committed after the cursor are written;
//! - **a path new to this state** starts at the current end of the item store;
//!   what the file holds stays, and lines are appended after it.
//!
//! Outside the same-file case a last line without its newline is cut off too,
//! so that the next line starts on a line of its own. A line with a NUL byte
//! counts as torn, and so do the lines after it: it is what a power cut
//! leaves where it lost some unsynced pages of the file and kept later ones
//! (a hole reads as zeros), and no JSON line holds one. The cursor is then
//! recorded, written and synced, before any line is written (crash points
//! `output.watermark` for a new path, `output.cursor` otherwise), and the
//! items committed but not yet written are appended.
//!
//! During a run lines are written only after their items are durable (after
//! the group's receipt); then the sink hands its new cursor to the state
//! ([`State::advance_output`]), which seals it with the open group, or, when
//! that group holds nothing, writes it unsynced for the next sync of the
//! database to make durable (the next group's, sled's own flush every 500 ms,
//! or the close of the state at the end of the run). No sync is added for
//! it. So:
//! - with the file left in place, every item is in it exactly once across
//!   `kill -9`, as before: the lines after a durable cursor are counted;
//! - after a `kill -9`, if the file is also moved away (or truncated) before
//!   the next run, at most the lines written since the last durable group —
//!   those of the one group streamed last — are written again to the new file.
//!
//! Power cuts: the lines are synced (`fdatasync`) before their cursor goes to
//! the state, and the directory is synced once when the sink opens (the
//! file's name may be new), so a cursor that survives a power cut never
//! counts lines the disk lost (the power-cut test, issue 28).
//! Depends on [`crate::store`].

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::crash;
use crate::store::{OutputCursor, Sink, State, StoreError};

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
    /// A shared worker's file holds more lines than the shared crawl has
    /// items for it: Redis went back further than the worker's witness
    /// record says, or the file is another crawl's.
    #[error(
        "{path}: holds {lines} lines but the shared crawl has only {items} items for it: Redis lost its latest completions (a lost AOF tail or a failover, in the second before this worker's last record of them) or the file is another crawl's output; move it aside and start the worker again (Redis's items are written to a new file, and lost pages are fetched again)"
    )]
    AheadOfRedis {
        /// The output file.
        path: PathBuf,
        /// Complete lines found.
        lines: u64,
        /// Items the shared crawl has for it.
        items: u64,
    },
    /// The state's cursor for the file counts more items written than the
    /// state holds.
    #[error(
        "{path}: the state's cursor for this output says {next} items were written, but the state holds only {items}; the state is damaged"
    )]
    CursorAhead {
        /// The output file.
        path: PathBuf,
        /// The cursor's next item.
        next: u64,
        /// Items the state holds.
        items: u64,
    },
    /// Reading the items to catch up, or recording the cursor, failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An open output file and its cursor: what it holds, as written so far.
pub struct OutputFile {
    /// The path as given (for messages).
    path: PathBuf,
    /// The path the cursor is kept under ([`cursor_path`]).
    key: PathBuf,
    file: io::BufWriter<File>,
    /// The cursor the state holds (or was handed last).
    cursor: OutputCursor,
    /// Where the lines written since stand (the cursor once they are synced).
    written: OutputCursor,
}

impl OutputFile {
    /// Opens (or creates) the file, finds where it stands against its cursor
    /// (see the module doc), records the cursor and catches the file up with
    /// the committed items.
    pub fn open(path: &Path, state: &mut State) -> Result<OutputFile, SinkError> {
        let io_err = |source| SinkError::Io {
            path: path.to_owned(),
            source,
        };
        let mut file = open_append(path).map_err(io_err)?;
        let key = cursor_path(path).map_err(io_err)?;
        // The file's name survives a power cut (its lines are synced later).
        crate::fsync::sync_parent(&key).map_err(io_err)?;
        let meta = file.metadata().map_err(io_err)?;
        let (len, items) = (meta.len(), state.items_len());
        let recorded = state.output_cursor(&key)?;
        if let Some(cursor) = recorded.filter(|c| c.next > items) {
            return Err(SinkError::CursorAhead {
                path: path.to_owned(),
                next: cursor.next,
                items,
            });
        }
        let (bytes, next) = match recorded {
            Some(cursor) if same_file(&file, len, meta.ino(), &cursor, state, path)? => {
                continued(&mut file, path, cursor.bytes, cursor.next, items)?
            }
            Some(cursor) => (last_line_end(&file, len).map_err(io_err)?, cursor.next),
            None => (last_line_end(&file, len).map_err(io_err)?, items),
        };
        cut_to(&file, len, bytes).map_err(io_err)?;
        file.seek(SeekFrom::End(0)).map_err(io_err)?;
        let cursor = OutputCursor {
            dev: meta.dev(),
            ino: meta.ino(),
            bytes,
            next,
        };
        state.record_output(&key, &cursor)?;
        // Each group's items are handed over from memory as it becomes durable.
        state.keep_durable_items();
        let mut sink = OutputFile {
            path: path.to_owned(),
            key,
            file: io::BufWriter::new(file),
            cursor,
            written: cursor,
        };
        sink.catch_up(state)?;
        Ok(sink)
    }

    /// Writes the durable items the file lacks ([`State::deliver`]), flushes
    /// and syncs them, and hands the new cursor to the state
    /// ([`State::advance_output`]).
    pub fn catch_up(&mut self, state: &mut State) -> Result<(), SinkError> {
        crash::point("output.append");
        state.deliver(self)?;
        self.file.flush().map_err(|e| self.io(e))?;
        if self.written != self.cursor {
            // The lines are on disk before a cursor that counts them can be.
            self.file.get_ref().sync_data().map_err(|e| self.io(e))?;
            self.cursor = self.written;
            state.advance_output(&self.key, &self.cursor)?;
        }
        Ok(())
    }

    fn io(&self, source: io::Error) -> SinkError {
        SinkError::Io {
            path: self.path.clone(),
            source,
        }
    }
}

/// The file takes each item as a line; the cursor counts it once the line is
/// written (synced by [`OutputFile::catch_up`]).
impl Sink for OutputFile {
    type Error = SinkError;

    fn next_item(&self) -> u64 {
        self.written.next
    }

    fn item(&mut self, seq: u64, json: &str) -> Result<bool, SinkError> {
        // crash point: output.append (the caller's: `catch_up`)
        self.file
            .write_all(json.as_bytes())
            .and_then(|()| self.file.write_all(b"\n"))
            .map_err(|e| self.io(e))?;
        self.written.next = seq + 1;
        self.written.bytes += json.len() as u64 + 1;
        Ok(true)
    }
}

/// True when `file` (`len` bytes, inode `ino`) is the file that `cursor` was
/// made for, as far as it goes: at least `cursor.bytes` long, a line ending
/// there, and either
/// - the same inode number, or
/// - the item the cursor names next as the line that starts there: the last
///   run wrote it after its last durable cursor, and the content proves it
///   whatever the inode says (a copy put in its place).
///
/// Without a line after the cursor the answer changes nothing: either way the
/// file goes on from its last complete line with the cursor's next item.
///
/// The device number is not compared: it is not stable across a remount
/// (FUSE, NFS, some btrfs and device-mapper setups after a reboot), and a
/// file seen through a new mount, with lines the last run wrote after its
/// durable cursor, would otherwise be taken for another file and those lines
/// written again (the power-cut test found it).
fn same_file(
    file: &File,
    len: u64,
    ino: u64,
    cursor: &OutputCursor,
    state: &State,
    path: &Path,
) -> Result<bool, SinkError> {
    let io_err = |source| SinkError::Io {
        path: path.to_owned(),
        source,
    };
    if cursor.bytes > len || !ends_a_line(file, cursor.bytes).map_err(io_err)? {
        return Ok(false);
    }
    if cursor.ino == ino {
        return Ok(true);
    }
    let mut line = None;
    state.for_each_item(cursor.next, |seq, text| {
        line = (seq == cursor.next).then(|| format!("{text}\n"));
        false
    })?;
    match line {
        Some(line) if cursor.bytes + line.len() as u64 <= len => {
            let mut found = vec![0u8; line.len()];
            file.read_exact_at(&mut found, cursor.bytes)
                .map_err(io_err)?;
            Ok(found == line.as_bytes())
        }
        _ => Ok(false),
    }
}

/// Where a file stands whose complete lines from byte `from` are the items
/// from `start` on: the end of those lines and the next item. More lines than
/// the state has `items` for is [`SinkError::Foreign`].
fn continued(
    file: &mut File,
    path: &Path,
    from: u64,
    start: u64,
    items: u64,
) -> Result<(u64, u64), SinkError> {
    let (lines, end) = count_complete_lines(file, from).map_err(|source| SinkError::Io {
        path: path.to_owned(),
        source,
    })?;
    let next = start.saturating_add(lines);
    if next > items {
        return Err(SinkError::Foreign {
            path: path.to_owned(),
            lines,
            items: items.saturating_sub(start),
        });
    }
    Ok((end, next))
}

/// The path the cursor of the output `path` is kept under: its directory
/// made canonical, then its file name. Not the canonical path of the file
/// itself, which needs a file there: the cursor must be found when the file
/// was moved away. An error when the directory cannot be resolved, or when
/// `path` names no file (`/`, `..`).
pub fn cursor_path(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "an --output path must name a file",
        )
    })?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    Ok(dir.canonicalize()?.join(name))
}

/// Opens (or creates) `path` to read it and append to it.
fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
}

/// Opens (or creates) a JSON-lines file for appending and counts its complete
/// lines; a torn last line (a crash cut it short) is cut off, to be written
/// again by the caller's catch-up.
pub fn open_lines(path: &Path) -> Result<(File, u64), SinkError> {
    let io_err = |source| SinkError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = open_append(path).map_err(io_err)?;
    let (lines, good_len) = count_complete_lines(&mut file, 0).map_err(io_err)?;
    let len = file.metadata().map_err(io_err)?.len();
    cut_to(&file, len, good_len).map_err(io_err)?;
    file.seek(SeekFrom::End(0)).map_err(io_err)?;
    Ok((file, lines))
}

/// Cuts a file of `len` bytes back to `good_len` (its complete lines), when
/// it is longer.
fn cut_to(file: &File, len: u64, good_len: u64) -> io::Result<()> {
    if len > good_len {
        crash::point("output.truncate");
        file.set_len(good_len)?;
    }
    Ok(())
}

/// Counts the complete (newline-terminated) lines from byte `from`; returns
/// them and the byte their end is at. A line with a NUL byte ends the count
/// as a torn line does: no JSON line holds one, and it is what a power cut
/// leaves where it lost some unsynced pages of a file and kept later ones (a
/// hole reads as zeros); the lines after it are not trusted either.
fn count_complete_lines(file: &mut File, from: u64) -> io::Result<(u64, u64)> {
    file.seek(SeekFrom::Start(from))?;
    let mut reader = BufReader::new(file);
    let (mut lines, mut len) = (0u64, from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') || buf.contains(&0) {
            return Ok((lines, len));
        }
        lines += 1;
        len += n as u64;
    }
}

/// True when the first `at` bytes of the file end with a newline (or `at` is 0):
/// a cursor's bytes always do, in the file it was made for.
fn ends_a_line(file: &File, at: u64) -> io::Result<bool> {
    let Some(last) = at.checked_sub(1) else {
        return Ok(true);
    };
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, last)?;
    Ok(byte[0] == b'\n')
}

/// The end of the last complete line of a file of `len` bytes (0 when it has
/// none), read backwards from its end.
fn last_line_end(file: &File, len: u64) -> io::Result<u64> {
    let mut buf = [0u8; 8192];
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(at) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + at as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, bytes).expect("write");
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .expect("open");
        (dir, file)
    }

    #[test]
    fn complete_lines_are_counted_from_an_offset_and_a_torn_one_is_not() {
        let (_dir, mut file) = file_with(b"{\"a\":1}\n{\"b\":2}\n{\"c\":");
        assert_eq!(count_complete_lines(&mut file, 0).unwrap(), (2, 16));
        assert_eq!(count_complete_lines(&mut file, 8).unwrap(), (1, 16));
        assert_eq!(count_complete_lines(&mut file, 16).unwrap(), (0, 16));
        assert_eq!(count_complete_lines(&mut file, 21).unwrap(), (0, 21));
    }

    #[test]
    fn a_line_with_a_hole_ends_the_count() {
        let (_dir, mut file) = file_with(b"{\"a\":1}\n{\"b\0\0\0\n{\"c\":3}\n");
        assert_eq!(count_complete_lines(&mut file, 0).unwrap(), (1, 8));
        let (_dir, mut file) = file_with(b"\0\0\0{\"c\":3}\n");
        assert_eq!(count_complete_lines(&mut file, 0).unwrap(), (0, 0));
    }

    #[test]
    fn the_last_line_end_is_found_backwards_across_chunks() {
        let mut long = vec![b'x'; 20_000];
        long.push(b'\n');
        long.extend_from_slice(&[b'y'; 9_000]);
        for (bytes, end) in [
            (&b""[..], 0),
            (b"no newline", 0),
            (b"a\n", 2),
            (b"a\nb", 2),
            (&long[..], 20_001),
        ] {
            let (_dir, file) = file_with(bytes);
            assert_eq!(last_line_end(&file, bytes.len() as u64).unwrap(), end);
        }
    }

    #[test]
    fn a_cursor_ends_a_line() {
        let (_dir, file) = file_with(b"a\nbc\n");
        assert!(ends_a_line(&file, 0).unwrap());
        assert!(ends_a_line(&file, 2).unwrap());
        assert!(!ends_a_line(&file, 3).unwrap());
        assert!(ends_a_line(&file, 5).unwrap());
    }

    #[test]
    fn the_cursor_path_needs_no_file_but_a_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        let canonical = dir.path().canonicalize().expect("canonical");
        let missing = dir.path().join("sub/../gone.jsonl");
        std::fs::create_dir(dir.path().join("sub")).expect("sub");
        assert_eq!(cursor_path(&missing).unwrap(), canonical.join("gone.jsonl"));
        assert!(cursor_path(&dir.path().join("nodir/x.jsonl")).is_err());
        assert!(cursor_path(Path::new("/")).is_err());
        let relative = cursor_path(Path::new("x.jsonl")).unwrap();
        assert!(relative.is_absolute());
        assert_eq!(relative.file_name().unwrap(), "x.jsonl");
    }
}
