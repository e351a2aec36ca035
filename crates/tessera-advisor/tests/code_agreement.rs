//! The model against the code it models: tessera-geometry's subspace choice, search boxes and
//! chains, run on concrete objects and predicates (the oracle is Tessera's own code, not the
//! model's).

mod common;

use proptest::prelude::*;
use tessera_advisor::{parse_workload, Calibration, ClassTerms, Configuration, Model};
use tessera_geometry::{
    chain_for_update, plan_search, tessellations, PropertyIndex, RegionIndex, ReplicaMap,
    SearchBox, Tessellation,
};
use tessera_types::{
    AttrIndex, AttributeType, CheckedPredicate, Object, Predicate, PredicateOp, PrimitiveType,
    ServerId, SpaceSchema, SubspaceId, Value,
};

/// A space with a string key and attributes a1.. of the given types.
fn space(types: &[PrimitiveType], partitions: u32, tolerate: u32) -> SpaceSchema {
    space_keyed(PrimitiveType::String, types, partitions, tolerate)
}

fn space_keyed(
    key: PrimitiveType,
    types: &[PrimitiveType],
    partitions: u32,
    tolerate: u32,
) -> SpaceSchema {
    common::space(
        AttributeType::Primitive(key),
        types,
        vec![],
        partitions,
        tolerate,
    )
}

fn value(ty: PrimitiveType, seed: i64) -> Value {
    match ty {
        PrimitiveType::String => Value::from(format!("v{seed}").as_str()),
        PrimitiveType::Int => Value::Int(seed),
        PrimitiveType::Float => Value::Float(seed as f64),
    }
}

fn primitive() -> impl Strategy<Value = PrimitiveType> {
    prop_oneof![
        Just(PrimitiveType::String),
        Just(PrimitiveType::Int),
        Just(PrimitiveType::Float)
    ]
}

/// A predicate kind the code treats the same whatever the values: equality, or a range where
/// it cannot narrow (on a string or on the key). Ranges on ordered axes depend on their values
/// and are checked on average below.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Eq,
    RangeIfHashed,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The model's search uses the subspace `plan_search` picks, with its region count.
    #[test]
    fn the_model_picks_the_subspace_the_code_picks(
        key in primitive(),
        types in prop::collection::vec(primitive(), 4),
        partitions in 1u32..300,
        subspaces in prop::collection::vec(prop::sample::subsequence(vec![1u16, 2, 3, 4], 1..=3).prop_shuffle(), 0..=3),
        predicates in prop::collection::vec((0u16..5, prop_oneof![Just(Kind::Eq), Just(Kind::RangeIfHashed)]), 0..4),
    ) {
        let base = space_keyed(key, &types, partitions, 0);
        let configuration = Configuration::new(&base, subspaces.iter().map(|s| s.iter().map(|&a| AttrIndex(a)).collect()).collect())
            .expect("valid configuration");
        let schema = configuration.to_schema(&base).expect("valid schema");
        // One predicate per attribute; a range only where the axis is hashed.
        let mut chosen: Vec<(u16, &str)> = Vec::new();
        for &(attr, kind) in &predicates {
            let hashed = attr == 0 || types[attr as usize - 1] == PrimitiveType::String;
            let kind = match kind { Kind::RangeIfHashed if hashed => "range", _ => "eq" };
            if !chosen.iter().any(|(a, _)| *a == attr) {
                chosen.push((attr, kind));
            }
        }
        let name = |a: u16| schema.attributes[a as usize].name.clone();
        let search: Vec<String> = chosen.iter().map(|(a, k)| format!("\"{}\": \"{k}\"", name(*a))).collect();
        let workload = parse_workload(&format!("{{\"p\": 1, \"search\": {{{}}}}}", search.join(", ")), &base).expect("valid workload");
        let prediction = Model::new(&base, &workload, Calibration::default()).expect("valid model").predict(&configuration);
        let ClassTerms::Search { subspace_index, regions_contacted, .. } = prediction.classes[0].terms.clone() else {
            panic!("not a search")
        };
        let checked: Vec<CheckedPredicate> = chosen
            .iter()
            .map(|&(a, k)| {
                let ty = schema.attributes[a as usize].ty.as_primitive().expect("primitive");
                let op = if k == "eq" { PredicateOp::Equals(value(ty, 7)) } else { PredicateOp::Range(value(ty, 1), value(ty, 9)) };
                CheckedPredicate::check(&schema, &Predicate::new(name(a), op)).expect("valid predicate")
            })
            .collect();
        let no_shapes = PropertyIndex::new(&schema, &[]);
        let plan = plan_search(&schema, &tessellations(&schema), &[], &no_shapes, &checked).remove(0);
        prop_assert_eq!(subspace_index, plan.subspace.get());
        prop_assert_eq!(regions_contacted, plan.regions_count as f64);
    }
}

/// A tiny deterministic generator (xorshift64*), so the sampling tests need no seed handling.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The int whose coordinate is `c` (coordinates flip the sign bit).
fn int_at(c: u64) -> Value {
    Value::Int((c ^ (1 << 63)) as i64)
}

/// On an int axis cut into n slices, a range of a fraction x of the axis at a uniform place
/// crosses min(n, 1 + x·n) slices on average, as the model says.
#[test]
fn ranges_cross_the_slices_the_model_expects() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (partitions, fraction) in [
        (8u32, 0.1),
        (8, 0.5),
        (64, 0.05),
        (64, 0.3),
        (5, 0.37),
        (100, 0.001),
        (16, 1.0),
    ] {
        let schema = space(&[PrimitiveType::Int], partitions, 0);
        let configuration = Configuration::new(&schema, vec![vec![AttrIndex(1)]]).expect("valid");
        let workload = parse_workload(
            &format!("{{\"attribute\": \"a1\", \"selectivity\": {fraction}}}\n{{\"p\": 1, \"search\": {{\"a1\": \"range\"}}}}"),
            &schema,
        )
        .expect("valid workload");
        let prediction = Model::new(&schema, &workload, Calibration::default())
            .expect("valid")
            .predict(&configuration);
        let ClassTerms::Search {
            regions_contacted: model,
            ..
        } = prediction.classes[0].terms
        else {
            panic!("not a search")
        };
        let with = configuration.to_schema(&schema).expect("valid");
        let t = Tessellation::new(1, partitions);
        let width = fraction * u64::MAX as f64;
        let samples = 20_000;
        let mut total = 0u64;
        for _ in 0..samples {
            let lo = (rng.unit() * (u64::MAX as f64 - width)) as u64;
            let hi = lo.saturating_add(width as u64);
            let p = CheckedPredicate::check(
                &with,
                &Predicate::new("a1", PredicateOp::Range(int_at(lo), int_at(hi))),
            )
            .expect("valid");
            total += SearchBox::for_predicates(&with, SubspaceId(1), &[p])
                .expect("a box")
                .regions_count(&t);
        }
        let measured = total as f64 / samples as f64;
        assert!(
            (measured / model - 1.0).abs() < 0.02,
            "{partitions} partitions, fraction {fraction}: code {measured}, model {model}"
        );
    }
}

/// Every region is owned by the same `k` servers: chains are counted in hops, repeats included.
struct Owners(Vec<ServerId>);

impl ReplicaMap for Owners {
    fn replicas(&self, _: SubspaceId, _: RegionIndex) -> &[ServerId] {
        &self.0
    }
}

/// Partitions, K, subspaces, attributes assigned, spread of a4 as a fraction of its axis.
type ChainCase = (u32, u32, &'static [&'static [u16]], &'static [u16], f64);

/// Chains of updates that assign random new values: their mean length is the model's expected
/// chain length (the new region is in the chain only when the object moves).
#[test]
fn chains_are_as_long_as_the_model_expects() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let types = [
        PrimitiveType::String,
        PrimitiveType::String,
        PrimitiveType::String,
        PrimitiveType::Int,
    ];
    let cases: &[ChainCase] = &[
        (9, 2, &[&[1], &[1, 2], &[3]], &[1], 1.0),
        (9, 1, &[&[1], &[1, 2], &[3]], &[1, 2], 1.0),
        (64, 3, &[&[1, 2, 3]], &[2, 3], 1.0),
        (64, 1, &[&[4], &[1, 4]], &[4], 1.0),
        (64, 2, &[&[4], &[1, 4]], &[4, 1], 0.25),
        (64, 1, &[&[4]], &[4], 0.01),
    ];
    for &(partitions, k, subspaces, assigned, spread) in cases {
        let base = space(&types, partitions, k - 1);
        let configuration = Configuration::new(
            &base,
            subspaces
                .iter()
                .map(|s| s.iter().map(|&a| AttrIndex(a)).collect())
                .collect(),
        )
        .expect("valid");
        let schema = configuration.to_schema(&base).expect("valid");
        let names: Vec<String> = assigned.iter().map(|&a| format!("\"a{a}\"")).collect();
        let workload = parse_workload(
            &format!(
                "{{\"attribute\": \"a4\", \"spread\": {spread}}}\n{{\"p\": 1, \"update\": [{}]}}",
                names.join(", ")
            ),
            &base,
        )
        .expect("valid workload");
        let prediction = Model::new(&base, &workload, Calibration::default())
            .expect("valid")
            .predict(&configuration);
        let ClassTerms::Update {
            chain_length: model,
            ..
        } = prediction.classes[0].terms
        else {
            panic!("not an update")
        };
        let ts = tessellations(&schema);
        let owners = Owners((0..k as u64).map(ServerId).collect());
        // The int a4 spread over the first `spread` of its axis (a run of whole slices when
        // spread × slices is whole): a uniform coordinate there. Strings: a fresh value.
        let draw = |attr: u16, rng: &mut Rng| -> Value {
            if attr == 4 {
                int_at((rng.unit() * spread * 2f64.powi(64)) as u64)
            } else {
                Value::from(format!("s{}", rng.next()).as_str())
            }
        };
        let samples = 20_000;
        let mut hops = 0usize;
        for _ in 0..samples {
            let mut old = Object {
                values: vec![Value::from("key")],
            };
            for a in 1..=4u16 {
                let v = draw(a, &mut rng);
                old.values.push(v);
            }
            let mut new = old.clone();
            for &a in assigned {
                new.values[a as usize] = draw(a, &mut rng);
            }
            hops += chain_for_update(&schema, &ts, &owners, Some(&old), Some(&new)).len();
        }
        let measured = hops as f64 / samples as f64;
        assert!(
            (measured / model - 1.0).abs() < 0.02,
            "{partitions} partitions, K = {k}, {subspaces:?}, assigning {assigned:?}: code {measured}, model {model}"
        );
    }
}
