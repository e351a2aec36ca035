//! The three systems the document benchmarks compare, driven with the same records and
//! queries ([`crate::bibliography`]):
//!
//! * **Tessera, dynamic space**: each record a JSON document (`Client::put_document`), queries
//!   as predicates on paths, structure natively (`exists`, `exists(a|b)`, `missing`).
//! * **Tessera, typed space**: every property of the data set declared as an attribute. A
//!   record puts only the properties it has; the others take their type's default on
//!   creation ("" for strings, 0 for ints, [] for lists), which *is* how a typed space says
//!   "absent" here. That is exact because the generator never produces an empty string or
//!   list and never queries an int's absence. Structure is then emulated, and reported as
//!   such: `exists(p)` is `length(p) >= 1`, `missing(p)` is `p = ""` (or `length(p) = 0` for a
//!   list), and `exists(a|b)` — a union no conjunction of predicates can say — is one search
//!   per alternative with the keys united on the client.
//! * **PostgreSQL** (15 here): a table `(key text primary key, doc jsonb)` with a GIN index on
//!   `doc` using the default `jsonb_ops` operator class, and for the bibliography a B-tree
//!   index on the expression `doc->'year'`. `jsonb_ops` rather than `jsonb_path_ops`:
//!   `jsonb_path_ops` indexes only containment (`@>`) and jsonpath, and cannot answer the key
//!   existence operators (`?`, `?|`) that the structural queries are; `jsonb_ops` serves both
//!   (at a larger index and somewhat slower containment). The year index is there because a
//!   range on a value is what a B-tree is for and what any PostgreSQL user would add, and
//!   because a dynamic space also keeps ints in order on their axis: without it the range
//!   query would be a GIN lookup of the journal followed by a filter, still fair but not
//!   what a careful user deploys. Both indexes exist before the load, so every write pays
//!   for them, as every Tessera write pays for its placement.

use std::collections::BTreeSet;

use tessera_client::{
    Client, DocValue, Document, FormulaSpec, Predicate, PredicateOp, Status, Value,
};
use tessera_types::CheckedPredicate;

use crate::bibliography::{Bibliography, Cond, Entry, Kind, Query, Val, MICRO_NAMES, PROPERTIES};
use crate::target::{client_error, tessera, TargetError};

/// Which data set a space or table holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dataset {
    /// The seed's micro-benchmark objects (workload `documents`).
    Micro,
    /// The DBLP-shaped bibliography (workload `dblp`).
    Dblp,
}

/// Partitions of every benchmark space: the default of `create`, and of the YCSB space.
pub const PARTITIONS: u32 = 64;
/// Axes of the dynamic spaces: the default of `dimensions`.
pub const DIMENSIONS: u16 = 8;

impl Dataset {
    /// The space name in Tessera and the table name in PostgreSQL.
    pub fn name(self) -> &'static str {
        match self {
            Dataset::Micro => "docmicro",
            Dataset::Dblp => "dblp",
        }
    }

    fn kind_of(self, property: &str) -> Option<Kind> {
        match self {
            Dataset::Micro => MICRO_NAMES.contains(&property).then_some(Kind::Str),
            Dataset::Dblp => Bibliography::kind_of(property),
        }
    }

    /// The dynamic space: nothing declared but its axes and partitions.
    pub fn dynamic_description(self) -> String {
        format!(
            "space {} dynamic key id dimensions {DIMENSIONS} create {PARTITIONS} partitions",
            self.name()
        )
    }

    /// The formula of the `formula` space (seed 004 §4): for the micro-benchmark, one overlay
    /// of the first `dims` property names (the seed's formulas of 1 to 5 queryable
    /// dimensions); for the bibliography, an overlay per property its value queries fix:
    /// `title`, `year` (weighted 4) with `journal`, and `school` (three copies a document).
    ///
    /// With `pointers`, every overlay holds stubs instead of copies (`&title`, ...): a search
    /// then reads each match by key.
    pub fn formula(self, dims: usize, pointers: bool) -> FormulaSpec {
        let overlays: Vec<String> = match self {
            Dataset::Micro => vec![MICRO_NAMES[..dims.clamp(1, MICRO_NAMES.len())].join(",")],
            Dataset::Dblp => vec!["title".into(), "year*4,journal".into(), "school".into()],
        };
        let mark = if pointers { "&" } else { "" };
        let overlays: Vec<String> = overlays.into_iter().map(|o| format!("{mark}{o}")).collect();
        let texts: Vec<&str> = overlays.iter().map(String::as_str).collect();
        FormulaSpec::parse(Some(FORMULA_ID), &texts).expect("the benchmark's formulas parse")
    }

    /// The typed space: every property an attribute. The micro-benchmark's has no subspace
    /// but the key's (the seed's "single dimension", a key-value store); the bibliography's
    /// has one subspace per attribute its queries fix by value and a typed space can use as a
    /// dimension (lists cannot be): `title`, `year`, `school`, `journal`, `booktitle`: what a
    /// HyperDex user would declare for these queries, paid for on every write (chain of 6).
    pub fn typed_description(self) -> String {
        let (attributes, subspaces): (Vec<String>, &[&str]) = match self {
            Dataset::Micro => (
                MICRO_NAMES.iter().map(|n| format!("string {n}")).collect(),
                &[],
            ),
            Dataset::Dblp => (
                PROPERTIES
                    .iter()
                    .map(|(n, k)| match k {
                        Kind::Str => format!("string {n}"),
                        Kind::Int => format!("int {n}"),
                        Kind::List => format!("list(string) {n}"),
                    })
                    .collect(),
                &["title", "year", "school", "journal", "booktitle"],
            ),
        };
        let mut d = format!(
            "space {}\nkey id\nattributes {}\n",
            self.name(),
            attributes.join(", ")
        );
        for s in subspaces {
            d.push_str(&format!("subspace {s}\n"));
        }
        d.push_str(&format!("create {PARTITIONS} partitions\n"));
        d
    }
}

/// Which of the three systems.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpaceKind {
    /// A dynamic space: documents.
    Dynamic,
    /// A typed space: every property an attribute.
    Typed,
    /// A dynamic space whose documents are placed by a compression formula chosen for the
    /// workload's queries ([`Dataset::formula`]) instead of the unispace.
    Formula,
    /// The same formula with pointer overlays: stubs instead of copies.
    Pointers,
}

impl SpaceKind {
    /// Whether the space is a dynamic one whose documents use the benchmark's formula.
    fn has_formula(self) -> bool {
        matches!(self, SpaceKind::Formula | SpaceKind::Pointers)
    }
}

/// The id of the formula the `formula` space's documents use.
pub const FORMULA_ID: &str = "bench";

/// How a system runs a query kind.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Support {
    /// "native", "emulated" or "unsupported".
    pub how: &'static str,
    /// What the system runs instead, when it is not native.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl Support {
    fn native() -> Support {
        Support {
            how: "native",
            note: String::new(),
        }
    }

    fn emulated(note: String) -> Support {
        Support {
            how: "emulated",
            note,
        }
    }
}

/// What `explain` and the geometry say of one query in a Tessera space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RegionsSample {
    /// Regions the server says the search contacts (summed over an emulation's searches).
    pub explained: u64,
    /// Regions tessera-geometry's plan (`choose_subspace`) crosses for the same predicates
    /// over the shapes registered in the client's configuration.
    pub predicted: u64,
    /// Regions of the chosen subspace.
    pub subspace_regions: u64,
    /// Shapes of document the search reads, and shapes known (dynamic spaces; 0 otherwise).
    pub shapes_read: u64,
    pub shapes_known: u64,
}

/// One task's handle on a system. Tessera tasks share one pipelined client; PostgreSQL tasks
/// have a connection each, as its protocol answers one connection's queries in order (and a
/// commit per connection is what lets concurrent commits share a WAL flush).
#[derive(Clone)]
pub enum System {
    Tessera {
        client: Client,
        kind: SpaceKind,
        dataset: Dataset,
        /// The `formula` space's micro-benchmark formula's dimensions ([`Dataset::formula`]).
        formula_dims: usize,
    },
    #[cfg(feature = "peers")]
    Postgres(std::sync::Arc<crate::target::postgres::Documents>),
}

/// A record as a document.
pub fn to_document(e: &Entry) -> Document {
    Document::new(
        e.props
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Val::Str(s) => DocValue::String(s.clone()),
                    Val::Int(i) => DocValue::Int(*i),
                    Val::List(l) => {
                        DocValue::List(l.iter().cloned().map(DocValue::String).collect())
                    }
                };
                ((*k).to_owned(), v)
            })
            .collect(),
    )
}

fn to_value(v: &Val) -> Value {
    match v {
        Val::Str(s) => Value::from(s.clone()),
        Val::Int(i) => Value::Int(*i),
        Val::List(l) => Value::List(l.iter().cloned().map(Value::from).collect()),
    }
}

pub fn to_json(v: &Val) -> serde_json::Value {
    match v {
        Val::Str(s) => serde_json::Value::from(s.clone()),
        Val::Int(i) => serde_json::Value::from(*i),
        Val::List(l) => {
            serde_json::Value::Array(l.iter().cloned().map(serde_json::Value::String).collect())
        }
    }
}

/// A record as the JSONB PostgreSQL stores.
pub fn to_json_doc(e: &Entry) -> serde_json::Value {
    serde_json::Value::Object(
        e.props
            .iter()
            .map(|(k, v)| ((*k).to_owned(), to_json(v)))
            .collect(),
    )
}

/// The dynamic space's predicates for a query.
pub fn dynamic_predicates(q: &Query) -> Vec<Predicate> {
    q.conds
        .iter()
        .map(|c| match c {
            Cond::Eq(p, v) => Predicate::equals(*p, to_value(v)),
            Cond::Contains(p, s) => {
                Predicate::new(*p, PredicateOp::Contains(Value::from(s.clone())))
            }
            Cond::Range(p, lo, hi) => {
                Predicate::new(*p, PredicateOp::Range(Value::Int(*lo), Value::Int(*hi)))
            }
            Cond::Exists(ps) => Predicate::new(
                ps.first().copied().unwrap_or_default(),
                PredicateOp::Exists {
                    or: ps.iter().skip(1).map(|s| (*s).to_owned()).collect(),
                },
            ),
            Cond::Missing(p) => Predicate::new(*p, PredicateOp::Missing),
        })
        .collect()
}

/// The typed space's searches for a query (their results united by key) and whether that is
/// native; `Unsupported` for a condition a typed space cannot say even by emulation.
pub fn typed_searches(
    dataset: Dataset,
    q: &Query,
) -> Result<(Vec<Vec<Predicate>>, Support), TargetError> {
    let mut common = Vec::new();
    let mut alternatives: Vec<&'static str> = Vec::new();
    let mut notes = Vec::new();
    let kind = |p: &str| {
        dataset.kind_of(p).ok_or_else(|| {
            TargetError::Unsupported(format!(
                "no attribute {p:?} in the typed {} space",
                dataset.name()
            ))
        })
    };
    let present = |p: &'static str, k: Kind| match k {
        Kind::Str | Kind::List => Ok(Predicate::new(p, PredicateOp::LengthGreaterEqual(1))),
        Kind::Int => Err(TargetError::Unsupported(format!(
            "exists({p}) on an int attribute: a typed space cannot tell 0 from absent"
        ))),
    };
    for c in &q.conds {
        match c {
            Cond::Eq(p, v) => common.push(Predicate::equals(*p, to_value(v))),
            Cond::Contains(p, s) => common.push(Predicate::new(
                *p,
                PredicateOp::Contains(Value::from(s.clone())),
            )),
            Cond::Range(p, lo, hi) => common.push(Predicate::new(
                *p,
                PredicateOp::Range(Value::Int(*lo), Value::Int(*hi)),
            )),
            Cond::Exists(ps) if ps.len() == 1 => {
                common.push(present(ps[0], kind(ps[0])?)?);
                notes.push(format!("exists({0}) as length({0}) >= 1", ps[0]));
            }
            Cond::Exists(ps) => {
                if !alternatives.is_empty() {
                    return Err(TargetError::Unsupported(
                        "two unions of structure in one query".into(),
                    ));
                }
                alternatives = ps.clone();
                notes.push(format!(
                    "exists({}) as {} searches (length >= 1 each), keys united on the client",
                    ps.join("|"),
                    ps.len()
                ));
            }
            Cond::Missing(p) => {
                let pred = match kind(p)? {
                    Kind::Str => Predicate::equals(*p, Value::from(String::new())),
                    Kind::List => Predicate::new(*p, PredicateOp::LengthEquals(0)),
                    Kind::Int => {
                        return Err(TargetError::Unsupported(format!(
                        "missing({p}) on an int attribute: a typed space cannot tell 0 from absent"
                    )))
                    }
                };
                notes.push(format!("missing({p}) as {p} = its default"));
                common.push(pred);
            }
        }
    }
    let searches = if alternatives.is_empty() {
        vec![common]
    } else {
        alternatives
            .iter()
            .map(|p| {
                let mut s = common.clone();
                s.push(present(p, kind(p)?)?);
                Ok(s)
            })
            .collect::<Result<_, TargetError>>()?
    };
    let support = if notes.is_empty() {
        Support::native()
    } else {
        Support::emulated(notes.join("; "))
    };
    Ok((searches, support))
}

impl System {
    /// A Tessera system over one shared client.
    pub fn tessera(
        client: Client,
        kind: SpaceKind,
        dataset: Dataset,
        formula_dims: usize,
    ) -> System {
        System::Tessera {
            client,
            kind,
            dataset,
            formula_dims,
        }
    }

    /// The system's name in reports.
    pub fn label(&self) -> &'static str {
        match self {
            System::Tessera {
                kind: SpaceKind::Dynamic,
                ..
            } => "tessera-dynamic",
            System::Tessera {
                kind: SpaceKind::Typed,
                ..
            } => "tessera-typed",
            System::Tessera {
                kind: SpaceKind::Formula,
                ..
            } => "tessera-formula",
            System::Tessera {
                kind: SpaceKind::Pointers,
                ..
            } => "tessera-pointers",
            #[cfg(feature = "peers")]
            System::Postgres(_) => "postgres-jsonb",
        }
    }

    /// Creates the space or table afresh (dropping one left by an earlier run).
    pub async fn prepare(&self, dataset: Dataset) -> Result<(), TargetError> {
        match self {
            System::Tessera {
                client,
                kind,
                formula_dims,
                ..
            } => {
                let description = match kind {
                    SpaceKind::Dynamic | SpaceKind::Formula | SpaceKind::Pointers => {
                        dataset.dynamic_description()
                    }
                    SpaceKind::Typed => dataset.typed_description(),
                };
                match client.add_space(&description).await {
                    Ok(()) => {}
                    Err(e) if e.status() == Some(Status::SpaceExists) => {
                        client
                            .rm_space(dataset.name())
                            .await
                            .map_err(client_error)?;
                        client.add_space(&description).await.map_err(client_error)?;
                    }
                    Err(e) => return Err(client_error(e)),
                }
                if kind.has_formula() {
                    let pointers = *kind == SpaceKind::Pointers;
                    client
                        .add_formula(dataset.name(), dataset.formula(*formula_dims, pointers))
                        .await
                        .map_err(client_error)?;
                }
                Ok(())
            }
            #[cfg(feature = "peers")]
            System::Postgres(pg) => pg.prepare().await,
        }
    }

    /// After the load, before queries: PostgreSQL's statistics (its planner needs them to
    /// pick the indexes; autovacuum would gather them eventually); the client's configuration
    /// for Tessera, so that predictions see every shape registered during the load.
    pub async fn after_load(&self, dataset: Dataset) -> Result<(), TargetError> {
        match self {
            System::Tessera { client, kind, .. } => {
                if kind.has_formula() {
                    wait_for_recuts(client, dataset).await?;
                }
                client.refresh().await.map(|_| ()).map_err(client_error)
            }
            #[cfg(feature = "peers")]
            System::Postgres(pg) => pg.after_load().await,
        }
    }

    /// Stores a record.
    pub async fn put(&self, e: &Entry) -> Result<(), TargetError> {
        match self {
            System::Tessera {
                client,
                kind,
                dataset,
                ..
            } => {
                let r = match kind {
                    SpaceKind::Dynamic => {
                        client
                            .put_document(dataset.name(), e.key.as_str(), to_document(e))
                            .await
                    }
                    SpaceKind::Formula | SpaceKind::Pointers => {
                        client
                            .put_document_with_formula(
                                dataset.name(),
                                e.key.as_str(),
                                to_document(e),
                                FORMULA_ID,
                            )
                            .await
                    }
                    SpaceKind::Typed => {
                        let attrs: Vec<(&str, Value)> =
                            e.props.iter().map(|(k, v)| (*k, to_value(v))).collect();
                        client.put(dataset.name(), e.key.as_str(), attrs).await
                    }
                };
                r.map_err(client_error)
            }
            #[cfg(feature = "peers")]
            System::Postgres(pg) => pg.put(e).await,
        }
    }

    /// Reads a record by key; `Ok(false)` when absent.
    pub async fn get(&self, key: &str) -> Result<bool, TargetError> {
        match self {
            System::Tessera {
                client, dataset, ..
            } => match client.get(dataset.name(), key).await {
                Ok(found) => Ok(found.is_some()),
                Err(e) if e.is_not_found() => Ok(false),
                Err(e) => Err(client_error(e)),
            },
            #[cfg(feature = "peers")]
            System::Postgres(pg) => pg.get(key).await,
        }
    }

    /// How this system runs queries like `q`.
    pub fn support(&self, q: &Query) -> Support {
        match self {
            System::Tessera {
                kind: SpaceKind::Typed,
                dataset,
                ..
            } => match typed_searches(*dataset, q) {
                Ok((_, s)) => s,
                Err(e) => Support {
                    how: "unsupported",
                    note: e.to_string(),
                },
            },
            _ => Support::native(),
        }
    }

    /// Runs `q`, reading every matching record in full; returns how many matched.
    pub async fn query(&self, q: &Query) -> Result<u64, TargetError> {
        match self {
            System::Tessera {
                client,
                kind: SpaceKind::Dynamic | SpaceKind::Formula | SpaceKind::Pointers,
                dataset,
                ..
            } => client
                .search(dataset.name(), dynamic_predicates(q))
                .await
                .map(|r| r.len() as u64)
                .map_err(client_error),
            System::Tessera {
                client,
                kind: SpaceKind::Typed,
                dataset,
                ..
            } => {
                let (searches, _) = typed_searches(*dataset, q)?;
                if searches.len() == 1 {
                    let found = client
                        .search(
                            dataset.name(),
                            searches.into_iter().next().unwrap_or_default(),
                        )
                        .await
                        .map_err(client_error)?;
                    return Ok(found.len() as u64);
                }
                let mut keys = BTreeSet::new();
                for s in searches {
                    for r in client
                        .search(dataset.name(), s)
                        .await
                        .map_err(client_error)?
                    {
                        keys.insert(r.key);
                    }
                }
                Ok(keys.len() as u64)
            }
            #[cfg(feature = "peers")]
            System::Postgres(pg) => pg.query(q).await,
        }
    }

    /// What `explain` says of `q` and what the geometry predicts (Tessera only).
    pub async fn regions(&self, q: &Query) -> Result<Option<RegionsSample>, TargetError> {
        let System::Tessera {
            client,
            kind,
            dataset,
            ..
        } = self
        else {
            return Ok(None);
        };
        let searches = match kind {
            SpaceKind::Dynamic | SpaceKind::Formula | SpaceKind::Pointers => {
                vec![dynamic_predicates(q)]
            }
            SpaceKind::Typed => typed_searches(*dataset, q)?.0,
        };
        let config = client.configuration();
        let space = config.space(dataset.name()).ok_or_else(|| {
            TargetError::Protocol(format!(
                "space {} not in the client's configuration",
                dataset.name()
            ))
        })?;
        let tessellations = tessera_geometry::tessellations(&space.schema);
        let mut sample = RegionsSample::default();
        for predicates in searches {
            let e = client
                .explain(dataset.name(), predicates.clone())
                .await
                .map_err(client_error)?;
            let checked = predicates
                .iter()
                .map(|p| CheckedPredicate::check(&space.schema, p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    TargetError::Protocol(format!("predicate refused by the schema: {e}"))
                })?;
            // The geometry's plan from the client's configuration (its shapes and formulas):
            // in a dynamic space, the unispace's boxes for the default formula and an overlay's
            // for each other one; in a typed space, the cheapest subspace.
            let index = tessera_geometry::PropertyIndex::new(&space.schema, &space.shapes);
            let predicted: u64 = tessera_geometry::plan_search(
                &space.schema,
                &tessellations,
                &space.shapes,
                &index,
                &checked,
            )
            .iter()
            .map(|part| part.regions_count)
            .sum();
            sample.explained += e.regions_contacted;
            sample.predicted += predicted;
            sample.subspace_regions = e.subspace_regions;
            sample.shapes_read += e.shapes.len() as u64;
            sample.shapes_known = e.shapes_known;
        }
        Ok(Some(sample))
    }
}

/// Waits for the database's re-cut driver to cut every overlay with an int path by the data
/// ([`tessera::wait_for_recuts`]): equal slices of an int axis hold every year of the
/// bibliography in one slice, which no user would query against. Says on stderr what it found.
async fn wait_for_recuts(client: &Client, dataset: Dataset) -> Result<(), TargetError> {
    let found = tessera::wait_for_recuts(
        client,
        dataset.name(),
        tessera::RECUT_WAIT,
        |_, subspace| {
            subspace.overlay.as_ref().is_some_and(|o| {
                o.axes
                    .iter()
                    .any(|a| dataset.kind_of(&a.path) == Some(Kind::Int))
            })
        },
    )
    .await?;
    tessera::report_recuts(dataset.name(), &found);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bibliography::QueryKind;

    fn query(conds: Vec<Cond>) -> Query {
        Query {
            kind: QueryKind::Title,
            conds,
        }
    }

    #[test]
    fn the_benchmark_formulas_fit_the_spaces() {
        for dims in 1..=5 {
            let f = Dataset::Micro.formula(dims, dims % 2 == 0);
            assert_eq!(f.check(DIMENSIONS), Ok(()));
            assert_eq!(f.overlays[0].axes.len(), dims);
            assert_eq!(f.overlays[0].pointer, dims % 2 == 0);
        }
        assert!(Dataset::Dblp
            .formula(0, true)
            .overlays
            .iter()
            .all(|o| o.pointer));
        let f = Dataset::Dblp.formula(0, false);
        assert_eq!(f.check(DIMENSIONS), Ok(()));
        let paths: Vec<&str> = f
            .overlays
            .iter()
            .flat_map(|o| &o.axes)
            .map(|a| a.path.as_str())
            .collect();
        assert_eq!(paths, ["title", "year", "journal", "school"]);
        // Every overlay property is one the bibliography holds.
        for p in paths {
            assert!(Dataset::Dblp.kind_of(p).is_some(), "{p}");
        }
    }

    #[test]
    fn descriptions_parse() {
        for d in [Dataset::Micro, Dataset::Dblp] {
            let typed = tessera_types::parse_space(&d.typed_description()).expect("typed parses");
            assert!(!typed.is_dynamic());
            let dynamic =
                tessera_types::parse_space(&d.dynamic_description()).expect("dynamic parses");
            assert!(dynamic.is_dynamic());
        }
        let typed = tessera_types::parse_space(&Dataset::Dblp.typed_description()).unwrap();
        assert_eq!(
            typed.attributes.len(),
            PROPERTIES.len() + 1,
            "every property and the key"
        );
    }

    #[test]
    fn typed_emulation_is_labelled() {
        let q = query(vec![Cond::Eq("title", Val::Str("T".into()))]);
        let (s, support) = typed_searches(Dataset::Dblp, &q).unwrap();
        assert_eq!((s.len(), support.how), (1, "native"));
        let q = query(vec![
            Cond::Exists(vec!["note", "cdrom"]),
            Cond::Eq("year", Val::Int(2000)),
        ]);
        let (s, support) = typed_searches(Dataset::Dblp, &q).unwrap();
        assert_eq!((s.len(), support.how), (2, "emulated"));
        assert!(s.iter().all(|p| p.len() == 2));
        let q = query(vec![Cond::Missing("doi")]);
        let (s, support) = typed_searches(Dataset::Dblp, &q).unwrap();
        assert_eq!(s[0], vec![Predicate::equals("doi", "")]);
        assert_eq!(support.how, "emulated");
        assert!(typed_searches(Dataset::Dblp, &query(vec![Cond::Missing("year")])).is_err());
    }

    #[test]
    fn documents_and_json_hold_the_same_properties() {
        let e = Bibliography::new(1, 100).entry(3);
        let d = to_document(&e);
        let j = to_json_doc(&e);
        assert_eq!(d.properties.len(), e.props.len());
        assert_eq!(j.as_object().map(|o| o.len()), Some(e.props.len()));
        assert!(d.check().is_ok());
    }
}
