//! The connecting side's steps of [`crate::auth`], on a framed connection before anything else
//! is sent on it: TLS if the dialer trusts an authority, then presenting a client's token or
//! proving the cluster secret.

use bytes::{Bytes, BytesMut};
use std::time::Duration;

use futures::{Sink, SinkExt, Stream, StreamExt};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use crate::auth::{ClusterSecret, Nonce, Role};
use crate::frame::{decode_response, encode_request};
use crate::message::{Request, RequestFrame, Response};
use crate::status::ErrorReply;
use crate::tls::{ClientTls, Socket};
use tessera_types::Epoch;

/// Why a connection could not be authenticated.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error(
        "TLS with {address} failed: {error} (does it serve TLS, with a certificate for that \
         host signed by the authority given as --tls-ca?)"
    )]
    Tls {
        address: String,
        error: std::io::Error,
    },
    #[error("the connection closed during the handshake")]
    Closed,
    #[error("undecodable answer during the handshake: {0}")]
    Frame(#[from] crate::frame::FrameError),
    #[error("refused: {0}")]
    Refused(ErrorReply),
    #[error("unexpected answer during the handshake: {0}")]
    Unexpected(String),
    #[error("the other side does not hold the cluster secret (its proof is wrong)")]
    WrongServerProof,
}

/// How a daemon or client opens its connections: TCP, TLS if it trusts an authority, then
/// the handshake its credentials call for — a cluster member proves the secret, a client
/// presents its token.
#[derive(Clone, Debug, Default)]
pub struct Dialer {
    /// Set on coordinators and servers of a cluster with a secret.
    pub secret: Option<ClusterSecret>,
    /// A client's token.
    pub token: Option<String>,
    /// Set where the daemons serve TLS.
    pub tls: Option<ClientTls>,
}

/// A connection opened by a [`Dialer`].
pub type Dialed = Framed<Socket, LengthDelimitedCodec>;

impl Dialer {
    /// A member's dialer (`secret`, `tls`), or an anonymous one.
    pub fn member(secret: Option<ClusterSecret>, tls: Option<ClientTls>) -> Dialer {
        Dialer {
            secret,
            token: None,
            tls,
        }
    }

    /// Connects to `address` within `timeout` (the handshake included), framing with `codec`.
    pub async fn connect(
        &self,
        address: &str,
        codec: LengthDelimitedCodec,
        timeout: Duration,
    ) -> Result<Dialed, HandshakeError> {
        let work = async {
            let tcp = TcpStream::connect(address).await?;
            tcp.set_nodelay(true)?;
            let stream = match &self.tls {
                None => Socket::Plain(tcp),
                Some(tls) => {
                    tls.connect(address, tcp)
                        .await
                        .map_err(|error| HandshakeError::Tls {
                            address: address.to_string(),
                            error,
                        })?
                }
            };
            let mut framed = Framed::new(stream, codec);
            if let Some(secret) = &self.secret {
                prove_membership(&mut framed, secret).await?;
            } else if let Some(token) = &self.token {
                authenticate(&mut framed, token).await?;
            }
            Ok(framed)
        };
        tokio::time::timeout(timeout, work).await.map_err(|_| {
            HandshakeError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("connecting to {address} took over {timeout:?}"),
            ))
        })?
    }
}

/// A fresh random nonce for a challenge.
pub fn fresh_nonce() -> Nonce {
    rand::random()
}

/// Request ids of the handshake's frames: at the top of the range, never one a client picks
/// for its requests (they count up from 1).
const HANDSHAKE_ID: u64 = u64::MAX;

async fn exchange<T>(framed: &mut T, request: Request) -> Result<Response, HandshakeError>
where
    T: Sink<Bytes, Error = std::io::Error> + Stream<Item = std::io::Result<BytesMut>> + Unpin,
{
    let body = encode_request(&RequestFrame {
        id: HANDSHAKE_ID,
        epoch: Epoch(0),
        request,
    })?;
    framed.send(body).await?;
    let frame = framed.next().await.ok_or(HandshakeError::Closed)??;
    match decode_response(&frame)?.response {
        Response::Error(e) => Err(HandshakeError::Refused(e)),
        other => Ok(other),
    }
}

/// Presents `token`; the role it has there.
pub async fn authenticate<T>(framed: &mut T, token: &str) -> Result<Role, HandshakeError>
where
    T: Sink<Bytes, Error = std::io::Error> + Stream<Item = std::io::Result<BytesMut>> + Unpin,
{
    let request = Request::Authenticate {
        token: token.to_string(),
    };
    match exchange(framed, request).await? {
        Response::Authenticated { role } => Ok(role),
        other => Err(HandshakeError::Unexpected(format!("{other:?}"))),
    }
}

/// Proves the cluster secret to the daemon at the other end, and checks that it holds it too.
pub async fn prove_membership<T>(
    framed: &mut T,
    secret: &ClusterSecret,
) -> Result<(), HandshakeError>
where
    T: Sink<Bytes, Error = std::io::Error> + Stream<Item = std::io::Result<BytesMut>> + Unpin,
{
    let ours = fresh_nonce();
    let (theirs, proof) = match exchange(framed, Request::ClusterChallenge { nonce: ours }).await? {
        Response::ClusterChallenge { nonce, proof } => (nonce, proof),
        other => return Err(HandshakeError::Unexpected(format!("{other:?}"))),
    };
    if !secret.check_server_proof(&ours, &theirs, &proof) {
        return Err(HandshakeError::WrongServerProof);
    }
    let proof = secret.client_proof(&ours, &theirs);
    match exchange(framed, Request::ClusterProof { proof }).await? {
        Response::Done => Ok(()),
        other => Err(HandshakeError::Unexpected(format!("{other:?}"))),
    }
}
