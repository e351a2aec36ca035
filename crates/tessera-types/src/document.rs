//! Documents: the objects of a dynamic space (docs/design.md §9, seed 004).
//!
//! A document is a JSON object: named properties whose values are strings, ints, floats,
//! bools, lists of anything, or nested documents. A property is addressed by its *path*, the
//! names from the top joined by dots (`venue.name`); a list's elements have no path (a
//! predicate sees the list as a whole). Property names are non-empty and hold no dot, so a
//! path names one property and only one.
//!
//! A document's *shape* is the set of its paths, each with the kind of value it holds. Shapes
//! are what a dynamic space's formula store indexes: a search plans one box per shape that
//! can hold matches, and a structural query (`exists`, `missing`) is answered from shapes
//! alone.
//!
//! Puts merge a patch into the stored document the way JSON Merge Patch (RFC 7396) does: a
//! property of the patch replaces the stored one, a nested document merges into a nested
//! document, and `null` removes the property. So a stored document never holds `null` as a
//! property's value (a list may hold nulls: lists are values, not properties).

use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::constants::{
    DOCUMENT_NESTING_MAX, DOCUMENT_PROPERTIES_MAX, PATH_BYTES_MAX, PATH_DEPTH_MAX, SHAPE_BYTES_MAX,
};

/// A value inside a document.
///
/// Decoding is bounded in depth ([`DOCUMENT_NESTING_MAX`]): a frame of nested lists or
/// documents from the network must not exhaust the decoder's stack.
#[derive(Clone, Debug, Serialize)]
pub enum DocValue {
    /// Only in lists and in patches (where it removes a property).
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    List(Vec<DocValue>),
    Object(BTreeMap<String, DocValue>),
}

/// How `DocValue` decodes: the same variants, each nested value decoded through the depth
/// guard of `DocValue`'s own `Deserialize`.
#[derive(Deserialize)]
#[serde(rename = "DocValue")]
enum DocValueRepr {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    List(Vec<DocValue>),
    Object(BTreeMap<String, DocValue>),
}

thread_local! {
    /// Nesting of the `DocValue` being decoded on this thread.
    static DECODING_DEPTH: Cell<usize> = const { Cell::new(0) };
}

impl<'de> Deserialize<'de> for DocValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<DocValue, D::Error> {
        struct Level;
        impl Drop for Level {
            fn drop(&mut self) {
                DECODING_DEPTH.with(|c| c.set(c.get() - 1));
            }
        }
        let depth = DECODING_DEPTH.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        let _level = Level;
        if depth > DOCUMENT_NESTING_MAX {
            return Err(serde::de::Error::custom(format!(
                "a document nested more than {DOCUMENT_NESTING_MAX} levels deep"
            )));
        }
        Ok(match DocValueRepr::deserialize(d)? {
            DocValueRepr::Null => DocValue::Null,
            DocValueRepr::Bool(b) => DocValue::Bool(b),
            DocValueRepr::Int(i) => DocValue::Int(i),
            DocValueRepr::Float(f) => DocValue::Float(f),
            DocValueRepr::String(s) => DocValue::String(s),
            DocValueRepr::List(l) => DocValue::List(l),
            DocValueRepr::Object(o) => DocValue::Object(o),
        })
    }
}

/// A document: the top level of a dynamic space's object.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Document {
    pub properties: BTreeMap<String, DocValue>,
}

/// The kind of value a path holds in a document: what a shape records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PropertyKind {
    String,
    Int,
    Float,
    Bool,
    List,
    /// A nested document (its own properties have paths of their own).
    Object,
}

impl PropertyKind {
    pub fn name(self) -> &'static str {
        match self {
            PropertyKind::String => "string",
            PropertyKind::Int => "int",
            PropertyKind::Float => "float",
            PropertyKind::Bool => "bool",
            PropertyKind::List => "list",
            PropertyKind::Object => "object",
        }
    }

    /// Whether a value of this kind has a coordinate: only these can place a document in
    /// its space (as string, int and float attributes do in a typed space).
    pub fn is_coordinate(self) -> bool {
        matches!(
            self,
            PropertyKind::String | PropertyKind::Int | PropertyKind::Float
        )
    }
}

impl fmt::Display for PropertyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The paths of a document with the kind of value each holds, sorted by path, and the
/// compression formula that places it (`""`: the default). Two documents with the same paths
/// of the same kinds under one formula have equal shapes, whatever their values: a search
/// reads a formula's subspaces for the shapes of that formula's documents only.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Shape {
    pub properties: Vec<(String, PropertyKind)>,
    pub formula: String,
}

/// Why a document, patch, path or shape is refused. Nothing is stored then.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum DocumentError {
    #[error("property name {0:?} is not valid: names are non-empty and hold no '.' (paths join names with dots)")]
    BadName(String),
    #[error("path {path:?} is {depth} levels deep (at most {PATH_DEPTH_MAX})")]
    TooDeep { path: String, depth: usize },
    #[error("path {0:?} is longer than {PATH_BYTES_MAX} bytes")]
    PathTooLong(String),
    #[error(
        "the document has {0} properties, nested ones included (at most {DOCUMENT_PROPERTIES_MAX})"
    )]
    TooManyProperties(usize),
    #[error("the document's property paths take {0} bytes together (at most {SHAPE_BYTES_MAX}, each path counted with 2 more): use shorter names or fewer properties")]
    ShapeTooLarge(usize),
    #[error("property {0:?} is a float NaN: NaN has no order and no coordinate")]
    NaN(String),
    #[error("property {0:?} is null: a stored document has no null properties (in a put, null removes the property)")]
    NullProperty(String),
    #[error("shape is not valid: {0}")]
    BadShape(String),
    #[error("property {0:?} is the space's key: give the key as the key, not in the document")]
    KeyProperty(String),
}

impl DocValue {
    pub fn kind(&self) -> Option<PropertyKind> {
        Some(match self {
            DocValue::Null => return None,
            DocValue::Bool(_) => PropertyKind::Bool,
            DocValue::Int(_) => PropertyKind::Int,
            DocValue::Float(_) => PropertyKind::Float,
            DocValue::String(_) => PropertyKind::String,
            DocValue::List(_) => PropertyKind::List,
            DocValue::Object(_) => PropertyKind::Object,
        })
    }

    pub fn kind_name(&self) -> &'static str {
        self.kind().map_or("null", PropertyKind::name)
    }

    /// Length as the length predicates see it: bytes of a string, elements of a list,
    /// properties of a nested document.
    pub fn length(&self) -> Option<u64> {
        match self {
            DocValue::String(s) => Some(s.len() as u64),
            DocValue::List(l) => Some(l.len() as u64),
            DocValue::Object(o) => Some(o.len() as u64),
            _ => None,
        }
    }

    fn rank(&self) -> u8 {
        match self {
            DocValue::Null => 0,
            DocValue::Bool(_) => 1,
            DocValue::Int(_) => 2,
            DocValue::Float(_) => 3,
            DocValue::String(_) => 4,
            DocValue::List(_) => 5,
            DocValue::Object(_) => 6,
        }
    }
}

/// An int against a float, exactly (no rounding of large ints). `None` for NaN.
pub(crate) fn int_float_cmp(i: i64, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    // Every i64 lies in [-2^63, 2^63); a float outside it compares by its sign.
    if f >= 9_223_372_036_854_775_808.0 {
        return Some(Ordering::Less);
    }
    if f < -9_223_372_036_854_775_808.0 {
        return Some(Ordering::Greater);
    }
    let t = f.trunc();
    // `t` is an integer in i64's range, so the cast is exact.
    match i.cmp(&(t as i64)) {
        Ordering::Equal if f > t => Some(Ordering::Less),
        Ordering::Equal if f < t => Some(Ordering::Greater),
        other => Some(other),
    }
}

impl PartialEq for DocValue {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for DocValue {}

impl PartialOrd for DocValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DocValue {
    /// A total order (floats by IEEE-754 total order, kinds by rank) so that documents can
    /// be values of sets and map keys like any other value.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (DocValue::Bool(a), DocValue::Bool(b)) => a.cmp(b),
            (DocValue::Int(a), DocValue::Int(b)) => a.cmp(b),
            (DocValue::Float(a), DocValue::Float(b)) => a.total_cmp(b),
            (DocValue::String(a), DocValue::String(b)) => a.as_bytes().cmp(b.as_bytes()),
            (DocValue::List(a), DocValue::List(b)) => a.cmp(b),
            (DocValue::Object(a), DocValue::Object(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// Checks a path as a query or a formula names it: dot-separated non-empty names, not too
/// deep, not too long.
/// What one property path adds to a shape's bytes ([`SHAPE_BYTES_MAX`]).
pub fn shape_bytes_of(path: &str) -> usize {
    path.len() + 2
}

pub fn check_path(path: &str) -> Result<(), DocumentError> {
    if path.len() > PATH_BYTES_MAX {
        return Err(DocumentError::PathTooLong(
            path.chars().take(64).collect::<String>() + "...",
        ));
    }
    let depth = path.split('.').count();
    if depth > PATH_DEPTH_MAX {
        return Err(DocumentError::TooDeep {
            path: path.to_owned(),
            depth,
        });
    }
    if path.split('.').any(str::is_empty) {
        return Err(DocumentError::BadName(path.to_owned()));
    }
    Ok(())
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

impl Document {
    pub fn new(properties: BTreeMap<String, DocValue>) -> Document {
        Document { properties }
    }

    /// The value at `path`, if the document has it.
    pub fn get(&self, path: &str) -> Option<&DocValue> {
        let mut names = path.split('.');
        let mut value = self.properties.get(names.next()?)?;
        for name in names {
            match value {
                DocValue::Object(o) => value = o.get(name)?,
                _ => return None,
            }
        }
        Some(value)
    }

    /// The document with only the properties at `paths` (each with all it holds, and its
    /// parents as nested documents holding only what leads to it); paths it lacks are left out.
    pub fn project<'a>(&self, paths: impl IntoIterator<Item = &'a str>) -> Document {
        let mut projected = Document::default();
        for path in paths {
            let Some(value) = self.get(path) else {
                continue;
            };
            let mut names = path.split('.').peekable();
            let mut level = &mut projected.properties;
            while let Some(name) = names.next() {
                if names.peek().is_none() {
                    level.insert(name.to_owned(), value.clone());
                    break;
                }
                let parent = level
                    .entry(name.to_owned())
                    .or_insert_with(|| DocValue::Object(BTreeMap::new()));
                match parent {
                    DocValue::Object(o) => level = o,
                    // A parent taken whole already holds this path.
                    _ => break,
                }
            }
        }
        projected
    }

    /// Calls `f` with every path of the document and its value, parents before children,
    /// in path order within each level.
    pub fn for_each_property(&self, mut f: impl FnMut(&str, &DocValue)) {
        fn walk(
            prefix: &str,
            properties: &BTreeMap<String, DocValue>,
            f: &mut impl FnMut(&str, &DocValue),
        ) {
            for (name, value) in properties {
                let path = join(prefix, name);
                f(&path, value);
                if let DocValue::Object(o) = value {
                    walk(&path, o, f);
                }
            }
        }
        walk("", &self.properties, &mut f);
    }

    /// The document's shape.
    pub fn shape(&self) -> Shape {
        let mut properties = Vec::new();
        self.for_each_property(|path, value| {
            if let Some(kind) = value.kind() {
                properties.push((path.to_owned(), kind));
            }
        });
        properties.sort();
        Shape {
            properties,
            formula: String::new(),
        }
    }

    /// The document's shape under formula `formula`.
    pub fn shape_in(&self, formula: &str) -> Shape {
        Shape {
            formula: formula.to_owned(),
            ..self.shape()
        }
    }

    /// Checks a document to be stored: valid names, bounded depth and property count, no
    /// NaN anywhere, no null property.
    pub fn check(&self) -> Result<(), DocumentError> {
        self.check_as(false)
    }

    /// Checks a patch: as [`Document::check`], but a property may be null (to remove it).
    pub fn check_patch(&self) -> Result<(), DocumentError> {
        self.check_as(true)
    }

    fn check_as(&self, patch: bool) -> Result<(), DocumentError> {
        let mut bad_name = None;
        check_names(&self.properties, &mut bad_name);
        if let Some(name) = bad_name {
            return Err(DocumentError::BadName(name));
        }
        let (mut count, mut bytes, mut error) = (0usize, 0usize, None);
        self.for_each_property(|path, value| {
            count += 1;
            bytes += shape_bytes_of(path);
            if error.is_none() {
                error = check_path(path).err().or_else(|| match value {
                    DocValue::Null if !patch => Some(DocumentError::NullProperty(path.to_owned())),
                    v if contains_nan(v) => Some(DocumentError::NaN(path.to_owned())),
                    _ => None,
                });
            }
        });
        if let Some(e) = error {
            return Err(e);
        }
        if count > DOCUMENT_PROPERTIES_MAX {
            return Err(DocumentError::TooManyProperties(count));
        }
        if bytes > SHAPE_BYTES_MAX {
            return Err(DocumentError::ShapeTooLarge(bytes));
        }
        Ok(())
    }

    /// Whether a float NaN lies anywhere in the document.
    pub fn contains_nan(&self) -> bool {
        let mut nan = false;
        self.for_each_property(|_, v| nan |= contains_nan(v));
        nan
    }

    /// Applies `patch` as JSON Merge Patch does (RFC 7396): see the module documentation.
    pub fn merge(&mut self, patch: &Document) {
        merge_into(&mut self.properties, &patch.properties);
    }
}

fn check_names(properties: &BTreeMap<String, DocValue>, bad: &mut Option<String>) {
    for (name, value) in properties {
        if bad.is_some() {
            return;
        }
        if name.is_empty() || name.contains('.') {
            *bad = Some(name.clone());
            return;
        }
        if let DocValue::Object(o) = value {
            check_names(o, bad);
        }
    }
}

fn contains_nan(value: &DocValue) -> bool {
    match value {
        DocValue::Float(f) => f.is_nan(),
        DocValue::List(items) => items.iter().any(contains_nan),
        // A nested document's own properties are checked as properties.
        _ => false,
    }
}

fn merge_into(target: &mut BTreeMap<String, DocValue>, patch: &BTreeMap<String, DocValue>) {
    for (name, value) in patch {
        match value {
            DocValue::Null => {
                target.remove(name);
            }
            DocValue::Object(p) => {
                let entry = target
                    .entry(name.clone())
                    .or_insert_with(|| DocValue::Object(BTreeMap::new()));
                if !matches!(entry, DocValue::Object(_)) {
                    *entry = DocValue::Object(BTreeMap::new());
                }
                if let DocValue::Object(t) = entry {
                    merge_into(t, p);
                }
            }
            other => {
                target.insert(name.clone(), other.clone());
            }
        }
    }
}

impl Shape {
    /// The kind of value `path` holds in documents of this shape, if they have it.
    pub fn kind_of(&self, path: &str) -> Option<PropertyKind> {
        self.properties
            .binary_search_by(|(p, _)| p.as_str().cmp(path))
            .ok()
            .map(|i| self.properties[i].1)
    }

    pub fn has(&self, path: &str) -> bool {
        self.kind_of(path).is_some()
    }

    /// The paths whose values have coordinates, in path order.
    pub fn coordinate_paths(&self) -> impl Iterator<Item = (&str, PropertyKind)> {
        self.properties
            .iter()
            .filter(|(_, k)| k.is_coordinate())
            .map(|(p, k)| (p.as_str(), *k))
    }

    /// Checks a shape received from the network: sorted unique valid paths, each nested
    /// path under a parent of kind object, at most as many as a document may have.
    pub fn check(&self) -> Result<(), DocumentError> {
        let bad = |why: String| Err(DocumentError::BadShape(why));
        if self.formula.len() > crate::constants::FORMULA_ID_BYTES_MAX {
            return bad(format!("formula id of {} bytes", self.formula.len()));
        }
        if self.properties.len() > DOCUMENT_PROPERTIES_MAX {
            return Err(DocumentError::TooManyProperties(self.properties.len()));
        }
        let bytes: usize = self.properties.iter().map(|(p, _)| shape_bytes_of(p)).sum();
        if bytes > SHAPE_BYTES_MAX {
            return Err(DocumentError::ShapeTooLarge(bytes));
        }
        for (i, (path, _)) in self.properties.iter().enumerate() {
            check_path(path)?;
            if i > 0 && self.properties[i - 1].0 >= *path {
                return bad(format!("paths are not sorted and unique at {path:?}"));
            }
            if let Some((parent, _)) = path.rsplit_once('.') {
                if self.kind_of(parent) != Some(PropertyKind::Object) {
                    return bad(format!("{path:?} has no parent object {parent:?}"));
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (path, kind)) in self.properties.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{path}: {kind}")?;
        }
        f.write_str("}")
    }
}

impl fmt::Display for DocValue {
    /// JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocValue::Null => f.write_str("null"),
            DocValue::Bool(b) => write!(f, "{b}"),
            DocValue::Int(i) => write!(f, "{i}"),
            DocValue::Float(x) => write!(f, "{x:?}"),
            DocValue::String(s) => write!(f, "{s:?}"),
            DocValue::List(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            DocValue::Object(o) => write_object(f, o),
        }
    }
}

fn write_object(f: &mut fmt::Formatter<'_>, o: &BTreeMap<String, DocValue>) -> fmt::Result {
    f.write_str("{")?;
    for (i, (k, v)) in o.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{k:?}: {v}")?;
    }
    f.write_str("}")
}

impl fmt::Display for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_object(f, &self.properties)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(pairs: &[(&str, DocValue)]) -> Document {
        Document::new(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }

    fn obj(pairs: &[(&str, DocValue)]) -> DocValue {
        DocValue::Object(doc(pairs).properties)
    }

    #[test]
    fn a_projection_keeps_the_paths_asked_for_and_their_parents_only() {
        let d = doc(&[
            ("title", DocValue::String("Dynamo".into())),
            (
                "venue",
                obj(&[
                    ("name", DocValue::String("SOSP".into())),
                    ("city", DocValue::String("Stevenson".into())),
                ]),
            ),
            ("tags", DocValue::List(vec![DocValue::Int(1)])),
        ]);
        let name_only = doc(&[("venue", obj(&[("name", DocValue::String("SOSP".into()))]))]);
        assert_eq!(d.project(["venue.name", "author", "title.x"]), name_only);
        // A parent asked for whole, before or after one of its children, comes whole.
        let whole = doc(&[("venue", d.get("venue").unwrap().clone())]);
        assert_eq!(d.project(["venue", "venue.name"]), whole);
        assert_eq!(d.project(["venue.name", "venue"]), whole);
        assert_eq!(
            d.project(["tags"]),
            doc(&[("tags", d.get("tags").unwrap().clone())])
        );
        assert_eq!(d.project([]), Document::default());
    }

    #[test]
    fn paths_shapes_and_get() {
        let d = doc(&[
            ("title", DocValue::String("Dynamo".into())),
            ("year", DocValue::Int(2007)),
            (
                "venue",
                obj(&[
                    ("name", DocValue::String("SOSP".into())),
                    ("pages", DocValue::List(vec![DocValue::Int(205)])),
                ]),
            ),
        ]);
        assert_eq!(d.get("venue.name"), Some(&DocValue::String("SOSP".into())));
        assert_eq!(d.get("venue.name.x"), None);
        assert_eq!(d.get("author"), None);
        let shape = d.shape();
        let paths: Vec<_> = shape.properties.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            ["title", "venue", "venue.name", "venue.pages", "year"]
        );
        assert_eq!(shape.kind_of("venue"), Some(PropertyKind::Object));
        assert_eq!(shape.kind_of("venue.pages"), Some(PropertyKind::List));
        let coords: Vec<_> = shape.coordinate_paths().map(|(p, _)| p).collect();
        assert_eq!(coords, ["title", "venue.name", "year"]);
        assert!(shape.check().is_ok());
        assert!(d.check().is_ok());
    }

    #[test]
    fn merge_patch_follows_rfc_7396() {
        let mut d = doc(&[
            ("a", DocValue::Int(1)),
            (
                "b",
                obj(&[("c", DocValue::Int(2)), ("d", DocValue::Int(3))]),
            ),
            ("e", DocValue::Int(4)),
        ]);
        d.merge(&doc(&[
            ("a", DocValue::Null),
            (
                "b",
                obj(&[("c", DocValue::Null), ("x", DocValue::Bool(true))]),
            ),
            ("e", obj(&[("f", DocValue::Null), ("g", DocValue::Int(5))])),
        ]));
        assert_eq!(
            d,
            doc(&[
                (
                    "b",
                    obj(&[("d", DocValue::Int(3)), ("x", DocValue::Bool(true))])
                ),
                ("e", obj(&[("g", DocValue::Int(5))])),
            ])
        );
    }

    #[test]
    fn bad_documents_are_refused() {
        assert!(matches!(
            doc(&[("a.b", DocValue::Int(1))]).check(),
            Err(DocumentError::BadName(_))
        ));
        assert!(matches!(
            doc(&[("", DocValue::Int(1))]).check(),
            Err(DocumentError::BadName(_))
        ));
        assert!(matches!(
            doc(&[("a", DocValue::Null)]).check(),
            Err(DocumentError::NullProperty(_))
        ));
        assert!(doc(&[("a", DocValue::Null)]).check_patch().is_ok());
        assert!(matches!(
            doc(&[("a", DocValue::List(vec![DocValue::Float(f64::NAN)]))]).check(),
            Err(DocumentError::NaN(_))
        ));
        let mut deep = DocValue::Int(1);
        for _ in 0..PATH_DEPTH_MAX {
            deep = obj(&[("n", deep)]);
        }
        assert!(matches!(
            doc(&[("n", deep)]).check(),
            Err(DocumentError::TooDeep { .. })
        ));
        let many: BTreeMap<String, DocValue> = (0..=DOCUMENT_PROPERTIES_MAX)
            .map(|i| (format!("p{i}"), DocValue::Int(i as i64)))
            .collect();
        assert!(matches!(
            Document::new(many).check(),
            Err(DocumentError::TooManyProperties(_))
        ));
    }

    #[test]
    fn shapes_from_the_network_are_checked() {
        let orphan = Shape {
            properties: vec![("a.b".into(), PropertyKind::Int)],
            formula: String::new(),
        };
        let long_formula = Shape {
            properties: vec![],
            formula: "f".repeat(crate::constants::FORMULA_ID_BYTES_MAX + 1),
        };
        assert!(matches!(
            long_formula.check(),
            Err(DocumentError::BadShape(_))
        ));
        assert!(matches!(orphan.check(), Err(DocumentError::BadShape(_))));
        let unsorted = Shape {
            formula: String::new(),
            properties: vec![
                ("b".into(), PropertyKind::Int),
                ("a".into(), PropertyKind::Int),
            ],
        };
        assert!(matches!(unsorted.check(), Err(DocumentError::BadShape(_))));
        assert!(matches!(check_path("a..b"), Err(DocumentError::BadName(_))));
    }
}
