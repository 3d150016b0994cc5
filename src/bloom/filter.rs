//! The filter proper, generic over its byte storage: probe math, `contains`, `insert`, the exact
//! ones count and the fill-ratio statistics. [`BloomMem`] is this over a boxed slice;
//! `BloomFile` is this over a memory map. No I/O here.
//!
//! Invariant: `storage.bits().len() == params.byte_len()` exactly, so every masked index is in
//! range and the bit accesses below can never panic.

use bitvec::prelude::{BitSlice, Lsb0};

use super::{BloomError, BloomParams, Key};

/// Byte storage of a filter's bits (exactly `m/8` bytes).
pub(crate) trait BitStorage {
    /// The bit region.
    fn bits(&self) -> &[u8];
    /// The bit region, writable.
    fn bits_mut(&mut self) -> &mut [u8];
}

impl BitStorage for Box<[u8]> {
    fn bits(&self) -> &[u8] {
        self
    }
    fn bits_mut(&mut self) -> &mut [u8] {
        self
    }
}

/// Bits in one block: a 4 KiB page. All probes of a key stay in one block, so a
/// key touches one page of a memory-mapped filter instead of `k`.
pub(crate) const BLOCK_BITS_LOG2: u8 = 15;

/// The probe sequence of one key (enhanced double hashing within the key's block,
/// see the module doc of `bloom`).
struct Probes {
    /// Current position, `h1 + i·h2 + (i³ − i)/6` before masking.
    x: u64,
    /// Current step, `h2 + i(i+1)/2`.
    y: u64,
    /// Probes produced so far.
    i: u64,
    /// Probes to produce (`k`).
    k: u64,
    /// Block size − 1 (the block is the whole filter when `m` is smaller).
    mask: u64,
    /// First bit of the key's block.
    base: u64,
}

impl Probes {
    #[inline]
    fn new(key: &Key, params: BloomParams) -> Probes {
        let mut h1 = [0u8; 8];
        let mut h2 = [0u8; 8];
        let mut h3 = [0u8; 4];
        h1.copy_from_slice(&key[0..8]);
        h2.copy_from_slice(&key[8..16]);
        h3.copy_from_slice(&key[16..20]);
        let block_log2 = params.bits.min(BLOCK_BITS_LOG2);
        let blocks = 1u64 << (params.bits - block_log2);
        let block = u64::from(u32::from_le_bytes(h3)) & (blocks - 1);
        Probes {
            x: u64::from_le_bytes(h1),
            y: u64::from_le_bytes(h2) | 1,
            i: 0,
            k: u64::from(params.hashes),
            mask: (1u64 << block_log2) - 1,
            base: block << block_log2,
        }
    }
}

impl Iterator for Probes {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.i == self.k {
            return None;
        }
        // Lossless: validated parameters make every index fit in usize.
        let index = (self.base | (self.x & self.mask)) as usize;
        self.i += 1;
        self.x = self.x.wrapping_add(self.y);
        self.y = self.y.wrapping_add(self.i);
        Some(index)
    }
}

/// A Bloom filter over any [`BitStorage`], with its exact ones count.
pub(crate) struct Filter<S> {
    /// The bits.
    pub(crate) storage: S,
    /// Sizing and hashing.
    params: BloomParams,
    /// Number of bits set; every 0→1 transition of `insert` adds one.
    ones: u64,
}

impl<S: BitStorage> Filter<S> {
    /// Wraps storage of exactly `params.byte_len()` bytes holding `ones` set bits.
    pub(crate) fn new(storage: S, params: BloomParams, ones: u64) -> Filter<S> {
        debug_assert_eq!(storage.bits().len() as u64, params.byte_len());
        Filter {
            storage,
            params,
            ones,
        }
    }

    pub(crate) fn params(&self) -> BloomParams {
        self.params
    }

    #[inline]
    pub(crate) fn contains(&self, key: &Key) -> bool {
        let bits = BitSlice::<u8, Lsb0>::from_slice(self.storage.bits());
        Probes::new(key, self.params).all(|index| bits[index])
    }

    /// Reads the bytes of every key's probes and returns nothing useful: the loads
    /// are independent, so the CPU overlaps their cache (and TLB) misses, and the
    /// `contains`/`insert` that follow find the lines cached. On a mapped filter far
    /// larger than the cache a probe costs a miss, and one key at a time pays them
    /// one after another.
    #[inline]
    pub(crate) fn warm(&self, keys: &[Key]) {
        let bytes = self.storage.bits();
        let mut any = 0u8;
        for key in keys {
            for index in Probes::new(key, self.params) {
                // In range by the storage invariant; `get` keeps it panic-free anyway.
                any |= bytes.get(index / 8).copied().unwrap_or(0);
            }
        }
        std::hint::black_box(any);
    }

    /// Sets the key's bits; true if any of them was newly set.
    #[inline]
    pub(crate) fn insert(&mut self, key: &Key) -> bool {
        let bits = BitSlice::<u8, Lsb0>::from_slice_mut(self.storage.bits_mut());
        let mut newly_set = 0u64;
        for index in Probes::new(key, self.params) {
            if !bits.replace(index, true) {
                newly_set += 1;
            }
        }
        self.ones += newly_set;
        newly_set > 0
    }

    pub(crate) fn ones(&self) -> u64 {
        self.ones
    }

    /// Recounts the set bits from the storage (popcount over u64 words) and keeps the result.
    pub(crate) fn recount(&mut self) -> u64 {
        self.ones = popcount(self.storage.bits());
        self.ones
    }

    pub(crate) fn fill_ratio(&self) -> f64 {
        self.ones as f64 / self.params.bit_count() as f64
    }

    pub(crate) fn fpr_estimate(&self) -> f64 {
        self.fill_ratio().powi(i32::from(self.params.hashes))
    }

    pub(crate) fn estimated_count(&self) -> f64 {
        let m = self.params.bit_count() as f64;
        let k = f64::from(self.params.hashes);
        -(m / k) * (-self.fill_ratio()).ln_1p()
    }
}

/// Number of set bits in `bytes`, counted over u64 words.
pub(crate) fn popcount(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut total = 0u64;
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        total += u64::from(u64::from_ne_bytes(word).count_ones());
    }
    for byte in words.remainder() {
        total += u64::from(byte.count_ones());
    }
    total
}

/// The Bloom filter over plain memory: the same code as `BloomFile`, without a file.
pub struct BloomMem {
    /// The shared implementation over a zeroed heap buffer.
    inner: Filter<Box<[u8]>>,
}

impl BloomMem {
    /// An empty filter (`m/8` zeroed bytes; allocation of the default is 128 MiB).
    pub fn new(params: BloomParams) -> Result<BloomMem, BloomError> {
        params.validate()?;
        // Lossless: validate() checked that m fits in usize.
        let storage = vec![0u8; params.byte_len() as usize].into_boxed_slice();
        Ok(BloomMem {
            inner: Filter::new(storage, params, 0),
        })
    }

    /// The filter's parameters.
    pub fn params(&self) -> BloomParams {
        self.inner.params()
    }

    /// True if the key may have been inserted (false positives possible, no false negatives).
    pub fn contains(&self, key: &Key) -> bool {
        self.inner.contains(key)
    }

    /// Inserts the key; true if any bit was newly set ("was not present").
    pub fn insert(&mut self, key: &Key) -> bool {
        self.inner.insert(key)
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

    /// The raw bit region (tests only).
    #[cfg(test)]
    pub(crate) fn inner_bits(&self) -> &[u8] {
        self.inner.storage.bits()
    }
}

impl std::fmt::Debug for BloomMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomMem")
            .field("params", &self.params())
            .field("ones", &self.ones())
            .finish()
    }
}
