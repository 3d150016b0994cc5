//! A field of a Linux process's `/proc/PID/status`, in KiB: what the memory
//! benches (`checkpoint_memory`, `frontier_memory`, `sled_memory`) read.

use anyhow::Context;

/// The `field` (say `"RssAnon:"`) of `/proc/{pid}/status` in KiB; `pid` is
/// `"self"` for this process.
pub fn status_kib(pid: &str, field: &str) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| path.clone())?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("{field} not in {path}"))?;
    line.split_whitespace()
        .nth(1)
        .context("no value")?
        .parse()
        .context("not a number")
}
