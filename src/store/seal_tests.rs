//! Unit tests of the sealed-but-not-durable stage of group commit.

use super::super::tests::{complete, lease_all, open};
use super::*;

/// A state with one seed leased and completed with two links, sealed, not flushed.
fn sealed_state(dir: &std::path::Path) -> State {
    let mut state = open(dir);
    state
        .add_seeds(&["http://a.test/".to_owned()], &[])
        .unwrap();
    let lease = state.lease().unwrap().unwrap();
    complete(&mut state, lease, &["http://a.test/x", "http://a.test/y"]);
    assert!(state.seal().unwrap());
    state
}

#[test]
fn a_sealed_group_dedups_and_leases_but_claims_nothing_durable() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = sealed_state(dir.path());
    assert!(state.has_sealed());
    assert_eq!(state.undurable_pages(), 1);
    assert_eq!(state.open_pages(), 0);
    // Dedup sees the sealed fingerprints; the mapped bits do not have them yet.
    let x = crate::fingerprint::fingerprint(&Request::get("http://a.test/x"), &[]);
    assert_eq!(state.check_seen(&x).unwrap(), Seen::Duplicate);
    assert!(!state.bloom.contains(&x));
    // The seed's lease has not ended, and its item is not streamable.
    assert_eq!(state.in_flight(), 1);
    let mut streamed = 0;
    state
        .for_each_item(0, |_, _| {
            streamed += 1;
            true
        })
        .unwrap();
    assert_eq!(streamed, 0);
    // The new requests can be leased already.
    let urls: Vec<String> = lease_all(&mut state)
        .into_iter()
        .map(|l| l.request.url)
        .collect();
    assert_eq!(urls, ["http://a.test/x", "http://a.test/y"]);

    let flushed = state.flush_handle().unwrap().run().unwrap();
    let outcome = state.durable(flushed);
    assert_eq!(
        outcome,
        CommitOutcome {
            pages: 1,
            items: 0..1
        }
    );
    assert!(!state.has_sealed());
    assert!(state.bloom.contains(&x));
    assert_eq!(
        state.in_flight(),
        2,
        "the seed's lease ended; x and y are leased"
    );
    state
        .for_each_item(0, |_, _| {
            streamed += 1;
            true
        })
        .unwrap();
    assert_eq!(streamed, 1);
}

#[test]
fn a_flush_covers_only_groups_sealed_before_it_and_stale_ones_are_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = sealed_state(dir.path());
    let first = state.flush_handle().unwrap();
    // A second group is sealed after the first flush was taken.
    let lease = state.lease().unwrap().unwrap();
    complete(&mut state, lease, &["http://a.test/z"]);
    state.seal().unwrap();
    let outcome = state.durable(first.run().unwrap());
    assert_eq!(outcome.pages, 1);
    assert!(
        state.has_sealed(),
        "the second group still waits for its flush"
    );
    let second = state.flush_handle().unwrap();
    // commit() flushes everything itself; the flush taken before is then stale.
    assert_eq!(state.commit().unwrap().pages, 1);
    let stale = state.durable(second.run().unwrap());
    assert_eq!(
        stale,
        CommitOutcome {
            pages: 0,
            items: 2..2
        }
    );
    assert_eq!(state.items_len(), 2);
}

#[test]
fn nothing_to_seal_gives_no_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    assert!(!state.seal().unwrap());
    assert!(state.flush_handle().is_none());
    assert_eq!(state.commit().unwrap(), CommitOutcome::default());
}
