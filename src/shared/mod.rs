//! A crawl shared by several workers through one Redis server (`crawl --shared
//! redis://HOST:PORT/DB --name CRAWL`): the job, the frontier, the seen set,
//! leases, politeness, page records, robots.txt answers, counters and items of
//! the crawl live in Redis, under one key prefix per crawl.
//!
//! Every change a worker makes is one Lua script, run atomically by the server
//! (`lua/`): storing seeds, leasing, renewing, completing and returning leases,
//! storing a job version. A lease carries a fencing token (a number the server
//! never hands out twice) and an expiry; a worker that dies loses nothing,
//! because its leases expire and their requests go back to the frontier, and a
//! completion whose lease expired writes nothing. Politeness is the crawl's,
//! not the worker's: the lease script enforces each host's in-flight limit and
//! the gap between two starts, on the server's clock, both taken from the
//! crawl's job.
//!
//! The crawl is a stored job ([`job`]): a worker started with only `--shared`
//! and `--name` runs it; one given settings changes it for every worker (a new
//! version, compare-and-set), and running workers take up a new version within
//! [`job::JOB_POLL`]. A worker's per-run options and its `--output` file are
//! its own.
//!
//! [`client`] speaks to Redis (retrying while the server is away), [`job`]
//! keeps the crawl's job and resolves a starting worker's, [`worker`] is the
//! crawl loop of one worker (with `cycle`, which starts a new cycle of a
//! drained crawl), [`output`] its `--output` file, [`views`] reads a shared
//! crawl for `legcrawl dump`. Depends on [`crate::engine`] (the page task,
//! scope and page records), [`crate::job`], [`crate::fingerprint`] and
//! [`crate::store`]'s record encodings; the embedded state does not depend on
//! it.

pub mod client;
mod cycle;
pub mod job;
mod keys;
pub mod output;
pub mod views;
pub mod worker;

use std::time::Duration;

pub use client::{Shared, SharedError};
pub use job::{JobPlan, JoinError, Joined, StoredJob, join};
pub use keys::Keys;

/// Where a shared crawl lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedTarget {
    /// The Redis URL (`redis://HOST:PORT/DB`).
    pub redis: String,
    /// The crawl's name: its keys start with `legcrawl:{NAME}:`.
    pub name: String,
}

/// How long a lease lasts unless renewed (renewed every third of it while the
/// fetch runs).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(60);

impl SharedTarget {
    /// Checks the URL's scheme and the name's characters (letters, digits,
    /// `.`, `_`, `-`; at most 64), so that every key of the crawl carries one
    /// hash tag and nothing in the name can break the key layout.
    pub fn new(redis: &str, name: &str) -> Result<SharedTarget, String> {
        let url = url::Url::parse(redis).map_err(|e| {
            format!("--shared {redis:?} is not a URL ({e}); expected redis://HOST:PORT/DB")
        })?;
        if !matches!(url.scheme(), "redis" | "rediss" | "redis+unix" | "unix") {
            return Err(format!(
                "--shared {redis:?} is not a Redis URL; expected redis://HOST:PORT/DB"
            ));
        }
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if name.is_empty() || name.len() > 64 || !name.chars().all(ok) {
            return Err(format!(
                "--name {name:?}: a shared crawl's name is 1 to 64 letters, digits, '.', '_' or '-'"
            ));
        }
        Ok(SharedTarget {
            redis: redis.to_owned(),
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_checked() {
        assert!(SharedTarget::new("redis://127.0.0.1:6379/0", "docs-1.x_y").is_ok());
        let bad_url = SharedTarget::new("127.0.0.1:6379", "docs").unwrap_err();
        assert!(bad_url.contains("--shared"), "{bad_url}");
        let http = SharedTarget::new("http://127.0.0.1/", "docs").unwrap_err();
        assert!(http.contains("not a Redis URL"), "{http}");
        for name in ["", "a{b}", "with space", &"x".repeat(65)] {
            let error = SharedTarget::new("redis://127.0.0.1/", name).unwrap_err();
            assert!(error.contains("--name"), "{error}");
        }
    }
}
