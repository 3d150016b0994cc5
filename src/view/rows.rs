//! The answers of a [`super::CrawlView`], one type each for both modes.
//!
//! Each type holds the fields both modes have under one name, and a
//! flattened `more` with what only one mode knows (an added field, never a
//! renamed one). `docs/reference.md` lists them. Depends on the store's
//! records, the shared summary and [`crate::page::PageTotals`].

use std::collections::BTreeMap;

use serde::Serialize;

use crate::clock::rfc3339_secs;
use crate::page::PageTotals;
use crate::request::Request;
use crate::shared::views::{SharedSummary, WorkerView};
use crate::status::Status;
use crate::store::records::RunRecord;
use crate::store::{PageRecord, UnreachableHost};

/// The counts of a crawl (`dump summary`).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Queued requests (a state directory counts those in flight too).
    pub frontier: u64,
    /// Requests leased and not yet completed.
    pub in_flight: u64,
    /// Distinct fingerprints in the seen set.
    pub seen: u64,
    /// Items stored.
    pub items: u64,
    /// Pages completed over all runs (`pages/completed`).
    pub pages: u64,
    /// Requests dropped as duplicates.
    pub filtered: u64,
    /// Requests robots.txt kept from being fetched.
    pub robots_disallowed: u64,
    /// Hosts the crawl has queued requests for.
    pub hosts: u64,
    /// Runs recorded (a shared crawl's: its workers' runs).
    pub runs: u64,
    /// The newest job version (`None` before one was stored).
    pub job: Option<u64>,
    /// How the seen set is kept.
    pub dedup: String,
    /// Recorded pages due now: what the next run asks again besides the
    /// seeds and the queued requests (`None` in the summary a running crawl
    /// publishes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_now: Option<u64>,
    /// The job's revisit budget, if it has one: the next run asks at most
    /// this many of the pages it governs, due or not, besides `due_now`'s
    /// pages outside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revisit_budget: Option<u64>,
    /// What only one mode knows.
    #[serde(flatten)]
    pub more: SummaryMore,
}

/// What only one mode's summary has.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum SummaryMore {
    /// A state directory's Bloom filter, disk use and unreachable hosts.
    State(Box<StateSummary>),
    /// A shared crawl's name, workers and counters.
    Shared(Box<SharedMore>),
}

/// The summary fields only a state directory has.
#[derive(Clone, Debug, Serialize)]
pub struct StateSummary {
    /// Bloom filter size now, log2 of bits.
    pub bloom_bits: u8,
    /// The filter grows with the crawl.
    pub bloom_sized: bool,
    /// Bloom hash count.
    pub bloom_hashes: u8,
    /// Fraction of Bloom bits set.
    pub bloom_fill_ratio: f64,
    /// Estimated false-positive rate now.
    pub bloom_fpr_estimate: f64,
    /// Bloom false positives caught by the exact set.
    pub bloom_false_positives: u64,
    /// Bytes the state directory takes on disk.
    pub disk_bytes: u64,
    /// Peak resident memory of the last run that ended, KiB.
    pub last_run_peak_rss_kib: Option<u64>,
    /// Hosts that could not be reached in their last runs.
    pub unreachable: Vec<UnreachableHost>,
    /// Seeds whose host is parked now.
    pub parked_seeds: Vec<String>,
    /// The running crawl's status, when the summary is the one it published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<Status>,
}

/// The summary fields only a shared crawl has.
#[derive(Clone, Debug, Serialize)]
pub struct SharedMore {
    /// The crawl's name.
    pub name: String,
    /// Page records kept.
    pub page_records: u64,
    /// Hosts parked because their robots.txt kept failing.
    pub parked_hosts: u64,
    /// Workers listed, with the leases they hold.
    pub workers: Vec<WorkerView>,
    /// Every counter of the crawl.
    pub counters: BTreeMap<String, u64>,
}

impl Summary {
    /// The summary of a state directory (`live`: the status a running
    /// crawl published it in).
    pub fn of_state(s: crate::store::Summary, live: Option<Status>) -> Summary {
        Summary {
            frontier: s.frontier,
            in_flight: s.in_flight,
            seen: s.seen,
            items: s.items,
            pages: s.pages,
            filtered: s.filtered,
            robots_disallowed: s.robots_disallowed,
            hosts: s.hosts,
            runs: s.runs,
            job: s.job,
            dedup: s.dedup,
            due_now: None,
            revisit_budget: None,
            more: SummaryMore::State(Box::new(StateSummary {
                bloom_bits: s.bloom_bits,
                bloom_sized: s.bloom_sized,
                bloom_hashes: s.bloom_hashes,
                bloom_fill_ratio: s.bloom_fill_ratio,
                bloom_fpr_estimate: s.bloom_fpr_estimate,
                bloom_false_positives: s.bloom_false_positives,
                disk_bytes: s.disk_bytes,
                last_run_peak_rss_kib: s.last_run_peak_rss_kib,
                unreachable: s.unreachable,
                parked_seeds: s.parked_seeds,
                live,
            })),
        }
    }

    /// The summary of a shared crawl.
    pub fn of_shared(s: SharedSummary) -> Summary {
        let count = |name: &str| s.counters.get(name).copied().unwrap_or(0);
        Summary {
            frontier: s.frontier,
            in_flight: s.in_flight,
            seen: s.seen,
            items: s.items,
            pages: count("pages/completed"),
            filtered: count("dupefilter/filtered"),
            robots_disallowed: count("robots/disallowed"),
            hosts: s.hosts,
            runs: s.runs,
            job: s.job,
            dedup: s.dedup.to_owned(),
            due_now: None,
            revisit_budget: None,
            more: SummaryMore::Shared(Box::new(SharedMore {
                name: s.name,
                page_records: s.page_records,
                parked_hosts: s.parked_hosts,
                workers: s.workers,
                counters: s.counters,
            })),
        }
    }
}

/// One queued request (`dump frontier`).
#[derive(Clone, Debug, Serialize)]
pub struct FrontierEntry {
    /// Its host.
    pub host: String,
    /// Its place in its host's queue (1: leased next).
    pub place: u64,
    /// Leased by a crawl that holds the state (a shared crawl's head
    /// lists only requests not leased).
    pub leased: bool,
    /// The request.
    pub request: Request,
    /// Its sequence number in a state directory's queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
}

/// What the seen set says about a URL (`dump seen URL`).
#[derive(Clone, Debug, Serialize)]
pub struct SeenAnswer {
    /// The URL as given.
    pub url: String,
    /// Its canonical form.
    pub canonical: String,
    /// Hex fingerprint of a GET of it.
    pub fingerprint: String,
    /// The exact set's answer; `None` when no exact set is kept (`dedup =
    /// bloom`).
    pub exact: Option<bool>,
    /// Its page record, when it was fetched.
    pub page: Option<PageRecord>,
    /// The Bloom filter's answer ("maybe seen"); a state directory's only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bloom: Option<bool>,
}

/// The columns `dump runs` shows, from a run's counters.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RunColumns {
    /// The pages by outcome.
    #[serde(flatten)]
    pub totals: PageTotals,
    /// Responses received (`pages/fetched`).
    pub fetched: u64,
    /// Items stored.
    pub items: u64,
    /// Requests dropped as duplicates.
    pub filtered: u64,
    /// Body bytes received.
    pub bytes: u64,
}

impl RunColumns {
    /// The columns of a run whose counters are `counters`.
    pub fn of(counters: &BTreeMap<String, u64>) -> RunColumns {
        let count = |name: &str| counters.get(name).copied().unwrap_or(0);
        RunColumns {
            totals: PageTotals::of(count),
            fetched: count("pages/fetched"),
            items: count("items/stored"),
            filtered: count("dupefilter/filtered"),
            bytes: count("fetch/bytes"),
        }
    }
}

/// One run (`dump runs`, the `--stats` report, serve's history).
#[derive(Clone, Debug, Serialize)]
pub struct RunRow {
    /// Run number, from 1.
    pub id: u64,
    /// Unix seconds at start.
    pub started_at: u64,
    /// Unix seconds at its end; `None` while running or after a kill.
    pub ended_at: Option<u64>,
    /// `started_at` as RFC 3339 text.
    pub started: String,
    /// `ended_at` as RFC 3339 text.
    pub ended: Option<String>,
    /// How it ended.
    pub outcome: String,
    /// Process id of the crawl or worker.
    pub pid: Option<u32>,
    /// The job version it began under.
    pub job: Option<u64>,
    /// Its counters.
    pub counters: BTreeMap<String, u64>,
    /// The table's columns, from the counters.
    #[serde(flatten)]
    pub columns: RunColumns,
    /// What only one mode records.
    #[serde(flatten)]
    pub more: RunMore,
}

/// What only one mode's run record has.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum RunMore {
    /// A state directory's run.
    State {
        /// Unix seconds at its last commit or its end.
        updated_at: u64,
        /// Sequence number of its first item.
        first_item: Option<u64>,
    },
    /// A worker's run of a shared crawl.
    Shared {
        /// The worker (`HOST:PID`).
        worker: String,
        /// Its length in seconds.
        seconds: Option<f64>,
        /// Every job version it ran under.
        jobs: Vec<u64>,
        /// The stream id its items come after.
        items_after: Option<String>,
        /// The stream id its items reach.
        items_until: Option<String>,
    },
}

impl RunRow {
    /// The row of a state directory's run record.
    pub fn of_record(run: &RunRecord) -> RunRow {
        RunRow {
            id: run.id,
            started_at: run.started_at,
            ended_at: run.ended_at,
            started: rfc3339_secs(run.started_at),
            ended: run.ended_at.map(rfc3339_secs),
            outcome: run.outcome.as_str().to_owned(),
            pid: Some(run.pid),
            job: run.job,
            counters: run.counters.clone(),
            columns: RunColumns::of(&run.counters),
            more: RunMore::State {
                updated_at: run.updated_at,
                first_item: run.first_item,
            },
        }
    }

    /// The row of run `id` of a shared crawl, from its JSON record.
    pub fn of_json(id: u64, record: &serde_json::Value) -> RunRow {
        let text = |field: &str| {
            record
                .get(field)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let number = |field: &str| record.get(field).and_then(serde_json::Value::as_u64);
        let counters: BTreeMap<String, u64> = record
            .get("counters")
            .and_then(serde_json::Value::as_object)
            .map(|map| {
                map.iter()
                    .filter_map(|(name, n)| Some((name.clone(), n.as_u64()?)))
                    .collect()
            })
            .unwrap_or_default();
        let worker = text("worker").unwrap_or_default();
        let started_at = number("started_at").unwrap_or(0);
        let ended_at = number("ended_at");
        RunRow {
            id,
            started_at,
            ended_at,
            started: rfc3339_secs(started_at),
            ended: ended_at.map(rfc3339_secs),
            outcome: text("outcome").unwrap_or_else(|| "-".to_owned()),
            pid: worker.rsplit(':').next().and_then(|pid| pid.parse().ok()),
            job: number("job"),
            columns: RunColumns::of(&counters),
            counters,
            more: RunMore::Shared {
                seconds: record.get("seconds").and_then(serde_json::Value::as_f64),
                jobs: record
                    .get("jobs")
                    .and_then(serde_json::Value::as_array)
                    .map(|all| all.iter().filter_map(serde_json::Value::as_u64).collect())
                    .unwrap_or_default(),
                items_after: text("items_after"),
                items_until: text("items_until"),
                worker,
            },
        }
    }

    /// How long it ran, in seconds: as the worker measured it, else from
    /// its start to its end (or its last commit).
    pub fn seconds(&self) -> f64 {
        match &self.more {
            RunMore::Shared { seconds, .. } => seconds.unwrap_or(0.0),
            RunMore::State { updated_at, .. } => {
                self.ended_at
                    .unwrap_or(*updated_at)
                    .saturating_sub(self.started_at) as f64
            }
        }
    }

    /// Who ran it, for the table: the worker of a shared crawl, else the
    /// process id.
    pub fn by(&self) -> String {
        match &self.more {
            RunMore::Shared { worker, .. } => worker.clone(),
            RunMore::State { .. } => self.pid.map_or_else(|| "-".to_owned(), |p| p.to_string()),
        }
    }
}

/// One version of the crawl's job (`dump job`).
#[derive(Clone, Debug, Serialize)]
pub struct JobView {
    /// Version number, from 1.
    pub version: u64,
    /// Unix seconds when it was stored.
    pub created_at: u64,
    /// The job as a crawl file.
    pub text: String,
    /// What only one mode records.
    #[serde(flatten)]
    pub more: JobMore,
    /// What the header line adds (the later versions the run took up).
    #[serde(skip)]
    pub note: String,
}

/// What only one mode's job record has.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum JobMore {
    /// A state directory's job.
    State {
        /// The run that first used it.
        first_run: u64,
    },
    /// A shared crawl's job.
    Shared {
        /// The worker that stored it (`HOST:PID`).
        worker: String,
    },
}
