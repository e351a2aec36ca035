//! `tesseradb._native`: the Python binding's native half, over tessera-client.
//!
//! Deliberately small: one generic entry point, `call(op, args)`, parses Python arguments
//! into a Rust future over [`tessera_client::Client`] (with the GIL held), and three front
//! ends run that future — `call` blocks with the GIL released, `submit` runs it in the
//! background behind a `NativeDeferred`, `call_async` hands it to asyncio. The HyperDex-style
//! API (return conventions, predicate classes, exception tree) is pure Python on top, in
//! `tesseradb/`. All futures run on one tokio runtime, the one `pyo3-async-runtimes` owns,
//! because the client's connection tasks live on the runtime that created them.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyString, PyTuple,
};
use tessera_client::{
    Client, ClientError, Configuration, CoordinatorStatus, Explanation, Funcall, FuncallOp, NumOp,
    Predicate, PredicateOp, Record, SearchStream, SortOrder, SpaceChange, SpaceConfig, SpaceSchema,
    SubspaceId, Value, WriteMode,
};
use tessera_types::constants::DOCUMENT_NESTING_MAX;
use tessera_types::{DocValue, Document, FormulaSpec, FORMULA_ATTRIBUTE};
use tokio::sync::oneshot;

mod outcome;
use outcome::{finish, record_to_py};

create_exception!(
    _native,
    NativeError,
    PyException,
    "args: (symbol, code, message). The tesseradb package turns it into ClientError subclasses."
);

/// Codes of failures that happen in the client, not on a server (server codes are 8001+).
const CODE_CONNECTION: u16 = 8100;
const CODE_PROTOCOL: u16 = 8101;
const CODE_WRONGTYPE: u16 = 8006;

/// A failed operation, held without the GIL.
#[derive(Clone, Debug)]
struct Failure {
    symbol: String,
    code: u16,
    message: String,
}

impl Failure {
    fn wrong_type(message: impl Into<String>) -> Failure {
        Failure {
            symbol: "WRONGTYPE".into(),
            code: CODE_WRONGTYPE,
            message: message.into(),
        }
    }

    fn into_py(self) -> PyErr {
        NativeError::new_err((self.symbol, self.code, self.message))
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        match &e {
            ClientError::Server { status, message } => Failure {
                symbol: status.symbol().into(),
                code: status.code(),
                message: message.clone(),
            },
            ClientError::Io(_) | ClientError::ConnectionClosed | ClientError::Tls(_) => Failure {
                symbol: "CONNECTION".into(),
                code: CODE_CONNECTION,
                message: e.to_string(),
            },
            // Cluster mode: every coordinator was unreachable (or none answered) until the
            // client's retries ran out. For the application that is a connection failure.
            ClientError::NoCoordinator(detail) => Failure {
                symbol: "CONNECTION".into(),
                code: CODE_CONNECTION,
                message: format!(
                    "no coordinator of the cluster answered before the retries ran out: {detail}"
                ),
            },
            _ => Failure {
                symbol: "PROTOCOL".into(),
                code: CODE_PROTOCOL,
                message: e.to_string(),
            },
        }
    }
}

/// What an operation produced, held without the GIL; turned into Python objects at the end.
#[derive(Clone, Debug)]
enum Outcome {
    Done,
    Object(Option<Record>),
    /// A multi_get's objects, in its keys' order.
    Objects(Vec<Option<Record>>),
    /// A multi_put's outcome per item, in order: `None` when it was stored.
    PerItem(Vec<Option<Failure>>),
    Records {
        key_name: String,
        records: Vec<Record>,
    },
    Count(u64),
    /// A name the operation settled on (a formula's id).
    Text(String),
    Explain(Explanation),
    Spaces(Vec<SpaceSchema>),
    Config {
        config: Arc<Configuration>,
        cluster: bool,
    },
    Coordinators(Vec<(String, Result<CoordinatorStatus, Failure>)>),
    /// A space's subspaces, by id, with their states.
    Subspaces(Box<SpaceConfig>),
    /// A space's log of adaptations, oldest first.
    Adaptations(Vec<tessera_client::AdaptationRecord>),
}

type Operation = Pin<Box<dyn Future<Output = Result<Outcome, Failure>> + Send>>;

fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

// ---- Python values to Rust ----------------------------------------------------------------

fn to_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_instance_of::<PyBool>() {
        return Err(Failure::wrong_type("a bool is not a Tessera value: use an int").into_py());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::from(s.to_cow()?.into_owned()));
    }
    // Strings are byte strings, as in HyperDex: any bytes are stored as given.
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::from(b.as_bytes()));
    }
    if obj.is_instance_of::<PyInt>() {
        return obj.extract::<i64>().map(Value::Int).map_err(|_| {
            Failure::wrong_type(format!("{} is outside the int64 range", obj)).into_py()
        });
    }
    if obj.is_instance_of::<PyFloat>() {
        let f: f64 = obj.extract()?;
        if f.is_nan() {
            return Err(Failure::wrong_type("NaN is not a storable float").into_py());
        }
        return Ok(Value::Float(f));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return Ok(Value::List(
            l.iter().map(|x| to_value(&x)).collect::<PyResult<_>>()?,
        ));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return Ok(Value::List(
            t.iter().map(|x| to_value(&x)).collect::<PyResult<_>>()?,
        ));
    }
    if let Ok(s) = obj.cast::<PySet>() {
        return Ok(Value::Set(
            s.iter()
                .map(|x| to_value(&x))
                .collect::<PyResult<BTreeSet<_>>>()?,
        ));
    }
    if let Ok(s) = obj.cast::<PyFrozenSet>() {
        return Ok(Value::Set(
            s.iter()
                .map(|x| to_value(&x))
                .collect::<PyResult<BTreeSet<_>>>()?,
        ));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = BTreeMap::new();
        for (k, v) in d.iter() {
            map.insert(to_value(&k)?, to_value(&v)?);
        }
        return Ok(Value::Map(map));
    }
    let type_name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    Err(Failure::wrong_type(format!("a {type_name} cannot be stored in Tessera")).into_py())
}

/// A Python value inside a dynamic space's document: None, bool, int, float, str (or UTF-8
/// bytes), list or tuple, and dicts with str keys, nested at most as deep as decoding accepts.
fn to_doc_value(obj: &Bound<'_, PyAny>, depth: usize) -> Result<DocValue, Failure> {
    if depth > DOCUMENT_NESTING_MAX {
        return Err(Failure::wrong_type(format!(
            "a document nested more than {DOCUMENT_NESTING_MAX} levels deep"
        )));
    }
    if obj.is_none() {
        return Ok(DocValue::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(DocValue::Bool(b.is_true()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut properties = BTreeMap::new();
        for (k, v) in d.iter() {
            let Ok(name) = k.extract::<String>() else {
                return Err(Failure::wrong_type(format!(
                    "a document's property names are str, not {k}"
                )));
            };
            properties.insert(name, to_doc_value(&v, depth + 1)?);
        }
        return Ok(DocValue::Object(properties));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for item in obj
            .try_iter()
            .map_err(|e| Failure::wrong_type(e.to_string()))?
        {
            let item = item.map_err(|e| Failure::wrong_type(e.to_string()))?;
            items.push(to_doc_value(&item, depth + 1)?);
        }
        return Ok(DocValue::List(items));
    }
    if obj.is_instance_of::<PySet>() || obj.is_instance_of::<PyFrozenSet>() {
        return Err(Failure::wrong_type(
            "a set is not a document value (JSON has none): use a list",
        ));
    }
    match to_value(obj) {
        Ok(Value::String(s)) => match s.as_str() {
            Some(text) => Ok(DocValue::String(text.to_owned())),
            None => Err(Failure::wrong_type(
                "a document's strings are text (JSON): these bytes are not UTF-8",
            )),
        },
        Ok(Value::Int(i)) => Ok(DocValue::Int(i)),
        Ok(Value::Float(f)) => Ok(DocValue::Float(f)),
        Ok(other) => Err(Failure::wrong_type(format!(
            "a {} is not a document value",
            other.kind_name()
        ))),
        Err(e) => Err(Failure::wrong_type(e.to_string())),
    }
}

/// A put's changes as a typed space takes them (funcalls) or as a dynamic space does (one
/// document of the properties set). Which applies depends on the space: decided here when the
/// client's configuration knows it (errors are raised at once, as for any bad argument),
/// after fetching it otherwise.
enum Writes {
    Typed(Vec<Funcall>),
    Dynamic(Document),
    Unknown {
        funcalls: Result<Vec<Funcall>, Failure>,
        document: Result<Document, Failure>,
    },
}

impl Writes {
    fn new(list: &Bound<'_, PyAny>, dynamic: Option<bool>) -> PyResult<Writes> {
        Ok(match dynamic {
            Some(false) => Writes::Typed(to_funcalls(list)?),
            Some(true) => Writes::Dynamic(to_document(list).map_err(Failure::into_py)?),
            None => Writes::Unknown {
                funcalls: to_funcalls(list).map_err(|e| Failure::wrong_type(e.to_string())),
                document: to_document(list),
            },
        })
    }

    /// The funcalls to send, now that the space's kind is known; `formula` (a dynamic space's
    /// compression formula for the document) is refused for a typed space.
    fn funcalls(self, dynamic: bool, formula: Option<String>) -> Result<Vec<Funcall>, Failure> {
        let mut funcalls = match (self, dynamic) {
            (Writes::Typed(f), _) => f,
            (Writes::Dynamic(d), _) => vec![Funcall::merge(d)],
            (Writes::Unknown { document, .. }, true) => vec![Funcall::merge(document?)],
            (Writes::Unknown { funcalls, .. }, false) => funcalls?,
        };
        match formula {
            Some(id) if dynamic => funcalls.push(Funcall::set(FORMULA_ATTRIBUTE, id)),
            Some(_) => {
                return Err(Failure::wrong_type(
                    "formula= names a dynamic space's compression formula: this space is typed",
                ))
            }
            None => {}
        }
        Ok(funcalls)
    }
}

/// A dynamic space's put: `[(property, "set", value), …]` as one document.
fn to_document(list: &Bound<'_, PyAny>) -> Result<Document, Failure> {
    let mut properties = BTreeMap::new();
    let items = list
        .try_iter()
        .map_err(|e| Failure::wrong_type(e.to_string()))?;
    for item in items {
        let item = item.map_err(|e| Failure::wrong_type(e.to_string()))?;
        let (attr, op, arg): (String, String, Bound<'_, PyAny>) = item
            .extract()
            .map_err(|e: PyErr| Failure::wrong_type(e.to_string()))?;
        if op != "set" {
            return Err(Failure::wrong_type(format!(
                "{op} on {attr:?}: a dynamic space's documents are put as dicts of properties, not changed by atomic operations"
            )));
        }
        properties.insert(attr, to_doc_value(&arg, 1)?);
    }
    Ok(Document::new(properties))
}

fn bad_argument(message: String) -> PyErr {
    Failure {
        symbol: "PROTOCOL".into(),
        code: CODE_PROTOCOL,
        message,
    }
    .into_py()
}

fn to_predicates(list: &Bound<'_, PyAny>) -> PyResult<Vec<Predicate>> {
    let mut out = Vec::new();
    for item in list.try_iter()? {
        let (attr, op, arg): (String, String, Bound<'_, PyAny>) = item?.extract()?;
        let length = |arg: &Bound<'_, PyAny>| -> PyResult<u64> {
            arg.extract::<u64>()
                .map_err(|_| Failure::wrong_type("a length is a non-negative int").into_py())
        };
        let op = match op.as_str() {
            "equals" => PredicateOp::Equals(to_value(&arg)?),
            "less" => PredicateOp::LessThan(to_value(&arg)?),
            "less_equal" => PredicateOp::LessEqual(to_value(&arg)?),
            "greater" => PredicateOp::GreaterThan(to_value(&arg)?),
            "greater_equal" => PredicateOp::GreaterEqual(to_value(&arg)?),
            "range" => {
                let (lo, hi): (Bound<'_, PyAny>, Bound<'_, PyAny>) = arg.extract()?;
                PredicateOp::Range(to_value(&lo)?, to_value(&hi)?)
            }
            "regex" => PredicateOp::Regex(arg.extract()?),
            "length_equals" => PredicateOp::LengthEquals(length(&arg)?),
            "length_less_equal" => PredicateOp::LengthLessEqual(length(&arg)?),
            "length_greater_equal" => PredicateOp::LengthGreaterEqual(length(&arg)?),
            "contains" => PredicateOp::Contains(to_value(&arg)?),
            "exists" => PredicateOp::Exists { or: arg.extract()? },
            "missing" => PredicateOp::Missing,
            other => return Err(bad_argument(format!("unknown predicate {other:?}"))),
        };
        out.push(Predicate::new(attr, op));
    }
    Ok(out)
}

/// Every atomic operation the module takes, by the name `tesseradb/_operations.py` gives it
/// (exported as `FUNCALL_OPS`; the Python tests check the table against it).
const FUNCALL_OPS: &[(&str, FuncallOp)] = &[
    ("set", FuncallOp::Set),
    ("num_add", FuncallOp::Num(NumOp::Add)),
    ("num_sub", FuncallOp::Num(NumOp::Sub)),
    ("num_mul", FuncallOp::Num(NumOp::Mul)),
    ("num_div", FuncallOp::Num(NumOp::Div)),
    ("num_mod", FuncallOp::Num(NumOp::Mod)),
    ("num_and", FuncallOp::Num(NumOp::And)),
    ("num_or", FuncallOp::Num(NumOp::Or)),
    ("num_xor", FuncallOp::Num(NumOp::Xor)),
    ("num_min", FuncallOp::Num(NumOp::Min)),
    ("num_max", FuncallOp::Num(NumOp::Max)),
    ("string_prepend", FuncallOp::StringPrepend),
    ("string_append", FuncallOp::StringAppend),
    ("list_lpush", FuncallOp::ListLPush),
    ("list_rpush", FuncallOp::ListRPush),
    ("set_add", FuncallOp::SetAdd),
    ("set_remove", FuncallOp::SetRemove),
    ("set_union", FuncallOp::SetUnion),
    ("set_intersect", FuncallOp::SetIntersect),
    ("map_add", FuncallOp::MapAdd),
    ("map_remove", FuncallOp::MapRemove),
    ("map_num_add", FuncallOp::MapNum(NumOp::Add)),
    ("map_num_sub", FuncallOp::MapNum(NumOp::Sub)),
    ("map_num_mul", FuncallOp::MapNum(NumOp::Mul)),
    ("map_num_div", FuncallOp::MapNum(NumOp::Div)),
    ("map_num_mod", FuncallOp::MapNum(NumOp::Mod)),
    ("map_num_and", FuncallOp::MapNum(NumOp::And)),
    ("map_num_or", FuncallOp::MapNum(NumOp::Or)),
    ("map_num_xor", FuncallOp::MapNum(NumOp::Xor)),
    ("map_num_min", FuncallOp::MapNum(NumOp::Min)),
    ("map_num_max", FuncallOp::MapNum(NumOp::Max)),
    ("map_string_prepend", FuncallOp::MapStringPrepend),
    ("map_string_append", FuncallOp::MapStringAppend),
];

fn to_funcalls(list: &Bound<'_, PyAny>) -> PyResult<Vec<Funcall>> {
    let mut out = Vec::new();
    for item in list.try_iter()? {
        let (attr, op, arg): (String, String, Bound<'_, PyAny>) = item?.extract()?;
        let Some(&(_, op)) = FUNCALL_OPS.iter().find(|(name, _)| *name == op) else {
            return Err(bad_argument(format!("unknown operation {op:?}")));
        };
        out.push(Funcall {
            attr,
            op,
            arg: to_value(&arg)?,
        });
    }
    Ok(out)
}

fn write_mode(name: &str) -> PyResult<WriteMode> {
    match name {
        "upsert" => Ok(WriteMode::Upsert),
        "create" => Ok(WriteMode::CreateOnly),
        "update" => Ok(WriteMode::UpdateOnly),
        other => Err(bad_argument(format!("unknown write mode {other:?}"))),
    }
}

/// Every operation `call`, `submit`, `call_async` and `call_batched` take: its name (the one
/// `tesseradb/_operations.py` gives as `native`), how many arguments it takes, and the function
/// of [`ops`] that parses them into a future. Adding an operation is a line here and that
/// function. Exported as `CALL_OPS` (the Python tests check the table against it).
const CALL_OPS: &[(&str, usize, ops::Parse)] = &[
    ("get", 2, ops::get),
    ("multi_get", 2, ops::multi_get),
    ("multi_put", 2, ops::multi_put),
    ("put", 6, ops::put),
    ("del", 3, ops::del),
    ("count", 2, ops::count),
    ("search", 2, ops::search),
    ("get_by_range", 4, ops::get_by_range),
    ("get_by_tags", 2, ops::get_by_tags),
    ("sorted_search", 5, ops::sorted_search),
    ("group_del", 2, ops::group_del),
    ("group_update", 3, ops::group_update),
    ("explain", 2, ops::explain),
    ("add_space", 1, ops::add_space),
    ("rm_space", 1, ops::rm_space),
    ("add_subspace", 2, ops::add_subspace),
    ("add_formula", 3, ops::add_formula),
    ("drop_subspace", 2, ops::drop_subspace),
    ("set_adapt", 2, ops::set_adapt),
    ("adaptations", 1, ops::adaptations),
    ("subspaces", 1, ops::subspaces),
    ("wait_built", 2, ops::wait_built),
    ("list_spaces", 0, ops::list_spaces),
    ("config", 0, ops::config),
    ("coordinators", 0, ops::coordinators),
];

/// Parses `op(args)` into a future that owns everything it needs (so it can run without the
/// GIL, on any thread).
fn operation(client: &Client, op: &str, args: &Bound<'_, PyTuple>) -> PyResult<Operation> {
    let Some(&(_, arity, parse)) = CALL_OPS.iter().find(|(name, ..)| *name == op) else {
        return Err(bad_argument(format!("unknown operation {op:?}")));
    };
    if args.len() != arity {
        return Err(bad_argument(format!(
            "{op} takes {arity} arguments, got {}",
            args.len()
        )));
    }
    parse(client.clone(), &Args(args))
}

/// An operation's arguments, as Python gave them (as many as its row of [`CALL_OPS`] says).
struct Args<'a, 'py>(&'a Bound<'py, PyTuple>);

impl<'py> Args<'_, 'py> {
    fn item(&self, i: usize) -> PyResult<Bound<'py, PyAny>> {
        self.0.get_item(i)
    }

    fn string(&self, i: usize) -> PyResult<String> {
        self.item(i)?.extract()
    }

    fn value(&self, i: usize) -> PyResult<Value> {
        to_value(&self.item(i)?)
    }

    fn predicates(&self, i: usize) -> PyResult<Vec<Predicate>> {
        to_predicates(&self.item(i)?)
    }

    fn funcalls(&self, i: usize) -> PyResult<Vec<Funcall>> {
        to_funcalls(&self.item(i)?)
    }
}

/// One function per row of [`CALL_OPS`]: its arguments parsed (with the GIL held, so a bad
/// one raises at once), then the future that runs it on `c`.
mod ops {
    use super::*;

    pub(super) type Parse = fn(Client, &Args<'_, '_>) -> PyResult<Operation>;

    /// The future of an operation whose arguments were all taken.
    fn run<F>(operation: F) -> PyResult<Operation>
    where
        F: Future<Output = Result<Outcome, Failure>> + Send + 'static,
    {
        Ok(Box::pin(operation))
    }

    /// Whether `space` is dynamic, if the client's configuration knows it yet.
    fn known_dynamic(c: &Client, space: &str) -> Option<bool> {
        c.configuration()
            .space(space)
            .map(|s| s.schema.is_dynamic())
    }

    /// Whether `space` is dynamic: `known`, or asked of the cluster.
    async fn dynamic(c: &Client, space: &str, known: Option<bool>) -> Result<bool, Failure> {
        Ok(match known {
            Some(d) => d,
            None => c.describe_space(space).await?.is_dynamic(),
        })
    }

    /// Records answered with the space's key under its name.
    async fn records<F>(c: &Client, space: &str, read: F) -> Result<Outcome, Failure>
    where
        F: Future<Output = Result<Vec<Record>, ClientError>>,
    {
        let key_name = c.describe_space(space).await?.key().name.clone();
        Ok(Outcome::Records {
            key_name,
            records: read.await?,
        })
    }

    fn unknown_space(space: &str) -> Failure {
        Failure {
            symbol: "UNKNOWNSPACE".into(),
            code: tessera_client::Status::UnknownSpace.code(),
            message: format!("no space named {space:?}"),
        }
    }

    pub(super) fn get(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, key) = (a.string(0)?, a.value(1)?);
        run(async move { Ok(Outcome::Object(c.get(&space, key).await?)) })
    }

    pub(super) fn multi_get(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        let keys = a
            .item(1)?
            .extract::<Vec<Bound<'_, PyAny>>>()?
            .iter()
            .map(to_value)
            .collect::<PyResult<Vec<Value>>>()?;
        run(async move { Ok(Outcome::Objects(c.multi_get(&space, keys).await?)) })
    }

    pub(super) fn multi_put(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        let known = known_dynamic(&c, &space);
        let items = a
            .item(1)?
            .extract::<Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)>>()?
            .iter()
            .map(|(k, changes)| Ok((to_value(k)?, Writes::new(changes, known)?)))
            .collect::<PyResult<Vec<(Value, Writes)>>>()?;
        run(async move {
            let dynamic = dynamic(&c, &space, known).await?;
            let mut puts = Vec::with_capacity(items.len());
            for (key, writes) in items {
                puts.push((key, writes.funcalls(dynamic, None)?));
            }
            let outcomes = c.multi_put(&space, puts).await;
            Ok(Outcome::PerItem(
                outcomes
                    .into_iter()
                    .map(|o| o.err().map(Failure::from))
                    .collect(),
            ))
        })
    }

    pub(super) fn put(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, key) = (a.string(0)?, a.value(1)?);
        let (mode, conditions) = (write_mode(&a.string(2)?)?, a.predicates(3)?);
        let formula: Option<String> = a.item(5)?.extract().map_err(|_| {
            Failure::wrong_type("formula= is a formula id (a str) or None").into_py()
        })?;
        let known = known_dynamic(&c, &space);
        let writes = Writes::new(&a.item(4)?, known)?;
        run(async move {
            let dynamic = dynamic(&c, &space, known).await?;
            let funcalls = writes.funcalls(dynamic, formula)?;
            c.write(&space, key, mode, conditions, funcalls).await?;
            Ok(Outcome::Done)
        })
    }

    pub(super) fn del(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, key, conditions) = (a.string(0)?, a.value(1)?, a.predicates(2)?);
        run(async move {
            c.cond_del(&space, key, conditions).await?;
            Ok(Outcome::Done)
        })
    }

    pub(super) fn count(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, predicates) = (a.string(0)?, a.predicates(1)?);
        run(async move { Ok(Outcome::Count(c.count(&space, predicates).await?)) })
    }

    pub(super) fn search(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, predicates) = (a.string(0)?, a.predicates(1)?);
        run(async move { records(&c, &space, c.search(&space, predicates)).await })
    }

    pub(super) fn get_by_range(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, from, to) = (a.string(0)?, a.value(1)?, a.value(2)?);
        let limit: Option<u32> = a.item(3)?.extract()?;
        run(async move { records(&c, &space, c.get_by_range(&space, from, to, limit)).await })
    }

    pub(super) fn get_by_tags(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        let tags: Vec<String> = a.item(1)?.extract()?;
        run(async move { records(&c, &space, c.get_by_tags(&space, tags)).await })
    }

    pub(super) fn sorted_search(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, predicates, sort_by) = (a.string(0)?, a.predicates(1)?, a.string(2)?);
        let limit: u32 = a.item(3)?.extract()?;
        let order = if a.item(4)?.is_truthy()? {
            SortOrder::Descending
        } else {
            SortOrder::Ascending
        };
        run(async move {
            let read = c.sorted_search(&space, predicates, &sort_by, limit, order);
            records(&c, &space, read).await
        })
    }

    pub(super) fn group_del(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, predicates) = (a.string(0)?, a.predicates(1)?);
        run(async move { Ok(Outcome::Count(c.group_del(&space, predicates).await?)) })
    }

    pub(super) fn group_update(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, predicates, funcalls) = (a.string(0)?, a.predicates(1)?, a.funcalls(2)?);
        run(async move {
            Ok(Outcome::Count(
                c.group_update(&space, predicates, funcalls).await?,
            ))
        })
    }

    pub(super) fn explain(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let (space, predicates) = (a.string(0)?, a.predicates(1)?);
        run(async move { Ok(Outcome::Explain(c.explain(&space, predicates).await?)) })
    }

    pub(super) fn add_space(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let description = a.string(0)?;
        run(async move {
            c.add_space(&description).await?;
            Ok(Outcome::Done)
        })
    }

    pub(super) fn rm_space(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let name = a.string(0)?;
        run(async move {
            c.rm_space(&name).await?;
            Ok(Outcome::Done)
        })
    }

    pub(super) fn add_subspace(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        let attributes: Vec<String> = a.item(1)?.extract()?;
        run(async move {
            let change = SpaceChange::AddSubspace {
                attributes: attributes.clone(),
            };
            c.alter_space(&space, change).await?;
            let mut config = c.configuration();
            if added_id(&config, &space, &attributes).is_none() {
                config = c.refresh().await?;
            }
            let id = added_id(&config, &space, &attributes).ok_or_else(|| Failure {
                symbol: "PROTOCOL".into(),
                code: CODE_PROTOCOL,
                message: format!(
                    "the subspace over {attributes:?} was added to {space:?}, but the \
                     configuration fetched since does not show it"
                ),
            })?;
            Ok(Outcome::Count(u64::from(id.0)))
        })
    }

    pub(super) fn add_formula(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        let overlays: Vec<String> = a.item(1)?.extract()?;
        let id: Option<String> = a.item(2)?.extract()?;
        let texts: Vec<&str> = overlays.iter().map(String::as_str).collect();
        // A malformed overlay is refused here, as the server would refuse it.
        let spec = FormulaSpec::parse(id.as_deref(), &texts).map_err(|e| {
            Failure {
                symbol: tessera_client::Status::BadAlteration.symbol().into(),
                code: tessera_client::Status::BadAlteration.code(),
                message: e.to_string(),
            }
            .into_py()
        })?;
        run(async move { Ok(Outcome::Text(c.add_formula(&space, spec).await?)) })
    }

    pub(super) fn drop_subspace(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        let subspace: u16 = a.item(1)?.extract().map_err(|_| {
            Failure::wrong_type("a subspace id is an int from 1 to 65535").into_py()
        })?;
        run(async move {
            c.alter_space(&space, SpaceChange::DropSubspace { subspace })
                .await?;
            Ok(Outcome::Count(u64::from(subspace)))
        })
    }

    pub(super) fn set_adapt(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        let on: bool = a
            .item(1)?
            .extract()
            .map_err(|_| Failure::wrong_type("adapt is True or False").into_py())?;
        run(async move {
            c.alter_space(&space, SpaceChange::SetAdapt { on }).await?;
            Ok(Outcome::Done)
        })
    }

    pub(super) fn adaptations(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        run(async move {
            let config = c.refresh().await?;
            let found = config.space(&space).ok_or_else(|| unknown_space(&space))?;
            Ok(Outcome::Adaptations(found.adaptations.clone()))
        })
    }

    pub(super) fn subspaces(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        run(async move {
            let config = c.refresh().await?;
            let found = config
                .space(&space)
                .cloned()
                .ok_or_else(|| unknown_space(&space))?;
            Ok(Outcome::Subspaces(Box::new(found)))
        })
    }

    pub(super) fn wait_built(c: Client, a: &Args<'_, '_>) -> PyResult<Operation> {
        let space = a.string(0)?;
        let timeout: Option<f64> = a.item(1)?.extract()?;
        let timeout = match timeout {
            None => None,
            Some(t) if t.is_finite() && t >= 0.0 => Some(std::time::Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "timeout must be a number of seconds >= 0 or None, not {t}"
                )))
            }
        };
        run(async move {
            Ok(Outcome::Subspaces(Box::new(
                c.wait_built(&space, timeout).await?,
            )))
        })
    }

    pub(super) fn list_spaces(c: Client, _: &Args<'_, '_>) -> PyResult<Operation> {
        run(async move { Ok(Outcome::Spaces(c.list_spaces().await?)) })
    }

    pub(super) fn config(c: Client, _: &Args<'_, '_>) -> PyResult<Operation> {
        run(async move {
            Ok(Outcome::Config {
                config: c.refresh().await?,
                cluster: c.is_cluster(),
            })
        })
    }

    pub(super) fn coordinators(c: Client, _: &Args<'_, '_>) -> PyResult<Operation> {
        run(async move {
            let statuses = c.coordinator_statuses().await;
            Ok(Outcome::Coordinators(
                statuses
                    .into_iter()
                    .map(|(address, s)| (address, s.map_err(Failure::from)))
                    .collect(),
            ))
        })
    }
}

/// The written subspace of `space` (not the key's) over exactly `attributes`, in any order.
fn added_id(config: &Configuration, space: &str, attributes: &[String]) -> Option<SubspaceId> {
    let space = config.space(space)?;
    let schema = &space.schema;
    let wanted: BTreeSet<&str> = attributes.iter().map(String::as_str).collect();
    schema.written_subspaces().skip(1).find(|&id| {
        let dims = &schema.subspace(id).dimensions;
        dims.len() == attributes.len()
            && dims
                .iter()
                .map(|&a| schema.attribute(a).name.as_str())
                .collect::<BTreeSet<_>>()
                == wanted
    })
}

// ---- the classes --------------------------------------------------------------------------

/// A connection to a Tessera server or cluster, shared by every thread that uses this object.
#[pyclass(module = "tesseradb._native", frozen)]
struct NativeClient {
    client: Client,
}

#[pymethods]
impl NativeClient {
    /// `addresses`: `host:port`, or several comma-separated (a cluster's coordinators);
    /// `timeout`: seconds a request may take, retries included; `token`: presented on every
    /// connection, for daemons started with `--auth`; `tls_ca`: path of the PEM certificate
    /// authority to trust, for daemons serving TLS; `read_from` (keyword only): which replica
    /// a get asks in a cluster, `"any"` (any complete replica of the key's region, in turn) or
    /// `"leader"` (the key's point leader only); both linearizable, and the same standalone.
    /// Every argument is checked before connecting (`ValueError`).
    #[new]
    #[pyo3(signature = (addresses, timeout = 10.0, token = None, tls_ca = None, *, read_from = "any"))]
    fn new(
        py: Python<'_>,
        addresses: String,
        timeout: f64,
        token: Option<String>,
        tls_ca: Option<std::path::PathBuf>,
        read_from: &str,
    ) -> PyResult<NativeClient> {
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "timeout must be a positive number of seconds, not {timeout}"
            )));
        }
        let read_from = match read_from {
            "any" => tessera_client::ReadFrom::AnyReplica,
            "leader" => tessera_client::ReadFrom::Leader,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "read_from must be \"any\" (any complete replica of the key's region) or \
                     \"leader\" (the key's point leader only), not {other:?}"
                )))
            }
        };
        let mut options = tessera_client::ClientOptions::with_timeout(
            std::time::Duration::from_secs_f64(timeout),
        )
        .with_read_from(read_from);
        options.token = token;
        if let Some(ca) = tls_ca {
            options = options
                .with_tls_ca(&ca)
                .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("tls_ca: {e}")))?;
        }
        let client = py
            .detach(|| runtime().block_on(Client::connect_with(&addresses, options)))
            .map_err(|e| Failure::from(e).into_py())?;
        Ok(NativeClient { client })
    }

    /// Runs `op(*args)` and returns its result, with the GIL released while it waits.
    fn call(&self, py: Python<'_>, op: &str, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        let operation = operation(&self.client, op, args)?;
        let result = py.detach(|| runtime().block_on(operation));
        finish(py, result)
    }

    /// Starts `op(*args)` in the background; `wait()` on the handle returns its result.
    fn submit(&self, op: &str, args: &Bound<'_, PyTuple>) -> PyResult<NativeDeferred> {
        let operation = operation(&self.client, op, args)?;
        let (tx, rx) = oneshot::channel();
        runtime().spawn(async move {
            let _ = tx.send(operation.await);
        });
        Ok(NativeDeferred {
            state: Mutex::new(DeferredState::Running(rx)),
        })
    }

    /// `op(*args)` as an asyncio awaitable.
    fn call_async<'py>(
        &self,
        py: Python<'py>,
        op: &str,
        args: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let operation = operation(&self.client, op, args)?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let result = operation.await;
            Python::attach(|py| finish(py, result))
        })
    }

    /// Starts `op(*args)`; when it ends, its outcome is queued in `completions` under
    /// `ticket` (see `NativeCompletions`). The asyncio client's path: one wake-up of the event
    /// loop per batch of completions, not one per operation.
    fn call_batched(
        &self,
        py: Python<'_>,
        op: &str,
        args: &Bound<'_, PyTuple>,
        ticket: u64,
        completions: Py<NativeCompletions>,
    ) -> PyResult<()> {
        let operation = operation(&self.client, op, args)?;
        py.detach(|| {
            runtime().spawn(async move {
                let result = operation.await;
                completions.get().complete(ticket, result);
            })
        });
        Ok(())
    }

    /// A search whose results are read as they stream in.
    fn search_iter(
        &self,
        py: Python<'_>,
        space: String,
        predicates: &Bound<'_, PyAny>,
    ) -> PyResult<NativeSearch> {
        let predicates = to_predicates(predicates)?;
        let client = self.client.clone();
        let started = py.detach(|| {
            runtime().block_on(async move {
                let key_name = client.describe_space(&space).await?.key().name.clone();
                let stream = client.search_stream(&space, predicates).await?;
                Ok::<_, ClientError>((key_name, stream))
            })
        });
        let (key_name, stream) = started.map_err(|e| Failure::from(e).into_py())?;
        Ok(NativeSearch {
            key_name,
            stream: Mutex::new(Some(stream)),
        })
    }
}

/// Outcomes of `NativeClient.call_batched` operations, waiting for Python to take them. The
/// completion that finds the queue empty writes one byte to a pipe the event loop watches
/// (`loop.add_reader`); later ones only queue, and the drain takes all of them, so a burst of
/// completions costs the event loop one wake-up. The byte is written without the GIL: a native
/// thread never waits for the interpreter (nor builds a thread state) to wake the loop.
///
/// The drain must read the pipe before it takes the queue: an outcome queued after a take
/// found the queue empty, so its byte comes after that take's read and wakes the next drain.
#[pyclass(module = "tesseradb._native", frozen)]
struct NativeCompletions {
    queue: Mutex<Vec<(u64, Result<Outcome, Failure>)>>,
    /// Written through `&File` from any thread: a one-byte pipe write is atomic.
    wake: std::fs::File,
}

impl NativeCompletions {
    fn complete(&self, ticket: u64, result: Result<Outcome, Failure>) {
        let first = {
            let mut queue = self.queue.lock().expect("completions lock");
            queue.push((ticket, result));
            queue.len() == 1
        };
        if first {
            use std::io::Write;
            // A pipe whose reader is gone (the loop closed its end): nobody waits any more.
            let _ = (&self.wake).write_all(&[1]);
        }
    }
}

#[pymethods]
impl NativeCompletions {
    /// `wake_fd`: the write end of a pipe whose read end the event loop watches. It is opened
    /// again here (through /dev/fd), so the caller may close its own descriptor at once.
    #[new]
    fn new(wake_fd: i32) -> PyResult<NativeCompletions> {
        let wake = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/dev/fd/{wake_fd}"))
            .map_err(|e| {
                pyo3::exceptions::PyOSError::new_err(format!(
                    "cannot open the wake-up pipe (fd {wake_fd}): {e}"
                ))
            })?;
        Ok(NativeCompletions {
            queue: Mutex::new(Vec::new()),
            wake,
        })
    }

    /// Every outcome queued since the last call: `(ticket, True, value)` or
    /// `(ticket, False, exception)`.
    fn take(&self, py: Python<'_>) -> Vec<(u64, bool, Py<PyAny>)> {
        let taken = std::mem::take(&mut *self.queue.lock().expect("completions lock"));
        taken
            .into_iter()
            .map(|(ticket, result)| match finish(py, result) {
                Ok(value) => (ticket, true, value),
                Err(error) => (ticket, false, error.value(py).clone().into_any().unbind()),
            })
            .collect()
    }
}

enum DeferredState {
    Running(oneshot::Receiver<Result<Outcome, Failure>>),
    Finished(Result<Outcome, Failure>),
}

/// An operation started by `NativeClient.submit`.
#[pyclass(module = "tesseradb._native", frozen)]
struct NativeDeferred {
    state: Mutex<DeferredState>,
}

#[pymethods]
impl NativeDeferred {
    /// Waits for the operation (GIL released) and returns its result; again on later calls.
    fn wait(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let result = py.detach(|| {
            let mut state = self.state.lock().expect("deferred lock");
            if let DeferredState::Running(rx) = &mut *state {
                let result = runtime().block_on(rx).unwrap_or_else(|_| {
                    Err(Failure {
                        symbol: "CONNECTION".into(),
                        code: CODE_CONNECTION,
                        message: "the operation was dropped".into(),
                    })
                });
                *state = DeferredState::Finished(result);
            }
            match &*state {
                DeferredState::Finished(r) => r.clone(),
                DeferredState::Running(_) => unreachable!("finished above"),
            }
        });
        finish(py, result)
    }
}

/// The objects of a search, as the server streams them (each a dict, key included).
#[pyclass(module = "tesseradb._native", frozen)]
struct NativeSearch {
    key_name: String,
    stream: Mutex<Option<SearchStream>>,
}

#[pymethods]
impl NativeSearch {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let next = py.detach(|| {
            let mut slot = self.stream.lock().expect("search lock");
            let Some(stream) = slot.as_mut() else {
                return Ok(None);
            };
            let next = runtime().block_on(stream.next());
            if !matches!(next, Ok(Some(_))) {
                *slot = None; // finished or failed: later calls end the iteration
            }
            next
        });
        match next {
            Ok(Some(record)) => Ok(Some(
                record_to_py(py, &record, Some(&self.key_name))?
                    .into_any()
                    .unbind(),
            )),
            Ok(None) => Ok(None),
            Err(e) => Err(Failure::from(e).into_py()),
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    let names: Vec<&str> = FUNCALL_OPS.iter().map(|(name, _)| *name).collect();
    m.add("FUNCALL_OPS", names)?;
    let names: Vec<&str> = CALL_OPS.iter().map(|(name, ..)| *name).collect();
    m.add("CALL_OPS", names)?;
    m.add_class::<NativeClient>()?;
    m.add_class::<NativeDeferred>()?;
    m.add_class::<NativeCompletions>()?;
    m.add_class::<NativeSearch>()?;
    Ok(())
}
