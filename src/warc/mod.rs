//! WARC 1.1 output (`crawl --warc DIR`): what was fetched, as archivists keep it.
//!
//! For every fetch that got a response — pages and robots.txt alike — a
//! `request` and a `response` record; for an unchanged page of an incremental
//! run a `revisit` record instead of the response (a 304: profile
//! `server-not-modified`, with no block; a 200 with the content hash of the
//! page record: `identical-payload-digest`, the response head without its
//! body), both naming the capture they stand for (`WARC-Refers-To-Target-URI`,
//! `WARC-Refers-To-Date`: the page record's URL and the time its content was
//! last found new or changed). Each file opens with a `warcinfo` record
//! (software, the crawl's settings), and so do a run's first records in a
//! file it goes on with (an embedded run's with its number and its job's
//! settings, [`WarcSettings::describe_run`]; a shared worker's run with the
//! worker and the time it started, which name its record in the crawl's
//! runs, and its job's settings, [`WarcSettings::describe_worker_run`]). A fetch without a response
//! writes nothing.
//!
//! # Revisits that replay
//! A `server-not-modified` revisit has no block (so no `Content-Type` and no
//! payload digest), with the 304's `ETag` and `Last-Modified` as `WARC-Etag`
//! and `WARC-Last-Modified`, as Heritrix writes it: pywb would replay a 304
//! head as an empty redirect, and with no head it replays the original found
//! through the refers-to fields. The identical-payload-digest revisit keeps
//! its 200 head. Why, with the tools' sources: `docs/guide.md`, *Replay*.
//!
//! # Layout
//! - `record`: building records — fields, digests, one gzip member each.
//! - `writer`: the files — naming, rotation, appending, the mark and sync of
//!   each commit, cutting back on open; the marks are its owner's.
//! - `read`: one `response` record read back from its offset (`legcrawl
//!   reparse`).
//!
//! # Exactness
//! A record is in a WARC file exactly when its page's completion is durable.
//! In the embedded crawl the engine appends a page's records when the page
//! completes into the open group; before that group is sealed the writer
//! flushes the file and its length (the *mark*) goes into the group's batch
//! (`store::State::mark_warc`), and the group's flush syncs the file before it
//! applies the batch. A worker of a shared crawl appends a page's records,
//! syncs the file and passes the mark to the page's completion script, which
//! stores it in the crawl's `warc` hash with the completion, atomically; a
//! completion refused (its lease expired) has its records cut off at once.
//! After a `kill -9` the next run cuts each file back to its durable mark: the
//! records of completions that were lost go (those pages are fetched again and
//! written then), and so does a torn record; nothing is written twice.
//! robots.txt records travel with the robots.txt answer, which is stored in
//! the group sealed after the fetch (embedded), or with the next completion
//! (shared), so they are exact too.
//!
//! Depends on `libdeflater` (writing records), `flate2` and `httparse`
//! (reading them back), [`crate::fetch::Exchange`], [`crate::config`] (the `warcinfo`
//! settings), [`crate::store`] (its error type), [`crate::canon`] (credentials
//! stripped from seeds), [`crate::crash`], [`crate::dirlock`], [`crate::fsync`]
//! and [`crate::clock`]; knows nothing of legs, the engine or where the marks
//! are kept.

mod read;
mod record;
mod writer;

use std::path::PathBuf;

pub use read::{ReadError, StoredResponse, response_at};
pub use record::{sha1_digest, unix_secs, warc_date};

/// The records of `captures` (a `request` record, then a `response` or
/// `revisit` record each), one gzip member per record, concatenated: what
/// [`WarcWriter::append`] writes. CPU only, so the engine runs it in the
/// page's own task rather than on its loop.
pub fn encode(captures: &[Capture]) -> Vec<u8> {
    encode_page(captures).0
}

/// [`encode`]'s records, with the offset among them of the last capture's
/// `response` record (`None` when it is a `revisit`, or there is none): the
/// page's response, whose place its page record keeps for `legcrawl reparse`.
pub fn encode_page(captures: &[Capture]) -> (Vec<u8>, Option<u64>) {
    let mut out = Vec::new();
    let mut response = None;
    for capture in captures {
        let (records, second) = record::capture(capture);
        response = capture
            .revisit
            .is_none()
            .then_some((out.len() + second) as u64);
        out.extend_from_slice(&records);
    }
    (out, response)
}
/// The plain `request` and `response` records of `exchanges` (robots.txt
/// fetches), as [`encode`] makes them.
pub fn encode_exchanges(exchanges: Vec<Exchange>) -> Vec<u8> {
    let captures: Vec<Capture> = exchanges
        .into_iter()
        .map(|exchange| Capture {
            exchange,
            revisit: None,
        })
        .collect();
    encode(&captures)
}

pub use writer::{Appended, Mark, NewFile, WarcSync, WarcWriter, canonical_dir, file_name};

use crate::config::CrawlConfig;
use crate::fetch::Exchange;
use crate::store::StoreError;

/// One fetch to archive, and whether it stands for an earlier capture.
#[derive(Clone, Debug)]
pub struct Capture {
    /// The exchange as sent and received.
    pub exchange: Exchange,
    /// Set for an unchanged page: write a `revisit` record.
    pub revisit: Option<RevisitOf>,
}

/// The earlier capture a `revisit` record refers to.
#[derive(Clone, Debug)]
pub struct RevisitOf {
    /// Why the page is a revisit.
    pub profile: Profile,
    /// `WARC-Refers-To-Target-URI`: the URL of the earlier capture.
    pub target: String,
    /// `WARC-Refers-To-Date`: when it was captured, Unix seconds.
    pub date: u64,
}

/// The WARC 1.1 revisit profiles legcrawl writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// The server answered 304 Not Modified to a conditional request.
    ServerNotModified,
    /// A 200 whose content hash equals the page record's.
    IdenticalPayloadDigest,
}

impl Profile {
    /// The profile's URI (`WARC-Profile`).
    pub fn uri(self) -> &'static str {
        match self {
            Profile::ServerNotModified => {
                "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
            }
            Profile::IdenticalPayloadDigest => {
                "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
            }
        }
    }
}

/// Where and how WARC files are written.
#[derive(Clone, Debug)]
pub struct WarcSettings {
    /// The directory (created if missing; its parent must exist).
    pub dir: PathBuf,
    /// A file is closed at the first commit group boundary past this size, in
    /// bytes, and the next record opens a new one.
    pub max_size: u64,
    /// The `warcinfo` fields (`name`, `value`) each file opens with, and
    /// each run's first records in a file it goes on with.
    pub info: Vec<(String, String)>,
}

impl WarcSettings {
    /// The settings of a crawl's WARC files, `None` without `--warc`: the
    /// directory, the size limit and the `warcinfo` fields.
    pub fn of(config: &CrawlConfig) -> Option<WarcSettings> {
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
            (
                "revisit".to_owned(),
                format!("{:?}", config.revisit_this_run.unwrap_or(config.revisit)),
            ),
        ]);
        match &config.shared {
            // The URL as every message shows it: never the password.
            Some(target) => info.extend([
                ("shared".to_owned(), target.shown()),
                ("name".to_owned(), target.name.clone()),
            ]),
            None => info.push(("state".to_owned(), config.data_dir.display().to_string())),
        }
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

    /// Adds the run to the `warcinfo` fields: its number, the job version it
    /// runs and that version's settings (`job.KEY: value`, one per setting,
    /// credentials as `***`), as Heritrix writes its job into every file.
    pub fn describe_run(mut self, run: u64, job_version: u64, job_text: &str) -> WarcSettings {
        self.info.push(("run".to_owned(), run.to_string()));
        self.describe_job(job_version, job_text)
    }

    /// Adds a shared worker's run to the `warcinfo` fields: `worker`
    /// (`HOST:PID`) and `run-started-at` (Unix seconds), the `worker` and
    /// `started_at` of the run's record in the crawl's runs (a shared run is
    /// numbered when it ends, by its place there, after its first records are
    /// written: these two name it), then the job version it runs and that
    /// version's settings, as [`WarcSettings::describe_run`] writes them.
    pub fn describe_worker_run(
        mut self,
        worker: &str,
        started_at: u64,
        job_version: u64,
        job_text: &str,
    ) -> WarcSettings {
        self.info.push(("worker".to_owned(), worker.to_owned()));
        self.info
            .push(("run-started-at".to_owned(), started_at.to_string()));
        self.describe_job(job_version, job_text)
    }

    /// The job version and its settings (`job.KEY: value`).
    fn describe_job(mut self, job_version: u64, job_text: &str) -> WarcSettings {
        self.info
            .push(("job-version".to_owned(), job_version.to_string()));
        for (key, value) in crate::job::fields(job_text) {
            self.info.push((format!("job.{key}"), value));
        }
        self
    }
}

/// Errors of the WARC output. Each names the file or directory.
#[derive(Debug, thiserror::Error)]
pub enum WarcError {
    /// Reading or writing a WARC file or the directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is shorter than the state recorded: records it held are lost.
    #[error(
        "{path}: WARC file has {len} bytes but this state recorded {mark} durable bytes in it; records are missing (move the file away to go on with a new one)"
    )]
    Shorter {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The recorded length.
        mark: u64,
    },
    /// Another process writes the directory's files.
    #[error(
        "{dir}: another legcrawl process is writing WARC files in this directory (each crawl, and each worker of a shared crawl, needs a --warc directory of its own)"
    )]
    Busy {
        /// The directory.
        dir: PathBuf,
    },
    /// Reading or writing the marks failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
