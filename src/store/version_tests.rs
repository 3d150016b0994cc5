//! Every stored value starts with a version byte, and a value without one
//! (as states before 2026-12-03 wrote some) is damage, not another form.

use crate::fingerprint::fingerprint;
use crate::request::Request;
use crate::store::tests::open;
use crate::store::{Seen, State, exact, keys, runfile};

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
    (keys::CYCLE[0], "cycle start"),
];

/// Rewrites the state's exact runs as states written before run files kept
/// them: sorted chunks of at most `chunk` fingerprints in sled, listed by an
/// index record of version 1, the files gone. The caller reopens the state.
fn move_runs_into_sled(state: &mut State, dir: &std::path::Path, chunk: usize) {
    let tree = state.db.tree().clone();
    let mut index = vec![1u8];
    for &(run, count) in &state.seen.exact.runs {
        let path = runfile::path(dir, run);
        let bytes = std::fs::read(&path).unwrap();
        let fps: Vec<[u8; 20]> = bytes[32..]
            .chunks_exact(20)
            .map(|f| <[u8; 20]>::try_from(f).unwrap())
            .collect();
        assert_eq!(fps.len() as u64, count);
        for part in fps.chunks(chunk) {
            tree.insert(exact::chunk_key(run, &part[0]), exact::encode_chunk(part))
                .unwrap();
        }
        std::fs::remove_file(&path).unwrap();
        index.extend_from_slice(&run.to_be_bytes());
        index.extend_from_slice(&count.to_be_bytes());
    }
    tree.insert(keys::EXACT_INDEX, index).unwrap();
    tree.flush().unwrap();
    state.seen.exact.files.clear();
}

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
    move_runs_into_sled(&mut state, dir.path(), exact::CHUNK_FPS);
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
    // Read back as they are.
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
    state.resume_cycle(&[]).unwrap();
    // Without its version byte, a journal entry or a host name is damage
    // that the open names (states written before the bytes are not read).
    for (namespace, what) in [(keys::JOURNAL, "journal"), (keys::HOST, "host index")] {
        let (key, value) = state
            .db
            .tree()
            .scan_prefix([namespace])
            .next()
            .unwrap()
            .unwrap();
        state.db.tree().insert(&key, &value[1..]).unwrap();
        state.db.tree().flush().unwrap();
        drop(state);
        let error = crate::store::State::open(dir.path(), &crate::store::OpenOptions::default())
            .err()
            .unwrap_or_else(|| panic!("{what}: opened without its version byte"));
        assert!(error.to_string().contains(what), "{what}: {error}");
        let reopened = sled::open(dir.path().join("db")).unwrap();
        reopened.insert(&key, value).unwrap();
        reopened.flush().unwrap();
        drop(reopened);
        state = open(dir.path());
    }
    drop(state);
}

/// Exact runs were kept in sled before run files, in chunks of 4,096
/// fingerprints and later of [`exact::CHUNK_FPS`] (2026-12-03): such runs are
/// still read, keep their merge tier, and a merge writes them into a file; their
/// chunks are removed by the checkpoint after.
#[test]
fn exact_runs_an_older_state_kept_in_sled_are_read_and_merged_into_a_file() {
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
    move_runs_into_sled(&mut state, dir.path(), 4096);
    drop(state);

    let mut state = open(dir.path());
    assert!(state.seen.exact.files.is_empty(), "read from sled");
    assert!(runfile::ids_on_disk(dir.path()).unwrap().is_empty());
    let check = |state: &crate::store::State, upto: u32| {
        for n in 0..upto {
            assert_eq!(state.check_seen(&fp(n)).unwrap(), Seen::Duplicate, "{n}");
        }
        for n in 100_000..100_500 {
            assert_ne!(state.check_seen(&fp(n)).unwrap(), Seen::Duplicate, "{n}");
        }
    };
    check(&state, 5000);
    // Three more seals of the same tier: the four runs merge into one file.
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
    assert!(state.seen.exact.files.contains_key(&merged));
    assert_eq!(runfile::ids_on_disk(dir.path()).unwrap(), vec![merged]);
    let chunks = |state: &crate::store::State| {
        state
            .db
            .tree()
            .scan_prefix(keys::with_u64(keys::EXACT_RUN, run))
            .count()
    };
    assert_eq!(chunks(&state), 0, "the sled run's chunks are gone");
    check(&state, 20_000);
    drop(state);
    check(&open(dir.path()), 20_000);
}
