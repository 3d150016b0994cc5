//! The cookie jar the crawl keeps across runs (`K`, one key).
//!
//! The fetcher keeps the cookies servers set (see [`crate::fetch::cookies`]);
//! the engine puts the jar, when it changed, into the open group's batch
//! ([`State::put_cookies`]), so it is durable exactly when the completions of
//! the pages that set those cookies are, and the next run starts from it
//! ([`State::cookies`]). The jar is opaque here: bytes after a version byte.
//! Depends on `table`, `keys` only.

use super::error::StoreError;
use super::{State, keys};

/// The cookie jar (one key): [`super::keys::SMALL_VERSION`], then the jar as
/// `cookie_store` writes it in JSON, session cookies included (see `cookies`).
pub(super) const COOKIES: &[u8] = b"K";

impl State {
    /// The stored cookie jar, if a run kept one.
    pub fn cookies(&self) -> Result<Option<Vec<u8>>, StoreError> {
        match self.db.get(COOKIES)? {
            None => Ok(None),
            Some(value) => match value.split_first() {
                Some((&keys::SMALL_VERSION, body)) => Ok(Some(body.to_vec())),
                _ => Err(self
                    .db
                    .corrupt("cookie jar", COOKIES, "not a version byte and a jar")),
            },
        }
    }

    /// Puts `jar` into the open group: it is stored with the group's
    /// completions (crash point: group.apply).
    pub fn put_cookies(&mut self, jar: &[u8]) {
        self.group.batch.put(COOKIES.to_vec(), keys::versioned(jar));
    }
}
