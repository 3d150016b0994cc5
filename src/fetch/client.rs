//! The [`Fetcher`]: a shared pooled client and the one-hop exchange.
//!
//! The client, its TLS configuration and the default request headers are built
//! once in [`Fetcher::new`]; a fetch only clones the default header map, parses
//! the URL once and reads the body (see `body`). Depends on the sibling modules
//! (`body`, `capture`, `classify`, `cookies`, `error`, `hosts`, `proxy`,
//! `trust`),
//! [`crate::request`] and [`crate::response`].

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{
    ACCEPT, ACCEPT_ENCODING, ACCEPT_LANGUAGE, CONTENT_ENCODING, CONTENT_LENGTH, FROM, USER_AGENT,
};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use http_body_util::Full;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tracing::debug;
use url::{Position, Url};

use super::FetchSettings;
use super::body::{BodyError, Encoding, read_body};
use super::capture::{self, Exchange};
use super::classify::{is_unexpected_eof, reason_of, send_error};
use super::error::{ConnectKind, FetchError};
use super::hosts::{self, HostHeaders};
use super::proxy::{self, Proxies, ProxyConnector, ProxyError};
use super::trust;
use crate::request::Request;
use crate::response::Response;

/// `Accept` sent unless overridden.
const DEFAULT_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
/// `Accept-Language` sent unless overridden.
const DEFAULT_ACCEPT_LANGUAGE: &str = "en;q=0.9,*;q=0.5";
/// `Accept-Encoding`: exactly the encodings `body` decodes.
const DEFAULT_ACCEPT_ENCODING: &str = "gzip, br, deflate";
/// How much of an over-long URL an error keeps.
const URL_PREFIX_LEN: usize = 100;

type HttpClient = Client<HttpsConnector<ProxyConnector>, Full<Bytes>>;

/// Fetches requests, one HTTP exchange each. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct Fetcher {
    inner: Arc<Inner>,
}

struct Inner {
    client: HttpClient,
    settings: FetchSettings,
    /// User agent, `Accept*`, `From` and the extra headers, validated once.
    default_headers: HeaderMap,
    /// Which proxy each URL goes through (shared with the connector).
    proxies: Arc<Proxies>,
    /// Per-host headers and credentials.
    hosts: Vec<HostHeaders>,
}

impl fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fetcher")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher with `settings`; fails if the user agent, `From` or an extra
    /// header is not a valid header, the proxy URL is not one, a host's
    /// password variable is not set, or a CA file (`cacert`, `SSL_CERT_FILE`)
    /// cannot be used.
    pub fn new(settings: FetchSettings) -> Result<Fetcher, FetchError> {
        let default_headers = default_headers(&settings)?;
        let proxies = Arc::new(Proxies::new(&settings.proxy).map_err(|reason| {
            FetchError::InvalidSetting {
                name: "proxy".into(),
                reason,
            }
        })?);
        let hosts = hosts::build(&settings.hosts)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let http = ProxyConnector::new(http, proxies.clone());
        let tls = trust::client_config(settings.cacert.as_deref()).map_err(|error| {
            FetchError::InvalidSetting {
                name: error.setting.into(),
                reason: error.reason,
            }
        })?;
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(settings.pool_idle_per_host)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector);
        Ok(Fetcher {
            inner: Arc::new(Inner {
                client,
                settings,
                default_headers,
                proxies,
                hosts,
            }),
        })
    }

    /// The settings this fetcher was built with.
    pub fn settings(&self) -> &FetchSettings {
        &self.inner.settings
    }

    /// The cookie jar, when cookies are on.
    pub fn cookie_jar(&self) -> Option<&super::cookies::CookieJar> {
        self.inner.settings.cookies.as_ref()
    }

    /// One HTTP exchange for `request` (no redirect following: a 3xx comes back
    /// as a Response with its Location header).
    pub async fn fetch(&self, request: &Request) -> Result<Response, FetchError> {
        self.fetch_captured(request)
            .await
            .map(|(response, _)| response)
    }

    /// [`Fetcher::fetch`], with the [`Exchange`] as sent and received when the
    /// settings ask for it ([`FetchSettings::capture`]).
    pub async fn fetch_captured(
        &self,
        request: &Request,
    ) -> Result<(Response, Option<Exchange>), FetchError> {
        let url = self.check_url(&request.url)?;
        let http_request = self.build_request(request, &url)?;
        let after = self.inner.settings.request_timeout;
        match tokio::time::timeout(after, self.exchange(request, url, http_request)).await {
            Ok(result) => result,
            Err(_) => {
                debug!(url = %request.url, ?after, "request timed out");
                Err(FetchError::Timeout {
                    url: request.url.clone(),
                    after,
                })
            }
        }
    }

    /// Parses `raw`, refusing over-long URLs and schemes other than http(s).
    fn check_url(&self, raw: &str) -> Result<Url, FetchError> {
        if raw.len() > self.inner.settings.max_url_len {
            let mut end = URL_PREFIX_LEN.min(raw.len());
            while !raw.is_char_boundary(end) {
                end -= 1;
            }
            return Err(FetchError::UrlTooLong {
                url_prefix: raw[..end].to_owned(),
                len: raw.len(),
            });
        }
        let url = Url::parse(raw).map_err(|error| FetchError::InvalidUrl {
            url: raw.to_owned(),
            reason: error.to_string(),
        })?;
        match url.scheme() {
            "http" | "https" => Ok(url),
            scheme => Err(FetchError::UnsupportedScheme {
                url: raw.to_owned(),
                scheme: scheme.to_owned(),
            }),
        }
    }

    /// The hyper request: method, URL without fragment, headers and body.
    fn build_request(
        &self,
        request: &Request,
        url: &Url,
    ) -> Result<http::Request<Full<Bytes>>, FetchError> {
        let invalid = |reason: String| FetchError::InvalidRequest {
            url: request.url.clone(),
            reason,
        };
        let method = Method::from_bytes(request.method.as_bytes())
            .map_err(|error| invalid(format!("method {:?}: {error}", request.method)))?;
        // Credentials in the URL are never sent (HTTP/2 would put them in :authority).
        let uri: Uri = if url.username().is_empty() && url.password().is_none() {
            url[..Position::AfterQuery].parse()
        } else {
            format!(
                "{}{}",
                &url[..Position::BeforeUsername],
                &url[Position::BeforeHost..Position::AfterQuery]
            )
            .parse()
        }
        .map_err(|error| invalid(format!("{error}")))?;
        let mut headers = self.inner.default_headers.clone();
        hosts::apply(&self.inner.hosts, url, &mut headers);
        if let Some(cookie) = self.cookie_jar().and_then(|jar| jar.header_for(url)) {
            headers.insert(http::header::COOKIE, cookie);
        }
        apply_headers(&mut headers, &request.headers).map_err(invalid)?;
        let body = if request.body.is_empty() {
            Bytes::new()
        } else {
            Bytes::copy_from_slice(&request.body)
        };
        let mut out = http::Request::new(Full::new(body));
        *out.method_mut() = method;
        *out.uri_mut() = uri;
        *out.headers_mut() = headers;
        Ok(out)
    }

    /// Sends the request and reads the response (under the caller's overall timeout).
    async fn exchange(
        &self,
        request: &Request,
        url: Url,
        mut http_request: http::Request<Full<Bytes>>,
    ) -> Result<(Response, Option<Exchange>), FetchError> {
        let head_only = http_request.method() == Method::HEAD;
        let sent = self.inner.settings.capture.then(|| {
            (
                http_request.method().clone(),
                http_request.version(),
                http_request.headers().clone(),
                Bytes::copy_from_slice(&request.body),
            )
        });
        // Plain http through a proxy: the proxy's credentials go with the
        // request (https sends them in the CONNECT). Not part of the archive.
        let routed = self.inner.proxies.route(http_request.uri());
        let through_proxy = routed.is_some();
        let proxied = routed.filter(|_| url.scheme() == "http");
        if let Some(proxy) = &proxied {
            let headers = http_request.headers_mut();
            if let Some(auth) = proxy.basic_auth() {
                headers.insert(http::header::PROXY_AUTHORIZATION, auth.clone());
            }
            // Proxies such as tinyproxy answer as if keeping the connection
            // alive and close it: a pooled connection reused then fails the
            // request. One connection per request to the proxy.
            headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
        }
        let response = self
            .inner
            .client
            .request(http_request)
            .await
            .map_err(|error| send_error(&request.url, error))?;
        let fetched_at = crate::clock::now();
        let (parts, incoming) = response.into_parts();
        let status = parts.status.as_u16();
        if let Some(jar) = self.cookie_jar() {
            jar.store_from(&url, &parts.headers);
        }
        if let Some(proxy) = proxied.filter(|_| status == 407) {
            let error = ProxyError {
                proxy: proxy::proxy_name(&proxy),
                what: proxy::AUTH_REQUIRED.into(),
            };
            return Err(FetchError::Connect {
                url: request.url.clone(),
                kind: ConnectKind::Proxy,
                detail: error.to_string(),
                cause: Box::new(error),
            });
        }
        let no_body = head_only || status == 204 || status == 304 || (100..200).contains(&status);
        let (body, truncated, raw) = if no_body {
            (Bytes::new(), false, Some((Bytes::new(), false)))
        } else {
            self.read(&request.url, &parts.headers, incoming).await?
        };
        debug!(url = %request.url, status, bytes = body.len(), truncated, "fetched");
        let exchange = match (sent, raw) {
            (Some((method, version, headers, request_body)), Some((raw, cut))) => Some(Exchange {
                url: url[..Position::AfterQuery].to_owned(),
                request_head: capture::request_head(
                    &method,
                    &url[Position::BeforePath..Position::AfterQuery],
                    &url[Position::BeforeHost..Position::AfterPort],
                    capture::sent_version(version, parts.version),
                    &headers,
                ),
                request_body,
                response_head: capture::response_head(
                    parts.version,
                    parts.status,
                    parts
                        .extensions
                        .get::<hyper::ext::ReasonPhrase>()
                        .map(|r| r.as_bytes()),
                    &parts.headers,
                ),
                response_body: raw,
                truncated: cut,
                // Through a proxy the peer is the proxy, not the site.
                ip: parts
                    .extensions
                    .get::<hyper_util::client::legacy::connect::HttpInfo>()
                    .filter(|_| !through_proxy)
                    .map(|info| info.remote_addr().ip()),
                date: fetched_at,
            }),
            _ => None,
        };
        let response = Response {
            request: request.clone(),
            url,
            status,
            headers: parts.headers,
            body,
            truncated,
            fetched_at,
            kept: false,
        };
        Ok((response, exchange))
    }

    /// Reads and decodes the body, checking it against `Content-Length`.
    async fn read(
        &self,
        url: &str,
        headers: &HeaderMap,
        incoming: hyper::body::Incoming,
    ) -> Result<(Bytes, bool, Option<(Bytes, bool)>), FetchError> {
        let settings = &self.inner.settings;
        let declared = content_length(headers);
        let encoding = Encoding::from_header(headers.get(CONTENT_ENCODING)).map_err(|reason| {
            FetchError::Decode {
                url: url.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::Unsupported, reason),
            }
        })?;
        let result = read_body(
            incoming,
            encoding,
            settings.max_body_bytes,
            settings.read_timeout,
            declared,
            settings.capture,
        )
        .await;
        let mismatch = |expected: u64, got: u64| {
            debug!(url, expected, got, "body length mismatch");
            FetchError::LengthMismatch {
                url: url.to_owned(),
                expected,
                got,
            }
        };
        match result {
            Ok(decoded) => match declared {
                Some(expected) if decoded.complete && decoded.raw_len != expected => {
                    Err(mismatch(expected, decoded.raw_len))
                }
                _ => Ok((decoded.body, decoded.truncated, decoded.raw)),
            },
            Err(BodyError::Timeout) => {
                debug!(url, after = ?settings.read_timeout, "body read timed out");
                Err(FetchError::ReadTimeout {
                    url: url.to_owned(),
                    after: settings.read_timeout,
                })
            }
            Err(BodyError::Read { source, raw_len }) => match declared {
                Some(expected) if raw_len < expected && is_unexpected_eof(&source) => {
                    Err(mismatch(expected, raw_len))
                }
                _ => Err(FetchError::Read {
                    url: url.to_owned(),
                    reason: reason_of(&source),
                    cause: Box::new(source),
                }),
            },
            Err(BodyError::Decode(source)) => Err(FetchError::Decode {
                url: url.to_owned(),
                source,
            }),
        }
    }
}

/// The headers every request starts from.
fn default_headers(settings: &FetchSettings) -> Result<HeaderMap, FetchError> {
    let setting = |name: &str, value: &str| {
        HeaderValue::from_str(value).map_err(|error| FetchError::InvalidSetting {
            name: name.to_owned(),
            reason: format!("{value:?}: {error}"),
        })
    };
    let mut headers = HeaderMap::with_capacity(8 + settings.extra_headers.len());
    headers.insert(USER_AGENT, setting("user_agent", &settings.user_agent)?);
    headers.insert(ACCEPT, HeaderValue::from_static(DEFAULT_ACCEPT));
    headers.insert(
        ACCEPT_LANGUAGE,
        HeaderValue::from_static(DEFAULT_ACCEPT_LANGUAGE),
    );
    headers.insert(
        ACCEPT_ENCODING,
        HeaderValue::from_static(DEFAULT_ACCEPT_ENCODING),
    );
    if let Some(from) = &settings.from {
        headers.insert(FROM, setting("from", from)?);
    }
    apply_headers(&mut headers, &settings.extra_headers).map_err(|reason| {
        FetchError::InvalidSetting {
            name: "extra_headers".to_owned(),
            reason,
        }
    })?;
    Ok(headers)
}

/// Adds `pairs` to `headers`: the first of a name replaces what was there, later
/// ones of the same name are appended.
fn apply_headers(headers: &mut HeaderMap, pairs: &[(String, String)]) -> Result<(), String> {
    for (index, (name, value)) in pairs.iter().enumerate() {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|error| format!("header name {name:?}: {error}"))?;
        let value =
            HeaderValue::from_str(value).map_err(|error| format!("header {name}: {error}"))?;
        if pairs[..index]
            .iter()
            .any(|(earlier, _)| earlier.eq_ignore_ascii_case(name))
        {
            headers.append(header, value);
        } else {
            headers.insert(header, value);
        }
    }
    Ok(())
}

/// The declared `Content-Length`, if present and a number.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetcher() -> Fetcher {
        let settings = FetchSettings {
            max_url_len: 40,
            ..FetchSettings::default()
        };
        Fetcher::new(settings).unwrap()
    }

    #[test]
    fn urls_are_checked() {
        let fetcher = fetcher();
        assert!(fetcher.check_url("http://a.example/x").is_ok());
        assert!(
            matches!(fetcher.check_url("ftp://a.example/"), Err(FetchError::UnsupportedScheme { scheme, .. }) if scheme == "ftp")
        );
        assert!(matches!(
            fetcher.check_url("no url"),
            Err(FetchError::InvalidUrl { .. })
        ));
        let long = format!("http://a.example/{}", "é".repeat(100));
        match fetcher.check_url(&long) {
            Err(FetchError::UrlTooLong { url_prefix, len }) => {
                assert_eq!(len, long.len());
                assert!(url_prefix.len() <= URL_PREFIX_LEN && long.starts_with(&url_prefix));
            }
            other => panic!("expected UrlTooLong, got {other:?}"),
        }
    }

    #[test]
    fn request_headers_override_defaults() {
        let fetcher = fetcher();
        let mut request = Request::get("http://u:p@a.example/x#frag");
        request.headers = vec![
            ("accept".into(), "text/plain".into()),
            ("X-Twice".into(), "1".into()),
            ("x-twice".into(), "2".into()),
        ];
        let url = fetcher.check_url(&request.url).unwrap();
        let built = fetcher.build_request(&request, &url).unwrap();
        assert_eq!(built.uri(), "http://a.example/x");
        assert_eq!(built.headers()[ACCEPT], "text/plain");
        assert_eq!(built.headers().get_all("x-twice").iter().count(), 2);
        assert_eq!(built.headers()[ACCEPT_ENCODING], DEFAULT_ACCEPT_ENCODING);
        request.method = "BAD METHOD".into();
        assert!(matches!(
            fetcher.build_request(&request, &url),
            Err(FetchError::InvalidRequest { .. })
        ));
    }

    #[test]
    fn fetcher_and_its_future_are_send_and_sync() {
        fn send_sync<T: Send + Sync + Clone>(_: &T) {}
        fn send<T: Send>(_: &T) {}
        let fetcher = fetcher();
        send_sync(&fetcher);
        let request = Request::get("http://a.example/");
        send(&fetcher.fetch(&request));
    }

    #[test]
    fn bad_settings_are_errors() {
        let settings = FetchSettings {
            user_agent: "bad\nagent".into(),
            ..FetchSettings::default()
        };
        assert!(matches!(
            Fetcher::new(settings),
            Err(FetchError::InvalidSetting { .. })
        ));
        let settings = FetchSettings {
            extra_headers: vec![("bad name".into(), "v".into())],
            ..FetchSettings::default()
        };
        assert!(matches!(
            Fetcher::new(settings),
            Err(FetchError::InvalidSetting { .. })
        ));
    }
}
