//! The cluster's daemons: `tessera coordinator`, `tessera server`, `tessera dev --servers N`
//! (their flags are read in daemons.rs; `tessera status` and `tessera decommission` are in
//! status.rs).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tessera_coordinator::{Coordinator, CoordinatorOptions, LeaseTuning};
use tessera_server::{
    ClusterOptions, ConnectionLimits, Departure, Server, ServerOptions,
    TRANSFER_BYTES_PER_SECOND_DEFAULT,
};
use tessera_storage::FsyncPolicy;
use tokio::net::TcpListener;

use crate::adapt::AdaptOptions;
use crate::failure::Failure;
use crate::http::{say_served, Daemons, HttpArgs, DEV_DEFAULT};
use crate::recut::RecutOptions;
use crate::security::{Daemon, Secured, SecurityArgs};
use crate::signals::wait_for_stop_signal;
use crate::splits::SplitOptions;

/// `ID=HOST:PORT,...` into (id, address) pairs.
fn parse_peers(text: &str) -> Result<Vec<(u64, String)>, Failure> {
    let peers: Result<Vec<(u64, String)>, String> = text
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (id, address) = p
                .trim()
                .split_once('=')
                .ok_or_else(|| format!("peer {p:?} is not ID=HOST:PORT"))?;
            let id = id
                .parse()
                .map_err(|_| format!("peer id {id:?} is not a number"))?;
            Ok((id, address.to_owned()))
        })
        .collect();
    let peers = peers.map_err(Failure::Error)?;
    if peers.is_empty() {
        return Err(Failure::Error("--peers names no coordinator".into()));
    }
    Ok(peers)
}

fn addresses(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect()
}

fn ready(line: String) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

/// What `tessera coordinator` starts with, its flags read (besides `--peers`).
pub struct CoordinatorSetup {
    pub id: u64,
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub default_tolerate: Option<u32>,
    pub lease: LeaseTuning,
    pub adapt: AdaptOptions,
    pub splits: SplitOptions,
    pub recut: RecutOptions,
    pub limits: ConnectionLimits,
    pub security: SecurityArgs,
    pub http: HttpArgs,
}

pub async fn coordinator(args: CoordinatorSetup, peers: &str) -> Result<(), Failure> {
    let CoordinatorSetup {
        id,
        data_dir,
        listen,
        default_tolerate,
        lease,
        adapt,
        splits,
        recut,
        limits,
        security,
        http,
    } = args;
    let peers = parse_peers(peers)?;
    if !peers.iter().any(|(p, _)| *p == id) {
        return Err(Failure::Error(format!(
            "--peers does not list this coordinator's --id {id}"
        )));
    }
    let secured = security.secure(Daemon::ClusterMember, &[listen])?;
    let daemons = Daemons::guarded_by(
        secured.gate.clone(),
        secured.tls.as_ref().map(|t| t.serve.clone()),
    );
    let metrics = http.start(None, daemons.clone()).await?;
    let mut options = CoordinatorOptions::new(id, &data_dir, listen, peers.clone());
    options.default_tolerate = default_tolerate;
    options.lease = lease;
    options.gate = secured.gate;
    options.tls = secured.tls;
    options.limits = limits;
    let c = Coordinator::start(options)
        .await
        .map_err(|e| Failure::Error(format!("cannot start: {e}")))?;
    daemons.add(Arc::new(c.metrics_publisher()));
    let members: Vec<&str> = peers.iter().map(|(_, a)| a.as_str()).collect();
    daemons.serve_console(members.join(","), secured.drivers.clone());
    say_served(&format!("tessera coordinator {id}"), metrics, &daemons);
    // Every coordinator runs the adaptation driver; only the leader's acts.
    let me = (c.local_addr().to_string(), secured.drivers);
    crate::adapt::spawn(me.clone(), adapt, c.leader_term());
    crate::splits::spawn(me.clone(), splits, c.leads());
    crate::recut::spawn(me, recut, c.leads());
    ready(format!(
        "tessera coordinator {id}: ready on {}, {} members, data in {}",
        c.local_addr(),
        peers.len(),
        data_dir.display()
    ));
    wait_for_stop_signal().await;
    eprintln!("tessera coordinator {id}: stopping");
    c.shutdown().await;
    Ok(())
}

fn server_options(
    data_dir: PathBuf,
    listen: SocketAddr,
    cluster: ClusterOptions,
    storage: (FsyncPolicy, u64),
    transfer_bytes_per_second: u64,
    (limits, secured): (ConnectionLimits, &Secured),
) -> ServerOptions {
    let mut options = ServerOptions::new(data_dir, listen);
    (options.fsync, options.cache_bytes) = storage;
    options.transfer_bytes_per_second = transfer_bytes_per_second;
    options.limits = limits;
    options.gate = secured.gate.clone();
    options.tls = secured.tls.clone();
    options.cluster = Some(cluster);
    options
}

pub async fn server(
    data_dir: PathBuf,
    listen: SocketAddr,
    coordinators: &str,
    advertise: Option<String>,
    storage: (FsyncPolicy, u64),
    transfer_bytes_per_second: u64,
    (limits, security, http): (ConnectionLimits, &SecurityArgs, &HttpArgs),
) -> Result<(), Failure> {
    let coordinators = addresses(coordinators);
    if coordinators.is_empty() {
        return Err(Failure::Error("--coordinators names no address".into()));
    }
    let console_addresses = coordinators.join(",");
    let secured = security.secure(Daemon::ClusterMember, &[listen])?;
    let daemons = Daemons::guarded_by(
        secured.gate.clone(),
        secured.tls.as_ref().map(|t| t.serve.clone()),
    );
    let metrics = http.start(None, daemons.clone()).await?;
    let options = server_options(
        data_dir.clone(),
        listen,
        ClusterOptions {
            coordinators,
            advertise,
        },
        storage,
        transfer_bytes_per_second,
        (limits, &secured),
    );
    let s = Server::start(options)
        .await
        .map_err(|e| Failure::Error(format!("cannot start: {e}")))?;
    daemons.add(Arc::new(s.metrics_publisher()));
    daemons.serve_console(console_addresses, secured.drivers.clone());
    say_served(&format!("tessera server {}", s.id()), metrics, &daemons);
    ready(format!(
        "tessera server {}: ready on {}, data in {}",
        s.id(),
        s.local_addr(),
        data_dir.display()
    ));
    wait_for_stop_signal().await;
    eprintln!("tessera server {}: stopping", s.id());
    s.shutdown().await;
    Ok(())
}

pub struct DevCluster {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub storage: (FsyncPolicy, u64),
    pub servers: u32,
    pub replicas: u32,
    pub coordinators: u32,
    pub lease: LeaseTuning,
    pub adapt: AdaptOptions,
    pub splits: SplitOptions,
    pub recut: RecutOptions,
    pub limits: ConnectionLimits,
    pub security: SecurityArgs,
    pub http: HttpArgs,
}

/// A whole cluster in this process, on loopback.
pub async fn dev(d: DevCluster) -> Result<(), Failure> {
    if ![1, 3, 5].contains(&d.coordinators) {
        return Err(Failure::Error("--coordinators must be 1, 3 or 5".into()));
    }
    if d.replicas == 0 || d.replicas > d.servers {
        return Err(Failure::Error(format!(
            "--replicas must be between 1 and --servers ({})",
            d.servers
        )));
    }
    let secured = d.security.secure(Daemon::Dev, &[d.listen])?;
    let daemons = Daemons::guarded_by(
        secured.gate.clone(),
        secured.tls.as_ref().map(|t| t.serve.clone()),
    );
    let metrics = d.http.start(Some(DEV_DEFAULT), daemons.clone()).await?;
    // Bind every coordinator first, so each can be told all the others' addresses.
    let mut listeners = Vec::new();
    for i in 0..d.coordinators {
        let address = if i == 0 {
            d.listen
        } else {
            SocketAddr::new(d.listen.ip(), 0)
        };
        let l = TcpListener::bind(address)
            .await
            .map_err(|e| Failure::Error(format!("binding {address}: {e}")))?;
        listeners.push(l);
    }
    let peers: Vec<(u64, String)> = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.local_addr().expect("bound").to_string()))
        .collect();
    let mut coordinators = Vec::new();
    for (i, listener) in listeners.into_iter().enumerate() {
        let id = i as u64 + 1;
        let dir = d.data_dir.join(format!("coordinator-{id}"));
        let mut options = CoordinatorOptions::new(
            id,
            dir,
            peers[i].1.parse().expect("an address"),
            peers.clone(),
        );
        options.default_tolerate = Some(d.replicas - 1);
        options.lease = d.lease.clone();
        options.gate = secured.gate.clone();
        options.tls = secured.tls.clone();
        options.limits = d.limits;
        let c = Coordinator::start_with_listener(options, listener)
            .await
            .map_err(|e| Failure::Error(format!("cannot start coordinator {id}: {e}")))?;
        daemons.add(Arc::new(c.metrics_publisher()));
        let me = (c.local_addr().to_string(), secured.drivers.clone());
        crate::adapt::spawn(me.clone(), d.adapt, c.leader_term());
        crate::splits::spawn(me.clone(), d.splits, c.leads());
        crate::recut::spawn(me, d.recut, c.leads());
        coordinators.push(c);
    }
    let addresses: Vec<String> = peers.iter().map(|(_, a)| a.clone()).collect();
    let mut servers = Vec::new();
    for n in 1..=d.servers {
        let dir = d.data_dir.join(format!("server-{n}"));
        let listen = SocketAddr::new(d.listen.ip(), 0);
        let options = server_options(
            dir,
            listen,
            ClusterOptions {
                coordinators: addresses.clone(),
                advertise: None,
            },
            d.storage,
            TRANSFER_BYTES_PER_SECOND_DEFAULT,
            (d.limits, &secured),
        );
        let s = Server::start(options)
            .await
            .map_err(|e| Failure::Error(format!("cannot start server {n}: {e}")))?;
        daemons.add(Arc::new(s.metrics_publisher()));
        servers.push(s);
    }
    daemons.serve_console(addresses.join(","), secured.drivers.clone());
    say_served("tessera dev", metrics, &daemons);
    ready(format!(
        "tessera dev: ready on {} ({} coordinators, {} servers, {} replicas), data in {}",
        peers[0].1,
        d.coordinators,
        d.servers,
        d.replicas,
        d.data_dir.display()
    ));
    wait_for_stop_signal().await;
    eprintln!("tessera dev: stopping");
    stop_as_one(servers, coordinators).await;
    Ok(())
}

/// Stops a whole local cluster as one: the coordinators first stop taking silent servers
/// offline (so the stop moves no region), the servers stop together without announcing a
/// rest (each answers what it has in flight), then the coordinators.
async fn stop_as_one(servers: Vec<Server>, coordinators: Vec<Coordinator>) {
    for c in &coordinators {
        c.stop_failure_detection();
    }
    let stopping: Vec<_> = servers
        .into_iter()
        .map(|s| tokio::spawn(s.stop(Departure::Quiet)))
        .collect();
    for s in stopping {
        let _ = s.await;
    }
    for c in coordinators {
        c.shutdown().await;
    }
}
