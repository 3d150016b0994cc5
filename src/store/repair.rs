//! Damage: what the state does when its files are not what it wrote.
//!
//! Three defences, each ending in either an exact repair or one clear error
//! that leaves the state as it is:
//! - **sled panics.** sled 0.34 panics on some corrupt input (while it recovers
//!   its log on open, or while it reads a damaged page). [`guard`] runs the open
//!   and the loads of the state under `catch_unwind` and turns a panic into
//!   [`StoreError::Damaged`]; [`quiet_sled_panics`] (the binary installs it)
//!   keeps the panic message and backtrace of such a panic off stderr, and
//!   [`sled_panic_report`] names it if one escapes elsewhere.
//! - **silent rollbacks.** sled treats a corrupt log record as the torn tail of
//!   a crash and opens with whatever came before it. The *durable record*
//!   (`durable` in the state directory, [`DurableLog`]) says how many items and
//!   completed pages the last durable group left; it is written and synced
//!   after each group's sled sync (crash point `group.durable`), so after any
//!   legitimate crash sled holds at least what it says. [`check_durable`] on
//!   open refuses a database that holds less ([`StoreError::RolledBack`]).
//!   A database another program may have written (its files changed since the
//!   last clean close, and no open mark says that a process of ours crashed
//!   with it open) is first opened as a copy and read whole ([`before_open`]),
//!   so that a refusal leaves its bytes as they were.
//! - **lost Bloom bits.** In `exact` mode the Bloom filter is a cache of the
//!   exact set (sealed runs + journal). A missing, truncated, bad-header or
//!   wrong-size `bloom.bin`, or one with fewer ones than its header counted at
//!   the last flush, is rebuilt from the exact set ([`rebuild_bloom`]: a new
//!   file under a temporary name, synced, then renamed over the old one; crash
//!   points `repair.bloom` and `repair.switch`). In `bloom` mode the bits are
//!   the only record, so the state is refused ([`StoreError::BloomLost`]).
//!
//! Depends on [`crate::bloom`], the key layout and the exact set's encoding.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sha1::{Digest, Sha1};

use super::error::StoreError;
use super::options::DedupMode;
use super::runfile::{Kind, RunFile};
use super::seen::JOURNAL;
use super::sizing::Shape;
use super::table::{Codec, Count, Db};
use super::{State, exact, keys};
use crate::bloom::{BloomError, BloomFile, BloomParams};
use crate::crash;
use crate::fingerprint::Fingerprint;

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
/// The copy of `db/` a trial open reads (removed after it).
const TRIAL_DIR: &str = ".db-trial";
/// Name of a Bloom file being rebuilt.
const REBUILD_FILE: &str = "bloom.bin.rebuild";

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
fn db_files_fingerprint(dir: &Path) -> io::Result<[u8; 20]> {
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
enum LastClose {
    /// The state closed cleanly, its database files then as this fingerprint says.
    Clean([u8; 20]),
    /// A process opened the state whole and never closed it: it crashed (or
    /// was killed, or lost power) while the files were its own.
    Crashed,
    /// No record (a state that never closed, or a record that does not read).
    Unknown,
}

/// The close record (see [`CLOSE_AT`]).
fn read_close_record(dir: &Path) -> LastClose {
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

/// Before sled opens `dir/db` (and, on a damaged log, rewrites its tail as if
/// it were a torn write, losing what follows), makes sure the state can be
/// opened whole, so that a refusal leaves every byte as it was:
/// - unless the database files are exactly as the last clean close left them,
///   or were last written by a process of ours that crashed with the state
///   open (the open mark, see [`mark_open`]: sled's recovery then cuts only
///   its log's torn tail, and the open's rollback check follows), or the
///   state has no durable record yet, a copy of `db/` is opened and scanned in
///   full — a sled panic or error is [`StoreError::Damaged`] — and its items
///   and completed pages are compared with the durable record
///   ([`StoreError::RolledBack`]). Costs a copy of `db/` after another program
///   wrote to it, or after a crash whose open mark a power cut lost;
/// - `bloom.bin` is opened; a damaged one is refused here in `bloom` mode
///   ([`StoreError::BloomLost`]; the copy tells the mode), and left for the
///   open to rebuild in `exact` mode.
///
/// Returns the opened Bloom file when it is whole, for `load_meta`.
pub(super) fn before_open(dir: &Path, cache: u64) -> Result<Option<BloomFile>, StoreError> {
    let db_dir = dir.join("db");
    if !db_dir.exists() {
        return Ok(None);
    }
    let opened = BloomFile::open(&dir.join("bloom.bin"));
    let bloom_damage = match &opened {
        Ok(bloom) => bloom.lost_bits().map(|(had, has)| {
            format!("it lost bits ({had} set at the last checkpoint, {has} now)")
        }),
        Err(_) => bloom_damage(&opened, Shape::Fixed(BloomParams::default())),
    };
    if bloom_damage.is_none()
        && let Err(error) = opened
    {
        // Not damage (no room to reserve its blocks, permissions): nothing opened yet.
        return Err(error.into());
    }
    // Files that only this program wrote: as the last clean close left them,
    // or as a process that crashed with the state open left them (sled's
    // recovery then cuts only the torn tail of its log, and the durable record
    // still refuses a rollback after the open).
    let ours = match read_close_record(dir) {
        LastClose::Clean(fingerprint) => db_files_fingerprint(dir).ok() == Some(fingerprint),
        LastClose::Crashed => true,
        LastClose::Unknown => false,
    };
    let durable = dir.join(DURABLE_FILE).exists();
    if (ours || !durable) && bloom_damage.is_none() {
        return Ok(opened.ok());
    }
    let trial = dir.join(TRIAL_DIR);
    crash::point("repair.trial");
    if let Err(error) = copy_dir(&db_dir, &trial) {
        // No room for a copy: open without the trial (the rollback check stays).
        tracing::warn!(dir = %dir.display(), %error, "could not copy the database for a trial open; opening it directly");
        // crash point: repair.trial (a copy, never the state)
        let _ = std::fs::remove_dir_all(&trial);
        return Ok(opened.ok());
    }
    let checked = guard(&db_dir, || scan_trial(&trial, &db_dir, cache));
    // crash point: repair.trial (a copy, never the state)
    let _ = std::fs::remove_dir_all(&trial);
    let Some((found, dedup)) = checked? else {
        return Ok(opened.ok());
    };
    let (log, recorded) = DurableLog::open(dir)?;
    check_durable(dir, &log, recorded, found)?;
    match bloom_damage {
        Some(reason) if dedup == Some(DedupMode::Bloom) => Err(StoreError::BloomLost {
            path: dir.join("bloom.bin"),
            reason,
        }),
        _ => Ok(opened.ok()),
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

/// Copies the files of `from` into a new `to` (removed first).
fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    // crash point: repair.trial (the caller's; a copy, never the state)
    match std::fs::remove_dir_all(to) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Opens the trial copy and reads every record; returns what it holds and its
/// dedup mode, or `None` when the copy could not be opened for another reason
/// than damage (no room for sled's own writes).
fn scan_trial(
    trial: &Path,
    db_dir: &Path,
    cache: u64,
) -> Result<Option<(Durable, Option<DedupMode>)>, StoreError> {
    let damaged = |reason: String| StoreError::Damaged {
        path: db_dir.to_owned(),
        reason,
    };
    let db = match sled::Config::new().path(trial).cache_capacity(cache).open() {
        Ok(db) => db,
        Err(sled::Error::Io(error)) => {
            tracing::warn!(db = %db_dir.display(), %error, "could not open a copy of the database for a trial open; opening it directly");
            return Ok(None);
        }
        Err(e) => return Err(damaged(describe(&e))),
    };
    let mut found = Durable::default();
    let mut dedup = None;
    let pages_key = super::runs::COUNTER.key("pages/completed");
    let meta_key = super::db::META.key(&());
    for entry in db.iter() {
        let (key, value) = entry.map_err(|e| damaged(describe(&e)))?;
        if key.first() == Some(&super::items::ITEM) {
            let first = keys::u64_after_prefix(&key)
                .ok_or_else(|| damaged(format!("item key {key:?} is too short")))?;
            let body = super::items::decode_record(&value)
                .map_err(|reason| damaged(format!("item record {key:?}: {reason}")))?;
            let count = keys::length_prefixed(&body).count();
            found.items = found.items.max(first + count as u64);
        } else if *key == *pages_key {
            found.pages = Count::decode(&value).unwrap_or_default();
        } else if *key == *meta_key {
            dedup = super::records::decode::<super::records::Meta>(&value)
                .ok()
                .and_then(|meta| DedupMode::parse(&meta.dedup));
        }
    }
    Ok(Some((found, dedup)))
}

/// sled's error in words (its `Corruption` display shows a debug backtrace field).
fn describe(error: &sled::Error) -> String {
    match error {
        sled::Error::Corruption { at: Some(at), .. } => {
            format!("sled read corrupted data (at {at})")
        }
        sled::Error::Corruption { at: None, .. } => "sled read corrupted data".into(),
        other => other.to_string(),
    }
}

/// A sled error of the state in `dir`: corruption it reports is
/// [`StoreError::Damaged`], anything else [`StoreError::Db`].
pub(super) fn classify(dir: &Path, source: sled::Error) -> StoreError {
    match source {
        sled::Error::Corruption { .. } => StoreError::Damaged {
            path: dir.join("db"),
            reason: describe(&source),
        },
        source => StoreError::Db {
            path: dir.to_owned(),
            source,
        },
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

/// The database directory whose panic [`quiet_sled_panics`] last silenced, with
/// the panic's message.
static SLED_PANIC: Mutex<Option<String>> = Mutex::new(None);
/// The database directory opened last (for [`sled_panic_report`]).
static LAST_DB: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Runs `f` (an open or a read of the database in `db_dir`) and turns a panic
/// inside it into [`StoreError::Damaged`] naming `db_dir`.
pub(super) fn guard<T>(
    db_dir: &Path,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    if let Ok(mut last) = LAST_DB.lock() {
        *last = Some(db_dir.to_owned());
    }
    // Unwind safety: after a panic everything `f` touched is dropped unused.
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        Err(StoreError::Damaged {
            path: db_dir.to_owned(),
            reason: format!(
                "the database library panicked: {}",
                message(payload.as_ref())
            ),
        })
    })
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// True for a panic raised inside sled's own code.
fn in_sled(info: &std::panic::PanicHookInfo<'_>) -> bool {
    info.location()
        .is_some_and(|l| l.file().contains("/sled-") || l.file().contains("/sled/"))
}

/// Installs a panic hook that keeps panics raised inside sled (a damaged
/// database) off stderr — they become one line through [`guard`] or
/// [`sled_panic_report`] — and hands every other panic to the previous hook.
pub fn quiet_sled_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if in_sled(info) {
            if let Ok(mut slot) = SLED_PANIC.lock() {
                *slot = Some(message(info.payload()));
            }
        } else {
            previous(info);
        }
    }));
}

/// One line for a sled panic that escaped [`guard`] (silenced by
/// [`quiet_sled_panics`]); `None` if there was none.
pub fn sled_panic_report() -> Option<String> {
    let message = SLED_PANIC.lock().ok()?.clone()?;
    let db = LAST_DB
        .lock()
        .ok()
        .and_then(|d| d.clone())
        .map_or_else(|| "the state's db".into(), |d| d.display().to_string());
    Some(
        StoreError::Damaged {
            path: PathBuf::from(db),
            reason: format!("the database library panicked: {message}"),
        }
        .to_string(),
    )
}

/// Why `bloom.bin` cannot be used as it is, when it is damaged (missing, bad
/// header, wrong length, a size or probes that do not fit `shape`, lost bits);
/// `None` when it opened whole, or failed for another reason (permissions, a
/// full disk), which stays an error.
pub(super) fn bloom_damage(opened: &Result<BloomFile, BloomError>, shape: Shape) -> Option<String> {
    match opened {
        Ok(bloom) => shape.misfit(bloom.params()).or_else(|| {
            bloom.lost_bits().map(|(had, has)| {
                format!("it lost bits ({had} set at the last checkpoint, {has} now)")
            })
        }),
        Err(BloomError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            Some("it is missing".into())
        }
        Err(
            e @ (BloomError::NotABloomFile { .. }
            | BloomError::Version { .. }
            | BloomError::Truncated { .. }
            | BloomError::CorruptHeader { .. }),
        ) => Some(e.to_string()),
        Err(_) => None,
    }
}

/// Visits every fingerprint of the exact set: the runs the index lists (a run
/// file's checksum is checked), then the journal; returns how many it visited.
/// Reads through [`guard`] (the caller's).
pub(super) fn visit_exact(db: &Db, mut visit: impl FnMut(&Fingerprint)) -> Result<u64, StoreError> {
    let mut visited = 0u64;
    for (run, count) in exact::listed(db)? {
        // Read whole, so its checksum is checked too.
        let file = RunFile::open(db.dir(), Kind::Seen, run, count)?;
        file.verify()?;
        for chunk in file.body().chunks_exact(20) {
            let mut fp = [0u8; 20];
            fp.copy_from_slice(chunk);
            visit(&fp);
            visited += 1;
        }
    }
    for entry in JOURNAL.iter(db) {
        let (_, fps) = entry?;
        fps.iter().for_each(&mut visit);
        visited += fps.len() as u64;
    }
    Ok(visited)
}

/// The fingerprints of the exact set, counted from the run index and the
/// journal without reading the runs.
fn exact_len(db: &Db) -> Result<u64, StoreError> {
    let mut len: u64 = exact::listed(db)?.iter().map(|&(_, count)| count).sum();
    for entry in JOURNAL.iter(db) {
        len += entry?.1.len() as u64;
    }
    Ok(len)
}

/// Why `bloom.bin` is rebuilt, which names the crash points of the rebuild:
/// before the new file is built, and before it is renamed over the old one.
#[derive(Clone, Copy, Debug)]
pub(super) enum RebuildPoints {
    /// A damaged filter's replacement, or `legcrawl repair`'s.
    Repair,
    /// A sized filter grown at a checkpoint (see `sizing`).
    Grow,
}

impl RebuildPoints {
    fn before_build(self) {
        match self {
            RebuildPoints::Repair => crash::point("repair.bloom"),
            RebuildPoints::Grow => crash::point("bloom.grow"),
        }
    }

    fn before_switch(self) {
        match self {
            RebuildPoints::Repair => crash::point("repair.switch"),
            RebuildPoints::Grow => crash::point("bloom.grow.switch"),
        }
    }
}

/// Builds a new `bloom.bin` of `params` holding the exact set: written and
/// synced under a temporary name, then renamed over the old file (the
/// directory synced). A crash before the rename leaves the old file (and a
/// temporary one the next rebuild removes); after it, the new one. Returns
/// the new filter and the fingerprints it was built from.
pub(super) fn rebuild_bloom(
    params: BloomParams,
    db: &Db,
    points: RebuildPoints,
) -> Result<(BloomFile, u64), StoreError> {
    let dir = db.dir();
    let path = dir.join("bloom.bin");
    let tmp = dir.join(REBUILD_FILE);
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |source| StoreError::Io { path, source }
    };
    // crash point: repair.bloom, bloom.grow (one of them, by `points`)
    points.before_build();
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(&tmp)(e)),
        _ => {}
    }
    let built = BloomFile::create(&tmp, params)
        .map_err(StoreError::from)
        .and_then(|mut fresh| {
            let count = visit_exact(db, |fp| {
                fresh.insert(fp);
            })?;
            fresh.flush()?;
            Ok(count)
        });
    let count = match built {
        Ok(count) => count,
        Err(error) => {
            // A full disk, say: the old filter stays, without a half-built
            // file beside it.
            let _ = std::fs::remove_file(&tmp);
            return Err(error);
        }
    };
    // crash point: repair.switch, bloom.grow.switch (one of them, by `points`)
    points.before_switch();
    std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))?;
    Ok((BloomFile::open(&path)?, count))
}

/// Opens `bloom.bin`; when it is damaged, rebuilds it from the exact set
/// (`exact` mode, saying so in a warning) or refuses (`bloom` mode).
pub(super) fn open_bloom(
    db: &Db,
    shape: Shape,
    dedup: DedupMode,
    opened: Option<BloomFile>,
) -> Result<BloomFile, StoreError> {
    let dir = db.dir();
    let opened = match opened {
        Some(bloom) => Ok(bloom),
        None => BloomFile::open(&dir.join("bloom.bin")),
    };
    let Some(reason) = bloom_damage(&opened, shape) else {
        return opened.map_err(Into::into);
    };
    // The damaged map is dropped before the file is replaced.
    drop(opened);
    let path = dir.join("bloom.bin");
    if dedup == DedupMode::Bloom {
        return Err(StoreError::BloomLost { path, reason });
    }
    let params = shape.params_for(exact_len(db)?);
    let (bloom, count) = rebuild_bloom(params, db, RebuildPoints::Repair)?;
    tracing::warn!(
        "{}: {reason}; rebuilt it from the exact seen set ({count} fingerprints)",
        path.display(),
    );
    Ok(bloom)
}

/// What `legcrawl repair` did.
#[derive(Debug)]
pub struct RepairReport {
    /// Records read by the full scan of the database.
    pub records: u64,
    /// Items stored.
    pub items: u64,
    /// Fingerprints the rebuilt Bloom filter holds (`None` in `bloom` mode:
    /// nothing to rebuild from).
    pub rebuilt: Option<u64>,
    /// Ones of the filter before and after.
    pub ones: (u64, u64),
    /// A damaged page-id run found by reading the runs whole, and the pages
    /// the rebuilt index holds; `None` when the runs were whole.
    pub page_ids: Option<(String, u64)>,
}

impl State {
    /// `legcrawl repair`: reads every record of the database (a damaged one is
    /// an error, never a panic), reads the page-id index's runs whole and
    /// rebuilds the index from the page records if one is damaged, and, in
    /// `exact` mode, rebuilds the Bloom filter from the exact set. The state must have been opened (which already
    /// refuses a rollback and repairs a damaged Bloom file).
    pub fn repair(&mut self) -> Result<RepairReport, StoreError> {
        let dir = self.dir().to_owned();
        let db_dir = dir.join("db");
        let records = guard(&db_dir, || {
            let mut records = 0u64;
            for entry in self.db.tree().iter() {
                entry.map_err(|e| self.db.error(e))?;
                records += 1;
            }
            Ok(records)
        })?;
        self.commit()?;
        let page_ids = guard(&db_dir, || self.pages.verify_ids(&self.db))?;
        let before = self.seen.bloom.ones();
        let mut rebuilt = None;
        if self.seen.dedup == DedupMode::Exact {
            self.commit()?;
            // A sized filter is sized to the exact set as it is now, never
            // smaller than it was.
            let shape = Shape::of(&self.meta);
            let have = self.seen.bloom.params();
            let count = guard(&db_dir, || exact_len(&self.db))?;
            let params = match shape.params_for(count) {
                params if params.bits < have.bits => have,
                params => params,
            };
            let (bloom, count) = guard(&db_dir, || {
                rebuild_bloom(params, &self.db, RebuildPoints::Repair)
            })?;
            self.seen.bloom = bloom;
            rebuilt = Some(count);
        }
        Ok(RepairReport {
            records,
            items: self.items.len(),
            rebuilt,
            ones: (before, self.seen.bloom.ones()),
            page_ids,
        })
    }
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
