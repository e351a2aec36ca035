//! The listener: client requests (tessera-protocol frames) and peer messages on one port.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::SinkExt;
use openraft::error::{ClientWriteError, RaftError};
use tessera_protocol::constants::{DESCRIPTION_BYTES_MAX, FRAME_BYTES_MAX};
use tessera_protocol::frame::peek_request_id;
use tessera_protocol::handshake::{fresh_nonce, Dialer};
use tessera_protocol::listener::{next_frame, open_socket, ConnectionLimits, Listener, Slot, Stop};
use tessera_protocol::tls::{ServerTls, WriteHalf};
use tessera_protocol::{
    decode_request, encode_response, BackfillRef, Configuration, CoordinatorStatus, ErrorReply,
    FrameError, Request, RequestFrame, Response, ResponseFrame, SpaceChange, Status, TransferRef,
};
use tessera_protocol::{Gate, Session};
use tessera_types::{parse_space, parse_space_tolerating, Epoch, ServerId};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::detector::{self, Detector};
use crate::peer::{
    self, CallError, ForwardError, PeerConnection, PeerRequest, PeerResponse, PEER_TAG,
};
use crate::raft_types::{ApplyResult, NodeId, Raft};
use crate::state::{Command, CommandError, CommandOutcome};

/// Longest a `WaitConfig` may wait.
const WAIT_CONFIG_MAX: Duration = Duration::from_secs(60);
/// How long a write keeps looking for a leader (elections take well under this).
const WRITE_DEADLINE: Duration = Duration::from_secs(3);
/// How long a forwarded call to the leader may take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// After a forwarded write, how long to wait for this coordinator to apply it too, so the
/// writer's next read here sees it.
const CATCH_UP_WAIT: Duration = Duration::from_secs(2);
/// Client requests in flight per connection.
const IN_FLIGHT_MAX: usize = 256;
/// How long `AddSpace`, `RmSpace` and `AlterSpace` wait, once applied, for every live server to
/// act on the new epoch (servers report it in their heartbeats, every quarter lease) before
/// answering `Timeout`. Five default leases: a server that has not caught up by then is stuck or cut
/// off, and the operator should hear of it.
const SERVERS_CATCH_UP_WAIT: Duration = Duration::from_secs(5);

pub(crate) struct Shared {
    pub(crate) id: NodeId,
    pub(crate) raft: Raft,
    pub(crate) config: watch::Receiver<Arc<Configuration>>,
    pub(crate) addresses: Arc<BTreeMap<NodeId, String>>,
    pub(crate) default_tolerate: Option<u32>,
    pub(crate) detector: Arc<Detector>,
    pub(crate) cancel: CancellationToken,
    pub(crate) tracker: TaskTracker,
    /// Who may send what (`tessera_protocol::auth`).
    pub(crate) gate: Arc<Gate>,
    /// How this coordinator connects to the others (proving the cluster secret, if any).
    pub(crate) dialer: Dialer,
    /// Served on the listener when set.
    pub(crate) tls: Option<ServerTls>,
    /// The listener's limits: connection cap, frame and idle timeouts.
    pub(crate) limits: ConnectionLimits,
}

impl Shared {
    fn epoch(&self) -> Epoch {
        self.config.borrow().epoch
    }
}

/// Accepts connections until cancelled: at most `limits.connections_max` at once (counted until
/// a connection proves the cluster secret), one more told so and closed.
pub(crate) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut listener = Listener::new(listener, &shared.limits);
    loop {
        let (tcp, peer, slot) = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        tracing::trace!(%peer, "connection");
        shared
            .tracker
            .spawn(serve_connection(shared.clone(), tcp, slot));
    }
}

/// Serves one connection; `slot` is its place under the connection cap, let go once it proves
/// the cluster secret.
async fn serve_connection(shared: Arc<Shared>, tcp: TcpStream, slot: Slot) {
    let mut slot = Some(slot);
    let limits = shared.limits;
    let Some(stream) = open_socket(tcp, shared.tls.as_ref(), limits.frame_timeout).await else {
        return;
    };
    let (read, write) = stream.into_split();
    let mut reader = FramedRead::new(read, peer::codec());
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    shared.tracker.spawn(write_loop(
        write,
        rx,
        shared.cancel.clone(),
        limits.frame_timeout,
    ));
    let permits = Arc::new(Semaphore::new(IN_FLIGHT_MAX));
    let mut session = Session::default();
    loop {
        let idle = || permits.available_permits() == IN_FLIGHT_MAX;
        let frame = tokio::select! {
            _ = shared.cancel.cancelled() => break,
            // The writer gave up (its client took nothing for the frame timeout).
            _ = tx.closed() => break,
            frame = next_frame(&mut reader, &limits, idle) => frame,
        };
        let body = match frame {
            Err(Stop::Closed | Stop::HalfSentFrame | Stop::Idle) => break,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "closing a connection after a framing error");
                break;
            }
            Ok(Ok(body)) => body.freeze(),
        };
        // A heartbeat counts from here: no earlier than the server sent it.
        let received = Instant::now();
        if body.first() == Some(&PEER_TAG) {
            // Raft and forwarded writes: only from a coordinator that proved the secret.
            if !session.is_member() && shared.gate.policy().secret.is_some() {
                tracing::warn!("closing a connection that sent a peer message without proving the cluster secret");
                break;
            }
            let Some(reply) = serve_peer(&shared, &body).await else {
                break;
            };
            if tx.send(reply).await.is_err() {
                break;
            }
            continue;
        }
        if body.len() > FRAME_BYTES_MAX {
            let id = peek_request_id(&body).unwrap_or(0);
            let msg = format!(
                "frame of {} bytes is over the {FRAME_BYTES_MAX}-byte limit",
                body.len()
            );
            let _ = send(
                &tx,
                &shared,
                id,
                Response::Error(ErrorReply::new(Status::TooLarge, msg)),
            )
            .await;
            break;
        }
        let decoded = decode_request(&body);
        if let Ok(frame) = &decoded {
            let admission = session.admit(&shared.gate.policy(), &frame.request, fresh_nonce);
            if session.is_member() {
                // A member's connection does not count against the cap.
                drop(slot.take());
            }
            if let Some((reply, close)) = admission.reply() {
                count_request(&shared, frame.request.operation(), &reply, received);
                if send(&tx, &shared, frame.id, reply).await.is_err() || close {
                    if close {
                        tracing::info!(
                            "closing a connection that failed to prove the cluster secret"
                        );
                    }
                    break;
                }
                continue;
            }
        }
        match decoded {
            Ok(frame) => {
                let permit = tokio::select! {
                    _ = shared.cancel.cancelled() => break,
                    permit = permits.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => break },
                };
                let (shared2, tx2) = (shared.clone(), tx.clone());
                shared.tracker.spawn(async move {
                    let RequestFrame { id, request, .. } = frame;
                    let operation = request.operation();
                    let response = handle(&shared2, request, received).await;
                    count_request(&shared2, operation, &response, received);
                    let _ = send(&tx2, &shared2, id, response).await;
                    drop(permit);
                });
            }
            Err(FrameError::UnsupportedVersion(v)) => {
                let msg = format!(
                    "protocol version {v}, this coordinator speaks {}",
                    tessera_protocol::PROTOCOL_VERSION
                );
                let _ = send(
                    &tx,
                    &shared,
                    0,
                    Response::Error(ErrorReply::new(Status::UnsupportedProtocol, msg)),
                )
                .await;
                break;
            }
            Err(e) => {
                let id = peek_request_id(&body).unwrap_or(0);
                if send(
                    &tx,
                    &shared,
                    id,
                    Response::Error(ErrorReply::new(Status::Malformed, e.to_string())),
                )
                .await
                .is_err()
                {
                    break;
                }
            }
        }
    }
}

/// A request answered, for the metrics: by operation and status, and how long it took.
fn count_request(shared: &Shared, operation: &'static str, response: &Response, received: Instant) {
    let status = match response {
        Response::Error(e) => {
            if !matches!(e.status, Status::NotFound | Status::CmpFail) {
                tracing::info!(coordinator = shared.id, op = operation, status = e.status.symbol(), cause = %e.message, "request refused");
            }
            e.status.symbol()
        }
        _ => "OK",
    };
    let id = shared.id.to_string();
    metrics::counter!("tessera_coordinator_requests_total", "coordinator" => id.clone(), "op" => operation, "status" => status)
        .increment(1);
    metrics::histogram!("tessera_coordinator_request_seconds", "coordinator" => id, "op" => operation)
        .record(received.elapsed().as_secs_f64());
}

async fn send(
    tx: &mpsc::Sender<Bytes>,
    shared: &Shared,
    id: u64,
    response: Response,
) -> Result<(), ()> {
    // A configuration travels with its own epoch; anything else with the applied one.
    let epoch = match &response {
        Response::Config(c) => c.epoch,
        _ => shared.epoch(),
    };
    let frame = ResponseFrame {
        id,
        epoch,
        response,
    };
    let bytes = match encode_response(&frame) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "cannot encode a response");
            let frame = ResponseFrame {
                id,
                epoch: frame.epoch,
                response: Response::Error(ErrorReply::new(
                    Status::Internal,
                    format!("cannot encode the response: {e}"),
                )),
            };
            encode_response(&frame).map_err(|_| ())?
        }
    };
    tx.send(bytes).await.map_err(|_| ())
}

/// Writes whatever responses are ready, then flushes once. A client that takes nothing for
/// `write_timeout` is given up on (the reader then closes the connection), so that it cannot
/// hold its queued responses for ever.
async fn write_loop(
    write: WriteHalf,
    mut rx: mpsc::Receiver<Bytes>,
    cancel: CancellationToken,
    write_timeout: Duration,
) {
    let mut out = FramedWrite::new(write, peer::codec());
    let work = async {
        while let Some(bytes) = rx.recv().await {
            let batch = async {
                out.feed(bytes).await?;
                while let Ok(bytes) = rx.try_recv() {
                    out.feed(bytes).await?;
                }
                SinkExt::<Bytes>::flush(&mut out).await
            };
            tokio::time::timeout(write_timeout, batch)
                .await
                .map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the client took nothing for the frame timeout",
                    )
                })??;
        }
        Ok::<(), std::io::Error>(())
    };
    tokio::select! {
        _ = cancel.cancelled() => {}
        result = work => if let Err(e) = result { tracing::debug!(error = %e, "connection write failed") },
    }
}

/// Answers one peer message; `None` closes the connection (undecodable: the peer is confused).
async fn serve_peer(shared: &Shared, body: &[u8]) -> Option<Bytes> {
    let request: PeerRequest = match peer::decode(body) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "undecodable peer message");
            return None;
        }
    };
    let response = match request {
        PeerRequest::AppendEntries(rpc) => {
            PeerResponse::AppendEntries(shared.raft.append_entries(rpc).await)
        }
        PeerRequest::Vote(rpc) => PeerResponse::Vote(shared.raft.vote(rpc).await),
        PeerRequest::InstallSnapshot(rpc) => {
            PeerResponse::InstallSnapshot(shared.raft.install_snapshot(rpc).await)
        }
        PeerRequest::Forward(command) => {
            PeerResponse::Forward(match shared.raft.client_write(command).await {
                Ok(r) => Ok(r.data),
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                    Err(ForwardError::NotLeader {
                        leader: f.leader_id,
                    })
                }
                Err(RaftError::Fatal(_)) => Err(ForwardError::NotLeader { leader: None }),
                Err(e) => Err(ForwardError::Failed(e.to_string())),
            })
        }
    };
    match peer::encode(&response) {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode a peer response");
            None
        }
    }
}

fn error(status: Status, message: impl Into<String>) -> Response {
    Response::Error(ErrorReply::new(status, message))
}

async fn handle(shared: &Arc<Shared>, request: Request, received: Instant) -> Response {
    match request {
        Request::GetConfig => Response::Config(Box::new((**shared.config.borrow()).clone())),
        Request::WaitConfig { after, timeout_ms } => wait_config(shared, after, timeout_ms).await,
        Request::AddSpace { description } => add_space(shared, &description).await,
        Request::RmSpace { name } => {
            let what = format!("space {name:?} removed");
            write_acknowledged(
                shared,
                Command::RmSpace { name },
                &what,
                ("still serves it", "still serve it"),
            )
            .await
        }
        Request::AlterSpace {
            space,
            change,
            fence,
        } => alter_space(shared, space, change, fence).await,
        Request::SetModel { constants } => write(shared, Command::SetModel { constants }).await,
        Request::RegisterServer {
            token,
            address,
            incarnation,
        } => {
            write(
                shared,
                Command::RegisterServer {
                    token,
                    address,
                    incarnation,
                },
            )
            .await
        }
        Request::CoordinatorStatus => Response::CoordinatorStatus(status(shared)),
        Request::Heartbeat {
            server,
            token,
            incarnation,
            failed,
            epoch,
        } => {
            detector::heartbeat(
                &shared.detector,
                received,
                server,
                token,
                incarnation,
                failed,
                epoch,
            )
            .await
        }
        Request::TransfersDone {
            server,
            token,
            incarnation,
            done,
            backfilled,
        } => transfers_done(shared, (server, token, incarnation), done, backfilled).await,
        Request::Decommission { server } => {
            write(shared, Command::Decommission { id: server }).await
        }
        Request::RestServer {
            server,
            token,
            incarnation,
        } => rest_server(shared, (server, token, incarnation)).await,
        _ => error(Status::Malformed, "that request is for a server"),
    }
}

/// Answers once the configuration is past `after`, or after `timeout_ms` (at most
/// [`WAIT_CONFIG_MAX`]) with the current one.
async fn wait_config(shared: &Arc<Shared>, after: Epoch, timeout_ms: u32) -> Response {
    let timeout = Duration::from_millis(timeout_ms as u64).min(WAIT_CONFIG_MAX);
    let mut rx = shared.config.clone();
    tokio::select! {
        _ = shared.cancel.cancelled() => {}
        _ = tokio::time::timeout(timeout, rx.wait_for(|c| c.epoch > after)) => {}
    }
    let config = (**shared.config.borrow()).clone();
    Response::Config(Box::new(config))
}

async fn add_space(shared: &Arc<Shared>, description: &str) -> Response {
    if description.len() > DESCRIPTION_BYTES_MAX {
        return error(
            Status::TooLarge,
            format!(
                "description of {} bytes is over the {DESCRIPTION_BYTES_MAX}-byte limit",
                description.len()
            ),
        );
    }
    let parsed = match shared.default_tolerate {
        Some(t) => parse_space_tolerating(description, t),
        None => parse_space(description),
    };
    match parsed {
        Ok(schema) => {
            let what = format!("space {:?} created", schema.name);
            let lagging = ("does not serve it yet", "do not serve it yet");
            write_acknowledged(shared, Command::AddSpace { schema }, &what, lagging).await
        }
        Err(e) => error(Status::BadDescription, e.to_string()),
    }
}

async fn alter_space(
    shared: &Arc<Shared>,
    space: String,
    change: SpaceChange,
    fence: Option<u64>,
) -> Response {
    // Bounded like a description: a request this large names nothing a space has, and
    // would only burden the log.
    let bytes = space.len() + change.name_bytes();
    if bytes > DESCRIPTION_BYTES_MAX {
        return error(
            Status::TooLarge,
            format!("alteration of {bytes} bytes is over the {DESCRIPTION_BYTES_MAX}-byte limit"),
        );
    }
    // Ready once every live server knows it (see `SpaceConfig::shape_entries`).
    let registered = {
        let config = shared.config.borrow();
        let space = config.space(&space);
        match &change {
            SpaceChange::ShapeReady(shape) => space
                .and_then(|s| s.shape_entry(shape))
                .map(|e| (e.since, "shape")),
            SpaceChange::FormulaReady(id) => space
                .and_then(|s| s.formula_entry(id))
                .map(|e| (e.since, "formula")),
            _ => None,
        }
    };
    if let Some((since, what)) = registered {
        if let Some(refused) = not_known_everywhere(shared, since, what) {
            return refused;
        }
    }
    let what = format!("space {space:?} altered");
    write_acknowledged(
        shared,
        Command::AlterSpace {
            name: space,
            change,
            fence,
        },
        &what,
        ("does not act on it yet", "do not act on it yet"),
    )
    .await
}

/// A server's report of the state transfers into it completed and the backfills it finished.
async fn transfers_done(
    shared: &Arc<Shared>,
    (server, token, incarnation): (ServerId, u128, u64),
    done: Vec<TransferRef>,
    backfilled: Vec<BackfillRef>,
) -> Response {
    let current = match detector::identify(&shared.detector, server, token, incarnation) {
        Ok(current) => current,
        Err(refused) => return refused,
    };
    if done.is_empty() && backfilled.is_empty() {
        return Response::Done;
    }
    // (A later incarnation than the one registered here goes on to the command, which
    // refuses it where it applies.)
    if incarnation == current && !shared.detector.lease_current(server, incarnation) {
        // It may have failed since it reported; the report comes again after the
        // heartbeat that renews its lease, or its removal ends the transfers.
        return error(
            Status::Unavailable,
            format!("server {server} holds no current lease here: send the report again after a heartbeat"),
        );
    }
    // The command checks the incarnation again where it applies, and ignores
    // references that name no transfer into this server or no build under way (a
    // repeated report).
    write(
        shared,
        Command::CompleteTransfers {
            id: server,
            incarnation,
            done,
            backfilled,
        },
    )
    .await
}

/// A server stops for a planned restart: it rests ([`Command::Rest`]), and the answer waits
/// until the other servers act on the configuration without it, so that it may stop then
/// without a write being sent to it.
async fn rest_server(
    shared: &Arc<Shared>,
    (server, token, incarnation): (ServerId, u128, u64),
) -> Response {
    if let Err(refused) = detector::identify(&shared.detector, server, token, incarnation) {
        return refused;
    }
    shared.detector.resting_on_purpose(server, incarnation);
    let what = format!("server {server} rests");
    let lagging = ("still sends to it", "still send to it");
    write_acknowledged(
        shared,
        Command::Rest {
            id: server,
            incarnation,
        },
        &what,
        lagging,
    )
    .await
}

pub(crate) fn status(shared: &Shared) -> CoordinatorStatus {
    let metrics = shared.raft.metrics().borrow().clone();
    let members = metrics
        .membership_config
        .membership()
        .nodes()
        .filter(|(id, _)| {
            metrics
                .membership_config
                .membership()
                .voter_ids()
                .any(|v| v == **id)
        })
        .map(|(id, node)| {
            (
                *id,
                shared
                    .addresses
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| node.addr.clone()),
            )
        })
        .collect();
    CoordinatorStatus {
        id: shared.id,
        leader: metrics.current_leader,
        term: metrics.current_term,
        last_applied: metrics.last_applied.map(|l| l.index).unwrap_or(0),
        members,
        epoch: shared.epoch(),
        servers: shared.detector.liveness(),
    }
}

fn outcome_response(result: ApplyResult) -> Response {
    match result.outcome {
        Some(Ok(CommandOutcome::Registered { id, .. })) => Response::Registered(id),
        Some(Ok(
            CommandOutcome::SpaceAdded { .. }
            | CommandOutcome::SpaceRemoved
            | CommandOutcome::MarkedOffline { .. }
            | CommandOutcome::TransfersCompleted { .. }
            | CommandOutcome::Decommissioned { .. }
            | CommandOutcome::SpaceAltered { .. }
            | CommandOutcome::ModelSet { .. }
            | CommandOutcome::Rested { .. },
        )) => Response::Done,
        Some(Err(e)) => {
            let status = match &e {
                CommandError::SpaceExists(_) => Status::SpaceExists,
                CommandError::UnknownSpace(_) => Status::UnknownSpace,
                CommandError::TooFewServers { .. } => Status::TooFewServers,
                CommandError::InvalidSchema(_) | CommandError::SubspaceNotServing { .. } => {
                    Status::BadDescription
                }
                CommandError::Alter(_) => Status::BadAlteration,
                CommandError::ConfigurationTooLarge { .. } => Status::TooLarge,
                CommandError::InvalidAddress(_) | CommandError::UnknownServer(_) => {
                    Status::Malformed
                }
                CommandError::StaleServer { .. } | CommandError::AlreadyOffline(_) => {
                    Status::StaleServer
                }
                // Not retryable: the same request would meet the same state.
                CommandError::AlreadyLeaving(_)
                | CommandError::OfflineHoldsRegions { .. }
                | CommandError::TransfersOff { .. }
                | CommandError::CannotRest { .. } => Status::CmpFail,
                CommandError::WouldUnderReplicate { .. } => Status::TooFewServers,
                CommandError::UnusableModel(_) => Status::Malformed,
            };
            error(status, e.to_string())
        }
        None => error(Status::Internal, "the log entry carried no command"),
    }
}

/// Proposes `command` through Raft (see [`propose`]) and answers with its outcome.
async fn write(shared: &Shared, command: Command) -> Response {
    match propose(shared, command).await {
        Ok(result) => outcome_response(result),
        Err(refused) => refused,
    }
}

/// Like [`write`], but a change is answered only once every live server this coordinator hears
/// acts on its epoch (see `Detector::lagging`), or with `Timeout` after
/// [`SERVERS_CATCH_UP_WAIT`], naming the servers that have not caught up: the change is made
/// either way. `what` and `lagging` (singular, plural) word that error: "space "x" created",
/// ("does not serve it yet", "do not serve it yet").
async fn write_acknowledged(
    shared: &Shared,
    command: Command,
    what: &str,
    lagging: (&str, &str),
) -> Response {
    let result = match propose(shared, command).await {
        Ok(result) => result,
        Err(refused) => return refused,
    };
    let epoch = result.epoch;
    let response = outcome_response(result);
    if response != Response::Done {
        return response;
    }
    let deadline = Instant::now() + SERVERS_CATCH_UP_WAIT;
    loop {
        let behind = shared.detector.lagging(epoch);
        if behind.is_empty() {
            return Response::Done;
        }
        if Instant::now() >= deadline {
            let names: Vec<String> = behind.iter().map(|s| s.0.to_string()).collect();
            let (servers, verb, their) = if names.len() == 1 {
                ("server", lagging.0, "its")
            } else {
                ("servers", lagging.1, "their")
            };
            let message = format!(
                "{what} in epoch {}, but {servers} {} {verb}: {their} heartbeats did not report that epoch within {} s",
                epoch.0,
                names.join(", "),
                SERVERS_CATCH_UP_WAIT.as_secs()
            );
            return error(Status::Timeout, message);
        }
        tokio::select! {
            _ = shared.cancel.cancelled() => return error(Status::Unavailable, "coordinator stopping; retry"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
}

/// Why a shape may not be marked ready yet, if it may not: some live server does not act on
/// the epoch that registered it (by its heartbeats), so a search it answers could miss
/// documents of the shape. Unknown spaces and shapes are left to the state machine to refuse.
fn not_known_everywhere(shared: &Shared, since: u64, what: &str) -> Option<Response> {
    let behind = shared.detector.lagging(Epoch(since));
    if behind.is_empty() {
        return None;
    }
    let names: Vec<String> = behind.iter().map(|s| s.0.to_string()).collect();
    Some(error(
        Status::Unavailable,
        format!(
            "servers {} do not act on epoch {since}, which registered the {what}, yet: retry",
            names.join(", ")
        ),
    ))
}

/// Proposes `command` through Raft: here if this coordinator leads, else on the leader. An
/// error is the answer to send.
async fn propose(shared: &Shared, command: Command) -> Result<ApplyResult, Response> {
    let deadline = Instant::now() + WRITE_DEADLINE;
    loop {
        let leader = match shared.raft.client_write(command.clone()).await {
            Ok(r) => return Ok(r.data),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => f.leader_id,
            Err(RaftError::APIError(e)) => return Err(error(Status::Internal, e.to_string())),
            Err(RaftError::Fatal(e)) => {
                return Err(error(
                    Status::Unavailable,
                    format!("coordinator stopping: {e}"),
                ))
            }
        };
        if let Some(leader) = leader.filter(|l| *l != shared.id) {
            match forward(shared, leader, &command).await {
                Ok(result) => {
                    // Let this coordinator apply it too, so reads here right after see it.
                    let mut rx = shared.config.clone();
                    let _ = tokio::time::timeout(CATCH_UP_WAIT, rx.wait_for(|c| c.epoch >= result.epoch)).await;
                    return Ok(result);
                }
                Err(Forwarding::Retry(why)) => tracing::debug!(leader, %why, "forwarding failed; retrying"),
                Err(Forwarding::Ambiguous(why)) => {
                    return Err(error(
                        Status::Unavailable,
                        format!("lost the coordinator leader mid-request ({why}); the change may or may not have applied: retry"),
                    ))
                }
                Err(Forwarding::Failed(why)) => return Err(error(Status::Internal, why)),
            }
        }
        if Instant::now() >= deadline {
            return Err(error(Status::Unavailable, "no coordinator leader; retry"));
        }
        tokio::select! {
            _ = shared.cancel.cancelled() => return Err(error(Status::Unavailable, "coordinator stopping; retry")),
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

enum Forwarding {
    /// Nothing was proposed: safe to try again.
    Retry(String),
    /// The request went out and no answer came back.
    Ambiguous(String),
    Failed(String),
}

async fn forward(
    shared: &Shared,
    leader: NodeId,
    command: &Command,
) -> Result<ApplyResult, Forwarding> {
    let Some(addr) = shared.addresses.get(&leader) else {
        return Err(Forwarding::Retry(format!(
            "leader {leader} is not a known member"
        )));
    };
    let mut connection = PeerConnection::new(addr.clone(), shared.dialer.clone());
    match connection
        .call(&PeerRequest::Forward(command.clone()), FORWARD_TIMEOUT)
        .await
    {
        Ok(PeerResponse::Forward(Ok(result))) => Ok(result),
        Ok(PeerResponse::Forward(Err(ForwardError::NotLeader { .. }))) => {
            Err(Forwarding::Retry("not the leader any more".into()))
        }
        Ok(PeerResponse::Forward(Err(ForwardError::Failed(why)))) => Err(Forwarding::Failed(why)),
        Ok(_) => Err(Forwarding::Failed("unexpected peer response".into())),
        Err(e @ CallError::Connect { .. }) => Err(Forwarding::Retry(e.to_string())),
        Err(e) => Err(Forwarding::Ambiguous(e.to_string())),
    }
}
