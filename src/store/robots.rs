//! Records the fetcher side asks the state to keep: cached robots.txt answers
//! and the requests robots.txt kept us from fetching.
//!
//! The state stores them as opaque versioned records (it does not parse
//! robots.txt); they are written in the open group like everything else.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{State, StoreError, keys, records};

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

impl State {
    /// Every stored robots.txt record.
    pub fn robots_records<T: DeserializeOwned>(&self) -> Result<Vec<T>, StoreError> {
        let mut out = Vec::new();
        for entry in self.db.scan_prefix([keys::ROBOTS]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            out.push(self.decode_record("robots", &key, &value)?);
        }
        Ok(out)
    }

    /// Stores (replaces) the robots.txt record of `origin`, in the open group.
    pub fn put_robots<T: Serialize>(&mut self, origin: &str, record: &T) {
        self.group.batch.insert(
            keys::with_prefix(keys::ROBOTS, origin.as_bytes()),
            records::encode(record),
        );
        self.group.dirty = true;
    }

    /// Records that `url` was not fetched for `reason`, in the open group.
    pub fn record_blocked(&mut self, url: &str, reason: &str) -> Result<(), StoreError> {
        let key = keys::with_prefix(keys::BLOCKED, url.as_bytes());
        let count = match self.db.get(&key).map_err(|e| self.db_error(e))? {
            Some(value) => {
                self.decode_record::<Blocked>("blocked", &key, &value)?
                    .count
            }
            None => 0,
        };
        let record = Blocked {
            url: url.to_owned(),
            reason: reason.to_owned(),
            at: records::unix_now(),
            count: count + 1,
        };
        self.group.batch.insert(key, records::encode(&record));
        self.group.dirty = true;
        Ok(())
    }

    /// Every blocked request, in URL order.
    pub fn blocked(&self) -> Result<Vec<Blocked>, StoreError> {
        let mut out = Vec::new();
        for entry in self.db.scan_prefix([keys::BLOCKED]) {
            let (key, value) = entry.map_err(|e| self.db_error(e))?;
            out.push(self.decode_record("blocked", &key, &value)?);
        }
        Ok(out)
    }
}
