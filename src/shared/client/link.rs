//! How a worker reaches Redis: one server through redis-rs's
//! `ConnectionManager` (which reconnects underneath), or, when the server it
//! is given reports `cluster_enabled:1`, the whole Redis Cluster through
//! redis-rs's cluster-async `ClusterConnection`, which learns the slot map from
//! that node and follows `MOVED`/`ASK`: any node of a cluster will do. Both
//! speak TLS for a `rediss://` URL (rustls), trusting the CA given by
//! `--shared-cacert` when there is one and showing the client certificate of
//! `--shared-cert`/`--shared-key` to a server that asks for one (mutual TLS).
//! Depends on redis-rs only.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    ClientTlsConfig, Cmd, ConnectionInfo, Pipeline, RedisFuture, RedisResult, TlsCertificates,
    Value,
};

/// How long a connection may take to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a call may wait for its answer.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// What makes connections: to one server, or to a cluster.
pub(super) enum Link {
    /// One server (or a cluster node that does not say it is one).
    Single(Box<redis::Client>),
    /// A Redis Cluster, reached through any of its nodes. (Both boxed: the
    /// two differ much in size, and a `Link` is made once per connection.)
    Cluster(Box<ClusterClient>),
}

/// A connection made by a [`Link`]. Cloning it is cheap (a handle).
#[derive(Clone)]
pub(super) enum Conn {
    /// To one server.
    Single(ConnectionManager),
    /// To a cluster: each call goes to the node of its keys' slot.
    Cluster(ClusterConnection),
}

impl Conn {
    /// Runs `cmd`, which names no key (`SCAN`), on the server that holds
    /// `key`: in a cluster, the primary of `key`'s slot (redis-rs would send
    /// a keyless command to any node); on one server, that server.
    pub(super) async fn query_at_key(&mut self, cmd: &Cmd, key: &str) -> RedisResult<Value> {
        use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
        match self {
            Conn::Single(conn) => cmd.query_async(conn).await,
            Conn::Cluster(conn) => {
                let route = Route::with_key(key.as_bytes(), SlotAddr::Master);
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                conn.route_command(cmd.clone(), routing).await
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(cmd, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// The connection manager's settings.
fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1))
}

/// What a TLS connection shows and trusts beyond the defaults (PEM): the
/// server's CA (else the system's roots) and a client certificate with its
/// key (mutual TLS).
#[derive(Clone, Copy, Default)]
pub(super) struct TlsPem<'a> {
    /// The CA that signed the server's certificate.
    pub(super) ca: Option<&'a [u8]>,
    /// The client certificate and its key.
    pub(super) client: Option<(&'a [u8], &'a [u8])>,
}

impl TlsPem<'_> {
    fn given(&self) -> bool {
        self.ca.is_some() || self.client.is_some()
    }

    fn certificates(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: self.client.map(|(cert, key)| ClientTlsConfig {
                client_cert: cert.to_vec(),
                client_key: key.to_vec(),
            }),
            root_cert: self.ca.map(<[u8]>::to_vec),
        }
    }
}

impl Link {
    /// Connects to the server `info` names (TLS for `rediss://`, with what
    /// `tls` gives: the CA to trust, a client certificate to show), and to
    /// its whole cluster when it is a cluster node. The caller bounds the
    /// time it takes.
    pub(super) async fn open(info: ConnectionInfo, tls: TlsPem<'_>) -> RedisResult<(Link, Conn)> {
        let client = if tls.given() {
            redis::Client::build_with_tls(info.clone(), tls.certificates())?
        } else {
            redis::Client::open(info.clone())?
        };
        let mut conn = client
            .get_connection_manager_with_config(manager_config())
            .await?;
        // A server that does not let this user run INFO is taken for a single
        // server (a cluster's node would then answer MOVED, and say so).
        let cluster = match redis::cmd("INFO")
            .arg("cluster")
            .query_async::<String>(&mut conn)
            .await
        {
            Ok(info) => info.lines().any(|l| l.trim() == "cluster_enabled:1"),
            Err(_) => false,
        };
        if !cluster {
            return Ok((Link::Single(Box::new(client)), Conn::Single(conn)));
        }
        drop(conn);
        let mut builder = ClusterClient::builder([info])
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .retries(2);
        if tls.given() {
            builder = builder.certs(tls.certificates());
        }
        let link = Link::Cluster(Box::new(builder.build()?));
        let conn = link.connect().await?;
        Ok((link, conn))
    }

    /// A new connection (after `READONLY`: a failover).
    pub(super) async fn connect(&self) -> RedisResult<Conn> {
        Ok(match self {
            Link::Single(client) => Conn::Single(
                client
                    .get_connection_manager_with_config(manager_config())
                    .await?,
            ),
            Link::Cluster(client) => Conn::Cluster(client.get_async_connection().await?),
        })
    }

    /// Whether this is a cluster.
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Link::Cluster(_))
    }
}
