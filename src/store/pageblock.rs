//! Page blocks: the records of consecutive page ids packed into one value.
//!
//! `P` · first id (u64) → [`PAGE_BLOCK_VERSION`], then per page of ids
//! `first`, `first + 1`, ...: its fingerprint (20 bytes), the length of its
//! record (u32, big-endian) and the record (`pages::encode_page`'s body). A
//! completion group packs the pages it records for the first time into new
//! blocks that close at [`BLOCK_MAX_BYTES`]; a page recorded again is replaced
//! in its block, which the group writes again once however many of its pages
//! changed. Pages are never removed, so a block's ids have no holes; blocks may
//! leave gaps between them (ids of a group whose flush failed). A key per
//! block of about twenty pages, not per page, keeps sled's node count and
//! memory small (`docs/state.md`, *Memory*).
//!
//! Depends on `keys`, `table` (to name a damaged block), `error` and
//! [`crate::fingerprint`].

use super::error::StoreError;
use super::keys;
use super::table::Db;
use crate::fingerprint::Fingerprint;

/// Page records: `P` · first page id (u64) → a block of the records of
/// consecutive page ids: [`PAGE_BLOCK_VERSION`], then per page its fingerprint,
/// the record's length and the record (see above). Ids follow the order
/// pages were first recorded, so a new page's record is appended at the end of
/// the namespace instead of landing at a random place in it.
pub(crate) const PAGE_BY_ID: u8 = b'P';
/// Version byte of a page block under [`PAGE_BY_ID`].
pub(crate) const PAGE_BLOCK_VERSION: u8 = 3;
/// A new block closes once its encoded size reaches this (a page record is
/// about 200 bytes, so about twenty pages).
pub(super) const BLOCK_MAX_BYTES: usize = 4096;

/// Bytes an entry takes besides its record: fingerprint and length.
const ENTRY_HEAD: usize = 20 + 4;

/// The records of ids `first..first + entries.len()`, each as its fingerprint
/// and its encoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Block {
    /// The first id.
    pub(super) first: u64,
    /// `(fingerprint, record)` of each id in order.
    pub(super) entries: Vec<(Fingerprint, Vec<u8>)>,
}

impl Block {
    /// An empty block whose first id is `first`.
    pub(super) fn new(first: u64) -> Block {
        Block {
            first,
            entries: Vec::new(),
        }
    }

    /// The id after the last.
    pub(super) fn end(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    /// True when `id` is one of the block's.
    pub(super) fn contains(&self, id: u64) -> bool {
        (self.first..self.end()).contains(&id)
    }

    /// The entry of `id`, if the block holds it.
    pub(super) fn entry(&self, id: u64) -> Option<&(Fingerprint, Vec<u8>)> {
        let at = usize::try_from(id.checked_sub(self.first)?).ok()?;
        self.entries.get(at)
    }

    /// Replaces the record of `id` (which the block holds) with `record`;
    /// false, changing nothing, when the block does not hold `id` or holds
    /// another page there.
    pub(super) fn replace(&mut self, id: u64, fp: &Fingerprint, record: Vec<u8>) -> bool {
        let Some(at) = id
            .checked_sub(self.first)
            .and_then(|at| usize::try_from(at).ok())
        else {
            return false;
        };
        match self.entries.get_mut(at) {
            Some(entry) if entry.0 == *fp => {
                entry.1 = record;
                true
            }
            _ => false,
        }
    }

    /// Size of the encoded block.
    pub(super) fn encoded_len(&self) -> usize {
        1 + self
            .entries
            .iter()
            .map(|(_, record)| ENTRY_HEAD + record.len())
            .sum::<usize>()
    }

    /// The block's key.
    pub(super) fn key(&self) -> Vec<u8> {
        keys::with_u64(PAGE_BY_ID, self.first)
    }

    /// The block as it is stored.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.push(PAGE_BLOCK_VERSION);
        for (fp, record) in &self.entries {
            out.extend_from_slice(fp);
            // A record over 4 GiB cannot be built from a fetch.
            let len = u32::try_from(record.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(record);
        }
        out
    }

    /// The block `db` stores under `key` as `value`: a key of the wrong length
    /// or a value that does not decode is [`StoreError::Corrupt`].
    pub(super) fn stored(db: &Db, key: &[u8], value: &[u8]) -> Result<Block, StoreError> {
        let first = keys::u64_after_prefix(key)
            .filter(|_| key.len() == 9)
            .ok_or_else(|| db.corrupt("page block", key, "bad key length"))?;
        Block::decode(first, value).map_err(|reason| db.corrupt("page block", key, &reason))
    }

    /// The block stored under the id `first` as `value`.
    pub(super) fn decode(first: u64, value: &[u8]) -> Result<Block, String> {
        let Some((&PAGE_BLOCK_VERSION, mut rest)) = value.split_first() else {
            return Err("unknown version".into());
        };
        let mut block = Block::new(first);
        while !rest.is_empty() {
            let (head, tail) = rest
                .split_first_chunk::<ENTRY_HEAD>()
                .ok_or("truncated entry")?;
            let (fp, len) = head.split_at(20);
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            if tail.len() < len {
                return Err("truncated record".into());
            }
            let (record, tail) = tail.split_at(len);
            let fp: Fingerprint = fp.try_into().map_err(|_| "bad fingerprint")?;
            block.entries.push((fp, record.to_vec()));
            rest = tail;
        }
        if block.entries.is_empty() {
            return Err("no entries".into());
        }
        Ok(block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(n: u8) -> Fingerprint {
        [n; 20]
    }

    #[test]
    fn a_block_round_trips_and_finds_its_ids() {
        let mut block = Block::new(40);
        block.entries.push((fp(1), b"one".to_vec()));
        block.entries.push((fp(2), Vec::new()));
        block.entries.push((fp(3), vec![7; 300]));
        let bytes = block.encode();
        assert_eq!(bytes.len(), block.encoded_len());
        assert_eq!(Block::decode(40, &bytes).unwrap(), block);
        assert_eq!(block.end(), 43);
        assert!(!block.contains(39) && block.contains(40) && block.contains(42));
        assert!(!block.contains(43));
        assert_eq!(block.entry(41).unwrap().0, fp(2));
        assert_eq!(block.entry(43), None);
        assert_eq!(block.entry(3), None);
    }

    #[test]
    fn replace_changes_only_the_entry_of_that_page() {
        let mut block = Block::new(7);
        block.entries.push((fp(1), b"a".to_vec()));
        block.entries.push((fp(2), b"b".to_vec()));
        assert!(block.replace(8, &fp(2), b"bb".to_vec()));
        assert!(
            !block.replace(8, &fp(1), b"x".to_vec()),
            "another page's id"
        );
        assert!(!block.replace(9, &fp(2), b"x".to_vec()), "past the end");
        assert!(!block.replace(6, &fp(2), b"x".to_vec()), "before the start");
        assert_eq!(block.entries[0].1, b"a");
        assert_eq!(block.entries[1].1, b"bb");
    }

    #[test]
    fn damaged_blocks_are_errors() {
        let mut block = Block::new(0);
        block.entries.push((fp(1), b"record".to_vec()));
        let good = block.encode();
        let mut other_version = good.clone();
        other_version[0] = 9;
        let mut long_len = good.clone();
        long_len[21 + 3] = 200;
        for bad in [
            Vec::new(),
            vec![PAGE_BLOCK_VERSION],
            other_version,
            good[..10].to_vec(),
            good[..good.len() - 1].to_vec(),
            long_len,
        ] {
            assert!(Block::decode(0, &bad).is_err(), "{bad:?}");
        }
    }
}
