//! The cookie jar the crawl keeps across runs (`K`, one key).
//!
//! The fetcher keeps the cookies servers set (see [`crate::fetch::cookies`]);
//! the engine puts the jar, when it changed, into the open group's batch
//! ([`super::State::put_cookies`]), so it is durable exactly when the
//! completions of the pages that set those cookies are, and the next run
//! starts from it ([`super::State::cookies`]). The jar is opaque here: bytes
//! after a version byte. Depends on `table` and `error`.

use super::error::StoreError;
use super::table::{Batch, Bytes, Db, Table};

/// The cookie jar (one key `K`): the jar as `cookie_store` writes it in
/// JSON, session cookies included.
pub(super) const COOKIES: Table<(), Bytes> = Table::new(b'K', "cookie jar");

/// The stored cookie jar, if a run kept one.
pub(super) fn read(db: &Db) -> Result<Option<Vec<u8>>, StoreError> {
    COOKIES.get(db, &())
}

/// Puts `jar` into `batch` (the open group's).
pub(super) fn put(batch: &mut Batch, jar: &[u8]) {
    COOKIES.put(batch, &(), &jar.to_vec());
}
