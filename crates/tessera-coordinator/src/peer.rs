//! Coordinator-to-coordinator messages: Raft RPCs and forwarded writes.
//!
//! They share the client port. A frame whose body starts with [`PEER_TAG`] (never a protocol
//! version a client speaks) is a peer message: the tag, then postcard of a [`PeerRequest`] or
//! [`PeerResponse`]. A peer connection carries one request at a time: the sender waits for the
//! response before sending the next, so peer frames need no ids.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::RPCTypes;
use serde::{Deserialize, Serialize};
use tessera_protocol::handshake::{Dialed, Dialer, HandshakeError};
use tokio_util::codec::LengthDelimitedCodec;

use crate::raft_types::{ApplyResult, Node, NodeId, TypeConfig};
use crate::state::Command;

/// First body byte of a peer frame.
pub const PEER_TAG: u8 = 0xC7;

/// Largest frame a coordinator accepts on its port (peer frames carry batches of log entries and
/// snapshot chunks). Client frames are still held to the protocol's own limit.
pub const PEER_FRAME_BYTES_MAX: usize = 64 * 1024 * 1024;

/// How long connecting to a peer may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

pub(crate) fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(PEER_FRAME_BYTES_MAX)
        .new_codec()
}

#[derive(Serialize, Deserialize)]
pub(crate) enum PeerRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A write a follower received from a client, for the leader to propose.
    Forward(Command),
}

#[derive(Serialize, Deserialize)]
pub(crate) enum PeerResponse {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Forward(Result<ApplyResult, ForwardError>),
}

#[derive(Clone, Debug, Serialize, Deserialize, thiserror::Error)]
pub(crate) enum ForwardError {
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    #[error("{0}")]
    Failed(String),
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Bytes, postcard::Error> {
    let mut buf = BytesMut::with_capacity(256).writer();
    std::io::Write::write_all(&mut buf, &[PEER_TAG])
        .map_err(|_| postcard::Error::SerializeBufferFull)?;
    Ok(postcard::to_io(value, buf)?.into_inner().freeze())
}

/// Decodes a peer frame body (the tag included).
pub(crate) fn decode<T: for<'a> Deserialize<'a>>(body: &[u8]) -> Result<T, postcard::Error> {
    match body.split_first() {
        Some((&PEER_TAG, rest)) => postcard::from_bytes(rest),
        _ => Err(postcard::Error::DeserializeBadEncoding),
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("timed out")]
    Timeout,
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("bad message: {0}")]
    Codec(#[from] postcard::Error),
    #[error("connection closed by the peer")]
    Closed,
    #[error("cannot connect to {addr}: {source}")]
    Handshake {
        addr: String,
        source: HandshakeError,
    },
}

/// One connection to a peer, opened on first use and again after any failure.
pub(crate) struct PeerConnection {
    addr: String,
    /// Proves the cluster secret on connecting, when the cluster has one.
    dialer: Dialer,
    framed: Option<Dialed>,
}

impl PeerConnection {
    pub(crate) fn new(addr: String, dialer: Dialer) -> PeerConnection {
        PeerConnection {
            addr,
            dialer,
            framed: None,
        }
    }

    /// Sends `request` and waits for its response, all within `timeout`. Any failure drops the
    /// connection, so a late response can never be taken for the next request's.
    pub(crate) async fn call(
        &mut self,
        request: &PeerRequest,
        timeout: Duration,
    ) -> Result<PeerResponse, CallError> {
        let body = encode(request)?;
        let result = tokio::time::timeout(timeout, self.exchange(body))
            .await
            .unwrap_or(Err(CallError::Timeout));
        if result.is_err() {
            self.framed = None;
        }
        result
    }

    async fn exchange(&mut self, body: Bytes) -> Result<PeerResponse, CallError> {
        if self.framed.is_none() {
            let dialed = self
                .dialer
                .connect(&self.addr, codec(), CONNECT_TIMEOUT)
                .await
                .map_err(|source| match source {
                    HandshakeError::Io(source) => CallError::Connect {
                        addr: self.addr.clone(),
                        source,
                    },
                    source => CallError::Handshake {
                        addr: self.addr.clone(),
                        source,
                    },
                })?;
            self.framed = Some(dialed);
        }
        let framed = self.framed.as_mut().ok_or(CallError::Closed)?;
        framed.send(body).await?;
        match framed.next().await {
            Some(frame) => Ok(decode(&frame?)?),
            None => Err(CallError::Closed),
        }
    }
}

/// Makes one [`PeerClient`] per target for openraft. Addresses come from the coordinator's
/// options first (so a member that moved is found at its configured address), then from the
/// Raft membership.
pub(crate) struct PeerNetworkFactory {
    pub(crate) me: NodeId,
    pub(crate) addresses: Arc<BTreeMap<NodeId, String>>,
    pub(crate) dialer: Dialer,
}

impl RaftNetworkFactory<TypeConfig> for PeerNetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        let addr = self
            .addresses
            .get(&target)
            .cloned()
            .unwrap_or_else(|| node.addr.clone());
        PeerClient {
            me: self.me,
            target,
            connection: PeerConnection::new(addr, self.dialer.clone()),
        }
    }
}

pub(crate) struct PeerClient {
    me: NodeId,
    target: NodeId,
    connection: PeerConnection,
}

impl PeerClient {
    async fn rpc<E: std::error::Error>(
        &mut self,
        action: RPCTypes,
        request: PeerRequest,
        option: &RPCOption,
    ) -> Result<PeerResponse, RPCError<NodeId, Node, E>> {
        let ttl = option.hard_ttl();
        self.connection
            .call(&request, ttl)
            .await
            .map_err(|e| match e {
                CallError::Connect { .. } => RPCError::Unreachable(Unreachable::new(&e)),
                CallError::Timeout => RPCError::Timeout(Timeout {
                    action,
                    id: self.me,
                    target: self.target,
                    timeout: ttl,
                }),
                e => RPCError::Network(NetworkError::new(&e)),
            })
    }

    fn unexpected<E: std::error::Error>(&self) -> RPCError<NodeId, Node, E> {
        RPCError::Network(NetworkError::new(&CallError::Codec(
            postcard::Error::DeserializeBadEncoding,
        )))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        match self
            .rpc(
                RPCTypes::AppendEntries,
                PeerRequest::AppendEntries(rpc),
                &option,
            )
            .await?
        {
            PeerResponse::AppendEntries(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, Node, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match self
            .rpc(
                RPCTypes::InstallSnapshot,
                PeerRequest::InstallSnapshot(rpc),
                &option,
            )
            .await?
        {
            PeerResponse::InstallSnapshot(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        match self
            .rpc(RPCTypes::Vote, PeerRequest::Vote(rpc), &option)
            .await?
        {
            PeerResponse::Vote(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected()),
        }
    }

    fn backoff(&self) -> openraft::network::Backoff {
        openraft::network::Backoff::new(std::iter::repeat(Duration::from_millis(200)))
    }
}
