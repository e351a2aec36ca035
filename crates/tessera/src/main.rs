//! `tessera`: run the local database, talk to it, benchmark it.
//!
//! The command line and every command's help are in cli.rs; each command's flags and code are
//! in its module (listed below), and `run` hands each command its arguments. The modules are
//! listed in layers, each importing only those listed below it: no module imports from this
//! file, no command from another command, and what the commands build on imports no command.

#![forbid(unsafe_code)]

// The command line: global flags, the list of commands and their help.
mod cli;

// The commands, each module holding its commands' flags and code.
mod advise; // trace, advise
mod backup; // backup, restore
mod bench; // bench
mod calibrate; // calibrate
mod certs; // certs
mod daemons; // dev, coordinator, server (the cluster's daemons: cluster.rs)
mod explain; // explain (and a search's plan as JSON)
mod objects; // put, put-many, get, get-many, get-range, get-by-tags, del, search, count
mod spaces; // add-space, rm-space, list-spaces, stats, recut, key-regions, split-region,
            // alter-space
mod status; // status, decommission

// What the commands build on, in layers from the top, each importing only the layers below
// it. The cluster's daemons,
mod cluster;

// their HTTP port,
mod http;

// its web console,
mod console;

// the drivers (adaptation, re-cuts, key splits), the cluster's state as status and the console
// show it, the daemons' TLS and tokens,
mod adapt;
mod overview;
mod recut;
mod security;
mod splits;

// what the drivers share with the commands: the advisor asked about a live space, subspaces
// altered, a search's plan as JSON, predicates as the command line writes them,
mod advice;
mod alter;
mod explanation;
mod predicates;

// and below them: the drivers' ticks and client, cut points, values as JSON, the flags that
// bound what clients may hold of a daemon.
mod driver;
mod fitting;
mod json;
mod limits;

// What every command shares: how a daemon is told to stop, its input and output, where it
// connects,
mod signals;
mod stdio;
mod target;

// and how it fails.
mod failure;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, LogFormat};
use crate::failure::Failure;

/// mimalloc, not the system's: a search allocates and frees hundreds of objects, and glibc's
/// malloc and free were a fifth of the server's CPU and 40 % of the client's on one. Measured
/// (workload secondary, 100 000 people, 16 tasks, server and client each on one core):
/// `city = C` (~100 matches) went from 12.8 k to 24.7 k searches/s, the client no longer the
/// bottleneck; `city = C AND age = A` from 26.8 k to 30.0 k. Without transparent huge pages
/// (`no_thp`): mimalloc let go of freed memory and took fresh 2 MiB pages back, each zeroed on
/// its first touch, a tenth of the server's CPU on YCSB E; without them E's scans went from
/// 3.4 k to 5.0 k ops/s (p99 from 64 ms to 6 ms) and the range on `score` from 10.6 k to 12.5 k.
/// The `system-allocator` feature leaves it out, so that heap profilers which hook malloc see
/// every allocation.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    stdio::end_quietly_on_a_closed_stdout();
    let cli = Cli::parse();
    init_logging(&cli);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Negative(m)) => {
            eprintln!("{m}");
            ExitCode::from(1)
        }
        Err(Failure::Error(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(2)
        }
    }
}

/// Logs to stderr as `--log` and `--log-format` say.
fn init_logging(cli: &Cli) {
    let default = if cli.command.is_daemon() {
        "info,openraft=warn,fjall=warn,lsm_tree=warn"
    } else {
        "warn,openraft=error"
    };
    let filter = match &cli.log {
        Some(directives) => tracing_subscriber::EnvFilter::new(directives),
        None => {
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into())
        }
    };
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Runs the command given, with the global flags saying where client commands connect.
async fn run(cli: Cli) -> Result<(), Failure> {
    let target = &cli.target;
    match cli.command {
        Command::Dev(args) => daemons::dev(args, target).await,
        Command::Coordinator(args) => daemons::coordinator(args, target).await,
        Command::Server(args) => daemons::server(args, target).await,
        Command::Backup(args) => backup::backup(args, target).await,
        Command::Restore(args) => backup::restore(args, target).await,
        Command::Certs(args) => certs::certs(args),
        Command::Status(args) => status::status(args, target).await,
        Command::AddSpace(args) => spaces::add_space(args, target).await,
        Command::RmSpace(args) => spaces::rm_space(args, target).await,
        Command::KeyRegions(args) => spaces::key_regions(args, target).await,
        Command::Stats(args) => spaces::stats(args, target).await,
        Command::Recut(args) => spaces::recut(args, target).await,
        Command::SplitRegion(args) => spaces::split_region(args, target).await,
        Command::AlterSpace(args) => spaces::alter_space(args, target).await,
        Command::Decommission(args) => status::decommission(args, target).await,
        Command::ListSpaces(args) => spaces::list_spaces(args, target).await,
        Command::Put(args) => objects::put(args, target).await,
        Command::Get(args) => objects::get(args, target).await,
        Command::GetMany(args) => objects::get_many(args, target).await,
        Command::GetRange(args) => objects::get_range(args, target).await,
        Command::GetByTags(args) => objects::get_by_tags(args, target).await,
        Command::PutMany(args) => objects::put_many(args, target).await,
        Command::Del(args) => objects::del(args, target).await,
        Command::Search(args) => objects::search(args, target).await,
        Command::Count(args) => objects::count(args, target).await,
        Command::Explain(args) => explain::explain(args, target).await,
        Command::Trace(args) => advise::trace(args, target).await,
        Command::Advise(args) => advise::advise(args, target).await,
        Command::Calibrate(args) => calibrate::calibrate(args, target).await,
        Command::Bench(args) => bench::bench(args, target).await,
    }
}
