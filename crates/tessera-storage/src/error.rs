//! Why a storage operation failed: the error every fallible call of the store returns.

/// Why a storage operation failed.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum StorageError {
    /// The file system failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The engine failed for another reason (bad journal, ...).
    #[error("storage engine error: {0}")]
    Engine(fjall::Error),
    /// Another process has the data directory open.
    #[error(
        "{0} is in use by another process (another tessera dev or server on the same --data-dir?)"
    )]
    InUse(std::path::PathBuf),
    /// Stored bytes do not decode: the disk or a bug corrupted them.
    #[error("corrupt storage: {0}")]
    Corrupt(String),
    /// No space of that name.
    #[error("unknown space {0:?}")]
    UnknownSpace(String),
    /// `create_space` of a name that exists.
    #[error("space {0:?} exists")]
    SpaceExists(String),
    /// The request does not fit the space's schema (wrong key type, object shape, subspace,
    /// region or box dimensions). Nothing was written.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A write or fsync failed earlier: the store refuses writes until the process restarts.
    #[error("storage is poisoned by an earlier failed write or fsync; restart to recover")]
    Poisoned,
}

impl From<fjall::Error> for StorageError {
    fn from(e: fjall::Error) -> StorageError {
        match e {
            fjall::Error::Poisoned => StorageError::Poisoned,
            fjall::Error::Io(io) => StorageError::Io(io),
            other => StorageError::Engine(other),
        }
    }
}
