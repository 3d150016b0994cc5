//! The store's errors, at the bottom of the store: every table returns them,
//! and they depend only on the format constants, [`crate::bloom`]'s error,
//! sled's and the OS's.
//!
//! Every message is words on one line, its cause included: sled's own
//! messages are not (an I/O error it kept reads `IO error: Os { code: 28,
//! kind: StorageFull, .. }`), so what sled said is rewritten by [`words`]
//! wherever it reaches a message.

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
    /// The state's files are on a file system mounted read-only (reading
    /// needs write access too); no user, root included, can write them there.
    #[error(
        "{path}: {file} is on a read-only file system (reading a state needs write access too: its database writes as it opens); remount it read-write, or read a copy (cp -r)"
    )]
    ReadOnlyFs {
        /// The directory.
        path: PathBuf,
        /// The first file found on the read-only file system.
        file: PathBuf,
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
        "{path}: an earlier write to the state failed ({}); nothing more is written in this run (the next run resumes from what is on disk)",
        words(.cause)
    )]
    Poisoned {
        /// The directory.
        path: PathBuf,
        /// What the first failure said (shown in the OS's words, not sled's debug form).
        cause: String,
    },
    /// A thread that writes the state (see `committer`) stopped: a job on it
    /// panicked, or it could not be started.
    #[error("the state's {what} thread stopped: {}", words(.reason))]
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
    #[error("{path}: database error: {}", sled_words(.source))]
    Db {
        /// The directory.
        path: PathBuf,
        /// sled's error.
        source: sled::Error,
    },
    /// The database is damaged: sled failed or panicked while opening or reading it.
    /// Nothing of the state was written.
    #[error(
        "{path}: damaged database: {}; the state was left as it is (restore the directory from a copy)",
        words(.reason)
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

/// sled's error in words, one line (its own display shows a kept I/O error in
/// debug form and a corruption with a backtrace field).
fn sled_words(error: &sled::Error) -> String {
    match error {
        sled::Error::Io(io) => words(&io.to_string()),
        sled::Error::Corruption { at: Some(at), .. } => {
            format!("sled read corrupted data (at {at})")
        }
        sled::Error::Corruption { at: None, .. } => "sled read corrupted data".into(),
        other => words(&other.to_string()),
    }
}

/// `text` with every I/O error written in debug form replaced by its words:
/// sled keeps the first I/O error it meets and hands out copies whose message
/// is the original's debug text, `Os { code: 28, kind: StorageFull, message:
/// "No space left on device" }`, and prefixes it with `IO error: `. An OS
/// error becomes what the OS says for its code ("No space left on device (os
/// error 28)"); a message (`Custom { kind: .., error: "text" }`) its text.
fn words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest
        .find("Os { code: ")
        .or_else(|| rest.find("Custom { kind: "))
    {
        let (before, debug) = rest.split_at(at);
        out.push_str(before.strip_suffix("IO error: ").unwrap_or(before));
        match debug_form(debug) {
            Some((said, len)) => {
                out.push_str(&said);
                rest = &debug[len..];
            }
            None => {
                out.push_str(debug);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    match out.strip_prefix("IO error: ") {
        Some(plain) => plain.to_owned(),
        None => out,
    }
}

/// The words of the I/O error in debug form at the start of `debug`, and how
/// many bytes of `debug` that form spans; `None` when it does not parse.
fn debug_form(debug: &str) -> Option<(String, usize)> {
    if let Some(rest) = debug.strip_prefix("Os { code: ") {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let code: i32 = rest[..digits].parse().ok()?;
        let end = debug.find(" }")? + 2;
        return Some((io::Error::from_raw_os_error(code).to_string(), end));
    }
    // `Custom { kind: Other, error: "text" }`: the text is a quoted string.
    let start = debug.find("error: \"")? + "error: \"".len();
    let mut said = String::new();
    let mut chars = debug[start..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => said.push(chars.next()?.1),
            '"' => {
                let end = start + i + 1;
                let end = end + debug[end..].find('}')? + 1;
                return Some((said, end));
            }
            c => said.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An I/O error as sled hands it out: a copy made from its debug text.
    fn as_sled_keeps_it(error: io::Error) -> sled::Error {
        sled::Error::Io(io::Error::new(error.kind(), format!("{error:?}")))
    }

    #[test]
    fn a_full_disk_is_words_on_one_line() {
        let full = as_sled_keeps_it(io::Error::from_raw_os_error(28));
        assert!(full.to_string().contains("Os { code: 28"), "{full}");
        let error = StoreError::Db {
            path: PathBuf::from("data/x"),
            source: full,
        };
        let line = error.to_string();
        assert_eq!(
            line,
            format!(
                "data/x: database error: {}",
                io::Error::from_raw_os_error(28)
            )
        );
        assert!(!line.contains('{') && !line.contains("kind"), "{line}");
    }

    #[test]
    fn a_kept_message_is_its_text() {
        let other = as_sled_keeps_it(io::Error::other("the \"log\" is gone"));
        assert_eq!(sled_words(&other), "the \"log\" is gone");
        let plain = sled::Error::Io(io::Error::from_raw_os_error(5));
        assert_eq!(
            sled_words(&plain),
            io::Error::from_raw_os_error(5).to_string()
        );
    }

    #[test]
    fn a_first_failure_kept_as_text_is_words_too() {
        let cause = as_sled_keeps_it(io::Error::from_raw_os_error(28)).to_string();
        let error = StoreError::Poisoned {
            path: PathBuf::from("d"),
            cause: format!("d: database error: {cause}"),
        };
        let line = error.to_string();
        assert!(line.contains("No space left on device"), "{line}");
        assert!(
            !line.contains("Os {") && !line.contains("IO error"),
            "{line}"
        );
    }

    #[test]
    fn text_without_a_debug_form_is_left_as_it_is() {
        assert_eq!(words("a plain reason"), "a plain reason");
        assert_eq!(words("half Os { code: x"), "half Os { code: x");
    }
}
