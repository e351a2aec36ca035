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
/// every update (DESIGN §5), so a space rarely wants more than a handful.
pub const SUBSPACES_MAX: usize = 32;

/// Most dimensions in one subspace. Z-order keys interleave 64 bits per dimension.
pub const SUBSPACE_DIMENSIONS_MAX: usize = 16;

/// Most partitions (regions per subspace) a space may ask for.
pub const PARTITIONS_MAX: u32 = 65_536;

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

const _: () = assert!(KEY_BYTES_MAX < OBJECT_BYTES_MAX);
const _: () = assert!(SUBSPACES_MAX <= ATTRIBUTES_MAX);
const _: () = assert!(PARTITIONS_DEFAULT <= PARTITIONS_MAX);
const _: () = assert!(TOLERATE_DEFAULT <= TOLERATE_MAX);
