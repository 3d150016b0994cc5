//! The committer: owns the two threads on which a sealed group's [`Flush`] and
//! a detached [`Checkpoint`] run, so that a caller starts them and takes their
//! results without a thread or join handle of its own.
//!
//! At most one flush and one checkpoint are in flight (the caller starts the
//! next only after taking the last one's result, see [`Committer::ended`]).
//! Dropped, the committer takes no more jobs and waits for the ones in flight,
//! like mini-redis's `DbDropGuard`: nothing writes the state after its owner is
//! gone, however the owner left. A job that panics ends its thread; its result,
//! and every later job's, is [`StoreError::ThreadStopped`].
//!
//! Depends on `commit`, `checkpoint`, `error` and `tokio`'s oneshot channel.

use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use super::checkpoint::{Checkpoint, Checkpointed};
use super::commit::{Flush, Receipt};
use super::error::StoreError;

/// A job and where its result goes.
type Job<T> = (
    Box<dyn FnOnce() -> Result<T, StoreError> + Send>,
    oneshot::Sender<Result<T, StoreError>>,
);

/// One thread that runs jobs in order, and the one in flight.
struct Worker<T> {
    /// What the thread does, for an error that names it.
    what: &'static str,
    jobs: Option<mpsc::Sender<Job<T>>>,
    thread: Option<JoinHandle<()>>,
    /// The result of the job in flight.
    running: Option<oneshot::Receiver<Result<T, StoreError>>>,
}

impl<T: Send + 'static> Worker<T> {
    fn spawn(what: &'static str) -> Result<Worker<T>, StoreError> {
        let (jobs, queue) = mpsc::channel::<Job<T>>();
        let thread = std::thread::Builder::new()
            .name(format!("legcrawl-{what}"))
            .spawn(move || {
                for (job, result) in queue {
                    // The caller may have stopped waiting (dropped): the job
                    // ran all the same, which is all that matters then.
                    let _ = result.send(job());
                }
            })
            .map_err(|error| StoreError::ThreadStopped {
                what,
                reason: error.to_string(),
            })?;
        Ok(Worker {
            what,
            jobs: Some(jobs),
            thread: Some(thread),
            running: None,
        })
    }

    fn start(&mut self, job: impl FnOnce() -> Result<T, StoreError> + Send + 'static) {
        debug_assert!(self.running.is_none(), "one {} at a time", self.what);
        let (sender, receiver) = oneshot::channel();
        // A thread that stopped (a panic) drops the job and its sender: the
        // receiver then says so.
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send((Box::new(job), sender));
        }
        self.running = Some(receiver);
    }

    /// The result of the job in flight; never resolves while none is.
    async fn ended(&mut self) -> Result<T, StoreError> {
        let Some(receiver) = self.running.as_mut() else {
            return std::future::pending().await;
        };
        let result = receiver.await;
        self.running = None;
        result.unwrap_or_else(|_| {
            Err(StoreError::ThreadStopped {
                what: self.what,
                reason: "it panicked".into(),
            })
        })
    }
}

impl<T> Drop for Worker<T> {
    fn drop(&mut self) {
        // Closing the queue ends the thread's loop once the job in flight is done.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What [`Committer::ended`] saw end.
pub enum Ended {
    /// The flush: its receipt is for [`super::State::durable`] (an error for
    /// [`super::State::flush_failed`]).
    Flush(Result<Receipt, StoreError>),
    /// The checkpoint: its result is for [`super::State::checkpointed`] (an
    /// error for [`super::State::checkpoint_failed`]).
    Checkpoint(Result<Checkpointed, StoreError>),
}

/// The flush and checkpoint threads of one crawl (see the module doc).
pub struct Committer {
    flush: Worker<Receipt>,
    checkpoint: Worker<Checkpointed>,
}

impl Committer {
    /// Starts the two threads.
    pub fn new() -> Result<Committer, StoreError> {
        Ok(Committer {
            flush: Worker::spawn("flush")?,
            checkpoint: Worker::spawn("checkpoint")?,
        })
    }

    /// True while a flush runs (or its result waits to be taken).
    pub fn flushing(&self) -> bool {
        self.flush.running.is_some()
    }

    /// True while a checkpoint runs (or its result waits to be taken).
    pub fn checkpointing(&self) -> bool {
        self.checkpoint.running.is_some()
    }

    /// Runs `before`, then `flush`, on the flush thread (`before` is what must
    /// be on disk ahead of the group: the WARC records its marks cover). None
    /// may be running.
    pub fn start_flush(
        &mut self,
        flush: Flush,
        before: impl FnOnce() -> Result<(), StoreError> + Send + 'static,
    ) {
        self.flush.start(move || {
            before()?;
            flush.run()
        });
    }

    /// Runs `checkpoint` on the checkpoint thread. None may be running.
    pub fn start_checkpoint(&mut self, checkpoint: Checkpoint) {
        self.checkpoint.start(move || checkpoint.run());
    }

    /// Waits for the running flush; `None` when none runs.
    pub async fn flushed(&mut self) -> Option<Result<Receipt, StoreError>> {
        if !self.flushing() {
            return None;
        }
        Some(self.flush.ended().await)
    }

    /// Waits for the running checkpoint; `None` when none runs.
    pub async fn checkpointed(&mut self) -> Option<Result<Checkpointed, StoreError>> {
        if !self.checkpointing() {
            return None;
        }
        Some(self.checkpoint.ended().await)
    }

    /// Resolves when the flush or the checkpoint ends (the flush first when
    /// both have); never while neither runs, so a `select!` branch on it
    /// simply waits. Cancel-safe: a result not taken stays for the next call.
    pub async fn ended(&mut self) -> Ended {
        tokio::select! {
            biased;
            receipt = self.flush.ended() => Ended::Flush(receipt),
            done = self.checkpoint.ended() => Ended::Checkpoint(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_a_drop_waits_for_the_job_in_flight() {
        let mut worker = Worker::<u32>::spawn("test").expect("spawn");
        worker.start(|| Ok(7));
        assert_eq!(worker.ended().await.expect("ran"), 7);
        worker.start(|| panic!("a job's panic"));
        let error = worker.ended().await.expect_err("panicked");
        assert!(error.to_string().contains("test"), "{error}");
        // The thread is gone: a later job is refused the same way.
        worker.start(|| Ok(8));
        assert!(worker.ended().await.is_err());

        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut worker = Worker::<()>::spawn("slow").expect("spawn");
        let flag = std::sync::Arc::clone(&done);
        worker.start(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        });
        drop(worker);
        assert!(done.load(std::sync::atomic::Ordering::SeqCst));
    }
}
