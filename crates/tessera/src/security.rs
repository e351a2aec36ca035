//! The flags that secure a daemon, shared by `tessera dev`, `coordinator` and `server`: client
//! tokens (`--auth`), the cluster secret (`--cluster-secret-file`), TLS (`--tls-cert`,
//! `--tls-key`, and the global `--tls-ca`), and the refusal to listen beyond loopback
//! unprotected unless told (`--insecure`). The rules themselves are `tessera_protocol::auth`'s
//! and `tessera_protocol::tls`'s.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tessera_client::ClientOptions;
use tessera_protocol::tls::{ClientTls, MemberTls, ServerTls};
use tessera_protocol::{ClusterSecret, Gate, Policy, TokenTable};

use crate::failure::Failure;

#[derive(clap::Args, Clone, Debug)]
pub struct SecurityArgs {
    /// Token file: one `TOKEN ROLE` a line (`#` comments), ROLE one of `read` (gets, searches),
    /// `write` (and puts, deletes, group writes) or `admin` (and adding, removing and altering
    /// spaces, decommissioning servers). Clients present theirs with `--token` or
    /// `TESSERA_TOKEN` (Python: `token=`); a request its token does not allow is refused with
    /// UNAUTHORIZED and changes nothing. Reloaded on SIGHUP. Without it, every client may do
    /// everything.
    #[arg(long, value_name = "FILE")]
    pub auth: Option<PathBuf>,
    /// File holding the secret every coordinator and server of the cluster shares (at least
    /// 16 bytes; e.g. `openssl rand -hex 32 > secret`). Each proves it to the other on every
    /// connection between them (challenge and response: the secret never travels), and a
    /// connection that does not is closed before any of its messages is acted on. Required with
    /// --auth on coordinators and servers.
    #[arg(long, value_name = "FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// Listen on a non-loopback address without --auth (and, on a cluster, without
    /// --cluster-secret-file): anyone who reaches the port may then read, write, drop spaces
    /// or join the cluster. Only on a network you trust.
    #[arg(long)]
    pub insecure: bool,
    /// TLS: the PEM certificate this daemon serves on its port (its own first, then any
    /// intermediates), naming every host or IP address clients and members dial it by. Clients
    /// and the other members must then connect over TLS, trusting the authority that signed it
    /// (`--tls-ca`, which this daemon needs too: it connects to the other members, and its
    /// drivers to itself, over TLS). `tessera certs` makes an authority and certificates.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The global --tls-ca, which the daemon trusts when it connects to members.
    #[arg(skip)]
    pub tls_ca: Option<PathBuf>,
}

/// Which kind of daemon the flags are for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    /// `tessera dev`: everything in this process, so the cluster's secret (if it has a cluster)
    /// never needs to leave it.
    Dev,
    /// `tessera coordinator` or `tessera server`: talks to other processes.
    ClusterMember,
}

/// A daemon's gate and TLS, and the options its own drivers (adaptation, splits) connect with.
pub struct Secured {
    pub gate: Arc<Gate>,
    pub tls: Option<MemberTls>,
    pub drivers: ClientOptions,
}

fn read_tokens(path: &Path) -> Result<TokenTable, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    TokenTable::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

impl SecurityArgs {
    /// Checks the flags against the addresses the daemon listens on, loads the files, and
    /// reloads the token file on every SIGHUP from then on.
    pub fn secure(&self, daemon: Daemon, listen: &[SocketAddr]) -> Result<Secured, Failure> {
        let exposed: Vec<String> = listen
            .iter()
            .filter(|a| !a.ip().is_loopback())
            .map(ToString::to_string)
            .collect();
        if !exposed.is_empty() && !self.insecure {
            let missing = match (daemon, &self.auth, &self.cluster_secret_file) {
                (_, None, _) => Some("--auth FILE"),
                (Daemon::ClusterMember, Some(_), None) => Some("--cluster-secret-file FILE"),
                _ => None,
            };
            if let Some(missing) = missing {
                return Err(Failure::Error(format!(
                    "refusing to listen on {} without {missing}: anyone who reaches it could \
                     read and write every space, drop spaces or join the cluster. Give {missing} \
                     (see `--help`), listen on 127.0.0.1, or pass --insecure on a network you trust",
                    exposed.join(", ")
                )));
            }
        }
        if daemon == Daemon::ClusterMember
            && self.auth.is_some()
            && self.cluster_secret_file.is_none()
        {
            return Err(Failure::Error(
                "--auth needs --cluster-secret-file on coordinators and servers: without it, \
                 anyone could register a server or speak Raft to the coordinators"
                    .into(),
            ));
        }
        let tokens = self
            .auth
            .as_deref()
            .map(read_tokens)
            .transpose()
            .map_err(|e| Failure::Error(format!("--auth {e}")))?;
        let secret = match &self.cluster_secret_file {
            Some(path) => {
                let content = std::fs::read(path).map_err(|e| {
                    Failure::Error(format!("--cluster-secret-file {}: {e}", path.display()))
                })?;
                Some(ClusterSecret::parse(&content).map_err(|e| {
                    Failure::Error(format!("--cluster-secret-file {}: {e}", path.display()))
                })?)
            }
            // Everything runs in this process: a secret made now, known to nobody else, lets
            // its servers, coordinators and drivers prove themselves to each other.
            None if daemon == Daemon::Dev => Some(ClusterSecret::random()),
            None => None,
        };
        if let Some(t) = &tokens {
            tracing::info!(tokens = t.len(), "client tokens required");
        }
        let gate = Arc::new(Gate::new(Policy {
            tokens,
            secret: secret.clone(),
        }));
        if let Some(path) = self.auth.clone() {
            reload_on_hangup(gate.clone(), path);
        }
        let tls = self.tls()?;
        if tls.is_none() && !exposed.is_empty() {
            tracing::warn!(
                "listening on {} without TLS (--tls-cert): tokens and data cross the network \
                 in clear text",
                exposed.join(", ")
            );
        }
        let mut drivers = ClientOptions::default();
        drivers.cluster_secret = secret;
        drivers.tls = tls.as_ref().map(|t| t.dial.clone());
        Ok(Secured { gate, tls, drivers })
    }

    /// The daemon's TLS, from --tls-cert, --tls-key and --tls-ca.
    fn tls(&self) -> Result<Option<MemberTls>, Failure> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        let Some(ca) = &self.tls_ca else {
            return Err(Failure::Error(
                "--tls-cert needs --tls-ca (or TESSERA_TLS_CA): the authority that signed the \
                 members' certificates, trusted when this daemon connects to the other members \
                 and its drivers to itself"
                    .into(),
            ));
        };
        let serve = ServerTls::from_pem_files(cert, key)
            .map_err(|e| Failure::Error(format!("--tls-cert/--tls-key: {e}")))?;
        let dial =
            ClientTls::from_ca_file(ca).map_err(|e| Failure::Error(format!("--tls-ca: {e}")))?;
        tracing::info!(certificate = %cert.display(), "serving TLS");
        Ok(Some(MemberTls { serve, dial }))
    }
}

/// Reads the token file again on every SIGHUP; a file that does not parse is reported and
/// the tokens in force stay.
fn reload_on_hangup(gate: Arc<Gate>, path: PathBuf) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot watch SIGHUP: the token file will not be reloaded");
        return;
    };
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match read_tokens(&path) {
                Ok(tokens) => {
                    eprintln!("reloaded {} tokens from {}", tokens.len(), path.display());
                    gate.set_tokens(Some(tokens));
                }
                Err(e) => {
                    eprintln!("not reloading the token file, keeping the tokens in force: {e}")
                }
            }
        }
    });
}
