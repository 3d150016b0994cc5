//! The frontier: a persistent priority queue keyed by host, and in-memory leases.
//!
//! Queue keys are `q · host id · inverted priority · sequence`, so each host's
//! requests are one contiguous, priority-then-FIFO ordered range, and a scheduler
//! picks the next request of a host (or the best head over all hosts) by looking
//! at the first unleased key of each host range — never by scanning the queue.
//! Host names get small ids through the `h`/`H` index, loaded at open (one entry
//! per host, not per request).
//!
//! A lease is an in-memory mark on a queue key. The key is removed only by the
//! commit of the lease's completion, so an unfinished lease survives any crash as
//! a queued request.

use std::ops::Bound;

use super::{HostQueue, State, StoreError, keys};
use crate::request::Request;

/// A request taken from the frontier. Give it back with [`State::complete`] or
/// [`State::release`].
#[derive(Debug)]
pub struct Lease {
    /// The leased request.
    pub request: Request,
    /// Its host id (for per-host schedulers).
    pub host_id: u32,
    pub(super) key: [u8; keys::QUEUE_KEY_LEN],
}

impl Lease {
    /// The queue sequence number of the leased entry (FIFO order).
    pub fn seq(&self) -> u64 {
        keys::queue_key_seq(&self.key).unwrap_or(0)
    }
}

/// The host part (`host[:port]`) of a URL string; empty when it has none.
pub fn host_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(url) => match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => String::new(),
        },
        Err(_) => String::new(),
    }
}

impl State {
    /// Loads the host index: one read per host, plus one range probe per host to
    /// learn whether it has queued requests.
    pub(super) fn load_hosts(&mut self) -> Result<(), StoreError> {
        for entry in self.db.scan_prefix([keys::HOST]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let id = key
                .get(1..5)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_be_bytes)
                .ok_or_else(|| self.corrupt("host index", &key, "bad key length"))?;
            let name = String::from_utf8(value.to_vec())
                .map_err(|_| self.corrupt("host index", &key, "not UTF-8"))?;
            self.host_ids.insert(name.clone(), id);
            self.hosts.insert(id, HostQueue::new(name));
        }
        Ok(())
    }

    /// The id of `host`, allocating one (in the open group) if it is new.
    pub(super) fn host_id(&mut self, host: &str) -> u32 {
        if let Some(&id) = self.host_ids.get(host) {
            return id;
        }
        let id = self.meta.next_host_id;
        self.meta.next_host_id += 1;
        self.group.batch.insert(
            keys::with_prefix(keys::HOST, &id.to_be_bytes()),
            host.as_bytes(),
        );
        self.group.batch.insert(
            keys::with_prefix(keys::HOST_BY_NAME, host.as_bytes()),
            &id.to_be_bytes(),
        );
        self.group.dirty = true;
        self.host_ids.insert(host.to_owned(), id);
        self.hosts.insert(id, HostQueue::new(host.to_owned()));
        id
    }

    /// Puts `request` in the open group's batch (no dedup here: see `seen`).
    pub(super) fn push_queue(&mut self, request: &Request) {
        let host = host_of(&request.url);
        let id = self.host_id(&host);
        let seq = self.meta.next_queue_seq;
        self.meta.next_queue_seq += 1;
        let key = keys::queue_key(id, request.priority, seq);
        self.group.batch.insert(&key[..], request.encode());
        self.group.dirty = true;
        let smallest = self.group.touched_hosts.entry(id).or_insert(key);
        if key < *smallest {
            *smallest = key;
        }
        self.counters.add("frontier/queued", 1);
    }

    /// Hosts that may have an unleased queued request, with their in-flight counts.
    /// A per-host scheduler picks among these and calls [`State::lease_from`].
    pub fn ready_hosts(&self) -> impl Iterator<Item = (u32, &str, usize)> + '_ {
        self.hosts
            .iter()
            .filter(|(_, queue)| queue.maybe_ready)
            .map(|(&id, queue)| (id, queue.name.as_str(), queue.leased.len()))
    }

    /// The host name of a host id.
    pub fn host_name(&self, host_id: u32) -> Option<&str> {
        self.hosts.get(&host_id).map(|queue| queue.name.as_str())
    }

    /// Leases the best queued request of one host, if it has an unleased one.
    /// Requests added in the open (uncommitted) group are not visible yet.
    pub fn lease_from(&mut self, host_id: u32) -> Result<Option<Lease>, StoreError> {
        Ok(self
            .peek_host(host_id)?
            .map(|(key, request)| self.take(host_id, key, request)))
    }

    /// Leases the best queued request over all hosts: highest priority, then the
    /// oldest. Costs one short range read per host with queued requests.
    pub fn lease(&mut self) -> Result<Option<Lease>, StoreError> {
        let ids: Vec<u32> = self.ready_hosts().map(|(id, _, _)| id).collect();
        let mut best: Option<(u32, [u8; keys::QUEUE_KEY_LEN], Request)> = None;
        for id in ids {
            if let Some((key, request)) = self.peek_host(id)? {
                // Compare priority and sequence, ignoring the host part of the key.
                if best.as_ref().is_none_or(|(_, b, _)| key[5..] < b[5..]) {
                    best = Some((id, key, request));
                }
            }
        }
        Ok(best.map(|(id, key, request)| self.take(id, key, request)))
    }

    /// Gives a lease back unfinished (e.g. after the shutdown grace period). The
    /// request stays where it was in the queue.
    pub fn release(&mut self, lease: Lease) {
        if let Some(queue) = self.hosts.get_mut(&lease.host_id) {
            if queue.leased.remove(&lease.key) {
                self.leased -= 1;
            }
            queue.maybe_ready = true;
            queue.cursor = None;
        }
    }

    /// Marks the entry at `key` leased; it is the first unleased entry after the
    /// host's cursor, so it becomes the cursor.
    fn take(&mut self, host_id: u32, key: [u8; keys::QUEUE_KEY_LEN], request: Request) -> Lease {
        if let Some(queue) = self.hosts.get_mut(&host_id) {
            queue.leased.insert(key);
            queue.cursor = Some(key);
        }
        self.leased += 1;
        Lease {
            request,
            host_id,
            key,
        }
    }

    /// The first unleased entry of a host's range after its cursor, decoded.
    fn peek_host(
        &mut self,
        host_id: u32,
    ) -> Result<Option<([u8; keys::QUEUE_KEY_LEN], Request)>, StoreError> {
        let Some(queue) = self.hosts.get(&host_id) else {
            return Ok(None);
        };
        if !queue.maybe_ready {
            return Ok(None);
        }
        let prefix = keys::queue_host_prefix(host_id);
        let from = match &queue.cursor {
            Some(cursor) => Bound::Excluded(cursor.to_vec()),
            None => Bound::Included(prefix.to_vec()),
        };
        let to = match keys::prefix_end(&prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        let mut found = None;
        for entry in self.db.range::<Vec<u8>, _>((from, to)) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let key: [u8; keys::QUEUE_KEY_LEN] = key
                .as_ref()
                .try_into()
                .map_err(|_| self.corrupt("queue", &key, "bad key length"))?;
            if queue.leased.contains(&key) {
                continue;
            }
            let request =
                Request::decode(&value).map_err(|e| self.corrupt("queue", &key, &e.to_string()))?;
            found = Some((key, request));
            break;
        }
        if found.is_none()
            && let Some(queue) = self.hosts.get_mut(&host_id)
        {
            queue.maybe_ready = false;
        }
        Ok(found)
    }

    pub(super) fn corrupt(&self, what: &str, key: &[u8], reason: &str) -> StoreError {
        StoreError::Corrupt {
            path: self.dir.clone(),
            what: format!("{what} {key:?}"),
            reason: reason.to_owned(),
        }
    }
}
