//! Replica assignment: which K servers hold each region of a new space or subspace, and in
//! which chain order. A pure function of the schema, the servers and the replica sets the
//! cluster already has: the coordinator's state machine assigns with it, and the benchmark
//! computes the clusters it routes over with it.

use std::collections::HashMap;

use tessera_types::{ServerId, SpaceSchema};

use crate::tessellation::{tessellation_of, Tessellation};

/// Assigns the replica sets of a new space over `servers` (K = `schema.replicas()` of them per
/// region, all distinct; `servers.len() >= K`). A dropped subspace (none in a new space) gets
/// no region.
///
/// The rule, applied region by region in subspace order, then region order:
/// - the members are the K servers holding the fewest regions *of this subspace* so far; ties go
///   to the server holding the fewest regions over the whole cluster (every existing space, plus
///   what this space has assigned so far), then to the smaller id;
/// - the chain order puts first the member heading the fewest regions of this subspace; ties go
///   to the fewest heads over the whole cluster, then to the smaller id.
///
/// Within a subspace, holdings never differ by more than one between servers, so nobody holds
/// more than `ceil(regions * K / servers)`; heads spread the same way. The cluster-wide
/// tie-breaks send the leftovers of each subspace to the least-loaded servers, so load evens out
/// across spaces too. Deterministic: it depends only on its inputs.
/// `existing` is every replica set the cluster already has (each in chain order): the load the
/// tie-breaks even out.
pub fn assign_replicas<'a>(
    schema: &SpaceSchema,
    servers: &[ServerId],
    existing: impl IntoIterator<Item = &'a [ServerId]>,
) -> Vec<Vec<Vec<ServerId>>> {
    let k = schema.replicas() as usize;
    let mut assigner = Assigner::new(k, servers, existing);
    schema
        .subspaces
        .iter()
        .map(|subspace| {
            if !subspace.is_written() {
                return Vec::new();
            }
            let regions = tessellation_of(subspace, schema).regions_count() as usize;
            assigner.subspace(regions)
        })
        .collect()
}

/// Assigns the replica sets of one subspace added to a live space, tessellated as `t`, over
/// `servers` (K = `k` of them per region, all distinct; `servers.len() >= k`): the rule of
/// [`assign_replicas`] for that one subspace, the whole cluster's load being that of the
/// replica sets `existing` (the altered space's among them).
pub fn assign_subspace<'a>(
    t: &Tessellation,
    k: usize,
    servers: &[ServerId],
    existing: impl IntoIterator<Item = &'a [ServerId]>,
) -> Vec<Vec<ServerId>> {
    Assigner::new(k, servers, existing).subspace(t.regions_count() as usize)
}

/// The state of [`assign_replicas`] between subspaces: the servers, and what each holds and
/// heads over the whole cluster so far.
struct Assigner {
    k: usize,
    servers: Vec<ServerId>,
    global_hold: Vec<u64>,
    global_head: Vec<u64>,
}

impl Assigner {
    fn new<'a>(
        k: usize,
        servers: &[ServerId],
        existing: impl IntoIterator<Item = &'a [ServerId]>,
    ) -> Assigner {
        let mut servers = servers.to_vec();
        servers.sort();
        servers.dedup();
        assert!(
            k >= 1 && servers.len() >= k,
            "assigning replicas needs at least K servers"
        );
        let index: HashMap<ServerId, usize> =
            servers.iter().enumerate().map(|(i, s)| (*s, i)).collect();
        let n = servers.len();
        let mut global_hold = vec![0u64; n];
        let mut global_head = vec![0u64; n];
        for set in existing {
            for (pos, s) in set.iter().enumerate() {
                if let Some(&i) = index.get(s) {
                    global_hold[i] += 1;
                    if pos == 0 {
                        global_head[i] += 1;
                    }
                }
            }
        }
        Assigner {
            k,
            servers,
            global_hold,
            global_head,
        }
    }

    /// The replica sets of a subspace of `regions` regions, counted into the cluster's load.
    fn subspace(&mut self, regions: usize) -> Vec<Vec<ServerId>> {
        let n = self.servers.len();
        let (global_hold, global_head) = (&mut self.global_hold, &mut self.global_head);
        let mut hold = vec![0u64; n];
        let mut head = vec![0u64; n];
        // Every sort key ends with the index: the order sorted from does not matter.
        let mut order: Vec<usize> = (0..n).collect();
        let mut sets = Vec::with_capacity(regions);
        for _ in 0..regions {
            order.sort_by_key(|&i| (hold[i], global_hold[i], i));
            let mut members: Vec<usize> = order[..self.k].to_vec();
            members.sort_by_key(|&i| (head[i], global_head[i], i));
            head[members[0]] += 1;
            global_head[members[0]] += 1;
            for &i in &members {
                hold[i] += 1;
                global_hold[i] += 1;
            }
            sets.push(members.iter().map(|&i| self.servers[i]).collect());
        }
        sets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn servers(n: u64) -> Vec<ServerId> {
        (1..=n).map(ServerId).collect()
    }

    proptest! {
        /// Every region gets K distinct servers of the list; within the subspace no server
        /// holds more than ceil(regions * K / servers) regions nor heads more than
        /// ceil(regions / servers) + K - 1, whatever the cluster already holds; and the same
        /// inputs give the same sets.
        #[test]
        fn sets_are_distinct_and_balanced(
            n in 1u64..12,
            k in 1usize..5,
            regions in 0usize..300,
            load in proptest::collection::vec(proptest::collection::vec(1u64..14, 1..4), 0..40),
        ) {
            let k = k.min(n as usize);
            let list = servers(n);
            // Existing sets may name servers not in the list (departed ones): they are ignored.
            let existing: Vec<Vec<ServerId>> =
                load.iter().map(|set| set.iter().copied().map(ServerId).collect()).collect();
            let sets = Assigner::new(k, &list, existing.iter().map(Vec::as_slice)).subspace(regions);
            prop_assert_eq!(sets.len(), regions);
            let mut hold: HashMap<ServerId, usize> = HashMap::new();
            let mut head: HashMap<ServerId, usize> = HashMap::new();
            for set in &sets {
                let mut members = set.clone();
                members.sort();
                members.dedup();
                prop_assert_eq!(members.len(), k, "{:?}", set);
                prop_assert!(set.iter().all(|s| list.contains(s)), "{:?}", set);
                for s in set {
                    *hold.entry(*s).or_default() += 1;
                }
                *head.entry(set[0]).or_default() += 1;
            }
            let most_held = (regions * k).div_ceil(n as usize);
            prop_assert!(hold.values().all(|&h| h <= most_held), "{:?} > {}", hold, most_held);
            let most_headed = regions.div_ceil(n as usize) + k - 1;
            prop_assert!(head.values().all(|&h| h <= most_headed), "{:?} > {}", head, most_headed);
            let again = Assigner::new(k, &list, existing.iter().map(Vec::as_slice)).subspace(regions);
            prop_assert_eq!(again, sets);
        }
    }
}
