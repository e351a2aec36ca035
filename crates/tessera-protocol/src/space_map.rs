//! A space's configuration with the tessellations of its subspaces: where its objects lie and
//! who holds them. Servers, replicas and clients all route by it, so that a key's point leader
//! is computed in one place.

use tessera_geometry::{key_region, region_of_object, RegionIndex, Tessellation};
use tessera_types::{Object, ServerId, SubspaceId, Value};

use crate::config::SpaceConfig;
use crate::status::ErrorReply;
use crate::status::Status;

/// A space's configuration and the tessellations that say where its objects lie, computed once
/// per configuration (tessellating is far dearer than any lookup made with it).
#[derive(Debug)]
pub struct SpaceMap {
    config: SpaceConfig,
    /// `config.tessellations()`: kept private so that they always match `config`.
    tessellations: Vec<Tessellation>,
}

impl SpaceMap {
    pub fn new(config: SpaceConfig) -> SpaceMap {
        SpaceMap {
            tessellations: config.tessellations(),
            config,
        }
    }

    pub fn config(&self) -> &SpaceConfig {
        &self.config
    }

    /// The tessellation of every subspace, in subspace order.
    pub fn tessellations(&self) -> &[Tessellation] {
        &self.tessellations
    }

    pub fn name(&self) -> &str {
        &self.config.schema.name
    }

    /// The region of the key subspace that holds `key` (of the space's key type).
    pub fn key_region(&self, key: &Value) -> RegionIndex {
        key_region(&self.tessellations[SubspaceId::KEY.get()], key)
    }

    /// The point leader of `key`: the head of its key region's replica set. `Unavailable` when
    /// the region has none, as a configuration from the network that was not checked may have.
    pub fn point_leader(&self, key: &Value) -> Result<ServerId, ErrorReply> {
        let region = self.key_region(key);
        self.config
            .replica_set(SubspaceId::KEY, region)
            .and_then(|set| set.first().copied())
            .ok_or_else(|| {
                ErrorReply::new(
                    Status::Unavailable,
                    format!("region {} of the key subspace has no server", region.0),
                )
            })
    }

    /// The servers that answer a get of `key`: its key region's readers
    /// ([`SpaceConfig::readers`]).
    pub fn key_readers(&self, key: &Value) -> Vec<ServerId> {
        self.config.readers(SubspaceId::KEY, self.key_region(key))
    }

    /// The region of `subspace` that holds `object` (`tessera_geometry::region_of_object`);
    /// `None` when it is not placed there (a dynamic space's document outside its formula's
    /// subspaces) or the space has no such subspace.
    pub fn region_of(&self, subspace: SubspaceId, object: &Object) -> Option<RegionIndex> {
        let t = self.tessellations.get(subspace.get())?;
        region_of_object(&self.config.schema, subspace, t, object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SpaceChange;
    use tessera_types::parse_space;

    fn map() -> SpaceMap {
        let schema =
            parse_space("space t key k attributes int x subspace x create 4 partitions").unwrap();
        let mut config = SpaceConfig::owned_by(1, schema, &[ServerId(1), ServerId(2)]);
        for (r, set) in config.replicas[SubspaceId::KEY.get()]
            .iter_mut()
            .enumerate()
        {
            *set = vec![ServerId(10 + r as u64), ServerId(1)];
        }
        SpaceMap::new(config)
    }

    #[test]
    fn the_point_leader_heads_the_key_region_of_the_key() {
        let map = map();
        for k in 0..32i64 {
            let key = Value::from(format!("k{k}"));
            let region = map.key_region(&key);
            let object = Object {
                values: vec![key.clone(), Value::Int(k)],
            };
            assert_eq!(map.region_of(SubspaceId::KEY, &object), Some(region));
            assert_eq!(
                map.point_leader(&key).unwrap(),
                ServerId(10 + u64::from(region.0))
            );
        }
    }

    #[test]
    fn a_key_region_without_replicas_has_no_point_leader() {
        let mut config = map().config.clone();
        config.replicas[SubspaceId::KEY.get()].truncate(1);
        config.replicas[SubspaceId::KEY.get()][0].clear();
        let map = SpaceMap::new(config);
        for k in 0..16i64 {
            let refusal = map.point_leader(&Value::from(format!("k{k}"))).unwrap_err();
            assert_eq!(refusal.status, Status::Unavailable);
        }
    }

    /// Keys sharing their first 8 bytes, split apart: an object's key region is its key's,
    /// and each half has its own point leader.
    #[test]
    fn split_keys_sharing_a_coordinate_lie_in_their_own_regions() {
        let schema = parse_space(
            "space t key string k attributes int x create 2 partitions placement ordered",
        )
        .unwrap();
        let mut config = SpaceConfig::owned_by(1, schema, &[ServerId(1), ServerId(2)]);
        let at = Value::from("tweet:00000124");
        config
            .alter(
                2,
                &SpaceChange::SplitKeyRegion { region: 0, at },
                |_| vec![],
            )
            .unwrap();
        config.replicas[SubspaceId::KEY.get()][2] = vec![ServerId(3)];
        let map = SpaceMap::new(config);
        for (key, region, leader) in [
            ("tweet:00000123", 0, 1),
            ("tweet:00000124", 2, 3),
            ("tweet:9", 2, 3),
        ] {
            let object = Object {
                values: vec![Value::from(key), Value::Int(0)],
            };
            assert_eq!(
                map.key_region(&Value::from(key)),
                RegionIndex(region),
                "{key}"
            );
            assert_eq!(
                map.region_of(SubspaceId::KEY, &object),
                Some(RegionIndex(region))
            );
            assert_eq!(
                map.point_leader(&Value::from(key)).unwrap(),
                ServerId(leader)
            );
        }
    }

    #[test]
    fn a_subspace_the_space_lacks_holds_nothing() {
        let object = Object {
            values: vec![Value::from("k"), Value::Int(3)],
        };
        assert!(map().region_of(SubspaceId(1), &object).is_some());
        assert_eq!(map().region_of(SubspaceId(2), &object), None);
    }
}
