//! The crawl's side: a Unix socket in the state directory, an acceptor
//! thread, and [`MAX_READERS`] reader threads kept for the crawl's length.
//! A reader takes the next dump accepted, opens the state read-only
//! ([`State::beside`]) and runs `dump`'s own view code against it,
//! streaming its output back in frames as it is written.
//!
//! The crawl's loop is never waited on: readers share nothing with it but
//! sled's tree (whose reads run beside its writes), the Bloom file's map and
//! the durable item end (an atomic). Reader threads run within a CPU budget
//! they share (`budget`), at the crawl's own priority (a lower one made
//! them hold the allocator's lock, which the crawl's threads share, while
//! preempted). As many dumps as there are readers wait in
//! a queue; one more is told to try again. A dump that goes away ends its
//! answer at the next write; a dump that stops reading ends it after
//! [`WRITE_TIMEOUT`]. When the state closes ([`State::close_first`]), the
//! server stops accepting, ends every answer (each says it was cut short;
//! after [`CLOSE_WAIT`] the connections left are shut), waits for its
//! readers (they hold the database) and removes the socket. Depends on
//! `wire`, `dump` (the views), `stderr` (their messages) and the store's
//! [`ReadHandle`].

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use legcrawl::store::{ReadHandle, State};
use legcrawl::view::CrawlView;

use super::super::dump_view::View;

use super::budget::{Budget, DUMP_PROCESS, thread_cpu};
use super::wire::{self, END, OUT, Place, Request, SAY, WAIT};

/// Dumps answered at once (as many more wait; one more is told to try
/// again).
pub const MAX_READERS: usize = 4;
/// How long a reader waits for the request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a reader waits for a dump to take the next bytes.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a reader keeps the read-only state it opened for the next
/// dumps (see [`fresh_view`]).
const KEEP_STATE: Duration = Duration::from_secs(5);
/// How long a closing state waits for its readers to say they were cut
/// short before it cuts their connections.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// Output bytes gathered into one frame.
const FRAME_BYTES: usize = 64 << 10;

/// What the acceptor and the readers share.
struct Shared {
    /// Set when the state closes: no new answer, and writes fail.
    stop: AtomicBool,
    /// The CPU time the readers may take.
    budget: Budget,
    /// The answers running, by number: their sockets, to cut them short.
    open: Mutex<HashMap<u64, UnixStream>>,
}

/// A dump accepted and waiting for a reader: its number and its socket.
type Accepted = (u64, UnixStream);

/// The running server; dropping it stops it (see the module doc).
pub struct Server {
    shared: Arc<Shared>,
    place: Place,
    acceptor: Option<JoinHandle<()>>,
    /// The reader threads, started with the server and kept (a thread's
    /// start and end would cost the crawl's threads on every dump).
    readers: Vec<JoinHandle<()>>,
}

/// Starts answering dumps of `state` beside the crawl, and hands the server
/// to the state to stop when it closes. A socket that cannot be made is a
/// warning: the crawl runs on, and dumps find the state busy as before.
pub fn start(state: &mut State) {
    match Server::bind(state.read_handle()) {
        Ok(server) => state.close_first(Box::new(server)),
        Err(error) => tracing::warn!(
            "{}: no dump can read beside this crawl: cannot listen on {}: {error}",
            state.dir().display(),
            wire::SOCKET_FILE
        ),
    }
}

impl Server {
    /// Binds the socket (replacing a stale one: the state's lock is held, so
    /// no other process listens there) and starts the acceptor and the
    /// readers.
    fn bind(handle: ReadHandle) -> io::Result<Server> {
        let place = Place::of(handle.dir())?;
        match std::fs::remove_file(&place.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(&place.path)?;
        std::fs::set_permissions(&place.path, std::fs::Permissions::from_mode(0o600))?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            budget: Budget::new(),
            open: Mutex::new(HashMap::new()),
        });
        // As many wait as are read: one more is told to try again.
        let (queue, waiting) = std::sync::mpsc::sync_channel::<Accepted>(MAX_READERS);
        let waiting = Arc::new(Mutex::new(waiting));
        let mut readers = Vec::with_capacity(MAX_READERS);
        for _ in 0..MAX_READERS {
            let (waiting, handle, shared) =
                (Arc::clone(&waiting), handle.clone(), Arc::clone(&shared));
            readers.push(
                std::thread::Builder::new()
                    .name("legcrawl-read".into())
                    .spawn(move || read(&waiting, &handle, &shared))?,
            );
        }
        let acceptor = std::thread::Builder::new()
            .name("legcrawl-read-accept".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || accept(&listener, &queue, handle.dir(), &shared)
            })?;
        Ok(Server {
            shared,
            place,
            acceptor: Some(acceptor),
            readers,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the acceptor, which then sees the stop (and its end closes
        // the queue, which ends the readers once they are done).
        let _ = UnixStream::connect(&self.place.path);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        // Readers fail at their next frame and say so; those that do not
        // end soon (a dump that reads no more) are cut off.
        let deadline = std::time::Instant::now() + CLOSE_WAIT;
        while std::time::Instant::now() < deadline
            && self.shared.open.lock().is_ok_and(|open| !open.is_empty())
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Ok(open) = self.shared.open.lock() {
            for stream in open.values() {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        let _ = std::fs::remove_file(&self.place.path);
    }
}

/// Accepts dumps until the stop and queues them for the readers; one that
/// finds the queue full is told to try again.
fn accept(
    listener: &UnixListener,
    queue: &std::sync::mpsc::SyncSender<Accepted>,
    dir: &std::path::Path,
    shared: &Shared,
) {
    let mut number = 0u64;
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        number += 1;
        let queued = stream
            .set_write_timeout(Some(WRITE_TIMEOUT))
            .and_then(|()| stream.try_clone())
            .map(|clone| {
                if let Ok(mut open) = shared.open.lock() {
                    open.insert(number, clone);
                }
            });
        if let Err(error) = queued {
            tracing::debug!(%error, "a dump beside the crawl was not answered");
            continue;
        }
        if let Err(std::sync::mpsc::TrySendError::Full((number, mut stream))) =
            queue.try_send((number, stream))
        {
            if let Ok(mut open) = shared.open.lock() {
                open.remove(&number);
            }
            let message = format!(
                "{}: {} dumps are reading beside the running crawl already; try again",
                dir.display(),
                2 * MAX_READERS
            );
            let _ = wire::write_frame(&mut stream, END, &wire::end_payload(2, &message));
        }
    }
}

/// A reader thread: answers the dumps queued, one after the other, until
/// the queue closes.
fn read(
    waiting: &Mutex<std::sync::mpsc::Receiver<Accepted>>,
    handle: &ReadHandle,
    shared: &Shared,
) {
    let mut kept = None;
    loop {
        let next = match waiting.lock() {
            Ok(waiting) => waiting.recv_timeout(KEEP_STATE),
            Err(_) => return,
        };
        let (number, stream) = match next {
            Ok(accepted) => accepted,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                // Quiet: the state kept is let go (its maps hold files a
                // checkpoint may have replaced).
                kept = None;
                continue;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        };
        answer(stream, handle, shared, &mut kept);
        if let Ok(mut open) = shared.open.lock() {
            open.remove(&number);
        }
    }
}

/// Reads the request on `stream`, runs its view and sends the answer.
fn answer(stream: UnixStream, handle: &ReadHandle, shared: &Shared, kept: &mut Kept) {
    let stop = &shared.stop;
    let (started, cpu) = (std::time::Instant::now(), thread_cpu());
    let request = read_request(&stream);
    let mut out = Frames {
        stream: &stream,
        buffer: Vec::with_capacity(FRAME_BYTES),
        stop,
        sent: 0,
        budget: &shared.budget,
        charged: cpu,
        owed: DUMP_PROCESS,
    };
    let (result, said) = match request {
        Ok(request) => crate::cli::stderr::capture(|| run_view(&mut out, handle, kept, request)),
        Err(error) => (Err(error), Vec::new()),
    };
    let result = crate::cli::finish(result.and_then(|()| out.flush().map_err(Into::into)));
    let (code, message) = match result {
        Ok(_) => (0, String::new()),
        Err(_) if stop.load(Ordering::SeqCst) => (
            1,
            format!(
                "{}: the crawl closed the state during this dump; the output above is incomplete: dump again",
                handle.dir().display()
            ),
        ),
        Err(error) => (crate::cli::exit_code(&error), crate::cli::one_line(&error)),
    };
    let mut writer = &stream;
    for line in said {
        if wire::write_frame(&mut writer, SAY, line.as_bytes()).is_err() {
            return;
        }
    }
    let _ = wire::write_frame(&mut writer, END, &wire::end_payload(code, &message));
    tracing::debug!(
        code,
        bytes = out.sent,
        wall_ms = started.elapsed().as_millis() as u64,
        cpu_ms = thread_cpu().saturating_sub(cpu).as_millis() as u64,
        "answered a dump beside the crawl"
    );
}

/// The request line on `stream`, checked.
fn read_request(stream: &UnixStream) -> anyhow::Result<Request> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new(stream.take(wire::MAX_REQUEST)).read_line(&mut line)?;
    let request: Request = serde_json::from_str(&line)
        .map_err(|e| crate::cli::BadInput(format!("a dump's request could not be read: {e}")))?;
    if request.version != wire::VERSION {
        return Err(crate::cli::BadInput(format!(
            "the running crawl is another legcrawl build (its dump requests are version {}, this one's {}); run the crawl's own legcrawl dump",
            wire::VERSION,
            request.version
        ))
        .into());
    }
    Ok(request)
}

/// A reader's read-only state, kept from one dump to the next, and when it
/// was opened.
type Kept = Option<(std::time::Instant, CrawlView)>;

/// Opens the state read-only (or refreshes the one kept, see
/// [`fresh_view`]) and prints the view asked for into `out`.
fn run_view(
    out: &mut Frames<'_>,
    handle: &ReadHandle,
    kept: &mut Kept,
    request: Request,
) -> anyhow::Result<()> {
    let crawl = fresh_view(kept, handle, &request.view)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(crate::cli::dump::print_view(
        out,
        crawl,
        request.view,
        request.limit,
        request.json,
    ))
}

/// The read-only state to answer `view` from: the one kept, refreshed
/// ([`State::refresh_beside`]), when the view reads nothing that refresh
/// leaves as it was and it was opened less than [`KEEP_STATE`] ago; else
/// one opened now ([`State::beside`]), kept for the next dumps. Opening
/// loads the exact set, the page-id index and the Bloom file's map, which
/// a loop of small dumps would otherwise load again and again.
fn fresh_view<'a>(
    kept: &'a mut Kept,
    handle: &ReadHandle,
    view: &View,
) -> anyhow::Result<&'a CrawlView> {
    let refreshable = !matches!(
        view,
        View::Seen { .. } | View::Pages { due: true } | View::Summary
    );
    let reuse = refreshable
        && kept
            .as_ref()
            .is_some_and(|(opened, _)| opened.elapsed() < KEEP_STATE);
    if reuse && let Some((_, CrawlView::State(state))) = kept.as_mut() {
        state.refresh_beside(handle)?;
    } else {
        *kept = None;
        let state = State::beside(handle)?;
        *kept = Some((std::time::Instant::now(), CrawlView::State(Box::new(state))));
    }
    match kept {
        Some((_, crawl)) => Ok(crawl),
        None => Err(anyhow::anyhow!("no state to read")),
    }
}

/// The dump's stdout, sent in [`OUT`] frames of up to [`FRAME_BYTES`];
/// every write fails once the server stops.
struct Frames<'a> {
    stream: &'a UnixStream,
    buffer: Vec<u8>,
    stop: &'a AtomicBool,
    /// Output bytes sent so far.
    sent: u64,
    /// The readers' CPU budget, charged before each frame.
    budget: &'a Budget,
    /// This thread's CPU time when it was last charged.
    charged: Duration,
    /// CPU time to charge with the next frame besides the thread's own (the
    /// dump process's start, once).
    owed: Duration,
}

impl Frames<'_> {
    /// Charges the CPU time used since the last frame to the budget, and
    /// waits out a debt (sending a [`WAIT`] frame every second of it, so the
    /// dump knows the crawl is there).
    fn pace(&mut self) -> io::Result<()> {
        let now = thread_cpu();
        let used = now.saturating_sub(self.charged) + std::mem::take(&mut self.owed);
        let mut wait = self.budget.charge(used);
        self.charged = now;
        while !wait.is_zero() {
            if self.stop.load(Ordering::Relaxed) {
                return Err(io::Error::other("the crawl is closing its state"));
            }
            let step = wait.min(Duration::from_secs(1));
            std::thread::sleep(step);
            wait -= step;
            if !wait.is_zero() {
                let mut stream = self.stream;
                wire::write_frame(&mut stream, WAIT, &[])?;
            }
        }
        Ok(())
    }

    /// Sends what is gathered as one frame, within the budget.
    fn send(&mut self) -> io::Result<()> {
        self.pace()?;
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::other("the crawl is closing its state"));
        }
        if !self.buffer.is_empty() {
            let mut stream = self.stream;
            wire::write_frame(&mut stream, OUT, &self.buffer)?;
            self.sent += self.buffer.len() as u64;
            self.buffer.clear();
        }
        Ok(())
    }
}

impl Write for Frames<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buffer.len() + bytes.len() > FRAME_BYTES {
            self.send()?;
        }
        if bytes.len() >= FRAME_BYTES {
            // Larger than a frame's gathering: in frames of its own.
            for chunk in bytes.chunks(FRAME_BYTES) {
                self.buffer.extend_from_slice(chunk);
                self.send()?;
            }
            return Ok(bytes.len());
        }
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}
