//! The workload file: what it accepts, and every refusal with its message and line.

use tessera_advisor::constants::{
    DISTINCT_DEFAULT, OBJECTS_DEFAULT, RANGE_SELECTIVITY_DEFAULT, SPREAD_DEFAULT,
};
use tessera_advisor::{parse_workload, Operation, PredicateKind, WorkloadError};
use tessera_types::{parse_space, AttrIndex, SpaceSchema};

fn hotels() -> SpaceSchema {
    parse_space(
        "space hotels key id attributes string city, int stars, float price, string tel, set(string) tags \
         create 64 partitions tolerate 1 failure",
    )
    .expect("valid space")
}

const CITY: AttrIndex = AttrIndex(1);
const STARS: AttrIndex = AttrIndex(2);
const PRICE: AttrIndex = AttrIndex(3);

#[test]
fn a_full_file() {
    let text = r#"
# hotels: one million of them, a thousand cities
{"objects": 1000000}
{"attribute": "city", "distinct": 1000}
{"attribute": "price", "selectivity": 0.05, "spread": 0.001}

{"p": 0.4, "search": {"city": "eq", "price": "range"}}
{"p": 0.2, "search": {"stars": "eq"}, "matches": 250}
{"p": 0.05, "search": {}}
{"p": 0.15, "update": ["price", "stars"]}
{"p": 0.1, "put": true}
{"p": 0.1, "get": true}
"#;
    let w = parse_workload(text, &hotels()).expect("valid workload");
    assert_eq!(w.objects(), 1_000_000);
    assert_eq!(w.space(), "hotels");
    let lines: Vec<usize> = w.classes().iter().map(|c| c.line).collect();
    assert_eq!(lines, vec![7, 8, 9, 10, 11, 12]);
    assert_eq!(
        w.classes()[0].operation,
        Operation::Search {
            predicates: vec![(CITY, PredicateKind::Eq), (PRICE, PredicateKind::Range)],
            matches: None
        }
    );
    assert_eq!(
        w.classes()[1].operation,
        Operation::Search {
            predicates: vec![(STARS, PredicateKind::Eq)],
            matches: Some(250.0)
        }
    );
    assert_eq!(
        w.classes()[2].operation,
        Operation::Search {
            predicates: vec![],
            matches: None
        }
    );
    assert_eq!(
        w.classes()[3].operation,
        Operation::Update {
            attributes: vec![PRICE, STARS]
        }
    );
    assert_eq!(w.classes()[4].operation, Operation::Put);
    assert_eq!(w.classes()[5].operation, Operation::Get);
    // Statistics given, and defaults where not.
    assert_eq!(w.equality_selectivity(CITY), 1.0 / 1000.0);
    assert_eq!(w.equality_selectivity(STARS), 1.0 / DISTINCT_DEFAULT as f64);
    assert_eq!(
        w.equality_selectivity(AttrIndex::KEY),
        1e-6,
        "a key is unique"
    );
    assert_eq!(w.range_selectivity(PRICE), 0.05);
    assert_eq!(w.range_selectivity(STARS), RANGE_SELECTIVITY_DEFAULT);
    assert_eq!(w.spread(PRICE), 0.001);
    assert_eq!(w.spread(STARS), SPREAD_DEFAULT);
}

#[test]
fn probabilities_within_the_tolerance_are_scaled_to_one() {
    let text = r#"{"p": 0.333, "get": true}
                  {"p": 0.333, "put": true}
                  {"p": 0.333, "search": {"tel": "eq"}}"#;
    let w = parse_workload(text, &hotels()).expect("0.999 is within the tolerance");
    assert_eq!(w.objects(), OBJECTS_DEFAULT);
    let sum: f64 = w.classes().iter().map(|c| c.probability).sum();
    assert!((sum - 1.0).abs() < 1e-12);
    assert!(w
        .classes()
        .iter()
        .all(|c| (c.probability - 1.0 / 3.0).abs() < 1e-12));
}

#[test]
fn searches_on_the_key_and_containers() {
    // Equality on a set is a valid predicate (it is filtered, never a dimension); a range on
    // the key is valid too (the key is hashed: it narrows nothing).
    let text = r#"{"p": 0.5, "search": {"tags": "eq", "id": "range"}}
                  {"p": 0.5, "update": ["tags"]}"#;
    assert!(parse_workload(text, &hotels()).is_ok());
}

/// Each bad file, the error it gives, and its message.
#[test]
fn every_refusal() {
    let cases: &[(&str, WorkloadError, &str)] = &[
        (
            "{\"p\": 1, \"get\": true}\n{\"p\": 0.5, \"get\": tru}",
            WorkloadError::Json { line: 2, message: "expected ident (column 22)".into() },
            "line 2: expected ident (column 22)",
        ),
        (
            r#"{"p": 1, "search": {"city": "like"}}"#,
            WorkloadError::Json { line: 1, message: "unknown variant `like`, expected one of `eq`, `range`, `other` (column 34)".into() },
            "line 1: unknown variant `like`, expected one of `eq`, `range`, `other` (column 34)",
        ),
        (
            r#"{"p": 1, "get": true, "weight": 2}"#,
            WorkloadError::Json {
                line: 1,
                message: "unknown field `weight`, expected one of `p`, `search`, `update`, `get`, `put`, `del`, `matches`, `attribute`, `distinct`, `selectivity`, `spread`, `objects`, `clients` (column 30)".into(),
            },
            "line 1: unknown field `weight`",
        ),
        (
            r#"{"p": 1, "update": "price"}"#,
            WorkloadError::Json { line: 1, message: "invalid type: string \"price\", expected a sequence (column 26)".into() },
            "line 1: invalid type: string \"price\", expected a sequence (column 26)",
        ),
        ("{}", WorkloadError::UnknownLine { line: 1 }, "line 1: a line is a query class (\"p\" and one of"),
        (
            r#"{"p": 1, "get": true, "attribute": "city"}"#,
            WorkloadError::MixedLine { line: 1, first: "p", second: "attribute" },
            "line 1: \"p\" and \"attribute\" belong on different lines",
        ),
        (
            r#"{"objects": 10, "distinct": 3}"#,
            WorkloadError::MixedLine { line: 1, first: "distinct", second: "objects" },
            "line 1: \"distinct\" and \"objects\" belong on different lines",
        ),
        (r#"{"get": true}"#, WorkloadError::MissingProbability { line: 1 }, "line 1: a query class needs its probability \"p\""),
        (
            r#"{"p": 1}"#,
            WorkloadError::NoOperation { line: 1 },
            "line 1: a query class needs one of \"search\", \"update\", \"get\", \"put\"",
        ),
        (
            r#"{"p": 1, "get": true, "put": true}"#,
            WorkloadError::SeveralOperations { line: 1, first: "get", second: "put" },
            "line 1: a query class has one operation, this one has \"get\" and \"put\"",
        ),
        (r#"{"p": 1, "get": false}"#, WorkloadError::FlagNotTrue { line: 1, field: "get" }, "line 1: \"get\" must be true"),
        (
            r#"{"p": 1, "get": true, "matches": 3}"#,
            WorkloadError::MatchesWithoutSearch { line: 1 },
            "line 1: \"matches\" applies to a search only",
        ),
        (r#"{"p": 0, "get": true}"#, WorkloadError::BadProbability { line: 1, p: 0.0 }, "line 1: probability 0 is not in (0, 1]"),
        (
            "{\"p\": 1, \"get\": true}\n{\"p\": 1.5, \"put\": true}",
            WorkloadError::BadProbability { line: 2, p: 1.5 },
            "line 2: probability 1.5 is not in (0, 1]",
        ),
        (
            "{\"p\": 0.5, \"get\": true}\n{\"p\": 0.4, \"put\": true}",
            WorkloadError::ProbabilitiesDoNotSum { sum: 0.9 },
            "the probabilities of the query classes sum to 0.9, not 1 (tolerance 0.001)",
        ),
        ("# nothing\n\n", WorkloadError::NoClasses, "the workload has no query class"),
        (
            r#"{"p": 1, "search": {"cty": "eq"}}"#,
            WorkloadError::UnknownAttribute { line: 1, space: "hotels".into(), name: "cty".into() },
            "line 1: space \"hotels\" has no attribute \"cty\"",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"attribute\": \"rating\", \"distinct\": 5}",
            WorkloadError::UnknownAttribute { line: 2, space: "hotels".into(), name: "rating".into() },
            "line 2: space \"hotels\" has no attribute \"rating\"",
        ),
        (
            r#"{"p": 1, "search": {"city": "eq", "city": "range"}}"#,
            WorkloadError::DuplicateAttribute { line: 1, name: "city".into() },
            "line 1: attribute \"city\" is named twice",
        ),
        (
            r#"{"p": 1, "update": ["price", "price"]}"#,
            WorkloadError::DuplicateAttribute { line: 1, name: "price".into() },
            "line 1: attribute \"price\" is named twice",
        ),
        (r#"{"p": 1, "update": []}"#, WorkloadError::EmptyUpdate { line: 1 }, "line 1: an update names at least one attribute"),
        (
            r#"{"p": 1, "update": ["id"]}"#,
            WorkloadError::KeyUpdated { line: 1, name: "id".into() },
            "line 1: \"id\" is the key: an update cannot change it",
        ),
        (
            r#"{"p": 1, "search": {"tags": "range"}}"#,
            WorkloadError::RangeNotApplicable {
                line: 1,
                name: "tags".into(),
                ty: tessera_types::AttributeType::Set(tessera_types::PrimitiveType::String),
            },
            "line 1: a range does not apply to \"tags\", a set(string)",
        ),
        (
            "{\"objects\": 100}\n{\"p\": 1, \"search\": {\"city\": \"eq\"}, \"matches\": 101}",
            WorkloadError::BadMatches { line: 2, matches: 101.0, objects: 100 },
            "line 2: matches 101 is not between 0 and the 100 objects",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"attribute\": \"city\", \"distinct\": 5}\n{\"attribute\": \"city\", \"selectivity\": 0.5}",
            WorkloadError::DuplicateStatistics { line: 3, name: "city".into(), first_line: 2 },
            "line 3: statistics of \"city\" are already given on line 2",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"distinct\": 5}",
            WorkloadError::MissingAttribute { line: 2 },
            "line 2: statistics need the \"attribute\" they describe",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"attribute\": \"city\"}",
            WorkloadError::EmptyStatistics { line: 2 },
            "line 2: give at least one of \"distinct\", \"selectivity\", \"spread\"",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"attribute\": \"city\", \"distinct\": 0}",
            WorkloadError::BadStatistic { line: 2, statistic: "distinct", value: 0.0, range: "at least 1" },
            "line 2: distinct 0 is out of range: at least 1",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"attribute\": \"stars\", \"selectivity\": 1.5}",
            WorkloadError::BadStatistic { line: 2, statistic: "selectivity", value: 1.5, range: "(0, 1]" },
            "line 2: selectivity 1.5 is out of range: (0, 1]",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"attribute\": \"price\", \"spread\": 0}",
            WorkloadError::BadStatistic { line: 2, statistic: "spread", value: 0.0, range: "(0, 1]" },
            "line 2: spread 0 is out of range: (0, 1]",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"attribute\": \"city\", \"spread\": 0.5}",
            WorkloadError::StatisticNotApplicable {
                line: 2,
                name: "city".into(),
                statistic: "spread",
                reason: "only int and float attributes other than the key keep their order on the axis; the others are hashed, spread over all of it",
            },
            "line 2: spread does not apply to \"city\": only int and float",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"attribute\": \"id\", \"distinct\": 7}",
            WorkloadError::StatisticNotApplicable {
                line: 2,
                name: "id".into(),
                statistic: "distinct",
                reason: "keys are unique: the key has one value per object",
            },
            "line 2: distinct does not apply to \"id\": keys are unique",
        ),
        (
            "{\"p\": 1, \"get\": true}\n{\"attribute\": \"tags\", \"selectivity\": 0.5}",
            WorkloadError::StatisticNotApplicable {
                line: 2,
                name: "tags".into(),
                statistic: "selectivity",
                reason: "a range does not apply to a container",
            },
            "line 2: selectivity does not apply to \"tags\": a range does not apply to a container",
        ),
        (
            "{\"objects\": 5}\n{\"p\": 1, \"get\": true}\n{\"objects\": 6}",
            WorkloadError::DuplicateObjects { line: 3, first_line: 1 },
            "line 3: the object count is already given on line 1",
        ),
        ("{\"objects\": 0}", WorkloadError::BadObjects { line: 1 }, "line 1: objects must be at least 1"),
        (
            "{\"clients\": 16}\n{\"p\": 1, \"get\": true}\n{\"clients\": 8}",
            WorkloadError::DuplicateClients { line: 3, first_line: 1 },
            "line 3: the client count is already given on line 1",
        ),
        ("{\"clients\": 0}", WorkloadError::BadClients { line: 1 }, "line 1: clients must be at least 1"),
        (
            "{\"objects\": 5, \"clients\": 16}",
            WorkloadError::MixedLine { line: 1, first: "objects", second: "clients" },
            "line 1:",
        ),
        (
            "{\"objects\": -3}",
            WorkloadError::Json { line: 1, message: "invalid value: integer `-3`, expected u64 (column 14)".into() },
            "line 1: invalid value: integer `-3`, expected u64 (column 14)",
        ),
    ];
    let schema = hotels();
    for (text, expected, message) in cases {
        let got = parse_workload(text, &schema).expect_err(text);
        assert_eq!(&got, expected, "{text}");
        let shown = got.to_string();
        assert!(
            shown.starts_with(message),
            "{text}: {shown:?} does not start with {message:?}"
        );
    }
}

/// What `tessera trace` prints: deletes, and filters that are neither equality nor a range
/// (they fix no dimension).
#[test]
fn the_lines_tessera_trace_prints() {
    let text = r#"{"p":0.5,"search":{"city":"other","stars":"range"},"matches":1.0}
{"p":0.25,"del":true}
{"p":0.25,"update":["price"]}"#;
    let w = parse_workload(text, &hotels()).expect("valid workload");
    let operations: Vec<&Operation> = w.classes().iter().map(|c| &c.operation).collect();
    assert_eq!(
        operations,
        [
            &Operation::Search {
                predicates: vec![(STARS, PredicateKind::Range)],
                matches: Some(1.0)
            },
            &Operation::Del,
            &Operation::Update {
                attributes: vec![PRICE]
            },
        ]
    );
    let refused =
        parse_workload(r#"{"p": 1, "del": false}"#, &hotels()).expect_err("del must be true");
    assert_eq!(
        refused,
        WorkloadError::FlagNotTrue {
            line: 1,
            field: "del"
        }
    );
}
