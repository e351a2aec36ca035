//! A search's plan in either kind of space: the subspace and the boxes it reads.

use tessera_types::{CheckedPredicate, Shape, SpaceKind, SpaceSchema, SubspaceId, UNISPACE};

use crate::dynamic::unispace_boxes;
use crate::search::{choose_typed_subspace, SearchBox, SearchPlan};
use crate::tessellation::Tessellation;

/// How a search runs: in a typed space, on the subspace whose box crosses the fewest regions
/// ([`choose_typed_subspace`]); in a dynamic space, on its unispace, one box per shape of
/// document that can match (`shapes`, the space's registered shapes; ignored for a typed
/// space; see [`crate::dynamic`]).
pub fn choose_subspace(
    schema: &SpaceSchema,
    tessellations: &[Tessellation],
    shapes: &[Shape],
    predicates: &[CheckedPredicate],
) -> SearchPlan {
    let SpaceKind::Dynamic { dimensions } = schema.kind else {
        return choose_typed_subspace(schema, tessellations, predicates);
    };
    let mut plan = SearchPlan {
        subspace: UNISPACE,
        boxes: unispace_boxes(shapes, dimensions, predicates),
        regions_count: 0,
    };
    plan.regions_count = plan.regions(&tessellations[UNISPACE.get()]).len() as u64;
    plan
}

/// The boxes a search reads in `subspace`: [`SearchBox::for_predicates`]' one box in a
/// typed space, the unispace's boxes in a dynamic one.
pub fn boxes_in(
    schema: &SpaceSchema,
    shapes: &[Shape],
    subspace: SubspaceId,
    predicates: &[CheckedPredicate],
) -> Vec<SearchBox> {
    match schema.kind {
        SpaceKind::Dynamic { dimensions } if subspace == UNISPACE => {
            unispace_boxes(shapes, dimensions, predicates)
        }
        SpaceKind::Dynamic { .. } => vec![SearchBox::full(1)],
        SpaceKind::Typed => SearchBox::for_predicates(schema, subspace, predicates)
            .into_iter()
            .collect(),
    }
}
