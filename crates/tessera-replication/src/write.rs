//! What a key write does to the key's latest object: the point leader's evaluation of a
//! request (docs/design.md §5.1). Pure; shared by the standalone server's write loop and the chain.

use tessera_protocol::{ErrorReply, Status, WriteMode};
use tessera_types::constants::OBJECT_BYTES_MAX;
use tessera_types::funcall::apply_all;
use tessera_types::predicate::matches_all;
use tessera_types::{CheckedFuncall, CheckedPredicate, Object, SpaceSchema, Value};

/// A write to one key, validated against the space's schema by whoever received it.
#[derive(Clone, Debug)]
pub enum KeyWrite {
    /// put, put_if_not_exist, cond_put and every atomic operation.
    Put {
        key: Value,
        mode: WriteMode,
        conditions: Vec<CheckedPredicate>,
        funcalls: Vec<CheckedFuncall>,
    },
    /// del and cond_del.
    Del {
        key: Value,
        conditions: Vec<CheckedPredicate>,
    },
    /// The key's object written again, unchanged (`NotFound` when it has none): how a point
    /// leader backfills a subspace being built (`tessera_protocol::Build`). No client sends it.
    Rewrite { key: Value },
}

impl KeyWrite {
    pub fn key(&self) -> &Value {
        match self {
            KeyWrite::Put { key, .. } | KeyWrite::Del { key, .. } | KeyWrite::Rewrite { key } => {
                key
            }
        }
    }
}

/// The object `write` leaves when the key's latest object is `current`: `Ok(Some(new))` for
/// a put, `Ok(None)` for a delete, or the error the client gets (nothing changes then).
pub fn evaluate(
    schema: &SpaceSchema,
    current: Option<&Object>,
    write: &KeyWrite,
) -> Result<Option<Object>, ErrorReply> {
    match write {
        KeyWrite::Put {
            key,
            mode,
            conditions,
            funcalls,
        } => {
            let base = match (current, mode) {
                (None, WriteMode::UpdateOnly) => {
                    return Err(ErrorReply::new(Status::NotFound, "no object with that key"))
                }
                (Some(_), WriteMode::CreateOnly) => {
                    return Err(ErrorReply::new(
                        Status::CmpFail,
                        "an object with that key exists",
                    ))
                }
                (None, _) => Object::with_defaults(schema, key.clone()),
                (Some(c), _) => {
                    if !matches_all(conditions, c) {
                        return Err(ErrorReply::new(
                            Status::CmpFail,
                            "a condition does not hold",
                        ));
                    }
                    c.clone()
                }
            };
            let object = apply_all(funcalls, &base).map_err(|e| {
                // A merge past a document's limits is refused for its size, as an object over
                // its limit is; arithmetic that cannot apply fails its comparison (HyperDex).
                let status = if e.is_size() {
                    Status::TooLarge
                } else {
                    Status::CmpFail
                };
                ErrorReply::new(status, format!("the update cannot apply: {e}"))
            })?;
            debug_assert!(object.conforms_to(schema));
            let size = encoded_len(&object);
            if size > OBJECT_BYTES_MAX {
                return Err(ErrorReply::new(
                    Status::TooLarge,
                    format!("the object would be {size} bytes; the limit is {OBJECT_BYTES_MAX}"),
                ));
            }
            Ok(Some(object))
        }
        KeyWrite::Del { conditions, .. } => {
            let Some(current) = current else {
                return Err(ErrorReply::new(Status::NotFound, "no object with that key"));
            };
            if !matches_all(conditions, current) {
                return Err(ErrorReply::new(
                    Status::CmpFail,
                    "a condition does not hold",
                ));
            }
            Ok(None)
        }
        KeyWrite::Rewrite { .. } => match current {
            Some(current) => Ok(Some(current.clone())),
            None => Err(ErrorReply::new(Status::NotFound, "no object with that key")),
        },
    }
}

/// The object's encoded size, as storage and the wire will hold it.
pub fn encoded_len(object: &Object) -> usize {
    postcard::experimental::serialized_size(&object.values).unwrap_or(usize::MAX)
}
