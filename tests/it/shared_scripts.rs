//! The shared crawl's scripts, one call at a time, against a real
//! `redis-server` (see `support::redis`): fencing (a completion whose lease
//! expired and was leased again writes nothing), a retried completion, leases
//! returned to their place, crawl-wide per-host limits and delays, dedup of
//! links across pages. The worker processes are tested in `shared.rs`; here
//! each rule is checked without timing luck.

use std::time::Duration;

use legcrawl::request::Request;
use legcrawl::shared::client::{Completed, NewRequest, PageCompletion};
use legcrawl::shared::{Shared, SharedTarget};

use crate::support::redis::RedisServer;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn request(url: &str, delay: Duration) -> NewRequest {
    let request = Request::get(url);
    NewRequest {
        host: url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        fingerprint: legcrawl::fingerprint::fingerprint(&request, &[]),
        request,
        delay,
    }
}

fn seed(url: &str) -> NewRequest {
    let mut seed = request(url, Duration::ZERO);
    seed.request.dont_filter = true;
    seed
}

fn item(url: &str) -> String {
    serde_json::json!({ "url": url }).to_string()
}

async fn connect(server: &RedisServer, name: &str, per_host: usize) -> Shared {
    let target = SharedTarget::new(&server.url(), name).expect("target");
    Shared::connect(&target, per_host).await.expect("connect")
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
            matches!(done, Completed::Done { queued: 1, .. }),
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
        assert_eq!(shared.add_seeds(&seeds).await.unwrap(), 4);
        assert_eq!(shared.add_seeds(&seeds).await.unwrap(), 0, "idempotent");
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
                    queued: q,
                    filtered: f,
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
            shared.queue_links("w1", old, &part()).await.unwrap(),
            Some((3, 0))
        );
        // Sent again (its answer lost): found in the seen set.
        assert_eq!(
            shared.queue_links("w1", old, &part()).await.unwrap(),
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

/// A queue member written before members were binary (16 hex digits of
/// sequence, 40 of fingerprint, JSON) is still leased, with its request,
/// after the binary ones of the same priority.
#[test]
fn a_member_written_in_hex_and_json_is_still_leased() {
    let Some(server) = RedisServer::start("shared_scripts::old_member") else {
        return;
    };
    runtime().block_on(async {
        let shared = connect(&server, "old", 4).await;
        shared.add_seeds(&[seed("http://a.test/")]).await.unwrap();
        let old = request("http://a.test/old", Duration::ZERO);
        let fp = legcrawl::fingerprint::to_hex(&old.fingerprint);
        let json = serde_json::to_string(&old.request).unwrap();
        let member = format!("{:016x}{fp}{json}", 1);
        let p = "legcrawl:{old}:";
        for args in [
            vec![
                "ZADD".to_owned(),
                format!("{p}q:a.test"),
                "0".into(),
                member,
            ],
            vec![
                "HINCRBY".into(),
                format!("{p}meta"),
                "frontier".into(),
                "1".into(),
            ],
        ] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            server.command(&args).unwrap();
        }
        let batch = shared
            .lease("w1", 4, Duration::from_secs(30))
            .await
            .unwrap();
        let urls: Vec<&str> = batch
            .leases
            .iter()
            .map(|l| l.request.url.as_str())
            .collect();
        assert_eq!(urls, ["http://a.test/", "http://a.test/old"]);
        assert_eq!(batch.leases[1].request, old.request);
        assert_eq!(batch.frontier, 0);
    });
}
