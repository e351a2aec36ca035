//! What a server acts on: a configuration and the spaces derived from it, swapped as a whole.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;

use tessera_geometry::RegionIndex;
use tessera_protocol::{Configuration, ErrorReply, SpaceConfig, SpaceMap, Status};
use tessera_types::{Epoch, ServerId, SubspaceId};

/// How a server runs. Both run the same chain loop; they differ in who makes configurations
/// (the server itself, or the coordinators) and in what a connection may ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One server, every region's replica set `[this server]` (`tessera dev`). It changes its
    /// own configuration (add and remove space).
    Standalone,
    /// A member of a cluster run by coordinators: configurations come from them.
    Cluster,
}

/// A space as the server serves it: its configuration and tessellations, seen by this server.
#[derive(Debug)]
pub struct ServedSpace {
    map: SpaceMap,
    /// This server, to tell which regions of the space it owns.
    pub me: ServerId,
}

/// A served space is its map, plus what `me` makes of it.
impl Deref for ServedSpace {
    type Target = SpaceMap;

    fn deref(&self) -> &SpaceMap {
        &self.map
    }
}

impl ServedSpace {
    pub fn new(config: SpaceConfig, me: ServerId) -> ServedSpace {
        ServedSpace {
            map: SpaceMap::new(config),
            me,
        }
    }

    /// The key regions this server leads (first of their replica sets), ascending: those whose
    /// objects its statistics count, so that the leaders' statistics together count each
    /// object once.
    pub fn led_key_regions(&self) -> Vec<RegionIndex> {
        self.config().replicas[SubspaceId::KEY.get()]
            .iter()
            .enumerate()
            .filter(|(_, set)| set.first() == Some(&self.me))
            .map(|(r, _)| RegionIndex(r as u32))
            .collect()
    }

    /// Whether this server leads every key region (first of every replica set of the key
    /// subspace): it holds every object of the space, as a standalone server does.
    pub fn leads_every_key_region(&self) -> bool {
        self.config().replicas[SubspaceId::KEY.get()]
            .iter()
            .all(|set| set.first() == Some(&self.me))
    }

    /// Whether this server holds `region` of `subspace`: it is a member of the region's
    /// replica set, if only as a state transfer's target still catching up.
    pub fn owns(&self, subspace: SubspaceId, region: RegionIndex) -> bool {
        // A dropped subspace has no regions.
        self.config().holds(subspace, region, self.me)
    }

    /// Whether this server may answer reads of `region` of `subspace`: it is a member of the
    /// region's replica set and not a state transfer's target still catching up, which holds
    /// only part of the region until the transfer completes.
    pub fn serves_reads(&self, subspace: SubspaceId, region: RegionIndex) -> bool {
        self.config()
            .complete_replicas(subspace, region)
            .contains(&self.me)
    }
}

/// One consistent view: a configuration and the spaces derived from it.
#[derive(Debug)]
pub struct View {
    pub config: Arc<Configuration>,
    pub spaces: HashMap<String, Arc<ServedSpace>>,
    pub me: ServerId,
    pub mode: Mode,
}

impl View {
    pub fn new(config: Arc<Configuration>, me: ServerId, mode: Mode) -> View {
        let spaces = config
            .spaces
            .iter()
            .map(|s| {
                let served = ServedSpace::new(s.clone(), me);
                (s.schema.name.clone(), Arc::new(served))
            })
            .collect();
        View {
            config,
            spaces,
            me,
            mode,
        }
    }

    pub fn epoch(&self) -> Epoch {
        self.config.epoch
    }

    pub fn space(&self, name: &str) -> Result<Arc<ServedSpace>, ErrorReply> {
        self.spaces.get(name).cloned().ok_or_else(|| {
            ErrorReply::new(Status::UnknownSpace, format!("no space named {name:?}"))
        })
    }

    /// Whether `space` (validated against some earlier view) is still this view's space of its
    /// name: not removed, nor removed and created again under the same name.
    pub fn is_current(&self, space: &ServedSpace) -> bool {
        self.spaces
            .get(space.name())
            .is_some_and(|s| s.config().id == space.config().id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    /// Region 1 of subspace 1 gaining server 3 by state transfer, every other region held by
    /// servers 1 and 2, as seen by `me`.
    fn served_by(me: u64) -> ServedSpace {
        let schema =
            parse_space("space t key k attributes int x subspace x create 4 partitions").unwrap();
        let mut config = SpaceConfig::owned_by(1, schema, &[ServerId(1), ServerId(2)]);
        config.start_transfer(1, SubspaceId(1), RegionIndex(1), ServerId(3), None);
        ServedSpace::new(config, ServerId(me))
    }

    #[test]
    fn a_catching_up_target_owns_its_region_but_serves_no_reads_of_it() {
        let (region, other) = (RegionIndex(1), RegionIndex(2));
        let x = SubspaceId(1);
        let target = served_by(3);
        assert!(target.owns(x, region), "a hop of the region's chains");
        assert!(
            !target.serves_reads(x, region),
            "it holds part of the region only"
        );
        assert!(!target.owns(x, other) && !target.serves_reads(x, other));
        for member in [1, 2] {
            let served = served_by(member);
            for r in [region, other] {
                assert!(
                    served.owns(x, r) && served.serves_reads(x, r),
                    "server {member}, region {}",
                    r.0
                );
            }
        }
        assert!(!served_by(4).owns(x, region) && !served_by(4).serves_reads(x, region));
    }
}
