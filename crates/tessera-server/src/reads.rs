//! Reads from committed state: get, multi_get, the matches of a search (decoded, or in their
//! stored encoding for a search that passes them on), sorted search, and the loads, counts and
//! statistics of regions.
//!
//! Every read of a search's matches goes through a [`Scan`], planned once: the parts the
//! client sent (a subspace and the regions of it this server reads) and what each reads there.
//! Whatever the search answers with (its matches, their count, the first of them in an order)
//! is up to its caller (`search`).
//!
//! The client plans a search (docs/design.md §4: in a typed space the subspace whose box
//! crosses the fewest regions, in a dynamic space one part per subspace its formulas' documents
//! are read in) and sends each server the regions it picked that server for; a standalone
//! server is sent every region of the plan. The server reads those regions and filters what
//! storage returns by every predicate: storage returns the objects whose point lies in the
//! box, which includes string hash collisions and ignores predicates on attributes that are
//! not dimensions.
//!
//! A dynamic space's *pointer* overlay holds stubs (the key, the formula, the overlay's own
//! properties), which decide only some predicates ([`tessera_types::CheckedPredicate::is_decided_by`]): a
//! search there filters the stubs by those, then follows each to its document — here, from
//! this server's store ([`Pointers::Follow`], when the search asks: only a server that leads
//! every key region, so holds every document, as a standalone server does, takes such a
//! search), or in the client ([`Pointers::Return`]: the documents' point leaders hold them) —
//! and checks every predicate on the document.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use tessera_geometry::{part_keeps, pointer_answers, RegionIndex, SearchPlan, Sketch};
use tessera_protocol::{
    ErrorReply, KeyRegionLoad, RegionCount, SortOrder, SpaceStatistics, WireObject,
    PATH_STATISTICS_MAX,
};
use tessera_storage::encoded::EncodedFilter;
use tessera_storage::{EncodedObject, Store, StoredObject};
use tessera_types::predicate::matches_all;
use tessera_types::{
    CheckedPredicate, DocValue, SortKey, SortValue, SpaceSchema, SubspaceId, Value, DOCUMENT_INDEX,
    FORMULA_INDEX,
};

use crate::errors::storage_error;
use crate::view::ServedSpace;

pub fn get(
    store: &Store,
    space: &ServedSpace,
    key: &Value,
) -> Result<Option<WireObject>, ErrorReply> {
    let found = store
        .get(&space.config().schema.name, key)
        .map_err(storage_error)?;
    Ok(found.map(wire))
}

/// The load of every key region this server leads in `space` (`Request::KeyRegionLoads`),
/// in region order. A read of each region whole: run it off the connection's task.
pub fn key_region_loads(
    store: &Store,
    space: &ServedSpace,
) -> Result<Vec<KeyRegionLoad>, ErrorReply> {
    let name = &space.config().schema.name;
    let mut loads = Vec::new();
    for (r, set) in space.config().replicas[SubspaceId::KEY.get()]
        .iter()
        .enumerate()
    {
        if set.first() != Some(&space.me) {
            continue;
        }
        let (objects, split_at) = store
            .key_region_load(name, RegionIndex(r as u32))
            .map_err(storage_error)?;
        loads.push(KeyRegionLoad {
            region: r as u32,
            objects,
            split_at,
        });
    }
    Ok(loads)
}

/// How many objects each region of `subspace` that this server leads holds
/// (`Request::RegionCounts`), in region order. One scan of the subspace: run it off the
/// connection's task.
pub fn region_counts(
    store: &Store,
    space: &ServedSpace,
    subspace: SubspaceId,
) -> Result<Vec<RegionCount>, ErrorReply> {
    let counts = store
        .region_counts(&space.config().schema.name, subspace)
        .map_err(storage_error)?;
    let led = space.config().replicas[subspace.get()]
        .iter()
        .enumerate()
        .filter(|(_, set)| set.first() == Some(&space.me));
    Ok(led
        .map(|(r, _)| RegionCount {
            region: r as u32,
            objects: counts.get(r).copied().unwrap_or(0),
        })
        .collect())
}

/// Statistics of the values of the objects in the key regions of `space` this server leads
/// (`Request::Statistics`): a read of those regions whole, so run it off the connection's
/// task. Memory: one sketch per attribute and per overlay path, at most
/// `PATH_STATISTICS_MAX` of those (`Sketch::BYTES_MAX` each).
pub fn statistics(store: &Store, space: &ServedSpace) -> Result<SpaceStatistics, ErrorReply> {
    let schema = &space.config().schema;
    let led = space.led_key_regions();
    let mut statistics = SpaceStatistics::empty(schema.attributes.len());
    statistics.regions = led.iter().map(|r| r.0).collect();
    statistics.paths = schema
        .overlay_paths()
        .into_iter()
        .take(PATH_STATISTICS_MAX)
        .map(|p| (p.to_owned(), Sketch::new()))
        .collect();
    let (lo, hi) = (vec![0], vec![u64::MAX]);
    let found = store
        .search(&schema.name, SubspaceId::KEY, &led, &lo, &hi)
        .map_err(storage_error)?;
    let mut named_by: HashMap<String, Vec<usize>> = HashMap::new();
    for object in found {
        let object = object.map_err(storage_error)?.object;
        for (sketch, value) in statistics.attributes.iter_mut().zip(&object.values) {
            sketch.insert(value);
        }
        let hashes = statistics.hashes.iter_mut().zip(&object.values).skip(1);
        for (sketch, value) in hashes {
            sketch.insert_hash(value);
        }
        let (Some(Value::Document(d)), Some(Value::String(f))) = (
            object.values.get(DOCUMENT_INDEX.get()),
            object.values.get(FORMULA_INDEX.get()),
        ) else {
            continue;
        };
        let formula = f.as_str().unwrap_or_default();
        let named = named_by
            .entry(formula.to_owned())
            .or_insert_with(|| paths_named_by(schema, formula, &statistics.paths));
        for &at in named.iter() {
            let (path, sketch) = &mut statistics.paths[at];
            if let Some(v) = d.get(path).and_then(DocValue::primitive) {
                sketch.insert(&v);
            }
        }
    }
    Ok(statistics)
}

/// Which of `paths` the overlays of formula `formula` name (by index): the paths whose
/// statistics a document of that formula counts in, as they are the ones it is placed by.
fn paths_named_by(schema: &SpaceSchema, formula: &str, paths: &[(String, Sketch)]) -> Vec<usize> {
    let overlays = schema.formula_subspaces(formula).unwrap_or_default();
    let named = |path: &str| {
        overlays.iter().any(|s| {
            let overlay = schema.subspace(*s).overlay.as_ref();
            overlay.is_some_and(|o| o.axes.iter().any(|a| a.path == path))
        })
    };
    (0..paths.len()).filter(|&i| named(&paths[i].0)).collect()
}

pub fn wire(o: StoredObject) -> WireObject {
    WireObject {
        version: o.version,
        values: o.object.values,
    }
}

/// What a search does with the stubs it finds in a pointer overlay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pointers {
    /// Reads each stub's document from this server's store by key, and keeps it if it still
    /// has the stub's formula and matches every predicate.
    Follow,
    /// Returns the stubs that match the predicates they decide: the client reads the documents
    /// from their point leaders.
    Return,
}

/// How many entries of the store a read of matches may go through: a search tried on the
/// connection's task must not hold it for long. `Unlimited` on the blocking pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    Unlimited,
    Entries(u64),
}

/// Why a read of matches ended early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Its caller's `f` broke.
    Caller,
    /// It went past its [`Budget`], or would have to decode to go on with a limited one
    /// (whose cost it does not bound).
    OverBudget,
}

/// What a search reads, planned once: each part the client sent with the regions of it this
/// server reads, and what becomes of a pointer overlay's stubs. Every read of matches goes
/// through one — a search, count or sorted search, all of it or a cluster client's share —
/// whatever it answers with.
pub struct Scan {
    space: Arc<ServedSpace>,
    predicates: Vec<CheckedPredicate>,
    parts: Vec<(SearchPlan, Vec<RegionIndex>)>,
    pointers: Pointers,
    /// How many regions the search reads here (the meter counts them).
    crossed: usize,
    /// The share of the whole search this server answers (the trace counts it).
    share: f64,
}

impl Scan {
    /// A search's `parts`, as its client planned them (a cluster client: the regions it picked
    /// this server for; a standalone server's client: every region of the plan), each read as
    /// [`tessera_protocol::SpaceConfig::parts_in`] says (a dynamic space's search planned once,
    /// however many parts it has). With `follow_stubs` a pointer overlay's stubs are followed to their documents in this server's store (it leads every key
    /// region, so it holds every document); without, they are returned as they are (the client
    /// reads the documents from their point leaders).
    pub fn of_parts(
        space: Arc<ServedSpace>,
        predicates: Vec<CheckedPredicate>,
        parts: Vec<(SubspaceId, Vec<RegionIndex>)>,
        follow_stubs: bool,
    ) -> Scan {
        let crossed = parts.iter().map(|(_, regions)| regions.len()).sum();
        let subspaces: Vec<SubspaceId> = parts.iter().map(|(s, _)| *s).collect();
        let planned = space
            .config()
            .parts_in(space.tessellations(), &subspaces, &predicates);
        let parts: Vec<_> = planned
            .into_iter()
            .zip(parts)
            .map(|(part, (_, regions))| (part, regions))
            .collect();
        let share = share_of_parts(&space, &parts);
        let pointers = if follow_stubs {
            Pointers::Follow
        } else {
            Pointers::Return
        };
        Scan {
            space,
            predicates,
            parts,
            pointers,
            crossed,
            share,
        }
    }

    pub fn space(&self) -> &ServedSpace {
        &self.space
    }

    pub fn predicates(&self) -> &[CheckedPredicate] {
        &self.predicates
    }

    /// How many regions the search reads here (the regions it was sent).
    pub fn crossed(&self) -> usize {
        self.crossed
    }

    /// The share of the whole search this server answers: all of it when it was sent every
    /// region of the plan (standalone), or the fraction it was sent ([`share_of_parts`]).
    pub fn share(&self) -> f64 {
        self.share
    }

    /// Whether it names a single point of its one subspace (every dimension fixed by equality)
    /// or nothing at all: such a search reads one cell of one region, so it is cheap enough to
    /// answer on the connection's own task.
    pub fn is_point(&self) -> bool {
        match self.parts.as_slice() {
            [(only, _)] => only.is_point(),
            parts => parts.iter().all(|(p, _)| p.boxes.is_empty()),
        }
    }

    /// Calls `f` with every match in its stored encoding, until it breaks, within `budget`
    /// over all the parts: what a search streams to its client.
    pub fn encoded(
        &self,
        store: &Store,
        mut budget: Budget,
        mut f: impl FnMut(EncodedObject) -> ControlFlow<()>,
    ) -> Result<ControlFlow<Stop>, ErrorReply> {
        for (part, regions) in &self.parts {
            let flow = self.encoded_in(store, part, regions, &mut budget, &mut f)?;
            if flow.is_break() {
                return Ok(flow);
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Calls `f` with every match, decoded, until it breaks.
    pub fn decoded(
        &self,
        store: &Store,
        mut f: impl FnMut(StoredObject) -> ControlFlow<()>,
    ) -> Result<(), ErrorReply> {
        for (part, regions) in &self.parts {
            let flow = self.decoded_in(store, part, regions, &mut f)?;
            if flow.is_break() {
                break;
            }
        }
        Ok(())
    }

    /// At most `limit` matches ordered by `sort_by` (ties broken by key), keeping only about
    /// `2 * limit` objects in memory however many match. In a dynamic space only the documents
    /// with a string or a number at the path rank (`tessera_types::sort`).
    pub fn sorted(
        &self,
        store: &Store,
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
        self.decoded(store, |o| {
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

    /// Calls `f` with every committed object of `regions` of `part.subspace` that lies in one of
    /// the part's boxes, is one the part keeps (in a dynamic space, of one of its formulas) and
    /// matches all the predicates, each once, until it breaks. In a pointer overlay, `pointers` says
    /// whether `f` gets the documents or the stubs.
    fn decoded_in(
        &self,
        store: &Store,
        part: &SearchPlan,
        regions: &[RegionIndex],
        mut f: impl FnMut(StoredObject) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, ErrorReply> {
        let (space, predicates, pointers) = (&self.space, &self.predicates, self.pointers);
        let boxes = &part.boxes;
        if boxes.is_empty() || regions.is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        let schema = &space.config().schema;
        let found = store
            .search_boxes(&schema.name, part.subspace, regions, boxes)
            .map_err(storage_error)?;
        // Overlapping boxes (a dynamic space's, one per shape) can hold an object twice.
        let mut seen = (boxes.len() > 1).then(std::collections::BTreeSet::new);
        for item in found {
            let object = item.map_err(storage_error)?;
            if !part_keeps(schema, part, &object.object) {
                continue;
            }
            if let Some(seen) = &mut seen {
                if !seen.insert(object.object.key().clone()) {
                    continue;
                }
            }
            let object = match schema.pointer_overlay(part.subspace) {
                None if matches_all(predicates, &object.object) => object,
                None => continue,
                Some(overlay) => {
                    let mut decided = predicates.iter().filter(|p| p.is_decided_by(overlay));
                    if !decided.all(|p| p.matches(&object.object)) {
                        continue;
                    }
                    match pointers {
                        Pointers::Return => object,
                        Pointers::Follow => {
                            let document = store
                                .get(&schema.name, object.object.key())
                                .map_err(storage_error)?;
                            match document {
                                Some(d)
                                    if pointer_answers(&object.object, &d.object, predicates) =>
                                {
                                    d
                                }
                                _ => continue,
                            }
                        }
                    }
                }
            };
            if f(object).is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// [`Scan::decoded_in`] for a search that passes its matches on: `f` gets each in its stored
    /// encoding, and the read spends `budget` (what is left of it after, for the next part). A
    /// part that needs nothing but the predicates (a typed space's, or any key subspace's; one
    /// box, so nothing comes twice) checks them on the encoded objects and decodes none
    /// ([`EncodedFilter`]); others decode, check and encode again, and only without a limit.
    fn encoded_in(
        &self,
        store: &Store,
        part: &SearchPlan,
        regions: &[RegionIndex],
        budget: &mut Budget,
        mut f: impl FnMut(EncodedObject) -> ControlFlow<()>,
    ) -> Result<ControlFlow<Stop>, ErrorReply> {
        let (space, predicates) = (&self.space, &self.predicates);
        let schema = &space.config().schema;
        let predicates_only = part.boxes.len() == 1
            && schema.pointer_overlay(part.subspace).is_none()
            && (!schema.is_dynamic() || part.subspace == SubspaceId::KEY);
        if !predicates_only {
            if *budget != Budget::Unlimited {
                return Ok(ControlFlow::Break(Stop::OverBudget));
            }
            let flow =
                self.decoded_in(store, part, regions, |o| f(EncodedObject::from_stored(&o)))?;
            return Ok(flow.map_break(|()| Stop::Caller));
        }
        if regions.is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        let mut found = store
            .search_boxes(&schema.name, part.subspace, regions, &part.boxes)
            .map_err(storage_error)?;
        let filter = EncodedFilter::new(predicates);
        if let Budget::Entries(n) = *budget {
            found.limit_reads(n);
        }
        let mut flow = ControlFlow::Continue(());
        while let Some(object) = found.next_encoded() {
            let object = object.map_err(storage_error)?;
            if filter
                .matches(object.object_bytes())
                .map_err(storage_error)?
                && f(object).is_break()
            {
                flow = ControlFlow::Break(Stop::Caller);
                break;
            }
        }
        if found.over_limit() {
            flow = ControlFlow::Break(Stop::OverBudget);
        }
        if let Budget::Entries(n) = budget {
            *n = n.saturating_sub(found.entries_read());
        }
        Ok(flow)
    }
}

/// Calls `f` with the committed object of each of `keys` that has one, in the keys' order,
/// until it breaks (`multi_get`: each key read as a get reads it).
pub fn for_each_of_keys(
    store: &Store,
    space: &ServedSpace,
    keys: &[Value],
    mut f: impl FnMut(StoredObject) -> ControlFlow<()>,
) -> Result<(), ErrorReply> {
    for key in keys {
        let found = store
            .get(&space.config().schema.name, key)
            .map_err(storage_error)?;
        if let Some(o) = found {
            if f(o).is_break() {
                break;
            }
        }
    }
    Ok(())
}

/// The share of a whole search that a server answers when it was sent `parts`: for each part,
/// the fraction of the regions the part reads that this server was sent, averaged over the
/// parts. A server sent every region of the plan (a standalone server, or one that answers a
/// whole search in a cluster) answers all of it; a cluster client that asks for each part's
/// regions separately gets fractions that add up to one per part over its servers.
fn share_of_parts(space: &ServedSpace, parts: &[(SearchPlan, Vec<RegionIndex>)]) -> f64 {
    if parts.is_empty() {
        return 1.0;
    }
    let fraction = |(part, sent): &(SearchPlan, Vec<RegionIndex>)| {
        let read = part
            .regions(&space.tessellations()[part.subspace.get()])
            .len();
        if read == 0 {
            1.0
        } else {
            (sent.len() as f64 / read as f64).min(1.0)
        }
    };
    parts.iter().map(fraction).sum::<f64>() / parts.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_protocol::SpaceConfig;
    use tessera_types::{parse_space, ServerId};

    fn share(parts: Vec<(u16, Vec<u32>)>) -> f64 {
        let schema =
            parse_space("space t key k attributes int x subspace x create 4 partitions").unwrap();
        let config = SpaceConfig::owned_by(1, schema, &[ServerId(1)]);
        let space = Arc::new(ServedSpace::new(config, ServerId(1)));
        assert_eq!(space.tessellations()[0].regions_count(), 4);
        let parts = parts
            .into_iter()
            .map(|(s, regions)| {
                (
                    SubspaceId(s),
                    regions.into_iter().map(RegionIndex).collect(),
                )
            })
            .collect();
        Scan::of_parts(space, vec![], parts, false).share()
    }

    #[test]
    fn a_server_sent_every_region_of_the_plan_answers_the_whole_search() {
        assert_eq!(share(vec![(0, vec![0, 1, 2, 3])]), 1.0);
        assert_eq!(share(vec![(1, vec![0, 1, 2, 3])]), 1.0);
        // Every region of two parts (as a dynamic space's plan has): still one search.
        assert_eq!(
            share(vec![(0, vec![0, 1, 2, 3]), (1, vec![0, 1, 2, 3])]),
            1.0
        );
        assert_eq!(share(vec![]), 1.0);
        // A cluster client's share: the fraction of the part's regions this server was sent.
        assert_eq!(share(vec![(0, vec![1])]), 0.25);
        assert_eq!(share(vec![(1, vec![0, 3])]), 0.5);
    }
}
