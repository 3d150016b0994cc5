//! The read methods a shared crawl's view ([`crate::view`]) is made of:
//! counts, the queue's head, items, the seen set, page records and runs,
//! read from Redis with plain commands and one script that writes nothing
//! (`lua/seen.lua`: a seen-set lookup must be atomic with the buckets'
//! splits), so they work while workers run. Depends on [`super::client`].

use std::collections::BTreeMap;

use redis::Value;
use serde::Serialize;

use super::client::{Shared, SharedError, array, bytes, decode_request, int, text, time_ms};
use crate::fingerprint::Fingerprint;
use crate::store::PageRecord;

/// Counts of a shared crawl, and its workers, as Redis keeps them.
#[derive(Debug)]
pub struct SharedSummary {
    /// The crawl's name.
    pub name: String,
    /// Queued requests (leased ones not included).
    pub frontier: u64,
    /// Live leases, of every worker.
    pub in_flight: u64,
    /// Distinct fingerprints in the seen set.
    pub seen: u64,
    /// Items in the items stream.
    pub items: u64,
    /// Page records.
    pub page_records: u64,
    /// Hosts the crawl has queued requests for, ever.
    pub hosts: u64,
    /// Worker runs recorded.
    pub runs: u64,
    /// The newest job version (`None` before a worker stored one).
    pub job: Option<u64>,
    /// Completions of every worker (`pages/completed`).
    pub fetches: u64,
    /// Hosts parked because their robots.txt kept failing (their requests
    /// are set aside until a worker starts again).
    pub parked_hosts: u64,
    /// How the seen set is kept.
    pub dedup: &'static str,
    /// Workers listed (alive, or died without unlisting) and leases held.
    pub workers: Vec<WorkerView>,
    /// Every counter of the crawl.
    pub counters: BTreeMap<String, u64>,
}

/// One worker as the crawl lists it.
#[derive(Clone, Debug, Serialize)]
pub struct WorkerView {
    /// `HOST:PID`.
    pub id: String,
    /// Live leases it holds.
    pub leases: u64,
    /// Milliseconds since it last renewed (a dead worker's grows).
    pub last_seen_ms: Option<u64>,
    /// What it said of itself when it last renewed.
    pub record: Option<serde_json::Value>,
}

/// One entry of the items stream.
#[derive(Debug)]
pub struct StreamItem<'a> {
    /// Its stream id (`MS-SEQ`).
    pub id: &'a str,
    /// The item (JSON text).
    pub item: &'a str,
    /// The id of the output file it was written to, if any.
    pub out: Option<&'a str>,
    /// The worker that committed it.
    pub worker: Option<&'a str>,
}

/// One entry of the items stream, owned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamEntry {
    /// Its stream id (`MS-SEQ`).
    pub id: String,
    /// The item (JSON text).
    pub item: String,
    /// The id of the output file it was written to, if any.
    pub out: Option<String>,
    /// The worker that committed it.
    pub worker: Option<String>,
}

impl StreamEntry {
    /// The entry an `XRANGE`/`XREVRANGE` reply holds as `[id, [field, value, ...]]`.
    pub(crate) fn of(entry: &Value) -> Option<StreamEntry> {
        let parts = array(entry)?;
        let id = text(parts.first()?)?;
        let fields = array(parts.get(1)?)?;
        let field = |name: &[u8]| {
            fields
                .chunks(2)
                .find(|p| p.first().and_then(bytes) == Some(name))
                .and_then(|p| p.get(1))
                .and_then(text)
        };
        Some(StreamEntry {
            id,
            item: field(b"item").unwrap_or_default(),
            out: field(b"out"),
            worker: field(b"worker"),
        })
    }
}

/// A stream id (`MS-SEQ`) as a pair that orders like the stream.
pub fn stream_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// One queued request.
#[derive(Debug)]
pub struct QueuedRequest {
    /// Its host.
    pub host: String,
    /// Its place in its host's queue (1: leased next).
    pub place: u64,
    /// The request.
    pub request: crate::request::Request,
}

impl Shared {
    /// Counts, workers and counters.
    pub async fn summary(&self) -> Result<SharedSummary, SharedError> {
        let k = self.keys();
        let mut pipe = redis::pipe();
        pipe.cmd("HGET").arg(k.key("meta")).arg("frontier");
        pipe.cmd("ZCARD").arg(k.key("leases"));
        pipe.cmd("HGET").arg(k.key("meta")).arg("seen_count");
        pipe.cmd("XLEN").arg(k.key("items"));
        pipe.cmd("HLEN").arg(k.key("pages"));
        pipe.cmd("HLEN").arg(k.key("delay"));
        pipe.cmd("LLEN").arg(k.key("runs"));
        pipe.cmd("HGETALL").arg(k.key("counters"));
        pipe.cmd("HGETALL").arg(k.key("workers"));
        pipe.cmd("HGETALL").arg(k.key("alive"));
        pipe.cmd("ZRANGE").arg(k.key("leases")).arg(0).arg(-1);
        pipe.cmd("TIME");
        pipe.cmd("HLEN").arg(k.key("parkedhosts"));
        pipe.cmd("HGET").arg(k.key("job")).arg("version");
        let v = self.pipeline("reading the summary", &pipe).await?;
        let n = |i: usize| v.get(i).and_then(int).map_or(0, |n| n.max(0) as u64);
        let pairs = |i: usize| -> Vec<(String, String)> {
            v.get(i)
                .and_then(array)
                .map(|a| {
                    a.chunks(2)
                        .filter_map(|p| Some((text(p.first()?)?, text(p.get(1)?)?)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let counters: BTreeMap<String, u64> = pairs(7)
            .into_iter()
            .filter_map(|(name, count)| Some((name, count.parse().ok()?)))
            .collect();
        let now_ms = v.get(11).and_then(time_ms).unwrap_or(0);
        let alive: BTreeMap<String, i64> = pairs(9)
            .into_iter()
            .filter_map(|(id, at)| Some((id, at.parse().ok()?)))
            .collect();
        let tokens: Vec<String> = v
            .get(10)
            .and_then(array)
            .map(|a| a.iter().filter_map(text).collect())
            .unwrap_or_default();
        let mut holders: BTreeMap<String, u64> = BTreeMap::new();
        if !tokens.is_empty() {
            let mut pipe = redis::pipe();
            for token in &tokens {
                pipe.cmd("HGET")
                    .arg(format!("{}lease:{token}", k.prefix()))
                    .arg("worker");
            }
            for holder in self.pipeline("reading the leases", &pipe).await? {
                if let Some(id) = text(&holder) {
                    *holders.entry(id).or_default() += 1;
                }
            }
        }
        let mut workers: BTreeMap<String, WorkerView> = pairs(8)
            .into_iter()
            .map(|(id, json)| {
                let view = WorkerView {
                    leases: 0,
                    last_seen_ms: alive.get(&id).map(|at| (now_ms - at).max(0) as u64),
                    record: serde_json::from_str(&json).ok(),
                    id: id.clone(),
                };
                (id, view)
            })
            .collect();
        // A worker not heard from for three of its lease TTLs is dead (the
        // next renewal of a live one unlists it): not shown unless it still
        // holds leases (they expire within one TTL).
        workers.retain(|_, w| {
            let ttl = w
                .record
                .as_ref()
                .and_then(|r| r.get("lease_ttl_ms"))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(60_000);
            w.last_seen_ms.is_none_or(|ms| ms <= 3 * ttl)
        });
        for (id, leases) in holders {
            workers
                .entry(id.clone())
                .or_insert(WorkerView {
                    id,
                    leases: 0,
                    last_seen_ms: None,
                    record: None,
                })
                .leases = leases;
        }
        Ok(SharedSummary {
            name: self.target().name.clone(),
            frontier: n(0),
            in_flight: n(1),
            seen: n(2),
            items: n(3),
            page_records: n(4),
            hosts: n(5),
            runs: n(6),
            job: v
                .get(13)
                .and_then(text)
                .and_then(|v| v.parse().ok())
                .filter(|&v| v > 0),
            fetches: counters.get("pages/completed").copied().unwrap_or(0),
            parked_hosts: n(12),
            dedup: "exact (Redis hashes of 16-byte fingerprint prefixes)",
            workers: workers.into_values().collect(),
            counters,
        })
    }

    /// Calls `each` with every item (its stream id and JSON text) in stream
    /// order, reading 1,000 at a time; stops early when `each` returns false.
    pub async fn for_each_item(
        &self,
        mut each: impl FnMut(&str, &str) -> bool,
    ) -> Result<(), SharedError> {
        self.scan_items(|id, item, _| each(id, item)).await
    }

    /// As [`Shared::for_each_item`], with the id of the output file the item
    /// was written to (`--output` of the worker that committed it), if any.
    pub async fn scan_items(
        &self,
        mut each: impl FnMut(&str, &str, Option<&str>) -> bool,
    ) -> Result<(), SharedError> {
        self.scan_items_from("-", |entry| each(entry.id, entry.item, entry.out))
            .await
    }

    /// The id of the newest item in the stream (`0-0`: none yet): where a
    /// worker run's items begin, and end.
    pub async fn last_item_id(&self) -> Result<String, SharedError> {
        Ok(self
            .latest_items(1)
            .await?
            .into_iter()
            .next()
            .map_or_else(|| "0-0".to_owned(), |entry| entry.id))
    }

    /// As [`Shared::scan_items`], from stream id `start` on (`-`: the first;
    /// `(ID`: the one after `ID`), with the worker that committed each item.
    pub async fn scan_items_from(
        &self,
        start: &str,
        mut each: impl FnMut(&StreamItem<'_>) -> bool,
    ) -> Result<(), SharedError> {
        let key = self.keys().key("items");
        let mut start = start.to_owned();
        loop {
            let page: Value = self
                .query(
                    "reading the items",
                    redis::cmd("XRANGE")
                        .arg(&key)
                        .arg(&start)
                        .arg("+")
                        .arg("COUNT")
                        .arg(1000),
                )
                .await?;
            let entries = array(&page).unwrap_or(&[]);
            let mut last = None;
            for entry in entries.iter().filter_map(StreamEntry::of) {
                let item = StreamItem {
                    id: &entry.id,
                    item: &entry.item,
                    out: entry.out.as_deref(),
                    worker: entry.worker.as_deref(),
                };
                if !each(&item) {
                    return Ok(());
                }
                last = Some(entry.id);
            }
            match last {
                // Exclusive start (Redis 6.2+): the entry after the last one read.
                Some(id) if entries.len() == 1000 => start = format!("({id}"),
                _ => return Ok(()),
            }
        }
    }

    /// The head of every host's queue, up to `limit` requests in all, hosts in
    /// name order and each in lease order (highest priority first, first in,
    /// first out within one).
    pub async fn frontier_head(&self, limit: usize) -> Result<Vec<QueuedRequest>, SharedError> {
        let mut hosts: Vec<String> = self
            .query(
                "reading the hosts",
                redis::cmd("HKEYS").arg(self.keys().key("delay")),
            )
            .await?;
        hosts.sort();
        let mut out = Vec::new();
        for host in hosts {
            if out.len() >= limit {
                break;
            }
            let priorities: Vec<String> = self
                .query(
                    "reading the frontier",
                    redis::cmd("ZRANGE")
                        .arg(self.keys().priorities(&host))
                        .arg(0)
                        .arg(-1),
                )
                .await?;
            let mut place = 0;
            for prio in priorities {
                if out.len() >= limit {
                    break;
                }
                let members: Vec<Vec<u8>> = self
                    .query(
                        "reading the frontier",
                        redis::cmd("LRANGE")
                            .arg(self.keys().queue(&host, &prio))
                            .arg(0)
                            .arg((limit - out.len()) as i64 - 1),
                    )
                    .await?;
                for member in members {
                    let request = queued_request(&member).map_err(|e| SharedError::Corrupt {
                        name: self.target().name.clone(),
                        what: format!("a queued request of {host}: {e}"),
                    })?;
                    place += 1;
                    out.push(QueuedRequest {
                        host: host.clone(),
                        place,
                        request,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Whether `fp` is in the seen set, and its page record. The seen set's
    /// bucket is found and read in one script call (`lua/seen.lua`), so a
    /// split by a worker meanwhile cannot hide it.
    pub async fn seen(&self, fp: &Fingerprint) -> Result<(bool, Option<PageRecord>), SharedError> {
        let k = self.keys();
        let found = self
            .eval(
                "looking up the seen set",
                &super::client::SEEN_SCRIPT,
                &[k.key("meta")],
                &[k.prefix().as_bytes().to_vec(), fp.to_vec()],
            )
            .await?;
        let seen = int(&found) == Some(1);
        let record: Option<Vec<u8>> = self
            .query(
                "reading a page record",
                redis::cmd("HGET").arg(k.key("pages")).arg(fp.as_slice()),
            )
            .await?;
        let record = match record {
            Some(b) => Some(self.page_record(&b)?),
            None => None,
        };
        Ok((seen, record))
    }

    /// Up to `limit` page records, in no particular order.
    pub async fn pages(&self, limit: usize) -> Result<Vec<(Fingerprint, PageRecord)>, SharedError> {
        let key = self.keys().key("pages");
        let mut cursor = "0".to_owned();
        let mut out = Vec::new();
        loop {
            let page: Value = self
                .query(
                    "reading the page records",
                    redis::cmd("HSCAN")
                        .arg(&key)
                        .arg(&cursor)
                        .arg("COUNT")
                        .arg(1000),
                )
                .await?;
            let parts = array(&page).unwrap_or(&[]);
            let next = parts.first().and_then(text).unwrap_or_else(|| "0".into());
            for pair in parts.get(1).and_then(array).unwrap_or(&[]).chunks(2) {
                let (Some(fp), Some(record)) =
                    (pair.first().and_then(bytes), pair.get(1).and_then(bytes))
                else {
                    continue;
                };
                let Ok(fp) = Fingerprint::try_from(fp) else {
                    continue;
                };
                out.push((fp, self.page_record(record)?));
                if out.len() >= limit {
                    return Ok(out);
                }
            }
            if next == "0" {
                return Ok(out);
            }
            cursor = next;
        }
    }

    /// Worker run `number` (1 is the first recorded; `None`: the newest) and
    /// its record, if there is one: `Ok(None)` when there is no such run.
    pub async fn run_record(
        &self,
        number: Option<u64>,
    ) -> Result<Option<(u64, serde_json::Value)>, SharedError> {
        let key = self.keys().key("runs");
        let number = match number {
            Some(0) => return Ok(None),
            Some(n) => n,
            None => {
                let runs: u64 = self
                    .query("counting the runs", redis::cmd("LLEN").arg(&key))
                    .await?;
                if runs == 0 {
                    return Ok(None);
                }
                runs
            }
        };
        let index = i64::try_from(number - 1).unwrap_or(i64::MAX);
        let record: Option<String> = self
            .query("reading a run", redis::cmd("LINDEX").arg(&key).arg(index))
            .await?;
        let Some(record) = record else {
            return Ok(None);
        };
        let value = serde_json::from_str(&record).map_err(|e| SharedError::Corrupt {
            name: self.target().name.clone(),
            what: format!("the record of run {number}: {e}"),
        })?;
        Ok(Some((number, value)))
    }

    /// Every worker run recorded, oldest first (JSON records).
    pub async fn runs(&self) -> Result<Vec<serde_json::Value>, SharedError> {
        let all: Vec<String> = self
            .query(
                "reading the runs",
                redis::cmd("LRANGE")
                    .arg(self.keys().key("runs"))
                    .arg(0)
                    .arg(-1),
            )
            .await?;
        Ok(all
            .iter()
            .filter_map(|r| serde_json::from_str(r).ok())
            .collect())
    }
}

/// The request of a host queue's member: fingerprint (20 bytes), then the
/// request's stored form.
fn queued_request(member: &[u8]) -> Result<crate::request::Request, String> {
    let body = member
        .get(20..)
        .ok_or_else(|| format!("a member of {} bytes", member.len()))?;
    decode_request(body).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;

    #[test]
    fn a_queued_member_is_the_fingerprint_then_the_request() {
        let request = Request::get("http://a.test/x");
        let mut member = vec![0xab; 20];
        member.extend(super::super::client::encode_request(&request));
        assert_eq!(queued_request(&member).expect("member"), request);
        assert!(queued_request(&[0, 1, 2]).is_err());
        assert!(queued_request(&[7; 21]).is_err());
    }
}
