//! The revisit index: which pages are due again when, packed by due second.
//!
//! `u` · due time (unix seconds, u64) · chunk number (u32) → [`CHUNK_VERSION`],
//! then fingerprints, 20 bytes each, in the order they were added. A due
//! second's pages are spread over chunks numbered from 0 that close at
//! [`CHUNK_FPS`]; a group's changes are applied at its seal, each second it
//! touched read and written once ([`DueIndex::plan`]): adds go to the last
//! chunk while it has room, then to new ones; a removal rewrites the chunk that
//! held the page (or deletes it once empty). Chunks keep sled's per-entry
//! memory to about a hundredth of one entry per page (see `docs/state.md`,
//! *Memory*).
//!
//! Invariant: a page is added only when it is not in the index at that second
//! (the pages table removes its previous due time in the same group, and a
//! revisit's entry left the index when it was queued).
//! Depends on `keys`, `table`, `error` and [`crate::fingerprint`].

use std::collections::BTreeMap;

use super::error::StoreError;
use super::keys;
use super::table::Db;
use crate::fingerprint::{Fingerprint, FingerprintMap, FingerprintSet};

/// Revisit index: `u` · due time (unix seconds, u64) · chunk number (u32) →
/// a version byte, then up to `due::CHUNK_FPS` fingerprints (see `due`).
pub(super) const DUE_CHUNK: u8 = b'u';

/// Fingerprints a chunk takes at most (2,001 bytes).
pub(super) const CHUNK_FPS: usize = 100;
/// Version byte of a chunk.
const CHUNK_VERSION: u8 = 1;
/// Length of a chunk key.
const CHUNK_KEY_LEN: usize = 1 + 8 + 4;

/// The changes of one due second in the open group.
#[derive(Default)]
struct Changes {
    /// Each page's place after the group: in the index at this second or not.
    pages: FingerprintMap<bool>,
    /// Some page was removed (so every chunk of the second is read).
    removes: bool,
}

/// Puts and deletes the seal writes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct DueWrites {
    /// Chunks written (whole).
    pub(super) puts: Vec<(Vec<u8>, Vec<u8>)>,
    /// Chunks emptied.
    pub(super) deletes: Vec<Vec<u8>>,
}

/// The pages due at one second.
#[derive(Debug)]
pub(super) struct DueUnit {
    /// The due second.
    pub(super) due: u64,
    /// Its pages.
    pub(super) fps: Vec<Fingerprint>,
}

/// The due index: the open group's changes, applied at its seal.
#[derive(Default)]
pub(super) struct DueIndex {
    open: BTreeMap<u64, Changes>,
}

fn chunk_key(due: u64, chunk: u32) -> Vec<u8> {
    let mut key = keys::with_u64(DUE_CHUNK, due);
    key.extend_from_slice(&chunk.to_be_bytes());
    key
}

fn encode_chunk(fps: &[Fingerprint]) -> Vec<u8> {
    let mut value = Vec::with_capacity(1 + fps.len() * 20);
    value.push(CHUNK_VERSION);
    for fp in fps {
        value.extend_from_slice(fp);
    }
    value
}

fn decode_chunk(db: &Db, key: &[u8], value: &[u8]) -> Result<Vec<Fingerprint>, StoreError> {
    match value.split_first() {
        Some((&CHUNK_VERSION, body)) if body.len() % 20 == 0 => Ok(body
            .chunks_exact(20)
            .map(|fp| {
                let mut one = [0u8; 20];
                one.copy_from_slice(fp);
                one
            })
            .collect()),
        _ => Err(db.corrupt("due chunk", key, "not a version byte and fingerprints")),
    }
}

/// The due second and chunk number of a chunk key.
fn chunk_place(db: &Db, key: &[u8]) -> Result<(u64, u32), StoreError> {
    let bad = || db.corrupt("due chunk", key, "bad key length");
    if key.len() != CHUNK_KEY_LEN {
        return Err(bad());
    }
    let due = keys::u64_after_prefix(key).ok_or_else(bad)?;
    let chunk: [u8; 4] = key[9..].try_into().map_err(|_| bad())?;
    Ok((due, u32::from_be_bytes(chunk)))
}

impl DueIndex {
    /// Puts `fp` in the index at `due`, in the open group.
    pub(super) fn add(&mut self, due: u64, fp: Fingerprint) {
        self.open.entry(due).or_default().pages.insert(fp, true);
    }

    /// Takes `fp` out of the index at `due`, in the open group (nothing if
    /// it is not there).
    pub(super) fn remove(&mut self, due: u64, fp: Fingerprint) {
        let changes = self.open.entry(due).or_default();
        changes.pages.insert(fp, false);
        changes.removes = true;
    }

    /// Works out what the open group's changes write: reads the last chunk of
    /// each second it added to, or every chunk of a second it removed from.
    /// Reads only; [`DueIndex::sealed`] forgets the changes.
    pub(super) fn plan(&self, db: &Db) -> Result<DueWrites, StoreError> {
        let mut writes = DueWrites::default();
        for (&due, changes) in &self.open {
            let start = chunk_key(due, 0);
            let end = chunk_key(due, u32::MAX);
            let mut stored = Vec::new();
            if changes.removes {
                for entry in db.range(start..=end) {
                    let (key, value) = entry?;
                    stored.push((key.to_vec(), decode_chunk(db, &key, &value)?));
                }
            } else if let Some(entry) = db.range(start..=end).next_back() {
                let (key, value) = entry?;
                stored.push((key.to_vec(), decode_chunk(db, &key, &value)?));
            }
            // Pages already in a chunk: removed, or left where they are.
            let mut placed = FingerprintSet::default();
            for (key, fps) in &mut stored {
                let before = fps.len();
                fps.retain(|fp| match changes.pages.get(fp) {
                    None => true,
                    Some(&stays) => {
                        if stays {
                            placed.insert(*fp);
                        }
                        stays
                    }
                });
                if fps.len() != before {
                    if fps.is_empty() {
                        writes.deletes.push(key.clone());
                    } else {
                        writes.puts.push((key.clone(), encode_chunk(fps)));
                    }
                }
            }
            let mut adds: Vec<Fingerprint> = changes
                .pages
                .iter()
                .filter(|&(fp, &stays)| stays && !placed.contains(fp))
                .map(|(fp, _)| *fp)
                .collect();
            if adds.is_empty() {
                continue;
            }
            // Same input, same chunks (the map's order is not the adds').
            adds.sort_unstable();
            let mut adds = adds.as_slice();
            let mut next = 0u32;
            if let Some((key, fps)) = stored.last_mut() {
                let (_, last) = chunk_place(db, key)?;
                next = last.checked_add(1).ok_or_else(|| {
                    db.corrupt("due chunk", key, "no chunk number left in its second")
                })?;
                if fps.len() < CHUNK_FPS {
                    let room = (CHUNK_FPS - fps.len()).min(adds.len());
                    fps.extend_from_slice(&adds[..room]);
                    adds = &adds[room..];
                    writes.deletes.retain(|k| k != key);
                    writes.puts.retain(|(k, _)| k != key);
                    writes.puts.push((key.clone(), encode_chunk(fps)));
                }
            }
            for part in adds.chunks(CHUNK_FPS) {
                writes.puts.push((chunk_key(due, next), encode_chunk(part)));
                next = next.saturating_add(1);
            }
        }
        Ok(writes)
    }

    /// The open group was sealed with [`DueIndex::plan`]'s writes: its changes
    /// are no longer open.
    pub(super) fn sealed(&mut self) {
        self.open.clear();
    }

    /// The pages due at one second; `None` when none are due at or after
    /// `from` and up to `until`, else the first such second's.
    pub(super) fn next_second(
        &self,
        db: &Db,
        from: u64,
        until: u64,
    ) -> Result<Option<DueUnit>, StoreError> {
        if from > until {
            return Ok(None);
        }
        let first = db
            .range(keys::with_u64(DUE_CHUNK, from)..vec![DUE_CHUNK + 1])
            .next()
            .transpose()?
            .map(|(key, _)| chunk_place(db, &key).map(|(due, _)| due))
            .transpose()?;
        let Some(due) = first else {
            return Ok(None);
        };
        if due > until {
            return Ok(None);
        }
        Ok(Some(DueUnit {
            due,
            fps: self.at(db, due)?,
        }))
    }

    /// Every page due at `due`, as stored (the chunks in order).
    pub(super) fn at(&self, db: &Db, due: u64) -> Result<Vec<Fingerprint>, StoreError> {
        let mut fps = Vec::new();
        for entry in db.range(chunk_key(due, 0)..=chunk_key(due, u32::MAX)) {
            let (key, value) = entry?;
            fps.extend(decode_chunk(db, &key, &value)?);
        }
        Ok(fps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(n: u32) -> Fingerprint {
        let mut fp = [0u8; 20];
        fp[..4].copy_from_slice(&n.to_be_bytes());
        fp
    }

    fn apply(db: &Db, writes: DueWrites) {
        for key in writes.deletes {
            db.tree().remove(key).unwrap();
        }
        for (key, value) in writes.puts {
            db.tree().insert(key, value).unwrap();
        }
    }

    fn commit(db: &Db, index: &mut DueIndex) {
        let writes = index.plan(db).unwrap();
        index.sealed();
        apply(db, writes);
    }

    fn sorted(mut fps: Vec<Fingerprint>) -> Vec<Fingerprint> {
        fps.sort_unstable();
        fps
    }

    fn temp_db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::new(crate::store::db::Sled::scratch(dir.path()), dir.path());
        (dir, db)
    }

    #[test]
    fn adds_fill_chunks_and_removals_empty_them() {
        let (_dir, db) = temp_db();
        let mut index = DueIndex::default();
        // 250 pages over three groups: chunks of 100, 100, 50.
        for group in 0..3u32 {
            for n in group * 90..((group + 1) * 90).min(250) {
                index.add(7, fp(n));
            }
            commit(&db, &mut index);
        }
        let chunks: Vec<usize> = db
            .scan([DUE_CHUNK])
            .map(|e| e.unwrap().1.len() / 20)
            .collect();
        assert_eq!(chunks, vec![100, 100, 50]);
        assert_eq!(
            sorted(index.at(&db, 7).unwrap()),
            (0..250).map(fp).collect::<Vec<_>>()
        );
        // Removed from the middle, moved to another second, added again.
        for n in 0..100 {
            index.remove(7, fp(n));
        }
        index.remove(7, fp(150));
        index.add(9, fp(150));
        index.remove(7, fp(200));
        index.add(7, fp(200));
        commit(&db, &mut index);
        let left: Vec<_> = (100..250).filter(|&n| n != 150).map(fp).collect();
        assert_eq!(sorted(index.at(&db, 7).unwrap()), left);
        assert_eq!(index.at(&db, 9).unwrap(), vec![fp(150)]);
        assert_eq!(
            db.scan(chunk_key(7, 0)).count(),
            0,
            "an emptied chunk is deleted"
        );
        let first = index.next_second(&db, 0, 100).unwrap().unwrap();
        assert_eq!((first.due, first.fps.len()), (7, 149));
        assert_eq!(index.next_second(&db, 8, 100).unwrap().unwrap().due, 9);
        assert!(index.next_second(&db, 10, 100).unwrap().is_none());
        assert!(index.next_second(&db, 8, 8).unwrap().is_none());
    }
}
