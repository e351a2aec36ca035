//! Space schemas: the key, the typed attributes, the subspaces, partitions and fault tolerance.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::constants::*;
use crate::formula::{Formula, Overlay, DEFAULT_FORMULA};
use crate::ids::SubspaceId;
use crate::value::{AttributeType, PrimitiveType, Value};

/// Index of an attribute within its space. Index 0 is always the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AttrIndex(pub u16);

impl AttrIndex {
    pub const KEY: AttrIndex = AttrIndex(0);

    pub fn get(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribute {
    pub name: String,
    pub ty: AttributeType,
    /// The values an int or float attribute is declared to take (`int price in 0 to 100000`,
    /// both ends included): its axes are first cut into equal slices of this range rather than
    /// of the whole type. Values outside it are still accepted (they fall in the first or last
    /// interval). `None`: the data decides where to cut.
    pub domain: Option<(Value, Value)>,
}

impl Attribute {
    /// An attribute without a declared domain.
    pub fn new(name: impl Into<String>, ty: AttributeType) -> Attribute {
        Attribute {
            name: name.into(),
            ty,
            domain: None,
        }
    }

    /// Whether `domain` fits this attribute: an int or float attribute, two values of its type
    /// (no NaN), the first below the second.
    fn check_domain(&self) -> Result<(), SchemaError> {
        let Some((low, high)) = &self.domain else {
            return Ok(());
        };
        let ordered = matches!(
            self.ty,
            AttributeType::Primitive(PrimitiveType::Int | PrimitiveType::Float)
        );
        if !ordered {
            return Err(SchemaError::DomainNotOrdered {
                name: self.name.clone(),
                ty: self.ty,
            });
        }
        let typed = |v: &Value| v.primitive_type() == self.ty.as_primitive() && !v.contains_nan();
        if !typed(low) || !typed(high) || low >= high {
            return Err(SchemaError::BadAttributeDomain {
                name: self.name.clone(),
                low: low.clone(),
                high: high.clone(),
            });
        }
        Ok(())
    }
}

/// How one axis of a subspace is cut into intervals (tessera-geometry's `Tessellation`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AxisCuts {
    /// `n` equal slices of the whole axis: a hashed string axis (hashes are uniform already).
    Equal(u32),
    /// Cut at these coordinates, strictly increasing and above 0: interval `i` runs from
    /// `at[i - 1]` (0 for the first) up to the next cut point (`u64::MAX` for the last), so
    /// there are `at.len() + 1` intervals. Chosen from the data's quantiles, or from a
    /// declared domain.
    At(Vec<u64>),
}

impl AxisCuts {
    /// How many intervals the axis has.
    pub fn intervals(&self) -> u64 {
        match self {
            AxisCuts::Equal(n) => u64::from(*n),
            AxisCuts::At(at) => at.len() as u64 + 1,
        }
    }
}

/// An ordered set of attributes spanning one hyperspace. Its dimensions are primitives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subspace {
    pub dimensions: Vec<AttrIndex>,
    pub state: SubspaceState,
    /// In a dynamic space, the overlay (of compression formulas) this subspace places
    /// documents by; `None` for the key subspace, the unispace and every typed subspace.
    pub overlay: Option<Overlay>,
    /// In a tagged space ([`Placement::Tagged`]), the curve of the subspace that places
    /// objects by their tags: its dimensions are the tags attribute and the key, which
    /// tessera-geometry maps to a position on the curve and a spread slot. `None` elsewhere.
    pub tags: Option<TagCurve>,
    /// Where each of its axes is cut, one entry per dimension, when the data (or a re-cut)
    /// chose them. `None`: the default grid (equal slices, or a declared domain's). A
    /// subspace's cuts never change: a re-cut builds a new subspace beside it.
    pub cuts: Option<Vec<AxisCuts>>,
}

/// How a tagged placement places tags: a Hilbert curve through `axes` tag axes, each of its
/// stretches spread over `spread` regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagCurve {
    pub axes: u8,
    pub spread: u32,
}

/// Where a subspace stands in its life. A space's subspaces change while it serves
/// (`tessera alter-space`), but a subspace's id (its index) never does: chain messages and
/// storage name subspaces by id, so a dropped one keeps its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubspaceState {
    /// Holds every object; writes go through it and searches may use it.
    Serving,
    /// Added to a space that holds objects, and being filled with them: every write goes
    /// through it, but it does not hold every object yet, so no search uses it.
    Building,
    /// Removed: no write goes through it, no search uses it, no server stores it.
    Dropped,
}

impl Subspace {
    /// A subspace of a new space, or one fully built.
    pub fn serving(dimensions: Vec<AttrIndex>) -> Subspace {
        Subspace {
            dimensions,
            state: SubspaceState::Serving,
            overlay: None,
            tags: None,
            cuts: None,
        }
    }

    /// A tagged space's tag subspace over set(string) attribute `tags`.
    pub fn tags(tags: AttrIndex, curve: TagCurve) -> Subspace {
        Subspace {
            dimensions: vec![tags, AttrIndex::KEY],
            state: SubspaceState::Serving,
            overlay: None,
            tags: Some(curve),
            cuts: None,
        }
    }

    /// A dynamic space's overlay subspace: one axis per property, fed by the document.
    pub fn overlay(overlay: Overlay) -> Subspace {
        Subspace {
            dimensions: vec![DOCUMENT_INDEX; overlay.axes.len()],
            state: SubspaceState::Serving,
            overlay: Some(overlay),
            tags: None,
            cuts: None,
        }
    }

    /// Whether writes go through it (a chain has hops in it).
    pub fn is_written(&self) -> bool {
        self.state != SubspaceState::Dropped
    }

    /// Whether searches may use it.
    pub fn is_searchable(&self) -> bool {
        self.state == SubspaceState::Serving
    }

    /// Whether its cuts are well formed, for a subspace from the network: one entry per
    /// dimension, every axis into at least one interval, cut points
    /// strictly increasing and above 0, and at most [`PARTITIONS_MAX`] regions in all.
    pub fn check_cuts(&self) -> Result<(), SchemaError> {
        let Some(cuts) = &self.cuts else {
            return Ok(());
        };
        let bad = |why: &str| Err(SchemaError::BadCuts(why.to_owned()));
        if cuts.len() != self.dimensions.len() {
            return bad("one axis of cuts per dimension");
        }
        if self.tags.is_some() {
            return bad("a tag subspace is cut along its curve, not by cut points");
        }
        let mut regions = 1u64;
        for axis in cuts {
            match axis {
                AxisCuts::Equal(0) => return bad("an axis has at least one interval"),
                AxisCuts::At(at) if at.first() == Some(&0) => {
                    return bad("cut points lie above 0 (the first interval starts there)")
                }
                AxisCuts::At(at) if at.windows(2).any(|w| w[0] >= w[1]) => {
                    return bad("cut points are strictly increasing")
                }
                _ => {}
            }
            regions = regions.saturating_mul(axis.intervals());
        }
        if regions > u64::from(PARTITIONS_MAX) {
            return bad("more regions than a space may have partitions");
        }
        Ok(())
    }
}

/// A space: a table with a key, typed attributes, subspaces, a partition count and a fault
/// tolerance level. Built by [`crate::parse::parse_space`] or [`SpaceSchema::new`], both of which
/// validate it; a `SpaceSchema` in hand is always valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceSchema {
    pub name: String,
    /// All attributes; `attributes[0]` is the key.
    pub attributes: Vec<Attribute>,
    /// All subspaces; `subspaces[0]` is the key subspace (one dimension, the key).
    pub subspaces: Vec<Subspace>,
    /// Regions per subspace (approximately: see the tessellation in tessera-geometry).
    pub partitions: u32,
    /// Failures tolerated: every region has `tolerate + 1` replicas.
    pub tolerate: u32,
    /// Whether Tessera re-subspaces the space itself as its workload changes (`adapt on`):
    /// the coordinators' leader (standalone, `tessera dev`) follows the space's trace and applies
    /// the advisor's configuration once it is predicted enough faster for long enough.
    pub adapt: bool,
    /// Typed (declared attributes) or dynamic (documents of any properties).
    pub kind: SpaceKind,
    /// A dynamic space's registered compression formulas, in registration order (none in a
    /// typed space). The default formula ([`DEFAULT_FORMULA`], the unispace) is not listed.
    pub formulas: Vec<Formula>,
    /// How the key subspace orders keys, and whether objects are also placed by tags.
    pub placement: Placement,
    /// An ordered space's key regions split since it was created, oldest first (see
    /// [`KeySplit`]); empty in any other space. The configuration's state, not the
    /// description's: the description language neither shows nor sets it.
    pub key_splits: Vec<KeySplit>,
}

/// A key region of an ordered space split in two (seed 003: key ranges follow the data).
/// The keys of region `region` from `at` up take a new region, numbered after every region
/// there was (so no other region changes its number); the keys below `at` stay. Applied in
/// order, the splits turn the equal slices the space was created with into the ranges it
/// has now (tessera-geometry's `tessellations`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySplit {
    pub region: u32,
    /// The first key of the new region: a key of the space's key type.
    pub at: Value,
    /// The configuration epoch of the split: a read planned on an earlier configuration
    /// reaches one of the two regions for the other's keys, so it is planned again.
    pub epoch: u64,
}

/// Where a space's objects go besides hyperspace hashing (seed 003 §2.1, DataDroplets'
/// placements): which servers a multi-item read (`get_by_range`, `get_by_tags`) must ask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Placement {
    /// Keys hashed over the key axis (the default): keys spread evenly over the servers, and
    /// a range of keys visits every region.
    Random,
    /// The key axis keeps the keys' order (ints and floats numerically, strings bytewise: by
    /// their first 8 bytes, then the rest where a split needs it), so a range of keys visits
    /// only the regions it overlaps. The key subspace's
    /// regions cut `domain` (the key type's whole range when `None`) into equal slices, the
    /// first and last stretching to the ends of the axis.
    Ordered { domain: Option<(Value, Value)> },
    /// Besides the key subspace, a tag subspace ([`Subspace::tags`]) places each object by
    /// the tags of set(string) attribute `attribute`: a Hilbert curve through the cells of
    /// up to `axes` tags (an object with more goes to the curve's last cell), each stretch of
    /// the curve spread over `spread` regions by the key's hash (hybrid-n), so that one tag
    /// set does not land all on one server.
    Tagged {
        attribute: AttrIndex,
        curve: TagCurve,
    },
}

/// What a space holds.
///
/// A *dynamic* space (docs/design.md §9, seed 004's unispace hashing) has two attributes, its key
/// and [`DOCUMENT_ATTRIBUTE`], a JSON document with any properties, and two subspaces: the
/// key subspace and the *unispace*, whose `dimensions` axes are all fed by the document.
/// A property's axis is the hash of its path modulo `dimensions` (tessera-geometry says
/// how a document becomes a point), so the unispace lists the document attribute once per
/// axis. Its subspaces are not altered by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpaceKind {
    Typed,
    Dynamic { dimensions: u16 },
}

/// The name of a dynamic space's document attribute, as explanations and errors show it.
pub const DOCUMENT_ATTRIBUTE: &str = "document";

/// The document attribute's index in a dynamic space.
pub const DOCUMENT_INDEX: AttrIndex = AttrIndex(1);

/// The name of a dynamic space's formula attribute: the id of the compression formula that
/// places the document (the empty string for the default, the unispace).
pub const FORMULA_ATTRIBUTE: &str = "formula";

/// The formula attribute's index in a dynamic space.
pub const FORMULA_INDEX: AttrIndex = AttrIndex(2);

/// The unispace's id in a dynamic space.
pub const UNISPACE: SubspaceId = SubspaceId(1);

/// Why a space description, though well formed, is not a valid space.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum SchemaError {
    #[error("name {0:?} is not valid: names are 1..={NAME_BYTES_MAX} bytes of letters, digits and '_', not starting with a digit")]
    InvalidName(String),
    #[error("attribute {0:?} is declared twice")]
    DuplicateAttribute(String),
    #[error("key {name:?} has type {ty}: keys must be string, int or float")]
    KeyNotPrimitive { name: String, ty: AttributeType },
    #[error("subspace names unknown attribute {0:?}")]
    UnknownAttribute(String),
    #[error("subspace names attribute {name:?} of type {ty}: only string, int and float attributes can be dimensions")]
    DimensionNotPrimitive { name: String, ty: AttributeType },
    #[error("subspace names the key {0:?}: the key has its own subspace already")]
    KeyInSubspace(String),
    #[error("subspace names attribute {0:?} twice")]
    DuplicateDimension(String),
    #[error("a subspace needs at least one attribute")]
    EmptySubspace,
    #[error("too many attributes: {count} (at most {ATTRIBUTES_MAX}, key included)")]
    TooManyAttributes { count: usize },
    #[error("too many subspaces: {count} (at most {SUBSPACES_MAX}, key subspace included)")]
    TooManySubspaces { count: usize },
    #[error("subspace has {count} dimensions (at most {SUBSPACE_DIMENSIONS_MAX})")]
    TooManyDimensions { count: usize },
    #[error("{0} partitions: partitions must be between 1 and {PARTITIONS_MAX}")]
    BadPartitions(u32),
    #[error("tolerate {0} failures: at most {TOLERATE_MAX}")]
    BadTolerate(u32),
    #[error("{0} dimensions: a dynamic space hashes its properties onto 1 to {DYNAMIC_DIMENSIONS_MAX} dimensions")]
    BadDimensions(u32),
    #[error(
        "space {0:?} is dynamic: its subspaces are its key's and the unispace, and do not change"
    )]
    DynamicSubspaces(String),
    #[error("placement tagged names {name:?} of type {ty}: the tags are a set(string) attribute")]
    NotTags { name: String, ty: AttributeType },
    #[error("placement tagged names unknown attribute {0:?}")]
    UnknownTags(String),
    #[error("spread {spread}: each stretch of the tag curve spreads over 1 to {partitions} regions (the space's partitions)")]
    BadSpread { spread: u32, partitions: u32 },
    #[error("{0} tag axes: a tagged placement places objects by 1 to {TAG_AXES_MAX} tags")]
    BadTagAxes(u32),
    #[error("placement ordered from {from} to {to}: the domain's ends are keys of type {key} (int or float keys), the first below the second")]
    BadDomain {
        from: Value,
        to: Value,
        key: PrimitiveType,
    },
    #[error(
        "space {0:?} is dynamic: its documents are placed by their key's hash (placement random)"
    )]
    DynamicPlacement(String),
    #[error("subspace {0} places the objects by their tags (placement tagged): it stays while the placement does")]
    TagSubspace(u16),
    #[error("space {0:?} is placed by tags: Tessera does not re-subspace a tagged space itself (adapt stays off)")]
    TaggedAdapt(String),
    #[error("space {0:?}: its subspaces do not match its placement (a tag subspace exactly when tagged)")]
    PlacementMismatch(String),
    #[error("attribute {name:?} of type {ty} has a domain: only int and float attributes are ordered (strings are hashed)")]
    DomainNotOrdered { name: String, ty: AttributeType },
    #[error("attribute {name:?} in {low} to {high}: a domain is two values of the attribute's type, the first below the second")]
    BadAttributeDomain {
        name: String,
        low: Value,
        high: Value,
    },
    #[error("bad cuts: {0}")]
    BadCuts(String),
}

/// Why a sorted search cannot order by the attribute it names.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SortError {
    #[error("unknown attribute {0:?}")]
    UnknownAttribute(String),
    #[error("cannot sort by {0:?}: only string, int and float attributes sort")]
    NotSortable(String),
    #[error("cannot sort by {0}")]
    BadPath(String),
}

/// The dimensions of a subspace over the attributes `names` of a space whose attributes are
/// `all` (the key first).
fn resolve_dimensions(all: &[Attribute], names: &[String]) -> Result<Vec<AttrIndex>, SchemaError> {
    if names.is_empty() {
        return Err(SchemaError::EmptySubspace);
    }
    if names.len() > SUBSPACE_DIMENSIONS_MAX {
        return Err(SchemaError::TooManyDimensions { count: names.len() });
    }
    let mut dimensions = Vec::with_capacity(names.len());
    for n in names {
        let idx = all
            .iter()
            .position(|a| a.name == *n)
            .ok_or_else(|| SchemaError::UnknownAttribute(n.clone()))?;
        if idx == 0 {
            return Err(SchemaError::KeyInSubspace(n.clone()));
        }
        if !all[idx].ty.is_primitive() {
            return Err(SchemaError::DimensionNotPrimitive {
                name: n.clone(),
                ty: all[idx].ty,
            });
        }
        let idx = AttrIndex(idx as u16);
        if dimensions.contains(&idx) {
            return Err(SchemaError::DuplicateDimension(n.clone()));
        }
        dimensions.push(idx);
    }
    Ok(dimensions)
}

pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    name.len() <= NAME_BYTES_MAX && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl SpaceSchema {
    /// Builds and validates a schema. `subspaces` lists the non-key subspaces by attribute
    /// name, in declaration order.
    pub fn new(
        name: &str,
        key: Attribute,
        attributes: Vec<Attribute>,
        subspaces: Vec<Vec<String>>,
        partitions: u32,
        tolerate: u32,
    ) -> Result<SpaceSchema, SchemaError> {
        if !is_valid_name(name) {
            return Err(SchemaError::InvalidName(name.to_owned()));
        }
        if !key.ty.is_primitive() {
            return Err(SchemaError::KeyNotPrimitive {
                name: key.name,
                ty: key.ty,
            });
        }
        let mut all = Vec::with_capacity(attributes.len() + 1);
        all.push(key);
        all.extend(attributes);
        if all.len() > ATTRIBUTES_MAX {
            return Err(SchemaError::TooManyAttributes { count: all.len() });
        }
        for (i, a) in all.iter().enumerate() {
            if !is_valid_name(&a.name) {
                return Err(SchemaError::InvalidName(a.name.clone()));
            }
            if all[..i].iter().any(|b| b.name == a.name) {
                return Err(SchemaError::DuplicateAttribute(a.name.clone()));
            }
            a.check_domain()?;
        }
        if subspaces.len() + 1 > SUBSPACES_MAX {
            return Err(SchemaError::TooManySubspaces {
                count: subspaces.len() + 1,
            });
        }
        let mut resolved = vec![Subspace::serving(vec![AttrIndex::KEY])];
        for names in subspaces {
            resolved.push(Subspace::serving(resolve_dimensions(&all, &names)?));
        }
        if partitions == 0 || partitions > PARTITIONS_MAX {
            return Err(SchemaError::BadPartitions(partitions));
        }
        if tolerate > TOLERATE_MAX {
            return Err(SchemaError::BadTolerate(tolerate));
        }
        Ok(SpaceSchema {
            name: name.to_owned(),
            attributes: all,
            subspaces: resolved,
            partitions,
            tolerate,
            adapt: false,
            kind: SpaceKind::Typed,
            formulas: Vec::new(),
            placement: Placement::Random,
            key_splits: Vec::new(),
        })
    }

    /// Builds and validates a dynamic space (see [`SpaceKind`]).
    pub fn dynamic(
        name: &str,
        key: Attribute,
        dimensions: u32,
        partitions: u32,
        tolerate: u32,
    ) -> Result<SpaceSchema, SchemaError> {
        let document = Attribute::new(DOCUMENT_ATTRIBUTE.to_owned(), AttributeType::Document);
        if key.name == DOCUMENT_ATTRIBUTE || key.name == FORMULA_ATTRIBUTE {
            return Err(SchemaError::DuplicateAttribute(key.name));
        }
        if dimensions == 0 || dimensions > u32::from(DYNAMIC_DIMENSIONS_MAX) {
            return Err(SchemaError::BadDimensions(dimensions));
        }
        // Validated as a typed space of the same key, then given its document and unispace.
        let mut schema = SpaceSchema::new(name, key, vec![], vec![], partitions, tolerate)?;
        schema.attributes.push(document);
        schema.attributes.push(Attribute::new(
            FORMULA_ATTRIBUTE.to_owned(),
            AttributeType::Primitive(PrimitiveType::String),
        ));
        schema
            .subspaces
            .push(Subspace::serving(vec![DOCUMENT_INDEX; dimensions as usize]));
        schema.kind = SpaceKind::Dynamic {
            dimensions: dimensions as u16,
        };
        Ok(schema)
    }

    pub fn is_dynamic(&self) -> bool {
        matches!(self.kind, SpaceKind::Dynamic { .. })
    }

    /// The subspaces a dynamic space's documents of formula `id` are placed in, besides the
    /// key subspace: the unispace for the default formula, the overlays of a registered one.
    /// `None` for an id the space has not registered.
    pub fn formula_subspaces(&self, id: &str) -> Option<&[SubspaceId]> {
        if id == DEFAULT_FORMULA {
            return Some(std::slice::from_ref(&UNISPACE));
        }
        self.formulas
            .iter()
            .find(|f| f.id == id)
            .map(|f| f.overlays.as_slice())
    }

    /// Whether documents of formula `id` are placed in subspace `s`: one of the formula's
    /// subspaces, or a re-cut of one of its overlays being built beside it (another written
    /// subspace over the same overlay; only a re-cut makes one, and it replaces the old one
    /// in the formulas when it is built). `None` for an id the space has not registered.
    pub fn formula_places(&self, id: &str, s: SubspaceId) -> Option<bool> {
        let subspaces = self.formula_subspaces(id)?;
        if subspaces.contains(&s) {
            return Some(true);
        }
        let Some(this) = self.subspaces.get(s.get()).filter(|t| t.is_written()) else {
            return Some(false);
        };
        Some(
            this.overlay.is_some()
                && subspaces
                    .iter()
                    .any(|f| self.subspace(*f).overlay == this.overlay),
        )
    }

    /// The document paths the written overlays of a dynamic space name, ascending, each once.
    pub fn overlay_paths(&self) -> Vec<&str> {
        let mut paths: Vec<&str> = self
            .subspaces
            .iter()
            .filter(|s| s.is_written())
            .filter_map(|s| s.overlay.as_ref())
            .flat_map(|o| o.axes.iter().map(|a| a.path.as_str()))
            .collect();
        paths.sort_unstable();
        paths.dedup();
        paths
    }

    /// Replaces subspace `old` by `new` in every formula that names it (a re-cut overlay
    /// taking the place of the one it was built from).
    pub fn replace_in_formulas(&mut self, old: SubspaceId, new: SubspaceId) {
        for f in &mut self.formulas {
            for o in &mut f.overlays {
                if *o == old {
                    *o = new;
                }
            }
            let mut seen = Vec::with_capacity(f.overlays.len());
            f.overlays.retain(|o| {
                let first = !seen.contains(o);
                seen.push(*o);
                first
            });
        }
    }

    /// Every formula a document of the space can have: the default first, then the registered
    /// ones, with the subspaces each places its documents in.
    pub fn all_formulas(&self) -> impl Iterator<Item = (&str, &[SubspaceId])> {
        std::iter::once((DEFAULT_FORMULA, std::slice::from_ref(&UNISPACE))).chain(
            self.formulas
                .iter()
                .map(|f| (f.id.as_str(), f.overlays.as_slice())),
        )
    }

    /// The schema placed by `placement` (`placement ...` in the description): a tagged one
    /// gains its tag subspace, the last.
    pub fn with_placement(mut self, placement: Placement) -> Result<SpaceSchema, SchemaError> {
        self.check_placement_values(&placement)?;
        if let Placement::Tagged { attribute, curve } = &placement {
            if self.subspaces.len() + 1 > SUBSPACES_MAX {
                return Err(SchemaError::TooManySubspaces {
                    count: self.subspaces.len() + 1,
                });
            }
            self.subspaces.push(Subspace::tags(*attribute, *curve));
        }
        self.placement = placement;
        Ok(self)
    }

    /// Whether `placement` can place this schema's objects: a domain of two increasing int or
    /// float keys of the key's type, a set(string) tags attribute, axes and a spread in range.
    fn check_placement_values(&self, placement: &Placement) -> Result<(), SchemaError> {
        if *placement != Placement::Random && self.is_dynamic() {
            return Err(SchemaError::DynamicPlacement(self.name.clone()));
        }
        match placement {
            Placement::Random | Placement::Ordered { domain: None } => Ok(()),
            Placement::Ordered {
                domain: Some((from, to)),
            } => {
                // Strings: two keys sharing 8 leading bytes share an ordered coordinate, so
                // their domain could be empty.
                let key = self.key_type();
                let typed =
                    |v: &Value| v.primitive_type() == Some(key) && key != PrimitiveType::String;
                if !typed(from)
                    || !typed(to)
                    || from >= to
                    || from.contains_nan()
                    || to.contains_nan()
                {
                    return Err(SchemaError::BadDomain {
                        from: from.clone(),
                        to: to.clone(),
                        key,
                    });
                }
                Ok(())
            }
            Placement::Tagged {
                attribute,
                curve: TagCurve { axes, spread },
            } => {
                let Some(a) = self.attributes.get(attribute.get()) else {
                    return Err(SchemaError::UnknownTags(format!("#{}", attribute.get())));
                };
                if a.ty != AttributeType::Set(PrimitiveType::String) {
                    return Err(SchemaError::NotTags {
                        name: a.name.clone(),
                        ty: a.ty,
                    });
                }
                if *axes == 0 || u32::from(*axes) > TAG_AXES_MAX {
                    return Err(SchemaError::BadTagAxes(u32::from(*axes)));
                }
                if *spread == 0 || *spread > self.partitions {
                    return Err(SchemaError::BadSpread {
                        spread: *spread,
                        partitions: self.partitions,
                    });
                }
                Ok(())
            }
        }
    }

    /// Whether the schema's placement and its subspaces agree, for a schema from the network
    /// (a configuration): the placement's values as [`SpaceSchema::with_placement`] checks
    /// them, and a tag subspace exactly when tagged, over the tags and the key, on its curve.
    pub fn check_placement(&self) -> Result<(), SchemaError> {
        self.check_placement_values(&self.placement)?;
        let mut tag_subspaces = self.subspaces.iter().filter(|s| s.tags.is_some());
        let agree = match (&self.placement, tag_subspaces.next(), tag_subspaces.next()) {
            (Placement::Tagged { attribute, curve }, Some(s), None) => {
                s.tags == Some(*curve) && s.dimensions == [*attribute, AttrIndex::KEY]
            }
            (Placement::Tagged { .. }, _, _) => false,
            (_, found, _) => found.is_none(),
        };
        if agree {
            Ok(())
        } else {
            Err(SchemaError::PlacementMismatch(self.name.clone()))
        }
    }

    /// Whether the attributes' domains and the subspaces' cuts are well formed, for a schema
    /// from the network (a configuration): see [`Subspace::check_cuts`].
    pub fn check_cuts(&self) -> Result<(), SchemaError> {
        for a in &self.attributes {
            a.check_domain()?;
        }
        self.subspaces.iter().try_for_each(Subspace::check_cuts)
    }

    /// The tag subspace of a tagged space.
    pub fn tag_subspace(&self) -> Option<SubspaceId> {
        self.subspace_ids()
            .find(|id| self.subspace(*id).tags.is_some())
    }

    /// Whether the key axis keeps the keys' order ([`Placement::Ordered`]).
    pub fn keys_ordered(&self) -> bool {
        matches!(self.placement, Placement::Ordered { .. })
    }

    /// Whether adaptation may be turned on: not in a tagged space, whose tag subspace the
    /// advisor does not model.
    pub fn check_adapt(&self, adapt: bool) -> Result<(), SchemaError> {
        if adapt && self.tag_subspace().is_some() {
            return Err(SchemaError::TaggedAdapt(self.name.clone()));
        }
        Ok(())
    }

    /// The schema with adaptation on or off (`adapt on` in the description).
    pub fn with_adapt(mut self, adapt: bool) -> SpaceSchema {
        self.adapt = adapt;
        self
    }

    pub fn key(&self) -> &Attribute {
        &self.attributes[0]
    }

    pub fn key_type(&self) -> PrimitiveType {
        self.attributes[0]
            .ty
            .as_primitive()
            .expect("schema invariant: the key is primitive")
    }

    pub fn attribute(&self, idx: AttrIndex) -> &Attribute {
        &self.attributes[idx.get()]
    }

    pub fn attribute_index(&self, name: &str) -> Option<AttrIndex> {
        self.attributes
            .iter()
            .position(|a| a.name == name)
            .map(|i| AttrIndex(i as u16))
    }

    pub fn subspace(&self, id: SubspaceId) -> &Subspace {
        &self.subspaces[id.get()]
    }

    /// The overlay `id` is if it holds pointers (stubs) rather than copies of the documents.
    pub fn pointer_overlay(&self, id: SubspaceId) -> Option<&Overlay> {
        self.subspaces
            .get(id.get())?
            .overlay
            .as_ref()
            .filter(|o| o.pointer)
    }

    /// Every subspace slot, dropped ones included.
    pub fn subspace_ids(&self) -> impl Iterator<Item = SubspaceId> {
        (0..self.subspaces.len()).map(|i| SubspaceId(i as u16))
    }

    /// The subspaces writes go through: serving and building ones.
    pub fn written_subspaces(&self) -> impl Iterator<Item = SubspaceId> + '_ {
        self.subspace_ids()
            .filter(|id| self.subspace(*id).is_written())
    }

    /// The subspaces searches may use.
    pub fn searchable_subspaces(&self) -> impl Iterator<Item = SubspaceId> + '_ {
        self.subspace_ids()
            .filter(|id| self.subspace(*id).is_searchable())
    }

    /// The dimensions of a new subspace over the attributes `names`, checked as a space
    /// declaration checks its subspaces.
    pub fn subspace_dimensions(&self, names: &[String]) -> Result<Vec<AttrIndex>, SchemaError> {
        if self.is_dynamic() {
            return Err(SchemaError::DynamicSubspaces(self.name.clone()));
        }
        resolve_dimensions(&self.attributes, names)
    }

    /// The replica set size K = f + 1.
    pub fn replicas(&self) -> u32 {
        self.tolerate + 1
    }
}

impl fmt::Display for SpaceSchema {
    /// Renders the space in the description language; parsing the output gives the same schema.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let SpaceKind::Dynamic { dimensions } = self.kind {
            writeln!(f, "space {} dynamic", self.name)?;
            writeln!(f, "key {} {}", self.key().ty, self.key().name)?;
            writeln!(f, "dimensions {dimensions}")?;
            writeln!(f, "create {} partitions", self.partitions)?;
            return writeln!(f, "tolerate {} failures", self.tolerate);
        }
        writeln!(f, "space {}", self.name)?;
        writeln!(f, "key {} {}", self.key().ty, self.key().name)?;
        if self.attributes.len() > 1 {
            f.write_str("attributes ")?;
            for (i, a) in self.attributes[1..].iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{} {}", a.ty, a.name)?;
                if let Some((low, high)) = &a.domain {
                    write!(f, " in {low} to {high}")?;
                }
            }
            writeln!(f)?;
        }
        // A dropped subspace is gone for the user; one being built is declared.
        for s in self.subspaces[1..]
            .iter()
            .filter(|s| s.is_written() && s.tags.is_none())
        {
            f.write_str("subspace ")?;
            for (i, d) in s.dimensions.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                f.write_str(&self.attribute(*d).name)?;
            }
            writeln!(f)?;
        }
        writeln!(f, "create {} partitions", self.partitions)?;
        writeln!(f, "tolerate {} failures", self.tolerate)?;
        match &self.placement {
            Placement::Random => {}
            Placement::Ordered { domain: None } => writeln!(f, "placement ordered")?,
            Placement::Ordered {
                domain: Some((from, to)),
            } => writeln!(f, "placement ordered from {from} to {to}")?,
            Placement::Tagged {
                attribute,
                curve: TagCurve { axes, spread },
            } => writeln!(
                f,
                "placement tagged {} axes {axes} spread {spread}",
                self.attribute(*attribute).name
            )?,
        }
        if self.adapt {
            writeln!(f, "adapt on")?;
        }
        Ok(())
    }
}
