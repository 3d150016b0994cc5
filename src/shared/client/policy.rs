//! A changed revisit policy applied to a shared crawl's stored pages: the
//! policy in force (`meta`'s `revisit_policy`), the page records read in
//! `HSCAN` chunks, and `lua/policy.lua`, which moves their due times.

use super::{SCRIPT_CHUNK, Shared, SharedError, int};
use crate::store::PageRecord;

/// A page whose due time moves: its fingerprint, its record as read, and
/// its new due time.
pub struct Move {
    /// The page's fingerprint.
    pub fingerprint: Vec<u8>,
    /// Its record as read (the move is made only if it is still this).
    pub read: Vec<u8>,
    /// The record as read had a due time (the page is then moved only while
    /// it is still in the due index, not queued).
    pub was_due: bool,
    /// The record with its new due time.
    pub record: PageRecord,
}

impl Shared {
    /// The revisit policy the stored due times follow (`None`: none noted).
    pub async fn revisit_policy(&self) -> Result<Option<String>, SharedError> {
        self.query(
            "reading the revisit policy",
            redis::cmd("HGET")
                .arg(self.keys().key("meta"))
                .arg("revisit_policy"),
        )
        .await
    }

    /// Notes that the stored due times follow `policy`.
    pub async fn set_revisit_policy(&self, policy: &str) -> Result<(), SharedError> {
        self.query(
            "noting the revisit policy",
            redis::cmd("HSET")
                .arg(self.keys().key("meta"))
                .arg("revisit_policy")
                .arg(policy),
        )
        .await
    }

    /// One `HSCAN` step over the page records: the next cursor (0: done) and
    /// the records read, with their bytes.
    pub async fn scan_pages(
        &self,
        cursor: u64,
    ) -> Result<(u64, Vec<(Vec<u8>, Vec<u8>, PageRecord)>), SharedError> {
        let (next, flat): (u64, Vec<Vec<u8>>) = self
            .query(
                "reading the page records",
                redis::cmd("HSCAN")
                    .arg(self.keys().key("pages"))
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(SCRIPT_CHUNK),
            )
            .await?;
        let mut pages = Vec::with_capacity(flat.len() / 2);
        for pair in flat.chunks_exact(2) {
            let record = self.page_record(&pair[1])?;
            pages.push((pair[0].clone(), pair[1].clone(), record));
        }
        Ok((next, pages))
    }

    /// Moves the due times of `moves` (see `lua/policy.lua`),
    /// [`SCRIPT_CHUNK`] per call; returns how many moved.
    pub async fn reschedule(&self, moves: &[Move]) -> Result<u64, SharedError> {
        let mut moved = 0;
        for chunk in moves.chunks(SCRIPT_CHUNK) {
            let mut args = vec![chunk.len().to_string().into_bytes()];
            for page in chunk {
                args.push(page.fingerprint.clone());
                args.push(page.read.clone());
                args.push(crate::store::encode_page(&page.record));
                args.push(
                    page.record
                        .next_due
                        .map_or_else(String::new, |at| at.to_string())
                        .into_bytes(),
                );
                args.push(if page.was_due {
                    b"1".to_vec()
                } else {
                    b"0".to_vec()
                });
            }
            let value = self
                .script("moving due times", |s| &s.policy, &[], &args)
                .await?;
            moved += int(&value)
                .map(|n| n.max(0) as u64)
                .ok_or_else(|| self.corrupt("the policy script's answer"))?;
        }
        Ok(moved)
    }
}
