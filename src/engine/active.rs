//! The job a crawl runs ([`Active`]): its settings and what is built from
//! them, as both loops' frontiers hold it. A shared worker replaces its
//! `Active` when another worker stores a newer job version
//! (`worker::join`); an embedded run keeps one. Depends on the
//! configuration and [`crate::page`].

use std::sync::Arc;

use crate::config::CrawlConfig;
use crate::fetch::Fetcher;
use crate::legs::Leg;
use crate::page::RetryPolicy;
use crate::page::reparse::StoredResponses;
use crate::page::scope::Scope;
use crate::revisit::Schedule;
use crate::robots::RobotsCache;

/// One job version as a run runs it: its settings (with the run's own
/// options) and everything built from them.
pub(crate) struct Active {
    /// The version (0 until it is stored): the legs version the pages it
    /// processes record.
    pub version: u64,
    /// The settings.
    pub config: CrawlConfig,
    /// The job's seeds (every seed of the crawl when it was stored).
    pub seeds: Vec<String>,
    /// Which requests the crawl may queue.
    pub scope: Scope,
    /// The legs pages go through.
    pub legs: Arc<dyn Leg>,
    /// The fetcher, with its cookie jar.
    pub fetcher: Fetcher,
    /// robots.txt answers per origin (`None` with `obey_robots` off).
    pub robots: Option<RobotsCache>,
    /// The revisit policy.
    pub schedule: Schedule,
    /// Retries of failed fetches.
    pub retry: RetryPolicy,
    /// Set for `legcrawl reparse`: where the pages' stored responses are;
    /// the legs run over them and nothing is fetched.
    pub stored: Option<Arc<StoredResponses>>,
    /// `--render`: the job's renderer.
    pub render: Option<crate::render::Renderer>,
}
