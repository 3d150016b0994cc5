use std::time::Duration;

use super::*;
use crate::config::RevisitRule;

const DAY: u64 = 86_400;

fn schedule(default: Revisit, rules: &[(&str, Revisit)]) -> Schedule {
    let config = CrawlConfig {
        revisit: default,
        revisit_rules: rules
            .iter()
            .map(|(pattern, revisit)| RevisitRule {
                pattern: (*pattern).to_owned(),
                revisit: *revisit,
            })
            .collect(),
        ..CrawlConfig::default()
    };
    Schedule::new(&config).unwrap()
}

fn seen(status: u16, body: &str) -> Observation {
    Observation {
        status,
        final_url: "http://a.test/p".into(),
        etag: Some("\"v1\"".into()),
        last_modified: None,
        content_hash: content_hash(body.as_bytes()),
        fetched_at: 0,
        // As the fetcher sees it by default: 4xx and 5xx are error answers.
        error: status >= 400,
        fresh_for: None,
    }
}

/// An error answer whose status the crawl keeps (`--keep-status`).
fn kept(status: u16, body: &str) -> Observation {
    Observation {
        error: false,
        ..seen(status, body)
    }
}

fn request() -> Request {
    Request::get("http://a.test/p")
}

#[test]
fn first_fetch_is_new_version_one_due_after_the_initial_interval_minus_margin() {
    let s = schedule(Revisit::nutch(), &[]);
    let (record, change) = s.record(None, &request(), &seen(200, "a"), 1000);
    assert_eq!(change, Change::New);
    assert_eq!(record.version, 1);
    assert_eq!(record.fetches, 1);
    assert_eq!(record.interval, DAY);
    // One day, one hour early at most (10 % of a day is more than an hour).
    assert_eq!(record.next_due, Some(1000 + DAY - 3600));
    assert_eq!(record.etag.as_deref(), Some("\"v1\""));
}

#[test]
fn adaptive_interval_grows_when_unchanged_and_shrinks_when_changed_within_bounds() {
    let s = schedule(Revisit::nutch(), &[]);
    let (r1, _) = s.record(None, &request(), &seen(200, "a"), 0);
    let (r2, c2) = s.record(Some(&r1), &request(), &seen(200, "a"), DAY);
    assert_eq!(c2, Change::Unchanged);
    assert_eq!(r2.interval, (DAY as f64 * GROW).round() as u64);
    assert_eq!(r2.version, 1);
    let (r3, c3) = s.record(Some(&r2), &request(), &seen(200, "b"), 2 * DAY);
    assert_eq!(c3, Change::Changed);
    assert_eq!(r3.version, 2);
    assert_eq!(r3.changes, 1);
    assert_eq!(r3.interval, (r2.interval as f64 * SHRINK).round() as u64);
    // Many unchanged fetches stop at the maximum; many changes at the minimum.
    let mut r = r3.clone();
    for i in 0..40 {
        r = s
            .record(Some(&r), &request(), &seen(200, "b"), 3 * DAY + i)
            .0;
    }
    assert_eq!(r.interval, 30 * DAY);
    for i in 0..60 {
        let body = format!("change {i}");
        r = s
            .record(Some(&r), &request(), &seen(200, &body), 4 * DAY + i)
            .0;
    }
    assert_eq!(r.interval, 3600);
}

#[test]
fn not_modified_keeps_content_and_validators_and_counts_the_fetch() {
    let s = schedule(Revisit::After(Duration::from_secs(100)), &[]);
    let (r1, _) = s.record(None, &request(), &seen(200, "a"), 0);
    let mut confirm = seen(304, "");
    confirm.etag = None;
    let (r2, change) = s.record(Some(&r1), &request(), &confirm, 500);
    assert_eq!(change, Change::NotModified);
    assert_eq!(r2.status, 200);
    assert_eq!(r2.content_hash, r1.content_hash);
    assert_eq!(r2.etag, r1.etag);
    assert_eq!(r2.fetches, 2);
    assert_eq!(r2.last_fetched, 500);
    assert_eq!(r2.next_due, Some(500 + 100 - 10));
}

#[test]
fn rules_pick_the_first_match_and_every_run_and_never_work() {
    let s = schedule(
        Revisit::Never,
        &[
            ("/feed", Revisit::EveryRun),
            ("/f", Revisit::After(Duration::from_secs(7))),
        ],
    );
    assert_eq!(s.policy("http://a.test/feed.xml"), Revisit::EveryRun);
    assert_eq!(
        s.policy("http://a.test/faq"),
        Revisit::After(Duration::from_secs(7))
    );
    let hub = Request::get("http://a.test/feed.xml");
    let (r, _) = s.record(None, &hub, &seen(200, "x"), 50);
    assert_eq!(r.next_due, Some(50));
    let (r, _) = s.record(None, &request(), &seen(200, "x"), 50);
    assert_eq!(r.next_due, None);
}

#[test]
fn gone_after_a_410_or_two_404s_in_a_row_keeping_the_last_good_content() {
    let s = schedule(Revisit::EveryRun, &[]);
    let (r1, _) = s.record(None, &request(), &seen(200, "a"), 0);
    let (r2, c2) = s.record(Some(&r1), &request(), &seen(404, "nope"), 1);
    assert_eq!(c2, Change::Gone);
    assert_eq!(c2.counter(), "pages/gone");
    assert!(!c2.stores_items());
    assert!(!r2.gone);
    assert_eq!((r2.status, r2.missing), (404, 1));
    // An error answer is not the page's content.
    assert_eq!((&r2.content_hash, r2.version), (&r1.content_hash, 1));
    assert_eq!(r2.next_due, Some(1));
    let (r3, c3) = s.record(Some(&r2), &request(), &seen(404, "nope"), 2);
    assert_eq!(c3, Change::Gone);
    assert!(r3.gone);
    // Every run is this policy's longest interval: asked again next run.
    assert_eq!(r3.next_due, Some(2));
    assert_eq!(s.due(&r3), Some(2));
    let (g, _) = s.record(Some(&r1), &request(), &seen(410, ""), 1);
    assert!(g.gone);
    // Restored with the same content: unchanged, and no longer missing.
    let (back, change) = s.record(Some(&r3), &request(), &seen(200, "a"), 3);
    assert_eq!(change, Change::Unchanged);
    assert_eq!((back.missing, back.gone, back.version), (0, false, 1));
}

#[test]
fn a_gone_page_is_asked_again_after_the_longest_interval_of_its_policy() {
    let day = 86_400;
    let adaptive = Revisit::Adaptive {
        initial: Duration::from_secs(day),
        min: Duration::from_secs(3600),
        max: Duration::from_secs(30 * day),
    };
    let s = schedule(adaptive, &[("/never", Revisit::Never)]);
    let (r1, _) = s.record(None, &request(), &seen(200, "a"), 0);
    let (g, _) = s.record(Some(&r1), &request(), &seen(410, ""), 100);
    let due = 100 + 30 * day - MAX_EARLY.as_secs();
    assert_eq!((g.next_due, s.due(&g)), (Some(due), Some(due)));
    let never = Request::get("http://a.test/never");
    let (n1, _) = s.record(None, &never, &seen(200, "a"), 0);
    let (ng, _) = s.record(Some(&n1), &never, &seen(410, ""), 100);
    assert_eq!((ng.next_due, s.due(&ng)), (None, None));
}

#[test]
fn an_error_answer_to_a_new_page_leaves_it_new_for_its_first_good_answer() {
    let s = schedule(Revisit::nutch(), &[]);
    let (r, c) = s.record(None, &request(), &seen(403, "forbidden"), 5);
    assert_eq!(c, Change::Error);
    assert_eq!(c.counter(), "fetch/failed");
    assert_eq!((r.status, r.fetches, r.version, r.missing), (403, 0, 0, 0));
    assert_eq!(r.next_due, Some(5));
    let (good, change) = s.record(Some(&r), &request(), &seen(200, "a"), 6);
    assert_eq!(change, Change::New);
    assert_eq!((good.fetches, good.version), (1, 1));
}

#[test]
fn a_kept_error_status_is_content_like_a_2xx() {
    let s = schedule(Revisit::EveryRun, &[]);
    let (r1, _) = s.record(None, &request(), &seen(200, "a"), 0);
    let (r2, c2) = s.record(Some(&r1), &request(), &kept(404, "nope"), 1);
    assert_eq!(c2, Change::Changed);
    assert_eq!((r2.version, r2.missing, r2.gone), (2, 1, false));
    let (r3, c3) = s.record(Some(&r2), &request(), &kept(404, "nope"), 2);
    assert_eq!(c3, Change::Unchanged);
    assert!(r3.gone);
}

#[test]
fn conditional_headers_follow_the_validators() {
    let s = schedule(Revisit::EveryRun, &[]);
    let mut o = seen(200, "a");
    o.last_modified = Some("Wed, 21 Oct 2015 07:28:00 GMT".into());
    let (r, _) = s.record(None, &request(), &o, 0);
    let headers = conditional_headers(&r);
    assert_eq!(headers.len(), 2);
    assert_eq!(headers[0], ("If-None-Match".into(), "\"v1\"".into()));
    o.etag = None;
    o.last_modified = None;
    let (r, _) = s.record(None, &request(), &o, 0);
    assert!(conditional_headers(&r).is_empty());
}

#[test]
fn a_bad_rule_names_its_pattern() {
    let config = CrawlConfig {
        revisit_rules: vec![RevisitRule {
            pattern: "(".into(),
            revisit: Revisit::Never,
        }],
        ..CrawlConfig::default()
    };
    let error = Schedule::new(&config).unwrap_err().to_string();
    assert!(error.starts_with("revisit rule \"(\""), "{error}");
    assert!(error.ends_with("unclosed group"), "{error}");
    assert!(!error.contains('\n'), "one line: {error}");
}

#[test]
fn the_stored_request_drops_conditional_headers() {
    let mut request = request();
    request.headers.push(("If-None-Match".into(), "x".into()));
    request.headers.push(("X-Keep".into(), "y".into()));
    request.depth = 3;
    let s = schedule(Revisit::EveryRun, &[]);
    let (r, _) = s.record(None, &request, &seen(200, "a"), 0);
    let again = r.revisit_request();
    assert_eq!(again.headers, vec![("X-Keep".to_owned(), "y".to_owned())]);
    assert_eq!(again.depth, 3);
    assert!(again.dont_filter);
}

#[test]
fn a_redirect_to_a_page_due_or_fetched_this_run_is_not_followed_again() {
    let request = Request::get("http://a.test/p");
    let every = schedule(Revisit::EveryRun, &[]);
    let (record, _) = every.record(None, &request, &seen(200, "a"), 1000);
    assert!(!redirect_is_redundant(None, 2000, 1500), "unknown target");
    assert!(redirect_is_redundant(Some(&record), 2000, 1500), "due");
    let daily = schedule(Revisit::After(Duration::from_secs(DAY)), &[]);
    let (record, _) = daily.record(None, &request, &seen(200, "a"), 1000);
    assert!(!redirect_is_redundant(Some(&record), 2000, 1500), "not due");
    assert!(redirect_is_redundant(Some(&record), 2000, 999), "this run");
    assert!(
        !redirect_is_redundant(Some(&record), 2000, 1000),
        "maybe the last run"
    );
    let (gone, _) = every.record(None, &request, &seen(410, "gone"), 1000);
    assert!(!redirect_is_redundant(Some(&gone), 2000, 500), "gone");
}

#[test]
fn due_under_the_same_policy_is_the_due_time_the_fetch_set() {
    let policies = [
        Revisit::EveryRun,
        Revisit::After(Duration::from_secs(7200)),
        Revisit::Never,
        Revisit::nutch(),
    ];
    for policy in policies {
        let schedule = schedule(policy, &[]);
        let (first, _) = schedule.record(None, &request(), &seen(200, "a"), 1_000);
        assert_eq!(schedule.due(&first), first.next_due, "{policy:?}");
        let (second, _) = schedule.record(Some(&first), &request(), &seen(200, "b"), 90_000);
        assert_eq!(schedule.due(&second), second.next_due, "{policy:?}");
    }
    // Another policy recomputes from the last fetch: every run is due at once.
    let adaptive = schedule(Revisit::nutch(), &[]);
    let (record, _) = adaptive.record(None, &request(), &seen(200, "a"), 1_000);
    assert_eq!(schedule(Revisit::EveryRun, &[]).due(&record), Some(1_000));
    assert_ne!(
        adaptive.describe(),
        schedule(Revisit::EveryRun, &[]).describe()
    );
}

fn from_sitemap(lastmod: u64) -> Request {
    let mut request = request();
    request
        .meta
        .insert(LASTMOD_META.to_owned(), lastmod.to_string());
    request
}

#[test]
fn a_sitemap_lastmod_older_than_the_fetch_makes_the_page_not_due() {
    let every_run = schedule(Revisit::EveryRun, &[]);
    let (record, _) = every_run.record(None, &from_sitemap(500), &seen(200, "a"), 1_000);
    assert_eq!(record.next_due, None, "lastmod 500 < fetch 1000");
    assert_eq!(every_run.due(&record), None);
    assert!(Schedule::lastmod_settles(&record));
    // A 304 through the revisit request keeps the lastmod, and not-due.
    let (again, change) = every_run.record(
        Some(&record),
        &record.revisit_request(),
        &seen(304, ""),
        2_000,
    );
    assert_eq!(change, Change::NotModified);
    assert_eq!(again.request.meta[LASTMOD_META], "500");
    assert_eq!(again.next_due, None);
    // Fetched again through a plain link: the kept lastmod still holds.
    let (linked, _) = every_run.record(Some(&again), &request(), &seen(200, "b"), 3_000);
    assert_eq!(linked.request.meta[LASTMOD_META], "500");
    assert_eq!(linked.next_due, None);
    // A lastmod no older than the fetch: the policy decides.
    let (fresh, _) = every_run.record(None, &from_sitemap(1_000), &seen(200, "a"), 1_000);
    assert_eq!(fresh.next_due, Some(1_000));
    // Without lastmod, as before.
    let (plain, _) = every_run.record(None, &request(), &seen(200, "a"), 1_000);
    assert_eq!(plain.next_due, Some(1_000));
}

#[test]
fn a_newer_sitemap_lastmod_makes_a_known_page_due() {
    let every_run = schedule(Revisit::EveryRun, &[]);
    let (record, _) = every_run.record(None, &from_sitemap(500), &seen(200, "a"), 1_000);
    assert!(!lastmod_makes_due(Some(&record), &from_sitemap(999)));
    assert!(lastmod_makes_due(Some(&record), &from_sitemap(1_000)));
    assert!(lastmod_makes_due(Some(&record), &from_sitemap(5_000)));
    assert!(
        !lastmod_makes_due(None, &from_sitemap(5_000)),
        "unknown page"
    );
    assert!(!lastmod_makes_due(Some(&record), &request()), "no lastmod");
    let failed = Schedule::failed(&request(), 0, 1_000);
    assert!(!lastmod_makes_due(Some(&failed), &from_sitemap(5_000)));
}

#[test]
fn freshness_comes_from_max_age_else_expires_and_not_from_no_cache() {
    let date = "Wed, 01 May 2024 10:00:00 GMT";
    let later = "Wed, 01 May 2024 12:00:00 GMT";
    assert_eq!(
        fresh_for(Some("public, max-age=600"), None, None, 0),
        Some(600)
    );
    assert_eq!(
        fresh_for(Some("max-age=600, s-maxage=60"), None, None, 0),
        Some(60)
    );
    assert_eq!(
        fresh_for(Some("max-age=\"90\""), Some(later), Some(date), 0),
        Some(90)
    );
    assert_eq!(fresh_for(None, Some(later), Some(date), 0), Some(7200));
    assert_eq!(
        fresh_for(Some("no-cache, max-age=600"), None, None, 0),
        None
    );
    assert_eq!(
        fresh_for(Some("no-store"), Some(later), Some(date), 0),
        None
    );
    assert_eq!(fresh_for(Some("max-age=0"), None, None, 0), None);
    assert_eq!(fresh_for(None, Some("0"), None, 5), None);
    assert_eq!(fresh_for(None, None, None, 5), None);
}

#[test]
fn the_estimated_policy_waits_out_a_long_freshness_lifetime_within_its_maximum() {
    let s = schedule(Revisit::default(), &[]);
    let fresh = |secs| Observation {
        fresh_for: Some(secs),
        ..seen(200, "a")
    };
    let (plain, _) = s.record(None, &request(), &seen(200, "a"), 0);
    let (long, _) = s.record(None, &request(), &fresh(10 * DAY), 0);
    assert_eq!(long.next_due, Some(10 * DAY));
    assert!(plain.next_due < long.next_due);
    assert_eq!(why_word(&long), "expires");
    // Worked out again from the record (a new policy moves due times), the
    // lifetime still holds, as early as any due time may be.
    let again = s.due(&long).expect("due");
    assert!((10 * DAY - 3600..=10 * DAY).contains(&again), "{again}");
    // A short lifetime changes nothing; a year is cut to the policy's 30 days.
    let (short, _) = s.record(None, &request(), &fresh(600), 0);
    assert_eq!(short.next_due, plain.next_due);
    let (year, _) = s.record(None, &request(), &fresh(365 * DAY), 0);
    assert_eq!(year.next_due, Some(30 * DAY));
    // Other policies keep their own intervals.
    let every = schedule(Revisit::EveryRun, &[]);
    let (r, _) = every.record(None, &request(), &fresh(10 * DAY), 0);
    assert_eq!(r.next_due, Some(0));
}
