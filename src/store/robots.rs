//! The robots table: cached robots.txt answers (`R`) and the requests not
//! fetched by rule (`b`), which `dump blocked` lists.
//!
//! The state stores robots answers as opaque versioned records (it does not
//! parse robots.txt); both are written in the open group like everything else.
//! The table keeps nothing in memory, so it is a set of functions over
//! [`Db`] and [`Batch`]. Depends on `table`, `records` and `error`.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::StoreError;
use super::records;
use super::table::{Batch, Db, Json, Table};

/// Cached robots.txt: `R` · origin (`http://host:port`) → record.
pub(super) const fn robots<T: Serialize + DeserializeOwned>() -> Table<str, Json<T>> {
    Table::new(b'R', "robots")
}
/// Requests not fetched by rule (robots.txt): `b` · URL → record.
pub(super) const BLOCKED: Table<str, Json<Blocked>> = Table::new(b'b', "blocked");

/// Why a request was not fetched (`dump blocked`).
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Blocked {
    /// The URL.
    pub url: String,
    /// `robots` (robots.txt disallows it).
    pub reason: String,
    /// Unix seconds when it was last refused.
    pub at: u64,
    /// How many times it was refused.
    pub count: u64,
}

/// Every stored robots.txt record.
pub(super) fn records<T: Serialize + DeserializeOwned>(db: &Db) -> Result<Vec<T>, StoreError> {
    robots().values(db)
}

/// Stores (replaces) the robots.txt record of `origin`, in the group.
pub(super) fn put<T: Serialize + DeserializeOwned>(batch: &mut Batch, origin: &str, record: &T) {
    robots().put(batch, origin, record);
}

/// Records that `url` was not fetched for `reason`, in the group.
pub(super) fn block(db: &Db, batch: &mut Batch, url: &str, reason: &str) -> Result<(), StoreError> {
    let count = BLOCKED.get(db, url)?.map_or(0, |blocked| blocked.count);
    let record = Blocked {
        url: url.to_owned(),
        reason: reason.to_owned(),
        at: records::unix_now(),
        count: count + 1,
    };
    BLOCKED.put(batch, url, &record);
    Ok(())
}

/// Every blocked request, in URL order.
pub(super) fn blocked(db: &Db) -> Result<Vec<Blocked>, StoreError> {
    BLOCKED.values(db)
}
