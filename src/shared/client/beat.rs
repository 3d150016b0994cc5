//! A worker's heartbeat (`lua/beat.lua`): the worker's liveness, apart from
//! its leases' TTL. Each beat (and each lease call) records the server's time
//! for the worker in the sorted set `beats`, and returns the leases of every
//! worker not heard from for [`SILENCE_BOUND`] to the frontier
//! (`lua/common.lua`, `reap`). Depends on the script runner in the parent
//! module.

use std::time::Duration;

use super::{Shared, SharedError, array, int};

/// How often a worker beats. Three beats fit in [`SILENCE_BOUND`], so one
/// slow or lost beat does not make a live worker dead.
pub const HEARTBEAT: Duration = Duration::from_secs(2);

/// How long a worker may go unheard (while the crawl is heard from) before
/// its leases go back to the frontier: `BEAT_DEAD` in `lua/common.lua`.
pub const SILENCE_BOUND: Duration = Duration::from_millis(6000);

/// What one beat found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Beat {
    /// Leases of dead workers this beat returned to the frontier.
    pub released: u64,
    /// The worker was not listed as beating: its first beat, or it had been
    /// taken for dead (its leases were returned meanwhile).
    pub was_absent: bool,
}

impl Shared {
    /// Records that `worker` is alive now, and returns the leases of workers
    /// whose heartbeat stopped.
    pub async fn beat(&self, worker: &str) -> Result<Beat, SharedError> {
        let args = [worker.as_bytes().to_vec()];
        let value = self.script("beating", |s| &s.beat, &[], &args).await?;
        let corrupt = || self.corrupt("the beat script's answer");
        let parts = array(&value).ok_or_else(corrupt)?;
        let (Some(released), Some(absent)) =
            (parts.first().and_then(int), parts.get(1).and_then(int))
        else {
            return Err(corrupt());
        };
        Ok(Beat {
            released: released.max(0) as u64,
            was_absent: absent == 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_scripts_and_leaves_room_for_lost_beats() {
        let common = include_str!("../lua/common.lua");
        let dead = format!("local BEAT_DEAD = {}\n", SILENCE_BOUND.as_millis());
        assert!(common.contains(&dead), "common.lua: {dead}");
        assert!(SILENCE_BOUND >= HEARTBEAT * 3);
        // The bound: released within 10 s of the last beat, with
        // room for a worker's lease poll.
        assert!(SILENCE_BOUND + Duration::from_secs(1) <= Duration::from_secs(10));
    }
}
