//! The model of one key: the write semantics written again, small and independent of the
//! implementation, and the `KeyWrite` each model operation is sent as.

use std::collections::BTreeMap;

use tessera_protocol::{Status, WriteMode};
use tessera_replication::KeyWrite;
use tessera_types::{
    parse_space, CheckedFuncall, CheckedPredicate, DocValue, Document, Funcall, FuncallOp, NumOp,
    Object, Predicate, PredicateOp, SpaceSchema, Value, FORMULA_ATTRIBUTE,
};

use crate::{formula_of, SPACE};

/// An operation as the test means it; [`key_write`] turns it into the implementation's form.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// put: a, b and c, creating the object if absent.
    Upsert {
        a: i64,
        b: i64,
        c: String,
    },
    /// put_if_not_exist of a.
    Create {
        a: i64,
    },
    /// cond_put: b, if the object exists and its a is `if_a`.
    SetBIfA {
        if_a: i64,
        b: i64,
    },
    /// atomic_add b 1, if the object exists.
    AddB,
    Del,
    /// cond_del: if c is "c1".
    DelIfC1,
    Get,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    Done,
    Failed(Status),
    Read(Option<Object>),
}

/// The object (k, a, b, c) in schema order.
pub(crate) fn object(key: &Value, a: i64, b: i64, c: &str) -> Object {
    Object {
        values: vec![
            key.clone(),
            Value::Int(a),
            Value::Int(b),
            Value::from(c.to_owned()),
        ],
    }
}

fn fields(o: &Object) -> (i64, i64, String) {
    match &o.values[..] {
        [_, Value::Int(a), Value::Int(b), Value::String(c)] => {
            (*a, *b, c.as_str().expect("text").to_owned())
        }
        // A dynamic space's document: `b` absent is 0, `c` absent is "".
        [_, Value::Document(d), Value::String(_formula)] => {
            let int = |p: &str| match d.get(p) {
                Some(DocValue::Int(i)) => Some(*i),
                None => Some(0),
                _ => None,
            };
            let c = match d.get("c") {
                Some(DocValue::String(c)) => c.clone(),
                None => String::new(),
                other => panic!("not a document's c: {other:?}"),
            };
            match (d.get("a"), int("b")) {
                (Some(DocValue::Int(a)), Some(b)) => (*a, b, c),
                _ => panic!("not an {{a, b, c}} document: {d}"),
            }
        }
        other => panic!("not a (k, a, b, c) object: {other:?}"),
    }
}

/// An object as the model holds it (a typed space's object is one already).
pub(crate) fn to_model(o: Object) -> Object {
    let (a, b, c) = fields(&o);
    object(o.key(), a, b, &c)
}

/// The merge patch that sets what is given of a, b and c in a document: 0 and "" are absent.
fn patch(a: Option<i64>, b: Option<i64>, c: Option<&str>) -> Funcall {
    let mut properties = BTreeMap::new();
    if let Some(a) = a {
        properties.insert("a".to_owned(), DocValue::Int(a));
    }
    if let Some(b) = b {
        let v = if b == 0 {
            DocValue::Null
        } else {
            DocValue::Int(b)
        };
        properties.insert("b".to_owned(), v);
    }
    if let Some(c) = c {
        let v = if c.is_empty() {
            DocValue::Null
        } else {
            DocValue::String(c.to_owned())
        };
        properties.insert("c".to_owned(), v);
    }
    Funcall::merge(Document::new(properties))
}

/// What `op` does to a key whose object is `state`: the new state and the client's outcome.
pub(crate) fn model_apply(
    key: &Value,
    state: &Option<Object>,
    op: &Op,
) -> (Option<Object>, Outcome) {
    let unchanged = |status| (state.clone(), Outcome::Failed(status));
    let current = state.as_ref().map(fields);
    match (op, current) {
        (Op::Get, _) => (state.clone(), Outcome::Read(state.clone())),
        (Op::Upsert { a, b, c }, _) => (Some(object(key, *a, *b, c)), Outcome::Done),
        (Op::Create { .. }, Some(_)) => unchanged(Status::CmpFail),
        (Op::Create { a }, None) => (Some(object(key, *a, 0, "")), Outcome::Done),
        (Op::SetBIfA { .. } | Op::AddB | Op::Del | Op::DelIfC1, None) => {
            unchanged(Status::NotFound)
        }
        (Op::SetBIfA { if_a, b }, Some((a, _, c))) if a == *if_a => {
            (Some(object(key, a, *b, &c)), Outcome::Done)
        }
        (Op::SetBIfA { .. }, Some(_)) => unchanged(Status::CmpFail),
        (Op::AddB, Some((a, b, c))) => (Some(object(key, a, b + 1, &c)), Outcome::Done),
        (Op::Del, Some(_)) => (None, Outcome::Done),
        (Op::DelIfC1, Some((_, _, c))) if c == "c1" => (None, Outcome::Done),
        (Op::DelIfC1, Some(_)) => unchanged(Status::CmpFail),
    }
}

pub(crate) fn key_write(schema: &SpaceSchema, key: &Value, op: &Op) -> KeyWrite {
    let f = |f: Funcall| CheckedFuncall::check(schema, &f).expect("valid funcall");
    let p = |p: Predicate| CheckedPredicate::check(schema, &p).expect("valid predicate");
    let put = |mode, conditions, funcalls| KeyWrite::Put {
        key: key.clone(),
        mode,
        conditions,
        funcalls,
    };
    if schema.is_dynamic() {
        return match op {
            Op::Upsert { a, b, c } => put(
                WriteMode::Upsert,
                vec![],
                vec![
                    f(patch(Some(*a), Some(*b), Some(c))),
                    f(Funcall::set(FORMULA_ATTRIBUTE, formula_of(*a))),
                ],
            ),
            // b absent is 0 and c absent is "": a new document of `a` alone.
            Op::Create { a } => put(
                WriteMode::CreateOnly,
                vec![],
                vec![
                    f(patch(Some(*a), None, None)),
                    f(Funcall::set(FORMULA_ATTRIBUTE, formula_of(*a))),
                ],
            ),
            Op::SetBIfA { if_a, b } => put(
                WriteMode::UpdateOnly,
                vec![p(Predicate::new(
                    "a",
                    PredicateOp::Equals(Value::Int(*if_a)),
                ))],
                vec![f(patch(None, Some(*b), None))],
            ),
            Op::AddB => unreachable!("a dynamic space has no atomic operations"),
            Op::Del | Op::DelIfC1 | Op::Get => {
                let typed = parse_space(SPACE).expect("valid space");
                match key_write(&typed, key, op) {
                    KeyWrite::Del { key, conditions } => KeyWrite::Del {
                        key,
                        conditions: conditions
                            .iter()
                            .map(|_| p(Predicate::new("c", PredicateOp::Equals(Value::from("c1")))))
                            .collect(),
                    },
                    other => unreachable!("{other:?}"),
                }
            }
        };
    }
    match op {
        Op::Upsert { a, b, c } => put(
            WriteMode::Upsert,
            vec![],
            vec![
                f(Funcall::set("a", *a)),
                f(Funcall::set("b", *b)),
                f(Funcall::set("c", c.as_str())),
            ],
        ),
        Op::Create { a } => put(
            WriteMode::CreateOnly,
            vec![],
            vec![f(Funcall::set("a", *a))],
        ),
        Op::SetBIfA { if_a, b } => put(
            WriteMode::UpdateOnly,
            vec![p(Predicate::new(
                "a",
                PredicateOp::Equals(Value::Int(*if_a)),
            ))],
            vec![f(Funcall::set("b", *b))],
        ),
        Op::AddB => put(
            WriteMode::UpdateOnly,
            vec![],
            vec![f(Funcall::new("b", FuncallOp::Num(NumOp::Add), 1))],
        ),
        Op::Del => KeyWrite::Del {
            key: key.clone(),
            conditions: vec![],
        },
        Op::DelIfC1 => KeyWrite::Del {
            key: key.clone(),
            conditions: vec![p(Predicate::new(
                "c",
                PredicateOp::Equals(Value::from("c1")),
            ))],
        },
        Op::Get => unreachable!("reads are not writes"),
    }
}

#[test]
fn the_model_follows_the_documented_semantics() {
    let key = Value::from("k");
    let (created, outcome) = model_apply(&key, &None, &Op::Create { a: 1 });
    assert_eq!(
        (created.clone(), outcome),
        (Some(object(&key, 1, 0, "")), Outcome::Done)
    );
    assert_eq!(
        model_apply(&key, &created, &Op::Create { a: 2 }).1,
        Outcome::Failed(Status::CmpFail)
    );
    assert_eq!(
        model_apply(&key, &None, &Op::AddB).1,
        Outcome::Failed(Status::NotFound)
    );
    assert_eq!(
        model_apply(&key, &created, &Op::AddB).0,
        Some(object(&key, 1, 1, ""))
    );
    assert_eq!(
        model_apply(&key, &created, &Op::SetBIfA { if_a: 2, b: 9 }).1,
        Outcome::Failed(Status::CmpFail)
    );
    assert_eq!(
        model_apply(&key, &created, &Op::SetBIfA { if_a: 1, b: 9 }).0,
        Some(object(&key, 1, 9, ""))
    );
    assert_eq!(
        model_apply(&key, &created, &Op::DelIfC1).1,
        Outcome::Failed(Status::CmpFail)
    );
    assert_eq!(model_apply(&key, &created, &Op::Del), (None, Outcome::Done));
}
