//! What the server says about itself and how its refusals are taken: the
//! crawl's epoch (`lua/epoch.lua`), the settings a worker checks when it
//! starts (eviction policy, persistence), and the classes of its errors.
//! Depends on the connection in `super` only.

use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use redis::RedisError;

use super::{EPOCH_SCRIPT, Shared, SharedError, array, text};

/// How a failed call goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    /// Wait and call again, for as long as it takes: the server is away
    /// (refused, dropped, timed out), busy with a long script (`BUSY`) or
    /// loading its data (`LOADING`).
    Retry,
    /// Wait and call again against the cluster's new view, for at most
    /// `FAILOVER_WAIT` in a row: a cluster is between states (`MOVED`, `ASK`
    /// from a cluster's node, `TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN`), or a
    /// failover made the server a replica (`READONLY`; one server is then
    /// called on a new connection, since its address may lead to the new
    /// primary, while a cluster's connection learns the new slot map itself).
    Failover,
    /// Stop: `OOM`, a lost state (`LEGCRAWL_GONE`), a denied command, a bug,
    /// or `MOVED`/`ASK` from a server taken for a single one.
    Fatal,
}

/// The class of `error` (see [`Class`]), from a cluster's connection when
/// `cluster`.
pub(super) fn classify(error: &RedisError, cluster: bool) -> Class {
    match error.code() {
        Some("BUSY" | "LOADING") => Class::Retry,
        Some("TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" | "READONLY") => Class::Failover,
        Some("MOVED" | "ASK") if cluster => Class::Failover,
        Some(_) => Class::Fatal,
        None if error.is_timeout()
            || error.is_connection_refusal()
            || error.is_connection_dropped()
            || error.is_io_error() =>
        {
            Class::Retry
        }
        None => Class::Fatal,
    }
}

/// A new random epoch: 16 hex digits from the process's randomly keyed
/// hasher over the time and the process id (no randomness crate needed: it
/// only has to differ between crawls made under one name).
fn new_epoch() -> String {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}

/// The `hash-max-listpack-entries` the seen set's buckets are sized for (Redis's
/// default): each stays below it, so each is a compact listpack (see
/// `lua/common.lua`, `SEEN_LOAD`).
pub const LISTPACK_ENTRIES: u64 = 128;

impl Shared {
    /// The error a call that failed for good ends with.
    pub(super) fn failed(&self, what: &'static str, error: &RedisError) -> SharedError {
        match error.code() {
            Some("LEGCRAWL_GONE") => SharedError::Gone {
                name: self.target.name.clone(),
                url: self.target.shown(),
                what: error.detail().unwrap_or("a key is missing").to_owned(),
            },
            Some("LEGCRAWL_WENTBACK") => match super::commits::went_back_detail(error.detail()) {
                Some((from, to)) => SharedError::WentBack {
                    name: self.target.name.clone(),
                    url: self.target.shown(),
                    from,
                    to,
                },
                None => self.corrupt("a LEGCRAWL_WENTBACK answer without its two numbers"),
            },
            Some("OOM") => SharedError::OutOfMemory {
                url: self.target.shown(),
                name: self.target.name.clone(),
            },
            _ => SharedError::Redis {
                url: self.target.shown(),
                what,
                reason: self.target.scrub(&error.to_string()),
            },
        }
    }

    /// Replaces the connection with a new one (after `READONLY` from one
    /// server); on failure the old one stays, and the next attempt tries again.
    pub(super) async fn reconnect(&self) {
        let connect = self.link.connect();
        if let Ok(Ok(conn)) = tokio::time::timeout(std::time::Duration::from_secs(5), connect).await
        {
            match self.conn.lock() {
                Ok(mut slot) => *slot = conn,
                Err(poisoned) => *poisoned.into_inner() = conn,
            }
        }
    }

    /// The crawl's epoch, made now when the crawl has none (see
    /// `lua/epoch.lua`).
    pub(super) async fn join_epoch(&self) -> Result<String, SharedError> {
        let keys = [self.keys.key("meta"), self.keys.key("job")];
        let value = self
            .eval(
                "joining the crawl",
                &EPOCH_SCRIPT,
                &keys,
                &[new_epoch().into_bytes()],
            )
            .await?;
        let epoch = array(&value)
            .and_then(|a| a.first())
            .and_then(text)
            .ok_or_else(|| self.corrupt("the epoch script's answer"))?;
        if epoch.is_empty() {
            return Err(SharedError::Gone {
                name: self.target.name.clone(),
                url: self.target.shown(),
                what: "its job is stored but its meta hash is missing".into(),
            });
        }
        Ok(epoch)
    }

    /// Checks the server's settings before a worker starts: a
    /// `maxmemory-policy` other than `noeviction` is refused
    /// ([`SharedError::Eviction`]); no persistence (neither AOF nor RDB
    /// snapshots) is a warning, and so is a `hash-max-listpack-entries` below
    /// `LISTPACK_ENTRIES`. Where `CONFIG GET` is not allowed (an ACL user
    /// without `+config`, a managed Redis), a warning says what could not be
    /// checked.
    pub async fn check_server(&self) -> Result<(), SharedError> {
        let get = |name: &'static str| async move {
            let pair: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query_async(&mut self.conn())
                .await?;
            Ok::<_, RedisError>(pair.get(1).cloned().unwrap_or_default())
        };
        let policy = match get("maxmemory-policy").await {
            Ok(policy) => policy,
            Err(error) => {
                let error = self.target.scrub(&error.to_string());
                tracing::warn!(url = %self.target.shown(), %error, "cannot read Redis's settings (CONFIG GET is not allowed): make sure maxmemory-policy is noeviction and persistence (AOF or RDB) is on, or the crawl's state may be lost");
                return Ok(());
            }
        };
        if !policy.is_empty() && policy != "noeviction" {
            return Err(SharedError::Eviction {
                url: self.target.shown(),
                policy,
            });
        }
        if let Ok(entries) = get("hash-max-listpack-entries").await
            && entries.parse::<u64>().is_ok_and(|n| n < LISTPACK_ENTRIES)
        {
            tracing::warn!(url = %self.target.shown(), "Redis has hash-max-listpack-entries {entries}: the buckets of the shared crawl's seen set (hashes kept below {LISTPACK_ENTRIES} fields) then become hashtables, several times the memory; set it to {LISTPACK_ENTRIES} or more (CONFIG SET hash-max-listpack-entries {LISTPACK_ENTRIES})");
        }
        let (aof, save) = match (get("appendonly").await, get("save").await) {
            (Ok(aof), Ok(save)) => (aof, save),
            _ => return Ok(()),
        };
        if aof != "yes" && save.trim().is_empty() {
            tracing::warn!(url = %self.target.shown(), "Redis keeps no copy on disk (appendonly no, save \"\"): a restart loses the shared crawl; turn on the AOF (appendonly yes) or RDB snapshots");
        }
        Ok(())
    }
}
