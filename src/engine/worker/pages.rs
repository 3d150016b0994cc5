//! A worker's finished pages: each completed with the completion script (those
//! finished together, in one batch: with `--warc`, one sync of the WARC file
//! for all of them), and the parts of a page's links its task sends ahead,
//! accepted here ([`crate::page::accept`]).

use super::warc::WorkerWarc;
use super::{Worker, new_request};
use crate::engine::EngineError;
use crate::fingerprint::fingerprint;
use crate::page::PageResult;
use crate::page::accept::Accept;
use crate::page::parts::Part;
use crate::page::record::{PageEnd, PageWrite, page_write};
use crate::page::sitemaps::from_robots;
use crate::request::Request;
use crate::robots::RobotsRecord;
use crate::shared::client::{
    Completed, DueChange, NewRequest, PageCompletion, Queued, SharedLease,
};

/// A finished page made ready for its completion script.
struct Ready {
    lease: SharedLease,
    completion: PageCompletion,
    /// The robots.txt answers whose sitemaps it queues.
    robots: Vec<RobotsRecord>,
    /// Those sitemaps, queued under the page's lease ahead of it (counted
    /// apart, as the embedded state counts them).
    sitemaps: Vec<NewRequest>,
    /// Its WARC records.
    archived: Vec<u8>,
}

impl Worker {
    /// Completes finished pages in the order given, each with the completion
    /// script. With `--warc` their records are written first, with one sync
    /// for all of them (see [`super::warc`]). A page's lease stays
    /// held until its completion is settled.
    pub(super) async fn complete_pages(
        &mut self,
        finished: Vec<(SharedLease, PageResult)>,
    ) -> Result<(), EngineError> {
        let mut ready = Vec::with_capacity(finished.len());
        for (lease, result) in finished {
            ready.push(self.prepare(lease, result).await?);
        }
        if let Some(warc) = &mut self.warc {
            let pages = ready
                .iter_mut()
                .map(|page| std::mem::take(&mut page.archived))
                .collect();
            warc.write(&self.shared, pages).await?;
        }
        for page in ready {
            self.complete_one(page).await?;
        }
        if let Some(warc) = &mut self.warc {
            warc.settled();
        }
        self.active.keep_cookies(&self.shared).await?;
        Ok(())
    }

    /// Works out a finished page's completion: its page record, the robots.txt
    /// answers and sitemaps fetched since the last one, its new requests
    /// (scope checked) and its items.
    async fn prepare(
        &mut self,
        lease: SharedLease,
        mut result: PageResult,
    ) -> Result<Ready, EngineError> {
        if result.out_of_scope {
            // Dropped only under the crawl's newest job: another worker may
            // have widened the scope (a seed on a new host) since this
            // worker took up its version. Held by it, the request goes back
            // as it was, to be fetched.
            self.follow_job().await?;
            if self.active.scope.holds(&lease.request).is_ok() {
                let mut again = lease.request.clone();
                again.dont_filter = true;
                result.out_of_scope = false;
                result.requeued = true;
                result.requests.push(again);
            }
        }
        let robots_answered = self
            .active
            .robots
            .is_some()
            .then_some(!result.robots_unavailable);
        if let Some(error) = &result.unreachable
            && self.unreachable_said.insert(lease.host.clone())
        {
            tracing::warn!(host = %lease.host, "{error}");
        }
        let error = result.error_reason().map(|reason| {
            let row = crate::status::snapshot::ErrorRow {
                at: crate::store::records::unix_now(),
                url: lease.request.url.clone(),
                reason,
            };
            serde_json::to_string(&row).unwrap_or_default()
        });
        let PageResult {
            requests,
            mut items,
            mut counters,
            seen,
            prior,
            failed,
            requeued,
            out_of_scope,
            backoff,
            crawl_delay,
            archived,
            ..
        } = result;
        if requeued {
            counters.push(("pages/requeued", 1));
        }
        let redirect = seen
            .as_ref()
            .is_some_and(|seen| (300..400).contains(&seen.status));
        let end = PageEnd {
            seen,
            prior,
            failed,
            requeued,
            out_of_scope,
            legs: u32::try_from(self.active.version).unwrap_or(u32::MAX),
            // A worker's WARC files are its own machine's: a shared crawl
            // keeps no response places (`reparse` is embedded only).
            response: None,
            reparse: None,
        };
        let (record, due) = match page_write(
            &self.active.schedule,
            &lease.request,
            end,
            self.active.legs.identity_field(),
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
        // Sitemaps by default: the `Sitemap:` lines of the robots.txt answers
        // fetched since the last completion are queued with this one.
        let mut robots = std::mem::take(&mut self.robots_pending);
        if let Some(cache) = &self.active.robots {
            let (records, exchanges) = cache.take_new();
            for record in &records {
                // Status 0: no answer came; the run's exit status tells a
                // crawl that got no answer at all (as the embedded seal).
                let answer = match record.status {
                    0 => "robots/no_answer",
                    _ => "robots/answered",
                };
                counters.push((answer, 1));
            }
            robots.extend(records);
            if let Some(warc) = &mut self.warc {
                warc.robots(exchanges);
            }
        }
        let mut sitemaps = Vec::new();
        if self.active.config.sitemaps {
            let agent = &self.active.config.user_agent;
            for record in &robots {
                sitemaps.extend(from_robots(
                    record,
                    agent,
                    &self.active.scope,
                    &mut counters,
                ));
            }
        }
        let sitemaps = self.accept(sitemaps, false, &mut counters).await?;
        let accepted = self.accept(requests, redirect, &mut counters).await?;
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
            warc: None,
            robots_answered,
            error,
            counters,
            items,
            requests: accepted,
        };
        Ok(Ready {
            lease,
            completion,
            robots,
            sitemaps,
            archived,
        })
    }

    /// Runs one page's completion script and acts on its answer. The page's
    /// records are in the worker's WARC file, synced, before the completion
    /// stores the length they reach with it.
    async fn complete_one(&mut self, page: Ready) -> Result<(), EngineError> {
        let Ready {
            lease,
            mut completion,
            robots,
            sitemaps,
            ..
        } = page;
        if !sitemaps.is_empty()
            && let Some(queued) = self
                .shared
                .queue_links(&self.id, lease.token, &sitemaps)
                .await?
        {
            self.count_queued(queued);
            self.count("sitemap/robots_queued", queued.queued);
        }
        completion.warc = self.warc.as_ref().and_then(WorkerWarc::mark);
        let answer = self.shared.complete(&self.id, &completion).await?;
        self.held.remove(&lease.token);
        match answer {
            Completed::Done { queued, parked } => {
                if parked {
                    self.count("robots/host_parked", 1);
                }
                if let Some(warc) = &mut self.warc {
                    warc.committed();
                }
                self.tally(&completion, queued);
                if let Some(output) = &mut self.output {
                    let kept = self.shared.last_completion_kept();
                    output
                        .committed(&self.shared, &completion.items, kept)
                        .await?;
                }
            }
            // Committed by the earlier attempt whose answer was lost.
            Completed::Already => {
                if let Some(warc) = &mut self.warc {
                    warc.committed();
                }
                self.tally(&completion, Queued::default());
                if let Some(output) = &mut self.output {
                    let unwritten = completion.items.len() as u64;
                    output.committed_before(&self.shared, unwritten).await?;
                }
            }
            Completed::Stale => {
                // Its records go: the page's next fetch writes them.
                if let Some(warc) = &mut self.warc {
                    warc.refused(&self.shared).await?;
                }
                tracing::warn!(
                    url = %lease.request.url,
                    "the lease expired before the page was completed; another worker fetches it again"
                );
                *self.counters.entry("leases/lost").or_default() += 1;
                // Their sitemaps were not queued: the next completion queues them.
                self.robots_pending.extend(robots.iter().cloned());
            }
        }
        self.shared.put_robots(&robots).await?;
        Ok(())
    }

    /// Queues a part of a page's links that its task sent while its legs run
    /// (scope checked here, deduplicated by the script), and answers with the
    /// counters of what was dropped, which come with the page's completion.
    pub(super) async fn queue_link_part(&mut self, part: Part) -> Result<(), EngineError> {
        let Part {
            lease,
            requests,
            ack,
        } = part;
        let mut counters = Vec::new();
        let accepted = self.accept(requests, false, &mut counters).await?;
        if let Some(queued) = self.shared.queue_links(&self.id, lease, &accepted).await? {
            self.count_queued(queued);
        }
        // The task is gone only if it was aborted; its page then goes back.
        // (A shared crawl makes no revisits from a part: nothing comes back.)
        let _ = ack.send((counters, Vec::new()));
        Ok(())
    }

    /// The requests the crawl may queue (see [`crate::page::accept`]), as
    /// the scripts take them; counts what it drops. The page records its
    /// rules need are read in one `HMGET`.
    async fn accept(
        &self,
        mut requests: Vec<Request>,
        redirect: bool,
        counters: &mut Vec<(&'static str, u64)>,
    ) -> Result<Vec<NewRequest>, EngineError> {
        let rules = Accept {
            scope: &self.active.scope,
            fingerprint_headers: &self.active.config.fingerprint_headers,
            run_started: self.started_at,
        };
        let lookups = rules.lookups(&mut requests, redirect, counters);
        let records = if lookups.is_empty() {
            Vec::new()
        } else {
            let fps: Vec<_> = lookups.iter().map(|(_, fp)| *fp).collect();
            self.shared.page_records(&fps).await?
        };
        rules.apply(&mut requests, redirect, &lookups, &records, counters);
        Ok(requests
            .into_iter()
            .map(|request| new_request(&self.active.config, request))
            .collect())
    }

    fn tally(&mut self, completion: &PageCompletion, queued: Queued) {
        for (name, by) in &completion.counters {
            *self.counters.entry(name).or_default() += by;
        }
        self.count("items/stored", completion.items.len() as u64);
        self.count("pages/completed", 1);
        self.count_queued(queued);
    }
}
