//! A real `redis-server` as a child process, for the shared-crawl tests.
//!
//! [`RedisServer::start`] picks a free port on 127.0.0.1, starts Debian's
//! `redis-server` there with RDB snapshots configured but never due within a
//! test (`--save "3600 1" --appendonly no`: nothing is written, a killed server
//! comes back empty, and workers do not warn of a server without persistence)
//! and
//! its working directory in a fresh temp dir, and waits (bounded) until it
//! answers `PING`; [`RedisServer::start_aof`] turns the append-only file on with
//! `appendfsync always`, so a write acknowledged before [`RedisServer::kill`]
//! is there after [`RedisServer::start_again`] (same port, same directory).
//! [`RedisServer::start_with_password`] adds `--requirepass`;
//! [`RedisServer::start_without_persistence`] has `--save ""`;
//! [`RedisServer::start_with_config`] adds settings (`--NAME VALUE` pairs);
//! [`RedisServer::start_cluster_node`] starts an empty Redis Cluster node
//! (`--cluster-enabled yes`, its bus on another free port), which
//! `support::cluster` joins with others; [`RedisServer::start_tls`] serves
//! TLS only (`--port 0 --tls-port PORT`, with the given certificate, key and
//! CA, clients not asked for certificates), and is ready once its port
//! accepts a connection ([`RedisServer::command`] speaks plain TCP, so it
//! cannot be used on it).
//! Dropping the handle kills the server. [`RedisServer::command`] speaks raw
//! RESP over a `TcpStream`, enough for a test to look at keys.
//!
//! The server is found through `LEGCRAWL_REDIS_SERVER` (its path) or as
//! `redis-server` on `PATH` (or in `/usr/bin`, `/usr/sbin`). When it is missing
//! the start functions print a loud `SKIPPED` line to stderr and return `None`,
//! so the tests pass on a machine with only cargo; with
//! `LEGCRAWL_REQUIRE_REDIS=1` (as `.ci/run` sets) a missing server fails the
//! test instead.
//!
//! Self-contained (std and `tempfile` only): `benches/shared.rs` includes this
//! file with `#[path]`.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for a started server to answer `PING`.
const READY_WAIT: Duration = Duration::from_secs(10);
/// Ports tried before giving up (a port picked free can be taken meanwhile).
const PORT_ATTEMPTS: usize = 5;
/// Read/write timeout of one [`RedisServer::command`].
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// Makes a missing `redis-server` fail instead of skip.
pub const REQUIRE_VAR: &str = "LEGCRAWL_REQUIRE_REDIS";
/// The path of the `redis-server` executable, if not on `PATH`.
pub const SERVER_VAR: &str = "LEGCRAWL_REDIS_SERVER";

/// One RESP reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resp {
    /// `+OK`
    Simple(String),
    /// `-ERR ...`
    Error(String),
    /// `:42`
    Int(i64),
    /// `$n` bytes, or `$-1` (nil).
    Bulk(Option<Vec<u8>>),
    /// `*n` replies, or `*-1` (nil).
    Array(Option<Vec<Resp>>),
}

impl Resp {
    /// The text of a simple or bulk reply.
    pub fn text(&self) -> Option<String> {
        match self {
            Resp::Simple(s) => Some(s.clone()),
            Resp::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// The texts of an array reply (empty for anything else).
    pub fn texts(&self) -> Vec<String> {
        match self {
            Resp::Array(Some(items)) => items.iter().filter_map(Resp::text).collect(),
            _ => Vec::new(),
        }
    }
}

/// Whether the start functions make an append-only file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Persistence {
    /// `--save "3600 1"`: configured, never due in a test.
    None,
    /// `--save ""`: none at all.
    Off,
    /// `--appendonly yes --appendfsync always`.
    Aof,
}

/// A running `redis-server`; killed when dropped.
pub struct RedisServer {
    exe: PathBuf,
    child: Option<Child>,
    port: u16,
    persistence: Persistence,
    /// `--requirepass`, when the server asks for one.
    password: Option<String>,
    /// More settings, `--NAME VALUE`.
    extra: Vec<(String, String)>,
    /// A plain server, a cluster node, or a TLS-only one.
    mode: Mode,
    /// Working directory (AOF files) and `redis.log`.
    dir: tempfile::TempDir,
}

/// What kind of server [`RedisServer::spawn`] starts.
#[derive(Clone, Debug)]
enum Mode {
    /// Plain TCP on its port.
    Plain,
    /// A cluster node: `--cluster-enabled yes`, its bus on a free port.
    Cluster,
    /// TLS only on its port: the server's certificate, its key, the CA; and
    /// whether clients must show a certificate the CA signed.
    Tls([PathBuf; 3], bool),
}

/// The `redis-server` executable, if there is one.
pub fn find_server() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(SERVER_VAR) {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|dir| dir.join("redis-server"))
        .find(|p| p.is_file())
}

/// The executable, or `None` after a loud `SKIPPED` line naming `test`.
/// Panics when [`REQUIRE_VAR`] is `1` and there is none.
fn server_or_skip(test: &str) -> Option<PathBuf> {
    let found = find_server();
    if found.is_none() {
        let why = format!(
            "redis-server not found (install Debian's: `apt-get install redis-server`, \
             or set {SERVER_VAR} to its path)"
        );
        super::skip::skipped(REQUIRE_VAR, test, &why);
    }
    found
}

impl RedisServer {
    /// A server with persistence off, or `None` (after a loud `SKIPPED` line)
    /// when there is no `redis-server` and [`REQUIRE_VAR`] is not `1`. `test`
    /// names the caller in that line.
    pub fn start(test: &str) -> Option<RedisServer> {
        RedisServer::start_with(test, Persistence::None)
    }

    /// As [`RedisServer::start`], with `--appendonly yes --appendfsync always`.
    pub fn start_aof(test: &str) -> Option<RedisServer> {
        RedisServer::start_with(test, Persistence::Aof)
    }

    /// As [`RedisServer::start`], with `--requirepass password`: a client
    /// must `AUTH` first ([`RedisServer::command`] does).
    pub fn start_with_password(test: &str, password: &str) -> Option<RedisServer> {
        RedisServer::start_as(
            test,
            Persistence::None,
            Some(password.to_owned()),
            Vec::new(),
            Mode::Plain,
        )
    }

    /// As [`RedisServer::start`], as an empty Redis Cluster node
    /// (`--cluster-enabled yes`; its cluster bus on a free port of its own,
    /// since the default, port + 10000, may be past 65535).
    pub fn start_cluster_node(test: &str) -> Option<RedisServer> {
        RedisServer::start_cluster_node_with(test, &[])
    }

    /// As [`RedisServer::start_cluster_node`], with more settings
    /// (`("cluster-node-timeout", "2000")`).
    pub fn start_cluster_node_with(test: &str, settings: &[(&str, &str)]) -> Option<RedisServer> {
        let extra = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RedisServer::start_as(test, Persistence::None, None, extra, Mode::Cluster)
    }

    /// As [`RedisServer::start`], speaking TLS only (`--port 0 --tls-port
    /// PORT --tls-auth-clients no`) with the server certificate `cert`, its
    /// `key` and the `ca` (PEM files).
    pub fn start_tls(test: &str, cert: &Path, key: &Path, ca: &Path) -> Option<RedisServer> {
        RedisServer::start_tls_as(test, [cert, key, ca], false)
    }

    /// As [`RedisServer::start_tls`], asking every client for a certificate
    /// the CA `ca` signed (`--tls-auth-clients yes`: mutual TLS).
    pub fn start_mutual_tls(test: &str, cert: &Path, key: &Path, ca: &Path) -> Option<RedisServer> {
        RedisServer::start_tls_as(test, [cert, key, ca], true)
    }

    /// A TLS-only server with `files` (certificate, key, CA), asking clients
    /// for a certificate when `mutual`.
    fn start_tls_as(test: &str, files: [&Path; 3], mutual: bool) -> Option<RedisServer> {
        let files = files.map(Path::to_path_buf);
        RedisServer::start_as(
            test,
            Persistence::None,
            None,
            Vec::new(),
            Mode::Tls(files, mutual),
        )
    }

    /// As [`RedisServer::start`], with neither RDB snapshots nor AOF.
    pub fn start_without_persistence(test: &str) -> Option<RedisServer> {
        RedisServer::start_with(test, Persistence::Off)
    }

    /// As [`RedisServer::start`], with more settings (`("maxmemory-policy",
    /// "allkeys-lru")` is `--maxmemory-policy allkeys-lru`).
    pub fn start_with_config(test: &str, settings: &[(&str, &str)]) -> Option<RedisServer> {
        let extra = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RedisServer::start_as(test, Persistence::None, None, extra, Mode::Plain)
    }

    fn start_with(test: &str, persistence: Persistence) -> Option<RedisServer> {
        RedisServer::start_as(test, persistence, None, Vec::new(), Mode::Plain)
    }

    fn start_as(
        test: &str,
        persistence: Persistence,
        password: Option<String>,
        extra: Vec<(String, String)>,
        mode: Mode,
    ) -> Option<RedisServer> {
        let exe = server_or_skip(test)?;
        let dir = tempfile::Builder::new()
            .prefix("legcrawl-redis-")
            .tempdir()
            .expect("redis temp dir");
        let mut server = RedisServer {
            exe,
            child: None,
            port: 0,
            persistence,
            password,
            extra,
            mode,
            dir,
        };
        let mut last = String::new();
        for _ in 0..PORT_ATTEMPTS {
            server.port = free_port();
            match server.spawn() {
                Ok(()) => return Some(server),
                Err(why) => last = why,
            }
        }
        panic!("redis-server did not start in {PORT_ATTEMPTS} attempts: {last}");
    }

    /// Starts the child on `self.port` and waits for `PING`; on failure the
    /// child is gone and the error says why (with the log's tail).
    fn spawn(&mut self) -> Result<(), String> {
        let (save, appendonly) = match self.persistence {
            Persistence::None => ("3600 1", "no"),
            Persistence::Off => ("", "no"),
            Persistence::Aof => ("", "yes"),
        };
        let mut cmd = Command::new(&self.exe);
        let port = self.port.to_string();
        match &self.mode {
            Mode::Tls([cert, key, ca], mutual) => {
                cmd.args(["--port", "0", "--tls-port", &port])
                    .arg("--tls-cert-file")
                    .arg(cert)
                    .arg("--tls-key-file")
                    .arg(key)
                    .arg("--tls-ca-cert-file")
                    .arg(ca)
                    .args(["--tls-auth-clients", if *mutual { "yes" } else { "no" }]);
            }
            Mode::Plain | Mode::Cluster => {
                cmd.args(["--port", &port]);
            }
        }
        cmd.args(["--bind", "127.0.0.1"])
            .args(["--save", save, "--appendonly", appendonly])
            .args(["--appendfsync", "always", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path());
        if let Some(password) = &self.password {
            cmd.args(["--requirepass", password]);
        }
        if matches!(self.mode, Mode::Cluster) {
            cmd.args(["--cluster-enabled", "yes"])
                .args(["--cluster-config-file", "nodes.conf"])
                .args(["--cluster-port", &free_port().to_string()]);
        }
        for (name, value) in &self.extra {
            cmd.arg(format!("--{name}")).arg(value);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.exe.display()))?;
        let deadline = Instant::now() + READY_WAIT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "redis-server on port {} exited {status}: {}",
                    self.port,
                    self.log_tail()
                ));
            }
            if self.is_up() {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "redis-server on port {} did not answer PING within {READY_WAIT:?}: {}",
                    self.port,
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server process's id (to pause it with `SIGSTOP`).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("the server runs")
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/0` (`rediss://` for a TLS server).
    pub fn url(&self) -> String {
        self.url_db(0)
    }

    /// `redis://127.0.0.1:PORT/DB` (`rediss://` for a TLS server).
    pub fn url_db(&self, db: u32) -> String {
        let scheme = match self.mode {
            Mode::Tls(..) => "rediss",
            Mode::Plain | Mode::Cluster => "redis",
        };
        format!("{scheme}://127.0.0.1:{}/{db}", self.port)
    }

    /// Its working directory (where the AOF lives).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// The last lines of its log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    /// True while it answers `PING`.
    /// (A TLS server: while its port accepts connections.)
    pub fn is_up(&self) -> bool {
        match self.mode {
            Mode::Tls(..) => TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([127, 0, 0, 1], self.port)),
                Duration::from_millis(200),
            )
            .is_ok(),
            Mode::Plain | Mode::Cluster => ping(self.port, self.password.as_deref()),
        }
    }

    /// Runs one command (on DB 0) and returns its reply.
    pub fn command(&self, args: &[&str]) -> io::Result<Resp> {
        let stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(COMMAND_TIMEOUT))?;
        stream.set_write_timeout(Some(COMMAND_TIMEOUT))?;
        let mut reader = BufReader::new(&stream);
        if let Some(password) = &self.password {
            (&stream).write_all(&encode(&["AUTH", password]))?;
            read_reply(&mut reader)?;
        }
        (&stream).write_all(&encode(args))?;
        read_reply(&mut reader)
    }

    /// Every key matching `pattern` (`SCAN`, so safe on a busy server), sorted.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut cursor = "0".to_owned();
        let mut keys = Vec::new();
        loop {
            let reply = self
                .command(&["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"])
                .expect("SCAN");
            let Resp::Array(Some(parts)) = reply else {
                panic!("SCAN answered {reply:?}");
            };
            cursor = parts[0].text().expect("SCAN cursor");
            keys.extend(parts[1].texts());
            if cursor == "0" {
                break;
            }
        }
        keys.sort();
        keys
    }

    /// Kills the server with SIGKILL (no shutdown save) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port with the same directory (so an AOF is
    /// loaded back), waiting until it answers `PING`. Panics if it cannot.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "start_again while running");
        // The port was just ours; redis-server sets SO_REUSEADDR, but another
        // process may have taken it: retry for a while rather than move.
        let deadline = Instant::now() + READY_WAIT;
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(why) if Instant::now() >= deadline => {
                    panic!("redis-server did not start again: {why}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// [`RedisServer::kill`], `down` of silence, [`RedisServer::start_again`].
    pub fn restart(&mut self, down: Duration) {
        self.kill();
        std::thread::sleep(down);
        self.start_again();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port that was free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// True when a server on `port` answers `PING` with `PONG` (after `AUTH
/// password` when there is one).
fn ping(port: u16, password: Option<&str>) -> bool {
    let Ok(stream) = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reader = BufReader::new(&stream);
    if let Some(password) = password {
        let authed = (&stream).write_all(&encode(&["AUTH", password])).is_ok()
            && matches!(read_reply(&mut reader), Ok(Resp::Simple(_)));
        if !authed {
            return false;
        }
    }
    if (&stream).write_all(&encode(&["PING"])).is_err() {
        return false;
    }
    matches!(read_reply(&mut reader), Ok(Resp::Simple(s)) if s == "PONG")
}

/// A command as a RESP array of bulk strings.
fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads one reply.
fn read_reply(reader: &mut impl BufRead) -> io::Result<Resp> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
    }
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(line.len().min(1));
    let number = || {
        rest.parse::<i64>()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad RESP {line:?}")))
    };
    Ok(match kind {
        "+" => Resp::Simple(rest.to_owned()),
        "-" => Resp::Error(rest.to_owned()),
        ":" => Resp::Int(number()?),
        "$" => match number()? {
            n if n < 0 => Resp::Bulk(None),
            n => {
                let mut bytes = vec![0; n as usize + 2];
                reader.read_exact(&mut bytes)?;
                bytes.truncate(n as usize);
                Resp::Bulk(Some(bytes))
            }
        },
        "*" => match number()? {
            n if n < 0 => Resp::Array(None),
            n => Resp::Array(Some(
                (0..n)
                    .map(|_| read_reply(reader))
                    .collect::<io::Result<_>>()?,
            )),
        },
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad RESP {line:?}"),
            ));
        }
    })
}
