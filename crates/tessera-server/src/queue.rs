//! The chain loop's inputs, and the handle everyone else queues them with.

use std::sync::Arc;

use tessera_protocol::{Configuration, ErrorReply, ModelConstants, SpaceChange};
use tessera_replication::{Envelope, KeyWrite};
use tessera_types::{Shape, SpaceSchema};
use tokio::sync::mpsc;

use crate::outbox::Replier;
use crate::view::ServedSpace;

/// Inputs queued for the chain loop before senders wait (backpressure).
const QUEUE_MAX: usize = 8192;

/// A configuration change a standalone server makes itself (a cluster server's come from the
/// coordinators).
#[derive(Debug)]
pub enum LocalChange {
    AddSpace(SpaceSchema),
    RmSpace(String),
    AlterSpace { name: String, change: SpaceChange },
    SetModel(ModelConstants),
}

/// What the chain loop acts on, in the order it was queued.
pub enum LoopInput {
    /// A client's write to one key, validated against `space` by its connection.
    Write {
        space: Arc<ServedSpace>,
        write: KeyWrite,
        reply: Replier,
    },
    /// A client's writes to several keys (`Request::WriteKeys`), each as its own `Write`;
    /// answered once every one of them is, with their outcomes in order.
    Writes {
        space: Arc<ServedSpace>,
        writes: Vec<KeyWrite>,
        reply: Replier,
    },
    /// Standalone only: a configuration change the server makes itself, answered once the
    /// new configuration is installed.
    Change {
        change: LocalChange,
        reply: Replier,
    },
    /// An envelope from a peer, checked by the connection it came on.
    Peer(Envelope),
    /// A configuration from the coordinators, checked.
    Config(Arc<Configuration>),
    /// The coordinators' answer to registering a shape of document (`crate::shapes`).
    ShapeRegistered {
        space: String,
        shape: Shape,
        result: Result<(), ErrorReply>,
    },
    /// Time passes (the state machine retransmits what its peers did not acknowledge).
    Tick,
    /// The fsync thread made durable every batch the loop wrote before it asked for sync
    /// `upto` (`chain.rs`), or failed to.
    Synced {
        upto: u64,
        result: Result<(), String>,
    },
    Stop,
}

impl LoopInput {
    /// The client waiting for this input's answer, if one is.
    fn into_replier(self) -> Option<Replier> {
        match self {
            LoopInput::Write { reply, .. }
            | LoopInput::Writes { reply, .. }
            | LoopInput::Change { reply, .. } => Some(reply),
            LoopInput::Peer(_)
            | LoopInput::Config(_)
            | LoopInput::ShapeRegistered { .. }
            | LoopInput::Tick
            | LoopInput::Synced { .. }
            | LoopInput::Stop => None,
        }
    }
}

/// The handle on the chain loop.
#[derive(Clone)]
pub struct ChainSender(mpsc::Sender<LoopInput>);

impl ChainSender {
    /// Queues an input; waits while the queue is full. If the loop has stopped, gives back
    /// the client waiting for the input's answer (if one is), to be told.
    pub async fn send(&self, input: LoopInput) -> Result<(), Option<Replier>> {
        self.0.send(input).await.map_err(|e| e.0.into_replier())
    }

    /// [`ChainSender::send`] from a thread outside the runtime (the blocking pool).
    pub fn blocking_send(&self, input: LoopInput) -> Result<(), Option<Replier>> {
        self.0.blocking_send(input).map_err(|e| e.0.into_replier())
    }

    /// Queues a tick unless the queue is full (then the loop is busy and a tick can wait).
    /// `false` once the loop has stopped.
    pub fn tick(&self) -> bool {
        !matches!(
            self.0.try_send(LoopInput::Tick),
            Err(mpsc::error::TrySendError::Closed(_))
        )
    }

    /// Asks the loop to stop once what it has is answered (`chain`'s `finished_stopping`).
    pub fn close(&self) {
        let _ = self.0.try_send(LoopInput::Stop);
    }

    /// Resolves once the loop has stopped (and takes no more input).
    pub async fn closed(&self) {
        self.0.closed().await;
    }
}

pub fn channel() -> (ChainSender, mpsc::Receiver<LoopInput>) {
    let (tx, rx) = mpsc::channel(QUEUE_MAX);
    (ChainSender(tx), rx)
}
