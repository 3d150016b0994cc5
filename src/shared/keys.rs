//! The Redis keys of one shared crawl. Every key starts with
//! `legcrawl:{NAME}:`; the braces make `NAME` the key's hash tag, so that all of
//! a crawl's keys live in one Redis Cluster slot and each script's keys are on
//! one node. The scripts in `lua/` build the same names from the prefix.
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `meta` | hash | `epoch` (random, made when the first worker joins; every script checks it), `frontier` (queued count), `seq`, `token` (the last fencing token: ≥ server ms × 1024), `created`, `schema`, `cycle`, `cycle_started`, `seeding` (1 while a cycle's seeds are being queued) |
//! | `job` | hash | the newest job: `version`, and the politeness every script enforces, `per_host` and `delay` (ms; absent: each host's default) |
//! | `jobs` | hash | job version → its record (JSON: `version`, `created_at`, `worker`, `text`, a crawl file) |
//! | `seeds` | set | seed URLs |
//! | `seeded` | set | fingerprints of the seeds queued in the cycle being seeded (gone once it is seeded) |
//! | `q:HOST` | sorted set | the host's queue: score −priority, member sequence (8 bytes, big-endian), fingerprint (20 bytes), request (version byte, bincode; before: 16 and 40 hex digits, JSON) |
//! | `ready` | sorted set | hosts with queued requests under their in-flight limit, by earliest next start (ms) |
//! | `inflight`, `next`, `delay`, `crawldelay` | hashes | per host: leases held, next allowed start, the host's default delay (0 on loopback, else 1 s; the job's `delay` overrides it), robots.txt Crawl-delay (ms) |
//! | `leases` | sorted set | lease token by expiry (ms) |
//! | `lease:TOKEN` | hash | `worker`, `host`, `score`, `member`, `at` |
//! | `done` | sorted set | tokens completed in the last hour (a retried completion is answered, not redone) |
//! | `seen` | set | 20-byte request fingerprints |
//! | `due` | sorted set | page fingerprint by the unix time it is due again |
//! | `items` | stream | one entry per item: `item` (JSON), `worker` |
//! | `pages` | hash | fingerprint → page record (the embedded state's encoding) |
//! | `robots` | hash | origin → robots.txt record (JSON) |
//! | `cookies` | hash | domain, path and name (tab-separated) → the cookie (JSON, as `cookie_store` writes it; expired ones too): every worker's jar starts from them and writes its own back after each completion that changed it |
//! | `robotsfail`, `parkedhosts` | hashes | per host: robots.txt failures in a row; hosts parked, with their set-aside count |
//! | `parked:HOST` | sorted set | a parked host's queue, set aside until a worker starts |
//! | `warc` | hash | a worker's WARC file (`MACHINE:PATH`, the canonical path) → the length its durable records reach: registered at 0 before the file is created, moved by each completion whose records it holds; the worker cuts the file back to it when it starts |
//! | `counters` | hash | counter name → count |
//! | `workers`, `alive` | hashes | worker id → its record (JSON, with its `lease_ttl_ms`), last renewal (ms); unlisted after three TTLs without one |
//! | `runs` | list | one JSON record per worker run (`job`: the job version it began under, `jobs`: every version it ran under, `items_after`/`items_until`: the stream ids its items lie between) |

/// The key names of one crawl.
#[derive(Clone, Debug)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// The keys of the crawl named `name` (already checked by
    /// [`super::SharedTarget::new`]).
    pub fn new(name: &str) -> Keys {
        Keys {
            prefix: format!("legcrawl:{{{name}}}:"),
        }
    }

    /// `legcrawl:{NAME}:`, the first argument of every script.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key `legcrawl:{NAME}:<suffix>`.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    /// A host's queue.
    pub fn queue(&self, host: &str) -> String {
        format!("{}q:{host}", self.prefix)
    }

    /// One lease's record.
    pub fn lease(&self, token: u64) -> String {
        format!("{}lease:{token}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_carries_the_name_as_hash_tag() {
        let keys = Keys::new("docs");
        assert_eq!(keys.prefix(), "legcrawl:{docs}:");
        assert_eq!(keys.key("meta"), "legcrawl:{docs}:meta");
        assert_eq!(keys.queue("a.test:80"), "legcrawl:{docs}:q:a.test:80");
        assert_eq!(keys.lease(7), "legcrawl:{docs}:lease:7");
    }
}
