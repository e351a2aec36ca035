//! The daemons' commands: `tessera dev` (standalone here; with `--servers N` a local cluster),
//! `tessera coordinator` and `tessera server`: their flags, turned into the options the daemons
//! start with. The cluster's daemons themselves are in cluster.rs.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::ValueEnum;
use tessera_server::{ConnectionLimits, Server, ServerOptions};
use tessera_storage::FsyncPolicy;

use crate::failure::Failure;
use crate::signals::wait_for_stop_signal;
use crate::target::Target;
use crate::{adapt, cluster, http, limits, recut, security, splits};

#[derive(Clone, Copy, ValueEnum)]
pub enum Fsync {
    /// fsync every group commit before acknowledging its writes (no acknowledged write is
    /// ever lost).
    Always,
    /// fsync about once a second: a crash may lose the last second of acknowledged writes.
    Periodic,
    /// leave it to the operating system: a machine crash may lose recent writes.
    Never,
}

/// The flags of a server's store, shared by `tessera dev` and `tessera server`.
#[derive(clap::Args)]
pub struct StorageArgs {
    /// When writes reach the disk.
    #[arg(long, value_enum, default_value = "always")]
    fsync: Fsync,
    /// Storage block cache, in MiB. Resident memory is about this plus a fixed overhead.
    #[arg(long, default_value_t = 64)]
    cache_mb: u64,
}

impl StorageArgs {
    /// Storage settings of a server: (fsync policy, cache bytes).
    fn options(&self) -> (FsyncPolicy, u64) {
        let policy = match self.fsync {
            Fsync::Always => FsyncPolicy::Always,
            Fsync::Periodic => FsyncPolicy::Periodic { interval_ms: 1000 },
            Fsync::Never => FsyncPolicy::Never,
        };
        (policy, self.cache_mb * 1024 * 1024)
    }
}

/// The coordinators' flags of timing, shared by `tessera dev` and `tessera coordinator`.
#[derive(clap::Args)]
pub struct CoordinationArgs {
    /// Server lease, in milliseconds: a server serves only while the coordinators' leader
    /// renewed its lease within this long (it heartbeats every quarter lease), and the leader
    /// takes a server it has not heard from for this long plus half of it (the clock-drift
    /// margin) out of every replica set, so the next replica leads. Give every coordinator of
    /// a cluster the same value (`tessera dev`: with --servers above 1 only).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    lease_ms: u64,
    /// How long a server stopped for a planned restart (SIGTERM to `tessera server`) is waited
    /// for, in milliseconds: out of the chains meanwhile, its regions keep its place and are
    /// not copied elsewhere; back in time, it catches up on what it missed only. Past it, its
    /// regions are re-replicated as after a failure.
    #[arg(long, default_value_t = 60_000)]
    rest_grace_ms: u64,
    /// How long a server whose lease lapsed (crashed, hung, cut off) is waited for like a
    /// planned restart, in milliseconds, before its regions are re-replicated; 0 (the
    /// default) re-replicates at once.
    #[arg(long, default_value_t = 0)]
    down_grace_ms: u64,
    /// Seconds of each observation of the spaces declared `adapt on`: every period, the
    /// workload each one served is scored by the advisor, and a space is re-subspaced once
    /// another configuration is predicted at least 20 % faster, and by more than the model's
    /// measured error, three periods running.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    adapt_period_s: u64,
}

impl CoordinationArgs {
    /// The leases and grace periods the coordinators grant, with a margin of half a lease for
    /// clock drift.
    fn lease_tuning(&self) -> tessera_coordinator::LeaseTuning {
        tessera_coordinator::LeaseTuning {
            lease_ms: self.lease_ms,
            margin_ms: self.lease_ms / 2,
            rest_grace_ms: self.rest_grace_ms,
            down_grace_ms: self.down_grace_ms,
            ..tessera_coordinator::LeaseTuning::default()
        }
    }

    /// The adaptation driver's options: the period given, the advisor's default policy.
    fn adapt_options(&self) -> adapt::AdaptOptions {
        adapt::AdaptOptions {
            period: std::time::Duration::from_secs(self.adapt_period_s),
            policy: tessera_advisor::AdaptPolicy::default(),
        }
    }
}

// `tessera dev` (its help: `Command::Dev`).
#[derive(clap::Args)]
pub struct DevArgs {
    /// Data directory (created if absent).
    #[arg(long, default_value = "./tessera-data")]
    data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:1982")]
    listen: SocketAddr,
    #[command(flatten)]
    storage: StorageArgs,
    /// Servers: 1 runs standalone; more runs a local cluster.
    #[arg(long, default_value_t = 1)]
    servers: u32,
    /// Replicas of every region (failures tolerated + 1) for spaces whose description
    /// does not say `tolerate N failures`. Cluster only; at most --servers.
    #[arg(long, default_value_t = 2)]
    replicas: u32,
    /// Coordinators of the local cluster (1, 3 or 5).
    #[arg(long, default_value_t = 1)]
    coordinators: u32,
    #[command(flatten)]
    coordination: CoordinationArgs,
    #[command(flatten)]
    splits: splits::SplitArgs,
    #[command(flatten)]
    recut: recut::RecutArgs,
    #[command(flatten)]
    limits: limits::LimitArgs,
    #[command(flatten)]
    security: security::SecurityArgs,
    #[command(flatten)]
    http: http::HttpArgs,
}

// `tessera coordinator` (its help: `Command::Coordinator`).
#[derive(clap::Args)]
pub struct CoordinatorArgs {
    /// This member's id, one of --peers. Keep it with its data directory.
    #[arg(long)]
    id: u64,
    #[arg(long, default_value = "./tessera-coordinator")]
    data_dir: PathBuf,
    #[arg(long, default_value = "127.0.0.1:1982")]
    listen: SocketAddr,
    /// Every member, this one included: ID=HOST:PORT, comma-separated.
    #[arg(long)]
    peers: String,
    /// Failures a space tolerates when its description does not say.
    #[arg(long)]
    default_tolerate: Option<u32>,
    #[command(flatten)]
    coordination: CoordinationArgs,
    #[command(flatten)]
    splits: splits::SplitArgs,
    #[command(flatten)]
    recut: recut::RecutArgs,
    #[command(flatten)]
    limits: limits::LimitArgs,
    #[command(flatten)]
    security: security::SecurityArgs,
    #[command(flatten)]
    http: http::HttpArgs,
}

// `tessera server` (its help: `Command::Server`).
#[derive(clap::Args)]
pub struct ServerArgs {
    #[arg(long, default_value = "./tessera-server")]
    data_dir: PathBuf,
    #[arg(long, default_value = "127.0.0.1:2000")]
    listen: SocketAddr,
    /// Coordinator addresses, comma-separated (any one that answers will do).
    #[arg(long, env = "TESSERA_COORDINATORS")]
    coordinators: String,
    /// The address clients and other servers reach this one at (default: --listen,
    /// which must then not be 0.0.0.0).
    #[arg(long)]
    advertise: Option<String>,
    #[command(flatten)]
    storage: StorageArgs,
    /// MB per second this server reads and sends of the regions it copies to other servers
    /// (re-replication after a failure, a joining server's share, decommission), all copies
    /// together. Higher: fewer seconds a replica short, but more of the CPU and disk that
    /// live requests need (on a 2-core machine running five servers, 8 MB/s kept 52-74 % of
    /// the live throughput during a copy, unpaced copying 3-11 %).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    transfer_mb_s: u64,
    #[command(flatten)]
    limits: limits::LimitArgs,
    #[command(flatten)]
    security: security::SecurityArgs,
    #[command(flatten)]
    http: http::HttpArgs,
}

/// `tessera dev`: one server owning every region, or with `--servers N` a local cluster.
pub async fn dev(mut args: DevArgs, target: &Target) -> Result<(), Failure> {
    // A daemon serving TLS trusts the same authority when it connects to members.
    args.security.tls_ca = target.tls_ca.clone();
    let DevArgs {
        data_dir,
        listen,
        storage,
        servers,
        replicas,
        coordinators,
        coordination,
        splits,
        recut,
        limits,
        security,
        http,
    } = args;
    let adapt = coordination.adapt_options();
    let storage = storage.options();
    if servers <= 1 {
        return standalone(
            data_dir,
            listen,
            storage,
            (adapt, recut.options()),
            (limits.options(), &security, &http),
        )
        .await;
    }
    cluster::dev(cluster::DevCluster {
        data_dir,
        listen,
        storage,
        servers,
        replicas,
        coordinators,
        lease: coordination.lease_tuning(),
        adapt,
        splits: splits.options(),
        recut: recut.options(),
        limits: limits.options(),
        security,
        http,
    })
    .await
}

/// `tessera coordinator`: one member of the coordinators' Raft group.
pub async fn coordinator(mut args: CoordinatorArgs, target: &Target) -> Result<(), Failure> {
    args.security.tls_ca = target.tls_ca.clone();
    let CoordinatorArgs {
        id,
        data_dir,
        listen,
        peers,
        default_tolerate,
        coordination,
        splits,
        recut,
        limits,
        security,
        http,
    } = args;
    let coordinator = cluster::CoordinatorSetup {
        id,
        data_dir,
        listen,
        default_tolerate,
        lease: coordination.lease_tuning(),
        adapt: coordination.adapt_options(),
        splits: splits.options(),
        recut: recut.options(),
        limits: limits.options(),
        security,
        http,
    };
    cluster::coordinator(coordinator, &peers).await
}

/// `tessera server`: one storage server of a cluster.
pub async fn server(mut args: ServerArgs, target: &Target) -> Result<(), Failure> {
    args.security.tls_ca = target.tls_ca.clone();
    let ServerArgs {
        data_dir,
        listen,
        coordinators,
        advertise,
        storage,
        transfer_mb_s,
        limits,
        security,
        http,
    } = args;
    cluster::server(
        data_dir,
        listen,
        &coordinators,
        advertise,
        storage.options(),
        transfer_mb_s * 1_000_000,
        (limits.options(), &security, &http),
    )
    .await
}

/// `tessera dev` without `--servers`: one server, every region's only replica, in the
/// foreground until Ctrl-C or SIGTERM.
async fn standalone(
    data_dir: PathBuf,
    listen: SocketAddr,
    storage: (FsyncPolicy, u64),
    (adapt, recut): (adapt::AdaptOptions, recut::RecutOptions),
    (limits, security, http): (ConnectionLimits, &security::SecurityArgs, &http::HttpArgs),
) -> Result<(), Failure> {
    let secured = security.secure(security::Daemon::Dev, &[listen])?;
    let daemons = http::Daemons::guarded_by(
        secured.gate.clone(),
        secured.tls.as_ref().map(|t| t.serve.clone()),
    );
    let metrics = http.start(Some(http::DEV_DEFAULT), daemons.clone()).await?;
    let mut options = ServerOptions::new(&data_dir, listen);
    (options.fsync, options.cache_bytes) = storage;
    options.limits = limits;
    options.gate = secured.gate;
    options.tls = secured.tls;
    let server = Server::start(options)
        .await
        .map_err(|e| Failure::Error(format!("cannot start: {e}")))?;
    daemons.add(Arc::new(server.metrics_publisher()));
    daemons.serve_console(server.local_addr().to_string(), secured.drivers.clone());
    http::say_served("tessera dev", metrics, &daemons);
    // The server is every region's only replica: its own drivers always act.
    let me = (server.local_addr().to_string(), secured.drivers);
    adapt::spawn(me.clone(), adapt, || Some(0));
    recut::spawn(me, recut, || true);
    println!(
        "tessera dev: ready on {}, data in {}",
        server.local_addr(),
        data_dir.display()
    );
    let _ = std::io::stdout().flush();
    wait_for_stop_signal().await;
    eprintln!("tessera dev: stopping");
    server.shutdown().await;
    Ok(())
}
