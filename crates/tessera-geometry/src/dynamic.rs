//! Unispace hashing: documents of a dynamic space as points, and searches as boxes
//! (docs/design.md §9, seed 004 §3).
//!
//! A dynamic space has `D` axes. A property's axis is the hash of its path modulo `D`; the
//! coordinate on an axis is that of the value of the document's *owner* of the axis: its
//! smallest path (bytewise) among the properties with a coordinate (strings, ints, floats)
//! that hash there. An axis no property of the document owns sits at 0, the paper's
//! "absent properties get 0". So where two properties of a document share an axis, only the
//! smaller places it; the other is filtered after the read, never trusted.
//!
//! A search cannot place a document without knowing which properties it has: the axes of
//! absent properties are at 0, those of present ones anywhere. So a search is planned per
//! *shape* (a document's paths and their kinds, tessera-types' `Shape`), from the shapes a
//! space has seen: for each shape that could hold a match, a box that fixes the axes the
//! shape does not own to 0, narrows those owned by a property a predicate constrains, and
//! leaves the rest open. The search is the union of those boxes. Shapes that cannot match
//! (a `missing(editor)` against a shape with an editor, a string predicate on an int
//! property) contribute nothing: that is how structural queries contact only the regions
//! that can hold their answers.

use tessera_types::{
    CheckedPredicate, Overlay, PredicateOp, PrimitiveType, PropertyKind, Shape, Value,
};

use crate::coordinate::{coordinate, property_axis};
use crate::search::{constraint_on_axis, Constraint, SearchBox};

/// Most boxes a search keeps. Shapes that differ in a few properties give boxes that differ
/// in a few axes; past this many, the search reads their bounding box instead (a superset,
/// still correct, and one scan per region rather than one per shape).
pub const BOXES_MAX: usize = 32;

/// Each axis's owner in documents of `shape`: the smallest coordinate path hashing there.
fn owners(shape: &Shape, dimensions: u16) -> Vec<Option<(&str, PropertyKind)>> {
    let mut owners = vec![None; dimensions as usize];
    // `coordinate_paths` is in path order: the first to claim an axis owns it.
    for (path, kind) in shape.coordinate_paths() {
        let owner = &mut owners[property_axis(path, dimensions)];
        if owner.is_none() {
            *owner = Some((path, kind));
        }
    }
    owners
}

/// Whether documents of `shape` could satisfy `p`: they have the property, with a kind the
/// predicate can match (a superset of `CheckedPredicate::matches`), or for the structural
/// predicates, have or lack the properties named.
pub fn shape_can_match(shape: &Shape, p: &CheckedPredicate) -> bool {
    let path = p
        .path
        .as_deref()
        .expect("a dynamic space's predicate names a path");
    let kind = shape.kind_of(path);
    let numeric = |v: &Value| matches!(v, Value::Int(_) | Value::Float(_));
    let kind_is = |wanted: &[PropertyKind]| kind.is_some_and(|k| wanted.contains(&k));
    let for_operand = |v: &Value| {
        if numeric(v) {
            kind_is(&[PropertyKind::Int, PropertyKind::Float])
        } else if matches!(v, Value::String(_)) {
            kind_is(&[PropertyKind::String])
        } else {
            kind_is(&[PropertyKind::List])
        }
    };
    match &p.op {
        PredicateOp::Exists { or } => kind.is_some() || or.iter().any(|o| shape.has(o)),
        PredicateOp::Missing => kind.is_none(),
        PredicateOp::Equals(v)
        | PredicateOp::LessThan(v)
        | PredicateOp::LessEqual(v)
        | PredicateOp::GreaterThan(v)
        | PredicateOp::GreaterEqual(v)
        | PredicateOp::Range(v, _) => for_operand(v),
        PredicateOp::Regex(_) => kind_is(&[PropertyKind::String]),
        PredicateOp::LengthEquals(_)
        | PredicateOp::LengthLessEqual(_)
        | PredicateOp::LengthGreaterEqual(_) => kind_is(&[
            PropertyKind::String,
            PropertyKind::List,
            PropertyKind::Object,
        ]),
        PredicateOp::Contains(v) => {
            kind_is(&[PropertyKind::List])
                || (matches!(v, Value::String(_)) && kind_is(&[PropertyKind::String]))
        }
    }
}

/// The box of documents of `shape` that may satisfy every predicate, or `None` when none can.
pub fn shape_box(
    shape: &Shape,
    dimensions: u16,
    predicates: &[CheckedPredicate],
) -> Option<SearchBox> {
    if !predicates.iter().all(|p| shape_can_match(shape, p)) {
        return None;
    }
    let owners = owners(shape, dimensions);
    let mut ranges: Vec<(u64, u64)> = owners
        .iter()
        .map(|o| if o.is_some() { (0, u64::MAX) } else { (0, 0) })
        .collect();
    for p in predicates {
        let path = p.path.as_deref().expect("checked above");
        let axis = property_axis(path, dimensions);
        let Some((owner, kind)) = owners[axis] else {
            continue;
        };
        // Only the owner's value is the axis's coordinate.
        if owner != path {
            continue;
        }
        if !constraint_for_kind(kind, &p.op).narrow(&mut ranges[axis]) {
            return None;
        }
    }
    Some(SearchBox { ranges })
}

/// What a predicate says about the coordinate of a property of `kind`. The operand is first
/// put on the property's axis: an int operand on a float property where the float is exact,
/// nothing else across kinds (then the axis stays open and the read filters).
fn constraint_for_kind(kind: PropertyKind, op: &PredicateOp) -> Constraint {
    let ty = match kind {
        PropertyKind::String => PrimitiveType::String,
        PropertyKind::Int => PrimitiveType::Int,
        PropertyKind::Float => PrimitiveType::Float,
        _ => return Constraint::Open,
    };
    let onto = |v: &Value| -> Option<Value> {
        match (ty, v) {
            (PrimitiveType::Float, Value::Int(i)) => {
                let f = *i as f64;
                // Exact only where the float converts back to the same int.
                (f.abs() < 9.0e15 && f as i64 == *i).then_some(Value::Float(f))
            }
            _ => (v.primitive_type() == Some(ty)).then(|| v.clone()),
        }
    };
    let op = match op {
        PredicateOp::Equals(v) => onto(v).map(PredicateOp::Equals),
        PredicateOp::LessThan(v) => onto(v).map(PredicateOp::LessThan),
        PredicateOp::LessEqual(v) => onto(v).map(PredicateOp::LessEqual),
        PredicateOp::GreaterThan(v) => onto(v).map(PredicateOp::GreaterThan),
        PredicateOp::GreaterEqual(v) => onto(v).map(PredicateOp::GreaterEqual),
        PredicateOp::Range(lo, hi) => onto(lo)
            .zip(onto(hi))
            .map(|(l, h)| PredicateOp::Range(l, h)),
        _ => None,
    };
    match op {
        Some(op) => constraint_on_axis(ty, ty != PrimitiveType::String, &op, &|v| coordinate(v)),
        None => Constraint::Open,
    }
}

/// What a predicate says about an axis whose property's kind is not known: the operand's
/// kind is assumed (a planning estimate, never used to place or to filter).
pub(crate) fn axis_constraint(op: &PredicateOp) -> Constraint {
    let operand = match op {
        PredicateOp::Equals(v)
        | PredicateOp::LessThan(v)
        | PredicateOp::LessEqual(v)
        | PredicateOp::GreaterThan(v)
        | PredicateOp::GreaterEqual(v)
        | PredicateOp::Range(v, _) => v,
        _ => return Constraint::Open,
    };
    let kind = match operand {
        Value::String(_) => PropertyKind::String,
        Value::Int(_) => PropertyKind::Int,
        Value::Float(_) => PropertyKind::Float,
        _ => return Constraint::Open,
    };
    constraint_for_kind(kind, op)
}

/// The boxes of a search of a dynamic space whose documents take `shapes`: one per shape
/// that can match, duplicates and boxes inside others dropped, and past [`BOXES_MAX`] their
/// bounding box. Empty when no shape can match.
pub fn unispace_boxes<'a>(
    shapes: impl IntoIterator<Item = &'a Shape>,
    dimensions: u16,
    predicates: &[CheckedPredicate],
) -> Vec<SearchBox> {
    merge_boxes(
        shapes
            .into_iter()
            .filter_map(|s| shape_box(s, dimensions, predicates))
            .collect(),
    )
}

/// The box of documents of `shape` placed in `overlay` that may satisfy every predicate, or
/// `None` when none can. An axis whose property the shape lacks, or holds no string, int or
/// float in, is at 0; the others are open, narrowed by the predicates on their property.
pub fn overlay_shape_box(
    shape: &Shape,
    overlay: &Overlay,
    predicates: &[CheckedPredicate],
) -> Option<SearchBox> {
    if !predicates.iter().all(|p| shape_can_match(shape, p)) {
        return None;
    }
    let mut ranges = Vec::with_capacity(overlay.axes.len());
    for axis in &overlay.axes {
        let Some(kind) = coordinate_kind(shape, &axis.path) else {
            ranges.push((0, 0));
            continue;
        };
        let mut range = (0, u64::MAX);
        for p in predicates
            .iter()
            .filter(|p| p.path.as_deref() == Some(&axis.path))
        {
            if !constraint_for_kind(kind, &p.op).narrow(&mut range) {
                return None;
            }
        }
        ranges.push(range);
    }
    Some(SearchBox { ranges })
}

/// The kind of `path`'s value in documents of `shape` if it has a coordinate (string, int,
/// float); `None` if the shape lacks it or holds another kind there (its axis is then at 0).
fn coordinate_kind(shape: &Shape, path: &str) -> Option<PropertyKind> {
    shape.kind_of(path).filter(|k| {
        matches!(
            k,
            PropertyKind::String | PropertyKind::Int | PropertyKind::Float
        )
    })
}

/// What a shape's box in `overlay` depends on besides the predicates: the coordinate kind of
/// each of the overlay's properties, two bits an axis (`None` past 32 axes).
fn overlay_signature(shape: &Shape, overlay: &Overlay) -> Option<u64> {
    if overlay.axes.len() > 32 {
        return None;
    }
    Some(overlay.axes.iter().fold(0u64, |signature, axis| {
        let bits = match coordinate_kind(shape, &axis.path) {
            None => 0,
            Some(PropertyKind::String) => 1,
            Some(PropertyKind::Int) => 2,
            Some(_) => 3,
        };
        signature << 2 | bits
    }))
}

/// The boxes of a search through `overlay` of documents that take `shapes`, merged as
/// [`unispace_boxes`] merges. Shapes that can match and agree on the kinds of the overlay's
/// properties have the same box: it is built once (a `title` overlay read for 825 shapes
/// that all hold a string title builds one box, not 825).
pub fn overlay_boxes<'a>(
    shapes: impl IntoIterator<Item = &'a Shape>,
    overlay: &Overlay,
    predicates: &[CheckedPredicate],
) -> Vec<SearchBox> {
    let matching = shapes
        .into_iter()
        .filter(|s| predicates.iter().all(|p| shape_can_match(s, p)));
    overlay_boxes_of_candidates(matching, overlay, predicates)
}

/// [`overlay_boxes`] of shapes known to be able to match (a plan's candidates, from the
/// inverted index): not tested again.
pub(crate) fn overlay_boxes_of_candidates<'a>(
    candidates: impl IntoIterator<Item = &'a Shape>,
    overlay: &Overlay,
    predicates: &[CheckedPredicate],
) -> Vec<SearchBox> {
    let mut built: Vec<u64> = Vec::new();
    let mut boxes = Vec::new();
    for shape in candidates {
        if let Some(signature) = overlay_signature(shape, overlay) {
            if built.contains(&signature) {
                continue;
            }
            built.push(signature);
        }
        boxes.extend(overlay_shape_box(shape, overlay, predicates));
    }
    merge_boxes(boxes)
}

/// Boxes without duplicates or boxes inside others; past [`BOXES_MAX`], their bounding box.
fn merge_boxes(mut boxes: Vec<SearchBox>) -> Vec<SearchBox> {
    boxes.sort_by(|a, b| a.ranges.cmp(&b.ranges));
    boxes.dedup();
    let inside = |a: &SearchBox, b: &SearchBox| {
        a != b
            && a.ranges
                .iter()
                .zip(&b.ranges)
                .all(|(x, y)| y.0 <= x.0 && x.1 <= y.1)
    };
    let kept: Vec<SearchBox> = boxes
        .iter()
        .filter(|a| !boxes.iter().any(|b| inside(a, b)))
        .cloned()
        .collect();
    if kept.len() <= BOXES_MAX {
        return kept;
    }
    let mut bound = kept[0].clone();
    for b in &kept[1..] {
        for (r, s) in bound.ranges.iter_mut().zip(&b.ranges) {
            r.0 = r.0.min(s.0);
            r.1 = r.1.max(s.1);
        }
    }
    vec![bound]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinate::unispace_point;
    use crate::tessellation::Tessellation;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use tessera_types::{parse_space, DocValue, Document, Object, Predicate};

    /// Few names and few axes, so that properties share axes often.
    const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];

    fn value() -> impl Strategy<Value = DocValue> {
        prop_oneof![
            (-3i64..3).prop_map(DocValue::Int),
            (-3i64..3).prop_map(|i| DocValue::Float(i as f64 / 2.0)),
            prop::sample::select(vec!["x", "y", "z"]).prop_map(|s| DocValue::String(s.into())),
            any::<bool>().prop_map(DocValue::Bool),
            Just(DocValue::List(vec![DocValue::Int(1)])),
        ]
    }

    fn properties() -> impl Strategy<Value = BTreeMap<&'static str, DocValue>> {
        prop::collection::btree_map(prop::sample::select(NAMES.to_vec()), value(), 0..4)
    }

    fn document() -> impl Strategy<Value = Document> {
        (properties(), prop::option::of(properties())).prop_map(|(top, nested)| {
            let mut properties: BTreeMap<String, DocValue> =
                top.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            if let Some(n) = nested {
                properties.insert(
                    "n".into(),
                    DocValue::Object(n.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
                );
            }
            Document::new(properties)
        })
    }

    fn predicate() -> impl Strategy<Value = Predicate> {
        let path = prop::sample::select(vec!["a", "b", "c", "d", "e", "n", "n.a", "n.b"]);
        let operand = prop_oneof![
            (-3i64..3).prop_map(Value::Int),
            (-3i64..3).prop_map(|i| Value::Float(i as f64 / 2.0)),
            prop::sample::select(vec!["x", "y"]).prop_map(Value::from),
        ];
        (path.clone(), path, operand.clone(), operand, 0..9u8).prop_map(
            |(p, other, v, w, which)| {
                let op = match which {
                    0 => PredicateOp::Equals(v),
                    1 => PredicateOp::LessThan(v),
                    2 => PredicateOp::GreaterEqual(v),
                    3 => PredicateOp::Range(v, w),
                    4 => PredicateOp::Exists { or: vec![] },
                    5 => PredicateOp::Exists {
                        or: vec![other.to_owned()],
                    },
                    6 => PredicateOp::Missing,
                    7 => PredicateOp::Contains(v),
                    _ => PredicateOp::LengthGreaterEqual(1),
                };
                Predicate::new(p, op)
            },
        )
    }

    proptest! {
        /// Every document matching a search lies in one of its boxes, and so in a region the
        /// search contacts, for any documents, shapes and predicates.
        #[test]
        fn every_match_lies_in_a_planned_box(
            docs in prop::collection::vec(document(), 1..12),
            predicates in prop::collection::vec(predicate(), 0..4),
            dimensions in 1u16..5,
            partitions in 1u32..40,
        ) {
            let schema = parse_space(&format!(
                "space p dynamic key id dimensions {dimensions} create {partitions} partitions"
            )).unwrap();
            let checked: Vec<CheckedPredicate> = predicates
                .iter()
                .filter_map(|p| CheckedPredicate::check(&schema, p).ok())
                .collect();
            let mut shapes: Vec<Shape> = docs.iter().map(Document::shape).collect();
            shapes.sort();
            shapes.dedup();
            let boxes = unispace_boxes(&shapes, dimensions, &checked);
            let t = Tessellation::new(dimensions as usize, partitions);
            let mut regions: Vec<_> = boxes.iter().flat_map(|b| b.regions(&t)).collect();
            regions.sort();
            for doc in &docs {
                let object = Object { values: vec![Value::from("k"), Value::Document(doc.clone()), Value::from("")] };
                if !checked.iter().all(|p| p.matches(&object)) {
                    continue;
                }
                let point = unispace_point(dimensions, doc);
                prop_assert!(boxes.iter().any(|b| b.contains(&point)),
                    "{doc} at {point:?} outside {boxes:?}");
                prop_assert!(regions.binary_search(&t.region_of(&point)).is_ok());
            }
        }

        /// A shape contributes a box only if it can satisfy the structural predicates: a
        /// search for structure alone reads no shape that cannot hold its answers.
        #[test]
        fn structural_predicates_select_shapes_exactly(
            docs in prop::collection::vec(document(), 1..12),
            predicates in prop::collection::vec(predicate(), 1..4),
        ) {
            let schema = parse_space("space p dynamic key id dimensions 3").unwrap();
            let structural: Vec<CheckedPredicate> = predicates
                .iter()
                .filter(|p| matches!(p.op, PredicateOp::Exists { .. } | PredicateOp::Missing))
                .filter_map(|p| CheckedPredicate::check(&schema, p).ok())
                .collect();
            for doc in &docs {
                let object = Object { values: vec![Value::from("k"), Value::Document(doc.clone()), Value::from("")] };
                let matches = structural.iter().all(|p| p.matches(&object));
                let planned = shape_box(&doc.shape(), 3, &structural).is_some();
                prop_assert_eq!(matches, planned, "{}", doc);
            }
        }
    }

    fn overlay_strategy() -> impl Strategy<Value = Overlay> {
        let paths = vec!["a", "b", "c", "n.a", "n.b", "n"];
        prop::sample::subsequence(paths, 1..4)
            .prop_flat_map(|ps| {
                let n = ps.len();
                (Just(ps), prop::collection::vec(1u32..5, n), any::<bool>())
            })
            .prop_map(|(ps, ws, pointer)| Overlay {
                axes: ps
                    .into_iter()
                    .zip(ws)
                    .map(|(p, weight)| tessera_types::OverlayAxis {
                        path: p.to_owned(),
                        weight,
                    })
                    .collect(),
                pointer,
            })
    }

    proptest! {
        /// With compression formulas: every matching document lies, in the one part of the
        /// plan that keeps it (its formula's), in a box and a region that part reads; no other
        /// part keeps it; and a server sent the plan's subspaces reads the same parts. For any formulas (overlays, weights, shared overlays), documents of
        /// any formula, and predicates.
        #[test]
        fn every_match_lies_in_its_formulas_part(
            formulas in prop::collection::vec(prop::collection::vec(0usize..4, 1..3), 0..4),
            overlays in prop::collection::vec(overlay_strategy(), 4),
            docs in prop::collection::vec((document(), 0usize..5), 1..12),
            predicates in prop::collection::vec(predicate(), 0..4),
            partitions in 1u32..40,
        ) {
            use tessera_types::{Formula, Subspace, SubspaceId};
            let mut schema = parse_space(&format!(
                "space p dynamic key id dimensions 3 create {partitions} partitions"
            )).unwrap();
            let first = schema.subspaces.len();
            for o in &overlays {
                schema.subspaces.push(Subspace::overlay(o.clone()));
            }
            for (i, f) in formulas.iter().enumerate() {
                let mut subspaces: Vec<SubspaceId> =
                    f.iter().map(|&o| SubspaceId((first + o) as u16)).collect();
                subspaces.dedup();
                schema.formulas.push(Formula { id: format!("f{i}"), overlays: subspaces });
            }
            let ts = crate::tessellation::tessellations(&schema);
            let checked: Vec<CheckedPredicate> = predicates
                .iter()
                .filter_map(|p| CheckedPredicate::check(&schema, p).ok())
                .collect();
            // Formula 0 is the default; the others exist only if registered.
            let formula_of = |f: usize| match f {
                0 => String::new(),
                f if f <= formulas.len() => format!("f{}", f - 1),
                _ => String::new(),
            };
            let mut shapes: Vec<Shape> =
                docs.iter().map(|(d, f)| d.shape_in(&formula_of(*f))).collect();
            shapes.sort();
            shapes.dedup();
            let index = crate::index::PropertyIndex::new(&schema, &shapes);
            let plan = crate::plan::plan_search(&schema, &ts, &shapes, &index, &checked);
            // A server sent the plan's parts reads each as the plan does.
            let subspaces: Vec<SubspaceId> = plan.iter().map(|p| p.subspace).collect();
            let read = crate::plan::parts_in(&schema, &ts, &shapes, &index, &subspaces, &checked);
            prop_assert_eq!(&read, &plan);
            for (doc, f) in &docs {
                let formula = formula_of(*f);
                let object = Object { values: vec![
                    Value::from("k"), Value::Document(doc.clone()), Value::from(formula.as_str()),
                ] };
                // A pointer overlay's stub lies where its document does, is kept by the same
                // parts, and answers every predicate the overlay claims to decide as the
                // document does.
                for s in schema.subspace_ids() {
                    let (Some(overlay), Some(at)) =
                        (schema.pointer_overlay(s), crate::coordinate::point(&schema, s, &object))
                    else {
                        continue;
                    };
                    let stub = object.stub_in(&schema, s).unwrap();
                    prop_assert_eq!(crate::coordinate::point(&schema, s, &stub), Some(at));
                    for part in &plan {
                        prop_assert_eq!(
                            crate::plan::part_keeps(&schema, part, &stub),
                            crate::plan::part_keeps(&schema, part, &object)
                        );
                    }
                    for p in checked.iter().filter(|p| p.is_decided_by(overlay)) {
                        prop_assert_eq!(p.matches(&stub), p.matches(&object), "{:?} on {}", p, doc);
                    }
                }
                if !checked.iter().all(|p| p.matches(&object)) {
                    continue;
                }
                let keeping: Vec<_> = plan
                    .iter()
                    .filter(|part| crate::coordinate::point(&schema, part.subspace, &object).is_some())
                    .filter(|part| crate::plan::part_keeps(&schema, part, &object))
                    .collect();
                prop_assert_eq!(keeping.len(), 1, "{} of formula {:?} in {:?}", doc, formula, plan);
                let part = keeping[0];
                let point = crate::coordinate::point(&schema, part.subspace, &object).unwrap();
                prop_assert!(part.boxes.iter().any(|b| b.contains(&point)),
                    "{doc} at {point:?} outside {:?}", part.boxes);
                let t = &ts[part.subspace.get()];
                prop_assert!(part.regions(t).contains(&t.region_of(&point)));
            }
        }
    }

    #[test]
    fn overlays_place_by_their_properties_only() {
        let doc = Document::new(
            [
                ("title".to_owned(), DocValue::String("Dynamo".into())),
                ("year".to_owned(), DocValue::Int(2007)),
                ("open".to_owned(), DocValue::Bool(true)),
            ]
            .into_iter()
            .collect(),
        );
        let o = tessera_types::FormulaSpec::parse(None, &["year*2,open,editor"]).unwrap();
        assert_eq!(
            crate::coordinate::overlay_point(&o.overlays[0], &doc),
            vec![coordinate(&2007.into()), 0, 0]
        );
    }

    #[test]
    fn absent_axes_sit_at_zero_and_the_smaller_path_owns_a_shared_axis() {
        let doc = Document::new(
            [
                ("title".to_owned(), DocValue::String("Dynamo".into())),
                ("year".to_owned(), DocValue::Int(2007)),
            ]
            .into_iter()
            .collect(),
        );
        let p = unispace_point(16, &doc);
        let (t, y) = (property_axis("title", 16), property_axis("year", 16));
        for (axis, c) in p.iter().enumerate() {
            if axis == t {
                assert_eq!(*c, coordinate(&"Dynamo".into()));
            } else if axis == y {
                assert_eq!(*c, coordinate(&2007.into()));
            } else {
                assert_eq!(*c, 0);
            }
        }
        // One axis: "title" < "year" owns it.
        assert_eq!(unispace_point(1, &doc), vec![coordinate(&"Dynamo".into())]);
    }
}
