//! Tessera's data model: values and their types, space schemas and the space description
//! language, search predicates, and atomic operations ("funcalls").
//!
//! Everything here is pure: no I/O, no clocks. The server, the client and the geometry all
//! speak in these types, so a request is validated once, against the schema, into a *checked*
//! form (`CheckedPredicate`, `CheckedFuncall`) that cannot fail on a type mismatch later.

#![forbid(unsafe_code)]

pub mod bytestring;
pub mod constants;
pub mod document;
pub mod formula;
pub mod funcall;
pub mod ids;
pub mod object;
pub mod parse;
pub mod predicate;
pub mod schema;
pub mod sort;
pub mod value;

pub use bytestring::ByteString;
pub use document::{DocValue, Document, DocumentError, PropertyKind, Shape};
pub use formula::{Formula, FormulaError, FormulaSpec, Overlay, OverlayAxis, DEFAULT_FORMULA};
pub use funcall::{
    apply_all, CheckedFuncall, Funcall, FuncallCheckError, FuncallError, FuncallOp, NumOp,
};
pub use ids::{Epoch, ServerId, SubspaceId, Version};
pub use object::{Object, StoredObject};
pub use parse::{parse_space, parse_space_tolerating, ParseError};
pub use predicate::{matches_all, CheckedPredicate, Predicate, PredicateError, PredicateOp};
pub use schema::{
    AttrIndex, Attribute, AxisCuts, KeySplit, Placement, SchemaError, SortError, SpaceKind,
    SpaceSchema, Subspace, SubspaceState, TagCurve, DOCUMENT_ATTRIBUTE, DOCUMENT_INDEX,
    FORMULA_ATTRIBUTE, FORMULA_INDEX, UNISPACE,
};
pub use sort::{SortKey, SortValue};
pub use value::{AttributeType, PrimitiveType, Value};
