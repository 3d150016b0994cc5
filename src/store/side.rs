//! The state's methods over its side tables, the small ones the engine reads
//! and writes beside the crawl: the cookie jar (`cookies`), WARC marks
//! (`warc`), `--output` cursors (`items`) and unreachable hosts
//! (`unreachable`). Here the state hands them its database and its open group,
//! so no table sees the `State`. Depends on those tables, `frontier` (host
//! names) and `error`.

use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::items::{self, OutputCursor};
use super::unreachable::{self, UnreachableHost};
use super::{State, cookies, warc};

impl State {
    /// The stored cookie jar, if a run kept one.
    pub fn cookies(&self) -> Result<Option<Vec<u8>>, StoreError> {
        cookies::read(&self.db)
    }

    /// Puts `jar` into the open group: it is stored with the group's
    /// completions (crash point: group.apply), so it is durable exactly when
    /// the completions of the pages that set its cookies are.
    pub fn put_cookies(&mut self, jar: &[u8]) {
        cookies::put(&mut self.group.batch, jar);
    }

    /// Records, in the open group, that the first `len` bytes of `file` (a
    /// canonical path) hold only records of this group's and earlier groups'
    /// completions. The caller syncs the file before the group's flush runs.
    pub fn mark_warc(&mut self, file: &Path, len: u64) {
        warc::mark(&mut self.group.batch, file, len);
    }

    /// Registers a new WARC file `file` (a canonical path) with length 0 and
    /// an id, and makes that durable, before the file is created (crash point
    /// `warc.create`); returns the id.
    pub fn register_warc(&mut self, file: &Path) -> Result<u32, StoreError> {
        warc::register(&self.db, file)
    }

    /// The id of the registered WARC file `file` (a canonical path), given
    /// (durably) if it has none yet: what a page record's
    /// [`super::WarcAt`] names it by.
    pub fn warc_file_id(&mut self, file: &Path) -> Result<u32, StoreError> {
        warc::file_id(&self.db, file)
    }

    /// The canonical path of the WARC file with id `id`, if there is one.
    pub fn warc_file(&self, id: u32) -> Result<Option<PathBuf>, StoreError> {
        warc::file(&self.db, id)
    }

    /// Every WARC file with an id, in id order.
    pub fn warc_files(&self) -> Result<Vec<(u32, PathBuf)>, StoreError> {
        warc::files(&self.db)
    }

    /// The marks of the WARC files in `dir` (a canonical path), in name order:
    /// `(file, valid length)`.
    pub fn warc_marks(&self, dir: &Path) -> Result<Vec<(PathBuf, u64)>, StoreError> {
        warc::marks(&self.db, dir)
    }

    /// The cursor of the output path `path` (made absolute through its
    /// directory, see [`crate::engine::sink`]), if this state has one.
    pub fn output_cursor(&self, path: &Path) -> Result<Option<OutputCursor>, StoreError> {
        items::cursor(&self.db, path)
    }

    /// Records the cursor of the output path `path` and makes it durable at
    /// once (crash point `output.watermark` for a path without one yet,
    /// `output.cursor` otherwise): the sink does so when it opens the file,
    /// before it writes a line. It replaces a cursor handed over before.
    pub fn record_output(&mut self, path: &Path, cursor: &OutputCursor) -> Result<(), StoreError> {
        self.items.record_output(&self.db, path, cursor)
    }

    /// Hands over the cursor of the output path `path` after the sink wrote
    /// lines: it becomes durable with the open group when that group holds
    /// anything, or else is written at once and becomes durable with the
    /// next sync of the database (crash point `output.advance`); no sync is
    /// made for it. Items are streamed only after their group is durable, so
    /// a durable cursor lags the file by at most the lines of the last group
    /// streamed.
    pub fn advance_output(&mut self, path: &Path, cursor: &OutputCursor) -> Result<(), StoreError> {
        self.items
            .advance(&self.db, &self.group.batch, path, cursor)
    }

    /// Hosts that failed on the network in their last runs, parked or not.
    pub fn unreachable_hosts(&self) -> Result<Vec<UnreachableHost>, StoreError> {
        unreachable::all(&self.db)
    }

    /// Records, in the open group, that no connection could be made to `host`
    /// in run `run` (once per run: a second note of the same run changes
    /// nothing) at `now`, with `error`; `park(runs)` says until when the host
    /// is parked after `runs` failed runs in a row. Returns the new record.
    pub fn note_unreachable(
        &mut self,
        host: &str,
        run: u64,
        now: u64,
        error: &str,
        park: impl Fn(u32) -> Option<u64>,
    ) -> Result<UnreachableHost, StoreError> {
        unreachable::note(
            &self.db,
            &mut self.group.batch,
            host,
            (run, now),
            error,
            park,
        )
    }

    /// Forgets, in the open group, that `host` failed: it answered, or the user
    /// asked for it to be tried again. True when it had a record.
    pub fn note_reachable(&mut self, host: &str) -> Result<bool, StoreError> {
        unreachable::forget(&self.db, &mut self.group.batch, host)
    }

    /// Forgets the failed runs of the hosts of `urls` (`legcrawl seeds add` of
    /// a known seed: the next run tries it). Commits; returns the hosts that
    /// had a record.
    pub fn try_hosts_again(&mut self, urls: &[String]) -> Result<Vec<String>, StoreError> {
        let mut again = Vec::new();
        for url in urls {
            let host = super::frontier::host_of(url);
            if !again.contains(&host) && self.note_reachable(&host)? {
                again.push(host);
            }
        }
        self.commit()?;
        Ok(again)
    }
}
