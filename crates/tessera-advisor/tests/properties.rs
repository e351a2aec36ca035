//! Properties of the model over random spaces, workloads, calibrations and configurations.

use std::collections::BTreeMap;

mod common;

use common::{kind, primitive};
use proptest::prelude::*;
use tessera_advisor::{
    AttributeStatistics, Calibration, ClassTerms, Configuration, Model, Operation, PredicateKind,
    Prediction, QueryClass, Workload,
};
use tessera_types::{AttrIndex, Attribute, AttributeType, PrimitiveType, SpaceSchema};

/// Attributes 1..=4 are primitives of random types (the dimensions); 5 is a set (never one).
fn schema() -> impl Strategy<Value = SpaceSchema> {
    (prop::collection::vec(primitive(), 4), 1u32..1000, 0u32..3).prop_map(
        |(types, partitions, tolerate)| {
            let tags = Attribute::new("tags", AttributeType::Set(PrimitiveType::String));
            common::space(AttributeType::INT, &types, vec![tags], partitions, tolerate)
        },
    )
}

/// A search over attributes 0..=5 (a range only where it applies: not on the set).
fn search(schema: &SpaceSchema, with_matches: bool) -> BoxedStrategy<Operation> {
    let schema = schema.clone();
    (
        prop::collection::btree_map(0u16..6, kind(), 0..4),
        prop::option::of(0.0f64..1.0),
    )
        .prop_map(move |(predicates, matches)| Operation::Search {
            predicates: predicates
                .into_iter()
                .map(|(a, k)| {
                    let k = if schema.attribute(AttrIndex(a)).ty.is_primitive() {
                        k
                    } else {
                        PredicateKind::Eq
                    };
                    (AttrIndex(a), k)
                })
                .collect(),
            matches: if with_matches { matches } else { None },
        })
        .boxed()
}

fn operation(schema: &SpaceSchema) -> BoxedStrategy<Operation> {
    prop_oneof![
        3 => search(schema, true),
        2 => prop::collection::btree_set(1u16..6, 1..4).prop_map(|s| Operation::Update { attributes: s.into_iter().map(AttrIndex).collect() }),
        1 => Just(Operation::Put),
        1 => Just(Operation::Get),
    ]
    .boxed()
}

fn statistics(schema: &SpaceSchema) -> BoxedStrategy<BTreeMap<AttrIndex, AttributeStatistics>> {
    let schema = schema.clone();
    prop::collection::btree_map(
        1u16..5,
        (
            1u64..10_000,
            0.0001f64..=1.0,
            0.0001f64..=1.0,
            any::<[bool; 3]>(),
        ),
        0..4,
    )
    .prop_map(move |m| {
        m.into_iter()
            .map(|(a, (distinct, selectivity, spread, given))| {
                let attr = AttrIndex(a);
                let ordered = matches!(
                    schema.attribute(attr).ty.as_primitive(),
                    Some(PrimitiveType::Int | PrimitiveType::Float)
                );
                let stats = AttributeStatistics {
                    line: 0,
                    distinct: Some(distinct),
                    selectivity: given[1].then_some(selectivity),
                    spread: (given[2] && ordered).then_some(spread),
                };
                (attr, stats)
            })
            .collect()
    })
    .boxed()
}

fn workload_from(
    schema: &SpaceSchema,
    operations: Vec<Operation>,
    weights: Vec<f64>,
    objects: u64,
    stats: BTreeMap<AttrIndex, AttributeStatistics>,
) -> Workload {
    let total: f64 = weights.iter().sum();
    let classes = operations
        .into_iter()
        .zip(weights)
        .enumerate()
        .map(|(i, (operation, w))| QueryClass {
            line: i + 1,
            probability: w / total,
            operation,
        })
        .collect();
    Workload::new(schema, Some(objects), classes, stats).expect("valid workload")
}

fn workload(schema: &SpaceSchema) -> BoxedStrategy<Workload> {
    let schema = schema.clone();
    (
        prop::collection::vec((operation(&schema), 0.01f64..1.0), 1..6),
        1u64..10_000_000,
        statistics(&schema),
    )
        .prop_map(move |(classes, objects, stats)| {
            let (operations, weights) = classes.into_iter().unzip();
            workload_from(&schema, operations, weights, objects, stats)
        })
        .boxed()
}

/// Constants in wide ranges. An entry a search reads outside its box costs at most what an
/// object inside it costs (`search_skip_s` ≤ `search_object_s`): with a dearer skip, fixing one
/// dimension of a big subspace can cost more than reading the key subspace whole, in the model
/// as in a store whose seeks are slow, and `fixing_more_attributes_never_makes_a_search_dearer`
/// would not hold.
fn calibration() -> impl Strategy<Value = Calibration> {
    (
        (1e-6f64..1e-3, 0.0f64..1e-3),
        0.1f64..5.0,
        1e-6f64..1e-3,
        0.0f64..1e-4,
        0.0f64..1e-4,
        0.0f64..1e-5,
        0.0f64..=1.0,
    )
        .prop_filter_map(
            "a search must cost something",
            |(
                (write_hop_s, write_base_s),
                relocation_factor,
                get_s,
                search_base_s,
                search_region_s,
                search_object_s,
                skip_share,
            )| {
                let c = Calibration {
                    write_base_s,
                    write_hop_s,
                    relocation_factor,
                    get_s,
                    search_base_s,
                    search_region_s,
                    search_object_s,
                    search_skip_s: search_object_s * skip_share,
                    ..Calibration::default()
                };
                c.check().is_ok().then_some(c)
            },
        )
}

/// A subspace: one to three of attributes 1..=4, in any order.
fn subspace() -> impl Strategy<Value = Vec<AttrIndex>> {
    prop::sample::subsequence(vec![1u16, 2, 3, 4], 1..=3)
        .prop_shuffle()
        .prop_map(|v| v.into_iter().map(AttrIndex).collect())
}

fn configuration(schema: &SpaceSchema) -> BoxedStrategy<Configuration> {
    let schema = schema.clone();
    prop::collection::vec(subspace(), 0..4)
        .prop_map(move |s| Configuration::new(&schema, s).expect("valid configuration"))
        .boxed()
}

fn case() -> impl Strategy<Value = (SpaceSchema, Workload, Calibration, Configuration)> {
    schema()
        .prop_flat_map(|s| (workload(&s), calibration(), configuration(&s), Just(s)))
        .prop_map(|(w, c, conf, s)| (s, w, c, conf))
}

fn predict(
    schema: &SpaceSchema,
    workload: &Workload,
    calibration: Calibration,
    configuration: &Configuration,
) -> Prediction {
    Model::new(schema, workload, calibration)
        .expect("valid model")
        .predict(configuration)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Every prediction is a positive, finite number, and its terms are sane.
    #[test]
    fn predictions_are_positive_and_finite((schema, workload, calibration, configuration) in case()) {
        let p = predict(&schema, &workload, calibration, &configuration);
        prop_assert!(p.throughput_ops_s.is_finite() && p.throughput_ops_s > 0.0);
        prop_assert_eq!(p.classes.len(), workload.classes().len());
        let k = schema.replicas() as f64;
        for class in &p.classes {
            prop_assert!(class.cost_s.is_finite() && class.cost_s > 0.0);
            prop_assert!(class.throughput_ops_s.is_finite() && class.throughput_ops_s > 0.0);
            match &class.terms {
                ClassTerms::Search { regions_contacted, objects_read, objects_matched, .. } => {
                    prop_assert!(*regions_contacted >= 1.0 && *regions_contacted <= schema.partitions as f64 * 2.0);
                    prop_assert!(*objects_read >= *objects_matched - 1e-9 * objects_read.abs());
                    prop_assert!(*objects_matched >= 0.0 && objects_read.is_finite());
                }
                ClassTerms::Update { chain_length, subspaces_relocated } => {
                    let subspaces = configuration.subspaces().len() as f64;
                    prop_assert!(*chain_length >= k * (1.0 + subspaces) - 1e-9);
                    prop_assert!(*chain_length <= k * (1.0 + 2.0 * subspaces) + 1e-9);
                    prop_assert!(*subspaces_relocated >= 0.0 && *subspaces_relocated <= subspaces);
                }
                ClassTerms::Put { chain_length } => {
                    prop_assert_eq!(*chain_length, k * (1.0 + configuration.subspaces().len() as f64));
                }
                ClassTerms::Get => {}
            }
        }
    }

    /// The mix runs between its slowest and its fastest class.
    #[test]
    fn a_mix_lies_between_its_classes((schema, workload, calibration, configuration) in case()) {
        let p = predict(&schema, &workload, calibration, &configuration);
        let slowest = p.classes.iter().map(|c| c.throughput_ops_s).fold(f64::INFINITY, f64::min);
        let fastest = p.classes.iter().map(|c| c.throughput_ops_s).fold(0.0, f64::max);
        prop_assert!(p.throughput_ops_s >= slowest * (1.0 - 1e-12), "{} < {}", p.throughput_ops_s, slowest);
        prop_assert!(p.throughput_ops_s <= fastest * (1.0 + 1e-12), "{} > {}", p.throughput_ops_s, fastest);
        // And it is the harmonic mean of the classes' throughputs, weighted by probability.
        let harmonic = 1.0 / p.classes.iter().map(|c| c.probability / c.throughput_ops_s).sum::<f64>();
        prop_assert!((p.throughput_ops_s / harmonic - 1.0).abs() < 1e-9);
    }

    /// A subspace more, anywhere in the declaration order, never makes a write cheaper.
    #[test]
    fn adding_a_subspace_never_makes_an_update_cheaper(
        (schema, workload, calibration, configuration) in case(),
        extra in subspace(),
        position in 0usize..4,
    ) {
        let mut subspaces = configuration.subspaces().to_vec();
        subspaces.insert(position.min(subspaces.len()), extra);
        let more = Configuration::new(&schema, subspaces).expect("valid configuration");
        let before = predict(&schema, &workload, calibration, &configuration);
        let after = predict(&schema, &workload, calibration, &more);
        for (b, a) in before.classes.iter().zip(&after.classes) {
            if matches!(b.terms, ClassTerms::Update { .. } | ClassTerms::Put { .. }) {
                prop_assert!(a.cost_s > b.cost_s, "line {}: {} then {}", b.line, b.cost_s, a.cost_s);
            }
        }
    }

    /// With one subspace, one predicate more (on an attribute the search did not name, the key
    /// aside) never makes a search dearer, and in any configuration never makes it contact more
    /// regions.
    #[test]
    fn fixing_more_attributes_never_makes_a_search_dearer(
        schema in schema(),
        calibration in calibration(),
        subspace in subspace(),
        others in prop::collection::vec(subspace(), 0..3),
        predicates in prop::collection::btree_map(1u16..6, kind(), 0..4),
        added in (1u16..6, kind()),
        objects in 1u64..10_000_000,
    ) {
        prop_assume!(!predicates.contains_key(&added.0));
        let fix = |a: u16, k| if schema.attribute(AttrIndex(a)).ty.is_primitive() { k } else { PredicateKind::Eq };
        let fewer: Vec<(AttrIndex, PredicateKind)> = predicates.iter().map(|(&a, &k)| (AttrIndex(a), fix(a, k))).collect();
        let mut more = fewer.clone();
        more.push((AttrIndex(added.0), fix(added.0, added.1)));
        let run = |predicates: Vec<(AttrIndex, PredicateKind)>, configuration: &Configuration| {
            let w = workload_from(&schema, vec![Operation::Search { predicates, matches: None }], vec![1.0], objects, BTreeMap::new());
            let p = predict(&schema, &w, calibration, configuration);
            let ClassTerms::Search { regions_contacted, .. } = p.classes[0].terms else { unreachable!() };
            (p.classes[0].cost_s, regions_contacted)
        };
        let alone = Configuration::new(&schema, vec![subspace.clone()]).expect("valid");
        let (cost_fewer, _) = run(fewer.clone(), &alone);
        let (cost_more, _) = run(more.clone(), &alone);
        prop_assert!(cost_more <= cost_fewer * (1.0 + 1e-12), "{} then {}", cost_fewer, cost_more);
        let mut all = vec![subspace];
        all.extend(others);
        let several = Configuration::new(&schema, all).expect("valid");
        let (_, regions_fewer) = run(fewer, &several);
        let (_, regions_more) = run(more, &several);
        prop_assert!(regions_more <= regions_fewer);
    }
}

/// The counterpart with several subspaces, pinned: Tessera's client picks by regions, then
/// dimensions, never by objects read, so a predicate more can send a search to a subspace whose
/// box holds more objects. Here <a1, a2> answers a1 = x ∧ a2 = y in 1 region reading O/10,000
/// objects; adding a3 = z makes <a3> (1 region, 1 dimension) win the tie, reading O/2.
#[test]
fn with_several_subspaces_a_predicate_more_can_make_a_search_dearer() {
    let schema = SpaceSchema::new(
        "t",
        Attribute::new("k", AttributeType::INT),
        (1..=3)
            .map(|i| Attribute::new(format!("a{i}"), AttributeType::STRING))
            .collect(),
        vec![],
        64,
        0,
    )
    .expect("valid space");
    let stats: BTreeMap<AttrIndex, AttributeStatistics> = [(1, 100), (2, 100), (3, 2)]
        .into_iter()
        .map(|(a, d)| {
            (
                AttrIndex(a),
                AttributeStatistics {
                    line: 0,
                    distinct: Some(d),
                    ..Default::default()
                },
            )
        })
        .collect();
    let configuration = Configuration::new(
        &schema,
        vec![vec![AttrIndex(1), AttrIndex(2)], vec![AttrIndex(3)]],
    )
    .expect("valid");
    let run = |attrs: &[u16]| {
        let predicates = attrs
            .iter()
            .map(|&a| (AttrIndex(a), PredicateKind::Eq))
            .collect();
        let w = workload_from(
            &schema,
            vec![Operation::Search {
                predicates,
                matches: None,
            }],
            vec![1.0],
            1_000_000,
            stats.clone(),
        );
        let p = predict(&schema, &w, Calibration::default(), &configuration);
        match p.classes[0].terms {
            ClassTerms::Search {
                subspace_index,
                objects_read,
                ..
            } => (subspace_index, objects_read),
            _ => unreachable!(),
        }
    };
    assert_eq!(run(&[1, 2]), (1, 100.0));
    assert_eq!(run(&[1, 2, 3]), (2, 500_000.0));
}
