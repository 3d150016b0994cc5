//! The FUSE side of the power-cut filesystem: answers the kernel's requests
//! from a [`Disk`] shared with the test, served by `fuser` on a thread of the
//! test process. Holds no state of its own; everything is in the disk.

use std::ffi::OsStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use super::disk::{Body, Disk};

/// How long the kernel may cache names and attributes. Nothing but this
/// filesystem changes the disk while it is mounted, so the kernel's own
/// updates keep its cache right.
const TTL: Duration = Duration::from_secs(1);

/// The filesystem served to the kernel.
pub struct LazyFs {
    /// The disk, shared with the test, which cuts the power on it.
    pub disk: Arc<Mutex<Disk>>,
    uid: u32,
    gid: u32,
}

impl LazyFs {
    /// Serves `disk` as the calling user.
    pub fn new(disk: Arc<Mutex<Disk>>) -> LazyFs {
        // SAFETY: getuid(2)/getgid(2) cannot fail and touch no memory.
        #[allow(unsafe_code)]
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        LazyFs { disk, uid, gid }
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        // A panic while holding the lock leaves a disk still worth reading.
        self.disk
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn attr(&self, disk: &Disk, ino: u64) -> Result<FileAttr, i32> {
        let node = disk.node(ino)?;
        let (kind, size) = match &node.body {
            Body::File { data, .. } => (FileType::RegularFile, data.len() as u64),
            Body::Dir { entries, .. } => (FileType::Directory, entries.len() as u64),
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: node.mtime,
            mtime: node.mtime,
            ctime: node.mtime,
            crtime: UNIX_EPOCH,
            kind,
            perm: node.perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: super::disk::PAGE as u32,
            flags: 0,
        })
    }

    fn entry(&self, disk: &Disk, ino: Result<u64, i32>, reply: ReplyEntry) {
        match ino.and_then(|ino| self.attr(disk, ino)) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    fn new_node(&self, parent: INodeNo, name: &OsStr, mode: u32, dir: bool, reply: ReplyEntry) {
        let mut disk = self.disk();
        let ino = disk.create(parent.0, name, (mode & 0o7777) as u16, dir);
        self.entry(&disk, ino, reply);
    }
}

fn empty(result: Result<(), i32>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(Errno::from_i32(e)),
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let disk = self.disk();
        let ino = disk.lookup(parent.0, name);
        self.entry(&disk, ino, reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let disk = self.disk();
        match self.attr(&disk, ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut disk = self.disk();
        let changed = size
            .map_or(Ok(()), |len| disk.set_len(ino.0, len))
            .and_then(|()| mode.map_or(Ok(()), |m| disk.set_perm(ino.0, (m & 0o7777) as u16)))
            .and_then(|()| self.attr(&disk, ino.0));
        match changed {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(Errno::from_i32(libc::EPERM));
        }
        self.new_node(parent, name, mode & !umask, false, reply);
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.new_node(parent, name, mode & !umask, true, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(self.disk().remove(parent.0, name, false), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(self.disk().remove(parent.0, name, true), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            return reply.error(Errno::from_i32(libc::EINVAL));
        }
        let noreplace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        let renamed = self
            .disk()
            .rename((parent.0, name), (newparent.0, newname), noreplace);
        empty(renamed, reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.disk().node(ino.0) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.disk().read(ino.0, offset, size as usize) {
            Ok(bytes) => reply.data(bytes),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.disk().write(ino.0, offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) makes nothing durable.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        empty(self.disk().sync(ino.0), reply);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let disk = self.disk();
        let entries = match disk.entries(ino.0) {
            Ok(entries) => entries,
            Err(e) => return reply.error(Errno::from_i32(e)),
        };
        let dots = [(".".into(), ino.0), ("..".into(), ino.0)];
        let all = dots
            .into_iter()
            .chain(entries.iter().map(|(n, i)| (n.clone(), *i)));
        for (index, (name, child)) in all.enumerate().skip(offset as usize) {
            let kind = match disk.node(child).map(|n| &n.body) {
                Ok(Body::File { .. }) => FileType::RegularFile,
                _ => FileType::Directory,
            };
            if reply.add(INodeNo(child), index as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        empty(self.disk().sync(ino.0), reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // 4 GiB free in 4 KiB blocks, a million inodes.
        reply.statfs(1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut disk = self.disk();
        let perm = ((mode & !umask) & 0o7777) as u16;
        let created = disk
            .create(parent.0, name, perm, false)
            .and_then(|ino| self.attr(&disk, ino));
        match created {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
        }
        let mut disk = self.disk();
        let end = offset.saturating_add(length);
        let grown = disk.len(ino.0).and_then(|len| {
            if end > len {
                disk.set_len(ino.0, end)
            } else {
                Ok(())
            }
        });
        empty(grown, reply);
    }
}
