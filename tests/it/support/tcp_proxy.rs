//! A small TCP proxy on 127.0.0.1 between the workers and Redis, for the
//! network faults of issue 46.
//!
//! [`TcpProxy::start`] listens on a free port and forwards each connection
//! it accepts to `127.0.0.1:TARGET` (one upstream connection per client
//! connection, bytes copied both ways by two threads). The test can:
//!
//! - [`TcpProxy::point_to`]: send new connections to another port (a
//!   promoted replica) and cut every connection now open, as a failover's
//!   address change does;
//! - [`TcpProxy::black_hole`]: stop forwarding, as a network that drops every
//!   packet does. Connections stay open on both sides and nothing arrives:
//!   what each side sends waits (in the proxy's buffer and the kernel's
//!   socket buffers, as TCP keeps unacknowledged segments to send again), new
//!   connections are accepted but nothing passes on them.
//!   [`TcpProxy::heal`] forwards again what waited, in order, as TCP's
//!   retransmissions deliver it when the network comes back: no byte inside
//!   a connection is lost or reordered (TCP never does that; a connection
//!   that is given up is reset instead).
//!
//! Threads only (std); every wait is bounded by short socket timeouts and
//! the stop flag, so dropping the proxy ends every thread within ~100 ms.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long one read waits before the pump looks at its flags again.
const POLL: Duration = Duration::from_millis(20);
/// How long connecting to the target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What the proxy's threads share.
struct State {
    /// The port on 127.0.0.1 new connections go to.
    target: AtomicU16,
    /// Nothing is forwarded while set.
    holding: AtomicBool,
    /// The proxy is dropped: every thread ends.
    stop: AtomicBool,
    /// Both sockets of every connection open now (clones, to cut them).
    open: Mutex<Vec<(TcpStream, TcpStream)>>,
    /// Connections accepted so far.
    accepted: AtomicU64,
}

impl State {
    fn cut_all(&self) {
        let open = match self.open.lock() {
            Ok(mut open) => std::mem::take(&mut *open),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        for (client, upstream) in open {
            let _ = client.shutdown(Shutdown::Both);
            let _ = upstream.shutdown(Shutdown::Both);
        }
    }
}

/// A running proxy; its threads end when it is dropped.
pub struct TcpProxy {
    port: u16,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl TcpProxy {
    /// A proxy on a free port of 127.0.0.1 forwarding to `127.0.0.1:target`.
    pub fn start(target: u16) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let state = Arc::new(State {
            target: AtomicU16::new(target),
            holding: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            open: Mutex::new(Vec::new()),
            accepted: AtomicU64::new(0),
        });
        let shared = Arc::clone(&state);
        let accept = std::thread::spawn(move || accept_loop(&listener, &shared));
        TcpProxy {
            port,
            state,
            accept: Some(accept),
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/0`, the proxy's address as a Redis URL.
    pub fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Sends new connections to `127.0.0.1:target` and cuts every open one.
    pub fn point_to(&self, target: u16) {
        self.state.target.store(target, Ordering::SeqCst);
        self.state.cut_all();
    }

    /// Cuts every open connection (both sides see it closed).
    pub fn cut_all(&self) {
        self.state.cut_all();
    }

    /// Stops forwarding: connections stay open and nothing passes.
    pub fn black_hole(&self) {
        self.state.holding.store(true, Ordering::SeqCst);
    }

    /// Forwards again, first what waited.
    pub fn heal(&self) {
        self.state.holding.store(false, Ordering::SeqCst);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        self.state.holding.store(false, Ordering::SeqCst);
        self.state.cut_all();
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Accepts connections until the proxy stops, each forwarded by two pumps.
fn accept_loop(listener: &TcpListener, state: &Arc<State>) {
    while !state.stop.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
        };
        state.accepted.fetch_add(1, Ordering::SeqCst);
        let target = state.target.load(Ordering::SeqCst);
        let addr = SocketAddr::from(([127, 0, 0, 1], target));
        // A target that is down: the client sees its connection closed.
        let Ok(upstream) = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nonblocking(false);
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let clones = (client.try_clone(), upstream.try_clone());
        let (Ok(client_r), Ok(upstream_r)) = clones else {
            continue;
        };
        if let (Ok(c), Ok(u)) = (client.try_clone(), upstream.try_clone()) {
            match state.open.lock() {
                Ok(mut open) => open.push((c, u)),
                Err(poisoned) => poisoned.into_inner().push((c, u)),
            }
        }
        let (s1, s2) = (Arc::clone(state), Arc::clone(state));
        std::thread::spawn(move || pump(client_r, upstream, &s1));
        std::thread::spawn(move || pump(upstream_r, client, &s2));
    }
}

/// Copies `from` to `to` until either closes or the proxy stops, holding
/// what it read while the proxy black-holes; then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream, state: &State) {
    let _ = from.set_read_timeout(Some(POLL));
    let _ = to.set_write_timeout(Some(Duration::from_secs(5)));
    let mut buf = vec![0u8; 16 * 1024];
    'copy: while !state.stop.load(Ordering::SeqCst) {
        if state.holding.load(Ordering::SeqCst) {
            std::thread::sleep(POLL);
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        // Read just as the hole opened: it waits for the heal too.
        while state.holding.load(Ordering::SeqCst) {
            if state.stop.load(Ordering::SeqCst) {
                break 'copy;
            }
            std::thread::sleep(POLL);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
