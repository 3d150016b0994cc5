//! The retry loop every call of a worker goes through: a server that is away
//! (refused, dropped, busy, loading) is waited out with backoff for as long
//! as it takes; a Redis Cluster between states (a failover, a resharding) is
//! followed for at most [`FAILOVER_WAIT`]; anything else fails the call.
//!
//! The worker says so in two lines, whatever number of calls were waiting:
//! one when Redis stops answering, one when it answers again (a flag shared by
//! the connection's calls). Depends on the connection (`super`) and the error
//! classes of `server`.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis::RedisResult;

use super::server::{self, Class};
use super::{Shared, SharedError, link};

/// The longest a call follows a Redis Cluster that is between states
/// (`MOVED`, `ASK`, `TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN`, `READONLY` in a
/// row, with refused connections to a failed node in between) before the
/// worker stops. A normal failover takes about twice `cluster-node-timeout`
/// (the failure is agreed on after one, the replica's election is bounded by
/// two) plus a second or two: about 32 s with Redis's default of 15 s, 6 s
/// with 2 s. One minute covers the default with room to spare.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(60);

/// The first wait between two attempts of a call; it doubles up to
/// [`MAX_BACKOFF`] (or [`FAILOVER_BACKOFF`] while a cluster changes).
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// The longest wait between two attempts of a call to a server that is away.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The longest wait between two attempts while a cluster changes: a new
/// primary is taken up within a second of its election.
const FAILOVER_BACKOFF: Duration = Duration::from_secs(1);

impl Shared {
    /// Runs `op` until it succeeds or fails for good, waiting out a server that
    /// is away with backoff, following a cluster that changes for at most
    /// [`FAILOVER_WAIT`], and connecting anew after `READONLY` from one
    /// server.
    pub(super) async fn retrying<T, F, Fut>(
        &self,
        what: &'static str,
        mut op: F,
    ) -> Result<T, SharedError>
    where
        F: FnMut(link::Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let cluster = self.link.is_cluster();
        let mut wait = FIRST_BACKOFF;
        // When the cluster was first seen between states in this call.
        let mut changing: Option<Instant> = None;
        loop {
            let error = match op(self.conn()).await {
                Ok(value) => {
                    if self.away.swap(false, Ordering::SeqCst) {
                        tracing::warn!(url = %self.target.shown(), "Redis answers again; going on");
                    }
                    return Ok(value);
                }
                Err(error) => error,
            };
            let class = server::classify(&error, cluster);
            if class == Class::Fatal || self.stopping.load(Ordering::SeqCst) {
                return Err(self.failed(what, &error));
            }
            let mut most = MAX_BACKOFF;
            if class == Class::Failover {
                let since = *changing.get_or_insert_with(Instant::now);
                if since.elapsed() >= FAILOVER_WAIT {
                    return Err(SharedError::Unsettled {
                        url: self.target.shown(),
                        what,
                        waited: FAILOVER_WAIT.as_secs(),
                        reason: self.target.scrub(&error.to_string()),
                    });
                }
            }
            if changing.is_some() {
                most = FAILOVER_BACKOFF;
            }
            if !self.away.swap(true, Ordering::SeqCst) {
                let error = self.target.scrub(&error.to_string());
                tracing::warn!(url = %self.target.shown(), %error, "Redis cannot answer now; retrying until it does");
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(most);
            if class == Class::Failover && !cluster && error.code() == Some("READONLY") {
                self.reconnect().await;
            }
        }
    }
}
