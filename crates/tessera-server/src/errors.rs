//! Why a server could not start, and how storage failures reach clients.

use std::path::PathBuf;

use tessera_protocol::{ErrorReply, Status};
use tessera_storage::StorageError;

/// Why a server could not start or had to stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The listening address could not be bound.
    #[error("cannot listen on {address}: {error}{hint}", hint = if error.kind() == std::io::ErrorKind::AddrInUse { " (another tessera running there? stop it, or give another --listen)" } else { "" })]
    Listen {
        address: std::net::SocketAddr,
        error: std::io::Error,
    },
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    /// The data directory is of a format this build does not read (newer, or too old).
    #[error("{0}")]
    DataFormat(#[from] tessera_protocol::data_format::DataFormatError),
    #[error("configuration file {path} is corrupt: {reason}")]
    CorruptConfig { path: PathBuf, reason: String },
    /// Joining the cluster failed (no coordinator answered, a bad advertised address, ...).
    #[error("cluster: {0}")]
    Cluster(String),
}

/// A storage error as a client sees it.
pub fn storage_error(e: StorageError) -> ErrorReply {
    match e {
        StorageError::Poisoned => read_only("the store is poisoned"),
        StorageError::UnknownSpace(s) => {
            ErrorReply::new(Status::UnknownSpace, format!("no space named {s:?}"))
        }
        other => ErrorReply::new(Status::Internal, format!("storage: {other}")),
    }
}

/// What every write gets once the server has stopped taking writes (fail-stop): the write that
/// met the failure, and every one after it.
pub fn read_only(cause: impl std::fmt::Display) -> ErrorReply {
    ErrorReply::new(
        Status::ReadOnly,
        format!("the server stopped accepting writes after a storage failure ({cause}); check its disk and restart it"),
    )
}
