//! How a command fails, and so how `tessera` exits: 1 for "not found" and "condition failed",
//! 2 for the rest (`main` prints the message on stderr).

use tessera_client::{ClientError, Status};

/// How a command failed: exit 1 for "not found" and "condition failed", 2 for the rest.
pub(crate) enum Failure {
    Negative(String),
    Error(String),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e.status() {
            Some(Status::NotFound | Status::CmpFail) => Failure::Negative(e.to_string()),
            _ => Failure::Error(e.to_string()),
        }
    }
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Error(e)
    }
}
