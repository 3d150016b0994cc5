//! The crawl file a state runs with: `crawl.toml` in the state directory, a
//! copy of the file the last `crawl --config FILE` read, whose first line names
//! where it came from. A crawl without `--config` reads it (`legcrawl crawl
//! --data D` continues the crawl the file started), and anyone can `cat` it.
//!
//! It is replaced whole (a temporary file beside it, synced, then renamed;
//! crash point `state.crawl_file`), so a reader sees the old copy or the new
//! one, never a mix; it is written only while the state is open (under the
//! directory's lock). Depends on [`crate::config`].

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{State, StoreError, crash};
use crate::config::CrawlFileCopy;

/// Name of the copy in the state directory.
pub const CRAWL_FILE: &str = "crawl.toml";
/// Its first line, before the original path.
const HEADER: &str = "# legcrawl: the crawl file this state runs with, copied from ";

/// The crawl file the state in `dir` remembers, if any. A copy without its
/// header line is not legcrawl's and is an error naming it.
pub fn remembered_crawl_file(dir: &Path) -> Result<Option<CrawlFileCopy>, StoreError> {
    let path = dir.join(CRAWL_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        // No copy, or no directory at all (opening the state says what is wrong).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || !dir.is_dir() => return Ok(None),
        Err(source) => return Err(StoreError::Io { path, source }),
    };
    let parsed = text
        .strip_prefix(HEADER)
        .and_then(|rest| rest.split_once('\n'));
    match parsed {
        Some((from, body)) => Ok(Some(CrawlFileCopy {
            path: PathBuf::from(from),
            text: body.to_owned(),
        })),
        None => Err(StoreError::Corrupt {
            path: dir.to_owned(),
            what: CRAWL_FILE.into(),
            reason: "its first line does not say where it was copied from".into(),
        }),
    }
}

impl State {
    /// Remembers `copy` as the crawl file this state runs with (nothing is
    /// written when it is the one remembered already).
    pub fn remember_crawl_file(&self, copy: &CrawlFileCopy) -> Result<(), StoreError> {
        let dir = self.dir();
        if remembered_crawl_file(dir).ok().flatten().as_ref() == Some(copy) {
            return Ok(());
        }
        let path = dir.join(CRAWL_FILE);
        let temporary = dir.join(format!("{CRAWL_FILE}.tmp"));
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        crash::point("state.crawl_file");
        let mut file = std::fs::File::create(&temporary).map_err(io)?;
        let header = format!("{HEADER}{}\n", copy.path.display());
        file.write_all(header.as_bytes())
            .and_then(|()| file.write_all(copy.text.as_bytes()))
            .and_then(|()| file.sync_all())
            .map_err(io)?;
        std::fs::rename(&temporary, &path).map_err(io)
    }
}
