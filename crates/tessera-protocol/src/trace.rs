//! The shapes of the requests servers served, per space: what `tessera trace` prints and what the
//! advisor reads as a workload (docs/design.md §8, issue 9). A shape keeps what decides a request's
//! cost under a subspace configuration, and nothing of its values: which attributes a search fixes
//! by equality or bounds by a range, which attributes a write sets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a search's predicates constrain one attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Constraint {
    /// Fixed to one value: a subspace dimension it names is one slice.
    Eq,
    /// Bounded (less, greater, between): a subspace dimension it names is a run of slices.
    Range,
    /// Anything else (regex, contains, length): no help in choosing regions.
    Other,
}

impl Constraint {
    /// The stronger of two constraints on one attribute: equality, then a range, then other.
    pub fn strongest(self, other: Constraint) -> Constraint {
        self.min(other)
    }
}

/// What kind of request, and the attributes that decide its cost.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RequestShape {
    Get,
    /// A search, count or sorted search: every attribute its predicates name, by name, with its
    /// strongest constraint.
    Search(Vec<(String, Constraint)>),
    /// A put or atomic operation: the attributes it sets, by name, sorted.
    Write(Vec<String>),
    Del,
}

/// How often one shape was served, and how many objects those requests matched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShapeCount {
    pub shape: RequestShape,
    /// Requests of this shape. A search that several servers shared counts once in all: each
    /// server counts its share of the regions searched.
    pub requests: f64,
    /// Objects they matched (found by gets, returned or counted by searches), in all.
    pub matched: f64,
}

/// The shapes served in one space over the last `minutes` minutes, as one server or (merged)
/// several saw them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceTrace {
    pub space: String,
    pub minutes: u32,
    /// How many servers' samples are merged here.
    pub servers: u32,
    pub shapes: Vec<ShapeCount>,
}

impl SpaceTrace {
    /// Adds `other`'s counts (another server's, same space and window) to these.
    pub fn merge(&mut self, other: SpaceTrace) {
        let mut by_shape: BTreeMap<RequestShape, (f64, f64)> = BTreeMap::new();
        for c in self.shapes.drain(..).chain(other.shapes) {
            let entry = by_shape.entry(c.shape).or_default();
            entry.0 += c.requests;
            entry.1 += c.matched;
        }
        self.shapes = by_shape
            .into_iter()
            .map(|(shape, (requests, matched))| ShapeCount {
                shape,
                requests,
                matched,
            })
            .collect();
        self.servers += other.servers;
    }

    /// Every request counted, all shapes together.
    pub fn requests(&self) -> f64 {
        self.shapes.iter().map(|c| c.requests).sum()
    }

    /// What was counted between `earlier` and this trace, both totals since the servers
    /// started (`minutes` 0). None when some count went down (a server restarted, or left
    /// the merge): the difference would not be what was served meanwhile.
    pub fn since(&self, earlier: &SpaceTrace) -> Option<SpaceTrace> {
        let before: BTreeMap<&RequestShape, &ShapeCount> =
            earlier.shapes.iter().map(|c| (&c.shape, c)).collect();
        let mut shapes = Vec::new();
        for c in &self.shapes {
            let (requests, matched) = before.get(&c.shape).map_or((c.requests, c.matched), |b| {
                (c.requests - b.requests, c.matched - b.matched)
            });
            if requests < 0.0 || matched < 0.0 {
                return None;
            }
            if requests > 0.0 {
                shapes.push(ShapeCount {
                    shape: c.shape.clone(),
                    requests,
                    matched,
                });
            }
        }
        let lost = earlier
            .shapes
            .iter()
            .any(|b| b.requests > 0.0 && !self.shapes.iter().any(|c| c.shape == b.shape));
        (!lost && self.servers == earlier.servers).then(|| SpaceTrace {
            space: self.space.clone(),
            minutes: 0,
            servers: self.servers,
            shapes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(shape: RequestShape, requests: f64, matched: f64) -> ShapeCount {
        ShapeCount {
            shape,
            requests,
            matched,
        }
    }

    fn total(servers: u32, shapes: Vec<ShapeCount>) -> SpaceTrace {
        SpaceTrace {
            space: "hotels".into(),
            minutes: 0,
            servers,
            shapes,
        }
    }

    #[test]
    fn the_difference_of_two_totals_is_what_was_served_between_them() {
        let city = RequestShape::Search(vec![("city".into(), Constraint::Eq)]);
        let earlier = total(2, vec![count(RequestShape::Get, 10.0, 9.0)]);
        let later = total(
            2,
            vec![
                count(RequestShape::Get, 10.0, 9.0),
                count(city.clone(), 4.0, 40.0),
            ],
        );
        assert_eq!(
            later.since(&earlier),
            Some(total(2, vec![count(city.clone(), 4.0, 40.0)]))
        );
        // A count that went down, a shape gone, a server fewer: a server restarted or left.
        let restarted = total(2, vec![count(RequestShape::Get, 3.0, 3.0)]);
        assert_eq!(restarted.since(&earlier), None);
        assert_eq!(total(2, vec![count(city, 1.0, 1.0)]).since(&earlier), None);
        let fewer = total(1, vec![count(RequestShape::Get, 12.0, 9.0)]);
        assert_eq!(fewer.since(&earlier), None);
    }

    #[test]
    fn equality_is_the_strongest_constraint() {
        use Constraint::*;
        assert_eq!(Range.strongest(Eq), Eq);
        assert_eq!(Other.strongest(Range), Range);
        assert_eq!(Other.strongest(Other), Other);
    }

    #[test]
    fn merging_sums_each_shape_and_the_servers() {
        let city = RequestShape::Search(vec![("city".into(), Constraint::Eq)]);
        let mut a = SpaceTrace {
            space: "hotels".into(),
            minutes: 5,
            servers: 1,
            shapes: vec![
                count(RequestShape::Get, 10.0, 9.0),
                count(city.clone(), 0.5, 40.0),
            ],
        };
        let b = SpaceTrace {
            space: "hotels".into(),
            minutes: 5,
            servers: 2,
            shapes: vec![
                count(city.clone(), 0.5, 60.0),
                count(RequestShape::Del, 3.0, 0.0),
            ],
        };
        a.merge(b);
        assert_eq!(a.servers, 3);
        assert_eq!(a.requests(), 14.0);
        let city_count = a.shapes.iter().find(|c| c.shape == city).expect("merged");
        assert_eq!((city_count.requests, city_count.matched), (1.0, 100.0));
        assert_eq!(a.shapes.len(), 3);
    }
}
