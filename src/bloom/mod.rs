//! The seen set's primitive: a Bloom filter of `m = 2^bits` bits with `k = hashes` probes,
//! memory-mapped from a file in the data directory ([`BloomFile`]) or held in plain memory
//! ([`BloomMem`], for tests, benches and comparisons). Both share one implementation, generic
//! over the byte storage.
//!
//! # Role and boundaries
//! The store asks "have I seen this request fingerprint?" before putting a request on the
//! frontier. This module only answers that question and keeps its bits; it depends on nothing
//! else in the crate (keys are the 20-byte SHA-1 fingerprints made by `fingerprint`, passed in
//! as plain [`Key`] arrays). The durability protocol that keeps the on-disk bits from running
//! ahead of the durable frontier (overlay + journal in sled) belongs to the store. What this
//! module guarantees for it:
//! - setting bits is idempotent: replaying an [`insert`](BloomFile::insert) is harmless;
//! - [`flush`](BloomFile::flush) is the checkpoint: when it returns, every bit set before it is
//!   on disk (msync), then the header (ones count, clean flag) is written and synced;
//! - bits set after the last flush **may** reach the disk at any time (the kernel writes back
//!   dirty pages of a shared mapping when it likes), so the store must journal a fingerprint
//!   before inserting it, never after.
//!
//! # Hashing
//! A key is already a uniform 160-bit hash, so no further hashing is done. The filter is
//! **page-blocked**: it is cut into blocks of `b = 2^15` bits (one 4 KiB page; the whole
//! filter when `m` is smaller), bytes 16..20 of the key (a little-endian `u32`) pick the
//! key's block, and all `k` probes fall inside it, so a new key dirties one page of the
//! mapped file instead of `k`. Within the block, enhanced double hashing (Dillinger &
//! Manolios) takes `h1` = bytes 0..8 and `h2` = bytes 8..16 (both little-endian `u64`), forces
//! `h2` odd, and probes `g_i = h1 + i·h2 + (i³ − i)/6  (mod b)` for `i = 0..k`, computed
//! incrementally with wrapping additions (`x += y; y += i`). Because `b` divides `2^64`,
//! wrapping `u64` arithmetic is exact modulo `b`; because `h2` is odd it is coprime with
//! `b`, so the `i·h2` steps never fall into a short cycle. The cubic term breaks the
//! residual correlation of plain double hashing when two keys share `h2`.
//! Blocking adds the variance of how many keys land in each block (binomial, mean
//! `n·b/m`); with 32,768-bit blocks that variance is a few percent of the mean at any
//! useful load, so the formula below stays close to the measured rate (the FPR test
//! checks it within 20 %).
//!
//! # Math
//! With `n` keys inserted, each bit is still zero with probability `(1 − 1/m)^(kn) ≈ e^(−kn/m)`,
//! so the false-positive rate (all `k` probes of a fresh key hit ones) is
//! `FPR(n) = (1 − e^(−kn/m))^k` ([`false_positive_rate`]).
//! - **Design capacity** ([`design_capacity`]) is the `n` at which `FPR(n)` reaches a target
//!   `p`, solving the formula exactly: `n = −(m/k)·ln(1 − p^(1/k))`. For the default
//!   `m = 2^30`, `k = 6`: about 111.7 M keys at 1 %, and at 100 M keys the FPR is about 0.62 %.
//!   [`optimal_capacity`] is the other common reading, `n* = m·ln2/k` (the load for which this
//!   `k` is optimal: half the bits set, FPR = 2^−k ≈ 1.56 % for k = 6, about 124 M keys).
//! - **Fill ratio → FPR estimate**: the measured fraction of ones, `fill = ones/m`, is what
//!   `1 − e^(−kn/m)` estimates, so [`fpr_estimate`](BloomFile::fpr_estimate) is `fill^k`; it
//!   needs no count of inserted keys and stays right even if the same key was inserted twice.
//!   The number of distinct keys can be estimated back as `n ≈ −(m/k)·ln(1 − fill)`
//!   ([`estimated_count`](BloomFile::estimated_count)).
//! - **Why m is a power of two**: `mod m` is a mask, not a 64-bit division, on the hot path;
//!   the wrapping arithmetic above is exact; odd `h2` is guaranteed coprime with `m`; and for
//!   `bits ≥ 15` the bit region is a whole number of 4 KiB pages.
//!
//! # File layout (format version 2, all little-endian)
//! A 4096-byte header, so that the bit region starts page aligned, then `m/8` bytes of bits
//! (bit `i` is bit `i % 8` of byte `i / 8`, i.e. `BitSlice<u8, Lsb0>`):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `b"LEGBLOOM"` |
//! | 8 | 4 | format version `u32` (= 2) |
//! | 12 | 1 | `bits` |
//! | 13 | 1 | `hashes` |
//! | 16 | 8 | ones count `u64` (exact when clean) |
//! | 24 | 1 | clean flag: 1 = header count matches the bits, 0 = bits may have changed since |
//!
//! The file's blocks are reserved (`fallocate`, see `file.rs`) when it is created, and on
//! open when it is sparse: a write through the map into a sparse block on a full file system
//! is a SIGBUS, which no error path can catch, while a full disk at `fallocate` is an
//! ordinary ENOSPC error.
//!
//! # Invariants
//! - The file length is exactly `4096 + m/8`; `open` checks magic, version, parameters and
//!   length before it writes anything, so a rejected file is left byte-for-byte unchanged.
//! - The on-disk clean flag is set to 0 and synced before the first bit change after `create`,
//!   `open` or `flush` (lazily, on the first `insert` that would set a bit, so opening a filter
//!   only to read it does not dirty it); `flush` writes 1 after the bits are synced.
//! - `ones` is exact: every 0→1 transition is counted. `open` always recounts with a popcount
//!   over the map; bits are never cleared, so a recount below the header's count (the count at
//!   the last flush) means bits were lost ([`BloomFile::lost_bits`]).
//! - The hot path (`contains`, `insert`) allocates nothing and does no division.
//! - The memory map is an `unsafe` block; see `file.rs` for its SAFETY argument. Truncating
//!   the file from outside while it is mapped is the documented hazard (the process would get
//!   SIGBUS); the state directory's lock ([`crate::dirlock`], taken by the store) keeps other
//!   legcrawl processes away.
//!
//! Timings (open, recount, dedup rate, prefault) are in `docs/performance.md`, *Bloom filter*.

mod file;
mod filter;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_file;

use std::path::PathBuf;

pub use self::file::{BloomFile, BloomSync};
pub use self::filter::BloomMem;

/// A request fingerprint: the 20-byte SHA-1 digest made by the `fingerprint` module.
pub type Key = [u8; 20];

/// Smallest accepted `bits` (2^10 bits = 128 bytes).
pub const MIN_BITS: u8 = 10;
/// Largest accepted `bits` (2^36 bits = 8 GiB).
pub const MAX_BITS: u8 = 36;
/// Smallest accepted number of hash probes.
pub const MIN_HASHES: u8 = 1;
/// Largest accepted number of hash probes.
pub const MAX_HASHES: u8 = 32;

/// Sizing and hashing of a filter; stored in the file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BloomParams {
    /// The filter has `2^bits` bits (`MIN_BITS..=MAX_BITS`; default 30 = 128 MiB).
    pub bits: u8,
    /// Number of probes `k` per key (`MIN_HASHES..=MAX_HASHES`; default 6).
    pub hashes: u8,
}

impl Default for BloomParams {
    fn default() -> Self {
        BloomParams {
            bits: 30,
            hashes: 6,
        }
    }
}

impl BloomParams {
    /// Validated parameters.
    pub fn new(bits: u8, hashes: u8) -> Result<BloomParams, BloomError> {
        let params = BloomParams { bits, hashes };
        params.validate()?;
        Ok(params)
    }

    /// Checks the ranges (`bits` in 10..=36, `hashes` in 1..=32) and that the filter fits in
    /// this platform's address space.
    pub fn validate(&self) -> Result<(), BloomError> {
        let reason = if !(MIN_BITS..=MAX_BITS).contains(&self.bits) {
            Some("bits must be in 10..=36")
        } else if !(MIN_HASHES..=MAX_HASHES).contains(&self.hashes) {
            Some("hashes must be in 1..=32")
        } else if usize::try_from(self.bit_count()).is_err() {
            Some("filter does not fit in this platform's address space")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(BloomError::BadParams {
                bits: self.bits,
                hashes: self.hashes,
                reason,
            }),
            None => Ok(()),
        }
    }

    /// `m`, the number of bits (`2^bits`; meaningful only for validated parameters).
    pub fn bit_count(&self) -> u64 {
        1u64 << self.bits.min(63)
    }

    /// Size of the bit region in bytes (`m / 8`).
    pub fn byte_len(&self) -> u64 {
        self.bit_count() / 8
    }
}

/// The false-positive rate after `n` distinct keys: `(1 − e^(−kn/m))^k`.
pub fn false_positive_rate(params: BloomParams, n: u64) -> f64 {
    let k = f64::from(params.hashes);
    let m = params.bit_count() as f64;
    // 1 − e^(−x) computed as −expm1(−x), exact also for tiny loads.
    let fill = -(-k * n as f64 / m).exp_m1();
    fill.powf(k)
}

/// The design capacity for a target false-positive rate: the `n` at which
/// [`false_positive_rate`] reaches `target_fpr`, solved exactly:
/// `n = −(m/k)·ln(1 − target^(1/k))` (rounded down).
///
/// `target_fpr <= 0` (or NaN) gives 0; `target_fpr >= 1` gives `u64::MAX`.
/// See [`optimal_capacity`] for the `m·ln2/k` reading.
pub fn design_capacity(params: BloomParams, target_fpr: f64) -> u64 {
    if target_fpr.is_nan() || target_fpr <= 0.0 {
        return 0;
    }
    if target_fpr >= 1.0 {
        return u64::MAX;
    }
    let k = f64::from(params.hashes);
    let m = params.bit_count() as f64;
    let per_bit = target_fpr.powf(1.0 / k);
    let n = -(m / k) * (-per_bit).ln_1p();
    // `as` saturates, which is the wanted behaviour for huge values.
    n.floor() as u64
}

/// The load for which `k` is the optimal number of probes: `n* = m·ln2/k` (rounded down).
/// At `n*` half the bits are set and the false-positive rate is `2^−k`.
pub fn optimal_capacity(params: BloomParams) -> u64 {
    let m = params.bit_count() as f64;
    (m * std::f64::consts::LN_2 / f64::from(params.hashes)).floor() as u64
}

/// Errors of the Bloom filter file. Each carries the file path where there is one.
#[derive(Debug, thiserror::Error)]
pub enum BloomError {
    /// An I/O call on the filter file failed (including "already exists" from `create`).
    #[error("Bloom filter {}: {source}", path.display())]
    Io {
        /// The filter file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file does not start with the `LEGBLOOM` magic.
    #[error("{} is not a legcrawl Bloom filter file (bad magic)", path.display())]
    NotABloomFile {
        /// The file.
        path: PathBuf,
    },
    /// The file's format version is not the one this build reads.
    #[error("Bloom filter {}: format version {found} is not supported (this build reads version {})", path.display(), file::FORMAT_VERSION)]
    Version {
        /// The filter file.
        path: PathBuf,
        /// The version found in the header.
        found: u32,
    },
    /// The file length does not match its header (shorter, or longer, than `4096 + m/8`).
    #[error("Bloom filter {}: file is {actual_len} bytes, expected {expected_len} (truncated or damaged)", path.display())]
    Truncated {
        /// The filter file.
        path: PathBuf,
        /// The length the header implies.
        expected_len: u64,
        /// The length found.
        actual_len: u64,
    },
    /// Parameters out of range (see [`BloomParams::validate`]).
    #[error("bad Bloom filter parameters bits={bits} hashes={hashes}: {reason}")]
    BadParams {
        /// The `bits` given.
        bits: u8,
        /// The `hashes` given.
        hashes: u8,
        /// Which rule was broken.
        reason: &'static str,
    },
    /// Disk blocks for the filter could not be reserved (`fallocate`): typically a full
    /// disk. Nothing was left behind by `create`; `open` changed no byte.
    #[error("Bloom filter {}: cannot reserve {bytes} bytes on disk: {source}", path.display())]
    Reserve {
        /// The filter file.
        path: PathBuf,
        /// The file's length.
        bytes: u64,
        /// The underlying error (ENOSPC when the disk is full).
        source: std::io::Error,
    },
    /// The header has the right magic and version but impossible contents.
    #[error("Bloom filter {}: corrupt header: {reason}", path.display())]
    CorruptHeader {
        /// The filter file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}
