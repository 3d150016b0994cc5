//! Writing to stderr without ever panicking.
//!
//! `eprintln!` panics when stderr is a closed pipe (`legcrawl -vv crawl ... 2>&1 |
//! head -5` once `head` exits), and so does tracing-subscriber when it reports a
//! failed log write with `eprintln!`; a panic on the crawl's thread or in the
//! Ctrl-C handler wedged the whole process. Every message the binary writes to
//! stderr goes through [`say!`], and the log through [`Quiet`]: a write that
//! fails is dropped, since there is nowhere left to report it.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

/// Like `eprintln!`, but a failed write (a closed pipe) is ignored.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::stderr::line(format_args!($($arg)*))
    };
}
pub(crate) use say;

thread_local! {
    /// The lines [`say!`] writes on this thread while [`capture`] runs.
    static CAPTURED: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// Writes `message` and a newline to stderr, ignoring failure; while
/// [`capture`] runs on this thread, keeps it instead. Use [`say!`].
pub fn line(message: std::fmt::Arguments<'_>) {
    let kept = CAPTURED.with(|captured| match captured.borrow_mut().as_mut() {
        Some(lines) => {
            lines.push(message.to_string());
            true
        }
        None => false,
    });
    if !kept {
        let _ = writeln!(io::stderr(), "{message}");
    }
}

/// Runs `f`, keeping the lines [`say!`] writes on this thread meanwhile
/// instead of writing them (a dump answered for another process sends them
/// there, see `beside`); returns `f`'s result and those lines.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    CAPTURED.with(|captured| *captured.borrow_mut() = Some(Vec::new()));
    let result = f();
    let lines = CAPTURED.with(|captured| captured.borrow_mut().take().unwrap_or_default());
    (result, lines)
}

/// Writes `message` to stderr (no newline) and flushes, ignoring failure.
pub fn prompt(message: std::fmt::Arguments<'_>) {
    let mut stderr = io::stderr();
    let _ = stderr.write_fmt(message);
    let _ = stderr.flush();
}

/// The log's writer: stderr, with every failed write reported as done, so that
/// nothing upstream (tracing-subscriber reports failed writes with `eprintln!`)
/// sees an error it could turn into a panic.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl<'a> MakeWriter<'a> for Quiet {
    type Writer = Quiet;

    fn make_writer(&'a self) -> Quiet {
        Quiet
    }
}

impl Write for Quiet {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A closed pipe or a full disk: the bytes are dropped, as if written.
        let _ = io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binary's sources: none may print with a macro that panics on a
    /// closed pipe.
    const SOURCES: &[(&str, &str)] = &[
        ("main.rs", include_str!("../main.rs")),
        ("cli/mod.rs", include_str!("mod.rs")),
        ("cli/access.rs", include_str!("access.rs")),
        ("cli/beside/budget.rs", include_str!("beside/budget.rs")),
        ("cli/beside/mod.rs", include_str!("beside/mod.rs")),
        ("cli/beside/server.rs", include_str!("beside/server.rs")),
        ("cli/beside/wire.rs", include_str!("beside/wire.rs")),
        ("cli/crawl/mod.rs", include_str!("crawl/mod.rs")),
        ("cli/crawl/report.rs", include_str!("crawl/report.rs")),
        ("cli/crawl/reparse.rs", include_str!("crawl/reparse.rs")),
        ("cli/crawl/runtime.rs", include_str!("crawl/runtime.rs")),
        ("cli/crawl/shared.rs", include_str!("crawl/shared.rs")),
        ("cli/dump.rs", include_str!("dump.rs")),
        ("cli/dump_job.rs", include_str!("dump_job.rs")),
        ("cli/dump_view.rs", include_str!("dump_view.rs")),
        ("cli/export.rs", include_str!("export.rs")),
        ("cli/fetch.rs", include_str!("fetch.rs")),
        ("cli/help.rs", include_str!("help.rs")),
        ("cli/repair.rs", include_str!("repair.rs")),
        ("cli/reset.rs", include_str!("reset.rs")),
        ("cli/seeds.rs", include_str!("seeds.rs")),
        ("cli/serve.rs", include_str!("serve.rs")),
        ("cli/stats.rs", include_str!("stats.rs")),
    ];

    #[test]
    fn the_binary_never_prints_with_a_panicking_macro() {
        for (file, text) in SOURCES {
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                for banned in ["eprintln!(", "println!(", "eprint!(", "print!("] {
                    assert!(
                        !code.contains(banned),
                        "{file}:{}: `{banned}` panics on a closed pipe; use say! or a writer",
                        n + 1
                    );
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut dirs = vec![src.join("cli")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("a folder of src/cli") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let relative = path.strip_prefix(&src).expect("under src");
                let name = relative.to_string_lossy().replace('\\', "/");
                assert!(
                    name == "cli/stderr.rs" || SOURCES.iter().any(|(f, _)| *f == name),
                    "{name} is not in the print check's SOURCES"
                );
            }
        }
    }

    #[test]
    fn a_failed_write_is_reported_done() {
        let mut quiet = Quiet;
        assert_eq!(quiet.write(b"").ok(), Some(0));
        assert!(quiet.flush().is_ok());
    }
}
