//! A crawl's data over time, in both modes from one test body: the change
//! feed holds deletions (a consumer applying it holds the live items), and
//! a one-run option never changes the job.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::changing::ChangingSite;
use crate::support::cli;
use crate::support::mode::{Crawler, Mode};
use crate::support::{TestResponse, TestServer, handler};

fn counter(run: &serde_json::Value, name: &str) -> u64 {
    run["counters"][name].as_u64().unwrap_or(0)
}

#[test]
fn revisit_after_zero_is_an_option_of_one_run_embedded() {
    revisit_after_zero_is_an_option_of_one_run(Mode::Embedded);
}

#[test]
fn revisit_after_zero_is_an_option_of_one_run_shared() {
    revisit_after_zero_is_an_option_of_one_run(Mode::Shared);
}

/// `--revisit-after 0` asks every recorded page again in its run, leaves the
/// job as it was (no change line, `dump job` without it), and the next plain
/// run is back on the job's default policy: only the seed is asked.
fn revisit_after_zero_is_an_option_of_one_run(mode: Mode) {
    const N: usize = 12;
    let site = ChangingSite::new(N);
    let server = site.serve();
    let seed = server.url("/");
    let Some(crawler) = Crawler::start(mode, "oneoff") else {
        return;
    };
    crawler.crawl_ok(&[&seed]);
    let job = crawler.dump(&["job"]);

    let before = server.requests();
    let out = crawler.crawl_ok(&["--revisit-after", "0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("-> 2"),
        "{mode:?}: no job change: {stderr}"
    );
    assert_eq!(
        server.requests() - before,
        N as u64 + 1,
        "{mode:?}: every recorded page asked again"
    );
    assert_eq!(
        crawler.dump(&["job"]),
        job,
        "{mode:?}: the job is unchanged"
    );

    let before = server.requests();
    crawler.crawl_ok(&[]);
    let runs = crawler.runs();
    let last = runs.last().expect("a run");
    assert_eq!(
        server.requests() - before,
        1,
        "{mode:?}: back on the default policy, only the seed: {last}"
    );
    assert_eq!(counter(last, "revisit/due"), 0, "{mode:?}: {last}");
}

/// What a product page is now: its products (id, price), or the status it
/// answers once removed.
#[derive(Clone, Debug)]
pub(crate) enum Shelf {
    Live(Vec<(String, u32)>),
    Removed(u16),
}

/// A shop of product pages `/p/{i}`, each listing its products as
/// `<li class=p>`; the hub `/` links to every live page. Pages can be
/// edited, emptied, removed (404, 410) and restored between runs.
#[derive(Clone, Default)]
pub(crate) struct Shop {
    pages: Arc<Mutex<BTreeMap<usize, Shelf>>>,
}

impl Shop {
    pub(crate) fn new(pages: usize, per_page: usize) -> Shop {
        let shop = Shop::default();
        for i in 0..pages {
            let products = (0..per_page).map(|k| (format!("p{i}-{k}"), 10)).collect();
            shop.set(i, Shelf::Live(products));
        }
        shop
    }

    pub(crate) fn set(&self, i: usize, shelf: Shelf) {
        self.pages.lock().unwrap().insert(i, shelf);
    }

    pub(crate) fn edit(&self, i: usize, edit: impl FnOnce(&mut Vec<(String, u32)>)) {
        match self.pages.lock().unwrap().get_mut(&i) {
            Some(Shelf::Live(products)) => edit(products),
            other => panic!("page {i} is {other:?}"),
        }
    }

    /// Every live product: id → price.
    pub(crate) fn live(&self) -> BTreeMap<String, u64> {
        let pages = self.pages.lock().unwrap();
        pages
            .values()
            .filter_map(|shelf| match shelf {
                Shelf::Live(products) => Some(products),
                Shelf::Removed(_) => None,
            })
            .flatten()
            .map(|(id, price)| (id.clone(), u64::from(*price)))
            .collect()
    }

    pub(crate) fn serve(&self, delay: Duration) -> TestServer {
        let pages = Arc::clone(&self.pages);
        TestServer::start(handler(move |req| {
            let pages = pages.lock().unwrap();
            let response = match req.path() {
                "/robots.txt" => TestResponse::not_found(),
                "/" => TestResponse::html(
                    pages
                        .iter()
                        .filter(|(_, shelf)| matches!(shelf, Shelf::Live(_)))
                        .map(|(i, _)| format!("<a href=\"/p/{i}\">{i}</a>"))
                        .collect::<String>(),
                ),
                path => match path
                    .strip_prefix("/p/")
                    .and_then(|i| i.parse().ok())
                    .and_then(|i: usize| pages.get(&i))
                {
                    Some(Shelf::Live(products)) => TestResponse::html(format!(
                        "<title>shelf</title><ul>{}</ul>",
                        products
                            .iter()
                            // A product without a price (0) shows none.
                            .map(|(id, price)| match price {
                                0 => format!("<li class=p><b class=n>{id}</b></li>"),
                                _ => format!(
                                    "<li class=p><b class=n>{id}</b><i class=v>{price}</i></li>"
                                ),
                            })
                            .collect::<String>()
                    )),
                    Some(Shelf::Removed(status)) => TestResponse::status(*status),
                    None => TestResponse::not_found(),
                },
            };
            response.delay(delay)
        }))
    }
}

/// A consumer of the change feed: it reads what was appended to the
/// `--output` file since it last looked and applies it to its copy,
/// keyed by the item id (id → name and price).
#[derive(Default)]
pub(crate) struct Copy {
    read: usize,
    items: BTreeMap<String, (String, u64)>,
}

/// An item's name and price.
pub(crate) fn product(item: &serde_json::Value) -> (String, u64) {
    let name = item["name"].as_str().expect("a name").to_owned();
    let price = item["price"].as_str().and_then(|p| p.parse().ok());
    (name, price.expect("a price"))
}

impl Copy {
    pub(crate) fn apply(&mut self, output: &str) {
        let bytes = std::fs::read(output).unwrap_or_default();
        let lines = cli::parse_lines(&bytes[self.read..]);
        self.read = bytes.len();
        for line in lines {
            let id = line["id"]
                .as_str()
                .expect("every record has the id")
                .to_owned();
            if line.get("deleted").is_some() {
                assert!(
                    self.items.remove(&id).is_some(),
                    "a deletion of {id}, which the copy does not hold: {line}"
                );
            } else {
                self.items.insert(id, product(&line));
            }
        }
    }

    /// The products the copy holds: name → price.
    pub(crate) fn products(&self) -> BTreeMap<String, u64> {
        self.items.values().cloned().collect()
    }
}

pub(crate) const SHOP_FILE: &str = r#"
[[legs]]
kind = "links"

[[legs]]
kind = "css_items"
item = "li.p"
fields = [
  { name = "name", selector = ".n", required = true },
  { name = "price", selector = ".v" },
]

[[legs]]
kind = "item_id"
fields = ["name"]
"#;

#[test]
fn a_consumer_of_the_feed_holds_the_live_items_after_every_run_embedded() {
    a_consumer_of_the_feed_holds_the_live_items_after_every_run(Mode::Embedded);
}

#[test]
fn a_consumer_of_the_feed_holds_the_live_items_after_every_run_shared() {
    a_consumer_of_the_feed_holds_the_live_items_after_every_run(Mode::Shared);
}

/// Issue 41, part 1: a nightly series of a shop whose products are edited,
/// dropped, added, whose pages are removed (404, 410), emptied and restored,
/// with kill -9 in one run. A consumer that applies the `--output` feed
/// (several items per page, known by the `item_id` leg's id) holds exactly
/// the live products after every run, and plain `dump items` (the current
/// view) shows the same.
fn a_consumer_of_the_feed_holds_the_live_items_after_every_run(mode: Mode) {
    let Some(crawler) = Crawler::start(mode, "feed_nightly") else {
        return;
    };
    let shop = Shop::new(12, 3);
    let server = shop.serve(Duration::from_millis(40));
    let seed = server.url("/");
    let file = crawler.file("shop.toml");
    std::fs::write(&file, format!("seeds = [\"{seed}\"]\n{SHOP_FILE}")).unwrap();
    let output = crawler.file("feed.jsonl");
    let args = [
        "--config",
        &file,
        "--output",
        &output,
        "--revisit-after",
        "0",
        "--lease-ttl",
        "1s",
        "--concurrency",
        "2",
        "--per-host",
        "2",
    ];
    let mut copy = Copy::default();
    let check = |copy: &mut Copy, night: &str| {
        copy.apply(&output);
        assert_eq!(copy.products(), shop.live(), "{mode:?}, {night}: the copy");
        let items = crawler.items();
        let current: BTreeMap<String, u64> = items.iter().map(product).collect();
        assert_eq!(items.len(), current.len(), "{mode:?}, {night}: each once");
        assert_eq!(current, shop.live(), "{mode:?}, {night}: dump items");
    };

    crawler.crawl_ok(&args);
    check(&mut copy, "night 1");

    // Night 2: a price changes, a product goes, one comes, pages go.
    shop.edit(0, |products| products[0].1 = 12);
    shop.edit(1, |products| {
        products.remove(1);
    });
    shop.edit(2, |products| products.push(("p2-new".into(), 5)));
    shop.set(3, Shelf::Removed(404));
    shop.set(4, Shelf::Removed(410));
    shop.set(12, Shelf::Live(vec![("p12-0".into(), 7)]));
    crawler.crawl_ok(&args);
    check(&mut copy, "night 2");

    // Night 3: killed with -9 twice, then run to its end; page 3 is back,
    // page 5 is emptied, page 6 loses its first product.
    shop.set(
        3,
        Shelf::Live(vec![
            ("p3-0".into(), 10),
            ("p3-1".into(), 10),
            ("p3-2".into(), 10),
        ]),
    );
    shop.set(5, Shelf::Live(Vec::new()));
    shop.edit(6, |products| {
        products.remove(0);
    });
    let mut rng = crate::support::kill_seed("feed_nightly");
    crawler.kill_nine_rounds(&args, 2, || server.requests(), &mut rng, 120);
    crawler.crawl_ok(&args);
    check(&mut copy, "night 3");

    // The feed of night 2 names the deletions (by id) and why.
    let night2 = cli::parse_lines(&crawler.dump(&["items", "--run", "2"]));
    let night1 = cli::parse_lines(&crawler.dump(&["items", "--run", "1"]));
    let names: BTreeMap<&str, &str> = night1
        .iter()
        .map(|item| (item["id"].as_str().unwrap(), item["name"].as_str().unwrap()))
        .collect();
    let mut deleted: Vec<(String, String)> = night2
        .iter()
        .filter(|item| item.get("deleted").is_some())
        .map(|item| {
            (
                names[item["id"].as_str().unwrap()].to_owned(),
                item["deleted"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    deleted.sort();
    let expected: Vec<(String, String)> = [
        ("p1-1", "not_extracted"),
        ("p3-0", "gone"),
        ("p3-1", "gone"),
        ("p3-2", "gone"),
        ("p4-0", "gone"),
        ("p4-1", "gone"),
        ("p4-2", "gone"),
    ]
    .iter()
    .map(|(id, why)| ((*id).to_owned(), (*why).to_owned()))
    .collect();
    assert_eq!(deleted, expected, "{mode:?}: night 2's deletions");
}

#[test]
fn a_narrowed_scope_applies_to_queued_and_stored_pages_embedded() {
    a_narrowed_scope_applies_to_queued_and_stored_pages(Mode::Embedded);
}

#[test]
fn a_narrowed_scope_applies_to_queued_and_stored_pages_shared() {
    a_narrowed_scope_applies_to_queued_and_stored_pages(Mode::Shared);
}

/// Issue 41, part 2: a run stopped by `--max-pages` leaves requests queued;
/// the next adds `--deny '/p/1'`. No excluded page is asked again: the
/// queued ones are dropped unfetched, the stored ones leave the next cycle
/// unfetched with a deletion record (`out_of_scope`) for their item, once.
/// The feed applied by url holds what plain `dump items` shows: the pages
/// in scope.
fn a_narrowed_scope_applies_to_queued_and_stored_pages(mode: Mode) {
    const N: usize = 20;
    let Some(crawler) = Crawler::start(mode, "feed_scope") else {
        return;
    };
    let site = ChangingSite::new(N);
    let server = site.serve();
    let seed = server.url("/");
    let output = crawler.file("feed.jsonl");
    let run = |extra: &[&str]| {
        let mut args = vec!["--output", output.as_str(), "--lease-ttl", "1s"];
        args.extend_from_slice(extra);
        crawler.crawl_ok(&args);
    };
    run(&[&seed, "--max-pages", "8", "--concurrency", "1"]);
    let excluded: Vec<String> = (0..N)
        .map(crate::support::changing::page_path)
        .filter(|path| path.starts_with("/p/1"))
        .collect();
    let stored: Vec<&String> = excluded.iter().filter(|p| server.hits(p) == 1).collect();
    let hits_after_first: Vec<u64> = excluded.iter().map(|p| server.hits(p)).collect();

    run(&["--deny", "/p/1"]);
    run(&[]);
    run(&[]);
    let hits: Vec<u64> = excluded.iter().map(|p| server.hits(p)).collect();
    assert_eq!(
        hits, hits_after_first,
        "{mode:?}: no excluded page asked again"
    );

    // The feed, applied by url: deletions of the stored excluded pages, once.
    let lines = cli::parse_lines(&std::fs::read(&output).unwrap());
    let mut copy = std::collections::BTreeSet::new();
    let mut deleted = Vec::new();
    for line in &lines {
        let path = cli::item_path(line);
        match line.get("deleted") {
            Some(why) => {
                assert_eq!(why, "out_of_scope", "{mode:?}: {line}");
                assert!(copy.remove(&path), "{mode:?}: {path} deleted but not held");
                deleted.push(path);
            }
            None => {
                copy.insert(path);
            }
        }
    }
    deleted.sort();
    let mut expected: Vec<String> = stored.iter().map(|p| (*p).clone()).collect();
    expected.sort();
    assert_eq!(
        deleted, expected,
        "{mode:?}: the stored excluded pages, once"
    );
    let mut in_scope: std::collections::BTreeSet<String> = (0..N)
        .map(crate::support::changing::page_path)
        .filter(|path| !path.starts_with("/p/1"))
        .collect();
    in_scope.insert("/".to_owned());
    assert_eq!(copy, in_scope, "{mode:?}: the copy");
    let current: std::collections::BTreeSet<String> = crawler.item_paths().into_iter().collect();
    assert_eq!(current, in_scope, "{mode:?}: dump items");

    let runs = crawler.runs();
    let dropped: u64 = runs
        .iter()
        .map(|r| r["out_of_scope"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        dropped,
        excluded.len() as u64,
        "{mode:?}: each excluded request or page dropped once: {runs:?}"
    );
}
