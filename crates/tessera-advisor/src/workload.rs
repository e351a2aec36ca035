//! A workload: query classes with their probabilities, and what the model needs to know about
//! the data (object count, per-attribute statistics). Validated against a space's schema by
//! [`Workload::new`], which every way of making one goes through (the JSON-lines file of
//! [`crate::parse`], and later live traces).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tessera_types::{AttrIndex, AttributeType, PrimitiveType, SpaceSchema};

use crate::constants::*;

/// How a search constrains one attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PredicateKind {
    /// Equality: one value.
    Eq,
    /// A range (`<`, `<=`, `>`, `>=` or both ends).
    Range,
}

/// What a query class does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// A search with one predicate per named attribute. `matches`, when given, is the number of
    /// objects a search of this class returns, replacing the estimate from the statistics.
    Search {
        predicates: Vec<(AttrIndex, PredicateKind)>,
        matches: Option<f64>,
    },
    /// A put (or atomic operation) of an existing object that assigns these attributes.
    Update { attributes: Vec<AttrIndex> },
    /// A put that creates a new object.
    Put,
    /// A delete: it walks the object's chain once, as a put does, and moves it nowhere.
    Del,
    /// A get by key.
    Get,
}

/// One kind of operation and how often it happens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryClass {
    /// Where the class came from (the line of a workload file), for error messages and for
    /// telling classes apart in a prediction.
    pub line: usize,
    /// Probability of the class among all operations. [`Workload::new`] scales the classes'
    /// probabilities to sum to exactly 1.
    pub probability: f64,
    pub operation: Operation,
}

/// What the workload says about one attribute's values. Absent fields take the defaults of
/// [`crate::constants`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AttributeStatistics {
    /// Where the statistics came from, for error messages.
    pub line: usize,
    /// Distinct values: equality matches 1 / distinct of the objects.
    pub distinct: Option<u64>,
    /// Fraction of the objects a range predicate on the attribute matches.
    pub selectivity: Option<f64>,
    /// Fraction of its coordinate axis the attribute's values occupy (int and float only:
    /// their axis is all of i64 or f64, cut into equal slices, so values near 0 share a few).
    pub spread: Option<f64>,
}

/// A workload checked against a space: every attribute exists and fits its use, every number is
/// in range, probabilities sum to 1.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workload {
    space: String,
    attributes_count: usize,
    objects: u64,
    /// Closed-loop clients, when the workload says (`{"clients": N}`).
    clients: Option<u32>,
    classes: Vec<QueryClass>,
    statistics: BTreeMap<AttrIndex, AttributeStatistics>,
}

/// Why a workload is not valid. Every variant but the whole-workload ones names its line.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// The line is not JSON, or a field has the wrong type or an unknown name.
    #[error("line {line}: {message}")]
    Json { line: usize, message: String },
    /// The line has none of the fields that say what it is.
    #[error("line {line}: a line is a query class (\"p\" and one of \"search\", \"update\", \"get\", \"put\"), attribute statistics (\"attribute\") or the object count (\"objects\")")]
    UnknownLine { line: usize },
    /// The line has fields of two kinds of line.
    #[error("line {line}: \"{first}\" and \"{second}\" belong on different lines")]
    MixedLine {
        line: usize,
        first: &'static str,
        second: &'static str,
    },
    /// A query class without its probability.
    #[error("line {line}: a query class needs its probability \"p\"")]
    MissingProbability { line: usize },
    /// A probability without an operation.
    #[error("line {line}: a query class needs one of \"search\", \"update\", \"get\", \"put\"")]
    NoOperation { line: usize },
    /// A query class with two operations.
    #[error(
        "line {line}: a query class has one operation, this one has \"{first}\" and \"{second}\""
    )]
    SeveralOperations {
        line: usize,
        first: &'static str,
        second: &'static str,
    },
    /// `"get": false` or `"put": false`: say `true` or leave the line out.
    #[error("line {line}: \"{field}\" must be true")]
    FlagNotTrue { line: usize, field: &'static str },
    /// `matches` on a line that is not a search.
    #[error("line {line}: \"matches\" applies to a search only")]
    MatchesWithoutSearch { line: usize },
    /// A probability that is not in (0, 1].
    #[error("line {line}: probability {p} is not in (0, 1]")]
    BadProbability { line: usize, p: f64 },
    /// The probabilities of all classes do not sum to 1 (within the tolerance).
    #[error("the probabilities of the query classes sum to {sum}, not 1 (tolerance {PROBABILITY_SUM_TOLERANCE})")]
    ProbabilitiesDoNotSum { sum: f64 },
    /// No query class at all.
    #[error("the workload has no query class")]
    NoClasses,
    /// An attribute the space does not have.
    #[error("line {line}: space {space:?} has no attribute {name:?}")]
    UnknownAttribute {
        line: usize,
        space: String,
        name: String,
    },
    /// An attribute named twice by one class.
    #[error("line {line}: attribute {name:?} is named twice")]
    DuplicateAttribute { line: usize, name: String },
    /// An update naming no attribute.
    #[error("line {line}: an update names at least one attribute")]
    EmptyUpdate { line: usize },
    /// An update of the key, which no operation can change.
    #[error("line {line}: {name:?} is the key: an update cannot change it")]
    KeyUpdated { line: usize, name: String },
    /// A range on a container attribute, which has no order.
    #[error("line {line}: a range does not apply to {name:?}, a {ty}")]
    RangeNotApplicable {
        line: usize,
        name: String,
        ty: AttributeType,
    },
    /// `matches` that is negative, not finite, or more than the objects.
    #[error("line {line}: matches {matches} is not between 0 and the {objects} objects")]
    BadMatches {
        line: usize,
        matches: f64,
        objects: u64,
    },
    /// Statistics given twice for one attribute.
    #[error("line {line}: statistics of {name:?} are already given on line {first_line}")]
    DuplicateStatistics {
        line: usize,
        name: String,
        first_line: usize,
    },
    /// A statistics line without the attribute it is about.
    #[error("line {line}: statistics need the \"attribute\" they describe")]
    MissingAttribute { line: usize },
    /// A statistics line that gives no statistic.
    #[error("line {line}: give at least one of \"distinct\", \"selectivity\", \"spread\"")]
    EmptyStatistics { line: usize },
    /// A statistic out of its range.
    #[error("line {line}: {statistic} {value} is out of range: {range}")]
    BadStatistic {
        line: usize,
        statistic: &'static str,
        value: f64,
        range: &'static str,
    },
    /// A statistic that means nothing for this attribute.
    #[error("line {line}: {statistic} does not apply to {name:?}: {reason}")]
    StatisticNotApplicable {
        line: usize,
        name: String,
        statistic: &'static str,
        reason: &'static str,
    },
    /// The object count given twice.
    #[error("line {line}: the object count is already given on line {first_line}")]
    DuplicateObjects { line: usize, first_line: usize },
    /// An object count of 0 (line 0: not from a file).
    #[error("line {line}: objects must be at least 1")]
    BadObjects { line: usize },
    /// The client count given twice.
    #[error("line {line}: the client count is already given on line {first_line}")]
    DuplicateClients { line: usize, first_line: usize },
    /// A client count of 0.
    #[error("line {line}: clients must be at least 1")]
    BadClients { line: usize },
}

impl Workload {
    /// Checks classes and statistics against `schema` and scales the probabilities to sum to 1.
    /// `objects` is the space's object count (default [`OBJECTS_DEFAULT`]).
    pub fn new(
        schema: &SpaceSchema,
        objects: Option<u64>,
        mut classes: Vec<QueryClass>,
        statistics: BTreeMap<AttrIndex, AttributeStatistics>,
    ) -> Result<Workload, WorkloadError> {
        let objects = objects.unwrap_or(OBJECTS_DEFAULT);
        if objects == 0 {
            return Err(WorkloadError::BadObjects { line: 0 });
        }
        if classes.is_empty() {
            return Err(WorkloadError::NoClasses);
        }
        for class in &classes {
            check_class(schema, objects, class)?;
        }
        let sum: f64 = classes.iter().map(|c| c.probability).sum();
        if (sum - 1.0).abs() > PROBABILITY_SUM_TOLERANCE {
            return Err(WorkloadError::ProbabilitiesDoNotSum { sum });
        }
        for class in &mut classes {
            class.probability /= sum;
        }
        for (&attr, stats) in &statistics {
            check_statistics(schema, attr, stats)?;
        }
        Ok(Workload {
            space: schema.name.clone(),
            attributes_count: schema.attributes.len(),
            objects,
            clients: None,
            classes,
            statistics,
        })
    }

    /// The space the workload was checked against.
    pub fn space(&self) -> &str {
        &self.space
    }

    /// Whether the workload was checked against `schema` (same name, same attributes count).
    pub fn fits(&self, schema: &SpaceSchema) -> bool {
        self.space == schema.name && self.attributes_count == schema.attributes.len()
    }

    pub fn objects(&self) -> u64 {
        self.objects
    }

    /// The closed-loop clients running the workload, if it says.
    pub fn clients(&self) -> Option<u32> {
        self.clients
    }

    /// The same workload run by `clients` closed-loop clients (`None`: open, at capacity).
    pub fn with_clients(mut self, clients: Option<u32>) -> Workload {
        self.clients = clients.filter(|&n| n > 0);
        self
    }

    pub fn classes(&self) -> &[QueryClass] {
        &self.classes
    }

    pub fn statistics(&self) -> &BTreeMap<AttrIndex, AttributeStatistics> {
        &self.statistics
    }

    /// Fraction of the objects equality on `attr` matches: one in its distinct values (one
    /// object for the key, which is unique).
    pub fn equality_selectivity(&self, attr: AttrIndex) -> f64 {
        if attr == AttrIndex::KEY {
            return 1.0 / self.objects as f64;
        }
        let distinct = self
            .statistics
            .get(&attr)
            .and_then(|s| s.distinct)
            .unwrap_or(DISTINCT_DEFAULT);
        1.0 / distinct as f64
    }

    /// Fraction of the objects a range on `attr` matches.
    pub fn range_selectivity(&self, attr: AttrIndex) -> f64 {
        self.statistics
            .get(&attr)
            .and_then(|s| s.selectivity)
            .unwrap_or(RANGE_SELECTIVITY_DEFAULT)
    }

    /// Fraction of its axis `attr`'s values occupy (1 for hashed axes).
    pub fn spread(&self, attr: AttrIndex) -> f64 {
        self.statistics
            .get(&attr)
            .and_then(|s| s.spread)
            .unwrap_or(SPREAD_DEFAULT)
    }
}

fn attribute_name(
    schema: &SpaceSchema,
    line: usize,
    attr: AttrIndex,
) -> Result<String, WorkloadError> {
    schema
        .attributes
        .get(attr.get())
        .map(|a| a.name.clone())
        .ok_or_else(|| WorkloadError::UnknownAttribute {
            line,
            space: schema.name.clone(),
            name: format!("#{}", attr.0),
        })
}

fn check_class(
    schema: &SpaceSchema,
    objects: u64,
    class: &QueryClass,
) -> Result<(), WorkloadError> {
    let line = class.line;
    let p = class.probability;
    if !(p > 0.0 && p <= 1.0) {
        return Err(WorkloadError::BadProbability { line, p });
    }
    let no_duplicates = |attrs: &mut dyn Iterator<Item = AttrIndex>| -> Result<(), WorkloadError> {
        let mut seen = Vec::new();
        for attr in attrs {
            let name = attribute_name(schema, line, attr)?;
            if seen.contains(&attr) {
                return Err(WorkloadError::DuplicateAttribute { line, name });
            }
            seen.push(attr);
        }
        Ok(())
    };
    match &class.operation {
        Operation::Search {
            predicates,
            matches,
        } => {
            no_duplicates(&mut predicates.iter().map(|(a, _)| *a))?;
            for &(attr, kind) in predicates {
                let ty = schema.attribute(attr).ty;
                if kind == PredicateKind::Range && !ty.is_primitive() {
                    return Err(WorkloadError::RangeNotApplicable {
                        line,
                        name: schema.attribute(attr).name.clone(),
                        ty,
                    });
                }
            }
            if let Some(m) = *matches {
                if !(m.is_finite() && m >= 0.0 && m <= objects as f64) {
                    return Err(WorkloadError::BadMatches {
                        line,
                        matches: m,
                        objects,
                    });
                }
            }
        }
        Operation::Update { attributes } => {
            if attributes.is_empty() {
                return Err(WorkloadError::EmptyUpdate { line });
            }
            no_duplicates(&mut attributes.iter().copied())?;
            if attributes.contains(&AttrIndex::KEY) {
                return Err(WorkloadError::KeyUpdated {
                    line,
                    name: schema.key().name.clone(),
                });
            }
        }
        Operation::Put | Operation::Get | Operation::Del => {}
    }
    Ok(())
}

fn check_statistics(
    schema: &SpaceSchema,
    attr: AttrIndex,
    stats: &AttributeStatistics,
) -> Result<(), WorkloadError> {
    let line = stats.line;
    let name = attribute_name(schema, line, attr)?;
    if stats.distinct.is_none() && stats.selectivity.is_none() && stats.spread.is_none() {
        return Err(WorkloadError::EmptyStatistics { line });
    }
    let not_applicable = |statistic, reason| WorkloadError::StatisticNotApplicable {
        line,
        name: name.clone(),
        statistic,
        reason,
    };
    if let Some(distinct) = stats.distinct {
        if attr == AttrIndex::KEY {
            return Err(not_applicable(
                "distinct",
                "keys are unique: the key has one value per object",
            ));
        }
        if distinct == 0 {
            return Err(WorkloadError::BadStatistic {
                line,
                statistic: "distinct",
                value: 0.0,
                range: "at least 1",
            });
        }
    }
    let in_unit = |statistic, value: f64| {
        if value > 0.0 && value <= 1.0 {
            Ok(())
        } else {
            Err(WorkloadError::BadStatistic {
                line,
                statistic,
                value,
                range: "(0, 1]",
            })
        }
    };
    if let Some(selectivity) = stats.selectivity {
        if !schema.attribute(attr).ty.is_primitive() {
            return Err(not_applicable(
                "selectivity",
                "a range does not apply to a container",
            ));
        }
        in_unit("selectivity", selectivity)?;
    }
    if let Some(spread) = stats.spread {
        let ordered = attr != AttrIndex::KEY
            && matches!(
                schema.attribute(attr).ty.as_primitive(),
                Some(PrimitiveType::Int | PrimitiveType::Float)
            );
        if !ordered {
            return Err(not_applicable(
                "spread",
                "only int and float attributes other than the key keep their order on the axis; the others are hashed, spread over all of it",
            ));
        }
        in_unit("spread", spread)?;
    }
    Ok(())
}
