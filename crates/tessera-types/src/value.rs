//! Values and their types.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::bytestring::ByteString;
use crate::document::{DocValue, Document};

/// The type of a single value that can be a dimension, a container element, or a map key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PrimitiveType {
    /// A byte string (usually UTF-8 text, but any bytes). Compared bytewise; hashed (not
    /// ordered) when it is a dimension.
    String,
    /// Signed 64-bit integer.
    Int,
    /// IEEE-754 double. NaN is refused everywhere, so floats are totally ordered.
    Float,
}

/// The type of an attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttributeType {
    Primitive(PrimitiveType),
    List(PrimitiveType),
    Set(PrimitiveType),
    Map(PrimitiveType, PrimitiveType),
    /// A JSON document: the one attribute of a dynamic space besides its key.
    Document,
}

impl PrimitiveType {
    pub fn name(self) -> &'static str {
        match self {
            PrimitiveType::String => "string",
            PrimitiveType::Int => "int",
            PrimitiveType::Float => "float",
        }
    }

    /// The value an attribute of this type has when a put does not name it.
    pub fn default_value(self) -> Value {
        match self {
            PrimitiveType::String => Value::String(ByteString::default()),
            PrimitiveType::Int => Value::Int(0),
            PrimitiveType::Float => Value::Float(0.0),
        }
    }
}

impl fmt::Display for PrimitiveType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl AttributeType {
    pub const STRING: AttributeType = AttributeType::Primitive(PrimitiveType::String);
    pub const INT: AttributeType = AttributeType::Primitive(PrimitiveType::Int);
    pub const FLOAT: AttributeType = AttributeType::Primitive(PrimitiveType::Float);

    pub fn is_primitive(self) -> bool {
        matches!(self, AttributeType::Primitive(_))
    }

    pub fn as_primitive(self) -> Option<PrimitiveType> {
        match self {
            AttributeType::Primitive(p) => Some(p),
            _ => None,
        }
    }

    /// The value an attribute of this type has when a put does not name it.
    pub fn default_value(self) -> Value {
        match self {
            AttributeType::Primitive(p) => p.default_value(),
            AttributeType::List(_) => Value::List(Vec::new()),
            AttributeType::Set(_) => Value::Set(BTreeSet::new()),
            AttributeType::Map(_, _) => Value::Map(BTreeMap::new()),
            AttributeType::Document => Value::Document(Document::default()),
        }
    }

    /// Whether `value` has exactly this type (containers are checked element by element).
    pub fn admits(self, value: &Value) -> bool {
        match (self, value) {
            (AttributeType::Primitive(p), v) => v.primitive_type() == Some(p),
            (AttributeType::List(p), Value::List(items)) => {
                items.iter().all(|v| v.primitive_type() == Some(p))
            }
            (AttributeType::Set(p), Value::Set(items)) => {
                items.iter().all(|v| v.primitive_type() == Some(p))
            }
            (AttributeType::Map(k, v), Value::Map(entries)) => entries
                .iter()
                .all(|(ek, ev)| ek.primitive_type() == Some(k) && ev.primitive_type() == Some(v)),
            (AttributeType::Document, Value::Document(_)) => true,
            _ => false,
        }
    }

    /// Converts `value` to this type where that is lossless and unsurprising (an integer given
    /// for a float attribute, a list given for a set), or returns `None` on a type mismatch.
    /// Used on input from users; stored values always satisfy [`AttributeType::admits`].
    pub fn coerce(self, value: Value) -> Option<Value> {
        let coerced = match (self, value) {
            (AttributeType::Primitive(p), v) => coerce_primitive(p, v)?,
            (AttributeType::List(p), Value::List(items)) => Value::List(
                items
                    .into_iter()
                    .map(|v| coerce_primitive(p, v))
                    .collect::<Option<_>>()?,
            ),
            (AttributeType::Set(p), Value::Set(items)) => Value::Set(
                items
                    .into_iter()
                    .map(|v| coerce_primitive(p, v))
                    .collect::<Option<_>>()?,
            ),
            (AttributeType::Set(p), Value::List(items)) => Value::Set(
                items
                    .into_iter()
                    .map(|v| coerce_primitive(p, v))
                    .collect::<Option<_>>()?,
            ),
            (AttributeType::Map(kt, vt), Value::Map(entries)) => Value::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| Some((coerce_primitive(kt, k)?, coerce_primitive(vt, v)?)))
                    .collect::<Option<_>>()?,
            ),
            (AttributeType::Document, v @ Value::Document(_)) => v,
            _ => return None,
        };
        debug_assert!(self.admits(&coerced));
        Some(coerced)
    }
}

/// Converts a primitive, accepting an integer for a float. Refuses NaN.
pub fn coerce_primitive(ty: PrimitiveType, value: Value) -> Option<Value> {
    match (ty, value) {
        (PrimitiveType::String, v @ Value::String(_)) => Some(v),
        (PrimitiveType::Int, v @ Value::Int(_)) => Some(v),
        // -0.0 becomes 0.0: the two are equal to users, and must share a coordinate.
        (PrimitiveType::Float, Value::Float(f)) if !f.is_nan() => Some(Value::Float(f + 0.0)),
        (PrimitiveType::Float, Value::Int(i)) => Some(Value::Float(i as f64)),
        _ => None,
    }
}

impl fmt::Display for AttributeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttributeType::Primitive(p) => write!(f, "{p}"),
            AttributeType::List(p) => write!(f, "list({p})"),
            AttributeType::Set(p) => write!(f, "set({p})"),
            AttributeType::Map(k, v) => write!(f, "map({k}, {v})"),
            AttributeType::Document => f.write_str("document"),
        }
    }
}

/// A value of any attribute type.
///
/// Values are totally ordered (floats by IEEE-754 total order; values of different types by
/// type) so that they can live in sets and map keys. Set and map elements are primitives.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Value {
    String(ByteString),
    Int(i64),
    Float(f64),
    List(Vec<Value>),
    Set(BTreeSet<Value>),
    Map(BTreeMap<Value, Value>),
    Document(Document),
}

impl Value {
    pub fn primitive_type(&self) -> Option<PrimitiveType> {
        match self {
            Value::String(_) => Some(PrimitiveType::String),
            Value::Int(_) => Some(PrimitiveType::Int),
            Value::Float(_) => Some(PrimitiveType::Float),
            _ => None,
        }
    }

    /// A short name of this value's kind, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::Map(_) => "map",
            Value::Document(_) => "document",
        }
    }

    /// Length as the length predicates see it: bytes of a string, elements of a container.
    pub fn length(&self) -> Option<u64> {
        match self {
            Value::String(s) => Some(s.len() as u64),
            Value::List(l) => Some(l.len() as u64),
            Value::Set(s) => Some(s.len() as u64),
            Value::Map(m) => Some(m.len() as u64),
            Value::Document(d) => Some(d.properties.len() as u64),
            Value::Int(_) | Value::Float(_) => None,
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Value::String(_) => 0,
            Value::Int(_) => 1,
            Value::Float(_) => 2,
            Value::List(_) => 3,
            Value::Set(_) => 4,
            Value::Map(_) => 5,
            Value::Document(_) => 6,
        }
    }

    /// Whether this value, or any value inside it, is a float NaN.
    pub fn contains_nan(&self) -> bool {
        match self {
            Value::Float(f) => f.is_nan(),
            Value::String(_) | Value::Int(_) => false,
            Value::List(l) => l.iter().any(Value::contains_nan),
            Value::Set(s) => s.iter().any(Value::contains_nan),
            Value::Map(m) => m.iter().any(|(k, v)| k.contains_nan() || v.contains_nan()),
            Value::Document(d) => d.contains_nan(),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Value::String(a), Value::String(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
            (Value::List(a), Value::List(b)) => a.cmp(b),
            (Value::Set(a), Value::Set(b)) => a.cmp(b),
            (Value::Map(a), Value::Map(b)) => a.cmp(b),
            (Value::Document(a), Value::Document(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl fmt::Display for Value {
    /// A compact, JSON-like rendering for messages and logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) => write!(f, "{s:?}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Set(items) => {
                f.write_str("{")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("}")
            }
            Value::Map(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Value::Document(d) => write!(f, "{d}"),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(ByteString::from(s))
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(ByteString::from(s))
    }
}
impl From<&[u8]> for Value {
    fn from(bytes: &[u8]) -> Self {
        Value::String(ByteString::from(bytes))
    }
}
impl From<Vec<u8>> for Value {
    fn from(bytes: Vec<u8>) -> Self {
        Value::String(ByteString::from(bytes))
    }
}
impl From<ByteString> for Value {
    fn from(s: ByteString) -> Self {
        Value::String(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::Float(x)
    }
}

// Here rather than in document.rs: a value may hold a document, so values sit above them.
impl DocValue {
    /// The value as a typed space would hold it, for a string, an int or a float (the kinds
    /// that have a coordinate); `None` for the others.
    pub fn primitive(&self) -> Option<Value> {
        match self {
            DocValue::String(s) => Some(Value::from(s.as_str())),
            DocValue::Int(i) => Some(Value::Int(*i)),
            DocValue::Float(f) => Some(Value::Float(*f)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_order_is_total_and_numeric() {
        let mut v = [
            Value::Float(2.5),
            Value::Float(-0.0),
            Value::Float(-3.0),
            Value::Float(0.0),
        ];
        v.sort();
        assert_eq!(v[0], Value::Float(-3.0));
        assert_eq!(v[3], Value::Float(2.5));
    }

    #[test]
    fn coerce_accepts_int_for_float_and_list_for_set() {
        assert_eq!(
            AttributeType::FLOAT.coerce(Value::Int(3)),
            Some(Value::Float(3.0))
        );
        let set = AttributeType::Set(PrimitiveType::Int)
            .coerce(Value::List(vec![
                Value::Int(2),
                Value::Int(1),
                Value::Int(2),
            ]))
            .unwrap();
        assert_eq!(
            set,
            Value::Set([Value::Int(1), Value::Int(2)].into_iter().collect())
        );
        assert_eq!(AttributeType::INT.coerce(Value::from("x")), None);
        assert_eq!(AttributeType::FLOAT.coerce(Value::Float(f64::NAN)), None);
    }

    #[test]
    fn defaults_match_types() {
        for ty in [
            AttributeType::STRING,
            AttributeType::INT,
            AttributeType::FLOAT,
            AttributeType::List(PrimitiveType::Int),
            AttributeType::Set(PrimitiveType::String),
            AttributeType::Map(PrimitiveType::String, PrimitiveType::Float),
        ] {
            assert!(ty.admits(&ty.default_value()), "{ty}");
        }
    }
}
