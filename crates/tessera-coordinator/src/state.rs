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
    AlterError, BackfillRef, Configuration, ModelConstants, ServerInfo, ServerState, SpaceChange,
    SpaceConfig, Transfer, TransferRef,
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
    AlterSpace {
        name: String,
        change: SpaceChange,
    },
    /// `tessera calibrate`: the performance model's constants measured on this database,
    /// kept with the configuration. Refused if unusable (see `ModelConstants::is_usable`).
    SetModel {
        constants: ModelConstants,
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
    pub fn apply(&mut self, command: Command) -> Result<CommandOutcome, CommandError> {
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
            Command::AlterSpace { name, change } => self.alter_space(&name, &change),
            Command::SetModel { constants } => self.set_model(constants),
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
            let offline = server.info.state == ServerState::Offline;
            if !restarted && !offline && server.info.address == address {
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
            // an Offline one is back.
            if server.info.state == ServerState::Offline {
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
        if server.info.state == ServerState::Offline {
            return Err(CommandError::AlreadyOffline(id));
        }
        let leaving = server.info.state == ServerState::Leaving;
        server.info.state = ServerState::Offline;
        remove_from_replica_sets(&mut self.spaces, id);
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
        if state == ServerState::Offline {
            // Taken offline, it left every set but those it alone holds: those it cannot
            // hand over, the rest it has left already.
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
        if state == ServerState::Offline {
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
    /// no region any more.
    fn plan(&mut self) {
        if self.plan_transfers {
            self.start_transfers();
        }
        let spaces = &self.spaces;
        self.servers
            .retain(|s| s.info.state != ServerState::Leaving || holds_any(spaces, s.info.id));
    }

    /// Starts the state transfers the configuration calls for, naming them by the current
    /// epoch.
    ///
    /// Region by region, in (space, subspace, region) order, for regions with no transfer
    /// under way whose last member (the source) is alive (Available or Leaving):
    /// 1. a region with fewer than K members gains one: `replaces: None`;
    /// 2. a region with K members, one of them Leaving, gains one that replaces it;
    ///
    /// then, within each subspace, balance over the n Available servers: with `ceil` and
    /// `floor` of `regions * K / n`, a region moves (a transfer replacing the donor) from a
    /// server holding more than `ceil` to one holding fewer than `ceil`, or from one holding
    /// more than `floor` to one holding fewer than `floor`, for as long as such a pair and a
    /// region to move exist. Either move narrows the spread by two, so it ends; where it ends,
    /// with no transfer in the way, every server holds between `floor` and `ceil`. (A target
    /// counts as holding its region, the member it replaces does not.)
    ///
    /// Last, in a space's key subspace once it is quiet (balanced, nothing moving, no server
    /// leaving it), point leadership: see [`balance_leadership`].
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
                    let target = available
                        .iter()
                        .filter(|s| !set.contains(s) && !load.target_full(**s))
                        .min_by_key(|s| (load.held(**s), load.cluster(**s), **s));
                    if let Some(&to) = target {
                        load.start(space, id, subspace, region, to, replaces);
                        *busy = true;
                    }
                }
                // Balance.
                let n = available.len();
                if n == 0 {
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
                // server leaving it.
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
                if subspace == SubspaceId::KEY.get() && k >= 2 && quiet() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_protocol::Joined;
    use tessera_types::{parse_space, Value};

    fn schema(name: &str, subspaces: usize, partitions: u32, tolerate: u32) -> SpaceSchema {
        let mut text = format!("space {name}\nkey k\nattributes int a, int b, string c\n");
        let dims = ["a", "b, c", "a, b, c", "c"];
        for d in dims.iter().take(subspaces) {
            text.push_str(&format!("subspace {d}\n"));
        }
        text.push_str(&format!(
            "create {partitions} partitions\ntolerate {tolerate} failures\n"
        ));
        parse_space(&text).unwrap()
    }

    /// `st` with state transfers planned: for the tests of the planner, which is off by default
    /// ([`PLAN_TRANSFERS`]).
    fn planning(mut st: ClusterState) -> ClusterState {
        st.plan_transfers = true;
        st
    }

    fn with_servers(n: u64) -> ClusterState {
        let mut st = ClusterState::default();
        for i in 0..n {
            st.apply(Command::RegisterServer {
                token: 1000 + i as u128,
                address: format!("10.0.0.{i}:2000"),
                incarnation: 1,
            })
            .unwrap();
        }
        st
    }

    /// A space just created: K distinct Available servers per region, within the balance bound.
    fn check_space(st: &ClusterState, space: &SpaceConfig) {
        let k = space.schema.replicas() as usize;
        let n = st
            .servers
            .iter()
            .filter(|s| s.info.state == ServerState::Available)
            .count() as u64;
        for (sub, t) in space.replicas.iter().zip(space.tessellations()) {
            assert_eq!(sub.len(), t.regions_count() as usize);
            let regions = sub.len() as u64;
            let bound = (regions * k as u64).div_ceil(n) + 1;
            let head_bound = regions.div_ceil(n) + 1;
            let mut hold: HashMap<ServerId, u64> = HashMap::new();
            let mut heads: HashMap<ServerId, u64> = HashMap::new();
            for set in sub {
                assert_eq!(set.len(), k, "K members");
                let mut d = set.clone();
                d.sort();
                d.dedup();
                assert_eq!(d.len(), k, "distinct members: {set:?}");
                for s in set {
                    let r = st
                        .servers
                        .iter()
                        .find(|r| r.info.id == *s)
                        .expect("members are registered");
                    assert_eq!(
                        r.info.state,
                        ServerState::Available,
                        "{s:?} is given regions only while Available"
                    );
                    *hold.entry(*s).or_default() += 1;
                }
                *heads.entry(set[0]).or_default() += 1;
            }
            for (s, h) in &hold {
                assert!(
                    *h <= bound,
                    "{s:?} holds {h} of {regions} regions (K={k}, n={n}, bound {bound})"
                );
            }
            for (s, h) in &heads {
                assert!(
                    *h <= head_bound,
                    "{s:?} heads {h} of {regions} regions (n={n}, bound {head_bound})"
                );
            }
        }
    }

    #[test]
    fn register_assigns_ids_in_order_and_is_idempotent() {
        let mut st = ClusterState::default();
        let a = st
            .apply(Command::RegisterServer {
                token: 7,
                address: "a:1".into(),
                incarnation: 1,
            })
            .unwrap();
        assert_eq!(
            a,
            CommandOutcome::Registered {
                id: ServerId(1),
                changed: true
            }
        );
        assert_eq!(st.epoch, Epoch(1));
        let b = st
            .apply(Command::RegisterServer {
                token: 9,
                address: "b:1".into(),
                incarnation: 1,
            })
            .unwrap();
        assert_eq!(
            b,
            CommandOutcome::Registered {
                id: ServerId(2),
                changed: true
            }
        );
        let again = st
            .apply(Command::RegisterServer {
                token: 7,
                address: "a:1".into(),
                incarnation: 1,
            })
            .unwrap();
        assert_eq!(
            again,
            CommandOutcome::Registered {
                id: ServerId(1),
                changed: false
            }
        );
        assert_eq!(st.epoch, Epoch(2), "same address: no new epoch");
        let moved = st
            .apply(Command::RegisterServer {
                token: 7,
                address: "a:2".into(),
                incarnation: 1,
            })
            .unwrap();
        assert_eq!(
            moved,
            CommandOutcome::Registered {
                id: ServerId(1),
                changed: true
            }
        );
        assert_eq!(st.epoch, Epoch(3));
        assert_eq!(
            st.configuration().server(ServerId(1)).unwrap().address,
            "a:2"
        );
        assert_eq!(st.servers.len(), 2);
        assert!(matches!(
            st.apply(Command::RegisterServer {
                token: 1,
                address: String::new(),
                incarnation: 1
            }),
            Err(CommandError::InvalidAddress(_))
        ));
    }

    fn reg(token: u128, address: &str, incarnation: u64) -> Command {
        Command::RegisterServer {
            token,
            address: address.into(),
            incarnation,
        }
    }

    /// Every replica set of every space, flattened, in a stable order.
    fn sets(st: &ClusterState) -> Vec<Vec<ServerId>> {
        st.spaces
            .iter()
            .flat_map(|s| s.replicas.iter().flatten().cloned())
            .collect()
    }

    /// Every replica set as it was before planning ran in the current epoch: planning only
    /// appends the targets of the transfers it starts, named by that epoch.
    fn sets_before_planning(st: &ClusterState) -> Vec<Vec<ServerId>> {
        let mut st = st.clone();
        for space in &mut st.spaces {
            for t in space.transfers.iter().filter(|t| t.id == st.epoch.0) {
                let set = &mut space.replicas[t.subspace.get()][t.region.0 as usize];
                assert_eq!(set.pop(), Some(t.to), "a target is last");
            }
        }
        sets(&st)
    }

    fn state_of(st: &ClusterState, id: ServerId) -> ServerState {
        st.configuration().server(id).unwrap().state
    }

    #[test]
    fn mark_offline_removes_the_server_keeping_the_order_of_the_others() {
        let mut st = with_servers(3);
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 8, 2),
        })
        .unwrap();
        st.apply(Command::AddSpace {
            schema: schema("solo", 0, 4, 0),
        })
        .unwrap();
        let before = st.clone();
        let victim = ServerId(2);
        let out = st
            .apply(Command::MarkOffline {
                id: victim,
                incarnation: 1,
            })
            .unwrap();
        assert_eq!(out, CommandOutcome::MarkedOffline { id: victim });
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(state_of(&st, victim), ServerState::Offline);
        assert_eq!(state_of(&st, ServerId(1)), ServerState::Available);
        assert_eq!(state_of(&st, ServerId(3)), ServerState::Available);
        let mut sole = 0;
        for (old, new) in sets(&before).iter().zip(sets(&st)) {
            if old == &[victim] {
                // Its data is nowhere else: the region keeps its last replica.
                assert_eq!(new, [victim]);
                sole += 1;
            } else {
                let expected: Vec<ServerId> =
                    old.iter().copied().filter(|s| *s != victim).collect();
                assert_eq!(new, expected, "the others keep their order");
                if old[0] == victim {
                    assert_eq!(new[0], old[1], "the next replica becomes the point leader");
                }
            }
        }
        assert!(
            sole > 0,
            "the single-replica space gave the victim some regions of its own"
        );

        // A second decision about it, a stale incarnation or an unknown server change nothing.
        let after = st.clone();
        assert_eq!(
            st.apply(Command::MarkOffline {
                id: victim,
                incarnation: 1
            }),
            Err(CommandError::AlreadyOffline(victim))
        );
        assert_eq!(
            st.apply(Command::MarkOffline {
                id: ServerId(1),
                incarnation: 7
            }),
            Err(CommandError::StaleServer {
                id: ServerId(1),
                incarnation: 7,
                current: 1
            })
        );
        assert_eq!(
            st.apply(Command::MarkOffline {
                id: ServerId(9),
                incarnation: 1
            }),
            Err(CommandError::UnknownServer(ServerId(9)))
        );
        assert_eq!(st, after);

        // An Offline server gets nothing in a new space, and does not count as available.
        st.apply(Command::AddSpace {
            schema: schema("t", 2, 16, 1),
        })
        .unwrap();
        let t = st.spaces.last().unwrap();
        assert!(
            t.replicas
                .iter()
                .flatten()
                .all(|set| !set.contains(&victim)),
            "{t:?}"
        );
        check_space(&st, t);
        assert_eq!(
            st.apply(Command::AddSpace {
                schema: schema("u", 1, 4, 2)
            }),
            Err(CommandError::TooFewServers {
                space: "u".into(),
                needed: 3,
                available: 2
            })
        );
    }

    #[test]
    fn registration_by_incarnation() {
        let mut st = planning(ClusterState::default());
        st.apply(reg(1, "a:1", 10)).unwrap();
        st.apply(reg(2, "b:1", 10)).unwrap();
        st.apply(reg(3, "c:1", 10)).unwrap();
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 8, 2),
        })
        .unwrap();
        st.apply(Command::AddSpace {
            schema: schema("solo", 0, 4, 0),
        })
        .unwrap();
        let a = ServerId(1);

        // Same incarnation, same address: nothing changes.
        let before = st.clone();
        assert_eq!(
            st.apply(reg(1, "a:1", 10)),
            Ok(CommandOutcome::Registered {
                id: a,
                changed: false
            })
        );
        assert_eq!(st, before);
        // An earlier incarnation is refused and changes nothing.
        assert_eq!(
            st.apply(reg(1, "a:1", 9)),
            Err(CommandError::StaleServer {
                id: a,
                incarnation: 9,
                current: 10
            })
        );
        assert_eq!(st, before);
        // Same incarnation, new address: the address changes, the sets do not.
        assert_eq!(
            st.apply(reg(1, "a:2", 10)),
            Ok(CommandOutcome::Registered {
                id: a,
                changed: true
            })
        );
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(sets(&st), sets(&before));
        assert_eq!(st.configuration().server(a).unwrap().address, "a:2");

        // A new incarnation: a restart. It leaves every set it can leave, stays Available.
        let before = st.clone();
        assert_eq!(
            st.apply(reg(1, "a:3", 11)),
            Ok(CommandOutcome::Registered {
                id: a,
                changed: true
            })
        );
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(state_of(&st, a), ServerState::Available);
        assert_eq!(st.server(a).unwrap().incarnation, 11);
        assert_eq!(st.configuration().server(a).unwrap().address, "a:3");
        for (old, new) in sets(&before).iter().zip(sets_before_planning(&st)) {
            if old == &[a] {
                assert_eq!(new, [a]);
            } else {
                assert_eq!(
                    new,
                    old.iter().copied().filter(|s| *s != a).collect::<Vec<_>>()
                );
            }
        }
        assert!(
            sets(&st).iter().any(|set| set == &[a]),
            "it keeps the regions it alone holds"
        );
        // The regions it left (16 of "s", K = 3) are a replica short, and it is the only
        // server not in them: it is sent 8 of them at once, the rest wait.
        let s = st.spaces.iter().find(|s| s.schema.name == "s").unwrap();
        assert_eq!(s.transfers.len(), TRANSFERS_PER_SERVER_MAX);
        for t in &s.transfers {
            assert_eq!((t.to, t.replaces, t.id), (a, None, st.epoch.0));
            assert_eq!(s.replicas_of(t.subspace, t.region).len(), 3);
        }

        // Offline, then registering again (same incarnation): Available, nothing else changes.
        st.apply(Command::MarkOffline {
            id: ServerId(2),
            incarnation: 10,
        })
        .unwrap();
        let before = st.clone();
        assert_eq!(
            st.apply(reg(2, "b:1", 10)),
            Ok(CommandOutcome::Registered {
                id: ServerId(2),
                changed: true
            })
        );
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(state_of(&st, ServerId(2)), ServerState::Available);
        assert_eq!(sets_before_planning(&st), sets(&before));
        // Offline, then restarted: Available at the new incarnation.
        st.apply(Command::MarkOffline {
            id: ServerId(3),
            incarnation: 10,
        })
        .unwrap();
        let before = st.clone();
        assert_eq!(
            st.apply(reg(3, "c:1", 12)),
            Ok(CommandOutcome::Registered {
                id: ServerId(3),
                changed: true
            })
        );
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(state_of(&st, ServerId(3)), ServerState::Available);
        assert_eq!(st.server(ServerId(3)).unwrap().incarnation, 12);
        // A decision about the earlier incarnation cannot hit the restarted server.
        let before = st.clone();
        assert!(matches!(
            st.apply(Command::MarkOffline {
                id: ServerId(3),
                incarnation: 10
            }),
            Err(CommandError::StaleServer { .. })
        ));
        assert_eq!(st, before);
    }

    #[test]
    fn add_and_remove_spaces() {
        let mut st = with_servers(4);
        let before = st.clone();
        let out = st
            .apply(Command::AddSpace {
                schema: schema("s", 2, 16, 1),
            })
            .unwrap();
        assert_eq!(out, CommandOutcome::SpaceAdded { id: 5 });
        assert_eq!(st.epoch, Epoch(5));
        let cfg = st.configuration();
        let space = cfg.space("s").unwrap();
        assert_eq!(space.id, 5);
        check_space(&st, space);
        assert_eq!(
            st.apply(Command::AddSpace {
                schema: schema("s", 1, 4, 0)
            }),
            Err(CommandError::SpaceExists("s".into()))
        );
        assert_eq!(
            st.apply(Command::RmSpace { name: "s".into() }),
            Ok(CommandOutcome::SpaceRemoved)
        );
        assert_eq!(st.epoch, Epoch(6));
        assert_eq!(st.spaces, before.spaces);
        assert_eq!(
            st.apply(Command::RmSpace { name: "s".into() }),
            Err(CommandError::UnknownSpace("s".into()))
        );
        // Created again: a new id.
        assert_eq!(
            st.apply(Command::AddSpace {
                schema: schema("s", 1, 4, 0)
            }),
            Ok(CommandOutcome::SpaceAdded { id: 7 })
        );
    }

    #[test]
    fn too_few_servers_names_both_numbers() {
        let mut st = with_servers(2);
        let before = st.clone();
        let err = st
            .apply(Command::AddSpace {
                schema: schema("s", 1, 8, 2),
            })
            .unwrap_err();
        assert_eq!(
            err,
            CommandError::TooFewServers {
                space: "s".into(),
                needed: 3,
                available: 2
            }
        );
        let msg = err.to_string();
        assert!(msg.contains('3') && msg.contains('2'), "{msg}");
        assert_eq!(st, before);
    }

    #[test]
    fn a_configuration_over_the_frame_limit_is_refused() {
        let mut st = with_servers(8);
        let before = st.clone();
        let big = schema("big", 4, tessera_types::constants::PARTITIONS_MAX, 7);
        assert!(matches!(
            st.apply(Command::AddSpace { schema: big }),
            Err(CommandError::ConfigurationTooLarge { .. })
        ));
        assert_eq!(st, before);
    }

    #[test]
    fn shapes_that_would_pass_the_frame_limit_are_refused() {
        use tessera_types::{PropertyKind, Shape};
        let mut st = with_servers(1);
        let docs =
            tessera_types::parse_space("space docs dynamic key k dimensions 2 tolerate 0 failures")
                .unwrap();
        st.apply(Command::AddSpace { schema: docs }).unwrap();
        // Shapes at their byte limit: 50 paths of 300 bytes (15 KiB each).
        let shape = |n: usize| Shape {
            formula: String::new(),
            properties: (0..50)
                .map(|i| (format!("{n:0>8}{i:0>292}"), PropertyKind::Int))
                .collect(),
        };
        let mut added = 0;
        let refused = loop {
            assert!(added < 1000, "never refused");
            let before = st.clone();
            let change = SpaceChange::AddShape(shape(added));
            match st.apply(Command::AlterSpace {
                name: "docs".into(),
                change,
            }) {
                Ok(_) => added += 1,
                Err(e) => {
                    assert_eq!(st, before, "a refused shape changes nothing");
                    break e;
                }
            }
        };
        assert!(
            matches!(refused, CommandError::ConfigurationTooLarge { .. }),
            "{refused:?}"
        );
        let bytes = postcard::to_allocvec(&st.configuration()).unwrap().len();
        assert!(bytes <= CONFIGURATION_BYTES_MAX, "{bytes}");
        assert!(added > 100, "{added} shapes fit");
    }

    #[test]
    fn an_invalid_schema_is_refused_not_a_panic() {
        let mut st = with_servers(3);
        let mut bad = schema("s", 1, 8, 0);
        bad.partitions = 0;
        assert!(matches!(
            st.apply(Command::AddSpace { schema: bad }),
            Err(CommandError::InvalidSchema(_))
        ));
        let mut bad = schema("s", 1, 8, 0);
        bad.subspaces[1].dimensions.clear();
        assert!(matches!(
            st.apply(Command::AddSpace { schema: bad }),
            Err(CommandError::InvalidSchema(_))
        ));
        let mut bad = schema("s", 1, 8, 0);
        bad.subspaces[1].dimensions[0] = tessera_types::AttrIndex(60);
        assert!(matches!(
            st.apply(Command::AddSpace { schema: bad }),
            Err(CommandError::InvalidSchema(_))
        ));
        assert_eq!(st.epoch, Epoch(3));
    }

    #[test]
    fn load_spreads_across_spaces() {
        // Servers join one by one between space creations; new spaces favour the least loaded.
        let mut st = with_servers(3);
        for i in 0..6 {
            st.apply(Command::AddSpace {
                schema: schema(&format!("s{i}"), 1, 10, 1),
            })
            .unwrap();
        }
        let mut load: HashMap<ServerId, u64> = HashMap::new();
        for sp in &st.spaces {
            for sub in &sp.replicas {
                for set in sub {
                    for s in set {
                        *load.entry(*s).or_default() += 1;
                    }
                }
            }
        }
        let max = load.values().max().unwrap();
        let min = load.values().min().unwrap();
        assert!(max - min <= 1, "{load:?}");
    }

    /// A region's members and its transfer, by subspace and region number.
    fn region(
        st: &ClusterState,
        space: &str,
        sub: u16,
        region: u32,
    ) -> (Vec<ServerId>, Option<Transfer>) {
        let space = st.spaces.iter().find(|s| s.schema.name == space).unwrap();
        let (sub, region) = (SubspaceId(sub), RegionIndex(region));
        (
            space.replicas_of(sub, region).to_vec(),
            space.transfer_at(sub, region).copied(),
        )
    }

    fn ids(list: &[u64]) -> Vec<ServerId> {
        list.iter().map(|i| ServerId(*i)).collect()
    }

    #[test]
    fn a_dead_server_is_replaced_a_few_regions_at_a_time() {
        let mut st = planning(with_servers(4));
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 32, 1),
        })
        .unwrap();
        let before = st.clone();
        let dead = ServerId(1);
        st.apply(Command::MarkOffline {
            id: dead,
            incarnation: 1,
        })
        .unwrap();
        let space = &st.spaces[0];
        let short: usize = sets(&before)
            .iter()
            .filter(|set| set.contains(&dead))
            .count();
        assert!(
            short > 2 * TRANSFERS_PER_SERVER_MAX,
            "enough regions to hit the limit: {short}"
        );
        // Each region it left gets one new member, streamed by the one that is left, but no
        // server receives or sends more than the limit: 3 survivors, so at most 3 * 8.
        assert!(
            !space.transfers.is_empty() && space.transfers.len() <= 3 * TRANSFERS_PER_SERVER_MAX
        );
        let (to, from) = transfer_counts(&st);
        assert!(
            to.values()
                .chain(from.values())
                .all(|n| *n <= TRANSFERS_PER_SERVER_MAX),
            "{to:?} {from:?}"
        );
        for t in &space.transfers {
            let set = space.replicas_of(t.subspace, t.region);
            assert_eq!((t.id, t.replaces), (st.epoch.0, None));
            assert_eq!(set.len(), 2);
            assert_eq!(set[1], t.to);
            assert_ne!(t.to, dead);
        }
        // Completing them all, round after round, brings every region back to K = 2, none on
        // the dead server, balanced over the three.
        let rounds = settle(&mut st).unwrap();
        assert!(
            rounds >= 2,
            "the limit spread the work over rounds: {rounds}"
        );
        assert!(sets(&st)
            .iter()
            .all(|set| set.len() == 2 && !set.contains(&dead)));
        st.servers.retain(|s| s.info.id != dead);
        check_settled(&st).unwrap();
    }

    #[test]
    fn transfers_follow_their_members_out() {
        // Four servers, K = 3, one region: [1, 2, 3]; 3 dies, so 4 catches up from 2.
        let mut st = planning(with_servers(4));
        st.apply(Command::AddSpace {
            schema: schema("s", 0, 1, 2),
        })
        .unwrap();
        assert_eq!(region(&st, "s", 0, 0).0, ids(&[1, 2, 3]));
        let base = st.clone();
        st.apply(Command::MarkOffline {
            id: ServerId(3),
            incarnation: 1,
        })
        .unwrap();
        let started = st.epoch.0;
        let t = Transfer {
            id: started,
            subspace: SubspaceId(0),
            region: RegionIndex(0),
            to: ServerId(4),
            replaces: None,
        };
        assert_eq!(region(&st, "s", 0, 0), (ids(&[1, 2, 4]), Some(t)));
        let catching_up = st.clone();

        // The target dies: the transfer ends, and nobody else is free to take it.
        st.apply(Command::MarkOffline {
            id: ServerId(4),
            incarnation: 1,
        })
        .unwrap();
        assert_eq!(region(&st, "s", 0, 0), (ids(&[1, 2]), None));

        // The source dies: the transfer is cancelled and started again from the new last
        // member, under a new id.
        let mut st = catching_up.clone();
        st.apply(Command::MarkOffline {
            id: ServerId(2),
            incarnation: 1,
        })
        .unwrap();
        let again = Transfer {
            id: st.epoch.0,
            ..t
        };
        assert_ne!(again.id, t.id);
        assert_eq!(region(&st, "s", 0, 0), (ids(&[1, 4]), Some(again)));

        // A member before the source dies: the transfer goes on.
        let mut st = catching_up.clone();
        st.apply(Command::MarkOffline {
            id: ServerId(1),
            incarnation: 1,
        })
        .unwrap();
        assert_eq!(region(&st, "s", 0, 0), (ids(&[2, 4]), Some(t)));

        // The only complete member dies while the target catches up: it stays (its data is
        // nowhere else), the transfer is cancelled, and no new one starts from a dead source.
        let mut st = catching_up.clone();
        st.apply(Command::MarkOffline {
            id: ServerId(1),
            incarnation: 1,
        })
        .unwrap();
        st.apply(Command::MarkOffline {
            id: ServerId(2),
            incarnation: 1,
        })
        .unwrap();
        assert_eq!(region(&st, "s", 0, 0), (ids(&[2]), None));

        // A restart counts as leaving too: the target restarting loses its partial copy.
        let mut st = catching_up.clone();
        st.apply(reg(1003, "10.0.0.3:2000", 2)).unwrap();
        let (set, transfer) = region(&st, "s", 0, 0);
        assert_eq!(set[..2], ids(&[1, 2])[..]);
        assert_ne!(
            transfer.map(|t| t.id),
            Some(t.id),
            "the restarted target starts over"
        );

        // The member a transfer replaces dies: it goes, the transfer goes on replacing nobody.
        let mut st = base.clone();
        st.apply(Command::Decommission { id: ServerId(1) }).unwrap();
        let (set, Some(leaving)) = region(&st, "s", 0, 0) else {
            panic!("a transfer replaces the Leaving server")
        };
        assert_eq!(
            (set, leaving.replaces, leaving.to),
            (ids(&[1, 2, 3, 4]), Some(ServerId(1)), ServerId(4))
        );
        st.apply(Command::MarkOffline {
            id: ServerId(1),
            incarnation: 1,
        })
        .unwrap();
        assert_eq!(
            region(&st, "s", 0, 0),
            (
                ids(&[2, 3, 4]),
                Some(Transfer {
                    replaces: None,
                    ..leaving
                })
            )
        );
        assert!(
            st.server(ServerId(1)).is_none(),
            "a Leaving server that dies holding nothing is gone"
        );
    }

    #[test]
    fn completing_transfers_checks_what_it_is_told() {
        let mut st = planning(with_servers(3));
        st.apply(Command::AddSpace {
            schema: schema("s", 0, 1, 1),
        })
        .unwrap();
        assert_eq!(region(&st, "s", 0, 0).0, ids(&[1, 2]));
        st.apply(Command::MarkOffline {
            id: ServerId(2),
            incarnation: 1,
        })
        .unwrap();
        let (set, Some(t)) = region(&st, "s", 0, 0) else {
            panic!("a transfer to 3")
        };
        assert_eq!((set, t.to), (ids(&[1, 3]), ServerId(3)));
        let space = st.spaces[0].id;
        let good = TransferRef {
            space,
            subspace: SubspaceId(0),
            region: 0,
            id: t.id,
        };
        let complete =
            |id: u64, incarnation: u64, done: Vec<TransferRef>| Command::CompleteTransfers {
                id: ServerId(id),
                incarnation,
                done,
                backfilled: vec![],
            };

        // References that name no transfer of this server change nothing.
        let before = st.clone();
        for wrong in [
            TransferRef {
                id: t.id + 1,
                ..good
            },
            TransferRef {
                id: t.id - 1,
                ..good
            },
            TransferRef {
                space: space + 1,
                ..good
            },
            TransferRef { region: 1, ..good },
            TransferRef {
                subspace: SubspaceId(1),
                ..good
            },
        ] {
            assert_eq!(
                st.apply(complete(3, 1, vec![wrong])),
                Ok(CommandOutcome::TransfersCompleted {
                    completed: 0,
                    backfilled: 0
                })
            );
        }
        assert_eq!(
            st.apply(complete(1, 1, vec![good])),
            Ok(CommandOutcome::TransfersCompleted {
                completed: 0,
                backfilled: 0
            }),
            "not its transfer"
        );
        assert_eq!(
            st.apply(complete(3, 1, vec![])),
            Ok(CommandOutcome::TransfersCompleted {
                completed: 0,
                backfilled: 0
            })
        );
        assert_eq!(
            st.apply(complete(3, 2, vec![good])),
            Err(CommandError::StaleServer {
                id: ServerId(3),
                incarnation: 2,
                current: 1
            })
        );
        assert_eq!(
            st.apply(complete(9, 1, vec![good])),
            Err(CommandError::UnknownServer(ServerId(9)))
        );
        assert_eq!(st, before);

        // The right one, repeated: completed once, one new epoch; 3 is a full member.
        assert_eq!(
            st.apply(complete(3, 1, vec![good, good])),
            Ok(CommandOutcome::TransfersCompleted {
                completed: 1,
                backfilled: 0
            })
        );
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(region(&st, "s", 0, 0), (ids(&[1, 3]), None));
        assert_eq!(
            st.configuration().spaces[0].complete_replicas(SubspaceId(0), RegionIndex(0)),
            ids(&[1, 3])
        );
        // Reported again (a lost reply): nothing.
        let after = st.clone();
        assert_eq!(
            st.apply(complete(3, 1, vec![good])),
            Ok(CommandOutcome::TransfersCompleted {
                completed: 0,
                backfilled: 0
            })
        );
        assert_eq!(st, after);
    }

    #[test]
    fn decommission_drains_a_server_then_removes_it() {
        let mut st = planning(with_servers(5));
        st.apply(Command::AddSpace {
            schema: schema("two", 2, 24, 1),
        })
        .unwrap();
        st.apply(Command::AddSpace {
            schema: schema("three", 1, 16, 2),
        })
        .unwrap();
        let gone = ServerId(2);
        let held = sets(&st).iter().filter(|set| set.contains(&gone)).count();
        assert_eq!(
            st.apply(Command::Decommission { id: gone }),
            Ok(CommandOutcome::Decommissioned {
                id: gone,
                removed: false
            })
        );
        assert_eq!(state_of(&st, gone), ServerState::Leaving);
        // Its regions start moving, at most the limit of them from it at once; each transfer
        // replaces it.
        let moving: Vec<Transfer> = st
            .spaces
            .iter()
            .flat_map(|s| s.transfers.iter().copied())
            .collect();
        assert!(!moving.is_empty());
        assert!(
            moving
                .iter()
                .all(|t| t.replaces == Some(gone) && t.to != gone),
            "{moving:?}"
        );
        // Nothing new for it, and it cannot be decommissioned twice.
        assert_eq!(
            st.apply(Command::Decommission { id: gone }),
            Err(CommandError::AlreadyLeaving(gone))
        );
        st.apply(Command::AddSpace {
            schema: schema("later", 0, 8, 0),
        })
        .unwrap();
        assert!(st.spaces[2]
            .replicas
            .iter()
            .flatten()
            .all(|set| !set.contains(&gone)));
        // It keeps serving (and holding) until its last region has moved, then it is gone.
        let rounds = settle(&mut st).unwrap();
        assert!(
            rounds > 1 && held > TRANSFERS_PER_SERVER_MAX,
            "{held} regions moved over {rounds} rounds"
        );
        assert!(st.server(gone).is_none());
        assert!(st.configuration().server(gone).is_none());
        check_settled(&st).unwrap();
        assert_eq!(
            st.apply(Command::Decommission { id: gone }),
            Err(CommandError::UnknownServer(gone))
        );

        // Four servers left and a K = 3 space: one more may go, not two.
        st.apply(Command::Decommission { id: ServerId(1) }).unwrap();
        let err = st
            .apply(Command::Decommission { id: ServerId(3) })
            .unwrap_err();
        assert_eq!(
            err,
            CommandError::WouldUnderReplicate {
                id: ServerId(3),
                space: "three".into(),
                needed: 3,
                available: 2
            }
        );
        assert!(err.to_string().contains("three"), "{err}");

        // An Offline server: refused while it alone holds a region, removed at once otherwise.
        let mut solo = planning(with_servers(3));
        solo.apply(Command::AddSpace {
            schema: schema("solo", 0, 4, 0),
        })
        .unwrap();
        solo.apply(Command::MarkOffline {
            id: ServerId(1),
            incarnation: 1,
        })
        .unwrap();
        assert!(matches!(
            solo.apply(Command::Decommission { id: ServerId(1) }),
            Err(CommandError::OfflineHoldsRegions { .. })
        ));
        let mut empty = planning(with_servers(3));
        empty
            .apply(Command::AddSpace {
                schema: schema("s", 1, 16, 1),
            })
            .unwrap();
        empty
            .apply(Command::RegisterServer {
                token: 77,
                address: "x:1".into(),
                incarnation: 1,
            })
            .unwrap();
        let new = empty.servers.last().unwrap().info.id;
        settle(&mut empty).unwrap();
        empty
            .apply(Command::MarkOffline {
                id: new,
                incarnation: 1,
            })
            .unwrap();
        settle(&mut empty).unwrap();
        assert!(sets(&empty).iter().all(|set| !set.contains(&new)));
        assert_eq!(
            empty.apply(Command::Decommission { id: new }),
            Ok(CommandOutcome::Decommissioned {
                id: new,
                removed: true
            })
        );
        assert!(empty.server(new).is_none());
    }

    #[test]
    fn a_server_holding_nothing_leaves_at_once() {
        let mut st = with_servers(3);
        let before = st.clone();
        assert_eq!(
            st.apply(Command::Decommission { id: ServerId(3) }),
            Ok(CommandOutcome::Decommissioned {
                id: ServerId(3),
                removed: true
            })
        );
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(st.servers, before.servers[..2]);
    }

    #[test]
    fn a_leaving_server_that_restarts_or_registers_again_goes_on_leaving() {
        let mut st = planning(with_servers(3));
        st.apply(Command::AddSpace {
            schema: schema("s", 0, 16, 1),
        })
        .unwrap();
        st.apply(Command::Decommission { id: ServerId(1) }).unwrap();
        let before = st.clone();
        // A retried registration of the same process changes nothing.
        assert_eq!(
            st.apply(reg(1000, "10.0.0.0:2000", 1)),
            Ok(CommandOutcome::Registered {
                id: ServerId(1),
                changed: false
            })
        );
        assert_eq!(st, before);
        // A restart leaves its sets, but not the decision.
        st.apply(reg(1000, "10.0.0.0:2000", 2)).unwrap();
        assert_eq!(
            st.server(ServerId(1)).map(|s| s.info.state),
            None,
            "it held nothing more: gone"
        );
        assert!(sets(&st).iter().all(|set| !set.contains(&ServerId(1))));
    }

    #[test]
    fn a_joining_server_takes_its_share() {
        let mut st = planning(with_servers(3));
        st.apply(Command::AddSpace {
            schema: schema("s", 2, 16, 1),
        })
        .unwrap();
        let new = ServerId(4);
        st.apply(reg(9, "new:1", 1)).unwrap();
        // It gets regions from the most loaded, each transfer replacing the donor.
        let moving: Vec<Transfer> = st.spaces[0].transfers.clone();
        assert!(
            !moving.is_empty() && moving.len() <= TRANSFERS_PER_SERVER_MAX,
            "{moving:?}"
        );
        assert!(moving
            .iter()
            .all(|t| t.to == new && t.replaces.is_some_and(|r| r != new)));
        settle(&mut st).unwrap();
        check_settled(&st).unwrap();
        for sub in &st.spaces[0].replicas {
            // 16 regions * K 2 / 4 servers: exactly 8 each.
            assert_eq!(
                sub.iter().filter(|set| set.contains(&new)).count(),
                sub.len() * 2 / 4
            );
        }
    }

    /// What [`PLAN_TRANSFERS`] off means (set explicitly here, so the default changes no test).
    #[test]
    fn without_planning_regions_stay_short_and_decommission_needs_an_empty_server() {
        let mut st = with_servers(3);
        st.plan_transfers = false;
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 8, 1),
        })
        .unwrap();
        // A dead server leaves its regions a replica short: nothing replaces it.
        st.apply(Command::MarkOffline {
            id: ServerId(3),
            incarnation: 1,
        })
        .unwrap();
        assert!(st.spaces[0].transfers.is_empty());
        assert!(sets(&st)
            .iter()
            .all(|set| !set.contains(&ServerId(3)) && !set.is_empty()));
        assert!(
            sets(&st).iter().any(|set| set.len() == 1),
            "some regions are one short"
        );
        // A joining server takes no share of existing spaces.
        st.apply(reg(9, "new:1", 1)).unwrap();
        let new = st.servers.last().unwrap().info.id;
        assert!(
            st.spaces[0].transfers.is_empty() && sets(&st).iter().all(|set| !set.contains(&new))
        );
        // Decommission: refused, with the reason, for a server that holds regions; nothing
        // changes. One that holds none (the new one, the offline one) leaves at once.
        let before = st.clone();
        let err = st
            .apply(Command::Decommission { id: ServerId(1) })
            .unwrap_err();
        assert!(
            matches!(err, CommandError::TransfersOff { id: ServerId(1), regions } if regions > 0),
            "{err:?}"
        );
        assert!(err.to_string().contains("no state transfers"), "{err}");
        assert_eq!(st, before);
        assert_eq!(
            st.apply(Command::Decommission { id: new }),
            Ok(CommandOutcome::Decommissioned {
                id: new,
                removed: true
            })
        );
        assert_eq!(
            st.apply(Command::Decommission { id: ServerId(3) }),
            Ok(CommandOutcome::Decommissioned {
                id: ServerId(3),
                removed: true
            })
        );
        st.configuration().check().unwrap();
    }

    #[test]
    fn join_records_follow_the_members() {
        // Three servers, K = 2, one region: [1, 2].
        let mut st = planning(with_servers(3));
        st.apply(Command::AddSpace {
            schema: schema("s", 0, 1, 1),
        })
        .unwrap();
        assert_eq!(region(&st, "s", 0, 0).0, ids(&[1, 2]));
        let joined = |st: &ClusterState| st.spaces[0].joined.clone();
        let complete = |st: &mut ClusterState, to: u64| {
            let done = refs_into(st, ServerId(to));
            assert_eq!(done.len(), 1);
            st.apply(Command::CompleteTransfers {
                id: ServerId(to),
                incarnation: 1,
                done,
                backfilled: vec![],
            })
            .unwrap();
            st.configuration().check().unwrap();
        };
        // 1 is decommissioned: 3 replaces it and, once done, is a member since that transfer.
        st.apply(Command::Decommission { id: ServerId(1) }).unwrap();
        let (_, Some(t)) = region(&st, "s", 0, 0) else {
            panic!("a transfer to 3")
        };
        assert_eq!((t.to, t.replaces), (ServerId(3), Some(ServerId(1))));
        assert_eq!(
            st.spaces[0].member_since(SubspaceId(0), RegionIndex(0), ServerId(3)),
            Epoch(t.id)
        );
        assert!(
            joined(&st).is_empty(),
            "a record only once the transfer completes"
        );
        complete(&mut st, 3);
        assert_eq!(region(&st, "s", 0, 0), (ids(&[2, 3]), None));
        let record = Joined {
            subspace: SubspaceId(0),
            region: RegionIndex(0),
            server: ServerId(3),
            since: t.id,
        };
        assert_eq!(joined(&st), [record]);
        assert!(st.server(ServerId(1)).is_none());
        // A fourth server; 3 dies: it leaves the set, and its record with it.
        st.apply(reg(9, "new:1", 1)).unwrap();
        let four = st.servers.last().unwrap().info.id;
        settle(&mut st).unwrap();
        let (set, _) = region(&st, "s", 0, 0);
        assert!(set.contains(&ServerId(3)));
        st.apply(Command::MarkOffline {
            id: ServerId(3),
            incarnation: 1,
        })
        .unwrap();
        assert!(
            joined(&st).iter().all(|j| j.server != ServerId(3)),
            "{:?}",
            joined(&st)
        );
        st.configuration().check().unwrap();
        // 3 comes back (a restart); the region is completed by someone, and 3's old record
        // never returns: each member has at most one record, of its latest transfer.
        st.apply(reg(1002, "10.0.0.2:2000", 2)).unwrap();
        settle(&mut st).unwrap();
        for j in joined(&st) {
            assert!(region(&st, "s", 0, 0).0.contains(&j.server));
            assert!(j.since > t.id || j.server != ServerId(3), "{j:?}");
        }
        assert!(st.server(four).is_some());
        st.configuration().check().unwrap();
    }

    fn alter(name: &str, change: SpaceChange) -> Command {
        Command::AlterSpace {
            name: name.into(),
            change,
        }
    }

    fn add_sub(attributes: &[&str]) -> SpaceChange {
        SpaceChange::AddSubspace {
            attributes: attributes.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn drop_sub(subspace: u16) -> SpaceChange {
        SpaceChange::DropSubspace { subspace }
    }

    fn backfill(space: u64, subspace: u16, region: u32, since: u64) -> BackfillRef {
        BackfillRef {
            space,
            subspace: SubspaceId(subspace),
            region,
            since,
        }
    }

    fn report_backfills(id: u64, incarnation: u64, backfilled: Vec<BackfillRef>) -> Command {
        Command::CompleteTransfers {
            id: ServerId(id),
            incarnation,
            done: vec![],
            backfilled,
        }
    }

    #[test]
    fn adaptation_is_switched_and_logged_through_the_log_and_survives_validation() {
        let mut st = with_servers(2);
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 8, 1).with_adapt(true),
        })
        .unwrap();
        assert!(
            st.spaces[0].schema.adapt,
            "adapt on survives validate_schema"
        );
        let decision = tessera_protocol::Adaptation {
            from: vec![vec!["a".into()]],
            to: vec![vec!["c".into()]],
            predicted_from_ops_s: 10,
            predicted_to_ops_s: 20,
            observations: 3,
            period_s: 60,
        };
        let epoch = st.epoch.0;
        let out = st
            .apply(alter("s", SpaceChange::LogAdaptation(decision.clone())))
            .unwrap();
        assert_eq!(out, CommandOutcome::SpaceAltered { subspace: None });
        assert_eq!(st.epoch.0, epoch + 1);
        assert_eq!(st.spaces[0].adaptations.len(), 1);
        assert_eq!(st.spaces[0].adaptations[0].epoch, epoch + 1);
        // Off: the space no longer takes adaptations, and nothing else changed.
        st.apply(alter("s", SpaceChange::SetAdapt { on: false }))
            .unwrap();
        assert!(!st.spaces[0].schema.adapt);
        let before = st.clone();
        assert_eq!(
            st.apply(alter("s", SpaceChange::LogAdaptation(decision))),
            Err(CommandError::Alter(AlterError::NotAdaptive))
        );
        assert_eq!(st, before);
        assert!(st.configuration().check().is_ok());
    }

    #[test]
    fn adding_a_subspace_builds_it_on_balanced_replica_sets() {
        // Three Available servers and an Offline fourth; K = 2.
        let mut st = planning(with_servers(4));
        st.apply(Command::MarkOffline {
            id: ServerId(4),
            incarnation: 1,
        })
        .unwrap();
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 8, 1),
        })
        .unwrap();
        let before = st.clone();
        let out = st.apply(alter("s", add_sub(&["c", "b"]))).unwrap();
        assert_eq!(out, CommandOutcome::SpaceAltered { subspace: Some(2) });
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        let space = &st.spaces[0];
        let c = space.schema.attribute_index("c").unwrap();
        let b = space.schema.attribute_index("b").unwrap();
        assert_eq!(
            space.schema.subspaces[2],
            tessera_types::Subspace {
                dimensions: vec![c, b],
                state: SubspaceState::Building,
                overlay: None,
                tags: None,
                cuts: None,
            }
        );
        assert_eq!(
            space.build,
            Some(tessera_protocol::Build {
                subspace: SubspaceId(2),
                since: st.epoch.0,
                done: vec![],
                replaces: None,
            })
        );
        // The others are as they were; the new one has a set per region of its tessellation
        // (2 dimensions over 8 partitions: 3 x 3 regions).
        assert_eq!(space.replicas[..2], before.spaces[0].replicas[..]);
        assert_eq!(space.replicas.len(), 3);
        assert_eq!(space.replicas[2].len(), 9);
        let mut hold: HashMap<ServerId, usize> = HashMap::new();
        for set in &space.replicas[2] {
            assert_eq!(set.len(), 2, "K members: {set:?}");
            assert_ne!(set[0], set[1], "distinct members: {set:?}");
            for s in set {
                assert!(
                    [ServerId(1), ServerId(2), ServerId(3)].contains(s),
                    "Available members only: {set:?}"
                );
                *hold.entry(*s).or_default() += 1;
            }
        }
        // 18 memberships over 3 servers: 6 each.
        assert_eq!(hold.len(), 3, "{hold:?}");
        assert!(hold.values().all(|h| *h == 6), "{hold:?}");
        assert!(space.transfers.is_empty(), "nothing to plan");
        assert_eq!(space.schema.searchable_subspaces().count(), 2);
        assert_eq!(space.schema.written_subspaces().count(), 3);
        st.configuration().check().unwrap();
    }

    #[test]
    fn refused_alterations_change_nothing() {
        let mut st = with_servers(3);
        st.apply(Command::AddSpace {
            schema: schema("s", 2, 8, 1),
        })
        .unwrap();
        let refusals = |st: &mut ClusterState, cases: Vec<(Command, CommandError)>| {
            for (command, expected) in cases {
                let before = st.clone();
                assert_eq!(st.apply(command.clone()), Err(expected), "{command:?}");
                assert_eq!(*st, before, "{command:?} changed nothing");
            }
        };
        use tessera_types::SchemaError as E;
        refusals(
            &mut st,
            vec![
                (
                    alter("nope", add_sub(&["a"])),
                    CommandError::UnknownSpace("nope".into()),
                ),
                (
                    alter("nope", drop_sub(1)),
                    CommandError::UnknownSpace("nope".into()),
                ),
                (
                    alter("s", add_sub(&["zz"])),
                    CommandError::Alter(AlterError::Schema(E::UnknownAttribute("zz".into()))),
                ),
                (
                    alter("s", add_sub(&["a", "k"])),
                    CommandError::Alter(AlterError::Schema(E::KeyInSubspace("k".into()))),
                ),
                (
                    alter("s", add_sub(&[])),
                    CommandError::Alter(AlterError::Schema(E::EmptySubspace)),
                ),
                // Subspace 2 spans b, c.
                (
                    alter("s", add_sub(&["c", "b"])),
                    CommandError::Alter(AlterError::SubspaceExists(2)),
                ),
                (
                    alter("s", add_sub(&["a"])),
                    CommandError::Alter(AlterError::SubspaceExists(1)),
                ),
                (
                    alter("s", drop_sub(0)),
                    CommandError::Alter(AlterError::KeySubspace),
                ),
                (
                    alter("s", drop_sub(3)),
                    CommandError::Alter(AlterError::NoSuchSubspace(3)),
                ),
                (
                    alter("s", drop_sub(u16::MAX)),
                    CommandError::Alter(AlterError::NoSuchSubspace(u16::MAX)),
                ),
            ],
        );
        // One build at a time.
        assert_eq!(
            st.apply(alter("s", add_sub(&["c"]))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(3) })
        );
        refusals(
            &mut st,
            vec![(
                alter("s", add_sub(&["a", "b"])),
                CommandError::Alter(AlterError::BuildUnderWay(3)),
            )],
        );
        // A dropped subspace is gone: dropping it again names nothing, and its attributes
        // may span a new one.
        assert_eq!(
            st.apply(alter("s", drop_sub(1))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(1) })
        );
        refusals(
            &mut st,
            vec![(
                alter("s", drop_sub(1)),
                CommandError::Alter(AlterError::NoSuchSubspace(1)),
            )],
        );
        // Too few servers for K = 2 once two are offline; a drop needs none.
        for id in [2, 3] {
            st.apply(Command::MarkOffline {
                id: ServerId(id),
                incarnation: 1,
            })
            .unwrap();
        }
        assert_eq!(
            st.apply(alter("s", drop_sub(3))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(3) })
        );
        refusals(
            &mut st,
            vec![(
                alter("s", add_sub(&["a"])),
                CommandError::TooFewServers {
                    space: "s".into(),
                    needed: 2,
                    available: 1,
                },
            )],
        );
        st.configuration().check().unwrap();
    }

    #[test]
    fn subspace_ids_run_out() {
        let mut st = with_servers(2);
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 4, 1),
        })
        .unwrap();
        // Add and drop until every id is used: 30 more after the key subspace and "a".
        for id in 2..32u16 {
            assert_eq!(
                st.apply(alter("s", add_sub(&["c"]))),
                Ok(CommandOutcome::SpaceAltered { subspace: Some(id) })
            );
            assert_eq!(
                st.apply(alter("s", drop_sub(id))),
                Ok(CommandOutcome::SpaceAltered { subspace: Some(id) })
            );
        }
        assert_eq!(st.spaces[0].schema.subspaces.len(), 32);
        let before = st.clone();
        assert_eq!(
            st.apply(alter("s", add_sub(&["c"]))),
            Err(CommandError::Alter(AlterError::SubspaceIdsUsed))
        );
        assert_eq!(st, before);
        // Dropping still works.
        assert_eq!(
            st.apply(alter("s", drop_sub(1))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(1) })
        );
        let space = &st.spaces[0];
        assert_eq!(space.schema.written_subspaces().count(), 1);
        assert!(space.replicas[1..].iter().all(|sets| sets.is_empty()));
        st.configuration().check().unwrap();
    }

    #[test]
    fn an_alteration_over_the_frame_limit_is_refused() {
        let mut st = with_servers(8);
        // Three subspaces of about 65536 regions, K = 8: about 1.8 MB.
        st.apply(Command::AddSpace {
            schema: schema("big", 2, tessera_types::constants::PARTITIONS_MAX, 7),
        })
        .unwrap();
        let before = st.clone();
        assert!(matches!(
            st.apply(alter("big", add_sub(&["c"]))),
            Err(CommandError::ConfigurationTooLarge { .. })
        ));
        assert_eq!(st, before);
    }

    /// The model's constants join the configuration in a new epoch; the same again changes
    /// nothing; unusable ones (a free chain hop) are refused and change nothing.
    #[test]
    fn model_constants_are_kept_with_the_configuration() {
        let mut st = with_servers(1);
        let constants = ModelConstants {
            write_base_ns: 0,
            write_hop_ns: 119_000,
            relocation_factor_milli: 1_000,
            get_ns: 10_000,
            search_base_ns: 0,
            search_region_ns: 10_000,
            search_object_ns: 700,
            search_skip_ns: 2_800,
        };
        let before = st.epoch;
        assert_eq!(
            st.apply(Command::SetModel { constants }),
            Ok(CommandOutcome::ModelSet { changed: true })
        );
        assert_eq!(st.epoch.0, before.0 + 1);
        assert_eq!(st.configuration().model, Some(constants));
        st.configuration().check().unwrap();
        let same = st.clone();
        assert_eq!(
            st.apply(Command::SetModel { constants }),
            Ok(CommandOutcome::ModelSet { changed: false })
        );
        assert_eq!(st, same);
        for unusable in [
            ModelConstants {
                write_hop_ns: 0,
                ..constants
            },
            ModelConstants {
                search_base_ns: 0,
                search_region_ns: 0,
                ..constants
            },
        ] {
            assert_eq!(
                st.apply(Command::SetModel {
                    constants: unusable
                }),
                Err(CommandError::UnusableModel(unusable))
            );
            assert_eq!(st, same);
        }
    }

    #[test]
    fn a_new_space_is_declared_never_built() {
        let mut st = with_servers(3);
        for state in [SubspaceState::Building, SubspaceState::Dropped] {
            let mut bad = schema("s", 2, 8, 0);
            bad.subspaces[2].state = state;
            assert_eq!(
                st.apply(Command::AddSpace { schema: bad }),
                Err(CommandError::SubspaceNotServing { subspace: 2, state })
            );
        }
        assert_eq!(st.epoch, Epoch(3));
        assert!(st.spaces.is_empty());
    }

    #[test]
    fn backfill_reports_complete_a_build() {
        let mut st = with_servers(3);
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 4, 1),
        })
        .unwrap();
        st.apply(alter("s", add_sub(&["b"]))).unwrap();
        let (space, since) = (st.spaces[0].id, st.epoch.0);
        assert_eq!(st.spaces[0].replicas[0].len(), 4, "4 key regions");

        // Two regions: recorded, one new epoch, still building.
        let before = st.clone();
        assert_eq!(
            st.apply(report_backfills(
                1,
                1,
                vec![backfill(space, 2, 1, since), backfill(space, 2, 0, since)]
            )),
            Ok(CommandOutcome::TransfersCompleted {
                completed: 0,
                backfilled: 2
            })
        );
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        let build = st.spaces[0].build.clone().unwrap();
        assert_eq!((build.subspace, build.since), (SubspaceId(2), since));
        assert_eq!(build.done, vec![0, 1]);
        assert_eq!(
            st.spaces[0].schema.subspaces[2].state,
            SubspaceState::Building
        );
        st.configuration().check().unwrap();

        // Repeated, of another build (wrong since, subspace or space), out of range: ignored,
        // no new epoch.
        let before = st.clone();
        for refs in [
            vec![backfill(space, 2, 0, since), backfill(space, 2, 1, since)],
            vec![backfill(space, 2, 2, since + 1)],
            vec![backfill(space, 2, 2, since - 1)],
            vec![backfill(space, 1, 2, since)],
            vec![backfill(space + 1, 2, 2, since)],
            vec![backfill(space, 2, 4, since)],
        ] {
            assert_eq!(
                st.apply(report_backfills(2, 1, refs.clone())),
                Ok(CommandOutcome::TransfersCompleted {
                    completed: 0,
                    backfilled: 0
                }),
                "{refs:?}"
            );
            assert_eq!(st, before, "{refs:?}");
        }
        // Refused like a transfer report: an earlier process, an unknown server.
        assert!(matches!(
            st.apply(report_backfills(2, 0, vec![backfill(space, 2, 2, since)])),
            Err(CommandError::StaleServer { .. })
        ));
        assert_eq!(
            st.apply(report_backfills(9, 1, vec![backfill(space, 2, 2, since)])),
            Err(CommandError::UnknownServer(ServerId(9)))
        );
        assert_eq!(st, before);

        // The rest, out of order and with a region done already: the subspace serves.
        assert_eq!(
            st.apply(report_backfills(
                3,
                1,
                vec![
                    backfill(space, 2, 3, since),
                    backfill(space, 2, 0, since),
                    backfill(space, 2, 2, since)
                ]
            )),
            Ok(CommandOutcome::TransfersCompleted {
                completed: 0,
                backfilled: 2
            })
        );
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(st.spaces[0].build, None);
        assert_eq!(
            st.spaces[0].schema.subspaces[2].state,
            SubspaceState::Serving
        );
        assert_eq!(st.spaces[0].schema.searchable_subspaces().count(), 3);
        st.configuration().check().unwrap();
        // A late report of the finished build: nothing.
        let before = st.clone();
        assert_eq!(
            st.apply(report_backfills(1, 1, vec![backfill(space, 2, 3, since)])),
            Ok(CommandOutcome::TransfersCompleted {
                completed: 0,
                backfilled: 0
            })
        );
        assert_eq!(st, before);
    }

    #[test]
    fn dropped_subspaces_are_left_alone_by_planning() {
        let mut st = planning(with_servers(3));
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 8, 1),
        })
        .unwrap();
        // A fourth server joins: it is sent its share of both subspaces (4 regions each).
        st.apply(reg(1003, "10.0.0.3:2000", 1)).unwrap();
        let four = ServerId(4);
        let into = |st: &ClusterState, sub: u16| {
            st.spaces[0]
                .transfers
                .iter()
                .filter(|t| t.subspace == SubspaceId(sub) && t.to == four)
                .count()
        };
        assert_eq!((into(&st, 0), into(&st, 1)), (4, 4));
        // Two of subspace 1 complete: it has join records there, and transfers under way.
        let done: Vec<TransferRef> = refs_into(&st, four)
            .into_iter()
            .filter(|r| r.subspace == SubspaceId(1))
            .take(2)
            .collect();
        st.apply(Command::CompleteTransfers {
            id: four,
            incarnation: 1,
            done,
            backfilled: vec![],
        })
        .unwrap();
        assert_eq!(into(&st, 1), 2);
        assert!(st.spaces[0]
            .joined
            .iter()
            .any(|j| j.subspace == SubspaceId(1)));

        // Dropping it: no region, no transfer, no join record; subspace 0 untouched.
        let before = st.clone();
        assert_eq!(
            st.apply(alter("s", drop_sub(1))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(1) })
        );
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        let space = &st.spaces[0];
        assert_eq!(space.schema.subspaces[1].state, SubspaceState::Dropped);
        assert!(space.replicas[1].is_empty());
        assert!(space.transfers.iter().all(|t| t.subspace == SubspaceId(0)));
        assert!(space.joined.iter().all(|j| j.subspace == SubspaceId(0)));
        assert_eq!(space.replicas[0], before.spaces[0].replicas[0]);
        assert_eq!(
            space
                .transfers
                .iter()
                .filter(|t| t.subspace == SubspaceId(0))
                .count(),
            4
        );
        st.configuration().check().unwrap();

        // Dropping the subspace being built ends the build.
        assert_eq!(
            st.apply(alter("s", add_sub(&["b"]))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(2) })
        );
        assert!(st.spaces[0].build.is_some());
        assert_eq!(
            st.apply(alter("s", drop_sub(2))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(2) })
        );
        assert_eq!(st.spaces[0].build, None);
        assert_eq!(
            st.spaces[0].schema.subspaces[2].state,
            SubspaceState::Dropped
        );
        assert!(st.spaces[0].replicas[2].is_empty());
        st.configuration().check().unwrap();

        // One more being built; then a server fails and another joins: planning moves
        // regions of the live subspaces only.
        assert_eq!(
            st.apply(alter("s", add_sub(&["c"]))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(3) })
        );
        let dropped = |st: &ClusterState| {
            let space = &st.spaces[0];
            assert!(space.replicas[1].is_empty() && space.replicas[2].is_empty());
            assert!(space
                .transfers
                .iter()
                .all(|t| t.subspace == SubspaceId(0) || t.subspace == SubspaceId(3)));
            assert!(space
                .joined
                .iter()
                .all(|j| j.subspace == SubspaceId(0) || j.subspace == SubspaceId(3)));
            st.configuration().check().unwrap();
        };
        st.apply(Command::MarkOffline {
            id: ServerId(2),
            incarnation: 1,
        })
        .unwrap();
        dropped(&st);
        assert!(
            st.spaces[0]
                .transfers
                .iter()
                .any(|t| t.subspace == SubspaceId(3)),
            "the subspace being built is re-replicated like any other"
        );
        st.apply(reg(1004, "10.0.0.4:2000", 1)).unwrap();
        dropped(&st);
        settle(&mut st).unwrap();
        dropped(&st);
        // Server 2 back: settled, balanced, the dropped subspaces still empty.
        st.apply(reg(1001, "10.0.0.1:2000", 1)).unwrap();
        settle(&mut st).unwrap();
        dropped(&st);
        check_settled(&st).unwrap();
        assert_eq!(
            st.spaces[0].schema.subspaces[3].state,
            SubspaceState::Building
        );
    }

    /// A generated step: a command as generated, or one aimed at a registered server's current
    /// incarnation (resolved against the state it applies to), so the mix hits real servers.
    #[derive(Clone, Debug)]
    enum Step {
        Apply(Command),
        /// MarkOffline of the n-th server (mod their number) at its current incarnation.
        MarkCurrent(usize),
        /// The n-th server restarts: registers at its current incarnation + 1.
        Restart(usize),
        /// The n-th transfer target (mod their number) reports every transfer into it done,
        /// with a reference that names no transfer and one repeated.
        Complete(usize),
        /// The n-th server is decommissioned.
        Decommission(usize),
        /// The n-th server (mod their number) reports, at its current incarnation, the key
        /// regions `r` with `r % m == n % m` of the n-th build under way (mod their number)
        /// backfilled, with one region repeated, one of a wrong `since` and one out of range.
        Backfill(usize, usize),
    }

    impl Step {
        fn command(&self, st: &ClusterState) -> Command {
            let nth = |n: usize| &st.servers[n % st.servers.len()];
            match self {
                Step::Apply(c) => c.clone(),
                Step::MarkCurrent(_)
                | Step::Restart(_)
                | Step::Complete(_)
                | Step::Decommission(_)
                | Step::Backfill(..)
                    if st.servers.is_empty() =>
                {
                    Command::MarkOffline {
                        id: ServerId(1),
                        incarnation: 0,
                    }
                }
                Step::MarkCurrent(n) => Command::MarkOffline {
                    id: nth(*n).info.id,
                    incarnation: nth(*n).incarnation,
                },
                Step::Restart(n) => Command::RegisterServer {
                    token: nth(*n).token,
                    address: nth(*n).info.address.clone(),
                    incarnation: nth(*n).incarnation + 1,
                },
                Step::Complete(n) => {
                    let mut targets: Vec<ServerId> = st
                        .spaces
                        .iter()
                        .flat_map(|s| s.transfers.iter().map(|t| t.to))
                        .collect();
                    targets.sort();
                    targets.dedup();
                    let to = if targets.is_empty() {
                        nth(*n).info.id
                    } else {
                        targets[n % targets.len()]
                    };
                    let mut done = refs_into(st, to);
                    done.extend(done.first().copied());
                    done.push(TransferRef {
                        space: 0,
                        subspace: SubspaceId(0),
                        region: 0,
                        id: 0,
                    });
                    Command::CompleteTransfers {
                        id: to,
                        incarnation: st.server(to).unwrap().incarnation,
                        done,
                        backfilled: vec![],
                    }
                }
                Step::Backfill(n, m) => {
                    let builds: Vec<(&SpaceConfig, &tessera_protocol::Build)> = st
                        .spaces
                        .iter()
                        .filter_map(|s| s.build.as_ref().map(|b| (s, b)))
                        .collect();
                    let mut backfilled = Vec::new();
                    if !builds.is_empty() {
                        let (space, b) = builds[n % builds.len()];
                        let key_regions = space.replicas[0].len();
                        let at = |region: usize, since: u64| BackfillRef {
                            space: space.id,
                            subspace: b.subspace,
                            region: region as u32,
                            since,
                        };
                        backfilled.extend(
                            (0..key_regions)
                                .filter(|r| r % m == n % m)
                                .map(|r| at(r, b.since)),
                        );
                        backfilled.extend(backfilled.first().copied());
                        backfilled.push(at(n % key_regions, b.since + 1));
                        backfilled.push(at(key_regions + n, b.since));
                    }
                    Command::CompleteTransfers {
                        id: nth(*n).info.id,
                        incarnation: nth(*n).incarnation,
                        done: vec![],
                        backfilled,
                    }
                }
                Step::Decommission(n) => Command::Decommission {
                    id: nth(*n).info.id,
                },
            }
        }
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0u128..7, 0u8..3, 0u64..3).prop_map(|(token, a, i)| Step::Apply(Command::RegisterServer { token, address: format!("h{a}:1"), incarnation: i })),
            3 => (0u8..4, 0usize..4, 1u32..40, 0u32..4).prop_map(|(n, subs, p, t)| Step::Apply(Command::AddSpace { schema: schema(&format!("s{n}"), subs, p, t) })),
            1 => (0u8..4).prop_map(|n| Step::Apply(Command::RmSpace { name: format!("s{n}") })),
            1 => (1u64..8, 0u64..3).prop_map(|(id, i)| Step::Apply(Command::MarkOffline { id: ServerId(id), incarnation: i })),
            1 => (1u64..8, 0u64..3).prop_map(|(id, i)| Step::Apply(Command::CompleteTransfers { id: ServerId(id), incarnation: i, done: vec![], backfilled: vec![] })),
            1 => (1u64..8).prop_map(|id| Step::Apply(Command::Decommission { id: ServerId(id) })),
            2 => (0usize..8).prop_map(Step::MarkCurrent),
            2 => (0usize..8).prop_map(Step::Restart),
            5 => (0usize..8).prop_map(Step::Complete),
            1 => (0usize..8).prop_map(Step::Decommission),
            4 => (0u8..4, 0usize..ALTER_ATTRIBUTES.len()).prop_map(|(n, a)| Step::Apply(Command::AlterSpace {
                name: format!("s{n}"),
                change: SpaceChange::AddSubspace { attributes: ALTER_ATTRIBUTES[a].iter().map(|s| s.to_string()).collect() },
            })),
            2 => (0u8..4, 0u16..6).prop_map(|(n, subspace)| Step::Apply(Command::AlterSpace { name: format!("s{n}"), change: SpaceChange::DropSubspace { subspace } })),
            4 => (0usize..8, 1usize..4).prop_map(|(n, m)| Step::Backfill(n, m)),
        ]
    }

    /// Attribute lists alter-space steps add subspaces over (the spaces of [`schema`] have a
    /// key `k` and attributes `a`, `b`, `c`): valid ones, some naming a subspace [`schema`]
    /// declares, and invalid ones.
    const ALTER_ATTRIBUTES: &[&[&str]] = &[
        &["a"],
        &["b"],
        &["c"],
        &["b", "a"],
        &["c", "a"],
        &["c", "b", "a"],
        &["k"],
        &["zz"],
        &["a", "a"],
        &[],
    ];

    /// References to every transfer into `to`.
    fn refs_into(st: &ClusterState, to: ServerId) -> Vec<TransferRef> {
        st.spaces
            .iter()
            .flat_map(|s| s.transfer_refs_into(to))
            .collect()
    }

    /// Every region of every space, as (space, subspace, region).
    fn regions(st: &ClusterState) -> Vec<(u64, SubspaceId, RegionIndex)> {
        let mut out = Vec::new();
        for space in &st.spaces {
            for (sub, sets) in space.replicas.iter().enumerate() {
                for region in 0..sets.len() {
                    out.push((space.id, SubspaceId(sub as u16), RegionIndex(region as u32)));
                }
            }
        }
        out
    }

    fn space_by_id(st: &ClusterState, id: u64) -> Option<&SpaceConfig> {
        st.spaces.iter().find(|s| s.id == id)
    }

    /// Every server's transfers under way, as the target and as the source.
    fn transfer_counts(st: &ClusterState) -> (HashMap<ServerId, usize>, HashMap<ServerId, usize>) {
        let (mut to, mut from) = (HashMap::new(), HashMap::new());
        for space in &st.spaces {
            for t in &space.transfers {
                *to.entry(t.to).or_default() += 1;
                let set = space.replicas_of(t.subspace, t.region);
                *from.entry(set[set.len() - 2]).or_default() += 1;
            }
        }
        (to, from)
    }

    /// The invariants every state keeps, checked directly on it.
    fn check_state(st: &ClusterState) -> Result<(), TestCaseError> {
        let cfg = st.configuration();
        prop_assert!(cfg.check().is_ok(), "{:?}", cfg.check());
        let state = |id: ServerId| st.server(id).map(|s| s.info.state);
        for (space, sub, region) in regions(st) {
            let space = space_by_id(st, space).unwrap();
            let set = space.replicas_of(sub, region);
            let k = space.schema.replicas() as usize;
            prop_assert!(!set.is_empty(), "an empty replica set");
            let mut d = set.to_vec();
            d.sort();
            d.dedup();
            prop_assert_eq!(d.len(), set.len(), "members are distinct: {:?}", set);
            for id in set {
                prop_assert!(state(*id).is_some(), "{:?} is registered", id);
                if state(*id) == Some(ServerState::Offline) {
                    prop_assert_eq!(
                        set,
                        &[*id][..],
                        "offline {:?} is only in sets of its own",
                        id
                    );
                }
            }
            match space.transfer_at(sub, region) {
                Some(t) => {
                    prop_assert_eq!(
                        state(t.to),
                        Some(ServerState::Available),
                        "a target is Available: {:?}",
                        t
                    );
                    prop_assert_eq!(set.last(), Some(&t.to));
                    prop_assert!(
                        set.len() >= 2 && set[0] != t.to,
                        "a target never leads: {:?} {:?}",
                        set,
                        t
                    );
                    prop_assert!(
                        set.len() <= k + usize::from(t.replaces.is_some()),
                        "{:?} {:?} K={}",
                        set,
                        t,
                        k
                    );
                }
                None => prop_assert!(set.len() <= k, "{:?} has more than K={} members", set, k),
            }
        }
        let (to, from) = transfer_counts(st);
        for (server, n) in to.iter().chain(&from) {
            prop_assert!(
                *n <= TRANSFERS_PER_SERVER_MAX,
                "{:?} in {} transfers at once",
                server,
                n
            );
        }
        for s in st
            .servers
            .iter()
            .filter(|s| s.info.state == ServerState::Leaving)
        {
            prop_assert!(
                sets(st).iter().any(|set| set.contains(&s.info.id)),
                "a Leaving server that holds nothing is gone"
            );
        }
        // Planned: planning again finds nothing to do.
        let mut again = st.clone();
        again.plan();
        prop_assert_eq!(&again, st, "planning again changed the state");
        // Join records name members (`check` above), each joined no later than now.
        for space in &st.spaces {
            for j in &space.joined {
                prop_assert!(j.since <= st.epoch.0, "{:?} from the future", j);
            }
        }
        if !st.plan_transfers {
            prop_assert!(
                st.spaces.iter().all(|s| s.transfers.is_empty()),
                "a transfer while planning is off"
            );
            prop_assert!(
                st.servers
                    .iter()
                    .all(|s| s.info.state != ServerState::Leaving),
                "a Leaving server while planning is off"
            );
        }
        Ok(())
    }

    /// No region loses its data: some member complete after the command was complete before
    /// it, or is the target of a transfer into `completed_by` that this command completed.
    fn check_continuity(
        before: &ClusterState,
        after: &ClusterState,
        completed_by: Option<ServerId>,
    ) -> Result<(), TestCaseError> {
        for (space, sub, region) in regions(before) {
            let Some(a) = space_by_id(after, space) else {
                continue;
            };
            if a.schema.subspace(sub).state == SubspaceState::Dropped {
                // Dropped with its data, on purpose.
                continue;
            }
            let b = space_by_id(before, space).unwrap();
            let was = b.complete_replicas(sub, region);
            let finished = b
                .transfer_at(sub, region)
                .filter(|t| {
                    Some(t.to) == completed_by
                        && a.transfer_at(sub, region).map(|x| x.id) != Some(t.id)
                })
                .map(|t| t.to);
            let now = a.complete_replicas(sub, region);
            prop_assert!(
                now.iter().any(|s| was.contains(s) || Some(*s) == finished),
                "region {:?}/{:?} of space {}: complete members {:?} before, {:?} after",
                sub,
                region,
                space,
                was,
                now
            );
        }
        Ok(())
    }

    /// Whether `small` is `big` with some members left out, the others in the same order.
    fn is_subsequence(small: &[ServerId], big: &[ServerId]) -> bool {
        let mut rest = big.iter();
        small.iter().all(|s| rest.any(|b| b == s))
    }

    /// `after` took `id` out of the replica sets of `before` (compared before this epoch's
    /// planning): the others keep their order and every complete member but `id` stays; `id`
    /// stays only where it was the only complete member, and then alone; a transfer survives
    /// when `id` was neither its target nor the member streaming to it (the one before the
    /// target), and then replaces nobody (the region is a member short already).
    fn check_removed(
        before: &ClusterState,
        after: &ClusterState,
        id: ServerId,
    ) -> Result<(), TestCaseError> {
        let mut stripped = after.clone();
        for space in &mut stripped.spaces {
            let epoch = after.epoch.0;
            let SpaceConfig {
                replicas,
                transfers,
                ..
            } = space;
            transfers.retain(|t| {
                if t.id == epoch {
                    replicas[t.subspace.get()][t.region.0 as usize].pop();
                }
                t.id != epoch
            });
        }
        prop_assert_eq!(regions(before), regions(&stripped));
        for (space, sub, region) in regions(before) {
            let (b, a) = (
                space_by_id(before, space).unwrap(),
                space_by_id(&stripped, space).unwrap(),
            );
            let (o, n) = (b.replicas_of(sub, region), a.replicas_of(sub, region));
            let complete = b.complete_replicas(sub, region);
            if !o.contains(&id) {
                prop_assert_eq!(o, n);
                prop_assert_eq!(b.transfer_at(sub, region), a.transfer_at(sub, region));
                continue;
            }
            prop_assert!(is_subsequence(n, o), "{:?} is {:?} less some members", n, o);
            for c in complete.iter().filter(|c| **c != id) {
                prop_assert!(
                    n.contains(c),
                    "complete member {:?} stays: {:?} -> {:?}",
                    c,
                    o,
                    n
                );
            }
            if complete == [id] {
                prop_assert_eq!(n, &[id][..], "the only complete member stays, alone");
            } else {
                prop_assert!(!n.contains(&id), "{:?} left {:?}", id, n);
            }
            if let Some(t) = b.transfer_at(sub, region) {
                let source = o[o.len() - 2];
                if t.to != id && source != id {
                    prop_assert_eq!(
                        a.transfer_at(sub, region),
                        Some(&Transfer {
                            replaces: None,
                            ..*t
                        })
                    );
                } else {
                    prop_assert_eq!(
                        a.transfer_at(sub, region),
                        None,
                        "transfer {:?} ends with {:?}",
                        t,
                        id
                    );
                    prop_assert!(!n.contains(&t.to));
                }
            }
        }
        Ok(())
    }

    /// Completes every transfer under way, one report per target; returns how many there were.
    fn complete_all(st: &mut ClusterState) -> usize {
        let mut targets: Vec<ServerId> = st
            .spaces
            .iter()
            .flat_map(|s| s.transfers.iter().map(|t| t.to))
            .collect();
        targets.sort();
        targets.dedup();
        let mut n = 0;
        for to in targets {
            let done = refs_into(st, to);
            let incarnation = st.server(to).unwrap().incarnation;
            let out = st.apply(Command::CompleteTransfers {
                id: to,
                incarnation,
                done: done.clone(),
                backfilled: vec![],
            });
            assert_eq!(
                out,
                Ok(CommandOutcome::TransfersCompleted {
                    completed: done.len() as u32,
                    backfilled: 0,
                })
            );
            n += done.len();
        }
        n
    }

    /// Completes transfers until planning starts no more; returns how many rounds it took.
    fn settle(st: &mut ClusterState) -> Result<usize, TestCaseError> {
        for round in 0..10_000 {
            check_state(st)?;
            if complete_all(st) == 0 {
                return Ok(round);
            }
        }
        Err(TestCaseError::fail("transfers never stop"))
    }

    /// A settled state with at least K Available servers for every space: no transfer, no
    /// Leaving server, every region K distinct Available members, and within each subspace
    /// every Available server holds between floor and ceil of regions * K / servers.
    fn check_settled(st: &ClusterState) -> Result<(), TestCaseError> {
        let available: Vec<ServerId> = st
            .servers
            .iter()
            .filter(|s| s.info.state == ServerState::Available)
            .map(|s| s.info.id)
            .collect();
        prop_assert!(
            st.servers
                .iter()
                .all(|s| s.info.state == ServerState::Available),
            "{:?}",
            st.servers
        );
        let n = available.len();
        for space in &st.spaces {
            prop_assert!(space.transfers.is_empty());
            let k = space.schema.replicas() as usize;
            prop_assert!(
                k <= n,
                "space {:?} needs {} servers, {} are available",
                space.schema.name,
                k,
                n
            );
            for sets in &space.replicas {
                let mut hold: HashMap<ServerId, usize> =
                    available.iter().map(|s| (*s, 0)).collect();
                for set in sets {
                    prop_assert_eq!(set.len(), k, "K members: {:?}", set);
                    for s in set {
                        *hold.get_mut(s).expect("members are Available") += 1;
                    }
                }
                let (floor, ceil) = (sets.len() * k / n, (sets.len() * k).div_ceil(n));
                for (s, h) in &hold {
                    prop_assert!(
                        floor <= *h && *h <= ceil,
                        "{:?} holds {} of {} regions (K={}, n={})",
                        s,
                        h,
                        sets.len(),
                        k,
                        n
                    );
                }
            }
        }
        Ok(())
    }

    /// Brings every Offline server back (registering again at its incarnation).
    fn bring_back(st: &mut ClusterState) -> Result<(), TestCaseError> {
        let offline: Vec<RegisteredServer> = st
            .servers
            .iter()
            .filter(|s| s.info.state == ServerState::Offline)
            .cloned()
            .collect();
        for s in offline {
            st.apply(Command::RegisterServer {
                token: s.token,
                address: s.info.address,
                incarnation: s.incarnation,
            })
            .unwrap();
            check_state(st)?;
        }
        Ok(())
    }

    /// Checks one applied command against what it must have done.
    fn check_command(
        before: &ClusterState,
        st: &ClusterState,
        c: &Command,
        result: &Result<CommandOutcome, CommandError>,
    ) -> Result<(), TestCaseError> {
        let completed_by = match (c, result) {
            (Command::CompleteTransfers { id, .. }, Ok(_)) => Some(*id),
            _ => None,
        };
        check_continuity(before, st, completed_by)?;
        // Servers leave the configuration only after Leaving.
        for b in &before.servers {
            if st.server(b.info.id).is_none() {
                let decommissioned = matches!(c, Command::Decommission { id } if *id == b.info.id);
                prop_assert!(
                    b.info.state == ServerState::Leaving || decommissioned,
                    "{:?} vanished",
                    b
                );
            }
        }
        match (c, result) {
            (
                Command::RegisterServer {
                    token,
                    address,
                    incarnation,
                },
                Ok(CommandOutcome::Registered { id, .. }),
            ) => {
                let old = before.server_by_token(*token);
                let was_leaving = old.is_some_and(|o| o.info.state == ServerState::Leaving);
                match st.server(*id) {
                    Some(now) => {
                        prop_assert_eq!(&now.info.address, address);
                        prop_assert_eq!(now.incarnation, *incarnation);
                        let expected = if was_leaving {
                            ServerState::Leaving
                        } else {
                            ServerState::Available
                        };
                        prop_assert_eq!(now.info.state, expected);
                    }
                    None => prop_assert!(
                        was_leaving,
                        "only a Leaving server may leave as it registers"
                    ),
                }
                match old {
                    Some(old) if old.incarnation < *incarnation => check_removed(before, st, *id)?,
                    _ if st.epoch == before.epoch => prop_assert_eq!(st, before),
                    _ => prop_assert_eq!(sets_before_planning(st), sets(before)),
                }
            }
            (
                Command::RegisterServer {
                    token, incarnation, ..
                },
                Err(e),
            ) => {
                if let Some(old) = before.server_by_token(*token) {
                    prop_assert!(
                        *incarnation < old.incarnation,
                        "refused only as an earlier incarnation: {}",
                        e
                    );
                }
            }
            (Command::MarkOffline { id, .. }, Ok(outcome)) => {
                prop_assert_eq!(outcome, &CommandOutcome::MarkedOffline { id: *id });
                let was = before.server(*id).unwrap().info.state;
                prop_assert!(was != ServerState::Offline);
                match st.server(*id) {
                    Some(now) => prop_assert_eq!(now.info.state, ServerState::Offline),
                    None => {
                        prop_assert_eq!(was, ServerState::Leaving);
                        prop_assert!(!sets(st).iter().any(|set| set.contains(id)));
                    }
                }
                check_removed(before, st, *id)?;
                for a in &st.servers {
                    if a.info.id != *id {
                        prop_assert_eq!(
                            Some(a),
                            before.server(a.info.id),
                            "other servers are untouched"
                        );
                    }
                }
            }
            (Command::MarkOffline { id, incarnation }, Err(e)) => {
                let refused = match before.server(*id) {
                    None => matches!(e, CommandError::UnknownServer(_)),
                    Some(s) if s.incarnation != *incarnation => {
                        matches!(e, CommandError::StaleServer { .. })
                    }
                    Some(s) => {
                        s.info.state == ServerState::Offline
                            && matches!(e, CommandError::AlreadyOffline(_))
                    }
                };
                prop_assert!(refused, "{:?} refused with {}", c, e);
            }
            (Command::AddSpace { schema }, Ok(CommandOutcome::SpaceAdded { id })) => {
                prop_assert_eq!(*id, st.epoch.0);
                let space = st.spaces.last().unwrap();
                prop_assert_eq!(&space.schema, schema);
                prop_assert!(
                    space.transfers.is_empty(),
                    "a new space is balanced: {:?}",
                    space.transfers
                );
                check_space(st, space);
            }
            (
                Command::AddSpace { schema },
                Err(CommandError::TooFewServers {
                    needed, available, ..
                }),
            ) => {
                prop_assert_eq!(*needed, schema.replicas());
                prop_assert!((*available as usize) < *needed as usize);
                let live = st
                    .servers
                    .iter()
                    .filter(|s| s.info.state == ServerState::Available)
                    .count();
                prop_assert_eq!(*available as usize, live);
            }
            (
                Command::CompleteTransfers {
                    id,
                    incarnation,
                    done,
                    backfilled,
                },
                result,
            ) => {
                let server = before.server(*id);
                match result {
                    Err(CommandError::UnknownServer(_)) => prop_assert!(server.is_none()),
                    Err(CommandError::StaleServer { .. }) => {
                        prop_assert!(server.unwrap().incarnation != *incarnation)
                    }
                    Ok(CommandOutcome::TransfersCompleted {
                        completed,
                        backfilled: recorded,
                    }) => {
                        // Which backfill references name a build under way exactly, a key
                        // region it has not recorded yet, each counted once.
                        let mut new_regions: Vec<BackfillRef> = backfilled
                            .iter()
                            .copied()
                            .filter(|r| {
                                space_by_id(before, r.space).is_some_and(|s| {
                                    s.build.as_ref().is_some_and(|b| {
                                        b.subspace == r.subspace
                                            && b.since == r.since
                                            && (r.region as usize) < s.replicas[0].len()
                                            && !b.done.contains(&r.region)
                                    })
                                })
                            })
                            .collect();
                        new_regions.sort();
                        new_regions.dedup();
                        prop_assert_eq!(*recorded as usize, new_regions.len());
                        for b in &before.spaces {
                            let Some(build) = &b.build else { continue };
                            let a = space_by_id(st, b.id).unwrap();
                            let mut done: Vec<u32> = build.done.clone();
                            done.extend(
                                new_regions
                                    .iter()
                                    .filter(|r| r.space == b.id)
                                    .map(|r| r.region),
                            );
                            done.sort();
                            if done.len() == b.replicas[0].len() {
                                prop_assert_eq!(&a.build, &None);
                                prop_assert_eq!(
                                    a.schema.subspace(build.subspace).state,
                                    SubspaceState::Serving
                                );
                            } else {
                                prop_assert_eq!(
                                    a.build.as_ref().map(|x| &x.done),
                                    Some(&done),
                                    "{:?}",
                                    build
                                );
                                prop_assert_eq!(
                                    a.schema.subspace(build.subspace).state,
                                    SubspaceState::Building
                                );
                            }
                        }
                        // Which references name a transfer into `id` exactly, each counted once.
                        let mut matching: Vec<TransferRef> = done
                            .iter()
                            .copied()
                            .filter(|r| {
                                space_by_id(before, r.space).is_some_and(|s| {
                                    s.transfers.iter().any(|t| {
                                        t.to == *id
                                            && t.id == r.id
                                            && t.subspace == r.subspace
                                            && t.region.0 == r.region
                                    })
                                })
                            })
                            .collect();
                        matching.sort();
                        matching.dedup();
                        prop_assert_eq!(*completed as usize, matching.len());
                        prop_assert_eq!(
                            st.epoch.0,
                            before.epoch.0
                                + u64::from(!matching.is_empty() || !new_regions.is_empty())
                        );
                        for r in &matching {
                            let (b, a) = (
                                space_by_id(before, r.space).unwrap(),
                                space_by_id(st, r.space).unwrap(),
                            );
                            let region = RegionIndex(r.region);
                            let t = b.transfer_at(r.subspace, region).unwrap();
                            prop_assert!(a
                                .transfer_at(r.subspace, region)
                                .is_none_or(|x| x.id == st.epoch.0));
                            let now = a.complete_replicas(r.subspace, region);
                            prop_assert!(
                                now.contains(id),
                                "{:?} is a complete member of {:?}",
                                id,
                                now
                            );
                            // Joined since the transfer's epoch, by one record.
                            prop_assert_eq!(a.member_since(r.subspace, region, *id), Epoch(t.id));
                            let records = a
                                .joined
                                .iter()
                                .filter(|j| {
                                    (j.subspace, j.region, j.server) == (r.subspace, region, *id)
                                })
                                .count();
                            prop_assert_eq!(records, 1);
                            if let Some(old) = t.replaces {
                                // It left; planning may have sent the region back to it already (a new
                                // transfer, as balance now sees it), never as a complete member.
                                let back = a
                                    .transfer_at(r.subspace, region)
                                    .filter(|x| x.to == old && x.id == st.epoch.0);
                                prop_assert!(
                                    !now.contains(&old)
                                        && (back.is_some()
                                            || !a.replicas_of(r.subspace, region).contains(&old)),
                                    "{:?} left",
                                    old
                                );
                            }
                        }
                    }
                    other => prop_assert!(false, "{:?}", other),
                }
            }
            (Command::AlterSpace { name, change }, result) => {
                check_alter(before, st, name, change, result)?;
            }
            (Command::SetModel { .. }, _) => {}
            (Command::Decommission { id }, result) => {
                let server = before.server(*id);
                let others = before
                    .servers
                    .iter()
                    .filter(|s| s.info.state == ServerState::Available && s.info.id != *id)
                    .count();
                let needed = before
                    .spaces
                    .iter()
                    .map(|s| s.schema.replicas() as usize)
                    .max()
                    .unwrap_or(0);
                let holds = sets(before).iter().any(|set| set.contains(id));
                match result {
                    Err(CommandError::UnknownServer(_)) => prop_assert!(server.is_none()),
                    Err(CommandError::AlreadyLeaving(_)) => {
                        prop_assert_eq!(server.unwrap().info.state, ServerState::Leaving)
                    }
                    Err(CommandError::OfflineHoldsRegions { .. }) => {
                        prop_assert!(server.unwrap().info.state == ServerState::Offline && holds)
                    }
                    Err(CommandError::WouldUnderReplicate { .. }) => {
                        prop_assert!(
                            server.unwrap().info.state != ServerState::Leaving && others < needed
                        )
                    }
                    Err(CommandError::TransfersOff { .. }) => {
                        prop_assert!(!before.plan_transfers && holds && others >= needed);
                        prop_assert_eq!(server.unwrap().info.state, ServerState::Available);
                    }
                    Ok(CommandOutcome::Decommissioned { removed, .. }) => {
                        let was = server.unwrap().info.state;
                        prop_assert!(others >= needed);
                        prop_assert!(
                            before.plan_transfers || (!holds && *removed),
                            "nothing would move its regions"
                        );
                        prop_assert!(
                            was == ServerState::Offline && !holds || was == ServerState::Available
                        );
                        prop_assert_eq!(*removed, st.server(*id).is_none());
                        if !removed {
                            prop_assert_eq!(
                                st.server(*id).unwrap().info.state,
                                ServerState::Leaving
                            );
                        }
                        prop_assert!(
                            refs_into(st, *id).is_empty(),
                            "no transfer goes to a Leaving server"
                        );
                    }
                    other => prop_assert!(false, "{:?}", other),
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Checks one applied `AlterSpace` against what it must have done or why it was refused,
    /// from the states before and after it.
    fn check_alter(
        before: &ClusterState,
        st: &ClusterState,
        name: &str,
        change: &SpaceChange,
        result: &Result<CommandOutcome, CommandError>,
    ) -> Result<(), TestCaseError> {
        let Some(b) = before.spaces.iter().find(|s| s.schema.name == name) else {
            prop_assert_eq!(result, &Err(CommandError::UnknownSpace(name.to_owned())));
            return Ok(());
        };
        let names = |dims: &[tessera_types::AttrIndex]| {
            let mut v: Vec<String> = dims
                .iter()
                .map(|d| b.schema.attributes[d.get()].name.clone())
                .collect();
            v.sort();
            v
        };
        match (change, result) {
            (
                SpaceChange::AddSubspace { attributes },
                Ok(CommandOutcome::SpaceAltered {
                    subspace: Some(subspace),
                }),
            ) => {
                let a = space_by_id(st, b.id).unwrap();
                let id = SubspaceId(*subspace);
                prop_assert_eq!(id.get(), b.schema.subspaces.len());
                prop_assert!(b.build.is_none());
                let mut wanted = attributes.clone();
                wanted.sort();
                prop_assert_eq!(names(&a.schema.subspace(id).dimensions), wanted);
                prop_assert_eq!(a.schema.subspace(id).state, SubspaceState::Building);
                prop_assert_eq!(
                    &a.build,
                    &Some(tessera_protocol::Build {
                        subspace: id,
                        since: st.epoch.0,
                        done: vec![],
                        replaces: None,
                    })
                );
                // K distinct Available members per region, holdings within one of each other.
                let k = b.schema.replicas() as usize;
                let mut hold: HashMap<ServerId, usize> = st
                    .servers
                    .iter()
                    .filter(|s| s.info.state == ServerState::Available)
                    .map(|s| (s.info.id, 0))
                    .collect();
                for set in &a.replicas[id.get()] {
                    let mut d = set.clone();
                    d.sort();
                    d.dedup();
                    prop_assert_eq!((d.len(), set.len()), (k, k), "{:?}", set);
                    for s in set {
                        *hold.get_mut(s).expect("an Available member") += 1;
                    }
                }
                let (min, max) = (hold.values().min().unwrap(), hold.values().max().unwrap());
                prop_assert!(max - min <= 1, "{:?}", hold);
                prop_assert!(a.transfers.iter().all(|t| t.subspace != id));
            }
            (
                SpaceChange::DropSubspace { subspace },
                Ok(CommandOutcome::SpaceAltered {
                    subspace: Some(got),
                }),
            ) => {
                let a = space_by_id(st, b.id).unwrap();
                let id = SubspaceId(*subspace);
                prop_assert_eq!(got, subspace);
                prop_assert!(*subspace > 0);
                prop_assert!(b.schema.subspace(id).is_written());
                prop_assert_eq!(a.schema.subspace(id).state, SubspaceState::Dropped);
                prop_assert!(a.replicas[id.get()].is_empty());
                prop_assert!(a.transfers.iter().all(|t| t.subspace != id));
                prop_assert!(a.joined.iter().all(|j| j.subspace != id));
                let was_built = b.build.as_ref().is_some_and(|x| x.subspace == id);
                prop_assert_eq!(a.build.is_none(), was_built || b.build.is_none());
                prop_assert_eq!(a.schema.subspaces.len(), b.schema.subspaces.len());
            }
            (_, Ok(other)) => prop_assert!(false, "{:?}", other),
            (SpaceChange::AddSubspace { .. }, Err(CommandError::TooFewServers { .. })) => {
                let available = before
                    .servers
                    .iter()
                    .filter(|s| s.info.state == ServerState::Available)
                    .count();
                prop_assert!(available < b.schema.replicas() as usize);
            }
            (SpaceChange::AddSubspace { attributes }, Err(CommandError::Alter(e))) => {
                let mut wanted = attributes.clone();
                wanted.sort();
                let mut distinct = wanted.clone();
                distinct.dedup();
                let known = |n: &String| b.schema.attributes[1..].iter().any(|a| &a.name == n);
                let ok = match e {
                    AlterError::Schema(_) => {
                        wanted.is_empty()
                            || distinct.len() != wanted.len()
                            || !wanted.iter().all(known)
                    }
                    AlterError::BuildUnderWay(x) => {
                        b.build.as_ref().map(|b| b.subspace.0) == Some(*x)
                    }
                    AlterError::SubspaceExists(x) => {
                        let s = b.schema.subspace(SubspaceId(*x));
                        s.is_written() && names(&s.dimensions) == wanted
                    }
                    AlterError::SubspaceIdsUsed => {
                        b.schema.subspaces.len() == tessera_types::constants::SUBSPACES_MAX
                    }
                    _ => false,
                };
                prop_assert!(ok, "{:?} refused with {:?}: {:?}", attributes, e, b);
            }
            (SpaceChange::DropSubspace { subspace }, Err(CommandError::Alter(e))) => {
                let ok = match e {
                    AlterError::KeySubspace => *subspace == 0,
                    AlterError::NoSuchSubspace(x) => {
                        x == subspace
                            && b.schema
                                .subspaces
                                .get(usize::from(*x))
                                .is_none_or(|s| s.state == SubspaceState::Dropped)
                    }
                    _ => false,
                };
                prop_assert!(ok, "drop {} refused with {:?}: {:?}", subspace, e, b);
            }
            (_, Err(e)) => prop_assert!(false, "{:?} refused with {}", change, e),
        }
        Ok(())
    }

    /// Applies `steps` to `st`, checking after each command that: epochs bump by exactly one
    /// on change, failures change nothing, the state keeps its invariants ([`check_state`]:
    /// among them, the configuration passes `Configuration::check`), the command did what it
    /// says ([`check_command`]), a token keeps its id, and the state survives a postcard round
    /// trip. Then that ids are distinct and in registration order.
    fn apply_steps(st: &mut ClusterState, steps: Vec<Step>) -> Result<(), TestCaseError> {
        let mut ids: HashMap<u128, ServerId> = HashMap::new();
        for s in steps {
            let c = s.command(st);
            let before = st.clone();
            let result = st.apply(c.clone());
            match &result {
                Err(_) => prop_assert_eq!(&*st, &before),
                Ok(
                    CommandOutcome::Registered { changed: false, .. }
                    | CommandOutcome::TransfersCompleted {
                        completed: 0,
                        backfilled: 0,
                    },
                ) => {
                    prop_assert_eq!(&*st, &before)
                }
                Ok(_) => prop_assert_eq!(st.epoch.0, before.epoch.0 + 1),
            }
            check_state(st)?;
            check_command(&before, st, &c, &result)?;
            if let (
                Command::RegisterServer { token, .. },
                Ok(CommandOutcome::Registered { id, .. }),
            ) = (&c, &result)
            {
                // A token keeps its id while the server is in the configuration.
                if before.server_by_token(*token).is_some() {
                    prop_assert_eq!(ids[token], *id, "a token keeps its id");
                }
                ids.insert(*token, *id);
            }
            let bytes = postcard::to_allocvec(&*st).unwrap();
            let mut back: ClusterState = postcard::from_bytes(&bytes).unwrap();
            // A rule of this coordinator, not replicated: snapshots do not carry it.
            prop_assert_eq!(back.plan_transfers, PLAN_TRANSFERS);
            back.plan_transfers = st.plan_transfers;
            prop_assert_eq!(&back, &*st);
        }
        // Ids are distinct and below the next one, in registration order.
        let got: Vec<u64> = st.servers.iter().map(|s| s.info.id.0).collect();
        prop_assert!(
            got.windows(2).all(|w| w[0] < w[1]) && got.iter().all(|i| *i < st.next_server_id),
            "{:?}",
            got
        );
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// With transfers planned: any sequence of commands (registrations, restarts, servers
        /// taken offline and decommissioned, spaces added and removed, transfers reported
        /// done): epochs bump by exactly one on change, failures change nothing, the
        /// configuration checks (join records included: they name members only, one per
        /// member), no region loses its last complete member, the transfer limits hold, every
        /// state is one planning leaves as it is, and each command did what it says. Then,
        /// every server brought back and transfers completed until none is planned: every
        /// region has K Available members, balanced within each subspace; a server joining
        /// takes its share the same way, and a decommissioned one hands everything over and
        /// is gone.
        #[test]
        fn command_sequences_keep_the_invariants(steps in proptest::collection::vec(step(), 1..60), victim in 0usize..16) {
            let mut st = planning(ClusterState::default());
            apply_steps(&mut st, steps)?;
            bring_back(&mut st)?;
            settle(&mut st)?;
            check_settled(&st)?;

            // A server joins: it takes its share.
            st.apply(Command::RegisterServer { token: 1 << 100, address: "new:1".into(), incarnation: 1 }).unwrap();
            settle(&mut st)?;
            check_settled(&st)?;

            // One is decommissioned: everything it held moves, and it is gone.
            let id = st.servers[victim % st.servers.len()].info.id;
            let before = st.clone();
            match st.apply(Command::Decommission { id }) {
                Ok(_) => {
                    settle(&mut st)?;
                    prop_assert!(st.server(id).is_none(), "{:?} is gone", id);
                    check_settled(&st)?;
                }
                Err(e) => {
                    prop_assert!(matches!(e, CommandError::WouldUnderReplicate { .. }), "{}", e);
                    prop_assert_eq!(&st, &before);
                }
            }
        }

        /// With planning off ([`PLAN_TRANSFERS`] false): the same invariants
        /// after every command, and no transfer nor Leaving server ever appears; then, every
        /// server brought back, each decommission either removes a server that holds nothing
        /// at once or is refused, `TransfersOff` for one that holds regions, changing nothing.
        #[test]
        fn command_sequences_without_planning_keep_the_invariants(steps in proptest::collection::vec(step(), 1..60)) {
            let mut st = ClusterState { plan_transfers: false, ..ClusterState::default() };
            apply_steps(&mut st, steps)?;
            bring_back(&mut st)?;
            for id in st.servers.iter().map(|s| s.info.id).collect::<Vec<_>>() {
                let before = st.clone();
                let holds = sets(&st).iter().any(|set| set.contains(&id));
                match st.apply(Command::Decommission { id }) {
                    Ok(outcome) => {
                        prop_assert!(!holds);
                        prop_assert_eq!(outcome, CommandOutcome::Decommissioned { id, removed: true });
                    }
                    Err(CommandError::TransfersOff { regions, .. }) => {
                        prop_assert!(holds && regions > 0);
                        prop_assert_eq!(&st, &before);
                    }
                    Err(e) => {
                        prop_assert!(matches!(e, CommandError::WouldUnderReplicate { .. }), "{}", e);
                        prop_assert_eq!(&st, &before);
                    }
                }
                check_state(&st)?;
            }
        }

        /// Key splits under planning (every new region led by the split one's leader), settled
        /// after each: holdings stay balanced (`check_settled`), and point leadership spreads
        /// over the servers in each class of regions (made or cut by splits; the others), none
        /// leading more than K − 1 regions over its share of a class (`ceil(regions / n)`, one
        /// more for the others): a move hands leadership to a region's second member only, and
        /// with K = 3 a leader's regions may all have the same one.
        #[test]
        fn leadership_spreads_after_key_splits(
            n in 4u64..8,
            tolerate in 1u32..3,
            partitions in 1u32..12,
            splits in proptest::collection::vec((any::<u32>(), -1_000_000i64..1_000_000), 0..40),
        ) {
            // At least two servers more than replicas: with as many, every server holds every
            // region and no transfer can move leadership; with one more, every region of a
            // leader may have the same second member, the only one a move can hand it to.
            let tolerate = tolerate.min(n as u32 - 3);
            let mut st = planning(with_servers(n));
            let text = format!(
                "space t key int k attributes int a create {partitions} partitions \
                 tolerate {tolerate} failures placement ordered"
            );
            st.apply(Command::AddSpace { schema: parse_space(&text).unwrap() }).unwrap();
            settle(&mut st)?;
            for (pick, at) in splits {
                // The region holding `at`, mostly: the splits follow where keys are.
                let space = &st.spaces[0];
                let keys = &space.tessellations()[0];
                let region = if pick % 4 == 0 {
                    pick % keys.regions_count()
                } else {
                    tessera_geometry::key_region(keys, &Value::Int(at)).0
                };
                let change = SpaceChange::SplitKeyRegion { region, at: Value::Int(at) };
                let _ = st.apply(Command::AlterSpace { name: "t".into(), change });
                settle(&mut st)?;
            }
            check_settled(&st)?;
            // Per class (regions splits made or cut; the others), the regions each server leads.
            let space = &st.spaces[0];
            let class = split_made(space);
            for c in [false, true] {
                let regions = class.iter().filter(|&&x| x == c).count() as u64;
                let share = regions.div_ceil(n) + u64::from(!c);
                let mut led: HashMap<ServerId, u64> = HashMap::new();
                for (set, _) in space.replicas[0].iter().zip(&class).filter(|(_, &x)| x == c) {
                    *led.entry(set[0]).or_default() += 1;
                }
                for (s, l) in &led {
                    prop_assert!(
                        *l <= share + u64::from(tolerate),
                        "{:?} leads {} of {} regions (split: {}) on {} servers: {:?}", s, l, regions, c, n, led
                    );
                }
            }
        }

        /// The balance bound for any server count, K and partition count, with other spaces
        /// already loading some servers unevenly.
        #[test]
        fn assignment_is_balanced(n in 1u64..12, tolerate in 0u32..4, partitions in 1u32..200, subs in 0usize..4, skew in 0u32..3) {
            let tolerate = tolerate.min(n as u32 - 1);
            let mut st = with_servers(n.min(2));
            for i in 0..skew {
                let t = tolerate.min(st.servers.len() as u32 - 1);
                st.apply(Command::AddSpace { schema: schema(&format!("skew{i}"), 1, 7, t) }).unwrap();
            }
            for i in 2..n {
                st.apply(Command::RegisterServer { token: 1000 + i as u128, address: format!("10.0.0.{i}:2000"), incarnation: 1 }).unwrap();
            }
            st.apply(Command::AddSpace { schema: schema("s", subs, partitions, tolerate) }).unwrap();
            check_space(&st, st.spaces.last().unwrap());
            // Deterministic: the same inputs give the same sets.
            let existing = st.spaces[..st.spaces.len() - 1].iter().flat_map(SpaceConfig::replica_sets);
            let again = assign_replicas(&st.spaces.last().unwrap().schema, &st.servers.iter().map(|s| s.info.id).collect::<Vec<_>>(), existing);
            prop_assert_eq!(&again, &st.spaces.last().unwrap().replicas);
        }
    }
}
