//! The queue namespace on disk (`q`): its keys and its packed records. The
//! frontier (`frontier`) is the only writer; `views` and `queues` read it.
//!
//! Keys are `q · host id (u32) · inverted priority (u32) · sequence (u64)`, so
//! each host's requests are one contiguous range, highest priority first, then
//! FIFO. A value is a *packed record*: the requests of one host and priority
//! queued by one completion group (at most [`RECORD_MAX_ENTRIES`] or
//! [`RECORD_MAX_BYTES`]): the version byte [`RECORD_VERSION`], then per entry
//! its sequence number (u64, big-endian), the length of its request (u32,
//! big-endian) and the request as [`crate::request::Request::encode`] writes
//! it. Entries are in sequence order and the key carries the first one's, so
//! records of a host and priority, read in key order and entry by entry, give
//! the requests in FIFO order (a later group only ever gets larger sequence
//! numbers). Depends on nothing else in the crate.

/// Queue: `q` · host id (u32) · inverted priority (u32) · sequence (u64) → a packed
/// record of requests of that host and priority, the key's sequence being its first
/// entry's (see the module doc for the record layout). A single request is named by the
/// same layout with its own sequence number (an *entry key*, never stored as a key).
pub(crate) const QUEUE: u8 = b'q';
/// Length of a queue key.
pub(crate) const QUEUE_KEY_LEN: usize = 1 + 4 + 4 + 8;

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

/// Version byte of a packed queue record.
pub(super) const RECORD_VERSION: u8 = 2;
/// Entries of a packed record at most; a group with more requests for one host and
/// priority writes several records. Bounds what a completion rewrites.
pub(super) const RECORD_MAX_ENTRIES: usize = 256;
/// A packed record closes once it holds this many bytes (about 18 requests of
/// ~85 B). A completion group rewrites every record it completed entries of,
/// without them, and each rewrite stays in sled's log until its segment is
/// reclaimed: with records of up to 6 KiB a page's completion wrote a share of
/// a 6 KiB rewrite, with 1.5 KiB a group mostly removes whole records. Measured
/// by `benches/frontier_memory.rs` at full size: the state grew by 1,084 B per
/// fetched page with 6 KiB records, 987 B with 3 KiB, 934 and 946 B with
/// 1.5 KiB; queued requests took 161–162 B each in all; pages/s did not differ
/// beyond the runs' noise.
pub(super) const RECORD_MAX_BYTES: usize = 1536;

/// The entries of a packed record: `(sequence, encoded request)`, or the reason the
/// record cannot be read.
pub(super) fn record_entries(
    value: &[u8],
) -> impl Iterator<Item = Result<(u64, &[u8]), &'static str>> + '_ {
    let mut rest = match value.split_first() {
        Some((&RECORD_VERSION, rest)) => Ok(rest),
        Some(_) => Err("unknown queue record version"),
        None => Err("empty queue record"),
    };
    std::iter::from_fn(move || {
        let bytes = match rest {
            Ok([]) => return None,
            Ok(bytes) => bytes,
            Err(reason) => {
                rest = Ok(&[]);
                return Some(Err(reason));
            }
        };
        let parsed = bytes.split_first_chunk::<12>().and_then(|(head, tail)| {
            let seq = u64::from_be_bytes(head[..8].try_into().ok()?);
            let len = u32::from_be_bytes(head[8..].try_into().ok()?) as usize;
            (tail.len() >= len).then(|| (seq, tail.split_at(len)))
        });
        match parsed {
            Some((seq, (request, tail))) => {
                rest = Ok(tail);
                Some(Ok((seq, request)))
            }
            None => {
                rest = Ok(&[]);
                Some(Err("truncated queue record"))
            }
        }
    })
}

/// Appends one entry to a packed record value.
pub(super) fn push_entry(bytes: &mut Vec<u8>, seq: u64, request: &[u8]) {
    bytes.extend_from_slice(&seq.to_be_bytes());
    bytes.extend_from_slice(&(request.len() as u32).to_be_bytes());
    bytes.extend_from_slice(request);
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
