//! Unit tests of the crawl file: schema, errors with line, column and key.

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::legs::{Leg, run, test_response};

fn ok(text: &str) -> CrawlFile {
    parse(text, Path::new("crawl.toml")).unwrap()
}

fn err(text: &str) -> String {
    parse(text, Path::new("crawl.toml"))
        .unwrap_err()
        .to_string()
}

#[test]
fn empty_file_is_the_default_config_without_legs() {
    let file = ok("");
    assert!(file.legs.is_none());
    assert_eq!(file.config.concurrency, CrawlConfig::default().concurrency);
}

#[test]
fn every_section_fills_the_config() {
    let file = ok(r#"
seeds = ["https://docs.example.org/"]
data = "data/docs"
output = "docs.jsonl"
[scope]
allowed_hosts = ["docs.example.org"]
max_depth = 5
allow = ["/docs/"]
deny = ["\\.pdf$"]
follow_nofollow = false
[limits]
max_pages = 10000
concurrency = 8
timeout = "1m"
read_timeout = "250ms"
max_body = "1MiB"
max_url_len = 4096
max_retries = 4
retry_backoff = "2s"
grace = "5s"
[politeness]
per_host = 1
delay = "1.5s"
jitter = true
obey_robots = false
robots_ttl = "1h"
max_crawl_delay = "10s"
user_agent = "docbot/1"
from = "me@example.org"
[headers]
"Accept-Language" = "fr"
[dedup]
mode = "bloom"
bloom_bits = 20
bloom_hashes = 4
fingerprint_headers = ["Accept-Language"]
"#);
    let c = file.config;
    assert_eq!(c.seeds, ["https://docs.example.org/"]);
    assert_eq!(c.data_dir, Path::new("data/docs"));
    assert_eq!(c.output.as_deref(), Some(Path::new("docs.jsonl")));
    assert_eq!(c.allowed_hosts, ["docs.example.org"]);
    assert_eq!(c.max_depth, Some(5));
    assert_eq!((c.allow.len(), c.deny.len()), (1, 1));
    assert!(!c.follow_nofollow);
    assert_eq!(c.max_pages, Some(10000));
    assert_eq!(c.concurrency, 8);
    assert_eq!(c.request_timeout, Duration::from_secs(60));
    assert_eq!(c.read_timeout, Duration::from_millis(250));
    assert_eq!(c.max_body_bytes, 1 << 20);
    assert_eq!(c.max_url_len, 4096);
    assert_eq!(c.max_retries, 4);
    assert_eq!(c.retry_backoff, Duration::from_secs(2));
    assert_eq!(c.shutdown_grace, Duration::from_secs(5));
    assert_eq!(c.per_host, 1);
    assert_eq!(c.delay, Some(Duration::from_millis(1500)));
    assert!(c.jitter && !c.obey_robots);
    assert_eq!(c.robots_ttl, Duration::from_secs(3600));
    assert_eq!(c.max_crawl_delay, Duration::from_secs(10));
    assert_eq!(c.user_agent, "docbot/1");
    assert_eq!(c.from.as_deref(), Some("me@example.org"));
    assert_eq!(
        c.extra_headers,
        [("Accept-Language".to_owned(), "fr".to_owned())]
    );
    assert_eq!(c.dedup, Some(crate::config::DedupMode::Bloom));
    assert_eq!((c.bloom_bits, c.bloom_hashes), (Some(20), Some(4)));
    assert_eq!(c.fingerprint_headers, ["Accept-Language"]);
}

/// Asserts `text` fails at `line` naming `key`, with `words` in the message.
fn fails_at(text: &str, line: usize, key: &str, words: &str) {
    let message = err(text);
    let prefix = format!("crawl.toml:{line}:");
    assert!(message.starts_with(&prefix), "{message}");
    assert!(message.contains(&format!(": {key}: ")), "{message}");
    assert!(message.contains(words), "{message}");
    assert!(!message.contains('\n'), "one line: {message}");
}

#[test]
fn each_kind_of_mistake_names_file_line_and_key() {
    fails_at(
        "seeds = []\nlimitz = 1\n",
        2,
        "limitz",
        "unknown field `limitz`",
    );
    fails_at(
        "[limits]\n\ntimeout = \"30 sec\"\n",
        3,
        "limits.timeout",
        "expected a duration",
    );
    fails_at(
        "[limits]\nconcurrency = \"many\"\n",
        2,
        "limits.concurrency",
        "invalid type",
    );
    fails_at(
        "[limits]\nconcurrency = 0\n",
        2,
        "limits.concurrency",
        "nonzero",
    );
    fails_at(
        "[[legs]]\nkind = \"links\"\nallowz = []\n",
        3,
        "legs[0].allowz",
        "unknown field",
    );
    fails_at(
        "[[legs]]\nkind = \"links\"\nimages = \"yes\"\n",
        3,
        "legs[0].images",
        "invalid type",
    );
    fails_at(
        "[[legs]]\nkind = \"linkz\"\n",
        2,
        "legs[0].kind",
        "unknown leg kind \"linkz\"",
    );
    fails_at(
        "[[legs]]\nkind = \"links\"\nallow = [\"(\"]\n",
        3,
        "legs[0].allow",
        "bad regex \"(\"",
    );
    fails_at("[[legs]]\nallow = []\n", 1, "legs[0]", "no `kind`");
    fails_at("[scope]\ndeny = [\"[\"]\n", 2, "scope.deny", "bad regex");
    fails_at("seeds = [\"nope\"]\n", 1, "seeds[0]", "not a URL");
    fails_at(
        "[dedup]\nbloom_bits = 99\n",
        2,
        "dedup.bloom_bits",
        "10 to 36",
    );
    fails_at(
        "[headers]\n\"Bad Name\" = \"x\"\n",
        2,
        "headers.Bad Name",
        "header name",
    );
    fails_at(
        "[[legs]]\nkind = \"canonicalize\"\nrules = [\"sort\"]\n",
        3,
        "legs[0].rules[0]",
        "unknown variant `sort`",
    );
}

#[test]
fn nested_mistakes_point_inside_rules() {
    let rules = "[[legs]]\nkind = \"callback_rules\"\n[[legs.rules]]\n";
    fails_at(
        &format!("{rules}pattern = \"(\"\nlegs = []\n"),
        4,
        "legs[0].rules[0].pattern",
        "bad regex",
    );
    fails_at(
        &format!("{rules}pattern = \"x\"\nlegs = [{{ kind = \"item_id\" }}]\n"),
        5,
        "legs[0].rules[0].legs[0].kind",
        "`fields` must name at least one field",
    );
    fails_at(
        &format!("{rules}pattern = \"x\"\n"),
        3,
        "legs[0].rules[0]",
        "needs `legs",
    );
    fails_at(
        "[[legs]]\nkind = \"stack\"\nlegs = [{ kind = \"page_item\", x = 1 }]\n",
        3,
        "legs[0].legs[0].x",
        "unknown field `x`",
    );
}

#[test]
fn syntax_errors_have_a_position_but_no_key() {
    let message = err("a = \n");
    assert!(message.starts_with("crawl.toml:1:5: "), "{message}");
}

#[test]
fn legs_are_built_in_order_and_nest() {
    let file = ok(r#"
[[legs]]
kind = "trap_guard"
max_path_depth = 3
[[legs]]
kind = "callback_rules"
otherwise = [{ kind = "links" }]
[[legs.rules]]
pattern = "/product/"
legs = [{ kind = "page_item" }, { kind = "item_id", fields = ["url"] }]
[[legs]]
kind = "canonicalize"
rules = ["sort-query-args"]
strip_query_params = ["utm_*"]
"#);
    let mut stack = file.legs.unwrap();
    assert_eq!(stack.len(), 3);
    stack.configure(&CrawlConfig::default()).unwrap();
    let body = r#"<a href="/a/b/c/d">deep</a><a href="/x?utm_source=1&b=2&a=1">x</a>"#;
    let category = run(
        &stack,
        &test_response("http://shop.test/", Some("text/html"), body),
    );
    assert!(category.items.is_empty());
    let urls: Vec<&str> = category.requests.iter().map(|r| r.url.as_str()).collect();
    assert_eq!(urls, ["http://shop.test/x?a=1&b=2"]);
    let product = run(
        &stack,
        &test_response("http://shop.test/product/1", Some("text/html"), body),
    );
    assert!(product.requests.is_empty(), "product pages follow nothing");
    assert_eq!(product.items.len(), 1);
    assert_eq!(product.items[0]["id"].as_str().unwrap().len(), 40);
}

#[test]
fn links_settings_pin_and_unset_ones_come_from_the_config() {
    let file = ok("[[legs]]\nkind = \"links\"\ndeny = [\"/private/\"]\n");
    let mut stack = file.legs.unwrap();
    let config = CrawlConfig {
        deny: vec!["/a".into()],
        allow: vec!["/(a|b|private)/".into()],
        ..CrawlConfig::default()
    };
    stack.configure(&config).unwrap();
    let body =
        r#"<a href="/a/1">a</a><a href="/b/1">b</a><a href="/c/1">c</a><a href="/private/1">p</a>"#;
    let out = run(
        &stack,
        &test_response("http://e.test/", Some("text/html"), body),
    );
    let urls: Vec<&str> = out.requests.iter().map(|r| r.url.as_str()).collect();
    // allow from the config, deny from the leg (the config's deny is not used).
    assert_eq!(urls, ["http://e.test/a/1", "http://e.test/b/1"]);
}

#[test]
fn every_kind_is_listed_and_read_errors_name_the_path() {
    assert!(kind_names().contains(&"callback_rules"));
    let error = load(Path::new("/nonexistent/crawl.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("/nonexistent/crawl.toml: cannot read"),
        "{error}"
    );
}

#[test]
fn bad_selectors_point_at_the_selector() {
    fails_at(
        "[[legs]]\nkind = \"css_items\"\nfields = [\n  { name = \"a\", selector = \"h1..x\" },\n]\n",
        4,
        "legs[0].fields[0].selector",
        "bad selector \"h1..x\"",
    );
    fails_at(
        "[[legs]]\nkind = \"feed\"\nallow = [\"(\"]\n",
        3,
        "legs[0].allow[0]",
        "bad regex",
    );
}

#[test]
fn revisit_section_sets_policy_rules_and_hubs_first() {
    use crate::config::{Revisit, RevisitRule};
    let file = ok(r#"
[limits]
max_duration = "30m"
until_idle = true
[revisit]
after = "adaptive"
initial = "12h"
min = "2h"
max = "7d"
hubs = ["/index\\.html$"]
rules = [{ pattern = "/archive/", after = "never" }, { pattern = "/news/", after = "0" }, { pattern = "/blog/", after = "6h" }]
"#);
    let c = &file.config;
    assert_eq!(c.max_duration, Some(Duration::from_secs(1800)));
    assert!(c.until_idle);
    let adaptive = Revisit::Adaptive {
        initial: Duration::from_secs(12 * 3600),
        min: Duration::from_secs(2 * 3600),
        max: Duration::from_secs(7 * 86_400),
    };
    assert_eq!(c.revisit, adaptive);
    let rule = |pattern: &str, revisit| RevisitRule {
        pattern: pattern.into(),
        revisit,
    };
    assert_eq!(
        c.revisit_rules,
        vec![
            rule("/index\\.html$", Revisit::EveryRun),
            rule("/archive/", Revisit::Never),
            rule("/news/", Revisit::EveryRun),
            rule("/blog/", Revisit::After(Duration::from_secs(6 * 3600))),
        ]
    );
    assert_eq!(
        ok("[revisit]\nafter = \"never\"\n").config.revisit,
        Revisit::Never
    );
    assert_eq!(ok("").config.revisit, Revisit::default());
}

#[test]
fn revisit_mistakes_name_their_key() {
    fails_at(
        "[revisit]\nafter = \"sometimes\"\n",
        2,
        "revisit.after",
        "\"never\"",
    );
    fails_at("[revisit]\nhubs = [\"(\"]\n", 2, "revisit.hubs", "regex");
    fails_at(
        "[revisit]\nmin = \"2d\"\nmax = \"1d\"\n",
        2,
        "revisit.min",
        "revisit.max",
    );
    fails_at(
        "[revisit]\nrules = [{ pattern = \"/a\" }]\n",
        2,
        "revisit.rules[0]",
        "missing field `after`",
    );
}

#[test]
fn output_is_a_file_name_or_a_table_but_not_both() {
    let file = Path::new("c.toml");
    let c = parse("output = \"a.jsonl\"\n", file).unwrap().config;
    assert_eq!(c.output.as_deref(), Some(Path::new("a.jsonl")));
    assert_eq!(c.warc, None);
    let text = "[output]\njsonl = \"b.jsonl\"\nwarc = \"w\"\nwarc_max_size = \"2MiB\"\n";
    let c = parse(text, file).unwrap().config;
    assert_eq!(c.output.as_deref(), Some(Path::new("b.jsonl")));
    assert_eq!(c.warc.as_deref(), Some(Path::new("w")));
    assert_eq!(c.warc_max_size, 2 * 1024 * 1024);
    let c = parse("[output]\nwarc = \"w\"\n", file).unwrap().config;
    assert_eq!(c.output, None);
    assert_eq!(c.warc_max_size, crate::config::DEFAULT_WARC_MAX_SIZE);
    let both = parse("output = \"a.jsonl\"\n[output]\nwarc = \"w\"\n", file).unwrap_err();
    let message = both.to_string();
    assert!(message.contains("output is given twice"), "{message}");
    assert_eq!(message.lines().count(), 1);
    let unknown = parse("[output]\nwarcs = \"w\"\n", file)
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("warcs"), "{unknown}");
    let zero = parse("[output]\nwarc_max_size = 0\n", file)
        .unwrap_err()
        .to_string();
    assert!(zero.contains("output.warc_max_size"), "{zero}");
    let dup = parse("seeds = []\nseeds = []\n", file)
        .unwrap_err()
        .to_string();
    assert!(dup.contains("duplicate key \"seeds\""), "{dup}");
}

#[test]
fn the_state_section_sets_the_database_cache() {
    assert_eq!(ok("").config.cache_bytes, crate::store::DEFAULT_CACHE_BYTES);
    assert_eq!(
        ok("[state]\ncache = \"16MiB\"\n").config.cache_bytes,
        16 << 20
    );
    assert_eq!(
        ok("[state]\ncache = 1000000\n").config.cache_bytes,
        1_000_000
    );
    assert!(err("[state]\ncache = \"lots\"\n").contains("cache"));
}

#[test]
fn durations_are_strings_or_numbers_of_seconds_and_sizes_take_units() {
    let c = ok("[politeness]\ndelay = 1\n").config;
    assert_eq!(c.delay, Some(Duration::from_secs(1)));
    let c = ok("[politeness]\ndelay = 0.5\n").config;
    assert_eq!(c.delay, Some(Duration::from_millis(500)));
    let c = ok("[politeness]\ndelay = 0\n").config;
    assert_eq!(c.delay, Some(Duration::ZERO));
    let c = ok("[politeness]\ndelay = \"0.25\"\n").config;
    assert_eq!(c.delay, Some(Duration::from_millis(250)));
    let c = ok(r#"
[limits]
timeout = "500ms"
read_timeout = 2.5
max_body = "5MB"
max_url_len = "2KiB"
retry_backoff = 3
[state]
cache = "5 MiB"
[revisit]
after = 3600
initial = 60
"#)
    .config;
    assert_eq!(c.request_timeout, Duration::from_millis(500));
    assert_eq!(c.read_timeout, Duration::from_millis(2500));
    assert_eq!(c.max_body_bytes, 5_000_000);
    assert_eq!(c.max_url_len, 2048);
    assert_eq!(c.retry_backoff, Duration::from_secs(3));
    assert_eq!(c.cache_bytes, 5 << 20);
    assert_eq!(
        c.revisit,
        crate::config::Revisit::After(Duration::from_secs(3600))
    );
    assert_eq!(
        ok("[limits]\nmax_body = \"5MiB\"\n").config.max_body_bytes,
        5 << 20
    );
    assert_eq!(
        ok("[limits]\nmax_body = 5000000\n").config.max_body_bytes,
        5_000_000
    );
}

#[test]
fn negative_zero_and_malformed_units_name_their_key() {
    let message = err("[politeness]\ndelay = -1\n");
    assert_eq!(
        message,
        "crawl.toml:2:9: politeness.delay: expected a duration such as \"30s\", \"250ms\", \
         \"1m30s\", \"24h\" or plain seconds (\"0.5\"), got -1 (negative)"
    );
    fails_at(
        "[politeness]\ndelay = -0.5\n",
        2,
        "politeness.delay",
        "got -0.5 (negative)",
    );
    fails_at(
        "[politeness]\ndelay = \"-1s\"\n",
        2,
        "politeness.delay",
        "expected a duration",
    );
    fails_at(
        "[politeness]\ndelay = nan\n",
        2,
        "politeness.delay",
        "got NaN",
    );
    fails_at(
        "[politeness]\ndelay = true\n",
        2,
        "politeness.delay",
        "expected a duration",
    );
    fails_at(
        "[revisit]\nafter = -5\n",
        2,
        "revisit.after",
        "got -5 (negative)",
    );
    fails_at(
        "[limits]\nmax_body = -1\n",
        2,
        "limits.max_body",
        "expected a size",
    );
    fails_at(
        "[limits]\nmax_body = 1.5\n",
        2,
        "limits.max_body",
        "a whole number of bytes",
    );
    fails_at(
        "[limits]\nmax_body = \"5mb\"\n",
        2,
        "limits.max_body",
        "expected a size",
    );
    for (text, key) in [
        ("[limits]\ntimeout = 0\n", "limits.timeout"),
        ("[limits]\nread_timeout = \"0ms\"\n", "limits.read_timeout"),
        ("[limits]\nmax_body = \"0MB\"\n", "limits.max_body"),
        ("[limits]\nmax_url_len = 0\n", "limits.max_url_len"),
        ("[state]\ncache = 0\n", "state.cache"),
    ] {
        fails_at(text, 2, key, "must be more than 0");
    }
    // A zero delay is a real setting (loopback crawls), not a mistake.
    assert_eq!(
        ok("[politeness]\ndelay = \"0\"\n").config.delay,
        Some(Duration::ZERO)
    );
}

#[test]
fn a_shared_client_certificate_comes_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("client.pem");
    let key = dir.path().join("client.key");
    std::fs::write(
        &cert,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let shared = |extra: &str| {
        format!("[shared]\nredis = \"rediss://127.0.0.1:6380/0\"\nname = \"docs\"\n{extra}")
    };
    let both = format!("cert = {:?}\nkey = {:?}\n", cert, key);
    let file = ok(&shared(&both));
    let target = file.config.shared.expect("a shared target");
    assert_eq!(target.client_cert.as_deref(), Some(cert.as_path()));
    assert_eq!(target.client_key.as_deref(), Some(key.as_path()));
    let message = err(&shared(&format!("cert = {cert:?}\n")));
    assert!(
        message.contains("shared.cert") && message.contains("private key"),
        "{message}"
    );
    let message = err(&shared(&format!("key = {key:?}\n")));
    assert!(
        message.contains("shared.key") && message.contains("certificate"),
        "{message}"
    );
    // The key file is checked for PEM, and its contents never shown.
    let message = err(&shared(&format!("cert = {cert:?}\nkey = {cert:?}\n")));
    assert!(
        message.contains("not PEM") && !message.contains("MIIB"),
        "{message}"
    );
}
