//! The cluster's state as a client sees it, gathered once for `tessera status` (status.rs)
//! and the web console (console.rs): the configuration, every coordinator's answer, the
//! regions each server holds and leads, when the leader last heard each server.

use std::collections::BTreeMap;
use std::sync::Arc;

use tessera_client::Client;
use tessera_protocol::{Configuration, CoordinatorStatus, ServerLiveness};
use tessera_types::{ServerId, SubspaceId};

use crate::alter;

/// Regions each server holds and heads, over every subspace of every space.
pub fn regions_per_server(config: &Configuration) -> BTreeMap<ServerId, (u64, u64)> {
    let mut counts: BTreeMap<ServerId, (u64, u64)> =
        config.servers.iter().map(|s| (s.id, (0, 0))).collect();
    for space in &config.spaces {
        // A dropped subspace keeps its slot, with no replica set.
        for (n, regions) in space.replicas.iter().enumerate() {
            let subspace = SubspaceId(n as u16);
            for set in regions {
                for (i, server) in set.iter().enumerate() {
                    let entry = counts.entry(*server).or_default();
                    entry.0 += 1;
                    if i == 0 && subspace == SubspaceId::KEY {
                        entry.1 += 1;
                    }
                }
            }
        }
    }
    counts
}

/// When the leader last heard each server, and the epoch the server said it acts on, from the
/// status of the coordinator that leads.
pub fn last_heard(
    coordinators: &[(
        String,
        Result<CoordinatorStatus, tessera_client::ClientError>,
    )],
) -> BTreeMap<ServerId, ServerLiveness> {
    coordinators
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .find(|s| s.leader == Some(s.id))
        .map(|s| s.servers.iter().map(|l| (l.id, l.clone())).collect())
        .unwrap_or_default()
}

/// The configuration, the coordinators' answers, regions (held, led) per server, liveness.
pub type StatusInputs = (
    Arc<Configuration>,
    Vec<(
        String,
        Result<CoordinatorStatus, tessera_client::ClientError>,
    )>,
    BTreeMap<ServerId, (u64, u64)>,
    BTreeMap<ServerId, ServerLiveness>,
);

/// What `status` shows: the configuration, every coordinator's answer (asked now; none for a
/// standalone server), the regions each server holds and leads, and when the leader last
/// heard each server.
pub async fn gather_status(client: &Client) -> StatusInputs {
    let config = client.configuration();
    let coordinators = if client.is_cluster() {
        client.coordinator_statuses().await
    } else {
        Vec::new()
    };
    let regions = regions_per_server(&config);
    let heard = last_heard(&coordinators);
    (config, coordinators, regions, heard)
}

/// The cluster's state as `tessera status --json` prints it and the web console shows it:
/// coordinators (asked now), servers with the regions they hold and when the leader last heard
/// them, spaces with their subspaces.
pub async fn status_json(client: &Client) -> serde_json::Value {
    let (config, coordinators, regions, heard) = gather_status(client).await;
    serde_json::json!({
        "mode": if client.is_cluster() { "cluster" } else { "standalone" },
        "epoch": config.epoch.0,
        // What every server and client fetches at each epoch (docs/scale.md).
        "configuration_bytes": config.encoded_bytes(),
        "coordinators": coordinators.iter().map(|(address, s)| match s {
            Ok(s) => serde_json::json!({
                "address": address, "id": s.id, "leader": s.leader, "term": s.term,
                "last_applied": s.last_applied, "epoch": s.epoch.0,
            }),
            Err(e) => serde_json::json!({ "address": address, "error": e.to_string() }),
        }).collect::<Vec<_>>(),
        "servers": config.servers.iter().map(|s| {
            let (held, led) = regions.get(&s.id).copied().unwrap_or_default();
            let liveness = heard.get(&s.id);
            serde_json::json!({
                "id": s.id.0, "address": s.address, "state": format!("{:?}", s.state).to_lowercase(),
                "regions": held, "key_regions_led": led,
                "heard_ms_ago": liveness.and_then(|l| l.heard_ms_ago),
                "epoch": liveness.and_then(|l| l.epoch).map(|e| e.0),
            })
        }).collect::<Vec<_>>(),
        "spaces": config.spaces.iter().map(|s| serde_json::json!({
            "name": s.schema.name, "id": s.id, "replicas": s.schema.tolerate + 1,
            // Those writes go through (serving and building); `subspace_list` has them all.
            "subspaces": alter::written_count(s),
            "regions": s.replicas.iter().map(Vec::len).sum::<usize>(),
            "transfers": s.transfers.len(),
            "subspace_list": alter::subspaces_json(s),
            "build": alter::build_json(s),
            "adapt": s.schema.adapt,
            "adaptations": &s.adaptations,
        })).collect::<Vec<_>>(),
        // What `tessera calibrate` kept, if it ran; `tessera advise` uses it.
            "model": config.model,
    })
}
