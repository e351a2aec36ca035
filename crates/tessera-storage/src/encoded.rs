//! Objects read in their stored encoding, `postcard(Object)`, without decoding them: where one
//! attribute's value lies in the bytes, and predicates checked against that value alone. A
//! search that streams its matches to a client decodes no object whole (issue 12: filtering
//! on the encoded form, no per-object allocation for an equality or an int range).
//!
//! The walk mirrors postcard's layout of [`Value`] and [`DocValue`] (serde's derived
//! encoding: an enum is its variant's index, a varint, then its fields; a string or a sequence
//! its length, a varint, then its elements; an int a zigzag varint; a float 8 bytes). The
//! tests check it against postcard itself.
//!
//! [`DocValue`]: tessera_types::DocValue

use tessera_types::constants::DOCUMENT_NESTING_MAX;
use tessera_types::{AttrIndex, CheckedPredicate, PredicateOp, Value};

use crate::error::StorageError;

/// Variant indices of `Value` and `DocValue`, in declaration order.
mod variant {
    pub const VALUE_STRING: u64 = 0;
    pub const VALUE_INT: u64 = 1;
    pub const VALUE_FLOAT: u64 = 2;
    pub const VALUE_LIST: u64 = 3;
    pub const VALUE_SET: u64 = 4;
    pub const VALUE_MAP: u64 = 5;
    pub const VALUE_DOCUMENT: u64 = 6;
    pub const DOC_NULL: u64 = 0;
    pub const DOC_BOOL: u64 = 1;
    pub const DOC_INT: u64 = 2;
    pub const DOC_FLOAT: u64 = 3;
    pub const DOC_STRING: u64 = 4;
    pub const DOC_LIST: u64 = 5;
    pub const DOC_OBJECT: u64 = 6;
}

fn corrupt(what: &str) -> StorageError {
    StorageError::Corrupt(format!("stored object: {what}"))
}

/// A cursor over encoded bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, StorageError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .bytes
                .get(self.at)
                .ok_or_else(|| corrupt("truncated"))?;
            self.at += 1;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(corrupt("a varint longer than 10 bytes"))
    }

    fn skip(&mut self, n: u64) -> Result<(), StorageError> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.at.checked_add(n))
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| corrupt("truncated"))?;
        self.at = end;
        Ok(())
    }

    /// A string or byte string: its length, then its bytes.
    fn skip_string(&mut self) -> Result<(), StorageError> {
        let n = self.varint()?;
        self.skip(n)
    }

    fn skip_value(&mut self, depth: usize) -> Result<(), StorageError> {
        use variant::*;
        if depth > DOCUMENT_NESTING_MAX {
            return Err(corrupt("nested too deep"));
        }
        match self.varint()? {
            VALUE_STRING => self.skip_string(),
            VALUE_INT => self.varint().map(drop),
            VALUE_FLOAT => self.skip(8),
            VALUE_LIST | VALUE_SET => {
                for _ in 0..self.varint()? {
                    self.skip_value(depth + 1)?;
                }
                Ok(())
            }
            VALUE_MAP => {
                for _ in 0..self.varint()? {
                    self.skip_value(depth + 1)?;
                    self.skip_value(depth + 1)?;
                }
                Ok(())
            }
            VALUE_DOCUMENT => self.skip_properties(depth + 1),
            other => Err(corrupt(&format!("value variant {other}"))),
        }
    }

    /// A document's (or a nested object's) properties: a count, then names and values.
    fn skip_properties(&mut self, depth: usize) -> Result<(), StorageError> {
        for _ in 0..self.varint()? {
            self.skip_string()?;
            self.skip_doc_value(depth + 1)?;
        }
        Ok(())
    }

    fn skip_doc_value(&mut self, depth: usize) -> Result<(), StorageError> {
        use variant::*;
        if depth > DOCUMENT_NESTING_MAX {
            return Err(corrupt("nested too deep"));
        }
        match self.varint()? {
            DOC_NULL => Ok(()),
            DOC_BOOL => self.skip(1),
            DOC_INT => self.varint().map(drop),
            DOC_FLOAT => self.skip(8),
            DOC_STRING => self.skip_string(),
            DOC_LIST => {
                for _ in 0..self.varint()? {
                    self.skip_doc_value(depth + 1)?;
                }
                Ok(())
            }
            DOC_OBJECT => self.skip_properties(depth),
            other => Err(corrupt(&format!("document value variant {other}"))),
        }
    }
}

/// The encoded value of attribute `attr` in `object`, an encoded `Object` (its values' count,
/// then each value).
pub fn attribute_bytes(object: &[u8], attr: AttrIndex) -> Result<&[u8], StorageError> {
    let mut r = Reader {
        bytes: object,
        at: 0,
    };
    let count = r.varint()?;
    let i = u64::from(attr.0);
    if i >= count {
        return Err(corrupt(&format!("no attribute {i} among {count}")));
    }
    for _ in 0..i {
        r.skip_value(0)?;
    }
    let start = r.at;
    r.skip_value(0)?;
    Ok(&object[start..r.at])
}

/// A search's predicates, ready to check against encoded objects: an equality on a primitive
/// compares encodings (a primitive's encoding is one-to-one: floats by their bits, as `Value`
/// compares them); a predicate on an int reads the int; every other predicate decodes its
/// attribute's value alone. One walk over the object finds every attribute the predicates
/// name.
pub struct EncodedFilter<'p> {
    /// The predicates, in the order of their attributes (a conjunction: any order answers).
    predicates: Vec<&'p CheckedPredicate>,
    /// For each, its operand's encoding when it is an equality on a primitive.
    operands: Vec<Option<Vec<u8>>>,
}

impl<'p> EncodedFilter<'p> {
    pub fn new(predicates: &'p [CheckedPredicate]) -> EncodedFilter<'p> {
        let mut predicates: Vec<&CheckedPredicate> = predicates.iter().collect();
        predicates.sort_by_key(|p| p.attr);
        let operands = predicates
            .iter()
            .map(|p| match (&p.path, &p.op) {
                (
                    None,
                    PredicateOp::Equals(v @ (Value::String(_) | Value::Int(_) | Value::Float(_))),
                ) => Some(postcard::to_allocvec(v).expect("a value encodes")),
                _ => None,
            })
            .collect();
        EncodedFilter {
            predicates,
            operands,
        }
    }

    /// Whether the encoded `object` satisfies every predicate.
    pub fn matches(&self, object: &[u8]) -> Result<bool, StorageError> {
        let mut r = Reader {
            bytes: object,
            at: 0,
        };
        let count = r.varint()?;
        // The attribute `r` is at, and the span of the last one read whole.
        let (mut next, mut last): (u64, Option<(u64, &[u8])>) = (0, None);
        for (p, operand) in self.predicates.iter().zip(&self.operands) {
            let attr = u64::from(p.attr.0);
            let value = match last {
                Some((a, span)) if a == attr => span,
                _ => {
                    if attr >= count {
                        return Err(corrupt(&format!("no attribute {attr} among {count}")));
                    }
                    while next < attr {
                        r.skip_value(0)?;
                        next += 1;
                    }
                    let start = r.at;
                    r.skip_value(0)?;
                    next += 1;
                    let span = &object[start..r.at];
                    last = Some((attr, span));
                    span
                }
            };
            let matched = match operand {
                Some(operand) => value == operand.as_slice(),
                None => match int_value(value) {
                    Some(i) => p.matches_attribute(&Value::Int(i)),
                    None => {
                        let value: Value = postcard::from_bytes(value)
                            .map_err(|e| corrupt(&format!("undecodable value: {e}")))?;
                        p.matches_attribute(&value)
                    }
                },
            };
            if !matched {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The int an encoded value holds, if it is an int (its variant, then a zigzag varint).
fn int_value(span: &[u8]) -> Option<i64> {
    let mut r = Reader { bytes: span, at: 0 };
    if r.varint().ok()? != variant::VALUE_INT {
        return None;
    }
    let zigzag = r.varint().ok()?;
    Some((zigzag >> 1) as i64 ^ -((zigzag & 1) as i64))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use tessera_types::{DocValue, Document, Object, Predicate};

    use super::*;

    fn primitive() -> impl Strategy<Value = Value> {
        prop_oneof![
            ".{0,12}".prop_map(Value::from),
            // Strings are any bytes, not only text.
            prop::collection::vec(any::<u8>(), 0..12).prop_map(Value::from),
            any::<i64>().prop_map(Value::Int),
            any::<f64>()
                .prop_filter("not NaN", |f| !f.is_nan())
                .prop_map(Value::Float),
        ]
    }

    fn doc_value() -> impl Strategy<Value = DocValue> {
        let leaf = prop_oneof![
            Just(DocValue::Null),
            any::<bool>().prop_map(DocValue::Bool),
            any::<i64>().prop_map(DocValue::Int),
            any::<f64>().prop_map(DocValue::Float),
            "[a-z]{0,6}".prop_map(DocValue::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(DocValue::List),
                prop::collection::btree_map("[a-z]{1,4}", inner, 0..4).prop_map(DocValue::Object),
            ]
        })
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            4 => primitive(),
            1 => prop::collection::vec(primitive(), 0..4).prop_map(Value::List),
            1 => prop::collection::btree_set(primitive(), 0..4).prop_map(Value::Set),
            1 => prop::collection::btree_map(primitive(), primitive(), 0..4).prop_map(Value::Map),
            1 => prop::collection::btree_map("[a-z]{1,4}", doc_value(), 0..4)
                .prop_map(|properties| Value::Document(Document { properties })),
        ]
    }

    proptest! {
        /// An int read from its encoding is the int (postcard's zigzag is the oracle).
        #[test]
        fn ints_read_from_their_encoding(i in any::<i64>()) {
            prop_assert_eq!(int_value(&postcard::to_allocvec(&Value::Int(i)).unwrap()), Some(i));
            prop_assert_eq!(int_value(&postcard::to_allocvec(&Value::from("x")).unwrap()), None);
        }

        /// Each attribute's bytes are exactly its value's own encoding (postcard is the oracle).
        #[test]
        fn attribute_bytes_are_each_values_encoding(values in prop::collection::vec(value(), 1..6)) {
            let object = postcard::to_allocvec(&Object { values: values.clone() }).unwrap();
            for (i, v) in values.iter().enumerate() {
                let expected = postcard::to_allocvec(v).unwrap();
                prop_assert_eq!(attribute_bytes(&object, AttrIndex(i as u16)).unwrap(), expected.as_slice());
            }
            prop_assert!(attribute_bytes(&object, AttrIndex(values.len() as u16)).is_err());
            // Truncated or garbled bytes are an error, never a panic.
            for cut in 0..object.len() {
                let _ = attribute_bytes(&object[..cut], AttrIndex((values.len() - 1) as u16));
            }
        }

        /// The filter on encoded objects agrees with predicates on decoded ones.
        #[test]
        fn the_encoded_filter_agrees_with_decoded_objects(
            s in "[ab]{0,2}", i in -3i64..3, f in prop_oneof![Just(-0.0f64), Just(0.0), Just(1.5)],
            ops in prop::collection::vec((0usize..3, 0usize..4, "[ab]{0,2}", -3i64..3), 1..4),
        ) {
            let schema = tessera_types::parse_space(
                "space t key k attributes string s, int i, float f, list(int) l",
            ).unwrap();
            let object = Object { values: vec![
                Value::from("key"), Value::from(s.as_str()), Value::Int(i), Value::Float(f),
                Value::List(vec![Value::Int(i), Value::Int(1)]),
            ]};
            let encoded = postcard::to_allocvec(&object).unwrap();
            let predicates: Vec<CheckedPredicate> = ops.iter().map(|(attr, op, ps, pi)| {
                let name = ["s", "i", "f"][*attr];
                let operand = match *attr { 0 => Value::from(ps.as_str()), 1 => Value::Int(*pi), _ => Value::Float(*pi as f64 / 2.0) };
                let op = match op {
                    0 => PredicateOp::Equals(operand),
                    1 => PredicateOp::LessEqual(operand),
                    2 => PredicateOp::GreaterThan(operand),
                    _ => PredicateOp::Range(operand.clone(), operand),
                };
                CheckedPredicate::check(&schema, &Predicate::new(name, op)).unwrap()
            }).chain(std::iter::once(CheckedPredicate::check(&schema, &Predicate::new("l", PredicateOp::Contains(Value::Int(i)))).unwrap()))
            .collect();
            let filter = EncodedFilter::new(&predicates);
            let decoded = predicates.iter().all(|p| p.matches(&object));
            prop_assert_eq!(filter.matches(&encoded).unwrap(), decoded);
        }
    }
}
