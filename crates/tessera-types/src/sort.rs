//! What a sorted search orders by: a typed space's primitive attribute, or a dynamic space's
//! property path.
//!
//! In a dynamic space a property may hold a string in one document and a number in another,
//! or be absent: documents without a string, int or float at the path are left out of the
//! ordering (a sorted search returns only documents it can rank), numbers come before
//! strings, ints and floats compare by value exactly, strings bytewise.

use std::cmp::Ordering;

use crate::document::{check_path, int_float_cmp, DocValue};
use crate::object::Object;
use crate::schema::{AttrIndex, SortError, SpaceSchema, DOCUMENT_INDEX};
use crate::value::Value;

/// What a sorted search orders by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SortKey {
    /// A typed space's primitive attribute.
    Attribute(AttrIndex),
    /// A dynamic space's property.
    Path(String),
}

/// The value an object is ranked by (see the module documentation for the order).
#[derive(Clone, Debug)]
pub enum SortValue {
    Attribute(Value),
    Number(DocValue),
    Text(String),
}

impl SortKey {
    /// The key a sorted search of `schema` by `name` orders by.
    pub fn of(schema: &SpaceSchema, name: &str) -> Result<SortKey, SortError> {
        if schema.is_dynamic() {
            check_path(name).map_err(|e| SortError::BadPath(e.to_string()))?;
            return Ok(SortKey::Path(name.to_owned()));
        }
        let attr = schema
            .attribute_index(name)
            .ok_or_else(|| SortError::UnknownAttribute(name.to_owned()))?;
        if !schema.attribute(attr).ty.is_primitive() {
            return Err(SortError::NotSortable(name.to_owned()));
        }
        Ok(SortKey::Attribute(attr))
    }

    /// The value the object of attribute values `values` (key first) ranks by, or `None`
    /// when it has none to rank by.
    pub fn rank(&self, values: &[Value]) -> Option<SortValue> {
        match self {
            SortKey::Attribute(a) => values.get(a.get()).cloned().map(SortValue::Attribute),
            SortKey::Path(path) => match values.get(DOCUMENT_INDEX.get())? {
                Value::Document(d) => match d.get(path)? {
                    v @ (DocValue::Int(_) | DocValue::Float(_)) => {
                        Some(SortValue::Number(v.clone()))
                    }
                    DocValue::String(s) => Some(SortValue::Text(s.clone())),
                    _ => None,
                },
                _ => None,
            },
        }
    }

    /// [`SortKey::rank`] of an object.
    pub fn rank_object(&self, object: &Object) -> Option<SortValue> {
        self.rank(&object.values)
    }
}

impl SortValue {
    fn class(&self) -> u8 {
        match self {
            SortValue::Attribute(_) => 0,
            SortValue::Number(_) => 1,
            SortValue::Text(_) => 2,
        }
    }
}

impl PartialEq for SortValue {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SortValue {}

impl PartialOrd for SortValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SortValue {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (SortValue::Attribute(a), SortValue::Attribute(b)) => a.cmp(b),
            (SortValue::Text(a), SortValue::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (SortValue::Number(a), SortValue::Number(b)) => match (a, b) {
                (DocValue::Int(x), DocValue::Int(y)) => x.cmp(y),
                (DocValue::Float(x), DocValue::Float(y)) => x.total_cmp(y),
                (DocValue::Int(x), DocValue::Float(y)) => {
                    int_float_cmp(*x, *y).unwrap_or(Ordering::Less)
                }
                (DocValue::Float(x), DocValue::Int(y)) => int_float_cmp(*y, *x)
                    .map(Ordering::reverse)
                    .unwrap_or(Ordering::Greater),
                _ => unreachable!("SortKey::rank makes numbers of ints and floats only"),
            },
            _ => self.class().cmp(&other.class()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Document;
    use crate::parse::parse_space;

    #[test]
    fn documents_rank_numbers_then_strings_and_skip_the_rest() {
        let s = parse_space("space p dynamic key id").unwrap();
        let key = SortKey::of(&s, "n").unwrap();
        let object = |v: Option<DocValue>| {
            let mut d = Document::default();
            if let Some(v) = v {
                d.properties.insert("n".into(), v);
            }
            vec![Value::from("k"), Value::Document(d)]
        };
        let mut ranked: Vec<SortValue> = [
            Some(DocValue::String("b".into())),
            Some(DocValue::Float(2.5)),
            Some(DocValue::Int(3)),
            Some(DocValue::Int(2)),
            Some(DocValue::String("a".into())),
            Some(DocValue::Bool(true)),
            None,
        ]
        .into_iter()
        .filter_map(|v| key.rank(&object(v)))
        .collect();
        ranked.sort();
        assert_eq!(
            ranked,
            vec![
                SortValue::Number(DocValue::Int(2)),
                SortValue::Number(DocValue::Float(2.5)),
                SortValue::Number(DocValue::Int(3)),
                SortValue::Text("a".into()),
                SortValue::Text("b".into()),
            ]
        );
        assert!(matches!(
            SortKey::of(&s, "a..b"),
            Err(SortError::BadPath(_))
        ));
    }
}
