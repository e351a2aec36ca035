//! Predicates as the command line writes them: `attr=value`, `attr<value`, `attr<=value`,
//! `attr>value`, `attr>=value`, `attr~regex`. Values are read as the attribute's type: text
//! for strings, numbers for ints and floats, JSON for containers (equality only).

use tessera_types::{AttributeType, Predicate, PredicateOp, SpaceSchema, Value};

use crate::json::{from_json, primitive_from_text, with_article};

/// Every predicate of a command line, as [`parse_predicate`] reads each.
pub fn parse_predicates(schema: &SpaceSchema, texts: &[String]) -> Result<Vec<Predicate>, String> {
    texts.iter().map(|t| parse_predicate(schema, t)).collect()
}

pub fn parse_predicate(schema: &SpaceSchema, text: &str) -> Result<Predicate, String> {
    if schema.is_dynamic() {
        return parse_document_predicate(text);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(|| format!("{text:?} has no operator: write attr=value, attr<value, attr<=value, attr>value, attr>=value or attr~regex"))?;
    let (attr, rest) = text.split_at(split);
    if attr.is_empty() {
        return Err(format!("{text:?} does not start with an attribute name"));
    }
    let (op, operand) = split_operator(rest)
        .ok_or_else(|| format!("{text:?}: unknown operator; use =, <, <=, >, >= or ~"))?;
    let idx = schema
        .attribute_index(attr)
        .ok_or_else(|| format!("space {:?} has no attribute {attr:?}", schema.name))?;
    let ty = schema.attribute(idx).ty;
    if op == "~" {
        return Ok(Predicate::new(attr, PredicateOp::Regex(operand.to_owned())));
    }
    let value = match ty {
        AttributeType::Primitive(p) => primitive_from_text(p, operand).map_err(|e| {
            format!(
                "{text:?}: {e} (attribute {attr:?} is {})",
                with_article(&ty.to_string())
            )
        })?,
        container => {
            if op != "=" {
                return Err(format!(
                    "attribute {attr:?} is a {container}: only = applies"
                ));
            }
            let json = serde_json::from_str(operand)
                .map_err(|e| format!("{operand:?} is not JSON: {e}"))?;
            from_json(container, &json)?
        }
    };
    Ok(Predicate::new(attr, comparison(op, value)))
}

/// A predicate on a dynamic space's documents: `path=value`, `path<value`, `path<=value`,
/// `path>value`, `path>=value`, `path~regex`, `exists(path|path…)`, `missing(path)`. Paths are
/// dotted (`venue.name`). A value that reads as an int or a float is one; `"…"` (JSON) is
/// always a string, and anything else is a string as written.
pub fn parse_document_predicate(text: &str) -> Result<Predicate, String> {
    for (word, structural) in [("exists(", true), ("missing(", false)] {
        if let Some(inner) = text.strip_prefix(word) {
            let inner = inner
                .strip_suffix(')')
                .ok_or_else(|| format!("{text:?}: {word}…) is not closed"))?;
            let mut paths = inner.split('|').map(|p| p.trim().to_owned());
            let first = paths.next().unwrap_or_default();
            let rest: Vec<String> = paths.collect();
            if first.is_empty() {
                return Err(format!("{text:?} names no property"));
            }
            return match (structural, rest.is_empty()) {
                (true, _) => Ok(Predicate::new(first, PredicateOp::Exists { or: rest })),
                (false, true) => Ok(Predicate::new(first, PredicateOp::Missing)),
                (false, false) => Err(format!(
                    "{text:?}: missing() takes one property (several missing: one missing() each)"
                )),
            };
        }
    }
    let split = text
        .find(['=', '<', '>', '~'])
        .ok_or_else(|| format!("{text:?} has no operator: write path=value, path<value, path<=value, path>value, path>=value, path~regex, exists(path) or missing(path)"))?;
    let (path, rest) = text.split_at(split);
    if path.is_empty() {
        return Err(format!("{text:?} does not start with a property path"));
    }
    let (op, operand) = split_operator(rest).expect("split at an operator's first character");
    if op == "~" {
        return Ok(Predicate::new(path, PredicateOp::Regex(operand.to_owned())));
    }
    let value = if let Ok(i) = operand.trim().parse::<i64>() {
        Value::Int(i)
    } else if let Ok(f) = operand.trim().parse::<f64>().map_err(|_| ()).and_then(|f| {
        if f.is_finite() {
            Ok(f)
        } else {
            Err(())
        }
    }) {
        Value::Float(f)
    } else if operand.starts_with('"') {
        Value::String(
            serde_json::from_str(operand)
                .map_err(|e| format!("{operand} is not a JSON string: {e}"))?,
        )
    } else {
        Value::from(operand.to_owned())
    };
    Ok(Predicate::new(path, comparison(op, value)))
}

/// The comparison an operator other than `~` makes with `value`.
fn comparison(op: &str, value: Value) -> PredicateOp {
    match op {
        "=" => PredicateOp::Equals(value),
        "<" => PredicateOp::LessThan(value),
        "<=" => PredicateOp::LessEqual(value),
        ">" => PredicateOp::GreaterThan(value),
        _ => PredicateOp::GreaterEqual(value),
    }
}

/// The operator `rest` starts with (`<=`, `>=`, `<`, `>`, `=` or `~`) and what follows it.
fn split_operator(rest: &str) -> Option<(&'static str, &str)> {
    ["<=", ">=", "<", ">", "=", "~"]
        .into_iter()
        .find_map(|op| rest.strip_prefix(op).map(|operand| (op, operand)))
}

/// Parses a key given on the command line as the space's key type.
pub use crate::json::parse_key;

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::parse_space;

    #[test]
    fn every_operator() {
        let s =
            parse_space("space t key k attributes int i, string s, float f, list(int) l").unwrap();
        let p = |t: &str| parse_predicate(&s, t).unwrap().op;
        assert_eq!(p("i=3"), PredicateOp::Equals(Value::Int(3)));
        assert_eq!(p("i<=-3"), PredicateOp::LessEqual(Value::Int(-3)));
        assert_eq!(p("i>=3"), PredicateOp::GreaterEqual(Value::Int(3)));
        assert_eq!(p("f<2.5"), PredicateOp::LessThan(Value::Float(2.5)));
        assert_eq!(p("s>a=b"), PredicateOp::GreaterThan(Value::from("a=b")));
        assert_eq!(
            p("s=with space"),
            PredicateOp::Equals(Value::from("with space"))
        );
        assert_eq!(p("s~^a.*"), PredicateOp::Regex("^a.*".into()));
        assert_eq!(
            p("l=[1,2]"),
            PredicateOp::Equals(Value::List(vec![1i64.into(), 2i64.into()]))
        );
        assert!(parse_predicate(&s, "i=x")
            .unwrap_err()
            .contains("not an int"));
        assert!(parse_predicate(&s, "zz=1")
            .unwrap_err()
            .contains("no attribute"));
        assert!(parse_predicate(&s, "i")
            .unwrap_err()
            .contains("no operator"));
        assert!(parse_predicate(&s, "i!3")
            .unwrap_err()
            .contains("unknown operator"));
        assert!(parse_predicate(&s, "l<3")
            .unwrap_err()
            .contains("only = applies"));
    }

    #[test]
    fn document_predicates() {
        let s = parse_space("space p dynamic key id").unwrap();
        let p = |t: &str| parse_predicate(&s, t).unwrap();
        assert_eq!(
            p("year>=2010"),
            Predicate::new("year", PredicateOp::GreaterEqual(2010.into()))
        );
        assert_eq!(
            p("venue.name=SOSP"),
            Predicate::equals("venue.name", "SOSP")
        );
        assert_eq!(p("code=\"007\""), Predicate::equals("code", "007"));
        assert_eq!(
            p("score<2.5"),
            Predicate::new("score", PredicateOp::LessThan(2.5.into()))
        );
        assert_eq!(
            p("title~^Dyn"),
            Predicate::new("title", PredicateOp::Regex("^Dyn".into()))
        );
        assert_eq!(
            p("exists(author|editor)"),
            Predicate::new(
                "author",
                PredicateOp::Exists {
                    or: vec!["editor".into()]
                }
            )
        );
        assert_eq!(
            p("missing(doi)"),
            Predicate::new("doi", PredicateOp::Missing)
        );
        assert!(parse_predicate(&s, "missing(a|b)").is_err());
        assert!(parse_predicate(&s, "exists(a").is_err());
        assert!(parse_predicate(&s, "year").is_err());
        assert!(parse_predicate(&s, "=3").is_err());
    }
}
