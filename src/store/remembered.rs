//! The crawl file a state of an earlier build ran with: `crawl.toml` in the
//! state directory, a copy of the file the last `crawl --config FILE` read,
//! whose first line names where it came from. This build no longer writes it
//! (the job is stored, see [`crate::job`]); it reads it once, to make the job
//! of a state that has none. Depends on [`crate::config`].

use std::path::{Path, PathBuf};

use super::StoreError;
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
