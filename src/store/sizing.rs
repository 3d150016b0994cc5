//! The Bloom filter sized to its crawl.
//!
//! A state in `exact` mode created without `--bloom-bits` starts with a small
//! filter (2^[`START_BITS`] bits, 128 KiB) and grows it: when a checkpoint is
//! due and the filter's estimated false-positive rate has passed
//! [`TARGET_FPR`], a filter big enough for [`HEADROOM`] times the exact set's
//! size at that rate is built from the exact set and switched in, crash-safe
//! (see `repair::rebuild_bloom`, crash points `bloom.grow` and
//! `bloom.grow.switch`). The file's own header says its size; the metadata
//! record says only that the state is sized ([`Shape::Sized`]), so no second
//! record has to be kept in step with the file. In `bloom` mode the bits are
//! the only record of what was seen, so the filter keeps the size it was
//! created with, as does one whose size `--bloom-bits` fixed
//! ([`Shape::Fixed`]).
//!
//! Depends on `repair`'s rebuild, `panics`, `records` (the metadata record),
//! `options`, `error` and [`crate::bloom`].

use super::error::StoreError;
use super::options::DedupMode;
use super::records::Meta;
use super::{State, panics, repair};
use crate::bloom::{BloomParams, MIN_BITS, design_capacity};

/// A sized filter's first size, log2 of bits (2^20 bits: 128 KiB).
pub const START_BITS: u8 = 20;
/// A sized filter grows to at most this size (2^32 bits: 512 MiB); past it,
/// the exact set answers the false positives.
pub const MAX_SIZED_BITS: u8 = 32;
/// A sized filter grows when its estimated false-positive rate passes this.
pub const TARGET_FPR: f64 = 0.01;
/// A grown filter holds this many times the fingerprints it was built with at
/// [`TARGET_FPR`], so that it grows again only after the crawl has doubled twice.
pub const HEADROOM: u64 = 4;
/// Overrides [`START_BITS`] for states created while it is set (tests use it
/// to make a small crawl grow its filter).
pub const START_BITS_ENV: &str = "LEGCRAWL_BLOOM_START_BITS";

/// The shape `bloom.bin` must have, from the metadata record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Exactly these parameters (`--bloom-bits` given, or `bloom` mode).
    Fixed(BloomParams),
    /// Any size, with this many probes (see the module doc).
    Sized {
        /// Probes per key.
        hashes: u8,
    },
}

impl Shape {
    /// The shape the metadata record describes.
    pub fn of(meta: &Meta) -> Shape {
        match meta.bloom_sized {
            true => Shape::Sized {
                hashes: meta.bloom_hashes,
            },
            false => Shape::Fixed(BloomParams {
                bits: meta.bloom_bits,
                hashes: meta.bloom_hashes,
            }),
        }
    }

    /// Why a filter of `have` does not fit this shape; `None` when it does.
    pub fn misfit(&self, have: BloomParams) -> Option<String> {
        match *self {
            Shape::Fixed(params) if have != params => Some(format!(
                "it has bits={} hashes={}, the metadata says bits={} hashes={}",
                have.bits, have.hashes, params.bits, params.hashes
            )),
            Shape::Sized { hashes } if have.hashes != hashes => Some(format!(
                "it has hashes={}, the metadata says hashes={hashes}",
                have.hashes
            )),
            _ => None,
        }
    }

    /// The parameters of a filter built to hold `count` fingerprints.
    pub fn params_for(&self, count: u64) -> BloomParams {
        match *self {
            Shape::Fixed(params) => params,
            Shape::Sized { hashes } => BloomParams {
                bits: bits_for(hashes, count),
                hashes,
            },
        }
    }
}

/// The first size of a new sized filter: [`START_BITS`], or the valid value
/// of [`START_BITS_ENV`].
pub fn start_bits() -> u8 {
    std::env::var(START_BITS_ENV)
        .ok()
        .and_then(|v| v.parse::<u8>().ok())
        .filter(|bits| (MIN_BITS..=MAX_SIZED_BITS).contains(bits))
        .unwrap_or(START_BITS)
}

/// The smallest size (log2 of bits, from [`start_bits`] up to
/// [`MAX_SIZED_BITS`]) whose design capacity at [`TARGET_FPR`] is
/// [`HEADROOM`] times `count`.
pub fn bits_for(hashes: u8, count: u64) -> u8 {
    let want = count.saturating_mul(HEADROOM);
    (start_bits()..=MAX_SIZED_BITS)
        .find(|&bits| design_capacity(BloomParams { bits, hashes }, TARGET_FPR) >= want)
        .unwrap_or(MAX_SIZED_BITS)
}

impl State {
    /// Grows a sized filter whose estimated false-positive rate has passed
    /// [`TARGET_FPR`] (see the module doc). Runs on the crawl's thread while
    /// no checkpoint runs, so the exact set on disk (its listed runs and the
    /// journal) holds every durable fingerprint, and none is set in the bits
    /// meanwhile; the open and sealed groups' fingerprints stay in their
    /// overlays and reach the new filter when they are durable.
    pub(super) fn grow_bloom(&mut self) -> Result<(), StoreError> {
        let seen = &self.seen;
        let have = seen.bloom.params();
        if seen.dedup != DedupMode::Exact
            || seen.checkpointing
            || !matches!(Shape::of(&self.meta), Shape::Sized { .. })
            || have.bits >= MAX_SIZED_BITS
            || seen.bloom.fpr_estimate() <= TARGET_FPR
        {
            return Ok(());
        }
        let count = seen.exact.runs.total() + seen.exact.recent.len() as u64;
        let params = Shape::of(&self.meta).params_for(count);
        if params.bits <= have.bits {
            return Ok(());
        }
        let dir = self.dir().to_owned();
        let points = repair::RebuildPoints::Grow;
        let (bloom, fps) = panics::guard(&dir.join("db"), || {
            repair::rebuild_bloom(params, &self.db, points)
        })?;
        tracing::debug!(
            dir = %dir.display(),
            from = have.bits,
            to = params.bits,
            fingerprints = fps,
            "grew the Bloom filter"
        );
        self.seen.bloom = bloom;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_crawl_keeps_the_start_size_and_a_large_one_gets_headroom() {
        assert_eq!(bits_for(6, 0), START_BITS);
        assert_eq!(bits_for(6, 100), START_BITS);
        let bits = bits_for(6, 1_000_000);
        let params = BloomParams { bits, hashes: 6 };
        assert!(design_capacity(params, TARGET_FPR) >= 4_000_000);
        let smaller = BloomParams {
            bits: bits - 1,
            hashes: 6,
        };
        assert!(design_capacity(smaller, TARGET_FPR) < 4_000_000);
        assert_eq!(bits_for(6, u64::MAX / 2), MAX_SIZED_BITS);
    }

    #[test]
    fn a_sized_shape_accepts_any_size_with_its_probes() {
        let sized = Shape::Sized { hashes: 6 };
        assert_eq!(
            sized.misfit(BloomParams {
                bits: 24,
                hashes: 6
            }),
            None
        );
        assert!(
            sized
                .misfit(BloomParams {
                    bits: 24,
                    hashes: 5
                })
                .is_some()
        );
        let fixed = Shape::Fixed(BloomParams {
            bits: 20,
            hashes: 6,
        });
        assert!(
            fixed
                .misfit(BloomParams {
                    bits: 24,
                    hashes: 6
                })
                .is_some()
        );
        assert_eq!(fixed.params_for(1 << 40).bits, 20);
    }
}
