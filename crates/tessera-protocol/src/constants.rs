//! Limits of the wire protocol.

use tessera_types::constants::OBJECT_BYTES_MAX;

/// Largest frame body either side accepts. Big enough for one object at its limit plus its
/// key and request framing; a search streams its results in many frames, each under
/// [`SEARCH_BATCH_BYTES`].
pub const FRAME_BYTES_MAX: usize = 2 * OBJECT_BYTES_MAX + 64 * 1024;

/// A search result frame is cut once it holds this many bytes of objects.
pub const SEARCH_BATCH_BYTES: usize = 256 * 1024;

/// Largest space description accepted by add-space.
pub const DESCRIPTION_BYTES_MAX: usize = 64 * 1024;

const _: () = assert!(SEARCH_BATCH_BYTES + OBJECT_BYTES_MAX < FRAME_BYTES_MAX);

/// Largest encoded configuration a change may produce (coordinators and a standalone server
/// both hold to it). The whole configuration travels in one frame, so it must stay under the
/// frame limit, with room to spare for the frame's header.
pub const CONFIGURATION_BYTES_MAX: usize = FRAME_BYTES_MAX - 4096;

/// A shape's registration is an alteration, bounded like a description.
const _: () = assert!(
    tessera_types::constants::SHAPE_BYTES_MAX + tessera_types::constants::FORMULA_ID_BYTES_MAX
        < DESCRIPTION_BYTES_MAX
);

/// How far back a server keeps the shapes of the requests it served (`Request::Trace`), in
/// minutes: long enough to tell a lasting change of workload from a burst.
pub const TRACE_MINUTES_MAX: u32 = 15;

/// Most keys one `GetMany` names (a multi_get of more is split by the client).
pub const KEYS_PER_REQUEST_MAX: usize = 256;

/// The largest `GetMany` fits a frame: its keys at their limit, and framing.
const _: () = assert!(
    KEYS_PER_REQUEST_MAX * (tessera_types::constants::KEY_BYTES_MAX + 8) + 4096 < FRAME_BYTES_MAX
);
