//! `--output` cursors with the real binary against a site that changes between
//! runs ([`ChangingSite`]): a run appends only what was committed after the
//! output's cursor, whether the file stayed in place, was moved away,
//! truncated or replaced; a crash at the sink's crash points loses and
//! duplicates nothing beyond the documented bound; and a state written before
//! cursors (a watermark only) keeps its file exact once, then gets a cursor.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use legcrawl::crash::CRASH_AT_ENV;

use crate::support::changing::{ChangingSite, page_path};
use crate::support::cli::{self, dump_feed, item_path, legcrawl, run};
use crate::support::{TestServer, sorted};

const LIMIT: Duration = Duration::from_secs(120);
/// Pages of the site (the hub makes one more item).
const PAGES: usize = 20;
/// Flags of every crawl: a small Bloom filter, no robots.txt, and every page
/// due again on the next run (so edits are found).
const BASE: [&str; 5] = [
    "--bloom-bits",
    "20",
    "--ignore-robots",
    "--revisit-after",
    "0",
];

/// A site, its server, and a directory holding the state (`state/`) and the
/// output files.
struct Setup {
    site: ChangingSite,
    server: TestServer,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let site = ChangingSite::new(PAGES);
        let server = site.serve();
        let dir = tempfile::tempdir().expect("temp dir");
        Setup { site, server, dir }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn output(&self) -> PathBuf {
        self.dir.path().join("items.jsonl")
    }

    /// The crawl command: the seed on the first run only (later runs resume
    /// the stored one), `--output` always.
    fn command(&self, seed: bool) -> std::process::Command {
        let url = self.server.url("/");
        let output = self.output();
        let mut args = vec!["crawl"];
        if seed {
            args.push(&url);
        }
        args.extend_from_slice(&["--output", output.to_str().expect("UTF-8 temp path")]);
        args.extend_from_slice(&BASE);
        legcrawl(&self.state(), &args)
    }

    /// A crawl that must succeed.
    fn crawl(&self, seed: bool) -> Output {
        let out = run(self.command(seed), LIMIT);
        assert!(
            out.status.success(),
            "crawl failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// A crawl that must abort at the crash point `at` (`NAME:N`).
    fn crash(&self, seed: bool, at: &str) {
        let mut cmd = self.command(seed);
        cmd.env(CRASH_AT_ENV, at);
        let out = run(cmd, LIMIT);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGABRT),
            "expected an abort at {at}, got {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Every stored item as (path, version), in store order.
    fn items(&self) -> Vec<(String, u64)> {
        dump_feed(&self.state()).iter().map(path_version).collect()
    }

    /// Moves the output file away (as its consumer would) to `name`.
    fn move_away(&self, name: &str) -> PathBuf {
        let to = self.dir.path().join(name);
        std::fs::rename(self.output(), &to).expect("moving the output away");
        to
    }
}

fn path_version(item: &serde_json::Value) -> (String, u64) {
    let version = item["version"].as_u64().expect("every item has a version");
    (item_path(item), version)
}

/// The lines of a JSON-lines file as (path, version), in file order.
fn lines(path: &Path) -> Vec<(String, u64)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.is_empty() || bytes.ends_with(b"\n"),
        "{}: a torn last line",
        path.display()
    );
    cli::parse_lines(&bytes).iter().map(path_version).collect()
}

/// Pages `numbers` at `version`, sorted.
fn pages_at(numbers: &[usize], version: u64) -> Vec<(String, u64)> {
    let mut pages: Vec<_> = numbers.iter().map(|&i| (page_path(i), version)).collect();
    pages.sort();
    pages
}

#[test]
fn a_moved_output_gets_only_the_items_committed_after_it() {
    let setup = Setup::new();
    setup.crawl(true);
    let first = lines(&setup.output());
    assert_eq!(first.len(), PAGES + 1);
    assert_eq!(first, setup.items(), "the first file is the item store");
    let moved = setup.move_away("items.1.jsonl");

    setup.site.edit(3);
    setup.site.edit(8);
    setup.crawl(false);
    let second = lines(&setup.output());
    assert_eq!(sorted(second.clone()), pages_at(&[3, 8], 2));
    assert_eq!(lines(&moved), first, "the moved file is left alone");
    let all: Vec<_> = first.into_iter().chain(second).collect();
    assert_eq!(all, setup.items(), "the two files are the store, once");

    // Nothing new: the next run makes an empty file where the output was.
    setup.move_away("items.2.jsonl");
    setup.crawl(false);
    assert_eq!(lines(&setup.output()), Vec::new());
}

#[test]
fn an_output_left_in_place_grows_by_exactly_the_new_items() {
    let setup = Setup::new();
    setup.crawl(true);
    assert_eq!(lines(&setup.output()), setup.items());
    setup.site.edit(1);
    setup.site.edit(4);
    setup.crawl(false);
    assert_eq!(lines(&setup.output()), setup.items());
    setup.site.edit(4);
    setup.site.add(PAGES);
    setup.crawl(false);
    assert_eq!(lines(&setup.output()), setup.items());
    // Nothing changed: the file stays as it is.
    let before = std::fs::read(setup.output()).expect("output");
    setup.crawl(false);
    assert_eq!(std::fs::read(setup.output()).expect("output"), before);
    let items = setup.items();
    assert_eq!(items.len(), PAGES + 1 + 2 + 3, "{items:?}");
}

#[test]
fn a_truncated_or_replaced_output_gets_only_the_new_items() {
    use std::os::unix::fs::MetadataExt;
    let setup = Setup::new();
    setup.crawl(true);
    let first = lines(&setup.output());
    let inode = std::fs::metadata(setup.output()).expect("output").ino();
    // `: > items.jsonl`: the same file, empty.
    std::fs::File::create(setup.output()).expect("truncating the output");
    assert_eq!(
        std::fs::metadata(setup.output()).expect("output").ino(),
        inode
    );
    setup.site.edit(2);
    setup.site.edit(5);
    setup.crawl(false);
    let second = lines(&setup.output());
    assert_eq!(sorted(second.clone()), pages_at(&[2, 5], 2));

    // Another file in its place (renamed over it, so that it cannot reuse
    // the inode), with lines of its own and a last line without its newline:
    // its complete lines stay, the new items follow.
    let other = setup.dir.path().join("other.jsonl");
    let foreign = "{\"url\":\"http://elsewhere.test/a\",\"version\":7}\n";
    std::fs::write(&other, format!("{foreign}{{\"url\":\"http://to")).expect("a file");
    std::fs::rename(&other, setup.output()).expect("replacing the output");
    setup.site.edit(5);
    setup.crawl(false);
    let third = lines(&setup.output());
    assert_eq!(third[0], ("/a".to_owned(), 7), "{third:?}");
    assert_eq!(third[1..], pages_at(&[5], 3));
    let ours: Vec<_> = first
        .into_iter()
        .chain(second)
        .chain(third[1..].to_vec())
        .collect();
    assert_eq!(ours, setup.items());
}

#[test]
fn a_crash_when_the_cursor_is_recorded_loses_and_duplicates_nothing() {
    let setup = Setup::new();
    setup.crawl(true);
    let first = lines(&setup.output());
    let moved = setup.move_away("items.1.jsonl");
    setup.site.edit(6);
    setup.site.edit(7);
    // The new file is created, then the run dies before its cursor is
    // recorded; the next run finds a file the cursor does not name.
    setup.crash(false, "output.cursor:1");
    setup.crawl(false);
    let second = lines(&setup.output());
    assert_eq!(sorted(second.clone()), pages_at(&[6, 7], 2));
    assert_eq!(lines(&moved), first);
    let all: Vec<_> = first.into_iter().chain(second).collect();
    assert_eq!(all, setup.items());

    // The same with the file left in place.
    setup.site.edit(6);
    setup.crash(false, "output.cursor:1");
    setup.crawl(false);
    assert_eq!(lines(&setup.output()).len(), 3);
    let all: Vec<_> = lines(&moved)
        .into_iter()
        .chain(lines(&setup.output()))
        .collect();
    assert_eq!(all, setup.items());
}

#[test]
fn a_crash_before_the_cursor_advances_is_exact_in_place_and_bounded_when_moved() {
    // The first group is the hub alone: its line is written, and the run dies
    // before the cursor that covers it is written.
    let setup = Setup::new();
    setup.crash(true, "output.advance:1");
    let torn = lines(&setup.output());
    assert_eq!(torn, vec![("/".to_owned(), 1)], "the hub's line");
    setup.crawl(false);
    assert_eq!(lines(&setup.output()), setup.items(), "in place: exact");
    assert_eq!(setup.items().len(), PAGES + 1);

    // Moved away after the same crash: the lines written since the last
    // durable group (the hub's) are written again, and nothing else.
    let setup = Setup::new();
    setup.crash(true, "output.advance:1");
    let moved = setup.move_away("items.1.jsonl");
    setup.crawl(false);
    assert_eq!(lines(&moved), vec![("/".to_owned(), 1)]);
    assert_eq!(lines(&setup.output()), setup.items());
}

#[test]
fn a_copy_put_in_place_after_a_crash_is_the_same_file() {
    // The first group is the hub alone: its line is written, and the run dies
    // before the cursor that covers it is written. The file is then replaced
    // by a copy of itself (a new inode, as a restore from a backup shows it;
    // a remount may show a new device). The copy's line after the cursor is
    // the item the cursor names next, so it is the same file: that line
    // counts, and nothing is written twice.
    use std::os::unix::fs::MetadataExt;
    let setup = Setup::new();
    setup.crash(true, "output.advance:1");
    let copy = setup.dir.path().join("copy.jsonl");
    std::fs::copy(setup.output(), &copy).expect("copying the output");
    let inode = std::fs::metadata(setup.output()).expect("output").ino();
    std::fs::rename(&copy, setup.output()).expect("putting the copy in place");
    assert_ne!(
        std::fs::metadata(setup.output()).expect("output").ino(),
        inode
    );
    setup.crawl(false);
    assert_eq!(lines(&setup.output()), setup.items(), "exact");
    assert_eq!(setup.items().len(), PAGES + 1);
}
