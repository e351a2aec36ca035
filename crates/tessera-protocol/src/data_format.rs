//! Which version of its on-disk formats a data directory holds, so that a release opens the
//! directories of the formats before its own (migrating them in place) and refuses newer ones
//! with a clear error instead of misreading them.
//!
//! Every data directory — a server's, a coordinator's — holds a file `FORMAT` of one line,
//! `tessera <kind> data format <n>`. What each number means is listed on [`SERVER_FORMATS`]
//! and [`COORDINATOR_FORMATS`]: every structure the daemon keeps (a server's store, its
//! configuration file and token; a coordinator's Raft log, vote and snapshot) is decoded by the
//! format of its directory. A directory holding data and no `FORMAT` was written before the
//! file existed: it is at format 1.
//!
//! A new directory gets its `FORMAT` before anything else is written in it, so that no
//! directory of a newer format is ever taken for one from before the file. A directory of an
//! older format is migrated step by step, each step rewriting what changed and then `FORMAT`
//! (atomically: a temporary file, fsynced, renamed, the directory fsynced), so a crash during a
//! step leaves the directory at the step's old format, to be migrated again.

use std::io::Write;
use std::path::Path;

/// The file, in every data directory.
pub const FORMAT_FILE: &str = "FORMAT";

/// One format of a kind of data directory: its number and what changed in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataFormat {
    pub number: u32,
    pub what: &'static str,
}

/// A server's data directory (`configuration`, `token`, `store/`), oldest first. The last is
/// the one this build writes; each earlier one is migrated from.
pub const SERVER_FORMATS: &[DataFormat] = &[
    DataFormat {
        number: 1,
        what: "29 November 2026: store catalog format 5, log records format 1, subspace \
               entries `version | postcard(Object)`, the configuration file \
               postcard(Configuration) of protocol 4",
    },
    DataFormat {
        number: 2,
        what: "29 November 2026, protocol 5: the configuration file tagged ([`tag`]) and its \
               spaces with their resting places (`SpaceConfig::resting`); the store as in \
               format 1",
    },
];

/// A coordinator's data directory (`node-id`, `raft/`), oldest first, as [`SERVER_FORMATS`].
pub const COORDINATOR_FORMATS: &[DataFormat] = &[
    DataFormat {
        number: 1,
        what: "29 November 2026: Raft log entries, vote and snapshot in postcard, commands and \
               cluster state of protocol 4",
    },
    DataFormat {
        number: 2,
        what: "29 November 2026, protocol 5: the snapshot's cluster state tagged ([`tag`]) and \
               its spaces with their resting places (`SpaceConfig::resting`); log entries and \
               vote as in format 1 (commands only gained variants, declared last)",
    },
];

/// What kind of daemon a data directory belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKind {
    Server,
    Coordinator,
}

impl DataKind {
    pub fn name(self) -> &'static str {
        match self {
            DataKind::Server => "server",
            DataKind::Coordinator => "coordinator",
        }
    }

    /// The formats this build reads, oldest first; the last is the one it writes.
    pub fn formats(self) -> &'static [DataFormat] {
        match self {
            DataKind::Server => SERVER_FORMATS,
            DataKind::Coordinator => COORDINATOR_FORMATS,
        }
    }

    /// The format this build writes.
    pub fn current(self) -> u32 {
        self.formats().last().expect("at least one format").number
    }

    fn oldest(self) -> u32 {
        self.formats().first().expect("at least one format").number
    }

    /// The line of its `FORMAT` file at format `number`.
    pub fn line(self, number: u32) -> String {
        format!("tessera {} data format {number}", self.name())
    }
}

/// What a data directory holds, by its `FORMAT` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing yet (no directory, or an empty one): it is to be written at the current format.
    Fresh,
    /// Data at this format (1 for data from before the file existed).
    Format(u32),
}

/// What to do with a data directory before opening it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Write `FORMAT` at the current format first, then create the daemon's files.
    Create,
    /// At the current format: open it.
    Open,
    /// Migrate it from this format, step by step, then open it.
    Migrate { from: u32 },
}

/// Why a data directory cannot be opened by this build.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataFormatError {
    #[error(
        "{dir}: written by a newer Tessera ({kind} data format {found}); this build reads \
         formats {oldest} to {current}. Run a release that reads format {found}, or restore \
         a backup into a new directory"
    )]
    Newer {
        dir: String,
        kind: &'static str,
        found: u32,
        oldest: u32,
        current: u32,
    },
    #[error(
        "{dir}: {kind} data format {found} is older than this build reads (formats {oldest} \
         to {current}). Open it first with a release that reads both"
    )]
    TooOld {
        dir: String,
        kind: &'static str,
        found: u32,
        oldest: u32,
        current: u32,
    },
    #[error("{dir}/FORMAT holds {line:?}, not a line `tessera {kind} data format N`")]
    Unreadable {
        dir: String,
        kind: &'static str,
        line: String,
    },
    #[error("{dir} is a {found}'s data directory, not a {kind}'s")]
    WrongKind {
        dir: String,
        kind: &'static str,
        found: String,
    },
    /// A format this build lists as readable but has no migration step from (a bug).
    #[error("{dir}: this build has no migration from {kind} data format {from}")]
    NoMigration {
        dir: String,
        kind: &'static str,
        from: u32,
    },
    #[error("{dir}: {error}")]
    Io { dir: String, error: std::io::Error },
}

impl DataFormatError {
    /// [`DataFormatError::NoMigration`] for `dir`.
    pub fn no_migration(dir: &Path, kind: DataKind, from: u32) -> DataFormatError {
        DataFormatError::NoMigration {
            dir: dir.display().to_string(),
            kind: kind.name(),
            from,
        }
    }
}

/// The kind's name and the format number of a `FORMAT` line, if it is one.
pub fn parse_line(line: &str) -> Option<(&str, u32)> {
    let rest = line.trim().strip_prefix("tessera ")?;
    let (kind, number) = rest.split_once(" data format ")?;
    if kind.is_empty() || kind.contains(char::is_whitespace) {
        return None;
    }
    let number = number.parse().ok().filter(|n| *n > 0)?;
    Some((kind, number))
}

/// What to do with a directory of `kind` where `found` was read.
pub fn verdict(kind: DataKind, found: Found, dir: &Path) -> Result<Verdict, DataFormatError> {
    let (oldest, current) = (kind.oldest(), kind.current());
    let found = match found {
        Found::Fresh => return Ok(Verdict::Create),
        Found::Format(n) => n,
    };
    let dir = dir.display().to_string();
    let kind = kind.name();
    if found > current {
        return Err(DataFormatError::Newer {
            dir,
            kind,
            found,
            oldest,
            current,
        });
    }
    if found < oldest {
        return Err(DataFormatError::TooOld {
            dir,
            kind,
            found,
            oldest,
            current,
        });
    }
    Ok(if found == current {
        Verdict::Open
    } else {
        Verdict::Migrate { from: found }
    })
}

/// Reads the `FORMAT` file of `dir`, a data directory of `kind`.
pub fn read(dir: &Path, kind: DataKind) -> Result<Found, DataFormatError> {
    let io = |error| DataFormatError::Io {
        dir: dir.display().to_string(),
        error,
    };
    match std::fs::read_to_string(dir.join(FORMAT_FILE)) {
        Ok(text) => {
            let line = text.lines().next().unwrap_or("");
            let Some((name, number)) = parse_line(line) else {
                return Err(DataFormatError::Unreadable {
                    dir: dir.display().to_string(),
                    kind: kind.name(),
                    line: line.chars().take(80).collect(),
                });
            };
            if name != kind.name() {
                return Err(DataFormatError::WrongKind {
                    dir: dir.display().to_string(),
                    kind: kind.name(),
                    found: name.to_owned(),
                });
            }
            Ok(Found::Format(number))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A `FORMAT.tmp` alone is a new directory's `FORMAT` cut short by a crash.
            let tmp = std::ffi::OsString::from(format!("{FORMAT_FILE}.tmp"));
            let empty = match std::fs::read_dir(dir) {
                Ok(mut entries) => entries.all(|e| e.is_ok_and(|e| e.file_name() == tmp)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                Err(e) => return Err(io(e)),
            };
            Ok(if empty {
                Found::Fresh
            } else {
                Found::Format(1)
            })
        }
        Err(e) => Err(io(e)),
    }
}

/// Writes `dir`'s `FORMAT` at `number`, atomically and durably (creating `dir` if needed).
pub fn write(dir: &Path, kind: DataKind, number: u32) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{FORMAT_FILE}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        writeln!(f, "{}", kind.line(number))?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(FORMAT_FILE))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Checks `dir` before a daemon of `kind` opens it: gives it a `FORMAT` if it is new (or at
/// the current format from before the file), and says whether it must be migrated first (the
/// daemon then runs its steps and calls [`write`] after each).
pub fn prepare(dir: &Path, kind: DataKind) -> Result<Verdict, DataFormatError> {
    let verdict = verdict(kind, read(dir, kind)?, dir)?;
    let unmarked = !dir.join(FORMAT_FILE).exists();
    if verdict == Verdict::Create || (verdict == Verdict::Open && unmarked) {
        write(dir, kind, kind.current()).map_err(|error| DataFormatError::Io {
            dir: dir.display().to_string(),
            error,
        })?;
    }
    Ok(verdict)
}

/// A step of migration: brings a data directory from format `from` to `from + 1`. It must be
/// safe to run again over a directory it was cut short in (it runs again after a crash).
pub struct Step<'a> {
    pub from: u32,
    pub run: &'a dyn Fn(&Path) -> std::io::Result<()>,
}

/// Readies `dir` for a daemon of `kind` before anything reads it: marks a new directory,
/// refuses a newer one, and brings an older one to the current format by `steps`, writing
/// `FORMAT` after each.
pub fn open(dir: &Path, kind: DataKind, steps: &[Step]) -> Result<(), DataFormatError> {
    match prepare(dir, kind)? {
        Verdict::Create | Verdict::Open => Ok(()),
        Verdict::Migrate { from } => migrate(dir, kind, from, kind.current(), steps),
    }
}

fn migrate(
    dir: &Path,
    kind: DataKind,
    from: u32,
    to: u32,
    steps: &[Step],
) -> Result<(), DataFormatError> {
    let io = |error| DataFormatError::Io {
        dir: dir.display().to_string(),
        error,
    };
    for at in from..to {
        let step = steps
            .iter()
            .find(|s| s.from == at)
            .ok_or_else(|| DataFormatError::no_migration(dir, kind, at))?;
        (step.run)(dir).map_err(io)?;
        write(dir, kind, at + 1).map_err(io)?;
    }
    Ok(())
}

/// The structures a data directory keeps whole in a file of their own (a server's
/// configuration, a coordinator's cluster state), which say their format themselves since
/// format 2: a header of [`TAG_BYTES`], `0x00 'T' <what> <format, 4 bytes big-endian>`, then
/// the postcard body. Untagged bytes are format 1's. The header cannot begin a format-1
/// encoding of either: its first byte would be epoch 0, which is only ever the empty state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tagged {
    /// `tessera_protocol::Configuration`, as a server keeps it.
    Configuration,
    /// A coordinator's whole replicated state (its snapshots).
    ClusterState,
}

impl Tagged {
    fn byte(self) -> u8 {
        match self {
            Tagged::Configuration => b'C',
            Tagged::ClusterState => b'S',
        }
    }
}

/// Bytes of a tag's header.
pub const TAG_BYTES: usize = 7;

/// `body` (postcard of `what` at data format `format`) with its header.
pub fn tag(what: Tagged, format: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(TAG_BYTES + body.len());
    out.extend_from_slice(&[0x00, b'T', what.byte()]);
    out.extend_from_slice(&format.to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The format and body of tagged bytes of `what`; `None` for untagged ones (format 1).
pub fn untag(what: Tagged, bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (header, body) = bytes.split_at_checked(TAG_BYTES)?;
    if header[..3] != [0x00, b'T', what.byte()] {
        return None;
    }
    let format = u32::from_be_bytes(header[3..].try_into().expect("4 bytes"));
    Some((format, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_are_told_apart() {
        for what in [Tagged::Configuration, Tagged::ClusterState] {
            for (format, body) in [
                (2, &b""[..]),
                (7, &b"\x00T"[..]),
                (u32::MAX, &[1u8; 40][..]),
            ] {
                let bytes = tag(what, format, body);
                assert_eq!(untag(what, &bytes), Some((format, body)));
            }
        }
        let state = tag(Tagged::ClusterState, 2, b"x");
        assert_eq!(untag(Tagged::Configuration, &state), None);
        // Format 1's encodings: a state or configuration of epoch 1, and the empty state.
        for untagged in [&[1u8, 0, 0, 1, 0][..], &[0, 0, 0, 1, 0], &[0, b'T'], &[]] {
            assert_eq!(untag(Tagged::ClusterState, untagged), None);
            assert_eq!(untag(Tagged::Configuration, untagged), None);
        }
    }

    #[test]
    fn lines_round_trip_and_nothing_else_parses() {
        for kind in [DataKind::Server, DataKind::Coordinator] {
            for n in [1, 2, 17, u32::MAX] {
                assert_eq!(parse_line(&kind.line(n)), Some((kind.name(), n)));
            }
        }
        for bad in [
            "",
            "tessera server data format",
            "tessera server data format 0",
            "tessera server data format -1",
            "tessera server data format 1x",
            "tessera  data format 1",
            "tessera two words data format 1",
            "tesera server data format 1",
            "tessera server data format 99999999999",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn verdicts_by_format() {
        let dir = Path::new("/d");
        let kind = DataKind::Server;
        let current = kind.current();
        assert_eq!(verdict(kind, Found::Fresh, dir).unwrap(), Verdict::Create);
        assert_eq!(
            verdict(kind, Found::Format(current), dir).unwrap(),
            Verdict::Open
        );
        let newer = verdict(kind, Found::Format(current + 1), dir).unwrap_err();
        let text = newer.to_string();
        assert!(
            text.contains(&format!("format {}", current + 1)) && text.contains("newer"),
            "{text}"
        );
        assert!(matches!(
            verdict(kind, Found::Format(0), dir),
            Err(DataFormatError::TooOld { .. })
        ));
        // Every format listed, oldest first, in steps of one; all but the last migrate.
        for kind in [DataKind::Server, DataKind::Coordinator] {
            let numbers: Vec<u32> = kind.formats().iter().map(|f| f.number).collect();
            assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
            for &n in &numbers[..numbers.len() - 1] {
                assert_eq!(
                    verdict(kind, Found::Format(n), dir).unwrap(),
                    Verdict::Migrate { from: n }
                );
            }
        }
    }

    #[test]
    fn a_directory_says_what_it_holds() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("d");
        let kind = DataKind::Coordinator;
        // Missing, then empty: fresh.
        assert_eq!(read(&dir, kind).unwrap(), Found::Fresh);
        std::fs::create_dir(&dir).unwrap();
        assert_eq!(read(&dir, kind).unwrap(), Found::Fresh);
        // Data from before the file: format 1.
        std::fs::write(dir.join("node-id"), b"x").unwrap();
        assert_eq!(read(&dir, kind).unwrap(), Found::Format(1));
        // Written, read back; no temporary file left.
        write(&dir, kind, 7).unwrap();
        assert_eq!(read(&dir, kind).unwrap(), Found::Format(7));
        assert!(!dir.join("FORMAT.tmp").exists());
        // Another kind's directory, and a file that is not a format line.
        assert!(matches!(
            read(&dir, DataKind::Server),
            Err(DataFormatError::WrongKind { .. })
        ));
        std::fs::write(dir.join(FORMAT_FILE), "hello\n").unwrap();
        assert!(matches!(
            read(&dir, kind),
            Err(DataFormatError::Unreadable { .. })
        ));
    }

    #[test]
    fn prepare_writes_the_format_of_a_new_directory_first() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("new");
        let kind = DataKind::Server;
        assert_eq!(prepare(&dir, kind).unwrap(), Verdict::Create);
        assert_eq!(read(&dir, kind).unwrap(), Found::Format(kind.current()));
        assert_eq!(prepare(&dir, kind).unwrap(), Verdict::Open);
        // A directory of data from before the file, at the current format, gets one.
        let old = root.path().join("old");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join("configuration"), b"x").unwrap();
        if kind.current() == 1 {
            assert_eq!(prepare(&old, kind).unwrap(), Verdict::Open);
            assert_eq!(read(&old, kind).unwrap(), Found::Format(1));
            assert!(old.join(FORMAT_FILE).exists());
        }
        // A new directory's FORMAT cut short by a crash: still new.
        let cut = root.path().join("cut");
        std::fs::create_dir(&cut).unwrap();
        std::fs::write(cut.join("FORMAT.tmp"), b"tess").unwrap();
        assert_eq!(read(&cut, kind).unwrap(), Found::Fresh);
        // A newer directory is refused and left as it is.
        write(&dir, kind, kind.current() + 1).unwrap();
        assert!(matches!(
            prepare(&dir, kind),
            Err(DataFormatError::Newer { .. })
        ));
        assert_eq!(read(&dir, kind).unwrap(), Found::Format(kind.current() + 1));
    }

    #[test]
    fn migration_runs_each_step_in_order_and_marks_each() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path();
        let kind = DataKind::Server;
        write(dir, kind, 1).unwrap();
        let ran = std::sync::Mutex::new(Vec::new());
        let step = |n: u32| {
            let ran = &ran;
            move |d: &Path| {
                // Each step sees the directory at its own format.
                assert_eq!(read(d, kind).unwrap(), Found::Format(n));
                ran.lock().unwrap().push(n);
                Ok(())
            }
        };
        let (one, two) = (step(1), step(2));
        let steps = [Step { from: 2, run: &two }, Step { from: 1, run: &one }];
        migrate(dir, kind, 1, 3, &steps).unwrap();
        assert_eq!(*ran.lock().unwrap(), [1, 2]);
        assert_eq!(read(dir, kind).unwrap(), Found::Format(3));
        // A step that fails leaves the directory at the format before it, to run again.
        let fails = |_: &Path| Err(std::io::Error::other("disk full"));
        let steps = [Step {
            from: 3,
            run: &fails,
        }];
        assert!(migrate(dir, kind, 3, 4, &steps).is_err());
        assert_eq!(read(dir, kind).unwrap(), Found::Format(3));
        // No step from a format: refused, unchanged.
        assert!(matches!(
            migrate(dir, kind, 3, 4, &[]),
            Err(DataFormatError::NoMigration { from: 3, .. })
        ));
        assert_eq!(read(dir, kind).unwrap(), Found::Format(3));
    }
}
