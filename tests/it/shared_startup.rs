//! Issue 25, item 7: the first SIGTERM (or SIGINT) stops a shared worker while
//! it is still starting — connecting to Redis and joining the crawl — with
//! exit 130, without waiting for a second signal or for start-up to give up.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::cli;
use crate::support::hosts::{MultiSite, args, fixed};
use crate::support::redis::{RedisServer, Resp};
use crate::support::wait_until;
use crate::support::workers::{Crawl, serial};

/// A "Redis" that accepts connections and never answers holds the worker in
/// its start-up (the connection's handshake waits up to 10 s): SIGTERM stops
/// it there at once, exit 130, one line saying so.
#[test]
fn sigterm_while_connecting_to_a_silent_redis_exits_130_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    // Holds every connection open, never answering; ends with the test.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut crawl = Crawl::new(&format!("redis://127.0.0.1:{port}/0"), "startup");
    let slot = crawl.spawn(&["http://127.0.0.2:9/"]);
    wait_until("the worker's connection", Duration::from_secs(20), || {
        accepted.load(Ordering::SeqCst) > 0
    });
    std::thread::sleep(Duration::from_millis(200));
    cli::signal(crawl.pid(slot), libc::SIGTERM);
    let sent = Instant::now();
    let status = crawl.wait(slot, Duration::from_secs(30));
    let took = sent.elapsed();
    let log = crawl.log(slot);
    assert_eq!(status.code(), Some(130), "{log}");
    assert!(took < Duration::from_secs(3), "exit took {took:?}: {log}");
    assert!(log.contains("stopped while joining"), "{log}");
}

/// Against a real Redis, a worker given SIGTERM once it has connected (so
/// while it joins, queues its seeds, or has just started fetching) exits 130
/// promptly after that one signal.
#[test]
fn sigterm_right_after_a_worker_connects_exits_130() {
    let _serial = serial();
    let Some(redis) = RedisServer::start("sigterm_right_after_a_worker_connects") else {
        return;
    };
    let site = MultiSite::start(400, 2, 7, fixed(50));
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "4"]);
    let clients = || match redis.command(&["INFO", "clients"]) {
        Ok(Resp::Bulk(Some(info))) => String::from_utf8_lossy(&info)
            .lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0),
        _ => 0,
    };
    let mut crawl = Crawl::new(&redis.url(), "startup");
    for delay_ms in [0, 5, 20, 60] {
        let slot = crawl.spawn(&argv);
        // The INFO connection itself counts as one client.
        wait_until("the worker's connection", Duration::from_secs(20), || {
            clients() > 1
        });
        std::thread::sleep(Duration::from_millis(delay_ms));
        cli::signal(crawl.pid(slot), libc::SIGTERM);
        let sent = Instant::now();
        let status = crawl.wait(slot, Duration::from_secs(30));
        let took = sent.elapsed();
        let log = crawl.log(slot);
        assert_eq!(
            status.code(),
            Some(130),
            "{delay_ms} ms after connecting: {log}"
        );
        assert!(
            took < Duration::from_secs(5),
            "{delay_ms} ms after connecting: exit took {took:?}: {log}"
        );
        assert!(
            !log.contains("quitting now"),
            "one signal was enough: {log}"
        );
        wait_until(
            "the worker's connection to close",
            Duration::from_secs(20),
            || clients() <= 1,
        );
    }
}
