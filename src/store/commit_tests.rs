//! Unit tests of the commit protocol: a sealed group claims nothing until its
//! flush's receipt is handed back.

use super::super::ops::seed_request;
use super::super::tests::{complete, leased_urls, open};
use super::*;
use crate::request::Request;
use crate::store::Seen;

/// A state with one seed leased and completed with two links, sealed, not
/// flushed; and the flush of that group.
fn sealed_state(dir: &std::path::Path) -> (State, Flush) {
    let mut state = open(dir);
    state
        .add_seeds(&["http://a.test/".to_owned()], &[])
        .unwrap();
    let lease = state.lease().unwrap().unwrap();
    complete(&mut state, lease, &["http://a.test/x", "http://a.test/y"]);
    let flush = state.seal().unwrap().unwrap();
    (state, flush)
}

fn streamed(state: &State) -> usize {
    let mut n = 0;
    state
        .for_each_item(0, |_, _| {
            n += 1;
            true
        })
        .unwrap();
    n
}

#[test]
fn a_sealed_group_dedups_but_claims_nothing_until_its_flush_is_handed_back() {
    let dir = tempfile::tempdir().unwrap();
    let (mut state, flush) = sealed_state(dir.path());
    assert!(state.has_sealed());
    assert_eq!(state.undurable_pages(), 1);
    assert_eq!(state.open_pages(), 0);
    // Dedup sees the sealed fingerprints; the mapped bits do not have them yet.
    let x = crate::fingerprint::fingerprint(&Request::get("http://a.test/x"), &[]);
    assert_eq!(state.check_seen(&x).unwrap(), Seen::Duplicate);
    assert!(!state.seen.bloom.contains(&x));
    // The seed's lease has not ended, its item is not streamable, and its new
    // requests are not leasable.
    assert_eq!(state.in_flight(), 1);
    assert_eq!(streamed(&state), 0);
    assert!(state.lease().unwrap().is_none());

    // While its flush runs elsewhere, nothing else can be sealed or committed.
    let b = seed_request("http://b.test/".into());
    assert!(state.enqueue(&b, &[]).unwrap());
    assert!(
        state.seal().unwrap().is_none(),
        "one group is sealed at a time"
    );
    assert!(matches!(
        state.commit(),
        Err(StoreError::FlushRunning { .. })
    ));

    let outcome = state.durable(flush.run().unwrap());
    assert_eq!(
        outcome,
        CommitOutcome {
            pages: 1,
            items: 0..1
        }
    );
    assert!(!state.has_sealed());
    assert!(state.seen.bloom.contains(&x));
    assert_eq!(streamed(&state), 1);
    let urls = leased_urls(&mut state);
    assert_eq!(urls, ["http://a.test/x", "http://a.test/y"]);
    // The group opened meanwhile commits normally.
    assert_eq!(state.commit().unwrap().pages, 0);
    let lease = state.lease().unwrap().unwrap();
    assert_eq!(lease.request.url, "http://b.test/");
}

#[test]
fn a_stale_receipt_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut state, flush) = sealed_state(dir.path());
    let Receipt { seq } = flush.run().unwrap();
    let outcome = state.durable(Receipt { seq });
    assert_eq!(outcome.pages, 1);
    // The same proof again (or one of another group) is ignored.
    let again = state.durable(Receipt { seq });
    assert_eq!(
        again,
        CommitOutcome {
            pages: 0,
            items: 1..1
        }
    );
}

#[test]
fn nothing_to_seal_gives_no_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    assert!(state.seal().unwrap().is_none());
    assert_eq!(state.commit().unwrap(), CommitOutcome::default());
}

#[test]
fn a_failed_flush_poisons_the_state_and_the_next_open_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (mut state, flush) = sealed_state(dir.path());
    // The flush is lost (as when it fails on its thread).
    drop(flush);
    assert!(matches!(
        state.commit(),
        Err(StoreError::FlushRunning { .. })
    ));
    state.flush_failed(&"the flush thread stopped");
    // Nothing more is written: no commit, no seal, no checkpoint, so no
    // item number or lease of the lost group is handed out twice.
    let error = state.commit().unwrap_err();
    assert!(matches!(error, StoreError::Poisoned { .. }));
    // The one line names the first failure, whichever write finds it first.
    assert!(
        error.to_string().contains("(the flush thread stopped)"),
        "{error}"
    );
    assert!(matches!(state.seal(), Err(StoreError::Poisoned { .. })));
    assert!(matches!(
        state.start_checkpoint(),
        Err(StoreError::Poisoned { .. })
    ));
    assert!(
        state
            .enqueue(&seed_request("http://b.test/".into()), &[])
            .unwrap()
    );
    assert!(matches!(state.commit(), Err(StoreError::Poisoned { .. })));
    drop(state);
    // The lost group never reached the database: its page is queued again,
    // and nothing enqueued after the failure was stored.
    let mut state = open(dir.path());
    let urls = leased_urls(&mut state);
    assert_eq!(urls, ["http://a.test/"]);
    assert_eq!(state.items_len(), 0);
}
