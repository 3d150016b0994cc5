//! A shared crawl's item stream read from Redis itself (`XRANGE`), and the
//! check that the workers' `--output` files, joined, hold exactly it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::redis::{RedisServer, Resp};
use crate::support::workers::Crawl;

/// One entry of the crawl's item stream: the item and the output id it is
/// tagged with (empty: none).
pub struct Entry {
    /// The item's JSON line.
    pub item: String,
    /// The id of the output file it was written to.
    pub out: String,
}

/// Every entry of the crawl's item stream, in stream order.
pub fn stream(redis: &RedisServer, crawl: &Crawl) -> Vec<Entry> {
    let key = format!("{}items", crawl.prefix());
    let reply = redis.command(&["XRANGE", &key, "-", "+"]).expect("XRANGE");
    let Resp::Array(Some(entries)) = reply else {
        panic!("XRANGE answered {reply:?}");
    };
    entries
        .iter()
        .map(|entry| {
            let Resp::Array(Some(parts)) = entry else {
                panic!("a stream entry {entry:?}");
            };
            let fields = parts.get(1).map(Resp::texts).unwrap_or_default();
            let field = |name: &str| {
                fields
                    .chunks(2)
                    .find(|pair| pair[0] == name)
                    .and_then(|pair| pair.get(1).cloned())
                    .unwrap_or_default()
            };
            Entry {
                item: field("item"),
                out: field("out"),
            }
        })
        .collect()
}

/// The lines of `path` (none when it is missing).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `(line, count)` for each line whose counts differ between `got` and `want`.
fn differences(got: &[String], want: &[&String]) -> Vec<(String, i64)> {
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for line in got {
        *counts.entry(line).or_default() += 1;
    }
    for line in want {
        *counts.entry(line).or_default() -= 1;
    }
    counts
        .into_iter()
        .filter(|(_, n)| *n != 0)
        .map(|(line, n)| (line.to_owned(), n))
        .collect()
}

/// Asserts that the files at `outputs` (paths, or names in the crawl's
/// directory), joined, hold the crawl's item stream as a multiset, and each
/// its own id's items in stream order; returns a line per file (its lines
/// against the items tagged with its id, and where they first differ).
pub fn assert_files_equal_the_stream(
    redis: &RedisServer,
    crawl: &Crawl,
    outputs: &[String],
) -> String {
    files_against(redis, crawl, outputs, false)
}

/// As [`assert_files_equal_the_stream`], against the stream's items that
/// were written to an output file (tagged with an id): a worker without
/// `--output` wrote the others to no file.
pub fn assert_files_equal_the_written_stream(
    redis: &RedisServer,
    crawl: &Crawl,
    outputs: &[String],
) -> String {
    files_against(redis, crawl, outputs, true)
}

/// The check of both: against every entry, or those tagged when `tagged`.
fn files_against(redis: &RedisServer, crawl: &Crawl, outputs: &[String], tagged: bool) -> String {
    let mut entries = stream(redis, crawl);
    if tagged {
        entries.retain(|e| !e.out.is_empty());
    }
    let paths: Vec<_> = outputs.iter().map(|o| crawl.dir().join(o)).collect();
    let files: Vec<Vec<String>> = paths.iter().map(|p| lines(p)).collect();
    let mut ids: Vec<&str> = entries.iter().map(|e| e.out.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut report = String::new();
    let mut in_order = true;
    for (slot, (file, path)) in files.iter().zip(&paths).enumerate() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(id) = ids.iter().find(|id| id.ends_with(&format!("/{name}"))) else {
            continue;
        };
        let own: Vec<&String> = entries
            .iter()
            .filter(|e| e.out == *id)
            .map(|e| &e.item)
            .collect();
        let first = file.iter().zip(&own).position(|(line, item)| line != *item);
        in_order &= first.is_none() && file.len() == own.len();
        report.push_str(&format!(
            "worker {slot}: {} lines, {} items tagged {id}, first difference at {first:?}; {:?}\n",
            file.len(),
            own.len(),
            differences(file, &own).iter().take(5).collect::<Vec<_>>()
        ));
    }
    let joined: Vec<String> = files.into_iter().flatten().collect();
    let all: Vec<&String> = entries.iter().map(|e| &e.item).collect();
    let diff = differences(&joined, &all);
    assert!(
        diff.is_empty() && in_order,
        "the workers' files ({} lines) are not the stream ({} items): {} lines differ, \
         e.g. {:?}\n{report}",
        joined.len(),
        all.len(),
        diff.len(),
        diff.iter().take(3).collect::<Vec<_>>()
    );
    report
}

/// N in a line `… lost N committed completions …`.
pub fn lost_count(line: &str) -> u64 {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "committed")
        .expect("the word committed");
    words[at - 1].parse().expect("a count before committed")
}

/// The files in `dir` the lines of lost completions of `output` were moved
/// into, in name order.
pub fn lost_files(dir: &Path, output: &str) -> Vec<PathBuf> {
    let prefix = format!("{output}.lost-after-redis-went-back-");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the crawl's directory")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}
