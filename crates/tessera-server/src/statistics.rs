//! Each space's statistics as this server last read them (`Request::Statistics`), kept between
//! requests. A read scans every object of the key regions the server leads, so it is read again
//! only once that would change the answer much: when the writes this server accepted since (to
//! any space: one counter, no lock on the write path) pass a tenth of the objects the space's
//! statistics counted, or the key regions it leads, or the document paths its overlays name,
//! are no longer those it counted. So statistics lag the data by at most a tenth of it (plus the
//! writes other servers accepted for keys this server leads, which they forward in a chain).
//! Memory: one `SpaceStatistics` per space asked about (13 KiB per attribute and path at most);
//! spaces removed are forgotten at the next read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tessera_protocol::{SpaceStatistics, PATH_STATISTICS_MAX};

use crate::view::ServedSpace;

/// One space's statistics and the write count when their scan began.
struct Kept {
    statistics: SpaceStatistics,
    writes_then: u64,
}

#[derive(Default)]
pub struct KeptStatistics {
    /// Writes accepted from clients, every space together.
    writes: AtomicU64,
    /// By space id.
    spaces: Mutex<HashMap<u64, Kept>>,
}

impl KeptStatistics {
    /// Counts a write accepted from a client.
    pub fn note_write(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    /// The write count to give [`KeptStatistics::keep`] for a scan that begins now.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// The statistics kept for `space`, if they still answer for it.
    pub fn kept(&self, space: &ServedSpace) -> Option<SpaceStatistics> {
        let spaces = self.spaces.lock().expect("statistics lock poisoned");
        let kept = spaces.get(&space.config().id)?;
        still_answers(kept, space, self.writes()).then(|| kept.statistics.clone())
    }

    /// Keeps `statistics` of `space`, scanned from when the write count was `writes_then`,
    /// and forgets the spaces `alive` does not name.
    pub fn keep(
        &self,
        space: &ServedSpace,
        statistics: SpaceStatistics,
        writes_then: u64,
        alive: impl Fn(u64) -> bool,
    ) {
        let mut spaces = self.spaces.lock().expect("statistics lock poisoned");
        spaces.retain(|id, _| alive(*id));
        let kept = Kept {
            statistics,
            writes_then,
        };
        spaces.insert(space.config().id, kept);
    }
}

/// Whether statistics kept answer for `space` now that the write count is `writes`.
fn still_answers(kept: &Kept, space: &ServedSpace, writes: u64) -> bool {
    let s = &kept.statistics;
    let led: Vec<u32> = space.led_key_regions().iter().map(|r| r.0).collect();
    let paths = space.config().schema.overlay_paths();
    let paths = paths.iter().take(PATH_STATISTICS_MAX);
    let counted = s.attributes.first().map_or(0, |key| key.count());
    s.regions == led
        && s.paths.iter().map(|(p, _)| p.as_str()).eq(paths.copied())
        && few_writes(writes.saturating_sub(kept.writes_then), counted)
}

/// Whether `writes` since a scan that counted `counted` objects leave its statistics good:
/// none, or at most a tenth of them.
fn few_writes(writes: u64, counted: u64) -> bool {
    writes == 0 || writes <= counted / 10
}

#[cfg(test)]
mod tests {
    use super::few_writes;

    #[test]
    fn a_tenth_of_the_objects_written_calls_for_a_new_scan() {
        assert!(few_writes(0, 0));
        assert!(!few_writes(1, 0));
        assert!(!few_writes(1, 9));
        assert!(few_writes(1, 10));
        assert!(few_writes(100, 1000));
        assert!(!few_writes(101, 1000));
        assert!(!few_writes(u64::MAX, u64::MAX));
    }
}
