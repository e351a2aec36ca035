//! A *tagged* placement's tag subspace (seed 003 §2.1.3): objects whose tags are alike lie
//! together, so `get_by_tags` asks few regions.
//!
//! Each tag falls in a cell along a tag axis (the top bits of its hash). An object's distinct
//! tag cells, sorted and the last repeated to fill `axes`, are a cell of the `axes`-dimensional
//! tag grid; the Hilbert curve through that grid ([`crate::hilbert`]) orders the cells so that
//! a stretch of it is a compact blob. The tag subspace has two dimensions: the position on the
//! curve, cut into equal stretches, and the key's hash, cut into `spread` intervals. So each
//! stretch of the curve is spread over `spread` regions (hybrid-n: one tag set does not all
//! land on one server), and an object is at `(position, key hash)`.
//!
//! An object with more tag cells than axes sits at the curve's end ([`OVERFLOW`]), which every
//! tag search also reads. A search for objects holding every tag of a set reads the cells
//! whose tag sets include all the set's cells ([`tag_positions`]; `crate::search` makes them
//! boxes): for one tag on two axes, the row and the column through its cell.

use std::collections::BTreeSet;

use tessera_types::{TagCurve, Value};
use xxhash_rust::xxh3::xxh3_64;

use crate::hilbert::hilbert_index;

/// The tag grid has at most `2^GRID_BITS` cells, so a search can list those it reads.
const GRID_BITS: u32 = 12;

/// The curve position of objects with more tag cells than axes: the end of the curve.
pub const OVERFLOW: u64 = u64::MAX;

/// Bits of a tag's hash per axis: `GRID_BITS / axes`.
fn bits_per_axis(curve: TagCurve) -> u32 {
    assert!(curve.axes >= 1, "a tag curve has at least one axis");
    GRID_BITS / u32::from(curve.axes)
}

/// The cell of `tag` along a tag axis of `bits` bits.
fn tag_cell(tag: &[u8], bits: u32) -> u64 {
    xxh3_64(tag) >> (64 - bits)
}

/// The curve position of the grid cell `cells` (sorted, `axes` of them).
fn position_of(cells: &[u64], bits: u32) -> u64 {
    let total = bits * cells.len() as u32;
    (hilbert_index(cells, bits) as u64) << (64 - total)
}

/// The distinct cells of `tags`, ascending.
fn cells_of<'a, T: AsRef<[u8]> + ?Sized + 'a>(
    tags: impl IntoIterator<Item = &'a T>,
    bits: u32,
) -> BTreeSet<u64> {
    tags.into_iter()
        .map(|t| tag_cell(t.as_ref(), bits))
        .collect()
}

/// The grid cell of a set of distinct tag cells: sorted, the last repeated to fill `axes`
/// (no cells: the origin). `None` for more cells than axes.
fn grid_cell(cells: &BTreeSet<u64>, axes: usize) -> Option<Vec<u64>> {
    if cells.len() > axes {
        return None;
    }
    let mut cell: Vec<u64> = cells.iter().copied().collect();
    let last = cell.last().copied().unwrap_or(0);
    cell.resize(axes, last);
    Some(cell)
}

/// Where the tags `tags` (text or any bytes) put an object on the curve.
pub fn tag_position<'a, T: AsRef<[u8]> + ?Sized + 'a>(
    curve: TagCurve,
    tags: impl IntoIterator<Item = &'a T>,
) -> u64 {
    let bits = bits_per_axis(curve);
    match grid_cell(&cells_of(tags, bits), usize::from(curve.axes)) {
        Some(cell) => position_of(&cell, bits),
        None => OVERFLOW,
    }
}

/// The point of an object in the tag subspace: its tags' curve position and its key's hash
/// (`key_hash`, the key's coordinate on a hashed axis). `tags` is the object's set(string)
/// tags value.
pub fn tag_point(curve: TagCurve, tags: &Value, key_hash: u64) -> Vec<u64> {
    let strings: Vec<&[u8]> = match tags {
        Value::Set(items) => items
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.as_bytes()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    vec![tag_position(curve, strings), key_hash]
}

/// The curve positions of the tag subspace holding every object whose tags include all of
/// `required`: one per grid cell whose tag cells include the required ones, and the
/// overflow. `None` when no tag is required: every position.
pub fn tag_positions<'a, T: AsRef<[u8]> + ?Sized + 'a>(
    curve: TagCurve,
    required: impl IntoIterator<Item = &'a T>,
) -> Option<Vec<u64>> {
    let bits = bits_per_axis(curve);
    let axes = usize::from(curve.axes);
    let required = cells_of(required, bits);
    if required.is_empty() {
        return None;
    }
    let mut positions = Vec::new();
    if required.len() <= axes {
        // Every non-decreasing cell of the grid (a set of distinct cells, the last repeated):
        // an odometer whose digits never fall below the digit before.
        let side = 1u64 << bits;
        let mut cell = vec![0u64; axes];
        loop {
            if required.iter().all(|c| cell.contains(c)) {
                positions.push(position_of(&cell, bits));
            }
            let Some(d) = (0..axes).rev().find(|&d| cell[d] + 1 < side) else {
                break;
            };
            cell[d] += 1;
            let v = cell[d];
            for later in &mut cell[d + 1..] {
                *later = v;
            }
        }
    }
    positions.push(OVERFLOW);
    Some(positions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinate::key_coordinate;
    use crate::tessellation::Tessellation;
    use proptest::prelude::*;

    fn curve(axes: u8, spread: u32) -> TagCurve {
        TagCurve { axes, spread }
    }

    fn tags(items: &[&str]) -> Value {
        Value::Set(items.iter().map(|s| Value::from(*s)).collect())
    }

    #[test]
    fn one_tag_set_spreads_over_spread_regions() {
        // Hybrid-n: objects with the same tags lie in one stretch of the curve, in `spread`
        // regions chosen by their keys' hashes, all of them used.
        for spread in [1u32, 2, 4, 8] {
            let c = curve(2, spread);
            let t = Tessellation::tags(c, 64);
            let regions: BTreeSet<u32> = (0..2000)
                .map(|k| {
                    let key = key_coordinate(&Value::Int(k));
                    t.region_of(&tag_point(c, &tags(&["#rust"]), key)).0
                })
                .collect();
            assert_eq!(regions.len(), spread as usize, "spread {spread}");
            let stretch: BTreeSet<u32> = regions.iter().map(|r| r / spread).collect();
            assert_eq!(stretch.len(), 1, "one stretch of the curve");
        }
    }

    #[test]
    fn the_tessellation_has_stretches_times_spread_regions() {
        assert_eq!(Tessellation::tags(curve(2, 4), 64).regions_count(), 64);
        assert_eq!(Tessellation::tags(curve(2, 3), 64).regions_count(), 63);
        assert_eq!(Tessellation::tags(curve(1, 1), 5).regions_count(), 5);
        assert_eq!(Tessellation::tags(curve(1, 9), 4).regions_count(), 4);
    }

    #[test]
    fn one_tag_reads_a_line_of_cells_not_the_grid() {
        let c = curve(2, 1);
        let positions = tag_positions(c, ["#rust"]).expect("a tag is required");
        // The row and column through the tag's cell on a 64 × 64 grid (non-decreasing cells:
        // 64 of them contain a given cell) and the overflow.
        assert_eq!(positions.len(), 64 + 1);
        let one_axis = tag_positions(curve(1, 1), ["#rust"]).expect("a tag is required");
        assert_eq!(one_axis.len(), 2, "its cell and the overflow");
        let many = tag_positions(c, ["#a", "#b", "#c"]);
        assert_eq!(many, Some(vec![OVERFLOW]), "only the overflow");
        assert_eq!(tag_positions(c, Vec::<&str>::new()), None, "every position");
    }

    /// A set of tags drawn from a small vocabulary, so that sets overlap.
    fn tag_set() -> impl Strategy<Value = BTreeSet<String>> {
        proptest::collection::btree_set((0u8..12).prop_map(|i| format!("t{i}")), 0..5)
    }

    proptest! {
        /// The oracle: an object matches when its tags include every required one; every
        /// match lies at one of the positions read (whatever the axes and tags).
        #[test]
        fn every_match_lies_at_a_position_read(
            axes in 1u8..=4,
            objects in proptest::collection::vec(tag_set(), 1..40),
            required in tag_set(),
        ) {
            let c = curve(axes, 1);
            let positions = tag_positions(c, required.iter().map(String::as_str));
            for (k, object) in objects.iter().enumerate() {
                if !required.is_subset(object) {
                    continue;
                }
                let set = Value::Set(object.iter().map(|s| Value::from(s.as_str())).collect());
                let point = tag_point(c, &set, key_coordinate(&Value::Int(k as i64)));
                prop_assert!(
                    positions.as_ref().is_none_or(|p| p.contains(&point[0])),
                    "{object:?} holds {required:?} but lies at no position read"
                );
            }
        }

        /// The same tags, in any order or repeated, give the same position.
        #[test]
        fn the_position_is_the_sets(axes in 1u8..=4, set in tag_set()) {
            let c = curve(axes, 1);
            let forward: Vec<&str> = set.iter().map(String::as_str).collect();
            let mut twice: Vec<&str> = forward.iter().rev().copied().collect();
            twice.extend(forward.iter().copied());
            prop_assert_eq!(tag_position(c, forward), tag_position(c, twice));
        }
    }
}
