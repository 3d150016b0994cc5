//! The `calls` scenario of `benches/shared.rs` (issue 25, item 4): the
//! longest single script call, in milliseconds of server time as Redis's
//! SLOWLOG reports it (every call logged: `slowlog-log-slower-than 0`), for
//! 200,000 seeds stored, a cycle start of 200,000 seeds, and a page of
//! 200,000 links completed — each through the library's calls, which send
//! [`legcrawl::shared::client::SCRIPT_CHUNK`] requests per call.
//!
//! Memory (issue 25, item 8): Redis's `used_memory` before and after the page
//! of links is completed, divided by the links queued: the bytes one queued
//! request costs, frontier and seen set together (the bound: 150 B). The
//! links are as the bundled link leg makes them (`Request::follow`: depth 1,
//! the page's URL as referer), on URLs of 42 to 47 bytes. `MEMORY USAGE`
//! (exact: `SAMPLES 0`) summed over the host's queue (its lists `q:a.test:*`
//! and `qp:a.test`) and over the seen set's buckets (`s:*`), each found by
//! `SCAN`, splits it.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use legcrawl::request::Request;
use legcrawl::shared::client::{CycleKind, NewRequest, PageCompletion};
use legcrawl::shared::{Shared, SharedTarget};

use super::redis::{RedisServer, Resp};

/// Requests per operation (`SHARED_BENCH_CALLS`, default 200,000).
fn size() -> anyhow::Result<usize> {
    super::env_usize("SHARED_BENCH_CALLS", 200_000)
}

fn request(url: String, seed: bool) -> NewRequest {
    let mut request = Request::get(url);
    request.dont_filter = seed;
    NewRequest {
        host: "a.test".into(),
        fingerprint: legcrawl::fingerprint::fingerprint(&request, &[]),
        request,
        delay: Duration::ZERO,
    }
}

/// A link found on the page `parent`, as the link leg makes it.
fn link(parent: &Request, url: String) -> NewRequest {
    let request = Request::follow(parent, url);
    NewRequest {
        host: "a.test".into(),
        fingerprint: legcrawl::fingerprint::fingerprint(&request, &[]),
        request,
        delay: Duration::ZERO,
    }
}

/// An integer field of `INFO memory`.
fn info_memory(redis: &RedisServer, field: &str) -> anyhow::Result<u64> {
    let info = redis
        .command(&["INFO", "memory"])?
        .text()
        .context("INFO answered no text")?;
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|n| n.trim().parse().ok())
        .with_context(|| format!("INFO memory has no {field}"))
}

/// `MEMORY USAGE KEY SAMPLES 0` (every element counted), in bytes; 0 when
/// the key does not exist.
fn key_memory(redis: &RedisServer, key: &str) -> anyhow::Result<u64> {
    match redis.command(&["MEMORY", "USAGE", key, "SAMPLES", "0"])? {
        Resp::Int(n) => Ok(n.max(0) as u64),
        Resp::Bulk(None) => Ok(0),
        other => anyhow::bail!("MEMORY USAGE {key} answered {other:?}"),
    }
}

/// `MEMORY USAGE` summed over the keys matching `pattern` (found by `SCAN`),
/// and how many there are.
fn keys_memory(redis: &RedisServer, pattern: &str) -> anyhow::Result<(u64, usize)> {
    let keys = redis.keys(pattern);
    let mut bytes = 0;
    for key in &keys {
        bytes += key_memory(redis, key)?;
    }
    Ok((bytes, keys.len()))
}

/// The longest command Redis's latency monitor saw (ms, whole: `LATENCY
/// LATEST`, event `command`, threshold 1 ms), a second reading of the same;
/// the monitor is reset.
fn latency_max(redis: &RedisServer) -> anyhow::Result<i64> {
    let latest = redis.command(&["LATENCY", "LATEST"])?;
    redis.command(&["LATENCY", "RESET"])?;
    let Resp::Array(Some(events)) = latest else {
        return Ok(0);
    };
    Ok(events
        .iter()
        .filter_map(|e| match e {
            Resp::Array(Some(f))
                if f.first().and_then(Resp::text).as_deref() == Some("command") =>
            {
                match f.get(3) {
                    Some(Resp::Int(max)) => Some(*max),
                    _ => None,
                }
            }
            _ => None,
        })
        .max()
        .unwrap_or(0))
}

/// The longest EVAL/EVALSHA in the SLOWLOG (µs) and how many entries it
/// holds; the log is emptied.
fn longest_call(redis: &RedisServer) -> anyhow::Result<(i64, usize)> {
    let Resp::Array(Some(entries)) = redis.command(&["SLOWLOG", "GET", "-1"])? else {
        anyhow::bail!("SLOWLOG GET answered no array");
    };
    redis.command(&["SLOWLOG", "RESET"])?;
    let mut longest = 0;
    let mut calls = 0;
    for entry in &entries {
        let Resp::Array(Some(fields)) = entry else {
            continue;
        };
        let (Some(Resp::Int(us)), Some(Resp::Array(Some(args)))) = (fields.get(2), fields.get(3))
        else {
            continue;
        };
        let name = args.first().and_then(Resp::text).unwrap_or_default();
        if name.eq_ignore_ascii_case("evalsha") || name.eq_ignore_ascii_case("eval") {
            calls += 1;
            longest = longest.max(*us);
        }
    }
    Ok((longest, calls))
}

/// Memory per queued request: one seed stored and leased, then a page of `n`
/// links completed, on a crawl of its own, before the SLOWLOG is set to log
/// every call (it would hold each call's arguments, and count in
/// `used_memory`). Prints one line; the crawl's keys are deleted after.
async fn memory(redis: &RedisServer, n: usize) -> anyhow::Result<()> {
    let target = SharedTarget::new(&redis.url(), "memory").map_err(anyhow::Error::msg)?;
    let shared = Shared::connect(&target, 4).await?;
    ensure!(
        shared
            .add_seeds(&[request("http://a.test/".into(), true)])
            .await?
            .queued
            == 1
    );
    let lease = shared.lease("bench", 1, Duration::from_secs(600)).await?;
    let leased = lease.leases.first().context("no lease")?;
    let page = PageCompletion {
        token: leased.token,
        requests: (0..n)
            .map(|i| {
                link(
                    &leased.request,
                    format!("http://a.test/articles/2026/12/page-{i}.html"),
                )
            })
            .collect(),
        ..Default::default()
    };
    // The host's queue: its lists (q:a.test:PRIO) and priorities (qp:a.test).
    let queue = |redis: &RedisServer| -> anyhow::Result<u64> {
        let (lists, _) = keys_memory(redis, "legcrawl:{memory}:q:a.test:*")?;
        Ok(lists + key_memory(redis, "legcrawl:{memory}:qp:a.test")?)
    };
    let seen = "legcrawl:{memory}:s:*";
    let (queue_before, (seen_before, _)) = (queue(redis)?, keys_memory(redis, seen)?);
    let before = info_memory(redis, "used_memory")?;
    shared.complete("bench", &page).await?;
    let after = info_memory(redis, "used_memory")?;
    let (seen_after, buckets) = keys_memory(redis, seen)?;
    let per = |bytes: u64| bytes as f64 / n as f64;
    println!(
        "memory per queued request: {:.1} B (used_memory {before} -> {after}, {n} links); queue {:.1} B, seen set {:.1} B in {buckets} buckets (MEMORY USAGE)",
        per(after.saturating_sub(before)),
        per(queue(redis)?.saturating_sub(queue_before)),
        per(seen_after.saturating_sub(seen_before)),
    );
    redis.command(&["FLUSHALL"])?;
    Ok(())
}

/// Only the memory line (`SHARED_BENCH_ONLY=memory`), on a fresh server.
pub fn memory_only() -> anyhow::Result<()> {
    let n = size()?;
    let redis = RedisServer::start("benches/shared memory").context("redis-server not found")?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(memory(&redis, n))
}

/// Runs the scenario on a fresh server and prints one row per operation.
pub fn run() -> anyhow::Result<()> {
    let n = size()?;
    let redis = RedisServer::start("benches/shared calls").context("redis-server not found")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(memory(&redis, n))?;
    for (k, v) in [
        ("slowlog-log-slower-than", "0"),
        ("slowlog-max-len", "1000000"),
        ("latency-monitor-threshold", "1"),
    ] {
        redis.command(&["CONFIG", "SET", k, v])?;
    }
    println!(
        "{:<34} {:>9} {:>7} {:>12} {:>11} {:>9}",
        "calls: operation", "requests", "logged", "longest ms", "latency ms", "total s"
    );
    let row = |what: &str, took: Duration| -> anyhow::Result<()> {
        // The latency monitor first: reading a long SLOWLOG is itself slow.
        let latency = latency_max(&redis)?;
        let (longest, logged) = longest_call(&redis)?;
        println!(
            "{what:<34} {n:>9} {logged:>7} {:>12.2} {latency:>11} {:>9.2}",
            longest as f64 / 1000.0,
            took.as_secs_f64()
        );
        Ok(())
    };
    runtime.block_on(async {
        let target = SharedTarget::new(&redis.url(), "calls").map_err(anyhow::Error::msg)?;
        let shared = Shared::connect(&target, 4).await?;
        let seeds: Vec<NewRequest> = (0..n)
            .map(|i| request(format!("http://a.test/s/{i}"), true))
            .collect();
        longest_call(&redis)?;
        latency_max(&redis)?;
        let started = Instant::now();
        ensure!(shared.add_seeds(&seeds).await?.queued == n as u64);
        row("seeds stored", started.elapsed())?;

        let lease = shared.lease("bench", 1, Duration::from_secs(600)).await?;
        let token = lease.leases.first().context("no lease")?.token;
        longest_call(&redis)?;
        latency_max(&redis)?;
        let parent = &lease.leases.first().context("no lease")?.request;
        let page = PageCompletion {
            token,
            requests: (0..n)
                .map(|i| {
                    link(
                        parent,
                        format!("http://a.test/articles/2026/12/page-{i}.html"),
                    )
                })
                .collect(),
            ..Default::default()
        };
        let started = Instant::now();
        shared.complete("bench", &page).await?;
        let took = started.elapsed();
        row("a page of links completed", took)?;

        // Drained, as at the end of a cycle: the queue emptied (UNLINK frees it
        // in the background), the counters at zero.
        let mut drained = redis.keys("legcrawl:{calls}:q:a.test:*");
        drained.extend(
            ["qp:a.test", "ready", "leases"].map(|key| format!("legcrawl:{{calls}}:{key}")),
        );
        for key in &drained {
            redis.command(&["UNLINK", key])?;
        }
        redis.command(&["HSET", "legcrawl:{calls}:meta", "frontier", "0"])?;
        longest_call(&redis)?;
        latency_max(&redis)?;
        let cycle: Vec<(CycleKind, NewRequest)> =
            seeds.into_iter().map(|s| (CycleKind::Seed, s)).collect();
        let started = Instant::now();
        let queued = shared
            .queue_cycle(1, true, None, &cycle)
            .await?
            .map(|q| q.queued);
        shared.seeded(2).await?;
        ensure!(queued == Some(n as u64), "cycle queued {queued:?}");
        row("a cycle's seeds queued", started.elapsed())?;
        Ok::<_, anyhow::Error>(())
    })
}
