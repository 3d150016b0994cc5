//! `dump` beside a running crawl: the crawl answers every view over a Unix
//! socket in its state directory (`read.sock`), running `dump`'s own view
//! code against a read-only state on a thread of its own
//! ([`legcrawl::store::State::beside`]), so the output is what a dump of an
//! idle state would print of the state as of the last durable group.
//!
//! # Layout
//! - `wire`: the socket's place, the request line and the answer's frames;
//! - `budget`: the CPU time the crawl's readers may take;
//! - `server`: the crawl's side (started by `crawl` once the state is open);
//! - here: the dump's side, [`ask`].
//!
//! A dump (of any view but the summary, which the crawl publishes) asks
//! before it opens the state, and again when opening found it busy. No
//! socket, one nobody listens on (a crawl killed with `-9` leaves its file),
//! or a crawl that closes it before the first frame (it is ending) is no
//! answer: the dump then opens the state as before, and says it is busy
//! when something else holds it. Every wait is
//! bounded: connecting fails at once without a listener, and the answer's
//! frames must come within [`READ_TIMEOUT`] of each other.

mod budget;
mod server;
mod wire;

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

pub use server::start;

use super::dump_view::View;
use super::stderr::say;
use wire::{END, OUT, Place, Request, SAY, WAIT};

/// How long a dump waits for the next frame of the crawl's answer.
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a dump waits to hand over its request.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The error line a crawl answered a dump with, and its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Answered {
    /// The exit code the crawl's run of the view came to.
    pub code: u8,
    /// Its one line.
    pub message: String,
}

/// Asks the crawl that holds `dir` for `view`, and copies its answer to
/// stdout and stderr. `Ok(None)` when no crawl answers there: no socket,
/// nothing listens on it, or the crawl closed it before its first frame
/// (it is ending): the state is idle, or busy for another reason.
pub fn ask(
    dir: &Path,
    view: View,
    limit: Option<usize>,
    json: bool,
) -> anyhow::Result<Option<ExitCode>> {
    let Ok(place) = Place::of(dir) else {
        return Ok(None);
    };
    let Ok(mut stream) = UnixStream::connect(&place.path) else {
        return Ok(None);
    };
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let request = Request {
        version: wire::VERSION,
        view,
        limit,
        json,
    };
    let mut line = serde_json::to_vec(&request)?;
    line.push(b'\n');
    if stream.write_all(&line).is_err() {
        // The crawl closed the socket meanwhile: it is ending.
        return Ok(None);
    }
    // No first frame: the crawl is ending (or stopped): no answer.
    let Ok(Some(first)) = wire::read_frame(&mut stream) else {
        return Ok(None);
    };
    let answered = copy_answer(first, &mut stream, &mut io::stdout().lock());
    super::finish(answered).map(Some)
}

/// Why an answer that began stops without its END frame.
fn cut(why: String) -> anyhow::Error {
    anyhow::anyhow!(
        "the running crawl's answer was cut short ({why}); the output above is incomplete: run the dump again"
    )
}

/// The next frame of an answer that began.
fn next_frame(stream: &mut UnixStream) -> anyhow::Result<(u8, Vec<u8>)> {
    match wire::read_frame(stream) {
        Ok(Some(frame)) => Ok(frame),
        Ok(None) => Err(cut("the crawl closed the connection".into())),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(cut(format!(
                "nothing came for {} s",
                READ_TIMEOUT.as_secs()
            )))
        }
        Err(e) => Err(cut(e.to_string())),
    }
}

/// Copies the answer's frames from `first` on: output to `out`, lines to
/// stderr; the END frame's error, or one when the answer was cut short.
fn copy_answer(
    first: (u8, Vec<u8>),
    stream: &mut UnixStream,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut frame = first;
    loop {
        match frame {
            (OUT, bytes) => out.write_all(&bytes)?,
            (SAY, line) => say!("{}", String::from_utf8_lossy(&line)),
            (WAIT, _) => {}
            (END, payload) => {
                out.flush()?;
                let (code, message) = payload.split_first().unwrap_or((&1, b"no exit code"));
                if *code == 0 {
                    return Ok(());
                }
                return Err(Answered {
                    code: *code,
                    message: String::from_utf8_lossy(message).into_owned(),
                }
                .into());
            }
            (kind, _) => return Err(cut(format!("a frame of unknown kind {kind}"))),
        }
        frame = next_frame(stream)?;
    }
}
