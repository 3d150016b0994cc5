//! The store's errors, at the bottom of the store: every table returns them,
//! and they depend only on the format constants, [`crate::bloom`]'s error,
//! sled's and the OS's.

use std::io;
use std::path::PathBuf;

use super::format::{LAST_BUILD_READING_OLD_FORMATS, MARKER_FILE, STATE_FORMAT};
use crate::bloom::BloomError;

/// What to do with a state of an older format than this build's: the build
/// that reads it (nothing for a newer or an unknown format).
fn older_format_hint(found: &str) -> String {
    match found.parse::<u32>() {
        Ok(format) if format < STATE_FORMAT => format!(
            " (the last build that reads format {format} is legcrawl commit {LAST_BUILD_READING_OLD_FORMATS}: open the state once with it to upgrade)"
        ),
        _ => String::new(),
    }
}

/// Errors of the state. Every variant names the directory or record concerned.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The directory exists and holds something that is not legcrawl state.
    #[error("{path}: not a legcrawl state directory (no {MARKER_FILE} marker, and not empty)")]
    NotState {
        /// The directory.
        path: PathBuf,
    },
    /// The path is a file, not a directory.
    #[error("{path}: is a file, not a legcrawl state directory")]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A database or Bloom file without the marker: a state that lost its marker
    /// (a mistaken `rm`, a partial copy). Refused and left as it is.
    #[error(
        "{path}: holds a legcrawl database (db/ or bloom.bin) but no {MARKER_FILE} marker; refusing to touch it (restore the marker from a copy, or move the directory away)"
    )]
    Unmarked {
        /// The directory.
        path: PathBuf,
    },
    /// The state's creation was interrupted before it held anything.
    #[error(
        "{path}: the creation of this state was interrupted; a `legcrawl crawl` with this --data creates it again"
    )]
    Incomplete {
        /// The directory.
        path: PathBuf,
    },
    /// No state at that path (for read-only commands).
    #[error("{path}: no legcrawl state here")]
    Missing {
        /// The directory.
        path: PathBuf,
    },
    /// The state was written by another format version.
    #[error(
        "{path}: state format {found}; this build reads format {STATE_FORMAT} only{}",
        older_format_hint(.found)
    )]
    Format {
        /// The directory.
        path: PathBuf,
        /// What the marker or metadata says.
        found: String,
    },
    /// This user cannot write the state's files (reading needs write access too).
    #[error(
        "{path}: this user cannot write {file} (reading a state needs write access too: its database writes as it opens); run as the state's owner, or read a copy (cp -r)"
    )]
    NotWritable {
        /// The directory.
        path: PathBuf,
        /// The first file found not writable.
        file: PathBuf,
    },
    /// The state directory does not exist and this user may not create it.
    #[error(
        "{path}: cannot create the state directory ({reason}); choose a --data directory this user may write"
    )]
    CannotCreate {
        /// The directory.
        path: PathBuf,
        /// Why, as the OS says it (permission denied, read-only file system).
        reason: String,
    },
    /// Another process (a running crawl, or a command that opened the state)
    /// holds the database.
    #[error(
        "{path}: the state is busy (another legcrawl process holds it; `dump` reads beside a running crawl)"
    )]
    Busy {
        /// The directory.
        path: PathBuf,
    },
    /// A reader beside the running crawl (see `State::beside`) was asked to
    /// write: a program error, never done.
    #[error("{path}: a read beside the running crawl writes nothing")]
    ReadOnly {
        /// The directory.
        path: PathBuf,
    },
    /// A setting fixed at creation was asked with another value.
    #[error(
        "{path}: the state was created with {setting} = {stored}; it cannot change to {requested} (use a new --data directory or reset)"
    )]
    Mismatch {
        /// The directory.
        path: PathBuf,
        /// Which setting.
        setting: &'static str,
        /// The stored value.
        stored: String,
        /// The requested value.
        requested: String,
    },
    /// A stored record could not be decoded.
    #[error("{path}: unreadable {what} record: {reason}")]
    Corrupt {
        /// The directory.
        path: PathBuf,
        /// Which record (namespace and key).
        what: String,
        /// The decoder's message.
        reason: String,
    },
    /// A commit was asked while the flush of a sealed group runs elsewhere (a
    /// caller's mistake: wait for that flush and hand it to `State::durable`).
    #[error("{path}: a commit was asked while the flush of the last group is still running")]
    FlushRunning {
        /// The directory.
        path: PathBuf,
    },
    /// An earlier write or sync of the state failed (a full disk, an I/O
    /// error): this `State` writes nothing more. What reached the disk is
    /// whole (every group is one atomic batch), and the next open recovers
    /// from it; handing out item numbers or leases again here could store a
    /// group twice.
    #[error(
        "{path}: an earlier write to the state failed ({cause}); nothing more is written in this run (the next run resumes from what is on disk)"
    )]
    Poisoned {
        /// The directory.
        path: PathBuf,
        /// What the first failure said.
        cause: String,
    },
    /// A thread that writes the state (see `committer`) stopped: a job on it
    /// panicked, or it could not be started.
    #[error("the state's {what} thread stopped: {reason}")]
    ThreadStopped {
        /// Which: `flush` or `checkpoint`.
        what: &'static str,
        /// What happened.
        reason: String,
    },
    /// A synchronous checkpoint was asked while a detached one runs (a caller's
    /// mistake: hand that one's result to `State::checkpointed` first).
    #[error("{path}: a checkpoint was asked while another one is still running")]
    CheckpointRunning {
        /// The directory.
        path: PathBuf,
    },
    /// The database failed.
    #[error("{path}: database error: {source}")]
    Db {
        /// The directory.
        path: PathBuf,
        /// sled's error.
        source: sled::Error,
    },
    /// The database is damaged: sled failed or panicked while opening or reading it.
    /// Nothing of the state was written.
    #[error(
        "{path}: damaged database: {reason}; the state was left as it is (restore the directory from a copy)"
    )]
    Damaged {
        /// The database directory (`db/`).
        path: PathBuf,
        /// What sled said.
        reason: String,
    },
    /// A run file of the exact seen set (`runs/*.run`) is missing, cut short
    /// or does not match its checksum. Nothing of the state was written.
    #[error(
        "{path}: damaged run file: {reason}; the state was left as it is (restore the directory from a copy)"
    )]
    RunDamaged {
        /// The run file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The database holds less than the durable record says was made durable: it
    /// lost committed groups without an error (see `repair`).
    #[error(
        "{path}: the database lost committed data (rolled back from {expected} to {found} {what}); refusing to continue on it: restore the state directory from a copy"
    )]
    RolledBack {
        /// The database directory (`db/`).
        path: PathBuf,
        /// What was counted.
        what: &'static str,
        /// What the durable record says.
        expected: u64,
        /// What the database holds.
        found: u64,
    },
    /// The Bloom filter of a `bloom`-mode state is damaged: it is the only record
    /// of the seen set, so it cannot be rebuilt.
    #[error(
        "{path}: {reason}; in bloom dedup mode the filter is the only record of the seen set, so it cannot be rebuilt: restore bloom.bin from a copy of the state, or start again with `legcrawl crawl URL --fresh`"
    )]
    BloomLost {
        /// The filter file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The Bloom filter file failed.
    #[error(transparent)]
    Bloom(#[from] BloomError),
    /// A file of the state could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}
