//! How a [`Client`](crate::Client) behaves: its deadline, fan-out, the replica a get asks,
//! its credentials.

use crate::routing::{Fanout, ReadFrom};

/// How a [`Client`](crate::Client) behaves.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Longest a request may take, retries included (default 10 s). Past it the request
    /// fails with [`Status::Timeout`](crate::Status::Timeout), whose message says whether a write may still have been
    /// applied (it was sent and no answer came) or was not (every attempt was refused). In a
    /// cluster, one attempt of a read waits at most 2 s for its server before another replica
    /// or a newer configuration is tried.
    pub timeout: std::time::Duration,
    /// In a cluster, how a read over several regions (a search, `get_by_range`,
    /// `get_by_tags`) picks among each region's replicas: the fewest servers that hold them
    /// all (the default), or one replica per region.
    pub fanout: Fanout,
    /// In a cluster, which replica a get asks: any complete replica of the key's region, in
    /// turn (the default), or its point leader only. Both are linearizable.
    pub read_from: ReadFrom,
    /// The token presented on every connection, for daemons started with `--auth`: its role
    /// (read, write or admin) decides what this client may do. `None`: anonymous.
    pub token: Option<String>,
    /// The cluster secret, for a daemon's own drivers (adaptation, splits): the connection
    /// proves it and may then do everything. Clients use tokens.
    pub cluster_secret: Option<tessera_protocol::ClusterSecret>,
    /// TLS, for daemons started with `--tls-cert`: the certificate authority trusted to have
    /// signed their certificates (see [`ClientOptions::with_tls_ca`]). `None`: plain TCP.
    pub tls: Option<tessera_protocol::tls::ClientTls>,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            timeout: std::time::Duration::from_secs(10),
            fanout: Fanout::Fewest,
            read_from: ReadFrom::AnyReplica,
            token: None,
            cluster_secret: None,
            tls: None,
        }
    }
}

impl ClientOptions {
    /// The default options with another request deadline.
    pub fn with_timeout(timeout: std::time::Duration) -> ClientOptions {
        ClientOptions {
            timeout,
            ..ClientOptions::default()
        }
    }

    /// These options with a token (see [`ClientOptions::token`]).
    pub fn with_token(mut self, token: impl Into<String>) -> ClientOptions {
        self.token = Some(token.into());
        self
    }

    /// These options with TLS, trusting the certificate authority in the PEM file `ca` (a
    /// daemon's certificate must be signed by it and name the host dialed).
    pub fn with_tls_ca(
        mut self,
        ca: &std::path::Path,
    ) -> Result<ClientOptions, tessera_protocol::tls::TlsError> {
        self.tls = Some(tessera_protocol::tls::ClientTls::from_ca_file(ca)?);
        Ok(self)
    }

    /// How this client's connections are opened and authenticated.
    pub(crate) fn dialer(&self) -> tessera_protocol::handshake::Dialer {
        tessera_protocol::handshake::Dialer {
            secret: self.cluster_secret.clone(),
            token: self.token.clone(),
            tls: self.tls.clone(),
        }
    }

    /// These options with another fan-out.
    pub fn with_fanout(mut self, fanout: Fanout) -> ClientOptions {
        self.fanout = fanout;
        self
    }

    /// These options with gets read from elsewhere (see [`ClientOptions::read_from`]).
    pub fn with_read_from(mut self, read_from: ReadFrom) -> ClientOptions {
        self.read_from = read_from;
        self
    }
}
