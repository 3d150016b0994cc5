//! Checkpoints cut short, and checkpoints detached from the state.

use crate::fingerprint::fingerprint;
use crate::request::Request;
use crate::store::runfile;
use crate::store::tests::open;
use crate::store::{Seen, State};

fn url(n: u32) -> String {
    format!("http://a.test/{n}")
}

fn enqueue(state: &mut State, range: std::ops::Range<u32>) {
    for n in range {
        assert!(state.enqueue(&Request::get(url(n)), &[]).unwrap());
    }
    state.commit().unwrap();
}

fn unseen(state: &State, range: std::ops::Range<u32>) -> Vec<u32> {
    range
        .filter(|&n| {
            let fp = fingerprint(&Request::get(url(n)), &[]);
            state.check_seen(&fp).unwrap() != Seen::Duplicate
        })
        .collect()
}

/// Writes the exact set's run of `job` as a checkpoint would, without the
/// index switch (a crash between the two); returns the run's id.
fn write_run_unlisted(job: super::Checkpoint) -> u64 {
    let mut batch = super::Batch::default();
    let done = super::Exact::seal(job.exact, &job.seal, &mut batch).unwrap();
    job.db.tree().flush().unwrap();
    done.listed.last().unwrap().0
}

/// A crash after a new run was written and before the index switch leaves an
/// orphan run file: it is never read, and its id is never reused.
#[test]
fn an_orphan_run_of_a_cut_checkpoint_is_never_read_and_its_id_never_reused() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    enqueue(&mut state, 0..5_000);
    // The first half of a checkpoint: bits synced, the new run's chunks written.
    let job = state.start_checkpoint().unwrap().unwrap();
    job.bloom.sync().unwrap();
    let orphan = write_run_unlisted(job);
    drop(state);

    let mut state = open(dir.path());
    assert_eq!(
        state.seen.exact.runs.garbage(),
        vec![orphan],
        "the orphan run is found"
    );
    assert!(
        state.seen.exact.runs.next_id() > orphan,
        "its id is not taken again"
    );
    enqueue(&mut state, 5_000..10_000);
    state.checkpoint().unwrap();
    assert_eq!(unseen(&state, 0..10_000), Vec::<u32>::new());
    assert!(!state.seen.exact.runs.has_garbage());
    assert!(
        !runfile::path(dir.path(), runfile::Kind::Seen, orphan).exists(),
        "the checkpoint removed the orphan's file"
    );
    drop(state);
    let state = open(dir.path());
    assert_eq!(unseen(&state, 0..10_000), Vec::<u32>::new());
    assert_eq!(unseen(&state, 10_000..10_100).len(), 100);
}

/// A detached checkpoint that fails (here: its thread dies before it runs)
/// leaves the garbage runs it was to remove listed, so the next one removes
/// them; what it was sealing is still seen.
#[test]
fn a_failed_checkpoint_leaves_its_garbage_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    enqueue(&mut state, 0..2_000);
    let job = state.start_checkpoint().unwrap().unwrap();
    let orphan = write_run_unlisted(job);
    drop(state);

    let mut state = open(dir.path());
    assert_eq!(state.seen.exact.runs.garbage(), vec![orphan]);
    enqueue(&mut state, 2_000..3_000);
    let lost = state.start_checkpoint().unwrap().unwrap();
    drop(lost);
    state.checkpoint_failed();
    assert_eq!(
        state.seen.exact.runs.garbage(),
        vec![orphan],
        "still to remove"
    );
    assert_eq!(unseen(&state, 0..3_000), Vec::<u32>::new());
    state.checkpoint().unwrap();
    assert!(!state.seen.exact.runs.has_garbage());
    assert!(!runfile::path(dir.path(), runfile::Kind::Seen, orphan).exists());
    assert_eq!(unseen(&state, 0..3_000), Vec::<u32>::new());
}

/// While a detached checkpoint runs, what it seals is still seen, the state
/// takes new groups, and merged runs are removed only after the switch.
#[test]
fn a_detached_checkpoint_leaves_every_answer_right_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for round in 0..4u32 {
        enqueue(&mut state, round * 1_000..(round + 1) * 1_000);
        let job = state.start_checkpoint().unwrap().unwrap();
        assert!(state.start_checkpoint().unwrap().is_none(), "one at a time");
        assert!(state.checkpoint().is_err(), "no synchronous one meanwhile");
        assert_eq!(unseen(&state, 0..(round + 1) * 1_000), Vec::<u32>::new());
        // The crawl goes on while it runs.
        enqueue(&mut state, 50_000 + round * 10..50_000 + round * 10 + 10);
        let done = std::thread::spawn(move || job.run())
            .join()
            .unwrap()
            .unwrap();
        state.checkpointed(done);
        assert_eq!(unseen(&state, 0..(round + 1) * 1_000), Vec::<u32>::new());
    }
    // The fourth run merged the first three away; their files go next time.
    assert_eq!(
        state.seen.exact.runs.listed().len(),
        1,
        "{:?}",
        state.seen.exact.runs
    );
    let merged = state.seen.exact.runs.garbage().to_vec();
    assert_eq!(merged.len(), 3);
    assert!(
        merged
            .iter()
            .all(|&run| runfile::path(dir.path(), runfile::Kind::Seen, run).exists())
    );
    state.checkpoint().unwrap();
    assert!(!state.seen.exact.runs.has_garbage());
    assert!(
        merged
            .iter()
            .all(|&run| !runfile::path(dir.path(), runfile::Kind::Seen, run).exists())
    );
    let mut on_disk = runfile::ids_on_disk(dir.path(), runfile::Kind::Seen).unwrap();
    on_disk.sort_unstable();
    let listed: Vec<u64> = state.seen.exact.runs.listed().iter().map(|r| r.0).collect();
    assert_eq!(on_disk, listed, "one file per listed run, no other");
    drop(state);
    let state = open(dir.path());
    assert_eq!(unseen(&state, 0..4_000), Vec::<u32>::new());
    assert_eq!(unseen(&state, 50_000..50_040), Vec::<u32>::new());
}
