//! Per-host queue counts and heads for the published snapshot: read-only, from
//! the frontier's host index and its queue records, bounded so that a 1 Hz
//! snapshot costs little however large the frontier is. Depends on the
//! [`State`]'s frontier and the queue's layout (`queue`).

use crate::store::queue::{queue_host_prefix, record_entries};
use crate::store::{State, StoreError};

/// Queue entries counted per host at most (past it the count says "more").
pub const COUNT_CAP: u64 = 5_000;
/// Queue entries counted over all hosts per snapshot at most; hosts past it are
/// shown with a count of 0 and "more".
pub const COUNT_BUDGET: u64 = 200_000;

/// One host's queue, as far as it was counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostQueueView {
    /// The frontier's id of the host.
    pub host_id: u32,
    /// The host name.
    pub host: String,
    /// Queued entries not leased (at most [`COUNT_CAP`]).
    pub queued: u64,
    /// True when the count stopped at a cap or the budget.
    pub more: bool,
    /// Entries leased (in flight, or completed and not yet durable).
    pub leased: u64,
}

impl State {
    /// Every host of the frontier with its queued (capped) and leased counts.
    pub fn host_queues(&self) -> Result<Vec<HostQueueView>, StoreError> {
        let mut budget = COUNT_BUDGET;
        let mut out = Vec::with_capacity(self.frontier.hosts.len());
        for (&host_id, queue) in &self.frontier.hosts {
            let leased = queue.leased.len() as u64;
            let (mut entries, mut more) = (0u64, budget == 0);
            if !more {
                for record in self.db.scan(queue_host_prefix(host_id)) {
                    let (key, value) = record?;
                    for entry in record_entries(&value) {
                        entry.map_err(|reason| self.db.corrupt("queue", &key, reason))?;
                        entries += 1;
                    }
                    if entries >= COUNT_CAP + leased || entries >= budget {
                        more = true;
                        break;
                    }
                }
            }
            budget = budget.saturating_sub(entries);
            out.push(HostQueueView {
                host_id,
                host: queue.name.clone(),
                queued: entries.saturating_sub(leased).min(COUNT_CAP),
                more,
                leased,
            });
        }
        Ok(out)
    }

    /// The first `limit` queued URLs of a host, in lease order (leased ones
    /// included).
    pub fn queue_head(&self, host_id: u32, limit: usize) -> Result<Vec<String>, StoreError> {
        let mut urls = Vec::new();
        if limit == 0 {
            return Ok(urls);
        }
        self.frontier
            .for_each_queued(&self.db, host_id, |_, _, request| {
                urls.push(request.url);
                urls.len() < limit
            })?;
        Ok(urls)
    }
}
