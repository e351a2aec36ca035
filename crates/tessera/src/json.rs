//! Values to and from JSON, directed by the attribute's type (JSON has no sets, no int/float
//! distinction worth trusting, and only string object keys).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde_json::{Map, Number, Value as Json};
use std::collections::BTreeMap;

use tessera_types::{
    AttributeType, ByteString, DocValue, Document, PrimitiveType, SpaceSchema, Value,
    DOCUMENT_ATTRIBUTE,
};

/// A value as JSON: sets become arrays, map keys become strings, non-finite floats become
/// the strings "inf", "-inf", and a string that is not UTF-8 text becomes
/// `{"base64": "..."}` (its bytes in standard base64), which [`from_json`] reads back.
pub fn to_json(value: &Value) -> Json {
    match value {
        Value::String(s) => string_to_json(s),
        Value::Int(i) => Json::Number((*i).into()),
        Value::Float(f) => Number::from_f64(*f).map(Json::Number).unwrap_or_else(|| {
            Json::String(if *f > 0.0 {
                "inf".into()
            } else {
                "-inf".into()
            })
        }),
        Value::List(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Set(items) => Json::Array(items.iter().map(to_json).collect()),
        // JSON object keys are text: a map with a string key of other bytes is written as
        // an array of [key, value] pairs instead, each key in to_json's form.
        Value::Map(entries) if entries.keys().any(is_bytes) => Json::Array(
            entries
                .iter()
                .map(|(k, v)| Json::Array(vec![to_json(k), to_json(v)]))
                .collect(),
        ),
        Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Value::String(s) => s.as_str().expect("text keys here").to_owned(),
                        other => other.to_string(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        Value::Document(d) => Json::Object(properties_to_json(&d.properties)),
    }
}

/// Whether `value` is a string of bytes that are not UTF-8 text.
fn is_bytes(value: &Value) -> bool {
    matches!(value, Value::String(s) if s.as_str().is_none())
}

/// The key of the JSON object standing for a string of bytes that are not UTF-8.
const BYTES_KEY: &str = "base64";

fn string_to_json(s: &ByteString) -> Json {
    match s.as_str() {
        Some(text) => Json::String(text.to_owned()),
        None => {
            let mut bytes = Map::new();
            bytes.insert(BYTES_KEY.into(), Json::String(BASE64.encode(s.as_bytes())));
            Json::Object(bytes)
        }
    }
}

/// A string from JSON: text, or `{"base64": "..."}` for any bytes.
fn string_from_json(json: &Json) -> Option<Result<Value, String>> {
    match json {
        Json::String(s) => Some(Ok(Value::from(s.as_str()))),
        Json::Object(o) if o.len() == 1 => {
            let Json::String(encoded) = o.get(BYTES_KEY)? else {
                return Some(Err(format!("{BYTES_KEY:?} takes a string of base64")));
            };
            Some(
                BASE64
                    .decode(encoded)
                    .map(Value::from)
                    .map_err(|e| format!("{BYTES_KEY:?}: {e}")),
            )
        }
        _ => None,
    }
}

fn properties_to_json(properties: &BTreeMap<String, DocValue>) -> Map<String, Json> {
    properties
        .iter()
        .map(|(k, v)| (k.clone(), doc_value_to_json(v)))
        .collect()
}

fn doc_value_to_json(value: &DocValue) -> Json {
    match value {
        DocValue::Null => Json::Null,
        DocValue::Bool(b) => Json::Bool(*b),
        DocValue::Int(i) => Json::Number((*i).into()),
        DocValue::Float(f) => to_json(&Value::Float(*f)),
        DocValue::String(s) => Json::String(s.clone()),
        DocValue::List(items) => Json::Array(items.iter().map(doc_value_to_json).collect()),
        DocValue::Object(o) => Json::Object(properties_to_json(o)),
    }
}

/// A JSON object as a document (for a dynamic space's put: `null` removes a property).
pub fn document_from_json(text: &str) -> Result<Document, String> {
    let json: Json = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    document_from_json_value(&json)
}

/// [`document_from_json`] of JSON already parsed.
fn document_from_json_value(json: &Json) -> Result<Document, String> {
    match doc_value_from_json(json)? {
        DocValue::Object(properties) => Ok(Document::new(properties)),
        _ => Err("expected a JSON object of properties".into()),
    }
}

fn doc_value_from_json(json: &Json) -> Result<DocValue, String> {
    Ok(match json {
        Json::Null => DocValue::Null,
        Json::Bool(b) => DocValue::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => DocValue::Int(i),
            (None, Some(f)) if !n.is_u64() => DocValue::Float(f),
            _ => return Err(format!("{n} is out of range: integers are 64-bit signed")),
        },
        Json::String(s) => DocValue::String(s.clone()),
        Json::Array(items) => DocValue::List(
            items
                .iter()
                .map(doc_value_from_json)
                .collect::<Result<_, _>>()?,
        ),
        Json::Object(entries) => DocValue::Object(
            entries
                .iter()
                .map(|(k, v)| Ok((k.clone(), doc_value_from_json(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// An object as one JSON object: the key under its attribute name, then every attribute (a
/// dynamic space's document: its properties).
pub fn object_to_json(
    schema: &SpaceSchema,
    key: &Value,
    attributes: &std::collections::BTreeMap<String, Value>,
) -> Json {
    let mut out = Map::new();
    out.insert(schema.key().name.clone(), to_json(key));
    if let Some(Value::Document(d)) = attributes.get(DOCUMENT_ATTRIBUTE) {
        out.extend(properties_to_json(&d.properties));
        return Json::Object(out);
    }
    for a in &schema.attributes[1..] {
        if let Some(v) = attributes.get(&a.name) {
            out.insert(a.name.clone(), to_json(v));
        }
    }
    Json::Object(out)
}

fn primitive_from_json(ty: PrimitiveType, json: &Json) -> Result<Value, String> {
    match (ty, json) {
        (PrimitiveType::String, j) if string_from_json(j).is_some() => {
            string_from_json(j).expect("checked")
        }
        (PrimitiveType::Int, Json::Number(n)) => n
            .as_i64()
            .map(Value::Int)
            .ok_or_else(|| format!("{n} is not an int (64-bit signed integer)")),
        (PrimitiveType::Float, Json::Number(n)) => n
            .as_f64()
            .map(Value::Float)
            .ok_or_else(|| format!("{n} is not a float")),
        (_, other) => Err(format!(
            "expected {}, got {other}",
            with_article(&ty.to_string())
        )),
    }
}

/// "an int", "a set(string)".
pub fn with_article(noun: &str) -> String {
    let article = if noun.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {noun}")
}

/// Parses text as a primitive of type `ty` (used for keys, map keys and predicate operands).
pub fn primitive_from_text(ty: PrimitiveType, text: &str) -> Result<Value, String> {
    match ty {
        PrimitiveType::String => Ok(Value::from(text.to_owned())),
        PrimitiveType::Int => text
            .trim()
            .parse::<i64>()
            .map(Value::Int)
            .map_err(|_| format!("{text:?} is not an int")),
        PrimitiveType::Float => match text.trim().parse::<f64>() {
            Ok(f) if !f.is_nan() => Ok(Value::Float(f)),
            _ => Err(format!("{text:?} is not a float")),
        },
    }
}

/// Parses a key given on the command line as the space's key type.
pub fn parse_key(schema: &SpaceSchema, text: &str) -> Result<Value, String> {
    primitive_from_text(schema.key_type(), text).map_err(|e| format!("key: {e}"))
}

/// Converts JSON to a value of type `ty`.
pub fn from_json(ty: AttributeType, json: &Json) -> Result<Value, String> {
    match (ty, json) {
        (AttributeType::Primitive(p), j) => primitive_from_json(p, j),
        (AttributeType::List(p), Json::Array(items)) => Ok(Value::List(
            items
                .iter()
                .map(|j| primitive_from_json(p, j))
                .collect::<Result<_, _>>()?,
        )),
        (AttributeType::Set(p), Json::Array(items)) => Ok(Value::Set(
            items
                .iter()
                .map(|j| primitive_from_json(p, j))
                .collect::<Result<_, _>>()?,
        )),
        (AttributeType::Map(k, v), Json::Object(entries)) => Ok(Value::Map(
            entries
                .iter()
                .map(|(key, val)| Ok((primitive_from_text(k, key)?, primitive_from_json(v, val)?)))
                .collect::<Result<_, String>>()?,
        )),
        // [[key, value], ...]: how a map with keys that are not text is written.
        (AttributeType::Map(k, v), Json::Array(pairs)) => Ok(Value::Map(
            pairs
                .iter()
                .map(|pair| match pair.as_array().map(Vec::as_slice) {
                    Some([key, val]) => {
                        Ok((primitive_from_json(k, key)?, primitive_from_json(v, val)?))
                    }
                    _ => Err(format!(
                        "a map as an array holds [key, value] pairs, not {pair}"
                    )),
                })
                .collect::<Result<_, String>>()?,
        )),
        (ty, other) => Err(format!(
            "expected {}, got {other}",
            with_article(&ty.to_string())
        )),
    }
}

/// Parses a put's JSON object into (attribute, value) pairs, typed by the schema.
/// One line of `put-many`: a JSON object holding the key attribute among the others. Returns
/// the key as given (for the report), the key, and the put's funcalls: the attributes, or in
/// a dynamic space the document's merge (placed by `formula` when given).
pub fn put_from_json_line(
    schema: &SpaceSchema,
    line: &str,
    formula: Option<&str>,
) -> Result<(Json, tessera_types::Value, Vec<tessera_types::Funcall>), String> {
    let json: Json = serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let Json::Object(mut entries) = json else {
        return Err("expected a JSON object".into());
    };
    let key_name = &schema.key().name;
    let key_json = entries
        .remove(key_name)
        .ok_or_else(|| format!("no key attribute {key_name:?}"))?;
    let key_text = match &key_json {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    };
    let key = parse_key(schema, &key_text)?;
    let funcalls = if schema.is_dynamic() {
        let document = document_from_json_value(&Json::Object(entries))?;
        let mut funcalls = vec![tessera_types::Funcall::merge(document)];
        if let Some(f) = formula {
            funcalls.push(tessera_types::Funcall::set(
                tessera_types::FORMULA_ATTRIBUTE,
                f,
            ));
        }
        funcalls
    } else {
        attributes_from_entries(schema, &entries)?
            .into_iter()
            .map(|(a, v)| tessera_types::Funcall::set(a, v))
            .collect()
    };
    Ok((key_json, key, funcalls))
}

pub fn attributes_from_json(
    schema: &SpaceSchema,
    text: &str,
) -> Result<Vec<(String, Value)>, String> {
    let json: Json = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let Json::Object(entries) = json else {
        return Err("expected a JSON object of attribute names to values".into());
    };
    attributes_from_entries(schema, &entries)
}

/// [`attributes_from_json`] of a JSON object already parsed.
fn attributes_from_entries(
    schema: &SpaceSchema,
    entries: &serde_json::Map<String, Json>,
) -> Result<Vec<(String, Value)>, String> {
    entries
        .iter()
        .map(|(name, j)| {
            let idx = schema
                .attribute_index(name)
                .ok_or_else(|| format!("space {:?} has no attribute {name:?}", schema.name))?;
            if idx.get() == 0 {
                return Err(format!("{name:?} is the key: give it as the KEY argument"));
            }
            let value = from_json(schema.attribute(idx).ty, j)
                .map_err(|e| format!("attribute {name:?}: {e}"))?;
            Ok((name.clone(), value))
        })
        .collect()
}

/// A trace as workload lines, most frequent first: `{"p": …, "get": true}`,
/// `{"p": …, "search": {ATTR: "eq" | "range" | "other"}, "matches": …}`,
/// `{"p": …, "update": [ATTR…]}`, `{"p": …, "del": true}`. `p` is the share of all requests
/// (rounded to 6 places), `matches` the objects a search matched on average.
pub fn workload_lines(trace: &tessera_client::SpaceTrace) -> Vec<Json> {
    use tessera_client::{Constraint, RequestShape};
    let total = trace.requests();
    if total <= 0.0 {
        return Vec::new();
    }
    let round = |x: f64| (x * 1e6).round() / 1e6;
    let mut counts: Vec<&tessera_client::ShapeCount> =
        trace.shapes.iter().filter(|c| c.requests > 0.0).collect();
    counts.sort_by(|a, b| {
        b.requests
            .total_cmp(&a.requests)
            .then_with(|| a.shape.cmp(&b.shape))
    });
    counts
        .into_iter()
        .map(|c| {
            let p = round(c.requests / total);
            match &c.shape {
                RequestShape::Get => serde_json::json!({"p": p, "get": true}),
                RequestShape::Del => serde_json::json!({"p": p, "del": true}),
                RequestShape::Write(attributes) => serde_json::json!({"p": p, "update": attributes}),
                RequestShape::Search(constraints) => {
                    let search: Map<String, Json> = constraints
                        .iter()
                        .map(|(name, c)| {
                            let kind = match c {
                                Constraint::Eq => "eq",
                                Constraint::Range => "range",
                                Constraint::Other => "other",
                            };
                            (name.clone(), Json::String(kind.into()))
                        })
                        .collect();
                    serde_json::json!({"p": p, "search": search, "matches": round(c.matched / c.requests)})
                }
            }
        })
        .collect()
}

/// The quantiles `tessera stats` prints (`p1` to `p99`); the console shows p1, p50 and p99.
pub const STATISTICS_QUANTILES: [f64; 9] = [0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99];

/// One attribute's statistics as `tessera stats` prints them and the console shows them:
/// count, distinct, min, max and, for ints and floats, quantiles.
pub fn attribute_statistics(
    schema: &SpaceSchema,
    a: tessera_types::AttrIndex,
    s: &tessera_geometry::Sketch,
) -> Json {
    let attribute = schema.attribute(a);
    let numeric = matches!(
        attribute.ty,
        AttributeType::Primitive(PrimitiveType::Int | PrimitiveType::Float)
    );
    let mut line = serde_json::json!({
        "attribute": attribute.name,
        "type": attribute.ty.to_string(),
    });
    add_sketch(&mut line, s, numeric);
    line
}

/// A sketch's count, distinct, min and max into `line`, and its quantiles when `numeric` and
/// it holds numbers (a document path's statistics are this, after `{"path": ...}`).
pub fn add_sketch(line: &mut Json, s: &tessera_geometry::Sketch, numeric: bool) {
    line["count"] = s.count().into();
    line["distinct"] = s.distinct().into();
    line["min"] = s.min().map_or(Json::Null, to_json);
    line["max"] = s.max().map_or(Json::Null, to_json);
    if numeric && s.quantile(0.5).is_some() {
        let quantiles: Map<String, Json> = STATISTICS_QUANTILES
            .iter()
            .map(|&q| {
                (
                    format!("p{}", (q * 100.0).round()),
                    serde_json::json!(s.quantile(q)),
                )
            })
            .collect();
        line["quantiles"] = quantiles.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    /// Strings that are not text travel as `{"base64": ...}` and come back byte for byte;
    /// text stays a JSON string; a bad encoding is refused with the reason.
    #[test]
    fn bytes_that_are_not_text_round_trip_as_base64() {
        let ty = AttributeType::Primitive(PrimitiveType::String);
        let raw = Value::from(vec![0xff, 0x00, b'a']);
        let json = to_json(&raw);
        assert_eq!(json, serde_json::json!({"base64": "/wBh"}));
        assert_eq!(from_json(ty, &json).unwrap(), raw);
        assert_eq!(to_json(&Value::from("é")), serde_json::json!("é"));
        let set = Value::Set([raw.clone(), Value::from("t")].into_iter().collect());
        let set_ty = AttributeType::Set(PrimitiveType::String);
        assert_eq!(from_json(set_ty, &to_json(&set)).unwrap(), set);
        assert!(from_json(ty, &serde_json::json!({"base64": "***"}))
            .unwrap_err()
            .contains("base64"));
        assert!(from_json(ty, &serde_json::json!({"other": "AA=="})).is_err());
        // A map whose keys are not all text is an array of pairs, and reads back.
        let map_ty = AttributeType::Map(PrimitiveType::String, PrimitiveType::Int);
        let map = Value::Map(
            [
                (raw.clone(), Value::Int(1)),
                (Value::from("t"), Value::Int(2)),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(
            to_json(&map),
            serde_json::json!([["t", 2], [{"base64": "/wBh"}, 1]])
        );
        assert_eq!(from_json(map_ty, &to_json(&map)).unwrap(), map);
        assert!(from_json(map_ty, &serde_json::json!([["t"]])).is_err());
        let text = Value::Map([(Value::from("t"), Value::Int(2))].into_iter().collect());
        assert_eq!(to_json(&text), serde_json::json!({"t": 2}));
    }

    #[test]
    fn round_trip_through_json() {
        let schema = parse_space("space t key k attributes int i, float f, set(string) s, map(int, string) m, list(float) l").unwrap();
        let attrs: std::collections::BTreeMap<String, Value> = attributes_from_json(
            &schema,
            r#"{"i": -3, "f": 2, "s": ["b", "a", "b"], "m": {"7": "x"}, "l": [1.5]}"#,
        )
        .unwrap()
        .into_iter()
        .collect();
        assert_eq!(attrs["f"], Value::Float(2.0));
        assert_eq!(attrs["i"], Value::Int(-3));
        assert_eq!(to_json(&attrs["m"]), serde_json::json!({"7": "x"}));
        assert_eq!(to_json(&attrs["l"]), serde_json::json!([1.5]));
        assert_eq!(to_json(&attrs["s"]), serde_json::json!(["a", "b"]));
    }

    #[test]
    fn mistakes_are_explained() {
        let schema = parse_space("space t key k attributes int i").unwrap();
        assert!(attributes_from_json(&schema, r#"{"i": "x"}"#)
            .unwrap_err()
            .contains("expected an int"));
        assert!(attributes_from_json(&schema, r#"{"j": 1}"#)
            .unwrap_err()
            .contains("no attribute"));
        assert!(attributes_from_json(&schema, r#"{"i": 1.5}"#)
            .unwrap_err()
            .contains("not an int"));
        assert!(attributes_from_json(&schema, r#"[1]"#)
            .unwrap_err()
            .contains("JSON object"));
        assert!(attributes_from_json(&schema, r#"{"k": "x"}"#)
            .unwrap_err()
            .contains("is the key"));
        assert!(attributes_from_json(&schema, r#"{"i": 99999999999999999999}"#).is_err());
    }

    #[test]
    fn a_trace_becomes_workload_lines_most_frequent_first() {
        use tessera_client::{Constraint, RequestShape, ShapeCount, SpaceTrace};
        let trace = SpaceTrace {
            space: "hotels".into(),
            minutes: 5,
            servers: 2,
            work: vec![],
            shapes: vec![
                ShapeCount {
                    shape: RequestShape::Get,
                    requests: 10.0,
                    matched: 9.0,
                },
                ShapeCount {
                    shape: RequestShape::Search(vec![
                        ("city".into(), Constraint::Eq),
                        ("price".into(), Constraint::Range),
                    ]),
                    requests: 30.0,
                    matched: 60.0,
                },
                ShapeCount {
                    shape: RequestShape::Write(vec!["price".into()]),
                    requests: 20.0,
                    matched: 0.0,
                },
            ],
        };
        let lines: Vec<String> = super::workload_lines(&trace)
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(
            lines,
            [
                r#"{"p":0.5,"search":{"city":"eq","price":"range"},"matches":2.0}"#,
                r#"{"p":0.333333,"update":["price"]}"#,
                r#"{"p":0.166667,"get":true}"#,
            ]
        );
        let empty = SpaceTrace {
            shapes: vec![],
            ..trace
        };
        assert!(super::workload_lines(&empty).is_empty());
    }

    /// What `tessera stats` prints of an attribute (and the console shows): exact count,
    /// distinct, min and max; quantiles for ints and floats only; nulls for no values.
    #[test]
    fn statistics_of_an_attribute_as_json() {
        let schema =
            parse_space("space s key id attributes int price, string city subspace price").unwrap();
        let (price, city) = (tessera_types::AttrIndex(1), tessera_types::AttrIndex(2));
        let mut prices = tessera_geometry::Sketch::new();
        let mut cities = tessera_geometry::Sketch::new();
        for i in 1..=100 {
            prices.insert(&Value::Int(i * i));
            cities.insert(&Value::from(if i % 2 == 0 { "Oslo" } else { "Rome" }));
        }
        let line = attribute_statistics(&schema, price, &prices);
        assert_eq!(line["attribute"], "price");
        assert_eq!(
            (&line["type"], &line["count"]),
            (&"int".into(), &100.into())
        );
        assert_eq!(line["distinct"], 100);
        assert_eq!((&line["min"], &line["max"]), (&1.into(), &10_000.into()));
        let quantiles = line["quantiles"].as_object().expect("an int has quantiles");
        assert_eq!(quantiles.len(), STATISTICS_QUANTILES.len());
        let p50 = quantiles["p50"].as_f64().unwrap();
        assert!((2_000.0..3_000.0).contains(&p50), "{p50}");
        let line = attribute_statistics(&schema, city, &cities);
        assert_eq!(
            (&line["distinct"], &line["min"]),
            (&2.into(), &"Oslo".into())
        );
        assert!(line.get("quantiles").is_none(), "{line}");
        let empty = attribute_statistics(&schema, price, &tessera_geometry::Sketch::new());
        assert_eq!((&empty["count"], &empty["min"]), (&0.into(), &Json::Null));
        assert!(empty.get("quantiles").is_none(), "{empty}");
    }
}
