//! Deleting a shared crawl from Redis (`crawl --shared ... --fresh`): every
//! key under the crawl's prefix. Plain commands, no script; depends on
//! [`super::client`] and the key layout ([`super::keys`]).
//!
//! `meta` goes first: from then on every script of a worker still running
//! fails its epoch check (`LEGCRAWL_GONE`) and the worker stops, so no worker
//! writes into a crawl half deleted. The rest is found with `SCAN MATCH
//! legcrawl:{NAME}:*` and removed with `UNLINK` (freed in the background, so
//! the server is not held up by a large queue). All of a crawl's keys share
//! one hash tag, so on a Redis Cluster they are all on the node that owns it.

use super::client::{Shared, SharedError, array, bytes};

/// Keys scanned (and unlinked) per round trip.
const SCAN_COUNT: usize = 1_000;

impl Shared {
    /// True when Redis holds any key of the crawl.
    pub async fn has_state(&self) -> Result<bool, SharedError> {
        let meta: i64 = self
            .query(
                "looking for the crawl",
                redis::cmd("EXISTS").arg(self.keys().key("meta")),
            )
            .await?;
        Ok(meta > 0 || self.scan_all().await? > 0)
    }

    /// Deletes every key of the crawl, `meta` first; returns how many keys
    /// were deleted.
    pub async fn erase(&self) -> Result<u64, SharedError> {
        let first: i64 = self
            .query(
                "deleting the crawl's epoch",
                redis::cmd("UNLINK").arg(self.keys().key("meta")),
            )
            .await?;
        let mut deleted = first.max(0) as u64;
        let mut cursor = 0;
        loop {
            let (next, keys) = self.scan_keys(cursor, SCAN_COUNT).await?;
            if !keys.is_empty() {
                let n: i64 = self
                    .query("deleting the crawl's keys", redis::cmd("UNLINK").arg(&keys))
                    .await?;
                deleted += n.max(0) as u64;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }

    /// How many keys of the crawl a SCAN finds, stopping at the first round
    /// trip that finds any.
    async fn scan_all(&self) -> Result<u64, SharedError> {
        let mut found = 0;
        let mut cursor = 0;
        loop {
            let (next, keys) = self.scan_keys(cursor, SCAN_COUNT).await?;
            found += keys.len() as u64;
            if next == 0 || found > 0 {
                return Ok(found);
            }
            cursor = next;
        }
    }

    /// One `SCAN` step over the crawl's keys: the next cursor (0: done) and
    /// the keys found.
    async fn scan_keys(
        &self,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<Vec<u8>>), SharedError> {
        let pattern = format!("{}*", self.keys().prefix());
        // Every key of the crawl shares its `{NAME}` tag, so one node holds
        // them all: the one that holds `meta`.
        let meta = self.keys().key("meta");
        let reply = self
            .query_at_key(
                "listing the crawl's keys",
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(count),
                &meta,
            )
            .await?;
        let parts = array(&reply).unwrap_or_default();
        // The cursor is an unsigned 64-bit number, sent as a string.
        let next = parts
            .first()
            .and_then(bytes)
            .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
            .unwrap_or(0);
        let keys = parts
            .get(1)
            .and_then(array)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| bytes(k).map(<[u8]>::to_vec))
                    .collect()
            })
            .unwrap_or_default();
        Ok((next, keys))
    }
}
