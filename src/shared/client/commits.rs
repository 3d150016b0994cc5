//! Each worker's commit sequence as a witness of loss: its field of the
//! crawl's `commits` hash (named by its witness id, random or kept across
//! runs by its witness record), which each of its completions advances by one
//! atomically with its writes (`lua/complete.lua`). The worker remembers the
//! highest value its completions returned and sends it with every script
//! call (after the epoch, `EPOCH:ID:SEEN`); a script that finds the field
//! below it fails with `LEGCRAWL_WENTBACK` before it writes anything
//! (`lua/common.lua`). Only this worker advances its field, so other
//! workers' completions after a loss cannot hide it. Redis cannot roll the
//! worker's memory back with its data, so an AOF whose tail was lost, a
//! failover that lost acknowledged writes or an evicted key shows here: the
//! worker says so in one line (per time Redis went back), takes Redis's value
//! and calls again, so the crawl goes on from what Redis still has (lost
//! completions' leases were lost with them, their pages are queued or leased
//! again and fetched again).
//!
//! The count is of this worker's own completions; a record kept on disk may
//! be older than the last completions, so a restarted worker may undercount,
//! never overcount. Depends on the connection (`super`) only.

use std::sync::atomic::Ordering;

use super::{Shared, SharedError, int};

/// How many times one call is sent again after Redis went back under it
/// (each time with Redis's value as the witness; a second fall during one
/// call is possible, a third is not expected).
pub(super) const WENT_BACK_RETRIES: usize = 3;

/// How many of its latest completions' lease tokens a worker keeps, to
/// return those Redis lost ([`Shared::unlease_lost`]): more than a worker
/// completes in the seconds a failover or a lost AOF tail goes back.
pub(super) const KEPT_TOKENS: usize = 16_384;

/// This worker's latest completions that committed: the worker id they were
/// leased to, and each one's commit sequence and lease token, oldest first.
#[derive(Default)]
pub(super) struct Committed {
    worker: String,
    kept: std::collections::VecDeque<(u64, u64)>,
}

impl Shared {
    /// The epoch argument of a script call: `EPOCH:WITNESS_ID:SEEN`.
    pub(super) fn epoch_arg(&self) -> Vec<u8> {
        let seen = self.witness.load(Ordering::SeqCst);
        format!("{}:{}:{seen}", self.epoch, self.witness_id).into_bytes()
    }

    /// Notes `commits`, a value of the commit sequence a completion of this
    /// worker returned.
    pub(super) fn saw_commits(&self, commits: u64) {
        self.witness.fetch_max(commits, Ordering::SeqCst);
    }

    /// Notes `commits`, the value this worker's last completion that
    /// committed returned ([`Shared::last_completion_kept`]).
    pub(super) fn committed_at(&self, commits: u64) {
        self.saw_commits(commits);
        self.last_commit.store(commits, Ordering::SeqCst);
    }

    /// Notes that the completion of `worker`'s lease `token` committed with
    /// the sequence at `commits`.
    pub(super) fn note_committed(&self, worker: &str, commits: u64, token: u64) {
        let mut committed = match self.committed.lock() {
            Ok(committed) => committed,
            Err(poisoned) => poisoned.into_inner(),
        };
        if committed.worker != worker {
            worker.clone_into(&mut committed.worker);
        }
        if committed.kept.len() >= KEPT_TOKENS {
            committed.kept.pop_front();
        }
        committed.kept.push_back((commits, token));
    }

    /// Returns to the frontier the leases `tokens` of this worker's
    /// completions Redis lost, where Redis still holds them as this worker's
    /// (`lua/release.lua`, kept listed): leased before the point Redis went back to, they
    /// would otherwise wait for their TTL (the default is a minute), and
    /// with them their pages and their hosts' in-flight slots. A failure is
    /// said, not fatal: they then expire on their own.
    pub(super) async fn unlease_lost(&self, (worker, tokens): &(String, Vec<u64>)) {
        if tokens.is_empty() {
            return;
        }
        let mut args = vec![worker.as_bytes().to_vec(), b"lost".to_vec()];
        args.extend(tokens.iter().map(|t| t.to_string().into_bytes()));
        match self
            .script_once(
                "returning leases of lost completions",
                |s| &s.release,
                tokens,
                &args,
            )
            .await
        {
            Ok(value) => {
                let returned = super::int(&value).unwrap_or(0);
                tracing::debug!(returned, "returned leases of lost completions");
            }
            Err(error) => tracing::warn!(
                %error,
                "could not return the leases of lost completions; they expire with their TTL"
            ),
        }
    }

    /// Whether Redis still holds this worker's last completion that
    /// committed, as far as this worker has seen: false when Redis was seen
    /// to go back below it after it committed (its items are lost, its page
    /// fetched again). The output layer asks it right after that completion
    /// answered, from the one task that completes pages.
    pub fn last_completion_kept(&self) -> bool {
        self.witness.load(Ordering::SeqCst) >= self.last_commit.load(Ordering::SeqCst)
    }

    /// The highest value of this worker's commit sequence it saw
    /// (0: none yet), to be kept in its witness record
    /// ([`crate::shared::witness`]).
    pub fn commits_seen(&self) -> u64 {
        self.witness.load(Ordering::SeqCst)
    }

    /// This worker's completions it saw Redis lose since it joined (0 when
    /// Redis never went back), summed over every time Redis went back. The output layer uses it to know that lines it wrote may
    /// be of completions Redis no longer holds.
    pub fn lost_completions(&self) -> u64 {
        self.lost.load(Ordering::SeqCst)
    }

    /// The last time this worker saw Redis go back: from which value of the
    /// commit sequence to which (`None`: never).
    pub fn went_back_last(&self) -> Option<(u64, u64)> {
        match self.went.lock() {
            Ok(went) => *went,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// The id of this worker's commit sequence (see [`Shared::use_witness_id`]).
    pub fn witness_id(&self) -> &str {
        &self.witness_id
    }

    /// Counts this worker's completions under `id`, the id its witness
    /// record keeps across runs, instead of a new random one. Call before
    /// the first script.
    pub fn use_witness_id(&mut self, id: &str) {
        self.witness_id = id.to_owned();
    }

    /// The crawl's epoch this connection joined (empty before it joined).
    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    /// The epoch stored in the crawl's `meta` (`None`: the crawl is not in
    /// Redis), read without joining.
    pub async fn stored_epoch(&self) -> Result<Option<String>, SharedError> {
        self.query(
            "reading the crawl's epoch",
            redis::cmd("HGET").arg(self.keys.key("meta")).arg("epoch"),
        )
        .await
    }

    /// Starts from `commits`, the value a record of an earlier run of this
    /// worker kept (the worker's witness for the crawl's epoch it joined): a
    /// lower value of its field of `commits` means Redis went back meanwhile,
    /// and it is named now.
    pub async fn resume_witness(&self, commits: u64) -> Result<(), SharedError> {
        self.saw_commits(commits);
        let now: Option<String> = self
            .query(
                "reading this worker's commit sequence",
                redis::cmd("HGET")
                    .arg(self.keys.key("commits"))
                    .arg(&self.witness_id),
            )
            .await?;
        let now = now.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        if now < commits {
            // A new run: its predecessor's leases went with its death.
            self.went_back(commits, now);
        }
        Ok(())
    }

    /// Redis answered a call sent with witness `sent` that its sequence is
    /// at `now`, lower: the first call to hear it says so in one line and
    /// takes `now` as the witness; calls that sent the same witness then
    /// call again without a word. Returns the lease tokens of the lost
    /// completions this worker kept, with the worker id they were leased
    /// to (to the first call only).
    pub(super) fn went_back(&self, sent: u64, now: u64) -> (String, Vec<u64>) {
        if self
            .witness
            .compare_exchange(sent, now, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return (String::new(), Vec::new());
        }
        let tokens = {
            let committed = match self.committed.lock() {
                Ok(committed) => committed,
                Err(poisoned) => poisoned.into_inner(),
            };
            let lost = committed.kept.iter().filter(|(commits, _)| *commits > now);
            (
                committed.worker.clone(),
                lost.map(|(_, token)| *token).collect(),
            )
        };
        let lost = sent - now;
        self.lost.fetch_add(lost, Ordering::SeqCst);
        match self.went.lock() {
            Ok(mut went) => *went = Some((sent, now)),
            Err(poisoned) => *poisoned.into_inner() = Some((sent, now)),
        }
        tracing::error!(
            url = %self.target.shown(),
            "the shared crawl {:?} lost {lost} committed completions (Redis went back from {sent} to {now}: a lost AOF tail, a failover that lost writes, or evicted keys); going on from what Redis still has: their pages are fetched again",
            self.target.name
        );
        tokens
    }
}

/// The two numbers of a `LEGCRAWL_WENTBACK WITNESS NOW` error's detail.
pub(super) fn went_back_detail(detail: Option<&str>) -> Option<(u64, u64)> {
    let mut parts = detail?.split_whitespace();
    let sent = parts.next()?.parse().ok()?;
    let now = parts.next()?.parse().ok()?;
    Some((sent, now))
}

/// The commit sequence at `i` of a completion's answer, when there.
pub(super) fn commits_at(parts: &[redis::Value], i: usize) -> Option<u64> {
    parts
        .get(i)
        .and_then(int)
        .and_then(|n| u64::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::went_back_detail;

    #[test]
    fn reads_the_two_numbers_of_the_error() {
        assert_eq!(went_back_detail(Some("120 30")), Some((120, 30)));
        assert_eq!(went_back_detail(Some("120")), None);
        assert_eq!(went_back_detail(None), None);
    }
}
