//! What sled 0.34 keeps in anonymous memory for the shapes of keys the state
//! wrote up to format 3, against its cache setting: the frontier bench's crawl
//! phase grew its `RssAnon` with the pages it fetched, and this bench isolated
//! the part sled's own bookkeeping played in that (it is why format 4 keeps no
//! sled entry per page: page ids left sled, the due index became chunks).
//!
//! Each case runs in a child process of its own (this binary again, with the
//! case in its arguments and the binary's jemalloc options in
//! `_RJEM_MALLOC_CONF`) on a fresh database in a temp dir, inserting keys in
//! batches of 64 (a commit group) with a flush every 4,096, and reports the
//! growth of its `RssAnon` (from /proc/self/status) over the open database's
//! at five points. The shapes:
//! - `due`: 29-byte keys ordered by "second" (8,000 keys a second) and random
//!   within it, empty values: the due index of format 3 (`v`);
//! - `id`: 21-byte random keys with 9-byte values: the page ids of format 3 (`f`);
//! - `block`: 9-byte sequential keys with 4 KiB values: page blocks (`P`),
//!   one per twenty pages.
//!
//! Run: `cargo bench --bench sled_memory` (about three minutes);
//! `SLED_BENCH_KEYS` sets the number of small keys (default 2,000,000; blocks
//! are a twentieth of it). Nothing touches the network; temp dirs are removed.

use std::process::Command;

use anyhow::{Context, bail};

/// Options the legcrawl binary compiles in (src/main.rs): the same allocator
/// behaviour as a crawl.
const MALLOC_CONF: &str = "narenas:1,dirty_decay_ms:1000,muzzy_decay_ms:0";

#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[path = "support/status.rs"]
mod status;

fn rss_anon_kib() -> anyhow::Result<u64> {
    status::status_kib("self", "RssAnon:")
}

/// The `i`th key and value of `shape`; `x` is the step's random number.
fn entry(shape: &str, i: u64, x: u64) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    Ok(match shape {
        "due" => {
            let mut key = vec![b'v'];
            key.extend_from_slice(&(i / 8_000).to_be_bytes());
            key.extend_from_slice(&x.to_be_bytes());
            key.extend_from_slice(&[0; 12]);
            (key, Vec::new())
        }
        "id" => {
            let mut key = vec![b'f'];
            key.extend_from_slice(&x.to_be_bytes());
            key.extend_from_slice(&[1; 12]);
            (key, vec![1; 9])
        }
        "block" => {
            let mut key = vec![b'P'];
            key.extend_from_slice(&i.to_be_bytes());
            (key, vec![7; 4096])
        }
        other => bail!("unknown shape {other:?}"),
    })
}

/// One case, in this process: prints `keys growth_kib` lines.
fn child(shape: &str, keys: u64, cache_mib: u64) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = sled::Config::new()
        .path(dir.path())
        .cache_capacity(cache_mib << 20)
        .open()?;
    let base = rss_anon_kib()?;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut batch = sled::Batch::default();
    for i in 0..keys {
        // xorshift64: the same keys in every run.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (key, value) = entry(shape, i, x)?;
        batch.insert(key, value);
        if i % 64 == 63 {
            db.apply_batch(std::mem::take(&mut batch))?;
        }
        if i % 4096 == 4095 {
            db.flush()?;
        }
        if (i + 1) % (keys / 5).max(1) == 0 {
            println!("{} {}", i + 1, rss_anon_kib()?.saturating_sub(base));
        }
    }
    db.flush()?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, shape, keys, cache] = args.as_slice()
        && flag == "--case"
    {
        return child(shape, keys.parse()?, cache.parse()?);
    }
    let keys: u64 = match std::env::var("SLED_BENCH_KEYS") {
        Ok(value) => value.parse().context("SLED_BENCH_KEYS")?,
        Err(_) => 2_000_000,
    };
    println!(
        "sled_memory: RssAnon growth over the open database, MiB, at a fifth of the keys each"
    );
    println!("{:<6} {:>9} {:>9}  growth", "shape", "keys", "cache");
    for (shape, keys) in [("due", keys), ("id", keys), ("block", keys / 20)] {
        for cache_mib in [4u64, 16, 64] {
            let exe = std::env::current_exe()?;
            let output = Command::new(exe)
                .args(["--case", shape, &keys.to_string(), &cache_mib.to_string()])
                .env("_RJEM_MALLOC_CONF", MALLOC_CONF)
                .output()?;
            if !output.status.success() {
                bail!(
                    "case {shape} {cache_mib} MiB failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            let growth: Vec<String> = String::from_utf8(output.stdout)?
                .lines()
                .filter_map(|line| line.split_once(' '))
                .map(|(_, kib)| format!("{:.0}", kib.parse::<f64>().unwrap_or(f64::NAN) / 1024.0))
                .collect();
            println!(
                "{shape:<6} {keys:>9} {:>6} MiB  {}",
                cache_mib,
                growth.join(" / ")
            );
        }
    }
    Ok(())
}
