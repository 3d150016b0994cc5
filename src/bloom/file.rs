//! [`BloomFile`]: the filter over a read-write shared memory map of its file, the header
//! codec, and the clean-flag protocol (see the `bloom` module doc for the layout).
//!
//! Invariants: nothing is written to a file before its magic, version, parameters and length
//! have been checked; the on-disk clean flag is 0 before any bit changes; `flush` syncs the bits
//! before it writes a clean header.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use memmap2::{MmapMut, MmapOptions};

use super::filter::{BitStorage, Filter};
use super::{BloomError, BloomParams, Key};

/// Magic bytes at offset 0.
pub(crate) const MAGIC: &[u8; 8] = b"LEGBLOOM";
/// The format version this build reads and writes.
pub(crate) const FORMAT_VERSION: u32 = 2;
/// Header size: one page, so the bit region is page aligned.
pub(crate) const HEADER_LEN: usize = 4096;
/// Offset of the version `u32`.
pub(crate) const OFF_VERSION: usize = 8;
/// Offset of `bits`.
pub(crate) const OFF_BITS: usize = 12;
/// Offset of `hashes`.
pub(crate) const OFF_HASHES: usize = 13;
/// Offset of the ones count `u64`.
pub(crate) const OFF_ONES: usize = 16;
/// Offset of the clean flag.
pub(crate) const OFF_CLEAN: usize = 24;
// The fields must fit in the header page.
const _: () = assert!(OFF_CLEAN < HEADER_LEN);

/// The decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    params: BloomParams,
    ones: u64,
    clean: bool,
}

impl Header {
    /// Writes the fields into the first [`HEADER_LEN`] bytes (the rest stays zero).
    fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(MAGIC);
        out[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[OFF_BITS] = self.params.bits;
        out[OFF_HASHES] = self.params.hashes;
        out[OFF_HASHES + 1..OFF_ONES].fill(0);
        out[OFF_ONES..OFF_ONES + 8].copy_from_slice(&self.ones.to_le_bytes());
        out[OFF_CLEAN] = u8::from(self.clean);
    }

    /// Reads and checks a header; `buf` is the file's first (up to) [`HEADER_LEN`] bytes.
    fn decode(buf: &[u8], path: &Path) -> Result<Header, BloomError> {
        if buf.len() < MAGIC.len() || &buf[..MAGIC.len()] != MAGIC {
            return Err(BloomError::NotABloomFile { path: path.into() });
        }
        if buf.len() < HEADER_LEN {
            return Err(BloomError::Truncated {
                path: path.into(),
                expected_len: HEADER_LEN as u64,
                actual_len: buf.len() as u64,
            });
        }
        let mut word4 = [0u8; 4];
        word4.copy_from_slice(&buf[OFF_VERSION..OFF_VERSION + 4]);
        let found = u32::from_le_bytes(word4);
        if found != FORMAT_VERSION {
            return Err(BloomError::Version {
                path: path.into(),
                found,
            });
        }
        let corrupt = |reason: String| BloomError::CorruptHeader {
            path: path.into(),
            reason,
        };
        let params = BloomParams {
            bits: buf[OFF_BITS],
            hashes: buf[OFF_HASHES],
        };
        params.validate().map_err(|e| corrupt(e.to_string()))?;
        let mut word8 = [0u8; 8];
        word8.copy_from_slice(&buf[OFF_ONES..OFF_ONES + 8]);
        let ones = u64::from_le_bytes(word8);
        let clean = match buf[OFF_CLEAN] {
            0 => false,
            1 => true,
            other => return Err(corrupt(format!("clean flag is {other}, not 0 or 1"))),
        };
        if clean && ones > params.bit_count() {
            return Err(corrupt(format!(
                "ones count {ones} exceeds the {} bits",
                params.bit_count()
            )));
        }
        Ok(Header {
            params,
            ones,
            clean,
        })
    }
}

/// The whole file mapped read-write; the bit region is everything after the header.
pub(crate) struct MappedBits {
    map: MmapMut,
}

impl BitStorage for MappedBits {
    #[inline]
    fn bits(&self) -> &[u8] {
        &self.map[HEADER_LEN..]
    }
    #[inline]
    fn bits_mut(&mut self) -> &mut [u8] {
        &mut self.map[HEADER_LEN..]
    }
}

/// The memory-mapped Bloom filter file of a crawl's seen set.
pub struct BloomFile {
    /// The shared filter implementation over the map.
    inner: Filter<MappedBits>,
    /// The mapped file, for [`BloomFile::sync_handle`].
    file: File,
    /// The file, for error messages and [`BloomFile::path`].
    path: PathBuf,
    /// True while the on-disk header says "clean"; the next bit change must first clear it.
    header_clean: bool,
    /// True if `open` found the clean flag at 0.
    opened_dirty: bool,
    /// The ones count the header held when opened (the count at the last flush).
    flushed_ones: u64,
}

/// Total file length for `params`.
fn file_len(params: BloomParams) -> u64 {
    HEADER_LEN as u64 + params.byte_len()
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> BloomError + '_ {
    move |source| BloomError::Io {
        path: path.into(),
        source,
    }
}

/// True when fewer disk blocks back `file` than its `len` bytes need (a sparse file).
fn is_sparse(file: &File, len: u64, path: &Path) -> Result<bool, BloomError> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().map_err(io_error(path))?;
    // `blocks` counts 512-byte units, whatever the file system's block size.
    Ok(meta.blocks().saturating_mul(512) < len)
}

/// Reserves disk blocks for the first `len` bytes of `file` (`posix_fallocate`
/// semantics: afterwards no write inside them can fail for lack of space), so a full
/// disk is an error now rather than a SIGBUS on a later write through the map. Where
/// the file system has no `fallocate`, a `new` file (all zeros) gets one zero byte
/// written per 4 KiB block, as glibc's emulation does; an existing one is left sparse.
fn reserve(file: &File, path: &Path, len: u64, new: bool) -> Result<(), BloomError> {
    use std::os::unix::fs::FileExt;
    let failed = |source| BloomError::Reserve {
        path: path.into(),
        bytes: len,
        source,
    };
    // crash point: create.bloom (the state's caller; allocation changes no byte)
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {
            if !new {
                tracing::warn!(path = %path.display(), "this file system cannot reserve blocks (no fallocate); the Bloom filter stays sparse");
                return Ok(());
            }
            let mut at = 0;
            while at < len {
                // crash point: create.bloom (a new file: zeros over zeros)
                file.write_all_at(&[0], at).map_err(failed)?;
                at += HEADER_LEN as u64;
            }
            Ok(())
        }
        Err(e) => Err(failed(e.into())),
    }
}

/// Maps `len` bytes of `file` read-write and shared.
fn map_file(file: &File, len: u64, path: &Path) -> Result<MmapMut, BloomError> {
    let len = usize::try_from(len).map_err(|_| BloomError::Truncated {
        path: path.into(),
        expected_len: len,
        actual_len: len,
    })?;
    #[allow(unsafe_code)]
    // SAFETY: memmap2 requires that the mapped file is not modified or truncated by anyone
    // else while mapped. The file was opened read-write by this process and its length was
    // just checked (or set) to `len`; the crawl's state directory is locked through sled, so
    // no other legcrawl process maps this file; every access goes through the `&`/`&mut` slices
    // of the `MmapMut`, so Rust's aliasing rules hold within the process. The remaining hazard,
    // documented in the module doc, is another program truncating the file (SIGBUS).
    let map = unsafe { MmapOptions::new().len(len).map_mut(file) };
    let map = map.map_err(io_error(path))?;
    // Probes are random; read-ahead on faults would only waste page cache. Advisory only.
    if let Err(error) = map.advise(memmap2::Advice::Random) {
        tracing::debug!(path = %path.display(), %error, "madvise(RANDOM) failed; ignored");
    }
    Ok(map)
}

impl BloomFile {
    /// Creates a new, empty filter file (sparse; instant even for 128 MiB). Fails with
    /// [`BloomError::Io`] (kind `AlreadyExists`) if the file exists, leaving it untouched. If a
    /// later step fails the new file is removed; a crash mid-create leaves a file whose header is
    /// zero or incomplete, which `open` rejects ([`BloomError::NotABloomFile`]).
    pub fn create(path: &Path, params: BloomParams) -> Result<BloomFile, BloomError> {
        params.validate()?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_error(path))?;
        match Self::init_new(&file, path, params) {
            Ok(map) => Ok(BloomFile {
                inner: Filter::new(MappedBits { map }, params, 0),
                file,
                path: path.into(),
                header_clean: true,
                opened_dirty: false,
                flushed_ones: 0,
            }),
            Err(error) => {
                // crash point: create.bloom (the state's caller)
                drop(file);
                if let Err(rm) = std::fs::remove_file(path) {
                    tracing::warn!(path = %path.display(), error = %rm, "could not remove half-created Bloom file");
                }
                Err(error)
            }
        }
    }

    /// Sizes the new file, writes a clean empty header and syncs file and directory.
    fn init_new(file: &File, path: &Path, params: BloomParams) -> Result<MmapMut, BloomError> {
        // crash point: create.bloom (the state's caller)
        let len = file_len(params);
        file.set_len(len).map_err(io_error(path))?;
        reserve(file, path, len, true)?;
        let mut map = map_file(file, len, path)?;
        let header = Header {
            params,
            ones: 0,
            clean: true,
        };
        header.encode(&mut map[..HEADER_LEN]);
        map.flush_range(0, HEADER_LEN).map_err(io_error(path))?;
        file.sync_all().map_err(io_error(path))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io_error(dir))?;
        }
        Ok(map)
    }

    /// Opens an existing filter file; the parameters come from its header. Checks magic,
    /// version, parameters and exact length before changing anything. If the header's clean
    /// flag is 0, the ones are recounted (popcount over the whole map).
    pub fn open(path: &Path) -> Result<BloomFile, BloomError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_error(path))?;
        let actual_len = file.metadata().map_err(io_error(path))?.len();
        let mut head = Vec::with_capacity(HEADER_LEN);
        (&file)
            .take(HEADER_LEN as u64)
            .read_to_end(&mut head)
            .map_err(io_error(path))?;
        let header = Header::decode(&head, path)?;
        let expected_len = file_len(header.params);
        if actual_len != expected_len {
            return Err(BloomError::Truncated {
                path: path.into(),
                expected_len,
                actual_len,
            });
        }
        if is_sparse(&file, expected_len, path)? {
            // A sparse file (older builds created them so): reserve the blocks now, so that
            // a full disk is an error here and never a SIGBUS on a write to the map.
            reserve(&file, path, expected_len, false)?;
        }
        let map = map_file(&file, expected_len, path)?;
        let mut inner = Filter::new(MappedBits { map }, header.params, header.ones);
        // Always recounted: bits are only ever set, so fewer ones than the header's count
        // (written at the last flush) means bits were lost (see `lost_bits`).
        let started = Instant::now();
        let ones = inner.recount();
        tracing::debug!(
            path = %path.display(),
            ones,
            header_ones = header.ones,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "{}",
            if header.clean {
                "Bloom filter opened; recounted its ones"
            } else {
                "Bloom filter was not flushed by its last user; recounted its ones"
            }
        );
        Ok(BloomFile {
            inner,
            file,
            path: path.into(),
            header_clean: header.clean,
            opened_dirty: !header.clean,
            flushed_ones: header.ones,
        })
    }

    /// The filter's parameters (from the header).
    pub fn params(&self) -> BloomParams {
        self.inner.params()
    }

    /// Brings the probed bytes of `keys` into the cache, their misses overlapped,
    /// before a run of `contains` or `insert` on them. Changes nothing.
    #[inline]
    pub fn warm(&self, keys: &[Key]) {
        self.inner.warm(keys);
    }

    /// True if the key may have been inserted (false positives possible, no false negatives).
    #[inline]
    pub fn contains(&self, key: &Key) -> bool {
        self.inner.contains(key)
    }

    /// Inserts the key; true if any bit was newly set ("was not present"). Idempotent. The
    /// first insert after `create`/`open`/`flush` that sets a bit first marks the on-disk
    /// header dirty (one msync of the header page).
    #[inline]
    pub fn insert(&mut self, key: &Key) -> bool {
        if self.header_clean && !self.inner.contains(key) {
            self.mark_dirty();
        }
        self.inner.insert(key)
    }

    /// Clears the clean flag on disk before the first bit change of a flush epoch.
    #[cold]
    fn mark_dirty(&mut self) {
        // crash point: bloom.set (the state's caller)
        let map = &mut self.inner.storage.map;
        map[OFF_CLEAN] = 0;
        if let Err(error) = map.flush_range(0, HEADER_LEN) {
            // Still dirty in the page cache, which covers a process crash; only a power loss
            // before the next flush could then leave a stale count (statistics only).
            tracing::warn!(path = %self.path.display(), %error, "could not sync the Bloom header's dirty flag");
        }
        self.header_clean = false;
    }

    /// The checkpoint: msyncs the bits, then writes the header (ones count, clean flag 1) and
    /// msyncs it. When it returns `Ok`, every bit set so far is on disk.
    pub fn flush(&mut self) -> Result<(), BloomError> {
        // crash point: checkpoint.header (the state's caller)
        let params = self.params();
        let ones = self.ones();
        let map = &mut self.inner.storage.map;
        // Lossless: byte_len fits in usize (validated).
        map.flush_range(HEADER_LEN, params.byte_len() as usize)
            .map_err(io_error(&self.path))?;
        let header = Header {
            params,
            ones,
            clean: true,
        };
        header.encode(&mut map[..HEADER_LEN]);
        map.flush_range(0, HEADER_LEN)
            .map_err(io_error(&self.path))?;
        self.header_clean = true;
        Ok(())
    }

    /// A handle that syncs the bits set so far from any thread ([`BloomSync::sync`]),
    /// while this filter goes on setting bits: an `fsync` of the mapped file,
    /// which on Linux writes back the map's dirty pages as `msync` does. The
    /// header stays as it is (dirty while bits change; see [`BloomFile::flush`]).
    pub fn sync_handle(&self) -> Result<BloomSync, BloomError> {
        let file = self.file.try_clone().map_err(io_error(&self.path))?;
        Ok(BloomSync {
            file,
            path: self.path.clone(),
        })
    }

    /// True while the on-disk header says "clean" (no bit changed since the last
    /// [`BloomFile::flush`]).
    pub fn is_clean(&self) -> bool {
        self.header_clean
    }

    /// Pre-faults the whole bit region for writing (Linux `MADV_POPULATE_WRITE`), so later
    /// inserts take no first-touch page faults. Meant right after [`create`](Self::create):
    /// it allocates all `m/8` bytes on disk and dirties every page (one full write-back), which
    /// random probing would do anyway within the first ~10^5 keys. Do not call it after `open`
    /// of a large filter (it would rewrite the whole file). A no-op on other systems.
    /// Cost for 2^30 bits: 0.22–0.26 s (see the `create_2^30_bits` bench).
    pub fn prefault(&self) -> Result<(), BloomError> {
        #[cfg(target_os = "linux")]
        {
            let len = self.params().byte_len() as usize;
            self.inner
                .storage
                .map
                .advise_range(memmap2::Advice::PopulateWrite, HEADER_LEN, len)
                .map_err(io_error(&self.path))?;
        }
        Ok(())
    }

    /// Number of bits set (exact).
    pub fn ones(&self) -> u64 {
        self.inner.ones()
    }

    /// `ones / m`.
    pub fn fill_ratio(&self) -> f64 {
        self.inner.fill_ratio()
    }

    /// Estimated false-positive rate, `fill_ratio^k`.
    pub fn fpr_estimate(&self) -> f64 {
        self.inner.fpr_estimate()
    }

    /// Estimated number of distinct keys inserted, `−(m/k)·ln(1 − fill)`.
    pub fn estimated_count(&self) -> f64 {
        self.inner.estimated_count()
    }

    /// True if `open` found the clean flag at 0 (the last user died or dropped the filter
    /// without `flush`). `open` recounts the ones either way.
    pub fn opened_dirty(&self) -> bool {
        self.opened_dirty
    }

    /// `Some((at_last_flush, now))` when the bits hold fewer ones than the header counted
    /// at the last [`flush`](Self::flush): bits were lost (a zeroed or replaced file body),
    /// since a bit is never cleared. `None` when nothing is missing by that measure.
    pub fn lost_bits(&self) -> Option<(u64, u64)> {
        let now = self.ones();
        (now < self.flushed_ones).then_some((self.flushed_ones, now))
    }

    /// The filter file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Syncs the bits of a [`BloomFile`] from another thread (see
/// [`BloomFile::sync_handle`]).
#[derive(Debug)]
pub struct BloomSync {
    file: File,
    path: PathBuf,
}

impl BloomSync {
    /// Blocks until every bit set before the call is on disk.
    pub fn sync(&self) -> Result<(), BloomError> {
        // crash point: checkpoint.msync (the state's caller)
        self.file.sync_data().map_err(io_error(&self.path))
    }
}

impl std::fmt::Debug for BloomFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomFile")
            .field("path", &self.path)
            .field("params", &self.params())
            .field("ones", &self.ones())
            .field("header_clean", &self.header_clean)
            .finish()
    }
}
