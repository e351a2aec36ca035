//! The Tessera client for Rust applications.
//!
//! A [`Client`] may be cloned freely and shared between tasks: clones share its connections.
//! Every request gets its own id, so any number can be in flight on a connection at once and
//! each completes as soon as its answer arrives (pipelining).
//!
//! ```no_run
//! use tessera_client::{Client, Predicate, PredicateOp, Value};
//!
//! # async fn demo() -> Result<(), tessera_client::ClientError> {
//! let client = Client::connect("127.0.0.1:1982").await?;
//! client
//!     .add_space(
//!         "space hotels
//!          key id
//!          attributes string city, int stars, int price
//!          subspace city, price",
//!     )
//!     .await?;
//! client
//!     .put("hotels", "h1", [("city", Value::from("Ithaca")), ("stars", 4.into()), ("price", 120.into())])
//!     .await?;
//! let hotel = client.get("hotels", "h1").await?.expect("just stored");
//! assert_eq!(hotel.attributes["price"], Value::Int(120));
//!
//! let cheap_in_ithaca = client
//!     .search(
//!         "hotels",
//!         vec![
//!             Predicate::equals("city", "Ithaca"),
//!             Predicate::new("price", PredicateOp::LessEqual(Value::Int(150))),
//!         ],
//!     )
//!     .await?;
//! assert_eq!(cheap_in_ithaca.len(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Standalone and cluster mode
//!
//! [`Client::connect`] takes `host:port` or a comma-separated list of them and asks the first
//! that accepts a connection for its coordinator status:
//!
//! * **Standalone** (a `tessera dev` server, which answers that it is no coordinator): the
//!   one-server cluster. The server is the configuration's source and takes the changes of
//!   spaces itself; every region and every key is its own, so the routing below sends it
//!   everything, and every search whole (its count or order computed by the server).
//! * **Cluster** (a coordinator answered): the client knows the coordinators given and those
//!   they name, caches the configuration (fetched from any coordinator), and talks to each
//!   server it needs, connecting when first needed. [`Client::is_cluster`] says which mode a
//!   client is in.
//!
//! Reads, writes, searches and group operations take one path in both modes: the routing and
//! the retries below.
//!
//! Either way, the requests to one address share a pool of connections: a request goes on the
//! connection with the fewest requests in flight, and opens another (at most 4 per address)
//! when even that one has 32 in flight; a connection beyond the first unused for 30 s is let go,
//! and a broken one is replaced at the next request. One connection carries a deep pipeline
//! well: on one server core, more connections cost the server more than they save the client.
//!
//! # Routing
//!
//! * Space changes and configuration requests go to the coordinators (the last one that
//!   answered first, then each other), or to the standalone server. After [`Client::add_space`], [`Client::rm_space`] or
//!   [`Client::alter_space`] the client waits for the configuration that includes the change.
//! * A key's requests — [`Client::get`] and every write — go to its **point leader**: the first
//!   server of the replica set of the key's region in the key subspace. Frames carry the
//!   cached epoch; an answer showing a newer epoch makes the client fetch it.
//! * A **search** is planned by the client: it checks the predicates against the schema
//!   (refusing bad ones with the status a server would use, without contacting anyone), picks
//!   the subspace whose search box crosses the fewest regions, and asks **one replica of each
//!   of those regions** — successive searches rotate over the replicas that hold all of the
//!   region, never a state transfer's target still catching up — sending every server it
//!   picked one `SearchRegions` request for its regions, all at once. Predicates that
//!   contradict each other contact nobody. When one server answers every region (always,
//!   standalone) its answer is the search's: it counts ([`Client::count`]), orders and cuts
//!   ([`Client::sorted_search`]) and follows a pointer overlay's stubs itself. Otherwise the
//!   answers are merged — one object per key, the highest version (an object moving between
//!   regions can be in both for a moment) — then counted or sorted by the client.
//!   [`Client::group_del`] and [`Client::group_update`] are that search followed by one
//!   conditional write per object found (conditioned on the predicates), sent to each point
//!   leader many keys to a `WriteKeys` request; [`Client::explain`] is computed by the client.
//!
//! # Retries and deadlines
//!
//! A request refused with `StaleEpoch` (`RECONFIGURE`: the client or the server is behind) or
//! `Unavailable` was not applied: the client fetches the configuration when needed, waits
//! 10 ms (doubling up to 500 ms) and sends it again. Reads are resent the same way after a
//! broken connection, and after 2 s without an answer (a stopped or partitioned server), so
//! the next attempt can reach the key's new point leader, or another replica of a region
//! (standalone, where nobody could stand in, a read waits for its server until its deadline). A
//! write whose connection broke after it was sent may have been applied: it fails with
//! [`ClientError::Io`] or [`ClientError::ConnectionClosed`] and is never resent. A search that
//! any of its servers refuses, or leaves silent for 2 s, is made again whole. When no
//! coordinator can be reached, configuration requests fail with [`ClientError::NoCoordinator`].
//!
//! Every request has a deadline, retries included ([`ClientOptions::timeout`], 10 s by
//! default). Past it the request fails with [`Status::Timeout`]: a write
//! that was sent and never answered "may or may not have been applied"; a request whose every
//! attempt was refused "was not applied", and the message names the last refusal.
//!
//! Errors are [`ClientError`]s; a server's refusal carries a [`Status`] (`NotFound`,
//! `CmpFail`, `UnknownSpace`, `WrongType`, ...) and a message.

#![forbid(unsafe_code)]

mod cluster;
mod connection;
mod error;
mod merge;
mod options;
mod pool;
mod routing;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use error::ClientError;
pub use options::ClientOptions;
pub use routing::{key_leaders, plan_search, search_contacts, Fanout, ReadFrom};
pub use tessera_protocol::process_cpu_seconds;
pub use tessera_protocol::{
    Adaptation, AdaptationEvent, AdaptationRecord, AdaptationStep, Build, Configuration,
    Constraint, CoordinatorStatus, ExplainedPart, Explanation, KeyRegionLoad, ModelConstants,
    RegionCount, RequestShape, ServerInfo, ServerState, ServerWork, ShapeCount, SortOrder,
    SpaceChange, SpaceConfig, SpaceMap, SpaceStatistics, SpaceTrace, Status, WorkDone, WriteMode,
};
pub use tessera_types::{
    ByteString, DocValue, Document, FormulaSpec, Funcall, FuncallOp, NumOp, Predicate, PredicateOp,
    ServerId, Shape, SpaceSchema, SubspaceId, SubspaceState, Value, Version, FORMULA_ATTRIBUTE,
};

/// Puts a [`Client::multi_put`] has in flight at once.
pub const MULTI_PUT_IN_FLIGHT: usize = 64;
use tessera_protocol::{Request, Response, WireObject};
use tessera_types::Epoch;

use crate::cluster::Cluster;
use crate::connection::Connection;
use crate::error::unexpected;

/// Longest one step of [`Client::wait_built`] waits for a newer configuration.
const WAIT_BUILT_POLL_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// An object as the client returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The object's key.
    pub key: Value,
    /// Its version: strictly increasing with every update of the key.
    pub version: Version,
    /// Every attribute except the key, by name.
    pub attributes: BTreeMap<String, Value>,
}

/// The search [`Client::get_by_range`] makes: keys in `[from, to)`. (Give it to
/// [`Client::explain`] to see the regions and servers the range asks.)
pub fn range_predicates(schema: &SpaceSchema, from: Value, to: Value) -> Vec<Predicate> {
    let key = &schema.key().name;
    vec![
        Predicate::new(key, PredicateOp::GreaterEqual(from)),
        Predicate::new(key, PredicateOp::LessThan(to)),
    ]
}

/// The search [`Client::get_by_tags`] makes: the tags attribute contains every one of
/// `tags`. `WrongType` when the space has no attribute `get_by_tags` can read tags from.
pub fn tags_predicates(
    schema: &SpaceSchema,
    tags: Vec<String>,
) -> Result<Vec<Predicate>, ClientError> {
    let attribute = routing::tags_attribute(schema)?;
    Ok(tags
        .into_iter()
        .map(|t| Predicate::new(&attribute, PredicateOp::Contains(Value::from(t))))
        .collect())
}

/// A connection to a Tessera server or cluster. Cheap to clone; clones share connections,
/// the cached configuration and the retry state.
#[derive(Clone)]
pub struct Client {
    /// A cluster, or a standalone server as the one-server cluster.
    cluster: Arc<Cluster>,
}

impl Client {
    /// Connects to a standalone server or to a cluster's coordinators: `addresses` is
    /// `host:port` or a comma-separated list of them. The first address that accepts a
    /// connection decides the mode (see the crate documentation); the configuration is
    /// fetched before this returns. Fails with the last address's error when none answers.
    pub async fn connect(addresses: &str) -> Result<Client, ClientError> {
        Client::connect_with(addresses, ClientOptions::default()).await
    }

    /// [`Client::connect`] with options (a request deadline other than 10 s, for instance).
    pub async fn connect_with(
        addresses: &str,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let given: Vec<String> = addresses
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        let mut last = ClientError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("no address in {addresses:?}"),
        ));
        for address in &given {
            let connection = match Connection::open(address, &options.dialer()).await {
                Ok(c) => Arc::new(c),
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            match connection.call(Request::CoordinatorStatus, Epoch(0)).await {
                Ok(Response::CoordinatorStatus(status)) => {
                    let cluster =
                        Cluster::start(&given, (address.clone(), connection), &status, &options)
                            .await?;
                    return Ok(Client { cluster });
                }
                // A coordinator without a leader, or a server shutting down: try another.
                Ok(Response::Error(e)) if e.status == Status::Unavailable => last = e.into(),
                // The daemon wants a token this client lacks, or one with more rights.
                Ok(Response::Error(e)) if e.status == Status::Unauthorized => return Err(e.into()),
                // A server: it answers that this request is for a coordinator.
                Ok(Response::Error(_)) => {
                    let first = (address.clone(), connection);
                    let cluster = Cluster::standalone(first, &options).await?;
                    return Ok(Client { cluster });
                }
                Ok(other) => last = unexpected(other),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Whether this client talks to a cluster (coordinators and servers) rather than to one
    /// standalone server.
    pub fn is_cluster(&self) -> bool {
        self.cluster.has_coordinators()
    }

    /// Every known coordinator's view of the coordinator group, each asked once (coordinators
    /// named in an answer are asked too), with its address. Empty in standalone mode.
    pub async fn coordinator_statuses(
        &self,
    ) -> Vec<(String, Result<CoordinatorStatus, ClientError>)> {
        self.cluster.coordinator_statuses().await
    }

    /// The configuration as last fetched.
    pub fn configuration(&self) -> Arc<Configuration> {
        self.cluster.configuration()
    }

    /// Fetches the configuration again (from the server, or from a coordinator).
    pub async fn refresh(&self) -> Result<Arc<Configuration>, ClientError> {
        self.cluster.refresh_now().await
    }

    /// A request about one key: to the server as it is, or to the key's point leader (with
    /// the key converted to the space's key type) with retries. Error answers become `Err`.
    async fn key_call(
        &self,
        space: &str,
        key: Value,
        write: bool,
        make: impl Fn(Value) -> Request,
    ) -> Result<Response, ClientError> {
        self.cluster.key_call(space, key, write, make).await
    }

    async fn write_key(
        &self,
        space: &str,
        key: Value,
        make: impl Fn(Value) -> Request,
    ) -> Result<(), ClientError> {
        match self.key_call(space, key, true, make).await? {
            Response::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// The schema of a space, from the configuration (refreshed once if the space is unknown).
    async fn space(&self, name: &str) -> Result<SpaceSchema, ClientError> {
        if let Some(s) = self.configuration().space(name) {
            return Ok(s.schema.clone());
        }
        self.refresh()
            .await?
            .space(name)
            .map(|s| s.schema.clone())
            .ok_or_else(|| ClientError::Server {
                status: Status::UnknownSpace,
                message: format!("no space named {name:?}"),
            })
    }

    async fn record(&self, space: &str, object: WireObject) -> Result<Record, ClientError> {
        // The cached configuration names the values without copying the schema.
        let config = self.configuration();
        if let Some(s) = config
            .space(space)
            .filter(|s| s.schema.attributes.len() == object.values.len())
        {
            return Ok(to_record(&s.schema, object));
        }
        // The space changed shape (or appeared) since the configuration was cached.
        let config = self.refresh().await?;
        let schema = &config
            .space(space)
            .ok_or_else(|| ClientError::Server {
                status: Status::UnknownSpace,
                message: format!("no space named {space:?}"),
            })?
            .schema;
        if schema.attributes.len() != object.values.len() {
            return Err(ClientError::Protocol(format!(
                "an object of {space:?} does not fit its schema"
            )));
        }
        Ok(to_record(schema, object))
    }

    /// Sends a request that changes the spaces, then waits for the configuration with the
    /// change in it.
    async fn change_spaces(&self, request: Request) -> Result<(), ClientError> {
        self.cluster.change_spaces(request).await
    }

    // ---- spaces -------------------------------------------------------------------------

    /// Creates a space from its description (see docs/spaces.md, "Describing a space").
    /// Fails with `SpaceExists` if one of that name exists, `BadDescription` (with a
    /// line and column) if the description is wrong, and in cluster mode `TooFewServers` if
    /// it asks for more replicas than the cluster has servers.
    pub async fn add_space(&self, description: &str) -> Result<(), ClientError> {
        self.change_spaces(Request::AddSpace {
            description: description.to_owned(),
        })
        .await
    }

    /// Removes a space and every object in it.
    pub async fn rm_space(&self, name: &str) -> Result<(), ClientError> {
        self.change_spaces(Request::RmSpace {
            name: name.to_owned(),
        })
        .await
    }

    /// Adds or drops a subspace of a live space (`tessera alter-space`); reads, writes and
    /// searches go on meanwhile. Answers once the change is in the configuration, which the
    /// client has then fetched:
    ///
    /// * [`SpaceChange::AddSubspace`]: the subspace gets the next unused id and is
    ///   [`SubspaceState::Building`] — every write goes through it, no search uses it — while
    ///   the servers backfill it from the objects already stored ([`SpaceConfig::build`]
    ///   shows the progress). It serves searches once every key region is done;
    ///   [`Client::wait_built`] waits for that. One build at a time per space.
    /// * [`SpaceChange::DropSubspace`]: from the next configuration no write goes through the
    ///   subspace and no search uses it. Its id stays taken ([`SubspaceState::Dropped`]): a
    ///   space uses at most 32 subspace ids over its life.
    ///
    /// Refused with `BadAlteration` when the change cannot apply as the space stands (an
    /// unknown or repeated attribute, a subspace over those attributes already, a build under
    /// way, no such subspace, subspace 0, every id used; nothing changed), `UnknownSpace`.
    /// Keeps the performance model's constants with the configuration (what `tessera
    /// calibrate` measured), where `tessera advise` finds them. `Malformed` if a cost that must
    /// be above 0 is not.
    pub async fn set_model(&self, constants: ModelConstants) -> Result<(), ClientError> {
        self.change_spaces(Request::SetModel { constants }).await
    }

    pub async fn alter_space(&self, space: &str, change: SpaceChange) -> Result<(), ClientError> {
        self.alter_space_fenced(space, change, None).await
    }

    /// [`Client::alter_space`] by the adaptation driver of the coordinators' leader in Raft term
    /// `fence` (0 beside a standalone server): refused (`BADALTERATION`, "fenced: …") unless
    /// the coordinators are still in that term when they apply it.
    pub async fn alter_space_fenced(
        &self,
        space: &str,
        change: SpaceChange,
        fence: Option<u64>,
    ) -> Result<(), ClientError> {
        self.change_spaces(Request::AlterSpace {
            space: space.to_owned(),
            change,
            fence,
        })
        .await
    }

    /// Waits until `space` has no subspace being built ([`SpaceConfig::build`] is `None`), and
    /// returns its configuration then: the subspace added last is then serving, or was
    /// dropped before it was built. Follows the configuration (in a cluster, by long polls of
    /// the coordinators; standalone, by asking the server every 100 ms). Fails with `Timeout`
    /// (saying how far the build got) when `timeout` passes first — `None` waits as long as
    /// it takes — and with `UnknownSpace` when the space is (or gets) removed.
    pub async fn wait_built(
        &self,
        space: &str,
        timeout: Option<std::time::Duration>,
    ) -> Result<SpaceConfig, ClientError> {
        self.wait_built_with(space, timeout, |_| {}).await
    }

    /// [`Client::wait_built`], calling `progress` with the space's configuration each time a
    /// newer one is seen (the first included), e.g. to print `build.done.len()` of the key
    /// regions (`replicas[0].len()`).
    pub async fn wait_built_with(
        &self,
        space: &str,
        timeout: Option<std::time::Duration>,
        mut progress: impl FnMut(&SpaceConfig),
    ) -> Result<SpaceConfig, ClientError> {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut config = self.refresh().await?;
        let mut seen = None;
        loop {
            let current = config.space(space).ok_or_else(|| ClientError::Server {
                status: Status::UnknownSpace,
                message: format!("no space named {space:?}"),
            })?;
            if seen != Some(config.epoch) {
                seen = Some(config.epoch);
                progress(current);
            }
            let Some(build) = &current.build else {
                return Ok(current.clone());
            };
            let left = match deadline {
                None => WAIT_BUILT_POLL_MAX,
                Some(d) => d.saturating_duration_since(tokio::time::Instant::now()),
            };
            if left.is_zero() {
                return Err(ClientError::Server {
                    status: Status::Timeout,
                    message: format!(
                        "subspace {} of {space:?} is still being built after {:?}: {} of {} key \
                         regions backfilled (the build goes on; `tessera status` follows it)",
                        build.subspace.0,
                        timeout.unwrap_or_default(),
                        build.done.len(),
                        current.replicas.first().map_or(0, Vec::len)
                    ),
                });
            }
            let wait = left.min(WAIT_BUILT_POLL_MAX);
            config = self.cluster.wait_config(config.epoch, wait).await?;
        }
    }

    /// Cluster mode: decommissions `server`. The coordinators copy every region it holds to
    /// other servers by state transfer while the cluster keeps serving, drop it from each
    /// region as that copy completes, and remove it from the configuration once it holds none.
    /// Answers once the decision is recorded: the cached configuration then shows the server
    /// `Leaving`, or without it when it held nothing. Refused with `TooFewServers` when fewer
    /// Available servers than some space's replicas would remain, `CmpFail` when it is leaving
    /// already, is offline and alone holds some regions, or holds regions while the
    /// coordinators were started not to plan state transfers
    /// (`tessera_coordinator::CoordinatorOptions::plan_transfers`), `Malformed` for an unknown
    /// server and in
    /// standalone mode.
    pub async fn decommission(&self, server: ServerId) -> Result<(), ClientError> {
        if !self.is_cluster() {
            return Err(ClientError::Server {
                status: Status::Malformed,
                message: "decommission is for a cluster: a standalone server has nobody to hand \
                          its regions to"
                    .into(),
            });
        }
        self.cluster
            .change_spaces(Request::Decommission { server })
            .await
    }

    /// Every space, freshly fetched.
    pub async fn list_spaces(&self) -> Result<Vec<SpaceSchema>, ClientError> {
        Ok(self
            .refresh()
            .await?
            .spaces
            .iter()
            .map(|s| s.schema.clone())
            .collect())
    }

    /// One space's schema.
    pub async fn describe_space(&self, name: &str) -> Result<SpaceSchema, ClientError> {
        self.space(name).await
    }

    // ---- keys ---------------------------------------------------------------------------

    /// The object stored under `key`, or `None`.
    pub async fn get(
        &self,
        space: &str,
        key: impl Into<Value>,
    ) -> Result<Option<Record>, ClientError> {
        let get = |key| Request::Get {
            space: space.to_owned(),
            key,
        };
        match self.key_call(space, key.into(), false, get).await? {
            Response::Object(None) => Ok(None),
            Response::Object(Some(o)) => Ok(Some(self.record(space, o).await?)),
            other => Err(unexpected(other)),
        }
    }

    /// The objects stored under `keys`, in the keys' order (`None` where there is none), each
    /// read as [`Client::get`] reads it: from its point leader, linearizable key by key (not
    /// a snapshot of all of them). A cluster client asks each point leader once for all the
    /// keys it leads, [`KEYS_PER_REQUEST_MAX`](tessera_protocol::constants::KEYS_PER_REQUEST_MAX) a request. Keys of the wrong type, or an unknown
    /// space, fail the whole call before anything is read.
    pub async fn multi_get(
        &self,
        space: &str,
        keys: Vec<Value>,
    ) -> Result<Vec<Option<Record>>, ClientError> {
        let (schema, objects) = self.cluster.multi_get(space, &keys).await?;
        let found: BTreeMap<Value, Record> = objects
            .into_iter()
            .map(|o| to_record(&schema, o))
            .map(|r| (r.key.clone(), r))
            .collect();
        let ty = schema.key().ty;
        Ok(keys
            .into_iter()
            .map(|k| ty.coerce(k).and_then(|k| found.get(&k).cloned()))
            .collect())
    }

    /// Puts several objects, each as [`Client::put`] (or, with a merge funcall,
    /// [`Client::put_document`]) puts one: `items` are (key, funcalls of the put), sent
    /// [`MULTI_PUT_IN_FLIGHT`] at a time, each to its key's point leader. **Not a
    /// transaction**: each put succeeds or fails on its own (a failed one changes nothing of
    /// its key, the others are not undone), and the result says, per item in order, what
    /// happened.
    pub async fn multi_put(
        &self,
        space: &str,
        items: Vec<(Value, Vec<Funcall>)>,
    ) -> Vec<Result<(), ClientError>> {
        use futures::StreamExt;
        futures::stream::iter(items)
            .map(|(key, funcalls)| self.upsert(space, key, funcalls))
            .buffered(MULTI_PUT_IN_FLIGHT)
            .collect()
            .await
    }

    /// Any write to one key. The other write methods are this with fixed arguments.
    pub async fn write(
        &self,
        space: &str,
        key: impl Into<Value>,
        mode: WriteMode,
        conditions: Vec<Predicate>,
        funcalls: Vec<Funcall>,
    ) -> Result<(), ClientError> {
        let put = |key| Request::Put {
            space: space.to_owned(),
            key,
            mode,
            conditions: conditions.clone(),
            funcalls: funcalls.clone(),
        };
        self.write_key(space, key.into(), put).await
    }

    /// Creates the object or updates the attributes given (the others keep their values, or
    /// take their type's default on creation: "", 0, 0.0, empty containers).
    pub async fn put<A: Into<String>, V: Into<Value>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        attributes: impl IntoIterator<Item = (A, V)>,
    ) -> Result<(), ClientError> {
        self.write(
            space,
            key,
            WriteMode::Upsert,
            vec![],
            assignments(attributes),
        )
        .await
    }

    /// A dynamic space's put: creates the document or merges `patch` into it as JSON Merge
    /// Patch does (a property given replaces the stored one, nested documents merge, `null`
    /// removes a property). A document of a shape the space has not seen is stored once the
    /// server has registered the shape.
    pub async fn put_document(
        &self,
        space: &str,
        key: impl Into<Value>,
        patch: Document,
    ) -> Result<(), ClientError> {
        self.upsert(space, key, vec![Funcall::merge(patch)]).await
    }

    /// [`Client::put_document`] placing the document by compression formula `formula` (a
    /// formula id the space has registered, see [`Client::add_formula`]; `""` for the
    /// default, the unispace). The document keeps that formula until a put names another.
    pub async fn put_document_with_formula(
        &self,
        space: &str,
        key: impl Into<Value>,
        patch: Document,
        formula: &str,
    ) -> Result<(), ClientError> {
        let funcalls = vec![
            Funcall::merge(patch),
            Funcall::set(FORMULA_ATTRIBUTE, formula),
        ];
        self.upsert(space, key, funcalls).await
    }

    async fn upsert(
        &self,
        space: &str,
        key: impl Into<Value>,
        funcalls: Vec<Funcall>,
    ) -> Result<(), ClientError> {
        self.write(space, key, WriteMode::Upsert, vec![], funcalls)
            .await
    }

    /// Registers a compression formula in a dynamic space and returns its id once documents
    /// can use it: its overlays that the space lacks become subspaces, serving at once. In a
    /// cluster the formula is ready once every live server knows it; this retries until then
    /// (at most about 30 s). Registering the same formula again changes nothing.
    pub async fn add_formula(&self, space: &str, spec: FormulaSpec) -> Result<String, ClientError> {
        let id = spec.id();
        self.alter_space(space, SpaceChange::AddFormula(spec))
            .await?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let ready = self
                .alter_space(space, SpaceChange::FormulaReady(id.clone()))
                .await;
            match ready {
                Ok(()) => return Ok(id),
                Err(e)
                    if e.status() == Some(Status::Unavailable)
                        && std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Creates the object; fails with `CmpFail` if the key has one.
    pub async fn put_if_not_exist<A: Into<String>, V: Into<Value>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        attributes: impl IntoIterator<Item = (A, V)>,
    ) -> Result<(), ClientError> {
        self.write(
            space,
            key,
            WriteMode::CreateOnly,
            vec![],
            assignments(attributes),
        )
        .await
    }

    /// Updates the object only if every condition holds on it (`CmpFail` otherwise,
    /// `NotFound` if there is no object).
    pub async fn cond_put<A: Into<String>, V: Into<Value>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        conditions: Vec<Predicate>,
        attributes: impl IntoIterator<Item = (A, V)>,
    ) -> Result<(), ClientError> {
        self.write(
            space,
            key,
            WriteMode::UpdateOnly,
            conditions,
            assignments(attributes),
        )
        .await
    }

    /// Like [`Client::cond_put`], but creates the object when there is none.
    pub async fn cond_put_or_create<A: Into<String>, V: Into<Value>>(
        &self,
        space: &str,
        key: impl Into<Value>,
        conditions: Vec<Predicate>,
        attributes: impl IntoIterator<Item = (A, V)>,
    ) -> Result<(), ClientError> {
        self.write(
            space,
            key,
            WriteMode::Upsert,
            conditions,
            assignments(attributes),
        )
        .await
    }

    /// Applies atomic operations to an existing object (`NotFound` if none): all of them or,
    /// if one cannot apply (integer overflow, division by zero), none, with `CmpFail`.
    ///
    /// ```no_run
    /// # async fn demo(client: tessera_client::Client) -> Result<(), tessera_client::ClientError> {
    /// use tessera_client::{Funcall, FuncallOp, NumOp};
    /// client.atomic("hotels", "h1", vec![Funcall::new("price", FuncallOp::Num(NumOp::Add), 10i64)]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn atomic(
        &self,
        space: &str,
        key: impl Into<Value>,
        funcalls: Vec<Funcall>,
    ) -> Result<(), ClientError> {
        self.write(space, key, WriteMode::UpdateOnly, vec![], funcalls)
            .await
    }

    /// Deletes the object (`NotFound` if none).
    pub async fn del(&self, space: &str, key: impl Into<Value>) -> Result<(), ClientError> {
        self.cond_del(space, key, vec![]).await
    }

    /// Deletes the object only if every condition holds on it.
    pub async fn cond_del(
        &self,
        space: &str,
        key: impl Into<Value>,
        conditions: Vec<Predicate>,
    ) -> Result<(), ClientError> {
        let del = |key| Request::Del {
            space: space.to_owned(),
            key,
            conditions: conditions.clone(),
        };
        self.write_key(space, key.into(), del).await
    }

    // ---- search -------------------------------------------------------------------------

    /// Every object matching all predicates (an empty list matches everything).
    pub async fn search(
        &self,
        space: &str,
        predicates: Vec<Predicate>,
    ) -> Result<Vec<Record>, ClientError> {
        self.search_stream(space, predicates).await?.collect().await
    }

    /// Like [`Client::search`], but yields the objects one at a time, as [`Record`]s made
    /// when they are taken (the search is complete, every server answered, before the first).
    pub async fn search_stream(
        &self,
        space: &str,
        predicates: Vec<Predicate>,
    ) -> Result<SearchStream, ClientError> {
        let (schema, objects) = self.cluster.search(space, &predicates).await?;
        Ok(SearchStream::gathered(schema, objects))
    }

    /// How many objects match (counted by the server when one server answers the whole search,
    /// as a standalone server always does).
    pub async fn count(&self, space: &str, predicates: Vec<Predicate>) -> Result<u64, ClientError> {
        self.cluster.count(space, &predicates).await
    }

    // ---- multi-item reads (seed 003: get_by_range, get_by_tags) ---------------------------

    /// The objects whose keys lie in `[from, to)`, in key order, at most `limit` of them
    /// (all without one). In a space with `placement ordered` the read asks only the regions
    /// the range overlaps; in any other, every region of the key subspace. Like a search, it
    /// reads each region once: every object it returns is a version the object had.
    pub async fn get_by_range(
        &self,
        space: &str,
        from: impl Into<Value>,
        to: impl Into<Value>,
        limit: Option<u32>,
    ) -> Result<Vec<Record>, ClientError> {
        let schema = self.space(space).await?;
        let key = schema.key().name.clone();
        let predicates = range_predicates(&schema, from.into(), to.into());
        match limit {
            Some(limit) => {
                self.sorted_search(space, predicates, &key, limit, SortOrder::Ascending)
                    .await
            }
            None => {
                let mut found = self.search(space, predicates).await?;
                found.sort_by(|a, b| a.key.cmp(&b.key));
                Ok(found)
            }
        }
    }

    /// The objects whose tags include every one of `tags`, in key order. The tags are the
    /// set(string) attribute of the space's `placement tagged`, or else its only set(string)
    /// attribute (`WrongType` when it has none or several). In a tagged space the read asks
    /// the regions of the tags' cells on the tag curve; in any other, every region.
    pub async fn get_by_tags(
        &self,
        space: &str,
        tags: Vec<String>,
    ) -> Result<Vec<Record>, ClientError> {
        let schema = self.space(space).await?;
        let predicates = tags_predicates(&schema, tags)?;
        let mut found = self.search(space, predicates).await?;
        found.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(found)
    }

    /// At most `limit` matching objects, ordered by attribute `sort_by` (a string, int or
    /// float attribute; ties by key), smallest or largest first.
    pub async fn sorted_search(
        &self,
        space: &str,
        predicates: Vec<Predicate>,
        sort_by: &str,
        limit: u32,
        order: SortOrder,
    ) -> Result<Vec<Record>, ClientError> {
        let (schema, objects) = self
            .cluster
            .sorted_search(space, &predicates, sort_by, limit, order)
            .await?;
        Ok(objects.into_iter().map(|o| to_record(&schema, o)).collect())
    }

    /// Deletes every matching object; returns how many. Each object found is deleted on the
    /// condition that it still matches; an error stops the deletions part way.
    pub async fn group_del(
        &self,
        space: &str,
        predicates: Vec<Predicate>,
    ) -> Result<u64, ClientError> {
        self.cluster.group_del(space, predicates).await
    }

    /// Applies `funcalls` to every matching object, all of them to an object or none;
    /// returns how many objects were updated (those on which an operation cannot apply, by
    /// integer overflow for instance, are left as they were and not counted). Each object found
    /// is updated on the condition that it still matches; an error stops the updates part way.
    pub async fn group_update(
        &self,
        space: &str,
        predicates: Vec<Predicate>,
        funcalls: Vec<Funcall>,
    ) -> Result<u64, ClientError> {
        self.cluster.group_update(space, predicates, funcalls).await
    }

    /// The shapes of the requests served in `space` over the last `minutes` minutes (at most
    /// 15): which attributes searches fixed or bounded and how many objects they matched, which
    /// attributes writes set. In a cluster every server is asked and the answers merged.
    pub async fn trace(&self, space: &str, minutes: u32) -> Result<SpaceTrace, ClientError> {
        self.cluster.trace(space, minutes).await
    }

    /// The load of each key region of `space`, in region order: objects held, and the key
    /// it would split at ([`KeyRegionLoad`]), as the servers leading the regions read them
    /// from committed state (each reads its regions whole). In a cluster a region whose
    /// leader does not answer is missing from the list.
    pub async fn key_region_loads(&self, space: &str) -> Result<Vec<KeyRegionLoad>, ClientError> {
        self.cluster.key_region_loads(space).await
    }

    /// How many objects each region of subspace `subspace` of `space` holds, in region order,
    /// as the servers leading the regions count them in committed state (each scans the
    /// subspace). In a cluster a region whose leader does not answer is missing from the list.
    pub async fn region_counts(
        &self,
        space: &str,
        subspace: SubspaceId,
    ) -> Result<Vec<RegionCount>, ClientError> {
        self.cluster.region_counts(space, subspace).await
    }

    /// Statistics of the values of every attribute of `space` (count, distinct values,
    /// smallest, largest, quantiles), merged from the servers leading its key regions (each
    /// reads the objects of its regions); in a cluster, the regions whose leader did not
    /// answer are missing from `regions`. Statistics from a server that do not pass their
    /// check are refused (`Malformed`).
    pub async fn statistics(&self, space: &str) -> Result<SpaceStatistics, ClientError> {
        let parts = self.cluster.statistics(space).await?;
        let attributes = self.describe_space(space).await?.attributes.len();
        let mut merged = SpaceStatistics::empty(attributes);
        for part in parts {
            part.check(attributes)
                .map_err(|message| ClientError::Server {
                    status: Status::Malformed,
                    message: format!("statistics from a server: {message}"),
                })?;
            merged.merge(&part);
        }
        Ok(merged)
    }

    /// Splits key region `region` of the ordered space `space` at the key `at`: the keys
    /// from `at` up move to a new region, held by the same servers until the cluster's
    /// balancing moves it (see [`SpaceChange::SplitKeyRegion`]). Answers once every live
    /// server acts on the split.
    pub async fn split_key_region(
        &self,
        space: &str,
        region: u32,
        at: Value,
    ) -> Result<(), ClientError> {
        self.alter_space(space, SpaceChange::SplitKeyRegion { region, at })
            .await
    }

    /// How a search would run: the subspace chosen and the regions and servers it contacts,
    /// computed by the client on the configuration it fetches first (nothing is searched).
    pub async fn explain(
        &self,
        space: &str,
        predicates: Vec<Predicate>,
    ) -> Result<Explanation, ClientError> {
        self.cluster.explain(space, &predicates).await
    }
}

/// The objects of a search, made into [`Record`]s one at a time as they are taken.
pub struct SearchStream {
    schema: SpaceSchema,
    objects: std::vec::IntoIter<WireObject>,
}

impl SearchStream {
    fn gathered(schema: SpaceSchema, objects: Vec<WireObject>) -> SearchStream {
        SearchStream {
            schema,
            objects: objects.into_iter(),
        }
    }

    /// Every remaining object.
    pub async fn collect(self) -> Result<Vec<Record>, ClientError> {
        let schema = &self.schema;
        Ok(self.objects.map(|o| to_record(schema, o)).collect())
    }

    /// The next object, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<Record>, ClientError> {
        Ok(self.objects.next().map(|o| to_record(&self.schema, o)))
    }
}

fn assignments<A: Into<String>, V: Into<Value>>(
    attributes: impl IntoIterator<Item = (A, V)>,
) -> Vec<Funcall> {
    attributes
        .into_iter()
        .map(|(a, v)| Funcall::set(a, v))
        .collect()
}

fn to_record(schema: &SpaceSchema, object: WireObject) -> Record {
    let mut values = object.values.into_iter();
    let key = values.next().expect("an object has its key");
    let attributes = schema.attributes[1..]
        .iter()
        .map(|a| a.name.clone())
        .zip(values)
        .collect();
    Record {
        key,
        version: object.version,
        attributes,
    }
}
