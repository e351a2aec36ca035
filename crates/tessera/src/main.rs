//! `tessera`: run the local database, talk to it, benchmark it.

#![forbid(unsafe_code)]

mod adapt;
mod advise;
mod alter;
mod backup;
mod calibrate;
mod certs;
mod cluster;
mod console;
mod driver;
mod explain;
mod failure;
mod fitting;
mod http;
mod json;
mod limits;
mod predicates;
mod recut;
mod security;
mod signals;
mod splits;
mod status;
mod stdio;
mod target;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use tessera_client::{Client, ServerId};
use tessera_server::{Server, ServerOptions};
use tessera_storage::FsyncPolicy;

use crate::failure::Failure;
use crate::signals::wait_for_stop_signal;
use crate::stdio::{end_quietly_on_a_closed_stdout, print_line, read_text};
use crate::target::connect;

const ABOUT: &str = "Tessera: a searchable, strongly consistent key-value store.

Start a local database with `tessera dev` (or a local cluster with `tessera dev --servers 4`),
then use the client commands against it. For a cluster over several machines, run
`tessera coordinator` (1, 3 or 5 of them) and `tessera server` (as many as you like); client
commands then take --addr of any coordinator.
Client commands exit 0 on success, 1 when the object is not found or a condition
failed, and 2 on a usage or server error (the error goes to stderr).";

#[derive(Parser)]
#[command(name = "tessera", version, about = "Tessera: a searchable, strongly consistent key-value store", long_about = ABOUT)]
struct Cli {
    #[command(flatten)]
    target: target::Target,
    /// What to log on stderr: a level (error, warn, info, debug, trace) or per-module
    /// directives (`info,tessera_server=debug`). Default: info for daemons (every start, stop,
    /// configuration change, refused request and failure, once each), warn for client
    /// commands; RUST_LOG is read when this is not given.
    #[arg(long, global = true, env = "TESSERA_LOG", value_name = "FILTER")]
    log: Option<String>,
    /// How log lines look: human (the default) or json (one object a line, for collectors).
    #[arg(long, global = true, value_enum, default_value = "human")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Fsync {
    /// fsync every group commit before acknowledging its writes (no acknowledged write is
    /// ever lost).
    Always,
    /// fsync about once a second: a crash may lose the last second of acknowledged writes.
    Periodic,
    /// leave it to the operating system: a machine crash may lose recent writes.
    Never,
}

#[derive(Subcommand)]
enum Command {
    /// Run the local database in the foreground.
    ///
    /// By default one server owns every region. With --servers N (N > 1) it runs a local
    /// cluster in this process: --coordinators coordinators (the first listens on --listen, so
    /// client commands work unchanged) and N servers, in subdirectories of --data-dir.
    /// Prints one line on stdout once it accepts connections. Stop it with Ctrl-C.
    Dev {
        /// Data directory (created if absent).
        #[arg(long, default_value = "./tessera-data")]
        data_dir: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:1982")]
        listen: SocketAddr,
        /// When writes reach the disk.
        #[arg(long, value_enum, default_value = "always")]
        fsync: Fsync,
        /// Storage block cache, in MiB. Resident memory is about this plus a fixed overhead.
        #[arg(long, default_value_t = 64)]
        cache_mb: u64,
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
        /// Server lease, in milliseconds: a server serves only while the coordinators' leader
        /// renewed its lease within this long (it heartbeats every quarter lease), and the leader
        /// takes a server it has not heard from for this long plus half of it (the clock-drift
        /// margin) out of every replica set, so the next replica leads. Cluster only.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        lease_ms: u64,
        /// Seconds of each observation of the spaces declared `adapt on`: every period, the
        /// workload each one served is scored by the advisor, and a space is re-subspaced once
        /// another configuration is predicted at least 20 % faster three periods running.
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
        adapt_period_s: u64,
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
    },
    /// Run one coordinator: a member of the Raft group that holds the cluster's configuration.
    ///
    /// Start every member with the same --peers list. Example, three on one machine:
    ///
    ///   tessera coordinator --id 1 --data-dir c1 --listen 127.0.0.1:1982 \
    ///       --peers 1=127.0.0.1:1982,2=127.0.0.1:1983,3=127.0.0.1:1984
    ///
    /// and the same with --id 2 / --listen 127.0.0.1:1983, and --id 3 / 127.0.0.1:1984.
    #[command(
        verbatim_doc_comment,
        about = "Run one coordinator: a member of the Raft group that holds the cluster's configuration"
    )]
    Coordinator {
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
        /// Server lease, in milliseconds: a server serves only while the coordinators' leader
        /// renewed its lease within this long (it heartbeats every quarter lease), and the leader
        /// takes a server it has not heard from for this long plus half of it (the clock-drift
        /// margin) out of every replica set, so the next replica leads. Give every coordinator the same value.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        lease_ms: u64,
        /// Seconds of each observation of the spaces declared `adapt on`: every period, the
        /// workload each one served is scored by the advisor, and a space is re-subspaced once
        /// another configuration is predicted at least 20 % faster three periods running.
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
        adapt_period_s: u64,
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
    },
    /// Run one storage server of a cluster: it registers with the coordinators (and keeps
    /// its identity in --data-dir across restarts), then serves the regions they give it.
    Server {
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
        #[arg(long, value_enum, default_value = "always")]
        fsync: Fsync,
        #[arg(long, default_value_t = 64)]
        cache_mb: u64,
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
    },
    /// Copy a space out: its description and every object, while traffic goes on.
    ///
    /// Writes DIR/description.txt, DIR/objects.jsonl (one object a line, as `search` prints
    /// them) and, last, DIR/manifest.json. Each object is read whole, at one version; objects
    /// written during the backup may or may not be in it. Works on `tessera dev` and clusters.
    Backup {
        /// The space to copy.
        space: String,
        /// A new (or empty) directory for the backup.
        dir: PathBuf,
    },
    /// Load a backup made by `tessera backup` into a new space (of the same name, or --as).
    ///
    /// Creates the space from DIR/description.txt, then puts every object of
    /// DIR/objects.jsonl; fails if the space exists, and says how many objects failed if any.
    Restore {
        /// The backup's directory.
        dir: PathBuf,
        /// Create the space under this name instead of the one backed up.
        #[arg(long = "as", value_name = "NAME")]
        name: Option<String>,
    },
    /// Make a certificate authority and certificates for daemons serving TLS.
    ///
    /// Creates DIR/ca.pem and DIR/ca.key on first use (the authority: give ca.pem to clients
    /// and daemons as --tls-ca, and keep ca.key away from them); later runs sign with the same
    /// authority. Each run writes one daemon certificate, DIR/NAME.pem with its key
    /// DIR/NAME.key (readable by its owner only), valid for every --host given: the names and
    /// IP addresses clients and members dial the daemon by. For example, on a laptop:
    ///
    ///   tessera certs ./tls --host 127.0.0.1 --host localhost
    ///   tessera dev --tls-cert tls/127.0.0.1.pem --tls-key tls/127.0.0.1.key --tls-ca tls/ca.pem
    ///   tessera --tls-ca tls/ca.pem status
    #[command(
        verbatim_doc_comment,
        about = "Make a certificate authority and certificates for daemons serving TLS"
    )]
    Certs {
        /// Directory for the authority and the certificates (created if absent).
        dir: PathBuf,
        /// A host name or IP address the daemon is reached by (repeat for each).
        #[arg(long = "host", required = true, value_name = "HOST")]
        hosts: Vec<String>,
        /// File name (without extension) of the certificate and key (default: the first
        /// --host).
        #[arg(long)]
        name: Option<String>,
    },
    /// Show the cluster: coordinators (leader, term), servers (state, regions, when the leader
    /// last heard from each and the epoch each acts on), spaces (with the state transfers under
    /// way), the epoch.
    Status {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Create a space from its description, read from FILE or, without one, from stdin.
    ///
    /// Example description:
    ///   space hotels
    ///   key id
    ///   attributes string city, int stars, int price
    ///   subspace city, price
    ///   create 64 partitions
    ///   tolerate 0 failures
    #[command(
        verbatim_doc_comment,
        about = "Create a space from its description, read from FILE or, without one, from stdin"
    )]
    AddSpace {
        /// File holding the description; `-` or nothing for stdin.
        file: Option<PathBuf>,
    },
    /// Remove a space and all its objects.
    RmSpace { space: String },
    /// Print each key region of a space: the objects it holds, the key it would split at,
    /// and its replicas (server ids, the point leader first); then the splits made so far.
    ///
    /// In a space with `placement ordered`, key regions are ranges of keys: a region that
    /// outgrows the others is split at its middle key (by the coordinators, or with
    /// `tessera split-region`). Each region's leader counts its objects by reading it whole.
    KeyRegions { space: String },
    /// Print statistics of a space's values, one JSON line per attribute: how many objects
    /// have it, distinct values (estimated), smallest, largest and, for ints and floats,
    /// quantiles (p1 ... p99).
    ///
    /// Each server leading key regions reads the objects of its regions and sketches their
    /// values (a t-digest of the numbers, a HyperLogLog of the distinct values); the client
    /// merges the sketches. `key_regions_counted` says how many key regions answered (a
    /// server that is down leaves its regions out). These are the statistics a re-cut cuts by.
    ///
    /// In a dynamic space, also one line per document path an overlay names (`"path"`): the
    /// strings, ints and floats there of the documents whose formula places them in such an
    /// overlay (at most 64 paths).
    Stats {
        space: String,
        /// Only this attribute (or, in a dynamic space, this overlay path).
        attribute: Option<String>,
    },
    /// Cut a subspace's axes again where the data lies: each int or float axis at the
    /// quantiles of its values (`tessera stats`), so that every region holds about the same
    /// number of objects. Hashed (string) axes are cut at the quantiles of their values' hashes
    /// (a very frequent value gets an interval of its own).
    ///
    /// A dynamic space's overlays re-cut the same way: a path holding mostly numbers is an
    /// ordered axis, cut at its quantiles in the proportions of the overlay's weights (the
    /// unispace hashes and is not re-cut).
    ///
    /// Without SUBSPACE, every subspace with an int or float axis (every overlay), one after
    /// the other. Each
    /// is rebuilt beside the old one while the space serves (as `alter-space add-subspace`
    /// builds, with the new cuts) and replaces it in the epoch that makes it serve: searches
    /// use the old one until then, the new one after. The new subspace takes the next subspace
    /// id. Prints one JSON line per subspace: its regions before and after, and its new id.
    Recut {
        space: String,
        /// The subspace to re-cut (`tessera status` lists them).
        subspace: Option<u16>,
        /// Give up waiting for a build after this many seconds (it goes on).
        #[arg(long)]
        wait_timeout: Option<f64>,
    },
    /// Split a key region of an ordered space (`placement ordered`) in two: its keys from
    /// the split key up become a new region, on the same servers at first; the cluster's
    /// balancing then moves it (or others) by state transfer. Writes and reads go on.
    ///
    /// Without REGION, the fullest region; without --at, the region's middle key (as
    /// `tessera key-regions` shows it). The coordinators split regions that outgrow the
    /// others by themselves (`--split-period-s` of `tessera coordinator` / `tessera dev`).
    SplitRegion {
        space: String,
        /// The key region to split (`tessera key-regions` lists them).
        region: Option<u32>,
        /// The first key of the new region: it must lie inside REGION, above its first key.
        #[arg(long, allow_hyphen_values = true)]
        at: Option<String>,
    },
    /// Add or drop a subspace of a live space: `tessera alter-space hotels add-subspace
    /// city,price` or `tessera alter-space hotels drop-subspace 2`.
    ///
    /// Reads, writes and searches go on throughout. An added subspace gets the next unused id
    /// and is built from the objects already stored: from the moment it is added every write
    /// goes through it too, while the servers copy the existing objects into it, key region by
    /// key region; searches do not use it until every key region is done, and then it serves
    /// them (`tessera status` shows it `building` with its progress, then `serving`; `--wait`
    /// blocks until then, printing the progress). One subspace is built at a time per space.
    /// A dropped subspace serves no search and no write goes through it from the next
    /// configuration on; the servers drop its data.
    ///
    /// Subspace ids are stable: they are the ids `tessera status`, `tessera explain` and
    /// `drop-subspace` use, a subspace keeps its id for the life of the space, and a dropped
    /// subspace's id is never reused. A space uses at most 32 subspace ids over its life (the
    /// key subspace, 0, is one and cannot be dropped): past that, create a new space.
    ///
    /// `adapt on|off` hands the choice of subspaces to Tessera (see `alter-space SPACE adapt
    /// --help`).
    ///
    /// Prints a line saying what changed (with --wait, another once the subspace is built;
    /// with --json, one JSON object: the subspace's id, attributes and state). Refused, changing
    /// nothing, when an attribute is unknown, repeated, the key or not a string, int or float,
    /// when a subspace over those attributes exists, while another subspace is being built, or
    /// for a subspace id the space does not have.
    AlterSpace {
        /// The space's name.
        space: String,
        #[command(subcommand)]
        change: AlterChange,
    },
    /// Take a server out of the cluster without losing a replica: its regions move elsewhere,
    /// then it leaves.
    ///
    /// The coordinators mark the server `leaving`: it gets no new regions, and each region it
    /// holds is copied to another server by state transfer while the cluster keeps serving
    /// reads and writes (a few regions at a time per server, so the copying does not swamp the
    /// live load). As each copy completes, the server drops out of that region. Once it holds no
    /// region it leaves the configuration, and it can be stopped. Follow the draining with
    /// `tessera status`. Refused when fewer servers than some space's replicas would remain
    /// (add a server first). Cluster only.
    Decommission {
        /// The server's id, as `tessera status` lists it.
        #[arg(long)]
        server: u64,
    },
    /// List the spaces, one name per line (with --describe: their full descriptions, each
    /// followed by its subspaces by id with their states, as `#` comments).
    ListSpaces {
        #[arg(long)]
        describe: bool,
    },
    /// Store an object: `tessera put hotels h1 '{"city": "Ithaca", "stars": 4}'`.
    ///
    /// Attributes not given keep their value, or take their type's default ("", 0, 0.0,
    /// empty) when the object is new. Sets and lists are JSON arrays, maps JSON objects. A
    /// string of bytes that are not UTF-8 text is `{"base64": "..."}`, as `get` prints it.
    ///
    /// In a dynamic space the JSON is a document of any properties, merged into the stored
    /// one as JSON Merge Patch does: a property given replaces the stored one, nested
    /// objects merge, and `null` removes a property.
    Put {
        /// The space's name.
        space: String,
        /// The object's key, read as the space's key type.
        key: String,
        /// The attributes, as one JSON object; `-` reads it from stdin and `@FILE` from a file
        /// (for objects too large for a command line, up to the 1 MiB limit).
        json: String,
        /// A dynamic space's document: place it by this registered compression formula
        /// (`alter-space SPACE add-formula`); `''` for the default, the unispace. Without it
        /// the document keeps the formula it has (a new one gets the default).
        #[arg(long)]
        formula: Option<String>,
    },
    /// Print an object as one line of JSON (exit 1 if there is none).
    Get {
        /// The space's name.
        space: String,
        /// The object's key, read as the space's key type.
        key: String,
    },
    /// Print the objects of several keys, one line of JSON each in the keys' order, `null`
    /// for a key with none. Each key is read as `get` reads it (in a cluster, each point
    /// leader is asked once for all its keys); the keys are not read as one snapshot.
    GetMany {
        space: String,
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Print the objects whose keys lie in [FROM, TO), in key order, one line of JSON each.
    ///
    /// In a space with `placement ordered` only the regions the range overlaps are read; in
    /// any other, every region of the key subspace. Like a search, every object printed is a
    /// version it had; the range is not read as one snapshot.
    GetRange {
        space: String,
        /// The first key of the range (included).
        #[arg(long, allow_hyphen_values = true)]
        from: String,
        /// The end of the range (excluded).
        #[arg(long, allow_hyphen_values = true)]
        to: String,
        /// At most this many objects, the smallest keys first.
        #[arg(long)]
        limit: Option<u32>,
        /// Print how the read would run (regions and servers, with and without minimizing
        /// the servers) instead of running it.
        #[arg(long)]
        explain: bool,
    },
    /// Print the objects whose tags include every TAG, in key order, one line of JSON each.
    ///
    /// The tags are the set(string) attribute of the space's `placement tagged`, or else its
    /// only set(string) attribute. In a tagged space only the regions of the tags' cells on
    /// the tag curve are read; in any other, every region.
    GetByTags {
        space: String,
        #[arg(required = true)]
        tags: Vec<String>,
        /// Print how the read would run instead of running it.
        #[arg(long)]
        explain: bool,
    },
    /// Put several objects read from standard input, one JSON object per line with its key
    /// among the attributes (as `get` and `get-many` print them). Each is put as `put` puts
    /// one; it is NOT a transaction: every line is attempted, a failed one changes nothing of
    /// its key and undoes none of the others. Prints a JSON line per object in input order,
    /// {"key": K, "ok": true} or {"key": K, "error": "..."}, and exits 2 if any failed. A line
    /// that is not such an object stops everything before anything is written.
    PutMany {
        space: String,
        /// A dynamic space's documents: place them all by this registered compression formula.
        #[arg(long)]
        formula: Option<String>,
    },
    /// Delete an object (exit 1 if there is none).
    Del { space: String, key: String },
    /// Print every object matching all predicates, one JSON object per line.
    ///
    /// Predicates: attr=value, attr<value, attr<=value, attr>value, attr>=value, attr~regex.
    /// No predicate matches everything. Quote them for the shell: 'price<=100'.
    ///
    /// In a dynamic space predicates name dotted property paths ('venue.name=SOSP'), and
    /// structure: 'exists(doi)', 'exists(author|editor)' (either), 'missing(editor)'.
    Search {
        /// The space's name.
        space: String,
        /// Predicates that must all hold: attr=value, attr<value, attr<=value, attr>value,
        /// attr>=value, attr~regex (values read as the attribute's type; quote them for the
        /// shell). In a dynamic space, dotted paths and exists(path), missing(path). None: every
        /// object.
        predicates: Vec<String>,
    },
    /// Print how many objects match all predicates.
    Count {
        /// The space's name.
        space: String,
        /// Predicates that must all hold: attr=value, attr<value, attr<=value, attr>value,
        /// attr>=value, attr~regex (values read as the attribute's type; quote them for the
        /// shell). In a dynamic space, dotted paths and exists(path), missing(path). None: every
        /// object.
        predicates: Vec<String>,
    },
    /// Show how a search would run: the subspace chosen and the regions it contacts (JSON).
    ///
    /// In a typed space, also what the space's statistics (`tessera stats`) predict:
    /// `estimated_objects_read`, the objects in the regions contacted (what the search costs),
    /// and `estimated_matches` (what it returns), each with the axes and predicates taken as
    /// independent, out of `objects`.
    ///
    /// In a dynamic space: the unispace's axes, the axis each predicate's property hashes
    /// onto, and the shapes of document the search reads (those that can match, of all the
    /// shapes the space has registered), one box each.
    Explain {
        /// The space's name.
        space: String,
        /// Predicates that must all hold: attr=value, attr<value, attr<=value, attr>value,
        /// attr>=value, attr~regex (values read as the attribute's type; quote them for the
        /// shell). In a dynamic space, dotted paths and exists(path), missing(path). None: every
        /// object.
        predicates: Vec<String>,
    },
    /// Show the workload a space served: the shapes of its requests over the last minutes, as
    /// every server sampled them, one JSON line per kind of request with its share `p` of all
    /// requests. A search's line names
    /// each attribute it fixed (`eq`), bounded (`range`) or otherwise filtered (`other`) and the
    /// objects it matched on average (`matches`); an update's line the attributes it set.
    ///
    /// Example: `tessera trace hotels --minutes 10 > workload.jsonl`
    Trace {
        space: String,
        /// How many minutes back (each server keeps the last 15); 0: everything since each
        /// server started (what the adaptation driver reads).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=15))]
        minutes: u32,
    },
    /// Rank subspace configurations of a space for a workload with Tessera's performance model
    /// (DESIGN §8): every configuration within the bounds is scored, equal scores are grouped,
    /// and the baselines (no subspace, one hyperspace, one subspace per attribute, dominant,
    /// greedy, and the space's current configuration) are scored beside them. Prints one JSON
    /// object: the ranked groups with each configuration's subspaces, predicted throughput and,
    /// per query class, the terms behind it (subspace used, regions contacted, objects read,
    /// chain length).
    ///
    /// The workload is a file of JSON lines (`--workload`; format in
    /// crates/tessera-advisor/src/parse.rs, and what `tessera trace` prints) or the live trace
    /// (`--from-trace`). Without an `{"objects": N}` line the space's current object count is
    /// used. The model's constants are defaults measured on a 2-core machine: the ranking holds
    /// better than the absolute figures.
    ///
    /// With --apply, the best configuration is then made the space's, live, by `alter-space`
    /// changes: the subspaces it has that the space lacks (attribute sets compared in any
    /// order) are added one at a time, each waited for until built (one build at a time), then
    /// the subspaces it does not have are dropped (never the key subspace). Each change is
    /// printed as one more JSON line after the advice's, then a last line with the subspaces
    /// as they are.
    ///
    /// Example: `tessera advise hotels --workload workload.jsonl --top 3`
    #[command(group(clap::ArgGroup::new("source").required(true).args(["workload", "from_trace"])))]
    Advise {
        space: String,
        /// The workload file (JSON lines); `-` reads stdin.
        #[arg(long)]
        workload: Option<PathBuf>,
        /// Use what the servers sampled over the last `--minutes` minutes instead.
        #[arg(long)]
        from_trace: bool,
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=15))]
        minutes: u32,
        /// How many groups of equally good configurations to print.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
        top: u32,
        /// The model's constants, as `tessera calibrate --save` wrote them (default: those
        /// `tessera calibrate` kept with the configuration, else constants measured on a 2-core
        /// machine).
        #[arg(long)]
        calibration: Option<PathBuf>,
        /// Print, instead of the whole advice, one line per ranked group (its first
        /// configuration) and per baseline: `rank` or `baseline`, `subspaces`, and
        /// `throughput_ops_s` rounded to a whole operation a second.
        #[arg(long)]
        summary: bool,
        /// Make the best configuration the space's (see above).
        #[arg(long)]
        apply: bool,
        /// With --apply: give up waiting for a build after this many seconds (exit 2; the
        /// build goes on). Without it, wait as long as each build takes.
        #[arg(long, requires = "apply")]
        wait_timeout: Option<f64>,
    },
    /// Measure the performance model's constants on this database: creates three scratch
    /// spaces (tessera_calibrate_*; one copy of each region), loads them, runs short closed-loop
    /// gets, searches (contacting one to every region) and writes (through no or two subspaces,
    /// moving the object or not), fits the constants and drops the spaces. Prints the constants
    /// and the measurements as JSON, and keeps the constants with the configuration (standalone
    /// or cluster), where `tessera advise` and `tessera status` find them (`--no-store`: only
    /// print them); `--save FILE` also writes them for `tessera advise --calibration FILE`.
    /// Takes about 8 × --seconds plus the loading; measure on an otherwise idle database.
    Calibrate {
        /// Objects loaded into each scratch space.
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(i64).range(100..=10_000_000))]
        objects: i64,
        /// Seconds each micro-workload runs.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
        concurrency: u64,
        /// Also write the constants (JSON) to this file.
        #[arg(long)]
        save: Option<PathBuf>,
        /// Do not keep the constants with the configuration.
        #[arg(long)]
        no_store: bool,
    },
    /// Benchmark with the YCSB core workloads (against Tessera or, to compare, Redis).
    // Boxed: its options are most of the size of a `Command`.
    Bench(Box<tessera_bench::BenchArgs>),
}

impl Command {
    /// A daemon's security flags.
    fn security_mut(&mut self) -> Option<&mut security::SecurityArgs> {
        match self {
            Command::Dev { security, .. }
            | Command::Coordinator { security, .. }
            | Command::Server { security, .. } => Some(security),
            _ => None,
        }
    }
}

#[derive(Subcommand)]
enum AlterChange {
    /// Add a subspace over these attributes (comma-separated), built from the existing objects;
    /// it serves searches once built. Its axes are cut at the quantiles of the values stored
    /// (`tessera stats`) when the space holds at least as many objects as partitions, else into
    /// equal slices (the re-cut driver re-cuts them once the data has come).
    AddSubspace {
        /// The subspace's attributes: `city,price` (or `city price`).
        #[arg(required = true, num_args = 1.., value_delimiter = ',')]
        attributes: Vec<String>,
        /// Wait until the subspace is built and serves searches, printing the progress (key
        /// regions backfilled) on stderr.
        #[arg(long)]
        wait: bool,
        /// With --wait: give up waiting after this many seconds (exit 2; the build goes on).
        /// Without it, wait as long as the build takes.
        #[arg(long, requires = "wait")]
        wait_timeout: Option<f64>,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Drop subspace N (its id as `tessera status` lists it; not 0, the key subspace). Its id
    /// is not reused.
    DropSubspace {
        subspace: u16,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Turn adaptation on or off: whether Tessera re-subspaces the space itself as its
    /// workload changes (as `adapt on` in a description). With it on, every period
    /// (`--adapt-period-s` of `tessera dev` / `tessera coordinator`, a minute by default) the
    /// workload the space served is scored by the advisor, and once another configuration is
    /// predicted at least 20 % faster three periods running, the decision is logged
    /// (`tessera status` lists it) and its subspaces are added, built and the others dropped,
    /// as `tessera advise --apply` would.
    Adapt {
        #[arg(value_parser = ["on", "off"])]
        state: String,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Register a compression formula in a dynamic space (seed 004 §4): documents put with
    /// `--formula ID` are then placed in its overlays instead of the unispace, one copy each.
    /// Each overlay is one argument, its properties joined by commas, each with an optional
    /// weight (relative regions along it): `title` `year*4,venue.name*2`. An overlay written
    /// with `&` first (`&title`) holds pointers instead of copies: only the key and its own
    /// properties, so it costs little to write and store, and a search that reads it reads
    /// each match by key. An overlay names at most as many properties as the space has
    /// dimensions. Overlays the space lacks become new subspaces, serving at once. A search
    /// reads, per formula, the overlay its predicates narrow most (a copy between equals).
    AddFormula {
        /// The overlays, one per argument.
        #[arg(required = true)]
        overlays: Vec<String>,
        /// The formula's id; without it, the overlays' text (`title | year*4,venue.name*2`).
        #[arg(long)]
        id: Option<String>,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// A --wait-timeout in seconds, checked.
fn wait_timeout(seconds: Option<f64>) -> Result<Option<std::time::Duration>, Failure> {
    match seconds {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(std::time::Duration::from_secs_f64(s))),
        Some(s) => Err(Failure::Error(format!(
            "--wait-timeout must be a positive number of seconds, not {s}"
        ))),
    }
}

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
    end_quietly_on_a_closed_stdout();
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
    let daemon = matches!(
        cli.command,
        Command::Dev { .. } | Command::Coordinator { .. } | Command::Server { .. }
    );
    let default = if daemon {
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

async fn run(cli: Cli) -> Result<(), Failure> {
    let target = cli.target;
    let mut command = cli.command;
    if let Some(security) = command.security_mut() {
        // A daemon serving TLS trusts the same authority when it connects to members.
        security.tls_ca = target.tls_ca.clone();
    }
    match command {
        Command::Dev {
            data_dir,
            listen,
            fsync,
            cache_mb,
            servers,
            replicas,
            coordinators,
            lease_ms,
            adapt_period_s,
            splits,
            recut,
            limits,
            security,
            http,
        } => {
            let adapt = adapt_options(adapt_period_s);
            if servers <= 1 {
                let storage = storage_options(fsync, cache_mb);
                dev(
                    data_dir,
                    listen,
                    storage,
                    (adapt, recut.options()),
                    (limits.options(), &security, &http),
                )
                .await
            } else {
                let storage = storage_options(fsync, cache_mb);
                cluster::dev(cluster::DevCluster {
                    data_dir,
                    listen,
                    storage,
                    servers,
                    replicas,
                    coordinators,
                    lease_ms,
                    adapt,
                    splits: splits.options(),
                    recut: recut.options(),
                    limits: limits.options(),
                    security,
                    http,
                })
                .await
            }
        }
        Command::Coordinator {
            id,
            data_dir,
            listen,
            peers,
            default_tolerate,
            lease_ms,
            adapt_period_s,
            splits,
            recut,
            limits,
            security,
            http,
        } => {
            let coordinator = cluster::CoordinatorArgs {
                id,
                data_dir,
                listen,
                default_tolerate,
                lease_ms,
                adapt: adapt_options(adapt_period_s),
                splits: splits.options(),
                recut: recut.options(),
                limits: limits.options(),
                security,
                http,
            };
            cluster::coordinator(coordinator, &peers).await
        }
        Command::Server {
            data_dir,
            listen,
            coordinators,
            advertise,
            fsync,
            cache_mb,
            transfer_mb_s,
            limits,
            security,
            http,
        } => {
            let storage = storage_options(fsync, cache_mb);
            cluster::server(
                data_dir,
                listen,
                &coordinators,
                advertise,
                storage,
                transfer_mb_s * 1_000_000,
                (limits.options(), &security, &http),
            )
            .await
        }
        Command::Backup { space, dir } => {
            backup::backup(&connect(&target).await?, &space, &dir).await
        }
        Command::Restore { dir, name } => {
            backup::restore(&connect(&target).await?, &dir, name.as_deref()).await
        }
        Command::Certs { dir, hosts, name } => certs::make(&dir, &hosts, name.as_deref()),
        Command::Status { json } => status::status(&connect(&target).await?, json).await,
        Command::Bench(mut args) => {
            args.client.token = target.token.clone();
            if let Some(ca) = &target.tls_ca {
                args.client = args
                    .client
                    .with_tls_ca(ca)
                    .map_err(|e| Failure::Error(format!("--tls-ca: {e}")))?;
            }
            let report = tessera_bench::run(*args)
                .await
                .map_err(|e| Failure::Error(e.to_string()))?;
            let json = serde_json::to_value(&report).map_err(|e| Failure::Error(e.to_string()))?;
            println!("{}", serde_json::to_string_pretty(&json).expect("JSON"));
            Ok(())
        }
        Command::AddSpace { file } => {
            let description = read_text(file.as_deref().unwrap_or(Path::new("-")))?;
            connect(&target).await?.add_space(&description).await?;
            Ok(())
        }
        Command::RmSpace { space } => Ok(connect(&target).await?.rm_space(&space).await?),
        Command::Stats { space, attribute } => {
            let client = connect(&target).await?;
            recut::print_stats(&client, &space, attribute.as_deref()).await
        }
        Command::Recut {
            space,
            subspace,
            wait_timeout: seconds,
        } => {
            let client = connect(&target).await?;
            recut::recut(&client, &space, subspace, wait_timeout(seconds)?).await
        }
        Command::KeyRegions { space } => {
            let client = connect(&target).await?;
            splits::print_key_regions(&client, &space).await
        }
        Command::SplitRegion { space, region, at } => {
            let client = connect(&target).await?;
            let at = match at {
                Some(at) => {
                    let schema = client.describe_space(&space).await?;
                    Some(predicates::parse_key(&schema, &at)?)
                }
                None => None,
            };
            splits::split_region(&client, &space, region, at).await
        }
        Command::AlterSpace { space, change } => {
            let (alteration, json) = match change {
                AlterChange::AddSubspace {
                    attributes,
                    wait,
                    wait_timeout: seconds,
                    json,
                } => (
                    alter::Alteration::Add {
                        attributes,
                        wait,
                        wait_timeout: wait_timeout(seconds)?,
                    },
                    json,
                ),
                AlterChange::DropSubspace { subspace, json } => {
                    (alter::Alteration::Drop { subspace }, json)
                }
                AlterChange::Adapt { state, json } => {
                    (alter::Alteration::Adapt { on: state == "on" }, json)
                }
                AlterChange::AddFormula { overlays, id, json } => {
                    (alter::Alteration::AddFormula { id, overlays }, json)
                }
            };
            let client = connect(&target).await?;
            alter::alter_space(&client, &space, alteration, json).await
        }
        Command::Decommission { server } => {
            status::decommission(&connect(&target).await?, ServerId(server)).await
        }
        Command::ListSpaces { describe } => {
            let config = connect(&target).await?.refresh().await?;
            for space in &config.spaces {
                let schema = &space.schema;
                if describe {
                    // The description, then each subspace by id with its state, as comments
                    // (so the text is still a description `add-space` takes).
                    print!("{schema}");
                    for id in schema.subspace_ids() {
                        println!("# {}", alter::subspace_text(space, id));
                    }
                    println!();
                } else {
                    println!("{}", schema.name);
                }
            }
            Ok(())
        }
        Command::Put {
            space,
            key,
            json: text,
            formula,
        } => {
            let text = match text.strip_prefix('@') {
                Some(file) => read_text(Path::new(file))?,
                None if text == "-" => read_text(Path::new("-"))?,
                None => text,
            };
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            let key = predicates::parse_key(&schema, &key)?;
            if schema.is_dynamic() {
                let patch = json::document_from_json(&text)?;
                match formula {
                    Some(f) => {
                        client
                            .put_document_with_formula(&space, key, patch, &f)
                            .await?
                    }
                    None => client.put_document(&space, key, patch).await?,
                }
                return Ok(());
            }
            if formula.is_some() {
                return Err(Failure::Error(format!(
                    "--formula places documents of dynamic spaces; {space:?} is typed"
                )));
            }
            let attributes = json::attributes_from_json(&schema, &text)?;
            client.put(&space, key, attributes).await?;
            Ok(())
        }
        Command::PutMany { space, formula } => {
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            if formula.is_some() && !schema.is_dynamic() {
                return Err(Failure::Error(format!(
                    "--formula places documents of dynamic spaces; {space:?} is typed"
                )));
            }
            let mut shown = Vec::new();
            let mut items = Vec::new();
            for (n, line) in std::io::stdin().lines().enumerate() {
                let line =
                    line.map_err(|e| Failure::Error(format!("reading standard input: {e}")))?;
                if line.trim().is_empty() {
                    continue;
                }
                let at = |e: String| Failure::Error(format!("line {}: {e}", n + 1));
                let (key_json, key, funcalls) =
                    json::put_from_json_line(&schema, &line, formula.as_deref()).map_err(at)?;
                shown.push(key_json);
                items.push((key, funcalls));
            }
            let outcomes = client.multi_put(&space, items).await;
            let total = outcomes.len();
            let mut failed = 0;
            for (key, outcome) in shown.into_iter().zip(outcomes) {
                let line = match outcome {
                    Ok(()) => serde_json::json!({"key": key, "ok": true}),
                    Err(e) => {
                        failed += 1;
                        serde_json::json!({"key": key, "error": e.to_string()})
                    }
                };
                print_line(&line)?;
            }
            if failed > 0 {
                return Err(Failure::Error(format!(
                    "{failed} of {total} puts failed; the others are stored (put-many is not a transaction)"
                )));
            }
            Ok(())
        }
        Command::Get { space, key } => {
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            let key = predicates::parse_key(&schema, &key)?;
            match client.get(&space, key.clone()).await? {
                Some(record) => print_line(&json::object_to_json(
                    &schema,
                    &record.key,
                    &record.attributes,
                )),
                None => Err(Failure::Negative(format!(
                    "not found: no object with key {key} in {space:?}"
                ))),
            }
        }
        Command::GetMany { space, keys } => {
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            let keys = keys
                .iter()
                .map(|k| predicates::parse_key(&schema, k))
                .collect::<Result<Vec<_>, _>>()?;
            for found in client.multi_get(&space, keys).await? {
                match found {
                    Some(record) => print_line(&json::object_to_json(
                        &schema,
                        &record.key,
                        &record.attributes,
                    ))?,
                    None => print_line(&serde_json::Value::Null)?,
                }
            }
            Ok(())
        }
        Command::GetRange {
            space,
            from,
            to,
            limit,
            explain,
        } => {
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            let (from, to) = (
                predicates::parse_key(&schema, &from)?,
                predicates::parse_key(&schema, &to)?,
            );
            if explain {
                let preds = tessera_client::range_predicates(&schema, from, to);
                return explain_read(&client, &schema, &space, preds).await;
            }
            print_records(
                &schema,
                &client.get_by_range(&space, from, to, limit).await?,
            )
        }
        Command::GetByTags {
            space,
            tags,
            explain,
        } => {
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            if explain {
                let preds = tessera_client::tags_predicates(&schema, tags)?;
                return explain_read(&client, &schema, &space, preds).await;
            }
            print_records(&schema, &client.get_by_tags(&space, tags).await?)
        }
        Command::Del { space, key } => {
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            client
                .del(&space, predicates::parse_key(&schema, &key)?)
                .await?;
            Ok(())
        }
        Command::Search {
            space,
            predicates: texts,
        } => {
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            let preds = texts
                .iter()
                .map(|t| predicates::parse_predicate(&schema, t))
                .collect::<Result<Vec<_>, _>>()?;
            let mut stream = client.search_stream(&space, preds).await?;
            while let Some(record) = stream.next().await? {
                print_line(&json::object_to_json(
                    &schema,
                    &record.key,
                    &record.attributes,
                ))?;
            }
            Ok(())
        }
        Command::Count {
            space,
            predicates: texts,
        } => {
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            let preds = texts
                .iter()
                .map(|t| predicates::parse_predicate(&schema, t))
                .collect::<Result<Vec<_>, _>>()?;
            println!("{}", client.count(&space, preds).await?);
            Ok(())
        }
        Command::Trace { space, minutes } => {
            let client = connect(&target).await?;
            let trace = client.trace(&space, minutes).await?;
            let total = trace.requests();
            let window = match trace.minutes {
                0 => "since the servers started".to_owned(),
                m => format!("over the last {m} minutes"),
            };
            eprintln!(
                "tessera trace: {total:.0} requests in {space:?} {window}, as {} server(s) saw them",
                trace.servers
            );
            for line in json::workload_lines(&trace) {
                print_line(&line)?;
            }
            Ok(())
        }
        Command::Advise {
            space,
            workload,
            from_trace: _,
            minutes,
            top,
            calibration,
            summary,
            apply,
            wait_timeout: seconds,
        } => {
            let wait = wait_timeout(seconds)?;
            let client = connect(&target).await?;
            let calibration = match calibration {
                None => client
                    .refresh()
                    .await?
                    .model
                    .as_ref()
                    .map_or_else(tessera_advisor::Calibration::default, calibrate::from_model),
                Some(path) => serde_json::from_str(&read_text(&path)?).map_err(|e| {
                    Failure::Error(format!("the calibration in {}: {e}", path.display()))
                })?,
            };
            let text = match workload {
                Some(path) => read_text(&path)?,
                None => {
                    let trace = client.trace(&space, minutes).await?;
                    let lines = json::workload_lines(&trace);
                    if lines.is_empty() {
                        return Err(Failure::Error(format!(
                            "no request to {space:?} was traced in the last {minutes} minutes: nothing to advise on"
                        )));
                    }
                    lines
                        .iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                }
            };
            let advice = advise::advise(&client, &space, &text, top as usize, calibration).await?;
            if summary {
                for line in advise::summary_lines(&advice)? {
                    print_line(&line)?;
                }
            } else {
                print_line(&advise::to_json(&advice)?)?;
            }
            if !apply {
                return Ok(());
            }
            let best = advise::best_subspaces(&advice)?;
            alter::apply(&client, &space, &best, wait).await
        }
        Command::Calibrate {
            objects,
            seconds,
            concurrency,
            save,
            no_store,
        } => {
            if !(seconds > 0.0 && seconds <= 600.0) {
                return Err(Failure::Error(format!(
                    "--seconds must be in (0, 600], not {seconds}"
                )));
            }
            let client = std::sync::Arc::new(connect(&target).await?);
            let options = calibrate::CalibrateOptions {
                objects,
                seconds,
                concurrency: concurrency as usize,
            };
            let result = calibrate::calibrate(&client, options).await?;
            if let Some(path) = save {
                std::fs::write(&path, result["calibration"].to_string())
                    .map_err(|e| Failure::Error(format!("writing {}: {e}", path.display())))?;
            }
            if !no_store {
                let fitted: tessera_advisor::Calibration =
                    serde_json::from_value(result["calibration"].clone())
                        .map_err(|e| Failure::Error(format!("the fitted constants: {e}")))?;
                client.set_model(calibrate::to_model(&fitted)).await?;
            }
            print_line(&result)
        }
        Command::Explain {
            space,
            predicates: texts,
        } => {
            let client = connect(&target).await?;
            let schema = client.describe_space(&space).await?;
            let preds = texts
                .iter()
                .map(|t| predicates::parse_predicate(&schema, t))
                .collect::<Result<Vec<_>, _>>()?;
            let paths: Vec<String> = preds.iter().map(|p| p.attr.clone()).collect();
            let e = client.explain(&space, preds.clone()).await?;
            if let tessera_types::SpaceKind::Dynamic { dimensions } = schema.kind {
                let shapes: Vec<_> = e
                    .shapes
                    .iter()
                    .map(|shape| {
                        shape
                            .properties
                            .iter()
                            .map(|(p, k)| (p.clone(), serde_json::json!(k.name())))
                            .collect::<serde_json::Map<_, _>>()
                    })
                    .collect();
                let axes: serde_json::Map<_, _> = paths
                    .iter()
                    .map(|p| {
                        let axis = tessera_geometry::property_axis(p, dimensions);
                        (p.clone(), serde_json::json!(axis))
                    })
                    .collect();
                let parts: Vec<_> = e
                    .parts
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "subspace": p.subspace.0,
                            "dimensions": p.dimensions,
                            "formulas": p.formulas,
                            "regions_contacted": p.regions_contacted,
                            "pointer": p.pointer,
                        })
                    })
                    .collect();
                return print_line(&serde_json::json!({
                    "subspace": e.subspace.0,
                    "parts": parts,
                    "axes": dimensions,
                    "property_axes": axes,
                    "subspace_regions": e.subspace_regions,
                    "regions_contacted": e.regions_contacted,
                    "servers_contacted": e.servers_contacted,
                    "shapes_known": e.shapes_known,
                    "shapes_read": shapes,
                }));
            }
            let mut line = explain::typed_explanation(&schema, &e, false);
            let statistics = client.statistics(&space).await?;
            let config = client.configuration();
            if let Some(space) = config.space(&space) {
                let estimates = explain::estimates(space, &e, &preds, &statistics);
                if let (Some(line), Some(estimates)) = (line.as_object_mut(), estimates.as_object())
                {
                    line.extend(estimates.clone());
                }
            }
            print_line(&line)
        }
    }
}

/// Prints objects one JSON line each, as `get` prints one.
fn print_records(
    schema: &tessera_types::SpaceSchema,
    records: &[tessera_client::Record],
) -> Result<(), Failure> {
    for record in records {
        print_line(&json::object_to_json(
            schema,
            &record.key,
            &record.attributes,
        ))?;
    }
    Ok(())
}

/// Prints how a multi-item read (its search's predicates) would run, whom it asks included.
async fn explain_read(
    client: &Client,
    schema: &tessera_types::SpaceSchema,
    space: &str,
    predicates: Vec<tessera_client::Predicate>,
) -> Result<(), Failure> {
    let e = client.explain(space, predicates).await?;
    print_line(&explain::typed_explanation(schema, &e, true))
}

/// Storage settings of a server: (fsync policy, cache bytes).
fn storage_options(fsync: Fsync, cache_mb: u64) -> (FsyncPolicy, u64) {
    let policy = match fsync {
        Fsync::Always => FsyncPolicy::Always,
        Fsync::Periodic => FsyncPolicy::Periodic { interval_ms: 1000 },
        Fsync::Never => FsyncPolicy::Never,
    };
    (policy, cache_mb * 1024 * 1024)
}

/// The adaptation driver's options: the period given, the advisor's default policy.
fn adapt_options(period_s: u64) -> adapt::AdaptOptions {
    adapt::AdaptOptions {
        period: std::time::Duration::from_secs(period_s),
        policy: tessera_advisor::AdaptPolicy::default(),
    }
}

async fn dev(
    data_dir: PathBuf,
    listen: SocketAddr,
    storage: (FsyncPolicy, u64),
    (adapt, recut): (adapt::AdaptOptions, recut::RecutOptions),
    (limits, security, http): (
        tessera_server::ConnectionLimits,
        &security::SecurityArgs,
        &http::HttpArgs,
    ),
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
    daemons.add(std::sync::Arc::new(server.metrics_publisher()));
    daemons.serve_console(server.local_addr().to_string(), secured.drivers.clone());
    http::say_served("tessera dev", metrics, &daemons);
    // The server is every region's only replica: its own drivers always act.
    let me = (server.local_addr().to_string(), secured.drivers);
    adapt::spawn(me.clone(), adapt, || true);
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
