//! What the keys of the one sled tree that holds the crawl state share.
//!
//! Everything lives in a single tree so that a completion group is one
//! `apply_batch` (sled makes a batch on one tree atomic across crashes). The first
//! byte of a key names its namespace; integers are big-endian so that byte order
//! is numeric order. A table declares its namespaces beside itself, most as a
//! typed `table::Table` (`db`: `m`; `runs`: `r`, `c`, `d`, `y`; `jobs`: `J`;
//! `frontier`: `h`, `H`; `seen`: `j`; `items`: `i`, `O`; `robots`: `R`, `b`;
//! `due`: `u`; `pages`: `V`; `warc`: `w`; `cookies`: `K`; `unreachable`: `U`;
//! `exact`: `e`; `pageids`: `k`); here are the two packed namespaces more
//! than one table reads (the queue, the page blocks), the helpers they use,
//! and the test that no two namespaces share a byte. Depends on nothing else
//! in the crate.

/// Queue: `q` · host id (u32) · inverted priority (u32) · sequence (u64) → a packed
/// record of requests of that host and priority, the key's sequence being its first
/// entry's (see `frontier` for the record layout). A single request is named by the
/// same layout with its own sequence number (an *entry key*, never stored as a key).
pub(crate) const QUEUE: u8 = b'q';
/// Version byte of the small fixed-size records (`table`'s codecs: counters,
/// output cursors, WARC marks, the cycle start, host ids and names).
pub(crate) const SMALL_VERSION: u8 = 1;
/// Largest packed value written (queue records, item records, journal parts close
/// at this size). sled 0.34 splits a leaf at 16 entries and writes any node image
/// over a quarter of its 512 KiB segment to a blob file of its own — a file
/// created per rewrite. Values under 6 KiB keep a leaf under 96 KiB.
pub(crate) const MAX_VALUE_BYTES: usize = 6 * 1024;

/// Page records: `P` · first page id (u64) → a block of the records of
/// consecutive page ids: [`PAGE_BLOCK_VERSION`], then per page its fingerprint,
/// the record's length and the record (see `pageblock`). Ids follow the order
/// pages were first recorded, so a new page's record is appended at the end of
/// the namespace instead of landing at a random place in it.
pub(crate) const PAGE_BY_ID: u8 = b'P';
/// Version byte of a page block under [`PAGE_BY_ID`].
pub(crate) const PAGE_BLOCK_VERSION: u8 = 3;
/// Version byte of a page record: in a block and in shared mode's Redis hash
/// (distinct from `records::RECORD_VERSION`).
pub(crate) const PAGE_RECORD_VERSION: u8 = 2;

/// Length of a queue key.
pub(crate) const QUEUE_KEY_LEN: usize = 1 + 4 + 4 + 8;

/// A key made of a namespace byte followed by `rest`.
pub(crate) fn with_prefix(namespace: u8, rest: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + rest.len());
    key.push(namespace);
    key.extend_from_slice(rest);
    key
}

/// A key made of a namespace byte followed by a big-endian u64.
pub(crate) fn with_u64(namespace: u8, n: u64) -> Vec<u8> {
    with_prefix(namespace, &n.to_be_bytes())
}

/// The prefix of every queue key of one host.
pub(crate) fn queue_host_prefix(host_id: u32) -> [u8; 5] {
    let mut key = [QUEUE, 0, 0, 0, 0];
    key[1..5].copy_from_slice(&host_id.to_be_bytes());
    key
}

/// A queue key: higher priorities sort first, then lower sequence numbers (FIFO).
pub(crate) fn queue_key(host_id: u32, priority: i32, seq: u64) -> [u8; QUEUE_KEY_LEN] {
    let mut key = [0u8; QUEUE_KEY_LEN];
    key[..5].copy_from_slice(&queue_host_prefix(host_id));
    // Map i32 onto u32 preserving order, then invert so the highest sorts first.
    let ordered = (priority as u32) ^ 0x8000_0000;
    key[5..9].copy_from_slice(&(!ordered).to_be_bytes());
    key[9..].copy_from_slice(&seq.to_be_bytes());
    key
}

/// The entry key of sequence `seq` in the queue record `record`: the record's host and
/// priority with `seq`. Entry keys sort like the requests they name (priority, then FIFO).
pub(crate) fn queue_entry_key(record: &[u8; QUEUE_KEY_LEN], seq: u64) -> [u8; QUEUE_KEY_LEN] {
    let mut key = *record;
    key[9..].copy_from_slice(&seq.to_be_bytes());
    key
}

/// The sequence number at the end of a queue key, if the key has the right length.
pub(crate) fn queue_key_seq(key: &[u8]) -> Option<u64> {
    let tail: [u8; 8] = key.get(9..QUEUE_KEY_LEN)?.try_into().ok()?;
    Some(u64::from_be_bytes(tail))
}

/// The entries of a length-prefixed record after its version byte (`rest`): each is
/// a big-endian u32 length and that many bytes. `Err` names a truncated record.
pub(crate) fn length_prefixed(
    rest: &[u8],
) -> impl Iterator<Item = Result<&[u8], &'static str>> + '_ {
    let mut rest = Some(rest);
    std::iter::from_fn(move || {
        let bytes = rest.take()?;
        if bytes.is_empty() {
            return None;
        }
        let Some((len, tail)) = bytes.split_first_chunk::<4>() else {
            return Some(Err("truncated record"));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if tail.len() < len {
            return Some(Err("truncated record"));
        }
        let (entry, tail) = tail.split_at(len);
        rest = Some(tail);
        Some(Ok(entry))
    })
}

/// [`SMALL_VERSION`] followed by `body`.
pub(crate) fn versioned(body: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(1 + body.len());
    value.push(SMALL_VERSION);
    value.extend_from_slice(body);
    value
}

/// The big-endian u64 after the namespace byte.
pub(crate) fn u64_after_prefix(key: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = key.get(1..9)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

/// The smallest key greater than every key starting with `prefix`, or None when
/// the prefix is all 0xff.
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_namespaces_share_a_byte() {
        use crate::store::{
            cookies, db, due, exact, frontier, items, jobs, pageids, pages, robots, runs, seen,
            unreachable, warc,
        };
        let namespaces = [
            db::META.ns(),
            QUEUE,
            seen::JOURNAL.ns(),
            PAGE_BY_ID,
            frontier::HOST.ns(),
            frontier::HOST_BY_NAME.ns(),
            exact::INDEX.ns(),
            pageids::INDEX.ns(),
            items::ITEM,
            items::OUTPUT_CURSOR.ns(),
            jobs::JOB.ns(),
            runs::RUN.ns(),
            runs::COUNTER.ns(),
            runs::SEED.ns(),
            runs::CYCLE.ns(),
            warc::WARC.ns(),
            cookies::COOKIES.ns(),
            robots::robots::<robots::Blocked>().ns(),
            robots::BLOCKED.ns(),
            due::DUE_CHUNK,
            pages::DUE_POLICY.ns(),
            unreachable::UNREACHABLE.ns(),
        ];
        let distinct: std::collections::BTreeSet<u8> = namespaces.iter().copied().collect();
        assert_eq!(distinct.len(), namespaces.len(), "{namespaces:?}");
    }

    #[test]
    fn queue_keys_sort_by_priority_then_fifo() {
        let mut keys = [
            queue_key(1, 0, 5),
            queue_key(1, 10, 9),
            queue_key(1, -3, 1),
            queue_key(1, 0, 2),
            queue_key(1, i32::MAX, 100),
            queue_key(1, i32::MIN, 0),
        ];
        keys.sort();
        let order: Vec<u64> = keys.iter().map(|k| queue_key_seq(k).unwrap()).collect();
        assert_eq!(order, vec![100, 9, 2, 5, 1, 0]);
    }

    #[test]
    fn host_prefix_groups_hosts() {
        assert!(queue_key(2, i32::MAX, 0) > queue_key(1, i32::MIN, u64::MAX));
        assert!(queue_key(1, 0, 0).starts_with(&queue_host_prefix(1)));
    }

    #[test]
    fn prefix_end_is_exclusive_upper_bound() {
        assert_eq!(prefix_end(b"q"), Some(b"r".to_vec()));
        assert_eq!(prefix_end(&[b'q', 0xff]), Some(b"r".to_vec()));
        assert_eq!(prefix_end(&[0xff]), None);
    }
}

#[cfg(test)]
#[path = "version_tests.rs"]
mod version_tests;
