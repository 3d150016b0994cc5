//! The job of a shared crawl in Redis: the settings that define it (seeds,
//! scope, politeness, limits, revisit policy, dedup settings, legs; see
//! [`crate::job`]) live under the crawl's keys, and every worker runs them.
//!
//! The `jobs` hash keeps every version (version → [`StoredJob`], JSON); the
//! `job` hash names the newest (`version`) and holds the politeness the
//! scripts enforce for the whole crawl: `per_host` and `delay` (absent when
//! the job sets none: each host's default applies). A new version is written
//! by `lua/job.lua`, a compare-and-set on the version the worker resolved
//! against, together with that politeness, so a new per-host limit or delay
//! holds for every worker from that moment. A worker joins the crawl and
//! takes up new versions in [`crate::engine::worker`]. Depends on
//! [`super::client`] and [`crate::config`].

use std::sync::LazyLock;

use redis::Script;
use serde::{Deserialize, Serialize};

use super::client::{Shared, SharedError, array, count_at};
use crate::config::CrawlConfig;

/// `lua/job.lua`, hashed once.
static STORE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/job.lua")));

/// One version of a shared crawl's job, as the `jobs` hash keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredJob {
    /// Its version: 1 for the crawl's first job, one more for each change.
    pub version: u64,
    /// When it was stored (unix seconds).
    pub created_at: u64,
    /// The worker that stored it (`HOST:PID`).
    pub worker: String,
    /// The job, as a crawl file (`legcrawl dump --shared ... job` prints it).
    pub text: String,
}

impl Shared {
    /// The newest job version of the crawl (0: none stored yet); one `HGET`.
    pub async fn job_version(&self) -> Result<u64, SharedError> {
        let version: Option<u64> = self
            .query(
                "reading the job's version",
                redis::cmd("HGET")
                    .arg(self.keys().key("job"))
                    .arg("version"),
            )
            .await?;
        Ok(version.unwrap_or(0))
    }

    /// The newest job, if any was stored.
    pub async fn current_job(&self) -> Result<Option<StoredJob>, SharedError> {
        match self.job_version().await? {
            0 => Ok(None),
            version => self.job(version).await,
        }
    }

    /// Job version `version`, if stored.
    pub async fn job(&self, version: u64) -> Result<Option<StoredJob>, SharedError> {
        let record: Option<String> = self
            .query(
                "reading a job version",
                redis::cmd("HGET").arg(self.keys().key("jobs")).arg(version),
            )
            .await?;
        let Some(record) = record else {
            return Ok(None);
        };
        let job: StoredJob = serde_json::from_str(&record).map_err(|e| SharedError::Corrupt {
            name: self.target().name.clone(),
            what: format!("job version {version}: {e}"),
        })?;
        Ok(Some(job))
    }

    /// The crawl's counter `name`, summed over every worker's completions
    /// (0 when none counted it).
    pub async fn crawl_counter(&self, name: &str) -> Result<u64, SharedError> {
        let value: Option<u64> = self
            .query(
                "reading a counter",
                redis::cmd("HGET")
                    .arg(self.keys().key("counters"))
                    .arg(name),
            )
            .await?;
        Ok(value.unwrap_or(0))
    }

    /// The crawl-wide counters `names`, in order, with one `HMGET`.
    pub async fn crawl_counters(&self, names: &[&str]) -> Result<Vec<u64>, SharedError> {
        let values: Vec<Option<u64>> = self
            .query(
                "reading counters",
                redis::cmd("HMGET")
                    .arg(self.keys().key("counters"))
                    .arg(names),
            )
            .await?;
        Ok(values.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Stores `job` as version `expected + 1` with the politeness of
    /// `config`, if the newest stored version is still `expected`:
    /// `Ok(version)`, or `Err(newest)` when another worker stored one first.
    pub(crate) async fn store_job(
        &self,
        expected: u64,
        job: &StoredJob,
        config: &CrawlConfig,
    ) -> Result<Result<u64, u64>, SharedError> {
        let corrupt = |what: &str| SharedError::Corrupt {
            name: self.target().name.clone(),
            what: what.to_owned(),
        };
        let record =
            serde_json::to_string(job).map_err(|e| corrupt(&format!("a job record: {e}")))?;
        let keys = [self.keys().key("job"), self.keys().key("jobs")];
        let args = [
            expected.to_string().into_bytes(),
            record.into_bytes(),
            config.per_host.max(1).to_string().into_bytes(),
            config
                .delay
                .map(|d| d.as_millis().to_string())
                .unwrap_or_default()
                .into_bytes(),
            if config.jitter {
                b"1".to_vec()
            } else {
                Vec::new()
            },
        ];
        let value = self
            .eval("storing the job", &STORE_SCRIPT, &keys, &args)
            .await?;
        let answer = array(&value).ok_or_else(|| corrupt("the job script's answer"))?;
        match (count_at(answer, 0), count_at(answer, 1)) {
            (Some(1), Some(version)) => Ok(Ok(version)),
            (Some(0), Some(newest)) => Ok(Err(newest)),
            _ => Err(corrupt("the job script's answer")),
        }
    }
}
