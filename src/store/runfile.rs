//! Sorted runs as files of their own, written once by a checkpoint and read
//! through a read-only map: the exact set's runs (`runs/{id:016x}.run`,
//! fingerprints) and the page-id index's (`runs/{id:016x}.ids`, a fingerprint
//! and a page id each; see `pageids`). A file is read by binary search over
//! the map (page cache, not the process's memory) and removed whole.
//!
//! Layout: a 32-byte header — the magic (`lcrun\0` or `lcids\0`), the version
//! (u16), the number of records (u64), the CRC-32 of the body (u32), zeros —
//! then the records sorted by fingerprint: 20 bytes each in a `.run`, the
//! fingerprint and the page id (u64, big-endian) in a `.ids`. The header is
//! written last, so a file cut short by a crash has a zero header or a length
//! that does not match it.
//!
//! Crash safety is the checkpoint's (see `checkpoint`): a file is complete and
//! synced (with its directory) before the run index lists it. Opening checks
//! the header and the length; the CRC is checked when a run is merged and by
//! `legcrawl repair`, which read it whole anyway.
//! Depends on `error`, [`crate::fingerprint`], [`crate::crash`] and
//! [`crate::fsync`].

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::error::StoreError;
use crate::crash;
use crate::fingerprint::Fingerprint;

/// The directory of run files, in the state directory.
pub(super) const RUNS_DIR: &str = "runs";
/// The layout version this module writes and reads.
const VERSION: u16 = 1;
/// Length of the header.
const HEADER: usize = 32;
/// Length of a fingerprint.
const FP: usize = 20;
/// Bytes the writer collects before each write (about 1.3 MB).
const WRITE_BYTES: usize = 65_536 * FP;

/// What a run file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Fingerprints of the exact seen set (`.run`).
    Seen,
    /// Fingerprints with their page ids (`.ids`).
    PageIds,
}

impl Kind {
    /// Bytes per record.
    pub(super) fn width(self) -> usize {
        match self {
            Kind::Seen => FP,
            Kind::PageIds => FP + 8,
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Kind::Seen => "run",
            Kind::PageIds => "ids",
        }
    }

    fn magic(self) -> &'static [u8; 6] {
        match self {
            Kind::Seen => b"lcrun\0",
            Kind::PageIds => b"lcids\0",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Seen => "fingerprints",
            Kind::PageIds => "page ids",
        }
    }
}

/// The path of run `id` of `kind` in the state directory `dir`.
pub(super) fn path(dir: &Path, kind: Kind, id: u64) -> PathBuf {
    dir.join(RUNS_DIR)
        .join(format!("{id:016x}.{}", kind.extension()))
}

fn id_of(name: &str, kind: Kind) -> Option<u64> {
    let hex = name.strip_suffix(kind.extension())?.strip_suffix('.')?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// The ids of the run files of `kind` in `dir/runs` (none when it does not
/// exist).
pub(super) fn ids_on_disk(dir: &Path, kind: Kind) -> Result<Vec<u64>, StoreError> {
    let runs = dir.join(RUNS_DIR);
    let entries = match fs::read_dir(&runs) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StoreError::Io { path: runs, source }),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::Io {
            path: runs.clone(),
            source,
        })?;
        if let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|name| id_of(name, kind))
        {
            ids.push(id);
        }
    }
    Ok(ids)
}

fn damaged(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::RunDamaged {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// A run file, mapped for reading.
#[derive(Debug)]
pub(super) struct RunFile {
    path: PathBuf,
    map: Mmap,
    crc: u32,
    kind: Kind,
}

impl RunFile {
    /// Opens run `id` of `kind` in `dir`, which its index lists with `count`
    /// records: a missing file, a bad header or a length that does not match
    /// is [`StoreError::RunDamaged`].
    pub(super) fn open(dir: &Path, kind: Kind, id: u64, count: u64) -> Result<RunFile, StoreError> {
        let path = path(dir, kind, id);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(damaged(
                    &path,
                    "the file is missing, and the run index lists it",
                ));
            }
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let len = file
            .metadata()
            .map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?
            .len();
        let expected = count
            .checked_mul(kind.width() as u64)
            .and_then(|body| body.checked_add(HEADER as u64));
        if Some(len) != expected {
            return Err(damaged(
                &path,
                format!(
                    "{len} bytes, and a run of {count} {} takes {}",
                    kind.name(),
                    expected.map_or_else(|| "more".to_owned(), |n| n.to_string())
                ),
            ));
        }
        #[allow(unsafe_code)]
        // SAFETY: memmap2 requires that nobody modifies or truncates the file while it is
        // mapped. A run file is never written after the run index lists it (and only listed
        // runs are opened); the state directory is locked through sled, so no other legcrawl
        // process touches it; the map is read-only. As for bloom.bin, another program
        // truncating the file would be SIGBUS.
        let map = unsafe { Mmap::map(&file) }.map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        // Lookups are binary searches; read-ahead on their faults would only waste page cache.
        if let Err(error) = map.advise(memmap2::Advice::Random) {
            tracing::debug!(path = %path.display(), %error, "madvise(RANDOM) failed; ignored");
        }
        let header = &map[..HEADER];
        if &header[..6] != kind.magic() {
            return Err(damaged(&path, "not a run file (bad magic)"));
        }
        let version = u16::from_be_bytes([header[6], header[7]]);
        if version != VERSION {
            return Err(damaged(
                &path,
                format!("unknown run file version {version}"),
            ));
        }
        let mut word = [0u8; 8];
        word.copy_from_slice(&header[8..16]);
        if u64::from_be_bytes(word) != count {
            return Err(damaged(
                &path,
                format!(
                    "the header counts {} {}, the run index {count}",
                    u64::from_be_bytes(word),
                    kind.name()
                ),
            ));
        }
        let crc = u32::from_be_bytes([header[16], header[17], header[18], header[19]]);
        Ok(RunFile {
            path,
            map,
            crc,
            kind,
        })
    }

    /// The sorted records, concatenated.
    pub(super) fn body(&self) -> &[u8] {
        &self.map[HEADER..]
    }

    /// True when the exact-set run holds `fp` (a binary search of the map).
    pub(super) fn contains(&self, fp: &Fingerprint) -> bool {
        find(self.body(), self.kind.width(), fp).is_some()
    }

    /// The page id a page-id run gives `fp`, if it holds it (a search of the
    /// map, see [`find`]).
    pub(super) fn page_id(&self, fp: &Fingerprint) -> Option<u64> {
        let width = self.kind.width();
        let at = find(self.body(), width, fp)?;
        let id: [u8; 8] = self.body()[at * width + FP..(at + 1) * width]
            .try_into()
            .ok()?;
        Some(u64::from_be_bytes(id))
    }

    /// Reads the whole body and checks it against the header's CRC and order:
    /// [`StoreError::RunDamaged`] when it does not match.
    pub(super) fn verify(&self) -> Result<(), StoreError> {
        let name = self.kind.name();
        if crc32fast::hash(self.body()) != self.crc {
            return Err(damaged(
                &self.path,
                format!("its {name} do not match the header's checksum"),
            ));
        }
        let width = self.kind.width();
        let sorted = self
            .body()
            .chunks_exact(width)
            .zip(self.body().chunks_exact(width).skip(1))
            .all(|(a, b)| a[..FP] < b[..FP]);
        if !sorted {
            return Err(damaged(&self.path, format!("its {name} are not in order")));
        }
        Ok(())
    }
}

/// Interpolation steps before [`find`] goes on by halving.
const GUESSES: usize = 3;

/// The first 8 bytes of a fingerprint as a number (fingerprints are SHA-1,
/// so these are uniform).
fn prefix(fp: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&fp[..8]);
    u64::from_be_bytes(word)
}

/// The index of the record of `body` (records of `width` bytes, sorted by
/// their first 20) whose fingerprint is `fp`. Fingerprints are uniform, so the
/// first [`GUESSES`] probes guess where `fp` falls between the bounds' values
/// (about two probes find it in a run of millions, where halving takes twenty,
/// each a likely cache miss on the map); then it halves, so skewed input
/// costs at most a binary search more.
pub(super) fn find(body: &[u8], width: usize, fp: &Fingerprint) -> Option<usize> {
    let record = |at: usize| &body[at * width..at * width + FP];
    let target = prefix(fp);
    let (mut low, mut high) = (0usize, body.len() / width);
    // The values just outside [low, high): what the guess scales between.
    let (mut low_value, mut high_value) = (0u64, u64::MAX);
    let mut guesses = 0;
    while low < high {
        let span = (high - low) as u128;
        let at = if guesses < GUESSES && high_value > low_value {
            guesses += 1;
            let offset = u128::from(target.saturating_sub(low_value)) * span
                / (u128::from(high_value - low_value) + 1);
            low + (offset as usize).min(high - low - 1)
        } else {
            low + (high - low) / 2
        };
        let probe = record(at);
        match probe.cmp(fp.as_slice()) {
            std::cmp::Ordering::Less => {
                low = at + 1;
                low_value = prefix(probe);
            }
            std::cmp::Ordering::Greater => {
                high = at;
                high_value = prefix(probe);
            }
            std::cmp::Ordering::Equal => return Some(at),
        }
    }
    None
}

/// Writes a new run file from records given in strictly increasing order of
/// their fingerprints.
pub(super) struct RunFileWriter {
    path: PathBuf,
    runs: PathBuf,
    file: File,
    buf: Vec<u8>,
    crc: crc32fast::Hasher,
    count: u64,
    kind: Kind,
}

impl RunFileWriter {
    /// Creates the file of run `id` of `kind` in `dir` (and `dir/runs`, synced
    /// into `dir`, the first time). Fails if the file exists: ids are never
    /// reused.
    pub(super) fn create(dir: &Path, kind: Kind, id: u64) -> Result<RunFileWriter, StoreError> {
        let runs = dir.join(RUNS_DIR);
        let io_err = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        if !runs.is_dir() {
            fs::create_dir_all(&runs).map_err(io_err(&runs))?;
            crate::fsync::sync_dir(dir).map_err(io_err(dir))?;
        }
        let path = path(dir, kind, id);
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err(&path))?;
        Ok(RunFileWriter {
            path,
            runs,
            file,
            // The header's place, written for real by `finish`.
            buf: vec![0; HEADER],
            crc: crc32fast::Hasher::new(),
            count: 0,
            kind,
        })
    }

    /// Appends a record of the run's kind (its fingerprint greater than the one
    /// before).
    pub(super) fn push_record(&mut self, record: &[u8]) -> Result<(), StoreError> {
        debug_assert_eq!(record.len(), self.kind.width());
        self.buf.extend_from_slice(record);
        self.crc.update(record);
        self.count += 1;
        if self.buf.len() >= WRITE_BYTES {
            self.write_buf()?;
        }
        Ok(())
    }

    fn write_buf(&mut self) -> Result<(), StoreError> {
        crash::point("checkpoint.run");
        self.file
            .write_all(&self.buf)
            .map_err(|source| StoreError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.buf.clear();
        Ok(())
    }

    /// Writes the rest and the header, syncs the file and `runs/`; returns
    /// the number of records.
    pub(super) fn finish(mut self) -> Result<u64, StoreError> {
        if !self.buf.is_empty() {
            self.write_buf()?;
        }
        let mut header = [0u8; HEADER];
        header[..6].copy_from_slice(self.kind.magic());
        header[6..8].copy_from_slice(&VERSION.to_be_bytes());
        header[8..16].copy_from_slice(&self.count.to_be_bytes());
        header[16..20].copy_from_slice(&self.crc.clone().finalize().to_be_bytes());
        let io_err = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        crash::point("checkpoint.run");
        self.file
            .write_all_at(&header, 0)
            .map_err(io_err(&self.path))?;
        crash::point("checkpoint.run_sync");
        self.file.sync_all().map_err(io_err(&self.path))?;
        crate::fsync::sync_dir(&self.runs).map_err(io_err(&self.runs))?;
        Ok(self.count)
    }

    /// Removes the unfinished file (a failed checkpoint; best effort: the next
    /// open finds it unlisted anyway).
    pub(super) fn abandon(self) {
        drop(self.file);
        // crash point: checkpoint.run (the file is not listed)
        let _ = fs::remove_file(&self.path);
    }
}

/// Removes the file of run `id` of `kind`, if present, and syncs `runs/`.
pub(super) fn remove(dir: &Path, kind: Kind, id: u64) -> Result<(), StoreError> {
    let path = path(dir, kind, id);
    crash::point("checkpoint.gc");
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(StoreError::Io { path, source }),
    }
    let runs = dir.join(RUNS_DIR);
    crate::fsync::sync_dir(&runs).map_err(|source| StoreError::Io { path: runs, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, id: u64, fps: &[Fingerprint]) -> u64 {
        let mut writer = RunFileWriter::create(dir, Kind::Seen, id).expect("create");
        for fp in fps {
            writer.push_record(fp).expect("push");
        }
        writer.finish().expect("finish")
    }

    #[test]
    fn a_written_run_is_found_whole_and_checks_out() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fps: Vec<Fingerprint> = (0..70_000u32)
            .map(|n| {
                let mut fp = [0u8; FP];
                fp[..4].copy_from_slice(&(n * 2).to_be_bytes());
                fp
            })
            .collect();
        assert_eq!(write(dir.path(), 7, &fps), 70_000);
        assert_eq!(ids_on_disk(dir.path(), Kind::Seen).expect("list"), vec![7]);
        let run = RunFile::open(dir.path(), Kind::Seen, 7, 70_000).expect("open");
        run.verify().expect("verify");
        assert_eq!(run.body().len(), 70_000 * FP);
        assert!(fps.iter().all(|fp| run.contains(fp)));
        let mut odd = [0u8; FP];
        odd[..4].copy_from_slice(&3u32.to_be_bytes());
        assert!(!run.contains(&odd));
        assert!(
            RunFileWriter::create(dir.path(), Kind::Seen, 7).is_err(),
            "ids are never reused"
        );
    }

    #[test]
    fn damage_is_named_never_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fps: Vec<Fingerprint> = (1..=10u8).map(|n| [n; FP]).collect();
        write(dir.path(), 1, &fps);
        let file = path(dir.path(), Kind::Seen, 1);
        let is_damage = |result: Result<RunFile, StoreError>| {
            matches!(result, Err(StoreError::RunDamaged { .. }))
        };
        assert!(
            is_damage(RunFile::open(dir.path(), Kind::Seen, 1, 11)),
            "count differs"
        );
        // A flipped byte in the body: opens (cheap checks), fails verify.
        let mut bytes = fs::read(&file).expect("read");
        bytes[HEADER + 5] ^= 1;
        fs::write(&file, &bytes).expect("write");
        let run = RunFile::open(dir.path(), Kind::Seen, 1, 10).expect("open");
        assert!(matches!(run.verify(), Err(StoreError::RunDamaged { .. })));
        // Cut short, a zeroed header, missing.
        bytes.truncate(bytes.len() - 1);
        fs::write(&file, &bytes).expect("write");
        assert!(is_damage(RunFile::open(dir.path(), Kind::Seen, 1, 10)));
        let mut zeroed = vec![0u8; HEADER + 10 * FP];
        zeroed[HEADER..].copy_from_slice(&fps.concat());
        fs::write(&file, &zeroed).expect("write");
        assert!(is_damage(RunFile::open(dir.path(), Kind::Seen, 1, 10)));
        fs::remove_file(&file).expect("remove");
        assert!(is_damage(RunFile::open(dir.path(), Kind::Seen, 1, 10)));
    }

    #[test]
    fn a_page_id_run_gives_each_fingerprint_its_id() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut writer = RunFileWriter::create(dir.path(), Kind::PageIds, 3).expect("create");
        for n in 0..1000u32 {
            let mut record = [0u8; FP + 8];
            record[..4].copy_from_slice(&(n * 2).to_be_bytes());
            record[FP..].copy_from_slice(&u64::from(n + 7).to_be_bytes());
            writer.push_record(&record).expect("push");
        }
        assert_eq!(writer.finish().expect("finish"), 1000);
        assert_eq!(
            ids_on_disk(dir.path(), Kind::PageIds).expect("list"),
            vec![3]
        );
        assert!(
            ids_on_disk(dir.path(), Kind::Seen)
                .expect("list")
                .is_empty(),
            "not an exact run"
        );
        let run = RunFile::open(dir.path(), Kind::PageIds, 3, 1000).expect("open");
        run.verify().expect("verify");
        let fp = |n: u32| {
            let mut fp = [0u8; FP];
            fp[..4].copy_from_slice(&n.to_be_bytes());
            fp
        };
        assert!((0..1000).all(|n| run.page_id(&fp(n * 2)) == Some(u64::from(n + 7))));
        assert_eq!(run.page_id(&fp(3)), None);
        assert_eq!(run.page_id(&fp(5000)), None);
        // The other kind's reader refuses it (magic and length differ).
        assert!(RunFile::open(dir.path(), Kind::Seen, 3, 1000).is_err());
    }

    #[test]
    fn find_agrees_with_a_binary_search_on_uniform_and_skewed_runs() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let uniform: Vec<Fingerprint> = (0..5000)
            .map(|_| {
                let mut fp = [0u8; FP];
                fp[..8].copy_from_slice(&next().to_be_bytes());
                fp[8..16].copy_from_slice(&next().to_be_bytes());
                fp
            })
            .collect();
        // All in a narrow band, many sharing their first 8 bytes.
        let skewed: Vec<Fingerprint> = (0..5000u64)
            .map(|n| {
                let mut fp = [0u8; FP];
                fp[..8].copy_from_slice(&(1000 + n / 7).to_be_bytes());
                fp[8..16].copy_from_slice(&next().to_be_bytes());
                fp
            })
            .collect();
        for mut fps in [
            uniform,
            skewed,
            vec![[0u8; FP]],
            vec![[0xff; FP]],
            Vec::new(),
        ] {
            fps.sort_unstable();
            fps.dedup();
            let body = fps.concat();
            for (at, fp) in fps.iter().enumerate() {
                assert_eq!(find(&body, FP, fp), Some(at));
            }
            let mut absent = Vec::new();
            for fp in &fps {
                let mut other = *fp;
                other[19] ^= 1;
                absent.push(other);
            }
            absent.extend([[0u8; FP], [0xff; FP], [0x80; FP]]);
            for fp in absent {
                assert_eq!(find(&body, FP, &fp), fps.binary_search(&fp).ok(), "{fp:?}");
            }
        }
    }

    #[test]
    fn names_are_sixteen_hex_digits() {
        assert_eq!(id_of("00000000000000ff.run", Kind::Seen), Some(255));
        assert_eq!(id_of("ff.run", Kind::Seen), None);
        assert_eq!(id_of("00000000000000ff.run.tmp", Kind::Seen), None);
        assert_eq!(
            path(Path::new("d"), Kind::Seen, 255),
            Path::new("d/runs/00000000000000ff.run")
        );
    }
}
