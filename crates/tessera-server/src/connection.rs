//! Connections: framing, validation, dispatch, and batched response writing.
//!
//! Each connection has a reader (this module's [`serve`]) and a writer task. The reader
//! decodes each frame, validates the request against the current schema — so the write loop
//! only ever sees well-typed work — and either answers it (reads), hands it to the write
//! loop, or runs it on the blocking pool (searches). Responses reach the writer task through a
//! bounded queue; it writes every response that is ready and flushes once (write batching).
//!
//! A frame that decodes badly but arrived whole is answered with `Malformed` and the
//! connection goes on: its length prefix still marks where the next frame starts. A frame
//! over the size limit, or of another protocol version, is answered and the connection is
//! closed, because nothing after it can be trusted. At most [`IN_FLIGHT_MAX`] requests of
//! one connection are in progress at once; the reader stops reading until one completes.
//! Of those, at most [`SEARCHES_IN_FLIGHT_MAX`] are searches: a search holds a thread of the
//! blocking pool while it waits for its client to read, so a client that pipelines searches
//! and reads nothing must not take every such thread from everyone else.

use std::ops::ControlFlow;
use std::sync::Arc;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tessera_protocol::constants::{DESCRIPTION_BYTES_MAX, SEARCH_BATCH_BYTES};
use tessera_protocol::frame::peek_request_id;
use tessera_protocol::{
    codec, decode_request, encode_response, ErrorReply, FrameError, Request, RequestFrame, Response,
    ResponseFrame, Status,
};
use tessera_types::constants::KEY_BYTES_MAX;
use tessera_types::funcall::FuncallCheckError;
use tessera_types::predicate::PredicateError;
use tessera_geometry::{RegionIndex, SearchBox};
use tessera_replication::KeyWrite;
use tessera_storage::StoredObject;
use tessera_types::{parse_space, CheckedFuncall, CheckedPredicate, Epoch, Predicate, SubspaceId, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::cluster::{self, LoopInput};
use crate::reads;
use crate::state::{ServedSpace, Shared, Writes};
use crate::writer::{WriteJob, WriteRequest};

/// Requests of one connection in progress at once.
pub const IN_FLIGHT_MAX: usize = 1024;

/// Searches of one connection in progress at once (each holds a blocking-pool thread, of
/// which tokio has 512 by default).
pub const SEARCHES_IN_FLIGHT_MAX: usize = 16;

/// Encoded responses queued for one connection's writer task.
const OUTBOX_FRAMES: usize = 1024;

/// Accepts connections until aborted; aborting it aborts every connection it accepted (they
/// live in its `JoinSet`), so a stopped server lets go of its store.
pub async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        match listener.accept().await {
            Ok((stream, peer)) => {
                tracing::debug!(%peer, "connection");
                connections.spawn(serve(shared.clone(), stream));
            }
            Err(e) => {
                // Out of file descriptors, typically: wait instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// Where a connection's responses go.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Bytes>,
    runtime: tokio::runtime::Handle,
    /// The connection's search slots ([`SEARCHES_IN_FLIGHT_MAX`]).
    searches: Arc<Semaphore>,
}

impl Outbox {
    fn frame(id: u64, epoch: Epoch, response: Response) -> Bytes {
        let frame = ResponseFrame { id, epoch, response };
        encode_response(&frame).unwrap_or_else(|e| {
            let error = ErrorReply::new(Status::Internal, format!("encoding the response: {e}"));
            encode_response(&ResponseFrame { id, epoch, response: Response::Error(error) })
                .expect("an error response always encodes")
        })
    }

    /// Queues a response without ever blocking the caller (the write loop must not wait for
    /// a slow client). Memory stays bounded by the connection's in-flight limit: a response
    /// that waits for room keeps its request's in-flight `permit` until it is queued, so a
    /// client that does not read its answers stops being read.
    fn send_nowait(&self, id: u64, epoch: Epoch, response: Response, permit: Option<OwnedSemaphorePermit>) {
        self.send_all_nowait(vec![Self::frame(id, epoch, response)], permit);
    }

    /// Queues frames in order without blocking: those that find no room are sent, still in
    /// order, by a task that waits for it.
    fn send_all_nowait(&self, frames: Vec<Bytes>, permit: Option<OwnedSemaphorePermit>) {
        let mut frames = frames.into_iter();
        while let Some(frame) = frames.next() {
            match self.tx.try_send(frame) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Closed(_)) => return,
                Err(mpsc::error::TrySendError::Full(first)) => {
                    let tx = self.tx.clone();
                    self.runtime.spawn(async move {
                        for frame in std::iter::once(first).chain(frames) {
                            if tx.send(frame).await.is_err() {
                                break;
                            }
                        }
                        drop(permit);
                    });
                    return;
                }
            }
        }
    }

    /// Queues a response from a blocking thread, waiting while the client is slow to read
    /// (searches stream this way, so a slow reader slows its own search, nobody else).
    /// Fails when the client is gone.
    fn send_blocking(&self, id: u64, epoch: Epoch, response: Response) -> Result<(), ()> {
        self.tx.blocking_send(Self::frame(id, epoch, response)).map_err(|_| ())
    }
}

/// The right to answer one request. Answering releases the connection's in-flight slot.
pub struct Replier {
    id: u64,
    outbox: Outbox,
    permit: OwnedSemaphorePermit,
}

impl Replier {
    pub fn send(self, epoch: Epoch, response: Response) {
        self.outbox.send_nowait(self.id, epoch, response, Some(self.permit));
    }
}

async fn write_frames(stream: tokio::net::tcp::OwnedWriteHalf, mut rx: mpsc::Receiver<Bytes>) {
    let mut sink = FramedWrite::new(stream, codec());
    while let Some(frame) = rx.recv().await {
        if sink.feed(frame).await.is_err() {
            return;
        }
        while let Ok(frame) = rx.try_recv() {
            if sink.feed(frame).await.is_err() {
                return;
            }
        }
        if SinkExt::<Bytes>::flush(&mut sink).await.is_err() {
            return;
        }
    }
}

pub async fn serve(shared: Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let (read_half, write_half) = stream.into_split();
    let (tx, rx) = mpsc::channel(OUTBOX_FRAMES);
    let writer = tokio::spawn(write_frames(write_half, rx));
    let outbox = Outbox {
        tx,
        runtime: tokio::runtime::Handle::current(),
        searches: Arc::new(Semaphore::new(SEARCHES_IN_FLIGHT_MAX)),
    };
    let permits = Arc::new(Semaphore::new(IN_FLIGHT_MAX));
    let mut frames = FramedRead::new(read_half, codec());
    while let Some(frame) = frames.next().await {
        let permit = permits.clone().acquire_owned().await.expect("never closed");
        let epoch = shared.view().epoch();
        let body = match frame {
            Ok(body) => body,
            Err(e) => {
                // Over the frame limit, or the stream failed: the frame boundary is lost.
                if e.kind() == std::io::ErrorKind::InvalidData {
                    let error = ErrorReply::new(Status::TooLarge, format!("frame refused: {e}"));
                    outbox.send_nowait(0, epoch, Response::Error(error), None);
                }
                break;
            }
        };
        match decode_request(&body) {
            Ok(RequestFrame { id, request: Request::PeerHello { from }, .. }) => {
                if let Writes::Cluster(chain) = &shared.writes {
                    // From now on this connection carries a peer's chain messages.
                    tracing::debug!(peer = %from, "peer connected");
                    outbox.send_nowait(id, epoch, Response::Done, Some(permit));
                    drop(outbox);
                    cluster::serve_peer(frames, chain.clone()).await;
                    let _ = writer.await;
                    return;
                }
                let error = ErrorReply::new(Status::Malformed, "this server runs standalone: it has no peers");
                outbox.send_nowait(id, epoch, Response::Error(error), Some(permit));
            }
            Ok(frame) => {
                let replier = Replier { id: frame.id, outbox: outbox.clone(), permit };
                dispatch(&shared, frame, replier).await;
            }
            Err(FrameError::UnsupportedVersion(v)) => {
                let error = ErrorReply::new(
                    Status::UnsupportedProtocol,
                    format!("protocol version {v} is not spoken here (this server speaks {})", tessera_protocol::PROTOCOL_VERSION),
                );
                outbox.send_nowait(0, epoch, Response::Error(error), None);
                break;
            }
            Err(e) => {
                let id = peek_request_id(&body).unwrap_or(0);
                let error = ErrorReply::new(Status::Malformed, format!("could not decode the request: {e}"));
                outbox.send_nowait(id, epoch, Response::Error(error), Some(permit));
            }
        }
    }
    drop(outbox);
    // The writer task ends once every in-flight request has been answered (or dropped).
    let _ = writer.await;
}

fn predicate_error(e: PredicateError) -> ErrorReply {
    let status = match &e {
        PredicateError::UnknownAttribute(_) => Status::UnknownAttribute,
        PredicateError::WrongType { .. } | PredicateError::NotApplicable { .. } => Status::WrongType,
        PredicateError::BadRegex { .. } => Status::BadPredicate,
        PredicateError::TooMany(_) => Status::TooLarge,
        _ => Status::BadPredicate,
    };
    ErrorReply::new(status, e.to_string())
}

fn funcall_error(e: FuncallCheckError) -> ErrorReply {
    let status = match &e {
        FuncallCheckError::UnknownAttribute(_) => Status::UnknownAttribute,
        FuncallCheckError::TooMany(_) => Status::TooLarge,
        // An atomic operation that cannot apply to its attribute fails its comparison, as an
        // overflow does (HyperDex's convention); a plain value of the wrong type is WRONGTYPE.
        e if e.is_atomic_mismatch() => Status::CmpFail,
        _ => Status::WrongType,
    };
    ErrorReply::new(status, e.to_string())
}

/// The key, converted to the space's key type and within the size limit.
fn check_key(space: &ServedSpace, key: Value) -> Result<Value, ErrorReply> {
    let schema = &space.config.schema;
    let ty = schema.key().ty;
    let given = key.kind_name();
    let key = ty.coerce(key).ok_or_else(|| {
        ErrorReply::new(Status::WrongType, format!("the key of space {:?} is a {ty}, not a {given}", schema.name))
    })?;
    if let Value::String(s) = &key {
        if s.len() > KEY_BYTES_MAX {
            return Err(ErrorReply::new(
                Status::TooLarge,
                format!("a key of {} bytes is over the {KEY_BYTES_MAX}-byte limit", s.len()),
            ));
        }
    }
    Ok(key)
}

fn check_predicates(space: &ServedSpace, predicates: &[Predicate]) -> Result<Vec<CheckedPredicate>, ErrorReply> {
    CheckedPredicate::check_all(&space.config.schema, predicates).map_err(predicate_error)
}

async fn dispatch(shared: &Arc<Shared>, frame: RequestFrame, replier: Replier) {
    let view = shared.view();
    let epoch = view.epoch();
    if frame.epoch > epoch {
        let error = ErrorReply::new(
            Status::StaleEpoch,
            format!("request built on epoch {} but this server is at {epoch}; retry", frame.epoch),
        );
        return replier.send(epoch, Response::Error(error));
    }
    if shared.is_shutting_down() {
        return replier.send(epoch, Response::Error(ErrorReply::new(Status::Unavailable, "shutting down")));
    }
    if shared.is_cluster() {
        let refused = match &frame.request {
            Request::AddSpace { .. } | Request::RmSpace { .. } => Some("send space changes to a coordinator"),
            Request::Search { .. }
            | Request::Count { .. }
            | Request::SortedSearch { .. }
            | Request::GroupDel { .. }
            | Request::GroupUpdate { .. }
            | Request::Explain { .. } => {
                Some("searches go through a cluster client, which sends each server its regions (SearchRegions)")
            }
            _ => None,
        };
        if let Some(why) = refused {
            return replier.send(epoch, Response::Error(cluster::not_here(why)));
        }
    }
    let space = |name: &str| view.space(name);
    let job = match frame.request {
        Request::GetConfig => return replier.send(epoch, Response::Config(Box::new((*view.config).clone()))),
        Request::Get { space: name, key } => {
            let result = space(&name)
                .and_then(|s| Ok((check_key(&s, key)?, s)))
                .and_then(|(key, s)| {
                    // Only the point leader answers: it alone knows the key's committed state
                    // in this epoch (DESIGN §5, reads).
                    let leader = s.point_leader(&key);
                    if leader != shared.me {
                        return Err(ErrorReply::new(
                            Status::StaleEpoch,
                            format!("server {leader} leads that key in epoch {epoch}; refresh the configuration"),
                        ));
                    }
                    reads::get(&shared.store, &s, &key)
                });
            return replier.send(epoch, result.map_or_else(Response::Error, Response::Object));
        }
        Request::Explain { space: name, predicates } => {
            let result = space(&name).and_then(|s| Ok(reads::explain(&s, &check_predicates(&s, &predicates)?)));
            return replier.send(epoch, result.map_or_else(Response::Error, Response::Explain));
        }
        Request::Search { .. } | Request::Count { .. } | Request::SortedSearch { .. } | Request::SearchRegions { .. } => {
            let space = view.space(frame.request.space().expect("names a space"));
            let Some((request, replier)) = search_inline(shared, &space, frame.request, replier) else {
                return;
            };
            // Waits (and so stops reading this connection) while its searches are all busy.
            let slot = replier.outbox.searches.clone().acquire_owned().await.expect("never closed");
            return search(shared, space, request, replier, slot);
        }
        Request::AddSpace { description } => {
            if description.len() > DESCRIPTION_BYTES_MAX {
                Err(ErrorReply::new(Status::TooLarge, format!("descriptions are at most {DESCRIPTION_BYTES_MAX} bytes")))
            } else {
                parse_space(&description)
                    .map(|schema| WriteJob::AddSpace { schema })
                    .map_err(|e| ErrorReply::new(Status::BadDescription, e.to_string()))
            }
        }
        Request::RmSpace { name } => Ok(WriteJob::RmSpace { name }),
        Request::RegisterServer { .. }
        | Request::Heartbeat { .. }
        | Request::WaitConfig { .. }
        | Request::CoordinatorStatus => {
            let error = ErrorReply::new(Status::Malformed, "this is a server; that request is for a coordinator");
            return replier.send(epoch, Response::Error(error));
        }
        Request::PeerHello { .. } => unreachable!("answered by serve"),
        Request::Put { space: name, key, mode, conditions, funcalls } => (|| {
            let space = space(&name)?;
            let key = check_key(&space, key)?;
            let conditions = check_predicates(&space, &conditions)?;
            let funcalls =
                CheckedFuncall::check_all(&space.config.schema, &funcalls).map_err(funcall_error)?;
            Ok(WriteJob::Put { space, key, mode, conditions, funcalls })
        })(),
        Request::Del { space: name, key, conditions } => (|| {
            let space = space(&name)?;
            let key = check_key(&space, key)?;
            let conditions = check_predicates(&space, &conditions)?;
            Ok(WriteJob::Del { space, key, conditions })
        })(),
        Request::GroupDel { space: name, predicates } => (|| {
            let space = space(&name)?;
            let predicates = check_predicates(&space, &predicates)?;
            Ok(WriteJob::GroupDel { space, predicates })
        })(),
        Request::GroupUpdate { space: name, predicates, funcalls } => {
            let job = (|| {
                let space = space(&name)?;
                let predicates = check_predicates(&space, &predicates)?;
                match CheckedFuncall::check_all(&space.config.schema, &funcalls) {
                    Ok(funcalls) => Ok(Some(WriteJob::GroupUpdate { space, predicates, funcalls })),
                    // A group update skips the objects its operations cannot apply to; one
                    // that fits no object's type applies to none.
                    Err(e) if e.is_atomic_mismatch() => Ok(None),
                    Err(e) => Err(funcall_error(e)),
                }
            })();
            match job {
                Ok(None) => return replier.send(epoch, Response::Count(0)),
                other => other.map(|j| j.expect("Some: None answered above")),
            }
        }
    };
    match job {
        Err(e) => replier.send(epoch, Response::Error(e)),
        Ok(job) => {
            let shutting_down = || ErrorReply::new(Status::Unavailable, "the server is shutting down");
            match &shared.writes {
                Writes::Standalone(writes) => {
                    if let Err(rejected) = writes.send(WriteRequest { job, reply: replier }).await {
                        rejected.reply.send(epoch, Response::Error(shutting_down()));
                    }
                }
                Writes::Cluster(chain) => {
                    let (space, write) = match job {
                        WriteJob::Put { space, key, mode, conditions, funcalls } => {
                            (space, KeyWrite::Put { key, mode, conditions, funcalls })
                        }
                        WriteJob::Del { space, key, conditions } => (space, KeyWrite::Del { key, conditions }),
                        _ => unreachable!("a cluster server refuses every other write above"),
                    };
                    let input = LoopInput::Write { space: space.config.schema.name.clone(), write, reply: replier };
                    if let Err(LoopInput::Write { reply, .. }) = chain.send(input).await {
                        reply.send(epoch, Response::Error(shutting_down()));
                    }
                }
            }
        }
    }
}

/// Search, count and sorted search run on the blocking pool: they may read many objects.
/// Most matches a search answered on the connection's task may have; past it the search starts
/// again on the blocking pool, which streams with backpressure.
const INLINE_MATCHES_MAX: usize = 256;

/// Answers a search or count that names a single point of a subspace right here, without the
/// hand-off to the blocking pool (which cost a search four thread switches: docs/benchmarks.md).
/// Gives the request back if it is not such a search or has too many matches.
fn search_inline(
    shared: &Shared,
    space: &Result<Arc<ServedSpace>, ErrorReply>,
    request: Request,
    replier: Replier,
) -> Option<(Request, Replier)> {
    let Ok(space) = space else { return Some((request, replier)) };
    let mut found = Vec::new();
    let mut collect = |o| {
        found.push(o);
        if found.len() > INLINE_MATCHES_MAX {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let scanned = match &request {
        Request::Search { predicates, .. } | Request::Count { predicates, .. } => {
            let Ok(checked) = check_predicates(space, predicates) else { return Some((request, replier)) };
            let plan = reads::plan(space, &checked);
            if !reads::is_point_search(&plan) {
                return Some((request, replier));
            }
            reads::for_each_match_planned(&shared.store, space, &plan, &checked, &mut collect)
        }
        // A cluster client's share of a point search: one region, one cell.
        Request::SearchRegions { predicates, subspace, regions, .. } => {
            let Ok(checked) = check_predicates(space, predicates) else { return Some((request, replier)) };
            let Ok(regions) = check_regions(space, *subspace, regions) else { return Some((request, replier)) };
            let Some(search_box) = SearchBox::for_predicates(&space.config.schema, *subspace, &checked) else {
                return Some((request, replier));
            };
            if !search_box.is_point() {
                return Some((request, replier));
            }
            reads::for_each_match_in(&shared.store, space, *subspace, &search_box, &regions, &checked, &mut collect)
        }
        _ => return Some((request, replier)),
    };
    if found.len() > INLINE_MATCHES_MAX {
        return Some((request, replier));
    }
    let epoch = shared.view().epoch();
    match (scanned, request) {
        (Err(e), _) => replier.send(epoch, Response::Error(e)),
        (Ok(()), Request::Count { .. }) => replier.send(epoch, Response::Count(found.len() as u64)),
        (Ok(()), _) => {
            let mut frames = Vec::with_capacity(2);
            if !found.is_empty() {
                let items = Response::SearchItems(found.into_iter().map(reads::wire).collect());
                frames.push(Outbox::frame(replier.id, epoch, items));
            }
            frames.push(Outbox::frame(replier.id, epoch, Response::SearchDone));
            replier.outbox.send_all_nowait(frames, Some(replier.permit));
        }
    }
    None
}

fn search(
    shared: &Arc<Shared>,
    space: Result<Arc<ServedSpace>, ErrorReply>,
    request: Request,
    replier: Replier,
    slot: OwnedSemaphorePermit,
) {
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let epoch = shared.view().epoch();
        let store = &shared.store;
        let outcome = (|| -> Result<Option<Response>, ErrorReply> {
            let space = space?;
            match request {
                Request::Count { predicates, .. } => {
                    Ok(Some(Response::Count(reads::count(store, &space, &check_predicates(&space, &predicates)?)?)))
                }
                Request::SortedSearch { predicates, sort_by, limit, order, .. } => {
                    let predicates = check_predicates(&space, &predicates)?;
                    let schema = &space.config.schema;
                    let attr = schema.attribute_index(&sort_by).ok_or_else(|| {
                        ErrorReply::new(Status::UnknownAttribute, format!("unknown attribute {sort_by:?}"))
                    })?;
                    if !schema.attribute(attr).ty.is_primitive() {
                        return Err(ErrorReply::new(
                            Status::WrongType,
                            format!("cannot sort by {sort_by:?}: only string, int and float attributes sort"),
                        ));
                    }
                    let found = reads::sorted_search(store, &space, &predicates, attr, limit as usize, order)?;
                    for chunk in found.chunks(256) {
                        if replier.outbox.send_blocking(replier.id, epoch, Response::SearchItems(chunk.to_vec())).is_err() {
                            return Ok(None);
                        }
                    }
                    Ok(Some(Response::SearchDone))
                }
                Request::Search { predicates, .. } => {
                    let predicates = check_predicates(&space, &predicates)?;
                    stream(&replier, epoch, |f| reads::for_each_match(store, &space, &predicates, f))
                }
                Request::SearchRegions { predicates, subspace, regions, .. } => {
                    let predicates = check_predicates(&space, &predicates)?;
                    let regions = check_regions(&space, subspace, &regions)?;
                    let Some(search_box) = SearchBox::for_predicates(&space.config.schema, subspace, &predicates) else {
                        return Ok(Some(Response::SearchDone));
                    };
                    stream(&replier, epoch, |f| {
                        reads::for_each_match_in(store, &space, subspace, &search_box, &regions, &predicates, f)
                    })
                }
                _ => unreachable!("only searches come here"),
            }
        })();
        match outcome {
            Ok(Some(last)) => replier.send(epoch, last),
            Ok(None) => {} // the client went away mid-search
            Err(e) => replier.send(epoch, Response::Error(e)),
        }
    });
}

/// Streams the objects `scan` finds in batches of about [`SEARCH_BATCH_BYTES`], waiting while
/// the client is slow to read. `Ok(None)` when the client went away.
fn stream(
    replier: &Replier,
    epoch: Epoch,
    scan: impl FnOnce(&mut dyn FnMut(StoredObject) -> ControlFlow<()>) -> Result<(), ErrorReply>,
) -> Result<Option<Response>, ErrorReply> {
    let (mut batch, mut bytes, mut gone) = (Vec::new(), 0usize, false);
    scan(&mut |o: StoredObject| {
        bytes += postcard::experimental::serialized_size(&o.object.values).unwrap_or(0);
        batch.push(reads::wire(o));
        if bytes >= SEARCH_BATCH_BYTES {
            bytes = 0;
            let items = Response::SearchItems(std::mem::take(&mut batch));
            if replier.outbox.send_blocking(replier.id, epoch, items).is_err() {
                gone = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    })?;
    if gone {
        return Ok(None);
    }
    if !batch.is_empty() && replier.outbox.send_blocking(replier.id, epoch, Response::SearchItems(batch)).is_err() {
        return Ok(None);
    }
    Ok(Some(Response::SearchDone))
}

/// The regions a `SearchRegions` names: they exist, and this server owns every one of them.
fn check_regions(space: &ServedSpace, subspace: SubspaceId, regions: &[u32]) -> Result<Vec<RegionIndex>, ErrorReply> {
    let schema = &space.config.schema;
    let Some(t) = space.tessellations.get(subspace.get()) else {
        return Err(ErrorReply::new(
            Status::Malformed,
            format!("space {:?} has {} subspaces, not {}", schema.name, schema.subspaces.len(), subspace.get() + 1),
        ));
    };
    regions
        .iter()
        .map(|&r| {
            if r >= t.regions_count() {
                return Err(ErrorReply::new(
                    Status::Malformed,
                    format!("subspace {} of {:?} has {} regions, not {}", subspace.get(), schema.name, t.regions_count(), r + 1),
                ));
            }
            if !space.owns(subspace, RegionIndex(r)) {
                return Err(ErrorReply::new(
                    Status::StaleEpoch,
                    format!("this server does not own region {r} of subspace {} in its configuration; refresh", subspace.get()),
                ));
            }
            Ok(RegionIndex(r))
        })
        .collect()
}
