//! Power cuts: the crawl runs on a filesystem that loses every write not yet
//! fsynced (or, in a torn cut, a random share of them), and resumes after
//! each cut with nothing lost and nothing twice. The state, the output file
//! and the WARC directory each sit in a directory of their own (`state/`,
//! `out/a/out.jsonl`, `arch/warc/`), so that no directory sync of one makes
//! another's names durable by accident.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use legcrawl::store::{GROUP_MAX_PAGES, OpenOptions, State};

use crate::support::cli::{self, item_path, legcrawl};
use crate::support::lazyfs::PowerCutFs;
use crate::support::{Site, TestServer, assert_each_once, handler, splitmix64, warc};

/// The filesystem itself: what was fsynced survives a cut, nothing else.
#[test]
fn the_filesystem_keeps_only_what_was_synced() {
    let Some(mut fs) = PowerCutFs::mount("the_filesystem_keeps_only_what_was_synced") else {
        return;
    };
    let root = fs.path().to_owned();
    let sync_dir = |dir: &std::path::Path| {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .expect("sync dir")
    };
    std::fs::create_dir(root.join("d")).expect("mkdir");
    sync_dir(&root);
    let mut a = std::fs::File::create(root.join("d/a")).expect("create a");
    a.write_all(b"durable").expect("write");
    a.sync_all().expect("fsync a");
    sync_dir(&root.join("d"));
    a.write_all(b" and lost").expect("write more");
    drop(a);
    std::fs::write(root.join("d/b"), b"never synced").expect("write b");
    let mut c = std::fs::File::create(root.join("d/c.tmp")).expect("create c");
    c.write_all(b"synced, renamed, dir not synced")
        .expect("write c");
    c.sync_all().expect("fsync c");
    drop(c);
    std::fs::rename(root.join("d/c.tmp"), root.join("d/c")).expect("rename");
    assert_eq!(
        std::fs::read(root.join("d/a")).expect("read a"),
        b"durable and lost"
    );
    let names = |dir: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read the directory")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&root.join("d")), ["a", "b", "c"]);
    fs.cut();
    let root = fs.path().to_owned();
    assert_eq!(std::fs::read(root.join("d/a")).expect("read a"), b"durable");
    assert!(!root.join("d/b").exists(), "an unsynced name survived");
    assert!(
        !root.join("d/c").exists(),
        "a rename without a dir sync survived"
    );
    assert!(
        !root.join("d/c.tmp").exists(),
        "a name whose dir was not synced survived"
    );
    let counts = fs.counts();
    assert_eq!(counts.cuts, 1);
    assert!(counts.fsyncs >= 2 && counts.dir_fsyncs >= 2, "{counts:?}");
}

const PAGES: usize = 120;
const CONCURRENCY: u64 = 4;
/// Cuts that must land in a running crawl, over the whole test.
const CUTS: u64 = 50;
/// Torn cuts that must land in a running crawl.
const TORN_CUTS: u64 = 30;
/// Crawls (each from a new state, cut until it finishes) at most.
const CRAWLS: usize = 80;
/// One crawl run, from start to a clean exit, at most.
const LIMIT: Duration = Duration::from_secs(60);
/// The variable that replays the cut moments.
const SEED_VAR: &str = "LEGCRAWL_POWERCUT_SEED";

/// The seed the cut moments derive from: `LEGCRAWL_POWERCUT_SEED`, or the clock.
pub(crate) fn cut_seed() -> u64 {
    let seed = match std::env::var(SEED_VAR) {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_VAR}={value:?} is not a u64")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    };
    eprintln!("power cuts: seed {seed} (replay with {SEED_VAR}={seed})");
    seed
}

/// The site every power-cut crawl takes, served with 1 ms per answer so
/// that a crawl lasts long enough to be cut.
fn slow_site() -> (Site, TestServer) {
    let site = Site::generate(PAGES, 28);
    let inner = site.handler();
    let server = TestServer::start(handler(move |req| {
        inner(req).delay(Duration::from_millis(1))
    }));
    (site, server)
}

/// One crawl's files on the power-cut filesystem.
struct Crawl {
    dir: PathBuf,
    seed_url: String,
}

impl Crawl {
    /// Makes the crawl's directory, the output's (`out/a`) and the WARC
    /// directory's parent (`arch`), and syncs the directories that name them;
    /// legcrawl creates the state directory, the WARC directory and the
    /// output file, and must make their names durable itself.
    fn make_dirs(&self, root: &std::path::Path) {
        for dir in [
            &self.dir,
            &self.dir.join("out"),
            &self.output_dir(),
            &self.dir.join("arch"),
        ] {
            std::fs::create_dir(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        }
        for dir in [root, &self.dir, &self.dir.join("out")] {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .unwrap_or_else(|e| panic!("sync {}: {e}", dir.display()));
        }
    }

    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// The output file's directory: nothing else is in it.
    fn output_dir(&self) -> PathBuf {
        self.dir.join("out/a")
    }

    fn output(&self) -> PathBuf {
        self.output_dir().join("out.jsonl")
    }

    fn warc(&self) -> PathBuf {
        self.dir.join("arch/warc")
    }

    fn command(&self) -> Command {
        let output = self.output();
        let warc = self.warc();
        let mut cmd = legcrawl(
            &self.state(),
            &[
                "crawl",
                &self.seed_url,
                "--bloom-bits",
                "16",
                "--concurrency",
                "4",
                "--per-host",
                "4",
                "--checkpoint-every",
                "0.01",
                "--output",
                output.to_str().expect("UTF-8 temp path"),
                "--warc",
                warc.to_str().expect("UTF-8 temp path"),
                "--warc-max-size",
                "64KiB",
            ],
        );
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        cmd
    }
}

/// A crawl is started, and at a random moment killed with SIGKILL and the
/// power cut, again and again until a run finishes; then the power is cut
/// once more (a finished crawl must have made everything durable) and one
/// more run must find nothing left to do. Crawls follow each other, each in
/// a new directory on the same filesystem, until `CUTS` cuts have landed in
/// running crawls. A cut moment is the seed's fraction of crawl 0's clean
/// run time, so a replay with the same seed cuts at nearly the same moments.
/// Strict POSIX: a write is durable only after its file's fsync, a new name
/// only after its directory's, and sled's log only after legcrawl's
/// `fdatasync` (sled's own `sync_file_range(2)` never reaches FUSE).
#[test]
fn power_cuts_mid_crawl_lose_nothing_and_store_nothing_twice() {
    cut_crawls(
        "power_cuts_mid_crawl_lose_nothing_and_store_nothing_twice",
        CUTS,
        Cut::Strict,
    );
}

/// The same with torn cuts ([`PowerCutFs::cut_torn`]): each cut keeps a
/// random share of what was not synced — some pages of a file and not
/// others, holes of zeros where the lost ones were, some directories' new
/// names — as a page cache part written back when the power went leaves
/// it. The tear of each cut comes from the printed seed too.
#[test]
fn torn_power_cuts_lose_nothing_and_store_nothing_twice() {
    cut_crawls(
        "torn_power_cuts_lose_nothing_and_store_nothing_twice",
        TORN_CUTS,
        Cut::Torn,
    );
}

/// How the power goes out.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// Everything not synced is lost.
    Strict,
    /// A seeded random share of what was not synced survives.
    Torn,
}

/// Crawls of [`slow_site`], cut at random moments until `cuts` cuts have
/// landed in running crawls (see
/// [`power_cuts_mid_crawl_lose_nothing_and_store_nothing_twice`]).
fn cut_crawls(test: &str, cuts_wanted: u64, kind: Cut) {
    let Some(mut fs) = PowerCutFs::mount(test) else {
        return;
    };
    let (site, server) = slow_site();
    let mut rng = cut_seed();
    let started = Instant::now();
    let mut landed = 0;
    let cut = |fs: &mut PowerCutFs, rng: &mut u64| match kind {
        Cut::Strict => fs.cut(),
        Cut::Torn => fs.cut_torn(splitmix64(rng)),
    };
    // The first crawl runs clean once, to learn how long a crawl lasts here.
    let mut span = Duration::ZERO;
    for round in 0..=CRAWLS {
        if round > 0 && landed >= cuts_wanted {
            break;
        }
        assert!(
            round < CRAWLS,
            "only {landed} of {cuts_wanted} cuts landed in {CRAWLS} crawls"
        );
        let crawl = Crawl {
            dir: fs.path().join(format!("crawl-{round}")),
            seed_url: server.url("/"),
        };
        crawl.make_dirs(fs.path());
        let hits_before = hits(&site, &server);
        let mut cuts = 0;
        loop {
            let mut child = crawl.command().spawn().expect("spawn legcrawl");
            let clock = Instant::now();
            let moment = if round == 0 {
                LIMIT
            } else {
                Duration::from_micros(splitmix64(&mut rng) % span.as_micros() as u64)
            };
            let exited = wait_until(&mut child, moment);
            if let Some(status) = exited {
                let stderr = read_stderr(&mut child);
                assert!(
                    status.success(),
                    "crawl {round}: run failed ({status}): {stderr}"
                );
                if round == 0 {
                    span = clock.elapsed();
                    eprintln!("crawl 0 ran clean in {span:?}");
                }
                break;
            }
            child.kill().expect("SIGKILL the crawl");
            child.wait().expect("reap the crawl");
            cut(&mut fs, &mut rng);
            cuts += 1;
            landed += 1;
            eprintln!("crawl {round}: cut {cuts} at {moment:?}");
        }
        // Power cut after a clean finish: a crawl that said it is done made all
        // of it durable. The state opens and holds every page once, as do the
        // output file and the WARC files; the next run fetches only its seed
        // again (every run does) and nothing else.
        cut(&mut fs, &mut rng);
        check_exactly_once(&crawl, &site, round);
        let fetches = hits(&site, &server) - hits_before;
        let pages = site.reachable().len() as u64;
        // Every run fetches the seed again: one more fetch per cut.
        let bound = pages + cuts * (CONCURRENCY + GROUP_MAX_PAGES as u64 + 1);
        assert!(
            fetches <= bound,
            "crawl {round}: {fetches} fetches for {pages} pages with {cuts} cuts exceeds {bound}"
        );
        let others = |server: &TestServer| hits(&site, server) - server.hits("/");
        let before = others(&server);
        let out = crate::support::cli::run(crawl.command(), LIMIT);
        assert!(
            out.status.success(),
            "crawl {round}: run after the last cut failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            others(&server),
            before,
            "crawl {round}: a finished crawl fetched pages again after a cut"
        );
        eprintln!("crawl {round}: {cuts} cuts, {fetches} fetches for {pages} pages");
    }
    let counts = fs.counts();
    eprintln!("{landed} cuts in {:?}; {counts:?}", started.elapsed());
    assert!(counts.fsyncs > 0 && counts.dir_fsyncs > 0, "{counts:?}");
    if kind == Cut::Torn {
        assert!(
            counts.torn_kept > 0 && counts.torn_lost > 0,
            "the cuts tore nothing: {counts:?}"
        );
    }
}

/// Strict POSIX, nothing looked past: a crawl that finished cleanly, then a
/// power cut, then the state must open with every page once. This found
/// that nothing synced `db/` after sled created its files there (the cut
/// left `db/` empty: "rolled back from 121 to 0 items"), that sled's flush
/// is `sync_file_range(2)` (no fsync, no metadata), and that the parent of
/// a directory legcrawl creates (`--data`, `--warc`) was never synced.
#[test]
fn a_finished_crawl_survives_a_strict_power_cut() {
    let Some(mut fs) = PowerCutFs::mount("a_finished_crawl_survives_a_strict_power_cut") else {
        return;
    };
    let site = Site::generate(PAGES, 28);
    let server = TestServer::start(site.handler());
    let crawl = Crawl {
        dir: fs.path().join("crawl"),
        seed_url: server.url("/"),
    };
    crawl.make_dirs(fs.path());
    let out = crate::support::cli::run(crawl.command(), LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs.cut();
    check_exactly_once(&crawl, &site, 0);
}

/// A disk whose `fsync` of one file fails once, with `EIO`, and then loses
/// the failed sync's pages (Linux's "fsyncgate" semantics, see
/// `Disk::fail_sync_of`): the crawl must stop in one line, exit 1, writing
/// nothing more, since anything it wrote on top of pages the disk never got
/// would be lost with them, or claimed durable when it is not. Then the
/// power is cut, and the next run resumes: every page once, in the state,
/// the output file and the WARC files. One round per file that legcrawl
/// syncs — sled's log, the output file, a WARC file — and per directory
/// whose sync makes one of their names durable, the failing sync of each
/// drawn from the printed seed.
#[test]
fn a_failed_sync_stops_the_crawl_and_a_power_cut_after_it_loses_nothing() {
    let Some(mut fs) =
        PowerCutFs::mount("a_failed_sync_stops_the_crawl_and_a_power_cut_after_it_loses_nothing")
    else {
        return;
    };
    let (site, server) = slow_site();
    let mut rng = cut_seed();
    // (name, first sync that may fail, syncs to draw from): sled's log is
    // synced at open (its name), then after every group; the output file
    // after each group's lines; a WARC file at each group's mark; `a` (the
    // output's directory) once, when the file is opened; `warc` whenever a
    // WARC file is begun; `arch` when legcrawl creates `warc` in it.
    let targets: [(&str, u64, u64); 6] = [
        ("db", 3, 10),
        ("out.jsonl", 1, 4),
        ("legcrawl-*", 1, 6),
        ("a", 1, 1),
        ("warc", 1, 2),
        ("arch", 1, 1),
    ];
    for (round, (name, first, span)) in targets.into_iter().enumerate() {
        let crawl = Crawl {
            dir: fs.path().join(format!("crawl-{round}")),
            seed_url: server.url("/"),
        };
        crawl.make_dirs(fs.path());
        let nth = first + splitmix64(&mut rng) % span;
        fs.fail_sync_of(name, nth);
        let out = crate::support::cli::run(crawl.command(), LIMIT);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        eprintln!(
            "round {round}: sync {nth} of {name} fails: {:?} {}",
            out.status.code(),
            err.trim()
        );
        assert_eq!(
            fs.counts().failed_syncs,
            round as u64 + 1,
            "the sync {nth} of {name} did not fail: {err}"
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains("Input/output error"), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        fs.cut();
        let out = crate::support::cli::run(crawl.command(), LIMIT);
        assert!(
            out.status.success(),
            "round {round}: the run after the failed sync of {name} and the cut: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        fs.cut();
        check_exactly_once(&crawl, &site, round);
    }
}

/// Fetches of the site's pages so far.
fn hits(site: &Site, server: &TestServer) -> u64 {
    site.reachable().iter().map(|p| server.hits(p)).sum()
}

/// Waits up to `limit` for the child to exit; `None` when it still runs.
fn wait_until(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("poll the crawl") {
            return Some(status);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(2)));
    }
}

fn read_stderr(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
    }
    text
}

/// Every page once in `dump items`, in the output file and as a WARC
/// response (with its request), robots.txt once; the state opens.
fn check_exactly_once(crawl: &Crawl, site: &Site, round: usize) {
    let expected = site.reachable();
    let what = format!("crawl {round}");
    let items: Vec<String> = cli::dump_items(&crawl.state())
        .iter()
        .map(item_path)
        .collect();
    assert_each_once(&items, &expected, &format!("{what}: items"));
    let lines = cli::parse_lines(&std::fs::read(crawl.output()).expect("output file"));
    let lines: Vec<String> = lines.iter().map(item_path).collect();
    assert_each_once(&lines, &expected, &format!("{what}: output lines"));
    let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
    let base = crawl.seed_url.trim_end_matches('/');
    for record in warc::read_dir(&crawl.warc()) {
        warc::check_digests(&record);
        if matches!(record.kind(), "request" | "response" | "revisit") {
            let path = record
                .target()
                .strip_prefix(base)
                .unwrap_or(record.target());
            *counts
                .entry((path.to_owned(), record.kind().to_owned()))
                .or_default() += 1;
        }
    }
    let mut take = |path: &str, kind: &str| counts.remove(&(path.to_owned(), kind.to_owned()));
    for path in expected.iter().map(String::as_str).chain(["/robots.txt"]) {
        let (requests, responses) = (take(path, "request"), take(path, "response"));
        // Every run fetches the seed again: its durable later fetches are
        // revisits (the site does not change); any other page is fetched
        // durably once.
        let revisits = match path {
            "/" => take(path, "revisit").unwrap_or(0),
            _ => 0,
        };
        assert_eq!(responses, Some(1), "{what}: response records of {path}");
        assert_eq!(
            requests,
            Some(1 + revisits),
            "{what}: request records of {path} ({revisits} revisits)"
        );
    }
    assert!(counts.is_empty(), "{what}: unexpected records {counts:?}");
    warc::warcio_check(&warc::files(&crawl.warc()));
    let state = State::open(&crawl.state(), &OpenOptions::default())
        .unwrap_or_else(|e| panic!("{what}: the state does not open: {e}"));
    drop(state);
}
