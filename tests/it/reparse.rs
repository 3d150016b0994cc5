//! Issue 41, part 3: new legs without a re-crawl. `legcrawl reparse` runs the
//! job's legs in force over the responses the crawl kept in its WARC files,
//! as a run: new and changed items and the deletion records of the items the
//! legs no longer make go to the change feed and `--output`, exactly once
//! across crashes at named points; nothing is fetched. A crawl that changes
//! the legs says how many stored pages they have not seen and names the
//! command; a crawl without WARC files, and a shared crawl, are refused in
//! one line (exit 2).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use crate::feed::{Shelf, Shop};
use crate::support::cli;
use crate::support::mode::{Crawler, Mode};

/// The shop's first legs: each product by its name, no price.
const NAMES_ONLY: &str = r#"
[[legs]]
kind = "links"

[[legs]]
kind = "css_items"
item = "li.p"
fields = [{ name = "name", selector = ".n", required = true }]

[[legs]]
kind = "item_id"
fields = ["name"]
"#;

/// The new legs: a product is its name and its price, and one without a
/// price is no product.
const WITH_PRICES: &str = r#"
[[legs]]
kind = "links"

[[legs]]
kind = "css_items"
item = "li.p"
fields = [
  { name = "name", selector = ".n", required = true },
  { name = "price", selector = ".v", required = true },
]

[[legs]]
kind = "item_id"
fields = ["name"]
"#;

/// `legcrawl reparse --data DATA ARGS`, not yet run.
fn reparse_command(data: &std::path::Path, args: &[&str]) -> Command {
    cli::legcrawl(data, &[&["reparse"], args].concat())
}

/// A consumer's copy of the feed in `output`: id → the item.
fn apply(copy: &mut BTreeMap<String, serde_json::Value>, read: &mut usize, output: &str) {
    let bytes = std::fs::read(output).unwrap_or_default();
    for line in cli::parse_lines(&bytes[*read..]) {
        let id = line["id"].as_str().expect("an id").to_owned();
        if line.get("deleted").is_some() {
            assert!(
                copy.remove(&id).is_some(),
                "a deletion of {id} not held: {line}"
            );
        } else {
            copy.insert(id, line);
        }
    }
    *read = bytes.len();
}

/// name → price of the items of a copy (or a dump); a product without a
/// price has 0.
fn priced<'a>(items: impl IntoIterator<Item = &'a serde_json::Value>) -> BTreeMap<String, u64> {
    items
        .into_iter()
        .map(|item| {
            let name = item["name"].as_str().expect("a name").to_owned();
            let price = item["price"]
                .as_str()
                .map_or(0, |p| p.parse().expect("a price"));
            (name, price)
        })
        .collect()
}

#[test]
fn new_legs_run_over_the_stored_responses_exactly_across_crashes() {
    const PAGES: usize = 600;
    let shop = Shop::new(PAGES, 3);
    // Some products have no price: the new legs make no item of them.
    for i in (0..PAGES).step_by(7) {
        shop.edit(i, |products| products[1].1 = 0);
    }
    let server = shop.serve(Duration::ZERO);
    let seed = server.url("/");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let path = |name: &str| dir.path().join(name).display().to_string();
    let (v1, v2, output, warc) = (
        path("v1.toml"),
        path("v2.toml"),
        path("feed.jsonl"),
        path("warc"),
    );
    std::fs::write(&v1, format!("seeds = [\"{seed}\"]\n{NAMES_ONLY}")).unwrap();
    std::fs::write(&v2, format!("seeds = [\"{seed}\"]\n{WITH_PRICES}")).unwrap();
    let mut copy = BTreeMap::new();
    let mut read = 0;

    cli::crawl_ok(
        &data,
        &[
            "--config", &v1, "--output", &output, "--warc", &warc, "--delay", "0",
        ],
    );
    apply(&mut copy, &mut read, &output);
    let all: BTreeMap<String, u64> = shop.live().keys().map(|name| (name.clone(), 0)).collect();
    assert_eq!(priced(copy.values()), all, "run 1: every product, by name");
    let fetched = server.requests();

    // A crawl that changes the legs says what they have not seen, and how
    // to run them over it (the pages are not due: only the seed is asked).
    let out = cli::crawl_ok(
        &data,
        &[
            "--config", &v2, "--output", &output, "--warc", &warc, "--delay", "0",
        ],
    );
    let said = cli::stderr(&out);
    assert!(
        said.contains(&format!(
            "the new legs have not seen {} stored pages",
            PAGES + 1
        )) && said.contains("legcrawl reparse --data"),
        "the change line: {said}"
    );
    let fetched_by_run_2 = server.requests() - fetched;

    // The reparse, cut short at named crash points, then run to its end.
    let points = ["output.append:5", "group.apply:6", "group.durable:4"];
    for point in points {
        let mut crash = reparse_command(&data, &[]);
        crash.env("LEGCRAWL_CRASH_AT", point);
        let out = cli::run(crash, cli::LIMIT);
        assert!(
            !out.status.success(),
            "{point}: the run aborts: {}",
            cli::stderr(&out)
        );
    }
    let out = cli::run(reparse_command(&data, &[]), cli::LIMIT);
    cli::assert_ok("reparse", &out);
    let said = cli::stderr(&out);
    assert!(
        said.contains("(reparse): drained"),
        "the run's line: {said}"
    );
    assert_eq!(
        server.requests() - fetched,
        fetched_by_run_2,
        "nothing fetched by the reparse runs"
    );

    // The consumer holds exactly the new legs' items: priced products, by
    // name and price; those without a price were deleted.
    apply(&mut copy, &mut read, &output);
    let live = shop.live();
    let expected: BTreeMap<String, u64> = live
        .iter()
        .filter(|(_, price)| **price > 0)
        .map(|(n, p)| (n.clone(), *p))
        .collect();
    assert_eq!(priced(copy.values()), expected, "the consumer's copy");
    let current = cli::dump_items(&data);
    assert_eq!(current.len(), expected.len(), "the current view, each once");
    assert_eq!(priced(&current), expected, "the current view");

    // Across the cut runs and the last one, each product came once: a new
    // version with its price, or one deletion record (`not_extracted`).
    let runs = cli::dump_runs(&data);
    let reparse_runs: Vec<u64> = runs
        .iter()
        .skip(2)
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    let mut made = BTreeMap::new();
    let mut deleted = BTreeSet::new();
    for run in &reparse_runs {
        let run = run.to_string();
        let items = cli::parse_lines(
            &cli::run(
                cli::legcrawl(&data, &["dump", "items", "--run", &run]),
                cli::LIMIT,
            )
            .stdout,
        );
        for item in items {
            let name = item["id"].as_str().unwrap().to_owned();
            if item.get("deleted").is_some() {
                assert_eq!(item["deleted"], "not_extracted", "{item}");
                assert!(deleted.insert(name), "deleted twice: {item}");
            } else {
                assert_eq!(item["version"], 2, "a new version of the page: {item}");
                assert!(made.insert(name, item).is_none(), "made twice in run {run}");
            }
        }
    }
    assert_eq!(priced(made.values()), expected, "each priced product once");
    let unpriced: BTreeSet<String> = copy_ids_without_price(&shop);
    assert_eq!(
        deleted.len(),
        unpriced.len(),
        "each unpriced product deleted once"
    );

    // Done: a further reparse finds nothing to do.
    let out = cli::run(reparse_command(&data, &[]), cli::LIMIT);
    cli::assert_ok("reparse again", &out);
    assert!(
        cli::stderr(&out).contains("— 0 pages"),
        "{}",
        cli::stderr(&out)
    );
    // And the next crawl's revisits are back to their schedule.
    drop(server);
}

/// The item ids (`item_id` over the name) of the products without a price.
fn copy_ids_without_price(shop: &Shop) -> BTreeSet<String> {
    shop.live()
        .into_iter()
        .filter(|(_, price)| *price == 0)
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn a_crawl_without_warc_files_is_refused_in_one_line() {
    let shop = Shop::new(3, 1);
    shop.set(2, Shelf::Removed(404));
    let server = shop.serve(Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    cli::crawl_ok(&data, &[&server.url("/"), "--delay", "0"]);
    let out = cli::run(reparse_command(&data, &[]), cli::LIMIT);
    let line = cli::one_line("reparse without WARC", &out, 2);
    assert!(
        line.contains("wrote no WARC files") && line.contains("--warc DIR"),
        "{line}"
    );
    // Nor is an empty directory made a state.
    let none = dir.path().join("none");
    let out = cli::run(reparse_command(&none, &[]), cli::LIMIT);
    cli::one_line("reparse of nothing", &out, 2);
    assert!(!none.exists(), "no state is made");
}

#[test]
fn a_shared_crawl_is_refused_in_one_line() {
    let Some(crawler) = Crawler::start(Mode::Shared, "reparse_shared") else {
        return;
    };
    let redis = crawler.redis().expect("a redis").url();
    let mut cmd = Command::new(cli::bin());
    cmd.args(["reparse", "--shared", &redis]);
    let out = cli::run(cmd, cli::LIMIT);
    let line = cli::one_line("reparse --shared", &out, 2);
    assert!(
        line.contains("shared crawl") && line.contains("docs/shared.md"),
        "{line}"
    );
}
