//! Every stored value starts with a version byte, and the values written before
//! some records had one are still read.

use crate::fingerprint::fingerprint;
use crate::request::Request;
use crate::store::tests::open;
use crate::store::{Seen, exact, keys};

fn url(n: u32) -> String {
    format!("http://h{}.test/{n}", n % 3)
}

/// Namespaces whose values got their version byte late (2026-12-03).
const LATE: &[(u8, &str)] = &[
    (keys::JOURNAL, "journal"),
    (keys::EXACT_RUN, "exact chunk"),
    (keys::COUNTER, "counter"),
    (keys::HOST, "host name"),
    (keys::HOST_BY_NAME, "host id"),
    (keys::OUTPUT, "output watermark"),
    (keys::CYCLE[0], "cycle start"),
];

#[test]
fn late_versioned_records_carry_their_byte_and_old_ones_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for n in 0..100 {
        assert!(state.enqueue(&Request::get(url(n)), &[]).unwrap());
    }
    state.checkpoint().unwrap();
    for n in 100..150 {
        assert!(state.enqueue(&Request::get(url(n)), &[]).unwrap());
    }
    state.commit().unwrap();
    let watermark = state.output_start("/tmp/out.jsonl").unwrap();
    state.start_cycle(1_700_000_000, &[]).unwrap();
    let counters = state.counter("seen/unique");
    assert_eq!(counters, 150);
    let hosts: Vec<String> = state
        .frontier
        .hosts
        .values()
        .map(|h| h.name.clone())
        .collect();

    // Each late namespace holds values, each with its version byte.
    let mut legacy = Vec::new();
    for &(namespace, what) in LATE {
        let values: Vec<_> = state
            .db
            .tree()
            .scan_prefix([namespace])
            .map(|entry| entry.unwrap())
            .collect();
        assert!(!values.is_empty(), "no {what} written");
        for (key, value) in values {
            assert_eq!(value[0], 1, "{what} {key:?} has no version byte");
            legacy.push((key, value[1..].to_vec()));
        }
    }
    // Written as a state from before the version bytes would have them.
    for (key, value) in legacy {
        state.db.tree().insert(key, value).unwrap();
    }
    state.db.tree().flush().unwrap();
    drop(state);

    let mut state = open(dir.path());
    for n in 0..150 {
        let fp = fingerprint(&Request::get(url(n)), &[]);
        assert_eq!(state.check_seen(&fp).unwrap(), Seen::Duplicate, "{n}");
    }
    assert_eq!(state.counter("seen/unique"), counters);
    let reread: Vec<String> = state
        .frontier
        .hosts
        .values()
        .map(|h| h.name.clone())
        .collect();
    assert_eq!(reread, hosts);
    assert_eq!(state.output_start("/tmp/out.jsonl").unwrap(), watermark);
    state.resume_cycle(&[]).unwrap();
}

/// Exact runs were written in chunks of 4,096 fingerprints before 2026-12-03
/// (now [`exact::CHUNK_FPS`]): such a run is still read, keeps its merge tier,
/// and a merge rewrites it in small chunks.
#[test]
fn exact_runs_in_large_chunks_are_read_and_merged_into_small_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let url = |n: u32| format!("http://a.test/{n}");
    let fp = |n: u32| fingerprint(&Request::get(url(n)), &[]);
    for n in 0..5000 {
        assert!(state.enqueue(&Request::get(url(n)), &[]).unwrap());
    }
    state.checkpoint().unwrap();
    assert_eq!(state.seen.exact.runs.len(), 1);
    let (run, count) = state.seen.exact.runs[0];
    assert_eq!(count, 5000);

    // Rewrite the run as the old layout had it: chunks of 4,096.
    let tree = state.db.tree();
    let prefix = keys::with_u64(keys::EXACT_RUN, run);
    let mut fps = Vec::new();
    for entry in tree.scan_prefix(&prefix) {
        let (key, value) = entry.unwrap();
        let body = exact::chunk_body(&value).unwrap();
        assert!(body.len() / 20 <= exact::CHUNK_FPS);
        fps.extend(
            body.chunks_exact(20)
                .map(|f| <[u8; 20]>::try_from(f).unwrap()),
        );
        tree.remove(key).unwrap();
    }
    assert_eq!(fps.len(), 5000);
    for chunk in fps.chunks(4096) {
        tree.insert(exact::chunk_key(run, &chunk[0]), exact::encode_chunk(chunk))
            .unwrap();
    }
    tree.flush().unwrap();
    drop(state);

    let mut state = open(dir.path());
    let check = |state: &crate::store::State, upto: u32| {
        for n in 0..upto {
            assert_eq!(state.check_seen(&fp(n)).unwrap(), Seen::Duplicate, "{n}");
        }
        for n in 100_000..100_500 {
            assert_ne!(state.check_seen(&fp(n)).unwrap(), Seen::Duplicate, "{n}");
        }
    };
    check(&state, 5000);
    // Three more seals of the same tier: the four runs merge into one.
    for round in 1..4u32 {
        for n in round * 5000..(round + 1) * 5000 {
            assert!(state.enqueue(&Request::get(url(n)), &[]).unwrap());
        }
        state.checkpoint().unwrap();
    }
    assert_eq!(
        state.seen.exact.runs.len(),
        1,
        "{:?}",
        state.seen.exact.runs
    );
    let (merged, count) = state.seen.exact.runs[0];
    assert_eq!(count, 20_000);
    for entry in state
        .db
        .tree()
        .scan_prefix(keys::with_u64(keys::EXACT_RUN, merged))
    {
        let (_, value) = entry.unwrap();
        assert!(exact::chunk_body(&value).unwrap().len() / 20 <= exact::CHUNK_FPS);
    }
    check(&state, 20_000);
    drop(state);
    check(&open(dir.path()), 20_000);
}
