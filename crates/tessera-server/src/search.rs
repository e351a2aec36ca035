//! A search, from the validated job to the frames it sends: where it runs (on the connection's
//! task when it names a single point, a few keys, or finds at most [`INLINE_MATCHES_MAX`]
//! matches within [`INLINE_READS_MAX`] reads; otherwise on the blocking pool, from the start,
//! at most [`crate::connection::SEARCHES_IN_FLIGHT_MAX`] of a connection at once), what it reads
//! (a [`Scan`], planned once here: the regions of each part the client sent — a cluster
//! client's share of a search, or every region of the plan, as a standalone server is always
//! sent), and how its matches travel: in their stored encoding, straight from storage into
//! `SearchItems` frames of about [`SEARCH_BATCH_BYTES`], with backpressure from a slow client.
//! The connection hands a search here and hears nothing more of it.
//!
//! What it answers is what the request's [`SearchAnswer`](tessera_protocol::SearchAnswer)
//! asks: a count answers one frame; a search of matches streams `SearchItems`* then
//! `SearchDone`, and a sorted search sends its first matches in order the same way.
//! Whatever answers, a read that an installed configuration overlapped is refused at the end
//! (the client searches again). A multi_get reads its keys as gets do and answers as a search.

use std::ops::ControlFlow;
use std::sync::Arc;

use tessera_protocol::constants::SEARCH_BATCH_BYTES;
use tessera_protocol::{ErrorReply, Response, SearchItemsBuilder, WireObject};
use tessera_storage::EncodedObject;
use tessera_types::{CheckedPredicate, Epoch, Value};

use crate::outbox::{Outbox, Replier};
use crate::reads::{self, Budget, Scan};
use crate::state::Shared;
use crate::trace;
use crate::validate::{Answer, SearchKind};
use crate::view::ServedSpace;

/// Most matches a search answered on the connection's task may have; past it the search starts
/// again on the blocking pool, which streams with backpressure.
const INLINE_MATCHES_MAX: usize = 256;
/// Most entries of the store a search that is not a point may read on the connection's task
/// (about 100 µs); past them it starts again on the pool. The hand-off to the pool and back
/// costs thread switches that were a sixth of the server's CPU on searches of ~100 matches.
const INLINE_READS_MAX: u64 = 512;
/// A multi_get of at most this many keys is answered on the connection's task, as gets are.
const INLINE_KEYS_MAX: usize = 16;

/// Runs a search: answered right here if it is cheap, else on the blocking pool once one of the
/// connection's search slots is free (waiting for it stops the connection's reader, so a
/// client that pipelines searches and reads nothing holds at most that many threads).
pub async fn run(
    shared: &Arc<Shared>,
    stamp: u64,
    space: Arc<ServedSpace>,
    predicates: Vec<CheckedPredicate>,
    kind: SearchKind,
    replier: Replier,
) {
    let (scan, answer) = match kind {
        SearchKind::Keys(keys) => return multi_get(shared, stamp, space, keys, replier).await,
        SearchKind::Regions {
            parts,
            answer,
            follow_stubs,
        } => (
            Scan::of_parts(space, predicates, parts, follow_stubs),
            answer,
        ),
    };
    shared.meter.search(scan.crossed());
    let Some(replier) = inline(shared, stamp, &scan, &answer, replier) else {
        return;
    };
    let slot = replier.outbox.search_slot().await;
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        on_pool(&shared, stamp, &scan, &answer, replier);
    });
}

/// Answers a search or count right here when it names a single point, or finds at most
/// [`INLINE_MATCHES_MAX`] matches within [`INLINE_READS_MAX`] reads, without the hand-off to
/// the blocking pool (which cost a search four thread switches: docs/benchmarks.md). Gives the
/// replier back otherwise (nothing was sent): the search starts again on the pool.
fn inline(
    shared: &Shared,
    stamp: u64,
    scan: &Scan,
    answer: &Answer,
    replier: Replier,
) -> Option<Replier> {
    if matches!(answer, Answer::Sorted { .. }) {
        return Some(replier);
    }
    let budget = if scan.is_point() {
        Budget::Unlimited
    } else {
        Budget::Entries(INLINE_READS_MAX)
    };
    let mut found = Vec::new();
    let read = scan.encoded(&shared.store, budget, |o| {
        found.push(o);
        if found.len() > INLINE_MATCHES_MAX {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    if matches!(read, Ok(ControlFlow::Break(_))) {
        return Some(replier);
    }
    let read = read.map(drop);
    if read.is_ok() {
        record_search(shared, scan, found.len() as u64);
    }
    let count = matches!(answer, Answer::Count);
    answer_found(shared, stamp, read, &found, count, replier);
    None
}

/// Runs a search on a thread of the blocking pool: it may read many objects, and streams them
/// to a client that may be slow to read.
fn on_pool(shared: &Shared, stamp: u64, scan: &Scan, answer: &Answer, replier: Replier) {
    let epoch = shared.view().epoch();
    let store = &shared.store;
    let mut matched = 0u64;
    let outcome = match answer {
        Answer::Count => scan
            .encoded(store, Budget::Unlimited, |_| {
                matched += 1;
                ControlFlow::Continue(())
            })
            .map(|_| Some(Response::Count(matched))),
        Answer::Sorted { by, limit, order } => {
            let found = scan.sorted(store, by, *limit, *order);
            send_sorted(&replier, epoch, found, &mut matched)
        }
        Answer::Matches => stream(&replier, epoch, &mut matched, |f| {
            scan.encoded(store, Budget::Unlimited, f).map(drop)
        }),
    };
    if matches!(outcome, Ok(Some(_))) {
        record_search(shared, scan, matched);
    }
    answer_last(shared, stamp, epoch, outcome, replier);
}

/// A multi_get: a few keys are as cheap as as many gets, read right here; more go to the pool,
/// streamed.
async fn multi_get(
    shared: &Arc<Shared>,
    stamp: u64,
    space: Arc<ServedSpace>,
    keys: Vec<Value>,
    replier: Replier,
) {
    if let Err(e) = shared.keys_readable(space.config().id, &keys).await {
        return replier.fail(shared.view().epoch(), e);
    }
    if keys.len() <= INLINE_KEYS_MAX {
        let mut found = Vec::new();
        let read = reads::for_each_of_keys(&shared.store, &space, &keys, |o| {
            found.push(EncodedObject::from_stored(&o));
            ControlFlow::Continue(())
        });
        if read.is_ok() {
            record_gets(shared, &space, keys.len(), found.len() as u64);
        }
        return answer_found(shared, stamp, read, &found, false, replier);
    }
    let slot = replier.outbox.search_slot().await;
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let epoch = shared.view().epoch();
        let mut matched = 0u64;
        let outcome = stream(&replier, epoch, &mut matched, |f| {
            reads::for_each_of_keys(&shared.store, &space, &keys, |o| {
                f(EncodedObject::from_stored(&o))
            })
        });
        if matches!(outcome, Ok(Some(_))) {
            record_gets(&shared, &space, keys.len(), matched);
        }
        answer_last(&shared, stamp, epoch, outcome, replier);
    });
}

/// Answers a search read on the connection's task: its count, or its matches in one
/// `SearchItems` frame and `SearchDone`. A configuration installed meanwhile may have dropped
/// what it read (a subspace gone from storage is an error then): the client plans again on
/// the new one.
fn answer_found(
    shared: &Shared,
    stamp: u64,
    read: Result<(), ErrorReply>,
    found: &[EncodedObject],
    count: bool,
    replier: Replier,
) {
    let epoch = shared.view().epoch();
    match read {
        _ if !shared.read_still_valid(stamp) => {
            replier.fail(epoch, shared.read_overlapped_install())
        }
        Err(e) => replier.fail(epoch, e),
        Ok(()) if count => replier.send(epoch, Response::Count(found.len() as u64)),
        Ok(()) => {
            let mut frames = Vec::with_capacity(2);
            if !found.is_empty() {
                let mut items = SearchItemsBuilder::new();
                for o in found {
                    items.push(o.version, o.object_bytes());
                }
                match items.take_frame(replier.id, epoch) {
                    Ok(frame) => frames.push(frame),
                    Err(e) => return replier.fail(epoch, Outbox::encoding_error(e)),
                }
            }
            frames.push(Outbox::frame(replier.id, epoch, Response::SearchDone));
            replier.outbox.send_all_nowait(frames, Some(replier.permit));
        }
    }
}

/// Answers a search read on the pool with its last frame (`Ok(None)`: the client went away).
/// What was streamed already is dropped by the client when the read overlapped an install
/// (an error too may come of one: a subspace dropped from storage); it makes the search again.
fn answer_last(
    shared: &Shared,
    stamp: u64,
    epoch: Epoch,
    outcome: Result<Option<Response>, ErrorReply>,
    replier: Replier,
) {
    match outcome {
        Ok(Some(_)) | Err(_) if !shared.read_still_valid(stamp) => {
            replier.fail(epoch, shared.read_overlapped_install())
        }
        Ok(Some(last)) => replier.send(epoch, last),
        Ok(None) => {}
        Err(e) => replier.fail(epoch, e),
    }
}

/// Sends a sorted search's matches in frames of 256; `Ok(None)` when the client went away.
fn send_sorted(
    replier: &Replier,
    epoch: Epoch,
    found: Result<Vec<WireObject>, ErrorReply>,
    matched: &mut u64,
) -> Result<Option<Response>, ErrorReply> {
    let found = found?;
    *matched = found.len() as u64;
    for chunk in found.chunks(256) {
        let items = Response::SearchItems(chunk.to_vec());
        if replier
            .outbox
            .send_blocking(replier.id, epoch, items)
            .is_err()
        {
            return Ok(None);
        }
    }
    Ok(Some(Response::SearchDone))
}

thread_local! {
    /// The buffer the last search on this thread of the blocking pool streamed through, kept
    /// for the next: growing a new one into fresh memory for every search cost more than
    /// filling it (page faults were a tenth of a server's CPU on YCSB E's scans).
    static ITEMS_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Streams the objects `scan` finds in frames of about [`SEARCH_BATCH_BYTES`], waiting while
/// the client is slow to read. `Ok(None)` when the client went away.
fn stream(
    replier: &Replier,
    epoch: Epoch,
    streamed: &mut u64,
    scan: impl FnOnce(&mut dyn FnMut(EncodedObject) -> ControlFlow<()>) -> Result<(), ErrorReply>,
) -> Result<Option<Response>, ErrorReply> {
    let mut items = SearchItemsBuilder::with_buffer(ITEMS_BUFFER.take());
    let mut failed = None;
    let send = |items: &mut SearchItemsBuilder| -> Result<(), Option<ErrorReply>> {
        let frame = items
            .take_frame(replier.id, epoch)
            .map_err(|e| Some(Outbox::encoding_error(e)))?;
        replier.outbox.send_frame_blocking(frame).map_err(|()| None)
    };
    scan(&mut |o: EncodedObject| {
        *streamed += 1;
        items.push(o.version, o.object_bytes());
        if items.bytes() >= SEARCH_BATCH_BYTES {
            if let Err(e) = send(&mut items) {
                failed = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    })?;
    let sent = match failed {
        Some(e) => Err(e),
        None if items.is_empty() => Ok(()),
        None => send(&mut items),
    };
    ITEMS_BUFFER.set(items.into_buffer());
    match sent {
        Ok(()) => Ok(Some(Response::SearchDone)),
        Err(Some(e)) => Err(e),
        Err(None) => Ok(None), // the client went away
    }
}

/// Counts a search this server answered in the trace, by its share of the whole search.
fn record_search(shared: &Shared, scan: &Scan, matched: u64) {
    let shape = trace::search_shape(scan.space(), scan.predicates());
    shared
        .trace
        .record(scan.space(), shape, scan.share(), matched as f64);
}

/// Counts a multi_get in the trace as that many gets.
fn record_gets(shared: &Shared, space: &ServedSpace, keys: usize, matched: u64) {
    let found = matched as f64 / keys.max(1) as f64;
    for _ in 0..keys {
        shared
            .trace
            .record(space, tessera_protocol::RequestShape::Get, 1.0, found);
    }
}
