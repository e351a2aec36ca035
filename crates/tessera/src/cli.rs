//! The command line: the global flags and the list of commands, with the help of each (a
//! command's own flags and its code are in its module: daemons.rs, objects.rs, spaces.rs, ...).
//!
//! The doc comment of each `Command` variant is that command's help (`about`, and `long_about`
//! past its first paragraph), so it stays here, on the variant, with its `#[command(...)]`.

use clap::{Parser, Subcommand, ValueEnum};

use crate::target::Target;
use crate::{advise, backup, calibrate, certs, daemons, explain, objects, spaces, status};

const ABOUT: &str = "Tessera: a searchable, strongly consistent key-value store.

Start a local database with `tessera dev` (or a local cluster with `tessera dev --servers 4`),
then use the client commands against it. For a cluster over several machines, run
`tessera coordinator` (1, 3 or 5 of them) and `tessera server` (as many as you like); client
commands then take --addr of any coordinator.
Client commands exit 0 on success, 1 when the object is not found or a condition
failed, and 2 on a usage or server error (the error goes to stderr).";

#[derive(Parser)]
#[command(name = "tessera", version, long_version = long_version(), about = "Tessera: a searchable, strongly consistent key-value store", long_about = ABOUT)]
pub struct Cli {
    #[command(flatten)]
    pub target: Target,
    /// What to log on stderr: a level (error, warn, info, debug, trace) or per-module
    /// directives (`info,tessera_server=debug`). Default: info for daemons (every start, stop,
    /// configuration change, refused request and failure, once each), warn for client
    /// commands; RUST_LOG is read when this is not given.
    #[arg(long, global = true, env = "TESSERA_LOG", value_name = "FILTER")]
    pub log: Option<String>,
    /// How log lines look: human (the default) or json (one object a line, for collectors).
    #[arg(long, global = true, value_enum, default_value = "human")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// `tessera --version`: the release, the protocol it speaks and the data formats it writes
/// (docs/operations.md, "Upgrading one daemon at a time").
fn long_version() -> &'static str {
    use tessera_protocol::data_format::DataKind;
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{} (protocol {}; data formats: server {}, coordinator {})",
            env!("CARGO_PKG_VERSION"),
            tessera_protocol::PROTOCOL_VERSION,
            DataKind::Server.current(),
            DataKind::Coordinator.current(),
        )
    })
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the local database in the foreground.
    ///
    /// By default one server owns every region. With --servers N (N > 1) it runs a local
    /// cluster in this process: --coordinators coordinators (the first listens on --listen, so
    /// client commands work unchanged) and N servers, in subdirectories of --data-dir.
    /// Prints one line on stdout once it accepts connections. Stop it with Ctrl-C.
    Dev(daemons::DevArgs),
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
    Coordinator(daemons::CoordinatorArgs),
    /// Run one storage server of a cluster: it registers with the coordinators (and keeps
    /// its identity in --data-dir across restarts), then serves the regions they give it.
    ///
    /// SIGTERM or Ctrl-C is a planned stop: it answers the writes it has, tells the
    /// coordinators it rests (its regions wait for it, a replica short, for the coordinators'
    /// --rest-grace-ms instead of being copied elsewhere) and exits; started again on the same
    /// --data-dir, it catches up on what it missed (docs/operations.md, "Restarting a server").
    Server(daemons::ServerArgs),
    /// Copy a space out: its description and every object, while traffic goes on.
    ///
    /// Writes DIR/description.txt, DIR/objects.jsonl (one object a line, as `search` prints
    /// them) and, last, DIR/manifest.json. Each object is read whole, at one version; objects
    /// written during the backup may or may not be in it. Works on `tessera dev` and clusters.
    Backup(backup::BackupArgs),
    /// Load a backup made by `tessera backup` into a new space (of the same name, or --as).
    ///
    /// Creates the space from DIR/description.txt, then puts every object of
    /// DIR/objects.jsonl; fails if the space exists, and says how many objects failed if any.
    Restore(backup::RestoreArgs),
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
    Certs(certs::CertsArgs),
    /// Show the cluster: coordinators (leader, term), servers (state, regions, when the leader
    /// last heard from each and the epoch each acts on), spaces (with the state transfers under
    /// way), the epoch.
    Status(status::StatusArgs),
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
    AddSpace(spaces::AddSpaceArgs),
    /// Remove a space and all its objects.
    RmSpace(spaces::RmSpaceArgs),
    /// Print each key region of a space: the objects it holds, the key it would split at,
    /// and its replicas (server ids, the point leader first); then the splits made so far.
    ///
    /// In a space with `placement ordered`, key regions are ranges of keys: a region that
    /// outgrows the others is split at its middle key (by the coordinators, or with
    /// `tessera split-region`). Each region's leader counts its objects by reading it whole.
    KeyRegions(spaces::KeyRegionsArgs),
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
    Stats(spaces::StatsArgs),
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
    Recut(spaces::RecutArgs),
    /// Split a key region of an ordered space (`placement ordered`) in two: its keys from
    /// the split key up become a new region, on the same servers at first; the cluster's
    /// balancing then moves it (or others) by state transfer. Writes and reads go on.
    ///
    /// Without REGION, the fullest region; without --at, the region's middle key (as
    /// `tessera key-regions` shows it). The coordinators split regions that outgrow the
    /// others by themselves (`--split-period-s` of `tessera coordinator` / `tessera dev`).
    SplitRegion(spaces::SplitRegionArgs),
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
    AlterSpace(spaces::AlterSpaceArgs),
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
    Decommission(status::DecommissionArgs),
    /// List the spaces, one name per line (with --describe: their full descriptions, each
    /// followed by its subspaces by id with their states, as `#` comments).
    ListSpaces(spaces::ListSpacesArgs),
    /// Store an object: `tessera put hotels h1 '{"city": "Ithaca", "stars": 4}'`.
    ///
    /// Attributes not given keep their value, or take their type's default ("", 0, 0.0,
    /// empty) when the object is new. Sets and lists are JSON arrays, maps JSON objects. A
    /// string of bytes that are not UTF-8 text is `{"base64": "..."}`, as `get` prints it.
    ///
    /// In a dynamic space the JSON is a document of any properties, merged into the stored
    /// one as JSON Merge Patch does: a property given replaces the stored one, nested
    /// objects merge, and `null` removes a property.
    Put(objects::PutArgs),
    /// Print an object as one line of JSON (exit 1 if there is none).
    Get(objects::GetArgs),
    /// Print the objects of several keys, one line of JSON each in the keys' order, `null`
    /// for a key with none. Each key is read as `get` reads it (in a cluster, each point
    /// leader is asked once for all its keys); the keys are not read as one snapshot.
    GetMany(objects::GetManyArgs),
    /// Print the objects whose keys lie in [FROM, TO), in key order, one line of JSON each.
    ///
    /// In a space with `placement ordered` only the regions the range overlaps are read; in
    /// any other, every region of the key subspace. Like a search, every object printed is a
    /// version it had; the range is not read as one snapshot.
    GetRange(objects::GetRangeArgs),
    /// Print the objects whose tags include every TAG, in key order, one line of JSON each.
    ///
    /// The tags are the set(string) attribute of the space's `placement tagged`, or else its
    /// only set(string) attribute. In a tagged space only the regions of the tags' cells on
    /// the tag curve are read; in any other, every region.
    GetByTags(objects::GetByTagsArgs),
    /// Put several objects read from standard input, one JSON object per line with its key
    /// among the attributes (as `get` and `get-many` print them). Each is put as `put` puts
    /// one; it is NOT a transaction: every line is attempted, a failed one changes nothing of
    /// its key and undoes none of the others. Prints a JSON line per object in input order,
    /// {"key": K, "ok": true} or {"key": K, "error": "..."}, and exits 2 if any failed. A line
    /// that is not such an object stops everything before anything is written.
    PutMany(objects::PutManyArgs),
    /// Delete an object (exit 1 if there is none).
    Del(objects::DelArgs),
    /// Print every object matching all predicates, one JSON object per line.
    ///
    /// Predicates: attr=value, attr<value, attr<=value, attr>value, attr>=value, attr~regex.
    /// No predicate matches everything. Quote them for the shell: 'price<=100'.
    ///
    /// In a dynamic space predicates name dotted property paths ('venue.name=SOSP'), and
    /// structure: 'exists(doi)', 'exists(author|editor)' (either), 'missing(editor)'.
    Search(objects::SearchArgs),
    /// Print how many objects match all predicates.
    Count(objects::CountArgs),
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
    Explain(explain::ExplainArgs),
    /// Show the workload a space served: the shapes of its requests over the last minutes, as
    /// every server sampled them, one JSON line per kind of request with its share `p` of all
    /// requests. A search's line names
    /// each attribute it fixed (`eq`), bounded (`range`) or otherwise filtered (`other`) and the
    /// objects it matched on average (`matches`); an update's line the attributes it set.
    ///
    /// Example: `tessera trace hotels --minutes 10 > workload.jsonl`
    Trace(advise::TraceArgs),
    /// Rank subspace configurations of a space for a workload with Tessera's performance model
    /// (docs/design.md §8): every configuration within the bounds is scored, equal scores are
    /// grouped, and the baselines (no subspace, one hyperspace, one subspace per attribute,
    /// dominant, greedy, and the space's current configuration) are scored beside them. Prints one
    /// JSON object: the ranked groups with each configuration's subspaces, predicted throughput
    /// and, per query class, the terms behind it (subspace used, regions contacted, objects read,
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
    Advise(advise::AdviseArgs),
    /// Measure the performance model's constants on this database: creates four scratch
    /// spaces (tessera_calibrate_*; one copy of each region), loads them, runs short closed-loop
    /// gets, searches (contacting one to every region) and writes (through no or two subspaces,
    /// moving the object or not; one client alone too), and searches and writes mixed, reads
    /// the servers' CPU and fsyncs around each, fits the constants (CPU per operation; what a
    /// mix of reads and writes costs beyond its operations; the fsync, the client and the round
    /// trip for closed-loop predictions) and drops the spaces. Prints the constants and the
    /// measurements as JSON, and keeps the constants with the configuration (standalone or
    /// cluster), where `tessera advise` and `tessera status` find them (`--no-store`: only print
    /// them); `--save FILE` also writes them for `tessera advise --calibration FILE`. Takes
    /// about 15 × --seconds plus the loading (35 s by default); measure on an otherwise idle
    /// database.
    Calibrate(calibrate::CalibrateArgs),
    /// Benchmark with the YCSB core workloads (against Tessera or, to compare, Redis).
    // Boxed: its options are most of the size of a `Command`.
    Bench(Box<tessera_bench::BenchArgs>),
}

impl Command {
    /// Whether the command runs a daemon (it logs more by default).
    pub fn is_daemon(&self) -> bool {
        matches!(
            self,
            Command::Dev(_) | Command::Coordinator(_) | Command::Server(_)
        )
    }
}
