//! Tests of the math and of the in-memory filter.

use proptest::prelude::*;

use super::filter::popcount;
use super::*;

/// splitmix64: a tiny fixed-seed PRNG, enough to make uniform test fingerprints.
pub(super) struct SplitMix64(pub(super) u64);

impl SplitMix64 {
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(super) fn key(&mut self) -> Key {
        let mut key = [0u8; 20];
        key[0..8].copy_from_slice(&self.next_u64().to_le_bytes());
        key[8..16].copy_from_slice(&self.next_u64().to_le_bytes());
        key[16..20].copy_from_slice(&self.next_u64().to_le_bytes()[..4]);
        key
    }
}

fn params(bits: u8, hashes: u8) -> BloomParams {
    BloomParams::new(bits, hashes).unwrap()
}

#[test]
fn params_validation() {
    assert_eq!(
        BloomParams::default(),
        BloomParams {
            bits: 30,
            hashes: 6
        }
    );
    BloomParams::default().validate().unwrap();
    for (bits, hashes) in [(10, 1), (36, 32), (20, 6)] {
        assert!(BloomParams::new(bits, hashes).is_ok(), "{bits} {hashes}");
    }
    for (bits, hashes) in [(9, 6), (37, 6), (0, 6), (20, 0), (20, 33), (255, 255)] {
        match BloomParams::new(bits, hashes) {
            Err(BloomError::BadParams {
                bits: b, hashes: h, ..
            }) => {
                assert_eq!((b, h), (bits, hashes));
            }
            other => panic!("{bits} {hashes}: {other:?}"),
        }
    }
    assert!(matches!(
        BloomMem::new(BloomParams { bits: 5, hashes: 6 }),
        Err(BloomError::BadParams { .. })
    ));
}

#[test]
fn formula_values() {
    let p = BloomParams::default();
    assert_eq!(false_positive_rate(p, 0), 0.0);
    // Documented figures: 100 M keys ≈ 0.62 %, 1 % at ≈ 111.7 M keys, n* ≈ 124 M at 2^-6.
    let at_100m = false_positive_rate(p, 100_000_000);
    assert!((at_100m - 0.0062).abs() < 0.0002, "{at_100m}");
    let cap = design_capacity(p, 0.01);
    assert!((111_000_000..112_500_000).contains(&cap), "{cap}");
    let fpr_at_cap = false_positive_rate(p, cap);
    assert!((fpr_at_cap - 0.01).abs() < 1e-6, "{fpr_at_cap}");
    let opt = optimal_capacity(p);
    assert!((124_000_000..124_200_000).contains(&opt), "{opt}");
    let fpr_at_opt = false_positive_rate(p, opt);
    assert!((fpr_at_opt - 1.0 / 64.0).abs() < 1e-6, "{fpr_at_opt}");
    assert_eq!(design_capacity(p, 0.0), 0);
    assert_eq!(design_capacity(p, f64::NAN), 0);
    assert_eq!(design_capacity(p, 1.0), u64::MAX);
}

#[test]
fn insert_reports_new_bits_and_counts_ones() {
    let mut f = BloomMem::new(params(12, 4)).unwrap();
    let key = SplitMix64(1).key();
    assert!(!f.contains(&key));
    assert!(f.insert(&key));
    assert!(f.contains(&key));
    let ones = f.ones();
    assert!((1..=4).contains(&ones));
    assert!(!f.insert(&key), "second insert sets nothing");
    assert_eq!(f.ones(), ones);
}

#[test]
fn ones_count_matches_popcount() {
    let mut f = BloomMem::new(params(14, 7)).unwrap();
    let mut rng = SplitMix64(7);
    for _ in 0..3000 {
        f.insert(&rng.key());
    }
    assert_eq!(f.ones(), popcount(f.inner_bits()));
}

#[test]
fn popcount_words_and_remainder() {
    assert_eq!(popcount(&[]), 0);
    assert_eq!(popcount(&[0xFF; 8]), 64);
    assert_eq!(popcount(&[0x01; 11]), 11);
    assert_eq!(popcount(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0x03]), 3);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_false_negatives(keys in prop::collection::vec(prop::array::uniform20(any::<u8>()), 0..400),
                          bits in 10u8..14, hashes in 1u8..10) {
        let mut f = BloomMem::new(params(bits, hashes)).unwrap();
        for key in &keys {
            f.insert(key);
        }
        for key in &keys {
            prop_assert!(f.contains(key));
            prop_assert!(!f.insert(key));
        }
    }
}

#[test]
fn measured_fpr_matches_formula_at_half_design_capacity() {
    let p = params(20, 6);
    let n = optimal_capacity(p) / 2;
    let mut f = BloomMem::new(p).unwrap();
    let mut rng = SplitMix64(0x5EED);
    for _ in 0..n {
        f.insert(&rng.key());
    }
    // Fresh keys from a disjoint stream (different seed; a 160-bit collision is impossible).
    let queries = 1_000_000u32;
    let mut fresh = SplitMix64(0xF00D_F00D);
    let hits = (0..queries).filter(|_| f.contains(&fresh.key())).count();
    let measured = hits as f64 / f64::from(queries);
    let expected = false_positive_rate(p, n);
    let rel = (measured - expected).abs() / expected;
    eprintln!("n={n} measured FPR {measured:.6} ({hits} hits) formula {expected:.6}");
    assert!(
        rel < 0.20,
        "measured {measured} expected {expected} ({hits} hits)"
    );
}

#[test]
fn fill_ratio_and_estimates_agree_with_formula() {
    let p = params(16, 4);
    let m = p.bit_count() as f64;
    let mut f = BloomMem::new(p).unwrap();
    let mut rng = SplitMix64(42);
    let mut inserted = 0u64;
    for checkpoint in [1000u64, 5000, 20000] {
        while inserted < checkpoint {
            f.insert(&rng.key());
            inserted += 1;
        }
        let k = f64::from(p.hashes);
        let expected_fill = 1.0 - (1.0 - 1.0 / m).powf(k * inserted as f64);
        let fill = f.fill_ratio();
        assert!(
            (fill - expected_fill).abs() / expected_fill < 0.03,
            "n={inserted} fill {fill} expected {expected_fill}"
        );
        let fpr = f.fpr_estimate();
        let formula = false_positive_rate(p, inserted);
        assert!(
            (fpr - formula).abs() / formula < 0.15,
            "n={inserted} fpr {fpr} formula {formula}"
        );
        let est = f.estimated_count();
        assert!(
            (est - inserted as f64).abs() / (inserted as f64) < 0.05,
            "n={inserted} estimated {est}"
        );
    }
}
