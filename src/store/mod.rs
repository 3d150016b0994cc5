//! The persistent crawl state: frontier, seen set, page records, items, runs
//! and counters.
//!
//! One data directory holds a sled database (`db/`, one tree), the
//! memory-mapped Bloom filter (`bloom.bin`), sorted-run files (`runs/`), the
//! durable record (`durable`) and the marker (`LEGCRAWL`); `docs/state.md`
//! describes the layout. A [`State`] is owned by one task of one process (the
//! directory is locked while it is open), so it takes `&mut self` and has no
//! locks of its own; readers in that process open read-only `State`s of the
//! same database on threads of their own (`beside`).
//!
//! # Map
//! - Bottom: `format` (version, marker), `error` ([`StoreError`]), `options`
//!   (the dedup mode).
//! - Opening: `dir` (lock, marker, creation), `db` (sled, the metadata record
//!   `m`), `durable` (the durable and close records), `panics` and `repair`
//!   (damage), `sizing` (the Bloom filter's growth).
//! - `table`: `Db` (reads, and `commit_now`, the one write to sled), `Batch`
//!   (what one commit writes) and `Table<Key, Codec>` (a namespace with its
//!   encodings); `keys`: key helpers; `records`: the serde records.
//! - The tables. Each owns its namespaces and encodings, reads through `Db`,
//!   writes into a `Batch`, and calls no other table: `frontier` (`q`, laid
//!   out by `queue`; `h`/`H`; leases in memory), `seen` (journal `j`, the Bloom
//!   filter, and `exact`: index `e` and its runs), `pages` (blocks `P` by
//!   `pageblock`, page-id index `k` by `pageids`, due index `u` by `due`,
//!   policy `V`), `items` (`i`, output cursors `O`), `runs` (`r`, `c`, `d`,
//!   `y`), `jobs` (`J`), `robots` (`R`, `b`), `warc` (`w`), `cookies` (`K`),
//!   `unreachable` (`U`).
//! - `sorted` and `runfile`: the sorted runs in `runs/` behind `exact` and
//!   `pageids`.
//! - The [`State`] methods that compose tables: `ops` (enqueue, complete,
//!   seeds, cycle start, runs, robots), `commit` ([`State::seal`] → [`Flush`]
//!   → [`Receipt`] → [`State::durable`]), `checkpoint` ([`Checkpoint`]),
//!   `side` (cookie jar, WARC marks, output cursors, unreachable hosts),
//!   `sink` ([`State::deliver`] to a [`Sink`]), and the read-only `views`
//!   (`dump`) and `queues` (the snapshot).
//! - `beside`: [`ReadHandle`], from which a reader opens a read-only
//!   [`State`] of the same database beside the crawl that holds it
//!   ([`State::beside`]): every write refused, the items cut at the durable
//!   end the crawl publishes.
//! - `committer`: the [`Committer`], which owns the flush and checkpoint
//!   threads.
//!
//! # Invariants
//! - **Atomic completion.** A completion (its queue entry removed; the page's
//!   record, items, new requests and fingerprints added) is part of one group,
//!   and a group is one sled batch, applied and synced by one [`Flush`]; only
//!   its [`Receipt`] makes it count. A page with more than [`LINK_CHUNK`]
//!   links queues the rest ahead in groups of their own
//!   ([`State::queue_links`], crash point `links.chunk`); its completion comes
//!   last.
//! - **Leases live in memory.** A leased request stays queued until its
//!   completion is durable, so a crash leaves every unfinished request queued.
//! - **Bloom never runs ahead.** A group's fingerprints reach the mapped bits
//!   only after its batch (with their journal entry) is durable; open replays
//!   the journal; a checkpoint syncs the bits, then drops the entries they
//!   cover.
//! - **Multi-step writes are crash-safe.** Creation writes a *creating*
//!   marker first and the final one last; a checkpoint or a Bloom rebuild
//!   writes its new file before anything points to it and removes what it
//!   replaced only after. Every step boundary is a named crash point
//!   ([`crate::crash`]).
//!
//! Depends on [`crate::bloom`], [`crate::fingerprint`], [`crate::request`],
//! [`crate::item`], [`crate::canon`] (host names), [`crate::crash`],
//! [`crate::fsync`] and [`crate::dirlock`]; never on the configuration, the
//! fetcher, the legs or the engine.

mod beside;
mod checkpoint;
mod commit;
mod committer;
mod cookies;
mod cycle;
mod db;
mod dir;
mod due;
mod durable;
mod error;
mod exact;
mod format;
mod frontier;
mod items;
mod jobs;
pub(crate) mod keys;
mod ops;
mod options;
mod pageblock;
mod pageids;
pub(crate) mod pages;
mod panics;
mod queue;
pub mod queues;
pub mod records;
pub mod repair;
mod robots;
mod runfile;
mod runs;
mod seen;
mod side;
mod sink;
pub mod sizing;
mod sorted;
mod table;
#[cfg(test)]
mod tests;
mod unreachable;
mod views;
mod warc;

use std::path::Path;

pub use beside::ReadHandle;
pub use checkpoint::{Checkpoint, Checkpointed};
pub use commit::{CommitOutcome, Flush, Receipt};
pub use committer::{Committer, Ended};
pub use cycle::{BUDGET_CHUNK, Budget, TopWorth};
pub use dir::holds_nothing;
pub use error::StoreError;
pub use format::{LAST_BUILD_READING_OLD_FORMATS, MARKER_FILE, STATE_FORMAT};
pub use frontier::Lease;
pub(crate) use frontier::host_of;
pub use items::OutputCursor;
pub use ops::{Completion, seed_request};
pub use options::DedupMode;
pub use pages::{ChangeEvidence, CycleStart, PageRecord, StoredRequest, WarcAt, Withdrawn};
pub(crate) use pages::{decode_page, encode_page};
pub use robots::Blocked;
pub use seen::Seen;
pub use sink::{Each, Sink};
pub use unreachable::UnreachableHost;
pub use views::{FrontierEntry, PEAK_RSS, SeenAnswer, Summary};

use crate::crash;
use records::Meta;

/// At most this many completed pages are not durable at any time: a group is
/// sealed at half of it, and the next fills while the previous one flushes...
pub const GROUP_MAX_PAGES: usize = 64;
/// ...or when its oldest completion is this old.
pub const GROUP_MAX_AGE: std::time::Duration = std::time::Duration::from_millis(20);
/// A checkpoint (msync of the Bloom map, journal truncated) is due after this long...
pub const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
/// ...or after this many journaled fingerprints, whichever comes first; this bounds
/// the journal's size, the replay work of an open after a crash, and the exact
/// set's in-memory part: the fingerprints recorded since the last checkpoint
/// (`recent`, 2^18 × 20 bytes in a hash set of 2^19 slots, about 11 MiB) and
/// those a running checkpoint seals (as many again, plus their sorted copy).
/// While a checkpoint runs, `recent` may pass this bound by at most one group;
/// then [`State::checkpoint_behind`] tells the engine to wait for it.
pub const CHECKPOINT_MAX_JOURNALED: u64 = 1 << 18;
/// A page's links are queued at most this many per commit group: a page with
/// more is queued part by part ([`State::queue_links`]), each part in a group of
/// its own, and completed with its last part. So no group holds more than this
/// many of one page's new requests (queue records, journal entry, overlay), and
/// a crash between parts loses nothing: the page is not complete, so it is
/// fetched again, and the links of the parts already durable are found in the
/// seen set (and queued) while the rest are queued then.
pub const LINK_CHUNK: usize = 4096;

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

/// Makes a new state in the database `db` opened in an empty directory: its
/// Bloom file and metadata record (crash point `create.meta` before the
/// record), then the marker that says the state is complete, written last.
fn create(
    db: &table::Db,
    options: &OpenOptions,
) -> Result<(Meta, DedupMode, crate::bloom::BloomFile), StoreError> {
    let (meta, dedup, bloom) = db::new_meta(db.dir(), options)?;
    let mut batch = table::Batch::default();
    db::META.put(&mut batch, &(), &meta);
    crash::point("create.meta");
    db.commit_now(batch, table::Durability::Synced(|| ()))?;
    dir::mark_complete(db.dir())?;
    Ok((meta, dedup, bloom))
}

/// The open, uncommitted completion group.
#[derive(Default)]
struct Group {
    /// What the tables wrote for it so far.
    batch: table::Batch,
    /// Pages it completed.
    pages: usize,
    /// When its first change came.
    opened_at: Option<std::time::Instant>,
}

/// An open crawl state: the tables, the open group, and the sealed one. See
/// the module documentation for its invariants.
pub struct State {
    /// What must end before the database closes (the server of reads
    /// beside the crawl, see `beside`): the first field, so dropped first.
    close_first: Option<Box<dyn Send + Sync>>,
    /// The directory's exclusive lock, held while the state is open (a
    /// reader beside the crawl holds none).
    _lock: Option<dir::DirLock>,
    db: table::Db,
    meta: Meta,
    frontier: frontier::Frontier,
    seen: seen::SeenSet,
    pages: pages::Pages,
    items: items::Items,
    runs: runs::Runs,
    group: Group,
    /// The group sealed and not yet durable (see [`State::seal`]).
    sealed: Option<commit::Sealed>,
    /// Groups sealed by this process so far (the last one's `seq`).
    sealed_seq: u64,
    /// The durable record, written after each group's sync (see `durable`).
    durable_log: std::sync::Arc<durable::DurableLog>,
    /// The items' durable end, published for readers beside the crawl (see
    /// `beside`) after each group's receipt.
    durable_items: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Records a clean close; the last field, so dropped after the database.
    close: durable::CloseRecord,
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
        let db = table::Db::new(db, dir);
        let made = panics::guard(&db_dir, || match found {
            dir::Found::Create => create(&db, options),
            dir::Found::State => db::load_meta(dir, &db, options, opened),
        });
        let (meta, dedup, bloom) = match made {
            Ok(made) => made,
            Err(error) if found == dir::Found::Create => {
                // A creation that failed (a full disk) leaves nothing behind.
                drop(db);
                dir::undo_creation(dir);
                return Err(error);
            }
            Err(error) => return Err(error),
        };
        let (durable_log, recorded) = durable::DurableLog::open(dir)?;
        let every = options.checkpoint_every.unwrap_or(CHECKPOINT_EVERY);
        // The tables' loads read the whole index of the database: a panic of
        // sled there is damage too, and a database holding less than the
        // durable record says is refused before anything is written.
        let (frontier, runs, items, seen, pages) = panics::guard(&db_dir, || {
            let frontier = frontier::Frontier::load(&db, meta.next_host_id, meta.next_queue_seq)?;
            let runs = runs::Runs::load(&db)?;
            let items = items::Items::load(&db)?;
            let found = durable::Durable {
                items: items.len(),
                pages: runs.counter("pages/completed"),
            };
            durable::check_durable(dir, &durable_log, recorded, found)?;
            let seen = seen::SeenSet::load(&db, bloom, dedup, every)?;
            let pages = pages::Pages::load(&db)?;
            Ok((frontier, runs, items, seen, pages))
        })?;
        runs.close_dead(&db)?;
        let durable_items = std::sync::Arc::new(items.durable_end().into());
        let mut state = State {
            close_first: None,
            _lock: Some(lock),
            db,
            meta,
            frontier,
            seen,
            pages,
            items,
            runs,
            group: Group::default(),
            sealed: None,
            sealed_seq: 0,
            durable_log: std::sync::Arc::new(durable_log),
            durable_items,
            close: durable::CloseRecord::new(dir),
        };
        // From here on, a crash leaves files only this program wrote.
        durable::mark_open(dir);
        if options.begin_run {
            state.begin_run(None)?;
        }
        state.close.arm();
        Ok(state)
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        self.db.dir()
    }

    /// The dedup mode fixed at creation.
    pub fn dedup(&self) -> DedupMode {
        self.seen.dedup
    }

    /// The Bloom filter's shape fixed at creation: log2 of its bits (`None`
    /// when it is sized to the crawl, see [`sizing`]), and its hash count.
    pub fn bloom_shape(&self) -> (Option<u8>, u8) {
        let bits = (!self.meta.bloom_sized).then_some(self.meta.bloom_bits);
        (bits, self.meta.bloom_hashes)
    }

    /// Requests in flight (leased and not yet committed).
    pub fn in_flight(&self) -> usize {
        self.frontier.leased()
    }

    /// Requests in the queue, in flight included.
    pub fn frontier_len(&self) -> u64 {
        self.runs.counter("frontier/queued")
    }

    /// Items stored.
    pub fn items_len(&self) -> u64 {
        self.items.len()
    }

    /// Begins a run under the job `job` (a crawl file, see [`crate::job`]):
    /// a job that differs from the newest stored version becomes the next
    /// version, written in the same batch as the run's begin record (crash
    /// points `run.job`, then `run.begin`), so a job version never exists
    /// without the run that first used it. `None` records a run without a
    /// job. Returns the job version the run runs under.
    pub fn begin_run(&mut self, job: Option<&str>) -> Result<Option<u64>, StoreError> {
        let mut batch = table::Batch::default();
        let version = match job {
            None => None,
            Some(text) => match jobs::latest(&self.db)? {
                Some(latest) if latest.text == text => Some(latest.version),
                latest => {
                    let record = records::JobRecord {
                        version: latest.map_or(1, |j| j.version + 1),
                        created_at: records::unix_now(),
                        first_run: self.runs.next_id(&self.db)?,
                        text: text.to_owned(),
                    };
                    crash::point("run.job");
                    jobs::put(&mut batch, &record);
                    Some(record.version)
                }
            },
        };
        self.runs
            .begin(&self.db, self.items.len(), version, batch)?;
        Ok(version)
    }

    /// The number of the run under way (begun and not ended), if any.
    pub fn current_run(&self) -> Option<u64> {
        self.runs.run().map(|run| run.id)
    }

    /// Adds `by` to the counter `name`, globally and for this run (written
    /// with the open group).
    pub fn count(&mut self, name: &str, by: u64) {
        self.runs.count(name, by);
    }

    /// The newest version of the crawl's job, if one is stored.
    pub fn latest_job(&self) -> Result<Option<records::JobRecord>, StoreError> {
        jobs::latest(&self.db)
    }

    /// Job version `version`, if stored.
    pub fn job(&self, version: u64) -> Result<Option<records::JobRecord>, StoreError> {
        jobs::get(&self.db, version)
    }
}
