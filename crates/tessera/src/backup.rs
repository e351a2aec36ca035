//! `tessera backup SPACE DIR` and `tessera restore DIR [--as NAME]`: a space's description and
//! objects copied out, while traffic goes on, and loaded back.
//!
//! A backup directory holds three files:
//! - `description.txt`: the space's description, as `list-spaces --describe` prints it;
//! - `objects.jsonl`: one object a line, key included, as `get` and `search` print them;
//! - `manifest.json`: the format, the space, the object count, when it began and ended.
//!
//! The objects are read by one search over the whole space: each object is read whole, at one
//! version (a write's attributes are never split across two lines), but different objects are
//! read at different moments — a write that lands during the backup may or may not be in it.
//! The files are written under temporary names and renamed once complete, manifest last, so a
//! directory with a manifest holds a whole backup.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use tessera_types::parse_space;

use crate::failure::Failure;
use crate::json;
use crate::target::{connect, Target};

// `tessera backup` (its help: `Command::Backup`).
#[derive(clap::Args)]
pub struct BackupArgs {
    /// The space to copy.
    space: String,
    /// A new (or empty) directory for the backup.
    dir: PathBuf,
}

// `tessera restore` (its help: `Command::Restore`).
#[derive(clap::Args)]
pub struct RestoreArgs {
    /// The backup's directory.
    dir: PathBuf,
    /// Create the space under this name instead of the one backed up.
    #[arg(long = "as", value_name = "NAME")]
    name: Option<String>,
}

const FORMAT: u64 = 1;
const DESCRIPTION: &str = "description.txt";
const OBJECTS: &str = "objects.jsonl";
const MANIFEST: &str = "manifest.json";
/// Objects a restore sends at once (each batch pipelined, `MULTI_PUT_IN_FLIGHT` in flight).
const RESTORE_BATCH: usize = 1000;

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> Failure + '_ {
    move |e| Failure::Error(format!("{}: {e}", path.display()))
}

fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Writes `text` to `dir/name` by way of a temporary file.
fn write_file(dir: &Path, name: &str, text: &str) -> Result<(), Failure> {
    let temporary = dir.join(format!(".{name}.partial"));
    std::fs::write(&temporary, text).map_err(io_error(&temporary))?;
    let path = dir.join(name);
    std::fs::rename(&temporary, &path).map_err(io_error(&path))
}

/// `tessera backup SPACE DIR`.
pub async fn backup(args: BackupArgs, target: &Target) -> Result<(), Failure> {
    let client = &connect(target).await?;
    let (space, dir) = (args.space.as_str(), args.dir.as_path());
    if dir.join(MANIFEST).exists() {
        return Err(Failure::Error(format!(
            "{} holds a backup already: give a new directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let schema = client.describe_space(space).await?;
    let began = now_s();
    let temporary = dir.join(format!(".{OBJECTS}.partial"));
    let file = std::fs::File::create(&temporary).map_err(io_error(&temporary))?;
    let mut out = BufWriter::new(file);
    let mut stream = client.search_stream(space, vec![]).await?;
    let mut objects = 0u64;
    while let Some(record) = stream.next().await? {
        let line = json::object_to_json(&schema, &record.key, &record.attributes);
        writeln!(out, "{line}").map_err(io_error(&temporary))?;
        objects += 1;
    }
    let file = out
        .into_inner()
        .map_err(|e| Failure::Error(format!("{}: {}", temporary.display(), e.error())))?;
    file.sync_all().map_err(io_error(&temporary))?;
    let path = dir.join(OBJECTS);
    std::fs::rename(&temporary, &path).map_err(io_error(&path))?;
    write_file(dir, DESCRIPTION, &format!("{schema}\n"))?;
    let manifest = serde_json::json!({
        "format": FORMAT,
        "space": space,
        "objects": objects,
        "began_unix_s": began,
        "ended_unix_s": now_s(),
    });
    write_file(dir, MANIFEST, &format!("{manifest:#}\n"))?;
    eprintln!(
        "backed up {objects} objects of {space:?} to {}",
        dir.display()
    );
    Ok(())
}

/// `tessera restore DIR [--as NAME]`.
pub async fn restore(args: RestoreArgs, target: &Target) -> Result<(), Failure> {
    let client = &connect(target).await?;
    let (dir, rename) = (args.dir.as_path(), args.name.as_deref());
    let manifest_path = dir.join(MANIFEST);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).map_err(|e| {
            Failure::Error(format!(
                "{}: {e} (not a finished backup: `tessera backup` writes its manifest last)",
                manifest_path.display()
            ))
        })?)
        .map_err(|e| Failure::Error(format!("{}: {e}", manifest_path.display())))?;
    if manifest["format"] != FORMAT {
        return Err(Failure::Error(format!(
            "{}: format {} is not one this tessera reads ({FORMAT})",
            manifest_path.display(),
            manifest["format"]
        )));
    }
    let description_path = dir.join(DESCRIPTION);
    let text = std::fs::read_to_string(&description_path).map_err(io_error(&description_path))?;
    let mut schema = parse_space(&text)
        .map_err(|e| Failure::Error(format!("{}: {e}", description_path.display())))?;
    if let Some(name) = rename {
        schema.name = name.to_owned();
    }
    let space = schema.name.clone();
    client.add_space(&schema.to_string()).await?;
    // The space as the daemon made it (the same description, whatever the defaults there).
    let schema = client.describe_space(&space).await?;
    let objects_path = dir.join(OBJECTS);
    let file = std::fs::File::open(&objects_path).map_err(io_error(&objects_path))?;
    let (mut restored, mut failed) = (0u64, Vec::new());
    let mut batch = Vec::with_capacity(RESTORE_BATCH);
    let mut lines = std::io::BufReader::new(file).lines().enumerate().peekable();
    while lines.peek().is_some() {
        batch.clear();
        let mut keys = Vec::new();
        for (n, line) in lines.by_ref() {
            let line = line.map_err(io_error(&objects_path))?;
            let (key_json, key, funcalls) = json::put_from_json_line(&schema, &line, None)
                .map_err(|e| {
                    Failure::Error(format!("{} line {}: {e}", objects_path.display(), n + 1))
                })?;
            keys.push(key_json);
            batch.push((key, funcalls));
            if batch.len() == RESTORE_BATCH {
                break;
            }
        }
        let outcomes = client.multi_put(&space, std::mem::take(&mut batch)).await;
        for (key, outcome) in keys.into_iter().zip(outcomes) {
            match outcome {
                Ok(()) => restored += 1,
                Err(e) => failed.push(format!("{key}: {e}")),
            }
        }
    }
    if !failed.is_empty() {
        return Err(Failure::Error(format!(
            "restored {restored} objects into {space:?}; {} failed, the first: {}",
            failed.len(),
            failed[0]
        )));
    }
    if manifest["objects"].as_u64() != Some(restored) {
        return Err(Failure::Error(format!(
            "restored {restored} objects into {space:?}, but the manifest counts {}: {} is damaged",
            manifest["objects"],
            objects_path.display()
        )));
    }
    eprintln!("restored {restored} objects into {space:?}");
    Ok(())
}
