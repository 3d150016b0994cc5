//! The shared crawl's scripts, one call at a time, against a real
//! `redis-server` (see `support::redis`): fencing (a completion whose lease
//! expired and was leased again writes nothing), a retried completion and a
//! retried lease call (answered with the leases it granted, no more), leases
//! returned to the head of the queue, the queue's order (priority, then first
//! in, first out), crawl-wide per-host limits and delays, dedup of links
//! across pages, and the seen set's buckets split as they fill. The worker
//! processes are tested in `shared.rs`; here each rule is checked without
//! timing luck.

use std::time::Duration;

use legcrawl::shared::client::{Completed, NewRequest, PageCompletion};
use legcrawl::shared::{Shared, SharedTarget};

use crate::support::redis::{RedisServer, Resp};
use crate::support::runtime;
use crate::support::scripts::{request, seed};

fn item(url: &str) -> String {
    serde_json::json!({ "url": url }).to_string()
}

async fn connect(server: &RedisServer, name: &str, per_host: usize) -> Shared {
    let target = SharedTarget::new(&server.url(), name).expect("target");
    Shared::connect(&target, per_host).await.expect("connect")
}

#[test]
fn a_lease_call_retried_after_a_lost_reply_gets_its_leases_back_and_no_more() {
    let Some(server) = RedisServer::start("shared_scripts::lease_retry") else {
        return;
    };
    runtime().block_on(async {
        let shared = connect(&server, "leaseretry", 2).await;
        shared
            .add_seeds(&[seed("http://a.test/"), seed("http://b.test/")])
            .await
            .unwrap();
        let ttl = Duration::from_secs(60);
        let first = shared.lease_named("w1", 1, ttl, "w1:c1").await.unwrap();
        assert_eq!(first.leases.len(), 1);
        let token = first.leases[0].token;
        // The reply was lost; the same call again finds the same lease.
        let again = shared.lease_named("w1", 1, ttl, "w1:c1").await.unwrap();
        assert_eq!(again.leases.len(), 1);
        assert_eq!(again.leases[0].token, token);
        assert_eq!(again.leases[0].request.url, first.leases[0].request.url);
        assert_eq!((again.live, again.frontier), (1, 1), "nothing more leased");
        // Another worker naming the same call gets nothing of w1's.
        let other = shared.lease_named("w2", 1, ttl, "w1:c1").await.unwrap();
        assert!(other.leases.is_empty());
        // A new call leases the other request.
        let next = shared.lease_named("w1", 1, ttl, "w1:c2").await.unwrap();
        assert_eq!(next.leases.len(), 1);
        assert_ne!(next.leases[0].request.url, first.leases[0].request.url);
        // Once completed, the lease is no longer given back.
        let page = PageCompletion {
            token,
            ..PageCompletion::default()
        };
        assert!(matches!(
            shared.complete("w1", &page).await.unwrap(),
            Completed::Done { .. }
        ));
        let late = shared.lease_named("w1", 1, ttl, "w1:c1").await.unwrap();
        assert!(late.leases.is_empty());
    });
}

#[test]
fn a_completion_whose_lease_expired_and_was_leased_again_writes_nothing() {
    let Some(server) = RedisServer::start("shared_scripts::fencing") else {
        return;
    };
    runtime().block_on(async {
        let shared = connect(&server, "fencing", 2).await;
        shared.add_seeds(&[seed("http://a.test/")]).await.unwrap();
        let ttl = Duration::from_millis(200);
        let first = shared.lease("w1", 4, ttl).await.unwrap();
        assert_eq!(first.leases.len(), 1);
        let old = first.leases[0].token;
        // w1 stalls past its TTL; w2's lease call reclaims and re-leases.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let second = shared
            .lease("w2", 4, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(second.expired, 1, "the expired lease was reclaimed");
        assert_eq!(second.leases.len(), 1);
        let new = second.leases[0].token;
        assert!(new > old, "fencing tokens only grow: {old} then {new}");
        assert_eq!(second.leases[0].request.url, "http://a.test/");
        let page = |token, url: &str| PageCompletion {
            token,
            items: vec![item(url)],
            requests: vec![request("http://a.test/next", Duration::ZERO)],
            ..PageCompletion::default()
        };
        assert_eq!(
            shared.complete("w1", &page(old, "stale")).await.unwrap(),
            Completed::Stale,
            "the stale completion is refused"
        );
        let done = shared.complete("w2", &page(new, "fresh")).await.unwrap();
        assert!(
            matches!(
                done,
                Completed::Done {
                    queued: legcrawl::shared::client::Queued { queued: 1, .. },
                    ..
                }
            ),
            "{done:?}"
        );
        // The same completion again (its answer lost): recognised, not redone.
        assert_eq!(
            shared.complete("w2", &page(new, "fresh")).await.unwrap(),
            Completed::Already
        );
        let mut items = Vec::new();
        shared
            .for_each_item(|_, text| {
                items.push(text.to_owned());
                true
            })
            .await
            .unwrap();
        assert_eq!(items, vec![item("fresh")], "exactly the live lease's items");
        let summary = shared.summary().await.unwrap();
        assert_eq!(summary.frontier, 1, "the stale completion queued nothing");
        assert_eq!(summary.in_flight, 0);
        assert_eq!(summary.fetches, 1);
    });
}

#[test]
fn a_returned_lease_goes_back_to_its_place_and_per_host_limits_hold_across_workers() {
    let Some(server) = RedisServer::start("shared_scripts::places") else {
        return;
    };
    runtime().block_on(async {
        // One request in flight per host, whoever asks.
        let shared = connect(&server, "places", 1).await;
        let seeds: Vec<NewRequest> = (0..3)
            .map(|i| seed(&format!("http://a.test/{i}")))
            .chain([seed("http://b.test/")])
            .collect();
        assert_eq!(shared.add_seeds(&seeds).await.unwrap().queued, 4);
        assert_eq!(
            shared.add_seeds(&seeds).await.unwrap().queued,
            0,
            "idempotent"
        );
        let ttl = Duration::from_secs(30);
        let w1 = shared.lease("w1", 8, ttl).await.unwrap();
        let mut urls: Vec<&str> = w1.leases.iter().map(|l| l.request.url.as_str()).collect();
        urls.sort();
        assert_eq!(urls, ["http://a.test/0", "http://b.test/"], "one per host");
        let w2 = shared.lease("w2", 8, ttl).await.unwrap();
        assert!(w2.leases.is_empty(), "both hosts are at their limit");
        assert_eq!(w2.live, 2);
        assert_eq!(w2.frontier, 2);
        // w1 stops: its leases go back, a.test/0 ahead of a.test/1 again.
        let tokens: Vec<u64> = w1.leases.iter().map(|l| l.token).collect();
        assert_eq!(shared.release("w1", &tokens).await.unwrap(), 2);
        let w2 = shared.lease("w2", 8, ttl).await.unwrap();
        let a = w2.leases.iter().find(|l| l.host == "a.test").unwrap();
        assert_eq!(a.request.url, "http://a.test/0", "back in its place");
        // Another worker cannot return w2's lease.
        assert_eq!(shared.release("w1", &[a.token]).await.unwrap(), 0);
    });
}

#[test]
fn the_delay_holds_between_starts_of_different_workers() {
    let Some(server) = RedisServer::start("shared_scripts::delay") else {
        return;
    };
    runtime().block_on(async {
        let shared = connect(&server, "delay", 4).await;
        let delay = Duration::from_millis(300);
        let mut seeds: Vec<NewRequest> = (0..2)
            .map(|i| request(&format!("http://c.test/{i}"), delay))
            .collect();
        for s in &mut seeds {
            s.request.dont_filter = true;
        }
        shared.add_seeds(&seeds).await.unwrap();
        let ttl = Duration::from_secs(30);
        let w1 = shared.lease("w1", 8, ttl).await.unwrap();
        assert_eq!(w1.leases.len(), 1, "one start, then the host waits");
        let w2 = shared.lease("w2", 8, ttl).await.unwrap();
        assert!(w2.leases.is_empty(), "the delay is the crawl's, not w1's");
        let wait = w2.wait.expect("a host is waiting");
        assert!(
            wait > Duration::from_millis(200) && wait <= delay,
            "the next start is a delay after the first: {wait:?}"
        );
        tokio::time::sleep(wait + Duration::from_millis(20)).await;
        let w2 = shared.lease("w2", 8, ttl).await.unwrap();
        assert_eq!(w2.leases.len(), 1, "after the delay, the next one");
    });
}

#[test]
fn links_found_by_several_pages_are_queued_once() {
    let Some(server) = RedisServer::start("shared_scripts::dedup") else {
        return;
    };
    runtime().block_on(async {
        let shared = connect(&server, "dedup", 4).await;
        let seeds = [seed("http://d.test/1"), seed("http://d.test/2")];
        shared.add_seeds(&seeds).await.unwrap();
        let leases = shared
            .lease("w", 8, Duration::from_secs(30))
            .await
            .unwrap()
            .leases;
        assert_eq!(leases.len(), 2);
        let links = || -> Vec<NewRequest> {
            ["http://d.test/x", "http://d.test/y", "http://d.test/1"]
                .map(|u| request(u, Duration::ZERO))
                .into()
        };
        let mut queued = 0;
        let mut filtered = 0;
        for lease in &leases {
            let page = PageCompletion {
                token: lease.token,
                requests: links(),
                ..PageCompletion::default()
            };
            match shared.complete("w", &page).await.unwrap() {
                Completed::Done {
                    queued:
                        legcrawl::shared::client::Queued {
                            queued: q,
                            filtered: f,
                            ..
                        },
                    ..
                } => {
                    queued += q;
                    filtered += f;
                }
                other => panic!("{other:?}"),
            }
        }
        // x and y once; the seed's own URL was seen when it was stored.
        assert_eq!((queued, filtered), (2, 4));
        let summary = shared.summary().await.unwrap();
        assert_eq!(summary.seen, 4);
        assert_eq!(summary.frontier, 2);
    });
}

#[test]
fn a_part_of_a_pages_links_is_queued_only_under_a_live_lease_and_once() {
    let Some(server) = RedisServer::start("shared_scripts::parts") else {
        return;
    };
    runtime().block_on(async {
        let shared = connect(&server, "parts", 4).await;
        shared.add_seeds(&[seed("http://p.test/")]).await.unwrap();
        let ttl = Duration::from_millis(200);
        let old = shared.lease("w1", 1, ttl).await.unwrap().leases[0].token;
        let part = || -> Vec<NewRequest> {
            (0..3)
                .map(|k| request(&format!("http://p.test/{k}"), Duration::ZERO))
                .collect()
        };
        assert_eq!(
            shared
                .queue_links("w1", old, &part())
                .await
                .unwrap()
                .map(|q| (q.queued, q.filtered)),
            Some((3, 0))
        );
        // Sent again (its answer lost): found in the seen set.
        assert_eq!(
            shared
                .queue_links("w1", old, &part())
                .await
                .unwrap()
                .map(|q| (q.queued, q.filtered)),
            Some((0, 3))
        );
        // Another worker cannot queue under w1's lease.
        let other = vec![request("http://p.test/other", Duration::ZERO)];
        assert_eq!(shared.queue_links("w2", old, &other).await.unwrap(), None);
        // w1 stalls past its TTL; w2 reclaims the page: w1's next part is refused.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let again = shared
            .lease("w2", 1, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(again.leases[0].request.url, "http://p.test/");
        assert_eq!(shared.queue_links("w1", old, &other).await.unwrap(), None);
        let summary = shared.summary().await.unwrap();
        assert_eq!(
            summary.frontier, 3,
            "the three links, and nothing after the lease was lost"
        );
        assert_eq!(summary.seen, 4);
    });
}

fn with_priority(url: &str, priority: i32) -> NewRequest {
    let mut r = request(url, Duration::ZERO);
    r.request.priority = priority;
    r.fingerprint = legcrawl::fingerprint::fingerprint(&r.request, &[]);
    r
}

fn urls(batch: &legcrawl::shared::client::LeaseBatch) -> Vec<&str> {
    batch
        .leases
        .iter()
        .map(|l| l.request.url.as_str())
        .collect()
}

/// A host's queue (lists per priority): the highest priority first, first in,
/// first out within one; leases returned go back to the head of their
/// priority in the order they were leased, and one that expired comes out
/// next; `dump`'s frontier lists the queue in the same order.
#[test]
fn the_queue_leases_higher_priorities_first_fifo_within_one_and_returned_leases_first() {
    let Some(server) = RedisServer::start("shared_scripts::order") else {
        return;
    };
    runtime().block_on(async {
        let shared = connect(&server, "order", 16).await;
        shared.add_seeds(&[seed("http://o.test/")]).await.unwrap();
        let ttl = Duration::from_secs(30);
        let page = shared.lease("w", 1, ttl).await.unwrap().leases[0].token;
        let links = vec![
            with_priority("http://o.test/a0", 0),
            with_priority("http://o.test/b5", 5),
            with_priority("http://o.test/c0", 0),
            with_priority("http://o.test/d5", 5),
            with_priority("http://o.test/e-1", -1),
            with_priority("http://o.test/f5", 5),
            with_priority("http://o.test/g0", 0),
        ];
        let done = PageCompletion {
            token: page,
            requests: links,
            ..PageCompletion::default()
        };
        assert!(matches!(
            shared.complete("w", &done).await.unwrap(),
            Completed::Done {
                queued: legcrawl::shared::client::Queued { queued: 7, .. },
                ..
            }
        ));
        let order = [
            "http://o.test/b5",
            "http://o.test/d5",
            "http://o.test/f5",
            "http://o.test/a0",
            "http://o.test/c0",
            "http://o.test/g0",
            "http://o.test/e-1",
        ];
        let head = shared.frontier_head(100).await.unwrap();
        let listed: Vec<(&str, u64)> = head
            .iter()
            .map(|q| (q.request.url.as_str(), q.place))
            .collect();
        let expected: Vec<(&str, u64)> = order.iter().copied().zip(1..).collect();
        assert_eq!(listed, expected, "dump's frontier, in lease order");

        // Two leased and returned: back at the head, in their order.
        let two = shared.lease("w", 2, ttl).await.unwrap();
        assert_eq!(urls(&two), order[..2]);
        let tokens: Vec<u64> = two.leases.iter().map(|l| l.token).collect();
        assert_eq!(shared.release("w", &tokens).await.unwrap(), 2);
        // Three more; the first one expires (the others are renewed): it is
        // the next one leased.
        let three = shared
            .lease("w", 3, Duration::from_millis(200))
            .await
            .unwrap();
        assert_eq!(urls(&three), order[..3]);
        tokio::time::sleep(Duration::from_millis(400)).await;
        let keep: Vec<u64> = three.leases[1..].iter().map(|l| l.token).collect();
        assert_eq!(shared.renew("w", ttl, "{}", &keep).await.unwrap(), 2);
        let next = shared.lease("w2", 1, ttl).await.unwrap();
        assert_eq!(next.expired, 1);
        assert_eq!(urls(&next), order[..1], "the expired lease comes out first");
        let rest = shared.lease("w2", 16, ttl).await.unwrap();
        assert_eq!(urls(&rest), order[3..], "then the rest, in order");
        assert_eq!(rest.frontier, 0);
        let summary = shared.summary().await.unwrap();
        assert_eq!(summary.frontier, 0);
        assert_eq!(summary.in_flight, 7);
    });
}

/// The seen set in buckets split as they fill (linear hashing, `lua/common.lua`):
/// 20,000 fingerprints force splits over many levels; every one is still
/// found (sent again, all are filtered; `dump seen`'s lookup finds each), one
/// never added is not, the count is exact, and every bucket stays a listpack
/// below 128 fields, as many buckets as the level and split pointer say.
#[test]
fn the_seen_set_splits_its_buckets_and_keeps_every_fingerprint() {
    let Some(server) = RedisServer::start("shared_scripts::seen_split") else {
        return;
    };
    const N: usize = 20_000;
    runtime().block_on(async {
        let shared = connect(&server, "split", 4).await;
        shared.add_seeds(&[seed("http://s.test/")]).await.unwrap();
        let token = shared
            .lease("w", 1, Duration::from_secs(60))
            .await
            .unwrap()
            .leases[0]
            .token;
        let links: Vec<NewRequest> = (0..N)
            .map(|i| request(&format!("http://s.test/{i}"), Duration::ZERO))
            .collect();
        assert_eq!(
            shared
                .queue_links("w", token, &links)
                .await
                .unwrap()
                .map(|q| (q.queued, q.filtered)),
            Some((N as u64, 0))
        );
        assert_eq!(
            shared
                .queue_links("w", token, &links)
                .await
                .unwrap()
                .map(|q| (q.queued, q.filtered)),
            Some((0, N as u64)),
            "every fingerprint is found again"
        );
        let summary = shared.summary().await.unwrap();
        assert_eq!(summary.seen, N as u64 + 1, "seen_count is exact");
        assert_eq!(summary.frontier, N as u64);
        for link in links.iter().step_by(7) {
            assert!(
                shared.seen(&link.fingerprint).await.unwrap().0,
                "{}",
                link.request.url
            );
        }
        let never = request("http://s.test/never", Duration::ZERO);
        assert!(!shared.seen(&never.fingerprint).await.unwrap().0);
    });
    let field = |name: &str| -> u64 {
        server
            .command(&["HGET", "legcrawl:{split}:meta", name])
            .unwrap()
            .text()
            .unwrap_or_default()
            .parse()
            .unwrap_or(0)
    };
    let (level, split) = (field("seen_level"), field("seen_split"));
    assert!(level >= 9, "several levels of splits: level {level}");
    let buckets = server.keys("legcrawl:{split}:s:*");
    assert_eq!(
        buckets.len() as u64,
        (1 << level) + split,
        "one key a bucket"
    );
    let mut total = 0;
    for bucket in &buckets {
        let Resp::Int(len) = server.command(&["HLEN", bucket]).unwrap() else {
            panic!("HLEN {bucket}");
        };
        assert!(len <= 127, "{bucket} holds {len} fields");
        let encoding = server.command(&["OBJECT", "ENCODING", bucket]).unwrap();
        assert_eq!(encoding.text().as_deref(), Some("listpack"), "{bucket}");
        total += len;
    }
    assert_eq!(total, N as i64 + 1, "each fingerprint once, in one bucket");
}

/// A host whose robots.txt failed three times in a row is parked (its lists
/// set aside, out of the frontier count) and a worker's start brings them
/// back, ahead of the requests of their priority queued since, whichever of
/// the two lists is the longer (`concat_lists` moves the shorter).
#[test]
fn a_parked_queue_comes_back_ahead_of_what_was_queued_since() {
    let Some(server) = RedisServer::start("shared_scripts::park") else {
        return;
    };
    runtime().block_on(async {
        // Three in flight per host: the fourth request of x and the fourth to
        // sixth of z stay queued when their hosts are parked.
        let shared = connect(&server, "park", 3).await;
        let seeds: Vec<NewRequest> = (1..=4)
            .map(|i| seed(&format!("http://x.test/{i}")))
            .chain((1..=6).map(|i| seed(&format!("http://z.test/{i}"))))
            .chain([seed("http://y.test/")])
            .collect();
        assert_eq!(shared.add_seeds(&seeds).await.unwrap().queued, 11);
        let ttl = Duration::from_secs(30);
        let leased = shared.lease("w", 16, ttl).await.unwrap();
        assert_eq!(leased.leases.len(), 7, "three of x, three of z, y");
        assert_eq!(leased.frontier, 4);
        for lease in leased.leases.iter().filter(|l| l.host != "y.test") {
            let failed = PageCompletion {
                token: lease.token,
                robots_answered: Some(false),
                ..PageCompletion::default()
            };
            assert!(matches!(
                shared.complete("w", &failed).await.unwrap(),
                Completed::Done { .. }
            ));
        }
        let summary = shared.summary().await.unwrap();
        assert_eq!(summary.parked_hosts, 2);
        assert_eq!(
            summary.frontier, 0,
            "parked requests are out of the frontier"
        );
        assert!(shared.frontier_head(100).await.unwrap().is_empty());
        // y's page links both hosts again, at two priorities.
        let y = leased.leases.iter().find(|l| l.host == "y.test").unwrap();
        let links = vec![
            with_priority("http://x.test/5", 0),
            with_priority("http://x.test/6", 0),
            with_priority("http://x.test/7", 3),
            with_priority("http://z.test/7", 0),
        ];
        let page = PageCompletion {
            token: y.token,
            requests: links,
            ..PageCompletion::default()
        };
        assert!(matches!(
            shared.complete("w", &page).await.unwrap(),
            Completed::Done {
                queued: legcrawl::shared::client::Queued { queued: 4, .. },
                ..
            }
        ));
        assert_eq!(shared.unpark().await.unwrap(), 4, "x/4 and z/4 to z/6");
        let summary = shared.summary().await.unwrap();
        assert_eq!((summary.parked_hosts, summary.frontier), (0, 8));
        let head: Vec<String> = shared
            .frontier_head(100)
            .await
            .unwrap()
            .into_iter()
            .map(|q| q.request.url)
            .collect();
        let path = |u: &str| u.trim_start_matches("http://").to_owned();
        assert_eq!(
            head.iter().map(|u| path(u)).collect::<Vec<_>>(),
            [
                "x.test/7", "x.test/4", "x.test/5", "x.test/6", "z.test/4", "z.test/5", "z.test/6",
                "z.test/7"
            ],
            "per host: priority first, then the parked requests ahead"
        );
        let all = shared.lease("w", 16, ttl).await.unwrap();
        assert_eq!(all.leases.len(), 6, "three per host");
        assert_eq!(all.frontier, 2);
    });
    assert!(
        server.keys("legcrawl:{park}:parked*").is_empty(),
        "nothing stays set aside"
    );
}
