//! Search predicates and conditions.
//!
//! Strings compare bytewise. Every predicate applies to a search or a condition on any
//! attribute; only some narrow the regions a search visits (equality on any dimension, and
//! ranges on int and float dimensions, whose coordinates preserve order). That is the
//! geometry's business, not this module's.

use regex::bytes::Regex;
use serde::{Deserialize, Serialize};

use crate::constants::{PREDICATES_MAX, REGEX_BYTES_MAX};
use crate::object::Object;
use crate::schema::{AttrIndex, SpaceSchema};
use crate::value::{coerce_primitive, AttributeType, PrimitiveType, Value};

/// A comparison applied to one attribute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PredicateOp {
    Equals(Value),
    LessThan(Value),
    LessEqual(Value),
    GreaterThan(Value),
    GreaterEqual(Value),
    /// Inclusive on both ends.
    Range(Value, Value),
    /// Regular expression (Rust `regex` syntax) searched anywhere in a string attribute.
    Regex(String),
    LengthEquals(u64),
    LengthLessEqual(u64),
    LengthGreaterEqual(u64),
    /// An element of a list or set, a key of a map, or a substring of a string.
    Contains(Value),
}

impl PredicateOp {
    pub fn name(&self) -> &'static str {
        match self {
            PredicateOp::Equals(_) => "equals",
            PredicateOp::LessThan(_) => "less than",
            PredicateOp::LessEqual(_) => "less equal",
            PredicateOp::GreaterThan(_) => "greater than",
            PredicateOp::GreaterEqual(_) => "greater equal",
            PredicateOp::Range(_, _) => "range",
            PredicateOp::Regex(_) => "regex",
            PredicateOp::LengthEquals(_) => "length equals",
            PredicateOp::LengthLessEqual(_) => "length less equal",
            PredicateOp::LengthGreaterEqual(_) => "length greater equal",
            PredicateOp::Contains(_) => "contains",
        }
    }
}

/// A predicate as a user writes it: an attribute name and a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Predicate {
    pub attr: String,
    pub op: PredicateOp,
}

impl Predicate {
    pub fn new(attr: impl Into<String>, op: PredicateOp) -> Predicate {
        Predicate {
            attr: attr.into(),
            op,
        }
    }

    pub fn equals(attr: impl Into<String>, value: impl Into<Value>) -> Predicate {
        Predicate::new(attr, PredicateOp::Equals(value.into()))
    }
}

/// A predicate validated against a schema: the attribute exists, the operand has the right
/// type (coerced where lossless), the comparison makes sense for the type, regexes compile.
#[derive(Clone, Debug)]
pub struct CheckedPredicate {
    pub attr: AttrIndex,
    pub op: PredicateOp,
    regex: Option<Regex>,
}

/// Why a predicate does not apply to a space.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PredicateError {
    #[error("unknown attribute {0:?}")]
    UnknownAttribute(String),
    #[error("attribute {attr:?} has type {ty}, but the {op} predicate was given a {given}")]
    WrongType {
        attr: String,
        ty: AttributeType,
        op: &'static str,
        given: &'static str,
    },
    #[error("the {op} predicate does not apply to attribute {attr:?} of type {ty}")]
    NotApplicable {
        attr: String,
        ty: AttributeType,
        op: &'static str,
    },
    #[error("invalid regular expression {pattern:?}: {reason}")]
    BadRegex { pattern: String, reason: String },
    #[error("too many predicates: {0} (at most {PREDICATES_MAX})")]
    TooMany(usize),
}

impl CheckedPredicate {
    pub fn check(schema: &SpaceSchema, p: &Predicate) -> Result<CheckedPredicate, PredicateError> {
        let attr = schema
            .attribute_index(&p.attr)
            .ok_or_else(|| PredicateError::UnknownAttribute(p.attr.clone()))?;
        let ty = schema.attribute(attr).ty;
        let not_applicable = || PredicateError::NotApplicable {
            attr: p.attr.clone(),
            ty,
            op: p.op.name(),
        };
        let wrong_type = |given: &Value| PredicateError::WrongType {
            attr: p.attr.clone(),
            ty,
            op: p.op.name(),
            given: given.kind_name(),
        };
        // Ordered comparisons need a primitive attribute and an operand of its type.
        let ordered = |v: &Value| -> Result<Value, PredicateError> {
            let prim = ty.as_primitive().ok_or_else(not_applicable)?;
            coerce_primitive(prim, v.clone()).ok_or_else(|| wrong_type(v))
        };
        let mut regex = None;
        let op = match &p.op {
            PredicateOp::Equals(v) => {
                PredicateOp::Equals(ty.coerce(v.clone()).ok_or_else(|| wrong_type(v))?)
            }
            PredicateOp::LessThan(v) => PredicateOp::LessThan(ordered(v)?),
            PredicateOp::LessEqual(v) => PredicateOp::LessEqual(ordered(v)?),
            PredicateOp::GreaterThan(v) => PredicateOp::GreaterThan(ordered(v)?),
            PredicateOp::GreaterEqual(v) => PredicateOp::GreaterEqual(ordered(v)?),
            PredicateOp::Range(lo, hi) => PredicateOp::Range(ordered(lo)?, ordered(hi)?),
            PredicateOp::Regex(pattern) => {
                if ty != AttributeType::STRING {
                    return Err(not_applicable());
                }
                if pattern.len() > REGEX_BYTES_MAX {
                    return Err(PredicateError::BadRegex {
                        pattern: pattern[..64].to_owned() + "...",
                        reason: format!("longer than {REGEX_BYTES_MAX} bytes"),
                    });
                }
                regex = Some(Regex::new(pattern).map_err(|e| PredicateError::BadRegex {
                    pattern: pattern.clone(),
                    reason: e.to_string(),
                })?);
                p.op.clone()
            }
            PredicateOp::LengthEquals(_)
            | PredicateOp::LengthLessEqual(_)
            | PredicateOp::LengthGreaterEqual(_) => {
                if matches!(
                    ty,
                    AttributeType::Primitive(PrimitiveType::Int | PrimitiveType::Float)
                ) {
                    return Err(not_applicable());
                }
                p.op.clone()
            }
            PredicateOp::Contains(v) => {
                let element = match ty {
                    AttributeType::List(e) | AttributeType::Set(e) | AttributeType::Map(e, _) => e,
                    AttributeType::Primitive(PrimitiveType::String) => PrimitiveType::String,
                    AttributeType::Primitive(_) => return Err(not_applicable()),
                };
                PredicateOp::Contains(
                    coerce_primitive(element, v.clone()).ok_or_else(|| wrong_type(v))?,
                )
            }
        };
        Ok(CheckedPredicate { attr, op, regex })
    }

    /// Checks every predicate of a search or condition.
    pub fn check_all(
        schema: &SpaceSchema,
        predicates: &[Predicate],
    ) -> Result<Vec<CheckedPredicate>, PredicateError> {
        if predicates.len() > PREDICATES_MAX {
            return Err(PredicateError::TooMany(predicates.len()));
        }
        predicates
            .iter()
            .map(|p| CheckedPredicate::check(schema, p))
            .collect()
    }

    /// Whether `value` (of this predicate's attribute type) satisfies the predicate.
    pub fn matches_value(&self, value: &Value) -> bool {
        match &self.op {
            PredicateOp::Equals(v) => value == v,
            PredicateOp::LessThan(v) => value < v,
            PredicateOp::LessEqual(v) => value <= v,
            PredicateOp::GreaterThan(v) => value > v,
            PredicateOp::GreaterEqual(v) => value >= v,
            PredicateOp::Range(lo, hi) => lo <= value && value <= hi,
            PredicateOp::Regex(_) => match (value, &self.regex) {
                (Value::String(s), Some(re)) => re.is_match(s.as_bytes()),
                _ => false,
            },
            PredicateOp::LengthEquals(n) => value.length() == Some(*n),
            PredicateOp::LengthLessEqual(n) => value.length().is_some_and(|l| l <= *n),
            PredicateOp::LengthGreaterEqual(n) => value.length().is_some_and(|l| l >= *n),
            PredicateOp::Contains(needle) => match (value, needle) {
                (Value::List(items), _) => items.contains(needle),
                (Value::Set(items), _) => items.contains(needle),
                (Value::Map(entries), _) => entries.contains_key(needle),
                (Value::String(s), Value::String(n)) => memfind(s.as_bytes(), n.as_bytes()),
                _ => false,
            },
        }
    }

    pub fn matches(&self, object: &Object) -> bool {
        self.matches_value(object.get(self.attr))
    }
}

fn memfind(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// Whether `object` satisfies every predicate (the empty conjunction is true).
pub fn matches_all(predicates: &[CheckedPredicate], object: &Object) -> bool {
    predicates.iter().all(|p| p.matches(object))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_space;

    fn schema() -> SpaceSchema {
        parse_space(
            "space t key k attributes int i, float f, string s, list(int) l, set(string) st, map(string, int) m",
        )
        .unwrap()
    }

    fn object() -> Object {
        let s = schema();
        let mut o = Object::with_defaults(&s, Value::from("key"));
        o.values[1] = Value::Int(-5);
        o.values[2] = Value::Float(2.5);
        o.values[3] = Value::from("hello world");
        o.values[4] = Value::List(vec![Value::Int(1), Value::Int(2)]);
        o.values[5] = Value::Set([Value::from("a")].into_iter().collect());
        o.values[6] = Value::Map([(Value::from("x"), Value::Int(1))].into_iter().collect());
        o
    }

    fn eval(attr: &str, op: PredicateOp) -> bool {
        CheckedPredicate::check(&schema(), &Predicate::new(attr, op))
            .unwrap()
            .matches(&object())
    }

    #[test]
    fn comparisons_on_every_type() {
        assert!(eval("i", PredicateOp::Equals(Value::Int(-5))));
        assert!(eval("i", PredicateOp::LessThan(Value::Int(0))));
        assert!(!eval("i", PredicateOp::GreaterEqual(Value::Int(0))));
        assert!(eval(
            "f",
            PredicateOp::Range(Value::Int(2), Value::Float(2.5))
        ));
        assert!(eval("s", PredicateOp::GreaterThan(Value::from("hello"))));
        assert!(eval("s", PredicateOp::Regex("^hel+o w".into())));
        assert!(eval("s", PredicateOp::Contains(Value::from("o w"))));
        assert!(eval("s", PredicateOp::LengthEquals(11)));
        assert!(eval("l", PredicateOp::Contains(Value::Int(2))));
        assert!(eval("l", PredicateOp::LengthGreaterEqual(2)));
        assert!(eval("st", PredicateOp::Contains(Value::from("a"))));
        assert!(!eval("st", PredicateOp::Contains(Value::from("b"))));
        assert!(eval("m", PredicateOp::Contains(Value::from("x"))));
        assert!(eval("m", PredicateOp::LengthLessEqual(1)));
        assert!(eval("k", PredicateOp::Equals(Value::from("key"))));
        assert!(eval(
            "l",
            PredicateOp::Equals(Value::List(vec![Value::Int(1), Value::Int(2)]))
        ));
    }

    #[test]
    fn predicates_that_cannot_apply_are_refused() {
        let s = schema();
        let check = |attr: &str, op| CheckedPredicate::check(&s, &Predicate::new(attr, op));
        assert!(matches!(
            check("nope", PredicateOp::Equals(Value::Int(1))),
            Err(PredicateError::UnknownAttribute(_))
        ));
        assert!(matches!(
            check("i", PredicateOp::Equals(Value::from("x"))),
            Err(PredicateError::WrongType { .. })
        ));
        assert!(matches!(
            check("i", PredicateOp::Regex("x".into())),
            Err(PredicateError::NotApplicable { .. })
        ));
        assert!(matches!(
            check("i", PredicateOp::LengthEquals(1)),
            Err(PredicateError::NotApplicable { .. })
        ));
        assert!(matches!(
            check("l", PredicateOp::LessThan(Value::Int(1))),
            Err(PredicateError::NotApplicable { .. })
        ));
        assert!(matches!(
            check("f", PredicateOp::Contains(Value::Int(1))),
            Err(PredicateError::NotApplicable { .. })
        ));
        assert!(matches!(
            check("s", PredicateOp::Regex("(".into())),
            Err(PredicateError::BadRegex { .. })
        ));
        assert!(matches!(
            check("f", PredicateOp::Equals(Value::Float(f64::NAN))),
            Err(PredicateError::WrongType { .. })
        ));
        assert!(matches!(
            check("l", PredicateOp::Contains(Value::from("x"))),
            Err(PredicateError::WrongType { .. })
        ));
    }
}
