//! Reads beside the crawl that holds the state: a [`ReadHandle`] is what the
//! crawl's [`State`] hands out (cheap to clone, thread-safe), and
//! [`State::beside`] opens from it a read-only `State` of the same database
//! on the reader's own thread, so every read method (and every view written
//! against them) answers there as it answers on an idle state.
//!
//! What a reader sees:
//! - sled's tree as the crawl's flush thread last applied it (sled reads run
//!   concurrently with its writes; no lock of the crawl is taken);
//! - the items below the durable end the crawl publishes after each group's
//!   receipt: what [`State::deliver`] would hand out, never an item a
//!   `kill -9` could still lose;
//! - the Bloom bits as the crawl set them (those of durable groups), and the
//!   exact set and page-id index as the open reads them from disk;
//! - no leases (they live in the crawl's memory): requests in flight are
//!   listed as queued.
//!
//! A reader writes nothing: its `Db` refuses every write
//! ([`StoreError::ReadOnly`]), replays no journal into the Bloom bits, repairs
//! no damaged run (a checkpoint that merged a run away between the index read
//! and the file's open makes the open try again), holds no lock and records no
//! close. Depends on the tables' loads, `table`, `durable` and
//! [`crate::bloom`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::durable::{CloseRecord, DurableLog};
use super::error::StoreError;
use super::options::DedupMode;
use super::records::Meta;
use super::table::Db;
use super::{CHECKPOINT_EVERY, Group, State};
use super::{frontier, items, pages, panics, runs, seen};
use crate::bloom::BloomFile;

/// How often [`State::beside`] opens again when a table's files changed
/// under it (a checkpoint's merge) before it gives up.
const ATTEMPTS: usize = 3;

/// What a reader beside the crawl needs to open the state read-only (see the
/// module doc): the database (a reader's handle), the state's fixed facts and
/// the items' durable end the crawl publishes.
#[derive(Clone)]
pub struct ReadHandle {
    /// The crawl's database, as a reader's handle.
    db: Db,
    /// The metadata record as the crawl opened it.
    meta: Meta,
    dedup: DedupMode,
    /// The crawl's durable record (read by nobody here; a `State` holds one).
    durable_log: Arc<DurableLog>,
    /// Items below this are durable; the crawl raises it after each receipt.
    durable_items: Arc<AtomicU64>,
}

impl ReadHandle {
    /// The state directory.
    pub fn dir(&self) -> &std::path::Path {
        self.db.dir()
    }

    /// The items' durable end as the crawl last published it.
    pub fn durable_items(&self) -> u64 {
        self.durable_items.load(Ordering::Acquire)
    }
}

impl State {
    /// A handle from which readers on other threads open this state
    /// read-only ([`State::beside`]) while this process crawls on it.
    pub fn read_handle(&self) -> ReadHandle {
        ReadHandle {
            db: self.db.reader(),
            meta: self.meta.clone(),
            dedup: self.seen.dedup,
            durable_log: Arc::clone(&self.durable_log),
            durable_items: Arc::clone(&self.durable_items),
        }
    }

    /// Opens the state of `handle` read-only, beside the crawl that holds it
    /// (see the module doc). Loads what an open loads (the host index, the
    /// counters, the exact set's index, the page-id index, the Bloom file's
    /// map), so it costs about what opening the state costs, minus the
    /// journal's replay.
    pub fn beside(handle: &ReadHandle) -> Result<State, StoreError> {
        let mut attempt = 1;
        loop {
            match open_beside(handle) {
                Ok(state) => return Ok(state),
                Err(error) if attempt >= ATTEMPTS => return Err(error),
                Err(error) => {
                    tracing::debug!(%error, attempt, "reading beside the crawl: opening again");
                    attempt += 1;
                }
            }
        }
    }

    /// Reads again, into a state opened by [`State::beside`], what the
    /// views of the queue, the runs and the items take from memory: the
    /// items' durable end, the host index and the counters. What else an
    /// open loaded (the exact set, the page-id index, the Bloom file's map)
    /// stays as it was, so only a view that reads none of them (`dump
    /// items`, `runs`, `frontier`, `pages` without `--due`, `job`,
    /// `blocked`) may use a state refreshed so; a cheap refresh for a loop
    /// of such dumps.
    pub fn refresh_beside(&mut self, handle: &ReadHandle) -> Result<(), StoreError> {
        let durable_items = handle.durable_items();
        let meta = &handle.meta;
        self.frontier = frontier::Frontier::load(&self.db, meta.next_host_id, meta.next_queue_seq)?;
        self.runs = runs::Runs::load(&self.db)?;
        self.items = items::Items::beside(durable_items);
        Ok(())
    }

    /// True for a state opened by [`State::beside`].
    pub fn is_beside(&self) -> bool {
        self.db.is_reader()
    }

    /// Keeps `guard` until the state closes, and drops it before anything
    /// else of the state (the database first of all): a server of reads
    /// beside the crawl ends its readers there, which hold the database.
    pub fn close_first(&mut self, guard: Box<dyn Send + Sync>) {
        self.close_first = Some(guard);
    }
}

/// One attempt of [`State::beside`].
fn open_beside(handle: &ReadHandle) -> Result<State, StoreError> {
    let db = handle.db.clone();
    let dir = db.dir().to_owned();
    // Read first: every item below it is in the tree already.
    let durable_items = handle.durable_items();
    let (frontier, runs, seen, pages) = panics::guard(&dir.join("db"), || {
        let bloom = BloomFile::open(&dir.join("bloom.bin"))?;
        let meta = &handle.meta;
        let frontier = frontier::Frontier::load(&db, meta.next_host_id, meta.next_queue_seq)?;
        let runs = runs::Runs::load(&db)?;
        let seen = seen::SeenSet::load(&db, bloom, handle.dedup, CHECKPOINT_EVERY)?;
        let pages = pages::Pages::load(&db)?;
        Ok((frontier, runs, seen, pages))
    })?;
    Ok(State {
        close_first: None,
        _lock: None,
        db,
        meta: handle.meta.clone(),
        frontier,
        seen,
        pages,
        items: items::Items::beside(durable_items),
        runs,
        group: Group::default(),
        sealed: None,
        sealed_seq: 0,
        durable_log: Arc::clone(&handle.durable_log),
        durable_items: Arc::new(AtomicU64::new(durable_items)),
        // Never armed: a reader records no close.
        close: CloseRecord::new(&dir),
    })
}
