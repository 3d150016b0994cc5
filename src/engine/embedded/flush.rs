//! The engine's side of group commit: seal a group, flush it off the loop,
//! and act on what became durable.
//!
//! A due group is sealed on the loop ([`crate::store::State::seal`]: its batch is built and
//! set aside) and applied and flushed on the committer's flush thread, so the
//! loop keeps fetching and completing pages into the next group while sled
//! works and the disk syncs. Only a durable group ends its leases, makes its new requests
//! leasable, reaches the Bloom bits and is streamed to `--output`. One group is
//! sealed at a time, so one flush runs at a time; at most [`GROUP_MAX_PAGES`] completed
//! pages are ever not durable (a full pipeline waits for its flush), which is
//! the bound invariant 3 of the brief counts per kill.
//!
//! A page with more than [`LINK_CHUNK`] links is not one group: its links are
//! queued part by part, each part sealed and flushed while the next fills, and
//! its completion comes with the last part, so no group (nor the seen set's
//! overlay) holds a million requests; a checkpoint that falls behind is waited
//! for, so the exact set's in-memory part stays bounded too.
//!
//! Checkpoints run off the loop too: when one is due after a flush, the state
//! detaches it ([`State::start_checkpoint`](crate::store::State::start_checkpoint))
//! and it runs beside the flushes; its result is handed back when it ends.
//! Both run on the threads of the crawl's [`Committer`](crate::store::Committer),
//! which waits for them if the crawl is dropped. With `--warc` the flush first
//! syncs the WARC file up to the mark in its group (see `archive`). Depends on
//! the store, the sink and the WARC writer only.

use super::{Embedded, EngineError};
use crate::request::Request;
use crate::store::{Checkpointed, GROUP_MAX_PAGES, LINK_CHUNK, Receipt, StoreError};

impl Embedded<'_> {
    /// Seals the open group when it is due and no flush runs, or waits for the
    /// running flush first when the pipeline is full.
    pub(super) async fn maybe_seal(&mut self) -> Result<(), EngineError> {
        if self.committer.flushing() && self.state.undurable_pages() >= GROUP_MAX_PAGES {
            self.finish_flush().await?;
        }
        if !self.committer.flushing() && self.state.group_due() {
            self.seal()?;
        }
        self.keep_up_with_checkpoint().await
    }

    /// Queues a page's links part by part when there are more than
    /// [`LINK_CHUNK`]: every part but the last is queued into the open group,
    /// which is then sealed and flushed while the next part fills it (so at most
    /// two parts are in memory as groups). Returns the last part, with the
    /// requests that bypass the seen set (queued earlier, a crash before the
    /// page's completion would queue them twice): the page's completion queues
    /// them. A crash between parts leaves the page queued, so it is fetched
    /// again and its links already queued are found in the seen set.
    pub(super) async fn queue_in_parts(
        &mut self,
        mut requests: Vec<Request>,
    ) -> Result<Vec<Request>, EngineError> {
        if requests.len() <= LINK_CHUNK {
            return Ok(requests);
        }
        let mut last: Vec<Request> = requests.extract_if(.., |r| r.dont_filter).collect();
        // Taken from the front as they are queued: each request's strings are
        // freed once its part is in the group.
        let mut rest = requests.into_iter();
        let mut part = Vec::with_capacity(LINK_CHUNK);
        while rest.len() > LINK_CHUNK {
            part.clear();
            part.extend(rest.by_ref().take(LINK_CHUNK));
            self.queue_link_part(&part).await?;
        }
        last.extend(rest);
        Ok(last)
    }

    /// Queues a part of a page's links (not its last) into the open group,
    /// then seals the group and starts its flush once the one before has
    /// ended, so at most two parts are in memory as groups.
    pub(super) async fn queue_link_part(&mut self, part: &[Request]) -> Result<(), EngineError> {
        self.state
            .queue_links(part, &self.active.config.fingerprint_headers)?;
        self.finish_flush().await?;
        self.seal()?;
        self.keep_up_with_checkpoint().await
    }

    /// Waits for the running checkpoint when the fingerprints recorded since
    /// it started reached their bound ([`State::checkpoint_behind`]), and
    /// starts the next one if it is due.
    ///
    /// [`State::checkpoint_behind`]: crate::store::State::checkpoint_behind
    async fn keep_up_with_checkpoint(&mut self) -> Result<(), EngineError> {
        if self.committer.checkpointing() && self.state.checkpoint_behind() {
            self.finish_checkpoint().await?;
            self.maybe_checkpoint()?;
        }
        Ok(())
    }

    /// Puts the cookie jar into the open group when a cookie was stored since
    /// the last group: it is durable with the completions of the pages that
    /// set it.
    pub(super) fn keep_cookies(&mut self) {
        if let Some(jar) = self
            .active
            .fetcher
            .cookie_jar()
            .and_then(|jar| jar.take_changed())
        {
            self.state.put_cookies(&jar);
        }
    }

    /// Seals the open group (with the robots.txt answers fetched since the last
    /// one) and starts its flush, unless a sealed group's flush still runs.
    /// True when a group was sealed.
    pub(super) fn seal(&mut self) -> Result<bool, EngineError> {
        if let Some(robots) = &self.active.robots {
            let (records, exchanges) = robots.take_new();
            for record in records {
                // Status 0: no answer came (see `robots`); the run's exit
                // status tells a crawl that got no answer at all.
                let answer = match record.status {
                    0 => "robots/no_answer",
                    _ => "robots/answered",
                };
                self.state.count(answer, 1);
                if self.active.config.sitemaps {
                    self.queue_sitemaps(&record)?;
                }
                self.state.put_robots(&record.origin, &record);
            }
            self.archive_robots(exchanges)?;
        }
        self.keep_cookies();
        // The WARC file's length goes into the group; the file is synced
        // before the group's batch is applied, on the flush thread.
        let warc = self.archive_seal()?;
        // The state seals nothing while its sealed group's flush runs.
        match self.state.seal()? {
            Some(flush) => {
                self.committer.start_flush(flush, move || match warc {
                    Some(sync) => sync.run().map_err(warc_error),
                    None => Ok(()),
                });
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Queues the sitemaps a fetched robots.txt lists (see `sitemaps`), in
    /// the open group.
    fn queue_sitemaps(&mut self, record: &crate::robots::RobotsRecord) -> Result<(), EngineError> {
        let mut counters = Vec::new();
        let agent = &self.active.config.user_agent;
        for request in
            crate::page::sitemaps::from_robots(record, agent, &self.active.scope, &mut counters)
        {
            if self
                .state
                .enqueue(&request, &self.active.config.fingerprint_headers)?
            {
                counters.push(("sitemap/robots_queued", 1));
            }
        }
        for (name, by) in counters {
            self.state.count(name, by);
        }
        Ok(())
    }

    /// Waits for the running flush (if any) and acts on it; returns pages made durable.
    pub(super) async fn finish_flush(&mut self) -> Result<usize, EngineError> {
        match self.committer.flushed().await {
            Some(result) => self.flush_ended(result),
            None => Ok(0),
        }
    }

    /// Acts on the result of a flush: [`Embedded::flushed`], or the state is
    /// poisoned by the failure and the error ends the crawl.
    pub(super) fn flush_ended(
        &mut self,
        result: Result<Receipt, StoreError>,
    ) -> Result<usize, EngineError> {
        match result {
            Ok(receipt) => self.flushed(receipt),
            Err(error) => {
                self.state.flush_failed(&error);
                Err(error.into())
            }
        }
    }

    /// Acts on a finished flush: leases end, items are streamed, and a
    /// checkpoint starts when one is due.
    fn flushed(&mut self, receipt: Receipt) -> Result<usize, EngineError> {
        let outcome = self.state.durable(receipt);
        self.maybe_checkpoint()?;
        if let Some(sink) = self.sink.as_mut()
            && !outcome.items.is_empty()
        {
            sink.catch_up(self.state)?;
        }
        self.progress
            .committed(self.state, &self.politeness, outcome.pages);
        Ok(outcome.pages)
    }

    /// Makes everything completed so far durable before returning (end of run,
    /// stop, nothing left to lease); returns pages made durable.
    pub(super) async fn commit_all(&mut self) -> Result<usize, EngineError> {
        let mut pages = self.finish_flush().await?;
        if self.seal()? {
            pages += self.finish_flush().await?;
        }
        self.maybe_checkpoint()?;
        Ok(pages)
    }

    /// Starts a checkpoint when one is due and none runs.
    fn maybe_checkpoint(&mut self) -> Result<(), EngineError> {
        if !self.committer.checkpointing()
            && self.state.checkpoint_due()
            && let Some(job) = self.state.start_checkpoint()?
        {
            self.committer.start_checkpoint(job);
        }
        Ok(())
    }

    /// Waits for the running checkpoint (if any) and hands its result to the state.
    pub(super) async fn finish_checkpoint(&mut self) -> Result<(), EngineError> {
        match self.committer.checkpointed().await {
            Some(result) => self.checkpoint_ended(result),
            None => Ok(()),
        }
    }

    /// Acts on the result of a checkpoint; a failed (or panicked) one gives
    /// its work back to the state and ends the crawl.
    pub(super) fn checkpoint_ended(
        &mut self,
        result: Result<Checkpointed, StoreError>,
    ) -> Result<(), EngineError> {
        match result {
            Ok(done) => {
                self.state.checkpointed(done);
                Ok(())
            }
            Err(error) => {
                self.state.checkpoint_failed();
                Err(error.into())
            }
        }
    }
}

/// A WARC sync that failed, as the flush's error: the group is not applied.
fn warc_error(error: crate::warc::WarcError) -> StoreError {
    match error {
        crate::warc::WarcError::Io { path, source } => StoreError::Io { path, source },
        crate::warc::WarcError::Store(error) => error,
        other => StoreError::Io {
            path: std::path::PathBuf::new(),
            source: std::io::Error::other(other.to_string()),
        },
    }
}
