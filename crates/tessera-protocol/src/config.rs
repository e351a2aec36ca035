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

impl Configuration {
    pub fn space(&self, name: &str) -> Option<&SpaceConfig> {
        self.spaces.iter().find(|s| s.schema.name == name)
    }

    pub fn server(&self, id: ServerId) -> Option<&ServerInfo> {
        self.servers.iter().find(|s| s.id == id)
    }
}
