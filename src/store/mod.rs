//! The persistent crawl state: frontier, seen set, items, seeds, runs and counters.
//!
//! One data directory holds a sled database (`db/`), the memory-mapped Bloom filter
//! (`bloom.bin`), a marker file naming the format (`LEGCRAWL`) and, while a crawl
//! runs, `status.json`. A [`State`] is owned by one task of one process (sled locks
//! the database), so it takes `&mut self` and needs no locking of its own.
//!
//! # Invariants
//! - **Atomic completion.** Completing a lease removes its queue entry and inserts
//!   the page's items, the new requests and their fingerprints in one sled batch.
//!   Completions are grouped: a group is one batch ([`State::seal`]) applied and
//!   made durable by one flush ([`Flush`]), which the engine runs on another
//!   thread while the next group fills; [`State::commit`] does both at once.
//! - **Leases live in memory.** A leased request stays in the queue tree until its
//!   completion is durable, so a process that dies leaves every unfinished request
//!   queued: nothing has to be "returned" on open.
//! - **Bloom never runs ahead.** Fingerprints of the open group sit in an in-memory
//!   overlay; they reach the mapped bits only after the group's batch (which holds a
//!   journal entry of them) is flushed. On open the journal is replayed; a
//!   checkpoint msyncs the map and then truncates the journal.
//!
//! Depends on [`crate::bloom`], [`crate::fingerprint`], [`crate::request`],
//! [`crate::item`] and [`crate::config`]; never on the fetcher or the legs.

mod checkpoint;
mod commit;
pub mod crash;
mod dir;
mod exact;
mod frontier;
pub mod keys;
mod output;
pub mod pages;
pub mod records;
mod robots;
mod seen;
pub mod status;
#[cfg(test)]
mod tests;
mod views;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use checkpoint::{Checkpoint, Checkpointed};
pub use commit::{CommitOutcome, Flush, Receipt};
pub use frontier::Lease;
pub use pages::{CycleStart, PageRecord, StoredRequest};
pub use robots::Blocked;
pub use seen::{Completion, Seen};
pub use views::{FrontierEntry, SeenAnswer, Summary};

use crate::bloom::{BloomError, BloomFile, BloomParams};
use crate::config::DedupMode;
use crate::fingerprint::Fingerprint;
use records::{Counters, Meta, RecordError, RunOutcome, RunRecord, unix_now};

/// Version of the state layout as a whole.
/// Format 2: queue values are packed records of requests (see `frontier`), a group's
/// items are one record (see [`keys::ITEM`]), and the
/// exact seen set is sealed runs of fingerprints instead of a key per fingerprint
/// (see `exact`).
pub const STATE_FORMAT: u32 = 2;
/// Name of the marker file that makes a directory legcrawl state.
pub const MARKER_FILE: &str = "LEGCRAWL";
/// At most this many completed pages are not durable at any time: a group is
/// sealed at half of it, and the next fills while the previous one flushes...
pub const GROUP_MAX_PAGES: usize = 64;
/// ...or when its oldest completion is this old.
pub const GROUP_MAX_AGE: std::time::Duration = std::time::Duration::from_millis(20);
/// A checkpoint (msync of the Bloom map, journal truncated) is due after this long...
pub const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
/// ...or after this many journaled fingerprints, whichever comes first; this bounds
/// both the journal's size and the replay work of an open after a crash.
pub const CHECKPOINT_MAX_JOURNALED: u64 = 1 << 20;

/// Errors of the state. Every variant names the directory or record concerned.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The directory exists and holds something that is not legcrawl state.
    #[error("{path}: not a legcrawl state directory (no {MARKER_FILE} marker, and not empty)")]
    NotState {
        /// The directory.
        path: PathBuf,
    },
    /// The path is a file, not a directory.
    #[error("{path}: is a file, not a legcrawl state directory")]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A database or Bloom file without the marker: a state that lost its marker
    /// (a mistaken `rm`, a partial copy). Refused and left as it is.
    #[error(
        "{path}: holds a legcrawl database (db/ or bloom.bin) but no {MARKER_FILE} marker; refusing to touch it (restore the marker from a copy, or move the directory away)"
    )]
    Unmarked {
        /// The directory.
        path: PathBuf,
    },
    /// The state's creation was interrupted before it held anything.
    #[error(
        "{path}: the creation of this state was interrupted; a `legcrawl crawl` with this --data creates it again"
    )]
    Incomplete {
        /// The directory.
        path: PathBuf,
    },
    /// No state at that path (for read-only commands).
    #[error("{path}: no legcrawl state here")]
    Missing {
        /// The directory.
        path: PathBuf,
    },
    /// The state was written by another format version.
    #[error("{path}: state format {found}, this build reads format {STATE_FORMAT}")]
    Format {
        /// The directory.
        path: PathBuf,
        /// What the marker or metadata says.
        found: String,
    },
    /// Another process (a running crawl) holds the database.
    #[error("{path}: the state is busy (a crawl is running on it); `dump summary` still works")]
    Busy {
        /// The directory.
        path: PathBuf,
    },
    /// A setting fixed at creation was asked with another value.
    #[error(
        "{path}: the state was created with {setting} = {stored}; it cannot change to {requested} (use a new --data directory or reset)"
    )]
    Mismatch {
        /// The directory.
        path: PathBuf,
        /// Which setting.
        setting: &'static str,
        /// The stored value.
        stored: String,
        /// The requested value.
        requested: String,
    },
    /// A stored record could not be decoded.
    #[error("{path}: unreadable {what} record: {reason}")]
    Corrupt {
        /// The directory.
        path: PathBuf,
        /// Which record (namespace and key).
        what: String,
        /// The decoder's message.
        reason: String,
    },
    /// A commit was asked while the flush of a sealed group runs elsewhere (a
    /// caller's mistake: wait for that flush and hand it to `State::durable`).
    #[error("{path}: a commit was asked while the flush of the last group is still running")]
    FlushRunning {
        /// The directory.
        path: PathBuf,
    },
    /// A synchronous checkpoint was asked while a detached one runs (a caller's
    /// mistake: hand that one's result to `State::checkpointed` first).
    #[error("{path}: a checkpoint was asked while another one is still running")]
    CheckpointRunning {
        /// The directory.
        path: PathBuf,
    },
    /// The database failed.
    #[error("{path}: database error: {source}")]
    Db {
        /// The directory.
        path: PathBuf,
        /// sled's error.
        source: sled::Error,
    },
    /// The Bloom filter file failed.
    #[error(transparent)]
    Bloom(#[from] BloomError),
    /// A file of the state could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

/// How to open a state directory.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Create the state when the directory is missing or empty.
    pub create: bool,
    /// Dedup mode; `None` = as stored (or exact when creating).
    pub dedup: Option<DedupMode>,
    /// Bloom log2 bits; `None` = as stored (or 30).
    pub bloom_bits: Option<u8>,
    /// Bloom hash count; `None` = as stored (or 6).
    pub bloom_hashes: Option<u8>,
    /// Start a run record (crawls do; `dump` does not).
    pub begin_run: bool,
    /// A checkpoint is due this long after the last one; `None` =
    /// [`CHECKPOINT_EVERY`].
    pub checkpoint_every: Option<std::time::Duration>,
}

/// Per-host queue bookkeeping kept in memory.
#[derive(Debug)]
struct HostQueue {
    /// The host name (`example.com:8080`).
    name: String,
    /// Entry keys of this host currently leased.
    leased: BTreeSet<[u8; keys::QUEUE_KEY_LEN]>,
    /// False only when a scan found no unleased entry and nothing was added since.
    maybe_ready: bool,
    /// `(record key, entry key)`: every entry of this host up to and including the
    /// cursor's entry is leased (or gone), so the next lease scans from the cursor's
    /// record, just after its entry, instead of from the host's first record. Reset
    /// when a lease is released or an entry sorting before it is added (a higher
    /// priority).
    cursor: Option<([u8; keys::QUEUE_KEY_LEN], [u8; keys::QUEUE_KEY_LEN])>,
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

/// The open, uncommitted completion group.
#[derive(Default)]
struct Group {
    batch: sled::Batch,
    /// Fingerprints recorded in this group, in order (journal payload).
    fingerprints: Vec<Fingerprint>,
    /// The same fingerprints as a set: the Bloom overlay.
    overlay: crate::fingerprint::FingerprintSet,
    /// `(host id, record key, entry key)` of the leases completed in this group
    /// (still leased until the commit).
    completed: Vec<(u32, [u8; keys::QUEUE_KEY_LEN], [u8; keys::QUEUE_KEY_LEN])>,
    /// The packed queue records this group is filling, by host id and priority
    /// (the first 9 bytes of their keys); written to the batch at the commit.
    queue: HashMap<[u8; 9], frontier::PendingRecord>,
    /// Hosts that got new queue entries in this group, with the smallest new entry key.
    touched_hosts: BTreeMap<u32, [u8; keys::QUEUE_KEY_LEN]>,
    /// Page records written in this group, readable before the commit.
    page_records: crate::fingerprint::FingerprintMap<pages::PageRecord>,
    /// First item sequence number written in this group.
    first_item: Option<u64>,
    /// First item sequence number of the item record being filled.
    record_first: Option<u64>,
    /// The item record being filled (see [`keys::ITEM`]).
    items: Vec<u8>,
    pages: usize,
    opened_at: Option<Instant>,
    /// Anything at all to write.
    dirty: bool,
}

/// An open crawl state. See the module documentation for its invariants.
pub struct State {
    dir: PathBuf,
    /// The directory's exclusive lock, held while the state is open.
    _lock: dir::DirLock,
    db: sled::Db,
    bloom: BloomFile,
    meta: Meta,
    dedup: DedupMode,
    host_ids: HashMap<String, u32>,
    hosts: BTreeMap<u32, HostQueue>,
    leased: usize,
    counters: Counters,
    run: Option<RunRecord>,
    run_counters: Counters,
    group: Group,
    /// The exact seen set's in-memory part (empty in `bloom` mode).
    exact: exact::Exact,
    next_item: u64,
    next_group: u64,
    /// Fingerprints made durable (journaled) since the last checkpoint started.
    journaled: u64,
    /// Journal entries below this group number are durable and their bits set:
    /// what the next checkpoint covers.
    journal_end: u64,
    /// A detached checkpoint runs (see `checkpoint`).
    checkpointing: bool,
    /// How long after the last checkpoint the next one is due.
    checkpoint_every: std::time::Duration,
    /// When the last checkpoint ran (or the state was opened).
    last_checkpoint: Instant,
    /// The group sealed and not yet durable (see [`State::seal`]).
    sealed: Option<commit::Sealed>,
    /// Groups sealed by this process so far (the last one's `seq`).
    sealed_seq: u64,
    /// Items below this sequence number are durable (streamable).
    durable_items: u64,
}

impl State {
    /// Opens (or, with `options.create`, creates) the state in `dir`.
    pub fn open(dir: &Path, options: &OpenOptions) -> Result<State, StoreError> {
        let (lock, found) = dir::prepare(dir, options.create)?;
        if found == dir::Found::Create {
            dir::mark_creating(dir)?;
        }
        let db = open_db(dir)?;
        let (meta, bloom) = match found {
            dir::Found::Create => create_meta(dir, &db, options)?,
            dir::Found::State => load_meta(dir, &db, options)?,
        };
        let dedup = DedupMode::parse(&meta.dedup).ok_or_else(|| StoreError::Corrupt {
            path: dir.to_owned(),
            what: "meta".into(),
            reason: format!("unknown dedup mode {:?}", meta.dedup),
        })?;
        let mut state = State {
            dir: dir.to_owned(),
            _lock: lock,
            db,
            bloom,
            meta,
            dedup,
            host_ids: HashMap::new(),
            hosts: BTreeMap::new(),
            leased: 0,
            counters: Counters::default(),
            run: None,
            run_counters: Counters::default(),
            group: Group::default(),
            exact: exact::Exact::default(),
            next_item: 0,
            next_group: 0,
            journaled: 0,
            journal_end: 0,
            checkpointing: false,
            checkpoint_every: options.checkpoint_every.unwrap_or(CHECKPOINT_EVERY),
            last_checkpoint: Instant::now(),
            sealed: None,
            sealed_seq: 0,
            durable_items: 0,
        };
        state.load_hosts()?;
        state.load_counters()?;
        state.load_exact()?;
        state.next_item = state.load_next_item()?;
        state.durable_items = state.next_item;
        state.next_group = state.replay_journal()?;
        state.journal_end = state.next_group;
        state.close_dead_runs()?;
        if options.begin_run {
            state.begin_run()?;
        }
        Ok(state)
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The dedup mode fixed at creation.
    pub fn dedup(&self) -> DedupMode {
        self.dedup
    }

    /// Requests in flight (leased and not yet committed).
    pub fn in_flight(&self) -> usize {
        self.leased
    }

    /// Requests in the queue, in flight included.
    pub fn frontier_len(&self) -> u64 {
        self.counters.get("frontier/queued")
    }

    /// Items stored.
    pub fn items_len(&self) -> u64 {
        self.next_item
    }

    /// A global counter.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name)
    }

    /// A counter of the current run.
    pub fn run_counter(&self, name: &str) -> u64 {
        self.run_counters.get(name)
    }

    /// The current run record, if a run was begun.
    pub fn run(&self) -> Option<&RunRecord> {
        self.run.as_ref()
    }

    /// The run before the current one (or the last run, when none is current).
    pub fn previous_run(&self) -> Result<Option<RunRecord>, StoreError> {
        let end = match &self.run {
            Some(run) => keys::with_u64(keys::RUN, run.id),
            None => vec![keys::RUN + 1],
        };
        match self.db.range(vec![keys::RUN]..end).next_back() {
            None => Ok(None),
            Some(entry) => {
                let (key, value) = entry.map_err(|e| self.db_error(e))?;
                Ok(Some(self.decode_record("run", &key, &value)?))
            }
        }
    }

    /// Ends the current run: commits, checkpoints and records how it ended.
    pub fn end_run(&mut self, outcome: RunOutcome) -> Result<(), StoreError> {
        self.commit()?;
        if let Some(mut run) = self.run.take() {
            run.outcome = outcome;
            run.ended_at = Some(unix_now());
            run.updated_at = unix_now();
            run.counters = self.run_counters.values().clone();
            let key = keys::with_u64(keys::RUN, run.id);
            crash::point("run.end");
            self.db
                .insert(key, records::encode(&run))
                .map_err(|e| self.db_error(e))?;
        }
        self.checkpoint()
    }

    fn begin_run(&mut self) -> Result<(), StoreError> {
        let id = self.last_u64_key(keys::RUN)?.map_or(1, |n| n + 1);
        let now = unix_now();
        let run = RunRecord {
            id,
            started_at: now,
            updated_at: now,
            ended_at: None,
            outcome: RunOutcome::Running,
            pid: std::process::id(),
            counters: BTreeMap::new(),
            first_item: Some(self.next_item),
        };
        let key = keys::with_u64(keys::RUN, id);
        crash::point("run.begin");
        self.db
            .insert(key, records::encode(&run))
            .map_err(|e| self.db_error(e))?;
        self.db.flush().map_err(|e| self.db_error(e))?;
        self.run = Some(run);
        Ok(())
    }

    /// Marks runs left "running" by a dead process as killed.
    fn close_dead_runs(&mut self) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        for entry in self.db.scan_prefix([keys::RUN]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let mut run: RunRecord = self.decode_record("run", &key, &value)?;
            if run.outcome == RunOutcome::Running {
                run.outcome = RunOutcome::Killed;
                batch.insert(key, records::encode(&run));
            }
        }
        crash::point("run.close_dead");
        self.db.apply_batch(batch).map_err(|e| self.db_error(e))
    }

    fn load_counters(&mut self) -> Result<(), StoreError> {
        let mut values = BTreeMap::new();
        for entry in self.db.scan_prefix([keys::COUNTER]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            let name = String::from_utf8_lossy(&key[1..]).into_owned();
            let value = keys::read_versioned_u64(&value).ok_or_else(|| StoreError::Corrupt {
                path: self.dir.clone(),
                what: format!("counter {name}"),
                reason: format!("{} bytes, expected a version byte and 8", value.len()),
            })?;
            values.insert(name, value);
        }
        self.counters = Counters::from_values(values);
        Ok(())
    }

    /// The sequence number after the last stored item.
    fn load_next_item(&self) -> Result<u64, StoreError> {
        let end = [keys::ITEM + 1];
        let Some(entry) = self.db.range([keys::ITEM]..end).next_back() else {
            return Ok(0);
        };
        let (key, value) = entry.map_err(|e| self.db_error(e))?;
        let first =
            keys::u64_after_prefix(&key).ok_or_else(|| self.corrupt("item", &key, "short key"))?;
        let mut count = 0;
        for entry in self.item_entries(&key, &value)? {
            entry.map_err(|reason| self.corrupt("item", &key, reason))?;
            count += 1;
        }
        Ok(first + count)
    }

    /// The entries of an item record, its version checked.
    pub(crate) fn item_entries<'v>(
        &self,
        key: &[u8],
        value: &'v [u8],
    ) -> Result<impl Iterator<Item = Result<&'v [u8], &'static str>> + 'v, StoreError> {
        match value.split_first() {
            Some((&keys::ITEM_RECORD_VERSION, rest)) => Ok(keys::length_prefixed(rest)),
            _ => Err(self.corrupt("item", key, "unknown item record version")),
        }
    }

    /// The u64 after the namespace byte of the last key in `namespace`.
    fn last_u64_key(&self, namespace: u8) -> Result<Option<u64>, StoreError> {
        let end = [namespace + 1];
        match self.db.range([namespace]..end).next_back() {
            None => Ok(None),
            Some(entry) => {
                let (key, _) = entry.map_err(|e| self.db_error(e))?;
                keys::u64_after_prefix(&key)
                    .map(Some)
                    .ok_or_else(|| StoreError::Corrupt {
                        path: self.dir.clone(),
                        what: format!("key {key:?}"),
                        reason: "too short".into(),
                    })
            }
        }
    }

    fn decode_record<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        key: &[u8],
        value: &[u8],
    ) -> Result<T, StoreError> {
        records::decode(value).map_err(|e: RecordError| StoreError::Corrupt {
            path: self.dir.clone(),
            what: format!("{what} {key:?}"),
            reason: e.to_string(),
        })
    }

    fn db_error(&self, source: sled::Error) -> StoreError {
        StoreError::Db {
            path: self.dir.clone(),
            source,
        }
    }
}

fn open_db(dir: &Path) -> Result<sled::Db, StoreError> {
    let mut attempt = 1;
    loop {
        match try_open_db(dir) {
            Err(StoreError::Busy { .. }) if attempt < dir::LOCK_ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(dir::LOCK_RETRY);
            }
            other => return other,
        }
    }
}

fn try_open_db(dir: &Path) -> Result<sled::Db, StoreError> {
    let path = dir.join("db");
    sled::Config::new()
        .path(&path)
        .open()
        .map_err(|source| match &source {
            sled::Error::Io(io)
                if io.kind() == io::ErrorKind::WouldBlock || io.to_string().contains("lock") =>
            {
                StoreError::Busy {
                    path: dir.to_owned(),
                }
            }
            _ => StoreError::Db {
                path: dir.to_owned(),
                source,
            },
        })
}

fn create_meta(
    dir: &Path,
    db: &sled::Db,
    options: &OpenOptions,
) -> Result<(Meta, BloomFile), StoreError> {
    let params = BloomParams {
        bits: options.bloom_bits.unwrap_or(30),
        hashes: options.bloom_hashes.unwrap_or(6),
    };
    let bloom_path = dir.join("bloom.bin");
    crash::point("create.bloom");
    let bloom = BloomFile::create(&bloom_path, params)?;
    let meta = Meta {
        format: STATE_FORMAT,
        created_at: unix_now(),
        bloom_bits: params.bits,
        bloom_hashes: params.hashes,
        dedup: options.dedup.unwrap_or_default().as_str().to_owned(),
        next_queue_seq: 0,
        next_host_id: 0,
    };
    let db_err = |source| StoreError::Db {
        path: dir.to_owned(),
        source,
    };
    crash::point("create.meta");
    db.insert(keys::META, records::encode(&meta))
        .map_err(db_err)?;
    db.flush().map_err(db_err)?;
    // The final marker is written last: a directory with it is a complete state.
    dir::mark_complete(dir)?;
    Ok((meta, bloom))
}

fn load_meta(
    dir: &Path,
    db: &sled::Db,
    options: &OpenOptions,
) -> Result<(Meta, BloomFile), StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        path: dir.to_owned(),
        what: "meta".into(),
        reason,
    };
    let bytes = db
        .get(keys::META)
        .map_err(|source| StoreError::Db {
            path: dir.to_owned(),
            source,
        })?
        .ok_or_else(|| corrupt("missing".into()))?;
    let meta: Meta = records::decode(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if meta.format != STATE_FORMAT {
        return Err(StoreError::Format {
            path: dir.to_owned(),
            found: meta.format.to_string(),
        });
    }
    let check = |setting: &'static str, stored: String, requested: Option<String>| match requested {
        Some(requested) if requested != stored => Err(StoreError::Mismatch {
            path: dir.to_owned(),
            setting,
            stored,
            requested,
        }),
        _ => Ok(()),
    };
    check(
        "bloom bits",
        meta.bloom_bits.to_string(),
        options.bloom_bits.map(|b| b.to_string()),
    )?;
    check(
        "bloom hashes",
        meta.bloom_hashes.to_string(),
        options.bloom_hashes.map(|h| h.to_string()),
    )?;
    check(
        "dedup",
        meta.dedup.clone(),
        options.dedup.map(|d| d.as_str().to_owned()),
    )?;
    let bloom = BloomFile::open(&dir.join("bloom.bin"))?;
    let params = bloom.params();
    if params.bits != meta.bloom_bits || params.hashes != meta.bloom_hashes {
        return Err(corrupt(format!(
            "bloom.bin has bits={} hashes={}, metadata says bits={} hashes={}",
            params.bits, params.hashes, meta.bloom_bits, meta.bloom_hashes
        )));
    }
    Ok((meta, bloom))
}
