//! Which servers a multi-item read asks (seed 003's Figure 1: 7 servers down to 3): every
//! region it needs has several replicas, and the read asks the fewest servers that together
//! hold every one of those regions, each for all it holds of the request.
//!
//! That is set cover (each server covers the needed regions it holds): [`cover_regions`]
//! solves it exactly when the candidate servers are few ([`EXACT_SERVERS_MAX`], by trying
//! sets of servers in increasing size) and greedily otherwise (the server holding the most
//! regions still uncovered first: within a factor `1 + ln(regions)` of the fewest).

use std::collections::BTreeMap;

use tessera_types::ServerId;

/// Up to this many candidate servers, the cover is the smallest there is.
pub const EXACT_SERVERS_MAX: usize = 12;

/// The servers a read asks and, for each, the needed regions (indices into the input) it is
/// asked for. Every needed region is asked of exactly one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cover {
    pub servers: Vec<(ServerId, Vec<usize>)>,
}

impl Cover {
    pub fn servers_count(&self) -> usize {
        self.servers.len()
    }
}

/// The fewest servers among `replicas[i]` (the servers holding needed region `i`) that hold
/// every needed region, exactly for few candidates and greedily for many; `None` when some
/// region has no replica. Ties go to the lower server id, so the same input gives the same
/// cover.
pub fn cover_regions(replicas: &[Vec<ServerId>]) -> Option<Cover> {
    if replicas.iter().any(Vec::is_empty) {
        return None;
    }
    let candidates: Vec<ServerId> = {
        let mut all: Vec<ServerId> = replicas.iter().flatten().copied().collect();
        all.sort();
        all.dedup();
        all
    };
    let chosen = if candidates.len() <= EXACT_SERVERS_MAX {
        smallest_cover(replicas, &candidates)
    } else {
        greedy_cover(replicas, &candidates)
    };
    Some(assign(replicas, &chosen))
}

/// The greedy choice: the candidate holding the most uncovered regions (the first of equals
/// in `candidates`' order), until none is left. Each candidate's count of uncovered regions
/// is kept and lowered as regions get covered, so a read over hundreds of regions and servers
/// costs their sum, not their product.
pub fn greedy_cover(replicas: &[Vec<ServerId>], candidates: &[ServerId]) -> Vec<ServerId> {
    let index: BTreeMap<ServerId, usize> = candidates
        .iter()
        .enumerate()
        .map(|(i, s)| (*s, i))
        .collect();
    // Per region the candidates holding it, per candidate the regions it holds.
    let holders: Vec<Vec<usize>> = replicas
        .iter()
        .map(|set| set.iter().filter_map(|s| index.get(s).copied()).collect())
        .collect();
    let mut held: Vec<Vec<usize>> = vec![Vec::new(); candidates.len()];
    for (region, hs) in holders.iter().enumerate() {
        for &c in hs {
            held[c].push(region);
        }
    }
    let mut gain: Vec<usize> = held.iter().map(Vec::len).collect();
    let mut covered = vec![false; replicas.len()];
    let mut left = replicas.len();
    let mut chosen = Vec::new();
    while left > 0 {
        let best = (0..candidates.len())
            .max_by_key(|&c| (gain[c], std::cmp::Reverse(c)))
            .expect("an uncovered region has a replica");
        assert!(
            gain[best] > 0,
            "an uncovered region has a replica among the candidates"
        );
        for &region in &held[best] {
            if !covered[region] {
                covered[region] = true;
                left -= 1;
                for &c in &holders[region] {
                    gain[c] -= 1;
                }
            }
        }
        chosen.push(candidates[best]);
    }
    chosen
}

/// The smallest cover, by trying every set of `k` candidates for k = 1, 2, ...: the first that
/// covers (in the order of the candidates' ids) is taken.
fn smallest_cover(replicas: &[Vec<ServerId>], candidates: &[ServerId]) -> Vec<ServerId> {
    let n = candidates.len();
    // Which regions each candidate holds, as a bitset over the regions.
    let holds: Vec<Vec<u64>> = candidates
        .iter()
        .map(|s| {
            let mut bits = vec![0u64; replicas.len().div_ceil(64)];
            for (i, set) in replicas.iter().enumerate() {
                if set.contains(s) {
                    bits[i / 64] |= 1 << (i % 64);
                }
            }
            bits
        })
        .collect();
    let full: Vec<u64> = (0..replicas.len().div_ceil(64))
        .map(|w| {
            let in_word = (replicas.len() - w * 64).min(64);
            if in_word == 64 {
                u64::MAX
            } else {
                (1u64 << in_word) - 1
            }
        })
        .collect();
    let mut best: Option<u32> = None;
    for subset in 1u32..(1 << n) {
        if best.is_some_and(|b| subset.count_ones() >= b.count_ones()) {
            continue;
        }
        let mut union = vec![0u64; full.len()];
        for (c, bits) in holds.iter().enumerate() {
            if subset & (1 << c) != 0 {
                for (u, b) in union.iter_mut().zip(bits) {
                    *u |= b;
                }
            }
        }
        if union == full {
            best = Some(subset);
        }
    }
    let best = best.expect("all candidates together cover every region");
    (0..n)
        .filter(|c| best & (1 << c) != 0)
        .map(|c| candidates[c])
        .collect()
}

/// Each region to the first chosen server (in the order chosen) that holds it.
fn assign(replicas: &[Vec<ServerId>], chosen: &[ServerId]) -> Cover {
    let mut by_server: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, set) in replicas.iter().enumerate() {
        let at = chosen
            .iter()
            .position(|s| set.contains(s))
            .expect("a cover holds every region");
        by_server.entry(at).or_default().push(i);
    }
    Cover {
        servers: by_server
            .into_iter()
            .map(|(at, regions)| (chosen[at], regions))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The oracle: the size of the smallest cover, by trying every subset of the servers
    /// that appear (written without the code above).
    fn fewest(replicas: &[Vec<ServerId>]) -> usize {
        let mut servers: Vec<ServerId> = replicas.iter().flatten().copied().collect();
        servers.sort();
        servers.dedup();
        (0u32..1 << servers.len())
            .filter(|subset| {
                replicas.iter().all(|set| {
                    set.iter().any(|s| {
                        let at = servers.iter().position(|x| x == s).unwrap();
                        subset & (1 << at) != 0
                    })
                })
            })
            .map(|subset| subset.count_ones() as usize)
            .min()
            .unwrap()
    }

    fn valid(replicas: &[Vec<ServerId>], cover: &Cover) {
        let mut asked: Vec<usize> = cover
            .servers
            .iter()
            .flat_map(|(s, regions)| {
                for &r in regions {
                    assert!(replicas[r].contains(s), "{s} does not hold region {r}");
                }
                regions.iter().copied()
            })
            .collect();
        asked.sort();
        assert_eq!(asked, (0..replicas.len()).collect::<Vec<_>>());
    }

    /// Regions each held by 1..=k of `servers` servers.
    fn placements(servers: u64, k: usize) -> impl Strategy<Value = Vec<Vec<ServerId>>> {
        prop::collection::vec(
            prop::collection::btree_set(0..servers, 1..=k)
                .prop_map(|s| s.into_iter().map(ServerId).collect::<Vec<_>>()),
            1..24,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Few servers: the cover is valid and as small as the brute force's.
        #[test]
        fn few_servers_get_the_smallest_cover(replicas in placements(10, 3)) {
            let cover = cover_regions(&replicas).unwrap();
            valid(&replicas, &cover);
            prop_assert_eq!(cover.servers_count(), fewest(&replicas));
        }

        /// Greedy (forced, on up to 14 servers so the brute force still runs): valid, and
        /// within the logarithmic bound of the smallest.
        #[test]
        fn greedy_is_valid_and_within_its_bound(replicas in placements(14, 4)) {
            let mut candidates: Vec<ServerId> = replicas.iter().flatten().copied().collect();
            candidates.sort();
            candidates.dedup();
            let chosen = greedy_cover(&replicas, &candidates);
            let cover = assign(&replicas, &chosen);
            valid(&replicas, &cover);
            let best = fewest(&replicas) as f64;
            let bound = best * (1.0 + (replicas.len() as f64).ln());
            prop_assert!(cover.servers_count() as f64 <= bound.max(best),
                "{} servers, best {best}", cover.servers_count());
        }
    }

    /// Seed 003's Figure 1 in small: seven regions, each on its own server and on one of
    /// three others; three servers suffice.
    #[test]
    fn seven_regions_on_three_servers() {
        let replicas: Vec<Vec<ServerId>> = (0..7u64)
            .map(|r| vec![ServerId(100 + r), ServerId(r % 3)])
            .collect();
        let cover = cover_regions(&replicas).unwrap();
        valid(&replicas, &cover);
        assert_eq!(cover.servers_count(), 3);
        assert_eq!(cover_regions(&[vec![ServerId(1)], vec![]]), None);
    }
}
