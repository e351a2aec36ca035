//! Small durable files: a checksum, then the body; replaced atomically (write a temporary file,
//! fsync it, rename it over the old one, fsync the directory).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;

use xxhash_rust::xxh3::xxh3_64;

/// Writes `body` to `dir/name` atomically. With `durable`, the new content is on disk when this
/// returns (file and directory fsynced); without, a crash may leave the old content.
pub(crate) fn write_atomic(dir: &Path, name: &str, body: &[u8], durable: bool) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(&xxh3_64(body).to_le_bytes())?;
        f.write_all(body)?;
        if durable {
            f.sync_all()?;
        }
    }
    fs::rename(&tmp, dir.join(name))?;
    if durable {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Reads a file written by [`write_atomic`]: `Ok(None)` when it does not exist, an
/// `InvalidData` error when its checksum does not match.
pub(crate) fn read_checked(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    if bytes.len() < 8 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: truncated", path.display()),
        ));
    }
    let (sum, body) = bytes.split_at(8);
    let sum = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
    if sum != xxh3_64(body) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: checksum mismatch", path.display()),
        ));
    }
    Ok(Some(body.to_vec()))
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

pub(crate) fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Runs blocking file I/O off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)?
}
