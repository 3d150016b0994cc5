//! Opening the database: sled's configuration, the metadata record (`m`: the
//! format version and the settings fixed at creation, Bloom size and dedup
//! mode) and the Bloom file that goes with them. Runs after `dir` has taken the
//! directory's lock.
//!
//! Depends on `table`, `records`, `format`, `options`, `panics`, `repair`,
//! `sizing`, `error`, [`crate::bloom`], [`crate::crash`], [`crate::dirlock`]
//! (retrying a busy lock) and [`crate::fsync`].

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::error::StoreError;
use super::format::STATE_FORMAT;
use super::options::DedupMode;
use super::records::{Meta, unix_now};
use super::table::{Db, Json, Table};
use super::{DEFAULT_CACHE_BYTES, OpenOptions, panics, repair, sizing};
use crate::bloom::{BloomFile, BloomParams};
use crate::crash;

/// The state's metadata record (one key `m`): its format and the settings
/// fixed at creation.
pub(super) const META: Table<(), Json<Meta>> = Table::new(b'm', "meta");

/// Opens sled in `dir/db` with a page cache of `cache_bytes` (default
/// [`DEFAULT_CACHE_BYTES`]), after `repair::before_open` found the state whole
/// (a damaged one is refused before sled writes anything); returns it with the
/// Bloom file when that opened whole. A panic of sled's recovery on a damaged
/// log is [`StoreError::Damaged`] (see `repair`).
pub(super) fn open_db(
    dir: &Path,
    cache_bytes: Option<u64>,
) -> Result<(Sled, Option<BloomFile>), StoreError> {
    let cache = cache_bytes.unwrap_or(DEFAULT_CACHE_BYTES);
    let bloom = repair::before_open(dir, cache)?;
    let mut attempt = 1;
    loop {
        let opened = panics::guard(&dir.join("db"), || try_open_db(dir, cache));
        match opened {
            Err(StoreError::Busy { .. }) if attempt < crate::dirlock::ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(crate::dirlock::RETRY);
            }
            other => return other.map(|db| (db, bloom)),
        }
    }
}

fn try_open_db(dir: &Path, cache: u64) -> Result<Sled, StoreError> {
    let path = dir.join("db");
    let db = sled::Config::new()
        .path(&path)
        .cache_capacity(cache)
        .open()
        .map_err(|source| match &source {
            sled::Error::Io(io)
                if io.kind() == io::ErrorKind::WouldBlock || io.to_string().contains("lock") =>
            {
                StoreError::Busy {
                    path: dir.to_owned(),
                }
            }
            sled::Error::Unsupported(_) => StoreError::Damaged {
                path: path.clone(),
                reason: source.to_string(),
            },
            _ => repair::classify(dir, source),
        })?;
    Sled::new(db, dir).map_err(|source| StoreError::Io { path, source })
}

/// sled's database, with a flush that survives a power cut.
///
/// sled 0.34 ends its flush with `sync_file_range(2)`: that writes the log's
/// pages out but neither the file's new size nor the drive's write cache, so
/// a flushed group could be lost to a power cut (the power-cut test found
/// it). [`Sled::flush`] follows sled's flush with `fdatasync(2)` of the log
/// file `db/db`; everything else is sled's, through `Deref`.
///
/// A flush that fails poisons the database for every clone: later flushes
/// fail at once (see [`StoreError::Poisoned`]).
#[derive(Clone)]
pub(super) struct Sled {
    db: sled::Db,
    /// sled's log file, opened again to sync it.
    log: Arc<File>,
    /// What the first flush that failed said.
    poisoned: Arc<OnceLock<String>>,
}

impl Sled {
    /// Wraps a just-opened `db` of the state `dir`, and makes the names sled
    /// created durable: its configuration file (which sled never syncs), the
    /// entries of `db/`, and `db/` itself in the state directory.
    fn new(db: sled::Db, dir: &Path) -> io::Result<Sled> {
        let files = dir.join("db");
        let log = File::open(files.join("db"))?;
        // crash point: create.begin (a creation's; these syncs change nothing a crashed process sees)
        File::open(files.join("conf"))?.sync_all()?;
        crate::fsync::sync_dir(&files)?;
        crate::fsync::sync_dir(dir)?;
        Ok(Sled {
            db,
            log: Arc::new(log),
            poisoned: Arc::default(),
        })
    }

    /// sled's flush, then `fdatasync(2)` of its log: when this returns `Ok`,
    /// every write applied before it is on disk.
    /// A failure poisons the database ([`Sled::poisoned`]): after a failed
    /// sync, what is on disk is unknown until the next open reads it.
    pub(super) fn flush(&self) -> sled::Result<usize> {
        if let Some(cause) = self.poisoned() {
            return Err(sled::Error::Io(io::Error::other(format!(
                "an earlier flush of the state failed ({cause}); nothing more is written in this run"
            ))));
        }
        // crash point: group.sync, checkpoint.sync (the callers')
        let flushed = self
            .db
            .flush()
            .and_then(|n| self.log.sync_data().map(|()| n).map_err(sled::Error::from));
        if let Err(e) = &flushed {
            self.poison(e);
        }
        flushed
    }

    /// What the first failure said, once a flush failed (or [`Sled::poison`]
    /// was called).
    pub(super) fn poisoned(&self) -> Option<&str> {
        self.poisoned.get().map(String::as_str)
    }

    /// Marks the database poisoned by `cause`: a flush failed where this
    /// cannot see it (its thread died). The first cause is kept: it is the
    /// one that explains the others.
    pub(super) fn poison(&self, cause: &dyn std::fmt::Display) {
        let _ = self.poisoned.set(cause.to_string());
    }
}

#[cfg(test)]
impl Sled {
    /// A new database in `dir/db`, for unit tests.
    pub(super) fn scratch(dir: &Path) -> Sled {
        let db = sled::Config::new()
            .path(dir.join("db"))
            .open()
            .expect("a scratch sled database");
        Sled::new(db, dir).expect("sled's files")
    }
}

impl Deref for Sled {
    type Target = sled::Db;

    fn deref(&self) -> &sled::Db {
        &self.db
    }
}

pub(super) fn new_meta(
    dir: &Path,
    options: &OpenOptions,
) -> Result<(Meta, DedupMode, BloomFile), StoreError> {
    let dedup = options.dedup.unwrap_or_default();
    // Sized to the crawl unless `--bloom-bits` fixes the size; in `bloom`
    // mode the bits are the only record, so they never grow (see `sizing`).
    let sized = options.bloom_bits.is_none() && dedup == DedupMode::Exact;
    let params = BloomParams {
        bits: match options.bloom_bits {
            Some(bits) => bits,
            None if sized => sizing::start_bits(),
            None => 30,
        },
        hashes: options.bloom_hashes.unwrap_or(6),
    };
    let bloom_path = dir.join("bloom.bin");
    crash::point("create.bloom");
    let bloom = BloomFile::create(&bloom_path, params)?;
    let meta = Meta {
        format: STATE_FORMAT,
        created_at: unix_now(),
        bloom_bits: params.bits,
        bloom_sized: sized,
        bloom_hashes: params.hashes,
        dedup: dedup.as_str().to_owned(),
        next_queue_seq: 0,
        next_host_id: 0,
    };
    Ok((meta, dedup, bloom))
}

pub(super) fn load_meta(
    dir: &Path,
    db: &Db,
    options: &OpenOptions,
    opened: Option<BloomFile>,
) -> Result<(Meta, DedupMode, BloomFile), StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        path: dir.to_owned(),
        what: "meta".into(),
        reason,
    };
    let meta = META
        .get(db, &())?
        .ok_or_else(|| corrupt("missing".into()))?;
    if meta.format != STATE_FORMAT {
        return Err(StoreError::Format {
            path: dir.to_owned(),
            found: meta.format.to_string(),
        });
    }
    let check = |setting: &'static str, stored: String, requested: Option<String>| match requested {
        Some(requested) if requested != stored => Err(StoreError::Mismatch {
            path: dir.to_owned(),
            setting,
            stored,
            requested,
        }),
        _ => Ok(()),
    };
    let stored_bits = match meta.bloom_sized {
        true => "sized to the crawl".to_owned(),
        false => meta.bloom_bits.to_string(),
    };
    check(
        "bloom bits",
        stored_bits,
        options.bloom_bits.map(|b| b.to_string()),
    )?;
    check(
        "bloom hashes",
        meta.bloom_hashes.to_string(),
        options.bloom_hashes.map(|h| h.to_string()),
    )?;
    check(
        "dedup",
        meta.dedup.clone(),
        options.dedup.map(|d| d.as_str().to_owned()),
    )?;
    let dedup = DedupMode::parse(&meta.dedup)
        .ok_or_else(|| corrupt(format!("unknown dedup mode {:?}", meta.dedup)))?;
    let bloom = repair::open_bloom(db, sizing::Shape::of(&meta), dedup, opened)?;
    Ok((meta, dedup, bloom))
}
