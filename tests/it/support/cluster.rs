//! A real three-master Redis Cluster on 127.0.0.1 for the shared-crawl tests:
//! three empty `redis-server --cluster-enabled yes` children
//! ([`RedisServer::start_cluster_node`]) joined by `redis-cli --cluster create
//! ... --cluster-yes`, then waited for (bounded) until every node reports
//! `cluster_state:ok` with all 16384 slots assigned. [`Cluster::with_replicas`]
//! forms six nodes instead, a replica for each master (`--cluster-replicas 1`,
//! `cluster-node-timeout` [`FAILOVER_NODE_TIMEOUT`] ms), and waits until every
//! replica is in sync, so that killing a master makes its replica take over.
//! Dropping it kills the nodes.
//!
//! `redis-cli` is looked for next to `redis-server`, then on `PATH`. When
//! either is missing, [`Cluster::start`] prints a loud `SKIPPED` line and
//! returns `None`, unless `LEGCRAWL_REQUIRE_REDIS=1` (then the test fails).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::cli::run;
use super::redis::{REQUIRE_VAR, RedisServer, Resp, find_server};

/// Longest wait for `redis-cli --cluster create`, and then for the nodes to
/// agree on the slot map.
const FORM_WAIT: Duration = Duration::from_secs(30);

/// `cluster-node-timeout` (ms) of [`Cluster::with_replicas`]: a killed master
/// is taken over by its replica a few seconds later.
pub const FAILOVER_NODE_TIMEOUT: &str = "2000";

/// Three masters, each with a third of the slots (and, from
/// [`Cluster::with_replicas`], a replica each).
pub struct Cluster {
    /// The nodes, in the order `redis-cli --cluster create` was given them.
    pub nodes: Vec<RedisServer>,
}

/// `redis-cli`, next to `redis-server` or on `PATH`.
fn find_cli() -> Option<PathBuf> {
    let beside = find_server().and_then(|s| s.parent().map(|d| d.join("redis-cli")));
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("redis-cli"));
    beside.into_iter().chain(on_path).find(|p| p.is_file())
}

impl Cluster {
    /// Starts and forms the cluster, or `None` (after a loud `SKIPPED` line
    /// naming `test`) when `redis-server` or `redis-cli` is missing.
    pub fn start(test: &str) -> Option<Cluster> {
        Cluster::form(test, 0, &[])
    }

    /// As [`Cluster::start`], six nodes: three masters and a replica of each
    /// (`--cluster-replicas 1`), with `cluster-node-timeout`
    /// [`FAILOVER_NODE_TIMEOUT`]; returns once every replica is in sync.
    pub fn with_replicas(test: &str) -> Option<Cluster> {
        Cluster::form(test, 1, &[("cluster-node-timeout", FAILOVER_NODE_TIMEOUT)])
    }

    /// Three masters with `replicas` replicas each, every node started with
    /// `settings`.
    fn form(test: &str, replicas: usize, settings: &[(&str, &str)]) -> Option<Cluster> {
        let Some(cli) = find_cli() else {
            super::skip::skipped(
                REQUIRE_VAR,
                test,
                "redis-cli not found (install Debian's redis-tools)",
            );
            return None;
        };
        let mut nodes = Vec::new();
        for _ in 0..3 * (1 + replicas) {
            nodes.push(RedisServer::start_cluster_node_with(test, settings)?);
        }
        let mut create = Command::new(cli);
        create.args(["--cluster", "create"]);
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        create.args(["--cluster-replicas", &replicas.to_string()]);
        create.arg("--cluster-yes");
        let out = run(create, FORM_WAIT);
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes };
        let deadline = Instant::now() + FORM_WAIT;
        while !cluster.nodes.iter().all(|n| formed(n, replicas)) {
            assert!(
                Instant::now() < deadline,
                "the cluster did not reach cluster_state:ok (replicas in sync) within {FORM_WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(cluster)
    }

    /// The index of the node that owns `key`'s slot (the others answer
    /// `MOVED`).
    pub fn owner_of(&self, key: &str) -> usize {
        let owners: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                let reply = self.nodes[i].command(&["EXISTS", key]).expect("EXISTS");
                match reply {
                    Resp::Int(_) => true,
                    Resp::Error(e) if e.starts_with("MOVED") => false,
                    other => panic!("EXISTS {key} answered {other:?}"),
                }
            })
            .collect();
        assert_eq!(owners.len(), 1, "one owner of {key}: {owners:?}");
        owners[0]
    }
}

/// True when `node` says the cluster is up with every slot assigned and,
/// when each master should have `replicas`, knows them all, a replica being
/// in sync with its master.
fn formed(node: &RedisServer, replicas: usize) -> bool {
    let Ok(reply) = node.command(&["CLUSTER", "INFO"]) else {
        return false;
    };
    let info = reply.text().unwrap_or_default();
    if !(info.contains("cluster_state:ok") && info.contains("cluster_slots_assigned:16384")) {
        return false;
    }
    if replicas == 0 {
        return true;
    }
    let known = format!("cluster_known_nodes:{}", 3 * (1 + replicas));
    let Ok(reply) = node.command(&["INFO", "replication"]) else {
        return false;
    };
    let replication = reply.text().unwrap_or_default();
    let in_sync = if replication.contains("role:slave") {
        replication.contains("master_link_status:up")
            && !replication.contains("master_sync_in_progress:1")
    } else {
        replication.contains(&format!("connected_slaves:{replicas}"))
    };
    info.contains(&known) && in_sync
}

impl Cluster {
    /// The index of the replica of the master `master` (by `CLUSTER NODES`:
    /// the node whose `master_port` is `master`'s port).
    pub fn replica_of(&self, master: usize) -> Option<usize> {
        let port = format!("master_port:{}", self.nodes[master].port());
        (0..self.nodes.len()).find(|&i| {
            self.nodes[i]
                .command(&["INFO", "replication"])
                .ok()
                .and_then(|r| r.text())
                .is_some_and(|t| t.contains("role:slave") && t.lines().any(|l| l.trim() == port))
        })
    }
}
