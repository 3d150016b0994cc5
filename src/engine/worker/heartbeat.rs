//! A worker's heartbeat: a task of its own that runs `lua/beat.lua` every
//! [`HEARTBEAT`], so that the worker's liveness does not wait on its crawl
//! loop (a long completion, a dense page's links) nor on its leases' TTL.
//! Each beat also returns the leases of workers not heard from for
//! [`SILENCE_BOUND`] (`lua/common.lua`, `reap`). The task ends when the
//! [`Heartbeat`] is stopped or dropped. Depends on [`crate::shared`].

use std::sync::Arc;

use crate::shared::Shared;
use crate::shared::client::{HEARTBEAT, SILENCE_BOUND};

/// The running heartbeat of one worker.
pub(super) struct Heartbeat {
    task: tokio::task::JoinHandle<()>,
}

impl Heartbeat {
    /// Beats for `worker` every [`HEARTBEAT`] from now on, on its own task.
    pub(super) fn start(shared: Arc<Shared>, worker: String) -> Heartbeat {
        let task = tokio::spawn(async move {
            let mut every = tokio::time::interval(HEARTBEAT);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut first = true;
            loop {
                every.tick().await;
                match shared.beat(&worker).await {
                    Ok(beat) => {
                        if beat.was_absent && !first {
                            tracing::warn!(
                                silence_bound_s = SILENCE_BOUND.as_secs(),
                                "this worker was not heard from for longer than the bound and was \
                                 taken for dead: its leases went back to the frontier, and the \
                                 pages it still finishes under them are not written"
                            );
                        }
                        if beat.released > 0 {
                            tracing::info!(
                                released = beat.released,
                                "leases of workers whose heartbeat stopped went back to the frontier"
                            );
                        }
                        first = false;
                    }
                    // The crawl loop meets the same failure in its next call
                    // and says it; the heartbeat tries again at its next tick.
                    Err(error) => tracing::debug!(%error, "a heartbeat failed"),
                }
            }
        });
        Heartbeat { task }
    }

    /// Stops beating (a worker that returned its leases and is leaving).
    pub(super) fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}
