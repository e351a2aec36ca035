//! A cluster server's dealings with the coordinators: registration under a token kept in the
//! data directory (so a restart comes back as the same server), the first configuration, and
//! following every later one by long-polling.
//!
//! A configuration is data from a socket: each is checked ([`Configuration::check`]) before
//! the chain loop installs it. A bad one is logged and skipped; at start, the server keeps
//! waiting for a good one.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tessera_protocol::handshake::Dialer;
use tessera_protocol::{
    codec, decode_response, encode_request, Configuration, Request, RequestFrame, Response,
};
use tessera_types::{Epoch, ServerId};

use crate::errors::ServerError;
use crate::queue::{ChainSender, LoopInput};

/// How long one configuration long-poll waits at a coordinator.
const WAIT_CONFIG_MS: u32 = 20_000;
const TOKEN_FILE: &str = "server-token";

/// How a server joins a cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Coordinator addresses (`host:port`); any one that answers will do.
    pub coordinators: Vec<String>,
    /// The address other servers and clients reach this server at; defaults to the bound
    /// listen address (which must then not be 0.0.0.0).
    pub advertise: Option<String>,
}

/// The coordinators, and how this server connects to them (proving the cluster secret, when
/// the cluster has one).
#[derive(Clone, Debug)]
pub struct Coordinators {
    pub addresses: Vec<String>,
    pub dialer: Dialer,
}

/// The address a server registers under.
pub fn advertised(options: &ClusterOptions, bound: SocketAddr) -> Result<String, ServerError> {
    match &options.advertise {
        Some(a) => Ok(a.clone()),
        None if bound.ip().is_unspecified() => Err(ServerError::Cluster(format!(
            "listening on {bound}: give --advertise, the address other servers and clients reach this one at"
        ))),
        None => Ok(bound.to_string()),
    }
}

/// This server's identity: a random token made on its first start and kept in its data
/// directory.
pub fn load_or_make_token(dir: &Path) -> Result<u128, ServerError> {
    let path = dir.join(TOKEN_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map_err(|_| ServerError::CorruptConfig {
            path,
            reason: "the server token is not a number".into(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token: u128 = rand::random::<u128>().max(1);
            let tmp = dir.join(format!("{TOKEN_FILE}.tmp"));
            std::fs::write(&tmp, token.to_string())?;
            std::fs::File::open(&tmp)?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(dir)?.sync_all()?;
            Ok(token)
        }
        Err(e) => Err(e.into()),
    }
}

/// One request to the first coordinator that answers it (trying each in turn).
pub async fn ask_coordinators(
    coordinators: &Coordinators,
    request: Request,
) -> Result<Response, String> {
    let mut last = String::from("no coordinator address given");
    for address in &coordinators.addresses {
        match ask(&coordinators.dialer, address, request.clone()).await {
            Ok(Response::Error(e)) if e.status.is_retryable() => last = format!("{address}: {e}"),
            Ok(response) => return Ok(response),
            Err(e) => last = format!("{address}: {e}"),
        }
    }
    Err(last)
}

async fn ask(dialer: &Dialer, address: &str, request: Request) -> Result<Response, std::io::Error> {
    let mut framed = dialer
        .connect(address, codec(), Duration::from_secs(2))
        .await
        .map_err(std::io::Error::other)?;
    let frame = RequestFrame {
        id: 1,
        epoch: Epoch(0),
        request,
    };
    let body = encode_request(&frame).map_err(std::io::Error::other)?;
    framed.send(body).await?;
    let reply = tokio::time::timeout(
        Duration::from_millis(WAIT_CONFIG_MS as u64 + 5_000),
        framed.next(),
    )
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer"))?
    .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed"))??;
    decode_response(&reply)
        .map(|f| f.response)
        .map_err(std::io::Error::other)
}

/// Registers (or re-registers) this server; retries for about a minute while no coordinator
/// answers, so servers and coordinators can start in any order.
/// `incarnation` grows with every start of the process: the coordinators take a server that
/// comes back with a new one out of its replica sets (it lost its in-flight chain state).
pub async fn register(
    coordinators: &Coordinators,
    token: u128,
    address: String,
    incarnation: u64,
) -> Result<ServerId, ServerError> {
    let mut last = String::new();
    for _ in 0..300 {
        let request = Request::RegisterServer {
            token,
            address: address.clone(),
            incarnation,
        };
        match ask_coordinators(coordinators, request).await {
            Ok(Response::Registered(id)) => return Ok(id),
            Ok(other) => last = format!("unexpected answer {other:?}"),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ServerError::Cluster(format!(
        "could not register with the coordinators: {last}"
    )))
}

/// Whether a configuration from a coordinator can be acted on; logs why not.
fn is_good(config: &Configuration) -> bool {
    match config.check() {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "ignoring a configuration from the coordinators that does not check");
            false
        }
    }
}

/// The first good configuration that lists this server.
pub async fn first_configuration(
    coordinators: &Coordinators,
    me: ServerId,
) -> Result<Configuration, ServerError> {
    let mut refused = None;
    for _ in 0..300 {
        if let Ok(Response::Config(c)) = ask_coordinators(coordinators, Request::GetConfig).await {
            // A bad configuration is logged once per epoch, not on every poll.
            if refused != Some(c.epoch) && c.server(me).is_some() {
                if is_good(&c) {
                    return Ok(*c);
                }
                refused = Some(c.epoch);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ServerError::Cluster(
        "no coordinator gave a good configuration listing this server".into(),
    ))
}

/// Follows the coordinators' configuration after epoch `known` and hands every newer good one
/// to the chain loop, until `stopping` says so or the loop is gone.
pub async fn follow_configuration(
    coordinators: Coordinators,
    mut known: Epoch,
    chain: ChainSender,
    stopping: impl Fn() -> bool,
) {
    while !stopping() {
        let request = Request::WaitConfig {
            after: known,
            timeout_ms: WAIT_CONFIG_MS,
        };
        match ask_coordinators(&coordinators, request).await {
            Ok(Response::Config(c)) if c.epoch > known => {
                // A bad one is skipped: the wait goes on from its epoch, for the next.
                known = c.epoch;
                if is_good(&c) && chain.send(LoopInput::Config(Arc::new(*c))).await.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "no coordinator answered; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
