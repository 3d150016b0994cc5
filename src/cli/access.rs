//! The flags that choose how requests reach a site, shared by `crawl` and
//! `fetch`: `--proxy URL` and `--no-proxy`.
//!
//! The proxy URL is read here rather than by clap, whose error would echo it
//! (password included); a bad one is one line with the password as `***`.

use legcrawl::config::ProxyChoice;
use legcrawl::crawlfile::proxy_choice;

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
