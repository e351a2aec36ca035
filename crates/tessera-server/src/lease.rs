//! The server's side of failure detection: its lease with the coordinators.
//!
//! A cluster server may serve reads and take writes only while it holds a lease. It sends a
//! `Heartbeat` to every coordinator every quarter lease ([`keep_lease`], on a thread of its own:
//! `LeaseKeeper`); a reply from the
//! coordinators' Raft leader that says `leader: true` and `state: Available` renews the lease
//! until `lease_ms` after the moment the heartbeat was *sent* (not answered: the leader counts
//! from when it received it, which is later, and takes the server out of its replica sets only
//! `lease + margin` after that, so the lease has lapsed here by then). When the lease lapses
//! the server answers [`lapsed_error`] and clients retry: another server will lead.
//!
//! A server whose storage failed sets `failed`: its heartbeats say so, the leader takes it
//! offline at once, and its lease ends for good ([`Lease::end`]) since it stopped by itself.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tessera_protocol::handshake::{Dialed, Dialer};
use tessera_protocol::{
    codec, decode_response, encode_request, ErrorReply, HeartbeatReply, Request, RequestFrame,
    Response, ServerState, Status,
};
use tessera_types::{Epoch, ServerId};

use crate::coordination::Coordinators;

/// `until` of a lease that never lapses.
const ALWAYS: u64 = u64::MAX;
/// `until` of a lease ended for good.
const ENDED: u64 = u64::MAX - 1;
/// How often to heartbeat before any reply told the lease's length.
const FIRST_PERIOD: Duration = Duration::from_millis(250);
/// The shortest heartbeat timeout, whatever the lease.
const TIMEOUT_MIN: Duration = Duration::from_millis(100);

/// A server's lease: valid until some instant, renewed by the coordinators' leader.
///
/// Lock-free: connections check [`Lease::is_valid`] on every request.
#[derive(Debug)]
pub struct Lease {
    /// Instants are kept as microseconds since this one.
    origin: Instant,
    /// Valid while `now < until` (microseconds since `origin`); [`ALWAYS`] or [`ENDED`].
    until: AtomicU64,
}

impl Default for Lease {
    fn default() -> Self {
        Lease::new()
    }
}

impl Lease {
    /// A lease not granted yet: invalid until the first renewal.
    pub fn new() -> Lease {
        Lease {
            origin: Instant::now(),
            until: AtomicU64::new(0),
        }
    }

    /// A lease that never lapses: a standalone server's, which answers to nobody.
    pub fn always() -> Lease {
        Lease {
            origin: Instant::now(),
            until: AtomicU64::new(ALWAYS),
        }
    }

    fn micros(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin)
            .as_micros()
            .min(ENDED as u128 - 1) as u64
    }

    pub fn is_valid(&self) -> bool {
        self.is_valid_at(Instant::now())
    }

    fn is_valid_at(&self, now: Instant) -> bool {
        match self.until.load(Ordering::Acquire) {
            ALWAYS => true,
            ENDED => false,
            until => self.micros(now) < until,
        }
    }

    /// How much longer the lease runs (`None` for [`Lease::always`]).
    pub fn remaining(&self) -> Option<Duration> {
        match self.until.load(Ordering::Acquire) {
            ALWAYS => None,
            ENDED => Some(Duration::ZERO),
            until => Some(Duration::from_micros(
                until.saturating_sub(self.micros(Instant::now())),
            )),
        }
    }

    /// Extends the lease to `lease_ms` after `sent_at`, the moment the heartbeat that earned it
    /// was sent. Never shortens it (a late reply to an older heartbeat changes nothing), and
    /// never revives an ended one.
    pub fn renew(&self, sent_at: Instant, lease_ms: u64) {
        let until = self
            .micros(sent_at)
            .saturating_add(lease_ms.saturating_mul(1000))
            .min(ENDED - 1);
        let _ = self.until.fetch_update(
            Ordering::AcqRel,
            Ordering::Acquire,
            |current| match current {
                ALWAYS | ENDED => None,
                current if current >= until => None,
                _ => Some(until),
            },
        );
    }

    /// Ends the lease for good (the server failed and stopped by itself): it never renews.
    /// No effect on [`Lease::always`].
    pub fn end(&self) {
        let _ = self.until.fetch_update(
            Ordering::AcqRel,
            Ordering::Acquire,
            |current| match current {
                ALWAYS => None,
                _ => Some(ENDED),
            },
        );
    }
}

/// What a server answers while its lease has lapsed.
pub fn lapsed_error() -> ErrorReply {
    ErrorReply::new(
        Status::Unavailable,
        "this server's lease with the coordinators lapsed, so it serves nothing for now; retry: another server will \
         lead",
    )
}

/// One kept-open connection to one coordinator (the heartbeats', and the transfer reports').
pub(crate) struct Link {
    pub(crate) address: String,
    dialer: Dialer,
    framed: Option<Dialed>,
    next_id: u64,
}

impl Link {
    /// A link to the coordinator at `address`, connected on its first call.
    pub(crate) fn new(address: String, dialer: Dialer) -> Link {
        Link {
            address,
            dialer,
            framed: None,
            next_id: 1,
        }
    }

    /// A link to each of the coordinators.
    pub(crate) fn to_each(coordinators: Coordinators) -> Vec<Link> {
        let dialer = coordinators.dialer;
        coordinators
            .addresses
            .into_iter()
            .map(|a| Link::new(a, dialer.clone()))
            .collect()
    }

    /// One request, answered within `timeout`, or `None` (the connection is then dropped and
    /// opened again next time).
    pub(crate) async fn call(&mut self, request: Request, timeout: Duration) -> Option<Response> {
        let id = self.next_id;
        self.next_id += 1;
        let attempt = async {
            if self.framed.is_none() {
                let dialed = self.dialer.connect(&self.address, codec(), timeout).await;
                self.framed = Some(dialed.ok()?);
            }
            let framed = self.framed.as_mut()?;
            let body = encode_request(&RequestFrame {
                id,
                epoch: Epoch(0),
                request,
            })
            .ok()?;
            framed.send(body).await.ok()?;
            loop {
                let frame = decode_response(&framed.next().await?.ok()?).ok()?;
                // Answers to earlier requests that timed out are skipped.
                if frame.id == id {
                    return Some(frame.response);
                }
            }
        };
        let response = tokio::time::timeout(timeout, attempt).await.ok().flatten();
        if response.is_none() {
            self.framed = None;
        }
        response
    }
}

/// Keeps this server's lease: every quarter lease, a heartbeat to every coordinator at once,
/// each on its own kept-open connection with a short timeout, saying which configuration the
/// server acts on (`epoch()`: the coordinators answer a space change once every server acts on
/// it). Renews `lease` when a reply grants it (`leader: true`, `state` Available or Leaving —
/// a server being decommissioned serves until its regions have moved — and `failed` unset).
/// When the coordinators say the server is Offline (or Resting, unless `resting()`: it
/// announced a planned stop) and it has not failed, registers it again
/// (same token and incarnation) so it becomes Available; it then holds no regions until
/// re-replication gives it some. When `failed` is set, ends the lease for good (the heartbeats then report the
/// failure). When the coordinators know a newer incarnation of this server, ends the lease for
/// good too: this process is a previous life. Returns once `stop()` says so.
#[allow(clippy::too_many_arguments)]
pub async fn keep_lease(
    coordinators: Coordinators,
    server: ServerId,
    token: u128,
    incarnation: u64,
    address: String,
    lease: Arc<Lease>,
    failed: Arc<AtomicBool>,
    epoch: impl Fn() -> Epoch,
    (stop, resting): (impl Fn() -> bool, impl Fn() -> bool),
) {
    let mut links = Link::to_each(coordinators);
    let mut period = FIRST_PERIOD;
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut holding = lease.is_valid();
    let mut logged_failure = false;
    let mut logged_stale = false;
    while !stop() {
        interval.tick().await;
        if stop() {
            return;
        }
        let failed_now = failed.load(Ordering::Acquire);
        if failed_now {
            lease.end();
            if !logged_failure {
                tracing::error!(server = %server, "storage failed: this server gives up its lease and tells the coordinators");
                logged_failure = true;
            }
        }
        let request = Request::Heartbeat {
            server,
            token,
            incarnation,
            failed: failed_now,
            epoch: epoch(),
        };
        // Half a lease: a later reply would renew it for less than the next heartbeat takes.
        let timeout = (period * 2).max(TIMEOUT_MIN);
        let sent_at = Instant::now();
        let replies =
            futures::future::join_all(links.iter_mut().map(|l| l.call(request.clone(), timeout)))
                .await;

        let mut newest: Option<HeartbeatReply> = None;
        for reply in replies.into_iter().flatten() {
            match reply {
                Response::Heartbeat(r) => {
                    let serving = matches!(r.state, ServerState::Available | ServerState::Leaving);
                    if r.leader && serving && !failed_now {
                        lease.renew(sent_at, r.lease_ms);
                    }
                    if newest
                        .as_ref()
                        .is_none_or(|n| r.epoch > n.epoch || (r.leader && r.epoch == n.epoch))
                    {
                        newest = Some(r);
                    }
                }
                Response::Error(e) if e.status == Status::StaleServer => {
                    lease.end();
                    if !logged_stale {
                        tracing::error!(server = %server, incarnation, error = %e, "the coordinators know a newer incarnation of this server: this process must stop");
                        logged_stale = true;
                    }
                }
                Response::Error(e) => {
                    tracing::debug!(server = %server, error = %e, "heartbeat refused")
                }
                other => {
                    tracing::debug!(server = %server, ?other, "unexpected answer to a heartbeat")
                }
            }
        }
        if let Some(r) = &newest {
            let lease_ms = r.lease_ms.max(1);
            let wanted = Duration::from_millis(lease_ms / 4).max(Duration::from_millis(1));
            if wanted != period {
                period = wanted;
                interval = tokio::time::interval(period);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                interval.tick().await;
            }
            let away = match r.state {
                ServerState::Offline => true,
                // A rest it did not announce: its lease lapsed (a pause, a cut network).
                ServerState::Resting => !resting(),
                _ => false,
            };
            if away && !failed_now && !logged_stale {
                tracing::warn!(server = %server, epoch = r.epoch.0, state = ?r.state, "the coordinators took this server out of the chains; registering again");
                register_again(
                    &mut links,
                    token,
                    &address,
                    incarnation,
                    timeout.max(Duration::from_secs(1)),
                )
                .await;
            }
        }
        let valid = lease.is_valid();
        if valid != holding {
            holding = valid;
            if valid {
                tracing::info!(server = %server, "lease with the coordinators held: serving");
            } else {
                tracing::warn!(server = %server, "lease with the coordinators lapsed: serving nothing until it is renewed");
            }
        }
    }
}

/// [`keep_lease`] on a thread of its own with its own runtime: a server busy with requests
/// (its runtime's workers all taken, a queue of tasks before the heartbeat's) must not miss
/// its heartbeats, or its lease lapses because it is busy, and the cluster loses a server
/// just when it has work.
pub(crate) struct LeaseKeeper {
    cancel: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl LeaseKeeper {
    pub(crate) fn start(
        keeping: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<LeaseKeeper> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("lease".into())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        () = keeping => {}
                        _ = cancelled => {}
                    }
                })
            })?;
        Ok(LeaseKeeper { cancel, thread })
    }

    /// Stops the heartbeats and waits for the thread (blocking).
    pub(crate) fn stop(self) {
        let _ = self.cancel.send(());
        let _ = self.thread.join();
    }
}

/// Registers again with the first coordinator that accepts it.
async fn register_again(
    links: &mut [Link],
    token: u128,
    address: &str,
    incarnation: u64,
    timeout: Duration,
) {
    for link in links.iter_mut() {
        let request = Request::RegisterServer {
            token,
            address: address.to_owned(),
            incarnation,
        };
        match link.call(request, timeout).await {
            Some(Response::Registered(id)) => {
                tracing::info!(server = %id, "registered again: Available (holding no regions until re-replication)");
                return;
            }
            Some(other) => {
                tracing::debug!(?other, coordinator = %link.address, "registering again failed")
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tessera_coordinator::{Coordinator, CoordinatorOptions, LeaseTuning};
    use tessera_protocol::Configuration;

    #[test]
    fn a_lease_is_valid_after_a_renewal_and_lapses_after_its_length() {
        let lease = Lease::new();
        assert!(!lease.is_valid(), "not granted yet");
        let sent = Instant::now();
        lease.renew(sent, 200);
        assert!(lease.is_valid());
        assert!(lease.is_valid_at(sent + Duration::from_millis(199)));
        assert!(
            !lease.is_valid_at(sent + Duration::from_millis(200)),
            "runs from the moment the heartbeat was sent"
        );
        // A late reply to an older heartbeat does not shorten it.
        lease.renew(sent - Duration::from_millis(150), 200);
        assert!(lease.is_valid_at(sent + Duration::from_millis(199)));
        // A newer one extends it.
        lease.renew(sent + Duration::from_millis(100), 200);
        assert!(lease.is_valid_at(sent + Duration::from_millis(299)));
        assert!(!lease.is_valid_at(sent + Duration::from_millis(300)));
        let remaining = lease.remaining().unwrap();
        assert!(
            remaining <= Duration::from_millis(300) && remaining > Duration::from_millis(200),
            "{remaining:?}"
        );
        // Real time too.
        let lease = Lease::new();
        lease.renew(Instant::now(), 50);
        assert!(lease.is_valid());
        std::thread::sleep(Duration::from_millis(60));
        assert!(!lease.is_valid());
        assert_eq!(lease.remaining(), Some(Duration::ZERO));
    }

    #[test]
    fn always_never_lapses_and_an_ended_lease_never_renews() {
        let always = Lease::always();
        assert!(always.is_valid_at(Instant::now() + Duration::from_secs(1_000_000_000)));
        always.end();
        always.renew(Instant::now(), 1);
        assert!(always.is_valid());
        assert_eq!(always.remaining(), None);

        let lease = Lease::new();
        lease.renew(Instant::now(), 60_000);
        assert!(lease.is_valid());
        lease.end();
        assert!(!lease.is_valid());
        lease.renew(Instant::now(), 60_000);
        assert!(!lease.is_valid(), "ended for good");
    }

    #[test]
    fn the_lapsed_error_says_retry() {
        let e = lapsed_error();
        assert_eq!(e.status, Status::Unavailable);
        assert!(e.status.is_retryable());
        assert!(
            e.message.contains("lease") && e.message.contains("retry"),
            "{}",
            e.message
        );
    }

    async fn configuration(addr: SocketAddr) -> Configuration {
        let mut link = Link::new(addr.to_string(), Dialer::default());
        match link.call(Request::GetConfig, Duration::from_secs(5)).await {
            Some(Response::Config(c)) => *c,
            other => panic!("{other:?}"),
        }
    }

    async fn wait_until<F: std::future::Future<Output = bool>>(
        what: &str,
        within: Duration,
        mut done: impl FnMut() -> F,
    ) {
        let deadline = Instant::now() + within;
        while !done().await {
            assert!(Instant::now() < deadline, "not within {within:?}: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Against a real coordinator: the lease is held while heartbeats flow; when they stop,
    /// it lapses here before the coordinator takes the server offline; when they resume, the
    /// server registers again and holds a lease again; a storage failure ends it for good.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keep_lease_with_a_real_coordinator() {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut options = CoordinatorOptions::new(1, dir.path(), addr, vec![(1, addr.to_string())]);
        options.lease = LeaseTuning {
            lease_ms: 300,
            margin_ms: 200,
            ..LeaseTuning::default()
        };
        let coordinator = Coordinator::start_with_listener(options, listener)
            .await
            .unwrap();
        let coordinators = Coordinators {
            addresses: vec![addr.to_string()],
            dialer: Dialer::default(),
        };

        let (token, incarnation, address) = (77u128, 5u64, "127.0.0.1:9".to_string());
        let mut link = Link::new(addr.to_string(), Dialer::default());
        let register = Request::RegisterServer {
            token,
            address: address.clone(),
            incarnation,
        };
        let mut id = None;
        for _ in 0..100 {
            if let Some(Response::Registered(i)) =
                link.call(register.clone(), Duration::from_secs(5)).await
            {
                id = Some(i);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let id = id.expect("registered");

        let start = |lease: Arc<Lease>, failed: Arc<AtomicBool>| {
            let stop = Arc::new(AtomicBool::new(false));
            let stop2 = stop.clone();
            let task = tokio::spawn(keep_lease(
                coordinators.clone(),
                id,
                token,
                incarnation,
                address.clone(),
                lease,
                failed,
                || Epoch(3),
                (move || stop2.load(Ordering::SeqCst), || false),
            ));
            (stop, task)
        };
        let lease = Arc::new(Lease::new());
        let failed = Arc::new(AtomicBool::new(false));
        let (stop, task) = start(lease.clone(), failed.clone());
        let valid = |lease: &Arc<Lease>| {
            let lease = lease.clone();
            move || std::future::ready(lease.is_valid())
        };
        let state = move || async move { configuration(addr).await.server(id).unwrap().state };
        wait_until(
            "the lease is granted",
            Duration::from_secs(5),
            valid(&lease),
        )
        .await;
        // The heartbeats say which epoch the server acts on.
        let reported = coordinator
            .status()
            .servers
            .iter()
            .find(|s| s.id == id)
            .and_then(|s| s.epoch);
        assert_eq!(reported, Some(Epoch(3)));
        // Held for a while: renewed every quarter lease.
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(lease.is_valid());
        }

        // Heartbeats stop: the lease lapses here before the coordinator takes the server offline.
        stop.store(true, Ordering::SeqCst);
        task.await.unwrap();
        let mut lapsed_first = false;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let valid_before = lease.is_valid();
            let offline = state().await == ServerState::Offline;
            if offline {
                assert!(!valid_before, "taken offline while its lease still ran");
                break;
            }
            lapsed_first |= !lease.is_valid();
            assert!(Instant::now() < deadline, "never taken offline");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            lapsed_first,
            "the lease lapsed before the server was taken offline"
        );
        assert!(!lease.is_valid());

        // Heartbeats resume: it hears it is Offline, registers again, holds a lease again.
        let (stop, task) = start(lease.clone(), failed.clone());
        wait_until("Available again", Duration::from_secs(5), || async {
            state().await == ServerState::Available
        })
        .await;
        wait_until(
            "the lease is granted again",
            Duration::from_secs(5),
            valid(&lease),
        )
        .await;

        // Storage fails: the lease ends at once, the server goes offline without waiting for a
        // lease to lapse, and it stays so (no registering again).
        failed.store(true, Ordering::SeqCst);
        let reported = Instant::now();
        let ended = {
            let lease = lease.clone();
            move || std::future::ready(!lease.is_valid())
        };
        wait_until("the lease ends", Duration::from_secs(1), ended).await;
        wait_until(
            "offline after the failure",
            Duration::from_secs(5),
            || async { state().await == ServerState::Offline },
        )
        .await;
        assert!(reported.elapsed() < Duration::from_millis(1000));
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(
            state().await,
            ServerState::Offline,
            "it does not register again after a failure"
        );
        assert!(!lease.is_valid());
        stop.store(true, Ordering::SeqCst);
        task.await.unwrap();
        coordinator.shutdown().await;
    }
}
