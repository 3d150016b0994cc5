//! Issue 43: the WARC is exact on a full disk. The state on a roomy disk,
//! `--warc` and `--output` on a small tmpfs that fills mid-crawl, again and
//! again: each time the crawl stops with exit 1 and one line naming the full
//! disk (warnings shown: no second line for the same cause); the file system is grown and the crawl resumed. At the end every
//! page has exactly one response record, every file passes `warcio check`,
//! and the JSON lines hold each item once. Rotation is set small, so the
//! disk fills inside records, between them and while a new file begins.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::damage::SmallFs;
use crate::support::cli::{self, legcrawl};
use crate::support::warc;
use crate::support::{Site, TestServer, assert_each_once};

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn a_full_disk_under_the_warc_loses_no_record_and_writes_none_twice() {
    let Some(fs) = SmallFs::mount("96k", "a_full_disk_under_the_warc") else {
        return;
    };
    let site = Site::generate(500, 9);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("state");
    let dir = fs.path().join("warc");
    let output = fs.path().join("out.jsonl");
    let seed = server.url("/");
    let args = [
        "crawl",
        &seed,
        "--warc",
        dir.to_str().unwrap(),
        "--warc-max-size",
        "48KiB",
        "--output",
        output.to_str().unwrap(),
        "--delay",
        "0",
        "--concurrency",
        "4",
    ];
    let mut fills = 0;
    for size in [
        "160k", "256k", "384k", "512k", "768k", "1m", "2m", "4m", "64m",
    ] {
        // As a user runs it: warnings shown too, so that one line is all.
        let mut command = legcrawl(&state, &args);
        command.env_remove("RUST_LOG");
        let out = cli::run(command, LIMIT);
        if out.status.success() {
            break;
        }
        let err = cli::stderr(&out);
        assert_eq!(out.status.code(), Some(1), "fill {fills}: {err}");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "fill {fills}: one line: {err}"
        );
        assert!(
            err.contains("No space left on device"),
            "fill {fills}: {err}"
        );
        assert!(
            !err.contains("could not be recorded as failed"),
            "fill {fills}: the same full disk said twice: {err}"
        );
        fills += 1;
        fs.resize(size);
    }
    assert!(fills >= 3, "the disk filled {fills} times");
    // The last run ended the crawl.
    let out = cli::run(legcrawl(&state, &args), LIMIT);
    cli::assert_ok("the crawl after the fills", &out);

    let records = warc::read_dir(&dir);
    let mut responses: BTreeMap<&str, usize> = BTreeMap::new();
    for record in records.iter().filter(|r| r.kind() == "response") {
        *responses.entry(record.target()).or_default() += 1;
        warc::check_digests(record);
    }
    let expected: BTreeSet<String> = site.reachable().iter().map(|p| server.url(p)).collect();
    for url in &expected {
        let n = responses.get(url.as_str()).copied().unwrap_or(0);
        let revisits = records
            .iter()
            .filter(|r| r.kind() == "revisit" && r.target() == url)
            .count();
        assert_eq!(n, 1, "{url}: {n} response records ({revisits} revisits)");
    }
    let files = warc::files(&dir);
    assert!(files.len() > 3, "the crawl rotated: {files:?}");
    warc::warcio_check(&files);
    // The JSON lines: each page's item once.
    let lines = cli::parse_lines(&std::fs::read(&output).unwrap());
    let paths: Vec<String> = lines.iter().map(cli::item_path).collect();
    let pages: BTreeSet<String> = site.reachable().into_iter().collect();
    assert_each_once(&paths, &pages, "the --output file");
    eprintln!("{fills} fills, {} files", files.len());
}
