//! What a shared crawl lost from Redis while it still seems to be there:
//! keys evicted (a `maxmemory-policy` other than `noeviction`), deleted, or
//! lost in a restart, found by reading only. `legcrawl dump` asks before it
//! prints, so that counts of a damaged crawl are never taken for the crawl's.
//!
//! The rules are those every script applies (`lua/common.lua`, `lua/epoch.lua`:
//! a stored job without `meta`, a made crawl without its seeds), and what the
//! counters witness: the items stream is only appended to, so it holds at least
//! `items/stored` entries; a crawl that found a page new has page records (a
//! completed page need not: one put back while its host's robots.txt fails
//! has none).
//! Depends on the connection ([`super::client`]) and the key names.

use super::client::{Shared, SharedError, count_at, int};

impl Shared {
    /// What the crawl lost, each named for a person ("its seeds", "120 of
    /// its 300 items"); empty when nothing is seen missing.
    pub async fn lost(&self) -> Result<Vec<String>, SharedError> {
        let k = self.keys();
        let mut pipe = redis::pipe();
        pipe.cmd("EXISTS").arg(k.key("meta"));
        pipe.cmd("HGET").arg(k.key("meta")).arg("created");
        pipe.cmd("EXISTS").arg(k.key("job"));
        pipe.cmd("EXISTS").arg(k.key("seeds"));
        pipe.cmd("XLEN").arg(k.key("items"));
        pipe.cmd("EXISTS").arg(k.key("counters"));
        pipe.cmd("HGET").arg(k.key("counters")).arg("items/stored");
        pipe.cmd("HLEN").arg(k.key("pages"));
        pipe.cmd("HGET").arg(k.key("counters")).arg("pages/new");
        let v = self.pipeline("checking the crawl's keys", &pipe).await?;
        let n = |i: usize| count_at(&v, i).unwrap_or(0);
        let made = v.get(1).and_then(int).is_some();
        let mut lost = Vec::new();
        if n(0) == 0 {
            if n(2) > 0 || n(4) > 0 || n(5) > 0 {
                lost.push("its meta hash".to_owned());
            }
            return Ok(lost);
        }
        if !made {
            return Ok(lost);
        }
        if n(2) == 0 {
            lost.push("its job".to_owned());
        }
        if n(3) == 0 {
            lost.push("its seeds".to_owned());
        }
        if n(5) == 0 && (n(4) > 0 || n(7) > 0) {
            lost.push("its counters".to_owned());
        }
        let (items, stored) = (n(4), n(6));
        if items < stored {
            lost.push(format!("{} of its {stored} items", stored - items));
        }
        if n(7) == 0 && n(8) > 0 {
            lost.push("its page records".to_owned());
        }
        Ok(lost)
    }
}
