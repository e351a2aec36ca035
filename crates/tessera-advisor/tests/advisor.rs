//! The advisor on cases worked out by hand, its output, and its refusals.

use tessera_advisor::{
    advise, parse_workload, Advice, AdviseError, AdvisorOptions, BaselineName, Calibration,
    CalibrationError, ClassTerms, ModelError,
};
use tessera_types::{parse_space, SpaceSchema};

fn space() -> SpaceSchema {
    parse_space(
        "space hotels key id attributes string city, int stars, float price, string tel \
         subspace tel create 64 partitions tolerate 1 failure",
    )
    .expect("valid space")
}

fn run(workload: &str) -> Advice {
    let schema = space();
    let workload = parse_workload(workload, &schema).expect("valid workload");
    advise(
        &schema,
        &workload,
        Calibration::default(),
        AdvisorOptions::default(),
    )
    .expect("advice")
}

fn best(advice: &Advice) -> Vec<Vec<String>> {
    advice.clusters[0].configurations[0].subspaces.clone()
}

fn names(s: &[&[&str]]) -> Vec<Vec<String>> {
    s.iter()
        .map(|d| d.iter().map(|a| a.to_string()).collect())
        .collect()
}

/// Searches by city are worth a city subspace unless they are very rare. Defaults: 64
/// regions, K = 2, 10^6 objects, 100 cities. A search by city costs, in the key subspace,
/// 64 regions × 10 µs + 10^6 objects × 0.7 µs = 0.70064 s, and in <city> 10 µs + 10^4 × 0.7 µs
/// = 7.01 ms; an update of the city costs 2 × 119 µs without the subspace and
/// 2 × (1 + 1 + 63/64) × 119 µs = 710 µs with it. At 1 search in 100, <city> wins
/// (0.77 ms against 7.24 ms an operation); at 1 in 10,000 it loses (0.71 ms against 0.31 ms).
#[test]
fn a_subspace_pays_for_its_updates_only_if_searched_enough() {
    let common = run(r#"{"p": 0.01, "search": {"city": "eq"}}
                        {"p": 0.99, "update": ["city"]}"#);
    assert_eq!(best(&common), names(&[&["city"]]));
    let t = common.clusters[0].throughput_ops_s_max;
    assert!(
        (1.0 / t - (0.01 * 7.01e-3 + 0.99 * 2.0 * (2.0 + 63.0 / 64.0) * 119e-6)).abs() < 1e-9,
        "{t}"
    );
    let rare = run(r#"{"p": 0.0001, "search": {"city": "eq"}}
                      {"p": 0.9999, "update": ["city"]}"#);
    assert_eq!(best(&rare), names(&[]));
    let t = rare.clusters[0].throughput_ops_s_max;
    assert!(
        (1.0 / t - (0.0001 * 0.70064 + 0.9999 * 2.0 * 119e-6)).abs() < 1e-9,
        "{t}"
    );
}

/// Two searches: one fixes city and tel, one fixes city only. With <city> and <tel>, the first
/// crosses one region in either, and Tessera's client takes the first declared: declared
/// <city> first, it reads the 10^6 / 2 objects of one city; declared <tel> first, the
/// 10^6 / 10^5 of one telephone number. The advisor must declare <tel> first.
#[test]
fn the_declaration_order_decides_ties() {
    let advice = run(r#"{"attribute": "city", "distinct": 2}
                        {"attribute": "tel", "distinct": 100000}
                        {"p": 0.5, "search": {"city": "eq", "tel": "eq"}}
                        {"p": 0.5, "search": {"city": "eq"}}"#);
    let top = &advice.clusters[0].configurations[0];
    assert_eq!(top.subspaces, names(&[&["tel"], &["city"]]));
    let ClassTerms::Search {
        ref subspace,
        objects_read,
        ..
    } = top.classes[0].terms
    else {
        panic!("not a search")
    };
    assert_eq!(
        (subspace.clone(), objects_read),
        (vec!["tel".to_string()], 10.0)
    );
    // The space to create says it in that order.
    let created = parse_space(&advice.best_space).expect("the best space parses");
    let declared: Vec<&str> = created.subspaces[1..]
        .iter()
        .map(|s| created.attribute(s.dimensions[0]).name.as_str())
        .collect();
    assert_eq!(declared, vec!["tel", "city"]);
}

/// With writes only, every subspace is a cost: no subspace is best, and a search class alone
/// decides how many subspaces a configuration may have.
#[test]
fn subspaces_only_where_a_search_uses_them() {
    let advice = run(r#"{"p": 0.5, "update": ["city", "stars"]}
                        {"p": 0.5, "put": true}"#);
    assert_eq!(best(&advice), names(&[]));
    assert_eq!(advice.search.candidate_subspaces, 0);
    // No subspace, and the space's current <tel>, which no search uses: dominated.
    assert_eq!(advice.search.configurations_scored, 2);
    assert_eq!(advice.search.configurations_dominated, 1);
    assert_eq!(advice.clusters.len(), 1);
    // One search class: configurations of at most one subspace; of the subspaces built from
    // city, stars and price (7), those the search by stars would use are the 4 holding stars.
    let advice = run(r#"{"p": 0.5, "search": {"stars": "eq"}}
                        {"p": 0.5, "update": ["city", "price"]}"#);
    assert_eq!(advice.search.attributes, vec!["city", "stars", "price"]);
    assert_eq!(advice.search.subspaces_considered, 7);
    assert_eq!(advice.search.candidate_subspaces, 4);
    // No subspace and the 4 candidates alone, then the current <tel> (dominated).
    assert_eq!(advice.search.configurations_scored, 6);
    assert_eq!(advice.search.configurations_dominated, 1);
    assert!(advice.search.exhaustive);
    assert_eq!(best(&advice), names(&[&["stars"]]));
}

/// A search by city (p = 0.999) and a rare one by ranges on stars and price that match every
/// object (selectivity 1: they narrow nothing, so it always uses the key subspace: 64 regions,
/// 10^6 objects, 700.64 ms). Costs of an operation, by hand, in µs (default constants):
/// <city>: 0.999 × (10 + 7,000) + 0.001 × 700,640 = 7,703.6;
/// <city, stars> or <city, price> (8 regions for the city; 100 × 100 distinct points in 64
/// regions, so the walk skips 8 × 156.25^(1/2) = 100 entries at 2.8 µs):
/// 0.999 × (80 + 7,000 + 280) + 700.64 = 8,053.3, 4.5 % more: the next cluster, both equal;
/// <city, stars, price> (16 regions; 10^6 points, 16 × 15,625^(2/3) = 10,000 entries skipped):
/// 0.999 × (160 + 7,000 + 28,000) + 700.64 = 35,825.5; no subspace: 700,640, the last. Two
/// subspaces are never ranked: only one search uses a subspace, so the other would be
/// dominated.
#[test]
fn clusters_group_equal_throughputs() {
    let advice = run(r#"{"attribute": "stars", "selectivity": 1}
                        {"attribute": "price", "selectivity": 1}
                        {"p": 0.999, "search": {"city": "eq"}}
                        {"p": 0.001, "search": {"stars": "range", "price": "range"}}"#);
    let clusters: Vec<(u64, Vec<Vec<Vec<String>>>)> = advice
        .clusters
        .iter()
        .map(|c| {
            (
                c.configurations_count,
                c.configurations
                    .iter()
                    .map(|p| p.subspaces.clone())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        clusters,
        vec![
            (1, vec![names(&[&["city"]])]),
            (
                2,
                vec![names(&[&["city", "stars"]]), names(&[&["city", "price"]])]
            ),
            (1, vec![names(&[&["city", "stars", "price"]])]),
            (1, vec![names(&[])]),
        ]
    );
    let cost_us = |t: f64| 1e6 / t;
    assert!((cost_us(advice.clusters[0].throughput_ops_s_max) - 7703.6).abs() < 0.1);
    assert!((cost_us(advice.clusters[1].throughput_ops_s_max) - 8053.3).abs() < 0.1);
    assert!((cost_us(advice.clusters[1].throughput_ops_s_min) - 8053.3).abs() < 0.1);
    assert!((cost_us(advice.clusters[2].throughput_ops_s_max) - 35_825.5).abs() < 0.1);
    assert!((cost_us(advice.clusters[3].throughput_ops_s_max) - 700_640.0).abs() < 0.1);
    assert!(advice.search.configurations_dominated > 0);
}

#[test]
fn baselines_are_named_and_compared() {
    let advice = run(r#"{"p": 0.6, "search": {"city": "eq", "stars": "eq"}}
                        {"p": 0.3, "search": {"price": "range"}}
                        {"p": 0.1, "update": ["price"]}"#);
    let named: Vec<BaselineName> = advice.baselines.iter().map(|b| b.name).collect();
    assert_eq!(
        named,
        vec![
            BaselineName::Current,
            BaselineName::NoSubspace,
            BaselineName::Hyperspace,
            BaselineName::SubspacesAll,
            BaselineName::Dominant,
            BaselineName::Greedy
        ]
    );
    assert_eq!(advice.baselines[0].prediction.subspaces, names(&[&["tel"]]));
    assert_eq!(
        advice.baselines[2].prediction.subspaces,
        names(&[&["city", "stars", "price"]])
    );
    for b in &advice.baselines {
        assert!(
            b.relative_to_best > 0.0 && b.relative_to_best <= 1.0,
            "{:?}: {}",
            b.name,
            b.relative_to_best
        );
        assert!(
            (b.prediction.throughput_ops_s / advice.clusters[0].throughput_ops_s_max
                - b.relative_to_best)
                .abs()
                < 1e-12
        );
    }
}

/// Bounded to one dimension per subspace, the advisor still ranks the hyperspace baseline
/// <city, stars>, which answers the only search in one region reading 10^6 / 10^4 objects.
#[test]
fn a_baseline_outside_the_bounds_is_ranked() {
    let schema = space();
    let workload = parse_workload(
        r#"{"p": 1, "search": {"city": "eq", "stars": "eq"}}"#,
        &schema,
    )
    .expect("valid workload");
    let options = AdvisorOptions {
        dimensions_max: 1,
        ..AdvisorOptions::default()
    };
    let advice = advise(&schema, &workload, Calibration::default(), options).expect("advice");
    assert!(advice.search.exhaustive);
    assert_eq!(best(&advice), names(&[&["city", "stars"]]));
    let hyperspace = &advice.baselines[2];
    assert_eq!(hyperspace.name, BaselineName::Hyperspace);
    assert_eq!(hyperspace.relative_to_best, 1.0);
}

/// What `tessera advise` will print: JSON that reads back the same.
#[test]
fn advice_is_json() {
    let advice = run(r#"{"p": 0.5, "search": {"city": "eq", "price": "range"}}
                        {"p": 0.3, "update": ["price"]}
                        {"p": 0.1, "put": true}
                        {"p": 0.1, "get": true}"#);
    let json = serde_json::to_value(&advice).expect("serializes");
    assert_eq!(json["space"], "hotels");
    assert_eq!(json["replicas"], 2);
    assert_eq!(json["baselines"][1]["name"], "no-subspace");
    let classes = &json["clusters"][0]["configurations"][0]["classes"];
    assert_eq!(classes[0]["operation"], "search city=eq price=range");
    assert_eq!(classes[0]["terms"]["kind"], "search");
    for field in [
        "subspace",
        "subspace_index",
        "regions_contacted",
        "objects_read",
        "objects_matched",
    ] {
        assert!(classes[0]["terms"].get(field).is_some(), "{field}");
    }
    assert_eq!(classes[1]["terms"]["kind"], "update");
    assert!(
        classes[1]["terms"]["chain_length"]
            .as_f64()
            .expect("a number")
            >= 4.0
    );
    assert_eq!(classes[2]["terms"]["kind"], "put");
    assert_eq!(classes[3]["terms"]["kind"], "get");
    let back: Advice = serde_json::from_value(json).expect("reads back");
    assert_eq!(back, advice);
}

#[test]
fn refusals() {
    let schema = space();
    let workload =
        parse_workload(r#"{"p": 1, "search": {"city": "eq"}}"#, &schema).expect("valid workload");
    let options = AdvisorOptions::default();
    let bad = |o: AdvisorOptions| {
        advise(&schema, &workload, Calibration::default(), o)
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(
        bad(AdvisorOptions {
            dimensions_max: 0,
            ..options
        }),
        "option dimensions_max is 0: a subspace has 1 to 16 dimensions"
    );
    assert_eq!(
        bad(AdvisorOptions {
            subspaces_max: 32,
            ..options
        }),
        "option subspaces_max is 32: a space has at most 31 subspaces besides the key's"
    );
    assert_eq!(
        bad(AdvisorOptions {
            cluster_tolerance: 1.0,
            ..options
        }),
        "option cluster_tolerance is 1: it must be in [0, 1)"
    );
    assert_eq!(
        bad(AdvisorOptions {
            clusters_reported: 0,
            ..options
        }),
        "option clusters_reported is 0: it must be at least 1"
    );
    let calibration = Calibration {
        write_hop_s: -1.0,
        ..Calibration::default()
    };
    assert_eq!(
        advise(&schema, &workload, calibration, options),
        Err(AdviseError::Model(ModelError::Calibration(
            CalibrationError::NotPositive {
                name: "write_hop_s",
                value: -1.0
            }
        )))
    );
    let other = parse_space("space other key id attributes string city").expect("valid space");
    assert_eq!(
        advise(&other, &workload, Calibration::default(), options)
            .expect_err("refused")
            .to_string(),
        "the workload was checked against space \"hotels\", not against space \"other\""
    );
    // Twelve attributes in subspaces of up to 16 dimensions: 4,095 subspaces, over a limit of 1,000.
    let wide = parse_space(&format!(
        "space wide key id attributes {}",
        (0..12)
            .map(|i| format!("string a{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .expect("valid space");
    let all = (0..12)
        .map(|i| format!("\"a{i}\": \"eq\""))
        .collect::<Vec<_>>()
        .join(", ");
    let w = parse_workload(&format!("{{\"p\": 1, \"search\": {{{all}}}}}"), &wide)
        .expect("valid workload");
    assert_eq!(
        advise(
            &wide,
            &w,
            Calibration::default(),
            AdvisorOptions {
                dimensions_max: 16,
                configurations_max: 1000,
                ..options
            }
        ),
        Err(AdviseError::TooManySubspaces {
            subspaces: 4095,
            attributes: 12,
            dimensions_max: 16,
            limit: 1000
        })
    );
}

/// Ten attributes, ten search classes, three subspaces of up to three dimensions: 175
/// subspaces, ~900,000 configurations, scored exhaustively within the default budget.
#[test]
fn ten_attributes_within_the_budget() {
    let schema = parse_space(&format!(
        "space wide key id attributes {} create 64 partitions",
        (0..10)
            .map(|i| format!("string a{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .expect("valid space");
    let mut lines: Vec<String> = (0..10)
        .map(|i| {
            format!(
                "{{\"p\": 0.08, \"search\": {{\"a{i}\": \"eq\", \"a{}\": \"eq\"}}}}",
                (i + 3) % 10
            )
        })
        .collect();
    lines.push(r#"{"p": 0.2, "update": ["a0", "a5"]}"#.into());
    let workload = parse_workload(&lines.join("\n"), &schema).expect("valid workload");
    let advice = advise(
        &schema,
        &workload,
        Calibration::default(),
        AdvisorOptions::default(),
    )
    .expect("advice");
    assert!(advice.search.exhaustive);
    assert_eq!(advice.search.subspaces_considered, 175);
    assert!(
        advice.search.configurations_scored > 500_000,
        "{}",
        advice.search.configurations_scored
    );
    let best = advice.clusters[0].throughput_ops_s_max;
    assert!(advice
        .baselines
        .iter()
        .all(|b| b.prediction.throughput_ops_s <= best * (1.0 + 1e-9)));
}

/// Fourteen attributes: 469 candidate subspaces and some 17 million configurations of up to
/// three, past the budget: a beam search, reported as such, scoring about the budget.
#[test]
fn beyond_the_budget_a_beam_search() {
    let schema = parse_space(&format!(
        "space wide key id attributes {} create 64 partitions",
        (0..14)
            .map(|i| format!("string a{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .expect("valid space");
    let lines: Vec<String> = (0..14)
        .map(|i| {
            format!(
                "{{\"p\": {}, \"search\": {{\"a{i}\": \"eq\", \"a{}\": \"eq\"}}}}",
                1.0 / 14.0,
                (i + 5) % 14
            )
        })
        .collect();
    let workload = parse_workload(&lines.join("\n"), &schema).expect("valid workload");
    let advice = advise(
        &schema,
        &workload,
        Calibration::default(),
        AdvisorOptions::default(),
    )
    .expect("advice");
    assert!(!advice.search.exhaustive);
    assert_eq!(advice.search.candidate_subspaces, 469);
    let scored = advice.search.configurations_scored;
    assert!(scored > 100_000 && scored < 1_200_000, "{scored}");
    assert!(advice.baselines.iter().all(|b| b.relative_to_best <= 1.0));
}

/// A measured `matches` (as the trace gives it) replaces the estimate of the matches, and the
/// box reads at least that many. A search fixing correlated attributes (a hotel's city and
/// tel) matches 1 object where independence predicts 10^6 / (100 × 100) = 100; the <tel> box
/// still holds its 10^4 objects, not 10^4 scaled by 1/100.
#[test]
fn measured_matches_bound_the_box_from_below_and_do_not_scale_it() {
    let advice = run(r#"{"p": 1, "search": {"city": "eq", "tel": "eq"}, "matches": 1}"#);
    let current = advice
        .baselines
        .iter()
        .find(|b| b.name == BaselineName::Current)
        .expect("the current configuration");
    match &current.prediction.classes[0].terms {
        ClassTerms::Search {
            subspace,
            objects_read,
            objects_matched,
            ..
        } => {
            assert_eq!(subspace, &["tel".to_string()]);
            assert_eq!(*objects_matched, 1.0);
            assert!((objects_read - 1e4).abs() < 1e-6, "{objects_read}");
        }
        other => panic!("{other:?}"),
    }
    // A search matching more than its box's estimate reads at least its matches.
    let broad = run(r#"{"p": 1, "search": {"tel": "eq"}, "matches": 50000}"#);
    let current = broad
        .baselines
        .iter()
        .find(|b| b.name == BaselineName::Current)
        .expect("the current configuration");
    match &current.prediction.classes[0].terms {
        ClassTerms::Search { objects_read, .. } => assert_eq!(*objects_read, 50000.0),
        other => panic!("{other:?}"),
    }
}
