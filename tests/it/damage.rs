//! A state damaged the ways a disk, a copy or a hostile user damages it: bytes
//! overwritten in sled's files, an old copy of `db/` put back (a rollback),
//! `bloom.bin` zeroed, cut, deleted or with a bad header, a run file of the
//! exact set (`runs/`) deleted, cut, or with a bad header or body, a full file
//! system.
//! The answer is always an exact repair or one line with exit code 2 (1 for a
//! full disk) that leaves the state as it was (its files' bytes, and what
//! sled's database holds: see [`state_of`]) — never a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::cli::{self, item_path, legcrawl, stderr};
use crate::support::{Site, TestServer, assert_each_once, copy_dir, splitmix64};

const LIMIT: Duration = Duration::from_secs(120);
/// Replays the damage of [`overwritten_sled_bytes_never_panic_nor_lose_items_silently`].
const DAMAGE_SEED_VAR: &str = "LEGCRAWL_DAMAGE_SEED";

/// A crawled site and its state.
struct Crawled {
    site: Site,
    server: TestServer,
    data: tempfile::TempDir,
    state: PathBuf,
    seed: String,
}

fn crawled(pages: usize, extra: &[&str]) -> Crawled {
    let site = Site::generate(pages, 12);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    let seed = server.url("/");
    let mut args = vec!["crawl", &seed];
    if !extra.contains(&"--bloom-bits") {
        args.extend(["--bloom-bits", "16"]);
    }
    args.extend_from_slice(extra);
    let out = cli::run(legcrawl(&state, &args), LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    Crawled {
        site,
        server,
        data,
        state,
        seed,
    }
}

/// Every file under `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path.clone(), std::fs::read(&path).expect("read"));
            }
        }
    }
    out
}

/// The files that differ between two [`contents`] of one directory (added,
/// removed or changed), for a failure message.
fn changed(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
) -> Vec<PathBuf> {
    before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// What a before/after comparison of a state looks at: every file's bytes,
/// except that `db/` is compared by the entries sled holds when a copy of it
/// opens. sled consolidates the nodes it reads and may write them back to its
/// log at any time, so an open that is refused and writes nothing can still
/// leave `db/db`'s bytes changed (seen under load); a copy that does not open
/// (damaged sled files) is compared by its bytes.
fn state_of(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = contents(dir);
    let db = dir.join("db");
    if let Some(entries) = sled_entries(&db) {
        files.retain(|path, _| !path.starts_with(&db));
        for (key, value) in entries {
            files.insert(db.join(format!("entry {key:02x?}")), value);
        }
    }
    files
}

/// Every entry of every tree of a copy of the sled database in `db`, keys
/// prefixed with their tree's name; `None` when the copy does not open or
/// read cleanly.
fn sled_entries(db: &Path) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    if !db.join("db").is_file() {
        return None;
    }
    let copy = tempfile::tempdir().ok()?;
    copy_dir(db, copy.path());
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let opened = sled::Config::new().path(copy.path()).open().ok()?;
        let mut out = Vec::new();
        for name in opened.tree_names() {
            let tree = opened.open_tree(&name).ok()?;
            for entry in tree.iter() {
                let (key, value) = entry.ok()?;
                let mut named = name.to_vec();
                named.push(b'/');
                named.extend_from_slice(&key);
                out.push((named, value.to_vec()));
            }
        }
        Some(out)
    }));
    read.ok().flatten()
}

/// The item paths `dump items` prints, each once and the site's reachable pages.
fn assert_items_whole(state: &Path, site: &Site, what: &str) {
    let paths: Vec<String> = cli::dump_items(state).iter().map(item_path).collect();
    assert_each_once(&paths, &site.reachable(), what);
}

/// Runs `args` on `state`: never a panic; either success, or one line with
/// exit 2 and the state's bytes as they were. Returns whether it succeeded.
fn run_checked(state: &Path, args: &[&str], what: &str) -> bool {
    let before = state_of(state);
    let out = cli::run(legcrawl(state, args), LIMIT);
    let err = stderr(&out);
    assert_ne!(
        out.status.code(),
        Some(101),
        "{what} {args:?} panicked: {err}"
    );
    assert!(!err.contains("panicked"), "{what} {args:?}: {err}");
    if out.status.success() {
        return true;
    }
    assert_eq!(out.status.code(), Some(2), "{what} {args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{what} {args:?}: {err}");
    assert!(
        err.contains("/db"),
        "{what} {args:?} names the database: {err}"
    );
    assert!(
        state_of(state) == before,
        "{what} {args:?} failed and changed the state"
    );
    false
}

#[test]
fn overwritten_sled_bytes_never_panic_nor_lose_items_silently() {
    let c = crawled(1000, &[]);
    assert_items_whole(&c.state, &c.site, "the crawl");
    let seed = match std::env::var(DAMAGE_SEED_VAR) {
        Ok(value) => value.trim().parse().expect("a u64 seed"),
        Err(_) => 20_261_203,
    };
    eprintln!("damage seed {seed} (replay with {DAMAGE_SEED_VAR}={seed})");
    let mut rng = seed;
    let sled_files: Vec<PathBuf> = std::fs::read_dir(c.state.join("db"))
        .expect("db/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "conf"))
        .collect();
    let (mut refused, mut whole) = (0, 0);
    for trial in 0..20 {
        let copy = c.data.path().join(format!("trial{trial}"));
        copy_dir(&c.state, &copy);
        let file = &sled_files[splitmix64(&mut rng) as usize % sled_files.len()];
        let file = copy.join("db").join(file.file_name().expect("name"));
        let len = std::fs::metadata(&file).expect("len").len();
        let at = splitmix64(&mut rng) % (len - 8);
        let mut bytes = std::fs::read(&file).expect("read");
        let noise = splitmix64(&mut rng).to_le_bytes();
        bytes[at as usize..at as usize + 8].copy_from_slice(&noise);
        std::fs::write(&file, &bytes).expect("damage");
        let what = format!("trial {trial}: 8 bytes at {at} of {}", file.display());
        let mut ok = true;
        for args in [&["dump", "summary"][..], &["dump", "items"], &["crawl"]] {
            ok &= run_checked(&copy, args, &what);
        }
        if ok {
            assert_items_whole(&copy, &c.site, &what);
            whole += 1;
        } else {
            refused += 1;
        }
        std::fs::remove_dir_all(&copy).expect("clean up");
    }
    eprintln!("{whole} damaged states read whole, {refused} refused in one line");
}

#[test]
fn an_old_copy_of_the_database_put_back_is_refused_as_a_rollback() {
    let site = Site::generate(400, 4);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    let seed = server.url("/");
    let first = ["crawl", &seed, "--bloom-bits", "16", "--max-pages", "100"];
    assert!(cli::run(legcrawl(&state, &first), LIMIT).status.success());
    let old = data.path().join("old-db");
    copy_dir(&state.join("db"), &old);
    assert!(
        cli::run(legcrawl(&state, &["crawl"]), LIMIT)
            .status
            .success()
    );
    let items = cli::dump_items(&state).len();
    assert_eq!(items, site.reachable().len());
    // The database goes back to its copy; the rest of the state stays.
    std::fs::remove_dir_all(state.join("db")).expect("rm db");
    copy_dir(&old, &state.join("db"));
    for args in [&["dump", "summary"][..], &["dump", "items"], &["crawl"]] {
        let before = state_of(&state);
        let out = cli::run(legcrawl(&state, args), LIMIT);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains(&format!("rolled back from {items} to 100 items")),
            "{args:?}: {err}"
        );
        assert!(state_of(&state) == before, "{args:?} changed the state");
    }
}

/// Ways to damage `bloom.bin`.
fn damage_bloom(path: &Path, how: &str) {
    match how {
        "zeroed body" => {
            let mut bytes = std::fs::read(path).expect("read");
            bytes[4096..].fill(0);
            std::fs::write(path, bytes).expect("write");
        }
        "truncated" => {
            let file = std::fs::OpenOptions::new().write(true).open(path);
            file.and_then(|f| f.set_len(6000)).expect("truncate");
        }
        "deleted" => std::fs::remove_file(path).expect("rm"),
        "bad header" => {
            let mut bytes = std::fs::read(path).expect("read");
            bytes[..8].copy_from_slice(b"NOTBLOOM");
            std::fs::write(path, bytes).expect("write");
        }
        other => unreachable!("{other}"),
    }
}

const BLOOM_DAMAGE: [&str; 4] = ["zeroed body", "truncated", "deleted", "bad header"];

#[test]
fn a_damaged_bloom_file_is_rebuilt_from_the_exact_set_and_nothing_is_fetched_again() {
    for how in BLOOM_DAMAGE {
        let c = crawled(150, &[]);
        damage_bloom(&c.state.join("bloom.bin"), how);
        // `dump` works (the first open rebuilds, with a warning).
        let mut dump = legcrawl(&c.state, &["dump", "summary", "--json"]);
        dump.env("RUST_LOG", "warn,sled=off");
        let out = cli::run(dump, LIMIT);
        assert!(out.status.success(), "{how}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("rebuilt it"),
            "{how}: {}",
            stderr(&out)
        );
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
        assert_eq!(summary["items"], c.site.reachable().len(), "{how}");
        // The next crawl fetches only the seed (fetched every run) again.
        let requests = c.server.requests();
        let out = cli::run(legcrawl(&c.state, &["crawl", &c.seed]), LIMIT);
        assert!(out.status.success(), "{how}: {}", stderr(&out));
        let again = c.server.requests() - requests;
        assert!(again <= 2, "{how}: {again} requests after the repair");
        assert_items_whole(&c.state, &c.site, how);
    }
}

#[test]
fn a_damaged_bloom_file_in_bloom_mode_is_refused_in_one_line_and_left_alone() {
    for how in BLOOM_DAMAGE {
        let c = crawled(60, &["--dedup", "bloom"]);
        damage_bloom(&c.state.join("bloom.bin"), how);
        for args in [&["dump", "summary"][..], &["crawl", &c.seed], &["repair"]] {
            let before = state_of(&c.state);
            let out = cli::run(legcrawl(&c.state, args), LIMIT);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{how} {args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{how} {args:?}: {err}");
            assert!(err.contains("bloom dedup mode"), "{how} {args:?}: {err}");
            assert!(state_of(&c.state) == before, "{how} {args:?} changed it");
        }
    }
}

/// The exact set's run files of a state.
fn run_files(state: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(state.join("runs"))
        .expect("runs/")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "run"))
        .collect();
    files.sort();
    files
}

/// A run file of the exact set deleted, cut short, with its header zeroed, or
/// with one byte of its body flipped: there is no second copy to rebuild it
/// from, so every command that reads it answers in one line naming the file,
/// exit 2, and leaves the state's bytes as they were. Opening checks the header
/// and length only; the flipped byte is found by `repair`, which reads the run
/// whole (as a merge does).
#[test]
fn a_damaged_run_file_is_one_line_naming_it_and_the_state_is_left_alone() {
    for how in ["deleted", "cut", "header zeroed", "body flipped"] {
        let c = crawled(60, &[]);
        let runs = run_files(&c.state);
        assert!(!runs.is_empty(), "the crawl sealed a run");
        let run = &runs[0];
        let mut bytes = std::fs::read(run).expect("read run");
        match how {
            "deleted" => std::fs::remove_file(run).expect("remove"),
            "cut" => std::fs::write(run, &bytes[..bytes.len() - 7]).expect("cut"),
            "header zeroed" => {
                bytes[..32].fill(0);
                std::fs::write(run, &bytes).expect("zero");
            }
            _ => {
                let at = bytes.len() - 3;
                bytes[at] ^= 0x10;
                std::fs::write(run, &bytes).expect("flip");
            }
        }
        let commands: Vec<Vec<&str>> = if how == "body flipped" {
            vec![vec!["repair"]]
        } else {
            vec![
                vec!["dump", "summary"],
                vec!["crawl", &c.seed],
                vec!["repair"],
            ]
        };
        let name = run.file_name().and_then(|n| n.to_str()).expect("name");
        for args in commands {
            let before = state_of(&c.state);
            let entries = before.keys().filter(|path| {
                path.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("entry "))
            });
            assert!(entries.count() > 10, "{how}: sled's entries are compared");
            let out = cli::run(legcrawl(&c.state, &args), LIMIT);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{how} {args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{how} {args:?}: {err}");
            assert!(
                err.contains("damaged run file") && err.contains(name),
                "{how} {args:?}: {err}"
            );
            if how == "body flipped" {
                // The open before `repair`'s read found nothing wrong and did
                // what an open and a close do (the close record); the exact
                // set and the Bloom filter are as they were.
                let kept = |all: BTreeMap<PathBuf, Vec<u8>>| {
                    all.into_iter()
                        .filter(|(path, _)| {
                            path.starts_with(c.state.join("runs")) || path.ends_with("bloom.bin")
                        })
                        .collect::<BTreeMap<_, _>>()
                };
                assert!(kept(state_of(&c.state)) == kept(before), "{how} {args:?}");
            } else {
                let after = state_of(&c.state);
                assert!(
                    after == before,
                    "{how} {args:?} changed {:?}",
                    changed(&before, &after)
                );
            }
        }
    }
}

#[test]
fn repair_rebuilds_the_bloom_filter_and_a_crash_inside_it_loses_nothing() {
    let c = crawled(150, &[]);
    let out = cli::run(legcrawl(&c.state, &["repair"]), LIMIT);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let pages = c.site.reachable().len();
    assert!(
        err.contains(&format!(
            "rebuilt bloom.bin from the exact seen set ({pages} fingerprints"
        )),
        "{err}"
    );
    for point in ["repair.bloom:1", "repair.switch:1"] {
        crash_at(&c, &["repair"], point);
        crawl_again_whole(&c, point);
    }
}

/// Runs `args` on `c`'s state with an abort at crash point `point`, and
/// checks that it aborted there.
fn crash_at(c: &Crawled, args: &[&str], point: &str) {
    let mut cmd = legcrawl(&c.state, args);
    cmd.env(legcrawl::crash::CRASH_AT_ENV, point);
    let out = cli::run(cmd, LIMIT);
    assert!(
        stderr(&out).contains(&format!("legcrawl: crash point {point}")),
        "{point}: the crash happened there: {}",
        stderr(&out)
    );
}

/// Crawls `c`'s site again: the run succeeds, asks for little more than the
/// seed (and robots.txt), and the state holds every page's item once.
fn crawl_again_whole(c: &Crawled, what: &str) {
    let requests = c.server.requests();
    let out = cli::run(legcrawl(&c.state, &["crawl", &c.seed]), LIMIT);
    assert!(out.status.success(), "{what}: {}", stderr(&out));
    assert!(c.server.requests() - requests <= 2, "{what}");
    assert_items_whole(&c.state, &c.site, what);
}

/// A process that dies while sled writes its snapshot (only sled's open
/// writes one) leaves `db/snap.LSN.generating`, which sled 0.34 takes for the
/// newest snapshot and refuses, torn, as corrupt (the torn power-cut test
/// found it). The next open removes it and opens from the published snapshot
/// and the log; a crash as it removes it changes nothing.
#[test]
fn a_snapshot_sled_was_writing_when_its_process_died_is_dropped_and_nothing_is_lost() {
    let c = crawled(60, &[]);
    let leftover = c.state.join("db").join("snap.00000000FFFFFFFF.generating");
    for point in [None, Some("repair.snapshot:1")] {
        // What a torn write of it leaves: its first page, then zeros.
        let torn: Vec<u8> = (0..4096u32)
            .map(|i| (i % 251) as u8)
            .chain([0; 4096])
            .collect();
        std::fs::write(&leftover, torn).expect("write the torn snapshot");
        if let Some(point) = point {
            crash_at(&c, &["crawl", &c.seed], point);
        }
        crawl_again_whole(&c, &format!("{point:?}"));
        assert!(!leftover.exists(), "{point:?}: the torn snapshot is gone");
    }
}

/// The open after a crash reads the state in place: no trial copy of `db/`
/// (`repair.trial` is not reached). A state whose database files changed
/// after a clean close (another program's write: here, only a new
/// modification time) gets the trial open, which is itself cut short by a
/// crash, in the crawl and in a `dump`; each following open runs the trial
/// again until one completes, the crawl resumes, and the items are the site's
/// pages once each.
#[test]
fn a_crash_is_opened_in_place_and_an_outside_write_gets_a_trial_that_may_crash() {
    let site = Site::generate(200, 14);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    let trace = data.path().join("trace");
    let seed = server.url("/");
    let run = |args: &[&str], crash_at: Option<&str>| {
        let _ = std::fs::remove_file(&trace);
        let mut cmd = legcrawl(&state, args);
        cmd.env(legcrawl::crash::TRACE_ENV, &trace);
        if let Some(at) = crash_at {
            cmd.env(legcrawl::crash::CRASH_AT_ENV, at);
        }
        let out = cli::run(cmd, LIMIT);
        let hits = std::fs::read_to_string(&trace).unwrap_or_default();
        (out, hits.lines().any(|l| l == "repair.trial"))
    };
    let crawl = ["crawl", seed.as_str(), "--bloom-bits", "16"];
    // Killed mid-crawl, after the fifth durable group: opened in place.
    let (out, _) = run(&crawl, Some("group.apply:5"));
    assert!(
        stderr(&out).contains("crash point group.apply:5"),
        "{}",
        stderr(&out)
    );
    let (out, trial) = run(&["dump", "summary"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!trial, "the open after a crash made a trial copy");
    // Another program touched the database after the dump's clean close.
    let log = state.join("db").join("db");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .expect("db/db");
    file.set_modified(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        .expect("set mtime");
    drop(file);
    for (what, args) in [("crawl", &crawl[..]), ("dump", &["dump", "summary"][..])] {
        let (out, trial) = run(args, Some("repair.trial:1"));
        assert!(trial, "{what}: no trial open after an outside write");
        assert!(
            stderr(&out).contains("legcrawl: crash point repair.trial:1"),
            "{what}: the trial open ran and crashed: {}",
            stderr(&out)
        );
    }
    let (out, trial) = run(&crawl, None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(trial, "the trial open runs until one completes");
    assert!(
        !state.join(".db-trial").exists(),
        "the trial's copy is removed"
    );
    let (out, trial) = run(&["dump", "summary"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!trial, "the open after a clean close made a trial copy");
    assert_items_whole(&state, &site, "after crashes in the trial open");
    assert!(
        site.reachable().iter().all(|path| server.hits(path) <= 2),
        "a page fetched more than twice"
    );
}

/// A tmpfs of `size` mounted for a test, unmounted when dropped; `None` (and a
/// loud line) when this is not root or the mount fails.
pub(crate) struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    pub(crate) fn mount(size: &str, test: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::process::Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
        let mounted = root
            && std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(dir.path())
                .status()
                .is_ok_and(|s| s.success());
        if !mounted {
            crate::support::skip::skipped(
                "LEGCRAWL_REQUIRE_TMPFS",
                test,
                "needs root and mount(8) to make a small tmpfs",
            );
            return None;
        }
        Some(SmallFs { dir })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Grows (or shrinks) the file system to `size`, its files kept.
    pub(crate) fn resize(&self, size: &str) {
        let ok = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount to {size}");
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn a_bloom_file_that_does_not_fit_is_one_line_at_creation_never_sigbus() {
    let Some(fs) = SmallFs::mount("40m", "a_bloom_file_that_does_not_fit") else {
        return;
    };
    let state = fs.path().join("state");
    // 2^30 bits = 128 MiB of Bloom file on a 40 MB file system.
    let args = ["crawl", "http://127.0.0.1:9/", "--bloom-bits", "30"];
    let out = cli::run(legcrawl(&state, &args), LIMIT);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&state)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing left behind: {left:?}");
}

#[test]
fn a_sparse_bloom_file_of_an_older_build_gets_its_blocks_or_a_clean_error() {
    let Some(fs) = SmallFs::mount("8m", "a_sparse_bloom_file_of_an_older_build") else {
        return;
    };
    let c = crawled(30, &["--bloom-bits", "24"]);
    let state = fs.path().join("state");
    copy_dir(&c.state, &state);
    // Make bloom.bin sparse again, as builds before the reservation left it:
    // every all-zero 4 KiB block of the bits becomes a hole, the bits stay.
    let bloom = state.join("bloom.bin");
    let bytes = std::fs::read(&bloom).expect("read");
    std::fs::remove_file(&bloom).expect("rm");
    let file = std::fs::File::create(&bloom).expect("create");
    file.set_len(bytes.len() as u64).expect("hole");
    use std::os::unix::fs::FileExt;
    let mut holes = 0u64;
    for (n, block) in bytes.chunks(4096).enumerate() {
        if n > 0 && block.iter().all(|&b| b == 0) {
            holes += 4096;
        } else {
            file.write_all_at(block, n as u64 * 4096).expect("block");
        }
    }
    drop(file);
    assert!(holes > 1 << 20, "{holes} bytes of holes");
    // Fill the file system, leaving less room than the holes need.
    let filler = fs.path().join("filler");
    let mut n = 0;
    while std::fs::write(fs.path().join(format!("filler{n}")), vec![1u8; 64 * 1024]).is_ok() {
        n += 1;
    }
    for k in 0..(holes / 2) / (64 * 1024) {
        std::fs::remove_file(fs.path().join(format!("filler{k}"))).expect("rm");
    }
    std::fs::write(&filler, b"").expect("filler");
    let before = state_of(&state);
    let out = cli::run(legcrawl(&state, &["dump", "summary"]), LIMIT);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("cannot reserve"), "{err}");
    let after = state_of(&state);
    assert!(
        after == before,
        "the failed open changed the state: {:?}",
        changed(&before, &after)
    );
    // Room again: the blocks are reserved, and every item is there.
    for entry in std::fs::read_dir(fs.path()).expect("ls").flatten() {
        if entry.file_name().to_string_lossy().starts_with("filler") {
            std::fs::remove_file(entry.path()).expect("rm filler");
        }
    }
    assert_items_whole(&state, &c.site, "after freeing space");
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&bloom).expect("meta");
    assert!(meta.blocks() * 512 >= meta.len(), "blocks reserved");
}

/// Bytes in use under `dir` (files only).
fn used(dir: &Path) -> u64 {
    contents(dir).values().map(|b| b.len() as u64).sum()
}

#[test]
fn a_crawl_on_a_full_disk_fails_cleanly_and_resumes_exactly_once_space_is_freed() {
    let Some(fs) = SmallFs::mount("16m", "a_crawl_on_a_full_disk") else {
        return;
    };
    let site = Site::generate(400, 8);
    let server = TestServer::start(site.handler());
    let seed = server.url("/");
    let state = fs.path().join("state");
    let out = cli::run(
        legcrawl(
            &state,
            &["crawl", &seed, "--bloom-bits", "16", "--max-pages", "20"],
        ),
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // Fill the file system to the last few KiB, then crawl on.
    let filler = fs.path().join("filler");
    let mut free = 16 * 1024 * 1024 - used(fs.path());
    let mut n = 0;
    while free > 8192 {
        let chunk = (free / 2).max(4096);
        if std::fs::write(
            fs.path().join(format!("filler{n}")),
            vec![1u8; chunk as usize],
        )
        .is_err()
        {
            break;
        }
        n += 1;
        free -= chunk;
    }
    let _ = std::fs::write(&filler, vec![1u8; 4096]);
    let out = cli::run(legcrawl(&state, &["crawl"]), LIMIT);
    let err = stderr(&out);
    assert_ne!(out.status.code(), None, "killed by a signal: {err}");
    assert!(!err.contains("panicked"), "{err}");
    if !out.status.success() {
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
    }
    eprintln!("on a full disk: {:?} {}", out.status.code(), err.trim());
    // Space again: the crawl resumes and every page is there exactly once.
    for entry in std::fs::read_dir(fs.path()).expect("ls").flatten() {
        if entry.file_name().to_string_lossy().starts_with("filler") {
            std::fs::remove_file(entry.path()).expect("rm filler");
        }
    }
    let out = cli::run(legcrawl(&state, &["crawl"]), LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_items_whole(&state, &site, "after freeing space");
}
