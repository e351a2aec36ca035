//! Where client commands connect, and how: the global `--addr`, `--timeout`, `--token` and
//! `--tls-ca`, and [`connect`], which checks them and connects.

use std::path::PathBuf;

use tessera_client::{Client, ClientError, ClientOptions, Status};

use crate::failure::Failure;

/// Where client commands connect, and how (global flags of every command).
#[derive(clap::Args)]
pub(crate) struct Target {
    /// Address for client commands: a `tessera dev` server, or any coordinator of a cluster
    /// (several may be given, comma-separated).
    #[arg(
        long,
        global = true,
        env = "TESSERA_ADDR",
        default_value = "127.0.0.1:1982"
    )]
    pub addr: String,
    /// Seconds a client command may take, retries included. Past it the command fails with
    /// TIMEOUT, saying whether a write may still have been applied.
    #[arg(long, global = true, env = "TESSERA_TIMEOUT", default_value_t = 10.0)]
    pub timeout: f64,
    /// Token for client commands, from the daemons' --auth file: its role (read, write or
    /// admin) decides what the command may do. Prefer the environment variable: a flag shows
    /// in the process list.
    #[arg(long, global = true, env = "TESSERA_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Connect over TLS, trusting the certificate authority in this PEM file: the one that
    /// signed the daemons' certificates (`--tls-cert`; `tessera certs` makes both). A
    /// daemon's certificate must name the host dialed. Daemons serving TLS use it to connect
    /// to each other.
    #[arg(long, global = true, env = "TESSERA_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
}

/// A client of the database at `to`, once the flags are checked (the timeout, a port in every
/// address); a failure to connect says why in the user's terms.
pub(crate) async fn connect(to: &Target) -> Result<Client, Failure> {
    let Target {
        addr,
        timeout: timeout_s,
        token,
        tls_ca,
    } = to;
    if !(timeout_s.is_finite() && *timeout_s > 0.0) {
        return Err(Failure::Error(format!(
            "--timeout must be a positive number of seconds, not {timeout_s}"
        )));
    }
    for entry in addr.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let has_port = entry
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !has_port {
            return Err(Failure::Error(format!(
                "--addr {entry:?} has no port: give HOST:PORT (tessera dev listens on \
                 127.0.0.1:1982 unless told otherwise)"
            )));
        }
    }
    let mut options = ClientOptions::with_timeout(std::time::Duration::from_secs_f64(*timeout_s));
    options.token = token.clone();
    if let Some(ca) = tls_ca {
        options = options
            .with_tls_ca(ca)
            .map_err(|e| Failure::Error(format!("--tls-ca: {e}")))?;
    }
    Client::connect_with(addr, options)
        .await
        .map_err(|e| match e.status() {
            Some(Status::Unauthorized) => Failure::Error(format!(
                "{addr} refused this client: {e} (give a token with --token or TESSERA_TOKEN)"
            )),
            // TLS on one side only, or a certificate not trusted: the daemon is there.
            Some(Status::UnsupportedProtocol) => {
                Failure::Error(format!("{addr} refused this client: {e}"))
            }
            None if matches!(e, ClientError::Tls(_)) => {
                Failure::Error(format!("cannot connect to {addr}: {e}"))
            }
            _ => Failure::Error(format!(
                "cannot reach Tessera at {addr}: {e} (is `tessera dev` or a coordinator running?)"
            )),
        })
}
