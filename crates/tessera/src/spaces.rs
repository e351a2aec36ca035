//! The commands on spaces: `add-space`, `rm-space`, `list-spaces`, `stats`, `recut`,
//! `key-regions`, `split-region` and `alter-space`: their flags, and the client calls they
//! make. What they share with the drivers is below them: re-cuts and statistics in recut.rs,
//! key regions and splits in splits.rs, subspaces added, dropped and described in alter.rs.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::failure::Failure;
use crate::stdio::read_text;
use crate::target::{connect, Target};
use crate::{alter, predicates, recut, splits};

// `tessera add-space` (its help: `Command::AddSpace`).
#[derive(clap::Args)]
pub struct AddSpaceArgs {
    /// File holding the description; `-` or nothing for stdin.
    file: Option<PathBuf>,
}

// `tessera rm-space` (its help: `Command::RmSpace`).
#[derive(clap::Args)]
pub struct RmSpaceArgs {
    space: String,
}

// `tessera key-regions` (its help: `Command::KeyRegions`).
#[derive(clap::Args)]
pub struct KeyRegionsArgs {
    space: String,
}

// `tessera stats` (its help: `Command::Stats`).
#[derive(clap::Args)]
pub struct StatsArgs {
    space: String,
    /// Only this attribute (or, in a dynamic space, this overlay path).
    attribute: Option<String>,
}

// `tessera recut` (its help: `Command::Recut`).
#[derive(clap::Args)]
pub struct RecutArgs {
    space: String,
    /// The subspace to re-cut (`tessera status` lists them).
    subspace: Option<u16>,
    /// Give up waiting for a build after this many seconds (it goes on).
    #[arg(long)]
    wait_timeout: Option<f64>,
}

// `tessera split-region` (its help: `Command::SplitRegion`).
#[derive(clap::Args)]
pub struct SplitRegionArgs {
    space: String,
    /// The key region to split (`tessera key-regions` lists them).
    region: Option<u32>,
    /// The first key of the new region: it must lie inside REGION, above its first key.
    #[arg(long, allow_hyphen_values = true)]
    at: Option<String>,
}

// `tessera alter-space` (its help: `Command::AlterSpace`).
#[derive(clap::Args)]
pub struct AlterSpaceArgs {
    /// The space's name.
    space: String,
    #[command(subcommand)]
    change: AlterChange,
}

// `tessera list-spaces` (its help: `Command::ListSpaces`).
#[derive(clap::Args)]
pub struct ListSpacesArgs {
    #[arg(long)]
    describe: bool,
}

// What `tessera alter-space SPACE` changes (the help of each: its variant's doc comment).
#[derive(Subcommand)]
pub enum AlterChange {
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
    /// predicted at least 20 % faster (and by more than the model's measured error) three
    /// periods running, the decision is logged
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

/// `tessera add-space`: a space from its description (a file, or stdin).
pub async fn add_space(args: AddSpaceArgs, target: &Target) -> Result<(), Failure> {
    let description = read_text(args.file.as_deref().unwrap_or(Path::new("-")))?;
    connect(target).await?.add_space(&description).await?;
    Ok(())
}

/// `tessera rm-space`.
pub async fn rm_space(args: RmSpaceArgs, target: &Target) -> Result<(), Failure> {
    Ok(connect(target).await?.rm_space(&args.space).await?)
}

/// `tessera list-spaces`: the names, or the descriptions with their subspaces' states.
pub async fn list_spaces(args: ListSpacesArgs, target: &Target) -> Result<(), Failure> {
    let config = connect(target).await?.refresh().await?;
    for space in &config.spaces {
        let schema = &space.schema;
        if args.describe {
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

/// `tessera stats`: the statistics of a space's values, one JSON line per attribute.
pub async fn stats(args: StatsArgs, target: &Target) -> Result<(), Failure> {
    let client = connect(target).await?;
    recut::print_stats(&client, &args.space, args.attribute.as_deref()).await
}

/// `tessera recut`: a subspace's axes (or every subspace's) cut again where the data lies.
pub async fn recut(args: RecutArgs, target: &Target) -> Result<(), Failure> {
    let client = connect(target).await?;
    let wait = alter::wait_timeout(args.wait_timeout)?;
    recut::recut(&client, &args.space, args.subspace, wait).await
}

/// `tessera key-regions`: each key region of a space, then the splits made so far.
pub async fn key_regions(args: KeyRegionsArgs, target: &Target) -> Result<(), Failure> {
    let client = connect(target).await?;
    splits::print_key_regions(&client, &args.space).await
}

/// `tessera split-region`: a key region of an ordered space split in two.
pub async fn split_region(args: SplitRegionArgs, target: &Target) -> Result<(), Failure> {
    let SplitRegionArgs { space, region, at } = args;
    let client = connect(target).await?;
    let at = match at {
        Some(at) => {
            let schema = client.describe_space(&space).await?;
            Some(predicates::parse_key(&schema, &at)?)
        }
        None => None,
    };
    splits::split_region(&client, &space, region, at).await
}

/// `tessera alter-space`: a subspace added or dropped, adaptation turned on or off, a formula
/// registered.
pub async fn alter_space(args: AlterSpaceArgs, target: &Target) -> Result<(), Failure> {
    let (alteration, json) = match args.change {
        AlterChange::AddSubspace {
            attributes,
            wait,
            wait_timeout: seconds,
            json,
        } => (
            alter::Alteration::Add {
                attributes,
                wait,
                wait_timeout: alter::wait_timeout(seconds)?,
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
    let client = connect(target).await?;
    alter::alter_space(&client, &args.space, alteration, json).await
}
