//! Exports and reports through the real binary: `dump items --format csv|jsonl
//! --fields`, `--run` / `--since-run` (a number or `last`), `dump runs --json`,
//! `crawl --stats`; and the new-user fixes around them (options after the view,
//! `--config` for `dump` and `reset`, `--help` examples, the frontier note,
//! one-line messages).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use legcrawl::store::records::{self, RunRecord};
use serde_json::Value;

use crate::support::cli::{self, dump_items, legcrawl, parse_lines, run, stderr};
use crate::support::{Site, TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);

/// A `legcrawl` command with exactly `args` (no `--data` added).
fn raw(args: &[&str]) -> Command {
    let mut cmd = Command::new(cli::bin());
    cmd.args(args).env("RUST_LOG", "error");
    cmd
}

/// `crawl SEED --bloom-bits 20` plus `args`, asserting success.
fn crawl_ok(data: &Path, seed: &str, args: &[&str]) -> Output {
    cli::crawl_ok(data, &[&[seed, "--bloom-bits", "20"], args].concat())
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts exit 2 with one line on stderr, and returns that line.
fn one_line_exit_2(out: &Output) -> String {
    let text = stderr(out);
    assert_eq!(out.status.code(), Some(2), "stderr: {text}");
    assert_eq!(text.trim_end().lines().count(), 1, "not one line: {text}");
    text.trim_end().to_owned()
}

/// Runs `dump` with `--data data` and `args`, asserting success; returns stdout.
fn dump_ok(data: &Path, args: &[&str]) -> String {
    let mut all = vec!["dump"];
    all.extend_from_slice(args);
    let out = run(legcrawl(data, &all), LIMIT);
    assert!(out.status.success(), "dump {args:?}: {}", stderr(&out));
    stdout(&out)
}

/// A home page whose title needs CSV quoting, a plain page, and a redirect (whose
/// item has a nested `redirects` array).
fn quoting_site() -> TestServer {
    TestServer::start(handler(|request| match request.path() {
        "/" => TestResponse::html(
            "<html><head><title>Home, \"sweet\" home</title></head><body>\
             <a href=\"/plain\">plain</a> <a href=\"/moved\">moved</a></body></html>",
        ),
        "/plain" => TestResponse::html("<title>Plain</title>"),
        "/moved" => TestResponse::redirect(301, "/landed"),
        "/landed" => TestResponse::html("<title>Landed; after a redirect</title>"),
        _ => TestResponse::not_found(),
    }))
}

/// What a CSV cell holds for a JSON value.
fn expected_cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Parses CSV text with the `csv` crate: header, then rows.
fn read_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    let rows = reader
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect();
    (header, rows)
}

#[test]
fn csv_export_reads_back_with_a_csv_reader() {
    let server = quoting_site();
    let data = tempfile::tempdir().unwrap();
    crawl_ok(data.path(), &server.url("/"), &[]);
    let items = dump_items(data.path());
    assert!(items.len() >= 3, "{items:?}");
    assert!(items.iter().any(|i| i["title"] == "Home, \"sweet\" home"));
    assert!(items.iter().any(|i| i["redirects"].is_array()));

    let text = dump_ok(data.path(), &["items", "--format", "csv"]);
    assert!(text.ends_with("\r\n"), "RFC 4180 lines end in CRLF");
    let (header, rows) = read_csv(&text);
    let mut others: Vec<String> = items
        .iter()
        .flat_map(|i| i.as_object().unwrap().keys().cloned())
        .filter(|k| !["url", "status", "title", "fetched_at"].contains(&k.as_str()))
        .collect();
    others.sort();
    others.dedup();
    let mut expected = vec!["url", "status", "title", "fetched_at"];
    expected.extend(others.iter().map(String::as_str));
    assert_eq!(header, expected);
    assert_eq!(rows.len(), items.len());
    for (row, item) in rows.iter().zip(&items) {
        let cells: Vec<String> = header.iter().map(|h| expected_cell(item.get(h))).collect();
        assert_eq!(row, &cells);
    }

    // --fields: only those columns, in that order; --limit still applies.
    let text = dump_ok(
        data.path(),
        &[
            "items",
            "--format",
            "csv",
            "--fields",
            "title,url,redirects",
            "--limit",
            "2",
        ],
    );
    let (header, rows) = read_csv(&text);
    assert_eq!(header, ["title", "url", "redirects"]);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][0], items[0]["title"].as_str().unwrap_or(""));
}

/// A crawled title that a spreadsheet would run as a formula (OWASP's CSV
/// injection list: `=`, `+`, `-`, `@`, tab, CR) is written to CSV with a `'`
/// in front, so it is shown as text; JSONL keeps the title as it was.
#[test]
fn csv_cells_that_a_spreadsheet_would_run_are_text() {
    const TITLES: [&str; 5] = [
        "=HYPERLINK(\"http://evil.example/\",\"click\")",
        "+1+2",
        "-2+3",
        "@SUM(A1:A9)",
        "a = b, harmless",
    ];
    let server = TestServer::start(handler(|request| {
        let page = |title: &str, body: &str| {
            TestResponse::html(format!("<title>{title}</title><body>{body}</body>"))
        };
        match request.path() {
            "/" => page(
                "index",
                &(0..TITLES.len())
                    .map(|i| format!("<a href=\"/{i}\">{i}</a>"))
                    .collect::<String>(),
            ),
            path => match path[1..].parse::<usize>().ok().and_then(|i| TITLES.get(i)) {
                Some(title) => page(&title.replace('"', "&quot;"), ""),
                None => TestResponse::not_found(),
            },
        }
    }));
    let data = tempfile::tempdir().unwrap();
    crawl_ok(data.path(), &server.url("/"), &[]);
    let jsonl: Vec<String> = dump_items(data.path())
        .iter()
        .map(|item| item["title"].as_str().unwrap_or_default().to_owned())
        .collect();
    for title in TITLES {
        assert!(
            jsonl.iter().any(|t| t == title),
            "{title:?} not in {jsonl:?}"
        );
    }
    let text = dump_ok(
        data.path(),
        &["items", "--format", "csv", "--fields", "title,url"],
    );
    let (_, rows) = read_csv(&text);
    let cells: Vec<&str> = rows.iter().map(|row| row[0].as_str()).collect();
    for title in &TITLES[..4] {
        let quoted = format!("'{title}");
        assert!(
            cells.contains(&quoted.as_str()),
            "{quoted:?} not in {cells:?}"
        );
    }
    assert!(cells.contains(&TITLES[4]), "{cells:?}");
    assert!(
        !cells
            .iter()
            .any(|cell| cell.starts_with(['=', '+', '-', '@', '\t', '\r'])),
        "{cells:?}"
    );
}

#[test]
fn jsonl_fields_keep_only_those_keys_in_order() {
    let server = quoting_site();
    let data = tempfile::tempdir().unwrap();
    crawl_ok(data.path(), &server.url("/"), &[]);
    let items = dump_items(data.path());
    // `--format jsonl` without --fields is the stored text, as before.
    let plain = dump_ok(data.path(), &["items", "--format", "jsonl"]);
    assert_eq!(parse_lines(plain.as_bytes()), items);

    let text = dump_ok(data.path(), &["items", "--fields", "title,url,nosuch"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), items.len());
    for (line, item) in lines.iter().zip(&items) {
        assert!(line.starts_with("{\"title\":"), "{line}");
        assert!(line.ends_with(",\"nosuch\":null}"), "{line}");
        let value: Value = serde_json::from_str(line).unwrap();
        let object = value.as_object().unwrap();
        assert_eq!(object.len(), 3);
        assert_eq!(value["url"], item["url"]);
        assert_eq!(value["title"], item["title"]);
    }

    for bad in [
        &["items", "--json", "--format", "csv"][..],
        &["items", "--fields", "url,,title"],
        &["items", "--fields", "url,url"],
        &["items", "--format", "xml"],
    ] {
        let mut all = vec!["dump"];
        all.extend_from_slice(bad);
        let out = run(legcrawl(data.path(), &all), LIMIT);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
    }
    let out = run(
        legcrawl(data.path(), &["dump", "items", "--json", "--format", "csv"]),
        LIMIT,
    );
    assert!(one_line_exit_2(&out).contains("--format csv"));
}

/// Crawls `site` in runs of at most `per_run` pages until the frontier is drained;
/// returns the runs' JSON rows.
fn crawl_in_runs(data: &Path, server: &TestServer, per_run: &str) -> Vec<Value> {
    let per_run = ["--max-pages", per_run];
    crawl_ok(data, &server.url("/"), &per_run);
    for _ in 0..10 {
        let runs = parse_lines(dump_ok(data, &["runs", "--json"]).as_bytes());
        if runs.last().is_some_and(|r| r["outcome"] == "drained") {
            return runs;
        }
        let out = run(legcrawl(data, &["crawl", per_run[0], per_run[1]]), LIMIT);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    panic!("the crawl did not drain in ten runs");
}

#[test]
fn run_and_since_run_select_what_each_run_stored() {
    let site = Site::generate(60, 11);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().unwrap();
    let runs = crawl_in_runs(data.path(), &server, "20");
    assert!(runs.len() >= 3, "{runs:?}");
    let all = dump_items(data.path());

    // `dump runs --json`: the table's columns, times as text, the counters.
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r["id"], i as u64 + 1);
        for key in [
            "started",
            "ended",
            "outcome",
            "fetched",
            "new",
            "changed",
            "unchanged",
            "gone",
            "failed",
            "items",
            "filtered",
            "bytes",
            "first_item",
        ] {
            assert!(r.get(key).is_some(), "dump runs --json lacks {key}: {r}");
        }
        assert_eq!(r["items"], r["counters"]["items/stored"]);
        assert!(r["started"].as_str().unwrap().ends_with('Z'));
    }

    // Each run's items are its own, in order, and together they are all items.
    let mut joined = Vec::new();
    for r in &runs {
        let id = r["id"].to_string();
        let items = parse_lines(dump_ok(data.path(), &["items", "--run", &id]).as_bytes());
        assert_eq!(items.len() as u64, r["items"].as_u64().unwrap(), "run {id}");
        joined.extend(items);
    }
    assert_eq!(joined, all);

    let first_of_2 = runs[1]["first_item"].as_u64().unwrap() as usize;
    let since_1 = parse_lines(dump_ok(data.path(), &["items", "--since-run", "1"]).as_bytes());
    assert_eq!(since_1, all[first_of_2..]);
    let since_0 = dump_ok(data.path(), &["items", "--since-run", "0"]);
    assert_eq!(parse_lines(since_0.as_bytes()), all);
    let last = runs.len().to_string();
    assert_eq!(dump_ok(data.path(), &["items", "--since-run", &last]), "");
    let csv_of_2 = dump_ok(data.path(), &["items", "--run", "2", "--format", "csv"]);
    assert_eq!(
        read_csv(&csv_of_2).1.len(),
        runs[1]["items"].as_u64().unwrap() as usize
    );

    // A run that does not exist, or both selectors: one line, exit 2.
    let out = run(
        legcrawl(data.path(), &["dump", "items", "--run", "99"]),
        LIMIT,
    );
    assert!(one_line_exit_2(&out).contains("no run 99"));
    let out = run(
        legcrawl(data.path(), &["dump", "items", "--since-run", "99"]),
        LIMIT,
    );
    assert!(one_line_exit_2(&out).contains("no run 99"));
    let out = run(
        legcrawl(
            data.path(),
            &["dump", "items", "--run", "1", "--since-run", "1"],
        ),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));

    // A run recorded before runs noted their first item: named in one line.
    forget_first_item(data.path(), 1);
    let out = run(
        legcrawl(data.path(), &["dump", "items", "--run", "1"]),
        LIMIT,
    );
    let line = one_line_exit_2(&out);
    assert!(line.contains("run 1 "), "{line}");
    // Run 2's items need only runs 2 and 3.
    let items = parse_lines(dump_ok(data.path(), &["items", "--run", "2"]).as_bytes());
    assert_eq!(items.len() as u64, runs[1]["items"].as_u64().unwrap());
}

/// `dump runs --json` of `data`, parsed.
fn runs_json(data: &Path) -> Vec<Value> {
    parse_lines(dump_ok(data, &["runs", "--json"]).as_bytes())
}

#[test]
fn last_names_the_newest_run() {
    let site = Site::generate(60, 5);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().unwrap();
    let dir = data.path();
    crawl_ok(dir, &server.url("/"), &["--max-pages", "20"]);
    let more = || {
        let out = run(legcrawl(dir, &["crawl", "--max-pages", "20"]), LIMIT);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    more();
    let runs = runs_json(dir);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let all = dump_items(dir);
    let first_of_2 = runs[1]["first_item"].as_u64().unwrap() as usize;
    let stored_by_2 = runs[1]["items"].as_u64().unwrap() as usize;
    assert!(stored_by_2 > 0, "run 2 stored nothing: {runs:?}");

    // --run last is run 2: its items, and only those.
    let last = dump_ok(dir, &["items", "--run", "last"]);
    assert_eq!(last, dump_ok(dir, &["items", "--run", "2"]));
    let last = parse_lines(last.as_bytes());
    assert_eq!(last.len(), stored_by_2);
    assert_eq!(last, all[first_of_2..]);
    // Nothing was stored after the last run; --since-run 1 is what run 2 stored.
    assert_eq!(dump_ok(dir, &["items", "--since-run", "last"]), "");
    assert_eq!(
        parse_lines(dump_ok(dir, &["items", "--since-run", "1"]).as_bytes()),
        last
    );
    // The other options still apply to `last`.
    let csv = dump_ok(dir, &["items", "--run", "last", "--format", "csv"]);
    assert_eq!(read_csv(&csv).1.len(), stored_by_2);
    let limited = dump_ok(dir, &["items", "--run", "last", "--limit", "2"]);
    assert_eq!(parse_lines(limited.as_bytes()), last[..2]);

    // Another run moves `last` to run 3.
    more();
    let runs = runs_json(dir);
    assert_eq!(runs.len(), 3, "{runs:?}");
    let all = dump_items(dir);
    let first_of_3 = runs[2]["first_item"].as_u64().unwrap() as usize;
    let now_last = parse_lines(dump_ok(dir, &["items", "--run", "last"]).as_bytes());
    assert_eq!(now_last.len() as u64, runs[2]["items"].as_u64().unwrap());
    assert_eq!(now_last, all[first_of_3..]);
    assert_ne!(now_last, last);
    assert_eq!(dump_ok(dir, &["items", "--since-run", "last"]), "");

    // Neither a number nor `last`: exit 2, naming what is expected.
    for flag in ["--run", "--since-run"] {
        let out = run(legcrawl(dir, &["dump", "items", flag, "latest"]), LIMIT);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("expected a run number or \"last\""),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn last_in_a_state_without_runs_is_one_line() {
    let data = tempfile::tempdir().unwrap();
    let options = legcrawl::store::OpenOptions {
        create: true,
        bloom_bits: Some(20),
        ..Default::default()
    };
    drop(legcrawl::store::State::open(data.path(), &options).unwrap());
    assert_eq!(runs_json(data.path()), Vec::<Value>::new());
    for flag in ["--run", "--since-run"] {
        let out = run(
            legcrawl(data.path(), &["dump", "items", flag, "last"]),
            LIMIT,
        );
        let line = one_line_exit_2(&out);
        assert!(line.contains("no runs yet"), "{line}");
        assert!(line.contains(&data.path().display().to_string()), "{line}");
    }
    // Every item, none of them yet, as before.
    assert_eq!(dump_ok(data.path(), &["items", "--since-run", "0"]), "");
}

/// Rewrites run `id`'s record as an older legcrawl wrote it (no `first_item`).
fn forget_first_item(data: &Path, id: u64) {
    let db = sled::open(data.join("db")).unwrap();
    // A run record's key, as docs/state.md's key layout gives it: `r` · run id (u64, big-endian).
    let key = [&b"r"[..], &id.to_be_bytes()].concat();
    let mut record: RunRecord = records::decode(&db.get(&key).unwrap().unwrap()).unwrap();
    record.first_item = None;
    let mut bytes = records::encode(&record);
    let text = String::from_utf8(bytes.split_off(1)).unwrap();
    let old = text.replace(",\"first_item\":null", "");
    assert_ne!(old, text);
    bytes.extend_from_slice(old.as_bytes());
    db.insert(key, bytes).unwrap();
    db.flush().unwrap();
}

#[test]
fn stats_file_reports_the_run_after_it_ends() {
    let server = quoting_site();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let stats = dir.path().join("run.json");
    let out = crawl_ok(
        &data,
        &server.url("/"),
        &["--stats", stats.to_str().unwrap()],
    );
    assert!(!stderr(&out).contains("could not write"));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(report["run"], 1);
    assert_eq!(report["outcome"], "drained");
    assert!(report["started"].as_str().unwrap().ends_with('Z'));
    assert!(report["ended"].as_str().unwrap().ends_with('Z'));
    assert!(report["elapsed_seconds"].as_f64().unwrap() >= 0.0);
    let items = dump_items(&data).len() as u64;
    assert_eq!(report["totals"]["items"], items);
    assert_eq!(report["counters"]["items/stored"], items);
    assert_eq!(
        report["totals"]["pages"],
        report["counters"]["pages/completed"]
    );
    assert_eq!(report["totals"]["frontier"], 0);
    assert!(report["error"].is_null());
    // It agrees with `dump runs --json`.
    let runs = parse_lines(dump_ok(&data, &["runs", "--json"]).as_bytes());
    assert_eq!(report["counters"], runs[0]["counters"]);

    // The crawl file's `stats` does the same; a second run replaces the file.
    let config = dir.path().join("crawl.toml");
    let file_stats = dir.path().join("from-file.json");
    std::fs::write(
        &config,
        format!(
            "seeds = [{:?}]\ndata = {:?}\nstats = {:?}\n",
            server.url("/"),
            data.to_str().unwrap(),
            file_stats.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = run(raw(&["crawl", "--config", config.to_str().unwrap()]), LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&file_stats).unwrap()).unwrap();
    assert_eq!(report["run"], 2);
}

#[test]
fn stats_file_problems_are_one_line() {
    let server = quoting_site();
    let dir = tempfile::tempdir().unwrap();
    // A directory that does not exist: refused before anything is created.
    let data = dir.path().join("state");
    let missing = dir.path().join("no-such-dir/run.json");
    let out = run(
        legcrawl(
            &data,
            &[
                "crawl",
                &server.url("/"),
                "--stats",
                missing.to_str().unwrap(),
            ],
        ),
        LIMIT,
    );
    assert!(one_line_exit_2(&out).contains("no-such-dir"));
    assert!(!data.exists(), "the state was created");
    // A write that fails at the end: one line, and the crawl's exit code stands.
    let stats = dir.path().join("run.json");
    std::fs::create_dir(dir.path().join("run.json.tmp")).unwrap();
    let out = crawl_ok(
        &data,
        &server.url("/"),
        &["--stats", stats.to_str().unwrap()],
    );
    let lines: Vec<String> = stderr(&out)
        .lines()
        .filter(|l| l.contains("run report"))
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 1, "{}", stderr(&out));
    assert!(lines[0].contains("could not write"), "{lines:?}");
    assert!(!stats.exists());
}

#[test]
fn stats_file_is_written_after_ctrl_c() {
    let site = Site::generate(400, 3);
    let pages = site.handler();
    let server = TestServer::start(handler(move |request| {
        pages(request).delay(Duration::from_millis(20))
    }));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let stats = dir.path().join("run.json");
    let seed = server.url("/");
    let child = legcrawl(
        &data,
        &[
            "crawl",
            &seed,
            "--bloom-bits",
            "20",
            "--stats",
            stats.to_str().unwrap(),
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests() < 10 {
        assert!(Instant::now() < deadline, "the crawl made no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    cli::signal(child.id(), libc::SIGINT);
    let out = cli::wait_output(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(report["outcome"], "interrupted");
    assert!(report["totals"]["pages"].as_u64().unwrap() > 0);
    assert!(report["totals"]["frontier"].as_u64().unwrap() > 0);
}

#[test]
fn dump_and_reset_options_go_before_or_after_the_view_and_take_config() {
    let server = quoting_site();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    crawl_ok(&data, &server.url("/"), &[]);
    let d = data.to_str().unwrap();
    let after = run(
        raw(&["dump", "items", "--data", d, "--json", "--limit", "2"]),
        LIMIT,
    );
    assert!(after.status.success(), "{}", stderr(&after));
    let before = run(raw(&["dump", "--data", d, "--limit", "2", "items"]), LIMIT);
    assert_eq!(after.stdout, before.stdout);
    assert_eq!(parse_lines(&after.stdout).len(), 2);
    let runs = run(raw(&["dump", "runs", "--data", d, "--limit", "1"]), LIMIT);
    assert!(runs.status.success(), "{}", stderr(&runs));

    // --config FILE: the file's `data`.
    let config = dir.path().join("crawl.toml");
    std::fs::write(&config, format!("data = {d:?}\n")).unwrap();
    let c = config.to_str().unwrap();
    let by_file = run(raw(&["dump", "runs", "--config", c, "--json"]), LIMIT);
    let by_flag = run(raw(&["dump", "runs", "--json", "--data", d]), LIMIT);
    assert!(by_file.status.success(), "{}", stderr(&by_file));
    assert_eq!(by_file.stdout, by_flag.stdout);
    let summary = run(raw(&["dump", "--config", c, "--json"]), LIMIT);
    assert!(summary.status.success(), "{}", stderr(&summary));
    // A crawl file that cannot be read: one line, exit 2.
    let missing = dir.path().join("nope.toml");
    let out = run(raw(&["dump", "--config", missing.to_str().unwrap()]), LIMIT);
    assert!(one_line_exit_2(&out).contains("nope.toml"));

    let out = run(raw(&["reset", "--config", c, "--yes"]), LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !data.exists(),
        "reset --config did not delete the file's data"
    );
    // Again, or with a mistyped path: it says there was nothing, exit 0.
    let out = run(raw(&["reset", "--config", c, "--yes"]), LIMIT);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("Nothing to reset") && said.contains("holds no legcrawl state"),
        "{said}"
    );
    assert!(!said.contains("Reset "), "{said}");
}

#[test]
fn every_help_has_examples_and_exit_codes() {
    for command in ["crawl", "dump", "fetch", "reset"] {
        let out = run(raw(&[command, "--help"]), LIMIT);
        assert!(out.status.success());
        let text = stdout(&out);
        assert!(text.contains("Examples:\n  legcrawl "), "{command}: {text}");
        assert!(text.contains("Exit codes:\n  0"), "{command}: {text}");
    }
}

#[test]
fn dump_frontier_says_when_it_shows_only_the_head() {
    let site = Site::generate(200, 9);
    let server = TestServer::start(site.handler());
    let data = tempfile::tempdir().unwrap();
    crawl_ok(data.path(), &server.url("/"), &["--max-pages", "20"]);
    let queued = cli::dump_summary(data.path())["frontier"].as_u64().unwrap();
    assert!(queued > 3, "{queued} queued");
    let out = run(
        legcrawl(data.path(), &["dump", "frontier", "--limit", "3"]),
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 3);
    let note = format!("showing the first 3 of {queued} queued requests");
    assert!(stderr(&out).contains(&note), "{}", stderr(&out));
    let out = run(
        legcrawl(data.path(), &["dump", "frontier", "--limit", "100000"]),
        LIMIT,
    );
    assert!(
        !stderr(&out).contains("showing the first"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn mistakes_are_one_line_exit_2() {
    let data = tempfile::tempdir().unwrap();
    let server = quoting_site();
    crawl_ok(data.path(), &server.url("/"), &[]);
    for url in ["notaurl", "ftp://example.org/"] {
        let out = run(legcrawl(data.path(), &["dump", "seen", url]), LIMIT);
        assert!(one_line_exit_2(&out).contains(url));
    }
    assert!(dump_ok(data.path(), &["seen", &server.url("/plain")]).contains("fingerprint"));

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("crawl.toml");
    let cases = [
        (
            "[[legs]]\nkind = \"css_items\"\nfields = [{ name = \"t\", selector = \"a[=x]\" }]\n",
            "bad selector \"a[=x]\": an attribute selector needs an attribute name",
        ),
        (
            "[revisit]\nafter = \"sometimes\"\n",
            "expected \"estimated\", \"adaptive\", \"never\" or a duration such as",
        ),
    ];
    for (text, message) in cases {
        std::fs::write(&config, text).unwrap();
        let state = dir.path().join("state");
        let out = run(
            legcrawl(
                &state,
                &[
                    "crawl",
                    "--config",
                    config.to_str().unwrap(),
                    &server.url("/"),
                ],
            ),
            LIMIT,
        );
        let line = one_line_exit_2(&out);
        assert!(line.contains(message), "{line}");
        assert!(!line.contains("developer"), "{line}");
    }
}
