//! The README's ten-minute tour, run as written against a local stand-in for
//! its site: every `legcrawl` line of the tour's `sh` block, in order, in a
//! temporary directory, with the site's address replaced by a test server's on
//! 127.0.0.1. Only three things differ from a reader's run: the address,
//! `--delay` (milliseconds instead of seconds, so the test stays short) and
//! `serve`'s `--listen` (a free port). Each command must succeed, and the tour
//! must end with what it promises: every page below the seed's directory
//! stored once in the JSON-lines file, nothing outside it fetched, the change
//! line printed, WARC files written.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::cli::{bin, parse_lines, run, signal};
use crate::support::{TestResponse, TestServer, handler};

const LIMIT: Duration = Duration::from_secs(120);

/// The site the tour crawls, as the README writes it.
const SITE: &str = "https://doc.rust-lang.org";

/// Chapters of the stand-in book, past the tour's page limits (50 + 50 + 20)
/// so that its last, `--until-idle` run has work left.
const CHAPTERS: usize = 140;

/// The first `sh` block under the README's tour heading.
fn tour_block() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let (_, after) = readme
        .split_once("\n## A ten-minute tour\n")
        .expect("README.md has a '## A ten-minute tour' section");
    let (_, block) = after
        .split_once("```sh\n")
        .expect("the tour has an sh block");
    let (block, _) = block.split_once("\n```").expect("the sh block ends");
    block.to_owned()
}

/// One `legcrawl` command of the tour.
#[derive(Debug)]
struct Step {
    args: Vec<String>,
    /// `> FILE`: its standard output goes there.
    stdout_to: Option<String>,
    /// A trailing `&`: it runs beside the next command.
    background: bool,
}

/// The words of one shell line: split on blanks, `"..."` kept whole, `$NAME`
/// replaced from `vars`, a `#` comment dropped.
fn words(line: &str, vars: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                word.get_or_insert_with(String::new);
            }
            '#' if !quoted && word.is_none() => break,
            '$' => {
                let mut name = String::new();
                while let Some(&n) = chars.peek().filter(|n| n.is_ascii_alphanumeric()) {
                    name.push(n);
                    chars.next();
                }
                let value = vars
                    .get(&name)
                    .unwrap_or_else(|| panic!("the tour uses ${name} before setting it"));
                word.get_or_insert_with(String::new).push_str(value);
            }
            c if c.is_whitespace() && !quoted => out.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    assert!(!quoted, "unbalanced quotes in {line:?}");
    out.extend(word);
    out
}

/// The tour's `legcrawl` commands; other lines (variables aside) are left out.
fn steps(block: &str) -> Vec<Step> {
    let mut vars = BTreeMap::new();
    let mut steps = Vec::new();
    let mut pending = String::new();
    for line in block.lines() {
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            continue;
        }
        let line = std::mem::take(&mut pending) + line;
        let words = words(&line, &vars);
        let Some(first) = words.first() else { continue };
        if let Some((name, value)) = first.split_once('=')
            && words.len() == 1
        {
            vars.insert(name.to_owned(), value.to_owned());
            continue;
        }
        if first != "legcrawl" {
            continue;
        }
        let mut step = Step {
            args: Vec::new(),
            stdout_to: None,
            background: false,
        };
        let mut rest = words[1..].iter();
        while let Some(word) = rest.next() {
            match word.as_str() {
                "|" => break,
                ">" => step.stdout_to = rest.next().cloned(),
                "&" => step.background = true,
                _ => step.args.push(word.clone()),
            }
        }
        steps.push(step);
    }
    steps
}

/// The stand-in book: `/book/` links to the getting-started page and the
/// first chapter, each chapter to the next and to a page outside `/book/`
/// (which `--no-parent` must leave alone).
fn book() -> TestServer {
    TestServer::start(handler(|request| {
        let path = request.path();
        let page = |title: &str, links: &[String]| {
            let links: String = links
                .iter()
                .map(|href| format!("<a href=\"{href}\">{href}</a> "))
                .collect();
            TestResponse::html(format!(
                "<html><head><title>{title}</title></head><body>{links}\
                 <a href=\"/std/index.html\">std</a></body></html>"
            ))
        };
        if path == "/book/" {
            return page(
                "The Book",
                &["ch01-00-getting-started.html".into(), "ch1.html".into()],
            );
        }
        if path == "/book/ch01-00-getting-started.html" {
            return page("Getting started", &[]);
        }
        let chapter = path
            .strip_prefix("/book/ch")
            .and_then(|rest| rest.strip_suffix(".html"))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=CHAPTERS).contains(n));
        match chapter {
            Some(n) if n < CHAPTERS => {
                page(&format!("Chapter {n}"), &[format!("ch{}.html", n + 1)])
            }
            Some(n) => page(&format!("Chapter {n}"), &[]),
            None if path == "/std/index.html" => page("std", &[]),
            None => TestResponse::not_found(),
        }
    }))
}

/// A `legcrawl` command run in `dir`, with no proxy from the environment.
fn command(dir: &Path, args: &[String]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args).current_dir(dir).env("RUST_LOG", "error");
    for var in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

#[test]
fn the_readme_tour_runs_as_written() {
    let server = book();
    let base = server.url("");
    let base = base.trim_end_matches('/');
    let dir = tempfile::tempdir().unwrap();
    let steps = steps(&tour_block());
    assert!(
        steps.len() >= 10,
        "only {} legcrawl lines: {steps:?}",
        steps.len()
    );
    let mut all_stderr = String::new();
    let mut background = None;
    for step in &steps {
        let args: Vec<String> = step
            .args
            .iter()
            .map(|arg| arg.replace(SITE, base))
            .collect();
        let mut args: Vec<String> = args
            .iter()
            .zip(std::iter::once("").chain(args.iter().map(String::as_str)))
            .map(|(arg, before)| match before {
                // "2s" -> "2ms": the tour's pace, a thousand times faster.
                "--delay" => arg
                    .strip_suffix('s')
                    .map_or_else(|| arg.clone(), |n| format!("{n}ms")),
                _ => arg.clone(),
            })
            .collect();
        let what = args.join(" ");
        if step.background {
            assert_eq!(args[0], "serve", "only serve runs in the background");
            args.extend(["--listen".into(), "127.0.0.1:0".into()]);
            let child = command(dir.path(), &args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn legcrawl serve");
            background = Some(child);
            continue;
        }
        let out = run(command(dir.path(), &args), LIMIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}: {:?}\n{stderr}", out.status);
        all_stderr.push_str(&stderr);
        if let Some(file) = &step.stdout_to {
            std::fs::write(dir.path().join(file), &out.stdout).unwrap();
        }
        if let Some(mut child) = background.take() {
            // serve ran beside this crawl, and is still up.
            assert!(child.try_wait().unwrap().is_none(), "serve stopped early");
            signal(child.id(), libc::SIGTERM);
            let _ = child.wait();
        }
    }
    assert!(
        all_stderr.contains("run 1 (new cycle): limit — 50 pages"),
        "{all_stderr}"
    );
    assert!(
        all_stderr.contains("job 1 -> 2: politeness.delay: (default) -> 2ms"),
        "{all_stderr}"
    );
    // Every page below /book/ is stored exactly once, and nothing outside it
    // was fetched.
    let items = parse_lines(&std::fs::read(dir.path().join("book.jsonl")).unwrap());
    let mut urls: Vec<String> = items
        .iter()
        .map(|item| item["url"].as_str().unwrap().to_owned())
        .collect();
    urls.sort();
    let before = urls.len();
    urls.dedup();
    assert_eq!(before, urls.len(), "an item was written twice");
    let outside: Vec<&String> = urls.iter().filter(|u| !u.contains("/book/")).collect();
    assert!(outside.is_empty(), "stored outside /book/: {outside:?}");
    assert_eq!(urls.len(), CHAPTERS + 2, "pages of the book stored");
    assert_eq!(server.hits("/std/index.html"), 0);
    let warcs = std::fs::read_dir(dir.path().join("warc")).unwrap().count();
    assert!(warcs > 0, "no WARC file written");
}
