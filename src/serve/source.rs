//! Where `serve` reads what it shows: a [`CrawlView`] (a state directory's
//! published snapshot, never its database or lock; or a shared crawl in
//! Redis), asked again once its last answer is older than
//! [`CrawlView::watch_every`]. Concurrent requests wait for one read, never
//! for more. Depends on [`crate::view`] only.

use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::view::CrawlView;
use crate::view::watch::{Memory, Watched};

/// A crawl view and its latest answer.
#[derive(Debug)]
pub struct Source {
    view: CrawlView,
    /// The latest answer and when it was read.
    latest: Mutex<Latest>,
}

#[derive(Debug, Default)]
struct Latest {
    memory: Memory,
    read: Option<(Instant, Watched)>,
}

impl Source {
    /// The source that reads `view`.
    pub fn new(view: CrawlView) -> Source {
        Source {
            view,
            latest: Mutex::new(Latest::default()),
        }
    }

    /// The view read.
    pub fn crawl(&self) -> &CrawlView {
        &self.view
    }

    /// What to show now (read again when the last answer is too old).
    pub async fn view(&self) -> Watched {
        let mut latest = self.latest.lock().await;
        let every = self.view.watch_every();
        if let Some((at, watched)) = &latest.read
            && !every.is_zero()
            && at.elapsed() < every
        {
            return watched.clone();
        }
        let watched = self.view.watch(&mut latest.memory).await;
        latest.read = Some((Instant::now(), watched.clone()));
        watched
    }
}
