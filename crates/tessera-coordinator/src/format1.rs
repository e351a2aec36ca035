//! The coordinator's structures of data format 1 that changed since, kept only to migrate a
//! format-1 directory (see `tessera_protocol::format1` for the configuration's).

use serde::{Deserialize, Serialize};
use tessera_protocol::format1::SpaceConfig1;
use tessera_protocol::{ModelConstants, SpaceConfig};
use tessera_types::Epoch;

use crate::state::{ClusterState, RegisteredServer, PLAN_TRANSFERS};

/// [`ClusterState`] as a format-1 snapshot encodes it: its spaces without resting places.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ClusterState1 {
    pub epoch: Epoch,
    pub servers: Vec<RegisteredServer>,
    pub spaces: Vec<SpaceConfig1>,
    pub next_server_id: u64,
    pub model: Option<ModelConstants>,
}

impl From<ClusterState1> for ClusterState {
    fn from(s: ClusterState1) -> ClusterState {
        ClusterState {
            epoch: s.epoch,
            servers: s.servers,
            spaces: s.spaces.into_iter().map(SpaceConfig::from).collect(),
            next_server_id: s.next_server_id,
            model: s.model,
            plan_transfers: PLAN_TRANSFERS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Command;
    use tessera_types::parse_space;

    /// A cluster state as format 1 wrote it.
    fn format_1(state: &ClusterState) -> ClusterState1 {
        let spaces = state
            .spaces
            .iter()
            .map(|s| SpaceConfig1 {
                id: s.id,
                schema: s.schema.clone(),
                replicas: s.replicas.clone(),
                transfers: s.transfers.clone(),
                joined: s.joined.clone(),
                build: s.build.clone(),
                adaptations: s.adaptations.clone(),
                shapes: s.shapes.clone(),
                shape_entries: s.shape_entries.clone(),
                formula_entries: s.formula_entries.clone(),
            })
            .collect();
        ClusterState1 {
            epoch: state.epoch,
            servers: state.servers.clone(),
            spaces,
            next_server_id: state.next_server_id,
            model: state.model,
        }
    }

    #[test]
    fn a_format_1_snapshot_migrates_once_and_opens_as_it_was() {
        let mut state = ClusterState::default();
        for token in 1..=3u128 {
            let address = format!("10.0.0.{token}:2012");
            state
                .apply(Command::RegisterServer {
                    token,
                    address,
                    incarnation: 1,
                })
                .unwrap();
        }
        let schema = parse_space(
            "space hotels key id attributes string city, int price subspace city \
             subspace price create 4 partitions tolerate 1 failure",
        )
        .unwrap();
        state.apply(Command::AddSpace { schema }).unwrap();
        let dir = tempfile::tempdir().unwrap();
        crate::sm_store::write_format_1_snapshot(dir.path(), &format_1(&state)).unwrap();
        crate::sm_store::migrate_1_to_2(dir.path()).unwrap();
        let migrated = std::fs::read(dir.path().join("raft/snapshot")).unwrap();
        // Run again, as after a crash before FORMAT was rewritten: nothing changes.
        crate::sm_store::migrate_1_to_2(dir.path()).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("raft/snapshot")).unwrap(),
            migrated
        );
        assert_eq!(crate::sm_store::snapshot_state(dir.path()).unwrap(), state);
    }
}
