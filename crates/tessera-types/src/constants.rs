//! Limits of the data model, in one place. Each says why it is what it is; the server and the
//! client both enforce them, so a request over a limit is refused before it costs anything.

/// Longest space or attribute name. Names travel in every schema and error message.
pub const NAME_BYTES_MAX: usize = 128;

/// Largest encoded key. Keys are part of every storage key (once per subspace), so they stay
/// small; 4 KiB is far more than any real identifier and keeps LSM index blocks dense.
pub const KEY_BYTES_MAX: usize = 4 * 1024;

/// Largest encoded object (all attribute values together). An object is copied to every
/// replica of every subspace, and the whole of it travels in one frame.
pub const OBJECT_BYTES_MAX: usize = 1024 * 1024;

/// Most attributes in a space, key included.
pub const ATTRIBUTES_MAX: usize = 64;

/// Most subspaces in a space, the key subspace included. Every subspace lengthens the chain of
/// every update (docs/design.md §5), so a space rarely wants more than a handful.
pub const SUBSPACES_MAX: usize = 32;

/// Most dimensions in one subspace. Z-order keys interleave 64 bits per dimension.
pub const SUBSPACE_DIMENSIONS_MAX: usize = 16;

/// Most partitions (regions per subspace) a space may ask for.
pub const PARTITIONS_MAX: u32 = 65_536;

/// Most splits of an ordered space's key regions (`tessera split-region`, or the
/// coordinators' own splits of regions that outgrow the others): each adds a key region.
pub const KEY_SPLITS_MAX: usize = 4_096;

/// Default partitions, as in HyperDex.
pub const PARTITIONS_DEFAULT: u32 = 64;

/// Most failures a space may ask to tolerate (replica sets of `f + 1` servers).
pub const TOLERATE_MAX: u32 = 7;

/// Default failures tolerated, as in HyperDex.
pub const TOLERATE_DEFAULT: u32 = 1;

/// Longest regular expression accepted in a predicate (the pattern text).
pub const REGEX_BYTES_MAX: usize = 4 * 1024;

/// Most predicates in one search or condition.
pub const PREDICATES_MAX: usize = 64;

/// Most funcalls (attribute assignments and atomic operations) in one update.
pub const FUNCALLS_MAX: usize = 256;

/// Deepest property path of a document (`a.b.c` is 3 deep), and so deepest nesting of
/// documents in documents. Paths travel in shapes and predicates; real documents nest a few
/// levels.
pub const PATH_DEPTH_MAX: usize = 8;

/// Longest property path, in bytes.
pub const PATH_BYTES_MAX: usize = 512;

/// Most properties in one document, nested ones included. A document's shape lists them all,
/// and every shape of a space is kept in its configuration.
pub const DOCUMENT_PROPERTIES_MAX: usize = 256;

/// Most bytes of a document's property paths together (each counted with two bytes more, as
/// a shape carries it). Every shape of a space is kept in its configuration, and registering
/// one is an alteration bounded like a description: 256 paths of 512 bytes would not fit.
pub const SHAPE_BYTES_MAX: usize = 16 * 1024;

/// Deepest nesting of lists and documents that decoding accepts (lists may nest deeper than
/// paths go). Bounds the decoder's recursion on input from the network.
pub const DOCUMENT_NESTING_MAX: usize = 32;

/// Most dimensions a dynamic space hashes property names onto.
pub const DYNAMIC_DIMENSIONS_MAX: u16 = SUBSPACE_DIMENSIONS_MAX as u16;

/// Dimensions of a dynamic space that does not say (`dimensions D`).
pub const DYNAMIC_DIMENSIONS_DEFAULT: u16 = 8;

/// Most shapes a dynamic space keeps (distinct sets of paths and kinds among its documents).
/// Every search plans a box per shape that can match, and the shapes live in the
/// configuration; a space whose documents take more shapes than this is refused new ones.
pub const SHAPES_MAX: usize = 4096;

const _: () = assert!(PATH_DEPTH_MAX < DOCUMENT_NESTING_MAX);
const _: () = assert!(DYNAMIC_DIMENSIONS_DEFAULT <= DYNAMIC_DIMENSIONS_MAX);
const _: () = assert!(KEY_BYTES_MAX < OBJECT_BYTES_MAX);
const _: () = assert!(SUBSPACES_MAX <= ATTRIBUTES_MAX);
const _: () = assert!(PARTITIONS_DEFAULT <= PARTITIONS_MAX);
const _: () = assert!(TOLERATE_DEFAULT <= TOLERATE_MAX);

/// Most formulas a dynamic space registers. Every search of the space plans each formula's
/// cheapest overlay.
pub const FORMULAS_MAX: usize = 64;

/// Most overlays of one formula (each a copy of the document).
pub const FORMULA_OVERLAYS_MAX: usize = 4;

/// Largest weight of an overlay's axis (relative intervals along it).
pub const FORMULA_WEIGHT_MAX: u32 = 64;

/// Longest formula id, in bytes (a derived id is the formula's text).
pub const FORMULA_ID_BYTES_MAX: usize = 1024;

/// Most tags a tagged placement's curve places an object by (`placement tagged ATTR axes N`):
/// one axis per tag. An object with more tags goes to the curve's last cell.
pub const TAG_AXES_MAX: u32 = 4;

/// Tag axes of a tagged placement that does not say.
pub const TAG_AXES_DEFAULT: u8 = 2;

/// Each stretch of a tagged placement's curve spreads over this many regions when the
/// description does not say (`spread N`).
pub const TAG_SPREAD_DEFAULT: u32 = 2;

const _: () = assert!(TAG_AXES_DEFAULT as u32 <= TAG_AXES_MAX);
