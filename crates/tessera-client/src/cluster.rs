//! The cluster a client talks to — coordinators and servers, or a standalone server as the
//! one-server cluster — the cached configuration, a pool of connections per server
//! ([`crate::pool`]), and the retry loop every request runs in.
//!
//! * Admin requests (add/remove/alter a space, the configuration, coordinator status) go to the
//!   coordinators, the one that answered last first, then each other in turn; standalone, to
//!   the server, which has no long poll for a newer configuration: it is asked again.
//! * Key requests go to the key's point leader, searches to one replica per region
//!   ([`crate::routing`]); every frame carries the cached epoch.
//! * A request refused with `StaleEpoch` or `Unavailable` was not applied: the client refreshes
//!   its configuration when the refusal shows a newer one, waits (10 ms, doubling up to 500 ms)
//!   and sends it again, for about [`RETRY_BUDGET`] in all. A read whose connection broke is
//!   sent again the same way; a write whose connection broke after it was sent may have been
//!   applied, so it fails with the connection's error and is never resent.
//! * Any answer that shows a newer epoch starts a refresh in the background.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use tessera_protocol::constants::KEYS_PER_REQUEST_MAX;
use tessera_protocol::{
    Configuration, CoordinatorStatus, KeyRegionLoad, KeysChange, RegionCount, Request, Response,
    SearchAnswer, ServerState, SortOrder, SpaceMap, SpaceStatistics, SpaceTrace, WireObject,
};
use tessera_types::{Epoch, Funcall, Object, Predicate, ServerId, SpaceSchema, SubspaceId, Value};
use tokio::time::Instant;

use crate::connection::{CallError, Connection};
use crate::error::{unexpected, ClientError};
use crate::merge;
use crate::options::ClientOptions;
use crate::pool::Pool;
use crate::routing::{self, Fanout, ReadFrom, Routes};
use tessera_protocol::{Explanation, Status};

/// How long a request may take, retries included, unless the client was given another
/// deadline ([`ClientOptions::timeout`]).
pub(crate) const RETRY_BUDGET: Duration = Duration::from_secs(10);
/// Longest one attempt of a read waits for its server before another is tried: a server that
/// stopped (SIGSTOP, a partition) must not take a read's whole deadline.
const READ_ATTEMPT_MAX: Duration = Duration::from_secs(2);
/// How long a write waits for its server before the client asks the coordinators whether they
/// took that server out of the chains (and again as often while it waits).
const WRITE_SUSPECT_AFTER: Duration = Duration::from_secs(1);
const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_millis(500);
/// How long one `WaitConfig` asks a coordinator to wait for a newer configuration.
const WAIT_CONFIG: Duration = Duration::from_secs(1);
/// How often a standalone server, which has no long poll, is asked for a newer configuration.
const STANDALONE_POLL: Duration = Duration::from_millis(100);
/// Single writes a group delete or group update has in flight at once (those its `WriteKeys`
/// requests could not make).
const GROUP_WRITES_IN_FLIGHT: usize = 64;
/// `WriteKeys` requests a group delete or group update has in flight at once.
const GROUP_REQUESTS_IN_FLIGHT: usize = 8;
/// Documents a search that read a pointer overlay reads by key at once.
const POINTER_READS_IN_FLIGHT: usize = 64;

/// Waits between attempts, doubling, until a deadline.
struct Backoff {
    deadline: Instant,
    next: Duration,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff::within(RETRY_BUDGET)
    }

    fn within(budget: Duration) -> Backoff {
        Backoff {
            deadline: Instant::now() + budget,
            next: BACKOFF_FIRST,
        }
    }

    /// Waits before the next attempt; `false` (at once) when that would pass the deadline.
    async fn wait(&mut self) -> bool {
        if Instant::now() + self.next > self.deadline {
            return false;
        }
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        true
    }
}

/// What one attempt of a request came to.
enum Attempt<T> {
    Done(T),
    /// Refused or lost without being applied: worth another attempt. `server_epoch` is the
    /// epoch the refusing server answered in, when it answered.
    Retry {
        error: ClientError,
        server_epoch: Option<Epoch>,
    },
    Fail(ClientError),
}

impl Attempt<Response> {
    fn is_update_pending(&self) -> bool {
        matches!(self, Attempt::Done(Response::Error(e)) if e.status == Status::UpdatePending)
    }

    /// A get refused [`Status::UpdatePending`] even by the key region's last reader (whose
    /// configuration is not the client's): worth another attempt on a fresh configuration.
    fn pending_retried(self) -> Attempt<Response> {
        match self {
            Attempt::Done(Response::Error(e)) if e.status == Status::UpdatePending => {
                Attempt::Retry {
                    error: e.into(),
                    server_epoch: None,
                }
            }
            other => other,
        }
    }
}

/// The end of an attempt at `server`, which the configuration gives no address.
fn no_address<T>(server: ServerId) -> Attempt<T> {
    let error = routing::refused(
        Status::Unavailable,
        format!("server {server} has no address"),
    );
    Attempt::Retry {
        error,
        server_epoch: None,
    }
}

/// `key` checked against the space's key type, and its point leader: or the attempt's end,
/// failed for a key of the wrong type, to be retried when the key's region has no leader.
fn led_key<T>(map: &SpaceMap, key: Value) -> Result<(Value, ServerId), Attempt<T>> {
    let key = routing::check_key(&map.config().schema, key).map_err(Attempt::Fail)?;
    let leader = map.point_leader(&key).map_err(|error| Attempt::Retry {
        error: error.into(),
        server_epoch: None,
    })?;
    Ok((key, leader))
}

/// Whether a refusal depends on the schema (which a newer configuration may change).
fn is_schema_refusal(e: &ClientError) -> bool {
    matches!(
        e.status(),
        Some(Status::WrongType | Status::UnknownAttribute | Status::UnknownSpace)
    )
}

/// Whether an error is a connection's (refused, reset, closed) rather than an answer's.
fn is_connection_error(e: &ClientError) -> bool {
    matches!(e, ClientError::Io(_) | ClientError::ConnectionClosed)
}

pub(crate) struct Cluster {
    /// Every coordinator address known: those given, then those the coordinators named. A
    /// standalone server's address alone when `standalone`.
    coordinators: RwLock<Vec<String>>,
    /// The address of a standalone server, when the client talks to one: it is then the
    /// configuration's source, takes the changes of spaces itself, and is every server of the
    /// configuration (the one-server cluster), reached at this address.
    standalone: Option<String>,
    /// The coordinator that answered last (an index into `coordinators`).
    preferred: AtomicUsize,
    routes: RwLock<Arc<Routes>>,
    /// One refresh at a time; `refreshes` counts those done, so that callers who waited for
    /// one need not make another.
    refreshing: tokio::sync::Mutex<()>,
    refreshes: AtomicU64,
    /// The connections to each address (servers and coordinators), opened when first needed
    /// and as requests need more (see [`Pool`]).
    connections: Mutex<HashMap<String, Arc<Pool>>>,
    /// Reads made (searches and gets): rotates the replica each region or key is asked of.
    turn: AtomicU64,
    /// Every request's deadline, retries included.
    timeout: Duration,
    /// How reads over several regions pick replicas.
    fanout: Fanout,
    /// Which replica a get asks.
    read_from: ReadFrom,
    /// How every connection authenticates.
    dialer: tessera_protocol::handshake::Dialer,
}

/// What one server answers about the regions it leads: (region, item) pairs.
type RegionItems<T> = Vec<(u32, T)>;

/// What a search, or one server's share of it, answers.
enum Found {
    Objects(Vec<WireObject>),
    Count(u64),
}

/// What an attempt at a search gathered from its servers.
enum Gathered {
    /// One server's answer to the whole search ([`routing::asks`]).
    Whole(Found),
    /// Each server's matches, apart from the stubs of pointer overlays.
    Parts {
        found: Vec<WireObject>,
        stubs: Vec<WireObject>,
    },
}

impl Gathered {
    /// Adds the answer of the request for `subspace` (the first part it named), refusing
    /// objects that do not fit `schema`.
    fn add(
        &mut self,
        schema: &SpaceSchema,
        whole: bool,
        subspace: Option<SubspaceId>,
        answered: Found,
    ) -> Result<(), ClientError> {
        if let Found::Objects(objects) = &answered {
            if let Some(bad) = objects
                .iter()
                .find(|o| o.values.len() != schema.attributes.len())
            {
                return Err(ClientError::Protocol(format!(
                    "an object of {:?} with {} values does not fit its schema",
                    schema.name,
                    bad.values.len()
                )));
            }
        }
        match (self, answered) {
            (gathered, answered) if whole => *gathered = Gathered::Whole(answered),
            (Gathered::Parts { stubs, .. }, Found::Objects(objects))
                if subspace.is_some_and(|s| schema.pointer_overlay(s).is_some()) =>
            {
                stubs.extend(objects)
            }
            (Gathered::Parts { found, .. }, Found::Objects(objects)) => found.extend(objects),
            _ => {
                return Err(ClientError::Protocol(
                    "a count answered a share of a search".into(),
                ))
            }
        }
        Ok(())
    }
}

impl Cluster {
    /// Starts from a coordinator that answered `status` on `connection`, knowing the
    /// coordinators at `addresses` too, and fetches the configuration.
    pub(crate) async fn start(
        addresses: &[String],
        (address, connection): (String, Arc<Connection>),
        status: &CoordinatorStatus,
        options: &ClientOptions,
    ) -> Result<Arc<Cluster>, ClientError> {
        let cluster = Cluster::new((address.clone(), connection), None, options);
        cluster.learn_coordinators(std::iter::once(&address).chain(addresses));
        cluster.learn_coordinators(status.members.iter().map(|(_, a)| a));
        cluster.refresh(None, &mut Backoff::new()).await?;
        Ok(cluster)
    }

    /// Starts from a standalone server at `address` (which answered on `connection` that it
    /// is no coordinator) and fetches its configuration.
    pub(crate) async fn standalone(
        (address, connection): (String, Arc<Connection>),
        options: &ClientOptions,
    ) -> Result<Arc<Cluster>, ClientError> {
        let cluster = Cluster::new((address.clone(), connection), Some(&address), options);
        cluster.learn_coordinators([&address]);
        cluster.refresh(None, &mut Backoff::new()).await?;
        Ok(cluster)
    }

    fn new(
        (address, connection): (String, Arc<Connection>),
        standalone: Option<&str>,
        options: &ClientOptions,
    ) -> Arc<Cluster> {
        let empty = Configuration {
            model: None,
            epoch: Epoch(0),
            servers: vec![],
            spaces: vec![],
        };
        Arc::new(Cluster {
            coordinators: RwLock::new(vec![]),
            standalone: standalone.map(str::to_owned),
            preferred: AtomicUsize::new(0),
            routes: RwLock::new(Arc::new(Routes::new(Arc::new(empty), standalone))),
            refreshing: tokio::sync::Mutex::new(()),
            refreshes: AtomicU64::new(0),
            connections: Mutex::new(HashMap::from([(
                address.clone(),
                Arc::new(Pool::new(&address, options.dialer(), Some(connection))),
            )])),
            turn: AtomicU64::new(0),
            timeout: options.timeout,
            fanout: options.fanout,
            read_from: options.read_from,
            dialer: options.dialer(),
        })
    }

    /// Whether this client talks to coordinators (not to a standalone server).
    pub(crate) fn has_coordinators(&self) -> bool {
        self.standalone.is_none()
    }

    fn learn_coordinators<'a>(&self, addresses: impl IntoIterator<Item = &'a String>) {
        let mut known = self.coordinators.write().expect("coordinators lock");
        for a in addresses {
            if !known.contains(a) {
                known.push(a.clone());
            }
        }
    }

    fn coordinators(&self) -> Vec<String> {
        self.coordinators.read().expect("coordinators lock").clone()
    }

    pub(crate) fn configuration(&self) -> Arc<Configuration> {
        self.routes().config.clone()
    }

    fn routes(&self) -> Arc<Routes> {
        self.routes.read().expect("routes lock").clone()
    }

    /// A connection to `address` for one request (see [`Pool::connection`]).
    async fn connection(&self, address: &str) -> Result<Arc<Connection>, ClientError> {
        let pool = self
            .connections
            .lock()
            .expect("connections lock")
            .entry(address.to_owned())
            .or_insert_with(|| Arc::new(Pool::new(address, self.dialer.clone(), None)))
            .clone();
        pool.connection().await
    }

    // ---- coordinators --------------------------------------------------------------------

    /// Sends a request to the coordinators until one answers it, retrying on `Unavailable`
    /// (no Raft leader) and on connections refused or broken, until `backoff`'s deadline. A
    /// `write` whose connection broke after it was sent fails at once.
    async fn coordinator_call(
        &self,
        request: &Request,
        write: bool,
        backoff: &mut Backoff,
    ) -> Result<(Response, Epoch), ClientError> {
        loop {
            let coordinators = self.coordinators();
            let first = self.preferred.load(Ordering::Relaxed);
            let mut last = None;
            for i in (0..coordinators.len()).map(|k| (first + k) % coordinators.len()) {
                let address = &coordinators[i];
                let outcome = match self.connection(address).await {
                    Err(e) => Err(CallError::Unsent(e)),
                    Ok(c) => c.try_call(request.clone(), Epoch(0)).await,
                };
                match outcome {
                    Ok((Response::Error(e), _)) if e.status.is_retryable() => {
                        last = Some(ClientError::from(e))
                    }
                    Ok(answer) => {
                        self.preferred.store(i, Ordering::Relaxed);
                        return Ok(answer);
                    }
                    Err(CallError::Unsent(e)) if is_connection_error(&e) => last = Some(e),
                    Err(CallError::Lost(e)) if !write => last = Some(e),
                    Err(e) => return Err(e.into_error()),
                }
            }
            if !backoff.wait().await {
                return Err(match last {
                    Some(e @ ClientError::Server { .. }) => e,
                    Some(e) => {
                        ClientError::NoCoordinator(format!("{} ({e})", coordinators.join(",")))
                    }
                    None => ClientError::NoCoordinator("no coordinator address".into()),
                });
            }
        }
    }

    /// Fetches the configuration: at least epoch `wanted` (waiting for it with `WaitConfig`
    /// until `backoff`'s deadline), or whatever is current when `wanted` is `None`. Concurrent
    /// callers share one fetch. Never goes back to an older configuration.
    async fn refresh(
        &self,
        wanted: Option<Epoch>,
        backoff: &mut Backoff,
    ) -> Result<Arc<Routes>, ClientError> {
        let seen = self.refreshes.load(Ordering::Acquire);
        let _one_at_a_time = self.refreshing.lock().await;
        loop {
            let current = self.routes();
            match wanted {
                Some(e) if current.config.epoch >= e => return Ok(current),
                None if self.refreshes.load(Ordering::Acquire) != seen => return Ok(current),
                _ => {}
            }
            let request = match wanted {
                // A standalone server has no long poll: it is asked again after a pause.
                None => Request::GetConfig,
                Some(_) if self.standalone.is_some() => Request::GetConfig,
                Some(e) => {
                    let left = backoff.deadline.saturating_duration_since(Instant::now());
                    let timeout_ms = WAIT_CONFIG.min(left).as_millis() as u32;
                    Request::WaitConfig {
                        after: Epoch(e.0.saturating_sub(1)),
                        timeout_ms,
                    }
                }
            };
            let config = match self.coordinator_call(&request, false, backoff).await? {
                (Response::Config(c), _) => c,
                (Response::Error(e), _) => return Err(e.into()),
                (other, _) => return Err(unexpected(other)),
            };
            let installed = self.install(*config);
            self.refreshes.fetch_add(1, Ordering::Release);
            match wanted {
                Some(e) if installed.config.epoch < e && Instant::now() < backoff.deadline => {
                    if self.standalone.is_some() && !backoff.wait().await {
                        return Ok(installed);
                    }
                }
                _ => return Ok(installed),
            }
        }
    }

    /// Caches `config` unless the cache holds a newer one; returns what the cache holds.
    fn install(&self, config: Configuration) -> Arc<Routes> {
        let mut slot = self.routes.write().expect("routes lock");
        if config.epoch >= slot.config.epoch {
            *slot = Arc::new(Routes::new(Arc::new(config), self.standalone.as_deref()));
        }
        slot.clone()
    }

    /// Starts fetching epoch `epoch` in the background, unless it is cached already.
    fn refresh_soon(self: &Arc<Self>, epoch: Epoch) {
        if self.routes().config.epoch >= epoch {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            let _ = this.refresh(Some(epoch), &mut Backoff::new()).await;
        });
    }

    /// Fetches the current configuration.
    pub(crate) async fn refresh_now(&self) -> Result<Arc<Configuration>, ClientError> {
        Ok(self
            .refresh(None, &mut Backoff::new())
            .await?
            .config
            .clone())
    }

    /// Waits up to `wait` for a configuration newer than epoch `after` (one `WaitConfig` long
    /// poll), caches it, and returns what the cache holds then (the current configuration when
    /// none newer came). Holds no lock while it waits, so other requests refresh as usual.
    pub(crate) async fn wait_config(
        &self,
        after: Epoch,
        wait: Duration,
    ) -> Result<Arc<Configuration>, ClientError> {
        let cached = self.routes();
        if cached.config.epoch > after {
            return Ok(cached.config.clone());
        }
        if self.standalone.is_some() {
            tokio::time::sleep(wait.min(STANDALONE_POLL)).await;
            return self.refresh_now().await;
        }
        let request = Request::WaitConfig {
            after,
            timeout_ms: wait.min(WAIT_CONFIG).as_millis() as u32,
        };
        match self
            .coordinator_call(&request, false, &mut Backoff::within(self.timeout))
            .await?
        {
            (Response::Config(c), _) => Ok(self.install(*c).config.clone()),
            (Response::Error(e), _) => Err(e.into()),
            (other, _) => Err(unexpected(other)),
        }
    }

    /// Changes the configuration (adds, removes or alters a space, decommissions a server), then waits
    /// until the cached configuration includes the change.
    pub(crate) async fn change_spaces(&self, request: Request) -> Result<(), ClientError> {
        let before = self.routes().config.epoch;
        let mut backoff = Backoff::new();
        match self.coordinator_call(&request, true, &mut backoff).await? {
            (Response::Done, after) => {
                let wanted = Epoch(before.0 + 1).max(after);
                // The change is made; a configuration slow to follow is fetched again when a
                // request names a space this client does not know.
                let _ = self.refresh(Some(wanted), &mut Backoff::new()).await;
                Ok(())
            }
            (Response::Error(e), _) => Err(e.into()),
            (other, _) => Err(unexpected(other)),
        }
    }

    /// Every known coordinator's status (coordinators named in an answer are asked too).
    pub(crate) async fn coordinator_statuses(
        &self,
    ) -> Vec<(String, Result<CoordinatorStatus, ClientError>)> {
        if self.standalone.is_some() {
            return vec![];
        }
        let mut statuses: Vec<(String, Result<CoordinatorStatus, ClientError>)> = Vec::new();
        loop {
            let unasked: Vec<String> = self
                .coordinators()
                .into_iter()
                .filter(|a| statuses.iter().all(|(b, _)| a != b))
                .collect();
            if unasked.is_empty() {
                return statuses;
            }
            let asked = futures::future::join_all(unasked.into_iter().map(|address| async move {
                let status = async {
                    let connection = self.connection(&address).await?;
                    match connection
                        .call(Request::CoordinatorStatus, Epoch(0))
                        .await?
                    {
                        Response::CoordinatorStatus(s) => Ok(s),
                        Response::Error(e) => Err(e.into()),
                        other => Err(unexpected(other)),
                    }
                }
                .await;
                (address, status)
            }))
            .await;
            for (_, status) in &asked {
                if let Ok(s) = status {
                    self.learn_coordinators(s.members.iter().map(|(_, a)| a));
                }
            }
            statuses.extend(asked);
        }
    }

    // ---- the retry loop ------------------------------------------------------------------

    /// Runs `attempt` with the current routes until it is done, fails, or the retry budget is
    /// spent (then the last error is returned). Between attempts, refreshes the configuration
    /// when the refusal shows a newer one, or may (a refusal in the same epoch, a lost
    /// connection: the server may have left); waits unless the configuration moved.
    ///
    /// Every request has a deadline ([`Cluster::timeout`], 10 s by default): past it, the
    /// request fails with `Timeout`, saying what it last met; a request refused or unanswered
    /// that way was not applied, unless it is a write whose answer was lost (see `send`).
    async fn with_retries<T, F, Fut>(&self, attempt: F) -> Result<T, ClientError>
    where
        F: Fn(Arc<Routes>, Instant) -> Fut,
        Fut: Future<Output = Attempt<T>>,
    {
        let mut backoff = Backoff::within(self.timeout);
        let mut schema_refreshed = false;
        loop {
            let routes = self.routes();
            let sent = routes.config.epoch;
            let (error, server_epoch) = match attempt(routes, backoff.deadline).await {
                Attempt::Done(t) => return Ok(t),
                // Refused for the schema: the cached one may be older than the space (dropped and
                // created again with another schema). Look once more before saying no: a refused
                // request was not applied, so trying again is safe.
                Attempt::Fail(e) if !schema_refreshed && is_schema_refusal(&e) => {
                    schema_refreshed = true;
                    match self.refresh(None, &mut backoff).await {
                        Ok(r) if r.config.epoch > sent => continue,
                        _ => return Err(e),
                    }
                }
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry {
                    error,
                    server_epoch,
                } => (error, server_epoch),
            };
            let refreshed = match server_epoch {
                // The server is behind: give it time.
                Some(s) if s < sent => None,
                Some(s) if s > sent => self.refresh(Some(s), &mut backoff).await.ok(),
                _ => self.refresh(None, &mut backoff).await.ok(),
            };
            let moved = refreshed.is_some_and(|r| r.config.epoch > sent);
            if (moved && Instant::now() >= backoff.deadline) || (!moved && !backoff.wait().await) {
                let message = format!(
                    "no answer within {:?}, retries included; last: {error}; it was not applied",
                    self.timeout
                );
                return Err(ClientError::Server {
                    status: Status::Timeout,
                    message,
                });
            }
        }
    }

    /// [`Cluster::send`] to `server`, in `routes`' configuration.
    async fn send_to(
        self: &Arc<Self>,
        routes: &Routes,
        server: ServerId,
        request: Request,
        write: bool,
        deadline: Instant,
    ) -> Attempt<Response> {
        match routes.address(server) {
            Some(address) => {
                let epoch = routes.config.epoch;
                self.send(address, request, epoch, write, deadline).await
            }
            None => no_address(server),
        }
    }

    /// One request to one server, classified for [`Cluster::with_retries`]. An error answer
    /// that is not retryable is `Done`.
    ///
    /// A read waits at most [`READ_ATTEMPT_MAX`] for its server, then is tried again (on a
    /// newer configuration if there is one); a write, which cannot be sent twice, waits until
    /// the deadline, or until the coordinators take its server out of the chains
    /// ([`Cluster::watched`]), and then fails with `Timeout`: it may or may not have been
    /// applied.
    async fn send(
        self: &Arc<Self>,
        address: &str,
        request: Request,
        epoch: Epoch,
        write: bool,
        deadline: Instant,
    ) -> Attempt<Response> {
        let connection = match self.connection(address).await {
            Ok(c) => c,
            Err(error) => {
                return Attempt::Retry {
                    error,
                    server_epoch: None,
                }
            }
        };
        let wait = if write {
            deadline.saturating_duration_since(Instant::now())
        } else {
            self.read_patience(deadline)
        };
        let call = connection.try_call(request, epoch);
        // A standalone server is never taken out of anything: nothing to watch for.
        let answer = if write && self.standalone.is_none() {
            self.watched(address, epoch, call, wait).await
        } else {
            tokio::time::timeout(wait, call).await.map_err(|_| None)
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(Some(gone)) => return Attempt::Fail(gone),
            Err(None) => return self.no_answer(address, write, wait),
        };
        match answer {
            Ok((Response::Error(e), server)) if e.status.is_retryable() => Attempt::Retry {
                error: e.into(),
                server_epoch: Some(server),
            },
            Ok((response, server)) => {
                if server > epoch {
                    self.refresh_soon(server);
                }
                Attempt::Done(response)
            }
            Err(CallError::Unsent(error)) if is_connection_error(&error) => Attempt::Retry {
                error,
                server_epoch: None,
            },
            Err(CallError::Lost(error)) if !write => Attempt::Retry {
                error,
                server_epoch: None,
            },
            Err(e) => Attempt::Fail(e.into_error()),
        }
    }

    /// A write's `call` to `address`, sent in `epoch`, awaited for at most `wait`; meanwhile,
    /// every [`WRITE_SUSPECT_AFTER`], the configuration is fetched: once the coordinators have
    /// taken that server out of the chains (it failed, hung or was cut off), the write is given
    /// up on at once, its outcome unknown, rather than at the deadline. `Err(None)`: no answer
    /// within `wait`.
    async fn watched<T>(
        &self,
        address: &str,
        epoch: Epoch,
        call: impl Future<Output = T>,
        wait: Duration,
    ) -> Result<T, Option<ClientError>> {
        let until = Instant::now() + wait;
        tokio::pin!(call);
        loop {
            let next = (Instant::now() + WRITE_SUSPECT_AFTER).min(until);
            if let Ok(answer) = tokio::time::timeout_at(next, &mut call).await {
                return Ok(answer);
            }
            if Instant::now() >= until {
                return Err(None);
            }
            let Ok(routes) = self.refresh(None, &mut Backoff::new()).await else {
                continue;
            };
            if let Some(why) = routing::taken_out(&routes.config, address, epoch) {
                let message = format!(
                    "{why} while a write to it was in flight: it may or may not have been applied"
                );
                return Err(Some(ClientError::Server {
                    status: Status::Timeout,
                    message,
                }));
            }
        }
    }

    /// What a request to `address` that got no answer within `wait` comes to: a write's
    /// outcome is unknown; a read is tried again.
    fn no_answer(&self, address: &str, write: bool, wait: Duration) -> Attempt<Response> {
        let status = Status::Timeout;
        if write {
            let message =
                format!("server {address} did not answer within {:?}: the write may or may not have been applied", self.timeout);
            Attempt::Fail(ClientError::Server { status, message })
        } else {
            let message = format!("server {address} did not answer within {wait:?}");
            Attempt::Retry {
                error: ClientError::Server { status, message },
                server_epoch: None,
            }
        }
    }

    /// The routes, refreshed once if they do not know space `name`.
    async fn routes_with(&self, name: &str) -> Result<Arc<Routes>, ClientError> {
        let routes = self.routes();
        if routes.space(name).is_some() {
            return Ok(routes);
        }
        let routes = self.refresh(None, &mut Backoff::new()).await?;
        match routes.space(name) {
            Some(_) => Ok(routes),
            None => Err(routing::unknown_space(name)),
        }
    }

    /// Every server's trace of `space` over the last `minutes` minutes, merged. A server that
    /// does not answer is left out: the merged trace's `servers` says how many did; none
    /// answering is an error.
    pub(crate) async fn trace(&self, space: &str, minutes: u32) -> Result<SpaceTrace, ClientError> {
        let routes = self.routes_with(space).await?;
        let epoch = routes.config.epoch;
        let addresses: Vec<String> = routes
            .config
            .servers
            .iter()
            .filter(|s| !matches!(s.state, ServerState::Offline | ServerState::Resting))
            .filter_map(|s| routes.address(s.id).map(str::to_owned))
            .collect();
        let request = Request::Trace {
            space: space.to_owned(),
            minutes,
        };
        let answers = futures::future::join_all(addresses.iter().map(|address| {
            let request = request.clone();
            async move {
                let connection = self.connection(address).await?;
                match connection.call(request, epoch).await? {
                    Response::Trace(t) => Ok(t),
                    Response::Error(e) => Err(ClientError::from(e)),
                    other => Err(unexpected(other)),
                }
            }
        }))
        .await;
        let mut merged: Option<SpaceTrace> = None;
        let mut last_error = None;
        for answer in answers {
            match (answer, merged.as_mut()) {
                (Ok(t), Some(m)) => m.merge(t),
                (Ok(t), None) => merged = Some(t),
                (Err(e), _) => last_error = Some(e),
            }
        }
        merged.ok_or_else(|| {
            last_error.unwrap_or_else(|| ClientError::NoCoordinator("no server to ask".into()))
        })
    }

    /// The load of every key region of `space`, from the servers that lead them, in region
    /// order. A region whose leader does not answer is left out (the caller sees it
    /// missing); none answering is an error.
    pub(crate) async fn key_region_loads(
        &self,
        space: &str,
    ) -> Result<Vec<KeyRegionLoad>, ClientError> {
        let request = Request::KeyRegionLoads {
            space: space.to_owned(),
        };
        self.ask_leaders(space, SubspaceId::KEY, request, |response| match response {
            Response::KeyRegionLoads(loads) => {
                Ok(loads.into_iter().map(|l| (l.region, l)).collect())
            }
            other => Err(other),
        })
        .await
    }

    /// How many objects each region of `subspace` of `space` holds, from the servers that
    /// lead them, in region order; like `key_region_loads`, a region whose leader does not
    /// answer is left out.
    pub(crate) async fn region_counts(
        &self,
        space: &str,
        subspace: SubspaceId,
    ) -> Result<Vec<RegionCount>, ClientError> {
        let request = Request::RegionCounts {
            space: space.to_owned(),
            subspace,
        };
        self.ask_leaders(space, subspace, request, |response| match response {
            Response::RegionCounts(counts) => {
                Ok(counts.into_iter().map(|c| (c.region, c)).collect())
            }
            other => Err(other),
        })
        .await
    }

    /// The statistics of `space` from each server leading some of its key regions (see
    /// `Request::Statistics`), one part per server.
    pub(crate) async fn statistics(
        &self,
        space: &str,
    ) -> Result<Vec<SpaceStatistics>, ClientError> {
        let request = Request::Statistics {
            space: space.to_owned(),
        };
        self.ask_leaders(space, SubspaceId::KEY, request, |response| match response {
            // One item per server, under its first region (a server leading none sends none).
            Response::Statistics(part) => Ok(match part.regions.first() {
                Some(&first) => vec![(first, part)],
                None => Vec::new(),
            }),
            other => Err(other),
        })
        .await
    }

    /// Sends `request` to every server leading a region of `subspace` of `space` and gathers
    /// their answers in region order (`answer` takes the (region, item) list out of a
    /// response, or gives the response back as unexpected). Servers that fail are left out;
    /// all failing is an error.
    async fn ask_leaders<T>(
        &self,
        space: &str,
        subspace: SubspaceId,
        request: Request,
        answer: fn(Response) -> Result<RegionItems<T>, Response>,
    ) -> Result<Vec<T>, ClientError> {
        let routes = self.routes_with(space).await?;
        let epoch = routes.config.epoch;
        let Some(config) = routes.config.space(space) else {
            return Err(routing::unknown_space(space));
        };
        let Some(sets) = config.replicas.get(subspace.get()) else {
            return Err(ClientError::Server {
                status: Status::Malformed,
                message: format!("space {space:?} has no subspace {}", subspace.get()),
            });
        };
        let leaders: BTreeSet<ServerId> =
            sets.iter().filter_map(|set| set.first().copied()).collect();
        let addresses: Vec<String> = leaders
            .iter()
            .filter_map(|id| routes.address(*id).map(str::to_owned))
            .collect();
        let answers = futures::future::join_all(addresses.iter().map(|address| {
            let request = request.clone();
            async move {
                let connection = self.connection(address).await?;
                // A server not yet at the client's epoch (just after a change) says so: it
                // catches up within moments, so ask again rather than leave its regions out.
                let mut attempts = 0;
                loop {
                    match connection.call(request.clone(), epoch).await? {
                        Response::Error(e) if e.status == Status::StaleEpoch && attempts < 40 => {
                            attempts += 1;
                            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
                        }
                        Response::Error(e) => return Err(ClientError::from(e)),
                        response => return answer(response).map_err(unexpected),
                    }
                }
            }
        }))
        .await;
        let mut gathered: BTreeMap<u32, T> = BTreeMap::new();
        let mut last_error = None;
        for result in answers {
            match result {
                Ok(part) => gathered.extend(part),
                Err(e) => last_error = Some(e),
            }
        }
        match (gathered.is_empty(), last_error) {
            (true, Some(e)) => Err(e),
            _ => Ok(gathered.into_values().collect()),
        }
    }

    // ---- keys ----------------------------------------------------------------------------

    /// A request about one key (`make` builds it from the key converted to the space's key
    /// type), sent to the key's point leader (a write) or a reader of its region (a get). An
    /// error answer becomes `Err`.
    pub(crate) async fn key_call(
        self: &Arc<Self>,
        space: &str,
        key: Value,
        write: bool,
        make: impl Fn(Value) -> Request,
    ) -> Result<Response, ClientError> {
        self.routes_with(space).await?;
        let (key, make) = (&key, &make);
        let response = self
            .with_retries(|routes, deadline| async move {
                let Some(map) = routes.space(space) else {
                    return Attempt::Fail(routing::unknown_space(space));
                };
                let (key, leader) = match led_key(map, key.clone()) {
                    Ok(led) => led,
                    Err(refused) => return refused,
                };
                // A write goes to the point leader; a get to whom `read_from` says.
                let server = if write {
                    leader
                } else {
                    let turn = self.turn.fetch_add(1, Ordering::Relaxed);
                    match routing::key_reader(map, &key, self.read_from, turn) {
                        Ok(server) => server,
                        Err(error) => {
                            return Attempt::Retry {
                                error,
                                server_epoch: None,
                            }
                        }
                    }
                };
                let sent = self
                    .send_to(&routes, server, make(key.clone()), write, deadline)
                    .await;
                if !sent.is_update_pending() {
                    return sent;
                }
                // An update of the key is pending there: the region's last reader, nearest
                // the chain's tail, answers without waiting for it.
                match map.key_readers(&key).last().copied() {
                    Some(last) if last != server => self
                        .send_to(&routes, last, make(key), write, deadline)
                        .await
                        .pending_retried(),
                    _ => sent.pending_retried(),
                }
            })
            .await?;
        match response {
            Response::Error(e) => Err(e.into()),
            other => Ok(other),
        }
    }

    /// The objects of `keys` that exist (any order), with the schema they were read with:
    /// each key from its point leader, one request per leader (and per
    /// [`KEYS_PER_REQUEST_MAX`] keys), all at once; any refusal or silence makes the whole
    /// read again on a fresh configuration, as a search's does.
    pub(crate) async fn multi_get(
        self: &Arc<Self>,
        space: &str,
        keys: &[Value],
    ) -> Result<(SpaceSchema, Vec<WireObject>), ClientError> {
        self.routes_with(space).await?;
        self.with_retries(|routes, deadline| async move {
            let Some(map) = routes.space(space) else {
                return Attempt::Fail(routing::unknown_space(space));
            };
            let mut by_leader: BTreeMap<ServerId, Vec<Value>> = BTreeMap::new();
            for key in keys {
                match led_key(map, key.clone()) {
                    Ok((key, leader)) => by_leader.entry(leader).or_default().push(key),
                    Err(refused) => return refused,
                }
            }
            let epoch = routes.config.epoch;
            let requests = by_leader.into_iter().flat_map(|(leader, keys)| {
                keys.chunks(KEYS_PER_REQUEST_MAX)
                    .map(|chunk| (leader, chunk.to_vec()))
                    .collect::<Vec<_>>()
            });
            let reads = requests.map(|(leader, keys)| {
                let routes = &routes;
                let request = Request::GetMany {
                    space: space.to_owned(),
                    keys,
                };
                self.stream_from(routes, leader, request, epoch, deadline)
            });
            let mut found = Vec::new();
            for read in futures::future::join_all(reads).await {
                match read {
                    Attempt::Done(Found::Objects(objects)) => found.extend(objects),
                    Attempt::Done(Found::Count(_)) => {
                        let message = "a count answered a multi_get".to_owned();
                        return Attempt::Fail(ClientError::Protocol(message));
                    }
                    Attempt::Retry {
                        error,
                        server_epoch,
                    } => {
                        return Attempt::Retry {
                            error,
                            server_epoch,
                        }
                    }
                    Attempt::Fail(e) => return Attempt::Fail(e),
                }
            }
            Attempt::Done((map.config().schema.clone(), found))
        })
        .await
    }

    // ---- searches ------------------------------------------------------------------------

    /// Every object matching `predicates`, one per key at its highest version, with the schema
    /// they were read with.
    pub(crate) async fn search(
        self: &Arc<Self>,
        space: &str,
        predicates: &[Predicate],
    ) -> Result<(SpaceSchema, Vec<WireObject>), ClientError> {
        match self
            .search_as(space, predicates, SearchAnswer::Matches)
            .await?
        {
            (schema, Found::Objects(objects)) => Ok((schema, objects)),
            (_, Found::Count(_)) => Err(ClientError::Protocol(
                "a count answered a search for objects".into(),
            )),
        }
    }

    /// How many objects match `predicates`.
    pub(crate) async fn count(
        self: &Arc<Self>,
        space: &str,
        predicates: &[Predicate],
    ) -> Result<u64, ClientError> {
        match self
            .search_as(space, predicates, SearchAnswer::Count)
            .await?
        {
            (_, Found::Count(n)) => Ok(n),
            (_, Found::Objects(objects)) => Ok(objects.len() as u64),
        }
    }

    /// At most `limit` matching objects ordered by `sort_by`.
    pub(crate) async fn sorted_search(
        self: &Arc<Self>,
        space: &str,
        predicates: &[Predicate],
        sort_by: &str,
        limit: u32,
        order: SortOrder,
    ) -> Result<(SpaceSchema, Vec<WireObject>), ClientError> {
        // Refused before any server is asked, predicates first, as a server checks them.
        let routes = self.routes_with(space).await?;
        let config = routes
            .space(space)
            .ok_or_else(|| routing::unknown_space(space))?
            .config();
        routing::check_predicates(&config.schema, predicates)?;
        routing::check_sort_attribute(&config.schema, sort_by)?;
        let answer = SearchAnswer::Sorted {
            sort_by: sort_by.to_owned(),
            limit,
            order,
        };
        match self.search_as(space, predicates, answer).await? {
            (schema, Found::Objects(objects)) => Ok((schema, objects)),
            (_, Found::Count(_)) => Err(ClientError::Protocol(
                "a count answered a sorted search".into(),
            )),
        }
    }

    /// A search answered as `answer` says: by its one server whole when one server answers
    /// every region of its plan ([`routing::asks`]); otherwise from every server's matches,
    /// merged here (one object per key, at its highest version), the stubs a dynamic space's
    /// pointer overlays answer with followed to their documents ([`Self::follow_pointers`]),
    /// then counted or sorted.
    async fn search_as(
        self: &Arc<Self>,
        space: &str,
        predicates: &[Predicate],
        answer: SearchAnswer,
    ) -> Result<(SpaceSchema, Found), ClientError> {
        self.routes_with(space).await?;
        let answer = &answer;
        let (schema, gathered) = self
            .with_retries(|routes, deadline| {
                self.search_attempt(routes, space, predicates, answer, deadline)
            })
            .await?;
        let (mut found, stubs) = match gathered {
            Gathered::Whole(found) => return Ok((schema, found)),
            Gathered::Parts { found, stubs } => (found, stubs),
        };
        if !stubs.is_empty() {
            found.extend(
                self.follow_pointers(space, &schema, predicates, stubs)
                    .await?,
            );
        }
        let found = merge::merge_highest_version(found);
        let found = match answer {
            SearchAnswer::Matches => Found::Objects(found),
            SearchAnswer::Count => Found::Count(found.len() as u64),
            SearchAnswer::Sorted {
                sort_by,
                limit,
                order,
            } => {
                let attr = routing::check_sort_attribute(&schema, sort_by)?;
                Found::Objects(merge::sort_limit(found, &attr, *limit as usize, *order))
            }
        };
        Ok((schema, found))
    }

    /// The documents the stubs of a pointer overlay point to, each read from its point leader
    /// (a few at a time) and kept if it still has the stub's formula (else the part of the
    /// search that reads its new placement answers for it) and matches every predicate.
    async fn follow_pointers(
        self: &Arc<Self>,
        space: &str,
        schema: &SpaceSchema,
        predicates: &[Predicate],
        stubs: Vec<WireObject>,
    ) -> Result<Vec<WireObject>, ClientError> {
        let checked = routing::check_predicates(schema, predicates)?;
        let stubs = merge::merge_highest_version(stubs);
        let checked = &checked;
        let mut reads = futures::stream::iter(stubs)
            .map(|stub| async move {
                let stub = Object {
                    values: stub.values,
                };
                let get = |key| Request::Get {
                    space: space.to_owned(),
                    key,
                };
                let key = stub.key().clone();
                let found = match self.key_call(space, key, false, get).await? {
                    Response::Object(found) => found,
                    other => return Err(unexpected(other)),
                };
                let Some(WireObject { version, values }) = found else {
                    return Ok(None);
                };
                let document = Object { values };
                let keep = tessera_geometry::pointer_answers(&stub, &document, checked);
                Ok(keep.then_some(WireObject {
                    version,
                    values: document.values,
                }))
            })
            .buffer_unordered(POINTER_READS_IN_FLIGHT);
        let mut documents = Vec::new();
        while let Some(read) = reads.next().await {
            documents.extend(read?);
        }
        Ok(documents)
    }

    /// One attempt at a search: what its servers answered.
    async fn search_attempt(
        self: &Arc<Self>,
        routes: Arc<Routes>,
        space: &str,
        predicates: &[Predicate],
        answer: &SearchAnswer,
        deadline: Instant,
    ) -> Attempt<(SpaceSchema, Gathered)> {
        let Some(map) = routes.space(space) else {
            return Attempt::Fail(routing::unknown_space(space));
        };
        let schema = &map.config().schema;
        let checked = match routing::check_predicates(schema, predicates) {
            Ok(c) => c,
            Err(e) => return Attempt::Fail(e),
        };
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let planned = match routing::route_search_by(map, &checked, turn, self.fanout) {
            Ok(r) => r,
            Err(error) => {
                return Attempt::Retry {
                    error,
                    server_epoch: None,
                }
            }
        };
        let (asks, whole) = routing::asks(map.config(), planned, answer);
        let epoch = routes.config.epoch;
        let parts = asks.into_iter().map(|ask| {
            let routes = &routes;
            // Asked per subspace unless whole: which part answered tells stubs from documents.
            let subspace = ask.parts.first().map(|p| p.subspace);
            let request = Request::SearchRegions {
                space: space.to_owned(),
                predicates: predicates.to_vec(),
                parts: ask.parts,
                answer: ask.answer,
                follow_stubs: ask.follow_stubs,
            };
            async move {
                let answered = self
                    .stream_from(routes, ask.server, request, epoch, deadline)
                    .await;
                (subspace, answered)
            }
        });
        let mut gathered = Gathered::Parts {
            found: Vec::new(),
            stubs: Vec::new(),
        };
        let mut retry: Option<(ClientError, Option<Epoch>)> = None;
        for (subspace, part) in futures::future::join_all(parts).await {
            match part {
                Attempt::Done(answered) => {
                    if let Err(e) = gathered.add(schema, whole, subspace, answered) {
                        return Attempt::Fail(e);
                    }
                }
                Attempt::Fail(e) => return Attempt::Fail(e),
                Attempt::Retry {
                    error,
                    server_epoch,
                } => {
                    // Refresh for the newest epoch any server showed.
                    if retry.as_ref().is_none_or(|(_, e)| server_epoch > *e) {
                        retry = Some((error, server_epoch));
                    }
                }
            }
        }
        if let Some((error, server_epoch)) = retry {
            return Attempt::Retry {
                error,
                server_epoch,
            };
        }
        Attempt::Done((schema.clone(), gathered))
    }

    /// [`Self::search_part`] from `server`, which must have an address in `routes`.
    async fn stream_from(
        self: &Arc<Self>,
        routes: &Routes,
        server: ServerId,
        request: Request,
        epoch: Epoch,
        deadline: Instant,
    ) -> Attempt<Found> {
        match routes.address(server) {
            Some(address) => self.search_part(address, request, epoch, deadline).await,
            None => no_address(server),
        }
    }

    /// One server's share of a search: everything it streams, or its count. A server silent
    /// for [`READ_ATTEMPT_MAX`] is given up on (unless it is a standalone server, which nobody
    /// else could stand in for): the search is made again, and the next one asks another
    /// replica of each region (replicas are taken in turn).
    async fn search_part(
        self: &Arc<Self>,
        address: &str,
        request: Request,
        epoch: Epoch,
        deadline: Instant,
    ) -> Attempt<Found> {
        let retry = |error| Attempt::Retry {
            error,
            server_epoch: None,
        };
        let connection = match self.connection(address).await {
            Ok(c) => c,
            Err(e) => return retry(e),
        };
        let mut frames = match connection.stream(request, epoch).await {
            Ok(frames) => frames,
            Err(e) if is_connection_error(&e) => return retry(e),
            Err(e) => return Attempt::Fail(e),
        };
        let mut objects = Vec::new();
        loop {
            let wait = self.read_patience(deadline);
            let Ok(frame) = tokio::time::timeout(wait, frames.recv()).await else {
                let message = format!("server {address} sent nothing for {wait:?}");
                return retry(ClientError::Server {
                    status: Status::Timeout,
                    message,
                });
            };
            let (last, server) = match frame {
                None => return retry(ClientError::ConnectionClosed),
                // A search changes nothing: a broken one is simply made again.
                Some(Err(e)) if is_connection_error(&e) => return retry(e),
                Some(Err(e)) => return Attempt::Fail(e),
                Some(Ok((Response::SearchItems(items), _))) => {
                    objects.extend(items);
                    continue;
                }
                Some(Ok((Response::SearchDone, server))) => (Found::Objects(objects), server),
                Some(Ok((Response::Count(n), server))) => (Found::Count(n), server),
                Some(Ok((Response::Error(e), server))) if e.status.is_retryable() => {
                    return Attempt::Retry {
                        error: e.into(),
                        server_epoch: Some(server),
                    }
                }
                Some(Ok((Response::Error(e), _))) => return Attempt::Fail(e.into()),
                Some(Ok((other, _))) => return Attempt::Fail(unexpected(other)),
            };
            if server > epoch {
                self.refresh_soon(server);
            }
            return Attempt::Done(last);
        }
    }

    /// How long one attempt of a read waits for its server's next answer, given the
    /// request's deadline: at most [`READ_ATTEMPT_MAX`] when another server could stand in.
    fn read_patience(&self, deadline: Instant) -> Duration {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.standalone {
            Some(_) => left,
            None => left.min(READ_ATTEMPT_MAX),
        }
    }

    /// How a search would run on the current configuration, fetched first (no server is
    /// contacted): an explanation is asked for rarely, and a cached configuration may predate a
    /// subspace built since.
    pub(crate) async fn explain(
        &self,
        space: &str,
        predicates: &[Predicate],
    ) -> Result<Explanation, ClientError> {
        let routes = self.refresh(None, &mut Backoff::new()).await?;
        let map = routes
            .space(space)
            .ok_or_else(|| routing::unknown_space(space))?;
        let checked = routing::check_predicates(&map.config().schema, predicates)?;
        Ok(routing::explain(
            map,
            &checked,
            self.turn.load(Ordering::Relaxed),
            self.fanout,
        ))
    }

    /// Deletes every matching object, each with the predicates as its condition (an object
    /// changed meanwhile is left alone); returns how many were deleted.
    pub(crate) async fn group_del(
        self: &Arc<Self>,
        space: &str,
        predicates: Vec<Predicate>,
    ) -> Result<u64, ClientError> {
        let (_, objects) = self.search(space, &predicates).await?;
        self.write_each(space, objects, &predicates, &KeysChange::Delete)
            .await
    }

    /// Applies `funcalls` to every matching object, each with the predicates as its
    /// condition; returns how many were updated.
    pub(crate) async fn group_update(
        self: &Arc<Self>,
        space: &str,
        predicates: Vec<Predicate>,
        funcalls: Vec<Funcall>,
    ) -> Result<u64, ClientError> {
        let routes = self.routes_with(space).await?;
        let config = routes
            .space(space)
            .ok_or_else(|| routing::unknown_space(space))?
            .config();
        routing::check_predicates(&config.schema, &predicates)?;
        if !routing::check_group_funcalls(&config.schema, &funcalls)? {
            return Ok(0);
        }
        let (_, objects) = self.search(space, &predicates).await?;
        let change = KeysChange::Update(funcalls);
        self.write_each(space, objects, &predicates, &change).await
    }

    /// Makes `change` to the key of every object, on `conditions`, as one write per key to its
    /// point leader would: the keys go to their point leaders [`KEYS_PER_REQUEST_MAX`] to a
    /// `WriteKeys` request, [`GROUP_REQUESTS_IN_FLIGHT`] requests at a time. Counts the keys
    /// answered `Done`, skips those refused `NotFound`, `CmpFail` or `TooLarge` (the object
    /// changed since the search, or the change cannot apply to it or would make it too large:
    /// [`Status::skipped_by_group_write`]), writes again one by one (with the retries of a
    /// single write) those refused as not applied (their leader moved, a lease lapsed), and
    /// stops at any other error.
    async fn write_each(
        self: &Arc<Self>,
        space: &str,
        objects: Vec<WireObject>,
        conditions: &[Predicate],
        change: &KeysChange,
    ) -> Result<u64, ClientError> {
        let routes = self.routes_with(space).await?;
        let map = routes
            .space(space)
            .ok_or_else(|| routing::unknown_space(space))?;
        let mut by_leader: BTreeMap<ServerId, Vec<Value>> = BTreeMap::new();
        let mut one_by_one = Vec::new();
        for object in objects {
            let key = object
                .values
                .into_iter()
                .next()
                .expect("an object has its key");
            match led_key::<()>(map, key.clone()) {
                Ok((key, leader)) => by_leader.entry(leader).or_default().push(key),
                Err(_) => one_by_one.push(key),
            }
        }
        let requests = by_leader.into_iter().flat_map(|(leader, keys)| {
            keys.chunks(KEYS_PER_REQUEST_MAX)
                .map(|chunk| (leader, chunk.to_vec()))
                .collect::<Vec<_>>()
        });
        let routes = &routes;
        let mut sent = futures::stream::iter(requests)
            .map(|(leader, keys)| self.write_keys(routes, space, leader, keys, conditions, change))
            .buffer_unordered(GROUP_REQUESTS_IN_FLIGHT);
        let mut done = 0;
        while let Some(outcome) = sent.next().await {
            let (written, again) = outcome?;
            done += written;
            one_by_one.extend(again);
        }
        Ok(done
            + self
                .write_one_by_one(space, one_by_one, conditions, change)
                .await?)
    }

    /// One `WriteKeys` of `keys` to their point leader `leader`: how many were written, and
    /// the keys to write again one by one (refused, not applied, by the request or the key).
    async fn write_keys(
        self: &Arc<Self>,
        routes: &Routes,
        space: &str,
        leader: ServerId,
        keys: Vec<Value>,
        conditions: &[Predicate],
        change: &KeysChange,
    ) -> Result<(u64, Vec<Value>), ClientError> {
        let request = Request::WriteKeys {
            space: space.to_owned(),
            keys: keys.clone(),
            conditions: conditions.to_vec(),
            change: change.clone(),
        };
        let deadline = Instant::now() + self.timeout;
        let outcomes = match self.send_to(routes, leader, request, true, deadline).await {
            Attempt::Done(Response::Outcomes(o)) if o.len() == keys.len() => o,
            Attempt::Done(Response::Error(e)) => return Err(e.into()),
            Attempt::Done(other) => return Err(unexpected(other)),
            // Refused whole, or never sent: nothing was written.
            Attempt::Retry { .. } => return Ok((0, keys)),
            Attempt::Fail(e) => return Err(e),
        };
        let mut written = 0;
        let mut again = Vec::new();
        for (key, outcome) in keys.into_iter().zip(outcomes) {
            match outcome {
                Ok(()) => written += 1,
                Err(e) if e.status.skipped_by_group_write() => {}
                Err(e) if e.status.is_retryable() => again.push(key),
                Err(e) => return Err(e.into()),
            }
        }
        Ok((written, again))
    }

    /// Makes `change` to each of `keys` with a write of its own to its point leader, a few at
    /// a time, counting and skipping as [`Self::write_each`] does.
    async fn write_one_by_one(
        self: &Arc<Self>,
        space: &str,
        keys: Vec<Value>,
        conditions: &[Predicate],
        change: &KeysChange,
    ) -> Result<u64, ClientError> {
        let make = |key| change.single_write(space, key, conditions);
        let make = &make;
        let mut writes = futures::stream::iter(keys)
            .map(|key| async move { self.key_call(space, key, true, make).await })
            .buffer_unordered(GROUP_WRITES_IN_FLIGHT);
        let mut done = 0;
        while let Some(outcome) = writes.next().await {
            match outcome {
                Ok(Response::Done) => done += 1,
                Ok(other) => return Err(unexpected(other)),
                Err(e) if e.status().is_some_and(Status::skipped_by_group_write) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}
