//! What a port speaks, asked when a worker's first connection fails: a
//! `rediss://` URL given a plain Redis port (its TLS handshake then waits
//! for an answer that never comes, or reads a Redis error as a corrupt TLS
//! record), or a `redis://` URL given a TLS-only port (which closes the
//! connection at the first plain command). Each probe is one short TCP
//! connection with a bounded wait, made only after a failure (or, for
//! `rediss://`, a handshake that is slow), so that a server that works is
//! never sent a probe. Depends on tokio and rustls (for a real ClientHello).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, RedisError, RedisResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a probe may take in all.
const PROBE_WAIT: Duration = Duration::from_secs(2);

/// How long a `rediss://` handshake may go unanswered before the port is
/// asked whether it speaks plain Redis: a TLS handshake to a Redis server
/// takes milliseconds, a second even far away.
pub(super) const SLOW_HANDSHAKE: Duration = Duration::from_secs(1);

/// What `rediss://` to a plain Redis port says.
const NOT_TLS: &str =
    "the port does not speak TLS (it answered a plain PING as Redis does); use redis:// for it";
/// What `redis://` to a TLS-only port says.
const WANTS_TLS: &str =
    "the port seems to want TLS (it answered a TLS handshake); use rediss:// for it";

/// Why a worker's first connection failed.
pub(super) enum Failure {
    /// What the client said.
    Redis(RedisError),
    /// No answer within the time given.
    TimedOut,
    /// The URL's scheme is not what the port speaks (one sentence).
    Mismatch(&'static str),
}

/// Runs `connect`, a first connection to `address` (host, port, TLS),
/// within `limit`. When it fails for want of a connection (not a password
/// turned down), or a TLS handshake is still unanswered after
/// [`SLOW_HANDSHAKE`], the port is asked what it speaks, and a scheme that
/// does not match it is said at once.
pub(super) async fn connect<T>(
    connect: impl Future<Output = RedisResult<T>>,
    address: Option<(String, u16, bool)>,
    limit: Duration,
) -> Result<T, Failure> {
    let connect = tokio::time::timeout(limit, connect);
    tokio::pin!(connect);
    if let Some((host, port, true)) = &address {
        tokio::select! {
            done = &mut connect => return explain(done.ok(), address.as_ref()).await,
            () = tokio::time::sleep(SLOW_HANDSHAKE) => {}
        }
        if speaks_plain_redis(host, *port).await {
            return Err(Failure::Mismatch(NOT_TLS));
        }
    }
    let done = connect.await;
    explain(done.ok(), address.as_ref()).await
}

/// The outcome of a first connection (`None`: timed out), a failure
/// explained by what the port speaks when that is the cause.
async fn explain<T>(
    done: Option<RedisResult<T>>,
    address: Option<&(String, u16, bool)>,
) -> Result<T, Failure> {
    let error = match done {
        Some(Ok(value)) => return Ok(value),
        Some(Err(error)) => Some(error),
        None => None,
    };
    // The server's own refusal (a password turned down) is not a mismatch.
    let no_connection = error
        .as_ref()
        .is_none_or(|e| e.code().is_none() && e.kind() != redis::ErrorKind::AuthenticationFailed);
    if let (true, Some((host, port, tls))) = (no_connection, address) {
        if *tls && speaks_plain_redis(host, *port).await {
            return Err(Failure::Mismatch(NOT_TLS));
        }
        if !*tls && speaks_tls(host, *port).await {
            return Err(Failure::Mismatch(WANTS_TLS));
        }
    }
    Err(error.map_or(Failure::TimedOut, Failure::Redis))
}

/// The host and port of `info`, and whether it asks for TLS.
pub(super) fn address(info: &ConnectionInfo) -> Option<(String, u16, bool)> {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) => Some((host.clone(), *port, false)),
        ConnectionAddr::TcpTls { host, port, .. } => Some((host.clone(), *port, true)),
        _ => None,
    }
}

/// True when the server at `host:port` answers a plain `PING` as Redis
/// does (`+PONG`, or an error such as `-NOAUTH`): it speaks plain Redis,
/// not TLS.
pub(super) async fn speaks_plain_redis(host: &str, port: u16) -> bool {
    let probe = async {
        let mut stream = TcpStream::connect((host, port)).await.ok()?;
        stream.write_all(b"PING\r\n").await.ok()?;
        let mut first = [0u8; 1];
        stream.read_exact(&mut first).await.ok()?;
        Some(matches!(first[0], b'+' | b'-'))
    };
    matches!(
        tokio::time::timeout(PROBE_WAIT, probe).await,
        Ok(Some(true))
    )
}

/// True when the server at `host:port` answers a TLS ClientHello with a TLS
/// record (a handshake, or an alert): it wants TLS.
pub(super) async fn speaks_tls(host: &str, port: u16) -> bool {
    let Some(hello) = client_hello(host) else {
        return false;
    };
    let probe = async {
        let mut stream = TcpStream::connect((host, port)).await.ok()?;
        stream.write_all(&hello).await.ok()?;
        let mut head = [0u8; 2];
        stream.read_exact(&mut head).await.ok()?;
        // A record's content type (22 handshake, 21 alert) and major
        // version (3).
        Some(matches!(head, [22 | 21, 3]))
    };
    matches!(
        tokio::time::timeout(PROBE_WAIT, probe).await,
        Ok(Some(true))
    )
}

/// The bytes of a TLS ClientHello to `host`, as rustls sends it (no
/// certificate is checked: the probe reads only the answer's first bytes).
fn client_hello(host: &str) -> Option<Vec<u8>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    use rustls::pki_types::ServerName;
    let name = ServerName::try_from(host.to_owned())
        .or_else(|_| ServerName::try_from("localhost"))
        .ok()?;
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).ok()?;
    }
    Some(hello)
}
