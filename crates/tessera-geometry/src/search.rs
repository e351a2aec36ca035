//! Search boxes, the regions they cross, and the choice of subspace (docs/design.md §4, §8).
//!
//! A conjunction of predicates selects, in each subspace, an axis-aligned box of coordinates:
//! equality fixes a dimension to one coordinate, a range on an order-preserving (int or float,
//! non-key) dimension bounds it to an interval, anything else leaves it open. Hashed axes
//! (strings, and every key) keep no order, so only equality can narrow them. The box is a
//! superset of the matching objects' points: objects are filtered again after the read.

use tessera_types::{
    AttrIndex, CheckedPredicate, PredicateOp, PrimitiveType, SpaceSchema, SubspaceId, Value,
};

use crate::coordinate::{dimension_coordinate, KeyPosition};
use crate::tessellation::{RegionIndex, Tessellation};

/// The coordinates a search selects in one subspace: an inclusive `(lo, hi)` range per
/// dimension, in subspace order. Every range has `lo <= hi`; an empty selection is no box
/// at all (`Option<SearchBox>` is `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchBox {
    pub ranges: Vec<(u64, u64)>,
}

/// What one predicate says about one dimension's coordinate.
pub(crate) enum Constraint {
    /// Nothing: the predicate cannot be answered from the coordinate (hashed axis, or an
    /// operator that is not a comparison).
    Open,
    /// The coordinate lies in this inclusive interval.
    Within(u64, u64),
    /// No coordinate can satisfy the predicate (a strict bound past the end of the axis).
    Nothing,
}

impl Constraint {
    /// Narrows an axis's `(lo, hi)` range to what this constraint allows; `false` when nothing
    /// is left of it (the predicates contradict each other there).
    pub(crate) fn narrow(self, (lo, hi): &mut (u64, u64)) -> bool {
        match self {
            Constraint::Open => true,
            Constraint::Within(l, h) => {
                *lo = (*lo).max(l);
                *hi = (*hi).min(h);
                lo <= hi
            }
            Constraint::Nothing => false,
        }
    }
}

impl SearchBox {
    /// The whole subspace: every coordinate on every dimension.
    pub fn full(dimensions: usize) -> SearchBox {
        assert!(dimensions >= 1, "a subspace has at least one dimension");
        SearchBox {
            ranges: vec![(0, u64::MAX); dimensions],
        }
    }

    /// Whether the box is a single point: every dimension fixed to one coordinate. Such a box
    /// lies in one region and reads one cell of it.
    pub fn is_point(&self) -> bool {
        self.ranges.iter().all(|(lo, hi)| lo == hi)
    }

    /// The box `predicates` select in `subspace`, or `None` when they contradict each other
    /// there (then no object can match, and the search need contact nobody).
    pub fn for_predicates(
        schema: &SpaceSchema,
        subspace: SubspaceId,
        predicates: &[CheckedPredicate],
    ) -> Option<SearchBox> {
        let dimensions = &schema.subspace(subspace).dimensions;
        let mut ranges = vec![(0u64, u64::MAX); dimensions.len()];
        for p in predicates {
            let Some(dim) = dimensions.iter().position(|&a| a == p.attr) else {
                continue;
            };
            if !constraint(schema, subspace, p.attr, &p.op).narrow(&mut ranges[dim]) {
                return None;
            }
        }
        Some(SearchBox { ranges })
    }

    pub fn dimensions(&self) -> usize {
        self.ranges.len()
    }

    /// Whether `point` (one coordinate per dimension) lies in the box.
    pub fn contains(&self, point: &[u64]) -> bool {
        assert_eq!(
            point.len(),
            self.ranges.len(),
            "point and box have different dimensions"
        );
        point
            .iter()
            .zip(&self.ranges)
            .all(|(c, (lo, hi))| lo <= c && c <= hi)
    }

    /// The intersection with another box of the same subspace (for example a region's bounds,
    /// which is what a server scans), or `None` when they do not overlap.
    pub fn intersect(&self, other_ranges: &[(u64, u64)]) -> Option<SearchBox> {
        assert_eq!(
            other_ranges.len(),
            self.ranges.len(),
            "boxes have different dimensions"
        );
        let ranges: Vec<(u64, u64)> = self
            .ranges
            .iter()
            .zip(other_ranges)
            .map(|(&(a, b), &(c, d))| (a.max(c), b.min(d)))
            .collect();
        ranges
            .iter()
            .all(|(lo, hi)| lo <= hi)
            .then_some(SearchBox { ranges })
    }

    /// Per dimension, the first and last interval of `t` the box crosses.
    fn cells_crossed(&self, t: &Tessellation) -> Vec<(u32, u32)> {
        assert_eq!(
            t.dimensions(),
            self.ranges.len(),
            "box and tessellation have different dimensions"
        );
        self.ranges
            .iter()
            .enumerate()
            .map(|(d, &(lo, hi))| {
                assert!(lo <= hi, "a search box is never empty");
                (t.intervals_holding(d, lo).0, t.intervals_holding(d, hi).1)
            })
            .collect()
    }

    /// Every region of `t` the box crosses, in ascending order.
    pub fn regions(&self, t: &Tessellation) -> Vec<RegionIndex> {
        let crossed = self.cells_crossed(t);
        let mut regions = Vec::with_capacity(self.regions_count(t) as usize);
        // An odometer over the crossed cells, last dimension fastest: region numbers are mixed
        // radix with the first dimension most significant, so this yields them ascending —
        // except on a split ordered key axis, which numbers a split's new region after every
        // other (sorted below).
        let mut cells: Vec<u32> = crossed.iter().map(|&(first, _)| first).collect();
        loop {
            regions.push(t.region_at(&cells));
            let Some(d) = (0..cells.len()).rev().find(|&d| cells[d] < crossed[d].1) else {
                break;
            };
            cells[d] += 1;
            for (c, &(first, _)) in cells[d + 1..].iter_mut().zip(&crossed[d + 1..]) {
                *c = first;
            }
        }
        if !regions.is_sorted() {
            regions.sort_unstable();
        }
        debug_assert!(regions.windows(2).all(|w| w[0] < w[1]));
        regions
    }

    /// How many regions of `t` the box crosses, without listing them.
    pub fn regions_count(&self, t: &Tessellation) -> u64 {
        self.cells_crossed(t)
            .iter()
            .map(|&(first, last)| (last - first) as u64 + 1)
            .product()
    }
}

/// What predicate `op` on attribute `attr`, a dimension of `subspace`, says about its coordinate.
fn constraint(
    schema: &SpaceSchema,
    subspace: SubspaceId,
    attr: AttrIndex,
    op: &PredicateOp,
) -> Constraint {
    let Some(ty) = schema.attribute(attr).ty.as_primitive() else {
        return Constraint::Open;
    };
    // Int and float coordinates preserve order, except the key's, which is hashed unless it
    // lies on an ordered key axis (where strings keep their order too).
    let ordered = if attr == AttrIndex::KEY {
        subspace == SubspaceId::KEY && schema.keys_ordered()
    } else {
        matches!(ty, PrimitiveType::Int | PrimitiveType::Float)
    };
    constraint_on_axis(ty, ordered, op, &|v| {
        dimension_coordinate(schema, subspace, attr, v)
    })
}

/// What `op` says about the coordinate on an axis of values of type `ty`, whose coordinates
/// `c` gives and keep the values' order when `ordered`.
pub(crate) fn constraint_on_axis(
    ty: PrimitiveType,
    ordered: bool,
    op: &PredicateOp,
    c: &dyn Fn(&Value) -> u64,
) -> Constraint {
    // An operand of another type cannot be placed on this axis. CheckedPredicate coerces
    // operands to the attribute's type, so this only guards against hand-built predicates.
    let on_axis = |v: &Value| v.primitive_type() == Some(ty);
    match op {
        PredicateOp::Equals(v) if on_axis(v) => Constraint::Within(c(v), c(v)),
        _ if !ordered => Constraint::Open,
        // Strings on an ordered axis share a coordinate with every string of the same first
        // 8 bytes: a strict bound cannot exclude the operand's coordinate.
        PredicateOp::LessThan(v) if on_axis(v) && ty == PrimitiveType::String => {
            Constraint::Within(0, c(v))
        }
        PredicateOp::GreaterThan(v) if on_axis(v) && ty == PrimitiveType::String => {
            Constraint::Within(c(v), u64::MAX)
        }
        PredicateOp::LessThan(v) if on_axis(v) => match c(v).checked_sub(1) {
            Some(hi) => Constraint::Within(0, hi),
            None => Constraint::Nothing,
        },
        PredicateOp::LessEqual(v) if on_axis(v) => Constraint::Within(0, c(v)),
        PredicateOp::GreaterThan(v) if on_axis(v) => match c(v).checked_add(1) {
            Some(lo) => Constraint::Within(lo, u64::MAX),
            None => Constraint::Nothing,
        },
        PredicateOp::GreaterEqual(v) if on_axis(v) => Constraint::Within(c(v), u64::MAX),
        PredicateOp::Range(lo, hi) if on_axis(lo) && on_axis(hi) => {
            if c(lo) <= c(hi) {
                Constraint::Within(c(lo), c(hi))
            } else {
                Constraint::Nothing
            }
        }
        _ => Constraint::Open,
    }
}

/// Which subspace a search should use, and what it costs there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchPlan {
    pub subspace: SubspaceId,
    /// The boxes whose union the search reads: none when the predicates contradict each
    /// other (the search contacts no region), one in a typed space, one per shape that can
    /// match in a dynamic space (`crate::dynamic`).
    pub boxes: Vec<SearchBox>,
    pub regions_count: u64,
    /// In a dynamic space, the formulas whose documents this part reads (`crate::plan`);
    /// empty in a typed space.
    pub formulas: Vec<String>,
    /// On an ordered key axis, the keys the predicates allow, which its coordinates alone
    /// cannot tell apart where split ranges start between keys of one coordinate.
    pub keys: Option<KeyInterval>,
}

/// The positions of the keys a search may match, both ends included (`None`: no bound).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyInterval {
    pub from: Option<KeyPosition>,
    pub to: Option<KeyPosition>,
}

impl KeyInterval {
    /// The keys the predicates on the key of an ordered space allow: each bound narrows it
    /// (positions keep the keys' order, so a key above a bound has a position at or above
    /// the bound's).
    fn of_predicates(predicates: &[CheckedPredicate], key_type: PrimitiveType) -> KeyInterval {
        let mut keys = KeyInterval::default();
        let position = |v: &Value| {
            (v.primitive_type() == Some(key_type))
                .then(|| crate::coordinate::ordered_key_position(v))
        };
        for p in predicates.iter().filter(|p| p.attr == AttrIndex::KEY) {
            let (from, to) = match &p.op {
                PredicateOp::Equals(v) => (position(v), position(v)),
                PredicateOp::GreaterThan(v) | PredicateOp::GreaterEqual(v) => (position(v), None),
                PredicateOp::LessThan(v) | PredicateOp::LessEqual(v) => (None, position(v)),
                PredicateOp::Range(lo, hi) => (position(lo), position(hi)),
                _ => (None, None),
            };
            if let Some(from) = from {
                keys.from = keys.from.max(Some(from));
            }
            if let Some(to) = to {
                keys.to = Some(match keys.to.take() {
                    Some(t) => t.min(to),
                    None => to,
                });
            }
        }
        keys
    }

    /// Whether some key of the key range `[start, end)` lies within.
    fn overlaps(&self, (start, end): (KeyPosition, Option<KeyPosition>)) -> bool {
        let below_end = match (&self.from, end) {
            (Some(from), Some(end)) => *from < end,
            _ => true,
        };
        below_end && self.to.as_ref().is_none_or(|to| start <= *to)
    }
}

impl SearchPlan {
    /// Every region of `t` (the plan's subspace's tessellation) some box crosses, ascending;
    /// on an ordered key axis, only those whose keys the plan's key interval reaches.
    pub fn regions(&self, t: &Tessellation) -> Vec<RegionIndex> {
        let mut regions = match self.boxes.as_slice() {
            [only] => only.regions(t),
            boxes => {
                let mut all: Vec<RegionIndex> = boxes.iter().flat_map(|b| b.regions(t)).collect();
                all.sort_unstable();
                all.dedup();
                all
            }
        };
        if let Some(keys) = &self.keys {
            regions.retain(|r| keys.overlaps(t.key_range(*r)));
        }
        regions
    }

    /// Whether the search reads at most one cell of one region: nothing, or one box fixed on
    /// every dimension.
    pub fn is_point(&self) -> bool {
        match self.boxes.as_slice() {
            [] => true,
            [only] => only.is_point(),
            _ => false,
        }
    }
}

/// How a search by `predicates` would read subspace `id` of a typed space (tessellated by
/// `t`): its boxes and the regions they cross.
pub fn typed_part(
    schema: &SpaceSchema,
    t: &Tessellation,
    id: SubspaceId,
    predicates: &[CheckedPredicate],
) -> SearchPlan {
    let boxes = typed_boxes(schema, id, predicates);
    let keys = (id == SubspaceId::KEY && t.keys_ordered())
        .then(|| KeyInterval::of_predicates(predicates, schema.key_type()))
        .filter(|k| *k != KeyInterval::default());
    let mut plan = SearchPlan {
        subspace: id,
        regions_count: 0,
        boxes,
        formulas: vec![],
        keys,
    };
    plan.regions_count = match (plan.boxes.as_slice(), &plan.keys) {
        ([], _) => 0,
        ([only], None) => only.regions_count(t),
        _ => plan.regions(t).len() as u64,
    };
    plan
}

/// The boxes `predicates` select in subspace `id` of a typed space: the one box of
/// [`SearchBox::for_predicates`], or in a tag subspace the curve positions of the tags the
/// predicates require (`contains` on the tags attribute, [`crate::tags::tag_positions`])
/// within it. None
/// when the predicates contradict each other.
fn typed_boxes(
    schema: &SpaceSchema,
    id: SubspaceId,
    predicates: &[CheckedPredicate],
) -> Vec<SearchBox> {
    let Some(whole) = SearchBox::for_predicates(schema, id, predicates) else {
        return vec![];
    };
    let subspace = schema.subspace(id);
    let Some(curve) = subspace.tags else {
        return vec![whole];
    };
    let required = predicates.iter().filter_map(|p| match &p.op {
        PredicateOp::Contains(Value::String(tag)) if p.attr == subspace.dimensions[0] => {
            Some(tag.as_bytes())
        }
        _ => None,
    });
    let Some(positions) = crate::tags::tag_positions(curve, required) else {
        return vec![whole];
    };
    positions
        .into_iter()
        .filter_map(|p| whole.intersect(&[(p, p), (0, u64::MAX)]))
        .collect()
}

/// In a typed space, the subspace whose box crosses the fewest regions (each region costs a server
/// a scan, so this is the cheapest search, docs/design.md §8), among the serving ones. Ties go to
/// the subspace with fewer dimensions, then to the first declared, so the choice is deterministic
/// and every client makes the same one. `tessellations[i]` is the tessellation of
/// `schema.subspaces[i]`. (`crate::plan::choose_subspace` plans either kind of space.)
pub fn choose_typed_subspace(
    schema: &SpaceSchema,
    tessellations: &[Tessellation],
    predicates: &[CheckedPredicate],
) -> SearchPlan {
    assert_eq!(
        tessellations.len(),
        schema.subspaces.len(),
        "one tessellation per subspace"
    );
    // Only a serving subspace holds every object (the key subspace always does).
    schema
        .subspace_ids()
        .zip(tessellations)
        .filter(|(id, _)| schema.subspace(*id).is_searchable())
        .map(|(id, t)| typed_part(schema, t, id, predicates))
        .min_by_key(|plan| {
            (
                plan.regions_count,
                schema.subspace(plan.subspace).dimensions.len(),
                plan.subspace,
            )
        })
        .expect("a schema always has the key subspace")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinate::point;
    use crate::tessellation::tessellations;
    use proptest::prelude::*;
    use tessera_types::{parse_space, Attribute, AttributeType, AxisCuts, Object, Predicate};

    fn check(schema: &SpaceSchema, attr: &str, op: PredicateOp) -> CheckedPredicate {
        CheckedPredicate::check(schema, &Predicate::new(attr, op)).expect("test predicate is valid")
    }

    fn space() -> SpaceSchema {
        parse_space(
            "space t key int k attributes int x, float y, string s, list(int) l \
             subspace x, y subspace s create 64 partitions",
        )
        .expect("valid space")
    }

    #[test]
    fn equality_ranges_and_hashes() {
        let s = space();
        let xy = SubspaceId(1);
        let x = |op| check(&s, "x", op);
        let b = SearchBox::for_predicates(&s, xy, &[x(PredicateOp::Range(3.into(), 7.into()))])
            .expect("box");
        assert_eq!(
            b.ranges[0],
            (crate::coordinate(&3.into()), crate::coordinate(&7.into()))
        );
        assert_eq!(b.ranges[1], (0, u64::MAX));
        let b = SearchBox::for_predicates(
            &s,
            xy,
            &[
                x(PredicateOp::LessThan(3.into())),
                x(PredicateOp::GreaterEqual(1.into())),
            ],
        )
        .expect("box");
        assert_eq!(
            b.ranges[0],
            (crate::coordinate(&1.into()), crate::coordinate(&2.into()))
        );
        // Contradictions.
        assert_eq!(
            SearchBox::for_predicates(
                &s,
                xy,
                &[
                    x(PredicateOp::LessThan(3.into())),
                    x(PredicateOp::GreaterThan(5.into()))
                ]
            ),
            None
        );
        assert_eq!(
            SearchBox::for_predicates(
                &s,
                xy,
                &[
                    x(PredicateOp::Equals(1.into())),
                    x(PredicateOp::Equals(2.into()))
                ]
            ),
            None
        );
        assert_eq!(
            SearchBox::for_predicates(&s, xy, &[x(PredicateOp::LessThan(i64::MIN.into()))]),
            None
        );
        assert_eq!(
            SearchBox::for_predicates(&s, xy, &[x(PredicateOp::GreaterThan(i64::MAX.into()))]),
            None
        );
        assert_eq!(
            SearchBox::for_predicates(&s, xy, &[x(PredicateOp::Range(7.into(), 3.into()))]),
            None
        );
        // Strings and the key are hashed: only equality narrows them.
        let sub_s = SubspaceId(2);
        let lt = check(&s, "s", PredicateOp::LessThan("m".into()));
        assert_eq!(
            SearchBox::for_predicates(&s, sub_s, &[lt]),
            Some(SearchBox::full(1))
        );
        let k_lt = check(&s, "k", PredicateOp::LessThan(5.into()));
        assert_eq!(
            SearchBox::for_predicates(&s, SubspaceId::KEY, &[k_lt]),
            Some(SearchBox::full(1))
        );
        let k_eq = check(&s, "k", PredicateOp::Equals(5.into()));
        let c = crate::coordinate::key_coordinate(&5.into());
        assert_eq!(
            SearchBox::for_predicates(&s, SubspaceId::KEY, &[k_eq]),
            Some(SearchBox {
                ranges: vec![(c, c)]
            })
        );
        // Non-dimension predicates leave every box open.
        let l = check(&s, "l", PredicateOp::LengthEquals(2));
        assert_eq!(
            SearchBox::for_predicates(&s, xy, &[l]),
            Some(SearchBox::full(2))
        );
    }

    #[test]
    fn intersect_and_contains() {
        let b = SearchBox {
            ranges: vec![(10, 20), (0, 5)],
        };
        assert!(b.contains(&[10, 5]) && !b.contains(&[21, 0]));
        assert_eq!(
            b.intersect(&[(15, 30), (5, 9)]),
            Some(SearchBox {
                ranges: vec![(15, 20), (5, 5)]
            })
        );
        assert_eq!(b.intersect(&[(21, 30), (0, 9)]), None);
    }

    #[test]
    fn plans() {
        let s = space();
        let ts = tessellations(&s);
        // No predicate: every subspace is open; the key subspace (64) ties with s (64) and
        // beats x,y (8x8 = 64) on dimensions; key subspace declared first.
        let plan = choose_typed_subspace(&s, &ts, &[]);
        assert_eq!((plan.subspace, plan.regions_count), (SubspaceId::KEY, 64));
        // A key lookup is one region.
        let plan = choose_typed_subspace(&s, &ts, &[check(&s, "k", PredicateOp::Equals(1.into()))]);
        assert_eq!((plan.subspace, plan.regions_count), (SubspaceId::KEY, 1));
        // x fixed: 8 regions of x,y.
        let plan = choose_typed_subspace(&s, &ts, &[check(&s, "x", PredicateOp::Equals(1.into()))]);
        assert_eq!((plan.subspace, plan.regions_count), (SubspaceId(1), 8));
        // A contradiction anywhere: nothing to contact.
        let preds = [
            check(&s, "x", PredicateOp::Equals(1.into())),
            check(&s, "x", PredicateOp::Equals(2.into())),
        ];
        let plan = choose_typed_subspace(&s, &ts, &preds);
        assert_eq!(
            (plan.subspace, plan.boxes, plan.regions_count),
            (SubspaceId(1), vec![], 0)
        );
    }

    /// Keys sharing their first 8 bytes, split into many regions: a range of them reads the
    /// regions its keys reach, not every region of their one coordinate.
    #[test]
    fn key_ranges_read_the_split_regions_they_reach() {
        let mut s = tessera_types::parse_space(
            "space t key string k attributes int a create 1 partitions placement ordered",
        )
        .unwrap();
        let key = |n: u32| Value::from(format!("tweet:{n:08}"));
        // Region 0 split at tweet:…10, …20, …30, …40: regions 0, 1, 2, 3, 4 in key order.
        for (i, n) in [10, 20, 30, 40].into_iter().enumerate() {
            s.key_splits.push(tessera_types::KeySplit {
                region: i as u32,
                at: key(n),
                epoch: 1,
            });
        }
        let t = &crate::tessellation::tessellations(&s)[0];
        let range = |lo: u32, hi: u32| {
            let predicates = [
                check(&s, "k", PredicateOp::GreaterEqual(key(lo))),
                check(&s, "k", PredicateOp::LessThan(key(hi))),
            ];
            let plan = typed_part(&s, t, SubspaceId::KEY, &predicates);
            assert_eq!(plan.regions_count, plan.regions(t).len() as u64);
            plan.regions(t).iter().map(|r| r.0).collect::<Vec<_>>()
        };
        assert_eq!(range(12, 18), vec![1]);
        assert_eq!(range(15, 35), vec![1, 2, 3]);
        // Exclusive ends are planned as inclusive: `< …30` reaches the region starting there.
        assert_eq!(range(20, 30), vec![2, 3]);
        assert_eq!(range(0, 5), vec![0]);
        assert_eq!(range(45, 99), vec![4]);
    }

    // ---- property tests over random small schemas ----

    const INTS: [i64; 7] = [i64::MIN, -2, -1, 0, 1, 2, i64::MAX];
    const FLOATS: [f64; 6] = [f64::NEG_INFINITY, -1.5, 0.0, 0.5, 2.5, f64::INFINITY];
    // Two strings share their first 8 bytes: one coordinate on an ordered key axis.
    const STRINGS: [&str; 5] = ["", "a", "b", "abcdefgh1", "abcdefgh2"];

    fn primitive() -> impl Strategy<Value = PrimitiveType> {
        prop_oneof![
            Just(PrimitiveType::Int),
            Just(PrimitiveType::Float),
            Just(PrimitiveType::String)
        ]
    }

    /// A value of type `ty` from a small domain, so that equality and ranges often match.
    fn value(ty: PrimitiveType) -> BoxedStrategy<Value> {
        match ty {
            PrimitiveType::Int => prop::sample::select(&INTS[..]).prop_map(Value::Int).boxed(),
            PrimitiveType::Float => prop::sample::select(&FLOATS[..])
                .prop_map(Value::Float)
                .boxed(),
            PrimitiveType::String => prop::sample::select(&STRINGS[..])
                .prop_map(Value::from)
                .boxed(),
        }
    }

    /// A space: a key and four attributes of random primitive types, 1 to 3 subspaces of 1 to 3
    /// dimensions, 1 to 200 partitions.
    fn schema() -> impl Strategy<Value = SpaceSchema> {
        let subspaces = prop::collection::vec(
            prop::sample::subsequence(vec![1usize, 2, 3, 4], 1..=3).prop_shuffle(),
            1..=3,
        );
        (
            primitive(),
            prop::collection::vec(primitive(), 4),
            subspaces,
            1u32..200,
            0u8..3,
            any::<u64>(),
        )
            .prop_map(|(key, attrs, subspaces, partitions, placement, cutting)| {
                let attribute =
                    |name: String, ty| Attribute::new(name, AttributeType::Primitive(ty));
                let attributes = attrs
                    .iter()
                    .enumerate()
                    .map(|(i, &ty)| {
                        let mut a = attribute(format!("a{}", i + 1), ty);
                        a.domain = declared_domain(ty, cutting >> (60 + i) & 1 == 1);
                        a
                    })
                    .collect();
                let subspaces = subspaces
                    .iter()
                    .map(|dims| dims.iter().map(|i| format!("a{i}")).collect())
                    .collect();
                let schema = SpaceSchema::new(
                    "t",
                    attribute("k".into(), key),
                    attributes,
                    subspaces,
                    partitions,
                    1,
                )
                .expect("valid schema");
                // Random, or an ordered key axis: over the whole axis, or over a domain
                // narrower than the keys drawn (some fall outside it).
                let domain =
                    (key == PrimitiveType::Int).then_some((Value::Int(-3), Value::Int(40)));
                let placement = match placement {
                    0 => tessera_types::Placement::Random,
                    1 => tessera_types::Placement::Ordered { domain: None },
                    _ => tessera_types::Placement::Ordered { domain },
                };
                let mut schema = schema.with_placement(placement).expect("valid placement");
                cut_some_subspaces(&mut schema, cutting);
                if schema.keys_ordered() {
                    split_some_key_regions(&mut schema, key, cutting);
                }
                schema
            })
    }

    /// A domain for some int and float attributes (`in LOW to HIGH`), narrower than the
    /// values drawn, so that some fall below and above it.
    fn declared_domain(ty: PrimitiveType, declare: bool) -> Option<(Value, Value)> {
        match (ty, declare) {
            (PrimitiveType::Int, true) => Some((Value::Int(-1), Value::Int(1))),
            (PrimitiveType::Float, true) => Some((Value::Float(-1.5), Value::Float(2.5))),
            _ => None,
        }
    }

    /// Splits some key regions of an ordered space at keys drawn from the values searched for
    /// (strings sharing their first 8 bytes among them), as the split driver would; a split
    /// outside its region is left out by `tessellations`.
    fn split_some_key_regions(schema: &mut SpaceSchema, key: PrimitiveType, seed: u64) {
        let keys: Vec<Value> = match key {
            PrimitiveType::Int => INTS.iter().map(|&i| Value::Int(i)).collect(),
            PrimitiveType::Float => FLOATS.iter().map(|&f| Value::Float(f)).collect(),
            PrimitiveType::String => STRINGS.iter().map(|&s| Value::from(s)).collect(),
        };
        for i in 0..seed % 5 {
            let pick = (seed >> (8 * i)) as usize;
            let at = keys[(pick >> 4) % keys.len()].clone();
            // Mostly the region holding the key, so the split applies.
            let holding = crate::tessellation::key_region(
                &crate::tessellation::tessellations(schema)[0],
                &at,
            )
            .0;
            schema.key_splits.push(tessera_types::KeySplit {
                region: if pick.is_multiple_of(4) {
                    (pick >> 2) as u32 % schema.partitions
                } else {
                    holding
                },
                at,
                epoch: i,
            });
        }
    }

    /// Gives some subspaces explicit cuts, as a re-cut would: an ordered axis cut at
    /// coordinates of the values drawn (and next to them) or anywhere, a hashed one in equal
    /// slices or at random points.
    fn cut_some_subspaces(schema: &mut SpaceSchema, mut seed: u64) {
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let near_values: Vec<u64> = INTS
            .iter()
            .map(|&i| Value::Int(i))
            .chain(FLOATS.iter().map(|&f| Value::Float(f)))
            .map(|v| crate::coordinate(&v))
            .flat_map(|c| [c.saturating_sub(1), c, c.saturating_add(1)])
            .collect();
        for s in 1..schema.subspaces.len() {
            if next() % 3 == 0 || schema.subspaces[s].tags.is_some() {
                continue;
            }
            let dims = schema.subspaces[s].dimensions.len();
            let cuts = (0..dims)
                .map(|_| match next() % 3 {
                    0 => AxisCuts::Equal(1 + (next() % 4) as u32),
                    1 => {
                        let mut at: Vec<u64> = (0..next() % 6)
                            .map(|_| near_values[next() as usize % near_values.len()])
                            .collect();
                        at.sort();
                        at.dedup();
                        at.retain(|&c| c > 0);
                        AxisCuts::At(at)
                    }
                    _ => {
                        let mut at: Vec<u64> = (0..next() % 6).map(|_| next()).collect();
                        at.sort();
                        at.dedup();
                        at.retain(|&c| c > 0);
                        AxisCuts::At(at)
                    }
                })
                .collect();
            schema.subspaces[s].cuts = Some(cuts);
            schema.subspaces[s]
                .check_cuts()
                .expect("generated cuts are valid");
        }
    }

    fn object(schema: &SpaceSchema) -> BoxedStrategy<Object> {
        let types: Vec<PrimitiveType> = schema
            .attributes
            .iter()
            .map(|a| a.ty.as_primitive().expect("primitive"))
            .collect();
        types
            .into_iter()
            .map(value)
            .collect::<Vec<_>>()
            .prop_map(|values| Object { values })
            .boxed()
    }

    fn predicate(schema: &SpaceSchema) -> BoxedStrategy<CheckedPredicate> {
        let schema = schema.clone();
        (0..schema.attributes.len())
            .prop_flat_map(move |i| {
                let ty = schema.attributes[i].ty.as_primitive().expect("primitive");
                let name = schema.attributes[i].name.clone();
                let schema = schema.clone();
                (0..7u8, value(ty), value(ty)).prop_map(move |(op, a, b)| {
                    let op = match op {
                        0 => PredicateOp::Equals(a),
                        1 => PredicateOp::LessThan(a),
                        2 => PredicateOp::LessEqual(a),
                        3 => PredicateOp::GreaterThan(a),
                        4 => PredicateOp::GreaterEqual(a),
                        5 => PredicateOp::Range(a, b),
                        _ if ty == PrimitiveType::String => PredicateOp::Contains(a),
                        _ => PredicateOp::Equals(a),
                    };
                    check(&schema, &name, op)
                })
            })
            .boxed()
    }

    /// A schema, objects, and predicates (the last one is the "added" predicate of (c)).
    fn case() -> impl Strategy<Value = (SpaceSchema, Vec<Object>, Vec<CheckedPredicate>)> {
        schema().prop_flat_map(|s| {
            let objects = prop::collection::vec(object(&s), 1..8);
            let predicates = prop::collection::vec(predicate(&s), 1..4);
            (Just(s), objects, predicates)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// (a) and (b): a matching object lies in the box and its region is among the regions
        /// searched; every object has exactly one region per subspace.
        #[test]
        fn boxes_hold_every_match((s, objects, predicates) in case()) {
            let ts = tessellations(&s);
            for o in &objects {
                let matched = predicates.iter().all(|p| p.matches(o));
                for (id, t) in s.subspace_ids().zip(&ts) {
                    let p = point(&s, id, o).expect("a typed space places every object");
                    let region = crate::tessellation::region_of_object(&s, id, t, o).expect("placed");
                    let holding: Vec<RegionIndex> = (0..t.regions_count()).map(RegionIndex)
                        .filter(|&r| t.region_bounds(r).iter().zip(&p).all(|((lo, hi), c)| lo <= c && c <= hi))
                        .collect();
                    if id == SubspaceId::KEY && s.keys_ordered() {
                        // Split key ranges may share a coordinate at their boundary.
                        prop_assert!(holding.contains(&region));
                    } else {
                        prop_assert_eq!(&holding, &vec![region]);
                    }
                    if matched {
                        let b = SearchBox::for_predicates(&s, id, &predicates);
                        prop_assert!(b.is_some(), "a box that some object matches is not empty");
                        let b = b.expect("checked");
                        prop_assert!(b.contains(&p));
                        prop_assert!(b.regions(t).contains(&region));
                        // The plan too (on an ordered key axis, narrowed by key positions).
                        let plan = typed_part(&s, t, id, &predicates);
                        let planned = plan.regions(t);
                        prop_assert!(planned.contains(&region), "{:?} not in {:?}", region, planned);
                        prop_assert_eq!(plan.regions_count, planned.len() as u64);
                    }
                }
            }
        }

        /// (c) and (d): one more predicate never widens a box nor the chosen plan, and the
        /// counted regions are the listed ones.
        #[test]
        fn more_predicates_never_cost_more((s, _objects, predicates) in case()) {
            let ts = tessellations(&s);
            let (fewer, all) = (&predicates[..predicates.len() - 1], &predicates[..]);
            let count = |id: SubspaceId, ps: &[CheckedPredicate]| {
                SearchBox::for_predicates(&s, id, ps).map_or(0, |b| {
                    let t = &ts[id.get()];
                    assert_eq!(b.regions_count(t), b.regions(t).len() as u64);
                    b.regions_count(t)
                })
            };
            // The plan's count: the box's, narrowed on an ordered key axis by key positions.
            let planned = |id: SubspaceId, ps: &[CheckedPredicate]| {
                let t = &ts[id.get()];
                let plan = typed_part(&s, t, id, ps);
                assert_eq!(plan.regions_count, plan.regions(t).len() as u64);
                plan.regions_count
            };
            for id in s.subspace_ids() {
                prop_assert!(count(id, all) <= count(id, fewer));
                prop_assert!(planned(id, all) <= planned(id, fewer));
                prop_assert!(planned(id, all) <= count(id, all));
            }
            let (before, after) = (
                choose_typed_subspace(&s, &ts, fewer),
                choose_typed_subspace(&s, &ts, all),
            );
            prop_assert!(after.regions_count <= before.regions_count);
            prop_assert_eq!(after.regions_count, planned(after.subspace, all));
        }

        /// (e) and (f): fixing every dimension is one region; on a hashed subspace of d
        /// dimensions cut into n^d regions, fixing |S| - |E| dimensions crosses
        /// CR(Q) = R^(|E|/|S|) = n^|E| regions (docs/design.md §8).
        #[test]
        fn regions_contacted_match_the_model(d in 1usize..=3, n in 1u32..=6, fixed in prop::collection::vec(any::<bool>(), 3),
                                             values in prop::collection::vec(prop::sample::select(&STRINGS[..]), 3)) {
            let r = n.pow(d as u32);
            let names: Vec<String> = (1..=d).map(|i| format!("a{i}")).collect();
            let attributes = names.iter().map(|n| Attribute::new(n.clone(), AttributeType::STRING)).collect();
            let s = SpaceSchema::new("t", Attribute::new("k", AttributeType::STRING), attributes, vec![names.clone()], r, 0)
                .expect("valid schema");
            let t = Tessellation::new(d, r);
            prop_assert_eq!(t.regions_count(), r);
            let mut predicates: Vec<CheckedPredicate> = (0..d).filter(|&i| fixed[i])
                .map(|i| check(&s, &names[i], PredicateOp::Equals(values[i].into()))).collect();
            let open = d - predicates.len();
            let b = SearchBox::for_predicates(&s, SubspaceId(1), &predicates).expect("no contradiction");
            let cr = (r as f64).powf(open as f64 / d as f64).round() as u64;
            prop_assert_eq!(b.regions_count(&t), cr);
            predicates.extend((0..d).map(|i| check(&s, &names[i], PredicateOp::Equals(values[i].into()))));
            let b = SearchBox::for_predicates(&s, SubspaceId(1), &predicates).expect("no contradiction");
            prop_assert_eq!(b.regions(&t).len(), 1);
        }
    }

    #[test]
    fn model_example_two_dims_64_regions() {
        let s = space();
        let t = Tessellation::new(2, 64);
        let b = SearchBox::for_predicates(
            &s,
            SubspaceId(1),
            &[check(&s, "y", PredicateOp::Equals(1.5.into()))],
        )
        .expect("box");
        assert_eq!(b.regions_count(&t), 8);
        assert_eq!(b.regions(&t).len(), 8);
    }
}
