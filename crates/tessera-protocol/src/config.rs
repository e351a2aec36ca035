//! The configuration: the cluster map every client and server acts on.
//!
//! It names the servers, the spaces, and for every region of every subspace its replica set
//! (K = f + 1 servers, the first being the point leader for key regions). Every change makes a
//! new configuration with a strictly greater epoch. A single `tessera dev` server is simply a
//! configuration with one server that owns every region.

use serde::{Deserialize, Serialize};
use tessera_geometry::dynamic::shape_box;
use tessera_geometry::{
    part_in, parts_in, plan_search, tessellation_of, PropertyIndex, RegionIndex, SearchPlan,
    Tessellation,
};
use tessera_types::{
    constants::{FORMULAS_MAX, KEY_SPLITS_MAX, SHAPES_MAX, SUBSPACES_MAX},
    AxisCuts, CheckedPredicate, DocumentError, Epoch, Formula, FormulaError, FormulaSpec, KeySplit,
    SchemaError, ServerId, Shape, SpaceKind, SpaceSchema, Subspace, SubspaceId, SubspaceState,
    Value, DEFAULT_FORMULA,
};

/// What the coordinator knows of a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ServerState {
    /// Registered and taking part in replica sets.
    Available,
    /// The coordinators removed it from every replica set it could leave: its lease lapsed
    /// (dead, hung or cut off from the coordinators), it reported a storage failure, or it
    /// restarted. It stays in regions where it is the only replica (their data is nowhere
    /// else) and is given no new ones; registering again makes it `Available`.
    Offline,
    /// Being decommissioned (`tessera decommission`): its regions move to other servers by
    /// state transfer, it is given no new ones, and once it holds none it leaves the
    /// configuration.
    // Declared after `Offline`: postcard encodes a variant by its index, and coordinator
    // snapshots and older peers know Available = 0, Offline = 1.
    Leaving,
    /// Away for a while: it announced a planned stop (`tessera` servers do on SIGTERM), or its
    /// lease lapsed less than the coordinators' grace period ago. It left every replica set
    /// it could leave, like an Offline server, but the regions it left wait for it
    /// ([`SpaceConfig::resting`]) instead of gaining a replica elsewhere, and its storage keeps
    /// them. Registering again makes it Available, and it catches up region by region (state
    /// transfers that write only what changed); past the grace period it becomes Offline and
    /// its regions are re-replicated as for a failure.
    // Declared last, for the reason above.
    Resting,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub id: ServerId,
    /// Address clients and other servers reach it at, `host:port`.
    pub address: String,
    pub state: ServerState,
}

/// A space in the configuration: its schema and who owns each of its regions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceConfig {
    /// Unique for the life of the cluster: the epoch in which the space was created. A space
    /// dropped and created again under the same name gets a new id.
    pub id: u64,
    pub schema: SpaceSchema,
    /// `replicas[subspace][region]`: the replica set of that region, in chain order.
    pub replicas: Vec<Vec<Vec<ServerId>>>,
    /// State transfers under way: regions gaining a replica. At most one per region.
    pub transfers: Vec<Transfer>,
    /// Members that came into their region by a completed transfer. At most one per member of
    /// a region; gone when the member leaves it.
    pub joined: Vec<Joined>,
    /// The subspace being built, if any (at most one at a time): see [`Build`].
    pub build: Option<Build>,
    /// The adaptations decided for this space (`adapt on`), oldest first; the last
    /// [`ADAPTATIONS_KEPT`] are kept.
    pub adaptations: Vec<AdaptationRecord>,
    /// A dynamic space's formula store: every shape its documents have taken, in the order
    /// they were registered (`SpaceChange::AddShape`; at most `SHAPES_MAX`). A document is
    /// stored only once its shape is here, so a search planned from these shapes
    /// (`tessera_geometry::dynamic`) reaches every document. Empty for a typed space.
    pub shapes: Vec<Shape>,
    /// What the configuration knows of each of `shapes` (same length, same order).
    pub shape_entries: Vec<ShapeEntry>,
    /// What the configuration knows of each of the schema's formulas (same length and order
    /// as `schema.formulas`): registered like shapes, and used by documents once ready.
    pub formula_entries: Vec<ShapeEntry>,
    /// The places Resting servers left in this space's regions (see [`RestingPlace`]), in
    /// (subspace, region, server) order. Declared after the fields of data format 1.
    pub resting: Vec<RestingPlace>,
    /// The inverted index of `shapes` and the formulas ([`PropertyIndex`]), built by the first
    /// search planned on this configuration and kept with it. Derived, so never sent.
    #[serde(skip)]
    pub property_index: PropertyIndexCache,
}

/// A [`SpaceConfig`]'s inverted index, built once on first use. It takes no part in
/// comparisons (it is derived from the fields that do).
#[derive(Clone, Default)]
pub struct PropertyIndexCache(std::sync::OnceLock<std::sync::Arc<PropertyIndex>>);

impl PropertyIndexCache {
    /// The index of `shapes` and `schema`'s formulas: the cached one when it covers them
    /// (both lists only grow), otherwise one built now (and cached if none was).
    fn get(&self, schema: &SpaceSchema, shapes: &[Shape]) -> std::sync::Arc<PropertyIndex> {
        if let Some(index) = self.0.get() {
            if index.covers(schema, shapes) {
                return index.clone();
            }
            return std::sync::Arc::new(PropertyIndex::new(schema, shapes));
        }
        self.0
            .get_or_init(|| std::sync::Arc::new(PropertyIndex::new(schema, shapes)))
            .clone()
    }
}

impl PartialEq for PropertyIndexCache {
    fn eq(&self, _: &PropertyIndexCache) -> bool {
        true
    }
}

impl Eq for PropertyIndexCache {}

impl std::fmt::Debug for PropertyIndexCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "PropertyIndexCache(built)"
        } else {
            "PropertyIndexCache(empty)"
        })
    }
}

/// A registered shape's or formula's history (see [`SpaceConfig::shapes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeEntry {
    /// The epoch that registered it: a search planned on an older configuration may have
    /// missed documents of it.
    pub since: u64,
    /// Whether documents of it may be stored: once every live server acts on `since` (the
    /// coordinators check), so that any server a search asks knows the shape.
    pub ready: bool,
}

/// How many adaptation decisions a space keeps in its log ([`SpaceConfig::adaptations`]).
pub const ADAPTATIONS_KEPT: usize = 16;

/// A re-subspacing that the adaptation driver decided for a space with `adapt on`: the
/// space's trace predicted `to` at least the driver's gain faster than `from` over
/// `observations` observations of `period_s` seconds running. The subspace changes that carry
/// it out follow as ordinary alterations (added, built, then dropped).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adaptation {
    /// The subspaces (besides the key's) writes went through, by attribute names.
    pub from: Vec<Vec<String>>,
    /// The subspaces chosen.
    pub to: Vec<Vec<String>>,
    /// Predicted throughputs of the last observation's workload, operations a second.
    pub predicted_from_ops_s: u64,
    pub predicted_to_ops_s: u64,
    pub observations: u32,
    pub period_s: u32,
}

/// What happened to an [`Adaptation`]: the driver logs it when it starts the change, and again
/// when it finishes or gives it up. A coordinator leader that finds the last one started (or
/// resumed) and not finished (its driver died with its leadership) resumes it, or abandons it
/// when the space's subspaces are no longer on the way from `from` to `to`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdaptationEvent {
    Started,
    Resumed,
    Finished,
    Abandoned { why: String },
}

/// One step of an adaptation, as the driver logs it (`SpaceChange::LogAdaptation`): the
/// coordinators' Raft term it acts in (0 standalone), which fences the step
/// ([`check_fence`]), what happened, and the adaptation it happened to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdaptationStep {
    pub term: u64,
    pub event: AdaptationEvent,
    pub adaptation: Adaptation,
}

/// An [`AdaptationStep`] and the epoch that logged it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdaptationRecord {
    pub epoch: u64,
    pub step: AdaptationStep,
}

impl AdaptationRecord {
    /// Started or resumed, and not (yet) finished or abandoned.
    pub fn is_open(&self) -> bool {
        matches!(
            self.step.event,
            AdaptationEvent::Started | AdaptationEvent::Resumed
        )
    }
}

/// Longest reason an abandoned adaptation keeps, in bytes.
pub const ABANDON_WHY_MAX: usize = 200;

/// Whether a change that the adaptation driver decided as the coordinators' leader in term
/// `fence` may apply in a log entry of term `term`: only in that same term, so that a leader
/// deposed while it adapted cannot change the space behind its successor's back. A step it
/// logs must name that term too. A change with no fence (a user's) always may.
pub fn check_fence(fence: Option<u64>, term: u64, change: &SpaceChange) -> Result<(), AlterError> {
    let Some(decided) = fence else {
        return Ok(());
    };
    if decided != term {
        return Err(AlterError::Fenced { decided, term });
    }
    match change {
        SpaceChange::LogAdaptation(step) if step.term != decided => Err(AlterError::Fenced {
            decided: step.term,
            term,
        }),
        _ => Ok(()),
    }
}

/// A subspace added to a space that holds objects (`tessera alter-space … add-subspace`),
/// being filled with them.
///
/// From the epoch `since` the subspace is [`SubspaceState::Building`]: every chain has hops
/// in it, so every write from then on puts its object there, but searches do not use it. The
/// point leader of each key region then *backfills* it: it rewrites every object of its
/// region, unchanged, through the object's chain (a write like any other, ordered with the
/// key's other writes, so nothing older can overwrite anything newer), and reports the region
/// done once every rewrite has committed. When every key region is done the subspace holds
/// every object and becomes [`SubspaceState::Serving`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    pub subspace: SubspaceId,
    /// The epoch that added the subspace: with the space, it names this build.
    pub since: u64,
    /// The key regions backfilled so far, ascending.
    pub done: Vec<u32>,
    /// The subspace this one replaces when built (a re-cut, [`SpaceChange::RecutSubspace`]):
    /// it is dropped in the epoch that makes this one serve.
    pub replaces: Option<SubspaceId>,
}

/// A key region a server finished backfilling, as it reports it (see [`Build`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BackfillRef {
    /// `SpaceConfig::id`.
    pub space: u64,
    /// The subspace being built.
    pub subspace: SubspaceId,
    /// The key region.
    pub region: u32,
    /// `Build::since`.
    pub since: u64,
}

/// A change to a live space's subspaces (`tessera alter-space`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpaceChange {
    /// Adds a subspace over these attributes, built from the existing objects while the space
    /// serves (see [`Build`]).
    AddSubspace { attributes: Vec<String> },
    /// Removes a subspace (by its id, as `tessera status` lists it): no write goes through it
    /// and no search uses it from the next epoch; servers drop its storage.
    DropSubspace { subspace: u16 },
    /// Turns adaptation on or off (`adapt on` in a description): whether the coordinators
    /// re-subspace the space themselves as its workload changes.
    SetAdapt { on: bool },
    /// Logs a step of an adaptation the driver decided (the space must adapt); changes no
    /// subspace.
    LogAdaptation(AdaptationStep),
    /// Registers a shape of document in a dynamic space's formula store. Registering a
    /// known shape changes nothing. Documents of it are stored once it is ready.
    AddShape(Shape),
    /// Marks a registered shape ready: every live server acts on the epoch that registered
    /// it (the coordinators check before they apply it; a standalone server is every server).
    ShapeReady(Shape),
    /// Registers a compression formula in a dynamic space: each of its overlays that the
    /// space lacks becomes a new subspace, serving at once (no document uses it yet).
    /// Registering a formula again with the same overlays changes nothing.
    AddFormula(FormulaSpec),
    /// Marks a registered formula ready, as [`SpaceChange::ShapeReady`] a shape: documents
    /// may then be written with it.
    FormulaReady(String),
    /// Splits key region `region` of an ordered space at the key `at` (see
    /// `tessera_types::KeySplit`): the keys from `at` up take a new region with the same
    /// replica set, which the coordinators' balancing may then move by state transfer.
    SplitKeyRegion { region: u32, at: Value },
    /// Cuts subspace `subspace` again, at `cuts` (one entry per dimension): a new subspace over
    /// the same attributes (or the same document overlay), cut so, is built beside it (see
    /// [`Build`]) and replaces it once built, in the epoch that makes it serve (and in the
    /// formulas naming it). The old one serves searches until then.
    RecutSubspace { subspace: u16, cuts: Vec<AxisCuts> },
    /// [`SpaceChange::AddSubspace`] cut at `cuts` from the first (one entry per dimension,
    /// as [`SpaceChange::RecutSubspace`] takes them): `tessera alter-space` cuts a new
    /// subspace from the space's statistics, so it fits the data it is built from.
    AddCutSubspace {
        attributes: Vec<String>,
        cuts: Vec<AxisCuts>,
    },
}

impl SpaceChange {
    /// Bytes of names the change carries: bounded like a description (a larger one names
    /// nothing a space has, and would only burden the log).
    pub fn name_bytes(&self) -> usize {
        let names =
            |sets: &[Vec<String>]| -> usize { sets.iter().flatten().map(|a| a.len() + 1).sum() };
        match self {
            SpaceChange::AddSubspace { attributes }
            | SpaceChange::AddCutSubspace { attributes, .. } => {
                attributes.iter().map(|a| a.len() + 1).sum()
            }
            SpaceChange::DropSubspace { .. } | SpaceChange::SetAdapt { .. } => 0,
            SpaceChange::LogAdaptation(step) => {
                let why = match &step.event {
                    AdaptationEvent::Abandoned { why } => why.len(),
                    _ => 0,
                };
                names(&step.adaptation.from) + names(&step.adaptation.to) + why
            }
            SpaceChange::AddShape(shape) | SpaceChange::ShapeReady(shape) => {
                shape
                    .properties
                    .iter()
                    .map(|(p, _)| p.len() + 2)
                    .sum::<usize>()
                    + shape.formula.len()
            }
            SpaceChange::AddFormula(f) => {
                let paths: usize = f
                    .overlays
                    .iter()
                    .flat_map(|o| &o.axes)
                    .map(|a| a.path.len() + 5)
                    .sum();
                paths + f.id.as_ref().map_or(0, String::len)
            }
            SpaceChange::FormulaReady(id) => id.len(),
            SpaceChange::SplitKeyRegion { at, .. } => {
                postcard::to_allocvec(at).map_or(usize::MAX, |v| v.len())
            }
            SpaceChange::RecutSubspace { .. } => 0,
        }
    }
}

/// Why a [`SpaceChange`] cannot apply to a space as it stands. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AlterError {
    #[error("{0}")]
    Schema(SchemaError),
    #[error("subspace {0} spans those attributes already")]
    SubspaceExists(u16),
    #[error("subspace {0} is still being built: wait until it serves (tessera status shows its progress), or drop it")]
    BuildUnderWay(u16),
    #[error("the space has no subspace {0} (tessera status lists its subspaces)")]
    NoSuchSubspace(u16),
    #[error("subspace 0 is the key subspace: it cannot be dropped")]
    KeySubspace,
    #[error("the space has used all {SUBSPACES_MAX} subspace ids (dropped subspaces keep theirs): create a new space to change it further")]
    SubspaceIdsUsed,
    #[error("the space does not adapt (`tessera alter-space SPACE adapt on` turns it on)")]
    NotAdaptive,
    #[error("an adaptation names {0} subspaces: at most {SUBSPACES_MAX}")]
    TooManySubspaces(usize),
    #[error("fenced: the adaptation driver acted as the coordinators' leader in term {decided}, and they are in term {term} (their new leader decides again)")]
    Fenced { decided: u64, term: u64 },
    #[error("an abandoned adaptation's reason has {0} bytes: at most {ABANDON_WHY_MAX}")]
    WhyTooLong(usize),
    #[error("the space is typed: shapes of documents belong to dynamic spaces")]
    NotDynamic,
    #[error("the space is dynamic: Tessera places its documents by their properties, and its subspaces change only by formulas and re-cuts")]
    Dynamic,
    #[error("the space's documents have taken {SHAPES_MAX} shapes (distinct sets of properties): no more are kept")]
    TooManyShapes,
    #[error("{0}")]
    BadShape(DocumentError),
    #[error("the space has not registered that shape of document")]
    NoSuchShape,
    #[error("{0}")]
    Formula(FormulaError),
    #[error("the space's keys are hashed: only an ordered space (`placement ordered`) has key ranges to split")]
    NotOrdered,
    #[error("a split is at a key, a {expected}: not {got}")]
    BadSplitKey { expected: String, got: String },
    #[error("the space has no key region {0} (tessera status lists its regions)")]
    NoSuchKeyRegion(u32),
    #[error("key region {region} does not hold {at} above its first key: a split must leave keys on both sides")]
    SplitOutside { region: u32, at: Value },
    #[error("key region {0} is gaining a replica by state transfer: split it once that is done")]
    RegionBusy(u32),
    #[error("the space's key regions were split {KEY_SPLITS_MAX} times, the most a space may be")]
    TooManySplits,
    #[error("subspace {0} cannot be re-cut: only a serving subspace of a typed space's attributes is (not the key's, nor a tag subspace)")]
    NotRecuttable(u16),
}

/// A member of a region's replica set that joined it by the transfer `since` names (the epoch
/// that started it). The same server may have held the region before, left and come back:
/// chain messages it built before `since` belong to that earlier membership, and a peer that
/// took them for current ones would apply long-stale updates (see [`SpaceConfig::member_since`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Joined {
    pub subspace: SubspaceId,
    pub region: RegionIndex,
    pub server: ServerId,
    pub since: u64,
}

/// A place a server left in a region's replica set when it began resting
/// ([`ServerState::Resting`]): the region keeps it for that server, which keeps the region's
/// data, instead of taking a replica elsewhere. Gone when the server is back in the region
/// (its catch-up transfer started), the region has its K members again, or the server is
/// Offline (its grace period over).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestingPlace {
    pub subspace: SubspaceId,
    pub region: RegionIndex,
    pub server: ServerId,
}

/// A region gaining a replica by state transfer (re-replication after a failure, a join
/// taking its share, a decommission draining a server).
///
/// From the epoch that starts it, `to` is the last member of the region's replica set: it is a
/// hop of every chain through the region and acknowledges updates like any replica, while the
/// member just before it (the *source*) streams it the region's committed entries over the
/// same link, so one FIFO order covers both. Until the transfer completes, `to` is *catching
/// up*: no read is served by it, it never leads a key, and it does not count as a replica
/// when another member leaves. It completes when `to` reports the last entry durable; then
/// `replaces`, if any, leaves the set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// The epoch that started it: with the region, it names this transfer and no other (a
    /// transfer restarted after its source changed has a new id, and the target starts over).
    pub id: u64,
    pub subspace: SubspaceId,
    pub region: RegionIndex,
    pub to: ServerId,
    /// A member that leaves the region when the transfer completes (decommission, rebalance).
    pub replaces: Option<ServerId>,
}

/// A state transfer, as a server names it when it reports it complete (see
/// [`Transfer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TransferRef {
    /// `SpaceConfig::id`.
    pub space: u64,
    pub subspace: SubspaceId,
    pub region: u32,
    /// `Transfer::id`.
    pub id: u64,
}

impl SpaceConfig {
    /// A space whose every region is owned by `servers` (in that chain order).
    pub fn owned_by(id: u64, schema: SpaceSchema, servers: &[ServerId]) -> SpaceConfig {
        let replicas = schema
            .subspaces
            .iter()
            .map(|s| {
                let regions = tessellation_of(s, &schema).regions_count();
                vec![servers.to_vec(); regions as usize]
            })
            .collect();
        SpaceConfig {
            id,
            schema,
            replicas,
            transfers: Vec::new(),
            joined: Vec::new(),
            build: None,
            adaptations: Vec::new(),
            shapes: Vec::new(),
            shape_entries: Vec::new(),
            formula_entries: Vec::new(),
            resting: Vec::new(),
            property_index: PropertyIndexCache::default(),
        }
    }

    /// Checks that `change` applies to the space as it stands; for an added subspace, returns
    /// it (its dimensions; it gets the next id).
    pub fn check_change(&self, change: &SpaceChange) -> Result<Option<Subspace>, AlterError> {
        let schema = &self.schema;
        match (change, schema.is_dynamic()) {
            (
                SpaceChange::AddShape(_)
                | SpaceChange::ShapeReady(_)
                | SpaceChange::AddFormula(_)
                | SpaceChange::FormulaReady(_),
                false,
            ) => return Err(AlterError::NotDynamic),
            (SpaceChange::AddFormula(spec), true) => {
                return self.check_formula(spec).map(|_| None);
            }
            (SpaceChange::FormulaReady(id), true) => {
                return match self.formula_entry(id) {
                    Some(_) => Ok(None),
                    None => Err(AlterError::Formula(FormulaError::Unknown(id.clone()))),
                };
            }
            (SpaceChange::AddShape(shape), true) => {
                shape.check().map_err(AlterError::BadShape)?;
                if self.shapes.len() >= SHAPES_MAX && !self.shapes.contains(shape) {
                    return Err(AlterError::TooManyShapes);
                }
                return Ok(None);
            }
            (SpaceChange::ShapeReady(shape), true) => {
                return match self.shape_entry(shape) {
                    Some(_) => Ok(None),
                    None => Err(AlterError::NoSuchShape),
                };
            }
            // A document overlay re-cuts like a typed subspace.
            (SpaceChange::RecutSubspace { subspace, cuts }, true) => {
                return self.check_recut(*subspace, cuts).map(Some);
            }
            (_, true) => return Err(AlterError::Dynamic),
            (_, false) => {}
        }
        match change {
            SpaceChange::AddSubspace { attributes } => self.check_add(attributes).map(Some),
            SpaceChange::AddCutSubspace { attributes, cuts } => {
                let added = Subspace {
                    cuts: Some(cuts.clone()),
                    ..self.check_add(attributes)?
                };
                added.check_cuts().map_err(AlterError::Schema)?;
                Ok(Some(added))
            }
            SpaceChange::DropSubspace { subspace } => {
                if *subspace == 0 {
                    return Err(AlterError::KeySubspace);
                }
                let written = schema
                    .subspaces
                    .get(usize::from(*subspace))
                    .is_some_and(Subspace::is_written);
                if !written {
                    return Err(AlterError::NoSuchSubspace(*subspace));
                }
                if schema.tag_subspace() == Some(SubspaceId(*subspace)) {
                    return Err(AlterError::Schema(SchemaError::TagSubspace(*subspace)));
                }
                Ok(None)
            }
            SpaceChange::SetAdapt { on } => {
                schema.check_adapt(*on).map_err(AlterError::Schema)?;
                Ok(None)
            }
            SpaceChange::LogAdaptation(step) => {
                if !schema.adapt {
                    return Err(AlterError::NotAdaptive);
                }
                if let AdaptationEvent::Abandoned { why } = &step.event {
                    if why.len() > ABANDON_WHY_MAX {
                        return Err(AlterError::WhyTooLong(why.len()));
                    }
                }
                let a = &step.adaptation;
                for sets in [&a.from, &a.to] {
                    if sets.len() >= SUBSPACES_MAX {
                        return Err(AlterError::TooManySubspaces(sets.len()));
                    }
                    for names in sets {
                        schema
                            .subspace_dimensions(names)
                            .map_err(AlterError::Schema)?;
                    }
                }
                Ok(None)
            }
            SpaceChange::SplitKeyRegion { region, at } => {
                self.check_split(*region, at)?;
                Ok(None)
            }
            SpaceChange::RecutSubspace { subspace, cuts } => {
                self.check_recut(*subspace, cuts).map(Some)
            }
            SpaceChange::AddShape(_)
            | SpaceChange::ShapeReady(_)
            | SpaceChange::AddFormula(_)
            | SpaceChange::FormulaReady(_) => {
                unreachable!("answered above")
            }
        }
    }

    /// A subspace over `attributes` may be added ([`SpaceChange::AddSubspace`]): the
    /// attributes make a subspace no written one already is, no build is under way, and an
    /// id is left. Returns it, cut into equal slices.
    fn check_add(&self, attributes: &[String]) -> Result<Subspace, AlterError> {
        let schema = &self.schema;
        let dimensions = schema
            .subspace_dimensions(attributes)
            .map_err(AlterError::Schema)?;
        if let Some(b) = &self.build {
            return Err(AlterError::BuildUnderWay(b.subspace.0));
        }
        let mut wanted = dimensions.clone();
        wanted.sort();
        for id in schema.written_subspaces() {
            let mut have = schema.subspace(id).dimensions.clone();
            have.sort();
            if have == wanted {
                return Err(AlterError::SubspaceExists(id.0));
            }
        }
        if schema.subspaces.len() >= SUBSPACES_MAX {
            return Err(AlterError::SubspaceIdsUsed);
        }
        Ok(Subspace {
            dimensions,
            state: SubspaceState::Building,
            overlay: None,
            tags: None,
            cuts: None,
        })
    }

    /// The subspace that re-cuts `subspace` at `cuts` (see [`SpaceChange::RecutSubspace`]),
    /// if it may: a serving subspace of attributes or a document overlay (not the key's, not
    /// a tag subspace, not the unispace), no build under way, a free subspace id, cuts the
    /// tessellation can use.
    fn check_recut(&self, subspace: u16, cuts: &[AxisCuts]) -> Result<Subspace, AlterError> {
        let schema = &self.schema;
        let old = schema.subspaces.get(usize::from(subspace));
        // A dynamic space's unispace hashes every path onto its axes: only overlays re-cut.
        let cuttable = |s: &&Subspace| {
            subspace > 0
                && s.is_searchable()
                && s.tags.is_none()
                && (s.overlay.is_some() || !schema.is_dynamic())
        };
        let Some(old) = old.filter(cuttable) else {
            return Err(AlterError::NotRecuttable(subspace));
        };
        if let Some(b) = &self.build {
            return Err(AlterError::BuildUnderWay(b.subspace.0));
        }
        if schema.subspaces.len() >= SUBSPACES_MAX {
            return Err(AlterError::SubspaceIdsUsed);
        }
        let recut = Subspace {
            state: SubspaceState::Building,
            cuts: Some(cuts.to_vec()),
            ..old.clone()
        };
        recut.check_cuts().map_err(AlterError::Schema)?;
        Ok(recut)
    }

    /// Whether key region `region` may split at `at` (see [`SpaceChange::SplitKeyRegion`]):
    /// the space is ordered, the region exists and holds keys on both sides of `at`, no state
    /// transfer fills it (its source streams the region as it was) and no subspace is being
    /// built (its backfill walks the key regions as they were).
    fn check_split(&self, region: u32, at: &Value) -> Result<Tessellation, AlterError> {
        if !self.schema.keys_ordered() {
            return Err(AlterError::NotOrdered);
        }
        let key_type = self.schema.key_type();
        if at.primitive_type() != Some(key_type) || at.contains_nan() {
            return Err(AlterError::BadSplitKey {
                expected: key_type.name().to_owned(),
                got: at.to_string(),
            });
        }
        let keys = &self.tessellations()[SubspaceId::KEY.get()];
        if region >= keys.regions_count() {
            return Err(AlterError::NoSuchKeyRegion(region));
        }
        if self.schema.key_splits.len() >= KEY_SPLITS_MAX {
            return Err(AlterError::TooManySplits);
        }
        if let Some(b) = &self.build {
            return Err(AlterError::BuildUnderWay(b.subspace.0));
        }
        if self
            .transfer_at(SubspaceId::KEY, RegionIndex(region))
            .is_some()
        {
            return Err(AlterError::RegionBusy(region));
        }
        keys.split_key_region(RegionIndex(region), at)
            .ok_or_else(|| AlterError::SplitOutside {
                region,
                at: at.clone(),
            })
    }

    /// Applies `change` in the epoch `epoch` (checked first, see
    /// [`SpaceConfig::check_change`]). An added subspace gets the next id, is
    /// [`SubspaceState::Building`], and its regions the replica sets `assign` picks for a
    /// subspace of that many regions. A dropped subspace keeps its id, with no region (its
    /// transfers and join records go with them); dropping the one being built ends the
    /// build. Turning adaptation on or off changes the schema's `adapt`; an adaptation goes
    /// into the log. Returns the subspace added or dropped, if any.
    pub fn alter(
        &mut self,
        epoch: u64,
        change: &SpaceChange,
        mut assign: impl FnMut(&Tessellation) -> Vec<Vec<ServerId>>,
    ) -> Result<Option<SubspaceId>, AlterError> {
        let added = self.check_change(change)?;
        // Shapes and formulas may change: the index of them is built again when next used.
        self.property_index = PropertyIndexCache::default();
        match change {
            SpaceChange::SetAdapt { on } => {
                self.schema.adapt = *on;
                return Ok(None);
            }
            SpaceChange::LogAdaptation(step) => {
                if self.adaptations.len() >= ADAPTATIONS_KEPT {
                    self.adaptations.remove(0);
                }
                self.adaptations.push(AdaptationRecord {
                    epoch,
                    step: step.clone(),
                });
                return Ok(None);
            }
            SpaceChange::AddShape(shape) => {
                if !self.shapes.contains(shape) {
                    self.shapes.push(shape.clone());
                    self.shape_entries.push(ShapeEntry {
                        since: epoch,
                        ready: false,
                    });
                }
                debug_assert_eq!(self.shapes.len(), self.shape_entries.len());
                return Ok(None);
            }
            SpaceChange::ShapeReady(shape) => {
                let at = self.shapes.iter().position(|s| s == shape);
                let at = at.expect("checked: the shape is registered");
                self.shape_entries[at].ready = true;
                return Ok(None);
            }
            SpaceChange::AddFormula(spec) => {
                let Some(new_overlays) = self.check_formula(spec).expect("checked above") else {
                    return Ok(None);
                };
                let mut overlays = Vec::with_capacity(spec.overlays.len());
                for (overlay, existing) in spec.overlays.iter().zip(new_overlays) {
                    let id = match existing {
                        Some(id) => id,
                        None => {
                            let id = SubspaceId(self.schema.subspaces.len() as u16);
                            let subspace = Subspace::overlay(overlay.clone());
                            let t = tessellation_of(&subspace, &self.schema);
                            let sets = assign(&t);
                            assert_eq!(sets.len(), t.regions_count() as usize, "a set per region");
                            self.schema.subspaces.push(subspace);
                            self.replicas.push(sets);
                            id
                        }
                    };
                    if !overlays.contains(&id) {
                        overlays.push(id);
                    }
                }
                self.schema.formulas.push(Formula {
                    id: spec.id(),
                    overlays,
                });
                self.formula_entries.push(ShapeEntry {
                    since: epoch,
                    ready: false,
                });
                return Ok(None);
            }
            SpaceChange::FormulaReady(id) => {
                let at = self.schema.formulas.iter().position(|f| f.id == *id);
                let at = at.expect("checked: the formula is registered");
                self.formula_entries[at].ready = true;
                return Ok(None);
            }
            SpaceChange::SplitKeyRegion { region, at } => {
                // The new region starts with the split one's replica set and members' join
                // records: the same servers hold its keys, since the same epochs.
                let r = *region as usize;
                let new = RegionIndex(self.replicas[SubspaceId::KEY.get()].len() as u32);
                let set = self.replicas[SubspaceId::KEY.get()][r].clone();
                self.replicas[SubspaceId::KEY.get()].push(set);
                let joined: Vec<Joined> = self
                    .joined
                    .iter()
                    .filter(|j| j.subspace == SubspaceId::KEY && j.region.0 == *region)
                    .map(|j| Joined { region: new, ..*j })
                    .collect();
                self.joined.extend(joined);
                // A server resting in the split region comes back to both halves (its storage
                // keeps the keys that move to the new one).
                let places: Vec<RestingPlace> = self
                    .resting
                    .iter()
                    .filter(|p| p.subspace == SubspaceId::KEY && p.region.0 == *region)
                    .map(|p| RestingPlace { region: new, ..*p })
                    .collect();
                self.resting.extend(places);
                self.resting
                    .sort_by_key(|p| (p.subspace, p.region, p.server));
                self.schema.key_splits.push(KeySplit {
                    region: *region,
                    at: at.clone(),
                    epoch,
                });
                debug_assert_eq!(
                    self.tessellations()[SubspaceId::KEY.get()].regions_count() as usize,
                    self.replicas[SubspaceId::KEY.get()].len(),
                    "the split applies"
                );
                return Ok(None);
            }
            SpaceChange::AddSubspace { .. }
            | SpaceChange::AddCutSubspace { .. }
            | SpaceChange::DropSubspace { .. }
            | SpaceChange::RecutSubspace { .. } => {}
        }
        Ok(Some(match added {
            Some(added) => {
                let id = SubspaceId(self.schema.subspaces.len() as u16);
                let t = tessellation_of(&added, &self.schema);
                let sets = assign(&t);
                assert_eq!(sets.len(), t.regions_count() as usize, "a set per region");
                self.schema.subspaces.push(added);
                self.replicas.push(sets);
                let replaces = match change {
                    SpaceChange::RecutSubspace { subspace, .. } => Some(SubspaceId(*subspace)),
                    _ => None,
                };
                self.build = Some(Build {
                    subspace: id,
                    since: epoch,
                    done: Vec::new(),
                    replaces,
                });
                id
            }
            None => {
                let SpaceChange::DropSubspace { subspace } = change else {
                    unreachable!("the other changes returned above")
                };
                let id = SubspaceId(*subspace);
                self.drop_subspace(id);
                id
            }
        }))
    }

    /// Drops subspace `id`: it keeps its slot, with no regions (its transfers and join
    /// records go with them); dropping the one being built ends the build.
    fn drop_subspace(&mut self, id: SubspaceId) {
        self.schema.subspaces[id.get()].state = SubspaceState::Dropped;
        self.replicas[id.get()].clear();
        self.transfers.retain(|t| t.subspace != id);
        self.joined.retain(|j| j.subspace != id);
        if self.build.as_ref().is_some_and(|b| b.subspace == id) {
            self.build = None;
        }
    }

    /// Records the key regions `done` names as backfilled (those of this space's build under
    /// way; others are ignored); once every key region is, the subspace serves and the build
    /// ends. Returns how many regions were newly recorded.
    pub fn complete_backfills(&mut self, done: &[BackfillRef]) -> usize {
        let key_regions = self.replicas[SubspaceId::KEY.get()].len() as u32;
        let Some(build) = &mut self.build else {
            return 0;
        };
        let mut recorded = 0;
        for r in done {
            let ours = (r.space, r.subspace, r.since) == (self.id, build.subspace, build.since);
            if ours && r.region < key_regions {
                if let Err(at) = build.done.binary_search(&r.region) {
                    build.done.insert(at, r.region);
                    recorded += 1;
                }
            }
        }
        if build.done.len() == key_regions as usize {
            let (id, replaces) = (build.subspace, build.replaces);
            self.schema.subspaces[id.get()].state = SubspaceState::Serving;
            self.build = None;
            // A re-cut: the subspace it replaces goes in the same epoch, so searches move
            // from one to the other with nothing in between.
            if let Some(old) = replaces.filter(|old| self.schema.subspace(*old).is_written()) {
                self.drop_subspace(old);
                self.schema.replace_in_formulas(old, id);
            }
        }
        recorded
    }

    /// The subspaces writes go through (serving and building) besides the key's, each as its
    /// attributes' names in dimension order: the configuration as the advisor and
    /// `tessera advise --apply` see it.
    pub fn written_attribute_sets(&self) -> Vec<Vec<String>> {
        self.schema
            .written_subspaces()
            .skip(1)
            .map(|id| self.attribute_names(id))
            .collect()
    }

    /// A subspace's attributes, by name, in its dimensions' order (a document overlay's
    /// paths).
    pub fn attribute_names(&self, id: SubspaceId) -> Vec<String> {
        let schema = &self.schema;
        if let Some(overlay) = &schema.subspace(id).overlay {
            return overlay.axes.iter().map(|a| a.path.clone()).collect();
        }
        schema
            .subspace(id)
            .dimensions
            .iter()
            .map(|&a| schema.attribute(a).name.clone())
            .collect()
    }

    /// How a search by `predicates` runs (`tessera_geometry::plan_search`, with this space's
    /// shapes): one part per subspace it reads. `tessellations` are
    /// [`SpaceConfig::tessellations`].
    pub fn plan(
        &self,
        tessellations: &[Tessellation],
        predicates: &[CheckedPredicate],
    ) -> Vec<SearchPlan> {
        let index = self.property_index();
        plan_search(
            &self.schema,
            tessellations,
            &self.shapes,
            &index,
            predicates,
        )
    }

    /// What a search by `predicates` reads in `subspace`: its boxes and, in a dynamic space,
    /// the formulas whose documents it keeps there (a cluster client's share names the
    /// subspace it planned).
    pub fn part_in(
        &self,
        tessellations: &[Tessellation],
        subspace: SubspaceId,
        predicates: &[CheckedPredicate],
    ) -> SearchPlan {
        part_in(
            &self.schema,
            tessellations,
            &self.shapes,
            &self.property_index(),
            subspace,
            predicates,
        )
    }

    /// [`Self::part_in`] for each of `subspaces`, in their order, planning once (a server
    /// sent several parts of a dynamic space's search).
    pub fn parts_in(
        &self,
        tessellations: &[Tessellation],
        subspaces: &[SubspaceId],
        predicates: &[CheckedPredicate],
    ) -> Vec<SearchPlan> {
        parts_in(
            &self.schema,
            tessellations,
            &self.shapes,
            &self.property_index(),
            subspaces,
            predicates,
        )
    }

    /// Whether a search by `predicates` planned on a configuration of epoch `planned` may
    /// have missed documents: a shape registered since could hold matches, or a formula
    /// registered since could place some where the plan does not read.
    pub fn shapes_since_matter(&self, planned: u64, predicates: &[CheckedPredicate]) -> bool {
        let SpaceKind::Dynamic { dimensions } = self.schema.kind else {
            return false;
        };
        self.formula_entries.iter().any(|e| e.since > planned)
            || self
                .shapes
                .iter()
                .zip(&self.shape_entries)
                .any(|(s, e)| e.since > planned && shape_box(s, dimensions, predicates).is_some())
    }

    /// What the configuration knows of formula `id`, if the space registered it.
    pub fn formula_entry(&self, id: &str) -> Option<ShapeEntry> {
        let at = self.schema.formulas.iter().position(|f| f.id == id)?;
        self.formula_entries.get(at).copied()
    }

    /// Whether documents may be written with formula `id` (the default formula always).
    pub fn formula_usable(&self, id: &str) -> Result<(), FormulaError> {
        if id == DEFAULT_FORMULA {
            return Ok(());
        }
        match self.formula_entry(id) {
            Some(e) if e.ready => Ok(()),
            Some(_) => Err(FormulaError::NotReady(id.to_owned())),
            None => Err(FormulaError::Unknown(id.to_owned())),
        }
    }

    /// Checks a formula to register; for each of its overlays, the subspace that already
    /// spans it, if any. `Ok(None)` when the formula is registered already, identically.
    fn check_formula(
        &self,
        spec: &FormulaSpec,
    ) -> Result<Option<Vec<Option<SubspaceId>>>, AlterError> {
        let SpaceKind::Dynamic { dimensions } = self.schema.kind else {
            return Err(AlterError::NotDynamic);
        };
        spec.check(dimensions).map_err(AlterError::Formula)?;
        let existing: Vec<Option<SubspaceId>> = spec
            .overlays
            .iter()
            .map(|o| {
                self.schema
                    .written_subspaces()
                    .find(|&s| self.schema.subspace(s).overlay.as_ref() == Some(o))
            })
            .collect();
        let id = spec.id();
        if let Some(f) = self.schema.formulas.iter().find(|f| f.id == id) {
            let mut same: Vec<Option<SubspaceId>> = f.overlays.iter().copied().map(Some).collect();
            let mut wanted = existing.clone();
            same.sort();
            same.dedup();
            wanted.sort();
            wanted.dedup();
            return if same == wanted {
                Ok(None)
            } else {
                Err(AlterError::Formula(FormulaError::Exists(id)))
            };
        }
        if self.schema.formulas.len() >= FORMULAS_MAX {
            return Err(AlterError::Formula(FormulaError::TooMany));
        }
        let new = existing.iter().filter(|e| e.is_none()).count();
        if self.schema.subspaces.len() + new > SUBSPACES_MAX {
            return Err(AlterError::SubspaceIdsUsed);
        }
        Ok(Some(existing))
    }

    /// What the configuration knows of `shape`, if the space registered it.
    pub fn shape_entry(&self, shape: &Shape) -> Option<ShapeEntry> {
        let at = self.shapes.iter().position(|s| s == shape)?;
        Some(self.shape_entries[at])
    }

    /// The inverted index of the space's shapes and formulas.
    pub fn property_index(&self) -> std::sync::Arc<PropertyIndex> {
        self.property_index.get(&self.schema, &self.shapes)
    }

    /// The tessellation of every subspace, in subspace order.
    pub fn tessellations(&self) -> Vec<Tessellation> {
        tessera_geometry::tessellations(&self.schema)
    }

    /// Whether a key region was split after `epoch`: a read of key regions planned on that
    /// configuration may miss keys that moved to the new region.
    pub fn key_split_since(&self, epoch: u64) -> bool {
        self.schema
            .key_splits
            .last()
            .is_some_and(|s| s.epoch > epoch)
    }

    /// Every replica set of this space, subspace by subspace, each in chain order.
    pub fn replica_sets(&self) -> impl Iterator<Item = &[ServerId]> {
        self.replicas.iter().flatten().map(Vec::as_slice)
    }

    pub fn replicas_of(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
        &self.replicas[subspace.get()][region.0 as usize]
    }

    /// The replica set of a region, if this configuration has that region: not when the
    /// subspace or region is out of range (names from elsewhere), nor for a dropped subspace,
    /// which has no regions.
    pub fn replica_set(&self, subspace: SubspaceId, region: RegionIndex) -> Option<&[ServerId]> {
        self.replicas
            .get(subspace.get())
            .and_then(|sets| sets.get(region.0 as usize))
            .map(Vec::as_slice)
    }

    /// Whether `server` is in the replica set of `region` of `subspace` (see
    /// [`SpaceConfig::replica_set`]).
    pub fn holds(&self, subspace: SubspaceId, region: RegionIndex, server: ServerId) -> bool {
        self.replica_set(subspace, region)
            .is_some_and(|set| set.contains(&server))
    }

    /// Whether `server` rests in `region` of `subspace`: it left the region's replica set when
    /// it began resting, and the region waits for it (see [`RestingPlace`]).
    pub fn rests_in(&self, subspace: SubspaceId, region: RegionIndex, server: ServerId) -> bool {
        self.resting
            .iter()
            .any(|p| (p.subspace, p.region, p.server) == (subspace, region, server))
    }

    /// Whether `server`'s storage keeps `region` of `subspace`: it is in the replica set (a
    /// member, or a transfer's target), or rests there and comes back to it.
    pub fn keeps(&self, subspace: SubspaceId, region: RegionIndex, server: ServerId) -> bool {
        self.holds(subspace, region, server) || self.rests_in(subspace, region, server)
    }

    /// The transfer under way into `region` of `subspace`, if any.
    pub fn transfer_at(&self, subspace: SubspaceId, region: RegionIndex) -> Option<&Transfer> {
        self.transfers
            .iter()
            .find(|t| t.subspace == subspace && t.region == region)
    }

    /// The members of a region's replica set that hold all of its data and may serve reads:
    /// every member but a transfer's target still catching up. Never empty in a checked
    /// configuration.
    pub fn complete_replicas(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
        let set = self.replicas_of(subspace, region);
        match self.transfer_at(subspace, region) {
            // The target is always last (see `Transfer`).
            Some(_) => &set[..set.len() - 1],
            None => set,
        }
    }

    /// The members of a region that answer reads by key of it: its complete replicas
    /// ([`SpaceConfig::complete_replicas`]) without the member a transfer under way replaces.
    /// A replaced member leaves the region when the transfer completes, and a server that has
    /// not installed that configuration yet would answer from a region the chains no longer
    /// pass; so it stops answering gets when the transfer starts, seconds before — unless it
    /// is the region's only complete replica (K = 1), which answers until it leaves. The point
    /// leader heads them unless it is the one replaced. Empty where the region has no replica.
    pub fn readers(&self, subspace: SubspaceId, region: RegionIndex) -> Vec<ServerId> {
        if self
            .replica_set(subspace, region)
            .is_none_or(|set| set.is_empty())
        {
            return Vec::new();
        }
        let complete = self.complete_replicas(subspace, region);
        let leaving = self.transfer_at(subspace, region).and_then(|t| t.replaces);
        let staying: Vec<ServerId> = complete
            .iter()
            .copied()
            .filter(|s| Some(*s) != leaving)
            .collect();
        if staying.is_empty() {
            complete.to_vec()
        } else {
            staying
        }
    }

    /// The epoch since which `server`, a member of the region, has held it without a break:
    /// the transfer that brought it (under way or completed), else the space's creation. A
    /// chain message `server` built for that region in an earlier epoch is stale.
    pub fn member_since(
        &self,
        subspace: SubspaceId,
        region: RegionIndex,
        server: ServerId,
    ) -> Epoch {
        let by_transfer = self
            .transfer_at(subspace, region)
            .filter(|t| t.to == server)
            .map(|t| t.id);
        let joined = || {
            self.joined
                .iter()
                .find(|j| (j.subspace, j.region, j.server) == (subspace, region, server))
                .map(|j| j.since)
        };
        Epoch(by_transfer.or_else(joined).unwrap_or(self.id))
    }

    /// Starts a transfer of `region` of `subspace` into `to`, in the epoch `id`: `to` joins
    /// the set last (see [`Transfer`]).
    pub fn start_transfer(
        &mut self,
        id: u64,
        subspace: SubspaceId,
        region: RegionIndex,
        to: ServerId,
        replaces: Option<ServerId>,
    ) {
        self.replicas[subspace.get()][region.0 as usize].push(to);
        self.transfers.push(Transfer {
            id,
            subspace,
            region,
            to,
            replaces,
        });
    }

    /// Every transfer into `to`, named as its target reports it done.
    pub fn transfer_refs_into(&self, to: ServerId) -> impl Iterator<Item = TransferRef> + '_ {
        self.transfers
            .iter()
            .filter(move |t| t.to == to)
            .map(|t| TransferRef {
                space: self.id,
                subspace: t.subspace,
                region: t.region.0,
                id: t.id,
            })
    }

    /// The transfer `t` completed: its target becomes a full member since `t.id`, and the
    /// member it replaces leaves (with its own join record).
    pub fn complete_transfer(&mut self, t: &Transfer) {
        self.transfers.retain(|x| x != t);
        let set = &mut self.replicas[t.subspace.get()][t.region.0 as usize];
        if let Some(gone) = t.replaces {
            set.retain(|s| *s != gone);
        }
        self.joined.retain(|j| {
            (j.subspace, j.region) != (t.subspace, t.region)
                || (j.server != t.to && Some(j.server) != t.replaces)
        });
        self.joined.push(Joined {
            subspace: t.subspace,
            region: t.region,
            server: t.to,
            since: t.id,
        });
    }

    /// Drops the join records of servers no longer in their region's replica set (call after
    /// taking servers out of sets).
    pub fn forget_departed(&mut self) {
        let joined = std::mem::take(&mut self.joined);
        self.joined = joined
            .into_iter()
            .filter(|j| self.holds(j.subspace, j.region, j.server))
            .collect();
    }

    /// The member that streams `transfer` its region: the one just before the target.
    pub fn transfer_source(&self, transfer: &Transfer) -> ServerId {
        let set = self.replicas_of(transfer.subspace, transfer.region);
        set[set.len() - 2]
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    pub epoch: Epoch,
    pub servers: Vec<ServerInfo>,
    pub spaces: Vec<SpaceConfig>,
    /// The performance model's constants as `tessera calibrate` measured them on this
    /// database, if it did (`tessera advise` uses them).
    pub model: Option<ModelConstants>,
}

/// The performance model's constants (`tessera_advisor::Calibration`), kept with the
/// configuration: costs in nanoseconds, the relocation factor in thousandths, so that a
/// configuration compares exactly (Raft replicas, caches).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelConstants {
    /// A write's fixed cost, whatever its chain.
    pub write_base_ns: u64,
    /// One server of an update's chain.
    pub write_hop_ns: u64,
    /// What a replica set that relocates the object costs relative to one that overwrites it,
    /// in thousandths.
    pub relocation_factor_milli: u64,
    /// A get.
    pub get_ns: u64,
    /// A search's fixed cost, and its cost per region contacted and per object read.
    pub search_base_ns: u64,
    pub search_region_ns: u64,
    pub search_object_ns: u64,
    /// A search's cost per storage entry read outside its box (a partial match's skips).
    pub search_skip_ns: u64,
    /// An fsync's duration, and the server CPU it costs.
    pub fsync_ns: u64,
    pub fsync_cpu_ns: u64,
    /// A client's CPU per request and per object returned.
    pub client_ns: u64,
    pub client_object_ns: u64,
    /// What a request spends in neither side's CPU.
    pub round_trip_ns: u64,
    /// Cores each server computes on, in thousandths.
    pub server_cores_milli: u64,
    /// What reads and writes mixed cost beyond their operations alone, in thousandths of the
    /// latter (μ).
    pub mix_interference_milli: u64,
}

impl ModelConstants {
    /// Whether every prediction made with them is positive: a chain hop, a get and the
    /// relocation factor cost something, and so does a search (its fixed or per-region cost).
    pub fn is_usable(&self) -> bool {
        self.write_hop_ns > 0
            && self.get_ns > 0
            && self.relocation_factor_milli > 0
            && (self.search_base_ns > 0 || self.search_region_ns > 0)
    }
}

/// Why a configuration received from elsewhere cannot be acted on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("configuration epoch {epoch}: {reason}")]
pub struct ConfigurationError {
    pub epoch: Epoch,
    pub reason: String,
}

impl Configuration {
    /// Checks the shape a server and a client rely on before acting on a configuration that
    /// came over the network: spaces with distinct names and ids, schemas whose subspaces can
    /// be tessellated, one replica set per region, each non-empty, of distinct servers that the
    /// configuration lists. Without this, a bad configuration would make indexing panic.
    pub fn check(&self) -> Result<(), ConfigurationError> {
        self.check_spaces().map_err(|reason| ConfigurationError {
            epoch: self.epoch,
            reason,
        })
    }

    /// [`Configuration::check`], saying why not.
    fn check_spaces(&self) -> Result<(), String> {
        if self.model.is_some_and(|m| !m.is_usable()) {
            return Err(format!("model constants {:?} are not usable", self.model));
        }
        let mut names = std::collections::BTreeSet::new();
        let mut ids = std::collections::BTreeSet::new();
        for space in &self.spaces {
            let schema = &space.schema;
            if !names.insert(&schema.name) || !ids.insert(space.id) {
                return Err(format!(
                    "space {:?} (id {}) is listed twice",
                    schema.name, space.id
                ));
            }
            check_schema(space)?;
            self.check_replica_sets(space)?;
            check_build(space, self.epoch)?;
            check_records(space)?;
        }
        Ok(())
    }

    /// A space's replica sets: one per region of every written subspace, each naming known
    /// servers, none twice.
    fn check_replica_sets(&self, space: &SpaceConfig) -> Result<(), String> {
        let schema = &space.schema;
        if space.replicas.len() != schema.subspaces.len() {
            return Err(format!(
                "space {:?}: replica sets for {} subspaces",
                schema.name,
                space.replicas.len()
            ));
        }
        let tessellations = space.tessellations();
        // The geometry leaves out a split at a key outside its region (storage would refuse
        // it): then the key subspace has fewer regions than the splits say.
        if schema.keys_ordered()
            && tessellations[0].regions_count() as usize
                != schema.partitions as usize + schema.key_splits.len()
        {
            return Err(format!("space {:?} has impossible key splits", schema.name));
        }
        for (n, (sets, t)) in space.replicas.iter().zip(tessellations).enumerate() {
            let regions = if schema.subspaces[n].is_written() {
                t.regions_count() as usize
            } else {
                0
            };
            if sets.len() != regions {
                return Err(format!(
                    "space {:?} subspace {n}: {} replica sets for {regions} regions",
                    schema.name,
                    sets.len(),
                ));
            }
            for set in sets {
                let mut members: Vec<ServerId> = set.clone();
                members.sort();
                members.dedup();
                if set.is_empty()
                    || members.len() != set.len()
                    || set.iter().any(|s| self.server(*s).is_none())
                {
                    return Err(format!("space {:?} subspace {n}: replica set {set:?} is empty, repeats a server or names an unknown one", schema.name));
                }
            }
        }
        if let Some(p) = space
            .resting
            .iter()
            .find(|p| self.server(p.server).is_none())
        {
            return Err(format!(
                "space {:?}: resting place {p:?} names an unknown server",
                schema.name
            ));
        }
        Ok(())
    }

    pub fn space(&self, name: &str) -> Option<&SpaceConfig> {
        self.spaces.iter().find(|s| s.schema.name == name)
    }

    pub fn server(&self, id: ServerId) -> Option<&ServerInfo> {
        self.servers.iter().find(|s| s.id == id)
    }

    /// Bytes of this configuration encoded (postcard), as it travels to every server and
    /// client in a `Config` response (which adds a few bytes of frame around it), and as
    /// [`crate::constants::CONFIGURATION_BYTES_MAX`] bounds it. `tessera status --json` shows
    /// it; docs/scale.md follows how it grows with the servers.
    pub fn encoded_bytes(&self) -> usize {
        postcard::to_allocvec(self).map_or(usize::MAX, |v| v.len())
    }
}

/// A space's schema as the geometry needs it: attributes, subspaces and their dimensions,
/// placement, cuts, key splits, overlays and formulas.
fn check_schema(space: &SpaceConfig) -> Result<(), String> {
    let schema = &space.schema;
    if schema.attributes.is_empty()
        || schema.subspaces.is_empty()
        || schema.subspaces.len() > tessera_types::constants::SUBSPACES_MAX
        || !(1..=tessera_types::constants::PARTITIONS_MAX).contains(&schema.partitions)
    {
        return Err(format!("space {:?} has an impossible schema", schema.name));
    }
    for s in &schema.subspaces {
        let dims_ok = (1..=tessera_types::constants::SUBSPACE_DIMENSIONS_MAX)
            .contains(&s.dimensions.len())
            && s.dimensions
                .iter()
                .all(|d| d.get() < schema.attributes.len());
        if !dims_ok {
            return Err(format!(
                "space {:?} has a subspace with impossible dimensions",
                schema.name
            ));
        }
    }
    // A placement the geometry can lay out (tag curve, ordered domain), before any
    // tessellation is made of it.
    if let Err(e) = schema.check_placement() {
        return Err(format!("space {:?}: {e}", schema.name));
    }
    // Cut points the tessellation can use, domains of ordered values.
    if let Err(e) = schema.check_cuts() {
        return Err(format!("space {:?}: {e}", schema.name));
    }
    // Splits of an ordered space only (each at a key inside the region it splits:
    // checked with the tessellations below).
    if schema.key_splits.len() > KEY_SPLITS_MAX
        || (!schema.key_splits.is_empty() && !schema.keys_ordered())
    {
        return Err(format!("space {:?} has impossible key splits", schema.name));
    }
    // Overlays and formulas: weights the tessellation can cut by, axes that match the
    // subspace, formulas naming overlays of this space, one history per formula.
    for s in &schema.subspaces {
        if let Some(o) = &s.overlay {
            let ok = schema.is_dynamic()
                && o.axes.len() == s.dimensions.len()
                && o.axes.iter().all(|a| {
                    (1..=tessera_types::constants::FORMULA_WEIGHT_MAX).contains(&a.weight)
                });
            if !ok {
                return Err(format!("space {:?} has an impossible overlay", schema.name));
            }
        }
    }
    let formulas_ok = space.formula_entries.len() == schema.formulas.len()
        && schema.formulas.iter().all(|f| {
            !f.overlays.is_empty()
                && f.overlays.iter().all(|o| {
                    schema
                        .subspaces
                        .get(o.get())
                        .is_some_and(|s| s.overlay.is_some())
                })
        });
    if !formulas_ok {
        return Err(format!("space {:?} has an impossible formula", schema.name));
    }
    Ok(())
}

/// A space's build, if any: the one building subspace, its key regions done in order, and
/// for a re-cut, the subspace it replaces.
fn check_build(space: &SpaceConfig, epoch: Epoch) -> Result<(), String> {
    let schema = &space.schema;
    let building: Vec<SubspaceId> = schema
        .subspace_ids()
        .filter(|id| schema.subspace(*id).state == SubspaceState::Building)
        .collect();
    let build_fits = match &space.build {
        None => building.is_empty(),
        Some(b) => {
            building == [b.subspace]
                && b.since <= epoch.0
                && b.done.windows(2).all(|w| w[0] < w[1])
                && b.done
                    .iter()
                    .all(|&r| (r as usize) < space.replicas[0].len())
                // A re-cut replaces another subspace over the same attributes.
                && b.replaces.is_none_or(|old| {
                    old.get() > 0
                        && schema.subspaces.get(old.get()).is_some_and(|o| {
                            let new = schema.subspace(b.subspace);
                            o.dimensions == new.dimensions && o.overlay == new.overlay
                        })
                })
        }
    };
    if schema.subspaces[0].state != SubspaceState::Serving || !build_fits {
        return Err(format!(
            "space {:?}: its subspaces' states do not fit its build {:?}",
            schema.name, space.build
        ));
    }
    Ok(())
}

/// A space's records: transfers that fit their regions' replica sets, join records that
/// name members, at most [`ADAPTATIONS_KEPT`] adaptations.
fn check_records(space: &SpaceConfig) -> Result<(), String> {
    let schema = &space.schema;
    let mut regions = std::collections::BTreeSet::new();
    for t in &space.transfers {
        let set = space.replica_set(t.subspace, t.region);
        let fits = set.is_some_and(|set| {
            set.len() >= 2
                && set.last() == Some(&t.to)
                && t.replaces.is_none_or(|r| r != t.to && set.contains(&r))
        });
        if !fits || !regions.insert((t.subspace, t.region)) {
            return Err(format!(
                "space {:?}: transfer {t:?} does not fit its region's replica set",
                schema.name
            ));
        }
    }
    let mut members = std::collections::BTreeSet::new();
    for j in &space.joined {
        let member = space.holds(j.subspace, j.region, j.server);
        if !member || !members.insert((j.subspace, j.region, j.server)) {
            return Err(format!(
                "space {:?}: join record {j:?} names no member of its region",
                schema.name
            ));
        }
    }
    let mut places = std::collections::BTreeSet::new();
    for p in &space.resting {
        let fits = space
            .replica_set(p.subspace, p.region)
            .is_some_and(|set| !set.contains(&p.server));
        if !fits || !places.insert((p.subspace, p.region, p.server)) {
            return Err(format!(
                "space {:?}: resting place {p:?} names no region the server left",
                schema.name
            ));
        }
    }
    if space.adaptations.len() > ADAPTATIONS_KEPT {
        return Err(format!(
            "space {:?}: {} adaptations logged, at most {ADAPTATIONS_KEPT}",
            schema.name,
            space.adaptations.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{parse_space, Placement, TagCurve, Value};

    fn hotels(adapt: &str) -> SpaceConfig {
        let schema = parse_space(&format!(
            "space hotels key id attributes string city, int price subspace city \
             create 8 partitions {adapt}"
        ))
        .unwrap();
        SpaceConfig::owned_by(1, schema, &[ServerId(1)])
    }

    fn one_server(t: &Tessellation) -> Vec<Vec<ServerId>> {
        vec![vec![ServerId(1)]; t.regions_count() as usize]
    }

    fn started(adaptation: Adaptation) -> SpaceChange {
        SpaceChange::LogAdaptation(AdaptationStep {
            term: 4,
            event: AdaptationEvent::Started,
            adaptation,
        })
    }

    fn adaptation(to: &[&[&str]]) -> Adaptation {
        Adaptation {
            from: vec![vec!["city".into()]],
            to: to
                .iter()
                .map(|s| s.iter().map(|a| a.to_string()).collect())
                .collect(),
            predicted_from_ops_s: 100,
            predicted_to_ops_s: 150,
            observations: 3,
            period_s: 60,
        }
    }

    /// Who answers gets of a region: every complete member, not a transfer's target still
    /// filling, and not the member a transfer replaces — unless it is the only one left.
    #[test]
    fn a_region_is_read_from_its_complete_members_that_stay() {
        let (key, region) = (SubspaceId::KEY, RegionIndex(0));
        let mut space = hotels("");
        space.replicas[0][0] = vec![ServerId(1), ServerId(2)];
        assert_eq!(space.readers(key, region), vec![ServerId(1), ServerId(2)]);
        let mut filling = space.clone();
        filling.start_transfer(5, key, region, ServerId(3), None);
        assert_eq!(filling.readers(key, region), vec![ServerId(1), ServerId(2)]);
        let mut replacing_the_leader = space.clone();
        replacing_the_leader.start_transfer(5, key, region, ServerId(3), Some(ServerId(1)));
        assert_eq!(replacing_the_leader.readers(key, region), vec![ServerId(2)]);
        let mut alone = space.clone();
        alone.replicas[0][0] = vec![ServerId(1)];
        alone.start_transfer(5, key, region, ServerId(3), Some(ServerId(1)));
        assert_eq!(alone.readers(key, region), vec![ServerId(1)]);
        alone.replicas[0][0].clear();
        alone.transfers.clear();
        assert!(alone.readers(key, region).is_empty());
        assert!(alone.readers(key, RegionIndex(999)).is_empty());
    }

    #[test]
    fn adaptation_is_turned_on_and_off_and_changes_no_subspace() {
        let mut space = hotels("");
        assert!(!space.schema.adapt);
        let before = space.schema.subspaces.clone();
        let on = SpaceChange::SetAdapt { on: true };
        assert_eq!(space.alter(2, &on, one_server), Ok(None));
        assert!(space.schema.adapt);
        assert_eq!(space.schema.subspaces, before);
        let off = SpaceChange::SetAdapt { on: false };
        assert_eq!(space.alter(3, &off, one_server), Ok(None));
        assert!(!space.schema.adapt);
    }

    /// A placement from the network that the geometry cannot lay out is refused by the
    /// configuration's check, not met by an assertion later.
    #[test]
    fn impossible_placements_fail_the_configuration_check() {
        let config = |schema: SpaceSchema| Configuration {
            model: None,
            epoch: Epoch(1),
            servers: vec![ServerInfo {
                id: ServerId(1),
                address: "127.0.0.1:1".into(),
                state: ServerState::Available,
            }],
            spaces: vec![SpaceConfig::owned_by(1, schema, &[ServerId(1)])],
        };
        let tagged = parse_space(
            "space t key int id attributes set(string) tags create 8 partitions placement tagged tags",
        )
        .unwrap();
        let ordered =
            parse_space("space o key int id create 8 partitions placement ordered from 0 to 9")
                .unwrap();
        assert_eq!(config(tagged.clone()).check(), Ok(()));
        assert_eq!(config(ordered.clone()).check(), Ok(()));
        let mut no_axes = tagged.clone();
        let Placement::Tagged { curve, .. } = &mut no_axes.placement else {
            unreachable!()
        };
        curve.axes = 0;
        let mut stray = tagged.clone();
        stray.placement = Placement::Random;
        let mut other_curve = tagged;
        other_curve.subspaces[1].tags = Some(TagCurve { axes: 3, spread: 1 });
        let mut reversed = ordered.clone();
        reversed.placement = Placement::Ordered {
            domain: Some((Value::Int(9), Value::Int(0))),
        };
        let mut strings = ordered.clone();
        strings.attributes[0].ty = tessera_types::AttributeType::STRING;
        strings.placement = Placement::Ordered {
            domain: Some((Value::from("abcdefgh1"), Value::from("abcdefgh2"))),
        };
        // A split at a key outside its region, or of a hashed space.
        let mut outside = ordered.clone();
        outside.key_splits.push(tessera_types::KeySplit {
            region: 0,
            at: Value::Int(100),
            epoch: 1,
        });
        let mut hashed_split = parse_space("space h key int id create 8 partitions").unwrap();
        hashed_split.key_splits = outside.key_splits.clone();
        let mut wrong_type = ordered.clone();
        wrong_type.key_splits.push(tessera_types::KeySplit {
            region: 0,
            at: Value::from("x"),
            epoch: 1,
        });
        for bad in [
            no_axes,
            stray,
            other_curve,
            reversed,
            strings,
            outside,
            hashed_split,
            wrong_type,
        ] {
            assert!(config(bad.clone()).check().is_err(), "{:?}", bad.placement);
        }
    }

    #[test]
    fn a_tagged_space_keeps_its_tag_subspace_and_does_not_adapt() {
        let schema = parse_space(
            "space tweets key id attributes string text, set(string) tags subspace text \
             create 8 partitions placement tagged tags",
        )
        .unwrap();
        let mut space = SpaceConfig::owned_by(1, schema, &[ServerId(1)]);
        let before = space.schema.clone();
        let tags = space.schema.tag_subspace().expect("a tag subspace").0;
        for (change, refused) in [
            (
                SpaceChange::DropSubspace { subspace: tags },
                SchemaError::TagSubspace(tags),
            ),
            (
                SpaceChange::SetAdapt { on: true },
                SchemaError::TaggedAdapt("tweets".into()),
            ),
        ] {
            assert_eq!(
                space.alter(2, &change, one_server),
                Err(AlterError::Schema(refused))
            );
            assert_eq!(space.schema, before, "nothing changed");
        }
        // Its other subspaces change as any space's do.
        let drop = SpaceChange::DropSubspace { subspace: 1 };
        assert_eq!(space.alter(3, &drop, one_server), Ok(Some(SubspaceId(1))));
    }

    #[test]
    fn an_adaptation_is_logged_only_for_an_adaptive_space_naming_its_attributes() {
        let mut fixed = hotels("");
        let log = started(adaptation(&[&["city", "price"]]));
        assert_eq!(
            fixed.alter(2, &log, one_server),
            Err(AlterError::NotAdaptive)
        );
        assert!(fixed.adaptations.is_empty());

        let mut space = hotels("adapt on");
        for bad in [
            adaptation(&[&["nope"]]),
            adaptation(&[&["id"]]),
            adaptation(&[&[]]),
            adaptation(&[&["city"] as &[&str]; SUBSPACES_MAX]),
        ] {
            let before = space.clone();
            let change = started(bad.clone());
            assert!(space.alter(2, &change, one_server).is_err(), "{bad:?}");
            assert_eq!(space, before);
        }
        assert_eq!(space.alter(2, &log, one_server), Ok(None));
        assert_eq!(
            space.adaptations,
            vec![AdaptationRecord {
                epoch: 2,
                step: AdaptationStep {
                    term: 4,
                    event: AdaptationEvent::Started,
                    adaptation: adaptation(&[&["city", "price"]]),
                },
            }]
        );
        assert!(space.adaptations[0].is_open());
        // A reason for giving up is bounded like a name.
        let abandon = |why: String| {
            SpaceChange::LogAdaptation(AdaptationStep {
                term: 4,
                event: AdaptationEvent::Abandoned { why },
                adaptation: adaptation(&[&["city", "price"]]),
            })
        };
        let long = "x".repeat(ABANDON_WHY_MAX + 1);
        assert_eq!(
            space.alter(3, &abandon(long), one_server),
            Err(AlterError::WhyTooLong(ABANDON_WHY_MAX + 1))
        );
        space
            .alter(3, &abandon("the build failed".into()), one_server)
            .unwrap();
        assert!(!space.adaptations[1].is_open());
        // The log keeps the last ADAPTATIONS_KEPT.
        for epoch in 3..3 + ADAPTATIONS_KEPT as u64 {
            space.alter(epoch, &log, one_server).unwrap();
        }
        assert_eq!(space.adaptations.len(), ADAPTATIONS_KEPT);
        assert_eq!(space.adaptations[0].epoch, 3);
    }

    /// A fenced change applies only in the term it was decided in, and a step it logs names
    /// that term; a change without a fence (a user's) applies in any term.
    #[test]
    fn a_fenced_change_applies_in_its_own_term_only() {
        let add = SpaceChange::AddSubspace {
            attributes: vec!["city".into()],
        };
        let log = started(adaptation(&[&["city"]])); // term 4
        for term in [0, 1, 4, 9] {
            assert_eq!(check_fence(None, term, &add), Ok(()));
            assert_eq!(check_fence(None, term, &log), Ok(()));
        }
        assert_eq!(check_fence(Some(4), 4, &add), Ok(()));
        assert_eq!(check_fence(Some(4), 4, &log), Ok(()));
        assert_eq!(
            check_fence(Some(3), 4, &add),
            Err(AlterError::Fenced {
                decided: 3,
                term: 4
            })
        );
        assert_eq!(
            check_fence(Some(5), 4, &add),
            Err(AlterError::Fenced {
                decided: 5,
                term: 4
            })
        );
        // Logged in term 4 with a fence of term 5: the step lies about its term.
        assert_eq!(
            check_fence(Some(5), 5, &log),
            Err(AlterError::Fenced {
                decided: 4,
                term: 5
            })
        );
        assert!(check_fence(Some(3), 4, &add)
            .unwrap_err()
            .to_string()
            .starts_with("fenced: the adaptation driver acted as the coordinators' leader in term 3, and they are in term 4"));
    }

    /// A split of an ordered space's key region: refused with a reason where it cannot apply
    /// (nothing changes), and otherwise a new region on the split one's servers, with its
    /// members' join records, and the space's later reads of key regions planned again.
    #[test]
    fn a_key_region_splits_only_where_it_can() {
        let split = |region, at: Value| SpaceChange::SplitKeyRegion { region, at };
        let ordered = parse_space(
            "space u key int id attributes int age create 2 partitions placement ordered",
        )
        .unwrap();
        let mut space = SpaceConfig::owned_by(1, ordered, &[ServerId(1), ServerId(2)]);
        space.joined.push(Joined {
            subspace: SubspaceId::KEY,
            region: RegionIndex(1),
            server: ServerId(2),
            since: 3,
        });
        // Server 3 rests in region 1: it comes back to both halves.
        space.resting.push(RestingPlace {
            subspace: SubspaceId::KEY,
            region: RegionIndex(1),
            server: ServerId(3),
        });
        let before = space.clone();
        let refused = |space: &mut SpaceConfig, change: SpaceChange| {
            let e = space.alter(9, &change, |_| vec![]).unwrap_err();
            assert_eq!(*space, before, "a refused split changes nothing");
            e
        };
        // Keys are ints from the middle of the axis up in region 1, below it in region 0.
        assert!(matches!(
            refused(&mut space, split(1, Value::Int(0))),
            AlterError::SplitOutside { region: 1, .. }
        ));
        assert!(matches!(
            refused(&mut space, split(0, Value::Int(5))),
            AlterError::SplitOutside { region: 0, .. }
        ));
        assert_eq!(
            refused(&mut space, split(2, Value::Int(5))),
            AlterError::NoSuchKeyRegion(2)
        );
        assert!(matches!(
            refused(&mut space, split(1, Value::from("5"))),
            AlterError::BadSplitKey { .. }
        ));
        let mut hashed = hotels("");
        assert_eq!(
            hashed
                .alter(9, &split(0, Value::from("x")), one_server)
                .unwrap_err(),
            AlterError::NotOrdered
        );
        let mut busy = space.clone();
        busy.start_transfer(8, SubspaceId::KEY, RegionIndex(1), ServerId(3), None);
        assert_eq!(
            busy.alter(9, &split(1, Value::Int(5)), |_| vec![])
                .unwrap_err(),
            AlterError::RegionBusy(1)
        );

        space
            .alter(9, &split(1, Value::Int(5)), |_| vec![])
            .unwrap();
        assert_eq!(space.replicas[0].len(), 3);
        assert_eq!(space.replicas[0][2], space.replicas[0][1]);
        assert!(space.joined.contains(&Joined {
            subspace: SubspaceId::KEY,
            region: RegionIndex(2),
            server: ServerId(2),
            since: 3,
        }));
        assert!(space.rests_in(SubspaceId::KEY, RegionIndex(1), ServerId(3)));
        assert!(space.rests_in(SubspaceId::KEY, RegionIndex(2), ServerId(3)));
        let keys = &space.tessellations()[0];
        let region = |k: i64| tessera_geometry::key_region(keys, &Value::Int(k)).0;
        assert_eq!(
            (region(-1), region(4), region(5), region(1000)),
            (0, 1, 2, 2)
        );
        assert!(space.key_split_since(8) && !space.key_split_since(9));
        // The new region's range can split again, at a key inside it only.
        assert!(matches!(
            space
                .alter(10, &split(2, Value::Int(4)), |_| vec![])
                .unwrap_err(),
            AlterError::SplitOutside { .. }
        ));
        space
            .alter(10, &split(2, Value::Int(7)), |_| vec![])
            .unwrap();
        let keys = &space.tessellations()[0];
        assert_eq!(tessera_geometry::key_region(keys, &Value::Int(7)).0, 3);
    }

    #[test]
    fn the_encoded_size_is_the_bytes_a_config_response_carries() {
        let empty = Configuration {
            epoch: Epoch(0),
            servers: vec![],
            spaces: vec![],
            model: None,
        };
        let one = Configuration {
            epoch: Epoch(3),
            servers: vec![ServerInfo {
                id: ServerId(1),
                address: "127.0.0.1:2000".into(),
                state: ServerState::Available,
            }],
            spaces: vec![hotels("")],
            model: None,
        };
        for config in [&empty, &one] {
            let body = postcard::to_allocvec(config).unwrap();
            assert_eq!(config.encoded_bytes(), body.len());
            let back: Configuration = postcard::from_bytes(&body).unwrap();
            assert_eq!(&back, config);
        }
        // Each region of each subspace carries its replica set: a space of 8 partitions (a
        // key subspace of 8 regions, `city` of 8) costs at least 16 sets of one id.
        assert!(one.encoded_bytes() >= empty.encoded_bytes() + 16 * 2);
        // A second replica per region: one more byte per set (ids below 128 are one byte).
        let mut two = one.clone();
        two.servers.push(ServerInfo {
            id: ServerId(2),
            address: "127.0.0.1:2001".into(),
            state: ServerState::Available,
        });
        for sets in &mut two.spaces[0].replicas {
            for set in sets.iter_mut() {
                set.push(ServerId(2));
            }
        }
        let server_bytes = two.servers[1].address.len() + 3;
        assert_eq!(
            two.encoded_bytes(),
            one.encoded_bytes() + server_bytes + 16,
            "a server entry and one id in each of the 16 replica sets"
        );
    }

    /// Hotels with a subspace over the int `price` too (subspace 2).
    fn priced() -> SpaceConfig {
        let schema = parse_space(
            "space hotels key id attributes string city, int price subspace city \
             subspace price create 8 partitions",
        )
        .unwrap();
        SpaceConfig::owned_by(1, schema, &[ServerId(1)])
    }

    fn config_of(space: SpaceConfig) -> Configuration {
        Configuration {
            epoch: Epoch(10),
            servers: vec![ServerInfo {
                id: ServerId(1),
                address: "127.0.0.1:2000".into(),
                state: ServerState::Available,
            }],
            spaces: vec![space],
            model: None,
        }
    }

    #[test]
    fn a_recut_builds_beside_and_replaces_in_one_epoch() {
        let mut space = priced();
        let before = space.clone();
        let cuts = vec![AxisCuts::At(vec![10, 20, 30])];
        // Refused, changing nothing: the key subspace, a string axis cut by too many points,
        // cut points out of order or at 0, the wrong number of axes, a subspace that is not.
        for (subspace, cuts) in [
            (0, cuts.clone()),
            (9, cuts.clone()),
            (2, vec![AxisCuts::At(vec![20, 10])]),
            (2, vec![AxisCuts::At(vec![0, 10])]),
            (2, vec![AxisCuts::Equal(0)]),
            (2, vec![AxisCuts::Equal(2), AxisCuts::Equal(2)]),
            (2, vec![AxisCuts::Equal(70_000)]),
        ] {
            let change = SpaceChange::RecutSubspace { subspace, cuts };
            assert!(space.alter(5, &change, one_server).is_err(), "{change:?}");
            assert_eq!(space, before);
        }
        let recut = SpaceChange::RecutSubspace {
            subspace: 2,
            cuts: cuts.clone(),
        };
        assert_eq!(space.alter(5, &recut, one_server), Ok(Some(SubspaceId(3))));
        let new = space.schema.subspace(SubspaceId(3)).clone();
        assert_eq!((new.state, new.cuts), (SubspaceState::Building, Some(cuts)));
        assert_eq!(
            new.dimensions,
            space.schema.subspace(SubspaceId(2)).dimensions
        );
        assert_eq!(space.replicas[3].len(), 4, "a region per interval");
        assert_eq!(space.build.as_ref().unwrap().replaces, Some(SubspaceId(2)));
        assert!(config_of(space.clone()).check().is_ok());
        // A second re-cut waits for the first.
        assert_eq!(
            space.alter(6, &recut, one_server),
            Err(AlterError::BuildUnderWay(3))
        );
        // Built: the new one serves and the old one is gone, in the same step.
        let done: Vec<BackfillRef> = (0..8)
            .map(|region| BackfillRef {
                space: 1,
                subspace: SubspaceId(3),
                region,
                since: 5,
            })
            .collect();
        space.complete_backfills(&done);
        assert_eq!(
            space.schema.subspace(SubspaceId(3)).state,
            SubspaceState::Serving
        );
        assert_eq!(
            space.schema.subspace(SubspaceId(2)).state,
            SubspaceState::Dropped
        );
        assert!(space.replicas[2].is_empty() && space.build.is_none());
        assert!(config_of(space).check().is_ok());
    }

    /// A subspace added with cuts is built cut so; bad cuts, or attributes an add refuses,
    /// change nothing.
    #[test]
    fn an_added_subspace_takes_its_cuts() {
        let mut space = priced();
        let before = space.clone();
        let attributes = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        for (names, cuts) in [
            (&["city", "price"][..], vec![AxisCuts::Equal(2)]),
            (
                &["city", "price"],
                vec![AxisCuts::Equal(2), AxisCuts::At(vec![5, 5])],
            ),
            (
                &["city", "price"],
                vec![AxisCuts::Equal(300), AxisCuts::Equal(300)],
            ),
            (&["price"], vec![AxisCuts::At(vec![7])]),
            (&["nope"], vec![AxisCuts::Equal(2)]),
        ] {
            let change = SpaceChange::AddCutSubspace {
                attributes: attributes(names),
                cuts,
            };
            assert!(space.alter(5, &change, one_server).is_err(), "{change:?}");
            assert_eq!(space, before);
        }
        let cuts = vec![AxisCuts::Equal(2), AxisCuts::At(vec![10, 20])];
        let add = SpaceChange::AddCutSubspace {
            attributes: attributes(&["city", "price"]),
            cuts: cuts.clone(),
        };
        assert_eq!(space.alter(5, &add, one_server), Ok(Some(SubspaceId(3))));
        let added = space.schema.subspace(SubspaceId(3));
        assert_eq!(
            (added.state, &added.cuts),
            (SubspaceState::Building, &Some(cuts))
        );
        assert_eq!(space.replicas[3].len(), 6, "a region per cell: 2 × 3");
        assert!(config_of(space).check().is_ok());
    }

    #[test]
    fn configurations_with_bad_cuts_or_domains_are_refused() {
        let mut good = priced();
        good.alter(
            5,
            &SpaceChange::RecutSubspace {
                subspace: 2,
                cuts: vec![AxisCuts::At(vec![7, 9])],
            },
            one_server,
        )
        .unwrap();
        assert!(config_of(good.clone()).check().is_ok());
        let refused = |edit: &dyn Fn(&mut SpaceConfig)| {
            let mut space = good.clone();
            edit(&mut space);
            let reason = config_of(space).check().expect_err("refused").reason;
            assert!(reason.contains("hotels"), "{reason}");
        };
        refused(&|s| s.schema.subspaces[3].cuts = Some(vec![AxisCuts::At(vec![9, 7])]));
        refused(&|s| s.schema.subspaces[3].cuts = Some(vec![AxisCuts::At(vec![7, 7])]));
        refused(&|s| s.schema.subspaces[3].cuts = Some(vec![AxisCuts::At(vec![0, 7])]));
        refused(&|s| s.schema.subspaces[3].cuts = Some(vec![]));
        refused(&|s| s.schema.attributes[2].domain = Some((Value::Int(5), Value::Int(5))));
        refused(&|s| {
            s.schema.attributes[2].domain = Some((Value::Float(1.0), Value::Float(f64::NAN)))
        });
        refused(&|s| s.schema.attributes[1].domain = Some((Value::Int(1), Value::Int(5))));
        // A build that says it replaces the key subspace, or one over other attributes.
        refused(&|s| s.build.as_mut().unwrap().replaces = Some(SubspaceId(0)));
        refused(&|s| s.build.as_mut().unwrap().replaces = Some(SubspaceId(1)));
    }

    #[test]
    fn a_change_counts_the_bytes_of_the_names_it_carries() {
        let add = SpaceChange::AddSubspace {
            attributes: vec!["city".into(), "price".into()],
        };
        assert_eq!(add.name_bytes(), 11);
        assert_eq!(SpaceChange::SetAdapt { on: true }.name_bytes(), 0);
        let log = started(adaptation(&[&["city", "price"]]));
        assert_eq!(log.name_bytes(), 5 + 11);
    }

    #[test]
    fn the_cached_index_follows_shapes_and_formulas() {
        use tessera_types::{Document, Predicate, PredicateOp};
        let schema = parse_space("space d dynamic key k dimensions 2").unwrap();
        let mut space = SpaceConfig::owned_by(1, schema, &[ServerId(1)]);
        let shape = |paths: &[&str], formula: &str| {
            let props = paths
                .iter()
                .map(|p| (p.to_string(), tessera_types::DocValue::Int(1)))
                .collect();
            Document::new(props).shape_in(formula)
        };
        let has_b = [CheckedPredicate::check(
            &space.schema,
            &Predicate::new("b", PredicateOp::Exists { or: vec![] }),
        )
        .unwrap()];
        space
            .alter(2, &SpaceChange::AddShape(shape(&["a"], "")), one_server)
            .unwrap();
        assert_eq!(
            space
                .property_index()
                .candidates(&space.shapes, &has_b)
                .count(),
            0
        );
        // A copy made now carries the built index; a shape added to it is still seen.
        let mut copy = space.clone();
        copy.alter(
            3,
            &SpaceChange::AddShape(shape(&["a", "b"], "")),
            one_server,
        )
        .unwrap();
        assert_eq!(
            copy.property_index()
                .candidates(&copy.shapes, &has_b)
                .count(),
            1
        );
        assert_eq!(
            space
                .property_index()
                .candidates(&space.shapes, &has_b)
                .count(),
            0
        );
        // Even one whose shapes were pushed behind the index's back.
        let mut pushed = space.clone();
        pushed.shapes.push(shape(&["b"], ""));
        assert_eq!(
            pushed
                .property_index()
                .candidates(&pushed.shapes, &has_b)
                .count(),
            1
        );
        let spec = FormulaSpec::parse(Some("f"), &["b"]).unwrap();
        copy.alter(4, &SpaceChange::AddFormula(spec), one_server)
            .unwrap();
        assert_eq!(copy.property_index().formulas_naming("b"), ["f".to_owned()]);
    }

    #[test]
    fn an_overlay_recut_takes_its_place_in_the_formulas() {
        let schema = parse_space("space d dynamic key k dimensions 2").unwrap();
        let mut space = SpaceConfig::owned_by(1, schema, &[ServerId(1)]);
        for (id, overlays) in [
            ("f", vec!["year*2,venue"]),
            ("g", vec!["year*2,venue", "title"]),
        ] {
            let spec = FormulaSpec::parse(Some(id), &overlays).unwrap();
            space
                .alter(2, &SpaceChange::AddFormula(spec), one_server)
                .unwrap();
        }
        // Subspaces: 0 the key's, 1 the unispace, 2 year*2,venue (both formulas), 3 title.
        let before = space.clone();
        let cuts = vec![AxisCuts::At(vec![7, 9]), AxisCuts::Equal(2)];
        let unispace = SpaceChange::RecutSubspace {
            subspace: 1,
            cuts: cuts.clone(),
        };
        assert_eq!(
            space.alter(3, &unispace, one_server),
            Err(AlterError::NotRecuttable(1))
        );
        assert_eq!(space, before);
        let recut = SpaceChange::RecutSubspace { subspace: 2, cuts };
        assert_eq!(space.alter(3, &recut, one_server), Ok(Some(SubspaceId(4))));
        assert!(config_of(space.clone()).check().is_ok());
        // While it is built, documents of both formulas are placed in it too.
        for f in ["f", "g"] {
            assert_eq!(space.schema.formula_places(f, SubspaceId(4)), Some(true));
        }
        assert_eq!(space.schema.formula_places("", SubspaceId(4)), Some(false));
        // A build claiming to replace an overlay it does not copy is refused.
        let mut wrong = space.clone();
        wrong.build.as_mut().unwrap().replaces = Some(SubspaceId(3));
        assert!(config_of(wrong).check().is_err());
        let done: Vec<BackfillRef> = (0..space.replicas[0].len() as u32)
            .map(|region| BackfillRef {
                space: 1,
                subspace: SubspaceId(4),
                region,
                since: 3,
            })
            .collect();
        space.complete_backfills(&done);
        assert_eq!(
            space.schema.subspace(SubspaceId(2)).state,
            SubspaceState::Dropped
        );
        assert_eq!(
            space.schema.formula_subspaces("f"),
            Some(&[SubspaceId(4)][..])
        );
        assert_eq!(
            space.schema.formula_subspaces("g"),
            Some(&[SubspaceId(4), SubspaceId(3)][..])
        );
        assert_eq!(space.schema.formula_places("f", SubspaceId(2)), Some(false));
        assert!(config_of(space).check().is_ok());
    }
}
