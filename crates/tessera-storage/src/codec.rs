//! Byte layouts of storage keys and values. These are on-disk formats: change them only with a
//! format version bump.
//!
//! * canonical key bytes: a `string` key is its UTF-8 bytes; an `int` or `float` key is its
//!   order-preserving axis coordinate (`tessera_geometry::coordinate`: sign bit flipped, floats
//!   by the IEEE-754 total-order trick) as 8 big-endian bytes. A space's keys all have one type,
//!   so the encoding is injective within a space.
//! * key subspace entry: `region (u32 BE) | canonical key bytes`.
//! * other subspace entry: `region (u32 BE) | zorder::interleave(point) (8·d bytes) | canonical
//!   key bytes`. The Z part has a fixed width, so it is read back without a separator.
//! * value: `version (u64 BE) | postcard(Object)`; the full object in every subspace.

use tessera_geometry::{coordinate, point, region_of_point, zorder, RegionIndex, Tessellation};
use tessera_types::{Object, SpaceSchema, SubspaceId, Value, Version};

use crate::error::StorageError;
use tessera_types::StoredObject;

pub(crate) const REGION_BYTES: usize = 4;
const VERSION_BYTES: usize = 8;

/// The canonical bytes of a key (see the module doc).
pub fn key_bytes(key: &Value) -> Vec<u8> {
    match key {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Int(_) | Value::Float(_) => coordinate(key).to_be_bytes().to_vec(),
        other => panic!("a {} cannot be a key", other.kind_name()),
    }
}

/// The storage key of `object` in `subspace`, whose tessellation is `tessellation`; `None`
/// when the object is not placed there (a dynamic space's document outside its formula).
pub(crate) fn entry_key(
    schema: &SpaceSchema,
    subspace: SubspaceId,
    tessellation: &Tessellation,
    object: &Object,
) -> Option<Vec<u8>> {
    let p = point(schema, subspace, object)?;
    let region = region_of_point(subspace, tessellation, object.key(), &p);
    let key = key_bytes(object.key());
    let mut out = Vec::with_capacity(REGION_BYTES + 8 * p.len() + key.len());
    out.extend_from_slice(&region.0.to_be_bytes());
    if subspace != SubspaceId::KEY {
        out.extend_from_slice(&zorder::interleave(&p));
    }
    out.extend_from_slice(&key);
    Some(out)
}

pub(crate) fn region_prefix(region: RegionIndex) -> [u8; REGION_BYTES] {
    region.0.to_be_bytes()
}

pub(crate) fn encode_value(stored: &StoredObject) -> Vec<u8> {
    let mut out = stored.version.0.to_be_bytes().to_vec();
    postcard::to_io(&stored.object, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// The version of a stored value, read without decoding its object.
pub(crate) fn value_version(bytes: &[u8]) -> Result<Version, StorageError> {
    match bytes.first_chunk::<VERSION_BYTES>() {
        Some(version) => Ok(Version(u64::from_be_bytes(*version))),
        None => Err(StorageError::Corrupt(format!(
            "value of {} bytes has no version",
            bytes.len()
        ))),
    }
}

/// The `postcard(Object)` part of a stored value whose version [`value_version`] read.
pub(crate) fn object_bytes(bytes: &[u8]) -> &[u8] {
    &bytes[VERSION_BYTES..]
}

pub(crate) fn decode_value(bytes: &[u8]) -> Result<StoredObject, StorageError> {
    let version = value_version(bytes)?;
    let object = postcard::from_bytes(object_bytes(bytes))
        .map_err(|e| StorageError::Corrupt(format!("undecodable object: {e}")))?;
    Ok(StoredObject { version, object })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_bytes_are_stable() {
        assert_eq!(key_bytes(&Value::from("ab")), b"ab");
        assert_eq!(key_bytes(&Value::Int(0)), [0x80, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            key_bytes(&Value::Int(-1)),
            [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(
            key_bytes(&Value::Float(1.0)),
            (1.0f64.to_bits() | 1 << 63).to_be_bytes()
        );
    }

    #[test]
    fn values_round_trip() {
        let stored = StoredObject {
            version: Version(7),
            object: Object {
                values: vec![Value::from("k"), Value::Int(-3), Value::Float(2.5)],
            },
        };
        assert_eq!(decode_value(&encode_value(&stored)).unwrap(), stored);
        assert!(matches!(
            decode_value(&[1, 2]),
            Err(StorageError::Corrupt(_))
        ));
    }
}
