//! `tessera status` (text, or JSON that the web console shows too) and `tessera
//! decommission`: the cluster's state as a client sees it.
//!
//! `tessera status` lists each space's subspaces by id with their states (serving, building
//! with its progress, dropped): see [`crate::alter`].

use tessera_protocol::ServerLiveness;
use tessera_types::ServerId;

use crate::alter;
use crate::failure::Failure;
use crate::overview::{gather_status, regions_per_server, status_json};
use crate::target::{connect, Target};

// `tessera status` (its help: `Command::Status`).
#[derive(clap::Args)]
pub struct StatusArgs {
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

// `tessera decommission` (its help: `Command::Decommission`).
#[derive(clap::Args)]
pub struct DecommissionArgs {
    /// The server's id, as `tessera status` lists it.
    #[arg(long)]
    server: u64,
}

/// The epoch a server reported, or "-" when the leader has not heard it (or is unknown).
fn epoch_text(liveness: Option<&ServerLiveness>) -> String {
    liveness
        .and_then(|l| l.epoch)
        .map_or_else(|| "-".into(), |e| e.0.to_string())
}

/// "1 region", "3 regions".
fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `tessera decommission --server ID`: asks the coordinators to drain the server, then says
/// what they did.
pub async fn decommission(args: DecommissionArgs, target: &Target) -> Result<(), Failure> {
    let client = connect(target).await?;
    let server = ServerId(args.server);
    client.decommission(server).await?;
    let config = client.refresh().await?;
    if config.server(server).is_none() {
        println!(
            "server {server} held no region: it has left the cluster (configuration epoch {})",
            config.epoch
        );
        return Ok(());
    }
    let (held, _) = regions_per_server(&config)
        .get(&server)
        .copied()
        .unwrap_or_default();
    let moving = config
        .spaces
        .iter()
        .flat_map(|s| &s.transfers)
        .filter(|t| t.replaces == Some(server))
        .count();
    println!(
        "server {server} is leaving (configuration epoch {}): its {} move to other servers by state transfer, {} \
         under way now; it leaves the cluster once it holds none. Follow it with `tessera status`.",
        config.epoch,
        count(held as usize, "region"),
        count(moving, "transfer"),
    );
    Ok(())
}

/// "0.2 s ago", or "-" when the leader has not heard the server (or is unknown).
fn heard_text(heard_ms_ago: Option<u64>) -> String {
    match heard_ms_ago {
        Some(ms) => format!("{:.1} s ago", ms as f64 / 1000.0),
        None => "-".into(),
    }
}

/// `tessera status`: the cluster as text, or as one JSON object.
pub async fn status(args: StatusArgs, target: &Target) -> Result<(), Failure> {
    let client = &connect(target).await?;
    if args.json {
        println!("{}", status_json(client).await);
        return Ok(());
    }
    let (config, coordinators, regions, heard) = gather_status(client).await;
    let mode = if client.is_cluster() {
        "cluster"
    } else {
        "standalone server"
    };
    println!("{mode}, configuration epoch {}", config.epoch);
    if !coordinators.is_empty() {
        println!("\ncoordinators:");
        for (address, s) in &coordinators {
            match s {
                Ok(s) => {
                    let role = if s.leader == Some(s.id) {
                        "leader"
                    } else {
                        "follower"
                    };
                    println!(
                        "  {:<3} {address:<22} {role:<9} term {:<4} applied {:<6} epoch {}",
                        s.id, s.term, s.last_applied, s.epoch
                    );
                }
                Err(e) => println!("  ?   {address:<22} unreachable: {e}"),
            }
        }
    }
    println!("\nservers:");
    // A standalone server answers to no coordinator: no "heard" and "epoch" columns.
    let cluster_columns = |heard: &str, epoch: &str| {
        if client.is_cluster() {
            format!("   {heard:<10}  {epoch}")
        } else {
            String::new()
        }
    };
    println!(
        "  {:<4} {:<22} {:<10} {:>8} {:>12}{}",
        "id",
        "address",
        "state",
        "regions",
        "keys led",
        cluster_columns("heard", "epoch")
    );
    for s in &config.servers {
        let (held, led) = regions.get(&s.id).copied().unwrap_or_default();
        let state = format!("{:?}", s.state).to_lowercase();
        let liveness = heard.get(&s.id);
        let columns = cluster_columns(
            &heard_text(liveness.and_then(|l| l.heard_ms_ago)),
            &epoch_text(liveness),
        );
        println!(
            "  {:<4} {:<22} {:<10} {held:>8} {led:>12}{columns}",
            s.id.0, s.address, state
        );
    }
    println!("\nspaces:");
    if config.spaces.is_empty() {
        println!("  (none)");
    }
    for s in &config.spaces {
        let regions: usize = s.replicas.iter().map(Vec::len).sum();
        // Regions gaining a replica (after a failure, a join, or a server leaving).
        let transfers = match s.transfers.len() {
            0 => String::new(),
            n => format!(", {} under way", count(n, "transfer")),
        };
        // Regions a replica short while a server rests (`tessera_protocol::RestingPlace`).
        let resting = match s.resting.len() {
            0 => String::new(),
            n => format!(", {} waiting for a resting server", count(n, "region")),
        };
        let adapts = if s.schema.adapt { ", adapts" } else { "" };
        println!(
            "  {:<16} {} replicas, {} subspaces, {regions} regions{transfers}{resting}{adapts}",
            s.schema.name,
            s.schema.tolerate + 1,
            alter::written_count(s)
        );
        for id in s.schema.subspace_ids() {
            println!("    {}", alter::subspace_text(s, id));
        }
        for record in &s.adaptations {
            println!("    {}", crate::adapt::record_text(record));
        }
    }
    match &config.model {
        Some(m) => println!(
            "\nmodel constants (tessera calibrate; server CPU): write {} µs + {} µs a chain server, relocation factor {}, get {} µs, search {} µs + {} µs a region + {} µs an object + {} µs an entry skipped; fsync {} µs ({} µs of CPU); client {} µs + {} µs an object; round trip {} µs; {} server cores; reads and writes mixed cost {:.0} % more",
            m.write_base_ns as f64 / 1e3,
            m.write_hop_ns as f64 / 1e3,
            m.relocation_factor_milli as f64 / 1e3,
            m.get_ns as f64 / 1e3,
            m.search_base_ns as f64 / 1e3,
            m.search_region_ns as f64 / 1e3,
            m.search_object_ns as f64 / 1e3,
            m.search_skip_ns as f64 / 1e3,
            m.fsync_ns as f64 / 1e3,
            m.fsync_cpu_ns as f64 / 1e3,
            m.client_ns as f64 / 1e3,
            m.client_object_ns as f64 / 1e3,
            m.round_trip_ns as f64 / 1e3,
            m.server_cores_milli as f64 / 1e3,
            m.mix_interference_milli as f64 / 10.0,
        ),
        None => println!("\nmodel constants: the defaults (run tessera calibrate to measure them here)"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overview::last_heard;
    use tessera_protocol::CoordinatorStatus;
    use tessera_types::Epoch;

    #[test]
    fn the_heard_column_comes_from_the_leader() {
        assert_eq!(heard_text(Some(230)), "0.2 s ago");
        assert_eq!(heard_text(Some(0)), "0.0 s ago");
        assert_eq!(heard_text(Some(12_345)), "12.3 s ago");
        assert_eq!(heard_text(None), "-");
        let status = |id: u64, servers: Vec<ServerLiveness>| CoordinatorStatus {
            id,
            leader: Some(2),
            term: 1,
            last_applied: 1,
            members: vec![],
            epoch: Epoch(1),
            servers,
        };
        let heard = |id: u64, ms: Option<u64>| ServerLiveness {
            id: ServerId(id),
            heard_ms_ago: ms,
            epoch: ms.map(|_| Epoch(7)),
        };
        let coordinators = vec![
            ("a".to_string(), Ok(status(1, vec![]))),
            (
                "b".to_string(),
                Ok(status(2, vec![heard(1, Some(100)), heard(2, None)])),
            ),
            (
                "c".to_string(),
                Err(tessera_client::ClientError::Protocol("down".into())),
            ),
        ];
        let got = last_heard(&coordinators);
        assert_eq!(
            got.get(&ServerId(1)).map(|l| l.heard_ms_ago),
            Some(Some(100))
        );
        assert_eq!(got.get(&ServerId(2)).map(|l| l.heard_ms_ago), Some(None));
        assert_eq!(epoch_text(got.get(&ServerId(1))), "7");
        assert_eq!(epoch_text(got.get(&ServerId(2))), "-");
        assert_eq!(epoch_text(None), "-");
        assert!(
            last_heard(&coordinators[..1]).is_empty(),
            "followers know nothing"
        );
    }
}
