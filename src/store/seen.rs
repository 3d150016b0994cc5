//! The seen table: "is this request new?" answered in one place, from the open
//! and sealed groups' overlays, the mapped Bloom filter (`bloom.bin`), the Bloom
//! journal (`j`) and the exact set (`exact`: index `e`, run files in `runs/`).
//!
//! Dedup answers, in order: the open and the sealed group's overlays (exact),
//! then the mapped Bloom filter; a Bloom "maybe" is confirmed against the exact
//! set unless the state runs in `bloom` mode. The fingerprints recorded in a
//! group are written to the group's batch once, as one journal entry, and
//! reach the mapped bits (and the exact set's in-memory recent part) only after
//! the batch is durable ([`SeenSet::durable`], crash point `bloom.set`). A
//! checkpoint (see `checkpoint`) syncs the bits, seals the recent fingerprints
//! into an exact run and drops the journal entries it covers; opening replays
//! whatever journal is left (setting bits is idempotent).
//!
//! Depends on `exact`, `keys`, `table`, `options`, `error`, [`crate::bloom`],
//! [`crate::fingerprint`] and [`crate::crash`].

use std::time::{Duration, Instant};

use super::error::StoreError;
use super::options::DedupMode;
use super::table::{Batch, Codec, Db, Table};
use super::{exact, keys};
use crate::bloom::BloomFile;
use crate::crash;
use crate::fingerprint::{Fingerprint, FingerprintSet};

/// The Bloom journal: `j` · group number · part → the fingerprints the group
/// recorded, in parts of at most [`keys::MAX_VALUE_BYTES`].
pub(super) const JOURNAL: Table<(u64, u16), Journaled> = Table::new(b'j', "journal");

/// A journal entry: a version byte, then fingerprints, 20 bytes each.
pub(super) struct Journaled;

impl Journaled {
    const VERSION: u8 = 1;
}

impl Codec for Journaled {
    type Value = Vec<Fingerprint>;

    fn encode(fps: &Vec<Fingerprint>) -> Vec<u8> {
        let mut value = Vec::with_capacity(1 + fps.len() * 20);
        value.push(Self::VERSION);
        value.extend(fps.iter().flatten());
        value
    }

    fn decode(bytes: &[u8]) -> Result<Vec<Fingerprint>, String> {
        match bytes.split_first() {
            Some((&Self::VERSION, body)) if body.len() % 20 == 0 => Ok(body
                .chunks_exact(20)
                .map(|chunk| {
                    let mut fp = [0u8; 20];
                    fp.copy_from_slice(chunk);
                    fp
                })
                .collect()),
            _ => Err("not a version byte and a multiple of 20 bytes".into()),
        }
    }
}

/// The seen set's answer for one fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Never seen.
    New,
    /// Seen before (exactly, or by the Bloom filter alone in `bloom` mode).
    Duplicate,
    /// The Bloom filter said "maybe" but the exact set said no: a caught false positive.
    FalsePositive,
}

/// Fingerprints whose Bloom probes are brought into the cache at once before
/// they are set (a chunk's lines stay well within L1/L2).
const WARM_CHUNK: usize = 16;

/// Fingerprints recorded by one group.
#[derive(Default)]
struct Overlay {
    /// In order (the journal entry's payload).
    list: Vec<Fingerprint>,
    /// As a set, checked by dedup until they reach the bits.
    set: FingerprintSet,
    /// The number of the group's journal entry, once sealed.
    journal: Option<u64>,
}

/// The seen table (see the module doc).
pub(super) struct SeenSet {
    pub(super) bloom: BloomFile,
    pub(super) dedup: DedupMode,
    /// The exact set's in-memory part (empty in `bloom` mode).
    pub(super) exact: exact::Exact,
    /// The open group's fingerprints.
    open: Overlay,
    /// The sealed group's, until it is durable.
    sealed: Option<Overlay>,
    /// Number of the next journal entry.
    next_group: u64,
    /// Fingerprints made durable (journaled) since the last checkpoint started.
    pub(super) journaled: u64,
    /// Journal entries below this number are durable and their bits set: what
    /// the next checkpoint covers.
    pub(super) journal_end: u64,
    /// A detached checkpoint runs (see `checkpoint`).
    pub(super) checkpointing: bool,
    /// How long after the last checkpoint the next one is due.
    pub(super) checkpoint_every: Duration,
    /// When the last checkpoint ran (or the state was opened).
    pub(super) last_checkpoint: Instant,
}

impl SeenSet {
    /// Loads the exact set's index and replays the journal into the bits.
    pub(super) fn load(
        db: &Db,
        bloom: BloomFile,
        dedup: DedupMode,
        checkpoint_every: Duration,
    ) -> Result<SeenSet, StoreError> {
        let mut seen = SeenSet {
            bloom,
            dedup,
            exact: exact::Exact::load(db)?,
            open: Overlay::default(),
            sealed: None,
            next_group: 0,
            journaled: 0,
            journal_end: 0,
            checkpointing: false,
            checkpoint_every,
            last_checkpoint: Instant::now(),
        };
        seen.next_group = seen.replay_journal(db)?;
        seen.journal_end = seen.next_group;
        Ok(seen)
    }

    /// Answers whether `fp` was seen, without recording it.
    pub(super) fn check(&self, fp: &Fingerprint) -> Seen {
        if self.open.set.contains(fp) || self.sealed.as_ref().is_some_and(|s| s.set.contains(fp)) {
            return Seen::Duplicate;
        }
        if !self.bloom.contains(fp) {
            return Seen::New;
        }
        match self.dedup {
            DedupMode::Bloom => Seen::Duplicate,
            DedupMode::Exact if self.exact.contains(fp) => Seen::Duplicate,
            DedupMode::Exact => Seen::FalsePositive,
        }
    }

    /// Records `fp` as seen in the open group.
    pub(super) fn record(&mut self, fp: Fingerprint) {
        self.open.set.insert(fp);
        self.open.list.push(fp);
    }

    /// Brings the Bloom probes of `fps` into the cache (a page's links at once).
    pub(super) fn warm(&self, fps: &[Fingerprint]) {
        self.bloom.warm(fps);
    }

    /// Writes the open group's journal entry into `batch`.
    pub(super) fn seal(&mut self, batch: &mut Batch) {
        let mut group = std::mem::take(&mut self.open);
        if !group.list.is_empty() {
            let per_part = keys::MAX_VALUE_BYTES / 20;
            for (part, fps) in group.list.chunks(per_part).enumerate() {
                JOURNAL.put(batch, &(self.next_group, part as u16), &fps.to_vec());
            }
            group.journal = Some(self.next_group);
            self.next_group += 1;
        }
        self.sealed = Some(group);
    }

    /// The sealed group is durable: its fingerprints reach the mapped bits and
    /// the exact set's recent part.
    pub(super) fn durable(&mut self) {
        let Some(group) = self.sealed.take() else {
            return;
        };
        if !group.list.is_empty() {
            crash::point("bloom.set");
        }
        for chunk in group.list.chunks(WARM_CHUNK) {
            self.bloom.warm(chunk);
            for fp in chunk {
                self.bloom.insert(fp);
            }
        }
        if self.dedup == DedupMode::Exact {
            self.exact.recent.extend(group.list.iter().copied());
        }
        self.journaled += group.list.len() as u64;
        if let Some(journal) = group.journal {
            self.journal_end = journal + 1;
        }
    }

    /// Sets the bits of every journaled fingerprint; returns the next group
    /// number. A reader's handle (see `beside`) sets none: the bits are the
    /// crawl's, which sets those of each group once it is durable.
    fn replay_journal(&mut self, db: &Db) -> Result<u64, StoreError> {
        let mut next = 0;
        let set_bits = !db.is_reader();
        if set_bits {
            crash::point("open.replay");
        }
        for entry in JOURNAL.iter(db) {
            let ((seq, _), fps) = entry?;
            if set_bits {
                for fp in &fps {
                    self.bloom.insert(fp);
                }
            }
            if self.dedup == DedupMode::Exact {
                self.exact.recent.extend(fps.iter().copied());
            }
            self.journaled += fps.len() as u64;
            next = seq + 1;
        }
        Ok(next)
    }
}
