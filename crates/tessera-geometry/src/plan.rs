//! A search's plan in either kind of space: the subspaces and the boxes it reads.

use tessera_types::{CheckedPredicate, Shape, SpaceKind, SpaceSchema, SubspaceId, UNISPACE};

use crate::dynamic::{overlay_boxes_of_candidates, unispace_boxes};
use crate::index::{PropertyIndex, ShapeSet};
use crate::search::{choose_typed_subspace, SearchBox, SearchPlan};
use crate::tessellation::Tessellation;

/// How a search runs: one [`SearchPlan`] per subspace it reads, in subspace order.
///
/// In a typed space, one: the subspace whose box crosses the fewest regions
/// ([`choose_typed_subspace`]). In a dynamic space, a document lies in its formula's subspaces
/// only, so the search reads, for every formula the space knows (the default one's unispace
/// included), one of its subspaces: the overlay the predicates narrow to the fewest regions
/// (ties to a copy over a pointer overlay, then to the first listed). The formulas that chose one subspace share its part, whose
/// boxes are one per shape of their documents that can match there (`shapes`, the space's
/// registered shapes, each with the formula of its documents; see [`crate::dynamic`]), found
/// through `index` (the inverted index of those shapes, [`PropertyIndex`]): a formula none
/// of whose shapes can match costs nothing. The part keeps only the documents of its
/// formulas, so a document that several parts' subspaces hold is found once.
pub fn plan_search(
    schema: &SpaceSchema,
    tessellations: &[Tessellation],
    shapes: &[Shape],
    index: &PropertyIndex,
    predicates: &[CheckedPredicate],
) -> Vec<SearchPlan> {
    let SpaceKind::Dynamic { .. } = schema.kind else {
        return vec![choose_typed_subspace(schema, tessellations, predicates)];
    };
    let candidates = index.candidates(shapes, predicates);
    // The formulas some overlay of which a predicate can narrow; the others read their first.
    let narrowed: Vec<&str> = predicates
        .iter()
        .filter_map(|p| p.path.as_deref())
        .flat_map(|path| index.formulas_naming(path))
        .map(String::as_str)
        .collect();
    let mut parts: Vec<SearchPlan> = Vec::new();
    for (formula, subspaces) in schema.all_formulas() {
        let first = *subspaces.first().expect("a formula has a subspace");
        let chosen = if narrowed.contains(&formula) {
            *subspaces
                .iter()
                .min_by_key(|&&s| {
                    let narrowed = predicate_box(schema, s, predicates);
                    let regions = narrowed.map_or(0, |b| b.regions_count(&tessellations[s.get()]));
                    // Between equals, a copy: a pointer overlay's matches cost a read each.
                    (regions, schema.pointer_overlay(s).is_some())
                })
                .expect("a formula has a subspace")
        } else {
            first
        };
        match parts.iter_mut().find(|p| p.subspace == chosen) {
            Some(part) => part.formulas.push(formula.to_owned()),
            None => parts.push(SearchPlan {
                subspace: chosen,
                boxes: vec![],
                regions_count: 0,
                formulas: vec![formula.to_owned()],
                keys: None,
            }),
        }
    }
    // A part reads the shapes its formulas' documents have taken that can hold matches, and
    // no other.
    for part in &mut parts {
        let mut of_part = ShapeSet::empty(shapes.len());
        for formula in &part.formulas {
            of_part.union_with(&index.of_formula(formula));
        }
        of_part.intersect_with(&candidates);
        let theirs = of_part.iter().map(|i| &shapes[i]);
        part.boxes = subspace_boxes(schema, theirs, part.subspace, predicates);
        part.regions_count = part.regions(&tessellations[part.subspace.get()]).len() as u64;
    }
    parts.sort_by_key(|p| p.subspace);
    parts
}

/// The box the predicates alone select in a dynamic space's subspace, every axis open but for
/// them: what a formula's choice among its overlays goes by (it depends on no shape, so every
/// configuration that has the formula makes the same choice).
fn predicate_box(
    schema: &SpaceSchema,
    subspace: SubspaceId,
    predicates: &[CheckedPredicate],
) -> Option<SearchBox> {
    let overlay = schema.subspace(subspace).overlay.as_ref()?;
    let mut b = SearchBox::full(overlay.axes.len());
    for (range, axis) in b.ranges.iter_mut().zip(&overlay.axes) {
        for p in predicates
            .iter()
            .filter(|p| p.path.as_deref() == Some(&axis.path))
        {
            if !crate::dynamic::axis_constraint(&p.op).narrow(range) {
                return None;
            }
        }
    }
    Some(b)
}

/// The boxes a dynamic space's search reads in `subspace` for documents of `shapes` (the
/// plan's candidates: each can match).
fn subspace_boxes<'a>(
    schema: &SpaceSchema,
    shapes: impl IntoIterator<Item = &'a Shape>,
    subspace: SubspaceId,
    predicates: &[CheckedPredicate],
) -> Vec<SearchBox> {
    let SpaceKind::Dynamic { dimensions } = schema.kind else {
        unreachable!("only a dynamic space has shapes")
    };
    match &schema.subspace(subspace).overlay {
        Some(overlay) => overlay_boxes_of_candidates(shapes, overlay, predicates),
        None if subspace == UNISPACE => unispace_boxes(shapes, dimensions, predicates),
        None => vec![SearchBox::full(1)],
    }
}

/// Whether the part of a plan that reads `plan.subspace` keeps `object`: every object in a
/// typed space; in a dynamic space, the documents of the part's formulas (another part reads
/// the others).
pub fn part_keeps(schema: &SpaceSchema, plan: &SearchPlan, object: &tessera_types::Object) -> bool {
    if !schema.is_dynamic() || plan.subspace == SubspaceId::KEY {
        return true;
    }
    match object.get(tessera_types::FORMULA_INDEX) {
        tessera_types::Value::String(f) => plan.formulas.iter().any(|k| f == k.as_str()),
        _ => false,
    }
}

/// Whether `document`, read by key for a `stub` that a pointer overlay's part of a search
/// found, answers for that part: it still has the stub's formula (a document that moved to
/// another formula is answered by the part that reads its new placement) and matches every
/// predicate (the stub decided only some).
pub fn pointer_answers(
    stub: &tessera_types::Object,
    document: &tessera_types::Object,
    predicates: &[CheckedPredicate],
) -> bool {
    let formula = tessera_types::FORMULA_INDEX;
    document.get(formula) == stub.get(formula)
        && tessera_types::predicate::matches_all(predicates, document)
}

/// What a search reads in `subspace`: [`SearchBox::for_predicates`]' one box in a typed space
/// (none when the predicates contradict each other); in a dynamic space, the boxes and formulas
/// of the part of [`plan_search`] that reads `subspace` (nothing when no part does).
pub fn part_in(
    schema: &SpaceSchema,
    tessellations: &[Tessellation],
    shapes: &[Shape],
    index: &PropertyIndex,
    subspace: SubspaceId,
    predicates: &[CheckedPredicate],
) -> SearchPlan {
    let mut parts = parts_in(
        schema,
        tessellations,
        shapes,
        index,
        &[subspace],
        predicates,
    );
    parts.pop().expect("one part per subspace asked")
}

/// [`part_in`] for each of `subspaces`, in their order, planning a dynamic space's search once
/// for all of them (a plan tests every shape that could match: the cost of a search there).
pub fn parts_in(
    schema: &SpaceSchema,
    tessellations: &[Tessellation],
    shapes: &[Shape],
    index: &PropertyIndex,
    subspaces: &[SubspaceId],
    predicates: &[CheckedPredicate],
) -> Vec<SearchPlan> {
    let empty = |subspace| SearchPlan {
        subspace,
        boxes: vec![],
        regions_count: 0,
        formulas: vec![],
        keys: None,
    };
    let mut plan: Option<Vec<SearchPlan>> = None;
    let mut parts = Vec::with_capacity(subspaces.len());
    for &subspace in subspaces {
        parts.push(match schema.kind {
            SpaceKind::Typed => crate::search::typed_part(
                schema,
                &tessellations[subspace.get()],
                subspace,
                predicates,
            ),
            SpaceKind::Dynamic { .. } if subspace == SubspaceId::KEY => SearchPlan {
                boxes: vec![SearchBox::full(1)],
                ..empty(subspace)
            },
            SpaceKind::Dynamic { .. } => plan
                .get_or_insert_with(|| {
                    plan_search(schema, tessellations, shapes, index, predicates)
                })
                .iter()
                .find(|p| p.subspace == subspace)
                .cloned()
                .unwrap_or_else(|| empty(subspace)),
        });
    }
    parts
}
