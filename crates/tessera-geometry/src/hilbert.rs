//! The Hilbert curve through a `d`-dimensional grid of `2^bits` cells a side: the
//! locality-preserving order a *tagged* placement (seed 003 §2.1.3) puts items' tag points in,
//! so that items whose tags are close lie close on the curve, and so on the same servers.
//!
//! [`hilbert_index`] maps a cell to its position along the curve and [`hilbert_cell`] back.
//! The curve visits every cell once (a bijection onto `0 .. 2^(d·bits)`), and two cells one
//! step apart along it are neighbours in the grid (they differ by one in one coordinate): a
//! run of the curve is a compact blob of the grid, which is what keeps tag-close items
//! together. The computation is J. Skilling's ("Programming the Hilbert curve", AIP Conf. Proc.
//! 707, 2004): the curve position, written with its bits dealt round-robin to the `d`
//! coordinates (the *transposed* form), is obtained from the cell by undoing the curve's
//! rotations and reflections level by level, then Gray-decoding.

/// Dimensions times bits a side must fit the `u128` curve position.
pub const HILBERT_BITS_MAX: u32 = 128;

/// The position along the curve of `cell` (each coordinate below `2^bits`), in
/// `0 .. 2^(cell.len() · bits)`.
pub fn hilbert_index(cell: &[u64], bits: u32) -> u128 {
    check(cell.len(), bits);
    assert!(
        cell.iter().all(|&c| bits == 64 || c >> bits == 0),
        "a coordinate of {cell:?} has more than {bits} bits"
    );
    let mut x = cell.to_vec();
    let d = x.len();
    if d == 0 || bits == 0 {
        return 0;
    }
    // Undo the rotations and reflections, from the top level down.
    let top = 1u64 << (bits - 1);
    let mut q = top;
    while q > 1 {
        for i in 0..d {
            turn(&mut x, i, q);
        }
        q >>= 1;
    }
    // Gray-encode the transposed position.
    for i in 1..d {
        x[i] ^= x[i - 1];
    }
    let mut flip = 0;
    let mut q = top;
    while q > 1 {
        if x[d - 1] & q != 0 {
            flip ^= q - 1;
        }
        q >>= 1;
    }
    for c in &mut x {
        *c ^= flip;
    }
    untranspose(&x, bits)
}

/// The cell at `index` along the curve through `dimensions` dimensions of `bits` a side:
/// the inverse of [`hilbert_index`].
pub fn hilbert_cell(index: u128, dimensions: usize, bits: u32) -> Vec<u64> {
    check(dimensions, bits);
    let total = dimensions as u32 * bits;
    assert!(
        total == 128 || index >> total == 0,
        "position {index} is past the curve's 2^{total} cells"
    );
    let mut x = transpose(index, dimensions, bits);
    let d = dimensions;
    if d == 0 || bits == 0 {
        return x;
    }
    // Gray-decode.
    let t = x[d - 1] >> 1;
    for i in (1..d).rev() {
        x[i] ^= x[i - 1];
    }
    x[0] ^= t;
    // Redo the rotations and reflections, from the bottom level up.
    // Up to the side, 2^bits (0 once shifted out, for 64 bits).
    let side = 2u64 << (bits - 1);
    let mut q = 2u64;
    while q != side {
        for i in (0..d).rev() {
            turn(&mut x, i, q);
        }
        q <<= 1;
    }
    x
}

/// The curve's turn at level `q` for coordinate `i`, below that level: the low bits of
/// coordinate 0 inverted where coordinate `i` has the level's bit, else exchanged with
/// coordinate `i`'s. Its own inverse, so encoding and decoding apply the same turns, in
/// opposite orders.
fn turn(x: &mut [u64], i: usize, q: u64) {
    let low = q - 1;
    if x[i] & q != 0 {
        x[0] ^= low;
    } else {
        let swap = (x[0] ^ x[i]) & low;
        x[0] ^= swap;
        x[i] ^= swap;
    }
}

fn check(dimensions: usize, bits: u32) {
    assert!(bits <= 64, "at most 64 bits a side, not {bits}");
    assert!(
        dimensions as u128 * u128::from(bits) <= u128::from(HILBERT_BITS_MAX),
        "{dimensions} dimensions of {bits} bits do not fit a u128 position"
    );
}

/// The position whose bits, from the top, are bit `bits-1` of every coordinate in order,
/// then bit `bits-2` of every coordinate, and so on.
fn untranspose(x: &[u64], bits: u32) -> u128 {
    let mut index = 0u128;
    for b in (0..bits).rev() {
        for c in x {
            index = (index << 1) | u128::from((c >> b) & 1);
        }
    }
    index
}

/// The inverse of [`untranspose`].
fn transpose(index: u128, dimensions: usize, bits: u32) -> Vec<u64> {
    let mut x = vec![0u64; dimensions];
    let mut shift = dimensions as u32 * bits;
    for b in (0..bits).rev() {
        for c in &mut x {
            shift -= 1;
            *c |= (((index >> shift) & 1) as u64) << b;
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Every cell of small grids, in curve order: each once, each a grid neighbour of the
    /// previous one, and the curve starts at the origin.
    #[test]
    fn small_curves_visit_every_cell_once_by_neighbouring_steps() {
        for (d, bits) in [
            (1, 4),
            (2, 1),
            (2, 3),
            (3, 2),
            (3, 3),
            (4, 2),
            (5, 1),
            (2, 5),
        ] {
            let cells = 1u128 << (d as u32 * bits);
            let mut seen = BTreeSet::new();
            let mut previous: Option<Vec<u64>> = None;
            for i in 0..cells {
                let cell = hilbert_cell(i, d, bits);
                assert!(cell.iter().all(|&c| c < 1 << bits), "{cell:?}");
                assert_eq!(hilbert_index(&cell, bits), i, "{d}×{bits}: {cell:?}");
                assert!(seen.insert(cell.clone()), "{d}×{bits}: {cell:?} twice");
                if let Some(p) = &previous {
                    let distance: u64 = p.iter().zip(&cell).map(|(a, b)| a.abs_diff(*b)).sum();
                    assert_eq!(distance, 1, "{d}×{bits}: {p:?} to {cell:?} at {i}");
                }
                previous = Some(cell);
            }
            assert_eq!(seen.len() as u128, cells);
            assert_eq!(hilbert_cell(0, d, bits), vec![0; d]);
        }
    }

    proptest! {
        /// Large grids: the mapping round-trips and consecutive positions are neighbours.
        #[test]
        fn large_curves_round_trip_and_step_to_neighbours(
            d in 1usize..6,
            bits in 1u32..=20,
            seed in any::<u128>(),
        ) {
            let total = d as u32 * bits;
            let last = (1u128 << total) - 1;
            let i = seed % (last + 1);
            let cell = hilbert_cell(i, d, bits);
            prop_assert_eq!(hilbert_index(&cell, bits), i);
            if i < last {
                let next = hilbert_cell(i + 1, d, bits);
                let distance: u64 = cell.iter().zip(&next).map(|(a, b)| a.abs_diff(*b)).sum();
                prop_assert_eq!(distance, 1);
            }
        }

        /// Whole-width coordinates (64 bits, two dimensions) round-trip too.
        #[test]
        fn full_width_cells_round_trip(a in any::<u64>(), b in any::<u64>()) {
            let i = hilbert_index(&[a, b], 64);
            prop_assert_eq!(hilbert_cell(i, 2, 64), vec![a, b]);
        }
    }
}
