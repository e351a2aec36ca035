//! Each space's statistics as this server last read them (`Request::Statistics`), kept between
//! requests. A read scans every object of the key regions the server leads, so it is read again
//! only once that would change the answer much: when the writes this server accepted since (to
//! any space: one counter, no lock on the write path) pass a tenth of the objects the space's
//! statistics counted, or the key regions it leads, or the document paths its overlays name,
//! are no longer those it counted. So statistics lag the data by at most a tenth of it (plus the
//! writes other servers accepted for keys this server leads, which they forward in a chain).
//! Memory: one `SpaceStatistics` per space asked about (13 KiB per attribute and path at most);
//! spaces removed are forgotten at the next read.
//!
//! One scan at a time: a request that comes while one runs waits for it and takes its result.
//! A scan of a big space outlasts a client's deadline (20 s and more for millions of objects
//! beside a load), and the re-cut driver asks again every period: scans started anew each time
//! piled up, each holding a snapshot of the store and a core.

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
    /// Held while a scan runs.
    scanning: Mutex<()>,
}

impl KeptStatistics {
    /// Counts a write accepted from a client.
    pub fn note_write(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }

    /// The write count to give [`KeptStatistics::keep`] for a scan that begins now.
    fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// The statistics kept for `space` if they still answer for it, or else those `scan` reads
    /// (then kept, forgetting the spaces `alive` does not name, asked after the scan), once any
    /// scan under way has ended.
    pub fn get_or_scan<E>(
        &self,
        space: &ServedSpace,
        scan: impl FnOnce() -> Result<SpaceStatistics, E>,
        alive: impl Fn(u64) -> bool,
    ) -> Result<SpaceStatistics, E> {
        if let Some(kept) = self.kept(space) {
            return Ok(kept);
        }
        let _scanning = self.scanning.lock().expect("statistics scan lock poisoned");
        if let Some(kept) = self.kept(space) {
            return Ok(kept); // read by the scan this request waited for
        }
        let writes = self.writes();
        let scanned = scan()?;
        self.keep(space, scanned.clone(), writes, alive);
        Ok(scanned)
    }

    /// The statistics kept for `space`, if they still answer for it.
    fn kept(&self, space: &ServedSpace) -> Option<SpaceStatistics> {
        let spaces = self.spaces.lock().expect("statistics lock poisoned");
        let kept = spaces.get(&space.config().id)?;
        still_answers(kept, space, self.writes()).then(|| kept.statistics.clone())
    }

    /// Keeps `statistics` of `space`, scanned from when the write count was `writes_then`,
    /// and forgets the spaces `alive` does not name.
    fn keep(
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
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use tessera_protocol::SpaceConfig;
    use tessera_types::{parse_space, ServerId};

    #[test]
    fn requests_during_a_scan_wait_for_it_instead_of_scanning_again() {
        let schema = parse_space("space s key k attributes int n").unwrap();
        let me = ServerId(1);
        let space = Arc::new(ServedSpace::new(
            SpaceConfig::owned_by(7, schema, &[me]),
            me,
        ));
        let kept = Arc::new(KeptStatistics::default());
        let scans = Arc::new(AtomicUsize::new(0));
        let (started, start) = std::sync::mpsc::channel();
        let (finish, finished) = std::sync::mpsc::channel::<()>();
        let first = {
            let (kept, space, scans) = (kept.clone(), space.clone(), scans.clone());
            std::thread::spawn(move || {
                let scan = || {
                    scans.fetch_add(1, Ordering::SeqCst);
                    started.send(()).unwrap();
                    finished.recv().unwrap(); // the test says when the scan ends
                    let mut s = SpaceStatistics::empty(2);
                    s.regions = space.led_key_regions().iter().map(|r| r.0).collect();
                    Ok::<_, ()>(s)
                };
                kept.get_or_scan(&space, scan, |_| true)
            })
        };
        start.recv().unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let (kept, space, scans) = (kept.clone(), space.clone(), scans.clone());
                std::thread::spawn(move || {
                    let scan = || {
                        scans.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ()>(SpaceStatistics::empty(2))
                    };
                    kept.get_or_scan(&space, scan, |_| true)
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(50)); // let them queue on the scan
        finish.send(()).unwrap();
        let answer = first.join().unwrap().unwrap();
        for w in waiters {
            assert_eq!(w.join().unwrap().unwrap(), answer);
        }
        assert_eq!(
            scans.load(Ordering::SeqCst),
            1,
            "one scan answered all four"
        );
    }

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
