//! The live status file: how `dump summary` answers while a crawl holds the state.
//!
//! sled allows one process per database, so a running crawl writes its summary to
//! `status.json` in the data directory about once a second (write to a temporary
//! file, then rename, so a reader never sees half a file). A reader trusts it only
//! if the process named in it is alive. Depends on the store's [`Summary`] only.
//!
//! `serve`'s richer publication, which outlives the run, is [`snapshot`].

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::Summary;

pub mod snapshot;

/// Name of the status file in the data directory.
pub const STATUS_FILE: &str = "status.json";

/// A status file older than this is ignored (its writer is gone or stuck).
pub const STALE_AFTER_SECS: u64 = 10;

/// What a running crawl publishes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Status {
    /// Process id of the crawl.
    pub pid: u32,
    /// Unix seconds of this write.
    pub updated_at: u64,
    /// Run number.
    pub run: u64,
    /// Pages completed in this run.
    pub run_pages: u64,
    /// The state summary at `updated_at`.
    #[serde(flatten)]
    pub summary: Summary,
}

/// Writes `status` atomically into `dir`.
pub fn write(dir: &Path, status: &Status) -> std::io::Result<()> {
    let tmp = dir.join(".status.json.tmp");
    crate::crash::point("status.write");
    let mut file = fs::File::create(&tmp)?;
    serde_json::to_writer(&mut file, status)?;
    file.write_all(b"\n")?;
    drop(file);
    fs::rename(&tmp, dir.join(STATUS_FILE))
}

/// Removes the status file (at the end of a crawl).
pub fn remove(dir: &Path) {
    crate::crash::point("status.remove");
    let _ = fs::remove_file(dir.join(STATUS_FILE));
}

/// The status of a live crawl in `dir`, if there is one.
pub fn read_live(dir: &Path) -> Option<Status> {
    let text = fs::read_to_string(status_path(dir)).ok()?;
    let status: Status = serde_json::from_str(&text).ok()?;
    let fresh =
        crate::store::records::unix_now().saturating_sub(status.updated_at) <= STALE_AFTER_SECS;
    (fresh && process_alive(status.pid)).then_some(status)
}

fn status_path(dir: &Path) -> PathBuf {
    dir.join(STATUS_FILE)
}

/// True when a process with this id exists (Linux: /proc).
pub fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}
