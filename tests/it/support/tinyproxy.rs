//! A real HTTP proxy, Debian's `tinyproxy`, as a child process for the proxy
//! tests.
//!
//! [`Tinyproxy::start`] writes a config file into a fresh temp dir (listen on
//! 127.0.0.1 at a free port, allow 127.0.0.1, log at `Info` into the temp
//! dir, a `Via` name the site can look for, optional `BasicAuth`), starts
//! `tinyproxy -d -c FILE` in the foreground and waits (bounded) until the port
//! accepts connections. Dropping the handle kills it. [`Tinyproxy::log`] reads
//! its log (one `Request (file descriptor N): GET http://... HTTP/1.1` or
//! `CONNECT host:port` line per request).
//!
//! The program is found through `LEGCRAWL_TINYPROXY` (its path) or as
//! `tinyproxy` on `PATH` (or in `/usr/bin`, `/usr/sbin`). When it is missing
//! [`Tinyproxy::start`] prints a loud `SKIPPED` line and returns `None`, unless
//! `LEGCRAWL_REQUIRE_PROXY=1` (as `.ci/run` sets), which makes it fail.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Makes a missing `tinyproxy` fail instead of skip.
pub const REQUIRE_VAR: &str = "LEGCRAWL_REQUIRE_PROXY";
/// The path of the `tinyproxy` executable, if not on `PATH`.
pub const PROGRAM_VAR: &str = "LEGCRAWL_TINYPROXY";
/// The name the proxy puts in the `Via` header it adds.
pub const VIA_NAME: &str = "legcrawl-test-proxy";
/// Longest wait for the started proxy to accept connections.
const READY_WAIT: Duration = Duration::from_secs(10);

/// A running tinyproxy; killed on drop.
pub struct Tinyproxy {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

fn find_program() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(PROGRAM_VAR) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("tinyproxy"))
        .find(|candidate| candidate.is_file())
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

impl Tinyproxy {
    /// A proxy without authentication, or `None` after a loud `SKIPPED` line
    /// naming `test`.
    pub fn start(test: &str) -> Option<Tinyproxy> {
        Tinyproxy::start_with(test, None)
    }

    /// A proxy that asks for `user`/`password` (Basic, 407 otherwise).
    pub fn start_with_auth(test: &str, user: &str, password: &str) -> Option<Tinyproxy> {
        Tinyproxy::start_with(test, Some((user, password)))
    }

    fn start_with(test: &str, auth: Option<(&str, &str)>) -> Option<Tinyproxy> {
        let Some(program) = find_program() else {
            let why = "tinyproxy not found (apt-get install tinyproxy, or set LEGCRAWL_TINYPROXY)";
            super::skip::skipped(REQUIRE_VAR, test, why);
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let log = dir.path().join("tinyproxy.log");
        let mut config = format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 30\nLogFile \"{}\"\nLogLevel Info\n\
             MaxClients 32\nAllow 127.0.0.1\nViaProxyName \"{VIA_NAME}\"\n",
            log.display()
        );
        if let Some((user, password)) = auth {
            config.push_str(&format!("BasicAuth {user} {password}\n"));
        }
        let file = dir.path().join("tinyproxy.conf");
        std::fs::write(&file, config).expect("write the tinyproxy config");
        let child = Command::new(&program)
            .arg("-d")
            .arg("-c")
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let mut proxy = Tinyproxy { child, port, dir };
        let deadline = Instant::now() + READY_WAIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = proxy.child.try_wait() {
                panic!(
                    "tinyproxy exited at start ({status}): {}",
                    proxy.log().unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "tinyproxy did not listen on 127.0.0.1:{port} within {READY_WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(proxy)
    }

    /// `http://127.0.0.1:PORT`, with `user:password@` when given.
    pub fn url(&self, credentials: Option<(&str, &str)>) -> String {
        match credentials {
            Some((user, password)) => format!("http://{user}:{password}@127.0.0.1:{}", self.port),
            None => format!("http://127.0.0.1:{}", self.port),
        }
    }

    /// The proxy's log so far.
    pub fn log(&self) -> Option<String> {
        std::fs::read_to_string(self.dir.path().join("tinyproxy.log")).ok()
    }

    /// The request lines the proxy logged (`GET http://... HTTP/1.1`,
    /// `CONNECT host:port HTTP/1.1`).
    pub fn requests(&self) -> Vec<String> {
        self.log()
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split_once("): ").map(|(_, rest)| rest))
            .filter(|rest| rest.contains(" HTTP/1."))
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
