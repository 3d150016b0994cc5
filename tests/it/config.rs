//! `crawl --config FILE`: the example files parse, mistakes are one-line exit-2 errors
//! naming file, line and key, a shop crawl driven only by a file, and flags over the file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::cli::{self, dump_items, dump_summary, legcrawl, run};
use crate::support::{Site, TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);

/// Writes `text` as `crawl.toml` in `dir` and returns its path.
fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("crawl.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `crawl --config FILE` plus `args` with state in `data`.
fn crawl_with(data: &Path, config: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["crawl", "--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    run(legcrawl(data, &all), LIMIT)
}

/// Fails the test with the command's stderr unless it exited 0.
fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_examples_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/examples");
    let mut names: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let file = legcrawl::crawlfile::load(&path)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            assert!(
                !file.config.seeds.is_empty(),
                "{} has seeds",
                path.display()
            );
            assert!(file.legs.is_some_and(|legs| !legs.is_empty()));
            names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    names.sort();
    assert_eq!(names, ["docs.toml", "news.toml", "shop.toml"]);
}

#[test]
fn each_mistake_is_one_line_naming_file_line_and_key_and_exits_two() {
    let cases: &[(&str, usize, &str)] = &[
        ("seeds = []\nlimitz = 1\n", 2, "limitz"),
        (
            "[[legs]]\nkind = \"links\"\nalow = [\"/docs/\"]\n",
            3,
            "legs[0].alow",
        ),
        ("[[legs]]\nkind = \"spider\"\n", 2, "legs[0].kind"),
        (
            "[[legs]]\nkind = \"links\"\ndeny = [\"(\"]\n",
            3,
            "legs[0].deny",
        ),
        (
            "[limits]\n# comment\ntimeout = \"30 seconds\"\n",
            3,
            "limits.timeout",
        ),
        ("[limits]\nmax_pages = \"ten\"\n", 2, "limits.max_pages"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    for (text, line, key) in cases {
        let config = write_config(dir.path(), text);
        let out = crawl_with(&data, &config, &["http://127.0.0.1:9/"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        let at = format!("{}:{line}:", config.display());
        assert!(err.contains(&at), "{text:?} should fail at {at}: {err}");
        assert!(
            err.contains(&format!(": {key}: ")),
            "{text:?} names {key}: {err}"
        );
    }
    assert!(!data.exists(), "no state is created for a bad file");
    let out = crawl_with(&data, &dir.path().join("missing.toml"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml: cannot read"));
}

/// A category page (two pages of it) linking to three products and an about page.
fn shop() -> TestServer {
    let product = |n: u32, price: &str| {
        format!(
            "<html><head><title>Mug {n}</title></head><body>\
             <h1 class=\"product-name\">Mug {n}</h1><span class=\"price\">{price}</span>\
             <p class=\"description\">A mug, number {n}.</p>\
             <a href=\"/category/mugs\">back</a></body></html>"
        )
    };
    TestServer::start(handler(move |request| match request.path() {
        "/category/mugs" => TestResponse::html(
            "<a href=\"/product/1\">1</a><a href=\"/product/2\">2</a>\
             <a href=\"/category/mugs/2\">next</a><a href=\"/about\">about</a>",
        ),
        "/category/mugs/2" => TestResponse::html("<a href=\"/product/3\">3</a>"),
        "/product/1" => TestResponse::html(product(1, "9.50")),
        "/product/2" => TestResponse::html(product(2, "12.00")),
        "/product/3" => TestResponse::html(product(3, "4.25")),
        "/about" => TestResponse::html("<h1 class=\"product-name\">Not a product</h1>"),
        _ => TestResponse::not_found(),
    }))
}

#[test]
fn a_shop_crawl_driven_by_the_file_alone() {
    let server = shop();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            r#"
seeds = ["{seed}"]
[limits]
concurrency = 4
[[legs]]
kind = "callback_rules"
[[legs.rules]]
pattern = "/category/"
legs = [{{ kind = "links", allow = ["/(category|product)/"] }}]
[[legs.rules]]
pattern = "/product/[0-9]+$"
[[legs.rules.legs]]
kind = "css_items"
fields = [
  {{ name = "name", selector = "h1.product-name", required = true }},
  {{ name = "price", selector = ".price" }},
  {{ name = "description", selector = ".description" }},
]
[[legs.rules.legs]]
kind = "item_id"
fields = ["name"]
"#,
            seed = server.url("/category/mugs")
        ),
    );
    let data = dir.path().join("state");
    let out = crawl_with(&data, &config, &[]);
    assert_ok(&out);
    let mut items = dump_items(&data);
    items.sort_by_key(|item| item["name"].as_str().unwrap_or_default().to_owned());
    let got: Vec<(&str, &str, &str)> = items
        .iter()
        .map(|i| {
            let text = |key: &str| i[key].as_str().unwrap_or_default();
            (text("name"), text("price"), text("description"))
        })
        .collect();
    assert_eq!(
        got,
        [
            ("Mug 1", "9.50", "A mug, number 1."),
            ("Mug 2", "12.00", "A mug, number 2."),
            ("Mug 3", "4.25", "A mug, number 3."),
        ]
    );
    assert!(
        items
            .iter()
            .all(|i| i["id"].as_str().is_some_and(|id| id.len() == 40))
    );
    assert_eq!(
        server.hits("/about"),
        0,
        "the allow regex of the category rule"
    );
    assert_eq!(server.hits("/product/1"), 1);
}

#[test]
fn flags_given_on_the_command_line_override_the_file() {
    let site = Site::generate(50, 3);
    let server = TestServer::start(site.handler());
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "seeds = [\"{}\"]\n[limits]\nmax_pages = 40\nconcurrency = 2\n",
            server.url("/")
        ),
    );
    let data = dir.path().join("state");
    let out = crawl_with(&data, &config, &["--max-pages", "3"]);
    assert_ok(&out);
    assert_eq!(
        dump_summary(&data)["items"],
        3,
        "--max-pages 3 beats the file's 40"
    );
    // The file's own limit applies when no flag is given (the run resumes the state).
    let out = crawl_with(&data, &config, &[]);
    assert_ok(&out);
    assert_eq!(dump_summary(&data)["items"], 43);
}

#[test]
fn the_file_chooses_the_state_directory_unless_data_is_given() {
    let site = Site::generate(5, 1);
    let server = TestServer::start(site.handler());
    let dir = tempfile::tempdir().unwrap();
    let from_file = dir.path().join("from-file");
    let config = write_config(
        dir.path(),
        &format!(
            "seeds = [\"{}\"]\ndata = \"{}\"\n[limits]\nmax_pages = 2\n",
            server.url("/"),
            from_file.display()
        ),
    );
    let mut cmd = Command::new(cli::bin());
    cmd.args(["crawl", "--config"])
        .arg(&config)
        .env("RUST_LOG", "error");
    let out = run(cmd, LIMIT);
    assert_ok(&out);
    assert_eq!(dump_summary(&from_file)["items"], 2);
    let given = dir.path().join("given");
    let out = crawl_with(&given, &config, &[]);
    assert_ok(&out);
    assert_eq!(
        dump_summary(&given)["items"],
        2,
        "--data beats the file's data"
    );
    assert_eq!(dump_summary(&from_file)["items"], 2);
    // Even an explicit `--data data/default` (the default's own value) beats the file.
    let mut cmd = Command::new(cli::bin());
    cmd.args(["crawl", "--data", "data/default", "--config"])
        .arg(&config)
        .current_dir(dir.path())
        .env("RUST_LOG", "error");
    let out = run(cmd, LIMIT);
    assert_ok(&out);
    assert_eq!(dump_summary(&dir.path().join("data/default"))["items"], 2);
    assert_eq!(dump_summary(&from_file)["items"], 2);
}

#[test]
fn bad_revisit_flags_exit_two_with_one_line_and_touch_no_state() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let cases: [(&[&str], &str); 3] = [
        (
            &["--revisit", "("],
            "revisit rule \"(\" is not a valid regex: unclosed group",
        ),
        (
            &["--revisit-after", "sometimes"],
            "expected \"estimated\", \"adaptive\", \"never\" or a duration",
        ),
        (&["--max-duration", "soon"], "--max-duration"),
    ];
    for (flags, words) in cases {
        let mut args = vec!["crawl", "http://127.0.0.1:9/"];
        args.extend_from_slice(flags);
        let out = run(legcrawl(&data, &args), Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(words), "{flags:?}: {stderr}");
        assert_eq!(
            stderr.trim().lines().next().map(|l| l.contains(words)),
            Some(true),
            "{stderr}"
        );
        assert!(!data.exists(), "{flags:?} created the state directory");
    }
}

/// Issue 14, item 2, as issue 24 made it: a crawl file becomes the state's
/// stored job. The resume hint needs only the state; a run without `--config`
/// keeps the file's scope; a run with another file replaces the job and says,
/// one line each, which settings changed.
#[test]
fn a_crawl_file_becomes_the_stored_job() {
    let server = TestServer::start(handler(|req| match req.path() {
        "/" => TestResponse::html(
            "<a href=/library/a>a</a><a href=/library/b>b</a><a href=/other/x>x</a>",
        ),
        "/library/a" => TestResponse::html("<a href=/library/c>c</a><a href=/other/y>y</a>"),
        _ => TestResponse::html("<title>leaf</title>"),
    }));
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let file = write_config(
        dir.path(),
        &format!(
            "seeds = [\"{}\"]\n[scope]\nallow = [\"/library/\"]\n",
            server.url("/")
        ),
    );
    // Stopped by a limit: the hint is a command that continues this crawl.
    let out = crawl_with(&data, &file, &["--max-pages", "2", "--concurrency", "1"]);
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let hint = format!("resume with: legcrawl crawl --data {}", data.display());
    assert!(stderr.contains(&hint), "{stderr}");
    let job = run(legcrawl(&data, &["dump", "job"]), LIMIT);
    let job = String::from_utf8_lossy(&job.stdout);
    assert!(job.contains("allow = [\"/library/\"]"), "{job}");
    assert!(job.contains("concurrency = 1"), "{job}");

    // Without --config, the stored scope still holds.
    assert_ok(&run(legcrawl(&data, &["crawl"]), LIMIT));
    assert_eq!(server.hits("/other/x") + server.hits("/other/y"), 0);
    assert_eq!(server.hits("/library/c"), 1, "the crawl went on");
    assert_eq!(dump_items(&data).len(), 4, "/, /library/a, b and c");

    // Another file with other politeness: one line per setting it changes
    // (the concurrency given as a flag before is the file's default again).
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        format!(
            "seeds = [\"{}\"]\n[scope]\nallow = [\"/library/\"]\n[politeness]\ndelay = \"10ms\"\n[limits]\nconcurrency = 1\n",
            server.url("/")
        ),
    )
    .unwrap();
    let out = crawl_with(&data, &other, &[]);
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let notes: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("legcrawl: job "))
        .collect();
    assert_eq!(
        notes,
        ["legcrawl: job 1 -> 2: politeness.delay: (default) -> 10ms"],
        "{stderr}"
    );
    let job = run(legcrawl(&data, &["dump", "job"]), LIMIT);
    let job = String::from_utf8_lossy(&job.stdout);
    assert!(
        job.contains("delay = \"10ms\""),
        "the new file is the job: {job}"
    );
}
