//! Spaces and strategies the advisor's tests share.
#![allow(dead_code)]

use proptest::prelude::*;
use tessera_advisor::PredicateKind;
use tessera_types::{Attribute, AttributeType, PrimitiveType, SpaceSchema};

pub fn primitive() -> impl Strategy<Value = PrimitiveType> {
    prop_oneof![
        Just(PrimitiveType::String),
        Just(PrimitiveType::Int),
        Just(PrimitiveType::Float)
    ]
}

pub fn kind() -> impl Strategy<Value = PredicateKind> {
    prop_oneof![Just(PredicateKind::Eq), Just(PredicateKind::Range)]
}

/// Space `t` with key `k` of type `key`, attributes a1.. of `types`, then `extra`.
pub fn space(
    key: AttributeType,
    types: &[PrimitiveType],
    extra: Vec<Attribute>,
    partitions: u32,
    tolerate: u32,
) -> SpaceSchema {
    let mut attributes: Vec<Attribute> = types
        .iter()
        .enumerate()
        .map(|(i, &ty)| Attribute::new(format!("a{}", i + 1), AttributeType::Primitive(ty)))
        .collect();
    attributes.extend(extra);
    SpaceSchema::new(
        "t",
        Attribute::new("k", key),
        attributes,
        vec![],
        partitions,
        tolerate,
    )
    .expect("valid space")
}
