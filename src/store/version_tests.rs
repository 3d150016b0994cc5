//! Every stored value starts with a version byte, and a value without one is
//! damage, not another form.

use crate::fingerprint::fingerprint;
use crate::request::Request;
use crate::store::Seen;
use crate::store::tests::open;

fn url(n: u32) -> String {
    format!("http://h{}.test/{n}", n % 3)
}

/// Namespaces whose values must start with a version byte like every other.
const LATE: &[(u8, &str)] = &[
    (crate::store::seen::JOURNAL.ns(), "journal"),
    (crate::store::runs::COUNTER.ns(), "counter"),
    (crate::store::frontier::HOST.ns(), "host name"),
    (crate::store::frontier::HOST_BY_NAME.ns(), "host id"),
    (crate::store::runs::CYCLE.ns(), "cycle start"),
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
    state.start_cycle(1_700_000_000, &[], None).unwrap();
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
    state.resume_cycle(&[], None).unwrap();
    // Without its version byte, a journal entry or a host name is damage
    // that the open names (states written before the bytes are not read).
    for (namespace, what) in [
        (crate::store::seen::JOURNAL.ns(), "journal"),
        (crate::store::frontier::HOST.ns(), "host index"),
    ] {
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
