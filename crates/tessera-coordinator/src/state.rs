//! The replicated state machine: the cluster configuration and the commands that change it.
//!
//! Pure: no I/O, no clocks, no randomness. Every replica applies the same commands in the same
//! order and reaches the same state, byte for byte (postcard), which is what Raft needs.
//!
//! Rules:
//! - every command that changes something bumps the epoch by exactly one;
//! - a command that fails, or that changes nothing (re-registering a server at the address it
//!   already has), leaves the state exactly as it was;
//! - a space's id is the epoch that created it;
//! - no replica set is ever empty, and none loses its last *complete* member (one that holds
//!   all of the region's data, see [`SpaceConfig::complete_replicas`]): a server leaving the
//!   replica sets (taken offline, or restarted) stays in those where it is the only complete
//!   member (see [`remove_from_replica_sets`]);
//! - after every command that changed something, state transfers are planned in the same epoch
//!   (see [`ClusterState::apply`]): the state is always one planning would leave as it is, so
//!   a command that changes nothing has nothing to plan either. Planning is off unless
//!   [`ClusterState::plan_transfers`] is set (see [`PLAN_TRANSFERS`]);
//! - join records (`SpaceConfig::joined`) name members only: a transfer completes through
//!   [`SpaceConfig::complete_transfer`], and whatever takes a server out of a replica set
//!   drops its record there ([`SpaceConfig::forget_departed`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tessera_geometry::{assign_replicas, assign_subspace, tessellation_of, RegionIndex};
use tessera_protocol::{
    check_fence, AlterError, BackfillRef, Configuration, ModelConstants, RestingPlace, ServerInfo,
    ServerState, SpaceChange, SpaceConfig, Transfer, TransferRef,
};
use tessera_types::{
    Epoch, SchemaError, ServerId, SpaceKind, SpaceSchema, SubspaceId, SubspaceState,
};

/// Longest server address accepted by registration (`host:port`).
pub const ADDRESS_BYTES_MAX: usize = 256;

pub use tessera_protocol::constants::CONFIGURATION_BYTES_MAX;

/// The most state transfers one server may be the target of at a time, and the most it may be
/// the source of. A server's death can leave hundreds of regions a replica short; starting
/// every transfer at once would have the survivors stream all of them together, against the
/// live load and against each other, finishing none sooner and all later. The others start as
/// earlier ones complete: a completion is a command, and every command plans again.
pub const TRANSFERS_PER_SERVER_MAX: usize = 8;

/// Whether the coordinators plan state transfers: re-replication after a failure or a restart,
/// a joining server taking its share, decommission, balance. On. Off, a region that lost a
/// replica stays a replica short, a joining server gets regions only in new spaces, and
/// `Decommission` of a server that holds regions is refused ([`CommandError::TransfersOff`])
/// instead of leaving it Leaving for ever. Tests turn it on or off per state
/// ([`ClusterState::plan_transfers`], `CoordinatorOptions::plan_transfers`).
pub const PLAN_TRANSFERS: bool = true;

/// A server as the coordinator remembers it: what everyone sees, plus the token that identifies
/// the server across restarts and the incarnation of the process that registered last.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredServer {
    pub info: ServerInfo,
    pub token: u128,
    /// Grows with each start of the server process: heartbeats and failure decisions name it,
    /// so neither an earlier process nor a decision about one can act on a fresh restart.
    pub incarnation: u64,
}

/// The whole replicated state. Snapshots are this, postcard-encoded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// Epoch of the current configuration; 0 before the first change.
    pub epoch: Epoch,
    /// Every registered server, in id order.
    pub servers: Vec<RegisteredServer>,
    /// Every space, in creation order.
    pub spaces: Vec<SpaceConfig>,
    /// The id the next newly registered server gets. Ids start at 1 and are never reused.
    pub next_server_id: u64,
    /// The performance model's constants, once `tessera calibrate` stored them.
    pub model: Option<ModelConstants>,
    /// Whether commands plan state transfers ([`PLAN_TRANSFERS`] by default). A rule of the
    /// state machine, like its code, not replicated data: snapshots do not carry it, and every
    /// coordinator of a group must run with the same value (`CoordinatorOptions::plan_transfers`),
    /// or their states diverge.
    #[serde(skip, default = "plan_transfers_default")]
    pub plan_transfers: bool,
}

fn plan_transfers_default() -> bool {
    PLAN_TRANSFERS
}

impl Default for ClusterState {
    fn default() -> Self {
        ClusterState {
            epoch: Epoch(0),
            servers: Vec::new(),
            spaces: Vec::new(),
            next_server_id: 1,
            model: None,
            plan_transfers: PLAN_TRANSFERS,
        }
    }
}

/// A change to the configuration: the payload of a Raft log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A server joins, or comes back (same token) possibly at a new address. A new (greater)
    /// incarnation is a restart: the process lost its in-memory chain state, so it leaves every
    /// replica set it can leave. An Offline server registering again becomes Available (with
    /// the regions it still holds, normally none); a Leaving one stays Leaving.
    RegisterServer {
        token: u128,
        address: String,
        incarnation: u64,
    },
    /// The failure detector's decision (lease lapsed, or the server reported a storage
    /// failure): the server becomes Offline and leaves every replica set it can leave. Applies
    /// only while the server is live (Available, or Leaving) and still at `incarnation`. A
    /// Leaving server that holds nothing afterwards is gone from the configuration: its
    /// decommission is complete.
    MarkOffline {
        id: ServerId,
        incarnation: u64,
    },
    /// Create a space; its replica sets are assigned when the command applies.
    AddSpace {
        schema: SpaceSchema,
    },
    RmSpace {
        name: String,
    },
    /// A server reports state transfers into it complete (`Request::TransfersDone`). Each
    /// reference that names an active transfer exactly (space id, subspace, region, transfer
    /// id) whose target is this server completes it: the server becomes a full member and the
    /// member it replaces, if any, leaves the set. References that match nothing (a transfer
    /// cancelled or completed already, a report repeated) are ignored.
    ///
    /// `backfilled` names key regions the server finished backfilling into a subspace being
    /// built (see `tessera_protocol::Build`): each one that names a space's build under way
    /// exactly (space id, subspace, `since`) is recorded (`SpaceConfig::complete_backfills`);
    /// once every key region is, the subspace serves. Others are ignored.
    CompleteTransfers {
        id: ServerId,
        incarnation: u64,
        done: Vec<TransferRef>,
        backfilled: Vec<BackfillRef>,
    },
    /// `tessera decommission`: an Available server becomes Leaving; its regions move to other
    /// servers by state transfer, and once it holds none it leaves the configuration. An
    /// Offline server that holds no region leaves it at once. Refused for a server that holds
    /// regions while transfers are not planned ([`ClusterState::plan_transfers`]): nothing
    /// would move them.
    Decommission {
        id: ServerId,
    },
    /// `tessera alter-space`: adds a subspace to the space `name`, or drops one (see
    /// `SpaceConfig::alter`). An added subspace is Building from this command's epoch (its
    /// `Build::since`), its regions assigned balanced over the Available servers (see
    /// [`assign_subspace`]); a dropped one keeps its id with no region.
    // Declared last: postcard encodes a variant by its index, and logs and peers know the
    // others by theirs.
    ///
    /// `fence`: the term the adaptation driver decided the change in; it applies only in an
    /// entry of that term ([`ClusterState::apply_in_term`]).
    AlterSpace {
        name: String,
        change: SpaceChange,
        fence: Option<u64>,
    },
    /// `tessera calibrate`: the performance model's constants measured on this database,
    /// kept with the configuration. Refused if unusable (see `ModelConstants::is_usable`).
    SetModel {
        constants: ModelConstants,
    },
    /// A server rests (`ServerState::Resting`): it announced a planned stop
    /// (`Request::RestServer`), or the leader's detector found its lease lapsed and waits a
    /// grace period for it. It leaves every replica set it can leave, as `MarkOffline` makes
    /// it, but each region it leaves that is then short of K members keeps a place for it
    /// (`SpaceConfig::resting`): planning gives that region to no other server, and once the
    /// server is back (registered again) starts a transfer into it there, which copies only
    /// what changed. Applies only to an Available server still at `incarnation`. The grace
    /// period is the detector's: past it, it proposes `MarkOffline`, which drops the places.
    // Declared last, like `AlterSpace`.
    Rest {
        id: ServerId,
        incarnation: u64,
    },
}

/// What a successful command did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandOutcome {
    /// `changed` is false when the token was known at this address already (no new epoch).
    Registered {
        id: ServerId,
        changed: bool,
    },
    /// The new space's id (the epoch that created it).
    SpaceAdded {
        id: u64,
    },
    SpaceRemoved,
    MarkedOffline {
        id: ServerId,
    },
    /// How many of the reported transfers completed and how many backfilled key regions were
    /// newly recorded; both 0 when nothing matched (no new epoch).
    TransfersCompleted {
        completed: u32,
        backfilled: u32,
    },
    /// `removed`: it held no region and left the configuration at once; otherwise it is
    /// Leaving.
    Decommissioned {
        id: ServerId,
        removed: bool,
    },
    /// The subspace added (the next id) or dropped; none when adaptation was turned on or
    /// off, or an adaptation logged.
    SpaceAltered {
        subspace: Option<u16>,
    },
    /// The model's constants are the configuration's (`changed` false: they were already).
    ModelSet {
        changed: bool,
    },
    /// The server rests; `places`: the regions that wait for it.
    Rested {
        id: ServerId,
        places: u32,
    },
}

/// Why a command changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum CommandError {
    #[error("space {0:?} exists already")]
    SpaceExists(String),
    #[error("no space named {0:?}")]
    UnknownSpace(String),
    #[error("space {space:?} needs {needed} servers (tolerate {} failures + 1), but {available} are available", needed - 1)]
    TooFewServers {
        space: String,
        needed: u32,
        available: u32,
    },
    #[error("the space is not valid: {0}")]
    InvalidSchema(SchemaError),
    #[error("the configuration would take {bytes} bytes, over the {max}-byte limit: fewer partitions, subspaces or replicas")]
    ConfigurationTooLarge { bytes: usize, max: usize },
    #[error("server address {0:?} is not valid: 1..={ADDRESS_BYTES_MAX} bytes expected")]
    InvalidAddress(String),
    #[error("no server {0} is registered")]
    UnknownServer(ServerId),
    #[error("server {id} is at incarnation {current}, not {incarnation}: that process is an earlier one")]
    StaleServer {
        id: ServerId,
        incarnation: u64,
        current: u64,
    },
    #[error("server {0} is offline already")]
    AlreadyOffline(ServerId),
    #[error("server {0} is being decommissioned already")]
    AlreadyLeaving(ServerId),
    #[error("server {id} is offline and alone holds {regions} regions (their data is nowhere else): bring it back, then decommission it")]
    OfflineHoldsRegions { id: ServerId, regions: u64 },
    #[error("decommissioning server {id} would leave {available} available servers, but space {space:?} needs {needed} (tolerate {} failures + 1): add a server first", needed - 1)]
    WouldUnderReplicate {
        id: ServerId,
        space: String,
        needed: u32,
        available: u32,
    },
    #[error("server {id} holds {regions} regions, and these coordinators plan no state transfers yet, so nothing would move them: decommission works only for a server that holds none (stop it and let its lease lapse: it leaves every region that has another replica, which stays a replica short; then decommission it)")]
    TransfersOff { id: ServerId, regions: u64 },
    // Declared after the others, like the command that makes them.
    #[error("{0}")]
    Alter(AlterError),
    #[error("subspace {subspace} of the space is {state:?}: a new space's subspaces all serve (subspaces are added to a live space by alter-space)")]
    SubspaceNotServing { subspace: u16, state: SubspaceState },
    #[error("model constants {0:?} would make some prediction free or impossible: every cost but the search's per-object one must be above 0")]
    UnusableModel(ModelConstants),
    #[error("server {id} is {state:?}: only an Available server can rest (a Leaving one is being drained; an Offline or Resting one is away already)")]
    CannotRest { id: ServerId, state: ServerState },
}

impl ClusterState {
    /// The configuration servers and clients act on.
    pub fn configuration(&self) -> Configuration {
        Configuration {
            epoch: self.epoch,
            servers: self.servers.iter().map(|s| s.info.clone()).collect(),
            spaces: self.spaces.clone(),
            model: self.model,
        }
    }

    /// The id registered for `token`, if any.
    pub fn server_by_token(&self, token: u128) -> Option<&RegisteredServer> {
        self.servers.iter().find(|s| s.token == token)
    }

    pub fn server(&self, id: ServerId) -> Option<&RegisteredServer> {
        self.servers.iter().find(|s| s.info.id == id)
    }

    /// Applies one command. On error nothing has changed.
    ///
    /// A command that changed something (it bumped the epoch) is followed, in the same epoch,
    /// by planning state transfers (see `ClusterState::plan`; only while
    /// [`ClusterState::plan_transfers`] is set): what it changed may have left regions short of
    /// replicas, freed a transfer slot, brought a server to take a share, or made one leave. A
    /// command that changed nothing needs no planning: the state before it was planned already.
    /// In term 0: a fenced change applies only if fenced by term 0 (a standalone's).
    pub fn apply(&mut self, command: Command) -> Result<CommandOutcome, CommandError> {
        self.apply_in_term(command, 0)
    }

    /// [`ClusterState::apply`] for a log entry of Raft term `term`: a fenced change
    /// (`Command::AlterSpace`'s `fence`) applies only in the term it names
    /// (`tessera_protocol::check_fence`), so a leader deposed while it adapted a space changes
    /// nothing once its successor leads.
    pub fn apply_in_term(
        &mut self,
        command: Command,
        term: u64,
    ) -> Result<CommandOutcome, CommandError> {
        if let Command::AlterSpace { change, fence, .. } = &command {
            check_fence(*fence, term, change).map_err(CommandError::Alter)?;
        }
        let before = self.epoch;
        let mut outcome = match command {
            Command::RegisterServer {
                token,
                address,
                incarnation,
            } => self.register(token, address, incarnation),
            Command::MarkOffline { id, incarnation } => self.mark_offline(id, incarnation),
            Command::AddSpace { schema } => self.add_space(schema),
            Command::RmSpace { name } => self.rm_space(&name),
            Command::CompleteTransfers {
                id,
                incarnation,
                done,
                backfilled,
            } => self.complete_transfers(id, incarnation, &done, &backfilled),
            Command::Decommission { id } => self.decommission(id),
            Command::AlterSpace { name, change, .. } => self.alter_space(&name, &change),
            Command::SetModel { constants } => self.set_model(constants),
            Command::Rest { id, incarnation } => self.rest(id, incarnation),
        }?;
        if self.epoch != before {
            self.plan();
        }
        if let CommandOutcome::Decommissioned { id, removed } = &mut outcome {
            // Planning removes a Leaving server that holds nothing.
            *removed = self.server(*id).is_none();
        }
        Ok(outcome)
    }

    /// The ids of the servers in `state`, in id order.
    fn ids_in(&self, state: ServerState) -> Vec<ServerId> {
        self.servers
            .iter()
            .filter(|s| s.info.state == state)
            .map(|s| s.info.id)
            .collect()
    }

    fn bump(&mut self) -> Epoch {
        self.epoch = Epoch(self.epoch.0 + 1);
        self.epoch
    }

    fn register(
        &mut self,
        token: u128,
        address: String,
        incarnation: u64,
    ) -> Result<CommandOutcome, CommandError> {
        if address.is_empty() || address.len() > ADDRESS_BYTES_MAX {
            return Err(CommandError::InvalidAddress(address));
        }
        if let Some(i) = self.servers.iter().position(|s| s.token == token) {
            let server = &self.servers[i];
            let id = server.info.id;
            if incarnation < server.incarnation {
                return Err(CommandError::StaleServer {
                    id,
                    incarnation,
                    current: server.incarnation,
                });
            }
            let restarted = incarnation > server.incarnation;
            let away = matches!(
                server.info.state,
                ServerState::Offline | ServerState::Resting
            );
            if !restarted && !away && server.info.address == address {
                return Ok(CommandOutcome::Registered { id, changed: false });
            }
            if restarted {
                // Its chain state (pending updates, link sequence numbers) died with the old
                // process: it must not resume its old roles.
                remove_from_replica_sets(&mut self.spaces, id);
            }
            let server = &mut self.servers[i];
            server.info.address = address;
            // A Leaving server that restarts goes on leaving (the operator's decision stands);
            // an Offline or Resting one is back (a Resting one to the places kept for it).
            if away {
                server.info.state = ServerState::Available;
            }
            server.incarnation = incarnation;
            self.bump();
            return Ok(CommandOutcome::Registered { id, changed: true });
        }
        let id = ServerId(self.next_server_id);
        self.next_server_id += 1;
        self.servers.push(RegisteredServer {
            info: ServerInfo {
                id,
                address,
                state: ServerState::Available,
            },
            token,
            incarnation,
        });
        self.bump();
        Ok(CommandOutcome::Registered { id, changed: true })
    }

    fn mark_offline(
        &mut self,
        id: ServerId,
        incarnation: u64,
    ) -> Result<CommandOutcome, CommandError> {
        let server = self.server_at(id, incarnation)?;
        if server.info.state == ServerState::Offline {
            return Err(CommandError::AlreadyOffline(id));
        }
        let leaving = server.info.state == ServerState::Leaving;
        server.info.state = ServerState::Offline;
        remove_from_replica_sets(&mut self.spaces, id);
        forget_places(&mut self.spaces, id);
        if leaving && !holds_any(&self.spaces, id) {
            // Its decommission is done: it died holding nothing only it had.
            self.servers.retain(|s| s.info.id != id);
        }
        self.bump();
        Ok(CommandOutcome::MarkedOffline { id })
    }

    fn complete_transfers(
        &mut self,
        id: ServerId,
        incarnation: u64,
        done: &[TransferRef],
        backfilled: &[BackfillRef],
    ) -> Result<CommandOutcome, CommandError> {
        let server = self.server(id).ok_or(CommandError::UnknownServer(id))?;
        if server.incarnation != incarnation {
            return Err(CommandError::StaleServer {
                id,
                incarnation,
                current: server.incarnation,
            });
        }
        let mut completed = 0u32;
        for r in done {
            let Some(space) = self.spaces.iter_mut().find(|s| s.id == r.space) else {
                continue;
            };
            let found = space.transfers.iter().position(|t| {
                t.subspace == r.subspace && t.region.0 == r.region && t.id == r.id && t.to == id
            });
            let Some(i) = found else { continue };
            // The target is a full member from now on, joined since the transfer's epoch
            // (replicas drop its chain messages built before that); the member it replaces
            // leaves, with its join record. The target is complete now, so the set keeps a
            // complete member.
            let t = space.transfers[i];
            space.complete_transfer(&t);
            completed += 1;
        }
        // Backfills: `complete_backfills` takes only the references naming its build exactly,
        // each region once.
        let mut recorded = 0u32;
        if !backfilled.is_empty() {
            for space in &mut self.spaces {
                recorded += space.complete_backfills(backfilled) as u32;
            }
        }
        if completed > 0 || recorded > 0 {
            self.bump();
        }
        Ok(CommandOutcome::TransfersCompleted {
            completed,
            backfilled: recorded,
        })
    }

    fn decommission(&mut self, id: ServerId) -> Result<CommandOutcome, CommandError> {
        let state = self
            .server(id)
            .ok_or(CommandError::UnknownServer(id))?
            .info
            .state;
        if state == ServerState::Leaving {
            return Err(CommandError::AlreadyLeaving(id));
        }
        let away = matches!(state, ServerState::Offline | ServerState::Resting);
        if away {
            // Taken offline or resting, it left every set but those it alone holds: those it
            // cannot hand over, the rest it has left already.
            let regions = self
                .spaces
                .iter()
                .flat_map(|s| s.replicas.iter().flatten())
                .filter(|set| set.contains(&id))
                .count();
            if regions > 0 {
                return Err(CommandError::OfflineHoldsRegions {
                    id,
                    regions: regions as u64,
                });
            }
        }
        // An Offline server counts too: it would not come back to make up the number.
        let others = self
            .ids_in(ServerState::Available)
            .into_iter()
            .filter(|s| *s != id)
            .count() as u32;
        if let Some(space) = self.spaces.iter().find(|s| s.schema.replicas() > others) {
            return Err(CommandError::WouldUnderReplicate {
                id,
                space: space.schema.name.clone(),
                needed: space.schema.replicas(),
                available: others,
            });
        }
        if !self.plan_transfers {
            // Leaving, it would wait for transfers nobody plans, serving for ever.
            let regions = self
                .spaces
                .iter()
                .flat_map(|s| s.replicas.iter().flatten())
                .filter(|set| set.contains(&id))
                .count();
            if regions > 0 {
                return Err(CommandError::TransfersOff {
                    id,
                    regions: regions as u64,
                });
            }
        }
        if away {
            forget_places(&mut self.spaces, id);
            self.servers.retain(|s| s.info.id != id);
            self.bump();
            return Ok(CommandOutcome::Decommissioned { id, removed: true });
        }
        if let Some(server) = self.servers.iter_mut().find(|s| s.info.id == id) {
            server.info.state = ServerState::Leaving;
        }
        // Copies into it would only have to move again: they stop, and planning sends those
        // regions elsewhere.
        for space in &mut self.spaces {
            let SpaceConfig {
                replicas,
                transfers,
                ..
            } = space;
            transfers.retain(|t| {
                if t.to != id {
                    return true;
                }
                replicas[t.subspace.get()][t.region.0 as usize].pop();
                false
            });
            // A target has no join record until its transfer completes, but the records
            // must name members only (`Configuration::check`), whatever left.
            space.forget_departed();
        }
        self.bump();
        Ok(CommandOutcome::Decommissioned { id, removed: false })
    }

    /// The registered server `id`, if it is still at `incarnation` (a decision about an
    /// earlier process must not act on a restarted one).
    fn server_at(
        &mut self,
        id: ServerId,
        incarnation: u64,
    ) -> Result<&mut RegisteredServer, CommandError> {
        let server = self
            .servers
            .iter_mut()
            .find(|s| s.info.id == id)
            .ok_or(CommandError::UnknownServer(id))?;
        if server.incarnation != incarnation {
            return Err(CommandError::StaleServer {
                id,
                incarnation,
                current: server.incarnation,
            });
        }
        Ok(server)
    }

    fn rest(&mut self, id: ServerId, incarnation: u64) -> Result<CommandOutcome, CommandError> {
        let server = self.server_at(id, incarnation)?;
        if server.info.state != ServerState::Available {
            return Err(CommandError::CannotRest {
                id,
                state: server.info.state,
            });
        }
        server.info.state = ServerState::Resting;
        let mut places = 0u32;
        for space in &mut self.spaces {
            let held: Vec<(SubspaceId, RegionIndex)> = space
                .replicas
                .iter()
                .enumerate()
                .flat_map(|(subspace, sets)| {
                    let subspace = SubspaceId(subspace as u16);
                    (0..sets.len())
                        .filter(|&r| sets[r].contains(&id))
                        .map(move |r| (subspace, RegionIndex(r as u32)))
                })
                .collect();
            remove_from_replica_sets(std::slice::from_mut(space), id);
            let k = space.schema.replicas() as usize;
            for (subspace, region) in held {
                let set = space.replicas_of(subspace, region);
                if !set.contains(&id) && set.len() < k {
                    space.resting.push(RestingPlace {
                        subspace,
                        region,
                        server: id,
                    });
                    places += 1;
                }
            }
            space
                .resting
                .sort_by_key(|p| (p.subspace, p.region, p.server));
        }
        self.bump();
        Ok(CommandOutcome::Rested { id, places })
    }

    fn set_model(&mut self, constants: ModelConstants) -> Result<CommandOutcome, CommandError> {
        if !constants.is_usable() {
            return Err(CommandError::UnusableModel(constants));
        }
        if self.model == Some(constants) {
            return Ok(CommandOutcome::ModelSet { changed: false });
        }
        self.model = Some(constants);
        self.bump();
        Ok(CommandOutcome::ModelSet { changed: true })
    }

    fn rm_space(&mut self, name: &str) -> Result<CommandOutcome, CommandError> {
        let i = self
            .spaces
            .iter()
            .position(|s| s.schema.name == name)
            .ok_or_else(|| CommandError::UnknownSpace(name.to_owned()))?;
        self.spaces.remove(i);
        self.bump();
        Ok(CommandOutcome::SpaceRemoved)
    }

    fn add_space(&mut self, schema: SpaceSchema) -> Result<CommandOutcome, CommandError> {
        // A new space is declared, never built: a Building or Dropped subspace in it would
        // have no build to finish it, or replica sets where none belong.
        if let Some((i, s)) = schema
            .subspaces
            .iter()
            .enumerate()
            .find(|(_, s)| s.state != SubspaceState::Serving)
        {
            return Err(CommandError::SubspaceNotServing {
                subspace: i as u16,
                state: s.state,
            });
        }
        validate_schema(&schema).map_err(CommandError::InvalidSchema)?;
        if self.spaces.iter().any(|s| s.schema.name == schema.name) {
            return Err(CommandError::SpaceExists(schema.name));
        }
        let available: Vec<ServerId> = self
            .servers
            .iter()
            .filter(|s| s.info.state == ServerState::Available)
            .map(|s| s.info.id)
            .collect();
        let k = schema.replicas();
        if k as usize > available.len() {
            return Err(CommandError::TooFewServers {
                space: schema.name,
                needed: k,
                available: available.len() as u32,
            });
        }
        // Every replica set encodes to at least K + 1 bytes (a length, then K ids): refuse a
        // space whose configuration cannot fit before spending memory on assigning it.
        let regions: usize = schema
            .subspaces
            .iter()
            .filter(|s| s.is_written())
            .map(|s| tessellation_of(s, &schema).regions_count() as usize)
            .sum();
        let lower_bound = regions.saturating_mul(k as usize + 1);
        if lower_bound > CONFIGURATION_BYTES_MAX {
            return Err(CommandError::ConfigurationTooLarge {
                bytes: lower_bound,
                max: CONFIGURATION_BYTES_MAX,
            });
        }
        let existing = self.spaces.iter().flat_map(SpaceConfig::replica_sets);
        let replicas = assign_replicas(&schema, &available, existing);
        let id = self.epoch.0 + 1;
        let space = SpaceConfig {
            id,
            schema,
            replicas,
            transfers: Vec::new(),
            joined: Vec::new(),
            build: None,
            adaptations: Vec::new(),
            shapes: Vec::new(),
            shape_entries: Vec::new(),
            formula_entries: Vec::new(),
            resting: Vec::new(),
            property_index: Default::default(),
        };
        let mut next = self.configuration();
        next.epoch = Epoch(id);
        next.spaces.push(space);
        let bytes = postcard::to_allocvec(&next)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if bytes > CONFIGURATION_BYTES_MAX {
            return Err(CommandError::ConfigurationTooLarge {
                bytes,
                max: CONFIGURATION_BYTES_MAX,
            });
        }
        let space = next.spaces.pop().expect("pushed above");
        self.spaces.push(space);
        self.bump();
        Ok(CommandOutcome::SpaceAdded { id })
    }

    /// Applies `change` to the space `name` in the next epoch (see `SpaceConfig::alter`),
    /// on a copy: any refusal leaves the state as it was. An added subspace needs K Available
    /// servers, and the configuration must stay under [`CONFIGURATION_BYTES_MAX`] with it.
    fn alter_space(
        &mut self,
        name: &str,
        change: &SpaceChange,
    ) -> Result<CommandOutcome, CommandError> {
        let i = self
            .spaces
            .iter()
            .position(|s| s.schema.name == name)
            .ok_or_else(|| CommandError::UnknownSpace(name.to_owned()))?;
        let space = &self.spaces[i];
        let added = space.check_change(change).map_err(CommandError::Alter)?;
        let k = space.schema.replicas();
        let available = self.ids_in(ServerState::Available);
        if matches!(change, SpaceChange::AddFormula(_)) && k as usize > available.len() {
            return Err(CommandError::TooFewServers {
                space: name.to_owned(),
                needed: k,
                available: available.len() as u32,
            });
        }
        if let Some(added) = &added {
            if k as usize > available.len() {
                return Err(CommandError::TooFewServers {
                    space: name.to_owned(),
                    needed: k,
                    available: available.len() as u32,
                });
            }
            // As for a new space: every replica set takes at least K + 1 bytes.
            let regions = tessellation_of(added, &space.schema).regions_count() as usize;
            let lower_bound = regions.saturating_mul(k as usize + 1);
            if lower_bound > CONFIGURATION_BYTES_MAX {
                return Err(CommandError::ConfigurationTooLarge {
                    bytes: lower_bound,
                    max: CONFIGURATION_BYTES_MAX,
                });
            }
        }
        let epoch = self.epoch.0 + 1;
        let mut altered = space.clone();
        let subspace = altered
            .alter(epoch, change, |t| {
                let existing = self.spaces.iter().flat_map(SpaceConfig::replica_sets);
                assign_subspace(t, k as usize, &available, existing)
            })
            .map_err(CommandError::Alter)?;
        // A new subspace's replica sets, a logged adaptation, a formula or a shape make the
        // configuration larger.
        if added.is_some()
            || matches!(
                change,
                SpaceChange::LogAdaptation(_)
                    | SpaceChange::AddFormula(_)
                    | SpaceChange::AddShape(_)
            )
        {
            let mut next = self.configuration();
            next.epoch = Epoch(epoch);
            next.spaces[i] = altered;
            let bytes = postcard::to_allocvec(&next)
                .map(|v| v.len())
                .unwrap_or(usize::MAX);
            if bytes > CONFIGURATION_BYTES_MAX {
                return Err(CommandError::ConfigurationTooLarge {
                    bytes,
                    max: CONFIGURATION_BYTES_MAX,
                });
            }
            altered = next.spaces.swap_remove(i);
        }
        self.spaces[i] = altered;
        self.bump();
        Ok(CommandOutcome::SpaceAltered {
            subspace: subspace.map(|s| s.0),
        })
    }
}

impl ClusterState {
    /// Runs after every command that changed something, within its epoch: starts the state
    /// transfers the configuration calls for (only while [`ClusterState::plan_transfers`] is
    /// set, see [`ClusterState::start_transfers`]), then removes every Leaving server that holds
    /// no region any more. Public for the tests: planning a state planning left changes
    /// nothing.
    pub fn plan(&mut self) {
        self.drop_stale_places();
        if self.plan_transfers {
            let places =
                |st: &ClusterState| st.spaces.iter().map(|s| s.resting.len()).sum::<usize>();
            let before = places(self);
            self.start_transfers();
            // A server back to its last places frees its space for balance, which waits for
            // them (see `start_transfers`): plan once more, as planning again would.
            if places(self) != before {
                self.start_transfers();
            }
        }
        let spaces = &self.spaces;
        self.servers
            .retain(|s| s.info.state != ServerState::Leaving || holds_any(spaces, s.info.id));
    }

    /// Keeps only the places ([`RestingPlace`]) still waiting for a server: one that is
    /// Resting or back (Available), in a region that still exists, is still short of K
    /// members, and does not have it.
    fn drop_stale_places(&mut self) {
        let states: HashMap<ServerId, ServerState> = self
            .servers
            .iter()
            .map(|s| (s.info.id, s.info.state))
            .collect();
        for space in &mut self.spaces {
            let k = space.schema.replicas() as usize;
            let places = std::mem::take(&mut space.resting);
            space.resting = places
                .into_iter()
                .filter(|p| {
                    matches!(
                        states.get(&p.server),
                        Some(ServerState::Resting | ServerState::Available)
                    ) && space
                        .replica_set(p.subspace, p.region)
                        .is_some_and(|set| set.len() < k && !set.contains(&p.server))
                })
                .collect();
        }
    }

    /// Starts the state transfers the configuration calls for, naming them by the current
    /// epoch.
    ///
    /// Region by region, in (space, subspace, region) order, for regions with no transfer
    /// under way whose last member (the source) is alive (Available or Leaving):
    /// 1. a region with fewer than K members gains one: `replaces: None`; where a server rests
    ///    ([`RestingPlace`]) it is that server, once it is back, and none other before;
    /// 2. a region with K members, one of them Leaving, gains one that replaces it;
    ///
    /// then, within each subspace of a space where no server rests, balance over the n
    /// Available servers: with `ceil` and
    /// `floor` of `regions * K / n`, a region moves (a transfer replacing the donor) from a
    /// server holding more than `ceil` to one holding fewer than `ceil`, or from one holding
    /// more than `floor` to one holding fewer than `floor`, for as long as such a pair and a
    /// region to move exist. Either move narrows the spread by two, so it ends; where it ends,
    /// with no transfer in the way, every server holds between `floor` and `ceil`. (A target
    /// counts as holding its region, the member it replaces does not.)
    ///
    /// Last, in the key subspace of a space whose key regions split, once it is quiet
    /// (balanced, nothing moving, no server leaving it), point leadership: see
    /// [`balance_leadership`].
    ///
    /// A target is an Available server not in the set: the one holding the fewest regions of
    /// the subspace, then the fewest over the cluster, then the smallest id; balance takes the
    /// most loaded donor first, and its region with the greatest number. No server is the
    /// target of more than [`TRANSFERS_PER_SERVER_MAX`] transfers, nor the source of more, at
    /// a time.
    ///
    /// It reaches a state it would leave as it is (every rule above checks for work left), so
    /// applying a command that changes nothing, which plans nothing, keeps that true.
    fn start_transfers(&mut self) {
        let id = self.epoch.0;
        let states: HashMap<ServerId, ServerState> = self
            .servers
            .iter()
            .map(|s| (s.info.id, s.info.state))
            .collect();
        let alive = |s: &ServerId| {
            matches!(
                states.get(s),
                Some(ServerState::Available | ServerState::Leaving)
            )
        };
        let leaving = |s: &ServerId| states.get(s) == Some(&ServerState::Leaving);
        let available = self.ids_in(ServerState::Available);
        let mut load = Load::default();
        for space in &self.spaces {
            for t in &space.transfers {
                *load.target.entry(t.to).or_default() += 1;
                *load.source.entry(space.transfer_source(t)).or_default() += 1;
            }
            for (subspace, sets) in space.replicas.iter().enumerate() {
                for region in 0..sets.len() {
                    for s in holders(space, subspace, region) {
                        *load.cluster.entry(s).or_default() += 1;
                    }
                }
            }
        }
        for space in &mut self.spaces {
            let k = space.schema.replicas() as usize;
            for subspace in 0..space.replicas.len() {
                let regions = space.replicas[subspace].len();
                load.held.clear();
                for region in 0..regions {
                    for s in holders(space, subspace, region) {
                        *load.held.entry(s).or_default() += 1;
                    }
                }
                // Regions with a transfer under way: at most one at a time.
                let mut busy = vec![false; regions];
                for t in space
                    .transfers
                    .iter()
                    .filter(|t| t.subspace.get() == subspace)
                {
                    busy[t.region.0 as usize] = true;
                }
                // Replicas short, and Leaving servers.
                for (region, busy) in busy.iter_mut().enumerate() {
                    if *busy {
                        continue;
                    }
                    let set = &space.replicas[subspace][region];
                    let source = *set.last().expect("replica sets are never empty");
                    if !alive(&source) || load.source_full(source) {
                        continue;
                    }
                    let replaces = match set.iter().find(|s| leaving(s)) {
                        _ if set.len() < k => None,
                        Some(l) => Some(*l),
                        None => continue,
                    };
                    // A place kept for a resting server: it is filled by that server once it
                    // is back, and by no other meanwhile.
                    let location = (SubspaceId(subspace as u16), RegionIndex(region as u32));
                    match returning(space, location, &states) {
                        Return::NoPlace => {}
                        Return::Waiting => continue,
                        Return::Back(to) => {
                            if !load.target_full(to) {
                                space.resting.retain(|p| {
                                    (p.subspace, p.region, p.server) != (location.0, location.1, to)
                                });
                                load.start(space, id, subspace, region, to, None);
                                *busy = true;
                            }
                            continue;
                        }
                    }
                    let target = available
                        .iter()
                        .filter(|s| !set.contains(s) && !load.target_full(**s))
                        .min_by_key(|s| (load.held(**s), load.cluster(**s), **s));
                    if let Some(&to) = target {
                        load.start(space, id, subspace, region, to, replaces);
                        *busy = true;
                    }
                }
                // Balance, once no server is away from this space or on its way back
                // (balancing without it would move regions it comes back to; its
                // leadership too).
                let n = available.len();
                if n == 0 || !space.resting.is_empty() {
                    continue;
                }
                let (ceil, floor) = ((regions * k).div_ceil(n) as u64, (regions * k / n) as u64);
                let worth =
                    |from: u64, to: u64| (from > ceil && to < ceil) || (from > floor && to < floor);
                loop {
                    let mut donors: Vec<ServerId> = available
                        .iter()
                        .copied()
                        .filter(|s| load.held(*s) > floor)
                        .collect();
                    donors.sort_by_key(|s| (std::cmp::Reverse(load.held(*s)), *s));
                    let mut takers: Vec<ServerId> = available
                        .iter()
                        .copied()
                        .filter(|s| load.held(*s) < ceil && !load.target_full(*s))
                        .collect();
                    takers.sort_by_key(|s| (load.held(*s), load.cluster(*s), *s));
                    let mut chosen = None;
                    'search: for &donor in &donors {
                        // The last regions first: an ordered space's newest split regions,
                        // which hold keys where the data grew (equal slices may hold none).
                        for (region, set) in space.replicas[subspace].iter().enumerate().rev() {
                            let source = *set.last().expect("replica sets are never empty");
                            if busy[region]
                                || !set.contains(&donor)
                                || !alive(&source)
                                || load.source_full(source)
                            {
                                continue;
                            }
                            let taker = takers.iter().find(|t| {
                                !set.contains(t) && worth(load.held(donor), load.held(**t))
                            });
                            if let Some(&to) = taker {
                                chosen = Some((region, to, donor));
                                break 'search;
                            }
                        }
                    }
                    let Some((region, to, donor)) = chosen else {
                        break;
                    };
                    load.start(space, id, subspace, region, to, Some(donor));
                    busy[region] = true;
                }
                // Leadership moves only in a quiet key subspace: balanced, nothing moving, no
                // server leaving it; and only in a space whose key regions split, which gave
                // every new region the split one's leader. A move copies a region (see
                // `LeadershipMove`) and ends its leader's writes in flight with an unknown
                // outcome: the skew a failure or a rest leaves (a server back in its regions
                // comes last in their chains) is not worth that.
                let split = !space.schema.key_splits.is_empty();
                let quiet = || {
                    !busy.contains(&true)
                        && available
                            .iter()
                            .all(|s| (floor..=ceil).contains(&load.held(*s)))
                        && space.replicas[subspace]
                            .iter()
                            .flatten()
                            .all(|s| !leaving(s))
                };
                if subspace == SubspaceId::KEY.get() && k >= 2 && split && quiet() {
                    let bounds = (floor, ceil);
                    balance_leadership(space, id, &available, &alive, &mut busy, &mut load, bounds);
                }
            }
        }
    }
}

/// A transfer that moves point leadership of a key region: `replaces` its first member, so
/// the second leads once it completes.
struct LeadershipMove {
    region: usize,
    to: ServerId,
    replaces: ServerId,
    /// For a cluster whose servers all hold as many regions: a second transfer that gives
    /// back to `replaces` a region of `to`'s (not led by `to`), so that both hold as many
    /// regions as before.
    swap: Option<usize>,
}

/// Balances point leadership of a space's key subspace (a region's point leader is the first
/// of its replica set), which holdings balance ignores: after key splits, every new region
/// has the split one's leader. Moves leadership, by [`LeadershipMove`]s, from a server
/// leading more than its share of a class of regions ([`split_made`]), most first, to the
/// second member of one of its regions ([`leadership_move`]). Each move lowers the sum of
/// squares of the regions led in each class, so moves end;
/// every server keeps holding between `floor` and `ceil` regions (they did before: the caller
/// runs this only in a quiet subspace, balanced with no transfer under way and no server
/// leaving it), so holdings balance has nothing to undo, and planning again finds the
/// subspace busy. `alive(s)`: `s` may be a source.
fn balance_leadership(
    space: &mut SpaceConfig,
    id: u64,
    available: &[ServerId],
    alive: &dyn Fn(&ServerId) -> bool,
    busy: &mut [bool],
    load: &mut Load,
    bounds: (u64, u64),
) {
    let key = SubspaceId::KEY.get();
    while let Some(m) = leadership_move(space, available, alive, busy, load, bounds) {
        load.start(space, id, key, m.region, m.to, Some(m.replaces));
        busy[m.region] = true;
        if let Some(region) = m.swap {
            load.start(space, id, key, region, m.replaces, Some(m.to));
            busy[region] = true;
        }
    }
}

/// The next [`LeadershipMove`], if any: for servers leading more regions of a class
/// ([`split_made`]) than their share of it (`ceil(regions / n)`; one more among the slices no
/// split touched, as a new space's assignment allows), most first, their highest-numbered
/// region of it without a transfer, to a target holding the fewest regions, when the move
/// lowers the sum of squares of the regions each server leads in each class. A single
/// transfer while the target holds fewer than `ceil` and the leader more than `floor`; else
/// with a swap, which may move the leadership of the region given back too.
fn leadership_move(
    space: &SpaceConfig,
    available: &[ServerId],
    alive: &dyn Fn(&ServerId) -> bool,
    busy: &[bool],
    load: &Load,
    (floor, ceil): (u64, u64),
) -> Option<LeadershipMove> {
    let key = SubspaceId::KEY.get();
    let sets = &space.replicas[key];
    let class = split_made(space);
    // Leaders as they will be once the transfers under way complete, per class.
    let mut led: HashMap<(bool, ServerId), u64> = [false, true]
        .iter()
        .flat_map(|&c| available.iter().map(move |s| ((c, *s), 0)))
        .collect();
    for (region, &c) in class.iter().enumerate() {
        if let Some(n) = holders(space, key, region)
            .next()
            .and_then(|h| led.get_mut(&(c, h)))
        {
            *n += 1;
        }
    }
    let allowed = |c: bool| {
        let regions = class.iter().filter(|&&x| x == c).count() as u64;
        regions.div_ceil(available.len() as u64) + u64::from(!c)
    };
    let mut leaders: Vec<(bool, ServerId)> = led
        .iter()
        .filter(|((c, _), n)| **n > allowed(*c))
        .map(|(l, _)| *l)
        .collect();
    leaders.sort_by_key(|l| (std::cmp::Reverse(led[l]), *l));
    let idle = |region: usize| {
        let source = sets[region].last().expect("replica sets are never empty");
        !busy[region] && alive(source) && !load.source_full(*source)
    };
    // Leadership handed from the head of `region` to its second member, if `gone` is its head.
    let hand = |region: usize, gone: ServerId| match sets[region].as_slice() {
        [head, second, ..] if *head == gone => Some((class[region], gone, *second)),
        _ => None,
    };
    for (c, leader) in leaders {
        for region in (0..sets.len()).rev().filter(|&r| class[r] == c) {
            let Some(first) = hand(region, leader).filter(|_| idle(region)) else {
                continue;
            };
            let set = &sets[region];
            let mut targets: Vec<ServerId> = available
                .iter()
                .copied()
                .filter(|t| !set.contains(t) && !load.target_full(*t))
                .collect();
            targets.sort_by_key(|t| (load.held(*t), load.cluster(*t), *t));
            let single = load.held(leader) > floor;
            if let Some(&to) = targets.iter().find(|t| single && load.held(**t) < ceil) {
                if lowers_leadership_spread(&led, &[first]) {
                    return Some(LeadershipMove {
                        region,
                        to,
                        replaces: leader,
                        swap: None,
                    });
                }
                continue;
            }
            if load.target_full(leader) {
                continue;
            }
            // A region of `to`'s, not `leader`'s, to give back (from another source, or one
            // with room for both transfers).
            let source = set.last().expect("replica sets are never empty");
            for &to in &targets {
                let back = (0..sets.len()).rev().find(|&r| {
                    r != region
                        && idle(r)
                        && sets[r].contains(&to)
                        && !sets[r].contains(&leader)
                        && (sets[r].last() != set.last() || load.source_room(*source) >= 2)
                        && lowers_leadership_spread(
                            &led,
                            &[Some(first), hand(r, to)]
                                .into_iter()
                                .flatten()
                                .collect::<Vec<_>>(),
                        )
                });
                if let Some(back) = back {
                    return Some(LeadershipMove {
                        region,
                        to,
                        replaces: leader,
                        swap: Some(back),
                    });
                }
            }
        }
    }
    None
}

/// The key regions key splits made or cut (`true`), against the slices no split touched: a
/// region splits only once it holds `--split-min-objects`, so the former hold the data that
/// grew, while the latter may hold nothing. Leadership is balanced in each class, so that a
/// server's share of the regions is about its share of the objects.
fn split_made(space: &SpaceConfig) -> Vec<bool> {
    let partitions = space.schema.partitions as usize;
    let mut made: Vec<bool> = (0..space.replicas[SubspaceId::KEY.get()].len())
        .map(|r| r >= partitions)
        .collect();
    for split in &space.schema.key_splits {
        if let Some(m) = made.get_mut(split.region as usize) {
            *m = true;
        }
    }
    made
}

/// Whether handing leadership of one region each `(class, from, to)` lowers the sum of
/// squares of the regions each server leads in each class (`led`): the measure that keeps
/// leadership moves finite.
fn lowers_leadership_spread(
    led: &HashMap<(bool, ServerId), u64>,
    hands: &[(bool, ServerId, ServerId)],
) -> bool {
    let mut after = led.clone();
    for &(class, from, to) in hands {
        let (Some(_), Some(_)) = (led.get(&(class, from)), led.get(&(class, to))) else {
            return false;
        };
        let n = after.get_mut(&(class, from)).expect("checked");
        *n = n.saturating_sub(1);
        *after.get_mut(&(class, to)).expect("checked") += 1;
    }
    let squares = |m: &HashMap<(bool, ServerId), u64>| m.values().map(|n| n * n).sum::<u64>();
    squares(&after) < squares(led)
}

/// What planning counts while it starts transfers.
#[derive(Default)]
struct Load {
    /// Transfers each server is the target of.
    target: HashMap<ServerId, usize>,
    /// Transfers each server is the source of.
    source: HashMap<ServerId, usize>,
    /// Regions each server holds over the whole cluster.
    cluster: HashMap<ServerId, u64>,
    /// Regions each server holds in the subspace being planned.
    held: HashMap<ServerId, u64>,
}

impl Load {
    fn target_full(&self, s: ServerId) -> bool {
        self.target.get(&s).copied().unwrap_or(0) >= TRANSFERS_PER_SERVER_MAX
    }

    fn source_full(&self, s: ServerId) -> bool {
        self.source_room(s) == 0
    }

    /// How many more transfers `s` may be the source of.
    fn source_room(&self, s: ServerId) -> usize {
        TRANSFERS_PER_SERVER_MAX.saturating_sub(self.source.get(&s).copied().unwrap_or(0))
    }

    fn held(&self, s: ServerId) -> u64 {
        self.held.get(&s).copied().unwrap_or(0)
    }

    fn cluster(&self, s: ServerId) -> u64 {
        self.cluster.get(&s).copied().unwrap_or(0)
    }

    /// Starts a transfer of `region` of `subspace` to `to`, named `id`: `to` joins the set
    /// last, so the member before it (the set's last until now) is its source.
    fn start(
        &mut self,
        space: &mut SpaceConfig,
        id: u64,
        subspace: usize,
        region: usize,
        to: ServerId,
        replaces: Option<ServerId>,
    ) {
        let source = *space.replicas[subspace][region]
            .last()
            .expect("replica sets are never empty");
        space.start_transfer(
            id,
            SubspaceId(subspace as u16),
            RegionIndex(region as u32),
            to,
            replaces,
        );
        *self.target.entry(to).or_default() += 1;
        *self.source.entry(source).or_default() += 1;
        for (s, delta) in std::iter::once((to, 1i64)).chain(replaces.map(|r| (r, -1))) {
            for count in [
                self.held.entry(s).or_default(),
                self.cluster.entry(s).or_default(),
            ] {
                *count = count.saturating_add_signed(delta);
            }
        }
    }
}

/// Takes `id` out of every replica set of every space, keeping the order of the others: the next
/// replica moves up, so where `id` was the head, its successor becomes the point leader.
///
/// Except where `id` is the region's only *complete* member (every member but a transfer's
/// target still catching up): a region never loses its last copy. Its data is on that server
/// alone, so the region keeps it (even offline) until the server comes back; dropping it would
/// lose the region for good.
///
/// State transfers under way follow:
/// - `id` is the target: the transfer ends, and the target leaves the set (its partial copy
///   serves nobody);
/// - `id` is the source (the member just before the target): the transfer is cancelled, the
///   target leaving the set, since what it received so far came from a stream that stops;
///   planning starts a new transfer, with a new id, from the new last member;
/// - otherwise the transfer goes on, but replaces nobody any more (`replaces` becomes `None`):
///   the member it was to replace is `id`, gone already, or one the region now needs to keep
///   K replicas once the target completes.
///
/// Returns whether any set changed.
pub fn remove_from_replica_sets(spaces: &mut [SpaceConfig], id: ServerId) -> bool {
    let mut changed = false;
    for space in spaces.iter_mut() {
        let SpaceConfig {
            replicas,
            transfers,
            ..
        } = space;
        for (subspace, sets) in replicas.iter_mut().enumerate() {
            for (region, set) in sets.iter_mut().enumerate() {
                if !set.contains(&id) {
                    continue;
                }
                let at =
                    |t: &Transfer| t.subspace.get() == subspace && t.region.0 as usize == region;
                if let Some(i) = transfers.iter().position(at) {
                    let t = transfers[i];
                    // The target is last, its source just before it (`SpaceConfig::transfer_source`).
                    let source = set[set.len() - 2];
                    if t.to == id || source == id {
                        set.pop();
                        transfers.remove(i);
                        changed = true;
                        if t.to == id {
                            continue;
                        }
                    } else {
                        transfers[i].replaces = None;
                    }
                }
                // Every member left is complete, or `id` is neither the source nor the target
                // of the transfer still under way, so the source stays: either way, `id` may
                // go when it has company.
                if set.len() > 1 {
                    set.retain(|s| *s != id);
                    changed = true;
                }
            }
        }
    }
    for space in spaces.iter_mut() {
        space.forget_departed();
    }
    changed
}

/// What a region short of members waits for.
enum Return {
    /// No server rests in it: it gains a replica as any region does.
    NoPlace,
    /// A server rests in it and none is back yet.
    Waiting,
    /// This server is back to its place (the smallest id if several are).
    Back(ServerId),
}

fn returning(
    space: &SpaceConfig,
    (subspace, region): (SubspaceId, RegionIndex),
    states: &HashMap<ServerId, ServerState>,
) -> Return {
    let mut waiting = false;
    for p in space
        .resting
        .iter()
        .filter(|p| (p.subspace, p.region) == (subspace, region))
    {
        match states.get(&p.server) {
            Some(ServerState::Available) => return Return::Back(p.server),
            Some(ServerState::Resting) => waiting = true,
            _ => {}
        }
    }
    if waiting {
        Return::Waiting
    } else {
        Return::NoPlace
    }
}

/// Drops every place kept for `id` ([`RestingPlace`]): it is not coming back to them.
fn forget_places(spaces: &mut [SpaceConfig], id: ServerId) {
    for space in spaces {
        space.resting.retain(|p| p.server != id);
    }
}

/// Whether `id` is a member of any replica set.
fn holds_any(spaces: &[SpaceConfig], id: ServerId) -> bool {
    spaces
        .iter()
        .flat_map(|s| s.replicas.iter().flatten())
        .any(|set| set.contains(&id))
}

/// The members of a region that count as holding it for balance: every member but the one a
/// transfer under way replaces (it is on its way out; the target counts, it is on its way in).
fn holders<'a>(
    space: &'a SpaceConfig,
    subspace: usize,
    region: usize,
) -> impl Iterator<Item = ServerId> + 'a {
    let replaces = space
        .transfers
        .iter()
        .find(|t| t.subspace.get() == subspace && t.region.0 as usize == region)
        .and_then(|t| t.replaces);
    space.replicas[subspace][region]
        .iter()
        .copied()
        .filter(move |s| Some(*s) != replaces)
}

/// Checks a schema the way [`SpaceSchema::new`] does, so that a command that did not come from
/// the parser (a corrupt or hostile log entry) cannot make `apply` panic.
fn validate_schema(schema: &SpaceSchema) -> Result<(), SchemaError> {
    let (Some(key), Some(first)) = (schema.attributes.first(), schema.subspaces.first()) else {
        return Err(SchemaError::EmptySubspace);
    };
    if let SpaceKind::Dynamic { dimensions } = schema.kind {
        let rebuilt = SpaceSchema::dynamic(
            &schema.name,
            key.clone(),
            u32::from(dimensions),
            schema.partitions,
            schema.tolerate,
        )?;
        return if &rebuilt == schema {
            Ok(())
        } else {
            Err(SchemaError::EmptySubspace)
        };
    }
    if first.dimensions.len() != 1 || first.dimensions[0].get() != 0 {
        return Err(SchemaError::EmptySubspace);
    }
    let mut subspaces = Vec::with_capacity(schema.subspaces.len() - 1);
    // A tag subspace is not declared: the placement makes it.
    for s in schema.subspaces[1..].iter().filter(|s| s.tags.is_none()) {
        let mut names = Vec::with_capacity(s.dimensions.len());
        for d in &s.dimensions {
            let a = schema
                .attributes
                .get(d.get())
                .ok_or_else(|| SchemaError::UnknownAttribute(format!("#{}", d.get())))?;
            names.push(a.name.clone());
        }
        subspaces.push(names);
    }
    let rebuilt = SpaceSchema::new(
        &schema.name,
        key.clone(),
        schema.attributes[1..].to_vec(),
        subspaces,
        schema.partitions,
        schema.tolerate,
    )?
    .with_placement(schema.placement.clone())?;
    rebuilt.check_adapt(schema.adapt)?;
    let rebuilt = rebuilt.with_adapt(schema.adapt);
    if &rebuilt != schema {
        return Err(SchemaError::EmptySubspace);
    }
    Ok(())
}
