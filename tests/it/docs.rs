//! The documentation against the code: every `toml` block of `docs/crawlfile.md`
//! is a crawl file the parser and `crawl --config` accept, every key the parser
//! accepts is in that reference, every relative link and `#anchor` of the README
//! and `docs/` resolves, and the README stays short and names the default user
//! agent and CI's test command.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::cli::{legcrawl, run};

const LIMIT: Duration = Duration::from_secs(60);

/// A port on loopback nothing listens on: the proxy of the `crawl --config`
/// checks, so that even a request made by mistake never leaves the machine.
const NOWHERE: &str = "http://127.0.0.1:9";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The README and every Markdown file of `docs/`.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let docs = root().join("docs");
    let mut more: Vec<PathBuf> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    files.extend(more);
    files
}

/// The fenced code blocks of `text` whose info string is `lang`, each with the
/// 1-based line its text starts on.
fn fenced(text: &str, lang: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, bool, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match &mut open {
            None if fence => {
                let info = line.trim_start().trim_start_matches('`').trim();
                open = Some((i + 2, info == lang, String::new()));
            }
            Some((start, wanted, body)) => {
                if fence {
                    if *wanted {
                        blocks.push((*start, std::mem::take(body)));
                    }
                    open = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
            None => {}
        }
    }
    blocks
}

/// `text` without its fenced code blocks (blank lines in their place) and
/// without inline code spans.
fn prose(text: &str) -> String {
    let mut in_fence = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence {
            // Drop `code spans`: a link written inside one is an example.
            let mut kept = String::new();
            for (i, part) in line.split('`').enumerate() {
                if i % 2 == 0 {
                    kept.push_str(part);
                }
            }
            out.push_str(&kept);
        }
        out.push('\n');
    }
    out
}

/// The anchors GitHub makes of a file's headings: lower case, spaces as `-`,
/// punctuation other than `-` and `_` dropped, `-1`, `-2` after repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the inline links `[text](target)` of `text`'s prose.
fn link_targets(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut targets = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            targets.push(rest[..end].trim().to_owned());
            rest = &rest[end..];
        }
    }
    targets
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = read(&file);
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let dir = file.parent().unwrap();
            let linked = if path.is_empty() {
                file.clone()
            } else {
                dir.join(path)
            };
            if !linked.exists() {
                broken.push(format!("{}: {target}: no such file", file.display()));
                continue;
            }
            if let Some(anchor) = anchor
                && !anchors(&read(&linked)).contains(anchor)
            {
                broken.push(format!("{}: {target}: no such heading", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 20,
        "only {checked} relative links found: the scan broke"
    );
}

#[test]
fn the_readme_is_short_and_says_what_it_must() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; move detail to docs/"
    );
    // The default user agent, as the code builds it, and how to add a contact.
    let agent = concat!("legcrawl/", env!("CARGO_PKG_VERSION"));
    assert_eq!(legcrawl::config::CrawlConfig::default().user_agent, agent);
    for file in ["README.md", "docs/guide.md", "docs/crawlfile.md"] {
        let text = read(&root().join(file));
        assert!(
            text.contains(agent),
            "{file} does not name the user agent {agent}"
        );
    }
    let guide = read(&root().join("docs/guide.md"));
    for needle in ["--user-agent", "--from"] {
        assert!(
            readme.contains(needle) && guide.contains(needle),
            "{needle}"
        );
    }
    // How to install, and where the rest is.
    for needle in ["cargo install --path .", "docs/README.md", "## Exit codes"] {
        assert!(readme.contains(needle), "README.md lacks {needle:?}");
    }
    // .ci/run runs the README's test command.
    let ci = read(&root().join(".ci/run"));
    let command = ci
        .lines()
        .rev()
        .find(|line| line.starts_with("cargo test"))
        .expect(".ci/run runs cargo test");
    assert!(
        readme.contains(command),
        "README.md does not show .ci/run's {command:?}"
    );
}

/// Parses `text` as a crawl file, writes its job and reads that back: the job
/// must be the same text again (what `dump job` and `--config` rely on).
fn parses_and_round_trips(text: &str, what: &str) -> legcrawl::crawlfile::CrawlFile {
    let mut file = legcrawl::crawlfile::parse(text, what.as_ref())
        .unwrap_or_else(|e| panic!("{what} is not a valid crawl file: {e}\n{text}"));
    let mut legs = file
        .legs
        .take()
        .unwrap_or_else(legcrawl::crawlfile::default_legs);
    legcrawl::legs::Leg::configure(&mut legs, &file.config)
        .unwrap_or_else(|e| panic!("{what}: the legs refuse the crawl's settings: {e}"));
    let job =
        legcrawl::crawlfile::job_text(&file.config, file.legs_toml.as_ref(), &file.config.seeds);
    let again = legcrawl::crawlfile::parse(&job, what.as_ref())
        .unwrap_or_else(|e| panic!("{what}: its job does not read back: {e}\n{job}"));
    let twice =
        legcrawl::crawlfile::job_text(&again.config, again.legs_toml.as_ref(), &again.config.seeds);
    assert_eq!(job, twice, "{what}: the job changed on a round trip");
    file
}

#[test]
fn every_crawl_file_in_the_reference_is_accepted() {
    let reference = root().join("docs/crawlfile.md");
    let blocks = fenced(&read(&reference), "toml");
    assert!(blocks.len() >= 15, "only {} toml blocks", blocks.len());
    let dir = tempfile::tempdir().unwrap();
    for (n, (line, text)) in blocks.iter().enumerate() {
        let what = format!("docs/crawlfile.md:{line}");
        let file = parses_and_round_trips(text, &what);
        if file.config.shared.is_some() {
            // `crawl` would join the Redis crawl it names; the parse is the check.
            continue;
        }
        // The CLI's dry run: the job is stored, nothing is fetched.
        let work = dir.path().join(format!("block{n}"));
        std::fs::create_dir_all(&work).unwrap();
        let path = work.join("crawl.toml");
        std::fs::write(&path, text).unwrap();
        let state = work.join("state");
        let mut args = vec![
            "crawl",
            "--config",
            path.to_str().unwrap(),
            "--max-pages",
            "0",
            "--proxy",
            NOWHERE,
        ];
        if file.config.seeds.is_empty() {
            args.push("http://127.0.0.1:9/");
        }
        let mut cmd = legcrawl(&state, &args);
        cmd.current_dir(&work);
        for rule in &file.config.hosts {
            if let Some(var) = &rule.password_env {
                cmd.env(var, "not-a-real-password");
            }
        }
        let out = run(cmd, LIMIT);
        assert!(
            out.status.success(),
            "{what}: crawl --config refused it: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = run(legcrawl(&state, &["dump", "job"]), LIMIT);
        assert!(out.status.success(), "{what}: dump job failed");
        let job = String::from_utf8(out.stdout).unwrap();
        parses_and_round_trips(&job, &format!("{what} (dump job)"));
    }
}

/// The keys the parser accepts at one place: it is given `probe`, a file with
/// the unknown key `zzz` there, and lists the keys it expected instead.
fn accepted_keys(probe: &str) -> Vec<String> {
    let error = match legcrawl::crawlfile::parse(probe, "probe.toml".as_ref()) {
        Ok(_) => panic!("the probe was accepted:\n{probe}"),
        Err(e) => e.to_string(),
    };
    let Some((_, expected)) = error.split_once("unknown field `zzz`") else {
        panic!("not an unknown-field error: {error}");
    };
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The text of `docs/crawlfile.md` under the heading `heading`, up to the next
/// heading.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/crawlfile.md has no heading {heading:?}"));
    let body = &text[start + heading.len() + 2..];
    let end = body.find("\n#").unwrap_or(body.len());
    &body[..end]
}

#[test]
fn every_key_and_leg_kind_the_parser_accepts_is_in_the_reference() {
    let reference = read(&root().join("docs/crawlfile.md"));
    let leg = |kind: &str, extra: &str| format!("[[legs]]\nkind = \"{kind}\"\n{extra}zzz = 1\n");
    // (heading, probe, keys the probe cannot list: taken out before the rest
    // is read, like a stack's `legs`).
    let mut places: Vec<(String, String, Vec<&str>)> = vec![
        ("## Top-level keys".into(), "zzz = 1\n".into(), vec!["legs"]),
        ("## `[scope]`".into(), "[scope]\nzzz = 1\n".into(), vec![]),
        ("## `[limits]`".into(), "[limits]\nzzz = 1\n".into(), vec![]),
        (
            "## `[politeness]`".into(),
            "[politeness]\nzzz = 1\n".into(),
            vec![],
        ),
        (
            "## `[hosts.\"HOST\"]`".into(),
            "[hosts.\"a.example\"]\nzzz = 1\n".into(),
            vec![],
        ),
        ("## `[output]`".into(), "[output]\nzzz = 1\n".into(), vec![]),
        ("## `[dedup]`".into(), "[dedup]\nzzz = 1\n".into(), vec![]),
        (
            "## `[revisit]`".into(),
            "[revisit]\nzzz = 1\n".into(),
            vec![],
        ),
        (
            "## `[revisit]`".into(),
            "[revisit]\nrules = [{ pattern = \"a\", after = \"1d\", zzz = 1 }]\n".into(),
            vec![],
        ),
        ("## `[render]`".into(), "[render]\nzzz = 1\n".into(), vec![]),
        ("## `[state]`".into(), "[state]\nzzz = 1\n".into(), vec![]),
        (
            "## `[shared]`".into(),
            "[shared]\nredis = \"redis://127.0.0.1:6379/0\"\nname = \"a\"\nzzz = 1\n".into(),
            vec![],
        ),
        (
            "## `css_items`".into(),
            leg("css_items", "").replace(
                "zzz = 1\n",
                "fields = [{ name = \"a\", selector = \"b\", zzz = 1 }]\n",
            ),
            vec![],
        ),
        (
            "## `callback_rules`".into(),
            leg("callback_rules", "").replace(
                "zzz = 1\n",
                "rules = [{ pattern = \"a\", legs = [], zzz = 1 }]\n",
            ),
            vec!["pattern", "legs"],
        ),
    ];
    for kind in legcrawl::crawlfile::kind_names() {
        let extra: Vec<&str> = match kind {
            "stack" => vec!["legs"],
            "callback_rules" => vec!["rules", "otherwise"],
            _ => vec![],
        };
        places.push((format!("## `{kind}`"), leg(kind, ""), extra));
    }
    // Every table the parser takes at the top level with a closed set of keys
    // (it names `zzz` as unknown there) is probed above: found by asking the
    // parser, so a new table cannot be missed.
    for key in accepted_keys("zzz = 1\n") {
        let probe = format!("[{key}]\nzzz = 1\n");
        let closed = legcrawl::crawlfile::parse(&probe, "probe.toml".as_ref())
            .is_err_and(|e| e.to_string().contains("unknown field `zzz`"));
        if closed {
            assert!(
                places
                    .iter()
                    .any(|(_, p, _)| p.starts_with(&format!("[{key}]\n"))),
                "the table [{key}] has keys of its own: add its probe and section"
            );
        }
    }
    let mut missing = Vec::new();
    // heading -> every key the parser accepts in that section.
    let mut accepted: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (heading, probe, extra) in &places {
        let text = section(&reference, heading);
        let keys = accepted_keys(probe);
        accepted.entry(heading).or_default().extend(
            keys.iter()
                .cloned()
                .chain(extra.iter().map(|k| k.to_string())),
        );
        for key in keys.iter().map(String::as_str).chain(extra.iter().copied()) {
            // A key, or a table written as `[key]` or `[key."NAME"]`.
            let named = [
                format!("`{key}`"),
                format!("`[{key}]`"),
                format!("`[{key}."),
            ];
            if !named.iter().any(|form| text.contains(form.as_str())) {
                missing.push(format!("{heading}: `{key}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "keys the parser accepts but docs/crawlfile.md does not list:\n{}",
        missing.join("\n")
    );
    // And the other way: every key in the first column of a section's tables
    // is one the parser accepts there.
    let mut stale = Vec::new();
    for (heading, keys) in &accepted {
        for line in section(&reference, heading).lines() {
            let Some(cell) = line.strip_prefix("| `") else {
                continue;
            };
            let key = cell.split('`').next().unwrap_or_default();
            if !keys.contains(key) {
                stale.push(format!("{heading}: `{key}`"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "keys docs/crawlfile.md lists but the parser refuses:\n{}",
        stale.join("\n")
    );
}
