//! Where `serve` reads what it shows: a [`CrawlView`] (a state directory's
//! published snapshot, never its database or lock; or a shared crawl in
//! Redis), asked again once its last answer is older than
//! [`CrawlView::watch_every`]. One request reads at a time; while Redis is
//! read the others get the last answer, so a slow Redis never holds up a page.
//! Depends on [`crate::view`] only.

use std::sync::Mutex;

use tokio::time::Instant;

use crate::view::CrawlView;
use crate::view::watch::{self, Memory, Watched};

/// A crawl view and its latest answer.
#[derive(Debug)]
pub struct Source {
    view: CrawlView,
    /// What the reader keeps between reads; held while one reads.
    memory: tokio::sync::Mutex<Memory>,
    /// The latest answer and when it was read.
    latest: Mutex<Option<(Instant, Watched)>>,
}

impl Source {
    /// The source that reads `view`.
    pub fn new(view: CrawlView) -> Source {
        Source {
            view,
            memory: tokio::sync::Mutex::new(Memory::default()),
            latest: Mutex::new(None),
        }
    }

    /// The view read.
    pub fn crawl(&self) -> &CrawlView {
        &self.view
    }

    /// What to show now: read again when the last answer is too old, unless
    /// another request is reading (then the last answer).
    pub async fn view(&self) -> Watched {
        let every = self.view.watch_every();
        let last = lock(&self.latest).clone();
        if let Some((at, watched)) = &last
            && !every.is_zero()
            && at.elapsed() < every
        {
            return watched.clone();
        }
        // A published file is read at once; only a slow source is not waited for.
        let mut memory = match self.memory.try_lock() {
            Ok(memory) => memory,
            Err(_) if every.is_zero() => self.memory.lock().await,
            Err(_) => return last.map_or_else(watch::waiting, |(_, watched)| watched),
        };
        let watched = self.view.watch(&mut memory).await;
        *lock(&self.latest) = Some((Instant::now(), watched.clone()));
        watched
    }
}

/// A lock, whether or not a holder panicked (the data is replaced whole).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
