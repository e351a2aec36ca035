//! A chunk of a state transfer written into a region that may hold stale data
//! ([`ObjectWrite::ReplaceRange`](crate::ObjectWrite::ReplaceRange)): within the chunk's range of
//! storage keys the region is made to hold the chunk's entries, and only the entries that differ
//! are written. A server that comes back from a short stop still holds most of its regions:
//! catching up writes what it missed, not the regions again.
//!
//! Why an entry may stay when its `(key, version)` is kept: versions name one write of a key.
//! A point leader gives a key versions above every version it has seen of it and above its own
//! clock, and a key changes leader only with the epoch, whose number the new leader's versions
//! start at (`Version::first_in`): so a key deleted and created again gets a greater version,
//! never a smaller or repeated one, while a key takes fewer than 2^32 writes within one epoch
//! (`first_in`'s own bound). An entry of the chunk is compared byte for byte, so it does not
//! even rest on that; a kept entry does (the chain wrote that version here, so an entry of it
//! is that write's object).

use std::collections::{BTreeMap, HashSet};
use std::ops::{Bound, RangeBounds};

use fjall::Slice;
use tessera_geometry::{RegionIndex, Tessellation};
use tessera_types::{StoredObject, SubspaceId, Value, Version};

use crate::codec;
use crate::error::StorageError;
use crate::{check_write, key_offset, Pending, Space};

/// What [`replace_range`] writes: the fields of `ObjectWrite::ReplaceRange`.
pub(crate) struct Chunk<'w> {
    pub(crate) subspace: SubspaceId,
    pub(crate) region: RegionIndex,
    pub(crate) after: Option<&'w [u8]>,
    pub(crate) through: Option<&'w [u8]>,
    pub(crate) entries: &'w [StoredObject],
    pub(crate) keep: &'w [(Value, Version)],
}

type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A storage key and what it is to hold (`None`: nothing).
type Change = (Vec<u8>, Option<Slice>);

/// Adds to `pending` the writes that make `chunk`'s range of its region hold exactly its
/// entries (and the kept entries): the region as storage holds it, overlaid by the writes
/// earlier in the batch, is compared with the chunk, and an entry is removed or written only
/// where they differ. Nothing is added unless the whole chunk is valid.
pub(crate) fn replace_range<'a>(
    pending: &mut Pending<'a>,
    name: &'a str,
    space: &'a Space,
    chunk: &Chunk<'_>,
) -> Result<(), StorageError> {
    let (keyspace, tessellation) = space.region(chunk.subspace, chunk.region)?;
    let range = key_range(chunk)?;
    let mut wanted = wanted(space, chunk.subspace, tessellation, &range, chunk.entries)?;
    let kept = kept(space, chunk.keep)?;
    let key_at = key_offset(chunk.subspace, tessellation);
    let n = chunk.subspace.get();
    // Entries the batch wrote or removed already: they stand for what storage holds there.
    let earlier: BTreeMap<Vec<u8>, Option<Slice>> = pending
        .index
        .iter()
        .filter(|((s, sub, key), _)| *s == name && *sub == n && range.contains(key))
        .map(|((_, _, key), &i)| (key.clone(), pending.entries[i].2.clone()))
        .collect();
    let mut changes = Vec::new();
    for guard in keyspace.range(range.clone()) {
        let (key, value) = guard.into_inner()?;
        if !earlier.contains_key(&*key) {
            let key = key.to_vec();
            changes.extend(change(&mut wanted, &kept, key_at, key, Some(&value))?);
        }
    }
    for (key, value) in earlier {
        changes.extend(change(&mut wanted, &kept, key_at, key, value.as_deref())?);
    }
    changes.extend(wanted.into_iter().map(|(key, value)| (key, Some(value))));
    for (key, value) in changes {
        pending.set(name, n, keyspace, key, value);
    }
    Ok(())
}

/// Whether `chunk` fits `space` as [`replace_range`] would write it: its range within its
/// region and in order, every entry fitting the schema and within the range (the kept
/// entries aside). What a server checks of a transfer chunk a peer sends, before acting on it.
pub(crate) fn check(space: &Space, chunk: &Chunk<'_>) -> Result<(), StorageError> {
    let (_, tessellation) = space.region(chunk.subspace, chunk.region)?;
    let range = key_range(chunk)?;
    for entry in chunk.entries {
        place(space, chunk.subspace, tessellation, &range, entry)?;
    }
    Ok(())
}

/// The range of storage keys (`after`, `through`] of the chunk's region: `after` `None` from
/// its first key, `through` `None` to its last. A bound outside the region, or a range that
/// runs backwards, is refused.
fn key_range(chunk: &Chunk<'_>) -> Result<KeyRange, StorageError> {
    let prefix = codec::region_prefix(chunk.region);
    let outside = |bound: &[u8]| !bound.starts_with(&prefix);
    if chunk.after.is_some_and(outside) || chunk.through.is_some_and(outside) {
        return Err(StorageError::Invalid(format!(
            "a transfer chunk's range is not within region {} of subspace {}",
            chunk.region.0,
            chunk.subspace.get()
        )));
    }
    if let (Some(after), Some(through)) = (chunk.after, chunk.through) {
        if after >= through {
            return Err(StorageError::Invalid(
                "a transfer chunk's range runs backwards".to_owned(),
            ));
        }
    }
    let lower = match chunk.after {
        Some(after) => Bound::Excluded(after.to_vec()),
        None => Bound::Included(prefix.to_vec()),
    };
    let upper = match (chunk.through, crate::search::successor(prefix.to_vec())) {
        (Some(through), _) => Bound::Included(through.to_vec()),
        (None, Some(end)) => Bound::Excluded(end),
        (None, None) => Bound::Unbounded,
    };
    Ok((lower, upper))
}

/// The chunk's entries by storage key, each with the value storage keeps for it (a pointer
/// overlay's stub, or the whole object). Each must fit the schema and lie in the range.
fn wanted(
    space: &Space,
    subspace: SubspaceId,
    tessellation: &Tessellation,
    range: &KeyRange,
    entries: &[StoredObject],
) -> Result<BTreeMap<Vec<u8>, Slice>, StorageError> {
    let mut wanted = BTreeMap::new();
    for entry in entries {
        let key = place(space, subspace, tessellation, range, entry)?;
        let value = match entry.object.stub_in(&space.schema, subspace) {
            Some(stub) => codec::encode_value(&StoredObject {
                version: entry.version,
                object: stub,
            }),
            None => codec::encode_value(entry),
        };
        if wanted.insert(key, Slice::from(value)).is_some() {
            return Err(StorageError::Invalid(format!(
                "two transfer entries of key {} at one place",
                entry.object.key()
            )));
        }
    }
    Ok(wanted)
}

/// The storage key of a chunk's `entry`, which must fit the schema and lie in `range`.
fn place(
    space: &Space,
    subspace: SubspaceId,
    tessellation: &Tessellation,
    range: &KeyRange,
    entry: &StoredObject,
) -> Result<Vec<u8>, StorageError> {
    check_write(&space.schema, None, Some(entry))?;
    codec::entry_key(&space.schema, subspace, tessellation, &entry.object)
        .filter(|key| range.contains(key))
        .ok_or_else(|| {
            StorageError::Invalid(format!(
                "transfer entry of key {} outside its chunk's range",
                entry.object.key()
            ))
        })
}

/// The kept entries as (canonical key bytes, version); each key must have the space's key type.
fn kept(
    space: &Space,
    keep: &[(Value, Version)],
) -> Result<HashSet<(Vec<u8>, Version)>, StorageError> {
    let key_type = space.schema.key_type();
    keep.iter()
        .map(|(key, version)| match key.primitive_type() {
            Some(t) if t == key_type => Ok((codec::key_bytes(key), *version)),
            _ => Err(StorageError::Invalid(format!(
                "kept key {key} is not a key of {:?}",
                space.schema.name
            ))),
        })
        .collect()
}

/// The write, if any, that makes storage key `key`, holding `stored` (`None`: nothing), hold
/// what the chunk says: the chunk's entry there unless it is there already; else nothing,
/// unless what is there is a kept entry.
fn change(
    wanted: &mut BTreeMap<Vec<u8>, Slice>,
    kept: &HashSet<(Vec<u8>, Version)>,
    key_at: usize,
    key: Vec<u8>,
    stored: Option<&[u8]>,
) -> Result<Option<Change>, StorageError> {
    match (wanted.remove(&key), stored) {
        (Some(value), Some(stored)) if *value == *stored => Ok(None),
        (Some(value), _) => Ok(Some((key, Some(value)))),
        (None, None) => Ok(None),
        (None, Some(stored)) => {
            let version = codec::value_version(stored)?;
            let key_bytes = key.get(key_at..).unwrap_or_default().to_vec();
            if kept.contains(&(key_bytes, version)) {
                Ok(None)
            } else {
                Ok(Some((key, None)))
            }
        }
    }
}
