//! Unit tests of the state: frontier order, leases, dedup, recovery, errors.

use std::fs;

use super::*;
use crate::item::Item;
use crate::request::Request;

pub(super) fn opts() -> OpenOptions {
    OpenOptions {
        create: true,
        bloom_bits: Some(16),
        begin_run: true,
        ..OpenOptions::default()
    }
}

pub(super) fn open(dir: &Path) -> State {
    State::open(dir, &opts()).unwrap()
}

pub(super) fn lease_all(state: &mut State) -> Vec<Lease> {
    let mut leases = Vec::new();
    while let Some(lease) = state.lease().unwrap() {
        leases.push(lease);
        assert!(leases.len() < 10_000, "lease loop ran away");
    }
    leases
}

/// The URLs of every request `lease_all` hands out, in order.
pub(super) fn leased_urls(state: &mut State) -> Vec<String> {
    lease_all(state)
        .into_iter()
        .map(|l| l.request.url)
        .collect()
}

fn page_item(url: &str) -> Item {
    let mut item = Item::new();
    item.insert("url".into(), url.into());
    item
}

pub(super) fn complete(state: &mut State, lease: Lease, links: &[&str]) {
    let requests = links
        .iter()
        .map(|u| Request::follow(&lease.request, *u))
        .collect();
    let items = vec![page_item(&lease.request.url)];
    state
        .complete(
            Completion {
                lease,
                requests,
                items,
                counters: vec![],
            },
            &[],
        )
        .unwrap();
}

#[test]
fn seeds_then_overlapping_requests_filter_exactly_the_seeds() {
    // The scrapy-redis example: 10 start requests, then 100 requests of which 10
    // repeat the start URLs, give dupefilter/filtered = 10.
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let seeds: Vec<String> = (0..10).map(|i| format!("http://a.test/{i}")).collect();
    assert_eq!(state.add_seeds(&seeds, &[]).unwrap(), 10);
    for i in 0..100 {
        state
            .enqueue(&Request::get(format!("http://a.test/{i}")), &[])
            .unwrap();
    }
    state.commit().unwrap();
    assert_eq!(state.counter("dupefilter/filtered"), 10);
    assert_eq!(state.frontier_len(), 100);
    assert_eq!(state.summary().unwrap().seen, 100);
}

#[test]
fn priority_then_fifo_across_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let mut push = |url: &str, priority: i32| {
        let mut request = Request::get(url);
        request.priority = priority;
        state.enqueue(&request, &[]).unwrap();
    };
    push("http://a.test/1", 0);
    push("http://b.test/1", 0);
    push("http://a.test/2", 5);
    push("http://b.test/2", 0);
    push("http://c.test/1", -1);
    state.commit().unwrap();
    let order = leased_urls(&mut state);
    assert_eq!(
        order,
        [
            "http://a.test/2",
            "http://a.test/1",
            "http://b.test/1",
            "http://b.test/2",
            "http://c.test/1"
        ]
    );
}

#[test]
fn completion_is_atomic_and_leases_return_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut state = open(dir.path());
        state
            .add_seeds(&["http://a.test/".to_owned()], &[])
            .unwrap();
        let lease = state.lease().unwrap().unwrap();
        complete(&mut state, lease, &["http://a.test/x", "http://a.test/y"]);
        state.commit().unwrap();
        let leases = lease_all(&mut state);
        assert_eq!(leases.len(), 2);
        assert_eq!(state.in_flight(), 2);
        // Complete one but do not commit; lease the other and "die" (drop without end_run).
        let mut leases = leases.into_iter();
        complete(&mut state, leases.next().unwrap(), &["http://a.test/z"]);
    }
    let mut state = open(dir.path());
    // The uncommitted completion is gone: both x and y are queued again, z never was.
    let urls = leased_urls(&mut state);
    assert_eq!(urls, ["http://a.test/x", "http://a.test/y"]);
    assert_eq!(state.items_len(), 1);
    let answer = state.seen_answer("http://a.test/z", &[]).unwrap();
    assert_eq!((answer.bloom, answer.exact), (false, Some(false)));
    let runs = state.runs().unwrap();
    assert_eq!(runs[0].outcome, records::RunOutcome::Killed);
}

#[test]
fn released_lease_is_leased_again_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    state
        .add_seeds(
            &["http://a.test/1".to_owned(), "http://a.test/2".to_owned()],
            &[],
        )
        .unwrap();
    let first = state.lease().unwrap().unwrap();
    assert_eq!(first.request.url, "http://a.test/1");
    state.release(first);
    assert_eq!(state.in_flight(), 0);
    assert_eq!(
        state.lease().unwrap().unwrap().request.url,
        "http://a.test/1"
    );
}

#[test]
fn known_seeds_are_not_queued_again() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = vec!["http://a.test/".to_owned()];
    {
        let mut state = open(dir.path());
        assert_eq!(state.add_seeds(&seeds, &[]).unwrap(), 1);
        let lease = state.lease().unwrap().unwrap();
        complete(&mut state, lease, &[]);
        state.end_run(records::RunOutcome::Drained).unwrap();
    }
    let mut state = open(dir.path());
    assert_eq!(state.add_seeds(&seeds, &[]).unwrap(), 0);
    assert!(state.lease().unwrap().is_none());
    assert_eq!(state.seeds().unwrap(), seeds);
    let runs = state.runs().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].outcome, records::RunOutcome::Drained);
    assert_eq!(runs[0].counters.get("pages/completed"), Some(&1));
}

#[test]
fn items_keep_their_order_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut state = open(dir.path());
        let seeds: Vec<String> = (0..5).map(|i| format!("http://a.test/{i}")).collect();
        state.add_seeds(&seeds, &[]).unwrap();
        for lease in lease_all(&mut state) {
            complete(&mut state, lease, &[]);
        }
        let outcome = state.commit().unwrap();
        assert_eq!(outcome.items, 0..5);
        state.end_run(records::RunOutcome::Drained).unwrap();
    }
    let state = open(dir.path());
    let mut urls = Vec::new();
    state
        .for_each_item(0, |_, text| {
            urls.push(
                serde_json::from_str::<serde_json::Value>(text).unwrap()["url"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
            true
        })
        .unwrap();
    assert_eq!(
        urls,
        (0..5)
            .map(|i| format!("http://a.test/{i}"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn journal_replay_restores_bloom_bits() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut state = open(dir.path());
        state
            .add_seeds(&["http://a.test/".to_owned()], &[])
            .unwrap();
        // Committed (durable) but never checkpointed: the bits are in the journal only.
    }
    let state = open(dir.path());
    let answer = state.seen_answer("http://a.test/", &[]).unwrap();
    assert!(answer.bloom);
    assert_eq!(answer.exact, Some(true));
}

#[test]
fn foreign_directories_and_other_formats_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let err = State::open(dir.path(), &opts()).err().unwrap();
    assert!(matches!(err, StoreError::NotState { .. }), "{err}");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);

    let other = tempfile::tempdir().unwrap();
    drop(open(other.path()));
    fs::write(other.path().join(MARKER_FILE), "legcrawl state format 99\n").unwrap();
    let err = State::open(other.path(), &opts()).err().unwrap();
    assert!(matches!(err, StoreError::Format { .. }), "{err}");

    let missing = dir.path().join("nothing");
    let err = State::open(&missing, &OpenOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::Missing { .. }), "{err}");
    assert!(!missing.exists());
}

#[test]
fn creation_settings_cannot_change() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let mut options = opts();
    options.bloom_bits = Some(20);
    let err = State::open(dir.path(), &options).err().unwrap();
    assert!(
        matches!(
            err,
            StoreError::Mismatch {
                setting: "bloom bits",
                ..
            }
        ),
        "{err}"
    );
    options.bloom_bits = None;
    options.dedup = Some(DedupMode::Bloom);
    let err = State::open(dir.path(), &options).err().unwrap();
    assert!(
        matches!(
            err,
            StoreError::Mismatch {
                setting: "dedup",
                ..
            }
        ),
        "{err}"
    );
    options.dedup = None;
    assert!(State::open(dir.path(), &options).is_ok());
}

#[test]
fn checkpoint_truncates_the_journal_and_keeps_the_bits() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut state = open(dir.path());
        state
            .add_seeds(&["http://a.test/".to_owned()], &[])
            .unwrap();
        assert!(
            state
                .db
                .tree()
                .scan_prefix([super::seen::JOURNAL.ns()])
                .next()
                .is_some()
        );
        state.checkpoint().unwrap();
        assert!(
            state
                .db
                .tree()
                .scan_prefix([super::seen::JOURNAL.ns()])
                .next()
                .is_none()
        );
        assert!(!state.checkpoint_due());
    }
    let state = open(dir.path());
    assert!(
        state.seen_answer("http://a.test/", &[]).unwrap().bloom,
        "bits survive via the msynced map"
    );
}

#[test]
fn lease_cursor_sees_higher_priorities_and_released_leases() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for url in ["http://a.test/1", "http://a.test/2", "http://a.test/3"] {
        state.enqueue(&Request::get(url), &[]).unwrap();
    }
    state.commit().unwrap();
    let first = state.lease().unwrap().unwrap();
    assert_eq!(first.request.url, "http://a.test/1");
    let mut urgent = Request::get("http://a.test/urgent");
    urgent.priority = 5;
    state.enqueue(&urgent, &[]).unwrap();
    state.commit().unwrap();
    assert_eq!(
        state.lease().unwrap().unwrap().request.url,
        "http://a.test/urgent"
    );
    let second = state.lease().unwrap().unwrap();
    assert_eq!(second.request.url, "http://a.test/2");
    state.release(first);
    assert_eq!(
        state.lease().unwrap().unwrap().request.url,
        "http://a.test/1"
    );
    assert_eq!(
        state.lease().unwrap().unwrap().request.url,
        "http://a.test/3"
    );
    assert!(state.lease().unwrap().is_none());
}

#[test]
fn exact_confirmation_catches_bloom_false_positives_and_bloom_mode_does_not() {
    // A 2^10-bit filter holding 3,000 keys answers "maybe" for almost anything.
    let urls: Vec<String> = (0..3000).map(|i| format!("http://a.test/{i}")).collect();
    for (dedup, all_queued) in [(DedupMode::Exact, true), (DedupMode::Bloom, false)] {
        let dir = tempfile::tempdir().unwrap();
        let options = OpenOptions {
            bloom_bits: Some(10),
            bloom_hashes: Some(2),
            dedup: Some(dedup),
            ..opts()
        };
        let mut state = State::open(dir.path(), &options).unwrap();
        for (i, url) in urls.iter().enumerate() {
            state.enqueue(&Request::get(url.clone()), &[]).unwrap();
            if i % 64 == 63 {
                state.commit().unwrap();
            }
        }
        state.commit().unwrap();
        let queued = state.frontier_len();
        if all_queued {
            assert_eq!(
                queued, 3000,
                "exact mode never loses a page to a false positive"
            );
            assert!(
                state.counter("bloom/false_positive") > 100,
                "false positives are counted"
            );
            assert_eq!(state.counter("dupefilter/filtered"), 0);
        } else {
            assert!(queued < 3000, "bloom mode drops false positives");
            assert_eq!(queued + state.counter("dupefilter/filtered"), 3000);
            assert!(
                super::exact::INDEX.get(&state.db, &()).unwrap().is_none(),
                "bloom mode keeps no exact set"
            );
            assert!(
                super::runfile::ids_on_disk(dir.path(), super::runfile::Kind::Seen)
                    .unwrap()
                    .is_empty(),
                "nor run files"
            );
        }
    }
}

#[test]
fn packed_records_are_consumed_in_fifo_order_across_groups_and_reopen() {
    // 600 requests of one host in one group: several packed records (each closes
    // at RECORD_MAX_ENTRIES entries or RECORD_MAX_BYTES bytes).
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for i in 0..600 {
        let request = Request::get(format!("http://a.test/{i}"));
        assert!(state.enqueue(&request, &[]).unwrap());
    }
    state.commit().unwrap();
    let records = state
        .db
        .tree()
        .scan_prefix([crate::store::queue::QUEUE])
        .count();
    assert!(records >= 600usize.div_ceil(crate::store::queue::RECORD_MAX_ENTRIES));
    assert!(records < 600 / 10, "requests are packed: {records} records");
    // Lease 300 (crossing a record boundary), complete the odd ones over two groups,
    // release nothing: the even ones stay leased until the "crash".
    let mut leases: Vec<Lease> = (0..300).map(|_| state.lease().unwrap().unwrap()).collect();
    let urls: Vec<String> = leases.iter().map(|l| l.request.url.clone()).collect();
    let expected: Vec<String> = (0..300).map(|i| format!("http://a.test/{i}")).collect();
    assert_eq!(urls, expected);
    let mut kept = Vec::new();
    for (n, lease) in leases.drain(..).enumerate() {
        if n % 2 == 1 {
            complete(&mut state, lease, &[]);
        } else {
            kept.push(lease);
        }
        if n == 150 {
            state.commit().unwrap();
        }
    }
    state.commit().unwrap();
    assert_eq!(state.frontier_len(), 450);
    drop(kept);
    drop(state);
    let mut state = open(dir.path());
    let urls = leased_urls(&mut state);
    let expected: Vec<String> = (0..600)
        .filter(|i| i >= &300 || i % 2 == 0)
        .map(|i| format!("http://a.test/{i}"))
        .collect();
    assert_eq!(urls, expected);
    let head = state.frontier_head(1000).unwrap();
    assert_eq!(head.len(), 450);
    assert!(head.iter().all(|entry| entry.leased));
}

#[test]
fn emptied_records_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for i in 0..5 {
        let request = Request::get(format!("http://a.test/{i}"));
        assert!(state.enqueue(&request, &[]).unwrap());
    }
    state.commit().unwrap();
    for lease in lease_all(&mut state) {
        complete(&mut state, lease, &[]);
    }
    state.commit().unwrap();
    assert!(
        state
            .db
            .tree()
            .scan_prefix([crate::store::queue::QUEUE])
            .next()
            .is_none()
    );
    assert_eq!(state.frontier_len(), 0);
}

#[test]
fn format_1_state_is_refused() {
    // Format 1 stored one request per queue key; reading it as packed records would
    // misread it, so its marker is refused with the format error.
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    fs::write(dir.path().join(MARKER_FILE), "legcrawl state format 1\n").unwrap();
    let err = State::open(dir.path(), &opts()).err().unwrap();
    assert!(matches!(err, StoreError::Format { .. }), "{err}");
}

#[test]
fn exact_set_survives_seals_merges_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let url = |n: u32| format!("http://a.test/{n}");
    let fp = |n: u32| crate::fingerprint::fingerprint(&Request::get(url(n)), &[]);
    // Nine seals of 1,500 fingerprints: four tier-0 runs merge once, twice.
    for round in 0..9u32 {
        for n in round * 1500..(round + 1) * 1500 {
            assert!(state.enqueue(&Request::get(url(n)), &[]).unwrap());
        }
        state.checkpoint().unwrap();
    }
    // The last round stays in the journal (recent set) only.
    for n in 9 * 1500..10 * 1500 {
        assert!(state.enqueue(&Request::get(url(n)), &[]).unwrap());
    }
    state.commit().unwrap();
    let check = |state: &State| {
        for n in 0..15_000 {
            assert_eq!(state.check_seen(&fp(n)).unwrap(), Seen::Duplicate, "{n}");
        }
        for n in 15_000..16_000 {
            assert_ne!(state.check_seen(&fp(n)).unwrap(), Seen::Duplicate, "{n}");
        }
    };
    check(&state);
    assert!(
        state.seen.exact.runs.listed().len() <= 3,
        "{:?}",
        state.seen.exact.runs
    );
    drop(state);
    let state = open(dir.path());
    check(&state);
}

#[test]
fn items_are_read_from_inside_a_group_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for i in 0..6 {
        let request = Request::get(format!("http://a.test/{i}"));
        assert!(state.enqueue(&request, &[]).unwrap());
    }
    state.commit().unwrap();
    // Two groups of three pages: two item records of three items.
    for (n, lease) in lease_all(&mut state).into_iter().enumerate() {
        complete(&mut state, lease, &[]);
        if n == 2 {
            state.commit().unwrap();
        }
    }
    state.commit().unwrap();
    drop(state);
    let state = open(dir.path());
    assert_eq!(state.items_len(), 6);
    let mut seen = Vec::new();
    state
        .for_each_item(1, |seq, text| {
            seen.push((seq, text.contains(&format!("/{seq}\""))));
            seq < 4
        })
        .unwrap();
    assert_eq!(seen, vec![(1, true), (2, true), (3, true), (4, true)]);
}

#[test]
fn no_stored_value_outgrows_the_cap_so_sled_keeps_them_out_of_blob_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let seeds: Vec<String> = (0..64).map(|i| format!("http://a.test/s{i}")).collect();
    state.add_seeds(&seeds, &[]).unwrap();
    for lease in lease_all(&mut state) {
        let url = lease.request.url.clone();
        let links: Vec<String> = (0..40).map(|j| format!("{url}/{j}")).collect();
        let links: Vec<&str> = links.iter().map(String::as_str).collect();
        complete(&mut state, lease, &links);
    }
    state.commit().unwrap();
    let mut big = 0;
    for entry in state.db.tree().iter() {
        let (key, value) = entry.unwrap();
        // One entry past the cap at most (a record closes after the entry that crosses it).
        assert!(
            value.len() < keys::MAX_VALUE_BYTES + 1024,
            "{:?}: {} bytes",
            &key[..1],
            value.len()
        );
        big += usize::from(value.len() > keys::MAX_VALUE_BYTES / 2);
    }
    assert!(big > 0, "the group was large enough to need several values");
    // Everything reads back: 2,560 links queued, 64 items, journal replayed on reopen.
    drop(state);
    let state = open(dir.path());
    assert_eq!(state.items_len(), 64);
    assert_eq!(state.frontier_len(), 64 * 40);
}
