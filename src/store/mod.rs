//! The persistent crawl state: frontier, seen set, items, seeds, runs and counters.
//!
//! One data directory holds a sled database (`db/`), the memory-mapped Bloom filter
//! (`bloom.bin`), a marker file naming the format (`LEGCRAWL`) and, while a crawl
//! runs, `status.json`. A [`State`] is owned by one task of one process (the
//! directory is locked while it is open), so it takes `&mut self` and needs no
//! locking of its own.
//!
//! # Map
//! - `dir`: the directory's lock and marker, and creating a state (crash-safe).
//! - `db`: opening sled, the metadata record, the format version.
//! - `commit`: the commit protocol — [`State::seal`] → [`Flush`] (any thread) →
//!   [`Receipt`] → [`State::durable`]; [`State::commit`] does all of it.
//! - `checkpoint`: detached checkpoints — [`State::start_checkpoint`] →
//!   [`Checkpoint`] (any thread) → [`State::checkpointed`].
//! - The namespaces, each in its file: `frontier` (queue `q`, host index `h`/`H`,
//!   leases in memory), `seen` (dedup, enqueue, completions, seeds `d`, journal
//!   replay), `exact` (the exact seen set's runs `S` and index `e`), `items`
//!   (`i`), `pages` (page records `p`, due index `v`, cycle start `y`), `runs`
//!   (`r`, counters `c`), `robots` (`R`, blocked `b`), `output` (watermarks `o`);
//!   `keys` is the key layout of all of them, `records` the serde records.
//! - `views`: what `dump` reads; `status`: the live status file.
//! - `crash`: the named crash points — the one table of every step at which
//!   the state writes or syncs.
//! - `repair`: damage — sled panics caught, the durable record against silent
//!   rollbacks, a trial open of a copy of `db/`, the Bloom filter rebuilt from
//!   the exact set, `legcrawl repair`.
//!
//! # Invariants
//! - **Atomic completion.** Completing a lease removes its queue entry and inserts
//!   the page's items, the new requests and their fingerprints in one sled batch.
//!   Completions are grouped: a group is one batch ([`State::seal`]) applied and
//!   made durable by one flush ([`Flush`]), which the engine runs on another
//!   thread while the next group fills; only its [`Receipt`] makes it count.
//! - **Leases live in memory.** A leased request stays in the queue tree until its
//!   completion is durable, so a process that dies leaves every unfinished request
//!   queued: nothing has to be "returned" on open.
//! - **Bloom never runs ahead.** Fingerprints of the open group sit in an in-memory
//!   overlay; they reach the mapped bits only after the group's batch (which holds a
//!   journal entry of them) is durable. On open the journal is replayed; a
//!   checkpoint syncs the bits and then drops the journal entries they cover.
//! - **Multi-step writes are crash-safe.** Creation writes a *creating* marker
//!   first and the final one last; a checkpoint writes its new run before the
//!   index points to it and removes replaced runs only after; every step is a
//!   crash point, and the crash-point suite crashes at each.
//!
//! Depends on [`crate::bloom`], [`crate::fingerprint`], [`crate::request`],
//! [`crate::item`] and [`crate::config`]; never on the fetcher or the legs.

mod checkpoint;
mod commit;
pub mod crash;
mod db;
mod dir;
mod exact;
mod frontier;
mod items;
pub mod keys;
mod output;
pub mod pages;
pub mod records;
pub mod repair;
mod robots;
mod runs;
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

use crate::bloom::{BloomError, BloomFile};
use crate::config::DedupMode;
use crate::fingerprint::Fingerprint;
use records::{Counters, Meta, RecordError, RunRecord};

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
    /// The database is damaged: sled failed or panicked while opening or reading it.
    /// Nothing of the state was written.
    #[error(
        "{path}: damaged database: {reason}; the state was left as it is (restore the directory from a copy)"
    )]
    Damaged {
        /// The database directory (`db/`).
        path: PathBuf,
        /// What sled said.
        reason: String,
    },
    /// The database holds less than the durable record says was made durable: it
    /// lost committed groups without an error (see `repair`).
    #[error(
        "{path}: the database lost committed data (rolled back from {expected} to {found} {what}); refusing to continue on it: restore the state directory from a copy"
    )]
    RolledBack {
        /// The database directory (`db/`).
        path: PathBuf,
        /// What was counted.
        what: &'static str,
        /// What the durable record says.
        expected: u64,
        /// What the database holds.
        found: u64,
    },
    /// The Bloom filter of a `bloom`-mode state is damaged: it is the only record
    /// of the seen set, so it cannot be rebuilt.
    #[error(
        "{path}: {reason}; in bloom dedup mode the filter is the only record of the seen set, so it cannot be rebuilt: restore bloom.bin from a copy of the state, or start again with `legcrawl crawl URL --fresh`"
    )]
    BloomLost {
        /// The filter file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
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
    /// sled's page cache in bytes; `None` = [`DEFAULT_CACHE_BYTES`].
    pub cache_bytes: Option<u64>,
}

/// sled's page cache unless set (sled's own default is 1 GiB).
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

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
    completed: Vec<frontier::QueueEntry>,
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
    /// The durable record, written after each group's sync (see `repair`).
    durable_log: std::sync::Arc<repair::DurableLog>,
    /// Records a clean close; the last field, so dropped after the database.
    close: repair::CloseRecord,
}

impl State {
    /// Opens (or, with `options.create`, creates) the state in `dir`.
    pub fn open(dir: &Path, options: &OpenOptions) -> Result<State, StoreError> {
        let (lock, found) = dir::prepare(dir, options.create)?;
        if found == dir::Found::Create {
            dir::mark_creating(dir)?;
        }
        let (db, opened) = db::open_db(dir, options.cache_bytes)?;
        // A panic of sled on a damaged database is an error (see `repair`).
        let db_dir = dir.join("db");
        let made = repair::guard(&db_dir, || match found {
            dir::Found::Create => db::create_meta(dir, &db, options),
            dir::Found::State => db::load_meta(dir, &db, options, opened),
        });
        let (meta, bloom) = match made {
            Ok(made) => made,
            Err(error) if found == dir::Found::Create => {
                // A creation that failed (a full disk) leaves nothing behind.
                drop(db);
                dir::undo_creation(dir);
                return Err(error);
            }
            Err(error) => return Err(error),
        };
        let (durable_log, recorded) = repair::DurableLog::open(dir)?;
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
            durable_log: std::sync::Arc::new(durable_log),
            close: repair::CloseRecord::new(dir),
        };
        repair::guard(&db_dir, || {
            state.load_hosts()?;
            state.load_counters()?;
            state.load_exact()?;
            state.next_item = state.load_next_item()?;
            repair::check_durable(dir, &state.durable_log, recorded, state.durable_found())?;
            state.durable_items = state.next_item;
            state.next_group = state.replay_journal()?;
            state.journal_end = state.next_group;
            Ok(())
        })?;
        state.close_dead_runs()?;
        if options.begin_run {
            state.begin_run()?;
        }
        state.close.arm();
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
        repair::classify(&self.dir, source)
    }
}
