//! The disk behind the power-cut filesystem: every file and directory twice,
//! as programs see it now and as it would come back after a power cut.
//!
//! Modelled on Jepsen's LazyFS: a write lands in the "page cache" (the
//! current contents) and reaches the durable copy only at an `fsync` of that
//! file, page by page. A directory operation (create, mkdir, rename, unlink,
//! rmdir) changes the current entries and reaches the durable entries only at
//! an `fsync` of that directory: the strict POSIX rule that a program which
//! wants a new name to survive must sync the directory that holds it.
//! [`Disk::cut`] is the power cut: everything current becomes what was
//! durable. [`Disk::cut_torn`] is the cut LazyFS calls torn: besides what was
//! durable, a random (seeded) share of what was not survives — some unsynced
//! pages of a file and not others, a file's unsynced length with holes of
//! zeros where its lost pages were, a directory's unsynced entries — as the
//! page cache's writeback may have made any of it durable before the power
//! went. Inodes are never freed, so an unlinked name that was durable comes
//! back with its file. Depends on nothing but std and the tests' `splitmix64`;
//! the FUSE side is `super::fs`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::time::SystemTime;

/// The granule of durability: an `fsync` copies the pages written since the
/// last one.
pub const PAGE: usize = 4096;
/// The root directory's inode number (FUSE's).
pub const ROOT: u64 = 1;

/// What an inode holds.
#[derive(Debug)]
pub enum Body {
    /// A regular file.
    File {
        /// What a read sees now.
        data: Vec<u8>,
        /// What survives a power cut.
        synced: Vec<u8>,
        /// Pages of `data` that differ from `synced` (or may).
        dirty: BTreeSet<usize>,
    },
    /// A directory.
    Dir {
        /// Names a lookup sees now.
        entries: BTreeMap<OsString, u64>,
        /// Names that survive a power cut.
        synced: BTreeMap<OsString, u64>,
    },
}

/// One inode.
#[derive(Debug)]
pub struct Node {
    /// Permission bits.
    pub perm: u16,
    /// Last change of contents or metadata (not made durable: nothing here
    /// reads it back).
    pub mtime: SystemTime,
    /// The contents.
    pub body: Body,
}

/// Counts of what the disk saw, for a test to show that syncs happened.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// File syncs that made data durable.
    pub fsyncs: u64,
    /// Directory syncs that made names durable.
    pub dir_fsyncs: u64,
    /// Bytes written.
    pub written: u64,
    /// Power cuts so far.
    pub cuts: u64,
    /// Syncs failed on purpose ([`Disk::fail_sync_of`]).
    pub failed_syncs: u64,
    /// Unsynced pages a torn cut kept ([`Disk::cut_torn`]).
    pub torn_kept: u64,
    /// Unsynced pages a torn cut dropped.
    pub torn_lost: u64,
}

/// The whole disk: inodes by number, and whether the power is off.
#[derive(Debug)]
pub struct Disk {
    nodes: BTreeMap<u64, Node>,
    next: u64,
    /// A name (or a prefix ending in `*`) and a count: the count-th `fsync`
    /// of a file or directory so named fails (see [`Disk::fail_sync_of`]).
    failing: Option<(OsString, u64)>,
    /// Set at the moment of a cut: from then on a sync changes nothing
    /// durable (the power is already out), until [`Disk::cut`] restores it.
    frozen: bool,
    /// What happened so far.
    pub counts: Counts,
}

impl Default for Disk {
    fn default() -> Disk {
        Disk::new()
    }
}

/// An error answer: an errno value.
pub type Errno = i32;

impl Disk {
    /// An empty disk: the root directory alone, durable.
    pub fn new() -> Disk {
        let root = Node {
            perm: 0o755,
            mtime: SystemTime::now(),
            body: Body::Dir {
                entries: BTreeMap::new(),
                synced: BTreeMap::new(),
            },
        };
        Disk {
            nodes: BTreeMap::from([(ROOT, root)]),
            next: ROOT + 1,
            failing: None,
            frozen: false,
            counts: Counts::default(),
        }
    }

    /// The inode `ino`.
    pub fn node(&self, ino: u64) -> Result<&Node, Errno> {
        self.nodes.get(&ino).ok_or(libc::ENOENT)
    }

    fn node_mut(&mut self, ino: u64) -> Result<&mut Node, Errno> {
        self.nodes.get_mut(&ino).ok_or(libc::ENOENT)
    }

    fn entries_mut(&mut self, dir: u64) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        match &mut self.node_mut(dir)?.body {
            Body::Dir { entries, .. } => Ok(entries),
            Body::File { .. } => Err(libc::ENOTDIR),
        }
    }

    /// The current entries of directory `dir`.
    pub fn entries(&self, dir: u64) -> Result<&BTreeMap<OsString, u64>, Errno> {
        match &self.node(dir)?.body {
            Body::Dir { entries, .. } => Ok(entries),
            Body::File { .. } => Err(libc::ENOTDIR),
        }
    }

    /// The inode that `name` in `dir` names now.
    pub fn lookup(&self, dir: u64, name: &OsStr) -> Result<u64, Errno> {
        self.entries(dir)?.get(name).copied().ok_or(libc::ENOENT)
    }

    /// A new file or directory `name` in `dir` (current only).
    pub fn create(
        &mut self,
        dir: u64,
        name: &OsStr,
        perm: u16,
        is_dir: bool,
    ) -> Result<u64, Errno> {
        if self.entries(dir)?.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let ino = self.next;
        self.next += 1;
        let body = if is_dir {
            Body::Dir {
                entries: BTreeMap::new(),
                synced: BTreeMap::new(),
            }
        } else {
            Body::File {
                data: Vec::new(),
                synced: Vec::new(),
                dirty: BTreeSet::new(),
            }
        };
        let mtime = SystemTime::now();
        self.nodes.insert(ino, Node { perm, mtime, body });
        self.entries_mut(dir)?.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// Removes `name` from `dir` (current only); `rmdir` asks for an empty
    /// directory, `unlink` for anything else.
    pub fn remove(&mut self, dir: u64, name: &OsStr, rmdir: bool) -> Result<(), Errno> {
        let ino = self.lookup(dir, name)?;
        match (&self.node(ino)?.body, rmdir) {
            (Body::Dir { entries, .. }, true) if !entries.is_empty() => {
                return Err(libc::ENOTEMPTY);
            }
            (Body::Dir { .. }, false) => return Err(libc::EISDIR),
            (Body::File { .. }, true) => return Err(libc::ENOTDIR),
            _ => {}
        }
        self.entries_mut(dir)?.remove(name);
        Ok(())
    }

    /// `rename(2)`: replaces a target of the same kind (an empty directory
    /// only), unless `noreplace`.
    pub fn rename(
        &mut self,
        from: (u64, &OsStr),
        to: (u64, &OsStr),
        noreplace: bool,
    ) -> Result<(), Errno> {
        let ino = self.lookup(from.0, from.1)?;
        self.entries(to.0)?;
        if let Ok(target) = self.lookup(to.0, to.1) {
            if noreplace {
                return Err(libc::EEXIST);
            }
            if target == ino {
                return Ok(());
            }
            let source_dir = matches!(self.node(ino)?.body, Body::Dir { .. });
            match &self.node(target)?.body {
                Body::Dir { entries, .. } if !source_dir || !entries.is_empty() => {
                    return Err(if source_dir {
                        libc::ENOTEMPTY
                    } else {
                        libc::EISDIR
                    });
                }
                Body::File { .. } if source_dir => return Err(libc::ENOTDIR),
                _ => {}
            }
        }
        self.entries_mut(from.0)?.remove(from.1);
        self.entries_mut(to.0)?.insert(to.1.to_owned(), ino);
        Ok(())
    }

    /// Reads at most `size` bytes at `offset` of file `ino`.
    pub fn read(&self, ino: u64, offset: u64, size: usize) -> Result<&[u8], Errno> {
        match &self.node(ino)?.body {
            Body::File { data, .. } => {
                let start = (offset as usize).min(data.len());
                let end = start.saturating_add(size).min(data.len());
                Ok(&data[start..end])
            }
            Body::Dir { .. } => Err(libc::EISDIR),
        }
    }

    /// Writes `bytes` at `offset` of file `ino` (current only: durable at its
    /// next sync).
    pub fn write(&mut self, ino: u64, offset: u64, bytes: &[u8]) -> Result<(), Errno> {
        self.counts.written += bytes.len() as u64;
        let node = self.node_mut(ino)?;
        node.mtime = SystemTime::now();
        let Body::File { data, dirty, .. } = &mut node.body else {
            return Err(libc::EISDIR);
        };
        let start = usize::try_from(offset).map_err(|_| libc::EFBIG)?;
        let end = start.checked_add(bytes.len()).ok_or(libc::EFBIG)?;
        if end > data.len() {
            dirty.extend(data.len() / PAGE..end.div_ceil(PAGE));
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(bytes);
        dirty.extend(start / PAGE..end.div_ceil(PAGE));
        Ok(())
    }

    /// The current length of file `ino`.
    pub fn len(&self, ino: u64) -> Result<u64, Errno> {
        match &self.node(ino)?.body {
            Body::File { data, .. } => Ok(data.len() as u64),
            Body::Dir { .. } => Err(libc::EISDIR),
        }
    }

    /// Truncates or extends file `ino` to `len` bytes (current only).
    pub fn set_len(&mut self, ino: u64, len: u64) -> Result<(), Errno> {
        let node = self.node_mut(ino)?;
        node.mtime = SystemTime::now();
        let Body::File { data, dirty, .. } = &mut node.body else {
            return Err(libc::EISDIR);
        };
        let len = usize::try_from(len).map_err(|_| libc::EFBIG)?;
        let (low, high) = (len.min(data.len()), len.max(data.len()));
        dirty.extend(low / PAGE..high.div_ceil(PAGE));
        data.resize(len, 0);
        Ok(())
    }

    /// Sets the permission bits of `ino`.
    pub fn set_perm(&mut self, ino: u64, perm: u16) -> Result<(), Errno> {
        self.node_mut(ino)?.perm = perm;
        Ok(())
    }

    /// Makes the `nth` (from 1) `fsync` from now of a file or directory
    /// named `name` (or, when `name` ends in `*`, named with the rest as a
    /// prefix) fail with `EIO`, as a failing disk does. As Linux does since 4.13,
    /// the failed sync's pages are no longer dirty but never became durable
    /// ("fsyncgate"): a later sync succeeds without them, and a power cut
    /// loses them. A program that goes on writing after the error builds on
    /// pages the disk never got.
    pub fn fail_sync_of(&mut self, name: &OsStr, nth: u64) {
        self.failing = Some((name.to_owned(), nth.max(1)));
    }

    /// True when this sync of `ino` is the one [`Disk::fail_sync_of`] chose.
    fn sync_fails(&mut self, ino: u64) -> bool {
        let Some((name, left)) = &mut self.failing else {
            return false;
        };
        let pattern = name.as_encoded_bytes();
        let matches = |entry: &OsStr| match pattern.strip_suffix(b"*") {
            Some(prefix) => entry.as_encoded_bytes().starts_with(prefix),
            None => entry.as_encoded_bytes() == pattern,
        };
        let named = self.nodes.values().any(|node| match &node.body {
            Body::Dir { entries, .. } => entries.iter().any(|(n, i)| *i == ino && matches(n)),
            Body::File { .. } => false,
        });
        if !named {
            return false;
        }
        *left -= 1;
        if *left > 0 {
            return false;
        }
        self.failing = None;
        true
    }

    /// `fsync` of `ino`: a file's written pages, or a directory's entries,
    /// become durable, unless the power is already out.
    pub fn sync(&mut self, ino: u64) -> Result<(), Errno> {
        if self.frozen {
            self.node(ino)?;
            return Ok(());
        }
        if self.sync_fails(ino) {
            if let Body::File { dirty, .. } = &mut self.node_mut(ino)?.body {
                dirty.clear();
            }
            self.counts.failed_syncs += 1;
            return Err(libc::EIO);
        }
        let dir = match &mut self.node_mut(ino)?.body {
            Body::File {
                data,
                synced,
                dirty,
            } => {
                synced.resize(data.len(), 0);
                for page in std::mem::take(dirty) {
                    let start = (page * PAGE).min(data.len());
                    let end = ((page + 1) * PAGE).min(data.len());
                    synced[start..end].copy_from_slice(&data[start..end]);
                }
                false
            }
            Body::Dir { entries, synced } => {
                synced.clone_from(entries);
                true
            }
        };
        if dir {
            self.counts.dir_fsyncs += 1;
        } else {
            self.counts.fsyncs += 1;
        }
        Ok(())
    }

    /// The power goes out now: no later sync makes anything durable.
    pub fn freeze(&mut self) {
        self.frozen = true;
    }

    /// The power cut itself: every file and directory goes back to what was
    /// durable, and the power comes back on. Call with nothing mounted.
    pub fn cut(&mut self) {
        for node in self.nodes.values_mut() {
            match &mut node.body {
                Body::File {
                    data,
                    synced,
                    dirty,
                } => {
                    data.clone_from(synced);
                    dirty.clear();
                }
                Body::Dir { entries, synced } => entries.clone_from(synced),
            }
        }
        self.frozen = false;
        self.counts.cuts += 1;
    }

    /// A torn power cut: like [`Disk::cut`], but each unsynced page of a
    /// file survives or not by a coin toss from `seed` (splitmix64), and so
    /// does each directory's unsynced entries (all of a directory's or none,
    /// as a journal commits them). A file keeps its unsynced length when a
    /// toss says so, or as far as a kept page reaches beyond its durable
    /// length; what lies in that length and was not kept reads as its durable
    /// bytes, or as zeros past them (a hole). The same seed and the same
    /// writes tear the same way.
    pub fn cut_torn(&mut self, seed: u64) {
        let mut rng = seed;
        let mut toss = move || crate::support::splitmix64(&mut rng) & 1 == 1;
        let (mut kept, mut lost) = (0, 0);
        for node in self.nodes.values_mut() {
            match &mut node.body {
                Body::File {
                    data,
                    synced,
                    dirty,
                } => {
                    if toss() {
                        synced.resize(data.len(), 0);
                    }
                    for page in std::mem::take(dirty) {
                        let start = (page * PAGE).min(data.len());
                        let end = ((page + 1) * PAGE).min(data.len());
                        if start == end {
                            continue;
                        }
                        if !toss() {
                            lost += 1;
                            continue;
                        }
                        kept += 1;
                        if synced.len() < end {
                            synced.resize(end, 0);
                        }
                        synced[start..end].copy_from_slice(&data[start..end]);
                    }
                    data.clone_from(synced);
                }
                Body::Dir { entries, synced } => {
                    if entries != synced && toss() {
                        synced.clone_from(entries);
                    }
                    entries.clone_from(synced);
                }
            }
        }
        self.counts.torn_kept += kept;
        self.counts.torn_lost += lost;
        self.frozen = false;
        self.counts.cuts += 1;
    }

    /// Whether anything written or named is not durable yet.
    pub fn has_unsynced(&self) -> bool {
        self.nodes.values().any(|node| match &node.body {
            Body::File { data, synced, .. } => data != synced,
            Body::Dir { entries, synced } => entries != synced,
        })
    }
}
