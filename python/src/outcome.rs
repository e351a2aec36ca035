//! What an operation produced ([`Outcome`]), turned into the Python objects `tesseradb/`
//! expects. Its own module because it is a long, flat list of conversions, none of which the
//! rest of the binding (parsing arguments, running futures) needs to read.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PySet, PyString};
use tessera_client::{
    AdaptationEvent, AdaptationRecord, Configuration, CoordinatorStatus, Explanation, Record,
    SpaceConfig, SpaceSchema, SubspaceState, Value,
};
use tessera_types::{DocValue, DOCUMENT_ATTRIBUTE};

use crate::{Failure, Outcome};

/// An operation's result as Python gets it: its objects, or the `NativeError` it raised.
pub(crate) fn finish(py: Python<'_>, result: Result<Outcome, Failure>) -> PyResult<Py<PyAny>> {
    match result {
        Ok(outcome) => outcome_to_py(py, outcome),
        Err(failure) => Err(failure.into_py()),
    }
}

// ---- outcomes -----------------------------------------------------------------------------

/// Only the dispatch: a conversion longer than an expression is its own function below, so
/// that this one reads at once.
fn outcome_to_py(py: Python<'_>, outcome: Outcome) -> PyResult<Py<PyAny>> {
    let object: Bound<'_, PyAny> = match outcome {
        Outcome::Done => PyBool::new(py, true).to_owned().into_any(),
        Outcome::Object(None) => py.None().into_bound(py),
        Outcome::Object(Some(r)) => record_to_py(py, &r, None)?.into_any(),
        Outcome::PerItem(outcomes) => per_item_to_py(py, outcomes)?.into_any(),
        Outcome::Objects(found) => objects_to_py(py, &found)?.into_any(),
        Outcome::Records { key_name, records } => {
            list_of(py, &records, |r| record_to_py(py, r, Some(&key_name)))?
        }
        Outcome::Count(n) => n.into_pyobject(py)?.into_any(),
        Outcome::Text(t) => t.into_pyobject(py)?.into_any(),
        Outcome::Explain(e) => explanation_to_py(py, e)?.into_any(),
        Outcome::Spaces(spaces) => list_of(py, &spaces, |s| schema_to_py(py, s))?,
        Outcome::Config { config, cluster } => config_to_py(py, &config, cluster)?.into_any(),
        Outcome::Subspaces(space) => subspaces_to_py(py, &space)?.into_any(),
        Outcome::Adaptations(records) => adaptations_to_py(py, records)?.into_any(),
        Outcome::Coordinators(statuses) => coordinators_to_py(py, statuses)?.into_any(),
    };
    Ok(object.unbind())
}

/// A multi_put's outcomes: `None` per item stored, `(symbol, code, message)` per item refused.
fn per_item_to_py(py: Python<'_>, outcomes: Vec<Option<Failure>>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for o in outcomes {
        match o {
            None => list.append(py.None())?,
            Some(f) => list.append((f.symbol, f.code, f.message))?,
        }
    }
    Ok(list)
}

/// A multi_get's objects, `None` where a key has none.
fn objects_to_py<'py>(py: Python<'py>, found: &[Option<Record>]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for r in found {
        match r {
            Some(r) => list.append(record_to_py(py, r, None)?)?,
            None => list.append(py.None())?,
        }
    }
    Ok(list)
}

fn explanation_to_py(py: Python<'_>, e: Explanation) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("subspace", e.subspace.0)?;
    d.set_item("dimensions", e.dimensions)?;
    d.set_item("subspace_regions", e.subspace_regions)?;
    d.set_item("regions_contacted", e.regions_contacted)?;
    d.set_item("servers_contacted", e.servers_contacted)?;
    d.set_item("servers_each_region", e.servers_each_region)?;
    d.set_item("servers_fewest", e.servers_fewest)?;
    let candidates = PyList::empty(py);
    for (s, n) in e.candidates {
        let c = PyDict::new(py);
        c.set_item("subspace", s.0)?;
        c.set_item("regions", n)?;
        candidates.append(c)?;
    }
    d.set_item("candidates", candidates)?;
    // A dynamic space's search: the shapes of document it reads, each as
    // {path: kind}, and how many the space has.
    let shapes = PyList::empty(py);
    for shape in &e.shapes {
        let s = PyDict::new(py);
        for (path, kind) in &shape.properties {
            s.set_item(path, kind.name())?;
        }
        shapes.append(s)?;
    }
    d.set_item("shapes_read", shapes)?;
    d.set_item("shapes_known", e.shapes_known)?;
    // One part per subspace read: its axes, the formulas it reads, its regions.
    let parts = PyList::empty(py);
    for part in &e.parts {
        let p = PyDict::new(py);
        p.set_item("subspace", part.subspace.0)?;
        p.set_item("dimensions", &part.dimensions)?;
        p.set_item("formulas", &part.formulas)?;
        p.set_item("regions", part.regions_contacted)?;
        p.set_item("pointer", part.pointer)?;
        parts.append(p)?;
    }
    d.set_item("parts", parts)?;
    Ok(d)
}

fn config_to_py<'py>(
    py: Python<'py>,
    config: &Configuration,
    cluster: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("cluster", cluster)?;
    d.set_item("epoch", config.epoch.0)?;
    let servers = PyList::empty(py);
    for s in &config.servers {
        let sd = PyDict::new(py);
        sd.set_item("id", s.id.0)?;
        sd.set_item("address", &s.address)?;
        servers.append(sd)?;
    }
    d.set_item("servers", servers)?;
    let spaces = PyList::empty(py);
    for s in &config.spaces {
        spaces.append(placement_to_py(py, s)?)?;
    }
    d.set_item("spaces", spaces)?;
    Ok(d)
}

/// One space of the configuration: where its regions' replicas are.
fn placement_to_py<'py>(py: Python<'py>, s: &SpaceConfig) -> PyResult<Bound<'py, PyDict>> {
    let sd = PyDict::new(py);
    sd.set_item("name", &s.schema.name)?;
    sd.set_item("id", s.id)?;
    sd.set_item(
        "regions",
        s.replicas.iter().map(|r| r.len()).collect::<Vec<_>>(),
    )?;
    sd.set_item("tolerate", s.schema.tolerate)?;
    // replicas[subspace][region]: the region's replica set (server ids, chain order).
    let replicas: Vec<Vec<Vec<u64>>> = s
        .replicas
        .iter()
        .map(|regions| {
            regions
                .iter()
                .map(|set| set.iter().map(|id| id.0).collect())
                .collect()
        })
        .collect();
    sd.set_item("replicas", replicas)?;
    Ok(sd)
}

/// A space's subspaces by id, with their states (and a build's progress, for the one building).
fn subspaces_to_py<'py>(py: Python<'py>, space: &SpaceConfig) -> PyResult<Bound<'py, PyList>> {
    let schema = &space.schema;
    let key_regions = space.replicas.first().map_or(0, Vec::len);
    let list = PyList::empty(py);
    for id in schema.subspace_ids() {
        let sd = PyDict::new(py);
        sd.set_item("id", id.0)?;
        let attributes: Vec<String> = schema
            .subspace(id)
            .dimensions
            .iter()
            .map(|&a| schema.attribute(a).name.clone())
            .collect();
        sd.set_item("attributes", attributes)?;
        sd.set_item("state", state_name(schema.subspace(id).state))?;
        if let Some(b) = space.build.as_ref().filter(|b| b.subspace == id) {
            sd.set_item("backfilled", b.done.len())?;
            sd.set_item("key_regions", key_regions)?;
        }
        list.append(sd)?;
    }
    Ok(list)
}

fn adaptations_to_py(
    py: Python<'_>,
    records: Vec<AdaptationRecord>,
) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for r in records {
        let a = &r.step.adaptation;
        let d = PyDict::new(py);
        d.set_item("epoch", r.epoch)?;
        d.set_item("term", r.step.term)?;
        let (event, why) = match &r.step.event {
            AdaptationEvent::Started => ("started", None),
            AdaptationEvent::Resumed => ("resumed", None),
            AdaptationEvent::Finished => ("finished", None),
            AdaptationEvent::Abandoned { why } => ("abandoned", Some(why.clone())),
        };
        d.set_item("event", event)?;
        d.set_item("why", why)?;
        d.set_item("from", a.from.clone())?;
        d.set_item("to", a.to.clone())?;
        d.set_item("predicted_from_ops_s", a.predicted_from_ops_s)?;
        d.set_item("predicted_to_ops_s", a.predicted_to_ops_s)?;
        d.set_item("observations", a.observations)?;
        d.set_item("period_s", a.period_s)?;
        list.append(d)?;
    }
    Ok(list)
}

/// Each coordinator's status, or why it gave none (as text: one unreachable coordinator is
/// not the call's failure).
fn coordinators_to_py(
    py: Python<'_>,
    statuses: Vec<(String, Result<CoordinatorStatus, Failure>)>,
) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for (address, status) in statuses {
        let sd = PyDict::new(py);
        sd.set_item("address", address)?;
        match status {
            Ok(s) => {
                sd.set_item("id", s.id)?;
                sd.set_item("leader", s.leader)?;
                sd.set_item("term", s.term)?;
                sd.set_item("last_applied", s.last_applied)?;
                sd.set_item("epoch", s.epoch.0)?;
                sd.set_item("members", s.members)?;
            }
            Err(f) => sd.set_item("error", format!("{} ({}): {}", f.symbol, f.code, f.message))?,
        }
        list.append(sd)?;
    }
    Ok(list)
}

// ---- values, records and schemas ----------------------------------------------------------

fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        // Text comes back as str; other bytes as bytes, exactly as they were written.
        Value::String(s) => match s.as_str() {
            Some(text) => PyString::new(py, text).into_any(),
            None => PyBytes::new(py, s.as_bytes()).into_any(),
        },
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => PyFloat::new(py, *f).into_any(),
        Value::List(items) => list_of(py, items, |x| value_to_py(py, x))?,
        Value::Set(items) => PySet::new(
            py,
            items
                .iter()
                .map(|x| value_to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any(),
        Value::Map(entries) => {
            let d = PyDict::new(py);
            for (k, v) in entries {
                d.set_item(value_to_py(py, k)?, value_to_py(py, v)?)?;
            }
            d.into_any()
        }
        Value::Document(doc) => properties_to_py(py, &doc.properties)?.into_any(),
    })
}

/// A dynamic space's document, or a nested one, as a dict.
fn properties_to_py<'py>(
    py: Python<'py>,
    properties: &std::collections::BTreeMap<String, DocValue>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in properties {
        d.set_item(k, doc_value_to_py(py, v)?)?;
    }
    Ok(d)
}

fn doc_value_to_py<'py>(py: Python<'py>, value: &DocValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        DocValue::Null => py.None().into_bound(py),
        DocValue::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        DocValue::Int(i) => i.into_pyobject(py)?.into_any(),
        DocValue::Float(f) => PyFloat::new(py, *f).into_any(),
        DocValue::String(s) => PyString::new(py, s).into_any(),
        DocValue::List(items) => list_of(py, items, |x| doc_value_to_py(py, x))?,
        DocValue::Object(o) => properties_to_py(py, o)?.into_any(),
    })
}

/// A record as a dict of its attributes, with the key under `key_name` first when given.
pub(crate) fn record_to_py<'py>(
    py: Python<'py>,
    record: &Record,
    key_name: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if let Some(name) = key_name {
        d.set_item(name, value_to_py(py, &record.key)?)?;
    }
    // A dynamic space's object reads as its document's properties.
    if let Some(Value::Document(doc)) = record.attributes.get(DOCUMENT_ATTRIBUTE) {
        for (name, v) in &doc.properties {
            d.set_item(name, doc_value_to_py(py, v)?)?;
        }
        return Ok(d);
    }
    for (name, v) in &record.attributes {
        d.set_item(name, value_to_py(py, v)?)?;
    }
    Ok(d)
}

fn schema_to_py<'py>(py: Python<'py>, schema: &SpaceSchema) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &schema.name)?;
    d.set_item("key", &schema.key().name)?;
    d.set_item("key_type", schema.key().ty.to_string())?;
    let attributes: Vec<(String, String)> = schema.attributes[1..]
        .iter()
        .map(|a| (a.name.clone(), a.ty.to_string()))
        .collect();
    d.set_item("attributes", attributes)?;
    let subspaces: Vec<Vec<String>> = schema.subspaces[1..]
        .iter()
        .map(|s| {
            s.dimensions
                .iter()
                .map(|&a| schema.attribute(a).name.clone())
                .collect()
        })
        .collect();
    d.set_item("subspaces", subspaces)?;
    // One per subspace id, the key's (0) first: "serving", "building" or "dropped".
    let states: Vec<&str> = schema
        .subspaces
        .iter()
        .map(|s| state_name(s.state))
        .collect();
    d.set_item("subspace_states", states)?;
    d.set_item("partitions", schema.partitions)?;
    d.set_item("tolerate", schema.tolerate)?;
    d.set_item("adapt", schema.adapt)?;
    // A dynamic space's compression formulas: id → its overlays' text ("title,year*4").
    let formulas = PyDict::new(py);
    for f in &schema.formulas {
        let overlays: Vec<String> = f
            .overlays
            .iter()
            .filter_map(|&id| schema.subspace(id).overlay.as_ref().map(|o| o.to_string()))
            .collect();
        formulas.set_item(&f.id, overlays)?;
    }
    d.set_item("formulas", formulas)?;
    d.set_item("description", schema.to_string())?;
    Ok(d)
}

fn state_name(state: SubspaceState) -> &'static str {
    match state {
        SubspaceState::Serving => "serving",
        SubspaceState::Building => "building",
        SubspaceState::Dropped => "dropped",
    }
}

/// A Python list of `items`, each converted by `convert`.
fn list_of<'py, T, O: IntoPyObject<'py>>(
    py: Python<'py>,
    items: impl IntoIterator<Item = T>,
    convert: impl FnMut(T) -> PyResult<O>,
) -> PyResult<Bound<'py, PyAny>> {
    let items = items
        .into_iter()
        .map(convert)
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.into_any())
}
