//! Named crash points: every step at which the state writes or syncs has a name,
//! and a test can make the process abort exactly there.
//!
//! With `LEGCRAWL_CRASH_AT=NAME:N` in the environment the process calls
//! [`std::process::abort`] at the `N`th time it reaches the point `NAME` (counted
//! from 1 in this process). For the disk, an abort is the same as `kill -9`: what
//! was written stays in the page cache, what was not is lost, no destructor runs.
//! With `LEGCRAWL_CRASH_TRACE=FILE`, each point reached appends its name to `FILE`
//! (one line per hit), so a suite can learn how often a scenario reaches each
//! point before it crashes there. Without either variable a point costs one
//! atomic load.
//!
//! [`POINTS`] is the one table of points; `tests` (`crash_tests.rs`) checks that
//! every write or sync call of the store, the Bloom file, the output sink and the
//! WARC writer is preceded by a point named in it. Depends on nothing else in the
//! crate.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// One named step at which the state writes or syncs.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// The name given to `LEGCRAWL_CRASH_AT`.
    pub name: &'static str,
    /// What has happened, and what has not, when the process aborts there.
    pub before: &'static str,
}

/// Every crash point, in the order a crawl reaches them.
pub const POINTS: &[Point] = &[
    Point {
        name: "create.begin",
        before: "a new state directory gets its `creating` marker",
    },
    Point {
        name: "create.bloom",
        before: "bloom.bin is created (after the `creating` marker)",
    },
    Point {
        name: "create.meta",
        before: "the metadata record is written and synced",
    },
    Point {
        name: "create.marker",
        before: "the final marker replaces the `creating` one",
    },
    Point {
        name: "open.replay",
        before: "the journal left by the last run sets its Bloom bits again, on open",
    },
    Point {
        name: "state.open",
        before: "an open that found the state whole marks it open in `durable`, so that the next open tells a crash from another program's write",
    },
    Point {
        name: "run.close_dead",
        before: "runs left running by a dead process are marked killed",
    },
    Point {
        name: "run.job",
        before: "a changed job is put, as its next version, into the batch that begins the run using it (the change lines are printed; nothing is written)",
    },
    Point {
        name: "run.begin",
        before: "the new run's record (with a new job version, if any) is written and synced",
    },
    Point {
        name: "output.watermark",
        before: "an --output path without a cursor gets its first (for a path new to this state, the current end of the item store), written and synced before a line is written",
    },
    Point {
        name: "output.cursor",
        before: "on open, the cursor of an --output path this state wrote is written and synced before a line is written: moved past the lines found after it, or restarted on a file that was missing, replaced or truncated",
    },
    Point {
        name: "warc.truncate",
        before: "a WARC file longer than its mark (records of completions that were not durable, a torn record) is cut back to it, on open",
    },
    Point {
        name: "warc.create",
        before: "a new WARC file is registered (length 0, synced) before it is created, or a file registered by a build before file ids gets its id",
    },
    Point {
        name: "cycle.start",
        before: "the batch holding a new cycle's start time is committed",
    },
    Point {
        name: "cycle.budget",
        before: "a chunk of the pages a revisit budget chose is committed as queued, with the budget left",
    },
    Point {
        name: "warc.append",
        before: "a completed page's WARC records (or a group's robots.txt records) are written to the open WARC file",
    },
    Point {
        name: "warc.sync",
        before: "the WARC file is synced, on the flush thread, before the batch holding its mark is applied",
    },
    Point {
        name: "links.chunk",
        before: "a part of a page's links (not its last) is queued in the open group; the parts before it are sealed or durable, the page's completion is not (only a page with more than LINK_CHUNK links reaches it)",
    },
    Point {
        name: "group.apply",
        before: "a sealed group's batch (queue, items, journal, page records, robots, blocked, counters) is applied",
    },
    Point {
        name: "group.sync",
        before: "an applied group is synced to disk",
    },
    Point {
        name: "group.durable",
        before: "the durable record (items and pages the synced group leaves) is written and synced",
    },
    Point {
        name: "bloom.set",
        before: "a durable group's fingerprints set their Bloom bits (leases still held, output not written)",
    },
    Point {
        name: "output.truncate",
        before: "a torn last line of the --output file is cut off, on open",
    },
    Point {
        name: "output.append",
        before: "durable items are appended to the --output file",
    },
    Point {
        name: "output.advance",
        before: "the cursor of the lines just appended to the --output file is written into the database, unsynced, because the open group holds nothing to carry it (the next sync makes it durable)",
    },
    Point {
        name: "status.write",
        before: "status.json is replaced",
    },
    Point {
        name: "snapshot.write",
        before: "snapshot.json (what `serve` shows) is replaced, about once a second and at the end of a run",
    },
    Point {
        name: "checkpoint.gc",
        before: "run files no index references (merged, or orphaned by a crash) are removed",
    },
    Point {
        name: "checkpoint.msync",
        before: "the Bloom bits of durable groups are synced",
    },
    Point {
        name: "checkpoint.run",
        before: "a part of a new exact run's file is written (not referenced yet)",
    },
    Point {
        name: "checkpoint.run_sync",
        before: "a new exact run's file is complete (header written) and is synced with its directory (not referenced yet)",
    },
    Point {
        name: "checkpoint.index",
        before: "the run index switches to the new run and the journal it covers is removed, in one batch",
    },
    Point {
        name: "checkpoint.sync",
        before: "the checkpoint's batches are synced",
    },
    Point {
        name: "checkpoint.header",
        before: "the Bloom header is marked clean with its ones count",
    },
    Point {
        name: "run.end",
        before: "the run's end record is written",
    },
    Point {
        name: "status.remove",
        before: "status.json is removed at the end of a crawl",
    },
    Point {
        name: "state.snapshot",
        before: "the close of a crawl whose run did not fail opens the database once more, so that sled writes its snapshot (the next open then reads only that, not the run's whole log)",
    },
    Point {
        name: "state.close",
        before: "a clean close records what the database files look like (in `durable`)",
    },
    Point {
        name: "bloom.grow",
        before: "a sized Bloom filter whose estimated false-positive rate passed the target is rebuilt larger from the exact set under a temporary name, when a checkpoint is due (see `sizing`)",
    },
    Point {
        name: "bloom.grow.switch",
        before: "the grown Bloom file is renamed over bloom.bin (the old one holds every durable fingerprint until then, the new one from then on)",
    },
    Point {
        name: "repair.trial",
        before: "a copy of db/ is made and opened, to check a database whose files changed since the last clean close while no process of ours had it open (another program's write, a copy put back)",
    },
    Point {
        name: "repair.snapshot",
        before: "a snapshot file sled was writing when its process died (`db/snap.LSN.generating`, never renamed) is removed before sled opens (only a process that died inside sled's open leaves one)",
    },
    Point {
        name: "repair.bloom",
        before: "a damaged bloom.bin's replacement is built under a temporary name (exact mode; only a damaged state or `repair` reaches it)",
    },
    Point {
        name: "repair.switch",
        before: "the rebuilt Bloom file is renamed over bloom.bin (only a damaged state or `repair` reaches it)",
    },
    Point {
        name: "repair.ids_index",
        before: "the page-id index record lists the run files rebuilt from the page blocks (after they were synced; only a damaged page-id run or `repair` reaches it)",
    },
];

/// Points only a damaged state or `legcrawl repair` reaches: the crash-point
/// suite's crawls never do (the damage tests crash at them instead).
pub fn repair_only(name: &str) -> bool {
    name.starts_with("repair.")
}

/// Points only a sized Bloom filter that outgrows its size reaches: the
/// crash-point suite's filter never does (`tests/it/bloom_size.rs` crashes
/// at them).
pub fn growth_only(name: &str) -> bool {
    name.starts_with("bloom.grow")
}

/// Points only a cycle with a revisit budget reaches: the crash-point suite
/// has none (`tests/it/revisit_budget.rs` crashes at them).
pub fn budget_only(name: &str) -> bool {
    name == "cycle.budget"
}

/// Points only a page with more than [`crate::store::LINK_CHUNK`] links reaches: the
/// crash-point suite's site has none (`tests/it/dense.rs` crashes at them).
pub fn dense_page_only(name: &str) -> bool {
    name == "links.chunk"
}

/// The environment variable naming a point and a hit count.
pub const CRASH_AT_ENV: &str = "LEGCRAWL_CRASH_AT";
/// The environment variable naming a file that records every hit.
pub const TRACE_ENV: &str = "LEGCRAWL_CRASH_TRACE";

struct Plan {
    /// `(point, hit)` to abort at.
    abort_at: Option<(String, u64)>,
    /// Hits of that point so far.
    hits: AtomicU64,
    /// Where hits are recorded.
    trace: Option<std::sync::Mutex<std::fs::File>>,
}

fn plan() -> Option<&'static Plan> {
    static PLAN: OnceLock<Option<Plan>> = OnceLock::new();
    PLAN.get_or_init(read_plan).as_ref()
}

fn read_plan() -> Option<Plan> {
    let abort_at = std::env::var(CRASH_AT_ENV).ok().and_then(|spec| {
        let parsed = parse(&spec);
        if parsed.is_none() {
            // A mistyped plan must not pass for a crash that did not happen.
            let _ = writeln!(
                std::io::stderr(),
                "legcrawl: ignoring {CRASH_AT_ENV}={spec:?}: expected NAME:N with NAME one of the crash points"
            );
        }
        parsed
    });
    let trace = std::env::var_os(TRACE_ENV).and_then(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(std::sync::Mutex::new)
    });
    (abort_at.is_some() || trace.is_some()).then(|| Plan {
        abort_at,
        hits: AtomicU64::new(0),
        trace,
    })
}

/// `NAME:N` (N ≥ 1, NAME in [`POINTS`]), or `NAME` for the first hit.
fn parse(spec: &str) -> Option<(String, u64)> {
    let (name, hit) = match spec.rsplit_once(':') {
        Some((name, n)) => (name, n.parse().ok().filter(|&n| n >= 1)?),
        None => (spec, 1),
    };
    POINTS
        .iter()
        .any(|p| p.name == name)
        .then(|| (name.to_owned(), hit))
}

/// Reached the point `name` (one of [`POINTS`]): aborts if the environment asks
/// for this hit of it, records the hit if a trace is asked for.
#[inline]
pub fn point(name: &'static str) {
    debug_assert!(
        POINTS.iter().any(|p| p.name == name),
        "crash point {name} is not in POINTS"
    );
    if let Some(plan) = plan() {
        hit(plan, name);
    }
}

#[cold]
fn hit(plan: &Plan, name: &'static str) {
    if let Some(trace) = &plan.trace
        && let Ok(mut file) = trace.lock()
    {
        let _ = writeln!(file, "{name}");
    }
    if let Some((at, n)) = &plan.abort_at
        && at == name
        && plan.hits.fetch_add(1, Ordering::SeqCst) + 1 == *n
    {
        let _ = writeln!(std::io::stderr(), "legcrawl: crash point {name}:{n}");
        std::process::abort();
    }
}

#[cfg(test)]
#[path = "crash_tests.rs"]
mod tests;
