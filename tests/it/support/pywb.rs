//! pywb, the archivists' replay system (PyPI), run as child processes: a
//! collection made with `wb-manager`, served by `wayback` on 127.0.0.1.
//!
//! Found in the directory `LEGCRAWL_PYWB` names (the virtual environment's
//! `bin`, where `.ci/run` installs a pinned pywb), else beside the warcio
//! that `LEGCRAWL_WARCIO` names (the same virtual environment), else on `PATH`. Without it
//! a test says it skipped, unless `LEGCRAWL_REQUIRE_PYWB=1`. The server is
//! killed when the handle drops; every wait is bounded.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for `wayback` to answer after it starts.
const START_LIMIT: Duration = Duration::from_secs(60);
/// Longest one replay request may take.
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// The directory holding `wb-manager` and `wayback`, or `None` (after a loud
/// skip line) when there is none.
pub fn bin_dir() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("wb-manager").is_file() && dir.join("wayback").is_file();
    let beside_warcio = || {
        let warcio = PathBuf::from(std::env::var_os("LEGCRAWL_WARCIO")?);
        warcio
            .parent()
            .map(Path::to_path_buf)
            .filter(|d| has_both(d))
    };
    let found = match std::env::var_os("LEGCRAWL_PYWB") {
        Some(dir) => Some(PathBuf::from(dir)).filter(|d| has_both(d)),
        None => beside_warcio().or_else(|| {
            std::env::var_os("PATH")
                .and_then(|paths| std::env::split_paths(&paths).find(|dir| has_both(dir)))
        }),
    };
    // Absolute: the tools run in the collection's directory.
    let found = found.and_then(|dir| dir.canonicalize().ok());
    if found.is_none() {
        let why = "pywb's wb-manager and wayback not found (set LEGCRAWL_PYWB to the bin \
                   directory of a virtualenv with `pip install pywb==2.10.0`, install it beside \
                   LEGCRAWL_WARCIO, or put them on PATH)";
        super::skip::skipped("LEGCRAWL_REQUIRE_PYWB", "the pywb replay test", why);
    }
    found
}

/// A running `wayback` serving collection `coll` from a temporary root.
pub struct Wayback {
    child: Child,
    port: u16,
}

/// One answer of the replay server.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// Header lines as sent (`Name: value`).
    pub headers: Vec<String>,
    /// The body (the server closes the connection after it: HTTP/1.0).
    pub body: Vec<u8>,
}

impl Answer {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then_some(value.trim())
        })
    }
}

/// Runs `bin/tool args` in `root`; panics with its output when it fails.
fn run_tool(bin: &Path, tool: &str, root: &Path, args: &[&str]) {
    let out = super::cli::run(
        {
            let mut cmd = Command::new(bin.join(tool));
            cmd.current_dir(root).args(args);
            cmd
        },
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Wayback {
    /// `wb-manager init coll`, `wb-manager add coll WARCS..` in `root`, then
    /// `wayback` on a free 127.0.0.1 port, waited for until it answers.
    pub fn start(bin: &Path, root: &Path, warcs: &[PathBuf]) -> Wayback {
        run_tool(bin, "wb-manager", root, &["init", "coll"]);
        let mut add = vec!["add".to_owned(), "coll".to_owned()];
        add.extend(warcs.iter().map(|p| p.display().to_string()));
        let add: Vec<&str> = add.iter().map(String::as_str).collect();
        run_tool(bin, "wb-manager", root, &add);
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(bin.join("wayback"))
            .current_dir(root)
            .args(["-b", "127.0.0.1", "-p", &port.to_string(), "-t", "2"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start wayback");
        let mut wayback = Wayback { child, port };
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Ok(Some(status)) = wayback.child.try_wait() {
                panic!("wayback exited at start: {status}");
            }
            if wayback.try_get("/coll/").is_some_and(|a| a.status == 200) {
                return wayback;
            }
            assert!(
                Instant::now() < deadline,
                "wayback did not answer in {START_LIMIT:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// GET `path` (HTTP/1.0); panics when there is no answer.
    pub fn get(&self, path: &str) -> Answer {
        self.try_get(path)
            .unwrap_or_else(|| panic!("no answer from wayback for {path}"))
    }

    fn try_get(&self, path: &str) -> Option<Answer> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(REQUEST_LIMIT)).ok()?;
        stream.set_write_timeout(Some(REQUEST_LIMIT)).ok()?;
        let request = format!(
            "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n",
            self.port
        );
        stream.write_all(request.as_bytes()).ok()?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).ok()?;
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
        Some(Answer {
            status,
            headers: lines.map(str::to_owned).collect(),
            body: raw[end + 4..].to_vec(),
        })
    }
}

impl Drop for Wayback {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `url` percent-encoded for a query value.
pub fn query_value(url: &str) -> String {
    url.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
