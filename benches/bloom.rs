//! The seen-set dedup step (`if !contains { insert }`) on a 2^30-bit filter, memory-mapped
//! (`BloomFile` in a temp dir) versus in memory (`BloomMem`), plus the cost of opening a dirty
//! filter (recount) and of first touching a fresh sparse file.
//!
//! Run: `cargo bench --bench bloom -- --warm-up-time 2 --measurement-time 5`.
//! Targets: mapped within 2× of in-memory; ≥ 1M check-and-insert/s on one core.

use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use legcrawl::bloom::{BloomFile, BloomMem, BloomParams, Key};

/// Pre-generated keys, cycled through by the "cycling" benches.
const KEY_COUNT: usize = 1 << 20;
/// Keys per timed iteration.
const BATCH: usize = 4096;
/// Offset of the clean flag in the documented header layout.
const OFF_CLEAN: u64 = 24;

/// splitmix64, the fixed-seed generator of uniform fingerprints.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn key(&mut self) -> Key {
        let mut key = [0u8; 20];
        key[0..8].copy_from_slice(&self.next_u64().to_le_bytes());
        key[8..16].copy_from_slice(&self.next_u64().to_le_bytes());
        key[16..20].copy_from_slice(&self.next_u64().to_le_bytes()[..4]);
        key
    }
}

/// The two filters behind one interface, for the bench loops only.
trait Dedup {
    fn contains(&self, key: &Key) -> bool;
    fn insert(&mut self, key: &Key) -> bool;
}

impl Dedup for BloomFile {
    fn contains(&self, key: &Key) -> bool {
        BloomFile::contains(self, key)
    }
    fn insert(&mut self, key: &Key) -> bool {
        BloomFile::insert(self, key)
    }
}

impl Dedup for BloomMem {
    fn contains(&self, key: &Key) -> bool {
        BloomMem::contains(self, key)
    }
    fn insert(&mut self, key: &Key) -> bool {
        BloomMem::insert(self, key)
    }
}

/// The dedup step; returns how many keys were new.
#[inline]
fn check_and_insert<F: Dedup>(filter: &mut F, key: &Key) -> bool {
    if filter.contains(key) {
        false
    } else {
        filter.insert(key);
        true
    }
}

fn pregenerated() -> Vec<Key> {
    let mut rng = SplitMix64(0xB100);
    (0..KEY_COUNT).map(|_| rng.key()).collect()
}

fn new_file(dir: &Path, name: &str) -> BloomFile {
    BloomFile::create(&dir.join(name), BloomParams::default()).expect("create bloom file")
}

fn new_mem() -> BloomMem {
    BloomMem::new(BloomParams::default()).expect("allocate bloom")
}

/// 1M pre-generated keys, cycling: the first pass inserts, later passes are all "seen".
fn bench_cycling(c: &mut Criterion) {
    let keys = pregenerated();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("dedup_cycling_1M_keys_2^30_bits");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut run = |name: &str, filter: &mut dyn FnMut(&Key) -> bool| {
        let mut next = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut new = 0u32;
                for _ in 0..BATCH {
                    new += u32::from(filter(&keys[next]));
                    next = (next + 1) % KEY_COUNT;
                }
                black_box(new)
            })
        });
    };
    let mut mem = new_mem();
    run("mem", &mut |k| check_and_insert(&mut mem, k));
    drop(mem);
    let mut file = new_file(dir.path(), "cycling");
    run("mmap", &mut |k| check_and_insert(&mut file, k));
    group.finish();
}

/// Keys generated inline (always new): every step is a first-probe miss plus k bit writes.
fn bench_fresh(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("dedup_fresh_keys_2^30_bits");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut run = |name: &str, filter: &mut dyn FnMut(&Key) -> bool| {
        let mut rng = SplitMix64(0xF2E5);
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut new = 0u32;
                for _ in 0..BATCH {
                    new += u32::from(filter(&rng.key()));
                }
                black_box(new)
            })
        });
    };
    let mut mem = new_mem();
    run("mem", &mut |k| check_and_insert(&mut mem, k));
    drop(mem);
    let mut file = new_file(dir.path(), "fresh");
    run("mmap", &mut |k| check_and_insert(&mut file, k));
    group.finish();
}

/// 1M fresh keys into a just-created filter: includes every first-touch page fault.
fn bench_first_touch(c: &mut Criterion) {
    let keys = pregenerated();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("first_1M_into_new_2^30_bits");
    group.sample_size(10);
    group.throughput(Throughput::Elements(KEY_COUNT as u64));
    group.bench_function("mem", |b| {
        b.iter_batched(
            new_mem,
            |mut f| {
                keys.iter().for_each(|k| {
                    check_and_insert(&mut f, k);
                });
                f
            },
            BatchSize::PerIteration,
        )
    });
    let mut serial = 0u32;
    let mut fresh_file = |prefault: bool| {
        serial += 1;
        let f = new_file(dir.path(), &format!("touch{serial}"));
        std::fs::remove_file(f.path()).expect("unlink");
        if prefault {
            f.prefault().expect("prefault");
        }
        f
    };
    for (name, prefault) in [("mmap", false), ("mmap_prefaulted", true)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || fresh_file(prefault),
                |mut f| {
                    keys.iter().for_each(|k| {
                        check_and_insert(&mut f, k);
                    });
                    f
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// Creating a 2^30-bit file: sparse (instant) versus sparse plus `prefault` (allocates and
/// maps all 128 MiB, the cost that `mmap_prefaulted` above leaves out).
fn bench_create(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("create_2^30_bits");
    group.sample_size(10);
    let mut serial = 0u32;
    for (name, prefault) in [("sparse", false), ("sparse_then_prefault", true)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                serial += 1;
                let f = new_file(dir.path(), &format!("create{serial}"));
                if prefault {
                    f.prefault().expect("prefault");
                }
                std::fs::remove_file(f.path()).expect("unlink");
                f
            })
        });
    }
    group.finish();
}

/// Opening a filter whose clean flag is 0 (popcount of 2^30 bits, file in the page cache)
/// versus a clean one (header only).
fn bench_open(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("open");
    {
        let mut f = new_file(dir.path(), "open");
        let mut rng = SplitMix64(0x0BE);
        let started = Instant::now();
        while f.ones() < 1 << 24 && started.elapsed() < Duration::from_secs(30) {
            check_and_insert(&mut f, &rng.key());
        }
        f.flush().expect("flush");
    }
    let raw = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open raw");
    let mut group = c.benchmark_group("open_2^30_bits");
    group.sample_size(10);
    for (name, flag) in [("clean", 1u8), ("dirty_recount", 0u8)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                raw.write_at(&[flag], OFF_CLEAN).expect("patch flag");
                let f = BloomFile::open(&path).expect("open");
                assert_eq!(f.opened_dirty(), flag == 0);
                black_box(f.ones())
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    bench_cycling,
    bench_fresh,
    bench_first_touch,
    bench_create,
    bench_open
);
criterion_main!(benches);
