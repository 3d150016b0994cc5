//! The state directory itself: its lock, its marker, and how a new one is made.
//!
//! Every open takes an exclusive `flock` on the directory before it reads or
//! writes anything in it, creation included, so of two crawls started at once
//! on a new `--data` the second finds the state busy.
//!
//! A directory is legcrawl state when it holds the marker file
//! ([`MARKER_FILE`]). Creation writes a *creating* marker first, then `db/` and
//! `bloom.bin`, then the final marker: a directory whose marker still says
//! *creating* holds nothing of value and is created again by the next crawl. A
//! directory with `db/`, `runs/` or `bloom.bin` but no marker is refused,
//! untouched: nothing here deletes what it did not create.
//!
//! Depends on `format`, `error`, [`crate::crash`], [`crate::dirlock`] and
//! [`crate::fsync`].

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use super::error::StoreError;
use super::format::{MARKER_FILE, STATE_FORMAT};
use crate::crash;

/// The exclusive lock on a state directory, held as long as the state is open.
#[derive(Debug)]
pub(super) struct DirLock {
    _dir: File,
}

/// What [`prepare`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// A complete state.
    State,
    /// Nothing yet (or an interrupted creation, cleared): create the state.
    Create,
}

/// The marker of a complete state of this build's format.
pub(super) fn marker_text() -> String {
    format!("legcrawl state format {STATE_FORMAT}\n")
}

/// The marker a creation writes before anything else.
fn creating_text() -> String {
    format!("legcrawl state format {STATE_FORMAT} (creating)\n")
}

/// The format a marker of another build names (its number, or the first
/// line as it is, shortened).
fn format_named(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    match line.strip_prefix("legcrawl state format ") {
        Some(rest) => rest.trim_end_matches(" (creating)").to_owned(),
        None => format!("{:?}", line.chars().take(60).collect::<String>()),
    }
}

/// Refuses a state directory whose files this user cannot write, or that is
/// on a read-only file system: the database writes as it opens, so even
/// reading one needs write access, and the plain "Permission denied" or
/// "Read-only file system" of the first file that fails says neither.
fn writable(dir: &Path) -> Result<(), StoreError> {
    use rustix::fs::{Access, access};
    let files = [dir.to_owned(), dir.join("db"), dir.join("bloom.bin")];
    for path in files.iter().filter(|path| path.exists()) {
        let (path, file) = (dir.to_owned(), path.clone());
        match access(file.as_path(), Access::WRITE_OK) {
            // Even root cannot write there: the owner is no help.
            Err(rustix::io::Errno::ROFS) => return Err(StoreError::ReadOnlyFs { path, file }),
            Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) => {
                return Err(StoreError::NotWritable { path, file });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Locks `dir` and says whether it holds a state or a state must be created
/// (only with `create`; the directory is made then). Reads never delete.
pub(super) fn prepare(dir: &Path, create: bool) -> Result<(DirLock, Found), StoreError> {
    let io_err = |source| StoreError::Io {
        path: dir.to_owned(),
        source,
    };
    match fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => {
            return Err(StoreError::NotADirectory {
                path: dir.to_owned(),
            });
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
            // Its parent synced too: a crawl that finished must not lose its
            // state directory to a power cut.
            crate::fsync::create_dir_all(dir).map_err(|e| match e.kind() {
                io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                    StoreError::CannotCreate {
                        path: dir.to_owned(),
                        reason: match e.kind() {
                            io::ErrorKind::ReadOnlyFilesystem => "read-only file system",
                            _ => "permission denied",
                        }
                        .to_owned(),
                    }
                }
                _ => io_err(e),
            })?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(StoreError::Missing {
                path: dir.to_owned(),
            });
        }
        Err(e) => return Err(io_err(e)),
    }
    writable(dir)?;
    let lock = lock(dir)?;
    let marker = dir.join(MARKER_FILE);
    let found = match fs::read_to_string(&marker) {
        Ok(text) if text == marker_text() => Found::State,
        Ok(text) if text == creating_text() => {
            if !create {
                return Err(StoreError::Incomplete {
                    path: dir.to_owned(),
                });
            }
            // Only what an interrupted creation writes; it held no crawl yet.
            clear_partial(dir).map_err(io_err)?;
            Found::Create
        }
        Ok(text) => {
            return Err(StoreError::Format {
                path: dir.to_owned(),
                found: format_named(&text),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            check_unmarked(dir)?;
            if !create {
                return Err(StoreError::Missing {
                    path: dir.to_owned(),
                });
            }
            Found::Create
        }
        Err(e) => return Err(io_err(e)),
    };
    Ok((lock, found))
}

/// Takes the directory's exclusive lock, retrying briefly before it is busy.
fn lock(dir: &Path) -> Result<DirLock, StoreError> {
    match crate::dirlock::lock(dir) {
        Ok(Some(file)) => Ok(DirLock { _dir: file }),
        Ok(None) => Err(StoreError::Busy {
            path: dir.to_owned(),
        }),
        Err(source) => Err(StoreError::Io {
            path: dir.to_owned(),
            source,
        }),
    }
}

/// True when `dir` does not exist or is an empty directory: nothing a command
/// could continue or delete. A path that exists but cannot be listed (a file,
/// no permission) is not nothing: opening it says what is wrong.
pub fn holds_nothing(dir: &Path) -> bool {
    match fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(_) => !dir.exists(),
    }
}

/// An unmarked directory is new only when empty; with a database in it, it is a
/// state that lost its marker, and anything else is not ours.
fn check_unmarked(dir: &Path) -> Result<(), StoreError> {
    let entries = fs::read_dir(dir).map_err(|source| StoreError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let mut other = false;
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::Io {
            path: dir.to_owned(),
            source,
        })?;
        match entry.file_name().to_str() {
            Some("db") | Some("bloom.bin") | Some("runs") => {
                return Err(StoreError::Unmarked {
                    path: dir.to_owned(),
                });
            }
            _ => other = true,
        }
    }
    if other {
        return Err(StoreError::NotState {
            path: dir.to_owned(),
        });
    }
    Ok(())
}

/// Removes what an interrupted creation may have left: `db/` and `bloom.bin`.
fn clear_partial(dir: &Path) -> io::Result<()> {
    let db = dir.join("db");
    // crash point: create.begin (the next one: this clears a creation that never finished)
    if db.exists() {
        fs::remove_dir_all(&db)?;
    }
    match fs::remove_file(dir.join("bloom.bin")) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes what a creation that failed wrote (`db/`, `bloom.bin`, the
/// *creating* marker), leaving the directory empty as it was; failures only
/// leave a *creating* marker behind, which the next crawl clears.
pub(super) fn undo_creation(dir: &Path) {
    if let Err(error) = clear_partial(dir) {
        tracing::warn!(dir = %dir.display(), %error, "could not remove a failed creation");
        return;
    }
    // crash point: create.begin (undoing it: the marker goes last)
    if let Err(error) = fs::remove_file(dir.join(MARKER_FILE)) {
        tracing::warn!(dir = %dir.display(), %error, "could not remove the creating marker");
    }
}

/// Writes the *creating* marker: the first thing a creation writes.
pub(super) fn mark_creating(dir: &Path) -> Result<(), StoreError> {
    crash::point("create.begin");
    write_marker(dir, &creating_text())
}

/// Writes the final marker: the last thing a creation writes.
pub(super) fn mark_complete(dir: &Path) -> Result<(), StoreError> {
    crash::point("create.marker");
    write_marker(dir, &marker_text())
}

/// Replaces the marker atomically (temporary file, sync, rename, sync the directory).
fn write_marker(dir: &Path, text: &str) -> Result<(), StoreError> {
    let marker = dir.join(MARKER_FILE);
    let tmp = dir.join(".LEGCRAWL.tmp");
    // crash point: create.begin, create.marker (the callers')
    let written = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, &marker)?;
        File::open(dir)?.sync_all()
    })();
    written.map_err(|source| StoreError::Io {
        path: marker,
        source,
    })
}

#[cfg(test)]
#[path = "dir_tests.rs"]
mod tests;
