//! The state directory: a missing marker is refused without deleting anything,
//! an interrupted creation is redone, and a second opener finds the state busy.

use std::fs;
use std::path::Path;

use crate::store::{MARKER_FILE, OpenOptions, State, StoreError};

fn create() -> OpenOptions {
    crate::store::tests::opts()
}

/// Every file under `dir` with its length, sorted.
fn listing(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                out.push((entry.path().display().to_string(), meta.len()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_state_without_its_marker_is_refused_and_left_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = State::open(dir.path(), &create()).unwrap();
    state
        .add_seeds(&["http://a.test/".to_owned()], &[])
        .unwrap();
    drop(state);
    fs::remove_file(dir.path().join(MARKER_FILE)).unwrap();
    let before = listing(dir.path());
    for options in [OpenOptions::default(), create()] {
        let err = State::open(dir.path(), &options).err().unwrap();
        assert!(matches!(err, StoreError::Unmarked { .. }), "{err}");
        assert!(err.to_string().contains("no LEGCRAWL marker"), "{err}");
        assert_eq!(listing(dir.path()), before, "nothing was touched");
    }
    // A Bloom file alone is refused the same way.
    let bloom_only = tempfile::tempdir().unwrap();
    fs::write(bloom_only.path().join("bloom.bin"), b"bits").unwrap();
    let err = State::open(bloom_only.path(), &create()).err().unwrap();
    assert!(matches!(err, StoreError::Unmarked { .. }), "{err}");
    assert_eq!(
        fs::read(bloom_only.path().join("bloom.bin")).unwrap(),
        b"bits"
    );
}

#[test]
fn an_interrupted_creation_is_reported_to_readers_and_redone_by_a_crawl() {
    let dir = tempfile::tempdir().unwrap();
    drop(State::open(dir.path(), &create()).unwrap());
    // What a crash between the first and the last step of a creation leaves.
    fs::write(
        dir.path().join(MARKER_FILE),
        format!("legcrawl state format {} (creating)\n", super::STATE_FORMAT),
    )
    .unwrap();
    let err = State::open(dir.path(), &OpenOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::Incomplete { .. }), "{err}");
    assert!(dir.path().join("db").exists(), "a reader deletes nothing");
    let state = State::open(dir.path(), &create()).unwrap();
    assert_eq!(state.runs().unwrap().len(), 1, "a new state, one run");
    drop(state);
    assert_eq!(
        fs::read_to_string(dir.path().join(MARKER_FILE)).unwrap(),
        super::marker_text()
    );
}

#[test]
fn a_second_opener_finds_the_state_busy_even_while_it_is_created() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("new");
    let first = State::open(&dir, &create()).unwrap();
    let err = State::open(&dir, &create()).err().unwrap();
    assert!(matches!(err, StoreError::Busy { .. }), "{err}");
    drop(first);
    drop(State::open(&dir, &create()).unwrap());
}

#[test]
fn a_file_is_not_a_state_directory_and_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("crawl.toml");
    fs::write(&file, "seeds = []\n").unwrap();
    for options in [OpenOptions::default(), create()] {
        let err = State::open(&file, &options).err().unwrap();
        assert!(matches!(err, StoreError::NotADirectory { .. }), "{err}");
        assert!(err.to_string().contains("is a file"), "{err}");
    }
    assert_eq!(fs::read_to_string(&file).unwrap(), "seeds = []\n");
}
