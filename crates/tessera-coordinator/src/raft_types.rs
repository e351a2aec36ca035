//! The openraft type configuration: what a log entry carries and what applying it answers.

use std::io::Cursor;

use serde::{Deserialize, Serialize};
use tessera_types::Epoch;

use crate::state::{Command, CommandError, CommandOutcome};

openraft::declare_raft_types!(
    /// Tessera's coordinator Raft: log entries carry [`Command`]s.
    pub TypeConfig:
        D = Command,
        R = ApplyResult,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
        Responder = openraft::impls::OneshotResponder<TypeConfig>,
);

pub type NodeId = u64;
pub type Node = openraft::BasicNode;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
pub type Snapshot = openraft::Snapshot<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type Raft = openraft::Raft<TypeConfig>;

/// What applying one log entry produced, as returned to the writer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyResult {
    /// The configuration epoch right after the entry applied.
    pub epoch: Epoch,
    /// `None` for entries that carry no command (blank and membership entries).
    pub outcome: Option<Result<CommandOutcome, CommandError>>,
}
