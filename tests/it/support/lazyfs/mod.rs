//! A filesystem that loses power: mounted with FUSE on a temp dir, it keeps
//! every write that was not yet fsynced (and every name not yet made durable
//! by an fsync of its directory) apart, and [`PowerCutFs::cut`] drops them,
//! as a power cut would drop the page cache; [`PowerCutFs::cut_torn`] drops a
//! random, seeded share of them and keeps the rest. After Jepsen's LazyFS.
//!
//! - [`disk`]: the model (current and durable contents), plain std.
//! - [`fs`]: the FUSE request handlers over it (the `fuser` crate).
//!
//! The durable image lives in the test's memory, not in a backing directory:
//! it is the disk, and a remount serves the same image again. Mounting needs
//! `/dev/fuse` and root (the mount(2) call; `fusermount3` is not used); a
//! machine without them skips loudly unless `LEGCRAWL_REQUIRE_FUSE=1`.

pub mod disk;
pub mod fs;

use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

pub use disk::{Counts, Disk};

/// The variable that turns a missing FUSE into a failure (`.ci/run` sets it).
pub const REQUIRE_VAR: &str = "LEGCRAWL_REQUIRE_FUSE";
/// How long an unmount may take before the test gives up on it.
const UNMOUNT_LIMIT: Duration = Duration::from_secs(30);

/// The power-cut filesystem mounted on a temp dir; unmounted when dropped
/// (also on a panic), so no test leaves a mount behind.
pub struct PowerCutFs {
    disk: Arc<Mutex<Disk>>,
    mountpoint: tempfile::TempDir,
    session: Option<fuser::BackgroundSession>,
}

impl PowerCutFs {
    /// Mounts an empty disk (strict POSIX: see [`Disk`]), or
    /// says loudly why it cannot (and returns `None`) for test `test`.
    pub fn mount(test: &str) -> Option<PowerCutFs> {
        if !Path::new("/dev/fuse").exists() {
            super::skip::skipped(REQUIRE_VAR, test, "there is no /dev/fuse");
            return None;
        }
        let mountpoint = tempfile::tempdir().expect("a temp dir for the mount");
        let mut fs = PowerCutFs {
            disk: Arc::new(Mutex::new(Disk::new())),
            mountpoint,
            session: None,
        };
        if let Err(why) = fs.start() {
            super::skip::skipped(REQUIRE_VAR, test, &format!("cannot mount FUSE: {why}"));
            return None;
        }
        Some(fs)
    }

    fn start(&mut self) -> std::io::Result<()> {
        let mut config = fuser::Config::default();
        config.mount_options = vec![fuser::MountOption::FSName("legcrawl-powercut".into())];
        let fs = fs::LazyFs::new(self.disk.clone());
        self.session = Some(fuser::spawn_mount(fs, self.mountpoint.path(), &config)?);
        Ok(())
    }

    /// Where the filesystem is mounted.
    pub fn path(&self) -> &Path {
        self.mountpoint.path()
    }

    /// What the disk saw so far.
    pub fn counts(&self) -> Counts {
        self.lock().counts
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Disk> {
        self.disk.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the `nth` `fsync` from now of a file or directory named `name`
    /// (a prefix when it ends in `*`) fail with `EIO` ([`Disk::fail_sync_of`]).
    pub fn fail_sync_of(&self, name: &str, nth: u64) {
        self.lock().fail_sync_of(std::ffi::OsStr::new(name), nth);
    }

    /// The power goes out: from now on no sync makes anything durable. Call
    /// just before killing the programs that use the filesystem.
    pub fn freeze(&self) {
        self.lock().freeze();
    }

    /// Cuts the power (freezing first if not yet frozen): unmounts, drops
    /// everything not durable, and mounts the durable image again. Every
    /// program using the filesystem must have exited.
    pub fn cut(&mut self) {
        self.freeze();
        self.unmount();
        self.lock().cut();
        self.start()
            .expect("mount the filesystem again after the cut");
    }

    /// A torn power cut ([`Disk::cut_torn`]): as [`PowerCutFs::cut`], but a
    /// share of the unsynced pages and names, chosen by `seed`, survives.
    pub fn cut_torn(&mut self, seed: u64) {
        self.freeze();
        self.unmount();
        self.lock().cut_torn(seed);
        self.start()
            .expect("mount the filesystem again after the cut");
    }

    /// Unmounts, waiting at most [`UNMOUNT_LIMIT`]; then detaches lazily
    /// and panics.
    fn unmount(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let (done, wait) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(session.umount_and_join());
        });
        match wait.recv_timeout(UNMOUNT_LIMIT) {
            Ok(Ok(())) => {}
            // The unmount went through, and the session's last read of
            // /dev/fuse found the connection aborted rather than gone: some
            // kernels end a FUSE connection that way at unmount (seen under
            // parallel load). umount(2) itself never fails with it.
            Ok(Err(e)) if e.raw_os_error() == Some(libc::ECONNABORTED) => {}
            // Busy: a child another test just forked (between its fork and
            // its exec, which closes them) held a copy of a descriptor into
            // the mount; seen with four tests at once. The lazy detach takes
            // the mount out of the namespace at once, and that copy writes
            // nothing: the disk is frozen and cut as if it were unmounted.
            Ok(Err(e)) if e.raw_os_error() == Some(libc::EBUSY) => self.detach(),
            Ok(Err(e)) => {
                self.detach();
                panic!("unmounting {} failed: {e}", self.path().display());
            }
            Err(_) => {
                self.detach();
                panic!(
                    "unmounting {} took over {UNMOUNT_LIMIT:?}",
                    self.path().display()
                );
            }
        }
    }

    /// umount2(MNT_DETACH): the last resort, which never blocks.
    fn detach(&self) {
        use std::os::unix::ffi::OsStrExt;
        let Ok(path) = std::ffi::CString::new(self.path().as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: `path` is a valid NUL-terminated string for the call.
        #[allow(unsafe_code)]
        unsafe {
            libc::umount2(path.as_ptr(), libc::MNT_DETACH);
        }
    }
}

impl Drop for PowerCutFs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Never panic twice: detach and let the session thread end.
            if let Some(session) = self.session.take() {
                self.detach();
                drop(session);
            }
        } else {
            self.unmount();
        }
    }
}
