//! A worker joins a shared crawl's job and runs it.
//!
//! A worker starting ([`join`]) reads the newest job, resolves it with the
//! crawl file and the flags it was given ([`crate::job::resolve`]: a file
//! replaces the job, flags change it) and with the crawl's seeds plus its own,
//! and stores the result as the next version when it differs; when another
//! worker stored one meanwhile it reads and resolves again. Nothing is
//! printed here: [`Joined`] lists the changes. A worker's `--output` file and
//! its per-run options (max pages, max duration, until idle, grace, lease TTL,
//! cache) are its own and not part of the job.
//!
//! While it runs, a worker looks at the job's version every
//! [`JOB_POLL`] and takes up a newer one at once (`Active::from_stored`):
//! scope (allowed hosts, or the hosts of the crawl's current seeds; max
//! depth), legs (allow, deny, nofollow, custom legs), fetch settings (user
//! agent, From, headers, timeouts, body size), robots.txt settings, revisit
//! policy, retries and concurrency. Requests already being fetched finish
//! under the version they started with. Depends on [`crate::shared`] (the
//! stored job), [`crate::job`], [`crate::crawlfile`] and [`crate::page`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::config::CrawlConfig;
use crate::crawlfile::{self, CrawlFile};
use crate::engine::EngineError;
use crate::engine::active::Active;
use crate::fetch::{FetchSettings, Fetcher};
use crate::job::{self, Change, JobError, StateFacts};
use crate::legs::{Leg, Stack};
use crate::page::RetryPolicy;
use crate::page::scope::Scope;
use crate::revisit::Schedule;
use crate::robots::{RobotsCache, RobotsSettings};
use crate::shared::job::StoredJob;
use crate::shared::{Shared, SharedError, SharedTarget};
use crate::store::records::unix_now;

use super::witness::{Kept, WitnessStop};

/// How often a running worker looks for a new job version (one `HGET`).
pub const JOB_POLL: Duration = Duration::from_secs(2);

/// Attempts at storing a changed job while other workers store theirs.
const STORE_TRIES: usize = 10;

/// Why a worker could not take part in a shared crawl's job.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// Redis, the seeds, the legs or the fetcher refused (see
    /// [`EngineError`]).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The stored job cannot be read, or the settings given cannot be written
    /// as a job.
    #[error(transparent)]
    Job(#[from] JobError),
    /// The worker's witness record cannot be read, or names a crawl Redis
    /// lost ([`SharedError::Vanished`]).
    #[error(transparent)]
    Witness(#[from] WitnessStop),
    /// The crawl has seeds but no job: an earlier build started it, and no
    /// migration is kept (issue 28).
    #[error(
        "the shared crawl {name:?} has seeds but no stored job (an earlier legcrawl started it); the last build that makes its job is legcrawl commit {commit}: run one worker of it once"
    )]
    WithoutJob {
        /// The crawl's name.
        name: String,
        /// The last build that makes the job of such a crawl.
        commit: &'static str,
    },
    /// Other workers stored new versions each time this one tried.
    #[error(
        "the job of the shared crawl {name:?} changed {tries} times while this worker stored its own; start it again"
    )]
    Contended {
        /// The crawl's name.
        name: String,
        /// Attempts made.
        tries: usize,
    },
}

impl From<SharedError> for JoinError {
    fn from(error: SharedError) -> JoinError {
        JoinError::Engine(EngineError::Shared(error))
    }
}

/// What a worker brings to the crawl's job when it starts.
#[derive(Clone, Copy)]
pub struct JobPlan<'a> {
    /// The crawl file given (`--config`): it replaces the job.
    pub file: Option<&'a CrawlFile>,
    /// Applies the job settings given on the command line (each changes the
    /// job); called once per attempt.
    pub flags: &'a (dyn Fn(&mut CrawlConfig) + Sync),
    /// This worker's seeds (added to the crawl's), its per-run options and
    /// its own `--output` file; its job settings are not read.
    pub run: &'a CrawlConfig,
}

/// A worker that took part in a shared crawl's job, ready to run it
/// ([`Joined::run`]).
pub struct Joined {
    pub(super) shared: Shared,
    /// The witness record beside the worker's `--output` file.
    pub(super) witness: Option<Kept>,
    pub(super) active: Active,
    pub(super) run: CrawlConfig,
    /// The job version this worker runs.
    pub version: u64,
    /// The version the changes are against (`None`: the crawl had no job).
    pub previous: Option<u64>,
    /// What this worker changed in the job (empty when it runs it as stored).
    pub changes: Vec<Change>,
}

/// Connects to the crawl and resolves its job with what this worker brings
/// (see the module doc), storing the next version when it changed. Bad
/// settings are refused before anything is stored.
pub async fn join(target: &SharedTarget, plan: JobPlan<'_>) -> Result<Joined, JoinError> {
    crate::engine::check_seeds(&plan.run.seeds)?;
    // The server's settings are checked before anything is written.
    let mut shared = Shared::inspect(target, plan.run.per_host).await?;
    shared.check_server().await?;
    // The witness beside the output file is read before a crawl is made
    // anew: one Redis lost is refused, not started over.
    let witness = match &plan.run.output {
        Some(output) => Some(Kept::join(output, &mut shared).await?),
        None => {
            shared.enter().await?;
            None
        }
    };
    let given: Vec<String> = plan
        .run
        .seeds
        .iter()
        .map(|seed| crate::canon::strip_credentials(seed).into_owned())
        .collect();
    // A crawl of an earlier layout is refused before anything is written.
    shared.check_schema().await?;
    // Seeds are stored after the job (by this build), so a crawl with seeds
    // and, read after them, no job was started by an earlier build.
    if shared.exists().await? && shared.current_job().await?.is_none() {
        return Err(JoinError::WithoutJob {
            name: target.name.clone(),
            commit: crate::store::LAST_BUILD_READING_OLD_FORMATS,
        });
    }
    let worker = super::worker_id();
    for _ in 0..STORE_TRIES {
        let stored = shared.current_job().await?;
        let crawl_seeds = shared.seeds().await?;
        let mut seeds: BTreeSet<String> = crawl_seeds.iter().cloned().collect();
        seeds.extend(given.iter().cloned());
        if let Some(stored) = &stored {
            seeds.extend(job_file(stored)?.config.seeds);
        }
        if seeds.is_empty() {
            return Err(EngineError::NoSeeds {
                dir: format!("Redis crawl {:?}", target.name),
            }
            .into());
        }
        let facts = StateFacts {
            seeds: seeds.into_iter().collect(),
            dedup: None,
        };
        let resolved = job::resolve(
            stored.as_ref().map(|j| (j.version, j.text.as_str())),
            plan.file,
            |config| {
                (plan.flags)(config);
                // A worker's output file, WARC directory and stats file are
                // its own, not the job's.
                config.output = None;
                config.warc = None;
                config.stats = None;
            },
            &facts,
        )?;
        let previous = stored.as_ref().map(|j| j.version);
        let mut active = Active::build(
            resolved.config,
            resolved.legs,
            resolved.sitemap_leg,
            plan.run,
            &crawl_seeds,
        )?;
        if let Some(stored) = &stored
            && resolved.changes.is_empty()
        {
            active.version = stored.version;
            return Ok(joined(
                shared,
                witness,
                active,
                plan.run,
                previous,
                Vec::new(),
            ));
        }
        let expected = previous.unwrap_or(0);
        let record = StoredJob {
            version: expected + 1,
            created_at: unix_now(),
            worker: worker.clone(),
            text: resolved.text,
        };
        if let Ok(version) = shared.store_job(expected, &record, &active.config).await? {
            active.version = version;
            return Ok(joined(
                shared,
                witness,
                active,
                plan.run,
                previous,
                resolved.changes,
            ));
        }
        // Another worker stored a version first: resolve against it.
    }
    Err(JoinError::Contended {
        name: target.name.clone(),
        tries: STORE_TRIES,
    })
}

fn joined(
    shared: Shared,
    witness: Option<Kept>,
    active: Active,
    run: &CrawlConfig,
    previous: Option<u64>,
    changes: Vec<Change>,
) -> Joined {
    Joined {
        shared,
        witness,
        version: active.version,
        active,
        run: run.clone(),
        previous,
        changes,
    }
}

/// The stored job read as a crawl file.
fn job_file(stored: &StoredJob) -> Result<CrawlFile, JobError> {
    crawlfile::parse(&stored.text, "job".as_ref()).map_err(|source| JobError::Stored {
        version: stored.version,
        source,
    })
}

/// A job's settings with `run`'s seeds, per-run options and output file:
/// what one worker runs.
fn worker_config(job: CrawlConfig, run: &CrawlConfig) -> CrawlConfig {
    CrawlConfig {
        output: run.output.clone(),
        warc: run.warc.clone(),
        stats: None,
        ..job.with_run_options(run)
    }
}

impl Active {
    /// Builds the job `job` (settings and legs, `None`: the bundled ones, with
    /// a sitemap leg unless `sitemap_leg` says the job's legs have one) for
    /// a worker with the options of `run`, with `crawl_seeds` the crawl's
    /// stored seeds. The scope's hosts are the job's allowed hosts, or else
    /// the hosts of every seed (the job's, the crawl's and this worker's); the
    /// links legs follow links to the same hosts.
    fn build(
        job: CrawlConfig,
        legs: Option<Stack>,
        sitemap_leg: bool,
        run: &CrawlConfig,
        crawl_seeds: &[String],
    ) -> Result<Active, EngineError> {
        let job_seeds = job.seeds.clone();
        let config = worker_config(job, run);
        let seeds: Vec<String> = crawl_seeds.iter().chain(&job_seeds).cloned().collect();
        let scope = Scope::of_crawl(&config, &seeds, &config.seeds);
        let seeds = job_seeds;
        let mut stack = crawlfile::crawl_legs(&config, legs, sitemap_leg)?;
        stack.configure(&crate::page::scope::leg_config(&config, &scope))?;
        let fetcher = Fetcher::new(FetchSettings::from_config(&config))?;
        let robots = config
            .obey_robots
            .then(|| RobotsCache::new(fetcher.clone(), RobotsSettings::from_config(&config)));
        Ok(Active {
            version: 0,
            render: crate::render::Renderer::of(&config)?,
            scope,
            legs: Arc::new(stack),
            schedule: Schedule::new(&config)?,
            retry: RetryPolicy::of(&config),
            fetcher,
            robots,
            config,
            seeds,
            stored: None,
        })
    }

    /// The stored job `stored` as a worker with the options of `run` runs it,
    /// with `crawl_seeds` the crawl's current seeds.
    pub(super) fn from_stored(
        stored: &StoredJob,
        run: &CrawlConfig,
        crawl_seeds: &[String],
    ) -> Result<Active, JoinError> {
        let file = job_file(stored)?;
        let sitemap_leg = file
            .legs_toml
            .as_ref()
            .is_some_and(|legs| crawlfile::names_kind(legs, "sitemap"));
        let mut active = Active::build(file.config, file.legs, sitemap_leg, run, crawl_seeds)?;
        active.version = stored.version;
        Ok(active)
    }

    /// Fills the cookie jar (unless cookies are off) with the cookies the
    /// crawl's workers stored.
    pub(super) async fn load_cookies(&self, shared: &Shared) -> Result<(), EngineError> {
        if let Some(jar) = self.fetcher.cookie_jar() {
            let cookies = shared.cookies().await?;
            jar.load_cookies(&cookies)
                .map_err(|reason| SharedError::Corrupt {
                    name: shared.target().name.clone(),
                    what: format!("a stored cookie: {reason}"),
                })?;
        }
        Ok(())
    }

    /// Stores the cookies this version's jar changed since the last call.
    pub(super) async fn keep_cookies(&self, shared: &Shared) -> Result<(), SharedError> {
        match self
            .fetcher
            .cookie_jar()
            .and_then(|jar| jar.take_changed_cookies())
        {
            Some(cookies) => shared.put_cookies(&cookies).await,
            None => Ok(()),
        }
    }

    /// Fills the robots.txt cache with the answers the crawl's workers stored.
    pub(super) async fn load_robots(&self, shared: &Shared) -> Result<(), SharedError> {
        if let Some(cache) = &self.robots {
            cache.preload(shared.robots().await?);
        }
        Ok(())
    }
}
