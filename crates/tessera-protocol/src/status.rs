//! Typed outcomes. Every error a server sends has a stable status code, a symbol and a
//! human message; clients map statuses to their own error types.

use serde::{Deserialize, Serialize};
use tessera_types::funcall::FuncallCheckError;
use tessera_types::predicate::PredicateError;
use tessera_types::{DocumentError, SortError};

/// Why a request did not succeed. Codes are stable: they are part of the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Status {
    /// The key has no object.
    NotFound,
    /// A condition did not hold, an object already existed for put-if-not-exist, or an atomic
    /// operation could not apply to the stored value (overflow, division by zero). Nothing
    /// changed.
    CmpFail,
    /// No space of that name.
    UnknownSpace,
    /// add-space of a name that exists.
    SpaceExists,
    /// The request names an attribute the space does not have.
    UnknownAttribute,
    /// A value does not have the type its attribute needs, or an operation or predicate does
    /// not apply to the attribute's type.
    WrongType,
    /// A space description that does not parse or is not a valid space.
    BadDescription,
    /// A predicate that is not valid (a regex that does not compile, for instance).
    BadPredicate,
    /// A key, object, description or request over its documented limit.
    TooLarge,
    /// A frame that could not be decoded.
    Malformed,
    /// A frame of a protocol version this server does not speak, or plain frames sent to a port
    /// that speaks TLS.
    UnsupportedProtocol,
    /// The request was built on an older configuration; fetch the new one and retry.
    StaleEpoch,
    /// The server stopped accepting writes after a storage failure (it needs a restart and an
    /// operator's look at its disk). Reads may still work.
    ReadOnly,
    /// The server is shutting down or overloaded; retry elsewhere or later.
    Unavailable,
    /// A bug or an unexpected storage error; the message says more.
    Internal,
    /// A space asks for more replicas (tolerated failures + 1) than the cluster has servers.
    TooFewServers,
    /// No outcome in time, or the server that ordered a write lost that role before the write
    /// finished: a write may or may not have been applied (read the key to find out; do not
    /// blindly resend a write that is not idempotent).
    Timeout,
    /// To a server, from the coordinators: they know this server by a newer incarnation (it
    /// restarted since this process registered), so this process must not act as that server.
    StaleServer,
    /// An alter-space change that cannot apply to the space as it stands (a subspace that
    /// exists already, one still being built, a subspace id that names none). Nothing changed.
    BadAlteration,
    /// The connection's token is missing, unknown or revoked, or its role does not allow the
    /// request; or a connection that did not prove the cluster secret sent a cluster message.
    /// Nothing changed.
    Unauthorized,
    /// To a get at a replica of the key's region where an update of the key is still pending:
    /// answering would mean waiting for that update to reach the chain's tail and come back.
    /// The key region's last replica, nearest the tail, answers without that wait; the cluster
    /// client asks it at once. Never sent by that last replica, nor by a standalone server.
    UpdatePending,
}

impl Status {
    /// Whether a group delete or group update skips an object whose conditional write was
    /// refused with this status — deleted meanwhile, no longer matching or the operation
    /// cannot apply to it, or the update would make it too large — rather than stopping there.
    /// The one rule of both executors: a standalone server's and a cluster client's.
    pub fn skipped_by_group_write(self) -> bool {
        matches!(self, Status::NotFound | Status::CmpFail | Status::TooLarge)
    }

    /// The stable numeric code.
    pub fn code(self) -> u16 {
        match self {
            Status::NotFound => 8001,
            Status::CmpFail => 8002,
            Status::UnknownSpace => 8003,
            Status::SpaceExists => 8004,
            Status::UnknownAttribute => 8005,
            Status::WrongType => 8006,
            Status::BadDescription => 8007,
            Status::BadPredicate => 8008,
            Status::TooLarge => 8009,
            Status::Malformed => 8010,
            Status::UnsupportedProtocol => 8011,
            Status::StaleEpoch => 8012,
            Status::ReadOnly => 8013,
            Status::Unavailable => 8014,
            Status::Internal => 8015,
            Status::TooFewServers => 8016,
            Status::Timeout => 8017,
            Status::StaleServer => 8018,
            Status::BadAlteration => 8019,
            Status::Unauthorized => 8020,
            Status::UpdatePending => 8021,
        }
    }

    /// The stable symbol, in the style of HyperDex's status names.
    pub fn symbol(self) -> &'static str {
        match self {
            Status::NotFound => "NOTFOUND",
            Status::CmpFail => "CMPFAIL",
            Status::UnknownSpace => "UNKNOWNSPACE",
            Status::SpaceExists => "DUPLICATE",
            Status::UnknownAttribute => "UNKNOWNATTR",
            Status::WrongType => "WRONGTYPE",
            Status::BadDescription => "BADDESCRIPTION",
            Status::BadPredicate => "BADPREDICATE",
            Status::TooLarge => "TOOLARGE",
            Status::Malformed => "MALFORMED",
            Status::UnsupportedProtocol => "BADPROTOCOL",
            Status::StaleEpoch => "RECONFIGURE",
            Status::ReadOnly => "READONLY",
            Status::Unavailable => "UNAVAILABLE",
            Status::Internal => "INTERNAL",
            Status::TooFewServers => "TOOFEWSERVERS",
            Status::Timeout => "TIMEOUT",
            Status::StaleServer => "STALESERVER",
            Status::BadAlteration => "BADALTER",
            Status::Unauthorized => "UNAUTHORIZED",
            Status::UpdatePending => "PENDING",
        }
    }

    /// Whether the same request may succeed if simply sent again (after refreshing the
    /// configuration, for [`Status::StaleEpoch`]).
    pub fn is_retryable(self) -> bool {
        matches!(self, Status::StaleEpoch | Status::Unavailable)
    }
}

/// An error as it travels: a status and a message for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{} ({}): {message}", status.symbol(), status.code())]
pub struct ErrorReply {
    pub status: Status,
    pub message: String,
}

impl ErrorReply {
    pub fn new(status: Status, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            status,
            message: message.into(),
        }
    }
}

/// The status a predicate's refusal travels with, the same from a server and from a client
/// that checks before it sends.
pub fn predicate_status(e: &PredicateError) -> Status {
    match e {
        PredicateError::UnknownAttribute(_) => Status::UnknownAttribute,
        PredicateError::WrongType { .. }
        | PredicateError::NotApplicable { .. }
        | PredicateError::BadOperand { .. } => Status::WrongType,
        PredicateError::TooMany(_) => Status::TooLarge,
        PredicateError::BadPath(d) if is_size(d) => Status::TooLarge,
        _ => Status::BadPredicate,
    }
}

/// The status an update's refusal travels with.
pub fn funcall_status(e: &FuncallCheckError) -> Status {
    match e {
        FuncallCheckError::UnknownAttribute(_) => Status::UnknownAttribute,
        FuncallCheckError::TooMany(_) => Status::TooLarge,
        FuncallCheckError::BadDocument(d) if is_size(d) => Status::TooLarge,
        // An atomic operation that cannot apply to its attribute fails its comparison, as an
        // overflow does (HyperDex's convention); a plain value of the wrong type is WRONGTYPE.
        e if e.is_atomic_mismatch() => Status::CmpFail,
        _ => Status::WrongType,
    }
}

/// The status a sorted search's refusal of its sort attribute travels with.
pub fn sort_status(e: &SortError) -> Status {
    match e {
        SortError::UnknownAttribute(_) => Status::UnknownAttribute,
        SortError::NotSortable(_) => Status::WrongType,
        SortError::BadPath(_) => Status::BadPredicate,
    }
}

/// Whether a document is refused for its size (depth, path length, property count) rather
/// than its content.
fn is_size(e: &DocumentError) -> bool {
    matches!(
        e,
        DocumentError::TooDeep { .. }
            | DocumentError::PathTooLong(_)
            | DocumentError::TooManyProperties(_)
            | DocumentError::ShapeTooLarge(_)
    )
}
