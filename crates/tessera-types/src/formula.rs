//! Compression formulas (seed 004 §4): how a dynamic space's document is placed.
//!
//! Without a formula a document is placed on the space's unispace, every string, int and float
//! property hashed onto one of its axes. A *formula* says instead which properties are queryable
//! and how: it is a list of *overlays*, each a subspace whose axes are named properties (one
//! axis each, no hashing, so no sharing) with *weights*, the relative number of intervals per
//! axis. A document written with a formula is placed in each of the formula's overlays (a copy
//! in each) and nowhere else but its key's region. Formulas have ids (given, or derived from
//! their text) and are registered in the space before documents use them.
//!
//! An overlay holds a *copy* of each document (the whole document: a search reads it there and
//! nowhere else) or, marked `&`, a *pointer*: only the key, the formula and the overlay's own
//! properties (the stub, [`Overlay::stub_of`]). A pointer overlay costs a fraction of a copy's
//! storage and write bytes for large documents; a search that reads it filters the stubs by the
//! predicates they can decide ([`CheckedPredicate::is_decided_by`](crate::predicate::CheckedPredicate::is_decided_by)) and then reads each remaining document by
//! its key, where every predicate is checked.
//!
//! Text form, as the CLI takes it: one overlay per argument, `[&]path[*weight]` joined by
//! commas: `title` `year*4,venue.name*2` `&title`. A formula's derived id is its overlays'
//! canonical text joined by ` | `.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::constants::*;
use crate::document::{check_path, Document, DocumentError};
use crate::ids::SubspaceId;

/// The formula a document uses when its writer names none: the unispace. Stored in the
/// document's formula attribute as the empty string.
pub const DEFAULT_FORMULA: &str = "";

/// One axis of an overlay: a property and its weight.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OverlayAxis {
    pub path: String,
    /// Relative intervals along this axis (1 ..= `FORMULA_WEIGHT_MAX`).
    pub weight: u32,
}

/// A subspace of a dynamic space whose axes are named properties: where the documents of the
/// formulas that list it are placed, each at its properties' coordinates (0 for a property it
/// lacks or holds no string, int or float in).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Overlay {
    pub axes: Vec<OverlayAxis>,
    /// Holds stubs that point to the documents (key, formula, the axes' properties), not
    /// copies of them.
    pub pointer: bool,
}

impl Overlay {
    pub fn weights(&self) -> Vec<u32> {
        self.axes.iter().map(|a| a.weight).collect()
    }

    /// What this overlay stores of `document`: all of it for a copy; for a pointer, the
    /// properties at its axes' paths and nothing else (the key and the formula are the
    /// object's other attributes, kept as they are). The stub lies where the document does:
    /// its point depends on those properties only.
    pub fn stub_of(&self, document: &Document) -> Document {
        if !self.pointer {
            return document.clone();
        }
        document.project(self.axes.iter().map(|a| a.path.as_str()))
    }

    /// Whether `path` is one of this overlay's axes.
    pub fn has_axis(&self, path: &str) -> bool {
        self.axes.iter().any(|a| a.path == path)
    }
}

impl fmt::Display for Overlay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer {
            f.write_str("&")?;
        }
        for (i, a) in self.axes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&a.path)?;
            if a.weight != 1 {
                write!(f, "*{}", a.weight)?;
            }
        }
        Ok(())
    }
}

/// A formula as a writer asks for it: an id, if given, and its overlays.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormulaSpec {
    pub id: Option<String>,
    pub overlays: Vec<Overlay>,
}

/// A registered formula: its id and the subspaces (overlays) its documents are placed in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Formula {
    pub id: String,
    pub overlays: Vec<SubspaceId>,
}

/// Why a formula cannot be registered, or a document cannot use one. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum FormulaError {
    #[error("formula id {0:?}: ids are 1..={FORMULA_ID_BYTES_MAX} bytes")]
    BadId(String),
    #[error("a formula has 1..={FORMULA_OVERLAYS_MAX} overlays, not {0}")]
    Overlays(usize),
    #[error("an overlay names 1..={dimensions} properties (the space's dimensions), not {axes}")]
    TooManyAxes { axes: usize, dimensions: u16 },
    #[error(
        "overlay {0:?}: an overlay is properties joined by ',' with optional weights, after '&' for a pointer overlay: title,year*4 or &title"
    )]
    BadOverlay(String),
    #[error("weight {0}: weights are 1..={FORMULA_WEIGHT_MAX}")]
    BadWeight(u32),
    #[error("{0}")]
    BadPath(DocumentError),
    #[error("an overlay names property {0:?} twice")]
    DuplicatePath(String),
    #[error("formula {0:?} is registered already, with other overlays")]
    Exists(String),
    #[error("the space has no formula {0:?} (tessera status lists them; alter-space SPACE add-formula registers one)")]
    Unknown(String),
    #[error("formula {0:?} is being registered: retry in a moment")]
    NotReady(String),
    #[error("the space has {FORMULAS_MAX} formulas: no more are kept")]
    TooMany,
}

impl FormulaSpec {
    /// Parses overlays from their text form (one per item), with an optional id.
    pub fn parse(id: Option<&str>, overlays: &[&str]) -> Result<FormulaSpec, FormulaError> {
        let overlays = overlays
            .iter()
            .map(|text| parse_overlay(text))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FormulaSpec {
            id: id.map(str::to_owned),
            overlays,
        })
    }

    /// Checks the formula for a dynamic space of `dimensions` axes.
    pub fn check(&self, dimensions: u16) -> Result<(), FormulaError> {
        if self.overlays.is_empty() || self.overlays.len() > FORMULA_OVERLAYS_MAX {
            return Err(FormulaError::Overlays(self.overlays.len()));
        }
        let id = self.id();
        if id.is_empty() || id.len() > FORMULA_ID_BYTES_MAX {
            return Err(FormulaError::BadId(id));
        }
        for o in &self.overlays {
            let axes = o.axes.len();
            if axes == 0 || axes > usize::from(dimensions) {
                return Err(FormulaError::TooManyAxes { axes, dimensions });
            }
            for (i, a) in o.axes.iter().enumerate() {
                check_path(&a.path).map_err(FormulaError::BadPath)?;
                if a.weight == 0 || a.weight > FORMULA_WEIGHT_MAX {
                    return Err(FormulaError::BadWeight(a.weight));
                }
                if o.axes[..i].iter().any(|b| b.path == a.path) {
                    return Err(FormulaError::DuplicatePath(a.path.clone()));
                }
            }
        }
        Ok(())
    }

    /// The id given, or the one derived from the overlays' text.
    pub fn id(&self) -> String {
        match &self.id {
            Some(id) => id.clone(),
            None => self
                .overlays
                .iter()
                .map(Overlay::to_string)
                .collect::<Vec<_>>()
                .join(" | "),
        }
    }
}

fn parse_overlay(text: &str) -> Result<Overlay, FormulaError> {
    let bad = || FormulaError::BadOverlay(text.to_owned());
    let trimmed = text.trim_start();
    let (pointer, items) = match trimmed.strip_prefix('&') {
        Some(rest) => (true, rest),
        None => (false, trimmed),
    };
    let mut axes = Vec::new();
    for item in items.split(',') {
        let item = item.trim();
        let (path, weight) = match item.split_once('*') {
            None => (item, 1),
            Some((p, w)) => (p.trim(), w.trim().parse::<u32>().map_err(|_| bad())?),
        };
        if path.is_empty() {
            return Err(bad());
        }
        axes.push(OverlayAxis {
            path: path.to_owned(),
            weight,
        });
    }
    Ok(Overlay { axes, pointer })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_check_and_derive_ids() {
        let f = FormulaSpec::parse(None, &["title", "year*4, venue.name*2"]).expect("parses");
        assert_eq!(f.overlays[1].axes[0].weight, 4);
        assert_eq!(f.overlays[1].axes[1].path, "venue.name");
        assert_eq!(f.id(), "title | year*4,venue.name*2");
        assert_eq!(f.check(8), Ok(()));
        assert_eq!(
            f.check(1),
            Err(FormulaError::TooManyAxes {
                axes: 2,
                dimensions: 1
            })
        );
        let named = FormulaSpec::parse(Some("by_title"), &["title"]).expect("parses");
        assert_eq!(named.id(), "by_title");
        for bad in ["", "a,,b", "a*x", "*2"] {
            assert!(matches!(
                FormulaSpec::parse(None, &[bad]),
                Err(FormulaError::BadOverlay(_))
            ));
        }
        let zero = FormulaSpec::parse(None, &["a*0"]).expect("parses");
        assert_eq!(zero.check(8), Err(FormulaError::BadWeight(0)));
        let twice = FormulaSpec::parse(None, &["a,a"]).expect("parses");
        assert_eq!(twice.check(8), Err(FormulaError::DuplicatePath("a".into())));
        let dotted = FormulaSpec::parse(None, &["a..b"]).expect("parses");
        assert!(matches!(dotted.check(8), Err(FormulaError::BadPath(_))));
        let none = FormulaSpec::parse(None, &[]).expect("parses");
        assert_eq!(none.check(8), Err(FormulaError::Overlays(0)));
        // `&` marks a pointer overlay, and its text (so a derived id) keeps the mark.
        let pointers = FormulaSpec::parse(None, &[" & title", "year"]).expect("parses");
        assert!(pointers.overlays[0].pointer && !pointers.overlays[1].pointer);
        assert_eq!(pointers.overlays[0].axes[0].path, "title");
        assert_eq!(pointers.id(), "&title | year");
        assert_eq!(pointers.check(8), Ok(()));
        assert!(matches!(
            FormulaSpec::parse(None, &["&"]),
            Err(FormulaError::BadOverlay(_))
        ));
    }
}
