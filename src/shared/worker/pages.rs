//! A worker's finished pages: each completed with the completion script, and
//! the parts of a page's links its task sends ahead, scope checked here.

use super::{Worker, new_request};
use crate::engine::EngineError;
use crate::engine::page::PageResult;
use crate::engine::parts::Part;
use crate::engine::revisits::{PageEnd, PageWrite, page_write};
use crate::engine::task;
use crate::fingerprint::fingerprint;
use crate::request::Request;
use crate::shared::client::{Completed, DueChange, NewRequest, PageCompletion, SharedLease};

impl Worker {
    /// Completes one finished page with the completion script.
    pub(super) async fn complete(
        &mut self,
        lease: SharedLease,
        result: PageResult,
    ) -> Result<(), EngineError> {
        self.held.remove(&lease.token);
        task::reap(&mut self.tasks);
        let robots_answered = self
            .active
            .robots
            .is_some()
            .then_some(!result.robots_unavailable);
        let PageResult {
            requests,
            mut items,
            mut counters,
            seen,
            prior,
            failed,
            requeued,
            backoff,
            crawl_delay,
            ..
        } = result;
        if requeued {
            counters.push(("pages/requeued", 1));
        }
        let end = PageEnd {
            seen,
            prior,
            failed,
            requeued,
        };
        let (record, due) = match page_write(
            &self.active.schedule,
            &lease.request,
            end,
            &mut items,
            &mut counters,
        ) {
            PageWrite::Put { record, .. } => {
                let due = match record.next_due {
                    Some(at) => DueChange::At(at),
                    _ => DueChange::Clear,
                };
                (Some(crate::store::encode_page(&record)), due)
            }
            PageWrite::KeepDue(at) => (None, DueChange::At(at)),
            PageWrite::Nothing => (None, DueChange::Leave),
        };
        let accepted = self.accept(requests, &mut counters);
        let items: Vec<String> = items
            .iter()
            .map(|item| serde_json::Value::Object(item.clone()).to_string())
            .collect();
        let completion = PageCompletion {
            token: lease.token,
            backoff,
            crawl_delay,
            fingerprint: fingerprint(&lease.request, &self.active.config.fingerprint_headers),
            record,
            due,
            output: self.output.as_ref().map(|o| o.id().to_owned()),
            robots_answered,
            counters,
            items,
            requests: accepted,
        };
        match self.shared.complete(&self.id, &completion).await? {
            Completed::Done { queued, filtered } => {
                self.tally(&completion, queued, filtered);
                if let Some(output) = &mut self.output {
                    output.append(&completion.items)?;
                }
            }
            // Committed by the earlier attempt whose answer was lost.
            Completed::Already => {
                self.tally(&completion, 0, 0);
                if let Some(output) = &mut self.output {
                    output.catch_up(&self.shared).await?;
                }
            }
            Completed::Stale => {
                tracing::warn!(
                    url = %lease.request.url,
                    "the lease expired before the page was completed; another worker fetches it again"
                );
                *self.counters.entry("leases/lost").or_default() += 1;
            }
        }
        if let Some(robots) = &self.active.robots {
            let records = robots.take_new_records();
            self.shared.put_robots(&records).await?;
        }
        Ok(())
    }

    /// Queues a part of a page's links that its task sent while its legs run
    /// (scope checked here, deduplicated by the script), and answers with the
    /// counters of what was dropped, which come with the page's completion.
    pub(super) async fn queue_part(&mut self, part: Part) -> Result<(), EngineError> {
        let Part {
            lease,
            requests,
            ack,
        } = part;
        let mut counters = Vec::new();
        let accepted = self.accept(requests, &mut counters);
        if let Some((queued, filtered)) =
            self.shared.queue_links(&self.id, lease, &accepted).await?
        {
            *self.counters.entry("frontier/enqueued").or_default() += queued;
            *self.counters.entry("dupefilter/filtered").or_default() += filtered;
        }
        // The task is gone only if it was aborted; its page then goes back.
        // (A shared crawl makes no revisits from a part: nothing comes back.)
        let _ = ack.send((counters, Vec::new()));
        Ok(())
    }

    /// The requests the crawl may queue, credentials stripped and scope
    /// checked; counts what it drops.
    fn accept(
        &self,
        requests: Vec<Request>,
        counters: &mut Vec<(&'static str, u64)>,
    ) -> Vec<NewRequest> {
        let mut accepted = Vec::with_capacity(requests.len());
        for mut request in requests {
            crate::engine::scope::strip_credentials(&mut request, counters);
            match self.active.scope.check(&request) {
                Ok(()) => accepted.push(new_request(&self.active.config, request)),
                Err(rejected) => counters.push((rejected.counter(), 1)),
            }
        }
        accepted
    }

    fn tally(&mut self, completion: &PageCompletion, queued: u64, filtered: u64) {
        for (name, by) in &completion.counters {
            *self.counters.entry(name).or_default() += by;
        }
        *self.counters.entry("items/stored").or_default() += completion.items.len() as u64;
        *self.counters.entry("pages/completed").or_default() += 1;
        *self.counters.entry("frontier/enqueued").or_default() += queued;
        *self.counters.entry("dupefilter/filtered").or_default() += filtered;
    }
}
