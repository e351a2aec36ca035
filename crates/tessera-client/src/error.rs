use tessera_protocol::{ErrorReply, Status};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server refused the request; nothing changed (see [`Status`]).
    #[error("{} ({}): {message}", status.symbol(), status.code())]
    Server { status: Status, message: String },
    /// Could not connect, or the connection failed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The connection closed before the answer arrived: the request may or may not have been
    /// applied.
    #[error("the connection closed before the answer arrived")]
    ConnectionClosed,
    /// The server sent something this client does not understand.
    #[error("protocol: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The server's status, when the server refused the request.
    pub fn status(&self) -> Option<Status> {
        match self {
            ClientError::Server { status, .. } => Some(*status),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(Status::NotFound)
    }

    /// A condition failed, the object existed (put-if-not-exist), or an atomic operation
    /// could not apply.
    pub fn is_cmp_fail(&self) -> bool {
        self.status() == Some(Status::CmpFail)
    }
}

impl From<ErrorReply> for ClientError {
    fn from(e: ErrorReply) -> Self {
        ClientError::Server { status: e.status, message: e.message }
    }
}
