//! The configuration: the cluster map every client and server acts on.
//!
//! It names the servers, the spaces, and for every region of every subspace its replica set
//! (K = f + 1 servers, the first being the point leader for key regions). Every change makes a
//! new configuration with a strictly greater epoch. A single `tessera dev` server is simply a
//! configuration with one server that owns every region.

use serde::{Deserialize, Serialize};
use tessera_geometry::{RegionIndex, Tessellation};
use tessera_types::{Epoch, ServerId, SpaceSchema, SubspaceId};

/// What the coordinator knows of a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ServerState {
    /// Registered and taking part in replica sets.
    Available,
    /// The coordinators removed it from every replica set it could leave: its lease lapsed
    /// (dead, hung or cut off from the coordinators), it reported a storage failure, or it
    /// restarted. It stays in regions where it is the only replica (their data is nowhere
    /// else) and is given no new ones; registering again makes it `Available`.
    Offline,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub id: ServerId,
    /// Address clients and other servers reach it at, `host:port`.
    pub address: String,
    pub state: ServerState,
}

/// A space in the configuration: its schema and who owns each of its regions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceConfig {
    /// Unique for the life of the cluster: the epoch in which the space was created. A space
    /// dropped and created again under the same name gets a new id.
    pub id: u64,
    pub schema: SpaceSchema,
    /// `replicas[subspace][region]`: the replica set of that region, in chain order.
    pub replicas: Vec<Vec<Vec<ServerId>>>,
}

impl SpaceConfig {
    /// A space whose every region is owned by `servers` (in that chain order).
    pub fn owned_by(id: u64, schema: SpaceSchema, servers: &[ServerId]) -> SpaceConfig {
        let replicas = schema
            .subspaces
            .iter()
            .map(|s| {
                let regions = Tessellation::new(s.dimensions.len(), schema.partitions).regions_count();
                vec![servers.to_vec(); regions as usize]
            })
            .collect();
        SpaceConfig { id, schema, replicas }
    }

    /// The tessellation of every subspace, in subspace order.
    pub fn tessellations(&self) -> Vec<Tessellation> {
        self.schema
            .subspaces
            .iter()
            .map(|s| Tessellation::new(s.dimensions.len(), self.schema.partitions))
            .collect()
    }

    pub fn replicas_of(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
        &self.replicas[subspace.get()][region.0 as usize]
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    pub epoch: Epoch,
    pub servers: Vec<ServerInfo>,
    pub spaces: Vec<SpaceConfig>,
}

/// Why a configuration received from elsewhere cannot be acted on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("configuration epoch {epoch}: {reason}")]
pub struct ConfigurationError {
    pub epoch: Epoch,
    pub reason: String,
}

impl Configuration {
    /// Checks the shape a server and a client rely on before acting on a configuration that
    /// came over the network: spaces with distinct names and ids, schemas whose subspaces can
    /// be tessellated, one replica set per region, each non-empty, of distinct servers that the
    /// configuration lists. Without this, a bad configuration would make indexing panic.
    pub fn check(&self) -> Result<(), ConfigurationError> {
        let fail = |reason: String| Err(ConfigurationError { epoch: self.epoch, reason });
        let mut names = std::collections::BTreeSet::new();
        let mut ids = std::collections::BTreeSet::new();
        for space in &self.spaces {
            let schema = &space.schema;
            if !names.insert(&schema.name) || !ids.insert(space.id) {
                return fail(format!("space {:?} (id {}) is listed twice", schema.name, space.id));
            }
            if schema.attributes.is_empty()
                || schema.subspaces.is_empty()
                || schema.subspaces.len() > tessera_types::constants::SUBSPACES_MAX
                || !(1..=tessera_types::constants::PARTITIONS_MAX).contains(&schema.partitions)
            {
                return fail(format!("space {:?} has an impossible schema", schema.name));
            }
            for s in &schema.subspaces {
                let dims_ok = (1..=tessera_types::constants::SUBSPACE_DIMENSIONS_MAX).contains(&s.dimensions.len())
                    && s.dimensions.iter().all(|d| d.get() < schema.attributes.len());
                if !dims_ok {
                    return fail(format!("space {:?} has a subspace with impossible dimensions", schema.name));
                }
            }
            if space.replicas.len() != schema.subspaces.len() {
                return fail(format!("space {:?}: replica sets for {} subspaces", schema.name, space.replicas.len()));
            }
            for (n, (sets, t)) in space.replicas.iter().zip(space.tessellations()).enumerate() {
                if sets.len() != t.regions_count() as usize {
                    return fail(format!("space {:?} subspace {n}: {} replica sets for {} regions", schema.name, sets.len(), t.regions_count()));
                }
                for set in sets {
                    let mut members: Vec<ServerId> = set.clone();
                    members.sort();
                    members.dedup();
                    if set.is_empty() || members.len() != set.len() || set.iter().any(|s| self.server(*s).is_none()) {
                        return fail(format!("space {:?} subspace {n}: replica set {set:?} is empty, repeats a server or names an unknown one", schema.name));
                    }
                }
            }
        }
        Ok(())
    }

    pub fn space(&self, name: &str) -> Option<&SpaceConfig> {
        self.spaces.iter().find(|s| s.schema.name == name)
    }

    pub fn server(&self, id: ServerId) -> Option<&ServerInfo> {
        self.servers.iter().find(|s| s.id == id)
    }
}
