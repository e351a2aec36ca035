//! A search, from the validated job to the frames it sends: where it runs (on the connection's
//! task when it names a single point, a few keys, or finds at most [`INLINE_MATCHES_MAX`]
//! matches within [`INLINE_READS_MAX`] reads; otherwise on the blocking pool, from the start,
//! at most [`crate::connection::SEARCHES_IN_FLIGHT_MAX`] of a connection at once), what it reads
//! ([`crate::reads`]), and how its matches travel: in their stored encoding, straight from
//! storage into `SearchItems` frames of about [`SEARCH_BATCH_BYTES`], with backpressure from a
//! slow client. The connection hands a search here and hears nothing more of it.
//!
//! Counts and sorted searches answer one frame; a search that returns its matches streams
//! `SearchItems`* then `SearchDone`. Whatever answers, a read that an installed configuration
//! overlapped is refused at the end (the client searches again).

use std::ops::ControlFlow;
use std::sync::Arc;

use tessera_geometry::SearchPlan;
use tessera_protocol::constants::SEARCH_BATCH_BYTES;
use tessera_protocol::{ErrorReply, Response, SearchItemsBuilder};
use tessera_storage::EncodedObject;
use tessera_types::{CheckedPredicate, Epoch};

use crate::outbox::{Outbox, Replier};
use crate::reads::{self, Budget, Pointers};
use crate::state::Shared;
use crate::trace;
use crate::validate::SearchKind;
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
    // Planned once here: the meter counts its regions, and `inline` reads by it.
    let plan = matches!(
        kind,
        SearchKind::All | SearchKind::Count | SearchKind::Sorted { .. }
    )
    .then(|| reads::plan(&space, &predicates));
    let regions = match (&kind, &plan) {
        (SearchKind::Regions { regions, .. }, _) => Some(regions.len()),
        (_, Some(plan)) => Some(plan.iter().map(|p| p.regions_count as usize).sum()),
        _ => None,
    };
    if let Some(regions) = regions {
        shared.meter.search(regions);
    }
    if let SearchKind::Keys(keys) = &kind {
        if let Err(e) = shared.keys_readable(space.config().id, keys).await {
            return replier.fail(shared.view().epoch(), e);
        }
    }
    let inlined = inline(shared, stamp, &space, &predicates, plan, kind, replier);
    let Some((kind, replier)) = inlined else {
        return;
    };
    let slot = replier.outbox.search_slot().await;
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        on_pool(&shared, stamp, &space, &predicates, kind, replier);
    });
}

/// Answers a search or count that names a single point of a subspace right here, without the
/// hand-off to the blocking pool (which cost a search four thread switches: docs/benchmarks.md).
/// Gives the search back if it is not such a search or has too many matches.
fn inline(
    shared: &Shared,
    stamp: u64,
    space: &ServedSpace,
    predicates: &[CheckedPredicate],
    plan: Option<Vec<SearchPlan>>,
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
    let store = &shared.store;
    // A point reads one cell; anything else is tried within a budget of reads.
    let budget = |point: bool| {
        if point {
            Budget::Unlimited
        } else {
            Budget::Entries(INLINE_READS_MAX)
        }
    };
    let scanned = match &kind {
        SearchKind::All | SearchKind::Count => {
            let plan = plan.unwrap_or_else(|| reads::plan(space, predicates));
            let budget = budget(reads::is_point_search(&plan));
            reads::for_each_encoded_match_planned(
                store,
                space,
                &plan,
                predicates,
                budget,
                &mut collect,
            )
        }
        // A cluster client's share of a search.
        SearchKind::Regions { subspace, regions } => {
            let part = space
                .config()
                .part_in(space.tessellations(), *subspace, predicates);
            let mut budget = budget(matches!(part.boxes.as_slice(), [b] if b.is_point()));
            reads::for_each_encoded_match_in(
                store,
                space,
                &part,
                regions,
                predicates,
                Pointers::Return,
                &mut budget,
                &mut collect,
            )
        }
        SearchKind::Sorted { .. } => return Some((kind, replier)),
        // A few keys are as cheap as as many gets; more go to the pool, streamed.
        SearchKind::Keys(keys) if keys.len() <= INLINE_KEYS_MAX => {
            reads::for_each_of_keys(store, space, keys, |o| {
                collect(EncodedObject::from_stored(&o))
            })
            .map(|()| ControlFlow::Continue(()))
        }
        SearchKind::Keys(_) => return Some((kind, replier)),
    };
    // Too many matches or reads for here: again from the start, on the pool (nothing was sent).
    if matches!(scanned, Ok(ControlFlow::Break(_))) {
        return Some((kind, replier));
    }
    let scanned = scanned.map(drop);
    let epoch = shared.view().epoch();
    if scanned.is_ok() {
        record(
            shared,
            space,
            predicates,
            &kind,
            share(space, predicates, &kind),
            found.len() as u64,
        );
    }
    // A configuration installed meanwhile may have dropped what the search read (a subspace
    // gone from storage is an error then): the client plans again on the new one.
    match (scanned, kind) {
        _ if !shared.read_still_valid(stamp) => {
            replier.fail(epoch, shared.read_overlapped_install())
        }
        (Err(e), _) => replier.fail(epoch, e),
        (Ok(()), SearchKind::Count) => replier.send(epoch, Response::Count(found.len() as u64)),
        (Ok(()), _) => {
            let mut frames = Vec::with_capacity(2);
            if !found.is_empty() {
                let mut items = SearchItemsBuilder::new();
                for o in &found {
                    items.push(o.version, o.object_bytes());
                }
                match items.take_frame(replier.id, epoch) {
                    Ok(frame) => frames.push(frame),
                    Err(e) => {
                        replier.fail(epoch, Outbox::encoding_error(e));
                        return None;
                    }
                }
            }
            frames.push(Outbox::frame(replier.id, epoch, Response::SearchDone));
            replier.outbox.send_all_nowait(frames, Some(replier.permit));
        }
    }
    None
}

/// Runs a search on a thread of the blocking pool: it may read many objects, and streams them
/// to a client that may be slow to read.
fn on_pool(
    shared: &Shared,
    stamp: u64,
    space: &ServedSpace,
    predicates: &[CheckedPredicate],
    kind: SearchKind,
    replier: Replier,
) {
    let epoch = shared.view().epoch();
    let store = &shared.store;
    let mut matched = 0u64;
    let outcome = (|| -> Result<Option<Response>, ErrorReply> {
        match &kind {
            SearchKind::Count => {
                reads::for_each_encoded_match(store, space, predicates, |_| {
                    matched += 1;
                    ControlFlow::Continue(())
                })?;
                Ok(Some(Response::Count(matched)))
            }
            SearchKind::Sorted { by, limit, order } => {
                let found = reads::sorted_search(store, space, predicates, by, *limit, *order)?;
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
                reads::for_each_encoded_match(store, space, predicates, f)
            }),
            SearchKind::Keys(keys) => stream(&replier, epoch, &mut matched, |f| {
                reads::for_each_of_keys(store, space, keys, |o| f(EncodedObject::from_stored(&o)))
            }),
            SearchKind::Regions { subspace, regions } => {
                let part = space
                    .config()
                    .part_in(space.tessellations(), *subspace, predicates);
                stream(&replier, epoch, &mut matched, |f| {
                    reads::for_each_encoded_match_in(
                        store,
                        space,
                        &part,
                        regions,
                        predicates,
                        Pointers::Return,
                        &mut Budget::Unlimited,
                        f,
                    )
                    .map(drop)
                })
            }
        }
    })();
    if matches!(outcome, Ok(Some(_))) {
        let share = share(space, predicates, &kind);
        record(shared, space, predicates, &kind, share, matched);
    }
    match outcome {
        // What was streamed already is dropped by the client, which makes the search again
        // (an error too may come of an install: a subspace dropped from storage).
        Ok(Some(_)) | Err(_) if !shared.read_still_valid(stamp) => {
            replier.fail(epoch, shared.read_overlapped_install())
        }
        Ok(Some(last)) => replier.send(epoch, last),
        Ok(None) => {} // the client went away mid-search
        Err(e) => replier.fail(epoch, e),
    }
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

/// Counts a search this server answered in the trace: all of it, or for a cluster client's
/// share, the fraction of its regions this server was sent. A multi_get counts as that many
/// gets.
fn record(
    shared: &Shared,
    space: &ServedSpace,
    predicates: &[CheckedPredicate],
    kind: &SearchKind,
    share: f64,
    matched: u64,
) {
    if let Some(keys) = kind.gets() {
        let found = matched as f64 / keys.max(1) as f64;
        for _ in 0..keys {
            shared
                .trace
                .record(space, tessera_protocol::RequestShape::Get, 1.0, found);
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
fn share(space: &ServedSpace, predicates: &[CheckedPredicate], kind: &SearchKind) -> f64 {
    match kind {
        SearchKind::Regions { subspace, regions } => {
            trace::share_of_search(space, *subspace, predicates, regions)
        }
        _ => 1.0,
    }
}
