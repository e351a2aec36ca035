//! Links between servers: one outgoing connection per peer, and the envelopes a peer sends on
//! a connection that began with `PeerHello`.
//!
//! What a peer sends is data from a socket: every envelope is decoded and checked
//! ([`tessera_replication::check_envelope`]) before the chain loop sees it, and the first bad
//! one closes that peer's connection. The sender's link then reconnects, and its state machine
//! sends again what was not acknowledged; a peer that keeps sending bad envelopes only keeps
//! losing its connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tessera_protocol::frame::{decode, encode};
use tessera_protocol::tls::ReadHalf;
use tessera_protocol::{codec, decode_response, encode_request, Request, RequestFrame, Response};
use tessera_replication::{check_envelope, Envelope, PeerMessage};
use tessera_storage::StorageError;
use tessera_types::{Epoch, ServerId};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

use crate::queue::LoopInput;

/// How long connecting to a peer may take, the cluster handshake included.
const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
use crate::state::Shared;

/// Reads the envelopes peer `from` sends after its `PeerHello`, checks each, and queues it for
/// the chain loop. Returns (closing the connection) at the first envelope that does not
/// decode, does not come from `from`, or fails [`check_envelope`].
pub async fn serve_peer(
    mut frames: FramedRead<ReadHalf, LengthDelimitedCodec>,
    shared: Arc<Shared>,
    from: ServerId,
) {
    loop {
        // A stopping server's loop takes envelopes (its chains' acknowledgements) until it
        // has answered what it has; then the connection closes.
        let next = tokio::select! {
            biased;
            () = shared.chain.closed() => return,
            next = frames.next() => next,
        };
        let Some(frame) = next else {
            return;
        };
        let body = match frame {
            Ok(body) => body,
            Err(e) => {
                tracing::warn!(peer = %from, error = %e, "a peer's connection failed; closing it");
                return;
            }
        };
        let envelope = match decode::<Envelope>(&body) {
            Ok(envelope) => envelope,
            Err(e) => {
                tracing::warn!(peer = %from, error = %e, "an undecodable envelope from a peer; closing its connection");
                return;
            }
        };
        if let Err(e) = check_envelope(&envelope, shared.me, &shared.view().config) {
            tracing::warn!(peer = %from, error = %e, "a bad envelope from a peer; closing its connection");
            return;
        }
        if let Err(e) = check_chunk_range(&shared, &envelope) {
            tracing::warn!(peer = %from, error = %e, "a transfer chunk that does not fit storage from a peer; closing its connection");
            return;
        }
        if envelope.from != from {
            tracing::warn!(peer = %from, claimed = %envelope.from, "an envelope naming another sender than the peer's hello; closing its connection");
            return;
        }
        if shared.chain.send(LoopInput::Peer(envelope)).await.is_err() {
            return;
        }
    }
}

/// A transfer chunk's range and entries as storage would write them: positions of its
/// region, in order, the entries within them (`check_envelope` cannot tell: positions are
/// storage's). Like `check_envelope`, only for a chunk built on the view's epoch, which
/// storage follows; the state machine checks every chunk again before it writes one.
fn check_chunk_range(shared: &Shared, envelope: &Envelope) -> Result<(), StorageError> {
    let Some(PeerMessage::Transfer(c)) = &envelope.body else {
        return Ok(());
    };
    let view = shared.view();
    let Some(space) = view.config.spaces.iter().find(|s| s.id == c.space) else {
        return Ok(());
    };
    if c.epoch != view.epoch() {
        return Ok(());
    }
    let range = (c.after.as_deref(), c.through.as_deref());
    shared
        .store
        .check_transfer_chunk(&space.schema.name, c.subspace, c.region, range, &c.entries)
}

/// Outgoing connections to peers, one task each.
pub struct Peers {
    me: ServerId,
    shared: Arc<Shared>,
    runtime: tokio::runtime::Handle,
    links: Mutex<HashMap<ServerId, mpsc::UnboundedSender<Bytes>>>,
}

impl Peers {
    pub fn new(shared: Arc<Shared>, runtime: tokio::runtime::Handle) -> Peers {
        Peers {
            me: shared.me,
            shared,
            runtime,
            links: Mutex::new(HashMap::new()),
        }
    }

    /// Queues `envelope` for peer `to`, connecting to it first if needed.
    pub fn send(&self, to: ServerId, envelope: &Envelope) {
        let Ok(frame) = encode(envelope) else {
            tracing::error!("an envelope did not encode");
            return;
        };
        let mut links = self.links.lock().expect("peer map");
        let tx = links.entry(to).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            self.runtime
                .spawn(peer_link(self.me, to, self.shared.clone(), rx));
            tx
        });
        let _ = tx.send(frame);
    }
}

/// Keeps a connection to `to` and writes what is queued for it. Frames queued while it is
/// down are dropped: the state machine sends again what was not acknowledged.
async fn peer_link(
    me: ServerId,
    to: ServerId,
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
) {
    while !shared.is_shutting_down() {
        let address = shared.view().config.server(to).map(|s| s.address.clone());
        let Some(address) = address else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            while rx.try_recv().is_ok() {}
            continue;
        };
        let connected = async {
            let mut framed = shared
                .dialer
                .connect(&address, codec(), PEER_CONNECT_TIMEOUT)
                .await
                .map_err(std::io::Error::other)?;
            let hello = RequestFrame {
                id: 0,
                epoch: Epoch(0),
                request: Request::PeerHello { from: me },
            };
            framed
                .send(encode_request(&hello).map_err(std::io::Error::other)?)
                .await?;
            match framed.next().await {
                Some(Ok(body)) => match decode_response(&body).map(|f| f.response) {
                    Ok(Response::Done) => Ok(framed),
                    other => Err(std::io::Error::other(format!("peer refused: {other:?}"))),
                },
                _ => Err(std::io::Error::other("peer closed during hello")),
            }
        }
        .await;
        let mut framed = match connected {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(peer = %to, error = %e, "connecting to a peer");
                tokio::time::sleep(Duration::from_millis(100)).await;
                while rx.try_recv().is_ok() {}
                continue;
            }
        };
        loop {
            let Some(frame) = rx.recv().await else { return };
            // Envelopes waiting for this link, this one included.
            shared.meter.link_backlog(to, rx.len() + 1);
            if framed.feed(frame).await.is_err() {
                break;
            }
            while let Ok(frame) = rx.try_recv() {
                if framed.feed(frame).await.is_err() {
                    break;
                }
            }
            if SinkExt::<Bytes>::flush(&mut framed).await.is_err() {
                break;
            }
            shared.meter.link_backlog(to, rx.len());
        }
    }
}
