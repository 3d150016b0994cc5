//! The crash-point table is complete: every call that writes or syncs the state
//! (sled batches and flushes, the Bloom map, files of the state directory, the
//! output sink, the WARC writer) is preceded, in its function, by a named point of
//! [`POINTS`], or says on the line before which caller's point covers it.

use super::{POINTS, parse};

/// The files that write or sync the state, with their text.
const SOURCES: &[(&str, &str)] = &[
    ("store/mod.rs", include_str!("store/mod.rs")),
    ("store/seen.rs", include_str!("store/seen.rs")),
    ("store/side.rs", include_str!("store/side.rs")),
    ("store/sink.rs", include_str!("store/sink.rs")),
    ("store/beside.rs", include_str!("store/beside.rs")),
    ("store/sizing.rs", include_str!("store/sizing.rs")),
    ("store/commit.rs", include_str!("store/commit.rs")),
    ("store/committer.rs", include_str!("store/committer.rs")),
    ("store/exact.rs", include_str!("store/exact.rs")),
    ("store/runfile.rs", include_str!("store/runfile.rs")),
    ("store/sorted.rs", include_str!("store/sorted.rs")),
    ("store/checkpoint.rs", include_str!("store/checkpoint.rs")),
    ("store/frontier.rs", include_str!("store/frontier.rs")),
    ("store/pages.rs", include_str!("store/pages.rs")),
    ("store/pageblock.rs", include_str!("store/pageblock.rs")),
    ("store/pageids.rs", include_str!("store/pageids.rs")),
    ("store/robots.rs", include_str!("store/robots.rs")),
    ("store/ops.rs", include_str!("store/ops.rs")),
    ("store/cycle.rs", include_str!("store/cycle.rs")),
    ("store/table.rs", include_str!("store/table.rs")),
    ("status.rs", include_str!("status.rs")),
    ("status/snapshot.rs", include_str!("status/snapshot.rs")),
    ("store/views.rs", include_str!("store/views.rs")),
    ("store/queues.rs", include_str!("store/queues.rs")),
    ("store/queue.rs", include_str!("store/queue.rs")),
    ("store/dir.rs", include_str!("store/dir.rs")),
    ("store/due.rs", include_str!("store/due.rs")),
    ("store/db.rs", include_str!("store/db.rs")),
    ("store/runs.rs", include_str!("store/runs.rs")),
    ("store/items.rs", include_str!("store/items.rs")),
    ("store/jobs.rs", include_str!("store/jobs.rs")),
    ("store/keys.rs", include_str!("store/keys.rs")),
    ("store/records.rs", include_str!("store/records.rs")),
    ("store/options.rs", include_str!("store/options.rs")),
    ("store/error.rs", include_str!("store/error.rs")),
    ("store/format.rs", include_str!("store/format.rs")),
    ("store/repair.rs", include_str!("store/repair.rs")),
    ("store/durable.rs", include_str!("store/durable.rs")),
    ("store/panics.rs", include_str!("store/panics.rs")),
    ("bloom/file.rs", include_str!("bloom/file.rs")),
    ("store/warc.rs", include_str!("store/warc.rs")),
    ("store/cookies.rs", include_str!("store/cookies.rs")),
    ("store/unreachable.rs", include_str!("store/unreachable.rs")),
    ("engine/sink.rs", include_str!("engine/sink.rs")),
    ("warc/writer.rs", include_str!("warc/writer.rs")),
];

/// Calls that write or sync something of the state.
const WRITES: &[&str] = &[
    ".apply_batch(",
    ".commit_now(",
    "db.flush()",
    "db.insert(",
    "db.remove(",
    "tree().insert(",
    "tree().remove(",
    "tree().flush()",
    "tree().apply_batch(",
    ".flush_range(",
    ".sync_all()",
    ".sync_data()",
    "fs::write(",
    "fs::rename(",
    "fs::remove_file(",
    "fs::remove_dir_all(",
    ".set_len(",
    ".write_all(",
    ".write_all_at(",
    "self.bloom.insert(",
];

/// The crash points named in `text` (`crash::point("NAME")`).
fn named_points(text: &str) -> Vec<&str> {
    text.match_indices("crash::point(\"")
        .filter_map(|(at, pattern)| {
            let rest = &text[at + pattern.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

/// True when the function around line `at` reaches a crash point before it, or
/// a comment above it in the function names the caller's point that covers it
/// (`// crash point: NAME, ...`).
fn covered(lines: &[&str], at: usize) -> bool {
    for line in lines[..=at].iter().rev() {
        if line.contains("crash::point(") || line.trim_start().starts_with("// crash point:") {
            return true;
        }
        let code = line.trim_start();
        if code.starts_with("fn ") || code.starts_with("pub fn ") || code.contains(" fn ") {
            return false;
        }
    }
    false
}

/// The one write path: outside `Db::commit_now` (and the sync it calls,
/// `db.rs`) no store code applies, inserts, removes or flushes through
/// sled's tree.
#[test]
fn only_commit_now_writes_to_sled() {
    let direct = [
        "tree().insert(",
        "tree().remove(",
        "tree().flush(",
        "tree().apply_batch(",
        "tree.insert(",
        "tree.remove(",
        "tree.apply_batch(",
    ];
    let mut found = Vec::new();
    for (file, text) in SOURCES {
        if !file.starts_with("store/") || *file == "store/db.rs" {
            continue;
        }
        let code = text.split("#[cfg(test)]").next().unwrap_or(text);
        // A method chain split over lines (`db.tree()` / `.insert(`) is read
        // as one line, numbered by its first.
        let mut lines: Vec<(usize, String)> = Vec::new();
        for (n, line) in code.lines().enumerate() {
            match lines.last_mut() {
                Some((_, last)) if line.trim_start().starts_with('.') => {
                    last.push_str(line.trim_start());
                }
                _ => lines.push((n, line.to_owned())),
            }
        }
        for (n, line) in lines {
            let in_commit_now =
                *file == "store/table.rs" && line.contains("self.tree.apply_batch(");
            if !line.trim_start().starts_with("//")
                && !in_commit_now
                && direct.iter().any(|d| line.contains(d))
            {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "writes that bypass Db::commit_now:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_write_or_sync_of_the_state_has_a_crash_point() {
    let mut missing = Vec::new();
    for (file, text) in SOURCES {
        // Unit tests below `#[cfg(test)]` write freely.
        let code = text.split("#[cfg(test)]").next().unwrap_or(text);
        let lines: Vec<&str> = code.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let doc = line.trim_start().starts_with("//");
            if !doc && WRITES.iter().any(|w| line.contains(w)) && !covered(&lines, n) {
                missing.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "writes without a crash point:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_named_point_is_in_the_table_and_every_entry_is_used() {
    let mut used = Vec::new();
    for (file, text) in SOURCES {
        for name in named_points(text) {
            assert!(
                POINTS.iter().any(|p| p.name == name),
                "{file} names crash point {name}, which is not in POINTS"
            );
            used.push(name);
        }
        for line in text.lines() {
            if let Some(name) = line.trim_start().strip_prefix("// crash point: ") {
                let names = name.split(" (").next().unwrap_or_default();
                for name in names.split(", ") {
                    assert!(
                        POINTS.iter().any(|p| p.name == name),
                        "{file} refers to crash point {name}, which is not in POINTS"
                    );
                }
            }
        }
    }
    for point in POINTS {
        assert!(
            used.contains(&point.name),
            "crash point {} is in POINTS but never reached by the code",
            point.name
        );
    }
    let mut names: Vec<&str> = POINTS.iter().map(|p| p.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), POINTS.len(), "point names are unique");
}

#[test]
fn plans_name_a_known_point_and_a_hit_from_one() {
    assert_eq!(parse("group.apply:3"), Some(("group.apply".into(), 3)));
    assert_eq!(parse("run.begin"), Some(("run.begin".into(), 1)));
    assert_eq!(parse("group.apply:0"), None);
    assert_eq!(parse("nosuch.point:1"), None);
    assert_eq!(parse("group.apply:x"), None);
}

#[test]
fn every_file_of_the_store_is_checked() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    for entry in std::fs::read_dir(&dir).expect("src/store") {
        let name = entry.expect("entry").file_name();
        let name = name.to_string_lossy();
        let is_test = name == "tests.rs" || name.ends_with("_tests.rs");
        // crash.rs is the table itself (its trace file is not state).
        if name.ends_with(".rs") && !is_test && name != "crash.rs" {
            assert!(
                SOURCES
                    .iter()
                    .any(|(file, _)| *file == format!("store/{name}")),
                "src/store/{name} is not in the crash-point check's SOURCES"
            );
        }
    }
}
