//! The inverted index of a dynamic space's formula store (seed 004 §5): from each property
//! path to the shapes of document that have it and to the formulas whose overlays name it,
//! and from each formula to the shapes its documents have taken.
//!
//! A structural query is answered from it by set operations, not by testing every shape:
//! `exists(a)` is the shapes with `a`, `exists(a|b)` their union, `missing(a)` the complement,
//! and predicates together intersect. A value predicate takes the shapes with its property
//! and keeps those whose kind it can match. What remains are the shapes whose documents can
//! hold matches; a formula none of whose shapes remain costs a search nothing.
//!
//! Shapes and formulas are only ever added to a space, never removed, so an index built for
//! `n` shapes and `m` formulas still describes the first `n` and `m` of a later list: that is
//! how a cached index knows it is current ([`PropertyIndex::covers`]).

use std::collections::BTreeMap;

use tessera_types::{CheckedPredicate, PredicateOp, Shape, SpaceSchema};

use crate::dynamic::shape_can_match;

/// A set of shapes, by their place in the space's list of shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeSet {
    words: Vec<u64>,
    /// How many shapes the space has: members are `0..len`.
    len: usize,
}

impl ShapeSet {
    pub fn empty(len: usize) -> ShapeSet {
        ShapeSet {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    pub fn full(len: usize) -> ShapeSet {
        let mut set = ShapeSet::empty(len);
        for i in 0..len {
            set.insert(i);
        }
        set
    }

    pub fn insert(&mut self, shape: usize) {
        assert!(shape < self.len, "shape {shape} of {}", self.len);
        self.words[shape / 64] |= 1 << (shape % 64);
    }

    pub fn contains(&self, shape: usize) -> bool {
        shape < self.len && self.words[shape / 64] & (1 << (shape % 64)) != 0
    }

    pub fn intersect_with(&mut self, other: &ShapeSet) {
        assert_eq!(self.len, other.len);
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w &= o;
        }
    }

    pub fn union_with(&mut self, other: &ShapeSet) {
        assert_eq!(self.len, other.len);
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }

    /// The shapes not in the set.
    pub fn complement(&self) -> ShapeSet {
        let mut set = ShapeSet::empty(self.len);
        for i in (0..self.len).filter(|&i| !self.contains(i)) {
            set.insert(i);
        }
        set
    }

    /// The members, in order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len).filter(|&i| self.contains(i))
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }
}

/// The inverted index of a space's shapes and formulas (see the module's comment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyIndex {
    shapes: usize,
    formulas: usize,
    /// Path → the shapes that have it (as a property of any kind, objects included).
    by_path: BTreeMap<String, ShapeSet>,
    /// Formula id (`""`: the default) → the shapes its documents have taken.
    by_formula: BTreeMap<String, ShapeSet>,
    /// Path → the registered formulas one of whose overlays has it as an axis.
    formulas_by_path: BTreeMap<String, Vec<String>>,
}

impl PropertyIndex {
    /// The index of `shapes` (the space's, in registration order) and `schema`'s formulas.
    pub fn new(schema: &SpaceSchema, shapes: &[Shape]) -> PropertyIndex {
        let n = shapes.len();
        let mut by_path: BTreeMap<String, ShapeSet> = BTreeMap::new();
        let mut by_formula: BTreeMap<String, ShapeSet> = BTreeMap::new();
        for (i, shape) in shapes.iter().enumerate() {
            for (path, _) in &shape.properties {
                by_path
                    .entry(path.clone())
                    .or_insert_with(|| ShapeSet::empty(n))
                    .insert(i);
            }
            by_formula
                .entry(shape.formula.clone())
                .or_insert_with(|| ShapeSet::empty(n))
                .insert(i);
        }
        let mut formulas_by_path: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for formula in &schema.formulas {
            for &subspace in &formula.overlays {
                let Some(overlay) = schema.subspace(subspace).overlay.as_ref() else {
                    continue;
                };
                for axis in &overlay.axes {
                    let ids = formulas_by_path.entry(axis.path.clone()).or_default();
                    if !ids.contains(&formula.id) {
                        ids.push(formula.id.clone());
                    }
                }
            }
        }
        PropertyIndex {
            shapes: n,
            formulas: schema.formulas.len(),
            by_path,
            by_formula,
            formulas_by_path,
        }
    }

    /// Whether this index describes exactly `shapes` and `schema`'s formulas (both lists only
    /// grow, so equal lengths mean equal lists).
    pub fn covers(&self, schema: &SpaceSchema, shapes: &[Shape]) -> bool {
        self.shapes == shapes.len() && self.formulas == schema.formulas.len()
    }

    /// The shapes that have `path`.
    pub fn with_property(&self, path: &str) -> ShapeSet {
        self.by_path
            .get(path)
            .cloned()
            .unwrap_or_else(|| ShapeSet::empty(self.shapes))
    }

    /// The shapes documents of `formula` have taken.
    pub fn of_formula(&self, formula: &str) -> ShapeSet {
        self.by_formula
            .get(formula)
            .cloned()
            .unwrap_or_else(|| ShapeSet::empty(self.shapes))
    }

    /// The registered formulas that have `path` as an overlay's axis, in registration order.
    pub fn formulas_naming(&self, path: &str) -> &[String] {
        self.formulas_by_path
            .get(path)
            .map_or(&[], |ids| ids.as_slice())
    }

    /// The shapes (of `shapes`, those this index was built from) whose documents can satisfy
    /// every one of `predicates`.
    pub fn candidates(&self, shapes: &[Shape], predicates: &[CheckedPredicate]) -> ShapeSet {
        assert_eq!(shapes.len(), self.shapes, "the index of other shapes");
        let mut set = ShapeSet::full(self.shapes);
        for p in predicates {
            let path = p
                .path
                .as_deref()
                .expect("a dynamic space's predicate names a path");
            let selected = match &p.op {
                PredicateOp::Exists { or } => {
                    let mut any = self.with_property(path);
                    for other in or {
                        any.union_with(&self.with_property(other));
                    }
                    any
                }
                PredicateOp::Missing => self.with_property(path).complement(),
                _ => {
                    // The shapes with the property, then those whose kind the predicate can
                    // match (a string predicate on an int property matches nothing).
                    let mut having = ShapeSet::empty(self.shapes);
                    for i in self.with_property(path).iter() {
                        if set.contains(i) && shape_can_match(&shapes[i], p) {
                            having.insert(i);
                        }
                    }
                    having
                }
            };
            set.intersect_with(&selected);
            if set.is_empty() {
                break;
            }
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_types::{parse_space, Predicate, PropertyKind};

    const PATHS: [&str; 5] = ["a", "b", "c", "v", "v.w"];

    fn shape_strategy() -> impl Strategy<Value = Shape> {
        (
            prop::collection::btree_map(
                prop::sample::select(PATHS.to_vec()),
                prop::sample::select(vec![
                    PropertyKind::Int,
                    PropertyKind::String,
                    PropertyKind::List,
                ]),
                0..5,
            ),
            prop::sample::select(vec!["", "f"]),
        )
            .prop_map(|(props, formula)| Shape {
                properties: props.into_iter().map(|(p, k)| (p.to_owned(), k)).collect(),
                formula: formula.to_owned(),
            })
    }

    fn predicate_strategy() -> impl Strategy<Value = Predicate> {
        let path = prop::sample::select(PATHS.to_vec());
        prop_oneof![
            (path.clone(), prop::collection::vec(path.clone(), 0..2)).prop_map(|(p, or)| {
                Predicate::new(
                    p,
                    PredicateOp::Exists {
                        or: or.into_iter().map(str::to_owned).collect(),
                    },
                )
            }),
            path.clone()
                .prop_map(|p| Predicate::new(p, PredicateOp::Missing)),
            (path.clone(), 0i64..3).prop_map(|(p, v)| Predicate::equals(p, v)),
            path.prop_map(|p| Predicate::equals(p, "x")),
        ]
    }

    fn space() -> SpaceSchema {
        parse_space("space s dynamic key k dimensions 3").expect("a dynamic space")
    }

    proptest! {
        /// The index selects exactly the shapes that a test of every shape selects.
        #[test]
        fn candidates_are_the_shapes_that_can_match(
            shapes in prop::collection::vec(shape_strategy(), 0..80),
            predicates in prop::collection::vec(predicate_strategy(), 0..4),
        ) {
            let schema = space();
            let checked: Vec<CheckedPredicate> = predicates
                .iter()
                .map(|p| CheckedPredicate::check(&schema, p).expect("a valid predicate"))
                .collect();
            let index = PropertyIndex::new(&schema, &shapes);
            let got: Vec<usize> = index.candidates(&shapes, &checked).iter().collect();
            // The oracle: every shape tested against every predicate, by what the shape has.
            let wanted: Vec<usize> = (0..shapes.len())
                .filter(|&i| {
                    let s = &shapes[i];
                    predicates.iter().all(|p| {
                        let has = |path: &str| s.properties.iter().any(|(q, _)| q == path);
                        let kind = s.properties.iter().find(|(q, _)| q == &p.attr).map(|(_, k)| *k);
                        match &p.op {
                            PredicateOp::Exists { or } => has(&p.attr) || or.iter().any(|o| has(o)),
                            PredicateOp::Missing => !has(&p.attr),
                            PredicateOp::Equals(tessera_types::Value::Int(_)) => kind == Some(PropertyKind::Int),
                            PredicateOp::Equals(_) => kind == Some(PropertyKind::String),
                            _ => unreachable!(),
                        }
                    })
                })
                .collect();
            prop_assert_eq!(got, wanted);
            for f in ["", "f"] {
                let of: Vec<usize> = index.of_formula(f).iter().collect();
                let wanted: Vec<usize> = (0..shapes.len()).filter(|&i| shapes[i].formula == f).collect();
                prop_assert_eq!(of, wanted);
            }
            prop_assert!(index.covers(&schema, &shapes));
        }
    }

    #[test]
    fn formulas_are_found_by_their_overlays_properties() {
        use tessera_types::{Formula, FormulaSpec, Subspace, SubspaceId};
        let mut schema = space();
        let spec = FormulaSpec::parse(Some("f"), &["a*2,b", "c"]).unwrap();
        let first = schema.subspaces.len();
        for o in &spec.overlays {
            schema.subspaces.push(Subspace::overlay(o.clone()));
        }
        schema.formulas.push(Formula {
            id: "f".into(),
            overlays: vec![SubspaceId(first as u16), SubspaceId(first as u16 + 1)],
        });
        let index = PropertyIndex::new(&schema, &[]);
        assert_eq!(index.formulas_naming("a"), ["f".to_owned()]);
        assert_eq!(index.formulas_naming("c"), ["f".to_owned()]);
        assert!(index.formulas_naming("d").is_empty());
        assert!(!index.covers(&space(), &[]));
    }

    #[test]
    fn sets_hold_what_was_put_in() {
        let mut s = ShapeSet::empty(130);
        for i in [0, 63, 64, 129] {
            s.insert(i);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 63, 64, 129]);
        assert_eq!(s.count(), 4);
        assert_eq!(s.complement().count(), 126);
        assert!(!s.complement().contains(64));
        assert!(!s.contains(130));
        let mut t = ShapeSet::full(130);
        t.intersect_with(&s);
        assert_eq!(t, s);
    }
}
