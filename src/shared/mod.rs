//! A crawl shared by several workers through one Redis server (`crawl --shared
//! redis://HOST:PORT/DB --name CRAWL`): the job, the frontier, the seen set,
//! leases, politeness, page records, robots.txt answers, counters and items of
//! the crawl live in Redis, under one key prefix per crawl.
//!
//! Every change a worker makes is one Lua script, run atomically by the server
//! (`lua/`): storing seeds, leasing, renewing, completing and returning leases,
//! storing a job version. A lease carries a fencing token (a number the server
//! never hands out twice) and an expiry; a worker that dies loses nothing,
//! because its leases go back to the frontier when its heartbeat stops (within
//! seconds, `client::SILENCE_BOUND`) or when they expire, and a completion
//! whose lease was returned writes nothing. Politeness is the crawl's,
//! not the worker's: the lease script enforces each host's in-flight limit and
//! the gap between two starts, on the server's clock, both taken from the
//! crawl's job.
//!
//! The crawl is a stored job ([`job`]): a worker started with only `--shared`
//! and `--name` runs it; one given settings changes it for every worker (a new
//! version, compare-and-set), and running workers take up a new version within
//! `JOB_POLL`. A worker's per-run options, its `--output` file and its
//! `--warc` directory are its own.
//!
//! The password and TLS settings are the target's ([`SharedTarget`], in
//! [`crate::shared_target`]).
//!
//! [`client`] speaks to Redis (retrying while the server is away) and runs the
//! scripts, [`job`] keeps the crawl's job versions, [`views`] and [`watch`]
//! read a shared crawl for `dump`, `stats` and `serve`, `erase` deletes one
//! (`crawl --fresh`), `damage` finds what a crawl lost (for `dump`),
//! [`witness`] keeps a worker's record of the crawl on its own disk (what
//! shows that Redis went back, or lost the crawl, while no worker ran). The loop that runs a worker is
//! [`crate::engine::worker`]. Depends on [`crate::shared_target`],
//! [`crate::config`], [`crate::request`], [`crate::fingerprint`],
//! [`crate::robots`]' records and [`crate::store`]'s record encodings.

pub mod client;
mod damage;
mod erase;
pub mod job;
mod keys;
pub mod views;
pub mod watch;
pub mod witness;

pub use crate::shared_target::{DEFAULT_LEASE_TTL, PASSWORD_VAR, SharedTarget};
pub use client::{Shared, SharedError};
pub use job::StoredJob;
pub use keys::{Keys, LAST_BUILD_READING_SCHEMA_1, SCHEMA};
