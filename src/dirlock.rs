//! An exclusive `flock` on a directory, held as long as its `File` lives: the
//! state directory's lock and the WARC directory's. Plain std.

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::time::Duration;

/// Attempts to take a lock before a directory counts as busy: a process that
/// just closed (or was killed) may release its lock a moment after it returns.
pub const ATTEMPTS: u32 = 10;
/// Wait between two attempts.
pub const RETRY: Duration = Duration::from_millis(20);

/// Takes `dir`'s exclusive lock, retrying briefly: `Ok(None)` when another
/// process still holds it.
pub fn lock(dir: &Path) -> io::Result<Option<File>> {
    let file = File::open(dir)?;
    for attempt in 1..=ATTEMPTS {
        match file.try_lock() {
            Ok(()) => return Ok(Some(file)),
            Err(fs::TryLockError::WouldBlock) if attempt < ATTEMPTS => std::thread::sleep(RETRY),
            Err(fs::TryLockError::WouldBlock) => break,
            Err(fs::TryLockError::Error(error)) => return Err(error),
        }
    }
    Ok(None)
}
