//! `legcrawl serve` beside a bench crawl, scraped every second (the crawl
//! bench's `+serve` variant): the server in-process on its own one-thread
//! runtime, a client thread asking for `/metrics` and the JSON endpoints the
//! page polls, over HTTP/1.0 on loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;

/// What one scrape asks for.
const PATHS: &[&str] = &[
    "/metrics",
    "/api/overview",
    "/api/hosts",
    "/api/runs",
    "/api/items",
    "/api/frontier",
    "/api/errors",
];

/// A running serve and its scraper.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<JoinHandle<std::io::Result<()>>>,
    scraper: Option<JoinHandle<anyhow::Result<u64>>>,
}

impl Watcher {
    /// Serves the state in `dir` and starts scraping it at once.
    pub fn start(dir: &Path) -> anyhow::Result<Watcher> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let app = Arc::new(legcrawl::serve::App::new(dir, None));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = std::thread::Builder::new()
            .name("bench-serve".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)?;
                    legcrawl::serve::run(listener, app, async move {
                        let _ = rx.await;
                    })
                    .await
                })
            })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let scraper = std::thread::Builder::new()
            .name("bench-scraper".into())
            .spawn(move || scrape_every_second(addr, &flag))?;
        Ok(Watcher {
            stop,
            shutdown: Some(tx),
            server: Some(server),
            scraper: Some(scraper),
        })
    }

    /// Stops both; returns the scrapes made.
    pub fn stop(mut self) -> anyhow::Result<u64> {
        self.stop.store(true, Ordering::SeqCst);
        let scrapes = match self.scraper.take() {
            Some(handle) => handle
                .join()
                .map_err(|_| anyhow::anyhow!("scraper panicked"))??,
            None => 0,
        };
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(handle) = self.server.take() {
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("serve panicked"))?
                .context("serve")?;
        }
        Ok(scrapes)
    }
}

fn scrape_every_second(addr: SocketAddr, stop: &AtomicBool) -> anyhow::Result<u64> {
    let mut scrapes = 0;
    let mut next = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if Instant::now() >= next {
            for path in PATHS {
                get(addr, path).with_context(|| format!("GET {path}"))?;
            }
            scrapes += 1;
            next += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(scrapes)
}

fn get(addr: SocketAddr, path: &str) -> anyhow::Result<usize> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes)?;
    anyhow::ensure!(bytes.starts_with(b"HTTP/1.0 200"), "not 200");
    Ok(bytes.len())
}

/// Prints the serve cost from alternating pairs of `engine/bloom24` and
/// `engine/bloom24+serve` (when both ran).
pub fn pairs(names: &[String], rates: &[Vec<f64>]) {
    let find = |name: &str| names.iter().position(|n| n == name);
    let (Some(base), Some(served)) = (find("engine/bloom24"), find("engine/bloom24+serve")) else {
        return;
    };
    let mut ratios: Vec<f64> = rates[base]
        .iter()
        .zip(&rates[served])
        .map(|(b, s)| s / b)
        .collect();
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = if n % 2 == 1 {
        ratios[n / 2]
    } else {
        (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0
    };
    println!(
        "\nserve scraped every second: median pair ratio (bloom24+serve / bloom24) = {median:.3} \
         over {n} pairs (min {:.3}, max {:.3}): serve costs {:.1} % of pages/s (target <= 2 %: {})",
        ratios[0],
        ratios[n - 1],
        (1.0 - median) * 100.0,
        if median >= 0.98 { "met" } else { "NOT met" }
    );
}
