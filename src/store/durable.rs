//! The durable record (`durable` in the state directory): what the last
//! durable group left, and how the state was last closed.
//!
//! - **Two slots** ([`DurableLog`]), written in turn after each group's sled
//!   sync (crash point `group.durable`), each with a checksum, so that a torn
//!   write leaves the other: how many items and completed pages the database
//!   holds at least. [`check_durable`] on open refuses a database that holds
//!   less ([`StoreError::RolledBack`]): sled treats a corrupt log record as the
//!   torn tail of a crash and opens with whatever came before it.
//! - **The close record** after them ([`CloseRecord`]): the SHA-1 of the
//!   database files' names, lengths and modification times at the last clean
//!   close; while a process has the state open, an *open mark* ([`mark_open`])
//!   stands in its place. `repair`'s `before_open` reads the files in place
//!   when a clean close or a crash of ours left them, and makes a trial open
//!   of a copy otherwise.
//!
//! Depends on `error`, `panics` and [`crate::crash`].

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sha1::{Digest, Sha1};

use super::error::StoreError;
use super::panics::guard;
use crate::crash;

/// Name of the durable record in the state directory.
pub const DURABLE_FILE: &str = "durable";
/// Version byte of a durable record slot.
const DURABLE_VERSION: u8 = 1;
/// Bytes per slot (two slots, written in turn, so a torn write leaves the other).
const SLOT: u64 = 64;
/// Bytes of a slot that carry data: version, 7 zero bytes, seq, items, pages,
/// then the first 8 bytes of the SHA-1 of those 32.
const SLOT_DATA: usize = 32;
/// Offset of the close record in the durable file: a version byte, then the
/// SHA-1 of the database files' names, lengths and modification times as the
/// last clean close left them.
const CLOSE_AT: u64 = 2 * SLOT;
/// Version byte of the close record.
const CLOSE_VERSION: u8 = 1;
/// Version byte that stands in the close record's place while a process has
/// the state open: found at the next open, it says that process ended without
/// closing (a crash), not that another program wrote to the files.
const OPEN_VERSION: u8 = 2;

/// What the last durable group left: sled must hold at least this much.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Durable {
    /// Items stored (the next item sequence number).
    pub items: u64,
    /// Pages completed (the `pages/completed` counter).
    pub pages: u64,
}

/// The durable record file, shared by the state and its flushes.
#[derive(Debug)]
pub struct DurableLog {
    /// Opened by the first write when the state has no record yet (so that
    /// opening a state only to read it creates nothing).
    file: Mutex<Option<File>>,
    path: PathBuf,
    /// Sequence number of the last slot written.
    seq: AtomicU64,
    /// What the last slot written (or the database at open) says.
    last: Mutex<Durable>,
}

/// What one group changes in the durable record: `None` where the group wrote
/// nothing of it (the database still holds the last value written; a group that
/// failed to flush may have advanced the counts in memory only).
#[derive(Clone, Copy, Debug, Default)]
pub struct DurableDelta {
    /// The item count after the group, when it stored items.
    pub items: Option<u64>,
    /// The completed-pages counter after the group, when it completed pages.
    pub pages: Option<u64>,
}

/// Opens the durable file to write a slot, the open mark or the close record
/// in place (created when missing, never truncated).
fn open_for_writing(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

fn encode_slot(seq: u64, durable: Durable) -> [u8; SLOT_DATA + 8] {
    let mut out = [0u8; SLOT_DATA + 8];
    out[0] = DURABLE_VERSION;
    out[8..16].copy_from_slice(&seq.to_be_bytes());
    out[16..24].copy_from_slice(&durable.items.to_be_bytes());
    out[24..32].copy_from_slice(&durable.pages.to_be_bytes());
    let sum = Sha1::digest(&out[..SLOT_DATA]);
    out[SLOT_DATA..].copy_from_slice(&sum[..8]);
    out
}

fn decode_slot(bytes: &[u8]) -> Option<(u64, Durable)> {
    let data = bytes.get(..SLOT_DATA)?;
    let sum = bytes.get(SLOT_DATA..SLOT_DATA + 8)?;
    if data[0] != DURABLE_VERSION || Sha1::digest(data)[..8] != *sum {
        return None;
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&data[at..at + 8]);
        u64::from_be_bytes(w)
    };
    Some((
        word(8),
        Durable {
            items: word(16),
            pages: word(24),
        },
    ))
}

impl DurableLog {
    /// Opens the durable record of `dir` (created by the first write when
    /// missing); returns it and what it holds (`None` without one). A file
    /// whose slots both fail their checksum is an error naming it.
    pub(super) fn open(dir: &Path) -> Result<(DurableLog, Option<Durable>), StoreError> {
        let path = dir.join(DURABLE_FILE);
        let io_err = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let log = DurableLog {
                    file: Mutex::new(None),
                    path,
                    seq: AtomicU64::new(0),
                    last: Mutex::new(Durable::default()),
                };
                return Ok((log, None));
            }
            Err(e) => return Err(io_err(e)),
        };
        let mut bytes = vec![0u8; 2 * SLOT as usize];
        let read = file
            .read_at(&mut bytes, 0)
            .map_err(io_err)?
            .min(bytes.len());
        let best = [0, SLOT as usize]
            .iter()
            .filter_map(|&at| decode_slot(&bytes[at..read.max(at)]))
            .max_by_key(|(seq, _)| *seq);
        // A file with only a close record (a state that never committed) has zero slots.
        let written = bytes[..read].iter().any(|&b| b != 0);
        if best.is_none() && written {
            return Err(StoreError::Corrupt {
                path: dir.to_owned(),
                what: DURABLE_FILE.into(),
                reason: "neither slot passes its checksum (move the file away to open the state without the rollback check)".into(),
            });
        }
        let log = DurableLog {
            file: Mutex::new(Some(file)),
            path,
            seq: AtomicU64::new(best.map_or(0, |(seq, _)| seq)),
            last: Mutex::new(best.map(|(_, d)| d).unwrap_or_default()),
        };
        Ok((log, best.map(|(_, durable)| durable)))
    }

    /// Records what the database holds after a group that changed `delta`
    /// (see [`DurableLog::write`] for why it is not synced): called after that
    /// group is synced in sled, never before.
    pub(super) fn record(&self, delta: DurableDelta) -> Result<(), StoreError> {
        let durable = {
            let mut last = self.last.lock().map_err(|_| StoreError::Io {
                path: self.path.clone(),
                source: io::Error::other("a flush panicked while recording"),
            })?;
            last.items = delta.items.unwrap_or(last.items);
            last.pages = delta.pages.unwrap_or(last.pages);
            *last
        };
        self.write(durable)
    }

    /// Writes `durable` into the next slot.
    fn write(&self, durable: Durable) -> Result<(), StoreError> {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let slot = encode_slot(seq, durable);
        let written = (|| {
            let mut file = self
                .file
                .lock()
                .map_err(|_| io::Error::other("a flush panicked while writing it"))?;
            if file.is_none() {
                let new = open_for_writing(&self.path)?;
                *file = Some(new);
            }
            let Some(file) = file.as_ref() else {
                return Err(io::Error::other("not open"));
            };
            // Not synced here: the record is written after sled's sync, so
            // whatever of it reaches the disk (this slot, or the older one when
            // a crash loses or tears this write) never claims more than sled
            // holds; a sync per group only made it lag less, at the cost of a
            // second fsync per commit on the flush thread. The OS writes it
            // within seconds, and a clean close syncs it.
            // crash point: group.durable (the caller's)
            file.write_all_at(&slot, (seq % 2) * SLOT)
        })();
        written.map_err(|source| StoreError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// What the files of `dir/db` look like: the SHA-1 of every path under it with
/// its length and modification time. Any write to them (sled's, or anyone
/// else's) changes it.
pub(super) fn db_files_fingerprint(dir: &Path) -> io::Result<[u8; 20]> {
    use std::os::unix::fs::MetadataExt;
    let db = dir.join("db");
    let mut entries = Vec::new();
    let mut stack = vec![db.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            }
            let name = entry.path();
            let rel = name
                .strip_prefix(&db)
                .unwrap_or(&name)
                .display()
                .to_string();
            entries.push(format!(
                "{rel}\t{}\t{}.{}",
                meta.len(),
                meta.mtime(),
                meta.mtime_nsec()
            ));
        }
    }
    entries.sort();
    let mut sum = Sha1::new();
    for entry in entries {
        sum.update(entry.as_bytes());
        sum.update(b"\n");
    }
    Ok(sum.finalize().into())
}

/// What the close record's place in the durable file says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LastClose {
    /// The state closed cleanly, its database files then as this fingerprint says.
    Clean([u8; 20]),
    /// A process opened the state whole and never closed it: it crashed (or
    /// was killed, or lost power) while the files were its own.
    Crashed,
    /// No record (a state that never closed, or a record that does not read).
    Unknown,
}

/// The close record (see [`CLOSE_AT`]).
pub(super) fn read_close_record(dir: &Path) -> LastClose {
    let Ok(file) = File::open(dir.join(DURABLE_FILE)) else {
        return LastClose::Unknown;
    };
    // The open mark is one byte; a close record, the version and 20 more.
    let mut record = [0u8; 21];
    let read = file.read_at(&mut record, CLOSE_AT).unwrap_or(0);
    match record[0] {
        OPEN_VERSION if read >= 1 => LastClose::Crashed,
        CLOSE_VERSION if read == record.len() => record[1..]
            .try_into()
            .map_or(LastClose::Unknown, LastClose::Clean),
        _ => LastClose::Unknown,
    }
}

/// Records, once the state closed cleanly, what its database files look like,
/// so that the next open can skip the trial open when nothing touched them.
/// Dropped last of the state's fields, after the database.
#[derive(Debug)]
pub struct CloseRecord {
    dir: PathBuf,
    /// Set once the state opened whole: only then is a close clean.
    armed: bool,
    /// Advance sled's snapshot at the close (see [`CloseRecord::snapshot_at_close`]).
    snapshot: bool,
}

impl CloseRecord {
    pub(super) fn new(dir: &Path) -> CloseRecord {
        CloseRecord {
            dir: dir.to_owned(),
            armed: false,
            snapshot: false,
        }
    }

    /// The state opened whole; its close will be recorded.
    pub(super) fn arm(&mut self) {
        self.armed = true;
    }

    /// A crawl's run ended without failing (it may have written a long log):
    /// sled 0.34 writes its snapshot (what an open starts from) only when it
    /// opens, after reading all the log written since the last one, so the
    /// first open after a crawl of a million pages took about 3 s. The close
    /// then opens the database once more, to advance the snapshot while the
    /// log is still in the page cache, so that the next open reads only the
    /// snapshot. Never after a failed run: a database that just failed (a full
    /// disk) is left to the next open's checks (the trial open), as it was.
    pub(super) fn snapshot_at_close(&mut self) {
        self.snapshot = true;
    }
}

/// Opens and closes the database in `dir/db` so that sled advances its
/// snapshot to the end of its log (see [`CloseRecord::snapshot_at_close`]). A
/// failure only leaves the work to the next open.
fn advance_snapshot(dir: &Path) {
    let db_dir = dir.join("db");
    // sled writes the snapshot as `snap.*.generating`, then renames it; one
    // cut short by a full disk stays behind, and sled 0.34 reads it as its
    // newest snapshot on the next open ("corrupted data"). So: only with room
    // to spare, and whatever a failed attempt left is removed.
    let snapshots: u64 = snapshot_files(&db_dir)
        .iter()
        .filter_map(|path| std::fs::metadata(path).ok())
        .map(|meta| meta.len())
        .sum();
    let free = rustix::fs::statvfs(&db_dir)
        .map(|fs| fs.f_bavail.saturating_mul(fs.f_frsize))
        .unwrap_or(0);
    if free < snapshots.saturating_mul(2) + (64 << 20) {
        tracing::debug!(dir = %dir.display(), free, "too little room to advance the database snapshot at close");
        return;
    }
    crash::point("state.snapshot");
    let opened = guard(&db_dir, || {
        sled::Config::new()
            .path(&db_dir)
            .cache_capacity(1 << 20)
            .open()
            .map_err(|source| StoreError::Db {
                path: db_dir.clone(),
                source,
            })
    });
    if let Err(error) = opened {
        tracing::debug!(dir = %dir.display(), %error, "could not advance the database snapshot at close");
        for path in snapshot_files(&db_dir) {
            if path.to_string_lossy().ends_with(".generating") {
                crash::point("state.snapshot");
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// sled's snapshot files in `db_dir` (`snap.*`, finished or being written).
fn snapshot_files(db_dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(db_dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("snap."))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

impl Drop for CloseRecord {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if self.snapshot {
            advance_snapshot(&self.dir);
        }
        let written = (|| {
            let fingerprint = db_files_fingerprint(&self.dir)?;
            let mut record = [0u8; 21];
            record[0] = CLOSE_VERSION;
            record[1..].copy_from_slice(&fingerprint);
            let file = open_for_writing(&self.dir.join(DURABLE_FILE))?;
            crash::point("state.close");
            file.write_all_at(&record, CLOSE_AT)?;
            // Also makes the last durable slot (written unsynced) reach the disk;
            // a lost close record only costs the next open a trial.
            file.sync_data()
        })();
        if let Err(error) = written {
            tracing::debug!(dir = %self.dir.display(), %error, "could not record the clean close");
        }
    }
}

/// Records in the close record's place that a process has the state open
/// (see [`OPEN_VERSION`]), once the open found it whole and until the close
/// record replaces it: a crash from here on leaves files that only this program
/// wrote, which the next open reads without a trial. (An open refused before
/// this leaves the state's files as they were; a crash inside the open, before
/// it, costs the next open a trial.) Not synced: a mark lost to a power cut
/// leaves the last close record, which no longer matches the files, so the
/// next open makes the trial, as it would without the mark.
pub(super) fn mark_open(dir: &Path) {
    let written = (|| {
        let file = open_for_writing(&dir.join(DURABLE_FILE))?;
        crash::point("state.open");
        file.write_all_at(&[OPEN_VERSION], CLOSE_AT)
    })();
    if let Err(error) = written {
        // Only costs the next open after a crash a trial.
        tracing::debug!(dir = %dir.display(), %error, "could not mark the state open");
    }
}

/// Refuses a database that holds less than the durable record says was made
/// durable: a rollback that sled did not report. Otherwise what the database
/// holds becomes the base the next records build on.
pub(super) fn check_durable(
    dir: &Path,
    log: &DurableLog,
    recorded: Option<Durable>,
    found: Durable,
) -> Result<(), StoreError> {
    if let Ok(mut last) = log.last.lock() {
        *last = found;
    }
    let Some(recorded) = recorded else {
        return Ok(());
    };
    for (what, expected, found) in [
        ("items", recorded.items, found.items),
        ("completed pages", recorded.pages, found.pages),
    ] {
        if found < expected {
            return Err(StoreError::RolledBack {
                path: dir.join("db"),
                what,
                expected,
                found,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_round_trips_and_a_flipped_byte_fails_its_checksum() {
        let d = Durable {
            items: 1000,
            pages: 1001,
        };
        let mut slot = encode_slot(7, d);
        assert_eq!(decode_slot(&slot), Some((7, d)));
        slot[20] ^= 1;
        assert_eq!(decode_slot(&slot), None);
        assert_eq!(decode_slot(&[0u8; 40]), None);
    }

    #[test]
    fn the_newest_valid_slot_wins_and_a_torn_one_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let (log, found) = DurableLog::open(dir.path()).unwrap();
        assert_eq!(found, None);
        for n in 1..=3 {
            log.record(DurableDelta {
                items: Some(n),
                pages: Some(n),
            })
            .unwrap();
        }
        // A group that stored no items and completed no pages changes neither.
        log.record(DurableDelta::default()).unwrap();
        log.record(DurableDelta::default()).unwrap();
        drop(log);
        let (_, found) = DurableLog::open(dir.path()).unwrap();
        assert_eq!(found, Some(Durable { items: 3, pages: 3 }));
        // Tear the newest slot (seq 5 is in slot 1): the older one (seq 4) is read.
        let path = dir.path().join(DURABLE_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[SLOT as usize + 17] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (_, found) = DurableLog::open(dir.path()).unwrap();
        assert_eq!(found, Some(Durable { items: 3, pages: 3 }));
        // Both torn: an error naming the file, not a silent pass.
        bytes[17] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let err = DurableLog::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("durable"), "{err}");
    }

    #[test]
    fn less_than_recorded_is_a_rollback_more_is_a_legit_crash() {
        let dir = Path::new("/d");
        let tmp = tempfile::tempdir().unwrap();
        let (log, _) = DurableLog::open(tmp.path()).unwrap();
        let rec = Some(Durable {
            items: 10,
            pages: 10,
        });
        assert!(
            check_durable(
                dir,
                &log,
                rec,
                Durable {
                    items: 12,
                    pages: 10
                }
            )
            .is_ok()
        );
        assert!(check_durable(dir, &log, None, Durable::default()).is_ok());
        let err = check_durable(
            dir,
            &log,
            rec,
            Durable {
                items: 9,
                pages: 10,
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("from 10 to 9 items"), "{err}");
    }
}
