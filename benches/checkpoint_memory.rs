//! Memory of checkpoints as the exact seen set grows: a state in a temp dir
//! takes rounds of 2^20 new URLs (four times the journal size at which a checkpoint is due),
//! each followed by a checkpoint, so size-tiered merges of ever larger runs
//! happen (after rounds 4, 8, 12, ...). After each checkpoint it prints the
//! process's anonymous memory now (`RssAnon`) and its peak resident set
//! (`VmHWM`) from /proc/self/status, and how long the checkpoint took.
//!
//! A merge that reads whole runs into memory makes the peak grow with the seen
//! set (20 bytes per fingerprint merged, plus the copy); a streamed one keeps
//! it flat. Run: `cargo bench --bench checkpoint_memory` (about a minute);
//! `CHECKPOINT_BENCH_ROUNDS` (default 8). Depends on the public API of
//! `legcrawl::store` only; the temp dir is removed at the end.

use std::time::Instant;

use anyhow::Context;
use legcrawl::request::Request;
use legcrawl::store::{OpenOptions, State};

#[path = "support/status.rs"]
mod status;
use status::status_kib;

/// URLs per round (a checkpoint is due after 2^18; each round ends with one).
const ROUND: u64 = 1 << 20;

fn main() -> anyhow::Result<()> {
    let rounds: u64 = std::env::var("CHECKPOINT_BENCH_ROUNDS")
        .ok()
        .map(|v| v.parse())
        .transpose()
        .context("CHECKPOINT_BENCH_ROUNDS is not a number")?
        .unwrap_or(8);
    let dir = tempfile::Builder::new()
        .prefix("legcrawl-checkpoint-memory-")
        .tempdir()?;
    let options = OpenOptions {
        create: true,
        bloom_bits: Some(28),
        ..OpenOptions::default()
    };
    let mut state = State::open(&dir.path().join("state"), &options)?;
    println!("round  seen (M)  checkpoint s  RssAnon MiB  VmHWM MiB");
    for round in 0..rounds {
        for n in round * ROUND..(round + 1) * ROUND {
            // Hosts spread the queue; the URL makes each fingerprint new.
            let url = format!("http://h{}.test/{n}", n % 64);
            state.enqueue(&Request::get(url), &[])?;
            if n % 4096 == 4095 {
                state.commit()?;
            }
        }
        state.commit()?;
        let started = Instant::now();
        state.checkpoint()?;
        let took = started.elapsed().as_secs_f64();
        println!(
            "{:>5}  {:>8.1}  {:>12.2}  {:>11.0}  {:>9.0}",
            round + 1,
            ((round + 1) * ROUND) as f64 / 1e6,
            took,
            status_kib("self", "RssAnon:")? as f64 / 1024.0,
            status_kib("self", "VmHWM:")? as f64 / 1024.0,
        );
    }
    Ok(())
}
