//! Search predicates and conditions.
//!
//! Strings compare bytewise. Every predicate applies to a search or a condition on any
//! attribute; only some narrow the regions a search visits (equality on any dimension, and
//! ranges on int and float dimensions, whose coordinates preserve order). That is the
//! geometry's business, not this module's.

use regex::bytes::Regex;
use serde::{Deserialize, Serialize};

use crate::constants::{PREDICATES_MAX, REGEX_BYTES_MAX};
use std::cmp::Ordering;

use crate::document::{check_path, int_float_cmp, DocValue, Document, DocumentError};
use crate::formula::Overlay;
use crate::object::Object;
use crate::schema::{AttrIndex, SpaceSchema, DOCUMENT_INDEX};
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
    /// Dynamic spaces only: the document has the property, or one of the properties `or`
    /// (`exists(author|editor)`): a union of structures.
    Exists {
        or: Vec<String>,
    },
    /// Dynamic spaces only: the document does not have the property (`missing(editor)`).
    Missing,
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
            PredicateOp::Exists { .. } => "exists",
            PredicateOp::Missing => "missing",
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
///
/// In a dynamic space `attr` is the document and `path` the property the predicate names;
/// operands keep the type they were given (a document's property has no declared type: a
/// predicate matches the documents whose value compares with it, see [`compare_operand`]).
#[derive(Clone, Debug)]
pub struct CheckedPredicate {
    pub attr: AttrIndex,
    pub op: PredicateOp,
    /// The property path, in a dynamic space.
    pub path: Option<String>,
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
    #[error("{0}")]
    BadPath(DocumentError),
    #[error("the {op} predicate on {path:?} was given a {given}: {expected}")]
    BadOperand {
        path: String,
        op: &'static str,
        given: &'static str,
        expected: &'static str,
    },
    #[error("{0} applies to the properties of a dynamic space's documents; a typed space's attributes always exist")]
    StructuralOnTyped(&'static str),
}

impl CheckedPredicate {
    /// Whether this predicate gives the same answer on a stub of `overlay` as on the whole
    /// document: whether every property it names is an axis of the overlay.
    pub fn is_decided_by(&self, overlay: &Overlay) -> bool {
        match (&self.path, &self.op) {
            (None, _) => false,
            (Some(path), PredicateOp::Exists { or }) => {
                overlay.has_axis(path) && or.iter().all(|o| overlay.has_axis(o))
            }
            (Some(path), _) => overlay.has_axis(path),
        }
    }

    pub fn check(schema: &SpaceSchema, p: &Predicate) -> Result<CheckedPredicate, PredicateError> {
        if schema.is_dynamic() {
            return CheckedPredicate::check_path(p);
        }
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
                regex = Some(compile(pattern)?);
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
                    AttributeType::Primitive(_) | AttributeType::Document => {
                        return Err(not_applicable())
                    }
                };
                PredicateOp::Contains(
                    coerce_primitive(element, v.clone()).ok_or_else(|| wrong_type(v))?,
                )
            }
            PredicateOp::Exists { .. } | PredicateOp::Missing => {
                return Err(PredicateError::StructuralOnTyped(p.op.name()))
            }
        };
        Ok(CheckedPredicate {
            attr,
            op,
            path: None,
            regex,
        })
    }

    /// A predicate on a property of a dynamic space's documents.
    fn check_path(p: &Predicate) -> Result<CheckedPredicate, PredicateError> {
        check_path(&p.attr).map_err(PredicateError::BadPath)?;
        let bad = |given: &Value, expected: &'static str| PredicateError::BadOperand {
            path: p.attr.clone(),
            op: p.op.name(),
            given: given.kind_name(),
            expected,
        };
        // -0.0 and 0.0 share a coordinate, as in typed spaces.
        let scalar = |v: &Value| -> Result<Value, PredicateError> {
            match v {
                Value::Float(f) if f.is_nan() => Err(bad(v, "NaN matches nothing")),
                Value::Float(f) => Ok(Value::Float(f + 0.0)),
                Value::String(_) | Value::Int(_) => Ok(v.clone()),
                _ => Err(bad(v, "a string, an int or a float")),
            }
        };
        let same_family = |lo: &Value, hi: &Value| {
            matches!(lo, Value::String(_)) == matches!(hi, Value::String(_))
        };
        let mut regex = None;
        let op = match &p.op {
            PredicateOp::Equals(Value::List(items)) => PredicateOp::Equals(Value::List(
                items.iter().map(scalar).collect::<Result<_, _>>()?,
            )),
            PredicateOp::Equals(v) => PredicateOp::Equals(scalar(v)?),
            PredicateOp::LessThan(v) => PredicateOp::LessThan(scalar(v)?),
            PredicateOp::LessEqual(v) => PredicateOp::LessEqual(scalar(v)?),
            PredicateOp::GreaterThan(v) => PredicateOp::GreaterThan(scalar(v)?),
            PredicateOp::GreaterEqual(v) => PredicateOp::GreaterEqual(scalar(v)?),
            PredicateOp::Range(lo, hi) => {
                let (lo, hi) = (scalar(lo)?, scalar(hi)?);
                if !same_family(&lo, &hi) {
                    return Err(bad(&hi, "bounds that are both strings or both numbers"));
                }
                PredicateOp::Range(lo, hi)
            }
            PredicateOp::Regex(pattern) => {
                regex = Some(compile(pattern)?);
                p.op.clone()
            }
            PredicateOp::LengthEquals(_)
            | PredicateOp::LengthLessEqual(_)
            | PredicateOp::LengthGreaterEqual(_)
            | PredicateOp::Missing => p.op.clone(),
            PredicateOp::Contains(v) => PredicateOp::Contains(scalar(v)?),
            PredicateOp::Exists { or } => {
                if or.len() >= PREDICATES_MAX {
                    return Err(PredicateError::TooMany(or.len() + 1));
                }
                for path in or {
                    check_path(path).map_err(PredicateError::BadPath)?;
                }
                p.op.clone()
            }
        };
        Ok(CheckedPredicate {
            attr: DOCUMENT_INDEX,
            op,
            path: Some(p.attr.clone()),
            regex,
        })
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
            // Refused by `check` on typed spaces, whose attributes always exist.
            PredicateOp::Exists { .. } => true,
            PredicateOp::Missing => false,
        }
    }

    pub fn matches(&self, object: &Object) -> bool {
        self.matches_attribute(object.get(self.attr))
    }

    /// Whether `value`, the value of this predicate's attribute, satisfies it: in a dynamic
    /// space (the attribute is the document), by the property at its path.
    pub fn matches_attribute(&self, value: &Value) -> bool {
        match (&self.path, value) {
            (Some(path), Value::Document(d)) => self.matches_document(path, d),
            _ => self.matches_value(value),
        }
    }

    /// Whether document `d` satisfies this predicate on its property `path`. A value
    /// predicate never matches a document without the property.
    fn matches_document(&self, path: &str, d: &Document) -> bool {
        let value = d.get(path);
        let compare = |v: &Value| value.and_then(|x| compare_operand(x, v));
        use std::cmp::Ordering::{Equal, Greater, Less};
        match &self.op {
            PredicateOp::Exists { or } => value.is_some() || or.iter().any(|p| d.get(p).is_some()),
            PredicateOp::Missing => value.is_none(),
            PredicateOp::Equals(v) => value.is_some_and(|x| equals_operand(x, v)),
            PredicateOp::LessThan(v) => compare(v) == Some(Less),
            PredicateOp::LessEqual(v) => matches!(compare(v), Some(Less | Equal)),
            PredicateOp::GreaterThan(v) => compare(v) == Some(Greater),
            PredicateOp::GreaterEqual(v) => matches!(compare(v), Some(Greater | Equal)),
            PredicateOp::Range(lo, hi) => {
                matches!(compare(lo), Some(Greater | Equal))
                    && matches!(compare(hi), Some(Less | Equal))
            }
            PredicateOp::Regex(_) => match (value, &self.regex) {
                (Some(DocValue::String(s)), Some(re)) => re.is_match(s.as_bytes()),
                _ => false,
            },
            PredicateOp::LengthEquals(n) => value.and_then(DocValue::length) == Some(*n),
            PredicateOp::LengthLessEqual(n) => {
                value.and_then(DocValue::length).is_some_and(|l| l <= *n)
            }
            PredicateOp::LengthGreaterEqual(n) => {
                value.and_then(DocValue::length).is_some_and(|l| l >= *n)
            }
            PredicateOp::Contains(needle) => match (value, needle) {
                (Some(DocValue::List(items)), _) => items.iter().any(|i| equals_operand(i, needle)),
                (Some(DocValue::String(s)), Value::String(n)) => {
                    memfind(s.as_bytes(), n.as_bytes())
                }
                _ => false,
            },
        }
    }
}

/// A document's value against a predicate's operand: strings bytewise, numbers by value (an
/// int and a float compare exactly, `3 == 3.0`), anything else not at all.
pub fn compare_operand(value: &DocValue, operand: &Value) -> Option<Ordering> {
    match (value, operand) {
        (DocValue::String(a), Value::String(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        (DocValue::Int(a), Value::Int(b)) => Some(a.cmp(b)),
        (DocValue::Float(a), Value::Float(b)) => a.partial_cmp(b),
        (DocValue::Int(a), Value::Float(b)) => int_float_cmp(*a, *b),
        (DocValue::Float(a), Value::Int(b)) => int_float_cmp(*b, *a).map(Ordering::reverse),
        _ => None,
    }
}

/// Equality of a document's value with a predicate's operand as [`compare_operand`] sees it,
/// and of lists element by element.
pub fn equals_operand(value: &DocValue, operand: &Value) -> bool {
    match (value, operand) {
        (DocValue::List(items), Value::List(wanted)) => {
            items.len() == wanted.len()
                && items.iter().zip(wanted).all(|(i, w)| equals_operand(i, w))
        }
        _ => compare_operand(value, operand) == Some(Ordering::Equal),
    }
}

fn compile(pattern: &str) -> Result<Regex, PredicateError> {
    if pattern.len() > REGEX_BYTES_MAX {
        return Err(PredicateError::BadRegex {
            pattern: pattern.chars().take(64).collect::<String>() + "...",
            reason: format!("longer than {REGEX_BYTES_MAX} bytes"),
        });
    }
    Regex::new(pattern).map_err(|e| PredicateError::BadRegex {
        pattern: pattern.to_owned(),
        reason: e.to_string(),
    })
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
    use crate::parse::parse_space;

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

    #[test]
    fn predicates_on_document_paths() {
        use crate::document::{DocValue, Document};
        let s = parse_space("space p dynamic key id").unwrap();
        let doc: Document = Document::new(
            [
                ("year".to_owned(), DocValue::Int(2010)),
                ("title".to_owned(), DocValue::String("Dynamo".into())),
                (
                    "venue".to_owned(),
                    DocValue::Object(
                        [("name".to_owned(), DocValue::String("SOSP".into()))]
                            .into_iter()
                            .collect(),
                    ),
                ),
                (
                    "tags".to_owned(),
                    DocValue::List(vec![DocValue::String("kv".into()), DocValue::Int(3)]),
                ),
            ]
            .into_iter()
            .collect(),
        );
        let object = Object {
            values: vec![Value::from("k"), Value::Document(doc)],
        };
        let holds = |attr: &str, op: PredicateOp| {
            CheckedPredicate::check(&s, &Predicate::new(attr, op))
                .expect("valid")
                .matches(&object)
        };
        assert!(holds("year", PredicateOp::Equals(Value::Float(2010.0))));
        assert!(holds("year", PredicateOp::Range(2000.into(), 2010.into())));
        assert!(!holds("year", PredicateOp::GreaterThan(2010.into())));
        assert!(!holds("year", PredicateOp::Equals("2010".into())));
        assert!(holds("venue.name", PredicateOp::Regex("^SO".into())));
        assert!(holds("tags", PredicateOp::Contains(3.into())));
        assert!(holds("venue", PredicateOp::LengthEquals(1)));
        assert!(holds("venue.name", PredicateOp::Exists { or: vec![] }));
        assert!(holds(
            "editor",
            PredicateOp::Exists {
                or: vec!["year".into()]
            }
        ));
        assert!(!holds(
            "editor",
            PredicateOp::Exists {
                or: vec!["isbn".into()]
            }
        ));
        assert!(holds("editor", PredicateOp::Missing));
        assert!(!holds("editor", PredicateOp::Equals(1.into())));
        assert!(!holds("editor", PredicateOp::LessThan(1.into())));
        let refused = |attr: &str, op: PredicateOp| {
            CheckedPredicate::check(&s, &Predicate::new(attr, op)).expect_err(attr)
        };
        assert!(matches!(
            refused("a..b", PredicateOp::Missing),
            PredicateError::BadPath(_)
        ));
        assert!(matches!(
            refused("year", PredicateOp::Range("a".into(), 3.into())),
            PredicateError::BadOperand { .. }
        ));
        assert!(matches!(
            refused("year", PredicateOp::Equals(Value::Float(f64::NAN))),
            PredicateError::BadOperand { .. }
        ));
        let typed = schema();
        assert!(matches!(
            CheckedPredicate::check(&typed, &Predicate::new("i", PredicateOp::Missing)),
            Err(PredicateError::StructuralOnTyped(_))
        ));
    }
    #[test]
    fn ints_and_floats_compare_exactly() {
        assert_eq!(
            compare_operand(&DocValue::Int(3), &Value::Float(3.0)),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare_operand(&DocValue::Int(3), &Value::Float(3.5)),
            Some(Ordering::Less)
        );
        assert_eq!(
            compare_operand(&DocValue::Int(-3), &Value::Float(-3.5)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            compare_operand(&DocValue::Float(2.5), &Value::Int(2)),
            Some(Ordering::Greater)
        );
        // 2^53 + 1 is not a float: no rounding makes it equal to 2^53.
        let big = (1i64 << 53) + 1;
        assert_eq!(
            compare_operand(&DocValue::Int(big), &Value::Float((1u64 << 53) as f64)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            compare_operand(&DocValue::Int(i64::MAX), &Value::Float(9.3e18)),
            Some(Ordering::Less)
        );
        assert_eq!(
            compare_operand(&DocValue::String("3".into()), &Value::Int(3)),
            None
        );
    }

    #[test]
    fn a_pointer_decides_the_predicates_on_its_axes_only() {
        use crate::formula::FormulaSpec;
        use crate::parse::parse_space;
        let schema = parse_space("space p dynamic key id").unwrap();
        let overlay = &FormulaSpec::parse(None, &["&year,venue.name"])
            .unwrap()
            .overlays[0];
        let decides = |path: &str, op: PredicateOp| {
            let p = CheckedPredicate::check(&schema, &Predicate::new(path, op)).unwrap();
            p.is_decided_by(overlay)
        };
        assert!(decides("year", PredicateOp::GreaterEqual(Value::Int(2000))));
        assert!(decides("venue.name", PredicateOp::Missing));
        assert!(decides(
            "year",
            PredicateOp::Exists {
                or: vec!["venue.name".into()]
            }
        ));
        assert!(!decides(
            "year",
            PredicateOp::Exists {
                or: vec!["title".into()]
            }
        ));
        assert!(!decides("venue", PredicateOp::Missing));
        assert!(!decides("title", PredicateOp::Equals(Value::from("x"))));
    }
}
