//! Tessera's wire protocol, spoken by clients and servers (and, later, along chains).
//!
//! A connection carries *frames*: a 4-byte big-endian length, then a body. A body is
//! [`PROTOCOL_VERSION`] (one byte) followed by a postcard-encoded [`RequestFrame`] or
//! [`ResponseFrame`]. Every frame carries a request id, chosen by the client, so many requests
//! can be in flight on one connection and their responses may come back in any order
//! (pipelining). Every frame carries an epoch: the configuration the sender acts on.
//!
//! A request gets exactly one response, except a search, which gets zero or more
//! [`Response::SearchItems`] frames and then one [`Response::SearchDone`] (or an error), all
//! with the request's id.
//!
//! Frames larger than [`constants::FRAME_BYTES_MAX`] are refused: the receiver closes the
//! connection, because it can no longer find the next frame boundary safely.

#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
pub mod constants;
pub mod credentials;
pub mod data_format;
pub mod format1;
#[cfg(feature = "frame")]
pub mod frame;
#[cfg(feature = "frame")]
pub mod handshake;
#[cfg(feature = "frame")]
pub mod listener;
pub mod message;
pub mod space_map;
pub mod status;
#[cfg(feature = "frame")]
pub mod tls;
pub mod trace;

pub use auth::{Access, Admission, ClusterSecret, Gate, Policy, Role, Session, TokenTable};
pub use config::{
    check_fence, Adaptation, AdaptationEvent, AdaptationRecord, AdaptationStep, AlterError,
    BackfillRef, Build, Configuration, ConfigurationError, Joined, ModelConstants, RestingPlace,
    ServerInfo, ServerState, ShapeEntry, SpaceChange, SpaceConfig, Transfer, TransferRef,
    ABANDON_WHY_MAX, ADAPTATIONS_KEPT,
};
#[cfg(feature = "frame")]
pub use frame::{
    codec, decode_request, decode_response, encode_request, encode_response, FrameError,
    SearchItemsBuilder, PROTOCOL_VERSION,
};
pub use message::{
    CoordinatorStatus, ExplainedPart, Explanation, HeartbeatReply, KeyRegionLoad, KeysChange,
    RegionCount, RegionsOf, Request, RequestFrame, Response, ResponseFrame, SearchAnswer,
    ServerLiveness, SortOrder, SpaceStatistics, WireObject, WriteMode, PATH_STATISTICS_MAX,
};
pub use space_map::SpaceMap;
pub use status::{funcall_status, predicate_status, sort_status, ErrorReply, Status};
pub use trace::{
    process_cpu_seconds, Constraint, RequestShape, ServerWork, ShapeCount, SpaceTrace, WorkDone,
};
