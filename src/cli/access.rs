//! The flags that choose how requests reach a site, shared by `crawl` and
//! `fetch`: `--proxy URL`, `--no-proxy` and `--cacert FILE`.
//!
//! The proxy URL is read here rather than by clap, whose error would echo it
//! (password included); a bad one is one line with the password as `***`.

use std::path::{Path, PathBuf};

use legcrawl::config::ProxyChoice;
use legcrawl::crawlfile::proxy_choice;
use legcrawl::fetch::trust;

use super::BadInput;

/// `--proxy` and `--no-proxy`.
#[derive(Debug, clap::Args)]
pub struct ProxyArgs {
    /// Send requests through this proxy, http://[USER:PASSWORD@]HOST:PORT
    /// (https URLs through a CONNECT tunnel; the password is never printed).
    /// Overrides HTTP_PROXY, HTTPS_PROXY and ALL_PROXY; NO_PROXY still
    /// applies. Default: those variables, as curl reads them.
    #[arg(long, value_name = "URL", conflicts_with = "no_proxy")]
    proxy: Option<String>,
    /// Use no proxy, whatever the environment says.
    #[arg(long)]
    no_proxy: bool,
}

impl ProxyArgs {
    /// The proxy the flags choose; `None` when neither was given.
    pub fn choice(&self) -> anyhow::Result<Option<ProxyChoice>> {
        if self.no_proxy {
            return Ok(Some(ProxyChoice::Off));
        }
        match &self.proxy {
            None => Ok(None),
            Some(url) => proxy_choice(url)
                .map(Some)
                .map_err(|message| BadInput(format!("--proxy: {message}")).into()),
        }
    }
}

/// `--cacert`.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// Also trust the CA certificates (PEM) in FILE, as curl --cacert: a
    /// private CA, or the CA of a proxy that inspects TLS. The built-in
    /// roots, the system's store and SSL_CERT_FILE / SSL_CERT_DIR are
    /// trusted too.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
}

/// The trusted CAs of a run can be read: `cacert` (the flag's or the job's)
/// holds a certificate, and `SSL_CERT_FILE` / `SSL_CERT_DIR` can be read
/// when set; else one line naming the file (exit 2), before anything is
/// fetched.
pub fn check_trust(cacert: Option<&Path>) -> anyhow::Result<()> {
    trust::client_config(cacert)
        .map(|_| ())
        .map_err(|error| BadInput(error.to_string()).into())
}
