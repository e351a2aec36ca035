//! Updates: attribute assignments and atomic operations ("funcalls", as HyperDex calls them).
//!
//! A funcall is checked against the schema once ([`CheckedFuncall::check`]: the attribute
//! exists, is not the key, and the operation and its argument fit the attribute's type) and
//! then applied at the point leader to the key's latest value ([`CheckedFuncall::apply`]),
//! where the only failures left are those that depend on the data: integer overflow, division
//! by zero, a float result that is NaN. Those fail the whole update cleanly and change nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bytestring::ByteString;
use crate::constants::{DOCUMENT_PROPERTIES_MAX, FUNCALLS_MAX, SHAPE_BYTES_MAX};
use crate::document::DocumentError;
use crate::object::Object;
use crate::schema::{AttrIndex, SpaceSchema};
use crate::value::{coerce_primitive, AttributeType, PrimitiveType, Value};

/// A numeric operation, on an int or float attribute or on the values of a map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NumOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    /// Bitwise, ints only.
    And,
    /// Bitwise, ints only.
    Or,
    /// Bitwise, ints only.
    Xor,
    Min,
    Max,
}

impl NumOp {
    pub fn name(self) -> &'static str {
        match self {
            NumOp::Add => "add",
            NumOp::Sub => "sub",
            NumOp::Mul => "mul",
            NumOp::Div => "div",
            NumOp::Mod => "mod",
            NumOp::And => "and",
            NumOp::Or => "or",
            NumOp::Xor => "xor",
            NumOp::Min => "min",
            NumOp::Max => "max",
        }
    }

    fn is_bitwise(self) -> bool {
        matches!(self, NumOp::And | NumOp::Or | NumOp::Xor)
    }

    fn apply(self, current: &Value, arg: &Value) -> Result<Value, FuncallError> {
        match (current, arg) {
            (Value::Int(a), Value::Int(b)) => {
                let (a, b) = (*a, *b);
                let r = match self {
                    NumOp::Add => a.checked_add(b),
                    NumOp::Sub => a.checked_sub(b),
                    NumOp::Mul => a.checked_mul(b),
                    NumOp::Div if b == 0 => return Err(FuncallError::DivideByZero),
                    NumOp::Div => a.checked_div(b),
                    NumOp::Mod if b == 0 => return Err(FuncallError::DivideByZero),
                    NumOp::Mod => a.checked_rem(b),
                    NumOp::And => Some(a & b),
                    NumOp::Or => Some(a | b),
                    NumOp::Xor => Some(a ^ b),
                    NumOp::Min => Some(a.min(b)),
                    NumOp::Max => Some(a.max(b)),
                };
                r.map(Value::Int).ok_or(FuncallError::Overflow)
            }
            (Value::Float(a), Value::Float(b)) => {
                let r = match self {
                    NumOp::Add => a + b,
                    NumOp::Sub => a - b,
                    NumOp::Mul => a * b,
                    NumOp::Div => a / b,
                    NumOp::Mod => a % b,
                    NumOp::Min => a.min(*b),
                    NumOp::Max => a.max(*b),
                    NumOp::And | NumOp::Or | NumOp::Xor => {
                        unreachable!("checked: bitwise operations take ints")
                    }
                };
                if r.is_nan() {
                    Err(FuncallError::NotANumber)
                } else {
                    Ok(Value::Float(r))
                }
            }
            _ => unreachable!("checked: numeric operands match the attribute type"),
        }
    }
}

/// What a funcall does to its attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FuncallOp {
    /// Replace the value (a plain put).
    Set,
    /// `attr = attr <op> arg` on an int or float.
    Num(NumOp),
    StringPrepend,
    StringAppend,
    /// Insert an element at the front of a list.
    ListLPush,
    /// Append an element to a list.
    ListRPush,
    SetAdd,
    SetRemove,
    /// Add every element of the argument set.
    SetUnion,
    /// Keep only the elements also in the argument set.
    SetIntersect,
    /// Insert or overwrite every entry of the argument map.
    MapAdd,
    /// Remove the entry with the argument key (absent is fine).
    MapRemove,
    /// For every entry `(k, v)` of the argument map: `map[k] = map[k] <op> v`, an absent
    /// `map[k]` counting as 0.
    MapNum(NumOp),
    /// For every entry `(k, s)` of the argument map: `map[k] = s + map[k]`.
    MapStringPrepend,
    /// For every entry `(k, s)` of the argument map: `map[k] = map[k] + s`.
    MapStringAppend,
    /// Merges the argument document into a document as JSON Merge Patch does (a dynamic
    /// space's put): see `tessera_types::document`.
    Merge,
}

impl FuncallOp {
    /// The HyperDex-style name of this operation, for messages.
    pub fn name(self) -> String {
        match self {
            FuncallOp::Set => "set".into(),
            FuncallOp::Num(op) => format!("atomic_{}", op.name()),
            FuncallOp::StringPrepend => "string_prepend".into(),
            FuncallOp::StringAppend => "string_append".into(),
            FuncallOp::ListLPush => "list_lpush".into(),
            FuncallOp::ListRPush => "list_rpush".into(),
            FuncallOp::SetAdd => "set_add".into(),
            FuncallOp::SetRemove => "set_remove".into(),
            FuncallOp::SetUnion => "set_union".into(),
            FuncallOp::SetIntersect => "set_intersect".into(),
            FuncallOp::MapAdd => "map_add".into(),
            FuncallOp::MapRemove => "map_remove".into(),
            FuncallOp::MapNum(op) => format!("map_atomic_{}", op.name()),
            FuncallOp::MapStringPrepend => "map_string_prepend".into(),
            FuncallOp::MapStringAppend => "map_string_append".into(),
            FuncallOp::Merge => "merge".into(),
        }
    }
}

/// One change to one attribute, as a user writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Funcall {
    pub attr: String,
    pub op: FuncallOp,
    pub arg: Value,
}

impl Funcall {
    pub fn set(attr: impl Into<String>, value: impl Into<Value>) -> Funcall {
        Funcall {
            attr: attr.into(),
            op: FuncallOp::Set,
            arg: value.into(),
        }
    }

    /// A dynamic space's put: merges `patch` into the key's document (JSON Merge Patch).
    pub fn merge(patch: crate::document::Document) -> Funcall {
        Funcall {
            attr: crate::schema::DOCUMENT_ATTRIBUTE.to_owned(),
            op: FuncallOp::Merge,
            arg: Value::Document(patch),
        }
    }

    pub fn new(attr: impl Into<String>, op: FuncallOp, arg: impl Into<Value>) -> Funcall {
        Funcall {
            attr: attr.into(),
            op,
            arg: arg.into(),
        }
    }
}

/// Why a funcall does not fit the space. Nothing has been changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FuncallCheckError {
    #[error("unknown attribute {0:?}")]
    UnknownAttribute(String),
    #[error("the key {0:?} cannot be changed: delete the object and put a new one")]
    KeyImmutable(String),
    #[error("{op} does not apply to attribute {attr:?} of type {ty}")]
    NotApplicable {
        attr: String,
        ty: AttributeType,
        op: String,
    },
    #[error("{op} on attribute {attr:?} of type {ty} needs a {expected} argument, got a {given}")]
    WrongType {
        attr: String,
        ty: AttributeType,
        op: String,
        expected: String,
        given: &'static str,
    },
    #[error("too many funcalls: {0} (at most {FUNCALLS_MAX})")]
    TooMany(usize),
    #[error("{0}")]
    BadDocument(DocumentError),
}

impl FuncallCheckError {
    /// Whether this is an atomic operation (anything but a plain assignment) that does not fit
    /// its attribute's type or was given an argument of the wrong type. HyperDex, and Tessera,
    /// report those as a failed comparison, like an overflow: the operation cannot apply.
    pub fn is_atomic_mismatch(&self) -> bool {
        match self {
            FuncallCheckError::NotApplicable { op, .. }
            | FuncallCheckError::WrongType { op, .. } => op != "set",
            _ => false,
        }
    }
}

/// Why a checked funcall could not be applied to the current value. Nothing has been changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum FuncallError {
    #[error("integer overflow")]
    Overflow,
    #[error("division by zero")]
    DivideByZero,
    #[error("the result is not a number")]
    NotANumber,
    #[error("the merged document would have more than {DOCUMENT_PROPERTIES_MAX} properties")]
    TooManyProperties,
    #[error("the merged document's property paths would take {0} bytes together (at most {SHAPE_BYTES_MAX})")]
    ShapeTooLarge(usize),
}

impl FuncallError {
    /// Whether the update is refused for the size of its result rather than its values.
    pub fn is_size(&self) -> bool {
        matches!(
            self,
            FuncallError::TooManyProperties | FuncallError::ShapeTooLarge(_)
        )
    }
}

/// A funcall validated against a schema.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedFuncall {
    pub attr: AttrIndex,
    pub op: FuncallOp,
    pub arg: Value,
}

impl CheckedFuncall {
    pub fn check(schema: &SpaceSchema, f: &Funcall) -> Result<CheckedFuncall, FuncallCheckError> {
        let attr = schema
            .attribute_index(&f.attr)
            .ok_or_else(|| FuncallCheckError::UnknownAttribute(f.attr.clone()))?;
        if attr == AttrIndex::KEY {
            return Err(FuncallCheckError::KeyImmutable(f.attr.clone()));
        }
        let ty = schema.attribute(attr).ty;
        let not_applicable = || FuncallCheckError::NotApplicable {
            attr: f.attr.clone(),
            ty,
            op: f.op.name(),
        };
        let wrong_type = |expected: String| FuncallCheckError::WrongType {
            attr: f.attr.clone(),
            ty,
            op: f.op.name(),
            expected,
            given: f.arg.kind_name(),
        };
        let prim = |p: PrimitiveType| {
            coerce_primitive(p, f.arg.clone()).ok_or_else(|| wrong_type(p.name().into()))
        };
        let whole = |t: AttributeType| {
            t.coerce(f.arg.clone())
                .ok_or_else(|| wrong_type(t.to_string()))
        };
        let numeric = |p: PrimitiveType, op: NumOp| {
            p != PrimitiveType::String && !(op.is_bitwise() && p == PrimitiveType::Float)
        };
        let document = |patch: bool| match &f.arg {
            Value::Document(d) => {
                let checked = if patch { d.check_patch() } else { d.check() };
                checked.map_err(FuncallCheckError::BadDocument)?;
                // Documents read back with their key under its name beside their properties.
                let key = &schema.key().name;
                if d.properties.contains_key(key) {
                    return Err(FuncallCheckError::BadDocument(DocumentError::KeyProperty(
                        key.clone(),
                    )));
                }
                Ok(f.arg.clone())
            }
            _ => Err(wrong_type("document".into())),
        };
        use AttributeType as T;
        let arg = match (f.op, ty) {
            (FuncallOp::Set, T::Document) => document(false)?,
            (FuncallOp::Merge, T::Document) => document(true)?,
            (FuncallOp::Set, t) => whole(t)?,
            (FuncallOp::Num(op), T::Primitive(p)) if numeric(p, op) => prim(p)?,
            (
                FuncallOp::StringPrepend | FuncallOp::StringAppend,
                T::Primitive(PrimitiveType::String),
            ) => prim(PrimitiveType::String)?,
            (FuncallOp::ListLPush | FuncallOp::ListRPush, T::List(p)) => prim(p)?,
            (FuncallOp::SetAdd | FuncallOp::SetRemove, T::Set(p)) => prim(p)?,
            (FuncallOp::SetUnion | FuncallOp::SetIntersect, T::Set(_)) => whole(ty)?,
            (FuncallOp::MapAdd, T::Map(_, _)) => whole(ty)?,
            (FuncallOp::MapRemove, T::Map(k, _)) => prim(k)?,
            (FuncallOp::MapNum(op), T::Map(_, v)) if numeric(v, op) => whole(ty)?,
            (
                FuncallOp::MapStringPrepend | FuncallOp::MapStringAppend,
                T::Map(_, PrimitiveType::String),
            ) => whole(ty)?,
            _ => return Err(not_applicable()),
        };
        Ok(CheckedFuncall {
            attr,
            op: f.op,
            arg,
        })
    }

    pub fn check_all(
        schema: &SpaceSchema,
        funcalls: &[Funcall],
    ) -> Result<Vec<CheckedFuncall>, FuncallCheckError> {
        if funcalls.len() > crate::constants::FUNCALLS_MAX {
            return Err(FuncallCheckError::TooMany(funcalls.len()));
        }
        funcalls
            .iter()
            .map(|f| CheckedFuncall::check(schema, f))
            .collect()
    }

    /// Applies this funcall to `object` in place. On error `object` is unchanged.
    pub fn apply(&self, object: &mut Object) -> Result<(), FuncallError> {
        let slot = &mut object.values[self.attr.get()];
        let new = match (self.op, &*slot, &self.arg) {
            (FuncallOp::Set, _, arg) => arg.clone(),
            (FuncallOp::Num(op), current, arg) => op.apply(current, arg)?,
            (FuncallOp::StringPrepend, Value::String(s), Value::String(a)) => {
                Value::String(ByteString::concat(a, s))
            }
            (FuncallOp::StringAppend, Value::String(s), Value::String(a)) => {
                Value::String(ByteString::concat(s, a))
            }
            (FuncallOp::ListLPush, Value::List(l), a) => {
                let mut l2 = Vec::with_capacity(l.len() + 1);
                l2.push(a.clone());
                l2.extend(l.iter().cloned());
                Value::List(l2)
            }
            (FuncallOp::ListRPush, Value::List(l), a) => {
                let mut l2 = l.clone();
                l2.push(a.clone());
                Value::List(l2)
            }
            (FuncallOp::SetAdd, Value::Set(s), a) => {
                let mut s2 = s.clone();
                s2.insert(a.clone());
                Value::Set(s2)
            }
            (FuncallOp::SetRemove, Value::Set(s), a) => {
                let mut s2 = s.clone();
                s2.remove(a);
                Value::Set(s2)
            }
            (FuncallOp::SetUnion, Value::Set(s), Value::Set(a)) => {
                Value::Set(s.union(a).cloned().collect())
            }
            (FuncallOp::SetIntersect, Value::Set(s), Value::Set(a)) => {
                Value::Set(s.intersection(a).cloned().collect())
            }
            (FuncallOp::MapAdd, Value::Map(m), Value::Map(a)) => {
                let mut m2 = m.clone();
                m2.extend(a.iter().map(|(k, v)| (k.clone(), v.clone())));
                Value::Map(m2)
            }
            (FuncallOp::MapRemove, Value::Map(m), k) => {
                let mut m2 = m.clone();
                m2.remove(k);
                Value::Map(m2)
            }
            (FuncallOp::MapNum(op), Value::Map(m), Value::Map(a)) => {
                let mut m2: BTreeMap<Value, Value> = m.clone();
                for (k, v) in a {
                    let zero = match v {
                        Value::Float(_) => Value::Float(0.0),
                        _ => Value::Int(0),
                    };
                    let current = m2.get(k).cloned().unwrap_or(zero);
                    m2.insert(k.clone(), op.apply(&current, v)?);
                }
                Value::Map(m2)
            }
            (
                FuncallOp::MapStringPrepend | FuncallOp::MapStringAppend,
                Value::Map(m),
                Value::Map(a),
            ) => {
                let mut m2 = m.clone();
                for (k, v) in a {
                    let (Value::String(add), current) = (
                        v,
                        m2.get(k)
                            .cloned()
                            .unwrap_or(Value::String(ByteString::default())),
                    ) else {
                        unreachable!("checked: map of strings")
                    };
                    let Value::String(cur) = current else {
                        unreachable!("stored map of strings")
                    };
                    let joined = if self.op == FuncallOp::MapStringPrepend {
                        ByteString::concat(add, &cur)
                    } else {
                        ByteString::concat(&cur, add)
                    };
                    m2.insert(k.clone(), Value::String(joined));
                }
                Value::Map(m2)
            }
            (FuncallOp::Merge, Value::Document(d), Value::Document(patch)) => {
                let mut merged = d.clone();
                merged.merge(patch);
                let (mut count, mut bytes) = (0usize, 0usize);
                merged.for_each_property(|path, _| {
                    count += 1;
                    bytes += crate::document::shape_bytes_of(path);
                });
                if count > DOCUMENT_PROPERTIES_MAX {
                    return Err(FuncallError::TooManyProperties);
                }
                if bytes > SHAPE_BYTES_MAX {
                    return Err(FuncallError::ShapeTooLarge(bytes));
                }
                Value::Document(merged)
            }
            _ => unreachable!(
                "checked funcall {:?} against stored value {:?}",
                self.op, slot
            ),
        };
        *slot = new;
        Ok(())
    }
}

/// Applies a whole update to `object`: all funcalls or, on the first error, none.
pub fn apply_all(funcalls: &[CheckedFuncall], object: &Object) -> Result<Object, FuncallError> {
    let mut next = object.clone();
    for f in funcalls {
        f.apply(&mut next)?;
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_space;

    fn schema() -> SpaceSchema {
        parse_space(
            "space t key k attributes int i, float f, string s, list(int) l, set(string) st, map(string, int) m, map(string, string) ms",
        )
        .unwrap()
    }

    fn run(funcalls: &[Funcall]) -> Result<Object, FuncallError> {
        let s = schema();
        let checked = CheckedFuncall::check_all(&s, funcalls).unwrap();
        apply_all(&checked, &Object::with_defaults(&s, Value::from("k")))
    }

    #[test]
    fn every_family_applies() {
        use FuncallOp::*;
        let o = run(&[
            Funcall::set("i", 7i64),
            Funcall::new("i", Num(NumOp::Mul), 6i64),
            Funcall::new("i", Num(NumOp::Xor), 1i64),
            Funcall::new("f", Num(NumOp::Add), 1i64),
            Funcall::new("f", Num(NumOp::Div), 4.0),
            Funcall::set("s", "mid"),
            Funcall::new("s", StringPrepend, "pre-"),
            Funcall::new("s", StringAppend, "-post"),
            Funcall::new("l", ListRPush, 2i64),
            Funcall::new("l", ListLPush, 1i64),
            Funcall::new("st", SetAdd, "a"),
            Funcall::new("st", SetUnion, Value::List(vec!["b".into(), "c".into()])),
            Funcall::new("st", SetRemove, "b"),
            Funcall::new(
                "m",
                MapAdd,
                Value::Map([("x".into(), 1i64.into())].into_iter().collect()),
            ),
            Funcall::new(
                "m",
                MapNum(NumOp::Add),
                Value::Map(
                    [("x".into(), 2i64.into()), ("y".into(), 5i64.into())]
                        .into_iter()
                        .collect(),
                ),
            ),
            Funcall::new("m", MapRemove, "y"),
            Funcall::new(
                "ms",
                MapStringAppend,
                Value::Map([("a".into(), "z".into())].into_iter().collect()),
            ),
        ])
        .unwrap();
        assert_eq!(o.values[1], Value::Int(43));
        assert_eq!(o.values[2], Value::Float(0.25));
        assert_eq!(o.values[3], Value::from("pre-mid-post"));
        assert_eq!(o.values[4], Value::List(vec![1i64.into(), 2i64.into()]));
        assert_eq!(
            o.values[5],
            Value::Set(["a".into(), "c".into()].into_iter().collect())
        );
        assert_eq!(
            o.values[6],
            Value::Map([("x".into(), 3i64.into())].into_iter().collect())
        );
        assert_eq!(
            o.values[7],
            Value::Map([("a".into(), "z".into())].into_iter().collect())
        );
    }

    #[test]
    fn data_dependent_failures_are_clean() {
        use FuncallOp::*;
        assert_eq!(
            run(&[
                Funcall::set("i", i64::MAX),
                Funcall::new("i", Num(NumOp::Add), 1i64)
            ]),
            Err(FuncallError::Overflow)
        );
        assert_eq!(
            run(&[
                Funcall::set("i", i64::MIN),
                Funcall::new("i", Num(NumOp::Div), -1i64)
            ]),
            Err(FuncallError::Overflow)
        );
        assert_eq!(
            run(&[Funcall::new("i", Num(NumOp::Mod), 0i64)]),
            Err(FuncallError::DivideByZero)
        );
        assert_eq!(
            run(&[Funcall::new("f", Num(NumOp::Div), 0.0)]),
            Err(FuncallError::NotANumber)
        );
    }

    #[test]
    fn mismatches_are_refused_before_applying() {
        use FuncallOp::*;
        let s = schema();
        let check = |f: Funcall| CheckedFuncall::check(&s, &f);
        assert!(matches!(
            check(Funcall::new("s", Num(NumOp::Add), 1i64)),
            Err(FuncallCheckError::NotApplicable { .. })
        ));
        assert!(matches!(
            check(Funcall::new("f", Num(NumOp::And), 1i64)),
            Err(FuncallCheckError::NotApplicable { .. })
        ));
        assert!(matches!(
            check(Funcall::new("i", Num(NumOp::Add), "x")),
            Err(FuncallCheckError::WrongType { .. })
        ));
        assert!(matches!(
            check(Funcall::new("l", ListRPush, "x")),
            Err(FuncallCheckError::WrongType { .. })
        ));
        assert!(matches!(
            check(Funcall::set("k", "other")),
            Err(FuncallCheckError::KeyImmutable(_))
        ));
        assert!(check(Funcall::new("s", Num(NumOp::Add), 1i64))
            .unwrap_err()
            .is_atomic_mismatch());
        assert!(check(Funcall::new("i", Num(NumOp::Add), "x"))
            .unwrap_err()
            .is_atomic_mismatch());
        assert!(!check(Funcall::set("i", "x"))
            .unwrap_err()
            .is_atomic_mismatch());
        assert!(matches!(
            check(Funcall::set("nope", 1i64)),
            Err(FuncallCheckError::UnknownAttribute(_))
        ));
        assert!(matches!(
            check(Funcall::new(
                "ms",
                MapNum(NumOp::Add),
                Value::Map(Default::default())
            )),
            Err(FuncallCheckError::NotApplicable { .. })
        ));
    }
}
