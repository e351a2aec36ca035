//! Value-dependent chains (docs/design.md §5.2).
//!
//! An update of one key visits the key region's replicas first (its head is the point leader,
//! which orders every update of the key), then, subspace by subspace in declaration order, the
//! replicas of the region the old object lies in and, when the update moves it, those of the
//! region the new object lies in. Old before new, so that while the update travels the object
//! is always committed somewhere: it never vanishes from a search.

use tessera_types::{Object, ServerId, SpaceSchema, SubspaceId};

use crate::tessellation::{region_of_object, RegionIndex, Tessellation};

/// Who owns which region: the configuration's replica sets, as the chain sees them.
pub trait ReplicaMap {
    /// The replica set of `region` of `subspace`, head first. Never empty.
    fn replicas(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId];
}

/// One server of a chain, and the region on whose behalf it takes part. A server may appear
/// in several hops when it owns several of the regions involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainHop {
    pub subspace: SubspaceId,
    pub region: RegionIndex,
    pub server: ServerId,
}

/// The chain of an update from `old` to `new` (`old` absent for an insert, `new` absent for a
/// delete). `tessellations[i]` is the tessellation of `schema.subspaces[i]`.
///
/// # Panics
/// When both objects are absent or their keys differ: an update concerns exactly one key.
pub fn chain_for_update(
    schema: &SpaceSchema,
    tessellations: &[Tessellation],
    replicas: &impl ReplicaMap,
    old: Option<&Object>,
    new: Option<&Object>,
) -> Vec<ChainHop> {
    assert_eq!(
        tessellations.len(),
        schema.subspaces.len(),
        "one tessellation per subspace"
    );
    assert!(
        old.is_some() || new.is_some(),
        "an update has an old or a new object"
    );
    if let (Some(o), Some(n)) = (old, new) {
        assert_eq!(o.key(), n.key(), "an update concerns one key");
    }
    // `None` where the object is not placed (a dynamic space's document outside its formula).
    let region = |id: SubspaceId, object: &Object| {
        let t = &tessellations[id.get()];
        assert_eq!(
            t.dimensions(),
            schema.subspace(id).dimensions.len(),
            "tessellation matches its subspace"
        );
        region_of_object(schema, id, t, object)
    };
    let mut chain = Vec::new();
    let mut visit = |subspace: SubspaceId, region: RegionIndex| {
        let servers = replicas.replicas(subspace, region);
        assert!(
            !servers.is_empty(),
            "configuration invariant: every region has a replica"
        );
        chain.extend(servers.iter().map(|&server| ChainHop {
            subspace,
            region,
            server,
        }));
    };
    let existing = old.or(new).expect("checked above");
    let key_region = region(SubspaceId::KEY, existing).expect("every object has a key region");
    visit(SubspaceId::KEY, key_region);
    // A subspace being built is written like any other; a dropped one is not.
    for id in schema.written_subspaces().skip(1) {
        let from = old.and_then(|o| region(id, o));
        let to = new.and_then(|n| region(id, n));
        if let Some(r) = from {
            visit(id, r);
        }
        if let Some(r) = to.filter(|&r| Some(r) != from) {
            visit(id, r);
        }
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinate::point;
    use proptest::prelude::*;
    use tessera_types::{parse_space, Value};

    /// Region r of subspace s is owned by servers 1000*s + 10*r + i, for i < k.
    struct Synthetic {
        sets: Vec<Vec<Vec<ServerId>>>,
    }

    impl Synthetic {
        fn new(ts: &[Tessellation], k: u64) -> Synthetic {
            let sets = ts
                .iter()
                .enumerate()
                .map(|(s, t)| {
                    (0..t.regions_count())
                        .map(|r| {
                            (0..k)
                                .map(|i| ServerId(1000 * s as u64 + 10 * r as u64 + i))
                                .collect()
                        })
                        .collect()
                })
                .collect();
            Synthetic { sets }
        }
    }

    impl ReplicaMap for Synthetic {
        fn replicas(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
            &self.sets[subspace.get()][region.0 as usize]
        }
    }

    fn setup(k: u64) -> (SpaceSchema, Vec<Tessellation>, Synthetic) {
        let s = parse_space("space t key k attributes int x, int y, string z subspace x subspace y create 4 partitions")
            .expect("valid space");
        let ts = crate::tessellation::tessellations(&s);
        let r = Synthetic::new(&ts, k);
        (s, ts, r)
    }

    fn obj(x: i64, y: i64, z: &str) -> Object {
        Object {
            values: vec![
                Value::from("key"),
                Value::Int(x),
                Value::Int(y),
                Value::from(z),
            ],
        }
    }

    /// The (subspace, region) pairs a chain visits, once per replica set.
    fn regions(chain: &[ChainHop], k: usize) -> Vec<(u16, u32)> {
        chain
            .chunks(k)
            .map(|c| (c[0].subspace.0, c[0].region.0))
            .collect()
    }

    #[test]
    fn insert_delete_update_relocate() {
        let (s, ts, r) = setup(1);
        let key_region = ts[0]
            .region_of(&point(&s, SubspaceId::KEY, &obj(0, 0, "")).expect("placed"))
            .0;
        // With 4 intervals, int 0 is in interval 2, -1 in interval 1, i64::MIN in interval 0.
        let (a, b) = (obj(0, 0, ""), obj(-1, 0, "other"));
        let insert = chain_for_update(&s, &ts, &r, None, Some(&a));
        assert_eq!(regions(&insert, 1), vec![(0, key_region), (1, 2), (2, 2)]);
        let delete = chain_for_update(&s, &ts, &r, Some(&a), None);
        assert_eq!(regions(&delete, 1), vec![(0, key_region), (1, 2), (2, 2)]);
        // z is no dimension and 1 stays in x's interval 2: no relocation.
        let within = chain_for_update(&s, &ts, &r, Some(&a), Some(&obj(1, 0, "changed")));
        assert_eq!(regions(&within, 1), vec![(0, key_region), (1, 2), (2, 2)]);
        // x moves to another interval: old region of x before new.
        let relocation = chain_for_update(&s, &ts, &r, Some(&a), Some(&b));
        assert_eq!(
            regions(&relocation, 1),
            vec![(0, key_region), (1, 2), (1, 1), (2, 2)]
        );
        let back = chain_for_update(&s, &ts, &r, Some(&b), Some(&a));
        assert_eq!(
            regions(&back, 1),
            vec![(0, key_region), (1, 1), (1, 2), (2, 2)]
        );
        assert_eq!(
            back[0].server,
            ServerId(10 * key_region as u64),
            "the point leader heads the chain"
        );
    }

    #[test]
    fn every_replica_in_order() {
        let (s, ts, r) = setup(2);
        let chain = chain_for_update(
            &s,
            &ts,
            &r,
            Some(&obj(0, 0, "")),
            Some(&obj(i64::MIN, 0, "")),
        );
        let servers: Vec<u64> = chain.iter().map(|h| h.server.0).collect();
        let key = 10
            * ts[0]
                .region_of(&point(&s, SubspaceId::KEY, &obj(0, 0, "")).expect("placed"))
                .0 as u64;
        assert_eq!(
            servers,
            vec![key, key + 1, 1020, 1021, 1000, 1001, 2020, 2021]
        );
    }

    #[test]
    #[should_panic(expected = "one key")]
    fn keys_must_agree() {
        let (s, ts, r) = setup(1);
        let mut other = obj(0, 0, "");
        other.values[0] = Value::from("another");
        chain_for_update(&s, &ts, &r, Some(&obj(0, 0, "")), Some(&other));
    }

    #[test]
    #[should_panic(expected = "old or a new")]
    fn an_update_has_an_object() {
        let (s, ts, r) = setup(1);
        chain_for_update(&s, &ts, &r, None, None);
    }

    proptest! {
        /// docs/design.md §8: K(1 + |N| + 2|M|), where M are the subspaces the update relocates the
        /// object in and N the others; an insert or a delete is K(1 + subspaces).
        #[test]
        fn chain_length(k in 1u64..4, old in prop::option::of((any::<i64>(), any::<i64>())),
                        new in prop::option::of((any::<i64>(), any::<i64>()))) {
            prop_assume!(old.is_some() || new.is_some());
            let (s, ts, r) = setup(k);
            let old = old.map(|(x, y)| obj(x, y, ""));
            let new = new.map(|(x, y)| obj(x, y, ""));
            let chain = chain_for_update(&s, &ts, &r, old.as_ref(), new.as_ref());
            let others = s.subspaces.len() as u64 - 1;
            let expected = match (&old, &new) {
                (Some(o), Some(n)) => {
                    let m = s.subspace_ids().skip(1)
                        .filter(|&id| point(&s, id, o) .map(|p| ts[id.get()].region_of(&p)) != point(&s, id, n).map(|p| ts[id.get()].region_of(&p)))
                        .count() as u64;
                    k * (1 + (others - m) + 2 * m)
                }
                _ => k * (1 + others),
            };
            prop_assert_eq!(chain.len() as u64, expected);
            prop_assert_eq!(chain[0].subspace, SubspaceId::KEY);
            // Subspaces appear in declaration order.
            prop_assert!(chain.windows(2).all(|w| w[0].subspace <= w[1].subspace));
        }
    }
}
