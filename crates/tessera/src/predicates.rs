//! Predicates as the command line writes them: `attr=value`, `attr<value`, `attr<=value`,
//! `attr>value`, `attr>=value`, `attr~regex`. Values are read as the attribute's type: text
//! for strings, numbers for ints and floats, JSON for containers (equality only).

use tessera_types::{AttributeType, Predicate, PredicateOp, SpaceSchema, Value};

use crate::json::{from_json, primitive_from_text};

pub fn parse_predicate(schema: &SpaceSchema, text: &str) -> Result<Predicate, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .ok_or_else(|| format!("{text:?} has no operator: write attr=value, attr<value, attr<=value, attr>value, attr>=value or attr~regex"))?;
    let (attr, rest) = text.split_at(split);
    if attr.is_empty() {
        return Err(format!("{text:?} does not start with an attribute name"));
    }
    let (op, operand) = if let Some(v) = rest.strip_prefix("<=") {
        ("<=", v)
    } else if let Some(v) = rest.strip_prefix(">=") {
        (">=", v)
    } else if let Some(v) = rest.strip_prefix('<') {
        ("<", v)
    } else if let Some(v) = rest.strip_prefix('>') {
        (">", v)
    } else if let Some(v) = rest.strip_prefix('=') {
        ("=", v)
    } else if let Some(v) = rest.strip_prefix('~') {
        ("~", v)
    } else {
        return Err(format!(
            "{text:?}: unknown operator; use =, <, <=, >, >= or ~"
        ));
    };
    let idx = schema
        .attribute_index(attr)
        .ok_or_else(|| format!("space {:?} has no attribute {attr:?}", schema.name))?;
    let ty = schema.attribute(idx).ty;
    if op == "~" {
        return Ok(Predicate::new(attr, PredicateOp::Regex(operand.to_owned())));
    }
    let value = match ty {
        AttributeType::Primitive(p) => primitive_from_text(p, operand)?,
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
    let op = match op {
        "=" => PredicateOp::Equals(value),
        "<" => PredicateOp::LessThan(value),
        "<=" => PredicateOp::LessEqual(value),
        ">" => PredicateOp::GreaterThan(value),
        _ => PredicateOp::GreaterEqual(value),
    };
    Ok(Predicate::new(attr, op))
}

/// Parses a key given on the command line as the space's key type.
pub fn parse_key(schema: &SpaceSchema, text: &str) -> Result<Value, String> {
    primitive_from_text(schema.key_type(), text).map_err(|e| format!("key: {e}"))
}

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
}
