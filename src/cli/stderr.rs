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

/// Writes `message` and a newline to stderr, ignoring failure. Use [`say!`].
pub fn line(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr(), "{message}");
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

    #[test]
    fn a_failed_write_is_reported_done() {
        let mut quiet = Quiet;
        assert_eq!(quiet.write(b"").ok(), Some(0));
        assert!(quiet.flush().is_ok());
    }
}
