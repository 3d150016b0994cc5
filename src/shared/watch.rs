//! What a shared crawl's snapshot for `serve` ([`crate::view::watch`]) reads
//! besides the counts: the busiest hosts with their queues and politeness,
//! and the newest items.
//!
//! Plain read commands only (never a script, never a write), bounded in what
//! each poll reads: at most [`HOSTS_SCANNED`] hosts are counted, the newest
//! items come from one `XREVRANGE ... COUNT`. Depends on the client's
//! connection and reply helpers.

use std::collections::{BTreeMap, BTreeSet};

use redis::Value;

use super::client::{Shared, SharedError, array, int, text, time_ms};
use super::views::StreamEntry;

/// Hosts whose queues one poll counts, at most: every host when the crawl has
/// no more, else those with leases in flight and the first ones ready.
pub const HOSTS_SCANNED: usize = 2_000;

/// One host of a shared crawl, as the workers' shared tables hold it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedHost {
    /// `host` or `host:port`.
    pub host: String,
    /// Requests in its queue.
    pub queued: u64,
    /// Leases of it held by workers.
    pub in_flight: u64,
    /// The delay between two of its requests, ms (robots.txt `Crawl-delay`
    /// when longer).
    pub delay_ms: u64,
    /// Milliseconds until its next request may start.
    pub wait_ms: u64,
    /// robots.txt failures in a row.
    pub robots_failures: u64,
    /// Set aside until a worker starts.
    pub parked: bool,
}

impl Shared {
    /// The `limit` hosts with the most queued and in-flight requests (see
    /// [`HOSTS_SCANNED`] for which are looked at), busiest first.
    pub async fn busiest_hosts(&self, limit: usize) -> Result<Vec<SharedHost>, SharedError> {
        let k = self.keys();
        let mut pipe = redis::pipe();
        pipe.cmd("HLEN").arg(k.key("delay"));
        pipe.cmd("HGETALL").arg(k.key("inflight"));
        pipe.cmd("HGETALL").arg(k.key("next"));
        pipe.cmd("HGETALL").arg(k.key("delay"));
        pipe.cmd("HGETALL").arg(k.key("crawldelay"));
        pipe.cmd("HGETALL").arg(k.key("robotsfail"));
        pipe.cmd("HGETALL").arg(k.key("parkedhosts"));
        pipe.cmd("ZRANGE")
            .arg(k.key("ready"))
            .arg(0)
            .arg(HOSTS_SCANNED as i64 - 1);
        pipe.cmd("TIME");
        let v = self.pipeline("reading the hosts", &pipe).await?;
        let numbers = |i: usize| -> BTreeMap<String, u64> {
            v.get(i)
                .and_then(array)
                .map(|a| {
                    a.chunks(2)
                        .filter_map(|p| Some((text(p.first()?)?, int(p.get(1)?)?.max(0) as u64)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let known = v.first().and_then(int).unwrap_or(0).max(0) as usize;
        let (in_flight, next, delay, crawl_delay, failures, parked) = (
            numbers(1),
            numbers(2),
            numbers(3),
            numbers(4),
            numbers(5),
            numbers(6),
        );
        let now_ms = v.get(8).and_then(time_ms).map_or(0, |ms| ms.max(0) as u64);
        let mut hosts: BTreeSet<String> = in_flight.keys().cloned().collect();
        if known <= HOSTS_SCANNED {
            hosts.extend(delay.keys().cloned());
        } else {
            let ready = v.get(7).and_then(array).unwrap_or(&[]);
            hosts.extend(ready.iter().filter_map(text));
        }
        hosts.extend(parked.keys().cloned());
        let hosts: Vec<String> = hosts.into_iter().take(HOSTS_SCANNED).collect();
        let queued = self.queued_counts(&hosts).await?;
        let get = |map: &BTreeMap<String, u64>, host: &str| map.get(host).copied().unwrap_or(0);
        let mut rows: Vec<SharedHost> = hosts
            .into_iter()
            .zip(queued)
            .map(|(host, queued)| SharedHost {
                queued: queued + get(&parked, &host),
                in_flight: get(&in_flight, &host),
                delay_ms: get(&delay, &host).max(get(&crawl_delay, &host)),
                wait_ms: get(&next, &host).saturating_sub(now_ms),
                robots_failures: get(&failures, &host),
                parked: parked.contains_key(&host),
                host,
            })
            .collect();
        rows.sort_by(|a, b| {
            (b.queued + b.in_flight)
                .cmp(&(a.queued + a.in_flight))
                .then_with(|| a.host.cmp(&b.host))
        });
        rows.truncate(limit);
        Ok(rows)
    }

    /// How many requests each of `hosts` has queued: the lengths of its
    /// lists, one per priority in its `qp:HOST` (two pipelined reads).
    async fn queued_counts(&self, hosts: &[String]) -> Result<Vec<u64>, SharedError> {
        if hosts.is_empty() {
            return Ok(Vec::new());
        }
        let k = self.keys();
        let mut pipe = redis::pipe();
        for host in hosts {
            pipe.cmd("ZRANGE").arg(k.priorities(host)).arg(0).arg(-1);
        }
        let priorities = self.pipeline("reading the hosts' queues", &pipe).await?;
        let mut pipe = redis::pipe();
        let mut lists = Vec::with_capacity(hosts.len());
        for (host, prios) in hosts.iter().zip(&priorities) {
            let prios: Vec<String> = array(prios)
                .unwrap_or(&[])
                .iter()
                .filter_map(text)
                .collect();
            for prio in &prios {
                pipe.cmd("LLEN").arg(k.queue(host, prio));
            }
            lists.push(prios.len());
        }
        let lengths = match lists.iter().sum::<usize>() {
            0 => Vec::new(),
            _ => self.pipeline("reading the hosts' queues", &pipe).await?,
        };
        let mut lengths = lengths.iter().map(|n| int(n).unwrap_or(0).max(0) as u64);
        Ok(lists
            .into_iter()
            .map(|n| lengths.by_ref().take(n).sum())
            .collect())
    }

    /// The newest `limit` items of the stream, newest first.
    pub async fn latest_items(&self, limit: usize) -> Result<Vec<StreamEntry>, SharedError> {
        let newest: Value = self
            .query(
                "reading the items",
                redis::cmd("XREVRANGE")
                    .arg(self.keys().key("items"))
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(limit),
            )
            .await?;
        Ok(array(&newest)
            .unwrap_or(&[])
            .iter()
            .filter_map(StreamEntry::of)
            .collect())
    }

    /// The newest `limit` recent errors, newest last (as the embedded crawl
    /// publishes them); a row that cannot be read is skipped.
    pub async fn recent_errors(
        &self,
        limit: usize,
    ) -> Result<Vec<crate::status::snapshot::ErrorRow>, SharedError> {
        let rows: Vec<String> = self
            .query(
                "reading the recent errors",
                redis::cmd("LRANGE")
                    .arg(self.keys().key("errors"))
                    .arg(0)
                    .arg(limit.saturating_sub(1)),
            )
            .await?;
        Ok(rows
            .iter()
            .rev()
            .filter_map(|row| serde_json::from_str(row).ok())
            .collect())
    }
}
