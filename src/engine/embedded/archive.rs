//! The engine's side of `--warc`: captured exchanges go to the WARC files in
//! step with group commit, with their marks kept in the state.
//!
//! A completed page's captures are appended when it is completed into the open
//! group; robots.txt exchanges when their answers are put into the group about
//! to be sealed. A new file is registered in the state (length 0, synced)
//! before it is created. Before a group is sealed, [`Embedded::archive_seal`]
//! puts the file's length into it and returns the sync its flush runs first
//! (see [`crate::warc`] for why that makes the files exact). A WARC write
//! that fails fails the open group's completions with it: the state writes
//! nothing more, so no page is durable without its records. Depends on the
//! store and [`crate::warc`].

use super::{Embedded, EngineError};
use crate::fetch::Exchange;
use crate::store::State;
use crate::warc::{Appended, WarcError, WarcSettings, WarcSync, WarcWriter};

/// Opens the WARC directory of `settings` with the marks `state` keeps there.
pub(super) fn open(settings: WarcSettings, state: &State) -> Result<WarcWriter, WarcError> {
    let dir = crate::warc::canonical_dir(&settings.dir)?;
    let marks = state.warc_marks(&dir)?;
    WarcWriter::open(settings, marks)
}

/// Appends `records`, registering a new file in `state` first when one is
/// needed; returns the offset they begin at, and the new file's id.
fn append(
    warc: &mut WarcWriter,
    state: &mut State,
    records: &[u8],
) -> Result<(u64, Option<u32>), WarcError> {
    match warc.append(records)? {
        Appended::Written(at) => Ok((at, None)),
        Appended::NeedsFile(new) => {
            let id = state.register_warc(new.path())?;
            Ok((warc.begin(new, records)?, Some(id)))
        }
    }
}

impl Embedded<'_> {
    /// Appends a completed page's records (nothing without `--warc`);
    /// returns where they begin: the file's id and the offset.
    pub(super) fn archive(&mut self, records: &[u8]) -> Result<Option<(u32, u64)>, EngineError> {
        let Some(warc) = self.warc.as_mut() else {
            return Ok(None);
        };
        if records.is_empty() {
            return Ok(None);
        }
        let (at, new) = match append(warc, self.state, records) {
            Ok(appended) => appended,
            Err(error) => return Err(self.warc_failed(error)),
        };
        let Some(path) = warc.current_path() else {
            return Ok(None);
        };
        let id = match (new, &self.warc_file) {
            (Some(id), _) => id,
            (None, Some((known, id))) if known == path => *id,
            // The file a run goes on with: its id is looked up once.
            (None, _) => self.state.warc_file_id(path)?,
        };
        if self
            .warc_file
            .as_ref()
            .is_none_or(|(known, _)| known != path)
        {
            self.warc_file = Some((path.to_owned(), id));
        }
        Ok(Some((id, at)))
    }

    /// Appends robots.txt exchanges whose answers join the open group.
    pub(super) fn archive_robots(&mut self, exchanges: Vec<Exchange>) -> Result<(), EngineError> {
        if let Some(warc) = self.warc.as_mut()
            && !exchanges.is_empty()
            && let Err(error) = append(warc, self.state, &crate::warc::encode_exchanges(exchanges))
        {
            return Err(self.warc_failed(error));
        }
        Ok(())
    }

    /// Marks what the open group's records reach; the returned sync must run
    /// before the group's batch is applied.
    pub(super) fn archive_seal(&mut self) -> Result<Option<WarcSync>, EngineError> {
        let Some(warc) = self.warc.as_mut() else {
            return Ok(None);
        };
        let mark = match warc.mark() {
            Ok(Some(mark)) => mark,
            Ok(None) => return Ok(None),
            Err(error) => return Err(self.warc_failed(error)),
        };
        self.state.mark_warc(&mark.path, mark.len);
        // The group takes the mark, or the run ends before its flush and the
        // next open cuts back to the durable one.
        warc.marked(mark.len);
        warc.rotate_if_full();
        Ok(Some(mark.sync))
    }

    /// At the end of a run however it ended: records not yet marked are synced
    /// and marked in the open group, which the end of the run commits.
    pub(super) fn archive_finish(&mut self) -> Result<(), EngineError> {
        if let Some(sync) = self.archive_seal()?
            && let Err(error) = sync.run()
        {
            return Err(self.warc_failed(error));
        }
        Ok(())
    }

    /// A write, flush or sync of the WARC files failed (a full disk, an I/O
    /// error): the records of the open group's completions may not all be in
    /// the file, so none of those completions may become durable. The state
    /// writes nothing more (as after a failed flush): the run ends, the next
    /// one cuts the files back to their durable marks and fetches those pages
    /// again, writing their records then. A failed sync on the flush thread
    /// fails that flush the same way.
    fn warc_failed(&mut self, error: WarcError) -> EngineError {
        self.state.flush_failed(&error);
        error.into()
    }
}
