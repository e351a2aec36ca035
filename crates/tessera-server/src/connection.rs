//! Connections: accepting, framing, and routing each validated request to what runs it.
//!
//! Each connection has a reader (this module's [`serve`]) and a writer task
//! ([`crate::outbox`]). The reader decodes each frame, validates it against the current view
//! ([`crate::validate`]) and routes the job: reads are answered here; writes go to the chain
//! loop; searches and group operations run on the blocking pool (a search naming a single point
//! with few matches is answered here). A connection that begins with `PeerHello` carries a
//! peer's envelopes from then on ([`crate::peers::serve_peer`]).
//!
//! A frame that decodes badly but arrived whole is answered with `Malformed` and the
//! connection goes on: its length prefix still marks where the next frame starts. A frame
//! over the size limit, or of another protocol version, is answered and the connection is
//! closed, because nothing after it can be trusted. At most [`IN_FLIGHT_MAX`] requests of
//! one connection are in progress at once; the reader stops reading until one completes.
//! Of those, at most [`SEARCHES_IN_FLIGHT_MAX`] are searches or group operations: each holds a
//! thread of the blocking pool while it runs (a search waits for its client to read), so a
//! client that pipelines searches and reads nothing must not take every such thread from
//! everyone else.

use std::ops::ControlFlow;
use std::sync::Arc;

use futures::StreamExt;
use tessera_protocol::constants::SEARCH_BATCH_BYTES;
use tessera_protocol::frame::peek_request_id;
use tessera_protocol::{
    codec, decode_request, ErrorReply, FrameError, Request, RequestFrame, RequestShape, Response,
    Status,
};
use tessera_storage::StoredObject;
use tessera_types::{CheckedPredicate, Epoch};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::codec::FramedRead;

use crate::group::{self, GroupWrite};
use crate::outbox::{Outbox, Replier};
use crate::peers;
use crate::queue::LoopInput;
use crate::reads;
use crate::state::Shared;
use crate::trace;
use crate::validate::{validate, Job, SearchKind};
use crate::view::{Mode, ServedSpace};

/// Requests of one connection in progress at once.
pub const IN_FLIGHT_MAX: usize = 1024;

/// Searches and group operations of one connection in progress at once (each holds a
/// blocking-pool thread, of which tokio has 512 by default).
pub const SEARCHES_IN_FLIGHT_MAX: usize = 16;

/// Most matches a search answered on the connection's task may have; past it the search starts
/// again on the blocking pool, which streams with backpressure.
const INLINE_MATCHES_MAX: usize = 256;
/// A multi_get of at most this many keys is answered on the connection's task, as gets are.
const INLINE_KEYS_MAX: usize = 16;

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

pub async fn serve(shared: Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let (read_half, write_half) = stream.into_split();
    let (outbox, writer) = Outbox::start(write_half, SEARCHES_IN_FLIGHT_MAX);
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
            Ok(RequestFrame {
                id,
                request: Request::PeerHello { from },
                ..
            }) => {
                if shared.mode() == Mode::Cluster {
                    // From now on this connection carries a peer's chain messages.
                    tracing::debug!(peer = %from, "peer connected");
                    outbox.send_nowait(id, epoch, Response::Done, Some(permit));
                    peers::serve_peer(frames, shared, from).await;
                    // Only now: the write half stays open while the peer is served, so the
                    // connection closes as a whole when the server gives up on it.
                    drop(outbox);
                    let _ = writer.await;
                    return;
                }
                let error = ErrorReply::new(
                    Status::Malformed,
                    "this server runs standalone: it has no peers",
                );
                outbox.send_nowait(id, epoch, Response::Error(error), Some(permit));
            }
            Ok(frame) => {
                let replier = Replier {
                    id: frame.id,
                    outbox: outbox.clone(),
                    permit,
                };
                route(&shared, frame, replier).await;
            }
            Err(FrameError::UnsupportedVersion(v)) => {
                let error = ErrorReply::new(
                    Status::UnsupportedProtocol,
                    format!(
                        "protocol version {v} is not spoken here (this server speaks {})",
                        tessera_protocol::PROTOCOL_VERSION
                    ),
                );
                outbox.send_nowait(0, epoch, Response::Error(error), None);
                break;
            }
            Err(e) => {
                let id = peek_request_id(&body).unwrap_or(0);
                let error = ErrorReply::new(
                    Status::Malformed,
                    format!("could not decode the request: {e}"),
                );
                outbox.send_nowait(id, epoch, Response::Error(error), Some(permit));
            }
        }
    }
    drop(outbox);
    // The writer task ends once every in-flight request has been answered (or dropped).
    let _ = writer.await;
}

/// Validates a request and hands the job to what runs it.
async fn route(shared: &Arc<Shared>, frame: RequestFrame, replier: Replier) {
    // Before the view: a read checks after reading that no install overlapped it.
    let stamp = shared.read_stamp();
    let view = shared.view();
    let epoch = view.epoch();
    if shared.is_shutting_down() {
        return replier.fail(epoch, ErrorReply::new(Status::Unavailable, "shutting down"));
    }
    let job = match validate(frame, &view) {
        Ok(job) => job,
        Err(e) => return replier.fail(epoch, e),
    };
    let needs_lease = matches!(
        job,
        Job::Get { .. } | Job::Search { .. } | Job::Write { .. }
    );
    if needs_lease && !shared.lease.is_valid() {
        return replier.fail(epoch, crate::lease::lapsed_error());
    }
    let to_chain = match job {
        Job::Answer(response) => return replier.send(epoch, response),
        Job::Get { space, key } => {
            let found = reads::get(&shared.store, &space, &key);
            if !shared.read_still_valid(stamp) {
                return replier.fail(epoch, shared.read_overlapped_install());
            }
            let matched = matches!(found, Ok(Some(_)));
            shared
                .trace
                .record(&space, RequestShape::Get, 1.0, f64::from(u8::from(matched)));
            return replier.send(epoch, found.map_or_else(Response::Error, Response::Object));
        }
        Job::Trace { space, minutes } => {
            return replier.send(
                epoch,
                Response::Trace(shared.trace.summary(&space, minutes)),
            );
        }
        Job::KeyRegionLoads { space } => {
            let shared = shared.clone();
            tokio::task::spawn_blocking(move || {
                let loads = reads::key_region_loads(&shared.store, &space);
                let epoch = shared.view().epoch();
                match loads {
                    Ok(loads) => replier.send(epoch, Response::KeyRegionLoads(loads)),
                    Err(e) => replier.fail(epoch, e),
                }
            });
            return;
        }
        Job::Explain { space, predicates } => {
            return replier.send(
                epoch,
                Response::Explain(Box::new(reads::explain(&space, &predicates))),
            );
        }
        Job::Search {
            space,
            predicates,
            kind,
        } => {
            let Some((kind, replier)) =
                search_inline(shared, stamp, &space, &predicates, kind, replier)
            else {
                return;
            };
            // Waits (and so stops reading this connection) while its searches are all busy.
            let slot = replier
                .outbox
                .searches
                .clone()
                .acquire_owned()
                .await
                .expect("never closed");
            return search(shared, stamp, space, predicates, kind, replier, slot);
        }
        Job::Group {
            space,
            predicates,
            write,
        } => {
            let slot = replier
                .outbox
                .searches
                .clone()
                .acquire_owned()
                .await
                .expect("never closed");
            return group(shared, space, predicates, write, replier, slot);
        }
        Job::Write { space, write } => {
            shared
                .trace
                .record(&space, trace::write_shape(&space, &write), 1.0, 0.0);
            LoopInput::Write {
                space,
                write,
                reply: replier,
            }
        }
        Job::Change(change) => LoopInput::Change {
            change,
            reply: replier,
        },
    };
    if let Err(Some(reply)) = shared.chain.send(to_chain).await {
        reply.fail(
            epoch,
            ErrorReply::new(Status::Unavailable, "the server is shutting down"),
        );
    }
}

/// Answers a search or count that names a single point of a subspace right here, without the
/// hand-off to the blocking pool (which cost a search four thread switches: docs/benchmarks.md).
/// Gives the search back if it is not such a search or has too many matches.
fn search_inline(
    shared: &Shared,
    stamp: u64,
    space: &ServedSpace,
    predicates: &[CheckedPredicate],
    kind: SearchKind,
    replier: Replier,
) -> Option<(SearchKind, Replier)> {
    let mut found = Vec::new();
    let mut collect = |o| {
        found.push(o);
        if found.len() > INLINE_MATCHES_MAX {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let scanned = match &kind {
        SearchKind::All | SearchKind::Count => {
            let plan = reads::plan(space, predicates);
            if !reads::is_point_search(&plan) {
                return Some((kind, replier));
            }
            reads::for_each_match_planned(&shared.store, space, &plan, predicates, &mut collect)
        }
        // A cluster client's share of a point search: one region, one cell.
        SearchKind::Regions { subspace, regions } => {
            let part = space
                .config
                .part_in(&space.tessellations, *subspace, predicates);
            if !matches!(part.boxes.as_slice(), [b] if b.is_point()) {
                return Some((kind, replier));
            }
            reads::for_each_match_in(
                &shared.store,
                space,
                &part,
                regions,
                predicates,
                reads::Pointers::Return,
                &mut collect,
            )
        }
        SearchKind::Sorted { .. } => return Some((kind, replier)),
        // A few keys are as cheap as as many gets; more go to the pool, streamed.
        SearchKind::Keys(keys) if keys.len() <= INLINE_KEYS_MAX => {
            reads::for_each_of_keys(&shared.store, space, keys, &mut collect)
        }
        SearchKind::Keys(_) => return Some((kind, replier)),
    };
    if found.len() > INLINE_MATCHES_MAX {
        return Some((kind, replier));
    }
    let epoch = shared.view().epoch();
    if scanned.is_ok() {
        trace_search(
            shared,
            space,
            predicates,
            kind.gets(),
            search_share(space, predicates, &kind),
            found.len() as u64,
        );
    }
    match (scanned, kind) {
        (Err(e), _) => replier.fail(epoch, e),
        _ if !shared.read_still_valid(stamp) => {
            replier.fail(epoch, shared.read_overlapped_install())
        }
        (Ok(()), SearchKind::Count) => replier.send(epoch, Response::Count(found.len() as u64)),
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

/// Counts a search this server answered in the trace: all of it, or for a cluster client's
/// share, the fraction of its regions this server was sent. A multi_get (`gets`: how many
/// keys) counts as that many gets.
fn trace_search(
    shared: &Shared,
    space: &ServedSpace,
    predicates: &[CheckedPredicate],
    gets: Option<usize>,
    share: f64,
    matched: u64,
) {
    if let Some(keys) = gets {
        let found = matched as f64 / keys.max(1) as f64;
        for _ in 0..keys {
            shared.trace.record(space, RequestShape::Get, 1.0, found);
        }
        return;
    }
    shared.trace.record(
        space,
        trace::search_shape(space, predicates),
        share,
        matched as f64,
    );
}

/// The share of a search this server answers: all of it, or for a cluster client's share,
/// the fraction of the regions its box crosses that this server was sent.
fn search_share(space: &ServedSpace, predicates: &[CheckedPredicate], kind: &SearchKind) -> f64 {
    match kind {
        SearchKind::Regions { subspace, regions } => {
            trace::share_of_search(space, *subspace, predicates, regions)
        }
        _ => 1.0,
    }
}

/// Runs a search on the blocking pool: it may read many objects, and streams them to a client
/// that may be slow to read.
fn search(
    shared: &Arc<Shared>,
    stamp: u64,
    space: Arc<ServedSpace>,
    predicates: Vec<CheckedPredicate>,
    kind: SearchKind,
    replier: Replier,
    slot: OwnedSemaphorePermit,
) {
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let epoch = shared.view().epoch();
        let store = &shared.store;
        let share = search_share(&space, &predicates, &kind);
        let gets = kind.gets();
        let mut matched = 0u64;
        let outcome = (|| -> Result<Option<Response>, ErrorReply> {
            match kind {
                SearchKind::Count => {
                    matched = reads::count(store, &space, &predicates)?;
                    Ok(Some(Response::Count(matched)))
                }
                SearchKind::Sorted { by, limit, order } => {
                    let found =
                        reads::sorted_search(store, &space, &predicates, &by, limit, order)?;
                    matched = found.len() as u64;
                    for chunk in found.chunks(256) {
                        if replier
                            .outbox
                            .send_blocking(replier.id, epoch, Response::SearchItems(chunk.to_vec()))
                            .is_err()
                        {
                            return Ok(None);
                        }
                    }
                    Ok(Some(Response::SearchDone))
                }
                SearchKind::All => stream(&replier, epoch, &mut matched, |f| {
                    reads::for_each_match(store, &space, &predicates, f)
                }),
                SearchKind::Keys(ref keys) => stream(&replier, epoch, &mut matched, |f| {
                    reads::for_each_of_keys(store, &space, keys, f)
                }),
                SearchKind::Regions { subspace, regions } => {
                    let part = space
                        .config
                        .part_in(&space.tessellations, subspace, &predicates);
                    stream(&replier, epoch, &mut matched, |f| {
                        let pointers = reads::Pointers::Return;
                        reads::for_each_match_in(
                            store,
                            &space,
                            &part,
                            &regions,
                            &predicates,
                            pointers,
                            f,
                        )
                    })
                }
            }
        })();
        if matches!(outcome, Ok(Some(_))) {
            trace_search(&shared, &space, &predicates, gets, share, matched);
        }
        match outcome {
            // What was streamed already is dropped by the client, which makes the search again.
            Ok(Some(_)) if !shared.read_still_valid(stamp) => {
                replier.fail(epoch, shared.read_overlapped_install())
            }
            Ok(Some(last)) => replier.send(epoch, last),
            Ok(None) => {} // the client went away mid-search
            Err(e) => replier.fail(epoch, e),
        }
    });
}

/// Streams the objects `scan` finds in batches of about [`SEARCH_BATCH_BYTES`], waiting while
/// the client is slow to read. `Ok(None)` when the client went away.
fn stream(
    replier: &Replier,
    epoch: Epoch,
    streamed: &mut u64,
    scan: impl FnOnce(&mut dyn FnMut(StoredObject) -> ControlFlow<()>) -> Result<(), ErrorReply>,
) -> Result<Option<Response>, ErrorReply> {
    let (mut batch, mut bytes, mut gone) = (Vec::new(), 0usize, false);
    scan(&mut |o: StoredObject| {
        *streamed += 1;
        bytes += postcard::experimental::serialized_size(&o.object.values).unwrap_or(0);
        batch.push(reads::wire(o));
        if bytes >= SEARCH_BATCH_BYTES {
            bytes = 0;
            let items = Response::SearchItems(std::mem::take(&mut batch));
            if replier
                .outbox
                .send_blocking(replier.id, epoch, items)
                .is_err()
            {
                gone = true;
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    })?;
    if gone {
        return Ok(None);
    }
    if !batch.is_empty()
        && replier
            .outbox
            .send_blocking(replier.id, epoch, Response::SearchItems(batch))
            .is_err()
    {
        return Ok(None);
    }
    Ok(Some(Response::SearchDone))
}

/// Runs a group operation on the blocking pool ([`crate::group`]).
fn group(
    shared: &Arc<Shared>,
    space: Arc<ServedSpace>,
    predicates: Vec<CheckedPredicate>,
    write: GroupWrite,
    replier: Replier,
    slot: OwnedSemaphorePermit,
) {
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let outcome = group::run(&shared, &space, &predicates, &write);
        // The epoch after the writes: a space removed meanwhile shows in it.
        let epoch = shared.view().epoch();
        replier.send(epoch, outcome.map_or_else(Response::Error, Response::Count));
    });
}
