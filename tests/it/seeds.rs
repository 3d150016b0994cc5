//! `legcrawl seeds`: list, add and remove the seeds of a state; a removed seed's
//! queued request goes with it and is never fetched.

use std::time::Duration;

use crate::support::cli::{self, legcrawl};
use crate::support::{Site, TestServer};

const LIMIT: Duration = Duration::from_secs(60);

fn seeds(state: &std::path::Path) -> Vec<String> {
    let out = cli::run(legcrawl(state, &["seeds"]), LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_removed_seed_is_not_queued_or_fetched_again_and_an_added_one_is() {
    let (one, two, three) = (
        Site::generate(5, 1),
        Site::generate(5, 2),
        Site::generate(5, 3),
    );
    let servers = [
        TestServer::start(one.handler()),
        TestServer::start(two.handler()),
        TestServer::start(three.handler()),
    ];
    let [a, b, c] = [0, 1, 2].map(|i| servers[i].url("/"));
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    // One page only: one seed is fetched, the other stays queued.
    let out = cli::run(
        legcrawl(
            &state,
            &[
                "crawl",
                &a,
                &b,
                "--max-pages",
                "1",
                "--concurrency",
                "1",
                "--bloom-bits",
                "16",
            ],
        ),
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut listed = seeds(&state);
    listed.sort();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(listed, expected);
    let (fetched, waiting, waiting_server) = if servers[0].requests() > 0 {
        (&a, &b, &servers[1])
    } else {
        (&b, &a, &servers[0])
    };
    assert_eq!(waiting_server.requests(), 0);

    // Not a seed: refused, nothing changed.
    let out = cli::run(legcrawl(&state, &["seeds", "remove", &c]), LIMIT);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(seeds(&state).len(), 2);

    let out = cli::run(legcrawl(&state, &["seeds", "remove", waiting]), LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("1 queued request"), "{stderr}");
    assert_eq!(seeds(&state), vec![fetched.clone()]);
    let blocked = cli::run(legcrawl(&state, &["dump", "blocked"]), LIMIT);
    assert!(String::from_utf8_lossy(&blocked.stdout).contains(waiting.as_str()));

    let out = cli::run(legcrawl(&state, &["seeds", "add", &c]), LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli::run(legcrawl(&state, &["seeds", "add", "notaurl"]), LIMIT);
    assert_eq!(out.status.code(), Some(2));

    // The next runs finish the crawl: the removed seed's host is never asked.
    for _ in 0..2 {
        let out = cli::run(legcrawl(&state, &["crawl", "--bloom-bits", "16"]), LIMIT);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(waiting_server.requests(), 0, "the removed seed was fetched");
    assert!(servers[2].hits("/") >= 1, "the added seed was fetched");
}

/// `legcrawl crawl` on `state` with `args`, at the default log level (warn).
fn crawl(state: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let args = [&["--bloom-bits", "16"], args].concat();
    let out = cli::crawl_env(state, &args, &[("RUST_LOG", None)]);
    (out.status.code(), cli::stderr(&out))
}

fn dump_summary(state: &std::path::Path) -> String {
    let out = cli::run(legcrawl(state, &["dump", "summary"]), LIMIT);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_seed_unreachable_in_three_runs_is_parked_until_added_again() {
    let site = Site::generate(3, 4);
    let up = TestServer::start(site.handler());
    // A port nothing listens on (yet): connections are refused.
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let dead = format!("http://{down}/");
    let data = tempfile::tempdir().expect("temp dir");
    let state = data.path().join("state");
    for run in 1..=3 {
        let (code, err) = crawl(&state, &[&up.url("/"), &dead]);
        assert_eq!(code, Some(0), "run {run}: {err}");
        assert!(err.contains("connection refused"), "run {run}: {err}");
        let shown = dump_summary(&state);
        assert!(
            shown.contains(&format!("{down}: {run} run(s) in a row")),
            "run {run}: {shown}"
        );
        assert_eq!(
            shown.contains("parked seed"),
            run == 3,
            "run {run}: {shown}"
        );
    }
    let (_, err) = crawl(&state, &[]);
    assert!(err.contains("parked until"), "{err}");
    let shown = dump_summary(&state);
    assert!(shown.contains("parked seed"), "{shown}");
    assert!(shown.contains(&dead), "{shown}");
    // Parked: the next runs neither queue the seed nor try its host, and the
    // live site is revisited as usual.
    let before = up.hits("/");
    for run in 4..=5 {
        let (code, err) = crawl(&state, &[]);
        assert_eq!(code, Some(0), "run {run}: {err}");
        assert!(!err.contains("connection refused"), "run {run}: {err}");
        assert!(err.contains("parked until"), "run {run}: {err}");
    }
    assert_eq!(up.hits("/"), before + 2, "the live seed, once a run");
    // The site comes back; adding its seed again ends the park.
    let back = TestServer::start_at(down, Site::generate(2, 5).handler());
    let out = cli::run(legcrawl(&state, &["seeds", "add", &dead]), LIMIT);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("the next crawl tries it again"), "{err}");
    let (code, err) = crawl(&state, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(back.hits("/") >= 1, "the seed is fetched again: {err}");
    let shown = dump_summary(&state);
    assert!(!shown.contains("unreachable host"), "{shown}");
    assert!(!shown.contains("parked seed"), "{shown}");
}
