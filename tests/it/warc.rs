//! `crawl --warc DIR`: WARC 1.1 files read back by our own reader and by
//! `warcio` (see `support::warc` for how warcio is found), revisit records of
//! incremental runs, rotation, and exactness across `kill -9`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use crate::support::changing::{ChangingSite, Validators, page_path, validators_of};
use crate::support::cli::{self, legcrawl, run};
use crate::support::mode::{Crawler, Mode};
use crate::support::warc::{self, Record};
use crate::support::{BodyMode, Site, TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(60);
const PAGES: usize = 12;

/// What `/gz.html` decodes to.
const GZ_TEXT: &str = "<html><head><title>gz</title></head><body>compressed</body></html>";

fn gzip(text: &str) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).expect("gzip");
    encoder.finish().expect("gzip")
}

/// A small site: a root linking to `PAGES` pages, a gzip page sent chunked,
/// a robots.txt.
fn small_site() -> TestServer {
    let gz = gzip(GZ_TEXT);
    TestServer::start(handler(move |req| match req.path() {
        "/robots.txt" => TestResponse::ok("User-agent: *\nAllow: /\n"),
        "/" => {
            let mut html = String::from("<html><head><title>root</title></head><body>");
            for i in 0..PAGES {
                html.push_str(&format!("<a href=\"/p{i}.html\">{i}</a>"));
            }
            html.push_str("<a href=\"/gz.html\">gz</a></body></html>");
            TestResponse::html(html)
        }
        "/gz.html" => TestResponse::html(gz.clone())
            .header("Content-Encoding", "gzip")
            .mode(BodyMode::Chunked {
                size: 16,
                pause: Duration::ZERO,
            }),
        path if path.starts_with("/p") => {
            TestResponse::html(format!("<html><head><title>{path}</title></head></html>"))
        }
        _ => TestResponse::not_found(),
    }))
}

fn crawl_ok(data: &Path, args: &[&str]) {
    let mut all = vec!["crawl"];
    all.extend_from_slice(args);
    let out = run(legcrawl(data, &all), LIMIT);
    assert!(
        out.status.success(),
        "crawl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Records of `kind` by target URI.
fn by_target<'a>(records: &'a [Record], kind: &str) -> BTreeMap<String, Vec<&'a Record>> {
    let mut map: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for record in records.iter().filter(|r| r.kind() == kind) {
        map.entry(record.target().to_owned())
            .or_default()
            .push(record);
    }
    map
}

#[test]
fn warc_records_every_fetch_with_right_digests_one_gzip_member_each() {
    let server = small_site();
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("warc");
    let seed = server.url("/");
    crawl_ok(
        &data.path().join("state"),
        &[&seed, "--warc", dir.to_str().unwrap()],
    );
    let files = warc::files(&dir);
    assert_eq!(files.len(), 1, "one file: {files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    let stamp = name
        .strip_prefix("legcrawl-")
        .and_then(|n| n.strip_suffix("-00000.warc.gz"))
        .unwrap_or_else(|| panic!("file name {name}"));
    assert!(
        stamp.len() == 14 && stamp.bytes().all(|b| b.is_ascii_digit()),
        "{name}"
    );

    let records = warc::read(&files[0]);
    // Each gzip member is one record (read() parses one per member).
    let members = warc::members(&std::fs::read(&files[0]).unwrap()).len();
    assert_eq!(members, records.len());
    assert_eq!(records[0].kind(), "warcinfo");
    assert_eq!(records.iter().filter(|r| r.kind() == "warcinfo").count(), 1);
    let info = String::from_utf8_lossy(&records[0].block).into_owned();
    for field in [
        "software: legcrawl/",
        "robots: obey",
        "http-header-user-agent: ",
        "delay: ",
    ] {
        assert!(info.contains(field), "warcinfo lacks {field:?}: {info}");
    }
    assert_eq!(records[0].field("WARC-Filename"), Some(name.as_str()));

    let mut expected: BTreeSet<String> = (0..PAGES)
        .map(|i| server.url(&format!("/p{i}.html")))
        .collect();
    expected.insert(server.url("/"));
    expected.insert(server.url("/gz.html"));
    expected.insert(server.url("/robots.txt"));
    let requests = by_target(&records, "request");
    let responses = by_target(&records, "response");
    assert_eq!(requests.keys().cloned().collect::<BTreeSet<_>>(), expected);
    assert_eq!(responses.keys().cloned().collect::<BTreeSet<_>>(), expected);
    let ids: BTreeSet<&str> = records
        .iter()
        .filter_map(|r| r.field("WARC-Record-ID"))
        .collect();
    assert_eq!(ids.len(), records.len(), "record ids are unique");
    for record in &records {
        warc::check_digests(record);
        let id = record.field("WARC-Record-ID").unwrap();
        assert!(id.starts_with("<urn:uuid:") && id.ends_with('>'), "{id}");
        assert!(
            record
                .field("WARC-Date")
                .is_some_and(|d| d.len() == 20 && d.ends_with('Z'))
        );
        if record.kind() == "warcinfo" {
            continue;
        }
        assert_eq!(record.field("WARC-IP-Address"), Some("127.0.0.1"));
        assert!(
            record
                .field("WARC-Block-Digest")
                .is_some_and(|d| d.starts_with("sha1:"))
        );
        assert!(
            record
                .field("WARC-Payload-Digest")
                .is_some_and(|d| d.starts_with("sha1:"))
        );
    }
    for (target, list) in &requests {
        assert_eq!(list.len(), 1, "{target}: one request");
        let request = list[0];
        let response = responses[target][0];
        assert_eq!(
            request.field("WARC-Concurrent-To"),
            response.field("WARC-Record-ID"),
            "{target}: the request names its response"
        );
        assert_eq!(
            request.field("Content-Type"),
            Some("application/http; msgtype=request")
        );
        assert_eq!(
            response.field("Content-Type"),
            Some("application/http; msgtype=response")
        );
        let head = String::from_utf8_lossy(request.http().0).into_owned();
        assert!(head.starts_with("GET /"), "{head}");
        assert!(
            head.to_ascii_lowercase().contains("\r\nhost: 127.0.0.1:"),
            "{head}"
        );
    }
    // The gzip page: the body as sent (still gzip), de-chunked.
    let gz = responses[&server.url("/gz.html")][0];
    let (head, payload) = gz.http();
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert_eq!(
        &payload[..2],
        &[0x1f, 0x8b],
        "the payload is the gzip bytes"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(payload)
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, GZ_TEXT);

    // The independent reader agrees.
    if warc::warcio_check(&files) {
        let rows = warc::warcio_index(&files).unwrap();
        assert_eq!(rows.len(), records.len());
        for kind in ["request", "response"] {
            let seen: BTreeSet<String> = rows
                .iter()
                .filter(|r| r.get("warc-type").map(String::as_str) == Some(kind))
                .filter_map(|r| r.get("warc-target-uri").cloned())
                .collect();
            assert_eq!(seen, expected, "warcio index: {kind} records");
        }
        assert!(
            rows.iter()
                .any(|r| r.get("http:status").map(String::as_str) == Some("200")),
            "warcio reads the HTTP status"
        );
    }
}

#[test]
fn incremental_runs_write_revisit_records_with_their_profiles() {
    let site = ChangingSite::new(5);
    let server = site.serve();
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("state");
    let dir = data.path().join("warc");
    let seed = server.url("/");
    let args = [
        seed.as_str(),
        "--warc",
        dir.to_str().unwrap(),
        "--revisit-after",
        "0",
    ];
    crawl_ok(&state, &args);
    let first = warc::read_dir(&dir);
    let originals = by_target(&first, "response");
    // Validators on: the second run gets 304s (unchanged 200s for the pages
    // served without validators).
    std::thread::sleep(Duration::from_millis(1100));
    crawl_ok(&state, &args);
    // Validators off: the third gets unchanged 200s.
    site.set_validators(false);
    crawl_ok(&state, &args);
    let records = warc::read_dir(&dir);
    let revisits: Vec<&Record> = records.iter().filter(|r| r.kind() == "revisit").collect();
    let not_modified = "http://netpreserve.org/warc/1.1/revisit/server-not-modified";
    let identical = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest";
    for i in 0..5 {
        let url = server.url(&page_path(i));
        let original = originals
            .get(&url)
            .unwrap_or_else(|| panic!("{url}: no response in the first run"))[0];
        let of_page: Vec<&&Record> = revisits.iter().filter(|r| r.target() == url).collect();
        let profiles: Vec<&str> = of_page
            .iter()
            .filter_map(|r| r.field("WARC-Profile"))
            .collect();
        let second = match validators_of(i) {
            Validators::None => identical,
            _ => not_modified,
        };
        assert_eq!(profiles, [second, identical], "{url}");
        for revisit in &of_page {
            warc::check_digests(revisit);
            assert_eq!(
                revisit.field("WARC-Refers-To-Target-URI"),
                Some(url.as_str())
            );
            assert_eq!(
                revisit.field("WARC-Refers-To-Date"),
                original.field("WARC-Date"),
                "{url}: refers to the date of the original capture"
            );
            if revisit.field("WARC-Profile") == Some(identical) {
                let (head, payload) = revisit.http();
                assert!(
                    payload.is_empty(),
                    "{url}: an identical-payload revisit holds the headers only"
                );
                assert!(head.starts_with(b"HTTP/1.1 200"), "{url}");
            }
        }
        if second == not_modified {
            // No block, so that replay (pywb) shows the original, not a 304
            // (this site's 304s carry no validators to keep; see the unit
            // tests of `warc::record` for those).
            let revisit = of_page[0];
            assert!(revisit.block.is_empty(), "{url}: no block");
            assert_eq!(revisit.field("Content-Length"), Some("0"));
            assert!(revisit.field("WARC-Payload-Digest").is_none());
        }
        assert_eq!(
            of_page[1].field("WARC-Payload-Digest"),
            original.field("WARC-Payload-Digest"),
            "{url}: the identical payload's digest"
        );
        // Each revisit comes with its request.
        let requests = records
            .iter()
            .filter(|r| r.kind() == "request" && r.target() == url)
            .count();
        assert_eq!(requests, 3, "{url}: one request per run");
    }
    let files = warc::files(&dir);
    if warc::warcio_check(&files) {
        let rows = warc::warcio_index(&files).unwrap();
        let profiles: Vec<&str> = rows
            .iter()
            .filter_map(|r| r.get("warc-profile").map(String::as_str))
            .collect();
        assert!(profiles.contains(&not_modified) && profiles.contains(&identical));
    }
}

#[test]
fn warc_files_rotate_at_the_size_limit() {
    let server = small_site();
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("warc");
    let seed = server.url("/");
    let state = data.path().join("state");
    // One page per group: a group boundary after each.
    crawl_ok(
        &state,
        &[
            &seed,
            "--warc",
            dir.to_str().unwrap(),
            "--warc-max-size",
            "3KiB",
            "--concurrency",
            "1",
            "--delay",
            "0.03",
        ],
    );
    let files = warc::files(&dir);
    assert!(files.len() >= 3, "rotated into several files: {files:?}");
    let mut responses = Vec::new();
    for (serial, file) in files.iter().enumerate() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.ends_with(&format!("-{serial:05}.warc.gz")),
            "{name}: serial {serial}"
        );
        let records = warc::read(file);
        assert_eq!(records[0].kind(), "warcinfo", "{name} opens with warcinfo");
        assert_eq!(records[0].field("WARC-Filename"), Some(name.as_str()));
        responses.extend(
            records
                .iter()
                .filter(|r| r.kind() == "response")
                .map(|r| r.target().to_owned()),
        );
        let len = std::fs::metadata(file).unwrap().len();
        if serial + 1 < files.len() {
            assert!(
                len >= 3 * 1024,
                "{name}: closed at {len} bytes, under the limit"
            );
        }
    }
    let unique: BTreeSet<&String> = responses.iter().collect();
    assert_eq!(unique.len(), responses.len(), "each response in one file");
    assert_eq!(responses.len(), PAGES + 3);
    warc::warcio_check(&files);
}

#[test]
fn kill_nine_while_writing_warc_then_each_response_once_embedded() {
    kill_nine_while_writing_warc_then_each_response_once(Mode::Embedded);
}

#[test]
fn kill_nine_while_writing_warc_then_each_response_once_shared() {
    kill_nine_while_writing_warc_then_each_response_once(Mode::Shared);
}

/// kill -9 a crawl writing WARC files twelve times, then one run to the end:
/// each response recorded once. `--lease-ttl 1s` lets a shared worker take
/// back its killed predecessor's leases soon (the embedded state has none).
fn kill_nine_while_writing_warc_then_each_response_once(mode: Mode) {
    const KILLS: u64 = 12;
    let Some(crawler) = Crawler::start(mode, "kill_nine_while_writing_warc") else {
        return;
    };
    let site = Site::generate(800, 5);
    let inner = site.handler();
    let server = TestServer::start(handler(move |req| {
        inner(req).delay(Duration::from_millis(4))
    }));
    let dir = crawler.dir().join("warc");
    let seed = server.url("/");
    let mut rng = crate::support::kill_seed("kill_nine_while_writing_warc_then_each_response_once");
    let args = [
        &seed,
        "--concurrency",
        "8",
        "--bloom-bits",
        "20",
        "--warc",
        dir.to_str().unwrap(),
        "--warc-max-size",
        "64KiB",
        "--lease-ttl",
        "1s",
    ];
    crawler.kill_nine_rounds(&args, KILLS, || server.requests(), &mut rng, 250);
    crawler.crawl_ok(&args);
    let records = warc::read_dir(&dir);
    let responses = by_target(&records, "response");
    let requests = by_target(&records, "request");
    let expected: BTreeSet<String> = site.reachable().iter().map(|p| server.url(p)).collect();
    for url in &expected {
        let n = responses.get(url).map_or(0, Vec::len);
        assert_eq!(n, 1, "{url}: {n} response records");
        // A kill after the last completion but before the run's end record
        // makes the next run a new cycle, which asks the seed again: a
        // revisit, with its request.
        let revisits = records
            .iter()
            .filter(|r| r.kind() == "revisit" && r.target() == url)
            .count();
        assert_eq!(
            requests.get(url).map_or(0, Vec::len),
            1 + revisits,
            "{url}: one request per response or revisit"
        );
    }
    // robots.txt is recorded once per durable fetch: once, as its answer is
    // kept in the state for 24 h.
    let robots = server.url("/robots.txt");
    assert_eq!(responses.get(&robots).map_or(0, Vec::len), 1, "robots.txt");
    let other: Vec<&String> = responses
        .keys()
        .filter(|u| !expected.contains(*u) && **u != robots)
        .collect();
    assert!(other.is_empty(), "unexpected responses: {other:?}");
    for record in &records {
        warc::check_digests(record);
    }
    let files = warc::files(&dir);
    assert!(files.len() > 1, "the crawl rotated: {files:?}");
    warc::warcio_check(&files);
    // The items agree with the archive.
    assert_eq!(crawler.items().len(), expected.len());
}

#[test]
fn a_torn_record_at_the_end_is_cut_off_by_the_next_run() {
    let server = small_site();
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("state");
    let dir = data.path().join("warc");
    let seed = server.url("/");
    let args = [
        seed.as_str(),
        "--warc",
        dir.to_str().unwrap(),
        "--revisit-after",
        "0",
    ];
    crawl_ok(&state, &args);
    let file = warc::files(&dir).pop().unwrap();
    let clean = std::fs::metadata(&file).unwrap().len();
    // What a crash inside a write leaves: half a gzip member.
    let mut torn = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    torn.write_all(&gzip("WARC/1.1\r\nWARC-Type: response\r\n")[..20])
        .unwrap();
    drop(torn);
    crawl_ok(&state, &args);
    let records = warc::read(&file);
    assert!(std::fs::metadata(&file).unwrap().len() > clean);
    assert!(records.iter().any(|r| r.kind() == "revisit"));
    warc::warcio_check(&[file]);
    // A file this state never registered is left alone.
    let foreign = dir.join("legcrawl-20000101000000-00099.warc.gz");
    std::fs::write(&foreign, b"not ours").unwrap();
    crawl_ok(&state, &args);
    assert_eq!(std::fs::read(&foreign).unwrap(), b"not ours");
}

#[test]
fn warc_settings_come_from_the_output_table_and_bad_ones_are_one_line() {
    let server = small_site();
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("archive");
    let jsonl = data.path().join("items.jsonl");
    let file = data.path().join("crawl.toml");
    std::fs::write(
        &file,
        format!(
            "seeds = [{:?}]\ndata = {:?}\n[output]\njsonl = {:?}\nwarc = {:?}\nwarc_max_size = \"1MiB\"\n",
            server.url("/"),
            data.path().join("state"),
            jsonl,
            dir
        ),
    )
    .unwrap();
    let out = run(
        {
            let mut cmd = std::process::Command::new(cli::bin());
            cmd.args(["crawl", "--config"]).arg(&file);
            cmd
        },
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(warc::files(&dir).len(), 1);
    assert_eq!(
        cli::parse_lines(&std::fs::read(&jsonl).unwrap()).len(),
        PAGES + 2
    );
    // Both forms of `output` in one file: TOML itself refuses, in one line.
    std::fs::write(&file, "output = \"a.jsonl\"\n[output]\nwarc = \"w\"\n").unwrap();
    let out = run(
        {
            let mut cmd = std::process::Command::new(cli::bin());
            cmd.args(["crawl", "--config"]).arg(&file);
            cmd
        },
        LIMIT,
    );
    let message = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{message}");
    assert_eq!(message.trim().lines().count(), 1, "{message}");
    assert!(message.contains("output"), "{message}");
    // A --warc path under a missing directory: refused before anything is made.
    let state = data.path().join("other");
    let out = run(
        legcrawl(
            &state,
            &["crawl", &server.url("/"), "--warc", "/nonexistent/x/warc"],
        ),
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!state.exists(), "nothing created");
}

/// Issue 27: the request record carries the HTTP version the request went out
/// in (HTTP/1.1), not the one the server answered with (HTTP/1.0 here).
#[test]
fn the_request_record_says_the_version_sent_not_the_servers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let seed = format!("http://{}/", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        // One connection: the page (robots.txt is not asked for).
        if let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body = "<html><head><title>old</title></head></html>";
            let head = format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let warcs = dir.path().join("warc");
    crawl_ok(
        &data,
        &[&seed, "--ignore-robots", "--warc", warcs.to_str().unwrap()],
    );
    server.join().unwrap();
    let records = warc::read_dir(&warcs);
    let request = records.iter().find(|r| r.kind() == "request").unwrap();
    let response = records.iter().find(|r| r.kind() == "response").unwrap();
    let first_line = |record: &Record| {
        let (head, _) = record.http();
        String::from_utf8_lossy(head)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(first_line(request), "GET / HTTP/1.1");
    assert_eq!(first_line(response), "HTTP/1.0 200 OK");
}

/// Issue 43: every run is described in the WARC. Three runs into one file,
/// the job changed between them: each run's records follow a `warcinfo`
/// record naming the run, the job version it ran and that version's
/// settings (as `job.KEY: value` fields), and warcio reads the file.
#[test]
fn each_runs_records_follow_a_warcinfo_record_of_its_job() {
    let server = small_site();
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("state");
    let dir = data.path().join("warc");
    let seed = server.url("/");
    let warc_dir = dir.to_str().unwrap();
    let base = [seed.as_str(), "--warc", warc_dir, "--revisit-after", "0"];
    crawl_ok(&state, &[&base[..], &["--delay", "0.01"]].concat());
    crawl_ok(&state, &[&base[..], &["--delay", "0.02"]].concat());
    crawl_ok(&state, &[&base[..], &["--deny", "/p3"]].concat());
    let files = warc::files(&dir);
    assert_eq!(files.len(), 1, "one file: {files:?}");
    let records = warc::read(&files[0]);
    let fields = |record: &Record| -> BTreeMap<String, String> {
        String::from_utf8_lossy(&record.block)
            .lines()
            .filter_map(|line| line.split_once(": "))
            .map(|(name, value)| (name.to_owned(), value.trim().to_owned()))
            .collect()
    };
    // The records of each run, after its warcinfo.
    let mut runs: Vec<(BTreeMap<String, String>, usize)> = Vec::new();
    for record in &records {
        match (record.kind(), runs.last_mut()) {
            ("warcinfo", _) => runs.push((fields(record), 0)),
            (_, Some((_, n))) => *n += 1,
            (kind, None) => panic!("a {kind} record before any warcinfo"),
        }
    }
    let described: Vec<(&str, &str, Option<&str>, Option<&str>)> = runs
        .iter()
        .map(|(info, _)| {
            (
                info["run"].as_str(),
                info["job-version"].as_str(),
                info.get("job.politeness.delay").map(String::as_str),
                info.get("job.scope.deny").map(String::as_str),
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            ("1", "1", Some("10ms"), Some("[]")),
            ("2", "2", Some("20ms"), Some("[]")),
            ("3", "3", Some("20ms"), Some("[\"/p3\"]")),
        ],
        "one warcinfo per run, with its job"
    );
    for (info, records) in &runs {
        assert!(
            *records > 0,
            "run {} wrote records after its warcinfo",
            info["run"]
        );
        assert!(info["software"].starts_with("legcrawl/"), "{info:?}");
    }
    warc::warcio_check(&files);
}

#[test]
fn each_runs_warcinfo_names_its_run_and_job_embedded() {
    each_runs_warcinfo_names_its_run_and_job(Mode::Embedded);
}

#[test]
fn each_runs_warcinfo_names_its_run_and_job_shared() {
    each_runs_warcinfo_names_its_run_and_job(Mode::Shared);
}

/// Issue 43: a shared worker's run is described in its WARC as an embedded
/// run is. Two runs into one file, the job changed between them; warcio reads
/// one `warcinfo` record per run with the job version it ran and its settings,
/// and the run: its number (embedded), or the worker and start time of its
/// record in the crawl's runs (shared: a run is numbered when it ends).
fn each_runs_warcinfo_names_its_run_and_job(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "each_runs_warcinfo_names_its_run_and_job") else {
        return;
    };
    let server = small_site();
    let dir = crawler.dir().join("warc");
    let seed = server.url("/");
    let base = [
        seed.as_str(),
        "--warc",
        dir.to_str().unwrap(),
        "--revisit-after",
        "0",
    ];
    crawler.crawl_ok(&[&base[..], &["--delay", "0.01"]].concat());
    crawler.crawl_ok(&[&base[..], &["--delay", "0.02"]].concat());
    let files = warc::files(&dir);
    assert_eq!(files.len(), 1, "one file: {files:?}");
    let Some(infos) = warc::warcio_warcinfo(&files) else {
        return;
    };
    let jobs: Vec<(&str, Option<&str>)> = infos
        .iter()
        .map(|info| {
            (
                info["job-version"].as_str(),
                info.get("job.politeness.delay").map(String::as_str),
            )
        })
        .collect();
    assert_eq!(
        jobs,
        [("1", Some("10ms")), ("2", Some("20ms"))],
        "{mode:?}: one warcinfo per run, with its job: {infos:#?}"
    );
    let runs = crawler.runs();
    assert_eq!(runs.len(), 2, "{mode:?}: {runs:?}");
    for (info, run) in infos.iter().zip(&runs) {
        assert!(info["software"].starts_with("legcrawl/"), "{info:?}");
        match mode {
            Mode::Embedded => assert_eq!(info["run"], run["id"].to_string(), "{run}"),
            Mode::Shared => {
                assert_eq!(info.get("run"), None, "{info:?}");
                assert_eq!(info["worker"], run["worker"].as_str().unwrap(), "{run}");
                assert_eq!(
                    info["run-started-at"],
                    run["started_at"].to_string(),
                    "{run}"
                );
            }
        }
    }
    warc::warcio_check(&files);
}

#[test]
fn a_missing_warc_file_is_one_warning_and_a_new_file_embedded() {
    a_missing_warc_file_is_one_warning_and_a_new_file(Mode::Embedded);
}

#[test]
fn a_missing_warc_file_is_one_warning_and_a_new_file_shared() {
    a_missing_warc_file_is_one_warning_and_a_new_file(Mode::Shared);
}

/// Issue 43: the crawl's WARC file deleted between runs. The next run says so
/// in one WARN line naming the file, goes on with a new file of another name
/// (valid for warcio) and succeeds; the run after it says nothing more.
fn a_missing_warc_file_is_one_warning_and_a_new_file(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "a_missing_warc_file_is_one_warning") else {
        return;
    };
    let server = small_site();
    let dir = crawler.dir().join("warc");
    let seed = server.url("/");
    let args = [
        seed.as_str(),
        "--warc",
        dir.to_str().unwrap(),
        "--revisit-after",
        "0",
    ];
    crawler.crawl_ok(&args);
    let first = warc::files(&dir);
    assert_eq!(first.len(), 1, "{first:?}");
    std::fs::remove_file(&first[0]).unwrap();
    let warned = |out: &std::process::Output| -> Vec<String> {
        cli::stderr(out)
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("WARC file is missing"))
            .map(str::to_owned)
            .collect()
    };
    let run_warn = || {
        let mut command = crawler.command(&args);
        command.env("RUST_LOG", "warn");
        let out = cli::run(command, LIMIT);
        cli::assert_ok(&format!("{mode:?} crawl after the file went"), &out);
        out
    };
    let out = run_warn();
    let lines = warned(&out);
    assert_eq!(
        lines.len(),
        1,
        "{mode:?}: one warning: {}",
        cli::stderr(&out)
    );
    let name = first[0].file_name().unwrap().to_str().unwrap();
    assert!(lines[0].contains(name), "names the file: {}", lines[0]);
    assert!(lines[0].contains("new file"), "{}", lines[0]);
    let files = warc::files(&dir);
    assert_eq!(files.len(), 1, "{mode:?}: a new file: {files:?}");
    assert_ne!(files[0], first[0], "a new name, not the missing file's");
    let records = warc::read(&files[0]);
    assert_eq!(records[0].kind(), "warcinfo");
    assert!(records.iter().any(|r| r.kind() == "request"), "{mode:?}");
    warc::warcio_check(&files);
    // Said once: the next run goes on with the new file.
    let out = run_warn();
    assert!(warned(&out).is_empty(), "{mode:?}: {}", cli::stderr(&out));
    assert_eq!(warc::files(&dir), files);
    warc::warcio_check(&files);
}
