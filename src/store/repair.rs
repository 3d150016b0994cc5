//! Damage: what the state does when its files are not what it wrote.
//!
//! Before them, a snapshot sled was writing when its process died is removed
//! (`drop_unpublished_snapshots`): sled would take it for the newest.
//!
//! Three defences, each ending in either an exact repair or one clear error
//! that leaves the state as it is:
//! - **sled panics.** sled 0.34 panics on some corrupt input (while it recovers
//!   its log on open, or while it reads a damaged page); `panics::guard` runs
//!   the open and the loads of the state under `catch_unwind` and turns a
//!   panic into [`StoreError::Damaged`] (see `panics`, whose
//!   [`quiet_sled_panics`] and [`sled_panic_report`] the binary uses through
//!   this module).
//! - **silent rollbacks.** sled treats a corrupt log record as the torn tail of
//!   a crash and opens with whatever came before it; the durable record
//!   (`durable`) says what the database holds at least, and the open refuses
//!   less ([`StoreError::RolledBack`]). A database another program may have
//!   written (its files changed since the last clean close, and no open mark
//!   says that a process of ours crashed with it open) is first opened as a
//!   copy and read whole (`before_open`), so that a refusal leaves its bytes
//!   as they were.
//! - **lost Bloom bits.** In `exact` mode the Bloom filter is a cache of the
//!   exact set (sealed runs + journal). A missing, truncated, bad-header or
//!   wrong-size `bloom.bin`, or one with fewer ones than its header counted at
//!   the last flush, is rebuilt from the exact set (`rebuild_bloom`: a new
//!   file under a temporary name, synced, then renamed over the old one; crash
//!   points `repair.bloom` and `repair.switch`). In `bloom` mode the bits are
//!   the only record, so the state is refused ([`StoreError::BloomLost`]).
//!
//! Depends on `durable`, `panics`, `sizing`, `runfile`, the tables whose records
//! it reads (items, runs, meta, the exact set, the journal), [`crate::bloom`],
//! [`crate::fingerprint`] and [`crate::crash`].

use std::fs::File;
use std::io;
use std::path::Path;

use super::durable::{
    DURABLE_FILE, Durable, DurableLog, LastClose, check_durable, db_files_fingerprint,
    read_close_record,
};
use super::error::StoreError;
use super::options::DedupMode;
use super::panics::guard;
pub use super::panics::{quiet_sled_panics, sled_panic_report};
use super::runfile::{Kind, RunFile};
use super::seen::JOURNAL;
use super::sizing::Shape;
use super::table::{Codec, Count, Db};
use super::{State, exact, keys};
use crate::bloom::{BloomError, BloomFile, BloomParams};
use crate::crash;
use crate::fingerprint::Fingerprint;

/// The copy of `db/` a trial open reads (removed after it).
const TRIAL_DIR: &str = ".db-trial";
/// Name of a Bloom file being rebuilt.
const REBUILD_FILE: &str = "bloom.bin.rebuild";

/// Removes what sled 0.34 left of a snapshot it was writing when its process
/// died, `db/snap.LSN.generating`. sled writes a snapshot only while it opens:
/// under that name, synced, then renamed to `snap.LSN`. Its next open takes
/// the newest `snap.*` file, a `.generating` one included, and refuses a torn
/// one as corrupt (spacejam/sled#1527; the torn power-cut test found it).
/// Until the rename, the published snapshot and the log are as they were, so
/// without the file sled opens from them, as if the process had died just
/// before it began the snapshot.
fn drop_unpublished_snapshots(db: &Path) -> Result<(), StoreError> {
    let io_err = |source| StoreError::Io {
        path: db.to_owned(),
        source,
    };
    let mut dropped = 0;
    for entry in std::fs::read_dir(db).map_err(io_err)? {
        let path = entry.map_err(io_err)?.path();
        let unpublished = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|name| name.starts_with("snap.") && name.ends_with(".generating"));
        if unpublished {
            crash::point("repair.snapshot");
            std::fs::remove_file(&path).map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
            dropped += 1;
        }
    }
    if dropped > 0 {
        // crash point: repair.snapshot (the removals')
        crate::fsync::sync_dir(db).map_err(io_err)?;
        tracing::info!(db = %db.display(), dropped, "removed the snapshot sled was writing when its process died");
    }
    Ok(())
}

/// Before sled opens `dir/db` (and, on a damaged log, rewrites its tail as if
/// it were a torn write, losing what follows), makes sure the state can be
/// opened whole, so that a refusal leaves every byte as it was:
/// - unless the database files are exactly as the last clean close left them,
///   or were last written by a process of ours that crashed with the state
///   open (the open mark, see `durable::mark_open`: sled's recovery then cuts only
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
    drop_unpublished_snapshots(&db_dir)?;
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
