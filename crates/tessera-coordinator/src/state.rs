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
//! - no replica set is ever empty: a server leaving the replica sets (taken offline, or
//!   restarted) stays in those where it is the only member (see [`remove_from_replica_sets`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tessera_geometry::Tessellation;
use tessera_protocol::{Configuration, ServerInfo, ServerState, SpaceConfig};
use tessera_types::{Epoch, SchemaError, ServerId, SpaceSchema};

/// Longest server address accepted by registration (`host:port`).
pub const ADDRESS_BYTES_MAX: usize = 256;

/// Largest encoded configuration the coordinator lets a space creation produce. The whole
/// configuration travels in one frame, so it must stay under the frame limit, with room to spare
/// for the frame's header.
pub const CONFIGURATION_BYTES_MAX: usize = tessera_protocol::constants::FRAME_BYTES_MAX - 4096;

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
}

impl Default for ClusterState {
    fn default() -> Self {
        ClusterState { epoch: Epoch(0), servers: Vec::new(), spaces: Vec::new(), next_server_id: 1 }
    }
}

/// A change to the configuration: the payload of a Raft log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A server joins, or comes back (same token) possibly at a new address. A new (greater)
    /// incarnation is a restart: the process lost its in-memory chain state, so it leaves every
    /// replica set it can leave. An Offline server registering again becomes Available (with
    /// the regions it still holds, normally none).
    RegisterServer { token: u128, address: String, incarnation: u64 },
    /// The failure detector's decision (lease lapsed, or the server reported a storage
    /// failure): the server becomes Offline and leaves every replica set it can leave. Applies
    /// only while the server is Available and still at `incarnation`.
    MarkOffline { id: ServerId, incarnation: u64 },
    /// Create a space; its replica sets are assigned when the command applies.
    AddSpace { schema: SpaceSchema },
    RmSpace { name: String },
}

/// What a successful command did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandOutcome {
    /// `changed` is false when the token was known at this address already (no new epoch).
    Registered { id: ServerId, changed: bool },
    /// The new space's id (the epoch that created it).
    SpaceAdded { id: u64 },
    SpaceRemoved,
    MarkedOffline { id: ServerId },
}

/// Why a command changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum CommandError {
    #[error("space {0:?} exists already")]
    SpaceExists(String),
    #[error("no space named {0:?}")]
    UnknownSpace(String),
    #[error("space {space:?} needs {needed} servers (tolerate {} failures + 1), but {available} are available", needed - 1)]
    TooFewServers { space: String, needed: u32, available: u32 },
    #[error("the space is not valid: {0}")]
    InvalidSchema(SchemaError),
    #[error("the configuration would take {bytes} bytes, over the {max}-byte limit: fewer partitions, subspaces or replicas")]
    ConfigurationTooLarge { bytes: usize, max: usize },
    #[error("server address {0:?} is not valid: 1..={ADDRESS_BYTES_MAX} bytes expected")]
    InvalidAddress(String),
    #[error("no server {0} is registered")]
    UnknownServer(ServerId),
    #[error("server {id} is at incarnation {current}, not {incarnation}: that process is an earlier one")]
    StaleServer { id: ServerId, incarnation: u64, current: u64 },
    #[error("server {0} is offline already")]
    AlreadyOffline(ServerId),
}

impl ClusterState {
    /// The configuration servers and clients act on.
    pub fn configuration(&self) -> Configuration {
        Configuration {
            epoch: self.epoch,
            servers: self.servers.iter().map(|s| s.info.clone()).collect(),
            spaces: self.spaces.clone(),
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
    pub fn apply(&mut self, command: Command) -> Result<CommandOutcome, CommandError> {
        match command {
            Command::RegisterServer { token, address, incarnation } => self.register(token, address, incarnation),
            Command::MarkOffline { id, incarnation } => self.mark_offline(id, incarnation),
            Command::AddSpace { schema } => self.add_space(schema),
            Command::RmSpace { name } => self.rm_space(&name),
        }
    }

    fn bump(&mut self) -> Epoch {
        self.epoch = Epoch(self.epoch.0 + 1);
        self.epoch
    }

    fn register(&mut self, token: u128, address: String, incarnation: u64) -> Result<CommandOutcome, CommandError> {
        if address.is_empty() || address.len() > ADDRESS_BYTES_MAX {
            return Err(CommandError::InvalidAddress(address));
        }
        if let Some(i) = self.servers.iter().position(|s| s.token == token) {
            let server = &self.servers[i];
            let id = server.info.id;
            if incarnation < server.incarnation {
                return Err(CommandError::StaleServer { id, incarnation, current: server.incarnation });
            }
            let restarted = incarnation > server.incarnation;
            let offline = server.info.state != ServerState::Available;
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
            server.info.state = ServerState::Available;
            server.incarnation = incarnation;
            self.bump();
            return Ok(CommandOutcome::Registered { id, changed: true });
        }
        let id = ServerId(self.next_server_id);
        self.next_server_id += 1;
        self.servers.push(RegisteredServer {
            info: ServerInfo { id, address, state: ServerState::Available },
            token,
            incarnation,
        });
        self.bump();
        Ok(CommandOutcome::Registered { id, changed: true })
    }

    fn mark_offline(&mut self, id: ServerId, incarnation: u64) -> Result<CommandOutcome, CommandError> {
        let server = self.servers.iter_mut().find(|s| s.info.id == id).ok_or(CommandError::UnknownServer(id))?;
        if server.incarnation != incarnation {
            return Err(CommandError::StaleServer { id, incarnation, current: server.incarnation });
        }
        if server.info.state != ServerState::Available {
            return Err(CommandError::AlreadyOffline(id));
        }
        server.info.state = ServerState::Offline;
        remove_from_replica_sets(&mut self.spaces, id);
        self.bump();
        Ok(CommandOutcome::MarkedOffline { id })
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
            .map(|s| Tessellation::new(s.dimensions.len(), schema.partitions).regions_count() as usize)
            .sum();
        let lower_bound = regions.saturating_mul(k as usize + 1);
        if lower_bound > CONFIGURATION_BYTES_MAX {
            return Err(CommandError::ConfigurationTooLarge { bytes: lower_bound, max: CONFIGURATION_BYTES_MAX });
        }
        let replicas = assign_replicas(&schema, &available, &self.spaces);
        let id = self.epoch.0 + 1;
        let space = SpaceConfig { id, schema, replicas, transfers: Vec::new(), joined: Vec::new() };
        let mut next = self.configuration();
        next.epoch = Epoch(id);
        next.spaces.push(space);
        let bytes = postcard::to_allocvec(&next).map(|v| v.len()).unwrap_or(usize::MAX);
        if bytes > CONFIGURATION_BYTES_MAX {
            return Err(CommandError::ConfigurationTooLarge { bytes, max: CONFIGURATION_BYTES_MAX });
        }
        let space = next.spaces.pop().expect("pushed above");
        self.spaces.push(space);
        self.bump();
        Ok(CommandOutcome::SpaceAdded { id })
    }
}

/// Takes `id` out of every replica set of every space, keeping the order of the others: the next
/// replica moves up, so where `id` was the head, its successor becomes the point leader.
///
/// Except where `id` is the region's only member: a region never has zero replicas. Its data is
/// on that server alone, so the region keeps it (even offline) until the server comes back or
/// re-replication copies the data elsewhere; dropping it would lose the region for good.
///
/// Returns whether any set changed.
pub fn remove_from_replica_sets(spaces: &mut [SpaceConfig], id: ServerId) -> bool {
    let mut changed = false;
    for set in spaces.iter_mut().flat_map(|s| s.replicas.iter_mut()).flatten() {
        if set.contains(&id) && set.iter().any(|s| *s != id) {
            set.retain(|s| *s != id);
            changed = true;
        }
    }
    for space in spaces.iter_mut() {
        space.forget_departed();
    }
    changed
}

/// Checks a schema the way [`SpaceSchema::new`] does, so that a command that did not come from
/// the parser (a corrupt or hostile log entry) cannot make `apply` panic.
fn validate_schema(schema: &SpaceSchema) -> Result<(), SchemaError> {
    let (Some(key), Some(first)) = (schema.attributes.first(), schema.subspaces.first()) else {
        return Err(SchemaError::EmptySubspace);
    };
    if first.dimensions.len() != 1 || first.dimensions[0].get() != 0 {
        return Err(SchemaError::EmptySubspace);
    }
    let mut subspaces = Vec::with_capacity(schema.subspaces.len() - 1);
    for s in &schema.subspaces[1..] {
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
    )?;
    if &rebuilt != schema {
        return Err(SchemaError::EmptySubspace);
    }
    Ok(())
}

/// Assigns the replica sets of a new space over `servers` (K = `schema.replicas()` of them per
/// region, all distinct; `servers.len() >= K`).
///
/// The rule, applied region by region in subspace order, then region order:
/// - the members are the K servers holding the fewest regions *of this subspace* so far; ties go
///   to the server holding the fewest regions over the whole cluster (every existing space, plus
///   what this space has assigned so far), then to the smaller id;
/// - the chain order puts first the member heading the fewest regions of this subspace; ties go
///   to the fewest heads over the whole cluster, then to the smaller id.
///
/// Within a subspace, holdings never differ by more than one between servers, so nobody holds
/// more than `ceil(regions * K / servers)`; heads spread the same way. The cluster-wide
/// tie-breaks send the leftovers of each subspace to the least-loaded servers, so load evens out
/// across spaces too. Deterministic: it depends only on its inputs.
pub fn assign_replicas(schema: &SpaceSchema, servers: &[ServerId], existing: &[SpaceConfig]) -> Vec<Vec<Vec<ServerId>>> {
    let k = schema.replicas() as usize;
    assert!(k >= 1 && servers.len() >= k, "assign_replicas needs at least K servers");
    let mut servers = servers.to_vec();
    servers.sort();
    servers.dedup();
    let index: HashMap<ServerId, usize> = servers.iter().enumerate().map(|(i, s)| (*s, i)).collect();
    let n = servers.len();
    let mut global_hold = vec![0u64; n];
    let mut global_head = vec![0u64; n];
    for space in existing {
        for subspace in &space.replicas {
            for set in subspace {
                for (pos, s) in set.iter().enumerate() {
                    if let Some(&i) = index.get(s) {
                        global_hold[i] += 1;
                        if pos == 0 {
                            global_head[i] += 1;
                        }
                    }
                }
            }
        }
    }
    let mut out = Vec::with_capacity(schema.subspaces.len());
    let mut order: Vec<usize> = (0..n).collect();
    for subspace in &schema.subspaces {
        let regions = Tessellation::new(subspace.dimensions.len(), schema.partitions).regions_count() as usize;
        let mut hold = vec![0u64; n];
        let mut head = vec![0u64; n];
        let mut sets = Vec::with_capacity(regions);
        for _ in 0..regions {
            order.sort_by_key(|&i| (hold[i], global_hold[i], i));
            let mut members: Vec<usize> = order[..k].to_vec();
            members.sort_by_key(|&i| (head[i], global_head[i], i));
            head[members[0]] += 1;
            global_head[members[0]] += 1;
            for &i in &members {
                hold[i] += 1;
                global_hold[i] += 1;
            }
            sets.push(members.iter().map(|&i| servers[i]).collect());
        }
        out.push(sets);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_types::parse_space;

    fn schema(name: &str, subspaces: usize, partitions: u32, tolerate: u32) -> SpaceSchema {
        let mut text = format!("space {name}\nkey k\nattributes int a, int b, string c\n");
        let dims = ["a", "b, c", "a, b, c", "c"];
        for d in dims.iter().take(subspaces) {
            text.push_str(&format!("subspace {d}\n"));
        }
        text.push_str(&format!("create {partitions} partitions\ntolerate {tolerate} failures\n"));
        parse_space(&text).unwrap()
    }

    fn with_servers(n: u64) -> ClusterState {
        let mut st = ClusterState::default();
        for i in 0..n {
            st.apply(Command::RegisterServer { token: 1000 + i as u128, address: format!("10.0.0.{i}:2000"), incarnation: 1 })
                .unwrap();
        }
        st
    }

    /// A space just created: K distinct Available servers per region, within the balance bound.
    fn check_space(st: &ClusterState, space: &SpaceConfig) {
        let k = space.schema.replicas() as usize;
        let n = st.servers.iter().filter(|s| s.info.state == ServerState::Available).count() as u64;
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
                    let r = st.servers.iter().find(|r| r.info.id == *s).expect("members are registered");
                    assert_eq!(r.info.state, ServerState::Available, "{s:?} is given regions only while Available");
                    *hold.entry(*s).or_default() += 1;
                }
                *heads.entry(set[0]).or_default() += 1;
            }
            for (s, h) in &hold {
                assert!(*h <= bound, "{s:?} holds {h} of {regions} regions (K={k}, n={n}, bound {bound})");
            }
            for (s, h) in &heads {
                assert!(*h <= head_bound, "{s:?} heads {h} of {regions} regions (n={n}, bound {head_bound})");
            }
        }
    }

    #[test]
    fn register_assigns_ids_in_order_and_is_idempotent() {
        let mut st = ClusterState::default();
        let a = st.apply(Command::RegisterServer { token: 7, address: "a:1".into(), incarnation: 1 }).unwrap();
        assert_eq!(a, CommandOutcome::Registered { id: ServerId(1), changed: true });
        assert_eq!(st.epoch, Epoch(1));
        let b = st.apply(Command::RegisterServer { token: 9, address: "b:1".into(), incarnation: 1 }).unwrap();
        assert_eq!(b, CommandOutcome::Registered { id: ServerId(2), changed: true });
        let again = st.apply(Command::RegisterServer { token: 7, address: "a:1".into(), incarnation: 1 }).unwrap();
        assert_eq!(again, CommandOutcome::Registered { id: ServerId(1), changed: false });
        assert_eq!(st.epoch, Epoch(2), "same address: no new epoch");
        let moved = st.apply(Command::RegisterServer { token: 7, address: "a:2".into(), incarnation: 1 }).unwrap();
        assert_eq!(moved, CommandOutcome::Registered { id: ServerId(1), changed: true });
        assert_eq!(st.epoch, Epoch(3));
        assert_eq!(st.configuration().server(ServerId(1)).unwrap().address, "a:2");
        assert_eq!(st.servers.len(), 2);
        assert!(matches!(
            st.apply(Command::RegisterServer { token: 1, address: String::new(), incarnation: 1 }),
            Err(CommandError::InvalidAddress(_))
        ));
    }

    fn reg(token: u128, address: &str, incarnation: u64) -> Command {
        Command::RegisterServer { token, address: address.into(), incarnation }
    }

    /// Every replica set of every space, flattened, in a stable order.
    fn sets(st: &ClusterState) -> Vec<Vec<ServerId>> {
        st.spaces.iter().flat_map(|s| s.replicas.iter().flatten().cloned()).collect()
    }

    fn state_of(st: &ClusterState, id: ServerId) -> ServerState {
        st.configuration().server(id).unwrap().state
    }

    #[test]
    fn mark_offline_removes_the_server_keeping_the_order_of_the_others() {
        let mut st = with_servers(3);
        st.apply(Command::AddSpace { schema: schema("s", 1, 8, 2) }).unwrap();
        st.apply(Command::AddSpace { schema: schema("solo", 0, 4, 0) }).unwrap();
        let before = st.clone();
        let victim = ServerId(2);
        let out = st.apply(Command::MarkOffline { id: victim, incarnation: 1 }).unwrap();
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
                let expected: Vec<ServerId> = old.iter().copied().filter(|s| *s != victim).collect();
                assert_eq!(new, expected, "the others keep their order");
                if old[0] == victim {
                    assert_eq!(new[0], old[1], "the next replica becomes the point leader");
                }
            }
        }
        assert!(sole > 0, "the single-replica space gave the victim some regions of its own");

        // A second decision about it, a stale incarnation or an unknown server change nothing.
        let after = st.clone();
        assert_eq!(st.apply(Command::MarkOffline { id: victim, incarnation: 1 }), Err(CommandError::AlreadyOffline(victim)));
        assert_eq!(
            st.apply(Command::MarkOffline { id: ServerId(1), incarnation: 7 }),
            Err(CommandError::StaleServer { id: ServerId(1), incarnation: 7, current: 1 })
        );
        assert_eq!(st.apply(Command::MarkOffline { id: ServerId(9), incarnation: 1 }), Err(CommandError::UnknownServer(ServerId(9))));
        assert_eq!(st, after);

        // An Offline server gets nothing in a new space, and does not count as available.
        st.apply(Command::AddSpace { schema: schema("t", 2, 16, 1) }).unwrap();
        let t = st.spaces.last().unwrap();
        assert!(t.replicas.iter().flatten().all(|set| !set.contains(&victim)), "{t:?}");
        check_space(&st, t);
        assert_eq!(
            st.apply(Command::AddSpace { schema: schema("u", 1, 4, 2) }),
            Err(CommandError::TooFewServers { space: "u".into(), needed: 3, available: 2 })
        );
    }

    #[test]
    fn registration_by_incarnation() {
        let mut st = ClusterState::default();
        st.apply(reg(1, "a:1", 10)).unwrap();
        st.apply(reg(2, "b:1", 10)).unwrap();
        st.apply(reg(3, "c:1", 10)).unwrap();
        st.apply(Command::AddSpace { schema: schema("s", 1, 8, 2) }).unwrap();
        st.apply(Command::AddSpace { schema: schema("solo", 0, 4, 0) }).unwrap();
        let a = ServerId(1);

        // Same incarnation, same address: nothing changes.
        let before = st.clone();
        assert_eq!(st.apply(reg(1, "a:1", 10)), Ok(CommandOutcome::Registered { id: a, changed: false }));
        assert_eq!(st, before);
        // An earlier incarnation is refused and changes nothing.
        assert_eq!(st.apply(reg(1, "a:1", 9)), Err(CommandError::StaleServer { id: a, incarnation: 9, current: 10 }));
        assert_eq!(st, before);
        // Same incarnation, new address: the address changes, the sets do not.
        assert_eq!(st.apply(reg(1, "a:2", 10)), Ok(CommandOutcome::Registered { id: a, changed: true }));
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(sets(&st), sets(&before));
        assert_eq!(st.configuration().server(a).unwrap().address, "a:2");

        // A new incarnation: a restart. It leaves every set it can leave, stays Available.
        let before = st.clone();
        assert_eq!(st.apply(reg(1, "a:3", 11)), Ok(CommandOutcome::Registered { id: a, changed: true }));
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(state_of(&st, a), ServerState::Available);
        assert_eq!(st.server(a).unwrap().incarnation, 11);
        assert_eq!(st.configuration().server(a).unwrap().address, "a:3");
        for (old, new) in sets(&before).iter().zip(sets(&st)) {
            if old == &[a] {
                assert_eq!(new, [a]);
            } else {
                assert_eq!(new, old.iter().copied().filter(|s| *s != a).collect::<Vec<_>>());
            }
        }
        assert!(sets(&st).iter().any(|set| set == &[a]), "it keeps the regions it alone holds");

        // Offline, then registering again (same incarnation): Available, nothing else changes.
        st.apply(Command::MarkOffline { id: ServerId(2), incarnation: 10 }).unwrap();
        let before = st.clone();
        assert_eq!(st.apply(reg(2, "b:1", 10)), Ok(CommandOutcome::Registered { id: ServerId(2), changed: true }));
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(state_of(&st, ServerId(2)), ServerState::Available);
        assert_eq!(sets(&st), sets(&before));
        // Offline, then restarted: Available at the new incarnation.
        st.apply(Command::MarkOffline { id: ServerId(3), incarnation: 10 }).unwrap();
        let before = st.clone();
        assert_eq!(st.apply(reg(3, "c:1", 12)), Ok(CommandOutcome::Registered { id: ServerId(3), changed: true }));
        assert_eq!(st.epoch.0, before.epoch.0 + 1);
        assert_eq!(state_of(&st, ServerId(3)), ServerState::Available);
        assert_eq!(st.server(ServerId(3)).unwrap().incarnation, 12);
        // A decision about the earlier incarnation cannot hit the restarted server.
        let before = st.clone();
        assert!(matches!(st.apply(Command::MarkOffline { id: ServerId(3), incarnation: 10 }), Err(CommandError::StaleServer { .. })));
        assert_eq!(st, before);
    }

    #[test]
    fn add_and_remove_spaces() {
        let mut st = with_servers(4);
        let before = st.clone();
        let out = st.apply(Command::AddSpace { schema: schema("s", 2, 16, 1) }).unwrap();
        assert_eq!(out, CommandOutcome::SpaceAdded { id: 5 });
        assert_eq!(st.epoch, Epoch(5));
        let cfg = st.configuration();
        let space = cfg.space("s").unwrap();
        assert_eq!(space.id, 5);
        check_space(&st, space);
        assert_eq!(
            st.apply(Command::AddSpace { schema: schema("s", 1, 4, 0) }),
            Err(CommandError::SpaceExists("s".into()))
        );
        assert_eq!(st.apply(Command::RmSpace { name: "s".into() }), Ok(CommandOutcome::SpaceRemoved));
        assert_eq!(st.epoch, Epoch(6));
        assert_eq!(st.spaces, before.spaces);
        assert_eq!(st.apply(Command::RmSpace { name: "s".into() }), Err(CommandError::UnknownSpace("s".into())));
        // Created again: a new id.
        assert_eq!(st.apply(Command::AddSpace { schema: schema("s", 1, 4, 0) }), Ok(CommandOutcome::SpaceAdded { id: 7 }));
    }

    #[test]
    fn too_few_servers_names_both_numbers() {
        let mut st = with_servers(2);
        let before = st.clone();
        let err = st.apply(Command::AddSpace { schema: schema("s", 1, 8, 2) }).unwrap_err();
        assert_eq!(err, CommandError::TooFewServers { space: "s".into(), needed: 3, available: 2 });
        let msg = err.to_string();
        assert!(msg.contains('3') && msg.contains('2'), "{msg}");
        assert_eq!(st, before);
    }

    #[test]
    fn a_configuration_over_the_frame_limit_is_refused() {
        let mut st = with_servers(8);
        let before = st.clone();
        let big = schema("big", 4, tessera_types::constants::PARTITIONS_MAX, 7);
        assert!(matches!(st.apply(Command::AddSpace { schema: big }), Err(CommandError::ConfigurationTooLarge { .. })));
        assert_eq!(st, before);
    }

    #[test]
    fn an_invalid_schema_is_refused_not_a_panic() {
        let mut st = with_servers(3);
        let mut bad = schema("s", 1, 8, 0);
        bad.partitions = 0;
        assert!(matches!(st.apply(Command::AddSpace { schema: bad }), Err(CommandError::InvalidSchema(_))));
        let mut bad = schema("s", 1, 8, 0);
        bad.subspaces[1].dimensions.clear();
        assert!(matches!(st.apply(Command::AddSpace { schema: bad }), Err(CommandError::InvalidSchema(_))));
        let mut bad = schema("s", 1, 8, 0);
        bad.subspaces[1].dimensions[0] = tessera_types::AttrIndex(60);
        assert!(matches!(st.apply(Command::AddSpace { schema: bad }), Err(CommandError::InvalidSchema(_))));
        assert_eq!(st.epoch, Epoch(3));
    }

    #[test]
    fn load_spreads_across_spaces() {
        // Servers join one by one between space creations; new spaces favour the least loaded.
        let mut st = with_servers(3);
        for i in 0..6 {
            st.apply(Command::AddSpace { schema: schema(&format!("s{i}"), 1, 10, 1) }).unwrap();
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

    /// A generated step: a command as generated, or one aimed at a registered server's current
    /// incarnation (resolved against the state it applies to), so the mix hits real servers.
    #[derive(Clone, Debug)]
    enum Step {
        Apply(Command),
        /// MarkOffline of the n-th server (mod their number) at its current incarnation.
        MarkCurrent(usize),
        /// The n-th server restarts: registers at its current incarnation + 1.
        Restart(usize),
    }

    impl Step {
        fn command(&self, st: &ClusterState) -> Command {
            let nth = |n: usize| &st.servers[n % st.servers.len()];
            match self {
                Step::Apply(c) => c.clone(),
                Step::MarkCurrent(_) | Step::Restart(_) if st.servers.is_empty() => {
                    Command::MarkOffline { id: ServerId(1), incarnation: 0 }
                }
                Step::MarkCurrent(n) => Command::MarkOffline { id: nth(*n).info.id, incarnation: nth(*n).incarnation },
                Step::Restart(n) => Command::RegisterServer {
                    token: nth(*n).token,
                    address: nth(*n).info.address.clone(),
                    incarnation: nth(*n).incarnation + 1,
                },
            }
        }
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0u128..6, 0u8..3, 0u64..3).prop_map(|(token, a, i)| Step::Apply(Command::RegisterServer { token, address: format!("h{a}:1"), incarnation: i })),
            3 => (0u8..4, 0usize..4, 1u32..40, 0u32..4).prop_map(|(n, subs, p, t)| Step::Apply(Command::AddSpace { schema: schema(&format!("s{n}"), subs, p, t) })),
            1 => (0u8..4).prop_map(|n| Step::Apply(Command::RmSpace { name: format!("s{n}") })),
            1 => (1u64..8, 0u64..3).prop_map(|(id, i)| Step::Apply(Command::MarkOffline { id: ServerId(id), incarnation: i })),
            2 => (0usize..8).prop_map(Step::MarkCurrent),
            2 => (0usize..8).prop_map(Step::Restart),
        ]
    }

    /// The invariants every state keeps, checked directly on it: no empty replica set, members
    /// distinct and registered, an Offline server only where it is the sole member.
    fn check_sets(st: &ClusterState) -> Result<(), TestCaseError> {
        for set in sets(st) {
            prop_assert!(!set.is_empty(), "an empty replica set");
            let mut d = set.clone();
            d.sort();
            d.dedup();
            prop_assert_eq!(d.len(), set.len(), "members are distinct: {:?}", set);
            for id in &set {
                let server = st.server(*id);
                prop_assert!(server.is_some(), "{:?} is registered", id);
                if server.unwrap().info.state == ServerState::Offline {
                    prop_assert_eq!(set.len(), 1, "offline {:?} is only in sets of its own: {:?}", id, set);
                }
            }
        }
        Ok(())
    }

    /// `after` is `before` with `id` gone from every set where it had company, in the same
    /// order; sets where it was alone, and sets without it, are unchanged.
    fn check_removed(before: &ClusterState, after: &ClusterState, id: ServerId) -> Result<(), TestCaseError> {
        let (old, new) = (sets(before), sets(after));
        prop_assert_eq!(old.len(), new.len());
        for (o, n) in old.iter().zip(&new) {
            if o.contains(&id) && o.len() > 1 {
                let mut expected = o.clone();
                expected.retain(|s| *s != id);
                prop_assert_eq!(n, &expected);
            } else {
                prop_assert_eq!(n, o);
            }
            if n.contains(&id) {
                prop_assert_eq!(n.len(), 1, "{:?} left only where it was the only replica", id);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any sequence of commands (registrations, restarts, servers taken offline, spaces
        /// added and removed): epochs bump by exactly one on change, failures change nothing,
        /// no replica set is ever empty, an Offline or just restarted server is left only in
        /// sets where it is the sole member (the others keeping their order), a new space's
        /// sets are K distinct Available servers within the balance bound, tokens keep their
        /// ids, and the state survives postcard.
        #[test]
        fn command_sequences_keep_the_invariants(steps in proptest::collection::vec(step(), 1..40)) {
            let mut st = ClusterState::default();
            let mut ids: HashMap<u128, ServerId> = HashMap::new();
            for s in steps {
                let c = s.command(&st);
                let before = st.clone();
                let result = st.apply(c.clone());
                match &result {
                    Err(_) => prop_assert_eq!(&st, &before),
                    Ok(CommandOutcome::Registered { changed: false, .. }) => prop_assert_eq!(&st, &before),
                    Ok(_) => prop_assert_eq!(st.epoch.0, before.epoch.0 + 1),
                }
                check_sets(&st)?;
                if let (Command::RegisterServer { token, address, incarnation }, Ok(CommandOutcome::Registered { id, .. })) = (&c, &result) {
                    let first = *ids.entry(*token).or_insert(*id);
                    prop_assert_eq!(first, *id, "a token keeps its id");
                    let cfg = st.configuration();
                    prop_assert_eq!(&cfg.server(*id).unwrap().address, address);
                    prop_assert_eq!(cfg.server(*id).unwrap().state, ServerState::Available);
                    prop_assert_eq!(st.server(*id).unwrap().incarnation, *incarnation);
                    match before.server_by_token(*token) {
                        Some(old) if old.incarnation < *incarnation => check_removed(&before, &st, *id)?,
                        _ => prop_assert_eq!(sets(&st), sets(&before)),
                    }
                }
                if let (Command::RegisterServer { token, incarnation, .. }, Err(e)) = (&c, &result) {
                    if let Some(old) = before.server_by_token(*token) {
                        prop_assert!(*incarnation < old.incarnation, "refused only as an earlier incarnation: {}", e);
                    }
                }
                if let (Command::MarkOffline { id, .. }, Ok(outcome)) = (&c, &result) {
                    prop_assert_eq!(outcome, &CommandOutcome::MarkedOffline { id: *id });
                    prop_assert_eq!(before.server(*id).unwrap().info.state, ServerState::Available);
                    prop_assert_eq!(st.server(*id).unwrap().info.state, ServerState::Offline);
                    check_removed(&before, &st, *id)?;
                    for (b, a) in before.servers.iter().zip(&st.servers) {
                        if b.info.id != *id {
                            prop_assert_eq!(b, a, "other servers are untouched");
                        }
                    }
                }
                if let (Command::MarkOffline { id, incarnation }, Err(e)) = (&c, &result) {
                    let refused = match before.server(*id) {
                        None => matches!(e, CommandError::UnknownServer(_)),
                        Some(s) if s.incarnation != *incarnation => matches!(e, CommandError::StaleServer { .. }),
                        Some(s) => s.info.state == ServerState::Offline && matches!(e, CommandError::AlreadyOffline(_)),
                    };
                    prop_assert!(refused, "{:?} refused with {}", c, e);
                }
                if let (Command::AddSpace { schema }, Ok(CommandOutcome::SpaceAdded { id })) = (&c, &result) {
                    prop_assert_eq!(*id, st.epoch.0);
                    let space = st.spaces.last().unwrap();
                    prop_assert_eq!(&space.schema, schema);
                    check_space(&st, space);
                }
                if let (Command::AddSpace { schema }, Err(CommandError::TooFewServers { needed, available, .. })) = (&c, &result) {
                    prop_assert_eq!(*needed, schema.replicas());
                    prop_assert!((*available as usize) < *needed as usize);
                    let live = st.servers.iter().filter(|s| s.info.state == ServerState::Available).count();
                    prop_assert_eq!(*available as usize, live);
                }
                let bytes = postcard::to_allocvec(&st).unwrap();
                let back: ClusterState = postcard::from_bytes(&bytes).unwrap();
                prop_assert_eq!(&back, &st);
            }
            // Ids are 1, 2, 3, ... in order of first registration.
            let mut got: Vec<u64> = st.servers.iter().map(|s| s.info.id.0).collect();
            got.sort();
            prop_assert_eq!(got, (1..=st.servers.len() as u64).collect::<Vec<_>>());
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
            let again = assign_replicas(&st.spaces.last().unwrap().schema, &st.servers.iter().map(|s| s.info.id).collect::<Vec<_>>(), &st.spaces[..st.spaces.len() - 1]);
            prop_assert_eq!(&again, &st.spaces.last().unwrap().replicas);
        }
    }
}
