//! sled's panics: sled 0.34 panics on some corrupt input (while it recovers
//! its log on open, or while it reads a damaged page). [`guard`] runs an open
//! or a read of the database under `catch_unwind` and turns a panic into
//! [`StoreError::Damaged`] naming the database; [`quiet_sled_panics`] (the
//! binary installs it) keeps such a panic's message and backtrace off stderr,
//! and [`sled_panic_report`] names one that escaped elsewhere.
//! Depends on `error` only.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::error::StoreError;

/// The database directory whose panic [`quiet_sled_panics`] last silenced, with
/// the panic's message.
static SLED_PANIC: Mutex<Option<String>> = Mutex::new(None);
/// The database directory opened last (for [`sled_panic_report`]).
static LAST_DB: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Runs `f` (an open or a read of the database in `db_dir`) and turns a panic
/// inside it into [`StoreError::Damaged`] naming `db_dir`.
pub(super) fn guard<T>(
    db_dir: &Path,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    if let Ok(mut last) = LAST_DB.lock() {
        *last = Some(db_dir.to_owned());
    }
    // Unwind safety: after a panic everything `f` touched is dropped unused.
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        Err(StoreError::Damaged {
            path: db_dir.to_owned(),
            reason: format!(
                "the database library panicked: {}",
                message(payload.as_ref())
            ),
        })
    })
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// True for a panic raised inside sled's own code.
fn in_sled(info: &std::panic::PanicHookInfo<'_>) -> bool {
    info.location()
        .is_some_and(|l| l.file().contains("/sled-") || l.file().contains("/sled/"))
}

/// Installs a panic hook that keeps panics raised inside sled (a damaged
/// database) off stderr — they become one line through `guard` or
/// [`sled_panic_report`] — and hands every other panic to the previous hook.
pub fn quiet_sled_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if in_sled(info) {
            if let Ok(mut slot) = SLED_PANIC.lock() {
                *slot = Some(message(info.payload()));
            }
        } else {
            previous(info);
        }
    }));
}

/// One line for a sled panic that escaped `guard` (silenced by
/// [`quiet_sled_panics`]); `None` if there was none.
pub fn sled_panic_report() -> Option<String> {
    let message = SLED_PANIC.lock().ok()?.clone()?;
    let db = LAST_DB
        .lock()
        .ok()
        .and_then(|d| d.clone())
        .map_or_else(|| "the state's db".into(), |d| d.display().to_string());
    Some(
        StoreError::Damaged {
            path: PathBuf::from(db),
            reason: format!("the database library panicked: {message}"),
        }
        .to_string(),
    )
}
