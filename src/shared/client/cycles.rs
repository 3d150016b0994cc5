//! The crawl's cycle and its due index: the calls a worker makes when it
//! starts (`lua/cycle.lua`, see `super::super::cycle`).

use super::pages::NewRequest;
use super::{SCRIPT_CHUNK, Shared, SharedError, array, count_at, encode_request, int, millis};
use crate::store::records::unix_now;

/// The crawl's cycle and whether it is drained.
#[derive(Clone, Copy, Debug, Default)]
pub struct CrawlState {
    /// Some worker stored seeds for this crawl.
    pub exists: bool,
    /// The crawl's cycle (1 for a new crawl).
    pub cycle: u64,
    /// When that cycle started (unix seconds).
    pub cycle_started: u64,
    /// Requests queued.
    pub frontier: u64,
    /// Live leases.
    pub live: u64,
    /// The cycle's seeds are being queued (a worker that starts sends them
    /// all again: the ones already queued are skipped).
    pub seeding: bool,
}

/// How a cycle request joins the frontier (see `lua/cycle.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CycleKind {
    /// A seed: queued again every cycle.
    Seed,
    /// A page due again: queued only if still in the due index.
    Due,
    /// A page a revisit budget chose: queued only if still in the due index
    /// and the cycle's budget is not spent.
    Budgeted,
}

/// What calls of the cycle script queued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CycleQueued {
    /// Requests queued.
    pub queued: u64,
    /// Of them, seeds.
    pub seeds: u64,
    /// Of them, pages due again.
    pub due: u64,
    /// Fingerprints new to the seen set (seeds new to the crawl).
    pub unique: u64,
}

impl CycleQueued {
    /// This and `other` together.
    pub fn and(self, other: CycleQueued) -> CycleQueued {
        CycleQueued {
            queued: self.queued + other.queued,
            seeds: self.seeds + other.seeds,
            due: self.due + other.due,
            unique: self.unique + other.unique,
        }
    }
}

impl Shared {
    /// The crawl's cycle, and whether it is drained.
    pub async fn state(&self) -> Result<CrawlState, SharedError> {
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET")
            .arg(self.keys.key("meta"))
            .arg("created")
            .arg("cycle")
            .arg("cycle_started")
            .arg("frontier")
            .arg("seeding");
        pipe.cmd("ZCARD").arg(self.keys.key("leases"));
        let v = self.pipeline("reading the crawl's state", &pipe).await?;
        let meta = v.first().and_then(array).unwrap_or(&[]);
        let field = |i: usize| count_at(meta, i);
        Ok(CrawlState {
            exists: field(0).is_some(),
            cycle: field(1).unwrap_or(1),
            cycle_started: field(2).unwrap_or(0),
            frontier: field(3).unwrap_or(0),
            live: count_at(&v, 1).unwrap_or(0),
            seeding: field(4) == Some(1),
        })
    }

    /// The fingerprints of the pages due by `until` (unix seconds), soonest
    /// first, at most `limit`.
    pub async fn due(&self, until: u64, limit: usize) -> Result<Vec<[u8; 20]>, SharedError> {
        let fps: Vec<Vec<u8>> = self
            .query(
                "reading the due index",
                redis::cmd("ZRANGE")
                    .arg(self.keys.key("due"))
                    .arg("-inf")
                    .arg(until)
                    .arg("BYSCORE")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(limit),
            )
            .await?;
        Ok(fps
            .iter()
            .filter_map(|fp| <[u8; 20]>::try_from(fp.as_slice()).ok())
            .collect())
    }

    /// How many pages are due at or before `until` (unix seconds).
    pub async fn due_count(&self, until: u64) -> Result<u64, SharedError> {
        self.query(
            "counting the due index",
            redis::cmd("ZCOUNT")
                .arg(self.keys.key("due"))
                .arg("-inf")
                .arg(until),
        )
        .await
    }

    /// Takes `fps` out of the due index.
    pub async fn forget_due(&self, fps: &[[u8; 20]]) -> Result<(), SharedError> {
        if fps.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("ZREM");
        cmd.arg(self.keys.key("due"));
        for fp in fps {
            cmd.arg(fp.as_slice());
        }
        self.query::<i64>("updating the due index", &cmd)
            .await
            .map(drop)
    }

    /// Queues seeds and due pages for a cycle (see `lua/cycle.lua`),
    /// [`SCRIPT_CHUNK`] per call: with `start`, the first call starts cycle
    /// `cycle + 1` if the crawl is still drained on `cycle`, the others queue
    /// more of it; else every call queues more of cycle `cycle`. `None` when
    /// the first call's guard failed (another worker started the cycle, or it
    /// moved on); a later call's failing guard ends the calls. A cycle
    /// started with a `budget` queues at most that many
    /// [`CycleKind::Budgeted`] pages, whoever sends them.
    pub async fn queue_cycle(
        &self,
        cycle: u64,
        start: bool,
        budget: Option<u64>,
        requests: &[(CycleKind, NewRequest)],
    ) -> Result<Option<CycleQueued>, SharedError> {
        let (mut cycle, mut start, mut total) = (cycle, start, CycleQueued::default());
        let mut chunks: Vec<&[(CycleKind, NewRequest)]> = requests.chunks(SCRIPT_CHUNK).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for (i, chunk) in chunks.into_iter().enumerate() {
            let mode: &[u8] = if start { b"start" } else { b"more" };
            match self.cycle_call(cycle, mode, budget, chunk).await? {
                Some(n) => total = total.and(n),
                None if i == 0 => return Ok(None),
                None => break,
            }
            if start {
                (cycle, start) = (cycle + 1, false);
            }
        }
        Ok(Some(total))
    }

    /// Every seed of cycle `cycle` was sent: the cycle is no longer seeding.
    pub async fn seeded(&self, cycle: u64) -> Result<(), SharedError> {
        self.cycle_call(cycle, b"seeded", None, &[]).await.map(drop)
    }

    /// One call of `lua/cycle.lua`.
    async fn cycle_call(
        &self,
        cycle: u64,
        mode: &[u8],
        budget: Option<u64>,
        requests: &[(CycleKind, NewRequest)],
    ) -> Result<Option<CycleQueued>, SharedError> {
        let mut args = vec![
            cycle.to_string().into_bytes(),
            mode.to_vec(),
            unix_now().to_string().into_bytes(),
            budget
                .map(|b| b.to_string())
                .unwrap_or_default()
                .into_bytes(),
            requests.len().to_string().into_bytes(),
        ];
        for (kind, r) in requests {
            args.push(match kind {
                CycleKind::Seed => b"s".to_vec(),
                CycleKind::Due => b"d".to_vec(),
                CycleKind::Budgeted => b"b".to_vec(),
            });
            args.push(r.request.url.clone().into_bytes());
            args.push(r.host.clone().into_bytes());
            args.push(r.fingerprint.to_vec());
            args.push(encode_request(&r.request));
            args.push(millis(r.delay).into_bytes());
            args.push(r.request.priority.to_string().into_bytes());
        }
        let value = self
            .script("queueing a cycle", |s| &s.cycle, &[], &args)
            .await?;
        if int(&value) == Some(-1) {
            return Ok(None);
        }
        let parts = array(&value).unwrap_or(&[]);
        let number = |i: usize| count_at(parts, i);
        match (number(0), number(1), number(2), number(3)) {
            (Some(queued), Some(seeds), Some(due), Some(unique)) => Ok(Some(CycleQueued {
                queued,
                seeds,
                due,
                unique,
            })),
            _ => Err(self.corrupt("the cycle script's answer")),
        }
    }
}
