//! One read-only view of a crawl, whichever backend holds it: a state
//! directory (sled, or the files a running crawl publishes there) or a crawl
//! shared through Redis. `dump`, the `--stats` report and `serve` are written
//! once against [`CrawlView`]; each of its answers is one type ([`rows`]) with
//! the same field names in both modes, and fields only one mode knows added
//! beside them (never a field renamed).
//!
//! # Layout
//! - [`rows`]: the answers (summary, queued requests, seen-set answer, run
//!   rows, job versions);
//! - `state`: the answers of an opened state directory;
//! - `redis`: the answers of a shared crawl (plain reads and the read-only
//!   seen-set script, so they work while workers run);
//! - `current`: which items of the change feed stand now (plain `dump items`);
//! - [`watch`]: the snapshot `serve` shows, from the published file or from
//!   Redis.
//!
//! Depends on [`crate::store`] (read methods), [`crate::shared`] (read
//! methods), [`crate::status`] (published files), [`crate::page::PageTotals`],
//! the feed's field names ([`crate::page::feed`]) and the crawl file's
//! legs (a job's identity field). Writes nothing.

mod current;
mod redis;
pub mod rows;
mod state;
pub mod watch;

use std::path::{Path, PathBuf};

use crate::fingerprint::Fingerprint;
use crate::shared::{Shared, SharedError, SharedTarget};
use crate::store::{Blocked, OpenOptions, PageRecord, State, StoreError};

pub use rows::{FrontierEntry, JobView, RunColumns, RunRow, SeenAnswer, Summary};

/// Why a view could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The state directory could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Redis could not be read.
    #[error(transparent)]
    Shared(#[from] SharedError),
    /// The question has no answer in this crawl (no such run, no job stored
    /// yet, a view this mode does not keep, no such shared crawl): the
    /// asker's mistake, not the machine's.
    #[error("{0}")]
    NoAnswer(String),
}

/// A run as `--run` and `--since-run` name it: a number, or `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RunRef {
    /// Run N (run numbers start at 1; `--since-run 0` means before every run).
    Number(u64),
    /// The newest run recorded.
    Last,
}

impl RunRef {
    /// Parses `N` or `last` (clap value parser).
    pub fn parse(text: &str) -> Result<RunRef, String> {
        match text.trim() {
            "last" => Ok(RunRef::Last),
            number => number
                .parse()
                .map(RunRef::Number)
                .map_err(|_| format!("expected a run number or \"last\", got {text:?}")),
        }
    }
}

/// Which items `dump items` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemPick {
    /// Every live item, in order.
    All,
    /// The items one run stored.
    Run(RunRef),
    /// The items the runs after this one stored (`Number(0)`: every item).
    SinceRun(RunRef),
}

/// A crawl to read.
pub enum CrawlView {
    /// A state directory whose database this process opened, or (in a
    /// crawl answering a dump beside it) a read-only state of the crawl's
    /// own database ([`State::beside`]).
    State(Box<State>),
    /// A state directory read only through the files a crawl publishes in
    /// it (`status.json`, `snapshot.json`): never its database, never its
    /// lock, so a crawl may hold it.
    Published(PathBuf),
    /// A crawl shared through Redis.
    Shared(Box<Shared>),
}

impl std::fmt::Debug for CrawlView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CrawlView({})", self.place())
    }
}

impl CrawlView {
    /// Opens the state in `dir`. When a crawl holds it (busy), `published`
    /// asks for the files that crawl publishes instead of an error.
    pub fn open_dir(dir: &Path, published: bool) -> Result<CrawlView, ViewError> {
        match State::open(dir, &OpenOptions::default()) {
            Ok(state) => Ok(CrawlView::State(Box::new(state))),
            Err(StoreError::Busy { .. }) if published => Ok(CrawlView::Published(dir.to_owned())),
            Err(error) => Err(error.into()),
        }
    }

    /// Connects to the shared crawl at `target` for reading, after checking
    /// that a worker made it and that this build reads its key layout.
    pub async fn open_shared(target: &SharedTarget) -> Result<CrawlView, ViewError> {
        let shared = Shared::inspect(target, 1).await?;
        redis::check(&shared).await?;
        Ok(CrawlView::Shared(Box::new(shared)))
    }

    /// What a shared crawl lost from Redis while it still seems to be there
    /// (keys evicted or deleted), as the error that names it; `None` for a
    /// state directory, or a shared crawl that lost nothing seen.
    pub async fn damage(&self) -> Result<Option<SharedError>, ViewError> {
        match self {
            CrawlView::Shared(shared) => Ok(redis::damaged(shared).await?),
            _ => Ok(None),
        }
    }

    /// The view of `shared` as it is, checked or not (`serve` checks on each
    /// poll, so that it can start before the first worker).
    pub fn of_shared(shared: Shared) -> CrawlView {
        CrawlView::Shared(Box::new(shared))
    }

    /// Where the crawl is, as messages name it: the directory, or the
    /// shared crawl's name and server (its password never shown).
    pub fn place(&self) -> String {
        match self {
            CrawlView::State(state) => state.dir().display().to_string(),
            CrawlView::Published(dir) => dir.display().to_string(),
            CrawlView::Shared(shared) => format!("the shared crawl {:?}", shared.target().name),
        }
    }

    /// The open state, or the busy error a published-only view stands for.
    fn state(&self) -> Result<&State, ViewError> {
        match self {
            CrawlView::State(state) => Ok(state),
            CrawlView::Published(dir) => Err(StoreError::Busy { path: dir.clone() }.into()),
            CrawlView::Shared(_) => Err(ViewError::NoAnswer("not a state directory".to_owned())),
        }
    }

    /// Counts of the crawl (`dump summary`).
    pub async fn summary(&self) -> Result<Summary, ViewError> {
        match self {
            CrawlView::State(state) => {
                let mut summary = Summary::of_state(state.summary()?, None);
                summary.due_now = Some(state.count_due(crate::store::records::unix_now())?);
                summary.revisit_budget = self.revisit_budget().await;
                Ok(summary)
            }
            CrawlView::Published(dir) => state::live_summary(dir),
            CrawlView::Shared(shared) => {
                let mut summary = Summary::of_shared(shared.summary().await?);
                summary.due_now = Some(shared.due_count(crate::store::records::unix_now()).await?);
                summary.revisit_budget = self.revisit_budget().await;
                Ok(summary)
            }
        }
    }

    /// The newest job's revisit budget (`[revisit] budget`), if it has one.
    async fn revisit_budget(&self) -> Option<u64> {
        self.job_file().await.ok()??.config.revisit_budget
    }

    /// The newest job, read as the crawl file it is stored as; `None` for a
    /// crawl without a job.
    async fn job_file(&self) -> Result<Option<crate::crawlfile::CrawlFile>, ViewError> {
        let job = match self.job(None).await {
            Ok(job) => job,
            Err(ViewError::NoAnswer(_)) => return Ok(None),
            Err(error) => return Err(error),
        };
        crate::crawlfile::parse(&job.text, Path::new("the stored job"))
            .map(Some)
            .map_err(|e| ViewError::NoAnswer(e.to_string()))
    }

    /// The first `limit` queued requests in lease order, host by host.
    pub async fn frontier_head(&self, limit: usize) -> Result<Vec<FrontierEntry>, ViewError> {
        match self {
            CrawlView::Shared(shared) => redis::frontier_head(shared, limit).await,
            _ => state::frontier_head(self.state()?, limit),
        }
    }

    /// Calls `each` with the JSON text of the items `pick` selects, in
    /// order, until it returns `Ok(false)` or an error. [`ItemPick::All`]
    /// is the current view: the items that stand (`current`), read in two
    /// passes over the feed (the second stops where the first ended, so
    /// items stored meanwhile wait for the next read).
    pub async fn for_each_item<E>(
        &self,
        pick: ItemPick,
        mut each: impl FnMut(&str) -> Result<bool, E>,
    ) -> Result<(), E>
    where
        E: From<ViewError> + From<StoreError>,
    {
        if pick != ItemPick::All {
            return self.for_each_stored(pick, each).await;
        }
        let mut current = current::Current::new(self.identity_field().await?);
        self.for_each_stored(pick, |text| {
            current.add(serde_json::from_str(text).ok().as_ref());
            Ok::<bool, E>(true)
        })
        .await?;
        let standing = current.standing();
        let mut n = 0;
        self.for_each_stored(pick, |text| {
            let Some(&stands) = standing.get(n) else {
                return Ok(false);
            };
            n += 1;
            if stands { each(text) } else { Ok(true) }
        })
        .await
    }

    /// Every stored item `pick` selects, deletion records included.
    async fn for_each_stored<E>(
        &self,
        pick: ItemPick,
        each: impl FnMut(&str) -> Result<bool, E>,
    ) -> Result<(), E>
    where
        E: From<ViewError> + From<StoreError>,
    {
        match self {
            CrawlView::Shared(shared) => redis::for_each_item(shared, pick, each).await,
            _ => state::for_each_item(self.state()?, pick, each),
        }
    }

    /// The field the newest job's items are known by (its `item_id` leg's
    /// `id_field`), if it has one; `None` too for a crawl without a job.
    pub async fn identity_field(&self) -> Result<Option<String>, ViewError> {
        let Some(file) = self.job_file().await? else {
            return Ok(None);
        };
        Ok(file
            .legs
            .as_ref()
            .and_then(|legs| crate::legs::Leg::identity_field(legs))
            .map(str::to_owned))
    }

    /// What the seen set says about a GET of `url`, with its page record.
    pub async fn seen(&self, url: &str) -> Result<SeenAnswer, ViewError> {
        match self {
            CrawlView::Shared(shared) => redis::seen(shared, url).await,
            _ => state::seen(self.state()?, url),
        }
    }

    /// Page records: up to `limit` of them, or with `due` those the next
    /// run fetches again (soonest first).
    pub async fn pages(
        &self,
        due: bool,
        limit: usize,
    ) -> Result<Vec<(Fingerprint, PageRecord)>, ViewError> {
        match self {
            CrawlView::Shared(shared) => redis::pages(shared, due, limit).await,
            _ => state::pages(self.state()?, due, limit),
        }
    }

    /// Every run recorded, oldest first.
    pub async fn runs(&self) -> Result<Vec<RunRow>, ViewError> {
        match self {
            CrawlView::Shared(shared) => redis::runs(shared).await,
            _ => state::runs(self.state()?),
        }
    }

    /// Run `number` (as `dump runs` numbers it), or `None` when there is no
    /// such run. A shared crawl's is read alone, not with every other run.
    pub async fn run(&self, number: u64) -> Result<Option<RunRow>, ViewError> {
        match self {
            CrawlView::Shared(shared) => Ok(shared
                .run_record(Some(number))
                .await?
                .map(|(id, record)| RunRow::of_json(id, &record))),
            _ => Ok(state::runs(self.state()?)?
                .into_iter()
                .find(|run| run.id == number)),
        }
    }

    /// The newest job version, or with `run` the one that run began under.
    pub async fn job(&self, run: Option<RunRef>) -> Result<JobView, ViewError> {
        match self {
            CrawlView::Shared(shared) => redis::job(shared, run).await,
            _ => state::job(self.state()?, run),
        }
    }

    /// The requests robots.txt kept from being fetched (a state directory
    /// keeps them; a shared crawl only counts them).
    pub fn blocked(&self) -> Result<Vec<Blocked>, ViewError> {
        match self {
            CrawlView::Shared(_) => Err(ViewError::NoAnswer(
                "dump blocked is not kept for a shared crawl (see robots_disallowed in the summary)"
                    .into(),
            )),
            _ => Ok(self.state()?.blocked()?),
        }
    }
}

/// Where run `wanted` is among `runs` (oldest first), or one line saying
/// which runs `place` has.
pub(crate) fn run_index(runs: &[RunRow], wanted: RunRef, place: &str) -> Result<usize, ViewError> {
    let at = match wanted {
        RunRef::Last => runs.len().checked_sub(1),
        RunRef::Number(n) => runs.iter().position(|r| r.id == n),
    };
    at.ok_or_else(|| {
        ViewError::NoAnswer(match (wanted, runs.first(), runs.last()) {
            (RunRef::Number(n), Some(first), Some(last)) => format!(
                "no run {n} in {place} (runs {} to {}; see legcrawl dump runs)",
                first.id, last.id
            ),
            (RunRef::Number(n), _, _) => format!("no run {n} in {place} (no runs yet)"),
            (RunRef::Last, _, _) => format!("no runs yet in {place}, so no last run"),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_numbers_or_last() {
        assert_eq!(RunRef::parse("last"), Ok(RunRef::Last));
        assert_eq!(RunRef::parse("0"), Ok(RunRef::Number(0)));
        assert_eq!(RunRef::parse("42"), Ok(RunRef::Number(42)));
        for bad in ["", "-1", "Last", "latest", "1.5", "2 runs"] {
            assert_eq!(
                RunRef::parse(bad),
                Err(format!("expected a run number or \"last\", got {bad:?}"))
            );
        }
    }
}
