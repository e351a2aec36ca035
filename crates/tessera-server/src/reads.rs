//! Reads from committed state: get, search, count, sorted search, explain.
//!
//! A search runs on the subspace whose box crosses the fewest regions (DESIGN §4), reads only
//! the regions this server owns among them, and filters what storage returns by every
//! predicate: storage returns the objects whose point lies in the box, which includes string
//! hash collisions and ignores predicates on attributes that are not dimensions.

use std::ops::ControlFlow;

use tessera_geometry::{SearchBox, SearchPlan};
use tessera_protocol::{ErrorReply, Explanation, SortOrder, WireObject};
use tessera_storage::{Store, StoredObject};
use tessera_types::predicate::matches_all;
use tessera_types::{CheckedPredicate, SortKey, SortValue, Value};

use crate::errors::storage_error;
use crate::view::ServedSpace;

pub fn get(
    store: &Store,
    space: &ServedSpace,
    key: &Value,
) -> Result<Option<WireObject>, ErrorReply> {
    let found = store
        .get(&space.config.schema.name, key)
        .map_err(storage_error)?;
    Ok(found.map(wire))
}

pub fn wire(o: StoredObject) -> WireObject {
    WireObject {
        version: o.version,
        values: o.object.values,
    }
}

/// Calls `f` with every committed object that matches all `predicates`, until it breaks.
pub fn for_each_match(
    store: &Store,
    space: &ServedSpace,
    predicates: &[CheckedPredicate],
    f: impl FnMut(StoredObject) -> ControlFlow<()>,
) -> Result<(), ErrorReply> {
    for_each_match_planned(store, space, &plan(space, predicates), predicates, f)
}

/// How a search of `space` by `predicates` runs: the cheapest subspace and its boxes.
pub fn plan(space: &ServedSpace, predicates: &[CheckedPredicate]) -> SearchPlan {
    space.config.plan(&space.tessellations, predicates)
}

/// [`for_each_match`] with the plan already made (`plan` must come from `predicates`).
pub fn for_each_match_planned(
    store: &Store,
    space: &ServedSpace,
    plan: &SearchPlan,
    predicates: &[CheckedPredicate],
    f: impl FnMut(StoredObject) -> ControlFlow<()>,
) -> Result<(), ErrorReply> {
    let regions: Vec<_> = plan
        .regions(&space.tessellations[plan.subspace.get()])
        .into_iter()
        .filter(|&r| space.owns(plan.subspace, r))
        .collect();
    for_each_match_in(
        store,
        space,
        plan.subspace,
        &plan.boxes,
        &regions,
        predicates,
        f,
    )
}

/// Calls `f` with every committed object of `regions` of `subspace` that lies in one of
/// `boxes` and matches all `predicates`, each once, until it breaks.
pub fn for_each_match_in(
    store: &Store,
    space: &ServedSpace,
    subspace: tessera_types::SubspaceId,
    boxes: &[SearchBox],
    regions: &[tessera_geometry::RegionIndex],
    predicates: &[CheckedPredicate],
    mut f: impl FnMut(StoredObject) -> ControlFlow<()>,
) -> Result<(), ErrorReply> {
    if boxes.is_empty() || regions.is_empty() {
        return Ok(());
    }
    let found = store
        .search_boxes(&space.config.schema.name, subspace, regions, boxes)
        .map_err(storage_error)?;
    // Overlapping boxes (a dynamic space's, one per shape) can hold an object twice.
    let mut seen = (boxes.len() > 1).then(std::collections::BTreeSet::new);
    for item in found {
        let object = item.map_err(storage_error)?;
        if let Some(seen) = &mut seen {
            if !seen.insert(object.object.key().clone()) {
                continue;
            }
        }
        if matches_all(predicates, &object.object) && f(object).is_break() {
            break;
        }
    }
    Ok(())
}

/// Whether the search names a single point of its subspace (every dimension fixed by
/// equality) or nothing at all: such a search reads one cell of one region, so it is cheap
/// enough to answer on the connection's own task.
pub fn is_point_search(plan: &SearchPlan) -> bool {
    plan.is_point()
}

pub fn count(
    store: &Store,
    space: &ServedSpace,
    predicates: &[CheckedPredicate],
) -> Result<u64, ErrorReply> {
    let mut n = 0u64;
    for_each_match(store, space, predicates, |_| {
        n += 1;
        ControlFlow::Continue(())
    })?;
    Ok(n)
}

/// At most `limit` matches ordered by `sort_by` (ties broken by key), keeping only about
/// `2 * limit` objects in memory however many match. In a dynamic space only the documents
/// with a string or a number at the path rank (`tessera_types::sort`).
pub fn sorted_search(
    store: &Store,
    space: &ServedSpace,
    predicates: &[CheckedPredicate],
    sort_by: &SortKey,
    limit: usize,
    order: SortOrder,
) -> Result<Vec<WireObject>, ErrorReply> {
    let mut kept: Vec<(SortValue, StoredObject)> = Vec::new();
    let sort = |kept: &mut Vec<(SortValue, StoredObject)>| {
        let rank = |(v, o): &(SortValue, StoredObject)| (v.clone(), o.object.key().clone());
        match order {
            SortOrder::Ascending => kept.sort_by_cached_key(rank),
            SortOrder::Descending => kept.sort_by_cached_key(|k| std::cmp::Reverse(rank(k))),
        }
    };
    if limit == 0 {
        return Ok(vec![]);
    }
    for_each_match(store, space, predicates, |o| {
        if let Some(v) = sort_by.rank_object(&o.object) {
            kept.push((v, o));
        }
        if kept.len() >= 2 * limit {
            sort(&mut kept);
            kept.truncate(limit);
        }
        ControlFlow::Continue(())
    })?;
    sort(&mut kept);
    kept.truncate(limit);
    Ok(kept.into_iter().map(|(_, o)| wire(o)).collect())
}

pub fn explain(space: &ServedSpace, predicates: &[CheckedPredicate]) -> Explanation {
    Explanation::of(
        &space.config,
        &space.tessellations,
        predicates,
        |subspace, r| space.config.replicas_of(subspace, r).first().copied(),
    )
}
