//! Tests of the file-backed filter: persistence, the clean flag, and rejected files.

use std::path::Path;

use super::file::{HEADER_LEN, OFF_BITS, OFF_CLEAN, OFF_ONES, OFF_VERSION};
use super::tests::SplitMix64;
use super::*;

fn small() -> BloomParams {
    BloomParams::new(12, 5).unwrap()
}

fn keys(seed: u64, n: usize) -> Vec<Key> {
    let mut rng = SplitMix64(seed);
    (0..n).map(|_| rng.key()).collect()
}

fn header_ones(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[OFF_ONES..OFF_ONES + 8].try_into().unwrap())
}

/// A flushed, closed filter file holding 200 keys; returns its bytes.
fn make_filter(path: &Path) -> Vec<u8> {
    let mut f = BloomFile::create(path, small()).unwrap();
    for key in keys(1, 200) {
        f.insert(&key);
    }
    f.flush().unwrap();
    drop(f);
    std::fs::read(path).unwrap()
}

#[test]
fn create_layout_and_reserved_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seen.bloom");
    let f = BloomFile::create(&path, BloomParams::default()).unwrap();
    assert_eq!(f.params(), BloomParams::default());
    assert_eq!(f.ones(), 0);
    assert_eq!(f.path(), path);
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), 4096 + (1u64 << 27));
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        assert!(
            meta.blocks() * 512 >= meta.len(),
            "blocks reserved, not sparse"
        );
    }
    drop(f);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..8], b"LEGBLOOM");
    assert_eq!(&bytes[OFF_VERSION..OFF_VERSION + 4], &2u32.to_le_bytes());
    assert_eq!(bytes[OFF_BITS], 30);
    assert_eq!(bytes[OFF_BITS + 1], 6);
    assert_eq!(bytes[OFF_CLEAN], 1, "an untouched filter is clean");
}

#[test]
fn persistence_after_flush_and_a_recount_on_every_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let ks = keys(3, 500);
    let ones;
    {
        let mut f = BloomFile::create(&path, small()).unwrap();
        for key in &ks {
            f.insert(key);
        }
        ones = f.ones();
        f.flush().unwrap();
    }
    let f = BloomFile::open(&path).unwrap();
    assert!(!f.opened_dirty());
    assert_eq!(f.params(), small());
    assert_eq!(f.ones(), ones);
    assert!(ks.iter().all(|k| f.contains(k)));
    assert_eq!(f.lost_bits(), None);
    drop(f);
    // The bits are recounted on every open: a header counting more ones than the
    // bits hold (bits lost since the last flush) is reported, not believed.
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes[OFF_CLEAN], 1, "reading does not dirty the file");
    bytes[OFF_ONES..OFF_ONES + 8].copy_from_slice(&(ones + 1).to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let f = BloomFile::open(&path).unwrap();
    assert_eq!(f.ones(), ones);
    assert_eq!(f.lost_bits(), Some((ones + 1, ones)));
    drop(f);
    // A zeroed body after the header: every bit lost.
    bytes[HEADER_LEN..].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        BloomFile::open(&path).unwrap().lost_bits(),
        Some((ones + 1, 0))
    );
}

#[test]
fn drop_without_flush_recounts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let first = keys(4, 300);
    let second = keys(5, 300);
    let ones;
    {
        let mut f = BloomFile::create(&path, small()).unwrap();
        for key in &first {
            f.insert(key);
        }
        f.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap()[OFF_CLEAN], 1);
        for key in &second {
            f.insert(key);
        }
        // The first bit change after a flush cleared the flag on disk.
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes[OFF_CLEAN], 0);
        assert!(header_ones(&bytes) < f.ones(), "header count is stale");
        ones = f.ones();
    } // dropped without flush, as after a crash
    let f = BloomFile::open(&path).unwrap();
    assert!(f.opened_dirty());
    assert_eq!(f.ones(), ones);
    assert!(first.iter().chain(&second).all(|k| f.contains(k)));
}

#[test]
fn dirty_flag_with_wrong_count_is_recounted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let mut bytes = make_filter(&path);
    let ones = header_ones(&bytes);
    bytes[OFF_CLEAN] = 0;
    bytes[OFF_ONES..OFF_ONES + 8].copy_from_slice(&999_999u64.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let mut f = BloomFile::open(&path).unwrap();
    assert!(f.opened_dirty());
    assert_eq!(f.ones(), ones);
    f.flush().unwrap();
    drop(f);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!((bytes[OFF_CLEAN], header_ones(&bytes)), (1, ones));
}

#[test]
fn not_a_bloom_file_is_rejected_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [
        ("empty", Vec::new()),
        ("short", b"LEG".to_vec()),
        ("text", b"hello world, this is not a filter".repeat(200)),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &content).unwrap();
        match BloomFile::open(&path) {
            Err(BloomError::NotABloomFile { path: p }) => assert_eq!(p, path),
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), content, "{name}");
    }
    let missing = dir.path().join("missing");
    match BloomFile::open(&missing) {
        Err(BloomError::Io { path, source }) => {
            assert_eq!(path, missing);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn wrong_version_is_rejected_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let mut bytes = make_filter(&path);
    bytes[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    match BloomFile::open(&path) {
        Err(e @ BloomError::Version { found: 99, .. }) => {
            assert!(e.to_string().contains("version 99"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn wrong_length_is_rejected_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let bytes = make_filter(&path);
    let full = bytes.len() as u64;
    for len in [full - 1, full + 4096, HEADER_LEN as u64, 100] {
        let cut = if len <= full {
            bytes[..len as usize].to_vec()
        } else {
            let mut longer = bytes.clone();
            longer.resize(len as usize, 0);
            longer
        };
        std::fs::write(&path, &cut).unwrap();
        match BloomFile::open(&path) {
            Err(BloomError::Truncated {
                expected_len,
                actual_len,
                ..
            }) => {
                assert_eq!(actual_len, len);
                let want = if len < HEADER_LEN as u64 {
                    HEADER_LEN as u64
                } else {
                    full
                };
                assert_eq!(expected_len, want);
            }
            other => panic!("len {len}: {other:?}"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), cut);
    }
}

#[test]
fn corrupt_header_is_rejected_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let good = make_filter(&path);
    let mut bad_flag = good.clone();
    bad_flag[OFF_CLEAN] = 7;
    let mut bad_bits = good.clone();
    bad_bits[OFF_BITS] = 99;
    let mut bad_ones = good.clone();
    bad_ones[OFF_ONES..OFF_ONES + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    for bytes in [bad_flag, bad_bits, bad_ones] {
        std::fs::write(&path, &bytes).unwrap();
        assert!(
            matches!(
                BloomFile::open(&path),
                Err(BloomError::CorruptHeader { .. })
            ),
            "{:?}",
            BloomFile::open(&path)
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }
}

#[test]
fn create_refuses_existing_file_and_bad_params() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"precious").unwrap();
    match BloomFile::create(&path, small()) {
        Err(BloomError::Io { path: p, source }) => {
            assert_eq!(p, path);
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");

    let bloom = dir.path().join("g");
    let bytes = make_filter(&bloom);
    assert!(BloomFile::create(&bloom, small()).is_err());
    assert_eq!(std::fs::read(&bloom).unwrap(), bytes);

    let fresh = dir.path().join("h");
    for params in [
        BloomParams { bits: 9, hashes: 6 },
        BloomParams {
            bits: 37,
            hashes: 6,
        },
        BloomParams {
            bits: 20,
            hashes: 0,
        },
        BloomParams {
            bits: 20,
            hashes: 33,
        },
    ] {
        assert!(matches!(
            BloomFile::create(&fresh, params),
            Err(BloomError::BadParams { .. })
        ));
        assert!(!fresh.exists(), "nothing created for {params:?}");
    }
}

#[test]
fn file_and_memory_filters_agree() {
    let dir = tempfile::tempdir().unwrap();
    let p = BloomParams::new(14, 6).unwrap();
    let mut file = BloomFile::create(&dir.path().join("f"), p).unwrap();
    let mut mem = BloomMem::new(p).unwrap();
    let mut rng = SplitMix64(9);
    for _ in 0..4000 {
        let key = rng.key();
        assert_eq!(file.contains(&key), mem.contains(&key));
        assert_eq!(file.insert(&key), mem.insert(&key));
    }
    assert_eq!(file.ones(), mem.ones());
    assert_eq!(file.fill_ratio(), mem.fill_ratio());
    assert_eq!(file.fpr_estimate(), mem.fpr_estimate());
    file.prefault().unwrap();
    file.flush().unwrap();
}
