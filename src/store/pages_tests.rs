//! Unit tests of page records, the due index and cycle starts.

use std::collections::HashSet;
use std::path::Path;

use super::*;
use crate::store::ops::POLICY_CHUNK;
use crate::store::{Completion, OpenOptions, State, records};

fn open(dir: &Path) -> State {
    let options = OpenOptions {
        create: true,
        bloom_bits: Some(16),
        begin_run: true,
        ..OpenOptions::default()
    };
    State::open(dir, &options).unwrap()
}

fn record(url: &str, next_due: Option<u64>) -> PageRecord {
    PageRecord {
        url: url.to_owned(),
        final_url: url.to_owned(),
        status: 200,
        etag: Some("\"e\"".into()),
        last_modified: None,
        content_hash: "00".repeat(20),
        first_fetched: 1,
        last_fetched: 1,
        last_changed: 1,
        fetches: 1,
        changes: 0,
        version: 1,
        interval: 10,
        next_due,
        missing: 0,
        gone: false,
        request: StoredRequest::of(&Request::get(url)),
        items: Vec::new(),
        withdrawn: None,
        legs: 0,
        response: None,
        evidence: crate::store::ChangeEvidence::default(),
    }
}

fn fp(url: &str) -> Fingerprint {
    let mut request = Request::get(url);
    request.dont_filter = true;
    fingerprint::fingerprint(&request, &[])
}

/// Completes `lease` with nothing found, and commits.
fn finish(state: &mut State, lease: crate::store::Lease) {
    let completion = Completion {
        lease,
        requests: Vec::new(),
        items: Vec::new(),
        counters: Vec::new(),
    };
    state.complete(completion, &[]).unwrap();
    state.commit().unwrap();
}

/// Leases and completes everything queued, returning the URLs in lease order.
fn drain(state: &mut State) -> Vec<String> {
    let mut urls = Vec::new();
    while let Some(lease) = state.lease().unwrap() {
        urls.push(lease.request.url.clone());
        finish(state, lease);
        assert!(urls.len() < 1000, "drain ran away");
    }
    urls
}

#[test]
fn a_record_is_readable_before_and_after_its_commit_and_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let url = "http://a.test/p";
    state
        .put_page(fp(url), record(url, Some(50)), None)
        .unwrap();
    assert_eq!(state.page(&fp(url)).unwrap().unwrap().url, url);
    state.commit().unwrap();
    drop(state);
    let state = open(dir.path());
    assert_eq!(state.page(&fp(url)).unwrap(), Some(record(url, Some(50))));
    assert_eq!(state.page(&fp("http://a.test/other")).unwrap(), None);
}

#[test]
fn the_due_index_follows_the_record_and_is_read_soonest_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    state
        .put_page(
            fp("http://a.test/late"),
            record("http://a.test/late", Some(300)),
            None,
        )
        .unwrap();
    state
        .put_page(
            fp("http://a.test/soon"),
            record("http://a.test/soon", Some(100)),
            None,
        )
        .unwrap();
    state
        .put_page(
            fp("http://a.test/never"),
            record("http://a.test/never", None),
            None,
        )
        .unwrap();
    state.commit().unwrap();
    let due = |state: &State, until| {
        let mut urls = Vec::new();
        state
            .for_each_due(until, |_, r| {
                urls.push(r.url);
                true
            })
            .unwrap();
        urls
    };
    assert_eq!(due(&state, 99), Vec::<String>::new());
    assert_eq!(due(&state, 100), vec!["http://a.test/soon"]);
    assert_eq!(
        due(&state, u64::MAX),
        vec!["http://a.test/soon", "http://a.test/late"]
    );
    // Moving a record moves its index entry: no stale entry is left behind.
    let moved = record("http://a.test/soon", Some(500));
    state
        .put_page(fp("http://a.test/soon"), moved, Some(100))
        .unwrap();
    state.commit().unwrap();
    assert_eq!(due(&state, 400), vec!["http://a.test/late"]);
    assert_eq!(
        due(&state, 500),
        vec!["http://a.test/late", "http://a.test/soon"]
    );
}

#[test]
fn a_cycle_queues_seeds_and_due_pages_once_but_not_future_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    state
        .add_seeds(&["http://a.test/".to_owned()], &[])
        .unwrap();
    assert_eq!(drain(&mut state), vec!["http://a.test/"]);
    // The seed's own record is due too: it must be queued once, as the seed.
    state
        .put_page(
            fp("http://a.test/"),
            record("http://a.test/", Some(10)),
            None,
        )
        .unwrap();
    state
        .put_page(
            fp("http://a.test/due"),
            record("http://a.test/due", Some(10)),
            None,
        )
        .unwrap();
    state
        .put_page(
            fp("http://a.test/later"),
            record("http://a.test/later", Some(90)),
            None,
        )
        .unwrap();
    // A gone page is due when the schedule says it is asked again
    // (`Schedule::gone_due`), and never when it says never.
    let mut gone = record("http://a.test/gone", Some(10));
    gone.gone = true;
    state
        .put_page(fp("http://a.test/gone"), gone, None)
        .unwrap();
    let mut never = record("http://a.test/never", None);
    never.gone = true;
    state
        .put_page(fp("http://a.test/never"), never, None)
        .unwrap();
    state.commit().unwrap();
    let start = state.start_cycle(50, &[], None).unwrap();
    assert_eq!(
        start,
        CycleStart {
            seeds: 1,
            due: 2,
            held: 0,
            parked: 0,
        }
    );
    let mut urls = drain(&mut state);
    urls.sort();
    assert_eq!(
        urls,
        vec!["http://a.test/", "http://a.test/due", "http://a.test/gone"]
    );
}

#[test]
fn a_host_with_queued_requests_gets_nothing_queued_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let seeds = ["http://a.test/".to_owned(), "http://b.test/".to_owned()];
    state.add_seeds(&seeds, &[]).unwrap();
    // Finish a.test's seed only: b.test's stays queued (say its robots.txt failed).
    let lease = state.lease().unwrap().unwrap();
    assert_eq!(lease.request.url, "http://a.test/");
    finish(&mut state, lease);
    let start = state.start_cycle(50, &[], None).unwrap();
    assert_eq!((start.seeds, start.held), (1, 1));
    let mut urls = drain(&mut state);
    urls.sort();
    assert_eq!(
        urls,
        vec!["http://a.test/", "http://b.test/"],
        "b.test once"
    );
}

#[test]
fn a_parked_host_gets_its_seeds_queued_only_once_its_park_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let seeds = [
        "http://a.test/".to_owned(),
        "http://gone.test:81/".to_owned(),
    ];
    state.add_seeds(&seeds, &[]).unwrap();
    drain(&mut state);
    // Parked from the third failed run on, until 1000 then.
    let park = |runs: u32| (runs >= 3).then_some(1000);
    for run in [1, 1, 2, 3] {
        let record = state
            .note_unreachable("gone.test:81", run, 10 * run, "refused", park)
            .unwrap();
        assert_eq!(record.last_run, run);
        // Runs are committed apart (a run notes a host once, with the
        // completion that gave it up).
        state.commit().unwrap();
    }
    let hosts = state.unreachable_hosts().unwrap();
    assert_eq!(hosts.len(), 1);
    let host = &hosts[0];
    assert_eq!(
        (host.runs, host.since, host.parked_until),
        (3, 10, Some(1000))
    );
    assert!(host.parked_at(999) && !host.parked_at(1000));
    let start = state.start_cycle(500, &[], None).unwrap();
    assert_eq!((start.seeds, start.parked), (1, 1));
    assert_eq!(drain(&mut state), vec!["http://a.test/"]);
    let start = state.start_cycle(1000, &[], None).unwrap();
    assert_eq!((start.seeds, start.parked), (2, 0));
    drain(&mut state);
    // An answer forgets the failed runs.
    assert!(state.note_reachable("gone.test:81").unwrap());
    state.commit().unwrap();
    assert!(state.unreachable_hosts().unwrap().is_empty());
    assert!(!state.note_reachable("gone.test:81").unwrap());
}

#[test]
fn a_revisit_request_is_the_stored_one_again() {
    let mut request = Request::get("http://a.test/form");
    request.method = "POST".into();
    request.body = b"q=1".to_vec();
    request.depth = 2;
    request.priority = -1;
    request.referer = Some("http://a.test/".into());
    request.meta.insert("leg".into(), "x".into());
    request.retries = 2;
    let mut r = record("http://a.test/form", None);
    r.request = StoredRequest::of(&request);
    let again = r.revisit_request();
    assert_eq!(again.method, "POST");
    assert_eq!(again.body, b"q=1");
    assert_eq!((again.depth, again.priority, again.retries), (2, -1, 0));
    assert_eq!(again.referer, request.referer);
    assert_eq!(again.meta, request.meta);
    assert!(again.dont_filter);
}

/// Puts `n` due pages `http://a.test/d/<i>` (due at 10) and commits.
fn due_pages(state: &mut State, n: usize) {
    for i in 0..n {
        let url = format!("http://a.test/d/{i}");
        state
            .put_page(fp(&url), record(&url, Some(10)), None)
            .unwrap();
    }
    state.commit().unwrap();
}

#[test]
fn a_queued_due_page_leaves_the_due_index_so_a_second_start_queues_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    due_pages(&mut state, 3);
    assert_eq!(state.start_cycle(50, &[], None).unwrap().due, 3);
    assert_eq!(state.start_cycle(60, &[], None).unwrap().due, 0);
    assert_eq!(state.resume_cycle(&[], None).unwrap(), 0);
    assert_eq!(drain(&mut state).len(), 3);
}

#[test]
fn resume_queues_what_a_cut_short_cycle_start_left_and_nothing_due_since() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    due_pages(&mut state, 2);
    state.start_cycle(50, &[], None).unwrap();
    // As if the start had died between chunks: two more pages due before the
    // cycle started are still in the index; one due at its very second and one
    // due later (fetched in this cycle) must wait for the next cycle.
    for (url, due) in [("http://a.test/x", 5), ("http://a.test/y", 49)] {
        state
            .put_page(fp(url), record(url, Some(due)), None)
            .unwrap();
    }
    for (url, due) in [("http://a.test/now", 50), ("http://a.test/later", 70)] {
        state
            .put_page(fp(url), record(url, Some(due)), None)
            .unwrap();
    }
    state.commit().unwrap();
    drop(state);
    let mut state = open(dir.path());
    assert_eq!(state.resume_cycle(&[], None).unwrap(), 2);
    let mut urls = drain(&mut state);
    urls.sort();
    assert_eq!(
        urls,
        [
            "http://a.test/d/0",
            "http://a.test/d/1",
            "http://a.test/x",
            "http://a.test/y"
        ]
    );
}

/// Worth under a test budget: the number after `/w/` (pages with no number
/// are outside the budget).
fn worth_by_url(record: &PageRecord, _at: u64) -> Option<f64> {
    record
        .url
        .split("/w/")
        .nth(1)
        .map(|n| n.parse::<f64>().unwrap())
}

#[test]
fn a_budget_queues_the_pages_worth_most_due_or_not_and_the_rest_by_due_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    // Worth 0..=9, half due, half not; one worth 0 (never chosen); one worth
    // most but fetched at the cycle's start (worth nothing to it).
    for i in 0..10 {
        let url = format!("http://a.test/w/{i}");
        let due = if i % 2 == 0 { 10 } else { 1000 };
        state
            .put_page(fp(&url), record(&url, Some(due)), None)
            .unwrap();
    }
    let just = "http://a.test/w/99";
    let mut fresh = record(just, Some(10));
    fresh.last_fetched = 50;
    state.put_page(fp(just), fresh, None).unwrap();
    // Outside the budget: queued when due, whatever it spends.
    for (url, due) in [("http://a.test/fixed", 10), ("http://a.test/later", 1000)] {
        state
            .put_page(fp(url), record(url, Some(due)), None)
            .unwrap();
    }
    state.commit().unwrap();
    let budget = crate::store::Budget {
        revisits: 3,
        worth: &worth_by_url,
    };
    let start = state.start_cycle(50, &[], Some(&budget)).unwrap();
    assert_eq!(start.due, 4);
    assert_eq!(
        drain(&mut state),
        [
            "http://a.test/fixed",
            "http://a.test/w/9",
            "http://a.test/w/8",
            "http://a.test/w/7"
        ]
    );
    assert_eq!(state.run_counter("revisit/budgeted"), 3);
    // The budget is spent: a resumed start queues nothing more.
    drop(state);
    let mut state = open(dir.path());
    assert_eq!(state.resume_cycle(&[], Some(&budget)).unwrap(), 0);
    // The next cycle spends it again on what is left, the page fetched at
    // the last cycle's start first.
    let start = state.start_cycle(60, &[], Some(&budget)).unwrap();
    assert_eq!(start.due, 3);
    assert_eq!(
        drain(&mut state),
        [
            "http://a.test/w/99",
            "http://a.test/w/6",
            "http://a.test/w/5"
        ]
    );
}

#[test]
fn top_worth_keeps_the_most_and_breaks_ties_by_fingerprint() {
    let mut top = crate::store::TopWorth::new(3);
    for (worth, byte) in [(1.0, 5), (3.0, 9), (2.0, 4), (3.0, 1), (0.5, 0), (2.0, 2)] {
        top.offer(worth, [byte; 20], byte);
    }
    let kept: Vec<u8> = top.into_best().into_iter().map(|(_, b)| b).collect();
    assert_eq!(kept, [1, 9, 2]);
    let mut none = crate::store::TopWorth::new(0);
    none.offer(1.0, [0; 20], ());
    assert!(none.into_best().is_empty());
}

#[test]
fn keep_due_puts_a_failed_revisit_back_for_the_next_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    due_pages(&mut state, 1);
    state.start_cycle(50, &[], None).unwrap();
    let lease = state.lease().unwrap().unwrap();
    finish(&mut state, lease);
    state.keep_due(&fp("http://a.test/d/0"), 55);
    state.commit().unwrap();
    assert_eq!(
        state.resume_cycle(&[], None).unwrap(),
        0,
        "not again in this cycle"
    );
    assert_eq!(
        state.start_cycle(60, &[], None).unwrap().due,
        1,
        "due next cycle"
    );
}

#[test]
fn binary_page_records_round_trip_and_are_smaller_than_json() {
    let url = "http://a.test/p?q=1";
    let mut plain = record(url, None);
    plain.content_hash = "0123456789abcdef0123456789abcdef01234567".into();
    let mut odd = record(url, Some(9));
    odd.final_url = "http://a.test/elsewhere".into();
    odd.content_hash = "ABC not hex".into();
    odd.request
        .headers
        .push(("Accept".into(), "text/html".into()));
    odd.request.meta.insert("leg".into(), "x".into());
    odd.request.body = b"a=1".to_vec();
    odd.gone = true;
    // Change evidence alone (the parts before it written empty), and after
    // every other part.
    let mut evidence = plain.clone();
    evidence.evidence = crate::store::ChangeEvidence {
        loglik: vec![0, -1, -70_000, i32::MIN],
        why: 3,
    };
    let mut all = evidence.clone();
    all.items = vec![None, Some("x".into())];
    all.legs = 2;
    all.response = Some(crate::store::WarcAt { file: 1, offset: 7 });
    for r in [plain.clone(), odd, evidence, all] {
        let bytes = encode_page(&r);
        assert_eq!(bytes[0], crate::store::pages::PAGE_RECORD_VERSION);
        assert_eq!(decode_page(&bytes).unwrap(), r);
    }
    let (binary, json) = (encode_page(&plain).len(), records::encode(&plain).len());
    assert!(binary * 3 < json, "binary {binary} B, JSON {json} B");
}

#[test]
fn a_corrupt_binary_page_record_is_an_error_not_a_panic() {
    let url = "http://a.test/";
    let good = encode_page(&record(url, Some(5)));
    // Truncated, trailing garbage, a bad hash tag, nothing after the version.
    let mut bad_tag = good.clone();
    // version, url (length, bytes), final_url None, status, etag Some (tag,
    // length, 3 bytes), last_modified None, then the hash tag.
    let tag = 1 + (1 + url.len()) + 1 + 1 + 5 + 1;
    assert_eq!(bad_tag[tag], 0, "layout of the test record");
    bad_tag[tag] = 9;
    let mut trailing = good.clone();
    trailing.push(0);
    for bytes in [
        good[..good.len() / 2].to_vec(),
        trailing,
        bad_tag,
        vec![2],
        vec![1],
    ] {
        assert!(decode_page(&bytes).is_err(), "{bytes:?}");
    }
}

#[test]
fn a_new_revisit_policy_moves_due_times_but_not_a_queued_page_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    due_pages(&mut state, 3);
    let later = "http://a.test/later";
    state
        .put_page(fp(later), record(later, Some(1_000)), None)
        .unwrap();
    state.commit().unwrap();
    // The three due pages are queued by a cycle start: out of the due index.
    assert_eq!(state.start_cycle(50, &[], None).unwrap().due, 3);
    // A policy that makes every page due at 7 moves only the one still indexed.
    assert_eq!(
        state
            .follow_revisit_policy("all-at-7", |_| Some(7))
            .unwrap(),
        1
    );
    assert_eq!(state.page(&fp(later)).unwrap().unwrap().next_due, Some(7));
    assert_eq!(
        state
            .follow_revisit_policy("all-at-7", |_| Some(8))
            .unwrap(),
        0
    );
    // The queued pages are fetched once; the next cycle asks the moved page.
    assert_eq!(drain(&mut state).len(), 3);
    assert_eq!(state.start_cycle(60, &[], None).unwrap().due, 1);
    assert_eq!(drain(&mut state), vec![later]);
    drop(state);
    let mut state = open(dir.path());
    assert_eq!(
        state
            .follow_revisit_policy("all-at-7", |_| Some(9))
            .unwrap(),
        0,
        "recorded"
    );
}

/// The page ids stored, in order, with the fingerprint each names.
fn stored_ids(state: &State) -> Vec<(u64, Fingerprint)> {
    let mut ids = Vec::new();
    for entry in state.db.scan([crate::store::pageblock::PAGE_BY_ID]) {
        let (key, value) = entry.unwrap();
        let block = Block::stored(&state.db, &key, &value).unwrap();
        for (at, (fp, _)) in block.entries.iter().enumerate() {
            ids.push((block.first + at as u64, *fp));
        }
    }
    ids
}

#[test]
fn new_pages_get_ids_in_the_order_they_are_recorded_and_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let urls = ["http://a.test/z", "http://a.test/a", "http://a.test/m"];
    for url in urls {
        state.put_page(fp(url), record(url, Some(5)), None).unwrap();
    }
    // Recorded again in the same group: the same id.
    state
        .put_page(fp(urls[0]), record(urls[0], Some(6)), Some(5))
        .unwrap();
    state.commit().unwrap();
    let expected: Vec<_> = urls
        .iter()
        .enumerate()
        .map(|(i, u)| (i as u64, fp(u)))
        .collect();
    assert_eq!(stored_ids(&state), expected);
    // Recorded again in a later group, and after a reopen: still the same id,
    // and a new page gets the next one.
    state
        .put_page(fp(urls[1]), record(urls[1], Some(7)), Some(5))
        .unwrap();
    state.commit().unwrap();
    drop(state);
    let mut state = open(dir.path());
    state
        .put_page(fp(urls[2]), record(urls[2], Some(8)), Some(5))
        .unwrap();
    let new = "http://a.test/new";
    state.put_page(fp(new), record(new, None), None).unwrap();
    state.commit().unwrap();
    let mut expected = expected;
    expected.push((3, fp(new)));
    assert_eq!(stored_ids(&state), expected);
    let mut visited = Vec::new();
    state
        .for_each_page(|fp, record| {
            visited.push((fp, record.next_due));
            true
        })
        .unwrap();
    assert_eq!(
        visited,
        vec![
            (fp(urls[0]), Some(6)),
            (fp(urls[1]), Some(7)),
            (fp(urls[2]), Some(8)),
            (fp(new), None),
        ]
    );
    // The due index followed every move: one entry per page.
    let mut due = Vec::new();
    let mut from = 0;
    while let Some(unit) = state.pages.next_due(&state.db, from, 100).unwrap() {
        due.extend(unit.fps);
        from = unit.due + 1;
    }
    assert_eq!(due, vec![fp(urls[0]), fp(urls[1]), fp(urls[2])]);
}

#[test]
fn a_damaged_page_entry_or_id_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let (a, b) = ("http://a.test/a", "http://a.test/b");
    state.put_page(fp(a), record(a, None), None).unwrap();
    state.put_page(fp(b), record(b, None), None).unwrap();
    state.commit().unwrap();
    let tree = state.db.tree().clone();
    let entry = keys::with_u64(crate::store::pageblock::PAGE_BY_ID, 0);
    let good = tree.get(&entry).unwrap().unwrap();
    let mut damaged = vec![
        // Another version, a truncated fingerprint, a truncated record.
        {
            let mut v = good.to_vec();
            v[0] = 9;
            v
        },
        good[..10].to_vec(),
        good[..good.len() - 3].to_vec(),
    ];
    for value in damaged.drain(..) {
        tree.insert(&entry, value).unwrap();
        let error = state.page(&fp(a)).unwrap_err();
        assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
        assert!(state.for_each_page(|_, _| true).is_err());
    }
    // An id whose block is gone, or holds another page at that id.
    tree.remove(&entry).unwrap();
    let error = state.page(&fp(a)).unwrap_err().to_string();
    assert!(
        error.contains("page id") && error.contains("no page block"),
        "{error}"
    );
    let mut swapped = Block::decode(0, &good).unwrap();
    swapped.entries.swap(0, 1);
    tree.insert(&entry, swapped.encode()).unwrap();
    let error = state.page(&fp(a)).unwrap_err().to_string();
    assert!(error.contains("another page"), "{error}");
    tree.insert(&entry, good).unwrap();
    assert!(state.page(&fp(a)).unwrap().is_some());
}

#[test]
fn a_new_policy_moves_every_page_once_over_many_chunks() {
    const PAGES: usize = 2_500;
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    for group in 0..5 {
        for i in 0..PAGES / 5 {
            let url = format!("http://a.test/{group}/{i}");
            state
                .put_page(fp(&url), record(&url, Some(10)), None)
                .unwrap();
        }
        state.commit().unwrap();
    }
    const { assert!(PAGES > 2 * POLICY_CHUNK, "more than two chunks") };
    let moved = state
        .follow_revisit_policy("all-at-7", |_| Some(7))
        .unwrap();
    assert_eq!(moved, PAGES as u64);
    let mut visited = HashSet::new();
    state
        .for_each_page(|fp, record| {
            assert_eq!(record.next_due, Some(7), "{}", record.url);
            assert!(visited.insert(fp), "{} visited twice", record.url);
            true
        })
        .unwrap();
    assert_eq!(visited.len(), PAGES);
    let mut due = 0;
    state
        .for_each_due(7, |_, _| {
            due += 1;
            true
        })
        .unwrap();
    assert_eq!(due, PAGES, "one due entry each, at 7");
}

/// The page-id runs listed in the index record, and those on disk.
fn page_id_runs(state: &State) -> (Vec<u64>, Vec<u64>) {
    let index = super::super::pageids::INDEX.get(&state.db, &()).unwrap();
    let listed = index
        .map(|(_, listed)| listed)
        .unwrap_or_default()
        .into_iter()
        .map(|(run, _)| run)
        .collect();
    let mut on_disk =
        super::super::runfile::ids_on_disk(state.dir(), super::super::runfile::Kind::PageIds)
            .unwrap();
    on_disk.sort_unstable();
    (listed, on_disk)
}

#[test]
fn page_ids_are_found_across_checkpoints_merges_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = open(dir.path());
    let mut urls = Vec::new();
    // Seven checkpoints of 40 new pages each (the fourth and the seventh
    // merge a tier), then two groups no checkpoint saw.
    for round in 0..9 {
        for i in 0..40 {
            let url = format!("http://a.test/{round}/{i}");
            state
                .put_page(fp(&url), record(&url, Some(10)), None)
                .unwrap();
            urls.push(url);
        }
        // A page of an earlier round recorded again keeps its id.
        let again = &urls[round * 7];
        let mut revisited = record(again, Some(20));
        revisited.fetches = 2;
        state.put_page(fp(again), revisited, Some(10)).unwrap();
        state.commit().unwrap();
        if round < 7 {
            state.checkpoint().unwrap();
        }
    }
    let (listed, on_disk) = page_id_runs(&state);
    assert!(listed.len() < 7, "tiers merged: {listed:?}");
    assert_eq!(listed, on_disk, "merged runs removed");
    let check = |state: &State| {
        for url in &urls {
            let found = state.page(&fp(url)).unwrap();
            assert_eq!(found.map(|r| r.url), Some(url.clone()), "{url}");
        }
        assert!(state.page(&fp("http://a.test/none")).unwrap().is_none());
        let mut seen = 0;
        state
            .for_each_page(|_, _| {
                seen += 1;
                true
            })
            .unwrap();
        assert_eq!(seen, urls.len(), "one record per page");
    };
    check(&state);
    // Dropped without a checkpoint (as a kill leaves it): the last two
    // rounds' ids are read back from their blocks.
    drop(state);
    let mut state = open(dir.path());
    check(&state);
    let pages = state.db.range(
        vec![crate::store::pageblock::PAGE_BY_ID]..vec![crate::store::pageblock::PAGE_BY_ID + 1],
    );
    let end = pages.map(|e| e.unwrap()).next_back().map(|(k, v)| {
        Block::decode(keys::u64_after_prefix(&k).unwrap(), &v)
            .unwrap()
            .end()
    });
    assert_eq!(end, Some(urls.len() as u64), "no page got a second id");
    state.checkpoint().unwrap();
    drop(state);
    let state = open(dir.path());
    check(&state);
    let (listed, on_disk) = page_id_runs(&state);
    assert_eq!(listed, on_disk);
}
