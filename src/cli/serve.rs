//! `legcrawl serve`: checks the listen address and token, binds, and serves
//! [`legcrawl::serve`] until SIGINT/SIGTERM.
//!
//! Exit codes: 0 after a signal, 2 for a bad address or a non-loopback one
//! without `--token`, 1 when the address cannot be bound.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use legcrawl::serve::App;
use legcrawl::view::CrawlView;

use super::stderr::say;
use super::{BadInput, DataArg};

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9477";

/// Arguments of `legcrawl serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    data: DataArg,
    /// Address to listen on (a loopback one unless --token is given).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    listen: String,
    /// Watch the crawl shared through this Redis server (redis://HOST:PORT/DB)
    /// instead of a state directory.
    #[arg(long, value_name = "URL", conflicts_with = "data")]
    shared: Option<String>,
    /// The shared crawl's name.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// The CA certificate (PEM) that signed a rediss:// server's certificate.
    #[arg(long, value_name = "FILE")]
    shared_cacert: Option<std::path::PathBuf>,
    /// A client certificate (PEM) for a rediss:// server that asks for one
    /// (mutual TLS), with --shared-key.
    #[arg(long, value_name = "FILE")]
    shared_cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE")]
    shared_key: Option<std::path::PathBuf>,
    /// Require this token on every request (`Authorization: Bearer T` or
    /// `?token=T`); needed to listen on a non-loopback address.
    #[arg(long, value_name = "T")]
    token: Option<String>,
}

/// Runs `serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let addr: SocketAddr = args.listen.parse().map_err(|_| {
        BadInput(format!(
            "--listen {:?} is not an address like 127.0.0.1:9477 or [::1]:9477",
            args.listen
        ))
    })?;
    let token = args.token.filter(|t| !t.is_empty());
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(BadInput(format!(
            "--listen {addr} is not a loopback address: give --token T so that only those who know it can read the crawl"
        ))
        .into());
    }
    let target = if args.shared.is_some() || args.name.is_some() {
        Some(super::crawl::shared_target(
            args.shared,
            args.name,
            &super::crawl::TlsFiles {
                cacert: args.shared_cacert.as_deref(),
                cert: args.shared_cert.as_deref(),
                key: args.shared_key.as_deref(),
            },
        )?)
    } else {
        None
    };
    let dir = args.data.dir();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let bound = listener.local_addr().unwrap_or(addr);
        // A shared crawl is checked on each read, so that serve may start
        // before its first worker.
        let (view, shown) = match &target {
            None => (CrawlView::Published(dir.clone()), dir.display().to_string()),
            Some(target) => (
                CrawlView::of_shared(legcrawl::shared::Shared::connect(target, 1).await?),
                format!("{} {}", target.shown(), target.name),
            ),
        };
        let app = Arc::new(App::of(view, shown, token));
        let shown = match &target {
            None => dir.display().to_string(),
            Some(target) => format!("the shared crawl {:?} at {}", target.name, target.shown()),
        };
        say!("legcrawl: serving {shown} on http://{bound}/ (read-only; Ctrl-C stops)");
        legcrawl::serve::run(listener, app, stop_signal())
            .await
            .context("serving")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Resolves at the first SIGINT or SIGTERM.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
