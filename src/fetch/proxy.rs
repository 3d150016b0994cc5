//! Proxies: which proxy a request goes through, and the connector that gets there.
//!
//! [`Proxies`] is built once per fetcher from [`ProxyChoice`] with hyper-util's
//! [`Matcher`], which reads the environment the way curl does (`ALL_PROXY`,
//! `HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY` and their lowercase forms; a `NO_PROXY`
//! entry matches the host and its subdomains, or an IP or network). Loopback
//! hosts are not exempt: only `NO_PROXY` exempts a host. An explicit proxy
//! (`--proxy`, `proxy = "..."`) serves http and https URLs and the
//! environment's `NO_PROXY` still applies, as with curl's `-x`.
//!
//! [`ProxyConnector`] sits under the TLS connector: a plain `http` URL routed to
//! a proxy is a TCP connection to the proxy marked as proxied, so hyper sends
//! the absolute-form request URI (the fetcher adds `Proxy-Authorization`, and
//! `Connection: close`, since proxies such as tinyproxy close the client
//! connection after each answer while announcing keep-alive); an
//! `https` URL gets an HTTP `CONNECT` tunnel (hyper-util's [`Tunnel`], with the
//! Basic proxy credentials of the proxy URL), and TLS to the origin runs inside
//! it. A proxy that cannot be reached or refuses the tunnel is a
//! [`ProxyError`] naming the proxy, never its password.
//!
//! Depends on [`crate::config`] and hyper-util.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

use super::error::BoxError;
use crate::config::ProxyChoice;

/// Where requests go: straight to the origin, or through a proxy.
pub struct Proxies {
    /// `None`: no proxy for any URL.
    matcher: Option<Matcher>,
}

impl fmt::Debug for Proxies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Matcher's Debug leaves credentials out.
        f.debug_struct("Proxies")
            .field("matcher", &self.matcher)
            .finish()
    }
}

/// Checks an explicit proxy URL: `http://[user:password@]host[:port]`. The
/// message never holds the password.
pub fn check_proxy_url(url: &str) -> Result<(), String> {
    let shown = crate::config::redact_password(url);
    let parsed = url::Url::parse(url).map_err(|e| {
        format!("{shown:?} is not a proxy URL such as http://proxy.example:3128 ({e})")
    })?;
    if parsed.scheme() != "http" {
        return Err(format!(
            "{shown:?}: only http:// proxies are supported (https URLs go through them with CONNECT)"
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{shown:?} names no proxy host"));
    }
    Ok(())
}

impl Proxies {
    /// The proxies of `choice`; an explicit URL must pass [`check_proxy_url`].
    pub fn new(choice: &ProxyChoice) -> Result<Proxies, String> {
        let no_proxy = || {
            ["NO_PROXY", "no_proxy"]
                .iter()
                .find_map(|name| std::env::var(name).ok())
                .unwrap_or_default()
        };
        let matcher = match choice {
            ProxyChoice::Off => None,
            ProxyChoice::Environment => Some(Matcher::from_env()),
            ProxyChoice::Url(url) => {
                check_proxy_url(url)?;
                Some(Matcher::builder().all(url).no(no_proxy()).build())
            }
        };
        Ok(Proxies { matcher })
    }

    /// No proxy at all.
    pub fn none() -> Proxies {
        Proxies { matcher: None }
    }

    /// The proxy for `uri`, if it goes through one.
    pub fn route(&self, uri: &Uri) -> Option<Intercept> {
        self.matcher.as_ref()?.intercept(uri)
    }
}

/// The proxy's address as messages name it: scheme, host and port, never
/// credentials (hyper-util keeps them apart from the URI).
pub fn proxy_name(proxy: &Intercept) -> String {
    let uri = proxy.uri();
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    )
}

/// A proxy failed: it could not be reached, refused the tunnel, or asked for
/// credentials (407).
#[derive(Debug)]
pub struct ProxyError {
    /// The proxy, as [`proxy_name`] writes it.
    pub proxy: String,
    /// What happened, in a few words.
    pub what: String,
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "proxy {}: {}", self.proxy, self.what)
    }
}

impl std::error::Error for ProxyError {}

/// The words of a 407, from the tunnel or a plain-http answer.
pub const AUTH_REQUIRED: &str =
    "407 Proxy Authentication Required (the proxy URL's user:password is missing or refused)";

/// A connection to the origin, or to a proxy on its behalf.
pub struct ProxyStream {
    io: TokioIo<TcpStream>,
    /// A plain-http connection to a proxy: hyper sends absolute-form URIs.
    proxied: bool,
}

impl Connection for ProxyStream {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.proxied)
    }
}

impl Read for ProxyStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for ProxyStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// Connects to the origin or through its proxy (see the module doc).
#[derive(Clone)]
pub struct ProxyConnector {
    http: HttpConnector,
    proxies: Arc<Proxies>,
}

impl ProxyConnector {
    /// Connects with `http`, through `proxies`.
    pub fn new(http: HttpConnector, proxies: Arc<Proxies>) -> ProxyConnector {
        ProxyConnector { http, proxies }
    }
}

type Connecting = Pin<Box<dyn Future<Output = Result<ProxyStream, BoxError>> + Send>>;

impl Service<Uri> for ProxyConnector {
    type Response = ProxyStream;
    type Error = BoxError;
    type Future = Connecting;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Connecting {
        let route = self.proxies.route(&dst);
        let mut http = self.http.clone();
        Box::pin(async move {
            let Some(proxy) = route else {
                let io = http.call(dst).await?;
                return Ok(ProxyStream { io, proxied: false });
            };
            let name = proxy_name(&proxy);
            if proxy.uri().scheme_str() != Some("http") {
                return Err(ProxyError {
                    proxy: name,
                    what: "only http:// proxies are supported".into(),
                }
                .into());
            }
            if dst.scheme_str() == Some("https") {
                let mut tunnel = Tunnel::new(proxy.uri().clone(), http);
                if let Some(auth) = proxy.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                let io = tunnel.call(dst).await.map_err(|error| ProxyError {
                    proxy: name,
                    what: tunnel_failure(&error),
                })?;
                Ok(ProxyStream { io, proxied: false })
            } else {
                let io = http
                    .call(proxy.uri().clone())
                    .await
                    .map_err(|error| ProxyError {
                        proxy: name,
                        what: connect_failure(&error),
                    })?;
                Ok(ProxyStream { io, proxied: true })
            }
        })
    }
}

/// Why a `CONNECT` tunnel failed, in a few words.
fn tunnel_failure(error: &(dyn std::error::Error + 'static)) -> String {
    let text = error.to_string();
    if text.contains("proxy authorization required") {
        return AUTH_REQUIRED.into();
    }
    if text.contains("failed to create underlying connection") {
        return connect_failure(error);
    }
    if text.contains("unsuccessful") {
        return "refused the CONNECT tunnel".into();
    }
    innermost(error)
}

/// Why the TCP connection to the proxy failed.
fn connect_failure(error: &(dyn std::error::Error + 'static)) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return "connection refused (nothing listens there)".into();
        }
        source = cause.source();
    }
    format!("cannot connect: {}", innermost(error))
}

/// The innermost message of `error`'s chain.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut last = error;
    while let Some(cause) = last.source() {
        last = cause;
    }
    last.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_proxies_are_checked_without_showing_the_password() {
        assert!(check_proxy_url("http://proxy.example:3128").is_ok());
        assert!(check_proxy_url("http://u:p@127.0.0.1:8888/").is_ok());
        let error = check_proxy_url("socks5://u:secret@proxy.example:1080").unwrap_err();
        assert!(!error.contains("secret"), "{error}");
        let error = check_proxy_url("u:secret@proxy").unwrap_err();
        assert!(!error.contains("secret"), "{error}");
    }

    #[test]
    fn an_explicit_proxy_serves_both_schemes_and_loopback() {
        let proxies =
            Proxies::new(&ProxyChoice::Url("http://u:p@127.0.0.1:9/".into())).expect("proxies");
        for url in ["http://127.0.0.1:1/", "https://a.example/"] {
            let route = proxies.route(&url.parse().unwrap()).expect("proxied");
            assert_eq!(proxy_name(&route), "http://127.0.0.1:9");
            assert!(route.basic_auth().is_some());
        }
        assert!(
            Proxies::new(&ProxyChoice::Off)
                .unwrap()
                .route(&"http://a.example/".parse().unwrap())
                .is_none()
        );
    }
}
