//! The structures of data format 1 (protocol 4) that changed since, kept only to read the
//! files of a format-1 data directory while it is migrated ([`crate::data_format`]): decoded
//! as they were written, then converted. Nothing writes them.
//!
//! What changed in format 2: [`SpaceConfig`] gained `resting` (the places Resting servers
//! left), so the configuration a server keeps and the cluster state a coordinator snapshots
//! encode differently; and both files now start with a header saying their format
//! ([`crate::data_format::tag`]).
//!
//! They encode too, for the tests that make format-1 files to migrate.

use serde::{Deserialize, Serialize};
use tessera_types::{Epoch, Shape, SpaceSchema};

use crate::config::{
    AdaptationRecord, Build, Configuration, Joined, ModelConstants, ServerInfo, ShapeEntry,
    SpaceConfig, Transfer,
};
use tessera_types::ServerId;

/// [`SpaceConfig`] as format 1 encodes it: every field but `resting`, in the same order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpaceConfig1 {
    pub id: u64,
    pub schema: SpaceSchema,
    pub replicas: Vec<Vec<Vec<ServerId>>>,
    pub transfers: Vec<Transfer>,
    pub joined: Vec<Joined>,
    pub build: Option<Build>,
    pub adaptations: Vec<AdaptationRecord>,
    pub shapes: Vec<Shape>,
    pub shape_entries: Vec<ShapeEntry>,
    pub formula_entries: Vec<ShapeEntry>,
}

impl From<SpaceConfig1> for SpaceConfig {
    /// Nobody rested in format 1.
    fn from(s: SpaceConfig1) -> SpaceConfig {
        SpaceConfig {
            id: s.id,
            schema: s.schema,
            replicas: s.replicas,
            transfers: s.transfers,
            joined: s.joined,
            build: s.build,
            adaptations: s.adaptations,
            shapes: s.shapes,
            shape_entries: s.shape_entries,
            formula_entries: s.formula_entries,
            resting: Vec::new(),
            property_index: Default::default(),
        }
    }
}

/// [`Configuration`] as format 1 encodes it (a server's `configuration` file).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Configuration1 {
    pub epoch: Epoch,
    pub servers: Vec<ServerInfo>,
    pub spaces: Vec<SpaceConfig1>,
    pub model: Option<ModelConstants>,
}

impl From<Configuration1> for Configuration {
    fn from(c: Configuration1) -> Configuration {
        Configuration {
            epoch: c.epoch,
            servers: c.servers,
            spaces: c.spaces.into_iter().map(SpaceConfig::from).collect(),
            model: c.model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    /// Format 1's encoding is format 2's without the trailing `resting` of each space: a
    /// configuration encoded by today's types with that field cut off decodes as format 1 and
    /// converts back to itself.
    #[test]
    fn a_format_1_configuration_converts_to_the_same_configuration() {
        let schema = parse_space(
            "space hotels key id attributes string city, int price subspace city subspace price",
        )
        .unwrap();
        let config = Configuration {
            epoch: Epoch(7),
            servers: vec![ServerInfo {
                id: ServerId(1),
                address: "127.0.0.1:1".into(),
                state: crate::ServerState::Available,
            }],
            spaces: vec![SpaceConfig::owned_by(3, schema, &[ServerId(1)])],
            model: None,
        };
        let mut bytes = postcard::to_allocvec(&config).unwrap();
        // `resting` (an empty list: one byte) ends the only space, and `model` (None: one
        // byte) ends the configuration.
        assert_eq!(bytes[bytes.len() - 2..], [0, 0]);
        bytes.remove(bytes.len() - 2);
        let old: Configuration1 = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(Configuration::from(old), config);
    }
}
