//! The crawl's plain records, as calls of [`Shared`]: seeds (stored in
//! chunks, read with `SSCAN`), parked hosts, page records, robots.txt
//! answers, WARC marks and worker runs.

use super::pages::NewRequest;
use super::{SCRIPT_CHUNK, Shared, SharedError, array, count_at, encode_request, int, millis};
use crate::robots::RobotsRecord;
use crate::store::PageRecord;
use crate::store::records::unix_now;

/// What storing seeds did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seeded {
    /// Seeds new to the crawl, queued.
    pub queued: u64,
    /// Of their fingerprints, those new to the seen set.
    pub unique: u64,
    /// True when these calls made the crawl: its first cycle started.
    pub created: bool,
}

impl Shared {
    /// Stores seeds (idempotent: a seed already stored is not queued again),
    /// [`SCRIPT_CHUNK`] per call; says what it did ([`Seeded`]). A worker killed
    /// between two calls leaves the first chunks stored; the next worker's
    /// call brings the rest (the job lists every seed).
    pub async fn add_seeds(&self, seeds: &[NewRequest]) -> Result<Seeded, SharedError> {
        let mut added = Seeded::default();
        for chunk in seeds.chunks(SCRIPT_CHUNK) {
            let mut args = vec![chunk.len().to_string().into_bytes()];
            for seed in chunk {
                args.push(seed.request.url.clone().into_bytes());
                args.push(seed.host.clone().into_bytes());
                args.push(seed.fingerprint.to_vec());
                args.push(encode_request(&seed.request));
                args.push(millis(seed.delay).into_bytes());
            }
            // When a new crawl's first cycle starts.
            args.push(unix_now().to_string().into_bytes());
            let value = self
                .script("storing the seeds", |s| &s.seeds, &[], &args)
                .await?;
            let parts = array(&value).unwrap_or(&[]);
            let number = |i: usize| count_at(parts, i);
            let (Some(queued), Some(unique), Some(created)) = (number(0), number(1), number(2))
            else {
                return Err(self.corrupt("the seeds script's answer"));
            };
            added.queued += queued;
            added.unique += unique;
            added.created |= created == 1;
        }
        Ok(added)
    }

    /// Whether any worker ever stored seeds for this crawl (`meta` also
    /// holds the epoch of a crawl joined before its seeds were stored).
    pub async fn exists(&self) -> Result<bool, SharedError> {
        let n: i64 = self
            .query(
                "looking up the crawl",
                redis::cmd("HEXISTS")
                    .arg(self.keys.key("meta"))
                    .arg("created"),
            )
            .await?;
        Ok(n > 0)
    }

    /// Refuses a crawl whose keys are in a layout this build does not read
    /// ([`crate::shared::SCHEMA`]): one made by an earlier build. A crawl
    /// not made yet (no seeds stored) passes; its seeds will make it so.
    pub async fn check_schema(&self) -> Result<(), SharedError> {
        let (created, schema): (Option<String>, Option<String>) = self
            .query(
                "reading the crawl's layout",
                redis::cmd("HMGET")
                    .arg(self.keys.key("meta"))
                    .arg("created")
                    .arg("schema"),
            )
            .await?;
        let current = crate::shared::SCHEMA.to_string();
        if created.is_none() || schema.as_deref() == Some(current.as_str()) {
            return Ok(());
        }
        Err(SharedError::OldSchema {
            name: self.target.name.clone(),
            schema: schema.unwrap_or_else(|| "none".into()),
            commit: crate::shared::LAST_BUILD_READING_SCHEMA_1,
        })
    }

    /// Hosts parked because their robots.txt kept failing are tried again
    /// (a worker starts); returns how many requests came back to the frontier.
    pub async fn unpark(&self) -> Result<u64, SharedError> {
        let value = self
            .script("unparking hosts", |s| &s.unpark, &[], &[])
            .await?;
        int(&value)
            .map(|n| n.max(0) as u64)
            .ok_or_else(|| self.corrupt("the unpark script's answer"))
    }

    /// The stored seed URLs, sorted, read 1,000 at a time (`SSCAN`: a crawl
    /// of 200,000 seeds does not hold the server for one long `SMEMBERS`).
    pub async fn seeds(&self) -> Result<Vec<String>, SharedError> {
        let key = self.keys.key("seeds");
        let mut cursor = 0u64;
        let mut seeds = Vec::new();
        // Bounded: the cursor comes back to 0 after one pass over the set.
        loop {
            let (next, page): (u64, Vec<String>) = self
                .query(
                    "reading the seeds",
                    redis::cmd("SSCAN")
                        .arg(&key)
                        .arg(cursor)
                        .arg("COUNT")
                        .arg(1000),
                )
                .await?;
            seeds.extend(page);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        // A set rehashed during the scan may give a member twice.
        seeds.sort();
        seeds.dedup();
        Ok(seeds)
    }

    /// The page records of `fps`, in order (`None` where there is none).
    pub async fn page_records(
        &self,
        fps: &[[u8; 20]],
    ) -> Result<Vec<Option<PageRecord>>, SharedError> {
        if fps.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.keys.key("pages"));
        for fp in fps {
            cmd.arg(fp.as_slice());
        }
        let records: Vec<Option<Vec<u8>>> = self.query("reading page records", &cmd).await?;
        records
            .iter()
            .map(|r| r.as_deref().map(|b| self.page_record(b)).transpose())
            .collect()
    }

    pub(crate) fn page_record(&self, bytes: &[u8]) -> Result<PageRecord, SharedError> {
        crate::store::decode_page(bytes).map_err(|e| self.corrupt(format!("a page record: {e}")))
    }

    /// The robots.txt answers the crawl's workers stored.
    pub async fn robots(&self) -> Result<Vec<RobotsRecord>, SharedError> {
        let all: Vec<(String, String)> = self
            .query(
                "reading robots.txt answers",
                redis::cmd("HGETALL").arg(self.keys.key("robots")),
            )
            .await?;
        all.into_iter()
            .map(|(origin, json)| {
                serde_json::from_str(&json)
                    .map_err(|e| self.corrupt(format!("the robots.txt record of {origin}: {e}")))
            })
            .collect()
    }

    /// Stores robots.txt answers for every worker (a later fetch replaces an
    /// earlier one).
    pub async fn put_robots(&self, records: &[RobotsRecord]) -> Result<(), SharedError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("HSET");
        cmd.arg(self.keys.key("robots"));
        for record in records {
            let json = serde_json::to_string(record)
                .map_err(|e| self.corrupt(format!("a robots.txt record: {e}")))?;
            cmd.arg(&record.origin).arg(json);
        }
        self.query::<i64>("storing robots.txt answers", &cmd)
            .await
            .map(drop)
    }

    /// The crawl's cookies (JSON, one per cookie) that a worker's jar starts
    /// from.
    pub async fn cookies(&self) -> Result<Vec<Vec<u8>>, SharedError> {
        let all: Vec<Vec<u8>> = self
            .query(
                "reading the cookies",
                redis::cmd("HGETALL").arg(self.keys.key("cookies")),
            )
            .await?;
        // Field, value, field, value...
        Ok(all.into_iter().skip(1).step_by(2).collect())
    }

    /// Stores a worker's cookies, (key, JSON) from
    /// [`crate::fetch::cookies::CookieJar::take_changed_cookies`], each
    /// replacing the cookie of its key.
    pub async fn put_cookies(&self, cookies: &[(String, String)]) -> Result<(), SharedError> {
        if cookies.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("HSET");
        cmd.arg(self.keys.key("cookies"));
        for (key, json) in cookies {
            cmd.arg(key).arg(json);
        }
        self.query::<i64>("storing the cookies", &cmd)
            .await
            .map(drop)
    }

    /// The marks of the WARC files whose field in the `warc` hash starts with
    /// `prefix` (a worker's machine name and WARC directory, see
    /// [`crate::engine::worker::warc`]): `(field, durable length)`.
    pub async fn warc_marks(&self, prefix: &str) -> Result<Vec<(String, u64)>, SharedError> {
        let all: Vec<(String, String)> = self
            .query(
                "reading the WARC marks",
                redis::cmd("HGETALL").arg(self.keys.key("warc")),
            )
            .await?;
        let mut marks = Vec::new();
        for (field, len) in all {
            if field.starts_with(prefix) {
                let len = len
                    .parse()
                    .map_err(|_| self.corrupt(format!("the WARC mark of {field}: {len:?}")))?;
                marks.push((field, len));
            }
        }
        Ok(marks)
    }

    /// Registers a new WARC file (its `warc` field) with length 0, before it
    /// is created.
    pub async fn register_warc(&self, field: &str) -> Result<(), SharedError> {
        crate::crash::point("warc.create");
        self.query::<i64>(
            "registering a WARC file",
            redis::cmd("HSETNX")
                .arg(self.keys.key("warc"))
                .arg(field)
                .arg(0),
        )
        .await
        .map(drop)
    }

    /// Appends one worker run's record (JSON) to the crawl's runs; returns
    /// its number.
    pub async fn push_run(&self, record: &str) -> Result<u64, SharedError> {
        self.query::<u64>(
            "recording the run",
            redis::cmd("RPUSH").arg(self.keys.key("runs")).arg(record),
        )
        .await
    }
}
