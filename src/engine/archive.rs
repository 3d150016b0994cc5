//! The engine's side of `--warc`: captured exchanges go to the WARC files in
//! step with group commit.
//!
//! A completed page's captures are appended when it is completed into the open
//! group; robots.txt exchanges when their answers are put into the group about
//! to be sealed. Before a group is sealed, [`Crawl::archive_seal`] marks the
//! file's length in it and returns the sync its flush runs first (see
//! [`crate::warc`] for why that makes the files exact). Depends on the store
//! and [`crate::warc`].

use super::{Crawl, EngineError};
use crate::config::CrawlConfig;
use crate::fetch::Exchange;
use crate::warc::{WarcSettings, WarcSync};

impl Crawl<'_> {
    /// Appends a completed page's records (nothing without `--warc`).
    pub(super) fn archive(&mut self, records: &[u8]) -> Result<(), EngineError> {
        if let Some(warc) = self.warc.as_mut() {
            warc.append(self.state, records)?;
        }
        Ok(())
    }

    /// Appends robots.txt exchanges whose answers join the open group.
    pub(super) fn archive_robots(&mut self, exchanges: Vec<Exchange>) -> Result<(), EngineError> {
        if let Some(warc) = self.warc.as_mut() {
            for exchange in exchanges {
                warc.append_exchange(self.state, exchange)?;
            }
        }
        Ok(())
    }

    /// Marks what the open group's records reach; the returned sync must run
    /// before the group's batch is applied.
    pub(super) fn archive_seal(&mut self) -> Result<Option<WarcSync>, EngineError> {
        match self.warc.as_mut() {
            Some(warc) => Ok(warc.seal(self.state)?),
            None => Ok(None),
        }
    }

    /// At the end of a run however it ended: records not yet marked are synced
    /// and marked in the open group, which the end of the run commits.
    pub(super) fn archive_finish(&mut self) -> Result<(), EngineError> {
        if let Some(sync) = self.archive_seal()? {
            sync.run()?;
        }
        Ok(())
    }
}

/// The settings of a crawl's WARC files, `None` without `--warc`: the
/// directory, the size limit and the `warcinfo` fields.
pub(super) fn settings(config: &CrawlConfig) -> Option<WarcSettings> {
    let dir = config.warc.clone()?;
    let mut info = vec![
        (
            "software".to_owned(),
            format!("legcrawl/{}", env!("CARGO_PKG_VERSION")),
        ),
        ("format".to_owned(), "WARC File Format 1.1".to_owned()),
        (
            "conformsTo".to_owned(),
            "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
                .to_owned(),
        ),
        (
            "robots".to_owned(),
            if config.obey_robots { "obey" } else { "ignore" }.to_owned(),
        ),
        (
            "http-header-user-agent".to_owned(),
            config.user_agent.clone(),
        ),
    ];
    if let Some(from) = &config.from {
        info.push(("http-header-from".to_owned(), from.clone()));
    }
    let delay = config
        .delay
        .map_or_else(|| "default".to_owned(), |d| format!("{:?}", d));
    info.extend([
        ("delay".to_owned(), delay),
        ("per-host".to_owned(), config.per_host.to_string()),
        ("concurrency".to_owned(), config.concurrency.to_string()),
        (
            "max-depth".to_owned(),
            config
                .max_depth
                .map_or_else(|| "none".to_owned(), |d| d.to_string()),
        ),
        ("revisit".to_owned(), format!("{:?}", config.revisit)),
        ("state".to_owned(), config.data_dir.display().to_string()),
    ]);
    for seed in &config.seeds {
        let seed = crate::canon::strip_credentials(seed).into_owned();
        info.push(("seed".to_owned(), seed));
    }
    Some(WarcSettings {
        dir,
        max_size: config.warc_max_size,
        info,
    })
}
