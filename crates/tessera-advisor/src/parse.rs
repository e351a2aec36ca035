//! The workload file: JSON lines, one query class, attribute's statistics or object count per
//! line. Blank lines and lines starting with `#` are skipped.
//!
//! ```text
//! # 1 million hotels; 1,000 cities; a price range matches 5 % of them
//! {"objects": 1000000}
//! {"attribute": "city", "distinct": 1000}
//! {"attribute": "price", "selectivity": 0.05}
//! {"p": 0.4, "search": {"city": "eq", "price": "range"}}
//! {"p": 0.2, "search": {"stars": "eq"}, "matches": 100}
//! {"p": 0.2, "update": ["price"]}
//! {"p": 0.1, "put": true}
//! {"p": 0.1, "get": true}
//! ```
//!
//! * A query class has `p` (its probability, in (0, 1]; all of them sum to 1 within
//!   [`crate::constants::PROBABILITY_SUM_TOLERANCE`]) and exactly one operation: `search`, an
//!   object from attribute name to `"eq"`, `"range"` or `"other"` (a filter that fixes no
//!   dimension, left out of the model; it may be empty: a search of everything); `update`, the
//!   attributes an update of an existing object assigns; `put` (`true`), a put creating a new
//!   object; `get` (`true`); `del` (`true`), a delete (its chain is a put's: one region per
//!   subspace, nothing moves). `tessera trace` prints these lines. A search may add `matches`, the
//!   objects one such search returns, which overrides the estimate from the statistics.
//! * Attribute statistics: `attribute`, and at least one of `distinct` (distinct values, ≥ 1:
//!   equality matches 1/distinct of the objects; not for the key, which is unique),
//!   `selectivity` (fraction of the objects a range on it matches, in (0, 1]) and `spread`
//!   (int and float attributes only: fraction of the i64 or f64 axis their values occupy, in
//!   (0, 1]). At most one line per attribute.
//! * `objects`: how many objects the space holds, at most once.
//! * `clients`: how many clients run the workload in a closed loop, each waiting for its
//!   answer before it asks again (at most once, ≥ 1). The prediction is then what they get
//!   (`crate::closed_loop`); without it, the servers' capacity.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use tessera_types::{AttrIndex, SpaceSchema};

use crate::workload::{
    AttributeStatistics, Operation, PredicateKind, QueryClass, Workload, WorkloadError,
};

/// Parses a workload file and checks it against `schema`.
pub fn parse_workload(text: &str, schema: &SpaceSchema) -> Result<Workload, WorkloadError> {
    let mut objects: Option<(u64, usize)> = None;
    let mut clients: Option<(u32, usize)> = None;
    let mut classes = Vec::new();
    let mut statistics: BTreeMap<AttrIndex, AttributeStatistics> = BTreeMap::new();
    for (i, text) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let raw: RawLine = serde_json::from_str(trimmed).map_err(|e| WorkloadError::Json {
            line,
            message: without_position(&e),
        })?;
        let resolve = |name: &str| {
            schema
                .attribute_index(name)
                .ok_or_else(|| WorkloadError::UnknownAttribute {
                    line,
                    space: schema.name.clone(),
                    name: name.to_owned(),
                })
        };
        match raw.kind(line)? {
            LineKind::Objects(count) => {
                if let Some((_, first_line)) = objects {
                    return Err(WorkloadError::DuplicateObjects { line, first_line });
                }
                if count == 0 {
                    return Err(WorkloadError::BadObjects { line });
                }
                objects = Some((count, line));
            }
            LineKind::Clients(count) => {
                if let Some((_, first_line)) = clients {
                    return Err(WorkloadError::DuplicateClients { line, first_line });
                }
                if count == 0 {
                    return Err(WorkloadError::BadClients { line });
                }
                clients = Some((count, line));
            }
            LineKind::Statistics {
                attribute,
                distinct,
                selectivity,
                spread,
            } => {
                let attr = resolve(&attribute)?;
                if let Some(first) = statistics.get(&attr) {
                    return Err(WorkloadError::DuplicateStatistics {
                        line,
                        name: attribute,
                        first_line: first.line,
                    });
                }
                statistics.insert(
                    attr,
                    AttributeStatistics {
                        line,
                        distinct,
                        selectivity,
                        spread,
                    },
                );
            }
            LineKind::Class {
                probability,
                operation,
            } => {
                let operation = match operation {
                    RawOperation::Search {
                        predicates,
                        matches,
                    } => Operation::Search {
                        predicates: predicates
                            .into_iter()
                            .map(|(name, kind)| Ok((resolve(&name)?, kind)))
                            .collect::<Result<_, WorkloadError>>()?,
                        matches,
                    },
                    RawOperation::Update(names) => Operation::Update {
                        attributes: names.iter().map(|n| resolve(n)).collect::<Result<_, _>>()?,
                    },
                    RawOperation::Put => Operation::Put,
                    RawOperation::Del => Operation::Del,
                    RawOperation::Get => Operation::Get,
                };
                classes.push(QueryClass {
                    line,
                    probability,
                    operation,
                });
            }
        }
    }
    Ok(
        Workload::new(schema, objects.map(|(count, _)| count), classes, statistics)?
            .with_clients(clients.map(|(count, _)| count)),
    )
}

/// serde_json's message without its " at line 1 column N" (every line is parsed alone, so its
/// line is always 1), with the column kept.
fn without_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match message.strip_suffix(&suffix) {
        Some(bare) => format!("{bare} (column {})", e.column()),
        None => message,
    }
}

/// Every field any line may have; [`RawLine::kind`] tells which kind of line it is.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine {
    p: Option<f64>,
    search: Option<SearchPredicates>,
    update: Option<Vec<String>>,
    get: Option<bool>,
    put: Option<bool>,
    del: Option<bool>,
    matches: Option<f64>,
    attribute: Option<String>,
    distinct: Option<u64>,
    selectivity: Option<f64>,
    spread: Option<f64>,
    objects: Option<u64>,
    clients: Option<u32>,
}

enum LineKind {
    Objects(u64),
    Clients(u32),
    Statistics {
        attribute: String,
        distinct: Option<u64>,
        selectivity: Option<f64>,
        spread: Option<f64>,
    },
    Class {
        probability: f64,
        operation: RawOperation,
    },
}

enum RawOperation {
    Search {
        predicates: Vec<(String, PredicateKind)>,
        matches: Option<f64>,
    },
    Update(Vec<String>),
    Put,
    Get,
    Del,
}

impl RawLine {
    fn kind(self, line: usize) -> Result<LineKind, WorkloadError> {
        let class_fields = [
            ("p", self.p.is_some()),
            ("search", self.search.is_some()),
            ("update", self.update.is_some()),
            ("get", self.get.is_some()),
            ("put", self.put.is_some()),
            ("del", self.del.is_some()),
            ("matches", self.matches.is_some()),
        ];
        let statistics_fields = [
            ("attribute", self.attribute.is_some()),
            ("distinct", self.distinct.is_some()),
            ("selectivity", self.selectivity.is_some()),
            ("spread", self.spread.is_some()),
        ];
        let first = |fields: &[(&'static str, bool)]| {
            fields
                .iter()
                .find(|(_, present)| *present)
                .map(|(name, _)| *name)
        };
        let (class, stats, objects) = (
            first(&class_fields),
            first(&statistics_fields),
            first(&[
                ("objects", self.objects.is_some()),
                ("clients", self.clients.is_some()),
            ]),
        );
        if let (Some(_), Some(_)) = (self.objects, self.clients) {
            return Err(WorkloadError::MixedLine {
                line,
                first: "objects",
                second: "clients",
            });
        }
        match (class, stats, objects) {
            (Some(first), Some(second), _)
            | (Some(first), None, Some(second))
            | (None, Some(first), Some(second)) => Err(WorkloadError::MixedLine {
                line,
                first,
                second,
            }),
            (None, None, None) => Err(WorkloadError::UnknownLine { line }),
            (None, None, Some(_)) => Ok(match self.objects {
                Some(count) => LineKind::Objects(count),
                None => LineKind::Clients(self.clients.expect("present")),
            }),
            (None, Some(_), None) => {
                let attribute = self
                    .attribute
                    .ok_or(WorkloadError::MissingAttribute { line })?;
                Ok(LineKind::Statistics {
                    attribute,
                    distinct: self.distinct,
                    selectivity: self.selectivity,
                    spread: self.spread,
                })
            }
            (Some(_), None, None) => {
                let mut operations = Vec::new();
                if let Some(search) = self.search {
                    operations.push((
                        "search",
                        RawOperation::Search {
                            predicates: search.0,
                            matches: self.matches,
                        },
                    ));
                } else if self.matches.is_some() {
                    return Err(WorkloadError::MatchesWithoutSearch { line });
                }
                if let Some(names) = self.update {
                    operations.push(("update", RawOperation::Update(names)));
                }
                for (field, flag, operation) in [
                    ("get", self.get, RawOperation::Get),
                    ("put", self.put, RawOperation::Put),
                    ("del", self.del, RawOperation::Del),
                ] {
                    match flag {
                        Some(true) => operations.push((field, operation)),
                        Some(false) => return Err(WorkloadError::FlagNotTrue { line, field }),
                        None => {}
                    }
                }
                let mut operations = operations.into_iter();
                let (_, operation) = match (operations.next(), operations.next()) {
                    (None, _) => return Err(WorkloadError::NoOperation { line }),
                    (Some((first, _)), Some((second, _))) => {
                        return Err(WorkloadError::SeveralOperations {
                            line,
                            first,
                            second,
                        })
                    }
                    (Some(only), None) => only,
                };
                let probability = self.p.ok_or(WorkloadError::MissingProbability { line })?;
                Ok(LineKind::Class {
                    probability,
                    operation,
                })
            }
        }
    }
}

/// How a line's search constrains an attribute, as written.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawPredicateKind {
    Eq,
    Range,
    Other,
}

/// A search's predicates in the order written, duplicates kept (a JSON map would silently keep
/// the last of two predicates on one attribute; [`Workload::new`] refuses them instead).
struct SearchPredicates(Vec<(String, PredicateKind)>);

impl<'de> Deserialize<'de> for SearchPredicates {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PredicatesVisitor;
        impl<'de> Visitor<'de> for PredicatesVisitor {
            type Value = SearchPredicates;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object from attribute names to \"eq\", \"range\" or \"other\"")
            }

            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SearchPredicates, A::Error> {
                let mut predicates = Vec::new();
                while let Some((name, kind)) = map.next_entry::<String, RawPredicateKind>()? {
                    // A filter that is neither (regex, contains, length: `tessera trace` says
                    // "other") fixes no dimension: the model leaves it out.
                    match kind {
                        RawPredicateKind::Eq => predicates.push((name, PredicateKind::Eq)),
                        RawPredicateKind::Range => predicates.push((name, PredicateKind::Range)),
                        RawPredicateKind::Other => {}
                    }
                }
                Ok(SearchPredicates(predicates))
            }
        }
        deserializer.deserialize_map(PredicatesVisitor)
    }
}
