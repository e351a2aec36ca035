//! Requests and responses.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tessera_geometry::dynamic::shape_box;
use tessera_geometry::{RegionIndex, Sketch, Tessellation};
use tessera_types::{
    CheckedPredicate, Epoch, Funcall, Predicate, ServerId, Shape, SpaceKind, SubspaceId, Value,
    Version, UNISPACE,
};

use crate::config::{
    BackfillRef, Configuration, ModelConstants, ServerState, SpaceChange, SpaceConfig, TransferRef,
};
use crate::status::ErrorReply;

/// What a write requires of the key's current object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteMode {
    /// Update the object, or create it (other attributes at their defaults): `put`.
    Upsert,
    /// Create the object; fail with `CmpFail` if it exists: `put_if_not_exist`.
    CreateOnly,
    /// Update an existing object; fail with `NotFound` if absent: `cond_put` and the atomic
    /// operations, as in HyperDex.
    UpdateOnly,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortOrder {
    /// Smallest first.
    Ascending,
    /// Largest first.
    Descending,
}

/// Regions of one subspace that a search reads on one server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionsOf {
    pub subspace: SubspaceId,
    pub regions: Vec<u32>,
}

/// What a search answers with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SearchAnswer {
    /// Every match: `SearchItems`* then `SearchDone`.
    Matches,
    /// How many match: one `Count`.
    Count,
    /// At most `limit` matches ordered by `sort_by` (a string, int or float attribute; ties by
    /// key), smallest or largest first: `SearchItems`* then `SearchDone`.
    Sorted {
        sort_by: String,
        limit: u32,
        order: SortOrder,
    },
}

/// What [`Request::WriteKeys`] does to each key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KeysChange {
    /// Deletes the object.
    Delete,
    /// Applies the funcalls to the object, all of them or none (an absent object is `NotFound`).
    Update(Vec<Funcall>),
}

impl KeysChange {
    /// The single write that makes this change to `key` on `conditions`: what a
    /// [`Request::WriteKeys`] does to each of its keys.
    pub fn single_write(&self, space: &str, key: Value, conditions: &[Predicate]) -> Request {
        let (space, conditions) = (space.to_owned(), conditions.to_vec());
        match self {
            KeysChange::Delete => Request::Del {
                space,
                key,
                conditions,
            },
            KeysChange::Update(funcalls) => Request::Put {
                space,
                key,
                mode: WriteMode::UpdateOnly,
                conditions,
                funcalls: funcalls.clone(),
            },
        }
    }
}

/// A request from a client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// The current configuration (servers, spaces, regions and their replicas, epoch).
    GetConfig,
    AddSpace {
        description: String,
    },
    RmSpace {
        name: String,
    },
    Get {
        space: String,
        key: Value,
    },
    /// Every write to one key: put, put_if_not_exist, cond_put, the atomic operations.
    /// `conditions` must hold on the current object (they are ignored when it is absent and
    /// the mode creates it). All funcalls apply, or none.
    Put {
        space: String,
        key: Value,
        mode: WriteMode,
        conditions: Vec<Predicate>,
        funcalls: Vec<Funcall>,
    },
    /// del (no conditions) and cond_del.
    Del {
        space: String,
        key: Value,
        conditions: Vec<Predicate>,
    },
    /// One change made to each of `keys`, which this server leads, on `conditions`: exactly
    /// what that many `Put`s (mode `UpdateOnly`, the same funcalls) or `Del`s would do, each key
    /// on its own — a group update's or group delete's writes, sent to each point leader in a
    /// few frames rather than one per key. Answered by `Outcomes`, one per key in order. At
    /// most `KEYS_PER_REQUEST_MAX` keys; a key of the wrong type, or conditions or funcalls a
    /// `Put` would refuse, refuse the whole request (nothing is written).
    WriteKeys {
        space: String,
        keys: Vec<Value>,
        conditions: Vec<Predicate>,
        change: KeysChange,
    },
    /// A search, or the share of one that this server answers: every committed object matching
    /// `predicates` in the regions of `parts` (each a subspace and regions of it), answered as
    /// `answer` says. The client planned the search from its configuration (docs/design.md §4)
    /// and sends each server the regions it picked that server for; a server that does not own
    /// one of them answers `StaleEpoch`. A standalone server is the one-server case: it is sent
    /// every region of the plan.
    ///
    /// `follow_stubs`: read the documents that a pointer overlay's stubs point to from this
    /// server's store and answer with them, as a client would (the server must lead every key
    /// region of the space: it holds every document). Without it stubs are answered as they
    /// are, and only with [`SearchAnswer::Matches`]: a count or an order of stubs means nothing.
    SearchRegions {
        space: String,
        predicates: Vec<Predicate>,
        parts: Vec<RegionsOf>,
        answer: SearchAnswer,
        follow_stubs: bool,
    },
    /// To a coordinator, from a server: join the cluster, or come back after a restart.
    /// `token` is the server's identity, chosen at random on its first start and kept in its
    /// data directory: registering the same token again (a restart, or a retry after a lost
    /// reply) returns the same id and records the new address. `incarnation` grows with each
    /// start of the server process (microseconds since the Unix epoch): a new incarnation has
    /// lost its in-memory chain state, so the coordinators take it out of its old replica sets.
    /// Answered by `Registered`.
    RegisterServer {
        token: u128,
        address: String,
        incarnation: u64,
    },
    /// To a coordinator: the configuration, once its epoch is greater than `after`, or the
    /// current one when `timeout_ms` passes first. Servers and clients follow changes with it.
    WaitConfig {
        after: Epoch,
        timeout_ms: u32,
    },
    /// To a coordinator: its view of the coordinator group. Answered by `CoordinatorStatus`.
    CoordinatorStatus,
    /// To every coordinator, from a server, a few times per lease: "I am alive". Answered by
    /// `Heartbeat`. Only a reply with `leader: true` from the coordinators' Raft leader renews
    /// the server's lease (see [`HeartbeatReply`]). `failed`: the server's storage failed and it
    /// stopped taking writes (fail-stop): the leader takes it out of its replica sets at once.
    /// A heartbeat naming an unknown server or the wrong token is refused with `Malformed`; one
    /// from an earlier incarnation than the registered one with `StaleServer`.
    /// `epoch`: the configuration the server acts on (the coordinators wait for every live
    /// server to reach a space change's epoch before they answer it).
    Heartbeat {
        server: ServerId,
        token: u128,
        incarnation: u64,
        failed: bool,
        epoch: Epoch,
    },
    /// To a coordinator, from a server: these state transfers into it are complete (every entry
    /// of their regions is durable here), and it finished backfilling these key regions into
    /// the subspace being built (`tessera_protocol::Build`). Answered by `Done` once the
    /// coordinators applied it (the server is then a full replica of those regions), or
    /// refused like `Heartbeat`.
    TransfersDone {
        server: ServerId,
        token: u128,
        incarnation: u64,
        done: Vec<TransferRef>,
        backfilled: Vec<BackfillRef>,
    },
    /// To a coordinator: move every region `server` holds to other servers by state transfer,
    /// then remove it from the cluster. Answered by `Done` once the decision is recorded; the
    /// draining goes on under load (`tessera status` shows it).
    Decommission {
        server: ServerId,
    },
    /// To a server, from another server: the rest of this connection carries chain messages
    /// (tessera-replication), not client requests. Answered by `Done`.
    PeerHello {
        from: ServerId,
    },
    /// The shapes of the requests this server served in `space` over the last `minutes`
    /// minutes (at most [`crate::constants::TRACE_MINUTES_MAX`]), or with `minutes` 0 since it
    /// started (a total that only grows, until the server restarts). Answered by `Trace`.
    Trace {
        space: String,
        minutes: u32,
    },
    /// Adds or drops a subspace of a live space (`tessera alter-space`). To the coordinators
    /// in a cluster, to the server standalone. Answered by `Done` once the change is in the
    /// configuration every live server acts on; an added subspace is then being built
    /// (`SpaceConfig::build`, shown by `tessera status`), and serves searches once built.
    ///
    /// `fence`: the coordinators' Raft term in which the adaptation driver decided the change
    /// (`config::check_fence`); `None` for a user's change.
    AlterSpace {
        space: String,
        change: SpaceChange,
        fence: Option<u64>,
    },
    /// Keeps the performance model's constants with the configuration (`tessera calibrate`).
    /// To the coordinators in a cluster, to the server standalone. Answered by `Done`;
    /// `Malformed` if some cost that must be above 0 is not.
    SetModel {
        constants: ModelConstants,
    },
    /// `multi_get`: the objects of several keys of one space, streamed as `SearchItems`* then
    /// `SearchDone` (an absent key sends nothing; each object carries its key). Each key is
    /// read as a `Get` is: only from its point leader, so a cluster client sends each server
    /// the keys it leads. At most [`crate::constants::KEYS_PER_REQUEST_MAX`] keys.
    GetMany {
        space: String,
        keys: Vec<Value>,
    },
    /// The load of the key regions of `space` this server leads (is the first replica of),
    /// read from its committed state: how many objects each holds and where it would split
    /// (`tessera key-regions`, and the coordinators' splits of an ordered space's regions
    /// that outgrow the others). Answered by `KeyRegionLoads`.
    KeyRegionLoads {
        space: String,
    },
    /// Presents a client's token, one of the daemon's `--auth` file. Answered by
    /// `Authenticated` with its role (an open daemon answers `Admin`); an unknown token gets
    /// `Unauthorized` and leaves the connection with no token. See [`crate::auth`].
    Authenticate {
        token: String,
    },
    /// From a coordinator or server: the first step of proving the cluster secret, with a
    /// fresh random nonce. Answered by `ClusterChallenge` ([`crate::auth`]).
    ClusterChallenge {
        nonce: crate::credentials::Nonce,
    },
    /// The last step: the member's proof over both nonces. Answered by `Done`, or refused
    /// with `Unauthorized` and the connection closed.
    ClusterProof {
        proof: crate::credentials::Proof,
    },
    /// How many objects each region of `subspace` of `space` holds that this server leads (is
    /// the first replica of), counted in its committed state: the console's shading of a
    /// subspace's regions. Answered by `RegionCounts`, in region order. (Last, so that the
    /// earlier variants keep their wire numbers.)
    RegionCounts {
        space: String,
        subspace: SubspaceId,
    },
    /// Statistics of the values of every attribute of `space`, over the objects of the key
    /// regions this server leads (so that every object counts once across the servers),
    /// read from its committed state: what `tessera stats` prints and where a re-cut cuts.
    /// Answered by `Statistics`.
    Statistics {
        space: String,
    },
    /// To a coordinator, from a server that stops for a planned restart: take it out of the
    /// chains, keeping its regions for it (`ServerState::Resting`), instead of re-replicating
    /// them once its lease lapses. Answered by `Done` once every live server acts on the
    /// configuration without it (or `Timeout` naming those that do not yet); refused like
    /// `Heartbeat`, and with `CmpFail` for a server that is not Available.
    RestServer {
        server: ServerId,
        token: u128,
        incarnation: u64,
    },
}

impl Request {
    /// The operation's name, as metrics and logs label it.
    pub fn operation(&self) -> &'static str {
        match self {
            Request::GetConfig => "get_config",
            Request::WaitConfig { .. } => "wait_config",
            Request::CoordinatorStatus => "coordinator_status",
            Request::AddSpace { .. } => "add_space",
            Request::RmSpace { .. } => "rm_space",
            Request::AlterSpace { .. } => "alter_space",
            Request::SetModel { .. } => "set_model",
            Request::Decommission { .. } => "decommission",
            Request::Get { .. } => "get",
            Request::GetMany { .. } => "get_many",
            Request::Put { .. } => "put",
            Request::Del { .. } => "del",
            Request::WriteKeys { .. } => "write_keys",
            Request::SearchRegions { answer, .. } => match answer {
                SearchAnswer::Matches => "search",
                SearchAnswer::Count => "count",
                SearchAnswer::Sorted { .. } => "sorted_search",
            },
            Request::Trace { .. } => "trace",
            Request::KeyRegionLoads { .. } => "key_region_loads",
            Request::RegisterServer { .. } => "register_server",
            Request::Heartbeat { .. } => "heartbeat",
            Request::TransfersDone { .. } => "transfers_done",
            Request::PeerHello { .. } => "peer_hello",
            Request::Authenticate { .. } => "authenticate",
            Request::ClusterChallenge { .. } => "cluster_challenge",
            Request::ClusterProof { .. } => "cluster_proof",
            Request::RegionCounts { .. } => "region_counts",
            Request::Statistics { .. } => "statistics",
            Request::RestServer { .. } => "rest_server",
        }
    }
}

impl Request {
    /// The space a request names, if any (for error messages and routing).
    pub fn space(&self) -> Option<&str> {
        match self {
            Request::GetConfig
            | Request::AddSpace { .. }
            | Request::RegisterServer { .. }
            | Request::Heartbeat { .. }
            | Request::TransfersDone { .. }
            | Request::RestServer { .. }
            | Request::Decommission { .. }
            | Request::WaitConfig { .. }
            | Request::CoordinatorStatus
            | Request::PeerHello { .. }
            | Request::SetModel { .. }
            | Request::Authenticate { .. }
            | Request::ClusterChallenge { .. }
            | Request::ClusterProof { .. } => None,
            Request::RmSpace { name } => Some(name),
            Request::Get { space, .. }
            | Request::Put { space, .. }
            | Request::Del { space, .. }
            | Request::WriteKeys { space, .. }
            | Request::SearchRegions { space, .. }
            | Request::Trace { space, .. }
            | Request::AlterSpace { space, .. }
            | Request::GetMany { space, .. }
            | Request::KeyRegionLoads { space }
            | Request::RegionCounts { space, .. }
            | Request::Statistics { space } => Some(space),
        }
    }
}

/// An object as it travels: its version and its values in schema order (key first). The
/// client names the values from the schema in its configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireObject {
    pub version: Version,
    pub values: Vec<Value>,
}

/// How a search would run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    pub subspace: SubspaceId,
    /// The chosen subspace's dimensions, by name.
    pub dimensions: Vec<String>,
    /// Regions the chosen subspace has.
    pub subspace_regions: u64,
    /// Regions the search contacts (0 when the predicates contradict each other).
    pub regions_contacted: u64,
    /// Servers the search contacts: in a cluster, as the client's fan-out picks them
    /// (`servers_fewest` by default).
    pub servers_contacted: u64,
    /// Servers contacted asking one replica per region, rotating (no minimization).
    pub servers_each_region: u64,
    /// Servers contacted asking the fewest servers that hold every region (set cover).
    pub servers_fewest: u64,
    /// Whom the search asks for what: (server, subspace, regions), as the fan-out picks.
    pub contacted: Vec<(ServerId, SubspaceId, Vec<u32>)>,
    /// Per subspace considered: (subspace, regions its box crosses).
    pub candidates: Vec<(SubspaceId, u64)>,
    /// A dynamic space's search: the shapes of document it reads (those that can match;
    /// one box each, see `tessera_geometry::dynamic`), and how many the space has. Empty
    /// and 0 for a typed space.
    pub shapes: Vec<Shape>,
    pub shapes_known: u64,
    /// A dynamic space's search: per subspace it reads, the formulas whose documents it reads
    /// there and the regions it contacts (`regions_contacted` sums them; `subspace` and
    /// `dimensions` describe the first). Empty for a typed space.
    pub parts: Vec<ExplainedPart>,
}

/// One subspace a dynamic space's search reads (see [`Explanation::parts`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExplainedPart {
    pub subspace: SubspaceId,
    /// Its axes: properties for an overlay, `axis N` for the unispace.
    pub dimensions: Vec<String>,
    /// The formulas whose documents the search reads here (`""`: the default one).
    pub formulas: Vec<String>,
    pub regions_contacted: u64,
    /// A pointer overlay: each stub that matches costs a read of its document by key.
    pub pointer: bool,
}

impl Explanation {
    /// The distinct servers among `contacted`.
    pub fn servers_in(contacted: &[(ServerId, SubspaceId, Vec<u32>)]) -> u64 {
        let servers: std::collections::BTreeSet<ServerId> =
            contacted.iter().map(|(s, _, _)| *s).collect();
        servers.len() as u64
    }

    /// How a search of `space` by `predicates` would run, for `explain`: the plan, the subspaces it
    /// weighed, and the servers `pick` chooses for the regions it contacts (`None`: none).
    pub fn of(
        space: &SpaceConfig,
        tessellations: &[Tessellation],
        predicates: &[CheckedPredicate],
        mut pick: impl FnMut(SubspaceId, RegionIndex) -> Option<ServerId>,
    ) -> Explanation {
        let schema = &space.schema;
        let plan = space.plan(tessellations, predicates);
        let first = &plan[0];
        let candidates = if schema.is_dynamic() {
            plan.iter().map(|p| (p.subspace, p.regions_count)).collect()
        } else {
            schema
                .searchable_subspaces()
                .map(|s| (s, space.part_in(tessellations, s, predicates).regions_count))
                .collect()
        };
        let mut asked: BTreeMap<(ServerId, SubspaceId), Vec<u32>> = BTreeMap::new();
        for p in &plan {
            for r in p.regions(&tessellations[p.subspace.get()]) {
                if let Some(server) = pick(p.subspace, r) {
                    asked.entry((server, p.subspace)).or_default().push(r.0);
                }
            }
        }
        let contacted: Vec<(ServerId, SubspaceId, Vec<u32>)> = asked
            .into_iter()
            .map(|((server, subspace), regions)| (server, subspace, regions))
            .collect();
        let servers = Explanation::servers_in(&contacted);
        let shapes = match schema.kind {
            SpaceKind::Dynamic { dimensions } => space
                .shapes
                .iter()
                .filter(|s| shape_box(s, dimensions, predicates).is_some())
                .cloned()
                .collect(),
            SpaceKind::Typed => vec![],
        };
        let dimensions_of =
            |subspace: SubspaceId| match (&schema.kind, &schema.subspace(subspace).overlay) {
                (_, Some(overlay)) => overlay.axes.iter().map(|a| a.path.clone()).collect(),
                // The unispace's axes are fed by the document, each by the properties that hash
                // there.
                (SpaceKind::Dynamic { dimensions }, None) if subspace == UNISPACE => {
                    (0..*dimensions).map(|i| format!("axis {i}")).collect()
                }
                _ => space.attribute_names(subspace),
            };
        let parts = if schema.is_dynamic() {
            plan.iter()
                .map(|p| ExplainedPart {
                    subspace: p.subspace,
                    dimensions: dimensions_of(p.subspace),
                    formulas: p.formulas.clone(),
                    regions_contacted: p.regions_count,
                    pointer: schema.pointer_overlay(p.subspace).is_some(),
                })
                .collect()
        } else {
            vec![]
        };
        let tessellation = &tessellations[first.subspace.get()];
        Explanation {
            subspace: first.subspace,
            dimensions: dimensions_of(first.subspace),
            subspace_regions: tessellation.regions_count() as u64,
            regions_contacted: plan.iter().map(|p| p.regions_count).sum(),
            parts,
            servers_contacted: servers,
            servers_each_region: servers,
            servers_fewest: servers,
            contacted,
            candidates,
            shapes,
            shapes_known: space.shapes.len() as u64,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// A write or admin request succeeded.
    Done,
    Config(Box<Configuration>),
    /// `get`: the object, or `None` when the key has none.
    Object(Option<WireObject>),
    SearchItems(Vec<WireObject>),
    SearchDone,
    Count(u64),
    Explain(Box<Explanation>),
    /// `RegisterServer`: the server's id, stable for the life of the cluster.
    Registered(ServerId),
    CoordinatorStatus(CoordinatorStatus),
    /// `Heartbeat`: whether it renews the server's lease, and what the coordinator knows of it.
    Heartbeat(HeartbeatReply),
    Error(ErrorReply),
    Trace(crate::trace::SpaceTrace),
    KeyRegionLoads(Vec<KeyRegionLoad>),
    /// `Authenticate`: the token's role.
    Authenticated {
        role: crate::credentials::Role,
    },
    /// `ClusterChallenge`: the daemon's nonce, and its proof that it holds the secret.
    ClusterChallenge {
        nonce: crate::credentials::Nonce,
        proof: crate::credentials::Proof,
    },
    /// `RegionCounts`: the regions this server leads, in region order.
    RegionCounts(Vec<RegionCount>),
    /// `Statistics`: of the key regions this server leads.
    Statistics(SpaceStatistics),
    /// `WriteKeys`: each key's outcome, in the request's order (`Done` or the error a single
    /// write would have been answered with).
    Outcomes(Vec<Result<(), ErrorReply>>),
}

/// Statistics of a space's values (`Request::Statistics`): of the objects of the key regions
/// `regions`, one sketch per attribute in schema order (the key first; containers and
/// documents have empty ones) and, in a dynamic space, one per document path an overlay names.
/// Statistics of disjoint regions merge into those of their union.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceStatistics {
    /// The key regions counted, ascending.
    pub regions: Vec<u32>,
    pub attributes: Vec<Sketch>,
    /// Per attribute in schema order, the hashes of its strings as numbers
    /// (`Sketch::insert_hash`): what a hashed axis is cut by. Empty for other attributes and
    /// for the key.
    pub hashes: Vec<Sketch>,
    /// In a dynamic space, for each path an overlay names (at most [`PATH_STATISTICS_MAX`]
    /// paths, the smallest first), the strings, ints and floats there of the documents whose
    /// formula places them in an overlay naming it; by path, ascending.
    pub paths: Vec<(String, Sketch)>,
}

/// The most document paths a space's statistics sketch: with 13 KiB a sketch at most, their
/// answer stays well within one frame.
pub const PATH_STATISTICS_MAX: usize = 64;

impl SpaceStatistics {
    /// No objects, of `attributes` attributes.
    pub fn empty(attributes: usize) -> SpaceStatistics {
        SpaceStatistics {
            regions: Vec::new(),
            attributes: vec![Sketch::new(); attributes],
            hashes: vec![Sketch::new(); attributes],
            paths: Vec::new(),
        }
    }

    /// The sketch of document path `path`, if these statistics keep one.
    pub fn path(&self, path: &str) -> Option<&Sketch> {
        let at = self
            .paths
            .binary_search_by(|(p, _)| p.as_str().cmp(path))
            .ok()?;
        Some(&self.paths[at].1)
    }

    /// Adds the statistics of other key regions (those already counted here are skipped,
    /// so that no object counts twice).
    pub fn merge(&mut self, other: &SpaceStatistics) {
        if other
            .regions
            .iter()
            .any(|r| self.regions.binary_search(r).is_ok())
        {
            return;
        }
        self.regions.extend(&other.regions);
        self.regions.sort_unstable();
        let mine = self.attributes.iter_mut().chain(&mut self.hashes);
        for (mine, theirs) in mine.zip(other.attributes.iter().chain(&other.hashes)) {
            mine.merge(theirs);
        }
        // Servers on different epochs may sketch different paths: a path one of them lacks
        // counts only the regions of the others.
        for (path, theirs) in &other.paths {
            match self.paths.binary_search_by(|(p, _)| p.cmp(path)) {
                Ok(at) => self.paths[at].1.merge(theirs),
                Err(at) if self.paths.len() < PATH_STATISTICS_MAX => {
                    self.paths.insert(at, (path.clone(), theirs.clone()));
                }
                Err(_) => {}
            }
        }
    }

    /// Whether statistics from another server are well formed: `attributes` sketches, each
    /// passing its own check, regions ascending, at most [`PATH_STATISTICS_MAX`] paths,
    /// ascending.
    pub fn check(&self, attributes: usize) -> Result<(), String> {
        if self.paths.len() > PATH_STATISTICS_MAX {
            return Err(format!(
                "statistics of {} paths, more than {PATH_STATISTICS_MAX}",
                self.paths.len()
            ));
        }
        if self.paths.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err("statistics' paths are not ascending".to_owned());
        }
        if self.attributes.len() != attributes || self.hashes.len() != attributes {
            return Err(format!(
                "statistics of {} attributes ({} of hashes) for a space of {attributes}",
                self.attributes.len(),
                self.hashes.len()
            ));
        }
        if self.regions.windows(2).any(|w| w[0] >= w[1]) {
            return Err("statistics' regions are not ascending".to_owned());
        }
        self.attributes
            .iter()
            .chain(&self.hashes)
            .chain(self.paths.iter().map(|(_, s)| s))
            .try_for_each(|s| s.check().map_err(|e| e.to_string()))
    }
}

/// How many objects one region holds (see `Request::RegionCounts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionCount {
    pub region: u32,
    pub objects: u64,
}

/// One key region's load (see `Request::KeyRegionLoads`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRegionLoad {
    pub region: u32,
    pub objects: u64,
    /// The key to split it at so that its halves hold about as many objects; `None` when
    /// it cannot split (empty, or every key at one coordinate).
    pub split_at: Option<Value>,
}

/// A coordinator's answer to a server's heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// True only from the coordinator that is the Raft leader and confirmed it with a quorum
    /// after the heartbeat arrived, and never for a server reporting `failed` or being taken
    /// offline: only such a reply renews the lease (to the moment the heartbeat was *sent*
    /// plus `lease_ms`, and only when `state` is `Available`).
    pub leader: bool,
    /// The server's state in this coordinator's configuration.
    pub state: ServerState,
    /// Epoch of that configuration.
    pub epoch: Epoch,
    /// The lease the coordinators grant, in milliseconds: servers use this value.
    pub lease_ms: u64,
}

/// When the coordinator leader last heard a server's heartbeat, and what epoch it reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerLiveness {
    pub id: ServerId,
    /// Milliseconds since this coordinator received the server's last heartbeat; `None` when
    /// it has heard none from the server's current incarnation.
    pub heard_ms_ago: Option<u64>,
    /// The configuration epoch the server said it acts on in that last heartbeat; `None`
    /// when none was heard.
    pub epoch: Option<Epoch>,
}

/// One coordinator's view of the coordinator group (Raft).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorStatus {
    /// This coordinator's Raft node id.
    pub id: u64,
    /// The leader this coordinator knows of, if any.
    pub leader: Option<u64>,
    pub term: u64,
    /// Index of the last log entry applied to the configuration state machine.
    pub last_applied: u64,
    /// Every voting member: Raft node id and address.
    pub members: Vec<(u64, String)>,
    /// Epoch of the configuration this coordinator has applied.
    pub epoch: Epoch,
    /// Every server of that configuration with when this coordinator last heard it, filled by
    /// the leader from its failure detector; empty on followers.
    pub servers: Vec<ServerLiveness>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestFrame {
    pub id: u64,
    /// The configuration the client acted on; `Epoch(0)` when it has none yet.
    pub epoch: Epoch,
    pub request: Request,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResponseFrame {
    pub id: u64,
    /// The server's current configuration; a client seeing a newer one refreshes its copy.
    pub epoch: Epoch,
    pub response: Response,
}
