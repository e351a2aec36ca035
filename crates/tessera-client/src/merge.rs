//! Combining the answers of a search's servers (cluster mode), as pure functions.
//!
//! Every server answers for the regions it was asked for. While an update relocates an object from
//! one region to another, both can hold it committed for a moment (docs/design.md §5): the client
//! keeps one object per key, the one with the highest version.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use tessera_protocol::{SortOrder, WireObject};
use tessera_types::{SortKey, SortValue, Value};

/// One object per key (`values[0]`), the highest version of each, in key order. Every object
/// must have its key.
pub(crate) fn merge_highest_version(
    objects: impl IntoIterator<Item = WireObject>,
) -> Vec<WireObject> {
    let mut by_key: BTreeMap<Value, WireObject> = BTreeMap::new();
    for object in objects {
        match by_key.entry(object.values[0].clone()) {
            Entry::Vacant(slot) => {
                slot.insert(object);
            }
            Entry::Occupied(mut slot) => {
                if object.version > slot.get().version {
                    slot.insert(object);
                }
            }
        }
    }
    by_key.into_values().collect()
}

/// At most `limit` objects ordered by attribute `sort_by`, ties broken by key, as a standalone
/// server orders them: by the total order of [`Value`], ascending or descending (a descending
/// order reverses the key tie-break too).
pub(crate) fn sort_limit(
    objects: Vec<WireObject>,
    sort_by: &SortKey,
    limit: usize,
    order: SortOrder,
) -> Vec<WireObject> {
    // As a standalone server ranks them: objects with nothing to rank by are left out.
    let mut ranked: Vec<(SortValue, WireObject)> = objects
        .into_iter()
        .filter_map(|o| Some((sort_by.rank(&o.values)?, o)))
        .collect();
    let rank = |(v, o): &(SortValue, WireObject)| (v.clone(), o.values[0].clone());
    match order {
        SortOrder::Ascending => ranked.sort_by_cached_key(rank),
        SortOrder::Descending => ranked.sort_by_cached_key(|r| std::cmp::Reverse(rank(r))),
    }
    ranked.truncate(limit);
    ranked.into_iter().map(|(_, o)| o).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use tessera_types::Version;

    fn object(key: i64, version: u64, payload: i64) -> WireObject {
        WireObject {
            version: Version(version),
            values: vec![Value::Int(key), Value::Int(payload)],
        }
    }

    #[test]
    fn a_relocated_object_is_kept_once_at_its_highest_version() {
        let merged = merge_highest_version(vec![
            object(1, 3, 30),
            object(2, 1, 10),
            object(1, 4, 40),
            object(1, 2, 20),
        ]);
        assert_eq!(merged, vec![object(1, 4, 40), object(2, 1, 10)]);
    }

    #[test]
    fn sorting_follows_the_server() {
        let objects = vec![
            object(1, 1, 5),
            object(2, 1, 3),
            object(3, 1, 5),
            object(4, 1, 1),
        ];
        let attr = SortKey::Attribute(tessera_types::AttrIndex(1));
        let keys = |v: Vec<WireObject>| {
            v.into_iter()
                .map(|o| o.values[0].clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(sort_limit(objects.clone(), &attr, 3, SortOrder::Ascending)),
            [4, 2, 1].map(Value::Int)
        );
        assert_eq!(
            keys(sort_limit(objects.clone(), &attr, 3, SortOrder::Descending)),
            [3, 1, 2].map(Value::Int)
        );
        assert!(sort_limit(objects.clone(), &attr, 0, SortOrder::Ascending).is_empty());
        assert_eq!(
            sort_limit(objects, &attr, 10, SortOrder::Ascending).len(),
            4
        );
    }

    fn objects() -> impl Strategy<Value = Vec<WireObject>> {
        proptest::collection::vec((0..8i64, 1..6u64, -3..3i64), 0..40).prop_map(|v| {
            v.into_iter()
                .map(|(k, version, p)| object(k, version, p))
                .collect()
        })
    }

    proptest! {
        /// No key twice; every key given comes out; each at the highest version it had, with
        /// the values of an object that had that version.
        #[test]
        fn merge_keeps_one_highest_version_per_key(objects in objects()) {
            let merged = merge_highest_version(objects.clone());
            let keys: Vec<&Value> = merged.iter().map(|o| &o.values[0]).collect();
            prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "one per key, in key order");
            let given: BTreeSet<&Value> = objects.iter().map(|o| &o.values[0]).collect();
            prop_assert_eq!(keys.len(), given.len());
            for kept in &merged {
                let highest = objects.iter().filter(|o| o.values[0] == kept.values[0]).map(|o| o.version).max();
                prop_assert_eq!(Some(kept.version), highest);
                prop_assert!(objects.contains(kept));
            }
        }

        /// The first `limit` of the whole list sorted by (attribute, key), or its reverse.
        #[test]
        fn sort_limit_is_a_prefix_of_the_full_order(objects in objects(), limit in 0..50usize, descending in any::<bool>()) {
            let objects = merge_highest_version(objects);
            let order = if descending { SortOrder::Descending } else { SortOrder::Ascending };
            let sorted = sort_limit(objects.clone(), &SortKey::Attribute(tessera_types::AttrIndex(1)), limit, order);
            let mut all = objects.clone();
            all.sort_by(|a, b| (&a.values[1], &a.values[0]).cmp(&(&b.values[1], &b.values[0])));
            if descending { all.reverse(); }
            all.truncate(limit);
            prop_assert_eq!(sorted, all);
        }
    }
}
