//! The advisor against brute force on small cases: every configuration over at most three
//! attributes (every set of subspaces, in every declaration order), each scored by a reference
//! model written again here, plainly, from the crate documentation's equations.

use std::collections::BTreeMap;

mod common;

use common::{kind, primitive};
use proptest::prelude::*;
use tessera_advisor::{
    advise, AdvisorOptions, AttributeStatistics, Calibration, Configuration, Model, Operation,
    PredicateKind, QueryClass, Workload,
};
use tessera_geometry::Tessellation;
use tessera_types::{AttrIndex, AttributeType, PrimitiveType, SpaceSchema};

/// The model again: the cost of one operation of the mix under `subspaces` (declaration order).
fn reference_cost(
    schema: &SpaceSchema,
    w: &Workload,
    c: &Calibration,
    subspaces: &[Vec<AttrIndex>],
) -> f64 {
    let objects = w.objects() as f64;
    let k = schema.replicas() as f64;
    let ordered = |a: AttrIndex| {
        a != AttrIndex::KEY
            && matches!(
                schema.attribute(a).ty.as_primitive(),
                Some(PrimitiveType::Int | PrimitiveType::Float)
            )
    };
    let spread = |a: AttrIndex| if ordered(a) { w.spread(a) } else { 1.0 };
    let slices = |dims: &[AttrIndex]| {
        let t = Tessellation::new(dims.len(), schema.partitions);
        (0..dims.len())
            .map(|i| t.intervals(i) as f64)
            .collect::<Vec<f64>>()
    };
    // The key subspace first, then the others.
    let mut all: Vec<Vec<AttrIndex>> = vec![vec![AttrIndex::KEY]];
    all.extend(subspaces.iter().cloned());
    let mut total = 0.0;
    for class in w.classes() {
        let cost = match &class.operation {
            Operation::Search {
                predicates,
                matches,
            } => {
                let sel = |a: AttrIndex, k: PredicateKind| match k {
                    PredicateKind::Eq => w.equality_selectivity(a),
                    PredicateKind::Range => w.range_selectivity(a),
                };
                let mut matched = objects;
                for &(a, kind) in predicates {
                    matched *= sel(a, kind);
                }
                // Measured matches replace the estimate; a box reads at least the matches
                // (they are all in it) and at most every object.
                let matched = matches.unwrap_or(matched);
                // (regions, dimensions, cost) per subspace; the first smallest (regions, dims).
                let mut best: Option<(f64, usize, f64)> = None;
                for dims in &all {
                    let mut regions = 1.0;
                    let mut read = objects;
                    for (&a, &n) in dims.iter().zip(&slices(dims)) {
                        match predicates.iter().find(|(p, _)| *p == a).map(|(_, k)| *k) {
                            Some(PredicateKind::Eq) => read *= w.equality_selectivity(a),
                            Some(PredicateKind::Range) if ordered(a) => {
                                let s = w.range_selectivity(a);
                                regions *= f64::min(n, 1.0 + s * spread(a) * n);
                                read *= s;
                            }
                            _ => regions *= n,
                        }
                    }
                    let cost = c.search_base_s
                        + c.search_region_s * regions
                        + c.search_object_s * read.max(matched).min(objects);
                    let better = match best {
                        None => true,
                        Some((r, d, _)) => regions < r || (regions == r && dims.len() < d),
                    };
                    if better {
                        best = Some((regions, dims.len(), cost));
                    }
                }
                best.expect("the key subspace").2
            }
            Operation::Update { attributes } => {
                let mut weight = 1.0; // the key subspace
                for dims in subspaces {
                    let mut stays = 1.0;
                    for (&a, &n) in dims.iter().zip(&slices(dims)) {
                        if attributes.contains(&a) {
                            stays /= f64::max(1.0, spread(a) * n);
                        }
                    }
                    let moves = 1.0 - stays;
                    weight += (1.0 - moves) + 2.0 * c.relocation_factor * moves;
                }
                c.write_base_s + c.write_hop_s * k * weight
            }
            // A delete's chain is a new object's: one region per subspace.
            Operation::Put | Operation::Del => {
                c.write_base_s + c.write_hop_s * k * (1.0 + subspaces.len() as f64)
            }
            Operation::Get => c.get_s,
        };
        total += class.probability * cost;
    }
    total
}

/// Every declaration order of every set of distinct non-empty subsets of `attributes` (each
/// subset in attribute order, as the advisor declares them).
fn every_configuration(attributes: &[AttrIndex]) -> Vec<Vec<Vec<AttrIndex>>> {
    let mut subsets = Vec::new();
    for mask in 1u32..(1 << attributes.len()) {
        subsets.push(
            attributes
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, &a)| a)
                .collect::<Vec<_>>(),
        );
    }
    let mut all = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    fn extend(
        subsets: &[Vec<AttrIndex>],
        current: &mut Vec<usize>,
        all: &mut Vec<Vec<Vec<AttrIndex>>>,
    ) {
        all.push(current.iter().map(|&i| subsets[i].clone()).collect());
        for i in 0..subsets.len() {
            if !current.contains(&i) {
                current.push(i);
                extend(subsets, current, all);
                current.pop();
            }
        }
    }
    extend(&subsets, &mut current, &mut all);
    all
}

#[test]
fn every_configuration_is_every_order_of_every_set() {
    let attrs = [AttrIndex(1), AttrIndex(2), AttrIndex(3)];
    // 7 subsets; ordered selections of 0..=7 of them: Σ 7!/(7-k)! = 13,700.
    assert_eq!(every_configuration(&attrs).len(), 13_700);
    assert_eq!(every_configuration(&attrs[..1]).len(), 2);
}

/// A key and three attributes of random types; 1 to 300 partitions; K = 1 to 3.
fn schema() -> impl Strategy<Value = SpaceSchema> {
    (prop::collection::vec(primitive(), 3), 1u32..300, 0u32..3).prop_map(
        |(types, partitions, tolerate)| {
            common::space(AttributeType::STRING, &types, vec![], partitions, tolerate)
        },
    )
}

/// 1 to 4 searches (predicates on the key and the three attributes), 0 to 3 writes, maybe a get.
fn workload(schema: &SpaceSchema) -> BoxedStrategy<Workload> {
    let schema = schema.clone();
    let search = (
        prop::collection::btree_map(0u16..4, kind(), 0..4),
        prop::option::of(0.0f64..1.0),
    )
        .prop_map(|(p, m)| Operation::Search {
            predicates: p.into_iter().map(|(a, k)| (AttrIndex(a), k)).collect(),
            matches: m.filter(|x| *x < 0.3),
        });
    let write = prop_oneof![
        3 => prop::collection::btree_set(1u16..4, 1..4).prop_map(|s| Operation::Update { attributes: s.into_iter().map(AttrIndex).collect() }),
        1 => Just(Operation::Put),
    ];
    let stats =
        prop::collection::btree_map(1u16..4, (1u64..5000, 0.001f64..=1.0, 0.001f64..=1.0), 0..4);
    (
        prop::collection::vec((search, 0.01f64..1.0), 1..=4),
        prop::collection::vec((write, 0.01f64..1.0), 0..=3),
        prop::option::of(0.01f64..1.0),
        1u64..5_000_000,
        stats,
    )
        .prop_map(move |(searches, writes, get, objects, stats)| {
            let mut classes: Vec<(Operation, f64)> = searches.into_iter().chain(writes).collect();
            classes.extend(get.map(|p| (Operation::Get, p)));
            let total: f64 = classes.iter().map(|(_, p)| p).sum();
            let classes = classes
                .into_iter()
                .enumerate()
                .map(|(i, (operation, p))| {
                    let operation = match operation {
                        // `matches` as a fraction of the objects.
                        Operation::Search {
                            predicates,
                            matches,
                        } => Operation::Search {
                            predicates,
                            matches: matches.map(|m| m * objects as f64),
                        },
                        other => other,
                    };
                    QueryClass {
                        line: i + 1,
                        probability: p / total,
                        operation,
                    }
                })
                .collect();
            let stats = stats
                .into_iter()
                .map(|(a, (distinct, selectivity, spread))| {
                    let attr = AttrIndex(a);
                    let ordered = schema.attribute(attr).ty != AttributeType::STRING;
                    (
                        attr,
                        AttributeStatistics {
                            line: 0,
                            distinct: Some(distinct),
                            selectivity: Some(selectivity),
                            spread: ordered.then_some(spread),
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>();
            Workload::new(&schema, Some(objects), classes, stats).expect("valid workload")
        })
        .boxed()
}

/// The entries a search skips (`search_skip_s`) are left at 0 here: this test checks the
/// configurator's enumeration and prunings against every configuration, with the search cost
/// written out independently below, and that term's estimate is the model's own
/// (`partial_match_entries`, checked against the store in tessera-storage's search_cost.rs).
fn calibration() -> impl Strategy<Value = Calibration> {
    (
        (1e-6f64..1e-3, 0.0f64..1e-4),
        0.2f64..4.0,
        1e-6f64..1e-4,
        0.0f64..1e-4,
        1e-7f64..1e-4,
        0.0f64..1e-5,
    )
        .prop_map(
            |(
                (write_hop_s, write_base_s),
                relocation_factor,
                get_s,
                search_base_s,
                search_region_s,
                search_object_s,
            )| Calibration {
                write_base_s,
                search_skip_s: 0.0,
                write_hop_s,
                relocation_factor,
                get_s,
                search_base_s,
                search_region_s,
                search_object_s,
                ..Calibration::default()
            },
        )
}

fn case() -> impl Strategy<Value = (SpaceSchema, Workload, Calibration)> {
    schema()
        .prop_flat_map(|s| (workload(&s), calibration(), Just(s)))
        .prop_map(|(w, c, s)| (s, w, c))
}

/// No bound below what three attributes allow: the advisor must find the best of them all.
fn unbounded() -> AdvisorOptions {
    AdvisorOptions {
        subspaces_max: 7,
        dimensions_max: 3,
        clusters_reported: 3,
        configurations_per_cluster: 3,
        ..AdvisorOptions::default()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a / b - 1.0).abs() < 1e-9
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    /// The advisor's best configuration is the brute-force best, and every throughput it
    /// reports is the reference model's for that configuration.
    #[test]
    fn the_advisor_finds_the_brute_force_best((schema, workload, calibration) in case()) {
        let attributes: Vec<AttrIndex> = (1..=3).map(AttrIndex).filter(|a| {
            workload.classes().iter().any(|c| match &c.operation {
                Operation::Search { predicates, .. } => predicates.iter().any(|(p, _)| p == a),
                Operation::Update { attributes } => attributes.contains(a),
                _ => false,
            })
        }).collect();
        let brute_best = every_configuration(&attributes)
            .iter()
            .map(|c| reference_cost(&schema, &workload, &calibration, c))
            .fold(f64::INFINITY, f64::min);
        let advice = advise(&schema, &workload, calibration, unbounded()).expect("advice");
        prop_assert!(advice.search.exhaustive);
        let best = &advice.clusters[0].configurations[0];
        prop_assert!(close(best.throughput_ops_s, 1.0 / brute_best), "advisor {} brute force {}", best.throughput_ops_s, 1.0 / brute_best);
        // Every reported throughput is the reference model's, clusters are in rank order, and
        // within the tolerance of their best.
        let model = Model::new(&schema, &workload, calibration).expect("valid model");
        let mut previous = f64::INFINITY;
        for cluster in &advice.clusters {
            prop_assert!(cluster.throughput_ops_s_max < previous);
            previous = cluster.throughput_ops_s_min;
            prop_assert!(cluster.throughput_ops_s_min >= cluster.throughput_ops_s_max * (1.0 - unbounded().cluster_tolerance));
            prop_assert!(cluster.configurations_count >= cluster.configurations.len() as u64);
            for p in &cluster.configurations {
                let dims: Vec<Vec<AttrIndex>> = p.subspaces.iter()
                    .map(|s| s.iter().map(|n| schema.attribute_index(n).expect("attribute")).collect())
                    .collect();
                prop_assert!(close(p.throughput_ops_s, 1.0 / reference_cost(&schema, &workload, &calibration, &dims)));
                prop_assert_eq!(p, &model.predict(&Configuration::new(&schema, dims).expect("valid")));
            }
        }
        for b in &advice.baselines {
            let dims: Vec<Vec<AttrIndex>> = b.prediction.subspaces.iter()
                .map(|s| s.iter().map(|n| schema.attribute_index(n).expect("attribute")).collect())
                .collect();
            prop_assert!(close(b.prediction.throughput_ops_s, 1.0 / reference_cost(&schema, &workload, &calibration, &dims)));
            prop_assert!(b.relative_to_best <= 1.0 + 1e-9, "{:?} beats the best", b.name);
        }
    }

    /// Forced to search with a beam, the advisor still scores every single subspace, so its
    /// best is at least the best of those, and at most the exhaustive best.
    #[test]
    fn a_beam_search_is_bounded_by_the_exhaustive_one((schema, workload, calibration) in case()) {
        let exhaustive = advise(&schema, &workload, calibration, unbounded()).expect("advice");
        let beam = advise(&schema, &workload, calibration, AdvisorOptions { configurations_max: 8, beam_width: 2, ..unbounded() })
            .expect("advice");
        let best = |a: &tessera_advisor::Advice| a.clusters[0].throughput_ops_s_max;
        if beam.search.exhaustive {
            // Few enough candidates for 8 configurations: it was exhaustive after all.
            prop_assert!(close(best(&beam), best(&exhaustive)));
        } else {
            prop_assert!(best(&beam) <= best(&exhaustive) * (1.0 + 1e-9));
            let attributes: Vec<AttrIndex> =
                exhaustive.search.attributes.iter().map(|n| schema.attribute_index(n).expect("attribute")).collect();
            let singles = every_configuration(&attributes)
                .into_iter()
                .filter(|c| c.len() <= 1)
                .map(|c| 1.0 / reference_cost(&schema, &workload, &calibration, &c))
                .fold(0.0, f64::max);
            prop_assert!(best(&beam) >= singles * (1.0 - 1e-9), "beam {} < best single {}", best(&beam), singles);
        }
    }
}
