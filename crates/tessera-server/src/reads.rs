//! Reads from committed state: get, search, count, sorted search, explain.
//!
//! A search runs on the subspace whose box crosses the fewest regions (DESIGN §4), reads only
//! the regions this server owns among them, and filters what storage returns by every
//! predicate: storage returns the objects whose point lies in the box, which includes string
//! hash collisions and ignores predicates on attributes that are not dimensions.

use std::ops::ControlFlow;

use tessera_geometry::{choose_subspace, SearchBox, SearchPlan};
use tessera_protocol::{ErrorReply, Explanation, SortOrder, WireObject};
use tessera_storage::{Store, StoredObject};
use tessera_types::predicate::matches_all;
use tessera_types::{AttrIndex, CheckedPredicate, Value};

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

/// How a search of `space` by `predicates` runs: the cheapest subspace and its box.
pub fn plan(space: &ServedSpace, predicates: &[CheckedPredicate]) -> SearchPlan {
    choose_subspace(&space.config.schema, &space.tessellations, predicates)
}

/// [`for_each_match`] with the plan already made (`plan` must come from `predicates`).
pub fn for_each_match_planned(
    store: &Store,
    space: &ServedSpace,
    plan: &SearchPlan,
    predicates: &[CheckedPredicate],
    f: impl FnMut(StoredObject) -> ControlFlow<()>,
) -> Result<(), ErrorReply> {
    let Some(search_box) = &plan.search_box else {
        return Ok(());
    };
    let regions: Vec<_> = search_box
        .regions(&space.tessellations[plan.subspace.get()])
        .into_iter()
        .filter(|&r| space.owns(plan.subspace, r))
        .collect();
    for_each_match_in(
        store,
        space,
        plan.subspace,
        search_box,
        &regions,
        predicates,
        f,
    )
}

/// Calls `f` with every committed object of `regions` of `subspace` that lies in `search_box`
/// and matches all `predicates`, until it breaks.
pub fn for_each_match_in(
    store: &Store,
    space: &ServedSpace,
    subspace: tessera_types::SubspaceId,
    search_box: &SearchBox,
    regions: &[tessera_geometry::RegionIndex],
    predicates: &[CheckedPredicate],
    mut f: impl FnMut(StoredObject) -> ControlFlow<()>,
) -> Result<(), ErrorReply> {
    let (lo, hi): (Vec<u64>, Vec<u64>) = search_box.ranges.iter().copied().unzip();
    let found = store
        .search(&space.config.schema.name, subspace, regions, &lo, &hi)
        .map_err(storage_error)?;
    for item in found {
        let object = item.map_err(storage_error)?;
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
    plan.search_box.as_ref().is_none_or(SearchBox::is_point)
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
/// `2 * limit` objects in memory however many match.
pub fn sorted_search(
    store: &Store,
    space: &ServedSpace,
    predicates: &[CheckedPredicate],
    sort_by: AttrIndex,
    limit: usize,
    order: SortOrder,
) -> Result<Vec<WireObject>, ErrorReply> {
    let rank = |o: &StoredObject| (o.object.get(sort_by).clone(), o.object.key().clone());
    let mut kept: Vec<StoredObject> = Vec::new();
    let sort = |kept: &mut Vec<StoredObject>| match order {
        SortOrder::Ascending => kept.sort_by_cached_key(rank),
        SortOrder::Descending => kept.sort_by_cached_key(|o| std::cmp::Reverse(rank(o))),
    };
    if limit == 0 {
        return Ok(vec![]);
    }
    for_each_match(store, space, predicates, |o| {
        kept.push(o);
        if kept.len() >= 2 * limit {
            sort(&mut kept);
            kept.truncate(limit);
        }
        ControlFlow::Continue(())
    })?;
    sort(&mut kept);
    kept.truncate(limit);
    Ok(kept.into_iter().map(wire).collect())
}

pub fn explain(space: &ServedSpace, predicates: &[CheckedPredicate]) -> Explanation {
    let schema = &space.config.schema;
    let plan = plan(space, predicates);
    let candidates = schema
        .searchable_subspaces()
        .map(|s| {
            let crossed = SearchBox::for_predicates(schema, s, predicates)
                .map_or(0, |b| b.regions_count(&space.tessellations[s.get()]));
            (s, crossed)
        })
        .collect();
    let tessellation = &space.tessellations[plan.subspace.get()];
    let servers = match &plan.search_box {
        None => 0,
        Some(b) => {
            let mut servers: Vec<_> = b
                .regions(tessellation)
                .into_iter()
                .filter_map(|r| space.config.replicas_of(plan.subspace, r).first().copied())
                .collect();
            servers.sort();
            servers.dedup();
            servers.len() as u64
        }
    };
    Explanation {
        subspace: plan.subspace,
        dimensions: schema
            .subspace(plan.subspace)
            .dimensions
            .iter()
            .map(|&a| schema.attribute(a).name.clone())
            .collect(),
        subspace_regions: tessellation.regions_count() as u64,
        regions_contacted: plan.regions_count,
        servers_contacted: servers,
        candidates,
    }
}
