//! Objects: one value per attribute of their space, the key first.

use serde::{Deserialize, Serialize};

use crate::ids::SubspaceId;
use crate::ids::Version;
use crate::schema::{AttrIndex, SpaceSchema, DOCUMENT_INDEX};
use crate::value::Value;

/// An object with the version of the update that produced it, as storage holds it and as
/// chains carry it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredObject {
    pub version: Version,
    pub object: Object,
}

/// An object of a space. `values[i]` is the value of attribute `i`; `values[0]` is the key.
/// Every value has its attribute's type (see [`Object::conforms_to`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    pub values: Vec<Value>,
}

impl Object {
    /// A new object with the given key and every other attribute at its type's default, which
    /// is what a put sees before it applies its assignments to an absent key.
    pub fn with_defaults(schema: &SpaceSchema, key: Value) -> Object {
        let mut values = Vec::with_capacity(schema.attributes.len());
        values.push(key);
        values.extend(schema.attributes[1..].iter().map(|a| a.ty.default_value()));
        let object = Object { values };
        debug_assert!(object.conforms_to(schema));
        object
    }

    pub fn key(&self) -> &Value {
        &self.values[0]
    }

    pub fn get(&self, attr: AttrIndex) -> &Value {
        &self.values[attr.get()]
    }

    /// Whether this object has exactly the shape and types of `schema`.
    pub fn conforms_to(&self, schema: &SpaceSchema) -> bool {
        self.values.len() == schema.attributes.len()
            && self
                .values
                .iter()
                .zip(&schema.attributes)
                .all(|(v, a)| a.ty.admits(v))
    }

    /// The attributes other than the key, with their names, in schema order.
    pub fn named_attributes<'a>(
        &'a self,
        schema: &'a SpaceSchema,
    ) -> impl Iterator<Item = (&'a str, &'a Value)> + 'a {
        schema.attributes[1..]
            .iter()
            .zip(&self.values[1..])
            .map(|(a, v)| (a.name.as_str(), v))
    }

    /// What subspace `id` of `schema` stores of this object when that is not the object
    /// itself: in a pointer overlay, its stub (the key, the formula, the document cut to the
    /// overlay's properties: [`Overlay::stub_of`](crate::formula::Overlay::stub_of)). `None` for
    /// every other subspace.
    pub fn stub_in(&self, schema: &SpaceSchema, id: SubspaceId) -> Option<Object> {
        let overlay = schema.pointer_overlay(id)?;
        let values = self.values.iter().enumerate();
        let values = values.map(|(i, v)| match v {
            Value::Document(d) if i == DOCUMENT_INDEX.get() => Value::Document(overlay.stub_of(d)),
            v => v.clone(),
        });
        Some(Object {
            values: values.collect(),
        })
    }
}
