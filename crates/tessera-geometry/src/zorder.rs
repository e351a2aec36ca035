//! Z-order (Morton order) of subspace points, for storage (docs/design.md §7).
//!
//! Storage orders a region's objects by the interleaving of their coordinates, so that a search
//! box is a few runs of the key order rather than the whole region. Interleaving takes the most
//! significant bit of every dimension, then the next, and so on; packed most significant bit
//! first, byte order is Z-order, which is what an ordered key-value engine sorts by. When a scan
//! of the box's Z-range leaves the box, [`next_in_box`] gives the next Z-value back inside it
//! (BIGMIN, Tropf and Herzog 1981), so the scan seeks over the gap instead of reading it.

/// Most dimensions a Z-value interleaves: a subspace's.
pub const DIMENSIONS_MAX: usize = tessera_types::constants::SUBSPACE_DIMENSIONS_MAX;
// A group of 8·d bits (below) fits in a u128.
const _: () = assert!(DIMENSIONS_MAX <= 16);

/// `SPREAD[d - 1][byte]`: the bits of `byte` spread `d` apart (bit j to bit j·d).
///
/// Interleaving works a byte of every coordinate at a time: the k-th bytes (most significant first)
/// of the d coordinates make the k-th group of 8·d bits of the Z-value (its bytes k·d to k·d + d −
/// 1), in which bit j of dimension `dim`'s byte sits at j·d + (d − 1 − dim) counting from the
/// group's least significant bit. So a group is Σ SPREAD[d − 1][byte_dim] << (d − 1 − dim), a table
/// look-up per byte instead of a branch per bit (a branch on a hashed coordinate's bit is
/// mispredicted half the time: the bit-by-bit loop was half of a partial-match search's CPU).
static SPREAD: [[u128; 256]; DIMENSIONS_MAX] = spread_tables();

const fn spread_tables() -> [[u128; 256]; DIMENSIONS_MAX] {
    let mut t = [[0u128; 256]; DIMENSIONS_MAX];
    let mut d = 1;
    while d <= DIMENSIONS_MAX {
        let mut byte = 0;
        while byte < 256 {
            let mut spread = 0u128;
            let mut j = 0;
            while j < 8 {
                spread |= ((byte as u128 >> j) & 1) << (j * d);
                j += 1;
            }
            t[d - 1][byte] = spread;
            byte += 1;
        }
        d += 1;
    }
    t
}

/// The Z-value of `point`: `8 * point.len()` bytes. For one dimension, the big-endian encoding.
pub fn interleave(point: &[u64]) -> Vec<u8> {
    let d = point.len();
    assert!(
        (1..=DIMENSIONS_MAX).contains(&d),
        "a point has 1 to {DIMENSIONS_MAX} dimensions"
    );
    if d == 1 {
        return point[0].to_be_bytes().to_vec();
    }
    let spread = &SPREAD[d - 1];
    let mut z = vec![0u8; 8 * d];
    for (k, group) in z.chunks_exact_mut(d).enumerate() {
        let shift = 56 - 8 * k;
        let mut bits = 0u128;
        for (dim, &c) in point.iter().enumerate() {
            bits |= spread[(c >> shift) as u8 as usize] << (d - 1 - dim);
        }
        group.copy_from_slice(&bits.to_be_bytes()[16 - d..]);
    }
    z
}

/// The point whose Z-value is `z` (inverse of [`interleave`]).
pub fn deinterleave(z: &[u8], dimensions: usize) -> Vec<u64> {
    let mut point = vec![0u64; dimensions];
    deinterleave_into(z, &mut point);
    point
}

/// [`deinterleave`] into `point`, whose length gives the dimensions.
pub fn deinterleave_into(z: &[u8], point: &mut [u64]) {
    let d = point.len();
    assert_eq!(z.len(), 8 * d, "a Z-value has 8 bytes per dimension");
    assert!(
        (1..=DIMENSIONS_MAX).contains(&d),
        "a point has 1 to {DIMENSIONS_MAX} dimensions"
    );
    if d == 1 {
        point[0] = u64::from_be_bytes(z.try_into().expect("8 bytes"));
        return;
    }
    if d == 2 {
        // The most common subspace, and this runs for every entry a search reads: gather the
        // odd and even bits of each half with shifts and masks instead of bit by bit.
        let hi = u64::from_be_bytes(z[..8].try_into().expect("8 bytes"));
        let lo = u64::from_be_bytes(z[8..].try_into().expect("8 bytes"));
        point[0] = (even_bits(hi >> 1) << 32) | even_bits(lo >> 1);
        point[1] = (even_bits(hi) << 32) | even_bits(lo);
        return;
    }
    point.fill(0);
    for (k, group) in z.chunks_exact(d).enumerate() {
        let mut be = [0u8; 16];
        be[16 - d..].copy_from_slice(group);
        let bits = u128::from_be_bytes(be);
        let shift = 56 - 8 * k;
        for (dim, c) in point.iter_mut().enumerate() {
            // Gather bits d − 1 − dim, 2d − 1 − dim, …: the inverse of SPREAD.
            let own = bits >> (d - 1 - dim);
            let mut byte = 0u64;
            for j in 0..8 {
                byte |= ((own >> (j * d)) as u64 & 1) << j;
            }
            *c |= byte << shift;
        }
    }
}

/// Bits 0, 2, 4, … 62 of `x`, packed into the low 32 bits.
fn even_bits(x: u64) -> u64 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF
}

/// The smallest Z-value strictly greater than `z` whose point lies in the box `[lo, hi]`
/// (inclusive per dimension), or `None` when there is none.
///
/// BIGMIN generalised to `d` dimensions: walk the bit string of `z` from the most significant
/// bit, keeping the sub-box of `[lo, hi]` that shares `z`'s prefix so far. At each bit the
/// sub-box either lies entirely on one side of `z` (then the answer is its minimum, or the best
/// candidate saved so far), or straddles the bit (then its upper half's minimum is a candidate
/// greater than `z`, and the walk continues into the lower half), or agrees with `z`. Cost:
/// O(64 d) steps, each at most O(d) to save a candidate.
pub fn next_in_box(z: &[u8], lo: &[u64], hi: &[u64]) -> Option<Vec<u8>> {
    let d = lo.len();
    assert_eq!(hi.len(), d, "box corners have the same dimensions");
    assert_eq!(z.len(), 8 * d, "a Z-value has 8 bytes per dimension");
    if lo.iter().zip(hi).any(|(l, h)| l > h) {
        return None;
    }
    // Strictly greater: look for the smallest Z-value >= z + 1.
    let mut target = z.to_vec();
    let carry = target.iter_mut().rev().all(|byte| {
        *byte = byte.wrapping_add(1);
        *byte == 0
    });
    if carry {
        return None; // z was the last Z-value of the whole space
    }
    // Fixed-size copies on the stack: this runs for every entry a search skips.
    let mut p = [0u64; DIMENSIONS_MAX];
    deinterleave_into(&target, &mut p[..d]);
    let (mut min, mut max) = ([0u64; DIMENSIONS_MAX], [0u64; DIMENSIONS_MAX]);
    min[..d].copy_from_slice(lo);
    max[..d].copy_from_slice(hi);
    let mut candidate: Option<[u64; DIMENSIONS_MAX]> = None;
    for b in (0..64).rev() {
        let bit = 1u64 << b;
        let below = bit - 1; // the bits after b
        for dim in 0..d {
            let (zb, minb, maxb) = (p[dim] & bit != 0, min[dim] & bit != 0, max[dim] & bit != 0);
            match (zb, minb, maxb) {
                (false, false, false) | (true, true, true) => {}
                (false, false, true) => {
                    // Straddles: the upper half begins above the target; keep the lower half.
                    let mut upper = min;
                    upper[dim] = (min[dim] & !below) | bit;
                    candidate = Some(upper);
                    max[dim] = (max[dim] & !bit) | below;
                }
                (true, false, true) => min[dim] = (min[dim] & !below) | bit,
                (false, true, true) => return Some(interleave(&min[..d])),
                (true, false, false) => return candidate.map(|c| interleave(&c[..d])),
                (_, true, false) => unreachable!("the sub-box keeps min <= max on every dimension"),
            }
        }
    }
    // The target agrees with the sub-box on every bit: it lies in the box.
    debug_assert!(p[..d]
        .iter()
        .zip(lo.iter().zip(hi))
        .all(|(c, (l, h))| l <= c && c <= h));
    Some(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_dimension_is_big_endian() {
        assert_eq!(
            interleave(&[0x0102_0304_0506_0708]),
            0x0102_0304_0506_0708u64.to_be_bytes()
        );
        // Bits 63 of both dimensions are 0, then dimension 0's ones alternate with 1's zeros.
        assert_eq!(
            interleave(&[u64::MAX >> 1, 0]),
            [&[0x2a][..], &[0xaa; 15]].concat()
        );
    }

    /// Interleaving by its definition, a bit at a time: bit b (0 = most significant) of
    /// dimension `dim` is bit b·d + dim of the Z-value.
    fn interleave_bit_by_bit(point: &[u64]) -> Vec<u8> {
        let d = point.len();
        let mut z = vec![0u8; 8 * d];
        for b in 0..64 {
            for (dim, &c) in point.iter().enumerate() {
                if c >> (63 - b) & 1 == 1 {
                    let i = b * d + dim;
                    z[i / 8] |= 0x80 >> (i % 8);
                }
            }
        }
        z
    }

    /// The first Z-value after `z` among the points of a small box, by listing them all.
    fn brute_force(z: &[u8], lo: &[u64], hi: &[u64]) -> Option<Vec<u8>> {
        let mut points = vec![vec![]];
        for (&l, &h) in lo.iter().zip(hi) {
            points = points
                .into_iter()
                .flat_map(|p: Vec<u64>| (l..=h).map(move |c| [p.clone(), vec![c]].concat()))
                .collect();
        }
        points
            .iter()
            .map(|p| interleave(p))
            .filter(|zp| zp.as_slice() > z)
            .min()
    }

    fn small_box(d: usize, base: u64) -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
        prop::collection::vec((0u64..64, 0u64..8), d).prop_map(move |v| {
            let lo: Vec<u64> = v.iter().map(|&(l, _)| base.wrapping_add(l)).collect();
            let hi: Vec<u64> = v
                .iter()
                .zip(&lo)
                .map(|(&(_, w), &l)| l.saturating_add(w))
                .collect();
            (lo, hi)
        })
    }

    proptest! {
        #[test]
        fn round_trip(point in prop::collection::vec(any::<u64>(), 1..=DIMENSIONS_MAX)) {
            prop_assert_eq!(deinterleave(&interleave(&point), point.len()), point);
        }

        /// Two dimensions have a deinterleaving of their own: it inverts the bit-by-bit
        /// definition.
        #[test]
        fn two_dimensions_deinterleave(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(deinterleave(&interleave_bit_by_bit(&[a, b]), 2), vec![a, b]);
        }

        /// The table-driven interleaving is the bit-by-bit definition, for every dimension count.
        #[test]
        fn interleave_is_the_definition(point in prop::collection::vec(any::<u64>(), 1..=DIMENSIONS_MAX)) {
            prop_assert_eq!(interleave(&point), interleave_bit_by_bit(&point));
        }

        /// Byte order equals Z-order: the first differing bit of the interleaving is the
        /// highest bit where any dimension differs, taken in dimension order.
        #[test]
        fn byte_order_is_z_order(a in prop::collection::vec(any::<u64>(), 3), b in prop::collection::vec(any::<u64>(), 3), d in 1usize..=3) {
            let (a, b) = (&a[..d], &b[..d]);
            let key = |p: &[u64]| (0..64).rev().flat_map(|bit| p.iter().map(move |c| c >> bit & 1)).collect::<Vec<u64>>();
            prop_assert_eq!(interleave(a).cmp(&interleave(b)), key(a).cmp(&key(b)));
        }

        #[test]
        fn next_in_box_small_domain(d in 1usize..=3, bx in (1usize..=3).prop_flat_map(|d| small_box(d, 0)),
                                    z in prop::collection::vec(0u64..72, 3)) {
            let d = d.min(bx.0.len());
            let (lo, hi) = (&bx.0[..d], &bx.1[..d]);
            let z = interleave(&z[..d]);
            prop_assert_eq!(next_in_box(&z, lo, hi), brute_force(&z, lo, hi));
        }

        #[test]
        fn next_in_box_anywhere(bx in (1usize..=3).prop_flat_map(|d| (any::<u64>(), Just(d))).prop_flat_map(|(base, d)| small_box(d, base)),
                                 near in any::<bool>(), offsets in prop::collection::vec(-10i64..80, 3),
                                 raw in prop::collection::vec(any::<u8>(), 24)) {
            let (lo, hi) = bx;
            let d = lo.len();
            // Either a Z-value near the box or anywhere at all.
            let z = if near {
                interleave(&lo.iter().zip(&offsets).map(|(&l, &o)| l.wrapping_add_signed(o)).collect::<Vec<_>>())
            } else {
                raw[..8 * d].to_vec()
            };
            prop_assert_eq!(next_in_box(&z, &lo, &hi), brute_force(&z, &lo, &hi));
        }
    }

    #[test]
    fn edges_of_the_space() {
        let max = u64::MAX;
        assert_eq!(
            next_in_box(&interleave(&[max, max]), &[0, 0], &[max, max]),
            None
        );
        assert_eq!(
            next_in_box(&interleave(&[max - 1, max]), &[max, max], &[max, max]),
            Some(interleave(&[max, max]))
        );
        assert_eq!(
            next_in_box(&interleave(&[max - 3, 0]), &[max - 2, max - 2], &[max, max]),
            brute_force(&interleave(&[max - 3, 0]), &[max - 2, max - 2], &[max, max])
        );
        assert_eq!(
            next_in_box(&[0; 8], &[5], &[3]),
            None,
            "an empty box has no Z-value"
        );
        let z = interleave(&[max - 7, 2, max]);
        assert_eq!(
            next_in_box(&z, &[max - 4, 0, max - 4], &[max, 3, max]),
            brute_force(&z, &[max - 4, 0, max - 4], &[max, 3, max])
        );
    }
}
