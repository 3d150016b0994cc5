//! The cookie jar the crawl keeps across runs (`K`, one key).
//!
//! The fetcher keeps the cookies servers set (see [`crate::fetch::cookies`]);
//! the engine puts the jar, when it changed, into the open group's batch
//! ([`super::State::put_cookies`]), so it is durable exactly when the completions of
//! the pages that set those cookies are, and the next run starts from it
//! ([`super::State::cookies`]). The jar is opaque here: bytes after a version byte.
//! Depends on `table`, `keys` only.

use super::error::StoreError;
use super::keys;
use super::table::{Batch, Db};

/// The cookie jar (one key): [`super::keys::SMALL_VERSION`], then the jar as
/// `cookie_store` writes it in JSON, session cookies included (see `cookies`).
pub(super) const COOKIES: &[u8] = b"K";

/// The stored cookie jar, if a run kept one.
pub(super) fn read(db: &Db) -> Result<Option<Vec<u8>>, StoreError> {
    match db.get(COOKIES)? {
        None => Ok(None),
        Some(value) => match value.split_first() {
            Some((&keys::SMALL_VERSION, body)) => Ok(Some(body.to_vec())),
            _ => Err(db.corrupt("cookie jar", COOKIES, "not a version byte and a jar")),
        },
    }
}

/// Puts `jar` into `batch` (the open group's).
pub(super) fn put(batch: &mut Batch, jar: &[u8]) {
    batch.put(COOKIES.to_vec(), keys::versioned(jar));
}
