//! Benchmarks of the persistent crawl state (`legcrawl::store::State`):
//!
//! - `complete_step/20_new_links`: one lease + one completion with 20 never-seen links and
//!   one ~300-byte item, with a commit (one sled `apply_batch` + flush) every 64 steps as the
//!   engine does. The frontier grows by 19 requests per step (one leased, 20 added), all on
//!   one host. A checkpoint runs whenever one is due, as in the engine; since one is due only
//!   every 30 s or 2^18 fingerprints, one more is timed at the end and printed per step.
//!   `complete_step/20_new_links_pipelined` commits as the engine does: a group is
//!   sealed (its batch applied) on the bench thread when due, and flushed on a second
//!   thread while the next group fills; the step waits only when `GROUP_MAX_PAGES`
//!   completed pages are not durable. The flush's own time on the other core is not in
//!   the step, as it is not in the engine's loop.
//!   `complete_step/20_new_links_commit_10k` commits only every 10,000 steps; one
//!   such cycle takes tens of seconds, so it is timed once, outside criterion, and printed
//!   (with where the time went) at the end of the run.
//! - `fingerprint_dedup/duplicate_enqueue`: `enqueue` of an already-committed request (Bloom
//!   says "maybe", the exact set in sled confirms); `fingerprint_dedup/fingerprint_only` is the
//!   fingerprint part of that cost alone.
//! - `open_1m/open`, `open_1m/first_lease` and `open_1m/next_lease`: `State::open` of a state
//!   holding 1,000,000 queued requests over 1,000 hosts with a 2^30-bit filter (built once,
//!   untimed), the first `lease()` after it, and the leases after that. Page cache is warm
//!   ("cold-ish": every iteration opens after the previous `State` was dropped). The state is
//!   built in a child process; the first open after the build (which replays sled's log of
//!   the whole build) is timed once, in another child process, and printed.
//!
//! Run: `cargo bench --bench store`. Targets: ≥ 20k complete-steps/s with 20 new links;
//! `State::open` of the 1M-request state under one second.
//!
//! Depends only on the public API of `legcrawl::store`, `request` and `item`. Every state
//! lives in its own temp dir, removed at the end.

use std::hint::black_box;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group};
use legcrawl::fingerprint;
use legcrawl::item::Item;
use legcrawl::request::Request;
use legcrawl::store::records::RunOutcome;
use legcrawl::store::{
    Completion, Flush, GROUP_MAX_PAGES, Lease, OpenOptions, Receipt, State, StoreError,
};
use tempfile::TempDir;

/// New links per completed page.
const LINKS: usize = 20;
/// Steps between commits in the "rare commit" variant.
const RARE_COMMIT: usize = 10_000;
/// Bloom filter size of every bench state (the default: 2^30 bits, a 128 MiB sparse file).
const BLOOM_BITS: u8 = 30;
/// Committed requests the duplicate-enqueue bench cycles through.
const DUP_POOL: usize = 100_000;
/// Queued requests of the state opened by `open_1m`.
const OPEN_QUEUED: u64 = 1_000_000;
/// Attempts of a reopen that finds the state `Busy` (10 ms apart).
const REOPEN_ATTEMPTS: u32 = 500;
/// Hosts those requests are spread over.
const OPEN_HOSTS: u64 = 1_000;
/// Requests enqueued per commit while building the `open_1m` state: one engine group's worth
/// (64 pages × 20 links). Much larger sled batches make sled 0.34 hold gigabytes after the
/// state is dropped, which slows down everything run later in this process.
const BUILD_CHUNK: u64 = (GROUP_MAX_PAGES * LINKS) as u64;

/// Options of a new bench state: default dedup (exact), a 2^30-bit filter, a run begun.
fn create_options() -> OpenOptions {
    OpenOptions {
        create: true,
        bloom_bits: Some(BLOOM_BITS),
        begin_run: true,
        ..OpenOptions::default()
    }
}

/// Options of reopening an existing state, as a crawl does.
fn reopen_options() -> OpenOptions {
    OpenOptions {
        begin_run: true,
        ..OpenOptions::default()
    }
}

/// A page item of about 300 bytes of JSON.
fn page_item(url: &str, n: u64) -> Item {
    let mut item = Item::new();
    item.insert("url".into(), url.into());
    item.insert("status".into(), 200.into());
    item.insert(
        "title".into(),
        format!("Bench page number {n} - widgets, gadgets and more").into(),
    );
    item.insert(
        "description".into(),
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor \
         incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud \
         exercitation ullamco laboris nisi ut aliquip ex ea commodo."
            .into(),
    );
    item.insert("fetched_at".into(), 1_700_000_000u64.into());
    item
}

/// A crawl in progress on a growing, single-host frontier.
struct Crawl {
    /// The state under test; dropped before its directory.
    state: State,
    /// Keeps the state directory alive; removed when the crawl is dropped.
    _dir: TempDir,
    /// Number of the next never-seen URL.
    next_url: u64,
    /// Steps completed since the last commit.
    since_commit: usize,
    /// Commit after this many steps (`Sync` mode).
    commit_every: usize,
    /// `Some` in the engine's pipelined mode: the flusher thread.
    flusher: Option<Flusher>,
}

/// The engine's pipelined group commit, outside tokio: groups are sealed on the
/// bench thread when due, and flushed on this thread meanwhile.
struct Flusher {
    /// Flushes to run.
    todo: mpsc::Sender<Flush>,
    /// Their results.
    done: mpsc::Receiver<Result<Receipt, StoreError>>,
    /// A flush was sent and its result not received yet.
    running: bool,
}

impl Flusher {
    fn start() -> Flusher {
        let (todo, todo_rx) = mpsc::channel::<Flush>();
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            for flush in todo_rx {
                if done_tx.send(flush.run()).is_err() {
                    break;
                }
            }
        });
        Flusher {
            todo,
            done,
            running: false,
        }
    }

    /// What the engine's loop does after each completion: take a finished flush,
    /// wait for the running one when the pipeline is full, seal a due group and
    /// start its flush.
    fn after_completion(&mut self, state: &mut State) {
        if self.running
            && let Ok(receipt) = self.done.try_recv()
        {
            self.running = false;
            state.durable(receipt.unwrap());
        }
        if self.running && state.undurable_pages() >= GROUP_MAX_PAGES {
            state.durable(self.done.recv().unwrap().unwrap());
            self.running = false;
        }
        if !self.running
            && state.group_due()
            && let Some(flush) = state.seal().unwrap()
        {
            self.todo.send(flush).unwrap();
            self.running = true;
        }
    }
}

impl Crawl {
    /// A fresh state with `prefill` committed requests, so that leases never run dry
    /// before the first commit makes the links of the first pages visible.
    fn new(commit_every: usize, prefill: usize) -> Crawl {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open(dir.path(), &create_options()).unwrap();
        let mut crawl = Crawl {
            state,
            _dir: dir,
            next_url: 0,
            since_commit: 0,
            commit_every,
            flusher: None,
        };
        for _ in 0..prefill {
            let request = Request::get(crawl.url());
            assert!(crawl.state.enqueue(&request, &[]).unwrap());
        }
        crawl.state.commit().unwrap();
        crawl
    }

    fn url(&mut self) -> String {
        let n = self.next_url;
        self.next_url += 1;
        format!("http://bench.test/p/{n}")
    }

    /// One complete-step; returns the time spent in the state (building the links and the
    /// item, which legs do, is not counted).
    fn step(&mut self) -> StepTime {
        let start = Instant::now();
        let lease = self
            .state
            .lease()
            .unwrap()
            .expect("the frontier only grows");
        let leased = start.elapsed();
        let requests: Vec<Request> = (0..LINKS)
            .map(|_| Request::follow(&lease.request, self.url()))
            .collect();
        let items = vec![page_item(&lease.request.url, self.next_url)];
        let completion = Completion {
            lease,
            requests,
            items,
            counters: vec![],
        };
        let start = Instant::now();
        self.state.complete(completion, &[]).unwrap();
        let completed = start.elapsed();
        self.since_commit += 1;
        let start = Instant::now();
        if let Some(flusher) = self.flusher.as_mut() {
            flusher.after_completion(&mut self.state);
        } else if self.since_commit >= self.commit_every {
            self.state.commit().unwrap();
            self.since_commit = 0;
        }
        // As the engine does after a commit.
        if self.state.checkpoint_due() {
            self.state.checkpoint().unwrap();
        }
        StepTime {
            lease: leased,
            complete: completed,
            commit: start.elapsed(),
        }
    }
}

/// Where the time of complete-steps went.
#[derive(Clone, Copy, Default)]
struct StepTime {
    lease: Duration,
    complete: Duration,
    commit: Duration,
}

impl StepTime {
    fn total(self) -> Duration {
        self.lease + self.complete + self.commit
    }
}

impl std::iter::Sum for StepTime {
    fn sum<I: Iterator<Item = StepTime>>(steps: I) -> StepTime {
        steps.fold(StepTime::default(), |a, b| StepTime {
            lease: a.lease + b.lease,
            complete: a.complete + b.complete,
            commit: a.commit + b.commit,
        })
    }
}

fn bench_complete_step(c: &mut Criterion) {
    let mut group = c.benchmark_group("complete_step");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(6));
    // The state is built on first use, so that a filtered run builds only what it measures.
    let mut crawl = None;
    let mut spent = StepTime::default();
    let mut steps = 0;
    group.bench_function("20_new_links", |b| {
        let crawl = crawl.get_or_insert_with(|| Crawl::new(GROUP_MAX_PAGES, 2 * GROUP_MAX_PAGES));
        b.iter_custom(|iters| {
            let time: StepTime = (0..iters).map(|_| crawl.step()).sum();
            spent = [spent, time].into_iter().sum();
            steps += iters;
            time.total()
        })
    });
    let mut pipelined = None;
    let (mut pipelined_spent, mut pipelined_steps) = (StepTime::default(), 0);
    group.bench_function("20_new_links_pipelined", |b| {
        let crawl = pipelined.get_or_insert_with(|| {
            let mut crawl = Crawl::new(GROUP_MAX_PAGES, 2 * GROUP_MAX_PAGES);
            crawl.flusher = Some(Flusher::start());
            crawl
        });
        b.iter_custom(|iters| {
            let time: StepTime = (0..iters).map(|_| crawl.step()).sum();
            pipelined_spent = [pipelined_spent, time].into_iter().sum();
            pipelined_steps += iters;
            time.total()
        })
    });
    group.finish();
    if let Some(mut crawl) = crawl {
        report(
            "20_new_links (all criterion iterations)",
            &crawl,
            steps,
            spent,
        );
        report_checkpoint(&mut crawl.state, steps);
    }
    if let Some(mut crawl) = pipelined {
        crawl.state.commit().unwrap();
        report(
            "20_new_links_pipelined (all criterion iterations)",
            &crawl,
            pipelined_steps,
            pipelined_spent,
        );
    }
}

/// The rare-commit variant, run last: its 10,000-step batch leaves sled holding a lot of
/// memory, which would slow down the benches after it.
fn bench_rare_commit(_: &mut Criterion) {
    if wanted("complete_step/20_new_links_commit_10k") {
        rare_commit_cycle();
    }
}

/// The rare-commit variant: one full cycle of `RARE_COMMIT` steps ending in its one commit,
/// timed once outside criterion (one cycle takes tens of seconds: criterion's minimum of ten
/// samples would not fit the time budget, and a partial cycle would not hold the commit).
fn rare_commit_cycle() {
    let mut crawl = Crawl::new(RARE_COMMIT, RARE_COMMIT + 1);
    let spent: StepTime = (0..RARE_COMMIT).map(|_| crawl.step()).sum();
    report(
        "20_new_links_commit_10k (one cycle)",
        &crawl,
        RARE_COMMIT as u64,
        spent,
    );
}

/// True when the command line names no bench filter, or a filter that is part of `name`
/// (criterion's filter is a regex; a plain substring, optionally anchored at the end with `$`,
/// is what this bench documents).
fn wanted(name: &str) -> bool {
    const VALUED: [&str; 8] = [
        "--warm-up-time",
        "--measurement-time",
        "--sample-size",
        "--save-baseline",
        "--baseline",
        "--profile-time",
        "--color",
        "--output-format",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, arg)| {
            !arg.starts_with('-') && (*i == 0 || !VALUED.contains(&args[i - 1].as_str()))
        })
        .map(|(_, arg)| arg)
        .collect();
    filters.is_empty()
        || filters.iter().any(|f| match f.strip_suffix('$') {
            Some(anchored) => name.ends_with(anchored),
            None => name.contains(f.as_str()),
        })
}

/// Prints steps/s, where the time went, and how large the state grew (cost depends on it).
fn report(name: &str, crawl: &Crawl, steps: u64, spent: StepTime) {
    let per = |d: Duration| d.as_secs_f64() * 1e6 / steps.max(1) as f64;
    eprintln!(
        "complete_step/{name}: {steps} steps, {:.0} steps/s; per step: lease {:.1} µs, \
         complete {:.1} µs, commit {:.1} µs; state ended with {} queued, {} items",
        steps as f64 / spent.total().as_secs_f64(),
        per(spent.lease),
        per(spent.complete),
        per(spent.commit),
        crawl.state.frontier_len(),
        crawl.state.items_len(),
    );
}

/// Times one checkpoint of what the steps journaled (a checkpoint is due every 30 s or 2^18
/// fingerprints, so the criterion window rarely holds one) and prints it per step.
fn report_checkpoint(state: &mut State, steps: u64) {
    let start = Instant::now();
    state.checkpoint().unwrap();
    let took = start.elapsed();
    eprintln!(
        "complete_step/20_new_links: one checkpoint after the criterion iterations took {:.1} ms, {:.2} µs per step if the run had one checkpoint",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / steps.max(1) as f64
    );
}

/// A state holding `DUP_POOL` committed requests, and those requests.
struct DupPool {
    state: State,
    _dir: TempDir,
    pool: Vec<Request>,
    next: usize,
}

impl DupPool {
    fn new() -> DupPool {
        let dir = tempfile::tempdir().unwrap();
        let mut state = State::open(dir.path(), &create_options()).unwrap();
        let pool: Vec<Request> = (0..DUP_POOL)
            .map(|n| Request::get(format!("http://bench.test/p/{n}")))
            .collect();
        for chunk in pool.chunks(GROUP_MAX_PAGES * LINKS) {
            for request in chunk {
                assert!(state.enqueue(request, &[]).unwrap());
            }
            state.commit().unwrap();
        }
        DupPool {
            state,
            _dir: dir,
            pool,
            next: 0,
        }
    }

    /// Index of the next request of the pool, cycling.
    fn next(&mut self) -> usize {
        self.next = (self.next + 1) % DUP_POOL;
        self.next
    }
}

fn bench_fingerprint_dedup(c: &mut Criterion) {
    let mut group = c.benchmark_group("fingerprint_dedup");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    let mut dups = None;
    group.bench_function("duplicate_enqueue", |b| {
        let dups = dups.get_or_insert_with(DupPool::new);
        b.iter(|| {
            let i = dups.next();
            let queued = dups.state.enqueue(&dups.pool[i], &[]).unwrap();
            debug_assert!(!queued);
            queued
        })
    });
    group.bench_function("fingerprint_only", |b| {
        let dups = dups.get_or_insert_with(DupPool::new);
        b.iter(|| {
            let i = dups.next();
            fingerprint::fingerprint(black_box(&dups.pool[i]), &[])
        })
    });
    group.finish();
    if let Some(dups) = dups {
        assert_eq!(dups.state.in_flight(), 0);
        assert_eq!(dups.state.frontier_len(), DUP_POOL as u64);
    }
}

/// Builds the `open_1m` state in `dir`: 1M requests enqueued in chunks with commits, then
/// the run is ended (commit + checkpoint) and the state dropped.
fn build_open_state(dir: &Path) {
    let started = Instant::now();
    let mut state = State::open(dir, &create_options()).unwrap();
    for n in 0..OPEN_QUEUED {
        let host = n % OPEN_HOSTS;
        let request = Request::get(format!("http://h{host}.bench.test/p/{n}"));
        assert!(state.enqueue(&request, &[]).unwrap());
        if (n + 1) % BUILD_CHUNK == 0 {
            state.commit().unwrap();
        }
    }
    state.end_run(RunOutcome::Interrupted).unwrap();
    assert_eq!(state.frontier_len(), OPEN_QUEUED);
    drop(state);
    eprintln!(
        "open_1m: built a state of {OPEN_QUEUED} queued requests on {OPEN_HOSTS} hosts in {:.1} s \
         ({} MB on disk; builder's peak RSS {})",
        started.elapsed().as_secs_f64(),
        dir_size(dir) / 1_000_000,
        peak_rss()
    );
}

/// Times one open of the state in `dir` and prints it (run in a fresh process).
fn first_open(dir: &Path) {
    let started = Instant::now();
    let state = State::open(dir, &reopen_options()).unwrap();
    eprintln!(
        "open_1m: first open after the build, in a fresh process: {:.3} s (once, not part of \
         the criterion figures)",
        started.elapsed().as_secs_f64()
    );
    close(state);
}

/// Runs this bench binary again with `mode` set to `dir`, and waits for it. The `open_1m`
/// state is built, and first opened, in child processes: a crawl run is a process of its own,
/// and the builder's sled instance keeps its memory (about 1 GB) after it is dropped.
fn in_child(mode: &str, dir: &Path) {
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .env(mode, dir)
        .status()
        .unwrap();
    assert!(status.success(), "{mode} child failed: {status}");
}

/// This process's peak resident set size, as Linux reports it.
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            Some(line["VmHWM:".len()..].trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Bytes allocated on disk under `dir` (the sparse Bloom file counts only what is written).
fn dir_size(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.blocks() * 512;
            }
        }
    }
    total
}

/// Opens the state in `dir` as a crawl does, retrying while it is `Busy`; returns the state
/// and the time of the successful `State::open` alone. A `State` dropped in this process may
/// keep sled's file lock a moment longer (sled's background threads still hold the file), so
/// an immediate reopen can see `Busy`; the retries are counted in `busy`.
fn reopen(dir: &Path, busy: &mut u32) -> (State, Duration) {
    for _ in 0..REOPEN_ATTEMPTS {
        let start = Instant::now();
        match State::open(dir, &reopen_options()) {
            Ok(state) => return (state, start.elapsed()),
            Err(StoreError::Busy { .. }) => {
                *busy += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!(
        "{}: still busy after {REOPEN_ATTEMPTS} attempts",
        dir.display()
    );
}

/// Ends the run begun by a bench's open and drops the state (untimed).
fn close(mut state: State) {
    state.end_run(RunOutcome::Interrupted).unwrap();
    drop(state);
}

fn bench_open_1m(c: &mut Criterion) {
    let mut built: Option<TempDir> = None;
    let mut dir = || -> std::path::PathBuf {
        let dir = built.get_or_insert_with(|| {
            let dir = tempfile::tempdir().unwrap();
            in_child(BUILD_ENV, dir.path());
            // sled 0.34 writes its snapshot only when it recovers, so the first open after a
            // run replays the log of the whole run; the opens timed below start from a snapshot.
            in_child(FIRST_OPEN_ENV, dir.path());
            dir
        });
        dir.path().to_owned()
    };
    let mut busy = 0;
    let mut group = c.benchmark_group("open_1m");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("open", |b| {
        let dir = dir();
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (state, took) = reopen(&dir, &mut busy);
                total += took;
                assert_eq!(state.frontier_len(), OPEN_QUEUED);
                close(state);
            }
            total
        })
    });
    group.bench_function("first_lease", |b| {
        let dir = dir();
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (mut state, _) = reopen(&dir, &mut busy);
                let start = Instant::now();
                let lease = state.lease().unwrap();
                total += start.elapsed();
                state.release(lease.expect("1M requests are queued"));
                close(state);
            }
            total
        })
    });
    // The state stays open across samples; its first lease is taken untimed.
    let mut open: Option<(State, Vec<Lease>)> = None;
    group.bench_function("next_lease", |b| {
        let (state, leases) = open.get_or_insert_with(|| {
            let (mut state, _) = reopen(&dir(), &mut busy);
            let first = state.lease().unwrap().expect("1M requests are queued");
            (state, vec![first])
        });
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                leases.push(state.lease().unwrap().expect("1M requests are queued"));
            }
            start.elapsed()
        });
    });
    if let Some((mut state, leases)) = open {
        for lease in leases {
            state.release(lease);
        }
        close(state);
    }
    group.finish();
    if busy > 0 {
        eprintln!("open_1m: {busy} reopens found the state busy and were retried after 10 ms");
    }
}

criterion_group!(
    benches,
    bench_complete_step,
    bench_fingerprint_dedup,
    bench_open_1m,
    bench_rare_commit
);

/// Environment variable that makes this binary build the `open_1m` state in the named dir.
const BUILD_ENV: &str = "LEGCRAWL_BENCH_STORE_BUILD";
/// Environment variable that makes this binary time one open of the named state.
const FIRST_OPEN_ENV: &str = "LEGCRAWL_BENCH_STORE_FIRST_OPEN";

/// `criterion_main!`, plus the two child-process modes of `open_1m`.
fn main() {
    if let Some(dir) = std::env::var_os(BUILD_ENV) {
        build_open_state(Path::new(&dir));
    } else if let Some(dir) = std::env::var_os(FIRST_OPEN_ENV) {
        first_open(Path::new(&dir));
    } else {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
}
