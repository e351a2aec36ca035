//! Connections: accepting, framing, and routing each validated request to what runs it.
//!
//! Each connection has a reader (this module's [`serve`]) and a writer task
//! ([`crate::outbox`]). The reader decodes each frame, validates it against the current view
//! ([`crate::validate`]) and routes the job: gets are answered here; writes go to the chain
//! loop; searches (and multi_gets) go to [`crate::search`]. A connection that begins with
//! `PeerHello` carries a peer's envelopes from then on ([`crate::peers::serve_peer`]).
//!
//! A frame that decodes badly but arrived whole is answered with `Malformed` and the
//! connection goes on: its length prefix still marks where the next frame starts. A frame
//! over the size limit, or of another protocol version, is answered and the connection is
//! closed, because nothing after it can be trusted. At most [`IN_FLIGHT_MAX`] requests of
//! one connection are in progress at once; the reader stops reading until one completes.
//! Of those, at most [`SEARCHES_IN_FLIGHT_MAX`] are searches on the blocking pool: each holds a
//! thread of it while it runs (a search waits for its client to read), so a
//! client that pipelines searches and reads nothing must not take every such thread from
//! everyone else.

use std::sync::Arc;

use tessera_protocol::frame::peek_request_id;
use tessera_protocol::handshake::fresh_nonce;
pub use tessera_protocol::listener::{descriptor_limit, ConnectionLimits};
use tessera_protocol::listener::{next_frame, open_socket, Listener, Slot, Stop};
use tessera_protocol::Session;
use tessera_protocol::{
    codec, decode_request, ErrorReply, FrameError, Request, RequestFrame, RequestShape, Response,
    SpaceStatistics, Status,
};
use tessera_types::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::codec::FramedRead;

use crate::outbox::{Outbox, Replier};
use crate::peers;
use crate::queue::LoopInput;
use crate::reads;
use crate::search;
use crate::state::Shared;
use crate::trace;
use crate::validate::{validate, Job};
use crate::view::{Mode, ServedSpace};

/// Requests of one connection in progress at once.
pub const IN_FLIGHT_MAX: usize = 1024;

/// Searches of one connection in progress at once on the blocking pool (each holds one of its
/// threads, of which tokio has 512 by default).
pub const SEARCHES_IN_FLIGHT_MAX: usize = 16;

/// How long a stopping server waits for its connections to write out the answers in flight
/// (a search streaming a large result, a write waiting for its fsync) before it closes them.
pub const DRAIN_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a stopping server's connection waits for another request before it closes, once
/// nothing is in flight on it.
const STOPPING_QUIET: std::time::Duration = std::time::Duration::from_millis(20);

/// Accepts connections until the server stops ([`Shared::stopped`]), then waits (at most
/// [`DRAIN_MAX`]) for those it accepted to end by themselves: each refuses what it reads from
/// then on and ends once its answers in flight are written and its client is quiet.
/// Aborting it aborts every connection it accepted (they
/// live in its `JoinSet`), so a stopped server lets go of its store. Past
/// `limits.connections_max` open connections, a new one is told so and closed.
pub async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, limits: ConnectionLimits) {
    let mut connections = tokio::task::JoinSet::new();
    let mut listener = Listener::new(listener, &limits);
    loop {
        while connections.try_join_next().is_some() {}
        let (tcp, peer, slot) = tokio::select! {
            biased;
            () = shared.stopped() => break,
            accepted = listener.accept() => accepted,
        };
        tracing::debug!(%peer, "connection");
        connections.spawn(serve(shared.clone(), tcp, (limits, slot)));
    }
    drop(listener); // new connections are refused from here on
    let drained = tokio::time::timeout(DRAIN_MAX, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "connections still answering {DRAIN_MAX:?} after the stop: closing them"
        );
    }
}

/// Counts a connection in the `tessera_connections` gauge while it lives.
struct Open(crate::observe::Meter);

impl Open {
    fn count(meter: &crate::observe::Meter) -> Open {
        meter.connections(1.0);
        Open(meter.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.connections(-1.0);
    }
}

/// Tells the client that this stopping server closes the connection having answered every
/// request it read: a frame about the connection (id 0) saying `Unavailable`. Whatever the
/// client sent and has no answer for was not run (the server reads nothing more), so the
/// client answers those requests with this refusal itself, and retries them elsewhere as it
/// retries any `Unavailable`. Sent only once nothing is in flight here.
fn say_goodbye(outbox: &Outbox, epoch: tessera_types::Epoch) {
    let goodbye = ErrorReply::new(
        Status::Unavailable,
        "the server is stopping: the requests it did not answer on this connection were not \
         run; send them again",
    );
    outbox.send_nowait(0, epoch, Response::Error(goodbye), None);
}

/// Serves one connection; `slot` is its place under the connection cap, let go once it proves
/// the cluster secret.
pub async fn serve(shared: Arc<Shared>, tcp: TcpStream, (limits, slot): (ConnectionLimits, Slot)) {
    let mut slot = Some(slot);
    let Some(stream) = open_socket(tcp, shared.tls.as_ref(), limits.frame_timeout).await else {
        return;
    };
    let _open = Open::count(&shared.meter);
    let (read_half, write_half) = stream.into_split();
    let (outbox, writer) = Outbox::start(write_half, SEARCHES_IN_FLIGHT_MAX, limits.frame_timeout);
    let permits = Arc::new(Semaphore::new(IN_FLIGHT_MAX));
    let mut frames = FramedRead::new(read_half, codec());
    let mut session = Session::default();
    loop {
        // A client that does not read its answers stops being read (`outbox`).
        outbox.wait_for_room().await;
        if outbox.is_closed() {
            tracing::debug!("closing a connection: its client stopped taking responses");
            break;
        }
        let idle = || permits.available_permits() == IN_FLIGHT_MAX;
        let next = if shared.is_shutting_down() {
            // Stopping: what the client sent is still read, and refused as retryable (`route`);
            // the connection closes once nothing is in flight and nothing more has come for a
            // moment, with a goodbye that tells the client a request still on the wire was
            // not run (`say_goodbye`).
            tokio::select! {
                biased;
                next = next_frame(&mut frames, &limits, idle) => next,
                () = tokio::time::sleep(STOPPING_QUIET) => {
                    if idle() {
                        say_goodbye(&outbox, shared.view().epoch());
                        break;
                    }
                    continue;
                }
            }
        } else {
            tokio::select! {
                biased;
                // Around again, reading by the rules above.
                () = shared.stopped() => continue,
                next = next_frame(&mut frames, &limits, idle) => next,
            }
        };
        let frame = match next {
            Ok(frame) => frame,
            Err(Stop::Closed | Stop::HalfSentFrame | Stop::Idle) => break,
        };
        let arrived = std::time::Instant::now();
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
        let decoded = decode_request(&body);
        if let Ok(frame) = &decoded {
            // Who may send what: the steps of authenticating are answered here, and a request
            // the connection may not make is refused before anything acts on it.
            let admission = session.admit(&shared.gate.policy(), &frame.request, fresh_nonce);
            if session.is_member() {
                // A member's connection does not count against the cap.
                drop(slot.take());
            }
            if let Some((reply, close)) = admission.reply() {
                shared
                    .meter
                    .request(frame.request.operation(), &reply, arrived);
                outbox.send_nowait(frame.id, epoch, reply, Some(permit));
                if close {
                    tracing::info!("closing a connection that failed to prove the cluster secret");
                    break;
                }
                continue;
            }
        }
        match decoded {
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
                    metered: (frame.request.operation(), arrived, shared.meter.clone()),
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

/// The answer to a get that would wait here for an update of `key` to come back from the
/// chain's tail: the key region's last reader answers sooner.
fn update_pending(key: &Value) -> ErrorReply {
    ErrorReply::new(
        Status::UpdatePending,
        format!("an update of key {key} is pending here; ask the last replica of its region"),
    )
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
        Job::Get { .. } | Job::Search { .. } | Job::Write { .. } | Job::Writes { .. }
    );
    if needs_lease && !shared.lease.is_valid() {
        return replier.fail(epoch, crate::lease::lapsed_error());
    }
    let to_chain = match job {
        Job::Answer(response) => return replier.send(epoch, response),
        Job::Get {
            space,
            key,
            last_reader,
        } => {
            if !last_reader && shared.read_gates().is_pending(space.config().id, &key) {
                return replier.fail(epoch, update_pending(&key));
            }
            let readable = shared.keys_readable(space.config().id, std::slice::from_ref(&key));
            if let Err(e) = readable.await {
                return replier.fail(epoch, e);
            }
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
        Job::RegionCounts { space, subspace } => {
            let shared = shared.clone();
            tokio::task::spawn_blocking(move || {
                let counts = reads::region_counts(&shared.store, &space, subspace);
                let epoch = shared.view().epoch();
                match counts {
                    Ok(counts) => replier.send(epoch, Response::RegionCounts(counts)),
                    Err(e) => replier.fail(epoch, e),
                }
            });
            return;
        }
        Job::Statistics { space } => {
            let shared = shared.clone();
            tokio::task::spawn_blocking(move || {
                let statistics = statistics(&shared, &space);
                let epoch = shared.view().epoch();
                match statistics {
                    Ok(s) => replier.send(epoch, Response::Statistics(s)),
                    Err(e) => replier.fail(epoch, e),
                }
            });
            return;
        }
        Job::Search {
            space,
            predicates,
            kind,
        } => return search::run(shared, stamp, space, predicates, kind, replier).await,
        Job::Write { space, write } => {
            shared
                .trace
                .record(&space, trace::write_shape(&space, &write), 1.0, 0.0);
            shared.statistics.note_write();
            LoopInput::Write {
                space,
                write,
                reply: replier,
            }
        }
        Job::Writes { space, writes } => {
            for write in &writes {
                shared
                    .trace
                    .record(&space, trace::write_shape(&space, write), 1.0, 0.0);
                shared.statistics.note_write();
            }
            LoopInput::Writes {
                space,
                writes,
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

/// The statistics of `space` as kept, or read again by a scan (and kept) when they no longer
/// answer for it ([`crate::statistics`]).
fn statistics(shared: &Shared, space: &ServedSpace) -> Result<SpaceStatistics, ErrorReply> {
    let scan = || reads::statistics(&shared.store, space);
    let alive = |id: u64| shared.view().config.spaces.iter().any(|s| s.id == id);
    shared.statistics.get_or_scan(space, scan, alive)
}
