//! Values onto axes.
//!
//! Strings hash uniformly (xxh3, stable across versions, platforms and languages), so only
//! equality on a string narrows a search. Ints and floats map order-preservingly, so a range
//! of values is one interval of the axis. The key axis is always hashed, whatever its type,
//! so that keys spread evenly over the key subspace's regions.

use serde::{Deserialize, Serialize};
use tessera_types::{
    AttrIndex, DocValue, Document, Object, Overlay, SpaceKind, SpaceSchema, SubspaceId, Value,
    DOCUMENT_INDEX, FORMULA_INDEX, UNISPACE,
};
use xxhash_rust::xxh3::xxh3_64;

const SIGN: u64 = 1 << 63;

/// Where a key lies on an ordered key axis, exactly: its coordinate, then — for a string of
/// more than 8 bytes — the bytes after the first 8. Keys in order have positions in order
/// (`a < b` gives `p(a) <= p(b)`; only strings differing by trailing NUL bytes within their
/// first 8 share one), so a key axis split at positions separates `tweet:00000123` from
/// `tweet:00000124`, which share a coordinate.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KeyPosition {
    pub coordinate: u64,
    /// A string key's bytes after its first 8; empty for every other key.
    pub rest: Box<[u8]>,
}

impl KeyPosition {
    /// The first position at `coordinate`: where a range of that coordinate's keys starts.
    pub fn at(coordinate: u64) -> KeyPosition {
        KeyPosition {
            coordinate,
            rest: Box::default(),
        }
    }
}

/// The [`KeyPosition`] of a key on an ordered key axis.
pub fn ordered_key_position(key: &Value) -> KeyPosition {
    let rest = match key {
        Value::String(s) => s.as_bytes().get(8..).unwrap_or_default().into(),
        _ => Box::default(),
    };
    KeyPosition {
        coordinate: ordered_key_coordinate(key),
        rest,
    }
}

/// The coordinate of a primitive value on a non-key dimension.
///
/// # Panics
/// On a container or a NaN: schemas only admit primitives as dimensions, and NaN is refused
/// at the edge.
pub fn coordinate(value: &Value) -> u64 {
    match value {
        Value::String(s) => xxh3_64(s.as_bytes()),
        Value::Int(i) => (*i as u64) ^ SIGN,
        Value::Float(f) => {
            assert!(!f.is_nan(), "NaN has no coordinate");
            let bits = f.to_bits();
            if bits & SIGN != 0 {
                !bits
            } else {
                bits | SIGN
            }
        }
        other => panic!("a {} has no coordinate", other.kind_name()),
    }
}

/// The coordinate of a key on the key axis: a uniform hash for every key type.
pub fn key_coordinate(key: &Value) -> u64 {
    match key {
        Value::String(s) => xxh3_64(s.as_bytes()),
        Value::Int(i) => xxh3_64(&i.to_be_bytes()),
        Value::Float(f) => xxh3_64(&f.to_bits().to_be_bytes()),
        other => panic!("a {} cannot be a key", other.kind_name()),
    }
}

/// The coordinate of a key on an *ordered* key axis (seed 003 §2.1.2): `a < b` gives
/// `c(a) <= c(b)`. Ints and floats as on any axis; strings by their first 8 bytes, big-endian
/// and zero-padded (so keys sharing 8 leading bytes share a coordinate; their
/// [`KeyPosition`]s tell them apart).
pub fn ordered_key_coordinate(key: &Value) -> u64 {
    match key {
        Value::String(s) => {
            let mut prefix = [0u8; 8];
            let n = s.len().min(8);
            prefix[..n].copy_from_slice(&s.as_bytes()[..n]);
            u64::from_be_bytes(prefix)
        }
        Value::Int(_) | Value::Float(_) => coordinate(key),
        other => panic!("a {} cannot be a key", other.kind_name()),
    }
}

/// The coordinate of `value` on dimension `attr` of subspace `subspace` of `schema`. The key
/// is hashed wherever it is a dimension (the key subspace, a tag subspace's spread), except
/// in the key subspace of an ordered space.
pub fn dimension_coordinate(
    schema: &SpaceSchema,
    subspace: SubspaceId,
    attr: AttrIndex,
    value: &Value,
) -> u64 {
    if attr != AttrIndex::KEY {
        coordinate(value)
    } else if subspace == SubspaceId::KEY && schema.keys_ordered() {
        ordered_key_coordinate(value)
    } else {
        key_coordinate(value)
    }
}

/// The axis a property's path hashes onto, out of `dimensions`.
pub fn property_axis(path: &str, dimensions: u16) -> usize {
    assert!(dimensions >= 1, "a dynamic space has at least one axis");
    (xxh3_64(path.as_bytes()) % u64::from(dimensions)) as usize
}

/// The point of a document in the unispace of `dimensions` axes.
pub fn unispace_point(dimensions: u16, document: &Document) -> Vec<u64> {
    let mut owners: Vec<Option<(String, u64)>> = vec![None; dimensions as usize];
    document.for_each_property(|path, value| {
        let Some(v) = value.primitive() else {
            return;
        };
        let owner = &mut owners[property_axis(path, dimensions)];
        if owner.as_ref().is_none_or(|(p, _)| path < p.as_str()) {
            *owner = Some((path.to_owned(), coordinate(&v)));
        }
    });
    owners
        .into_iter()
        .map(|o| o.map_or(0, |(_, c)| c))
        .collect()
}

/// The point of a document in an overlay: each axis's property's coordinate, 0 where the
/// document lacks the property or holds no string, int or float there.
pub fn overlay_point(overlay: &Overlay, document: &Document) -> Vec<u64> {
    overlay
        .axes
        .iter()
        .map(|a| {
            document
                .get(&a.path)
                .and_then(DocValue::primitive)
                .map_or(0, |v| coordinate(&v))
        })
        .collect()
}

/// The point of `object` in subspace `subspace`: one coordinate per dimension, or `None` when
/// the object is not placed there. Every object is placed in every subspace of a typed space;
/// a dynamic space's document in the key subspace and in the subspaces of its formula (the
/// unispace for the default formula, the overlays of a registered one, and the re-cut of one
/// of those overlays while it is built), and nowhere when its formula is not one the schema
/// knows.
pub fn point(schema: &SpaceSchema, subspace: SubspaceId, object: &Object) -> Option<Vec<u64>> {
    let SpaceKind::Dynamic { dimensions } = schema.kind else {
        return Some(typed_point(schema, subspace, object));
    };
    if subspace == SubspaceId::KEY {
        return Some(typed_point(schema, subspace, object));
    }
    let (Value::Document(d), Value::String(formula)) =
        (object.get(DOCUMENT_INDEX), object.get(FORMULA_INDEX))
    else {
        panic!("a dynamic space's object holds a document and a formula id");
    };
    // A formula id that is not text names no formula: the object is placed by none.
    if !schema.formula_places(formula.as_str()?, subspace)? {
        return None;
    }
    match &schema.subspace(subspace).overlay {
        None => {
            debug_assert_eq!(subspace, UNISPACE);
            Some(unispace_point(dimensions, d))
        }
        Some(overlay) => Some(overlay_point(overlay, d)),
    }
}

fn typed_point(schema: &SpaceSchema, subspace: SubspaceId, object: &Object) -> Vec<u64> {
    let s = schema.subspace(subspace);
    if let Some(curve) = s.tags {
        let key_hash = key_coordinate(object.key());
        return crate::tags::tag_point(curve, object.get(s.dimensions[0]), key_hash);
    }
    s.dimensions
        .iter()
        .map(|&attr| dimension_coordinate(schema, subspace, attr, object.get(attr)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ints_keep_their_order(a: i64, b: i64) {
            prop_assert_eq!(a.cmp(&b), coordinate(&Value::Int(a)).cmp(&coordinate(&Value::Int(b))));
        }

        #[test]
        fn floats_keep_their_order(a in any::<f64>().prop_filter("no NaN", |f| !f.is_nan()),
                                   b in any::<f64>().prop_filter("no NaN", |f| !f.is_nan())) {
            let (ca, cb) = (coordinate(&Value::Float(a)), coordinate(&Value::Float(b)));
            prop_assert_eq!(a.total_cmp(&b), ca.cmp(&cb));
        }
    }

    #[test]
    fn extremes_and_negatives() {
        assert_eq!(coordinate(&Value::Int(i64::MIN)), 0);
        assert_eq!(coordinate(&Value::Int(i64::MAX)), u64::MAX);
        assert!(coordinate(&Value::Int(-1)) < coordinate(&Value::Int(0)));
        assert!(coordinate(&Value::Float(f64::NEG_INFINITY)) < coordinate(&Value::Float(-1e300)));
        assert!(coordinate(&Value::Float(-0.5)) < coordinate(&Value::Float(0.0)));
        assert!(coordinate(&Value::Float(f64::MAX)) < coordinate(&Value::Float(f64::INFINITY)));
    }

    #[test]
    fn string_hash_is_stable() {
        // xxh3 is specified; this pins the coordinate of a known string across versions.
        assert_eq!(coordinate(&Value::from("")), 0x2d06800538d394c2);
    }
}
