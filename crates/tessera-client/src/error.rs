use tessera_protocol::{ErrorReply, Response, Status};

/// Why a request failed.
///
/// In cluster mode a refusal that a server would make on sight (an unknown space or
/// attribute, a predicate of the wrong type, ...) may be made by the client itself, with the
/// same status; a retryable refusal (`StaleEpoch`, `Unavailable`) is only returned once the
/// client's retries ran out (see the crate documentation).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server (or, in cluster mode, the client on its behalf) refused the request;
    /// nothing changed (see [`Status`]).
    #[error("{} ({}): {message}", status.symbol(), status.code())]
    Server {
        /// Why, as a stable status.
        status: Status,
        /// For people.
        message: String,
    },
    /// Could not connect, or the connection failed. For a write, if the request had been sent,
    /// it may or may not have been applied.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// TLS could not be set up with a daemon: it does not serve TLS, or its certificate is not
    /// signed by the authority trusted, or does not name the host dialed.
    #[error("{0}")]
    Tls(String),
    /// The connection closed before the answer arrived: the request may or may not have been
    /// applied.
    #[error("the connection closed before the answer arrived")]
    ConnectionClosed,
    /// The server sent something this client does not understand.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Cluster mode: no coordinator could be reached (or none answered) before the retries
    /// ran out. Says which addresses were tried and the last error.
    #[error("no coordinator answered: {0}")]
    NoCoordinator(String),
}

impl ClientError {
    /// The server's status, when the server refused the request.
    pub fn status(&self) -> Option<Status> {
        match self {
            ClientError::Server { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The key has no object.
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
        ClientError::Server {
            status: e.status,
            message: e.message,
        }
    }
}

/// An answer that is not one the request can have.
pub(crate) fn unexpected(response: Response) -> ClientError {
    ClientError::Protocol(format!("unexpected response {response:?}"))
}
