//! The worked examples of seed 000 chapter 4, computed by hand, against the model.

use tessera_advisor::fit::chain_length;
use tessera_advisor::{parse_workload, Calibration, ClassTerms, Configuration, Model, Prediction};
use tessera_types::{parse_space, SpaceSchema};

fn space(partitions: u32, tolerate: u32) -> SpaceSchema {
    parse_space(&format!(
        "space s key k attributes string a, string b, string c, string d, string e, int n \
         create {partitions} partitions tolerate {tolerate} failures"
    ))
    .expect("valid space")
}

fn predict(
    schema: &SpaceSchema,
    workload: &str,
    subspaces: &[&[&str]],
    calibration: Calibration,
) -> Prediction {
    let workload = parse_workload(workload, schema).expect("valid workload");
    let dims = subspaces
        .iter()
        .map(|s| {
            s.iter()
                .map(|n| schema.attribute_index(n).expect("attribute"))
                .collect()
        })
        .collect();
    let configuration = Configuration::new(schema, dims).expect("valid configuration");
    Model::new(schema, &workload, calibration)
        .expect("valid model")
        .predict(&configuration)
}

fn search_terms(p: &Prediction) -> (usize, f64, f64) {
    match &p.classes[0].terms {
        ClassTerms::Search {
            subspace_index,
            regions_contacted,
            objects_read,
            ..
        } => (*subspace_index, *regions_contacted, *objects_read),
        other => panic!("not a search: {other:?}"),
    }
}

/// Table 4.1: O = 256,000 objects, R = 256 regions, the search fixes a and b by equality.
/// Every attribute has 16 distinct values, so the objects one value selects are as many as
/// the seed's 16 regions × 1,000 objects of example 3.
#[test]
fn table_4_1_regions_contacted() {
    let schema = space(256, 0);
    let workload = r#"{"objects": 256000}
        {"attribute": "a", "distinct": 16}
        {"attribute": "b", "distinct": 16}
        {"p": 1, "search": {"a": "eq", "b": "eq"}}"#;
    let run = |subspaces: &[&[&str]]| {
        search_terms(&predict(
            &schema,
            workload,
            subspaces,
            Calibration::default(),
        ))
    };
    // 1. S = Q: one region (16 × 16, both fixed); the box holds 256,000 / 256 = 1,000 objects.
    assert_eq!(run(&[&["a", "b"]]), (1, 1.0, 1000.0));
    // 2. Q ∩ S = ∅: 256 regions, every object. Tessera searches the key subspace (index 0):
    //    as many regions as <c, d> and fewer dimensions.
    assert_eq!(run(&[&["c", "d"]]), (0, 256.0, 256_000.0));
    // 3. S = <b, c>: 16^(2-1) = 16 regions; only b's box, 256,000 / 16 objects, is read.
    assert_eq!(run(&[&["b", "c"]]), (1, 16.0, 16_000.0));
    // 4. S = <b, c, d>: the seed's 256^(2/3) = 40.3 regions; Tessera cuts 256 regions in 3
    //    dimensions into 7 × 6 × 6 (252), b first with 7: fixing b leaves 6 × 6 = 36. The seed
    //    counts 40,317 objects touched (whole regions); Tessera reads b's box, 16,000.
    assert_eq!(run(&[&["b", "c", "d"]]), (1, 36.0, 16_000.0));
    // 5. S = <b, c, d, e>: 4^3 = 64 regions.
    assert_eq!(run(&[&["b", "c", "d", "e"]]), (1, 64.0, 16_000.0));
    // Declared with b last, b gets 6 slices and the others 7 and 6: 7 × 6 = 42 regions.
    assert_eq!(run(&[&["c", "d", "b"]]), (1, 42.0, 16_000.0));
}

/// An update's attributes, the subspaces, |N|, |M|, the seed's chain length for K = 1, 2, 3.
type Example = (
    &'static str,
    &'static [&'static [&'static str]],
    u32,
    u32,
    [u32; 3],
);

/// Table 4.5: the chain of a modification, the seed's 1 + K(1 + |N| + 2|M|) (its leading 1 is
/// the read before the modify, which Tessera does not do). 65,536 partitions make a new string
/// value leave its slice with probability 1 − 1/65,536, so the relocation is all but certain,
/// as the seed assumes.
#[test]
fn table_4_5_chain_lengths() {
    let examples: &[Example] = &[
        (r#"["a"]"#, &[], 0, 0, [2, 3, 4]),                      // 1 + K
        (r#"["a"]"#, &[&["b"]], 1, 0, [3, 5, 7]),                // 1 + 2K
        (r#"["a"]"#, &[&["a"]], 0, 1, [4, 7, 10]),               // 1 + 3K
        (r#"["a"]"#, &[&["a"], &["b"]], 1, 1, [5, 9, 13]),       // 1 + 4K
        (r#"["a", "b"]"#, &[&["a"], &["b"]], 0, 2, [6, 11, 16]), // 1 + 5K
        (r#"["a"]"#, &[&["a"], &["b"], &["c"]], 2, 1, [6, 11, 16]), // 1 + 5K
        (
            r#"["a", "b"]"#,
            &[&["a"], &["b"], &["c"]],
            1,
            2,
            [7, 13, 19],
        ), // 1 + 6K
    ];
    for (i, &(update, subspaces, n, m, seed)) in examples.iter().enumerate() {
        for k in 1..=3u32 {
            let schema = space(65_536, k - 1);
            let workload = format!(r#"{{"p": 1, "update": {update}}}"#);
            let p = predict(&schema, &workload, subspaces, Calibration::default());
            let ClassTerms::Update {
                chain_length: got,
                subspaces_relocated,
            } = p.classes[0].terms
            else {
                panic!("not an update")
            };
            let tessera = seed[k as usize - 1] - 1;
            assert_eq!(chain_length(k, n, m), tessera, "example {}, K = {k}", i + 1);
            assert!(
                (got - tessera as f64).abs() < 1e-3 * k as f64 * m as f64 + 1e-12,
                "example {}, K = {k}: {got}",
                i + 1
            );
            assert!((subspaces_relocated - m as f64).abs() < 1e-4 * m as f64 + 1e-12);
        }
    }
}

/// Eq. 4.5 with the seed's constants, Tmax = 98,000 and α = 2.66, for example 5 with K = 2:
/// by hand, 98,000 / (2 (1 + 0 + 2 × 2.66 × 2)) = 98,000 / 23.28 = 4,209.6 updates/s (the
/// seed's 1 + … would give 98,000 / 24.28 = 4,036.2).
#[test]
fn eq_4_5_with_the_seeds_constants() {
    let schema = space(65_536, 1);
    let calibration = Calibration {
        write_hop_s: 1.0 / 98_000.0,
        relocation_factor: 2.66,
        ..Calibration::default()
    };
    let p = predict(
        &schema,
        r#"{"p": 1, "update": ["a", "b"]}"#,
        &[&["a"], &["b"]],
        calibration,
    );
    assert!(
        (p.throughput_ops_s - 4209.6).abs() < 0.2,
        "{}",
        p.throughput_ops_s
    );
    // Example 2 (nothing moves, α plays no part): 98,000 / (2 × 2) = 24,500.
    let p = predict(
        &schema,
        r#"{"p": 1, "update": ["a"]}"#,
        &[&["b"]],
        calibration,
    );
    assert!((p.throughput_ops_s - 24_500.0).abs() < 1e-6);
}

/// Relocation is a probability in Tessera: the chain adds the new region only when the object
/// leaves its region. Hand-computed for a few tessellations.
#[test]
fn relocation_probabilities() {
    let run = |partitions: u32, stats: &str, update: &str, subspaces: &[&[&str]]| {
        let schema = space(partitions, 0);
        let p = predict(
            &schema,
            &format!("{stats}\n{{\"p\": 1, \"update\": {update}}}"),
            subspaces,
            Calibration::default(),
        );
        let ClassTerms::Update { chain_length, .. } = p.classes[0].terms else {
            panic!("not an update")
        };
        chain_length
    };
    // 4 slices: a new string lands in another one with probability 3/4.
    assert_eq!(run(4, "", r#"["a"]"#, &[&["a"]]), 1.0 + 1.75);
    // <a, b> in 16 regions (4 × 4): assigning a moves with probability 3/4, assigning both
    // with 1 − 1/16.
    assert_eq!(run(16, "", r#"["a"]"#, &[&["a", "b"]]), 1.0 + 1.75);
    assert_eq!(
        run(16, "", r#"["a", "b"]"#, &[&["a", "b"]]),
        1.0 + 1.0 + 15.0 / 16.0
    );
    // An int whose values fill 1 % of its axis, cut into 64 slices, occupies less than one
    // slice: an update never moves the object.
    assert_eq!(
        run(
            64,
            r#"{"attribute": "n", "spread": 0.01}"#,
            r#"["n"]"#,
            &[&["n"]]
        ),
        2.0
    );
    // Filling a quarter of the axis, it spans 16 of 64 slices: moves with probability 15/16.
    assert_eq!(
        run(
            64,
            r#"{"attribute": "n", "spread": 0.25}"#,
            r#"["n"]"#,
            &[&["n"]]
        ),
        1.0 + 1.0 + 15.0 / 16.0
    );
}

/// A range on an ordered axis crosses min(n, 1 + s·f·n) slices; on a hashed one, all of them.
#[test]
fn ranges() {
    let run = |stats: &str, search: &str| {
        let schema = space(64, 0);
        let p = predict(
            &schema,
            &format!("{stats}\n{{\"p\": 1, \"search\": {search}}}"),
            &[&["n", "a"]],
            Calibration::default(),
        );
        search_terms(&p)
    };
    // 8 × 8 regions. A range of 1/4 of the values of n, spread over the whole axis: 1 + 2 = 3
    // slices, a left open: 3 × 8 = 24 regions; 1/4 of the objects read.
    assert_eq!(
        run(
            r#"{"objects": 1000}
                      {"attribute": "n", "selectivity": 0.25}"#,
            r#"{"n": "range"}"#
        ),
        (1, 24.0, 250.0)
    );
    // Values within 1 % of the axis: the range stays in one slice (1.02), then a fixed: 1.02.
    let (_, regions, _) = run(
        r#"{"attribute": "n", "selectivity": 0.25, "spread": 0.01}"#,
        r#"{"n": "range", "a": "eq"}"#,
    );
    assert!((regions - 1.02).abs() < 1e-12);
    // A range on a string crosses every slice: 8 × 8 = 64 regions, as many as the key
    // subspace, which the search then uses (fewer dimensions).
    assert_eq!(
        run(r#"{"objects": 1000}"#, r#"{"a": "range"}"#),
        (0, 64.0, 1000.0)
    );
}

/// Not the seed's: the entries a partial match skips, and the fixed write cost, by hand. 64
/// partitions, 64,000 objects of unique hashed values b and c, 100 values of a. <a, b, c> is
/// cut 4 × 4 × 4 (1,000 objects a region): fixing a crosses 16 regions and skips
/// 16 × 1,000^(2/3) = 1,600 entries; fixing a and b crosses 4 and skips 4 × 1,000^(1/3) = 40;
/// fixing all three is a point and skips none; fixing none reads the key subspace whole.
#[test]
fn partial_matches_skip_m_to_the_open_over_d_entries_per_region() {
    let schema = space(64, 0);
    let header = r#"{"objects": 64000}
        {"attribute": "a", "distinct": 100}
        {"attribute": "b", "distinct": 64000}
        {"attribute": "c", "distinct": 64000}
        {"attribute": "d", "distinct": 64000}"#;
    let c = Calibration {
        search_base_s: 1e-6,
        search_region_s: 2e-6,
        search_object_s: 0.5e-6,
        search_skip_s: 3e-6,
        ..Calibration::default()
    };
    for (search, regions, read, skipped) in [
        (r#"{"a": "eq"}"#, 16.0, 640.0, 1600.0),
        (r#"{"a": "eq", "b": "eq"}"#, 4.0, 0.01, 40.0),
        (
            r#"{"a": "eq", "b": "eq", "c": "eq"}"#,
            1.0,
            0.01 / 64000.0,
            0.0,
        ),
    ] {
        let p = predict(
            &schema,
            &format!("{header}\n{{\"p\": 1, \"search\": {search}}}"),
            &[&["a", "b", "c"]],
            c,
        );
        let ClassTerms::Search {
            subspace_index,
            regions_contacted,
            objects_read,
            entries_skipped,
            ..
        } = p.classes[0].terms
        else {
            panic!("a search")
        };
        assert_eq!(subspace_index, 1, "{search}");
        assert!((regions_contacted - regions).abs() < 1e-9, "{search}");
        assert!(
            (objects_read / read - 1.0).abs() < 1e-9,
            "{search}: {objects_read}"
        );
        assert!(
            (entries_skipped - skipped).abs() < 1e-6 * skipped.max(1.0),
            "{search}: {entries_skipped}"
        );
        let cost = 1e-6 + 2e-6 * regions + 0.5e-6 * read + 3e-6 * skipped;
        assert!((p.classes[0].cost_s / cost - 1.0).abs() < 1e-9, "{search}");
    }
    // A one-dimensional subspace has no partial match; a point in <d> neither.
    let p = predict(
        &schema,
        &format!("{header}\n{{\"p\": 1, \"search\": {{\"d\": \"eq\"}}}}"),
        &[&["d"]],
        c,
    );
    assert!(
        matches!(p.classes[0].terms, ClassTerms::Search { entries_skipped, .. } if entries_skipped == 0.0)
    );
    // Writes: a fixed cost once, then a hop per server: a put through <a, b, c> has a chain
    // of 2 servers (K = 1).
    let w = Calibration {
        write_base_s: 30e-6,
        write_hop_s: 10e-6,
        ..Calibration::default()
    };
    let p = predict(&schema, r#"{"p": 1, "put": true}"#, &[&["a", "b", "c"]], w);
    assert!(
        (p.classes[0].cost_s - 50e-6).abs() < 1e-12,
        "{}",
        p.classes[0].cost_s
    );
}
