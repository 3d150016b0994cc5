//! What the keys of the one sled tree that holds the crawl state share.
//!
//! Everything lives in a single tree so that a completion group is one
//! `apply_batch` (sled makes a batch on one tree atomic across crashes). The first
//! byte of a key names its namespace; integers are big-endian so that byte order
//! is numeric order. A table declares its namespaces beside itself, most as a
//! typed `table::Table` (`db`: `m`; `runs`: `r`, `c`, `d`, `y`; `jobs`: `J`;
//! `frontier`: `h`, `H`; `seen`: `j`; `items`: `i`, `O`; `robots`: `R`, `b`;
//! `due`: `u`; `pages`: `V`; `warc`: `w`; `cookies`: `K`; `unreachable`: `U`;
//! `exact`: `e`; `pageids`: `k`; and the packed ones: `queue`: `q`,
//! `pageblock`: `P`); here are the helpers they use and the test that no two
//! namespaces share a byte. Depends on nothing else in the crate.

/// Version byte of the small fixed-size records (`table`'s codecs: counters,
/// output cursors, WARC marks, the cycle start, host ids and names).
pub(crate) const SMALL_VERSION: u8 = 1;
/// Largest packed value written (queue records, item records, journal parts close
/// at this size). sled 0.34 splits a leaf at 16 entries and writes any node image
/// over a quarter of its 512 KiB segment to a blob file of its own — a file
/// created per rewrite. Values under 6 KiB keep a leaf under 96 KiB.
pub(crate) const MAX_VALUE_BYTES: usize = 6 * 1024;

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
            cookies, db, due, exact, frontier, items, jobs, pageblock, pageids, pages, queue,
            robots, runs, seen, unreachable, warc,
        };
        let namespaces = [
            db::META.ns(),
            queue::QUEUE,
            seen::JOURNAL.ns(),
            pageblock::PAGE_BY_ID,
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
            runs::BUDGET.ns(),
            warc::WARC.ns(),
            warc::FILE.ns(),
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
    fn prefix_end_is_exclusive_upper_bound() {
        assert_eq!(prefix_end(b"q"), Some(b"r".to_vec()));
        assert_eq!(prefix_end(&[b'q', 0xff]), Some(b"r".to_vec()));
        assert_eq!(prefix_end(&[0xff]), None);
    }
}

#[cfg(test)]
#[path = "version_tests.rs"]
mod version_tests;
