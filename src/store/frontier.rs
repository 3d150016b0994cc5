//! The frontier: a persistent priority queue keyed by host, and in-memory leases.
//!
//! Each host's requests are one contiguous, priority-then-FIFO ordered range
//! of the queue namespace (keys and packed records are `queue`'s), so the next
//! request of a host, or the best head over all hosts, is the first unleased
//! entry of a host range, never a scan. Host names get small ids through the
//! `h`/`H` index, loaded at open. A group writes one packed record per host and
//! priority; a request is named by its *entry key*
//! ([`queue::queue_entry_key`]).
//!
//! A lease is an in-memory mark on an entry key. The entry is removed only by
//! the commit of the lease's completion (which rewrites its record without it,
//! or removes an empty record), so an unfinished lease survives any crash as a
//! queued request.
//!
//! Depends on `queue`, `keys`, `table`, `error`, [`crate::request`] and
//! [`crate::canon`] (host names without the URL parser).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;

use super::error::StoreError;
use super::keys;
use super::queue::{
    self, QUEUE_KEY_LEN, RECORD_MAX_BYTES, RECORD_MAX_ENTRIES, RECORD_VERSION, push_entry,
    record_entries,
};
use super::table::{Batch, Db, Table, Text, U32};
use crate::request::Request;

/// Host index: `h` · host id → host name.
pub(super) const HOST: Table<u32, Text> = Table::new(b'h', "host index");
/// Host lookup: `H` · host name → host id.
pub(super) const HOST_BY_NAME: Table<str, U32> = Table::new(b'H', "host id");

/// A request taken from the frontier. Give it back with [`super::State::complete`] or
/// [`super::State::release`].
#[derive(Debug)]
pub struct Lease {
    /// The leased request.
    pub request: Request,
    /// Its host id (for per-host schedulers).
    pub host_id: u32,
    /// Entry key of the leased request.
    pub(super) key: [u8; QUEUE_KEY_LEN],
    /// Key of the packed record holding it.
    pub(super) record: [u8; QUEUE_KEY_LEN],
    /// It came from the queue (not [`Lease::of_page`]).
    pub(super) queued: bool,
}

/// A packed record being filled by the open group.
#[derive(Debug)]
pub(super) struct PendingRecord {
    /// Its key (the first entry's sequence number).
    pub(super) key: [u8; QUEUE_KEY_LEN],
    /// Its value so far.
    pub(super) bytes: Vec<u8>,
    /// Entries in it.
    pub(super) entries: usize,
}

/// The first unleased request found in a host's range.
struct Found {
    record: [u8; QUEUE_KEY_LEN],
    entry: [u8; QUEUE_KEY_LEN],
    request: Request,
}

impl Lease {
    /// A lease of a stored page rather than of a queued request (`legcrawl
    /// reparse`): its completion stores the page's record, items and links
    /// like any other, and takes nothing out of the queue.
    pub fn of_page(request: Request) -> Lease {
        Lease {
            request,
            host_id: u32::MAX,
            key: [0; QUEUE_KEY_LEN],
            record: [0; QUEUE_KEY_LEN],
            queued: false,
        }
    }

    /// True for a lease of a queued request.
    pub fn is_queued(&self) -> bool {
        self.queued
    }

    /// The queue sequence number of the leased entry (FIFO order).
    pub fn seq(&self) -> u64 {
        queue::queue_key_seq(&self.key).unwrap_or(0)
    }
}

/// The host part (`host[:port]`) of a URL string; empty when it has none.
/// Plain URLs are read without the URL parser ([`crate::canon::split`] gives
/// exactly the parser's host and port for the URLs it accepts).
pub(crate) fn host_of(url: &str) -> String {
    if let Some(parts) = crate::canon::split::split(url) {
        return match parts.port {
            Some(port) => format!("{}:{port}", parts.host),
            None => parts.host.to_owned(),
        };
    }
    match url::Url::parse(url) {
        Ok(url) => match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => String::new(),
        },
        Err(_) => String::new(),
    }
}

/// One queued request's place: `(host id, record key, entry key)`.
pub(super) type QueueEntry = (u32, [u8; QUEUE_KEY_LEN], [u8; QUEUE_KEY_LEN]);

/// Per-host queue bookkeeping kept in memory.
#[derive(Debug)]
pub(super) struct HostQueue {
    /// The host name (`example.com:8080`).
    pub(super) name: String,
    /// Entry keys of this host currently leased.
    pub(super) leased: BTreeSet<[u8; QUEUE_KEY_LEN]>,
    /// False only when a scan found no unleased entry and nothing was added since.
    maybe_ready: bool,
    /// `(record key, entry key)`: every entry of this host up to and including the
    /// cursor's entry is leased (or gone), so the next lease scans from the cursor's
    /// record, just after its entry, instead of from the host's first record. Reset
    /// when a lease is released or an entry sorting before it is added (a higher
    /// priority).
    cursor: Option<([u8; QUEUE_KEY_LEN], [u8; QUEUE_KEY_LEN])>,
}

impl HostQueue {
    fn new(name: String) -> HostQueue {
        HostQueue {
            name,
            leased: BTreeSet::new(),
            maybe_ready: true,
            cursor: None,
        }
    }
}

/// What the frontier's part of a group changes in memory once it is durable.
#[derive(Default)]
struct Pending {
    /// Leases completed in the group (still leased until it is durable).
    completed: Vec<QueueEntry>,
    /// Hosts that got new queue entries, with the smallest new entry key.
    touched: BTreeMap<u32, [u8; QUEUE_KEY_LEN]>,
}

/// The frontier table: queue records (`q`), the host index (`h`/`H`) and, in
/// memory, the hosts, their leases and the open group's packed records.
pub(super) struct Frontier {
    host_ids: HashMap<String, u32>,
    pub(super) hosts: BTreeMap<u32, HostQueue>,
    leased: usize,
    next_host_id: u32,
    next_queue_seq: u64,
    /// The packed queue records the open group is filling, by host id and
    /// priority (the first 9 bytes of their keys); written at the seal.
    queue: HashMap<[u8; 9], PendingRecord>,
    /// The open group's completions and new entries.
    open: Pending,
    /// The sealed group's, until it is durable.
    sealed: Option<Pending>,
}

impl Frontier {
    /// Loads the host index: one read per host. `next_host_id` and
    /// `next_queue_seq` come from the metadata record.
    pub(super) fn load(
        db: &Db,
        next_host_id: u32,
        next_queue_seq: u64,
    ) -> Result<Frontier, StoreError> {
        let mut frontier = Frontier {
            host_ids: HashMap::new(),
            hosts: BTreeMap::new(),
            leased: 0,
            next_host_id,
            next_queue_seq,
            queue: HashMap::new(),
            open: Pending::default(),
            sealed: None,
        };
        for entry in HOST.iter(db) {
            let (id, name) = entry?;
            frontier.host_ids.insert(name.clone(), id);
            frontier.hosts.insert(id, HostQueue::new(name));
        }
        Ok(frontier)
    }

    /// `(next host id, next queue sequence)`, for the metadata record.
    pub(super) fn next_ids(&self) -> (u32, u64) {
        (self.next_host_id, self.next_queue_seq)
    }

    /// Requests leased and not yet durably completed.
    pub(super) fn leased(&self) -> usize {
        self.leased
    }

    /// Hosts known.
    pub(super) fn hosts_len(&self) -> usize {
        self.hosts.len()
    }

    /// The id of a known host.
    pub(super) fn host_id_of(&self, host: &str) -> Option<u32> {
        self.host_ids.get(host).copied()
    }

    /// The id of `host`, allocating one (in the group) if it is new.
    fn host_id(&mut self, batch: &mut Batch, host: &str) -> u32 {
        if let Some(&id) = self.host_ids.get(host) {
            return id;
        }
        let id = self.next_host_id;
        self.next_host_id += 1;
        HOST.put(batch, &id, &host.to_owned());
        HOST_BY_NAME.put(batch, host, &id);
        self.host_ids.insert(host.to_owned(), id);
        self.hosts.insert(id, HostQueue::new(host.to_owned()));
        id
    }

    /// Adds `request` to the group's packed record of its host and priority (no
    /// dedup here: the seen table decides).
    pub(super) fn push(&mut self, batch: &mut Batch, request: &Request) {
        let host = host_of(&request.url);
        let id = self.host_id(batch, &host);
        let seq = self.next_queue_seq;
        self.next_queue_seq += 1;
        let key = queue::queue_key(id, request.priority, seq);
        let mut head = [0u8; 9];
        head.copy_from_slice(&key[..9]);
        let pending = self.queue.entry(head).or_insert_with(|| PendingRecord {
            key,
            bytes: vec![RECORD_VERSION],
            entries: 0,
        });
        push_entry(&mut pending.bytes, seq, &request.encode());
        pending.entries += 1;
        if (pending.entries >= RECORD_MAX_ENTRIES || pending.bytes.len() >= RECORD_MAX_BYTES)
            && let Some(full) = self.queue.remove(&head)
        {
            batch.put(&full.key[..], full.bytes);
        }
        batch.defer();
        let smallest = self.open.touched.entry(id).or_insert(key);
        if key < *smallest {
            *smallest = key;
        }
    }

    /// Hosts that may have an unleased queued request, with their in-flight counts.
    pub(super) fn ready_hosts(&self) -> impl Iterator<Item = (u32, &str, usize)> + '_ {
        self.hosts
            .iter()
            .filter(|(_, queue)| queue.maybe_ready)
            .map(|(&id, queue)| (id, queue.name.as_str(), queue.leased.len()))
    }

    /// The host name of a host id.
    pub(super) fn host_name(&self, host_id: u32) -> Option<&str> {
        self.hosts.get(&host_id).map(|queue| queue.name.as_str())
    }

    /// Leases the best queued request of one host, if it has an unleased one.
    pub(super) fn lease_from(
        &mut self,
        db: &Db,
        host_id: u32,
    ) -> Result<Option<Lease>, StoreError> {
        Ok(self
            .peek_host(db, host_id)?
            .map(|found| self.take(host_id, found)))
    }

    /// Leases the best queued request over all hosts: highest priority, then the
    /// oldest. Costs one short range read per host with queued requests.
    pub(super) fn lease(&mut self, db: &Db) -> Result<Option<Lease>, StoreError> {
        let ids: Vec<u32> = self.ready_hosts().map(|(id, _, _)| id).collect();
        let mut best: Option<(u32, Found)> = None;
        for id in ids {
            if let Some(found) = self.peek_host(db, id)? {
                // Compare priority and sequence, ignoring the host part of the key.
                if best
                    .as_ref()
                    .is_none_or(|(_, b)| found.entry[5..] < b.entry[5..])
                {
                    best = Some((id, found));
                }
            }
        }
        Ok(best.map(|(id, found)| self.take(id, found)))
    }

    /// Gives a lease back unfinished; the request stays where it was.
    pub(super) fn release(&mut self, lease: Lease) {
        if !lease.queued {
            return;
        }
        if let Some(queue) = self.hosts.get_mut(&lease.host_id) {
            if queue.leased.remove(&lease.key) {
                self.leased -= 1;
            }
            queue.maybe_ready = true;
            queue.cursor = None;
        }
    }

    /// Completes a lease in the group: its entry leaves its record at the seal,
    /// and the lease ends once the group is durable.
    pub(super) fn complete(&mut self, batch: &mut Batch, lease: &Lease) {
        if !lease.queued {
            return;
        }
        batch.defer();
        self.open
            .completed
            .push((lease.host_id, lease.record, lease.key));
    }

    /// Takes queued (unleased) entries out of their records in the group, as
    /// completed leases are.
    pub(super) fn drop_entries(&mut self, batch: &mut Batch, entries: Vec<QueueEntry>) {
        batch.defer();
        self.open.completed.extend(entries);
    }

    /// Marks the found entry leased; it is the first unleased entry after the
    /// host's cursor, so it becomes the cursor.
    fn take(&mut self, host_id: u32, found: Found) -> Lease {
        if let Some(queue) = self.hosts.get_mut(&host_id) {
            queue.leased.insert(found.entry);
            queue.cursor = Some((found.record, found.entry));
        }
        self.leased += 1;
        Lease {
            request: found.request,
            host_id,
            key: found.entry,
            record: found.record,
            queued: true,
        }
    }

    /// The first unleased entry of a host's range after its cursor, decoded.
    fn peek_host(&mut self, db: &Db, host_id: u32) -> Result<Option<Found>, StoreError> {
        let Some(queue) = self.hosts.get(&host_id) else {
            return Ok(None);
        };
        if !queue.maybe_ready {
            return Ok(None);
        }
        let prefix = queue::queue_host_prefix(host_id);
        // The cursor's record may hold unleased entries after the cursor.
        let (from, after) = match &queue.cursor {
            Some((record, entry)) => (Bound::Included(record.to_vec()), Some(*entry)),
            None => (Bound::Included(prefix.to_vec()), None),
        };
        let to = match keys::prefix_end(&prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        let mut found = None;
        'records: for item in db.range::<Vec<u8>, _>((from, to)) {
            let (key, value) = item?;
            let record: [u8; QUEUE_KEY_LEN] = key
                .as_ref()
                .try_into()
                .map_err(|_| db.corrupt("queue", &key, "bad key length"))?;
            for entry in record_entries(&value) {
                let (seq, bytes) = entry.map_err(|reason| db.corrupt("queue", &key, reason))?;
                let entry = queue::queue_entry_key(&record, seq);
                if after.is_some_and(|after| entry <= after) || queue.leased.contains(&entry) {
                    continue;
                }
                let request = Request::decode(bytes)
                    .map_err(|e| db.corrupt("queue", &key, &e.to_string()))?;
                found = Some(Found {
                    record,
                    entry,
                    request,
                });
                break 'records;
            }
        }
        if found.is_none()
            && let Some(queue) = self.hosts.get_mut(&host_id)
        {
            queue.maybe_ready = false;
        }
        Ok(found)
    }

    /// The stored queue of `host_id`, record by record, entry by entry:
    /// `(record key, sequence, request)`.
    pub(super) fn for_each_queued(
        &self,
        db: &Db,
        host_id: u32,
        mut each: impl FnMut(&[u8; QUEUE_KEY_LEN], u64, Request) -> bool,
    ) -> Result<(), StoreError> {
        for entry in db.scan(queue::queue_host_prefix(host_id)) {
            let (key, value) = entry?;
            let record = <[u8; QUEUE_KEY_LEN]>::try_from(key.as_ref())
                .map_err(|_| db.corrupt("queue", &key, "bad key length"))?;
            for entry in record_entries(&value) {
                let (seq, bytes) = entry.map_err(|reason| db.corrupt("queue", &key, reason))?;
                let request = Request::decode(bytes)
                    .map_err(|e| db.corrupt("queue", &key, &e.to_string()))?;
                if !each(&record, seq, request) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// `(host id, record key, entry key)` of the queued (not leased) requests of
    /// `host_id` that `keep` selects.
    pub(super) fn queued_entries(
        &self,
        db: &Db,
        host_id: u32,
        keep: impl Fn(&Request) -> bool,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        let leased = self.hosts.get(&host_id).map(|q| &q.leased);
        let mut out = Vec::new();
        self.for_each_queued(db, host_id, |record, seq, request| {
            let entry = queue::queue_entry_key(record, seq);
            if keep(&request) && !leased.is_some_and(|l| l.contains(&entry)) {
                out.push((host_id, *record, entry));
            }
            true
        })?;
        Ok(out)
    }

    /// True when `host_id` has a stored queue record.
    pub(super) fn host_has_queued(&self, db: &Db, host_id: u32) -> Result<bool, StoreError> {
        Ok(db
            .scan(queue::queue_host_prefix(host_id))
            .next()
            .transpose()?
            .is_some())
    }

    /// Writes the group's part into `batch`: the records that had entries
    /// completed, rewritten without them (or removed when none is left), and the
    /// packed records being filled. On error nothing of the group is lost.
    pub(super) fn seal(&mut self, db: &Db, batch: &mut Batch) -> Result<(), StoreError> {
        // The previous group is in the database: its rewrites are what we read.
        rewrite_completed(db, batch, &self.open.completed)?;
        for (_, record) in self.queue.drain() {
            batch.put(&record.key[..], record.bytes);
        }
        self.sealed = Some(std::mem::take(&mut self.open));
        Ok(())
    }

    /// The sealed group is durable: its leases end and its new entries become
    /// leasable.
    pub(super) fn durable(&mut self) {
        let Some(group) = self.sealed.take() else {
            return;
        };
        for (host_id, _, key) in &group.completed {
            if let Some(queue) = self.hosts.get_mut(host_id)
                && queue.leased.remove(key)
            {
                self.leased -= 1;
            }
        }
        for (host_id, smallest) in &group.touched {
            if let Some(queue) = self.hosts.get_mut(host_id) {
                queue.maybe_ready = true;
                // A new key before the cursor (a higher priority) must be seen.
                if queue.cursor.is_some_and(|(_, entry)| *smallest < entry) {
                    queue.cursor = None;
                }
            }
        }
    }
}

/// Rewrites, in `batch`, every queue record that had entries completed in it:
/// without those entries, or removed when none is left.
fn rewrite_completed(
    db: &Db,
    batch: &mut Batch,
    completed: &[QueueEntry],
) -> Result<(), StoreError> {
    let mut by_record: BTreeMap<[u8; QUEUE_KEY_LEN], Vec<u64>> = BTreeMap::new();
    for (_, record, entry) in completed {
        let seq = queue::queue_key_seq(entry).unwrap_or(0);
        by_record.entry(*record).or_default().push(seq);
    }
    for (record, mut done) in by_record {
        done.sort_unstable();
        let Some(value) = db.get(record)? else {
            tracing::warn!(dir = %db.dir().display(), "completed queue record {record:?} is gone");
            continue;
        };
        let mut kept = vec![RECORD_VERSION];
        let mut left = 0;
        for entry in record_entries(&value) {
            let (seq, bytes) = entry.map_err(|reason| db.corrupt("queue", &record, reason))?;
            if done.binary_search(&seq).is_err() {
                push_entry(&mut kept, seq, bytes);
                left += 1;
            }
        }
        if left == 0 {
            batch.delete(&record[..]);
        } else {
            batch.put(&record[..], kept);
        }
    }
    Ok(())
}
