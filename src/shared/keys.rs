//! The Redis keys of one shared crawl. Every key starts with
//! `legcrawl:{NAME}:`; the braces make `NAME` the key's hash tag, so that all of
//! a crawl's keys live in one Redis Cluster slot and each script's keys are on
//! one node. The scripts in `lua/` build the same names from the prefix.
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `meta` | hash | `epoch` (random, made when the first worker joins; every script checks it), `frontier` (queued count), `token` (the last fencing token: ≥ server ms × 1024), `created`, `schema` ([`SCHEMA`]), `cycle`, `cycle_started`, `seeding` (1 while a cycle's seeds are being queued), `seen_count`, `seen_level`, `seen_split` (the seen set's size, and its linear hashing's level and split pointer), `revisit_policy` (the revisit policy the due times follow: a new cycle under another moves them, `lua/policy.lua`) |
//! | `job` | hash | the newest job: `version`, and the politeness every script enforces, `per_host` and `delay` (ms; absent: each host's default) |
//! | `jobs` | hash | job version → its record (JSON: `version`, `created_at`, `worker`, `text`, a crawl file) |
//! | `seeds` | set | seed URLs |
//! | `seeded` | set | fingerprints of the seeds queued in the cycle being seeded (gone once it is seeded) |
//! | `q:HOST:PRIO` | list | the host's queue of priority PRIO (decimal), first in, first out (a returned lease goes back to the head): member fingerprint (20 bytes), request (version byte, bincode) |
//! | `qp:HOST` | sorted set | the priorities of the host's lists, highest first (member PRIO, score −PRIO); exists exactly while the host has queued requests |
//! | `ready` | sorted set | hosts with queued requests under their in-flight limit, by earliest next start (ms) |
//! | `inflight`, `next`, `delay`, `crawldelay` | hashes | per host: leases held, next allowed start, the host's default delay (0 on loopback, else 1 s; the job's `delay` overrides it), robots.txt Crawl-delay (ms) |
//! | `leases` | sorted set | lease token by expiry (ms) |
//! | `lease:TOKEN` | hash | `worker`, `host`, `prio`, `member`, `at` |
//! | `leasecalls`, `leasecalls_at` | hash, sorted set | a lease call's name (worker id and a random number) → the tokens it granted (space-separated), and by time (ms): a call retried after a lost reply gets those leases back; kept 10 minutes |
//! | `done` | sorted set | tokens completed in the last hour (a retried completion is answered, not redone) |
//! | `s:N` | hash | bucket N of the seen set: field the first 16 bytes of a request fingerprint, value empty; N by linear hashing on the fingerprint's first 4 bytes (`lua/common.lua`, `seen_add`), so each bucket stays a listpack of fewer than 128 fields |
//! | `due` | sorted set | page fingerprint by the unix time it is due again |
//! | `items` | stream | one entry per item: `item` (JSON), `worker` |
//! | `pages` | hash | fingerprint → page record (the embedded state's encoding) |
//! | `robots` | hash | origin → robots.txt record (JSON) |
//! | `cookies` | hash | domain, path and name (tab-separated) → the cookie (JSON, as `cookie_store` writes it; expired ones too): every worker's jar starts from them and writes its own back after each completion that changed it |
//! | `robotsfail`, `parkedhosts` | hashes | per host: robots.txt failures in a row; hosts parked, with their set-aside count |
//! | `parked:HOST:PRIO`, `parkedp:HOST` | list, sorted set | a parked host's queue (as `q:HOST:PRIO`, `qp:HOST`), set aside until a worker starts |
//! | `warc` | hash | a worker's WARC file (`MACHINE:PATH`, the canonical path) → the length its durable records reach: registered at 0 before the file is created, moved by each completion whose records it holds; the worker cuts the file back to it when it starts |
//! | `commits` | hash | a worker's witness id → its commit sequence: each of its completions adds 1, with its writes; a value below what the worker saw means Redis went back (`client::Shared::commits_seen`) |
//! | `counters` | hash | counter name → count |
//! | `errors` | list | the crawl's recent errors, newest first (JSON rows: `at`, `url`, `reason`), at most `status::snapshot::MAX_ERRORS`: what `serve` shows |
//! | `beats` | sorted set | worker id → the server time (ms) it last beat or leased; a worker silent for 6 s is taken out and its leases returned (`lua/common.lua`, `reap`; `meta`'s `beat_tick` is the last time any worker was heard) |
//! | `workers`, `alive` | hashes | worker id → its record (JSON, with its `lease_ttl_ms`), last renewal (ms); unlisted after three TTLs without one |
//! | `runs` | list | one JSON record per worker run (`job`: the job version it began under, `jobs`: every version it ran under, `items_after`/`items_until`: the stream ids its items lie between) |

/// The layout of a crawl's keys that this build reads and writes (`meta`'s
/// `schema`, set when the crawl is made). 2: queues as lists per host and
/// priority, the seen set in buckets. A crawl of another schema is refused
/// (no migration is kept: no release wrote one).
pub const SCHEMA: u64 = 2;

/// The last build (a commit of legcrawl's repository) that reads a shared
/// crawl of schema 1 (each host's queue one sorted set, the seen set one set).
pub const LAST_BUILD_READING_SCHEMA_1: &str = "dd825b3";

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

    /// A host's queue of requests of priority `prio`.
    pub fn queue(&self, host: &str, prio: &str) -> String {
        format!("{}q:{host}:{prio}", self.prefix)
    }

    /// The priorities a host has requests queued at (a sorted set, highest
    /// first).
    pub fn priorities(&self, host: &str) -> String {
        format!("{}qp:{host}", self.prefix)
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
    fn the_seeds_script_makes_a_crawl_of_this_schema() {
        let seeds = include_str!("lua/seeds.lua");
        assert!(seeds.contains(&format!("'schema', {SCHEMA},")), "seeds.lua");
    }

    #[test]
    fn every_key_carries_the_name_as_hash_tag() {
        let keys = Keys::new("docs");
        assert_eq!(keys.prefix(), "legcrawl:{docs}:");
        assert_eq!(keys.key("meta"), "legcrawl:{docs}:meta");
        assert_eq!(
            keys.queue("a.test:80", "-2"),
            "legcrawl:{docs}:q:a.test:80:-2"
        );
        assert_eq!(keys.priorities("a.test:80"), "legcrawl:{docs}:qp:a.test:80");
        assert_eq!(keys.lease(7), "legcrawl:{docs}:lease:7");
    }
}
