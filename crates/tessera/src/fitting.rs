//! Cut points from a space's statistics: where `tessera recut`, the re-cut driver and
//! `tessera alter-space` (a subspace added to a space already holding objects) cut a
//! subspace's axes, and what `explain` estimates from.

use tessera_client::{SpaceConfig, SpaceStatistics, SubspaceId};
use tessera_geometry::{cuts_from_data, cuts_from_data_weighted, AxisData, Sketch};
use tessera_types::{AttrIndex, AttributeType, AxisCuts, PrimitiveType, Subspace, SubspaceState};

/// The cuts of a subspace over `attributes` about to be added to `space`: as [`cuts_for`]
/// would cut it once built; `None` while the space holds fewer objects than it has partitions
/// (they say too little of the values: equal slices then, re-cut by the driver once the data
/// has come) or the attributes make no subspace (the alteration itself then says why).
pub fn cuts_for_added(
    space: &SpaceConfig,
    attributes: &[String],
    statistics: &SpaceStatistics,
) -> Option<Vec<AxisCuts>> {
    let objects = statistics.attributes.first().map_or(0, Sketch::count);
    if objects == 0 || objects < u64::from(space.schema.partitions) {
        return None;
    }
    let dimensions = space.schema.subspace_dimensions(attributes).ok()?;
    let mut with = space.clone();
    with.schema.subspaces.push(Subspace {
        dimensions,
        state: SubspaceState::Building,
        overlay: None,
        tags: None,
        cuts: None,
    });
    let id = SubspaceId(with.schema.subspaces.len() as u16 - 1);
    Some(cuts_for(&with, id, statistics))
}

pub fn ordered(ty: AttributeType) -> Option<PrimitiveType> {
    match ty {
        AttributeType::Primitive(p @ (PrimitiveType::Int | PrimitiveType::Float)) => Some(p),
        _ => None,
    }
}

/// The cuts of subspace `id` from `statistics`: its ordered axes at their quantiles (a
/// document overlay's in the proportions of its weights).
pub fn cuts_for(
    space: &SpaceConfig,
    id: SubspaceId,
    statistics: &SpaceStatistics,
) -> Vec<AxisCuts> {
    let axes = axes(space, id, statistics);
    let partitions = space.schema.partitions;
    match &space.schema.subspace(id).overlay {
        Some(overlay) => cuts_from_data_weighted(&axes, &overlay.weights(), partitions),
        None => cuts_from_data(&axes, partitions),
    }
}

/// What `statistics` say of each axis of subspace `id`: an attribute's type and values, or a
/// document overlay's path's values (hashed when the statistics do not sketch the path).
pub fn axes<'a>(
    space: &SpaceConfig,
    id: SubspaceId,
    statistics: &'a SpaceStatistics,
) -> Vec<AxisData<'a>> {
    let schema = &space.schema;
    let subspace = schema.subspace(id);
    if let Some(overlay) = &subspace.overlay {
        return overlay
            .axes
            .iter()
            .map(|a| {
                statistics
                    .path(&a.path)
                    .map_or(AxisData::Hashed, AxisData::of_document_path)
            })
            .collect();
    }
    subspace
        .dimensions
        .iter()
        .map(|&a| match ordered(schema.attribute(a).ty) {
            Some(ty) => AxisData::Ordered {
                ty,
                values: &statistics.attributes[a.get()],
            },
            None => match statistics.hashes.get(a.get()) {
                Some(hashes) if hashes.count() > 0 && a != AttrIndex::KEY => {
                    AxisData::HashedBy { hashes }
                }
                _ => AxisData::Hashed,
            },
        })
        .collect()
}
