//! The crawl's tokio runtime and its Ctrl-C / SIGTERM handling.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;

use crate::cli::stderr::say;

/// The crawl's runtime, and what the first Ctrl-C notifies.
pub(super) fn runtime_and_stop()
-> anyhow::Result<(tokio::runtime::Runtime, Arc<tokio::sync::Notify>)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let stop = Arc::new(tokio::sync::Notify::new());
    install_signal_handler(Arc::clone(&stop))?;
    Ok((runtime, stop))
}

/// First SIGINT/SIGTERM: graceful stop. Second: exit at once (the state is
/// consistent at every instant; only uncommitted work is redone).
fn install_signal_handler(stop: Arc<tokio::sync::Notify>) -> anyhow::Result<()> {
    let signals = AtomicUsize::new(0);
    ctrlc::set_handler(move || {
        if signals.fetch_add(1, Ordering::SeqCst) == 0 {
            say!("legcrawl: stopping (in-flight requests get a moment to finish; Ctrl-C again to quit now)");
            stop.notify_one();
        } else {
            say!("legcrawl: quitting now; the state is consistent, uncommitted pages will be fetched again");
            std::process::exit(130);
        }
    })
    .context("installing the Ctrl-C handler")
}
