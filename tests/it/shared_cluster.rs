//! Issue 25, Redis Cluster: a worker or `dump --shared` given any node of a
//! cluster works. Before, a worker given a node that does not own the crawl's
//! slot retried `MOVED` forever.
//!
//! Against a real three-master cluster the test starts (`support::cluster`):
//! two workers, each given a different node that does NOT own the crawl's slot,
//! crawl a site of three loopback hosts together; `dump --shared` through those
//! nodes has every page exactly once, the servers answered each page once, and
//! every key of the crawl lives on the owning node (one crawl, one slot); then
//! `--fresh` through another such node starts the crawl again from nothing.

use std::time::Duration;

use crate::support::cluster::Cluster;
use crate::support::hosts::{self, MultiSite, args};
use crate::support::workers::{Crawl, assert_fetched_once, assert_items_once, serial};

/// Longest the crawl may take.
const LIMIT: Duration = Duration::from_secs(180);

#[test]
fn workers_and_dump_given_nodes_that_do_not_own_the_crawls_slot_crawl_it_exactly() {
    let _serial = serial();
    let Some(cluster) = Cluster::start("shared_cluster") else {
        return;
    };
    let name = "clustered";
    let prefix = format!("legcrawl:{{{name}}}:");
    let owner = cluster.owner_of(&format!("{prefix}meta"));
    let others: Vec<usize> = (0..cluster.nodes.len()).filter(|&i| i != owner).collect();
    let site = MultiSite::start(90, 3, 21, hosts::no_delay());
    let crawl_args = site.crawl_args();
    let argv = args(&crawl_args, &["--concurrency", "4"]);

    let mut crawl = Crawl::new(&cluster.nodes[others[0]].url(), name);
    crawl.spawn(&argv);
    crawl.redis = cluster.nodes[others[1]].url();
    crawl.spawn(&argv);
    crawl.wait_all_ok(LIMIT);

    // `dump` through either node that does not own the slot.
    assert_items_once(&crawl, &site);
    crawl.redis = cluster.nodes[others[0]].url();
    let summary = crawl.summary();
    assert_eq!(summary["frontier"], 0, "{summary}");
    assert_eq!(summary["items"], site.expected().len(), "{summary}");
    assert_fetched_once(&site);

    // One crawl, one slot: every key on the owner, none elsewhere.
    let pattern = format!("legcrawl:{{{name}}}:*");
    let on_owner = cluster.nodes[owner].keys(&pattern);
    assert!(
        on_owner.iter().any(|k| k.ends_with(":meta")),
        "{on_owner:?}"
    );
    assert!(
        on_owner.iter().any(|k| k.ends_with(":items")),
        "{on_owner:?}"
    );
    for &i in &others {
        assert_eq!(cluster.nodes[i].keys("*"), Vec::<String>::new(), "node {i}");
    }

    // `--fresh` through a node that does not own the slot deletes the crawl's
    // keys where they live, and the crawl starts again from its seeds: every
    // page once more in a new items stream.
    let fresh = args(&crawl_args, &["--concurrency", "4", "--fresh", "--yes"]);
    crawl.redis = cluster.nodes[others[1]].url();
    crawl.spawn(&fresh);
    crawl.wait_all_ok(LIMIT);
    assert_items_once(&crawl, &site);
}
