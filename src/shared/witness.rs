//! A worker's witness record: a small file beside its `--output` file
//! (`FILE.witness`, one JSON object) that names the shared crawl it was
//! written for (its name and epoch), the worker's witness id and the highest
//! value of its commit sequence it saw (`client::Shared::commits_seen`), and the
//! completions it saw Redis lose while it wrote the file. It lives on the
//! worker's disk, so Redis cannot roll it back with its data: a worker that
//! starts later finds a crawl missing where its record says one existed
//! (Redis lost it while no worker ran), or a commit sequence below the one
//! it kept (Redis went back), and says so.
//!
//! Written by replacing the file (a temporary file synced, then renamed), at
//! most every [`KEEP_EVERY`] while the worker completes pages and once when
//! its run ends: a record older than the worker's last completions keeps a
//! lower sequence, so a loss is never claimed that did not happen (it may
//! be undercounted). Depends on the file system and `serde_json` only.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often at most a running worker writes its record.
pub const KEEP_EVERY: Duration = Duration::from_secs(1);

/// What a witness record holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WitnessRecord {
    /// The crawl's name (`--name`).
    pub name: String,
    /// The crawl's epoch (made once with the crawl, `meta`'s `epoch`).
    pub epoch: String,
    /// The worker's witness id: its field of the crawl's `commits` hash,
    /// kept across its runs.
    #[serde(default)]
    pub id: String,
    /// The highest value of the worker's commit sequence it saw.
    pub commits: u64,
    /// Completions the worker saw Redis lose while it wrote the output file
    /// (0: none). Kept until the file is reconciled.
    #[serde(default)]
    pub lost: u64,
    /// The last time Redis went back: from which value of the sequence to
    /// which (`None`: never).
    #[serde(default)]
    pub went_back: Option<(u64, u64)>,
}

/// A witness record that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    /// The file system refused.
    #[error("{path}: {source}")]
    Io {
        /// The record's file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The file is not a record this build writes.
    #[error(
        "{path}: not a witness record of a shared crawl ({reason}); move it away if it is not legcrawl's"
    )]
    Unreadable {
        /// The record's file.
        path: PathBuf,
        /// What the JSON parser said.
        reason: String,
    },
}

/// The record's file for the output file `output`: `OUTPUT.witness`.
pub fn beside(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".witness");
    PathBuf::from(name)
}

/// The record at `path`; `None` when there is none.
pub fn read(path: &Path) -> Result<Option<WitnessRecord>, WitnessError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(WitnessError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|error| WitnessError::Unreadable {
            path: path.to_owned(),
            reason: error.to_string(),
        })
}

/// Replaces the record at `path` with `record` (a temporary file beside it,
/// synced, then renamed over it).
pub fn write(path: &Path, record: &WitnessRecord) -> Result<(), WitnessError> {
    let io = |source| WitnessError::Io {
        path: path.to_owned(),
        source,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let text = serde_json::to_string(record).map_err(|e| io(io::Error::other(e)))?;
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.write_all(b"\n").map_err(io)?;
    file.sync_data().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Deletes the record at `path` (none there is fine): the crawl it names
/// is deleted (`--fresh`).
pub fn forget(path: &Path) -> Result<(), WitnessError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(WitnessError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_read_back_as_written() {
        let dir = std::env::temp_dir().join(format!("legcrawl-witness-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = beside(&dir.join("items.jsonl"));
        assert_eq!(read(&path).unwrap(), None);
        let record = WitnessRecord {
            name: "docs".into(),
            epoch: "00ff".into(),
            id: "0a".into(),
            commits: 42,
            lost: 3,
            went_back: Some((45, 42)),
        };
        write(&path, &record).unwrap();
        assert_eq!(read(&path).unwrap(), Some(record));
        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(read(&path), Err(WitnessError::Unreadable { .. })));
        forget(&path).unwrap();
        forget(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
