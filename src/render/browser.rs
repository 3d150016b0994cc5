//! The browser process: the machine's Chromium, started headless by legcrawl
//! in a process group of its own, and never outliving it. The group is killed
//! when the `Browser` is dropped (a run's end, Ctrl-C, an error); a
//! parent-death signal kills the browser when legcrawl itself is killed
//! (`kill -9`), and its own children (renderers, zygote) end with it.
//! Nothing is downloaded: a missing browser is one line naming the package.
//! Depends on `rustix` and `tempfile`.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustix::process::{Pid, Signal};

use super::RenderError;

/// The variable naming the browser to run instead of the first of
/// [`BROWSERS`] found on `PATH`.
pub const BROWSER_ENV: &str = "LEGCRAWL_CHROMIUM";
/// The programs looked for on `PATH`, in order.
pub const BROWSERS: &[&str] = &["chromium", "chromium-browser", "google-chrome", "chrome"];
/// How long the browser may take to open its DevTools socket.
const START_LIMIT: Duration = Duration::from_secs(30);

/// The browser to run: `$LEGCRAWL_CHROMIUM`, or the first of [`BROWSERS`] on
/// `PATH`.
pub fn find() -> Result<PathBuf, RenderError> {
    if let Some(path) = std::env::var_os(BROWSER_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(RenderError::Missing(format!(
                "{BROWSER_ENV}={} is not a file",
                path.display()
            )))
        };
    }
    let dirs = std::env::var_os("PATH").unwrap_or_default();
    BROWSERS
        .iter()
        .flat_map(|name| std::env::split_paths(&dirs).map(move |dir| dir.join(name)))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            RenderError::Missing(format!(
                "no Chromium on PATH ({}); install the chromium package, or set {BROWSER_ENV}",
                BROWSERS.join(", ")
            ))
        })
}

/// A running headless Chromium.
pub(super) struct Browser {
    /// Its process group (the browser is the group's leader).
    group: Pid,
    /// Its DevTools WebSocket.
    pub socket: String,
    /// Its profile, removed after it.
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `program` headless and waits for its DevTools socket.
    pub fn launch(program: &Path) -> Result<Browser, RenderError> {
        let profile = tempfile::Builder::new()
            .prefix("legcrawl-chromium-")
            .tempdir()
            .map_err(|e| RenderError::Browser(format!("no profile directory: {e}")))?;
        let mut command = Command::new(program);
        command
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        if rustix::process::geteuid().is_root() {
            // Chromium refuses to run as root with its sandbox.
            command.arg("--no-sandbox");
        }
        // SAFETY: the closure runs in the child between fork and exec and
        // only calls prctl(2), which is async-signal-safe; it touches no
        // memory of the parent's.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
                    .map_err(std::io::Error::from)
            });
        }
        let (tx, rx) = mpsc::channel();
        let name = program.display().to_string();
        // The keeper starts the browser and lives as long as it: the
        // parent-death signal follows the thread that forked, not the
        // process. It reads the browser's stderr for its socket, drains the
        // rest (a full pipe would stop the browser), and reaps it.
        std::thread::Builder::new()
            .name("chromium".into())
            .spawn(move || {
                let mut child = match command.spawn() {
                    Ok(child) => child,
                    Err(e) => {
                        let why = format!("cannot start {name}: {e}");
                        let _ = tx.send(Started::Failed(RenderError::Missing(why)));
                        return;
                    }
                };
                let _ = tx.send(Started::Group(Pid::from_child(&child)));
                if let Some(stderr) = child.stderr.take() {
                    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                        if let Some(at) = line.find("ws://") {
                            let _ = tx.send(Started::Socket(line[at..].trim().to_owned()));
                        } else {
                            tracing::debug!(target: "legcrawl::render::chromium", "{line}");
                        }
                    }
                }
                let _ = child.wait();
            })
            .map_err(|e| RenderError::Browser(format!("no thread to run it: {e}")))?;
        let no_socket = || {
            RenderError::Browser(format!(
                "{} opened no DevTools socket within {START_LIMIT:?}",
                program.display()
            ))
        };
        let group = match rx.recv_timeout(START_LIMIT) {
            Ok(Started::Group(group)) => group,
            Ok(Started::Failed(error)) => return Err(error),
            Ok(Started::Socket(_)) | Err(_) => return Err(no_socket()),
        };
        // Dropped (the group killed) if the socket never comes.
        let mut browser = Browser {
            group,
            socket: String::new(),
            _profile: profile,
        };
        match rx.recv_timeout(START_LIMIT) {
            Ok(Started::Socket(socket)) => browser.socket = socket,
            _ => return Err(no_socket()),
        }
        Ok(browser)
    }
}

/// What the keeper thread reports.
enum Started {
    /// The browser runs, leading this process group.
    Group(Pid),
    /// Its DevTools socket.
    Socket(String),
    /// It could not be started.
    Failed(RenderError),
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The whole group: the browser and every process it started.
        let _ = rustix::process::kill_process_group(self.group, Signal::KILL);
    }
}

/// A hermetic headless browser: no network of its own (everything it asks
/// for is intercepted and fetched by legcrawl; anything that escapes the
/// interception meets a proxy that is not there), no background traffic.
const FLAGS: &[&str] = &[
    "--headless=new",
    "--remote-debugging-port=0",
    "--remote-debugging-address=127.0.0.1",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-gpu",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--mute-audio",
    "--hide-scrollbars",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
];
