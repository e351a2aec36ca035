//! Failure detection: server heartbeats, leases, and the leader's detector.
//!
//! Every coordinator answers heartbeats and remembers when it last received one from each
//! server (the incarnation registered). Only the Raft leader grants leases: it answers
//! `leader: true` once a quorum confirmed its leadership *after* the heartbeat arrived
//! (`Raft::ensure_linearizable`; concurrent heartbeats share one confirmation round). Its
//! detector task looks every [`TICK`] for Available servers silent for longer than
//! `lease_ms + margin_ms` and proposes [`Command::MarkOffline`] for them through Raft; a server
//! reporting a storage failure is proposed at once. The safety argument is on
//! [`LeaseTuning`].
//!
//! Three rules keep a granted lease from outliving the leader's decision:
//! - a heartbeat is recorded before leadership is confirmed, so a lease granted on it lapses
//!   no later than the detector's clock for that server allows;
//! - a server whose removal was decided gets no lease until that decision is settled (applied,
//!   or refused), and the state the reply carries is read after the confirmation;
//! - a coordinator that becomes leader (or leads a new term) restarts every server's count at
//!   that moment, and forgets decisions of earlier terms (an entry of an earlier term commits
//!   before the new leader's first confirmation returns, so before its first lease).
//!
//! Servers that are Leaving (being decommissioned) still serve their regions: they are watched
//! and granted leases like Available ones. Each heartbeat also says which configuration epoch
//! the server acts on; every coordinator keeps the latest per server (not in the Raft state:
//! it is soft, like when it last heard the server), so that a space change is answered once
//! the servers act on it ([`Detector::lagging`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tessera_protocol::{ErrorReply, HeartbeatReply, Response, ServerLiveness, ServerState, Status};
use tessera_types::{Epoch, ServerId};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::raft_types::{NodeId, Raft};
use crate::state::{ClusterState, Command, CommandOutcome};

/// How the coordinators detect failed servers: by leases (see the crate docs, "Failure
/// detection").
///
/// Every server sends a heartbeat to every coordinator a few times per lease. A reply from the
/// Raft leader, sent after the leader confirmed its leadership with a quorum, renews the
/// server's lease until `lease_ms` after the moment the server *sent* that heartbeat; a server
/// whose lease lapsed stops serving reads and taking writes. The leader takes an Available
/// server offline (a new epoch without it in any replica set it can leave) once it has heard
/// nothing from it for `lease_ms + margin_ms`, counted from the moment it *received* the last
/// heartbeat. Since a heartbeat is received after it was sent, the leader's count starts no
/// earlier than the lease it granted, so when it acts the lease has lapsed on the server's
/// clock too, as long as the two clocks' rates differ by less than `margin_ms` over
/// `lease_ms` (the margin covers that drift, not network delay: delay only makes the leader
/// later). A new leader starts every server's count from the moment it became leader: the
/// previous leader may have granted leases it never told anyone about, but none on a heartbeat
/// sent after this leader's election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseTuning {
    /// How long one renewal lets a server serve, in milliseconds. Heartbeat replies carry it,
    /// so servers use the coordinators' value.
    pub lease_ms: u64,
    /// How much longer than a lease the leader waits before taking a silent server offline.
    pub margin_ms: u64,
    /// Also take offline an Available server this coordinator has never heard a heartbeat
    /// from (counting from when it became leader, or from when the server registered or came
    /// back), so that a server that dies before its first heartbeat is detected too. On by
    /// default: every server heartbeats from the moment it has registered.
    pub suspect_unheard: bool,
    /// How long a server that announced a planned stop (`Request::RestServer`) rests before
    /// the leader takes it offline, and its regions are re-replicated elsewhere, in
    /// milliseconds.
    pub rest_grace_ms: u64,
    /// How long a server whose lease lapsed rests (its regions wait for it) before the leader
    /// takes it offline, in milliseconds; 0 takes it offline at once.
    pub down_grace_ms: u64,
}

impl LeaseTuning {
    /// How long a server rests before it is taken offline: `planned` if known (the leader saw
    /// the announcement or decided the rest itself), else the longer of the two graces (a
    /// leader elected since cannot tell, and waits rather than moves data early).
    fn grace(&self, planned: Option<bool>) -> Duration {
        Duration::from_millis(match planned {
            Some(true) => self.rest_grace_ms,
            Some(false) => self.down_grace_ms,
            None => self.rest_grace_ms.max(self.down_grace_ms),
        })
    }
}

impl Default for LeaseTuning {
    fn default() -> Self {
        LeaseTuning {
            lease_ms: 1000,
            margin_ms: 500,
            suspect_unheard: true,
            rest_grace_ms: 60_000,
            down_grace_ms: 0,
        }
    }
}

/// How long a rest the detector decided or was told of waits for its command to apply before
/// the detector forgets it (a proposal fails or is refused well within it).
const REST_ON_ITS_WAY: Duration = Duration::from_secs(15);

/// How often the leader's detector looks for silent servers.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// What one coordinator knows of one server's heartbeats.
struct Watch {
    /// The incarnation this entry counts for; an entry for an earlier one is replaced.
    incarnation: u64,
    /// When this coordinator last received a heartbeat from that incarnation.
    heard: Option<Instant>,
    /// The detector's clock: the latest of the last heartbeat received, the moment this
    /// coordinator became leader, and the moment the server (re)joined as Available.
    since: Instant,
    /// Whether the server was live (Available or Leaving) when the detector last looked.
    available: bool,
    /// The epoch the server said it acts on, in the latest heartbeat from that incarnation.
    epoch: Option<Epoch>,
}

/// Whether a server in this state serves, so holds a lease and is watched: Available, or
/// Leaving (it serves its regions until they have moved).
pub(crate) fn is_live(state: ServerState) -> bool {
    matches!(state, ServerState::Available | ServerState::Leaving)
}

struct Inner {
    servers: HashMap<ServerId, Watch>,
    /// `(term, since)` while this coordinator leads, as the detector last saw it.
    leading: Option<(u64, Instant)>,
    /// Servers whose removal this leader decided and has not seen settled, with the decision's
    /// ticket: they get no lease meanwhile.
    removing: HashMap<ServerId, u64>,
    /// Numbers decisions, so a proposal settling late clears only its own.
    tickets: u64,
    /// Servers whose removal was logged, so a decision retried is not logged again.
    announced: HashSet<(ServerId, u64)>,
    /// Resting servers: since when this leader counts their rest, and whether it was planned
    /// (unknown to a leader elected since).
    resting: HashMap<ServerId, Resting>,
}

/// One resting server, as the detector counts its grace.
struct Resting {
    incarnation: u64,
    since: Instant,
    planned: Option<bool>,
}

impl Resting {
    /// A rest of `incarnation` counted from now.
    fn from_now(incarnation: u64, planned: Option<bool>) -> Resting {
        Resting {
            incarnation,
            since: Instant::now(),
            planned,
        }
    }
}

/// What the detector proposes for a server it gives up on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    /// `Command::MarkOffline`: its regions are re-replicated.
    Offline,
    /// `Command::Rest`: its regions wait for it for the down grace.
    Rest,
}

/// The outcome of the last leadership confirmation: when it started, and whether it held.
#[derive(Clone, Copy)]
struct Confirmation {
    started: Instant,
    leader: bool,
}

pub(crate) struct Detector {
    me: NodeId,
    tuning: LeaseTuning,
    /// This coordinator's Raft, its applied state, and where its tasks run.
    raft: Raft,
    state: watch::Receiver<Arc<ClusterState>>,
    tracker: TaskTracker,
    inner: Mutex<Inner>,
    /// One confirmation round at a time; heartbeats that arrived before a round started share
    /// its result.
    confirming: tokio::sync::Mutex<()>,
    last_confirmation: Mutex<Option<Confirmation>>,
    /// Set by [`Detector::stop_deciding`]: silent servers are no longer taken offline.
    stopped_deciding: std::sync::atomic::AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Detector {
    pub(crate) fn new(
        me: NodeId,
        tuning: LeaseTuning,
        raft: Raft,
        state: watch::Receiver<Arc<ClusterState>>,
        tracker: TaskTracker,
    ) -> Detector {
        Detector {
            me,
            tuning,
            raft,
            state,
            tracker,
            inner: Mutex::new(Inner {
                servers: HashMap::new(),
                leading: None,
                removing: HashMap::new(),
                tickets: 0,
                announced: HashSet::new(),
                resting: HashMap::new(),
            }),
            confirming: tokio::sync::Mutex::new(()),
            last_confirmation: Mutex::new(None),
            stopped_deciding: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// From now on, takes no server offline, whatever its silence: for a stop of the whole
    /// cluster, whose servers go silent on purpose before their coordinators stop. Leases are
    /// still granted.
    pub(crate) fn stop_deciding(&self) {
        self.stopped_deciding
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// `id` at `incarnation` announced a planned stop: its rest, once applied, lasts the
    /// planned grace.
    pub(crate) fn resting_on_purpose(&self, id: ServerId, incarnation: u64) {
        let rest = Resting::from_now(incarnation, Some(true));
        lock(&self.inner).resting.insert(id, rest);
    }

    fn patience(&self) -> Duration {
        Duration::from_millis(self.tuning.lease_ms + self.tuning.margin_ms)
    }

    /// Records a heartbeat of `incarnation` (checked against the registered one) received at
    /// `at`, in which the server said it acts on `epoch`.
    fn heard(&self, id: ServerId, incarnation: u64, at: Instant, epoch: Epoch) {
        let mut inner = lock(&self.inner);
        let fresh = |available| Watch {
            incarnation,
            heard: None,
            since: at,
            available,
            epoch: None,
        };
        let watch = inner.servers.entry(id).or_insert(fresh(true));
        if incarnation > watch.incarnation {
            *watch = fresh(watch.available);
        }
        if incarnation == watch.incarnation {
            watch.heard = Some(watch.heard.map_or(at, |h| h.max(at)));
            watch.since = watch.since.max(at);
            // Heartbeats are answered concurrently: an older one may be recorded last.
            watch.epoch = Some(watch.epoch.map_or(epoch, |e| e.max(epoch)));
        }
    }

    /// The live servers of the applied configuration that act on an epoch before `epoch`, by
    /// their heartbeats to this coordinator, in id order.
    ///
    /// Only servers heard within the last lease count: one not heard for that long holds no
    /// lease on a heartbeat this coordinator saw, and it will report its epoch in the
    /// heartbeat that renews its lease. (Every coordinator hears every server, so followers
    /// can tell too.)
    pub(crate) fn lagging(&self, epoch: Epoch) -> Vec<ServerId> {
        let state = self.state.borrow().clone();
        let inner = lock(&self.inner);
        let now = Instant::now();
        let lease = Duration::from_millis(self.tuning.lease_ms);
        state
            .servers
            .iter()
            .filter(|s| is_live(s.info.state))
            .filter(|s| {
                inner.servers.get(&s.info.id).is_some_and(|w| {
                    w.incarnation == s.incarnation
                        && w.heard
                            .is_some_and(|h| now.saturating_duration_since(h) <= lease)
                        && w.epoch.is_none_or(|e| e < epoch)
                })
            })
            .map(|s| s.info.id)
            .collect()
    }

    /// Whether this coordinator heard `incarnation` of server `id` within the last lease and
    /// is not removing it: a server that may have failed since must not become a full replica
    /// (a completed transfer can make its target the only one, when it replaces the other).
    pub(crate) fn lease_current(&self, id: ServerId, incarnation: u64) -> bool {
        let inner = lock(&self.inner);
        let lease = Duration::from_millis(self.tuning.lease_ms);
        let heard = inner.servers.get(&id).is_some_and(|w| {
            w.incarnation == incarnation
                && w.heard
                    .is_some_and(|h| Instant::now().saturating_duration_since(h) <= lease)
        });
        heard && !inner.removing.contains_key(&id)
    }

    /// Whether a lease may be granted to that server: not while its removal is pending.
    fn may_grant(&self, id: ServerId) -> bool {
        !lock(&self.inner).removing.contains_key(&id)
    }

    /// Whether this coordinator is the Raft leader, confirmed by a quorum in a round that
    /// started after `received`.
    async fn confirm_leadership(&self, raft: &Raft, received: Instant) -> bool {
        let covered =
            |c: Option<Confirmation>| c.filter(|c| c.started >= received).map(|c| c.leader);
        if let Some(leader) = covered(*lock(&self.last_confirmation)) {
            return leader;
        }
        let _round = self.confirming.lock().await;
        if let Some(leader) = covered(*lock(&self.last_confirmation)) {
            return leader;
        }
        let started = Instant::now();
        // A reply later than a lease is of no use to the server.
        let limit = Duration::from_millis(self.tuning.lease_ms);
        let leader = matches!(
            tokio::time::timeout(limit, raft.ensure_linearizable()).await,
            Ok(Ok(_))
        );
        *lock(&self.last_confirmation) = Some(Confirmation { started, leader });
        leader
    }

    /// Every server of `state` with how long ago this coordinator heard it (leader only).
    pub(crate) fn liveness(&self) -> Vec<ServerLiveness> {
        if self.raft.metrics().borrow().current_leader != Some(self.me) {
            return Vec::new();
        }
        let state = self.state.borrow().clone();
        let inner = lock(&self.inner);
        let now = Instant::now();
        state
            .servers
            .iter()
            .map(|s| {
                let watch = inner
                    .servers
                    .get(&s.info.id)
                    .filter(|w| w.incarnation == s.incarnation);
                let heard = watch.and_then(|w| w.heard);
                ServerLiveness {
                    id: s.info.id,
                    heard_ms_ago: heard
                        .map(|h| now.saturating_duration_since(h).as_millis() as u64),
                    epoch: watch.and_then(|w| w.epoch),
                }
            })
            .collect()
    }

    /// Decides to take `id` out of the chains (offline, or resting) unless that is under way;
    /// `cause` is logged once.
    fn decide(
        self: &Arc<Self>,
        inner: &mut Inner,
        (id, incarnation): (ServerId, u64),
        decision: Decision,
        cause: String,
    ) {
        if inner.removing.contains_key(&id) {
            return;
        }
        inner.tickets += 1;
        let ticket = inner.tickets;
        inner.removing.insert(id, ticket);
        let (verb, command) = match decision {
            Decision::Offline => (
                format!("taking server {id} offline"),
                Command::MarkOffline { id, incarnation },
            ),
            Decision::Rest => {
                let rest = Resting::from_now(incarnation, Some(false));
                inner.resting.insert(id, rest);
                (
                    format!("letting server {id} rest"),
                    Command::Rest { id, incarnation },
                )
            }
        };
        if inner.announced.insert((id, incarnation)) {
            tracing::warn!(server = %id, incarnation, "{verb}: {cause}");
        }
        let this = self.clone();
        self.tracker.spawn(async move {
            let result = this.raft.client_write(command).await;
            match result {
                Ok(r) => match r.data.outcome {
                    Some(Ok(CommandOutcome::MarkedOffline { .. })) => {
                        tracing::info!(server = %id, epoch = r.data.epoch.0, "server {id} is offline")
                    }
                    Some(Ok(CommandOutcome::Rested { places, .. })) => {
                        tracing::info!(server = %id, epoch = r.data.epoch.0, places, "server {id} rests: its regions wait for it")
                    }
                    other => tracing::debug!(server = %id, ?other, "{verb} changed nothing"),
                },
                Err(e) => tracing::debug!(server = %id, error = %e, "could not propose {verb}"),
            }
            // Settled: applied (its state now says Offline), refused, or not proposed (the
            // detector decides again next tick if it still leads).
            let mut inner = lock(&this.inner);
            if inner.removing.get(&id) == Some(&ticket) {
                inner.removing.remove(&id);
            }
        });
    }

    /// A server reported a storage failure: the leader takes it offline at once.
    fn failed(self: &Arc<Self>, id: ServerId, incarnation: u64) {
        if self.raft.metrics().borrow().current_leader != Some(self.me) {
            return;
        }
        let available = self
            .state
            .borrow()
            .server(id)
            .is_some_and(|s| s.incarnation == incarnation && is_live(s.info.state));
        if !available {
            // Offline already (or restarted since): nothing to propose.
            return;
        }
        let mut inner = lock(&self.inner);
        let cause = "it reported a storage failure".into();
        self.decide(&mut inner, (id, incarnation), Decision::Offline, cause);
    }

    /// One look: follows leadership changes, then takes silent servers offline.
    fn tick(self: &Arc<Self>) {
        let (leader, term) = {
            let m = self.raft.metrics().borrow().clone();
            (
                m.current_leader == Some(self.me) && m.state.is_leader(),
                m.current_term,
            )
        };
        let now = Instant::now();
        let mut guard = lock(&self.inner);
        let inner = &mut *guard;
        if !leader {
            if inner.leading.take().is_some() {
                tracing::info!(
                    term,
                    "no longer the coordinator leader: failure detection stops here"
                );
            }
            return;
        }
        if inner.leading.map(|(t, _)| t) != Some(term) {
            // The previous leader may have granted leases nobody heard of: count from now.
            inner.leading = Some((term, now));
            for w in inner.servers.values_mut() {
                w.since = w.since.max(now);
            }
            for r in inner.resting.values_mut() {
                r.since = r.since.max(now);
            }
            inner.removing.clear();
            tracing::info!(
                term,
                patience_ms = self.patience().as_millis() as u64,
                "coordinator leader: no server is taken offline before a lease and its margin have passed"
            );
        }
        if self
            .stopped_deciding
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let state = self.state.borrow().clone();
        // Servers decommissioned since are forgotten.
        inner.servers.retain(|id, _| state.server(*id).is_some());
        for s in &state.servers {
            let (id, incarnation) = (s.info.id, s.incarnation);
            let available = is_live(s.info.state);
            let fresh = Watch {
                incarnation,
                heard: None,
                since: now,
                available,
                epoch: None,
            };
            let watch = inner.servers.entry(id).or_insert(fresh);
            if incarnation > watch.incarnation {
                *watch = Watch {
                    incarnation,
                    heard: None,
                    since: now,
                    available,
                    epoch: None,
                };
            }
            if !available {
                watch.available = false;
                inner.announced.retain(|(s, _)| *s != id);
                if s.info.state == ServerState::Resting {
                    self.watch_rest(inner, (id, incarnation), now);
                }
                continue;
            }
            if !watch.available {
                // Back (registered again): its count starts now.
                watch.available = true;
                watch.since = watch.since.max(now);
            }
            if incarnation < watch.incarnation {
                // Heard from a newer incarnation than this state knows: its registration is
                // on its way.
                continue;
            }
            let (silent, heard) = (now.saturating_duration_since(watch.since), watch.heard);
            if silent <= self.patience() || (heard.is_none() && !self.tuning.suspect_unheard) {
                continue;
            }
            let cause = match heard {
                Some(h) => format!(
                    "no heartbeat for {} ms (lease {} ms + margin {} ms)",
                    now.saturating_duration_since(h).as_millis(),
                    self.tuning.lease_ms,
                    self.tuning.margin_ms
                ),
                None => format!("never heard from in {} ms as leader", silent.as_millis()),
            };
            let decision = if self.tuning.down_grace_ms > 0 {
                Decision::Rest
            } else {
                Decision::Offline
            };
            self.decide(inner, (id, incarnation), decision, cause);
        }
        // Rests of servers no longer resting (back, offline, gone) are forgotten; one just
        // announced or decided is kept while its command is on its way.
        inner.resting.retain(|id, r| {
            let resting = state.server(*id).is_some_and(|s| {
                s.info.state == ServerState::Resting && s.incarnation == r.incarnation
            });
            resting || now.saturating_duration_since(r.since) < REST_ON_ITS_WAY
        });
    }

    /// Counts a Resting server's grace from when this leader first saw it rest (or, for a
    /// rest it decided or was told of, from then), and takes it offline once the grace is
    /// over: its regions are then re-replicated elsewhere.
    fn watch_rest(
        self: &Arc<Self>,
        inner: &mut Inner,
        (id, incarnation): (ServerId, u64),
        now: Instant,
    ) {
        // First seen now (a rest decided by an earlier leader), or of an earlier process.
        let rest = inner
            .resting
            .entry(id)
            .or_insert_with(|| Resting::from_now(incarnation, None));
        if rest.incarnation != incarnation {
            *rest = Resting::from_now(incarnation, None);
        }
        let grace = self.tuning.grace(rest.planned);
        let rested = now.saturating_duration_since(rest.since);
        if rested <= grace {
            return;
        }
        let cause = format!(
            "it has rested for {} s, past its grace period of {} s",
            rested.as_secs(),
            grace.as_secs()
        );
        self.decide(inner, (id, incarnation), Decision::Offline, cause);
    }
}

/// The leader's detector: looks every [`TICK`] until the coordinator stops.
pub(crate) async fn run(detector: Arc<Detector>, cancel: CancellationToken) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = interval.tick() => detector.tick(),
        }
    }
}

/// Checks that a request from a server names a registered server with its token, and not an
/// earlier incarnation than the registered one (this coordinator may lag: a later one may be
/// registered at the leader already). Returns the registered incarnation, or the refusal to
/// answer: `Malformed` for an unknown server or the wrong token (a decommissioned server is
/// unknown), `StaleServer` for an earlier incarnation.
pub(crate) fn identify(
    detector: &Detector,
    id: ServerId,
    token: u128,
    incarnation: u64,
) -> Result<u64, Response> {
    let registered = {
        let state = detector.state.borrow();
        state
            .server(id)
            .filter(|s| s.token == token)
            .map(|s| s.incarnation)
    };
    let Some(current) = registered else {
        return Err(Response::Error(ErrorReply::new(
            Status::Malformed,
            format!("no server {id} with that token is registered: register first"),
        )));
    };
    if incarnation < current {
        return Err(Response::Error(ErrorReply::new(
            Status::StaleServer,
            format!("server {id} restarted since: it is at incarnation {current}, this process is {incarnation}"),
        )));
    }
    Ok(current)
}

/// Answers one heartbeat received at `received`, from a server acting on `epoch`.
pub(crate) async fn heartbeat(
    detector: &Arc<Detector>,
    received: Instant,
    id: ServerId,
    token: u128,
    incarnation: u64,
    failed: bool,
    epoch: Epoch,
) -> Response {
    let lease_ms = detector.tuning.lease_ms;
    let reply = |leader: bool| {
        let state = detector.state.borrow().clone();
        let server_state = state
            .server(id)
            .map_or(ServerState::Offline, |s| s.info.state);
        Response::Heartbeat(HeartbeatReply {
            leader,
            state: server_state,
            epoch: state.epoch,
            lease_ms,
        })
    };
    let current = match identify(detector, id, token, incarnation) {
        Ok(current) => current,
        Err(refused) => return refused,
    };
    detector.heard(id, incarnation, received, epoch);
    if incarnation > current {
        // Registered at the leader, not applied here yet.
        return reply(false);
    }
    if failed {
        detector.failed(id, incarnation);
        return reply(false);
    }
    if detector.raft.metrics().borrow().current_leader != Some(detector.me) {
        return reply(false);
    }
    let leader = detector.confirm_leadership(&detector.raft, received).await;
    // Read after the confirmation: a removal decided meanwhile, or applied, denies the lease.
    let granted = leader && detector.may_grant(id);
    let still = detector
        .state
        .borrow()
        .server(id)
        .is_some_and(|s| s.incarnation == incarnation);
    reply(granted && still)
}
