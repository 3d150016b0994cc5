//! The connection to the Redis server of a shared crawl, and the crawl's
//! operations as typed calls of the scripts in `lua/`.
//!
//! A worker that loses the server retries every call with backoff (50 ms
//! doubling to 5 s) until it answers again, saying so in one line when it stops
//! answering and one when it answers again (`retry`); redis-rs's connection
//! manager (or, for a Redis Cluster, its cluster connection, which follows
//! `MOVED`/`ASK`: `link`) reconnects underneath, and a script the restarted
//! server no longer caches is sent again whole. The server's own refusals are
//! sorted in `server` (`server::classify`): `BUSY` and `LOADING` are waited out
//! the same way; a cluster between states (`MOVED`, `ASK`, `TRYAGAIN`,
//! `MASTERDOWN`, `CLUSTERDOWN`, `READONLY`: a failover) is followed for at
//! most [`FAILOVER_WAIT`]; `OOM` and a lost state ([`SharedError::Gone`]) stop
//! the worker. Only the first connection is not retried: a wrong address, or a
//! password the server turns down (or does not get), is the user's mistake, one
//! line and exit 1.
//!
//! A worker joins the crawl's epoch when it connects ([`Shared::connect`],
//! `lua/epoch.lua`) and passes it to every script, which checks it first
//! (`lua/common.lua`): state lost from Redis is found by the next call of any
//! worker. `legcrawl dump` connects with [`Shared::inspect`], which writes
//! nothing. Heartbeats are in `beat`, completing pages in `pages`, the cycle and due index calls in
//! `cycles`, seeds, page records, robots.txt answers and runs in `records`,
//! the server's settings and error classes in `server`, the commit sequence
//! that shows Redis going back (a lost AOF tail, a failover) in `commits`.
//! Depends on the crawl's key names (`super::keys`) and the request and robots
//! records it carries.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use redis::{RedisError, Script, Value};

use super::SharedTarget;
use super::keys::Keys;
use crate::request::Request;
use crate::store::PageRecord;

mod beat;
mod commits;
mod cycles;
#[cfg(test)]
mod declared;
mod link;
mod pages;
mod policy;
mod probe;
mod records;
mod retry;
mod server;

pub use beat::{Beat, HEARTBEAT, SILENCE_BOUND};
pub use cycles::{CrawlState, CycleKind, CycleQueued};
pub use pages::{Completed, DueChange, NewRequest, PageCompletion, Queued};
pub use policy::Move;
pub use records::Seeded;
pub use retry::FAILOVER_WAIT;

/// How a shared crawl failed.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// The server could not be reached when the worker started.
    #[error("cannot reach Redis at {url}: {reason}")]
    Unreachable {
        /// The Redis URL, its password redacted ([`SharedTarget::shown`]).
        url: String,
        /// What the client said.
        reason: String,
    },
    /// The server answered a call with an error that retrying will not cure.
    #[error("Redis at {url} refused {what}: {reason}")]
    Redis {
        /// The Redis URL, its password redacted ([`SharedTarget::shown`]).
        url: String,
        /// The call.
        what: &'static str,
        /// What the server or client said.
        reason: String,
    },
    /// The crawl's state is gone from Redis: its epoch or a structure that
    /// must exist is missing, or the crawl was made anew meanwhile.
    #[error(
        "the shared crawl {name:?}'s state is gone from Redis at {url} ({what}: Redis restarted without its data, was flushed, or lost keys); stopped without writing to it"
    )]
    Gone {
        /// The crawl's name.
        name: String,
        /// The Redis URL, its password redacted.
        url: String,
        /// What was missing.
        what: String,
    },
    /// The server refused a write for want of memory (`maxmemory` reached
    /// under `noeviction`).
    #[error(
        "Redis at {url} is out of memory (OOM: maxmemory reached): the shared crawl {name:?} stopped; raise maxmemory and start the workers again"
    )]
    OutOfMemory {
        /// The Redis URL, its password redacted.
        url: String,
        /// The crawl's name.
        name: String,
    },
    /// The server may evict keys, which would lose the crawl's state silently.
    #[error(
        "Redis at {url} has maxmemory-policy {policy}, which may evict the shared crawl's keys; set it to noeviction (CONFIG SET maxmemory-policy noeviction)"
    )]
    Eviction {
        /// The Redis URL, its password redacted.
        url: String,
        /// The server's policy.
        policy: String,
    },
    /// The crawl's keys are in a layout (`meta`'s `schema`) this build does
    /// not read: an earlier build made it, and no migration is kept.
    #[error(
        "the shared crawl {name:?} was made by an earlier legcrawl (its keys are in layout {schema}; this build reads layout {}); the last build that reads it is legcrawl commit {commit}",
        super::SCHEMA
    )]
    OldSchema {
        /// The crawl's name.
        name: String,
        /// The crawl's `schema` (`none` when it has none).
        schema: String,
        /// The last build that reads it.
        commit: &'static str,
    },
    /// A Redis Cluster stayed between states (`MOVED`, `CLUSTERDOWN`, …)
    /// longer than a failover takes ([`FAILOVER_WAIT`]).
    #[error(
        "Redis Cluster at {url} did not settle within {waited} s while {what} (no node took over the crawl's slot): {reason}"
    )]
    Unsettled {
        /// The Redis URL, its password redacted ([`SharedTarget::shown`]).
        url: String,
        /// The call.
        what: &'static str,
        /// How long the worker followed the cluster, in seconds.
        waited: u64,
        /// The last error, as the client said it.
        reason: String,
    },
    /// The crawl lost keys while it still seems to be there (found by
    /// [`Shared::lost`]): its counts and items are not the crawl's.
    #[error(
        "the shared crawl {name:?} in Redis at {url} is damaged: it lost {lost} (evicted, deleted, or lost in a restart of Redis), so its counts and items are not the crawl's"
    )]
    Damaged {
        /// The crawl's name.
        name: String,
        /// The Redis URL, its password redacted.
        url: String,
        /// What it lost, in words ("its seeds, 120 of its 300 items").
        lost: String,
    },
    /// Redis went back under a call: its commit sequence is below what this
    /// worker saw (`commits`). Handled inside the client (the loss is named
    /// and the call sent again); it escapes only when Redis kept going back.
    #[error(
        "the shared crawl {name:?} in Redis at {url} went back from commit {from} to {to} again and again"
    )]
    WentBack {
        /// The crawl's name.
        name: String,
        /// The Redis URL, its password redacted.
        url: String,
        /// The witness the call was sent with.
        from: u64,
        /// The worker's commit sequence in Redis.
        to: u64,
    },
    /// The crawl is not in Redis, though this worker's witness record says
    /// it was ([`crate::shared::witness`]): Redis lost it while no worker
    /// ran. A new crawl is not started over it without `--fresh`.
    #[error(
        "the shared crawl {name:?} is not in Redis at {url}, but {record} says it existed ({commits} completions seen): Redis lost its data (restarted without it, flushed, or its keys deleted) while no worker ran; nothing was started. Start the crawl anew with --fresh (move the output file aside first: its lines are the lost crawl's)"
    )]
    Vanished {
        /// The crawl's name.
        name: String,
        /// The Redis URL, its password redacted.
        url: String,
        /// The witness record that says it existed.
        record: String,
        /// The commit sequence the record kept.
        commits: u64,
    },
    /// A record in Redis is not what this build writes.
    #[error("the shared crawl {name:?} holds a record this build cannot read ({what})")]
    Corrupt {
        /// The crawl's name.
        name: String,
        /// Which record, and why.
        what: String,
    },
}

/// One request leased to this worker.
#[derive(Clone, Debug)]
pub struct SharedLease {
    /// The lease's fencing token: unique in the crawl, never handed out again.
    pub token: u64,
    /// The request's host (`host[:port]`).
    pub host: String,
    /// The request.
    pub request: Request,
    /// The page record of its URL, when it was fetched before (a revisit is
    /// fetched conditionally against it).
    pub prior: Option<PageRecord>,
}

/// What one call of the lease script found.
#[derive(Debug, Default)]
pub struct LeaseBatch {
    /// Leases granted to this worker.
    pub leases: Vec<SharedLease>,
    /// Expired leases this call returned to the frontier.
    pub expired: u64,
    /// Requests queued in the crawl (after the leases were taken).
    pub frontier: u64,
    /// Live leases in the crawl, of every worker (these included).
    pub live: u64,
    /// How long until some host may start a request (`None`: nothing queued).
    pub wait: Option<Duration>,
}

/// One of the crawl's scripts (`lua/common.lua` and its own file), hashed
/// once, with the fixed keys it names: what a call declares in KEYS.
struct CrawlScript {
    script: Script,
    /// `lua/common.lua` and the script's own file, as sent.
    #[cfg_attr(not(test), allow(dead_code))]
    source: &'static str,
    /// The script's own fixed keys (suffixes), besides [`COMMON_KEYS`].
    keys: &'static [&'static str],
}

/// The fixed keys `lua/common.lua` names (suffixes), `meta` first: every
/// script declares them, whether or not its call reaches the helper that
/// touches them (declaring a key of the same slot costs a few bytes).
const COMMON_KEYS: &[&str] = &[
    "meta",
    "job",
    "seeds",
    "counters",
    "ready",
    "inflight",
    "next",
    "delay",
    "crawldelay",
    "leases",
    "beats",
    "commits",
];

/// The crawl's scripts, hashed once.
struct Scripts {
    seeds: CrawlScript,
    unpark: CrawlScript,
    cycle: CrawlScript,
    lease: CrawlScript,
    renew: CrawlScript,
    release: CrawlScript,
    beat: CrawlScript,
    complete: CrawlScript,
    policy: CrawlScript,
    links: CrawlScript,
}

/// `lua/epoch.lua`, hashed once.
static EPOCH_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/epoch.lua")));

/// `lua/seen.lua` (whether a fingerprint is in the seen set), hashed once.
pub(super) static SEEN_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/seen.lua")));

macro_rules! script {
    ($file:literal, $keys:expr) => {{
        let source = concat!(
            include_str!("lua/common.lua"),
            include_str!(concat!("lua/", $file))
        );
        CrawlScript {
            script: Script::new(source),
            source,
            keys: $keys,
        }
    }};
}

impl Scripts {
    fn new() -> Scripts {
        Scripts {
            seeds: script!("seeds.lua", &["seeded"]),
            unpark: script!("unpark.lua", &["parkedhosts"]),
            policy: script!("policy.lua", &["pages", "due"]),
            cycle: script!("cycle.lua", &["seeded", "due"]),
            lease: script!("lease.lua", &["pages", "leasecalls", "leasecalls_at"]),
            renew: script!("renew.lua", &["workers", "alive", "done"]),
            release: script!("release.lua", &["workers", "alive"]),
            beat: script!("beat.lua", &[]),
            complete: script!(
                "complete.lua",
                &[
                    "done",
                    "items",
                    "errors",
                    "pages",
                    "due",
                    "robotsfail",
                    "parkedhosts",
                    "warc"
                ]
            ),
            links: script!("links.lua", &[]),
        }
    }
}

/// What a call of `script` declares in KEYS: `meta` first (the call is routed
/// to the node of its slot), the fixed keys of `lua/common.lua` and of the
/// script, then the records of the leases `tokens` it is given. Every one
/// carries the crawl's `{NAME}` hash tag.
fn declared_keys(keys: &Keys, script: &CrawlScript, tokens: &[u64]) -> Vec<String> {
    COMMON_KEYS
        .iter()
        .chain(script.keys)
        .map(|suffix| keys.key(suffix))
        .chain(tokens.iter().map(|&token| keys.lease(token)))
        .collect()
}

/// A connection to one shared crawl.
pub struct Shared {
    target: SharedTarget,
    keys: Keys,
    /// Makes connections: to one server, or to a cluster ([`link`]).
    link: link::Link,
    /// Replaced by a new connection after `READONLY`.
    conn: Mutex<link::Conn>,
    /// The crawl's epoch, passed to every script (empty: not joined, no
    /// script may run).
    epoch: String,
    scripts: Arc<Scripts>,
    per_host: usize,
    /// Set when the worker stops: calls are no longer retried.
    stopping: Arc<AtomicBool>,
    /// Set while Redis does not answer (the first failed call sets it and
    /// says so, the first call that succeeds again clears it and says so).
    away: AtomicBool,
    /// The highest value of this worker's commit sequence it saw
    /// (`commits`), sent with every script call: the witness that Redis
    /// went back.
    witness: AtomicU64,
    /// Completions this worker saw Redis lose (`commits`).
    lost: AtomicU64,
    /// The last time this worker saw Redis go back: from which value of the
    /// commit sequence to which.
    went: Mutex<Option<(u64, u64)>>,
    /// The commit sequence the last completion that committed returned
    /// (0: none, or its answer did not carry it).
    last_commit: AtomicU64,
    /// The lease tokens of this worker's latest completions that committed,
    /// with the commit sequence each returned (oldest first, at most
    /// `commits::KEPT_TOKENS`): when Redis goes back, those above it are
    /// the lost completions' leases (`commits`).
    committed: Mutex<commits::Committed>,
    /// The id of this worker's commit sequence (its field of `commits`):
    /// random, or the one its witness record keeps across runs.
    witness_id: String,
}

/// Requests (seeds, due pages, links) per script call: at about 15 µs of
/// server time each, no call holds Redis for more than a few milliseconds
/// (`benches/shared.rs` measures the longest call, docs/performance.md).
pub const SCRIPT_CHUNK: usize = 128;

impl Shared {
    /// Connects to the crawl's server (once, no retry), checks that it
    /// answers and joins the crawl's epoch (made with the crawl when there is
    /// none). `per_host` is the crawl's per-host in-flight limit, which every
    /// script that can make a host ready again applies.
    pub async fn connect(target: &SharedTarget, per_host: usize) -> Result<Shared, SharedError> {
        let mut shared = Shared::inspect(target, per_host).await?;
        shared.enter().await?;
        Ok(shared)
    }

    /// Joins the crawl's epoch (made with the crawl when there is none): a
    /// connection made by [`Shared::inspect`] may run the crawl's scripts
    /// from now on.
    pub async fn enter(&mut self) -> Result<(), SharedError> {
        self.epoch = self.join_epoch().await?;
        Ok(())
    }

    /// Connects as [`Shared::connect`] does without joining the crawl: for
    /// reading it (`legcrawl dump`), which writes nothing.
    pub async fn inspect(target: &SharedTarget, per_host: usize) -> Result<Shared, SharedError> {
        let unreachable = |mut reason: String| {
            // rustls's verdict on the server's certificate, with what to do
            // when the verdict does not say it (an expired one does).
            if reason.contains("not valid for name") || reason.contains("NotValidForName") {
                reason.push_str(
                    " (the server's certificate does not name the URL's host: give a host name it lists)",
                );
            } else if reason.contains("invalid peer certificate")
                && (reason.contains("UnknownIssuer") || reason.contains("BadSignature"))
            {
                reason.push_str(if target.ca_pem().is_some() {
                    " (the CA of --shared-cacert did not sign the server's certificate: give the one that did)"
                } else {
                    " (give the CA that signed the server's certificate with --shared-cacert FILE)"
                });
            } else if reason.contains("CertificateRequired") {
                reason.push_str(
                    " (the server asks for a client certificate: give it with --shared-cert FILE --shared-key FILE)",
                );
            } else if reason.contains("alert: UnknownCA")
                || reason.contains("alert: BadCertificate")
            {
                reason.push_str(
                    " (the server turned down the client certificate of --shared-cert: it must be signed by a CA the server trusts)",
                );
            }
            SharedError::Unreachable {
                url: target.shown(),
                reason: target.scrub(&reason),
            }
        };
        // A server that turns the password (or its absence) down is not
        // unreachable: say what it refused.
        let refused = |error: RedisError| {
            let what = match error.code() {
                Some("NOAUTH") => {
                    Some("a connection without a password (give it in the URL or REDISCLI_AUTH)")
                }
                _ if error.kind() == redis::ErrorKind::AuthenticationFailed
                    || error.code() == Some("WRONGPASS") =>
                {
                    Some("the password (or user) given")
                }
                _ => None,
            };
            match what {
                Some(what) => SharedError::Redis {
                    url: target.shown(),
                    what,
                    reason: target.scrub(&error.to_string()),
                },
                None => unreachable(error.to_string()),
            }
        };
        let info = target.connection_info().map_err(unreachable)?;
        let tls = link::TlsPem {
            ca: target.ca_pem(),
            client: target.client_pem(),
        };
        let address = probe::address(&info);
        let connect = link::Link::open(info, tls);
        let (link, mut conn) = probe::connect(connect, address, Duration::from_secs(10))
            .await
            .map_err(|failure| match failure {
                probe::Failure::Redis(error) => refused(error),
                probe::Failure::TimedOut => unreachable("no answer within 10 s".into()),
                probe::Failure::Mismatch(what) => unreachable(what.into()),
            })?;
        if link.is_cluster() {
            tracing::info!(url = %target.shown(), "Redis Cluster: each call goes to the node of the crawl's slot");
        }
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(refused)?;
        Ok(Shared {
            keys: Keys::new(&target.name),
            target: target.clone(),
            link,
            conn: Mutex::new(conn),
            epoch: String::new(),
            scripts: Arc::new(Scripts::new()),
            per_host: per_host.max(1),
            stopping: Arc::new(AtomicBool::new(false)),
            away: AtomicBool::new(false),
            witness: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            went: Mutex::new(None),
            last_commit: AtomicU64::new(0),
            committed: Mutex::new(commits::Committed::default()),
            witness_id: format!("{:016x}", random_u64()),
        })
    }

    /// The crawl's keys.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The crawl's name and server.
    pub fn target(&self) -> &SharedTarget {
        &self.target
    }

    /// From now on a call fails at the first transient error instead of
    /// retrying (the worker is stopping).
    pub fn stop_retrying(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// [`Shared::stop_retrying`] as a function that may be called while a
    /// call of this connection is under way.
    pub fn retry_stopper(&self) -> impl Fn() + use<> {
        let stopping = Arc::clone(&self.stopping);
        move || stopping.store(true, Ordering::SeqCst)
    }

    /// The current connection (a handle: cloning it is cheap).
    fn conn(&self) -> link::Conn {
        match self.conn.lock() {
            Ok(conn) => conn.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Runs one of the crawl's scripts with `args` after the prefix and the
    /// per-host limit, declaring its keys and the records of the leases
    /// `tokens` it is given ([`declared_keys`]). When Redis went back under
    /// it (`commits`), the loss is named and the call sent again.
    async fn script(
        &self,
        what: &'static str,
        pick: fn(&Scripts) -> &CrawlScript,
        tokens: &[u64],
        args: &[Vec<u8>],
    ) -> Result<Value, SharedError> {
        let mut tries = 0;
        loop {
            match self.script_once(what, pick, tokens, args).await {
                Err(SharedError::WentBack { from, to, .. })
                    if tries < commits::WENT_BACK_RETRIES =>
                {
                    let lost = self.went_back(from, to);
                    self.unlease_lost(&lost).await;
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// One [`Shared::script`] call, with the witness as it is now.
    async fn script_once(
        &self,
        what: &'static str,
        pick: fn(&Scripts) -> &CrawlScript,
        tokens: &[u64],
        args: &[Vec<u8>],
    ) -> Result<Value, SharedError> {
        let keys = declared_keys(&self.keys, pick(&self.scripts), tokens);
        let prefix = self.keys.prefix().as_bytes().to_vec();
        let per_host = self.per_host.to_string().into_bytes();
        let epoch = self.epoch_arg();
        let epoch = epoch.as_slice();
        let scripts = Arc::clone(&self.scripts);
        self.retrying(what, |mut conn| {
            let scripts = Arc::clone(&scripts);
            let (keys, prefix, per_host) = (&keys, &prefix, &per_host);
            async move {
                let mut call = pick(&scripts).script.prepare_invoke();
                for key in keys {
                    call.key(key);
                }
                call.arg(prefix).arg(per_host).arg(epoch);
                for arg in args {
                    call.arg(arg);
                }
                call.invoke_async::<Value>(&mut conn).await
            }
        })
        .await
    }

    /// Runs `script` (not prefixed by `lua/common.lua`) on its declared
    /// `keys` with `args`, retrying as every call does.
    pub(super) async fn eval(
        &self,
        what: &'static str,
        script: &Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Value, SharedError> {
        self.retrying(what, |mut conn| async move {
            let mut call = script.prepare_invoke();
            for key in keys {
                call.key(key);
            }
            for arg in args {
                call.arg(arg);
            }
            call.invoke_async::<Value>(&mut conn).await
        })
        .await
    }

    /// Runs a plain command (reads, and writes outside the scripts).
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        cmd: &redis::Cmd,
    ) -> Result<T, SharedError> {
        self.retrying(what, |mut conn| async move {
            cmd.query_async::<T>(&mut conn).await
        })
        .await
    }

    /// Runs `cmd`, a command that names no key (`SCAN`), on the server that
    /// holds `key` (in a Redis Cluster, the owner of its slot).
    pub(crate) async fn query_at_key(
        &self,
        what: &'static str,
        cmd: &redis::Cmd,
        key: &str,
    ) -> Result<Value, SharedError> {
        self.retrying(
            what,
            |mut conn| async move { conn.query_at_key(cmd, key).await },
        )
        .await
    }

    /// Runs a pipeline of plain commands.
    pub(crate) async fn pipeline(
        &self,
        what: &'static str,
        pipe: &redis::Pipeline,
    ) -> Result<Vec<Value>, SharedError> {
        self.retrying(what, |mut conn| async move {
            pipe.query_async::<Vec<Value>>(&mut conn).await
        })
        .await
    }

    fn corrupt(&self, what: impl Into<String>) -> SharedError {
        SharedError::Corrupt {
            name: self.target.name.clone(),
            what: what.into(),
        }
    }

    /// Leases up to `want` requests for `worker`, each for `ttl`. The call
    /// is named at random, so a retry after a lost reply is answered with the
    /// leases the first try granted ([`Shared::lease_named`]).
    pub async fn lease(
        &self,
        worker: &str,
        want: usize,
        ttl: Duration,
    ) -> Result<LeaseBatch, SharedError> {
        let call = format!("{worker}:{:016x}", random_u64());
        self.lease_named(worker, want, ttl, &call).await
    }

    /// [`Shared::lease`] as the call named `call` (unique to this worker's
    /// call): when Redis already answered a call of that name, the answer is
    /// the leases it granted that are still `worker`'s, and nothing more is
    /// leased (`lua/lease.lua`; names are kept 10 minutes).
    pub async fn lease_named(
        &self,
        worker: &str,
        want: usize,
        ttl: Duration,
        call: &str,
    ) -> Result<LeaseBatch, SharedError> {
        // The jitter's seed (see lease.lua), 1 ..= 2^31 - 2.
        let seed = 1 + random_u64() % 0x7FFF_FFFE;
        let args = [
            worker.as_bytes().to_vec(),
            want.to_string().into_bytes(),
            millis(ttl).into_bytes(),
            seed.to_string().into_bytes(),
            call.as_bytes().to_vec(),
        ];
        let value = self.script("leasing", |s| &s.lease, &[], &args).await?;
        let parts = array(&value).ok_or_else(|| self.corrupt("the lease script's answer"))?;
        let number = |i: usize| parts.get(i).and_then(int);
        let (Some(_now), Some(expired), Some(frontier), Some(live), Some(wait)) =
            (number(0), number(1), number(2), number(3), number(4))
        else {
            return Err(self.corrupt("the lease script's answer"));
        };
        let mut batch = LeaseBatch {
            leases: Vec::new(),
            expired: expired.max(0) as u64,
            frontier: frontier.max(0) as u64,
            live: live.max(0) as u64,
            wait: u64::try_from(wait).ok().map(Duration::from_millis),
        };
        for lease in parts[5..].chunks(4) {
            let [token, host, body, record] = lease else {
                return Err(self.corrupt("a lease in the lease script's answer"));
            };
            let token = int(token)
                .and_then(|t| u64::try_from(t).ok())
                .ok_or_else(|| self.corrupt("a lease token"))?;
            let host = text(host).ok_or_else(|| self.corrupt("a lease's host"))?;
            let body = bytes(body).ok_or_else(|| self.corrupt("a leased request"))?;
            let request = decode_request(body)
                .map_err(|e| self.corrupt(format!("the request of lease {token}: {e}")))?;
            let prior = match bytes(record) {
                Some(b) if !b.is_empty() => Some(self.page_record(b)?),
                _ => None,
            };
            batch.leases.push(SharedLease {
                token,
                host,
                request,
                prior,
            });
        }
        Ok(batch)
    }

    /// Extends this worker's live leases among `tokens` by `ttl` and records
    /// that the worker is alive (`info`: its record). Returns how many leases
    /// were extended.
    pub async fn renew(
        &self,
        worker: &str,
        ttl: Duration,
        info: &str,
        tokens: &[u64],
    ) -> Result<u64, SharedError> {
        let mut args = vec![
            worker.as_bytes().to_vec(),
            millis(ttl).into_bytes(),
            info.as_bytes().to_vec(),
        ];
        args.extend(tokens.iter().map(|t| t.to_string().into_bytes()));
        let value = self
            .script("renewing leases", |s| &s.renew, tokens, &args)
            .await?;
        int(&value)
            .map(|n| n.max(0) as u64)
            .ok_or_else(|| self.corrupt("the renew script's answer"))
    }

    /// Returns `worker`'s leases among `tokens` to the frontier, at the head
    /// of their hosts' queues in the order they were leased, and unlists the
    /// worker. Returns how many were returned.
    pub async fn release(&self, worker: &str, tokens: &[u64]) -> Result<u64, SharedError> {
        let mut args = vec![worker.as_bytes().to_vec(), b"stop".to_vec()];
        args.extend(tokens.iter().map(|t| t.to_string().into_bytes()));
        let value = self
            .script("returning leases", |s| &s.release, tokens, &args)
            .await?;
        int(&value)
            .map(|n| n.max(0) as u64)
            .ok_or_else(|| self.corrupt("the release script's answer"))
    }
}

/// A request as the frontier in Redis holds it: its stored form
/// ([`Request::encode`]: a version byte, then bincode), as in the embedded
/// frontier.
pub(crate) fn encode_request(request: &Request) -> Vec<u8> {
    request.encode()
}

/// The request [`encode_request`] wrote (key layout 2 stores no other form).
pub(crate) fn decode_request(bytes: &[u8]) -> Result<Request, crate::request::DecodeError> {
    Request::decode(bytes)
}

/// A random number: std's hasher keys are random, and new for each
/// `RandomState`.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

fn millis(d: Duration) -> String {
    d.as_millis().to_string()
}

/// The count at `i` of a script's or pipeline's answer `parts` (a negative
/// one read as 0); `None` when there is none.
pub(crate) fn count_at(parts: &[Value], i: usize) -> Option<u64> {
    parts.get(i).and_then(int).map(|n| n.max(0) as u64)
}

/// An integer reply, or a number sent as a string.
pub(crate) fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

/// Unix milliseconds of a `TIME` reply (`[seconds, microseconds]`).
pub(crate) fn time_ms(value: &Value) -> Option<i64> {
    let t = array(value)?;
    Some(int(t.first()?)? * 1000 + int(t.get(1)?)? / 1000)
}

pub(crate) fn array(value: &Value) -> Option<&[Value]> {
    match value {
        Value::Array(items) | Value::Set(items) => Some(items),
        _ => None,
    }
}

pub(crate) fn bytes(value: &Value) -> Option<&[u8]> {
    match value {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

pub(crate) fn text(value: &Value) -> Option<String> {
    bytes(value).and_then(|b| String::from_utf8(b.to_vec()).ok())
}
