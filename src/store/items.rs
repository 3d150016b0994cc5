//! The items table: item records (`i`), numbered in the order they were
//! stored, and the cursors of `--output` files (`O`).
//!
//! A group's items are one record (more past [`keys::MAX_VALUE_BYTES`])
//! keyed by the sequence number of its first item: a version byte, then each
//! item length-prefixed, raw-deflated ([`ITEM_RECORD_DEFLATED`]). A sealed
//! group's items are in the database once its batch is applied, but are
//! delivered only after its receipt.
//!
//! An output file's cursor ([`OutputCursor`], keyed by the file's absolute
//! path) says what has been written there: which file (device and inode), how
//! many bytes (the end of the last complete line) and the next item. The sink
//! writes and syncs it when it opens the file, before its first line (crash
//! point `output.watermark` for a new path, `output.cursor` otherwise); after
//! each group's lines it hands over the new cursor
//! ([`super::State::advance_output`]), which goes into the open group's batch
//! when that group holds anything, and is otherwise written at once, unsynced
//! (crash point `output.advance`), durable with the next sync. So a durable
//! cursor lags the file by at most the lines of the last group streamed.
//!
//! Depends on `keys`, `table`, `error`, [`crate::item`] and [`crate::crash`].

use std::io::Read;
use std::path::Path;

use flate2::{Compress, Compression, FlushCompress, Status};

use super::error::StoreError;
use super::keys;
use super::table::{Batch, Codec, Db, Durability, Table, fixed};
use crate::crash;
use crate::item::{self, Item};

/// Output cursors: `O` · path of an `--output` file (its directory made
/// canonical, then its name: the key names the path even when no file is
/// there) → the file's cursor (see `items`).
pub(super) const OUTPUT_CURSOR: Table<Path, OutputCursor> = Table::new(b'O', "output cursor");
/// Items: `i` · sequence of the record's first item (u64) → items of one
/// completion group (a group writes several records past [`super::keys::MAX_VALUE_BYTES`]),
/// numbered on from the key's: the version byte [`ITEM_RECORD_DEFLATED`],
/// then, raw-deflated, per item its length (u32, big-endian) and the item as
/// `item::encode` writes it.
pub(super) const ITEM: u8 = b'i';
/// Version byte of an item record whose body (the same length-prefixed items)
/// is raw-deflated. A group's items repeat their keys and much of their URLs,
/// so this takes a quarter to a tenth of the space.
pub(super) const ITEM_RECORD_DEFLATED: u8 = 3;

/// The items table (see the module doc).
#[derive(Default)]
pub(super) struct Items {
    /// The sequence number after the last item stored (in any group).
    next: u64,
    /// Items below this are durable.
    durable: u64,
    /// The item sequence number after the sealed group's last item.
    sealed_end: Option<u64>,
    /// The open group appended items.
    appended: bool,
    /// First item sequence number of the record being filled.
    record_first: Option<u64>,
    /// The record being filled (its items as they are, without a version byte).
    record: Vec<u8>,
    /// The deflate state, reused from record to record.
    compress: Option<Compress>,
    /// An output cursor handed over while the open group held something: key
    /// and value, put into the group's batch at the seal.
    cursor: Option<(Vec<u8>, Vec<u8>)>,
    /// The items of the open, the sealed and the last durable group, when
    /// the state was asked to keep them (see `sink`).
    kept: Option<Kept>,
}

/// Items of one group in memory: the first one's sequence number (none yet
/// in an open group that has none) and the items, length-prefixed as in a
/// record's body.
type GroupItems = (Option<u64>, Vec<u8>);

/// The items of the open, the sealed and the last durable group (see `sink`).
#[derive(Default)]
struct Kept {
    open: GroupItems,
    sealed: GroupItems,
    durable: GroupItems,
}

/// What has been written to an `--output` file: the file (its device and
/// inode), the bytes written to it (the end of the last complete line the
/// sink wrote) and the sequence number of the first item not written there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputCursor {
    /// Device number of the file.
    pub dev: u64,
    /// Inode number of the file.
    pub ino: u64,
    /// Bytes of the file the sink's lines end at.
    pub bytes: u64,
    /// The first item not written to the file.
    pub next: u64,
}

/// [`super::keys::SMALL_VERSION`], then the four fields big-endian.
impl Codec for OutputCursor {
    type Value = OutputCursor;

    fn encode(cursor: &OutputCursor) -> Vec<u8> {
        let fields = [cursor.dev, cursor.ino, cursor.bytes, cursor.next];
        keys::versioned(&fields.map(u64::to_be_bytes).concat())
    }

    fn decode(value: &[u8]) -> Result<OutputCursor, String> {
        let body: [u8; 32] = fixed(value)?;
        let field = |i: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&body[i * 8..i * 8 + 8]);
            u64::from_be_bytes(word)
        };
        Ok(OutputCursor {
            dev: field(0),
            ino: field(1),
            bytes: field(2),
            next: field(3),
        })
    }
}

impl Items {
    /// Reads the last item record to learn the next sequence number.
    pub(super) fn load(db: &Db) -> Result<Items, StoreError> {
        let end = [ITEM + 1];
        let next = match db.range([ITEM]..end).next_back() {
            None => 0,
            Some(entry) => {
                let (key, value) = entry?;
                let first = keys::u64_after_prefix(&key)
                    .ok_or_else(|| db.corrupt("item", &key, "short key"))?;
                let mut count = 0;
                for entry in keys::length_prefixed(&record_body(db, &key, &value)?) {
                    entry.map_err(|reason| db.corrupt("item", &key, reason))?;
                    count += 1;
                }
                first + count
            }
        };
        Ok(Items {
            next,
            durable: next,
            ..Items::default()
        })
    }

    /// The table as a reader beside the crawl sees it: the items below
    /// `durable`, the crawl's durable end (see `beside`).
    pub(super) fn beside(durable: u64) -> Items {
        Items {
            next: durable,
            durable,
            ..Items::default()
        }
    }

    /// The sequence number after the last item stored.
    pub(super) fn len(&self) -> u64 {
        self.next
    }

    /// The sequence number after the last durable item.
    pub(super) fn durable_end(&self) -> u64 {
        self.durable
    }

    /// Appends `items` to the group's item record.
    pub(super) fn append(&mut self, batch: &mut Batch, items: &[Item]) {
        for item in items {
            batch.defer();
            self.appended = true;
            let seq = self.next;
            self.next += 1;
            if self.record_first.is_none() {
                self.record_first = Some(seq);
            }
            let bytes = item::encode(item);
            let len = (bytes.len() as u32).to_be_bytes();
            if let Some(kept) = &mut self.kept {
                kept.open.0.get_or_insert(seq);
                kept.open.1.extend_from_slice(&len);
                kept.open.1.extend_from_slice(&bytes);
            }
            self.record.extend_from_slice(&len);
            self.record.extend_from_slice(&bytes);
            if self.record.len() >= keys::MAX_VALUE_BYTES {
                self.close_record(batch);
            }
        }
    }

    /// Puts the record being filled into the batch; the next item starts one.
    fn close_record(&mut self, batch: &mut Batch) {
        if let Some(first) = self.record_first.take() {
            let compress = self
                .compress
                .get_or_insert_with(|| Compress::new(Compression::fast(), false));
            batch.put(
                keys::with_u64(ITEM, first),
                deflated(compress, &self.record),
            );
            self.record.clear();
        }
    }

    /// True when the open group appended items.
    pub(super) fn appended_in_open(&self) -> bool {
        self.appended
    }

    /// Writes the group's last record into `batch`.
    pub(super) fn seal(&mut self, batch: &mut Batch) {
        self.appended = false;
        self.close_record(batch);
        if let Some((key, value)) = self.cursor.take() {
            batch.put(key, value);
        }
        self.sealed_end = Some(self.next);
        if let Some(kept) = &mut self.kept {
            kept.sealed = std::mem::take(&mut kept.open);
        }
    }

    /// The sealed group is durable: its items may be streamed.
    pub(super) fn durable(&mut self) {
        if let Some(end) = self.sealed_end.take() {
            self.durable = end;
            if let Some(kept) = &mut self.kept {
                kept.durable = std::mem::take(&mut kept.sealed);
            }
        }
    }

    /// Keeps the items of the groups from the open one on in memory (see
    /// `sink`).
    pub(super) fn keep(&mut self) {
        self.kept.get_or_insert_with(Kept::default);
    }

    /// The durable items from `from` on, as [`Items::for_each`] gives them,
    /// when the group made durable last holds them all in memory; `None`
    /// otherwise (read them from the database).
    pub(super) fn kept<'a>(
        &'a self,
        db: &'a Db,
        from: u64,
    ) -> Option<impl Iterator<Item = Result<(u64, &'a str), StoreError>> + 'a> {
        let (first, items) = &self.kept.as_ref()?.durable;
        let first = first.unwrap_or(self.durable);
        if from < first || from > self.durable {
            return None;
        }
        let corrupt =
            move |seq: u64, reason: &str| db.corrupt("kept item", &seq.to_be_bytes(), reason);
        let entries = (first..).zip(keys::length_prefixed(items));
        Some(
            entries
                .skip((from - first) as usize)
                .map(move |(seq, entry)| {
                    let bytes = entry.map_err(|reason| corrupt(seq, reason))?;
                    let text = item::json_text(bytes).map_err(|e| corrupt(seq, &e.to_string()))?;
                    Ok((seq, text))
                }),
        )
    }

    /// Calls `each` with the JSON text of every durable item, in order, from
    /// `from`. Stops early when `each` returns false.
    pub(super) fn for_each(
        &self,
        db: &Db,
        from: u64,
        mut each: impl FnMut(u64, &str) -> bool,
    ) -> Result<(), StoreError> {
        // The record holding `from` starts at or before it.
        let at_from = keys::with_u64(ITEM, from);
        let start = match db.range([ITEM].as_slice()..=at_from.as_slice()).next_back() {
            Some(entry) => entry?.0.to_vec(),
            None => at_from,
        };
        let end = [ITEM + 1];
        for entry in db.range(start.as_slice()..end.as_slice()) {
            let (key, value) = entry?;
            let first = keys::u64_after_prefix(&key)
                .ok_or_else(|| db.corrupt("item", &key, "short key"))?;
            let body = record_body(db, &key, &value)?;
            for (seq, entry) in (first..).zip(keys::length_prefixed(&body)) {
                let bytes = entry.map_err(|reason| db.corrupt("item", &key, reason))?;
                if seq < from {
                    continue;
                }
                // Items of sealed groups are readable here but not durable yet.
                if seq >= self.durable {
                    return Ok(());
                }
                let text =
                    item::json_text(bytes).map_err(|e| db.corrupt("item", &key, &e.to_string()))?;
                if !each(seq, text) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Records the cursor of the output path `path` and makes it durable at
    /// once (crash point `output.watermark` for a path without one yet,
    /// `output.cursor` otherwise). It replaces a cursor handed over before.
    pub(super) fn record_output(
        &mut self,
        db: &Db,
        path: &Path,
        cursor: &OutputCursor,
    ) -> Result<(), StoreError> {
        let key = OUTPUT_CURSOR.key(path);
        if self.cursor.as_ref().is_some_and(|(k, _)| *k == key) {
            self.cursor = None;
        }
        let known = OUTPUT_CURSOR.contains(db, path)?;
        let mut batch = Batch::default();
        OUTPUT_CURSOR.put(&mut batch, path, cursor);
        if known {
            crash::point("output.cursor");
        } else {
            crash::point("output.watermark");
        }
        db.commit_now(batch, Durability::Synced(|| ()))
    }

    /// Hands over the cursor of the output path `path`: into the open group
    /// when `batch` (the open group's) holds anything, so that it is sealed
    /// with it; otherwise written into the database at once, without a sync
    /// (the next sync of the database makes it durable).
    pub(super) fn advance(
        &mut self,
        db: &Db,
        batch: &Batch,
        path: &Path,
        cursor: &OutputCursor,
    ) -> Result<(), StoreError> {
        if batch.is_dirty() {
            self.cursor = Some((OUTPUT_CURSOR.key(path), OutputCursor::encode(cursor)));
            return Ok(());
        }
        // A cursor of the same path handed over earlier is older: this one
        // replaces it.
        self.cursor = None;
        let mut write = Batch::default();
        OUTPUT_CURSOR.put(&mut write, path, cursor);
        crash::point("output.advance");
        db.commit_now(write, Durability::NextSync)
    }
}

/// The cursor of the output path `path`, if one was recorded.
pub(super) fn cursor(db: &Db, path: &Path) -> Result<Option<OutputCursor>, StoreError> {
    OUTPUT_CURSOR.get(db, path)
}

/// An item record's value: [`ITEM_RECORD_DEFLATED`], then `body`
/// raw-deflated by `compress` (reset first).
fn deflated(compress: &mut Compress, body: &[u8]) -> Vec<u8> {
    compress.reset();
    let mut out = Vec::with_capacity(1 + body.len() / 2 + 64);
    out.push(ITEM_RECORD_DEFLATED);
    loop {
        let read = compress.total_in() as usize;
        let input = body.get(read..).unwrap_or_default();
        if out.capacity() - out.len() < 64 {
            out.reserve(out.len().max(64));
        }
        match compress.compress_vec(input, &mut out, FlushCompress::Finish) {
            Ok(Status::StreamEnd) => return out,
            Ok(_) => {}
            // Deflating into memory fails only on a misuse of the stream.
            Err(error) => unreachable!("deflating an item record failed: {error}"),
        }
    }
}

/// The items of an item record (length-prefixed), its version checked and
/// its body inflated; why not, when it cannot be read. The one decoder of
/// item records: `repair` counts items with it too.
pub(super) fn decode_record(value: &[u8]) -> Result<Vec<u8>, String> {
    match value.split_first() {
        Some((&ITEM_RECORD_DEFLATED, rest)) => {
            inflate(rest).map_err(|e| format!("cannot inflate: {e}"))
        }
        _ => Err("unknown item record version".to_owned()),
    }
}

/// [`decode_record`], its failure naming the record as damage.
pub(super) fn record_body(db: &Db, key: &[u8], value: &[u8]) -> Result<Vec<u8>, StoreError> {
    decode_record(value).map_err(|reason| db.corrupt("item", key, &reason))
}

/// A raw-deflated body, inflated.
pub(super) fn inflate(deflated: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::with_capacity(deflated.len() * 4);
    flate2::read::DeflateDecoder::new(deflated).read_to_end(&mut body)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deflated_records_inflate_to_their_body_with_a_reused_compressor() {
        let mut compress = Compress::new(Compression::fast(), false);
        for n in [0usize, 1, 100, 70_000] {
            let body: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            let value = deflated(&mut compress, &body);
            assert_eq!(value[0], ITEM_RECORD_DEFLATED);
            assert_eq!(inflate(&value[1..]).expect("inflates"), body);
        }
    }

    #[test]
    fn deflated_records_read_and_others_are_errors() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Db::new(crate::store::db::Sled::scratch(dir.path()), dir.path());
        let mut body = Vec::new();
        body.extend_from_slice(&3u32.to_be_bytes());
        body.extend_from_slice(b"abc");
        let mut compress = Compress::new(Compression::fast(), false);
        let packed = deflated(&mut compress, &body);
        let read = record_body(&db, b"i", &packed).expect("readable");
        let items: Vec<_> = keys::length_prefixed(&read).collect();
        assert_eq!(items, [Ok(&b"abc"[..])]);
        // The plain form (version 2) is not read.
        let plain = [&[2u8][..], &body].concat();
        assert!(record_body(&db, b"i", &plain).is_err());
        assert!(record_body(&db, b"i", &[9, 1, 2]).is_err());
        assert!(record_body(&db, b"i", &[ITEM_RECORD_DEFLATED, 0xff, 0xff]).is_err());
    }

    #[test]
    fn cursor_records_round_trip_and_others_are_unreadable() {
        let cursor = OutputCursor {
            dev: 1 << 40,
            ino: 7,
            bytes: u64::MAX,
            next: 12,
        };
        let value = OutputCursor::encode(&cursor);
        assert_eq!(value.len(), 33);
        assert_eq!(OutputCursor::decode(&value), Ok(cursor));
        assert!(
            OutputCursor::decode(&value[1..]).is_err(),
            "no version byte"
        );
        assert!(OutputCursor::decode(&value[..32]).is_err(), "cut short");
        let mut other = value.clone();
        other[0] = 9;
        assert!(OutputCursor::decode(&other).is_err(), "another version");
    }

    #[test]
    fn a_handed_cursor_rides_the_open_group_or_is_written_at_once() {
        use crate::request::Request;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = Path::new("/out/items.jsonl");
        let at = |bytes, next| OutputCursor {
            dev: 3,
            ino: 4,
            bytes,
            next,
        };
        let mut state = crate::store::tests::open(dir.path());
        assert_eq!(state.output_cursor(path).expect("read"), None);
        state.record_output(path, &at(0, 0)).expect("record");
        assert_eq!(state.output_cursor(path).expect("read"), Some(at(0, 0)));
        // The open group holds a request: the cursor waits for its seal.
        let request = Request::get("http://a.test/".to_owned());
        assert!(state.enqueue(&request, &[]).expect("enqueue"));
        state.advance_output(path, &at(10, 2)).expect("advance");
        assert_eq!(state.output_cursor(path).expect("read"), Some(at(0, 0)));
        state.commit().expect("commit");
        assert_eq!(state.output_cursor(path).expect("read"), Some(at(10, 2)));
        // An empty open group: written at once, durable by the close.
        state.advance_output(path, &at(20, 3)).expect("advance");
        assert_eq!(state.output_cursor(path).expect("read"), Some(at(20, 3)));
        drop(state);
        let state = crate::store::tests::open(dir.path());
        assert_eq!(state.output_cursor(path).expect("read"), Some(at(20, 3)));
        assert_eq!(
            state.output_cursor(Path::new("/out/other")).expect("read"),
            None
        );
    }
}
