//! The wire between a `dump` and the crawl that answers it: the socket's
//! place in the state directory, the request line and the answer's frames.
//!
//! The dump sends one line, a JSON [`Request`]. The crawl answers with
//! frames, each a kind byte, a length (u32, big-endian, at most
//! [`MAX_FRAME`]) and that many bytes: [`OUT`] (bytes of the dump's
//! stdout), [`SAY`] (a line of its stderr), [`WAIT`] (nothing yet, at least
//! once a second while the crawl holds its reader back), and last [`END`]
//! (the exit code, one byte, then the error line, empty on success). An answer that stops
//! without its `END` frame is cut short. Depends on `dump_view` (the views).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::super::dump_view::View;

/// The socket's file in the state directory, while a crawl holds it.
pub const SOCKET_FILE: &str = "read.sock";
/// The request's version: a crawl answers requests of its own version only.
pub const VERSION: u32 = 1;
/// Frame kind: bytes of the dump's stdout.
pub const OUT: u8 = b'o';
/// Frame kind: one line of the dump's stderr.
pub const SAY: u8 = b'e';
/// Frame kind: the end, with the exit code and the error line.
pub const END: u8 = b'x';
/// Frame kind: nothing yet (the reader waits out its CPU budget), empty.
pub const WAIT: u8 = b'w';
/// The largest frame either side writes or reads.
pub const MAX_FRAME: usize = 1 << 20;
/// The longest request line read.
pub const MAX_REQUEST: u64 = 64 << 10;

/// What a dump asks the crawl for: a view and `dump`'s options.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Request {
    /// [`VERSION`] of the asker.
    pub version: u32,
    /// The view.
    pub view: View,
    /// `--limit`.
    pub limit: Option<usize>,
    /// `--json`.
    pub json: bool,
}

/// The socket's path for a state directory. A Unix socket's address holds
/// about 100 bytes; a longer path is reached through the directory's open
/// file (`/proc/self/fd/N/read.sock`), kept open as long as the place is.
pub struct Place {
    /// The path to bind or connect to.
    pub path: PathBuf,
    /// The directory, open, when the path goes through it.
    _dir: Option<File>,
}

/// Longest socket path used as it is (the address holds 108 bytes with
/// its NUL).
const MAX_DIRECT_PATH: usize = 100;

impl Place {
    /// The socket's place in `dir`.
    pub fn of(dir: &Path) -> io::Result<Place> {
        let path = dir.join(SOCKET_FILE);
        if path.as_os_str().len() <= MAX_DIRECT_PATH {
            return Ok(Place { path, _dir: None });
        }
        let dir = File::open(dir)?;
        Ok(Place {
            path: PathBuf::from(format!("/proc/self/fd/{}/{SOCKET_FILE}", dir.as_raw_fd())),
            _dir: Some(dir),
        })
    }
}

/// Writes one frame.
pub fn write_frame(out: &mut impl Write, kind: u8, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&len| len as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::other("a frame longer than the wire allows"))?;
    let mut head = [0u8; 5];
    head[0] = kind;
    head[1..].copy_from_slice(&len.to_be_bytes());
    out.write_all(&head)?;
    out.write_all(payload)
}

/// Reads one frame; `None` at the end of the stream before a frame begins.
pub fn read_frame(input: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < head.len() {
        match input.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let mut word = [0u8; 4];
    word.copy_from_slice(&head[1..]);
    let len = u32::from_be_bytes(word) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::other(format!("a frame of {len} bytes")));
    }
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload)?;
    Ok(Some((head[0], payload)))
}

/// The `END` frame's payload: the code, then the line.
pub fn end_payload(code: u8, message: &str) -> Vec<u8> {
    let mut payload = Vec::with_capacity(1 + message.len());
    payload.push(code);
    payload.extend_from_slice(message.as_bytes());
    payload
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_as_written_and_a_cut_frame_is_an_error() {
        let mut wire = Vec::new();
        write_frame(&mut wire, OUT, b"line\n").expect("write");
        write_frame(&mut wire, END, &end_payload(2, "no run 9")).expect("write");
        let mut input = wire.as_slice();
        assert_eq!(
            read_frame(&mut input).expect("read"),
            Some((OUT, b"line\n".to_vec()))
        );
        let (kind, payload) = read_frame(&mut input).expect("read").expect("a frame");
        assert_eq!(
            (kind, payload[0], &payload[1..]),
            (END, 2, &b"no run 9"[..])
        );
        assert_eq!(read_frame(&mut input).expect("read"), None);
        // Cut in its head, and in its payload.
        assert!(read_frame(&mut &wire[..3]).is_err());
        assert!(read_frame(&mut &wire[..7]).is_err());
        // Longer than the wire allows.
        let mut long = vec![OUT];
        long.extend_from_slice(&(MAX_FRAME as u32 + 1).to_be_bytes());
        assert!(read_frame(&mut long.as_slice()).is_err());
        assert!(write_frame(&mut Vec::new(), OUT, &vec![0; MAX_FRAME + 1]).is_err());
    }

    #[test]
    fn a_long_directory_is_reached_through_its_open_file() {
        let short = Place::of(Path::new("/tmp/state")).expect("place");
        assert_eq!(short.path, Path::new("/tmp/state/read.sock"));
        let dir = tempfile::tempdir().expect("temp dir");
        let deep = dir.path().join("d".repeat(120));
        std::fs::create_dir(&deep).expect("create");
        let long = Place::of(&deep).expect("place");
        let text = long.path.to_string_lossy().into_owned();
        assert!(text.starts_with("/proc/self/fd/"), "{text}");
        assert!(text.len() < MAX_DIRECT_PATH, "{text}");
        // The path names the directory's socket file.
        std::fs::write(deep.join(SOCKET_FILE), b"x").expect("write");
        assert_eq!(std::fs::read(&long.path).expect("read"), b"x");
    }
}
