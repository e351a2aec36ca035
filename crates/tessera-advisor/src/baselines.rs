//! The heuristics the configurator is compared with (seed 000 §5.2.3), and the space's current
//! configuration. Each counts an attribute's weight as the probability of the searches naming
//! it: the heuristics are about searches (a modification's attributes only cost).

use serde::{Deserialize, Serialize};
use tessera_types::constants::{SUBSPACES_MAX, SUBSPACE_DIMENSIONS_MAX};
use tessera_types::{AttrIndex, SpaceSchema};

use crate::configuration::Configuration;
use crate::workload::{Operation, QueryClass, Workload};

/// A baseline configuration's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BaselineName {
    /// The subspaces the space has now.
    Current,
    /// No subspace: Tessera as a plain key-value store.
    NoSubspace,
    /// One subspace of every attribute the searches name.
    Hyperspace,
    /// One subspace per attribute the searches name.
    SubspacesAll,
    /// One subspace: the attribute the searches name most.
    Dominant,
    /// Repeatedly a subspace of the attribute most named by the searches not yet served, until
    /// every search is served.
    Greedy,
}

/// Every baseline, in the order of [`BaselineName`].
pub fn baselines(schema: &SpaceSchema, workload: &Workload) -> Vec<(BaselineName, Configuration)> {
    let searches: Vec<&QueryClass> = workload
        .classes()
        .iter()
        .filter(|c| matches!(c.operation, Operation::Search { .. }))
        .collect();
    let all = by_weight(schema, &searches);
    let mut hyperspace: Vec<AttrIndex> =
        all.iter().take(SUBSPACE_DIMENSIONS_MAX).copied().collect();
    hyperspace.sort();
    let mut each: Vec<AttrIndex> = all.iter().take(SUBSPACES_MAX - 1).copied().collect();
    each.sort();
    let one = |attrs: Vec<AttrIndex>| {
        Configuration::from_checked(attrs.into_iter().map(|a| vec![a]).collect())
    };
    vec![
        (BaselineName::Current, Configuration::of_schema(schema)),
        (BaselineName::NoSubspace, Configuration::none()),
        (
            BaselineName::Hyperspace,
            Configuration::from_checked(if hyperspace.is_empty() {
                vec![]
            } else {
                vec![hyperspace]
            }),
        ),
        (BaselineName::SubspacesAll, one(each)),
        (
            BaselineName::Dominant,
            one(all.first().copied().into_iter().collect()),
        ),
        (BaselineName::Greedy, one(greedy(schema, searches))),
    ]
}

/// The attributes that can be dimensions (primitive, not the key) named by `searches`, the
/// heaviest first (ties: schema order).
fn by_weight(schema: &SpaceSchema, searches: &[&QueryClass]) -> Vec<AttrIndex> {
    let mut weights: Vec<(AttrIndex, f64)> = Vec::new();
    for class in searches {
        let Operation::Search { predicates, .. } = &class.operation else {
            continue;
        };
        for &(attr, _) in predicates {
            if attr == AttrIndex::KEY || !schema.attribute(attr).ty.is_primitive() {
                continue;
            }
            match weights.iter_mut().find(|(a, _)| *a == attr) {
                Some((_, w)) => *w += class.probability,
                None => weights.push((attr, class.probability)),
            }
        }
    }
    weights.sort_by(|(a, wa), (b, wb)| wb.total_cmp(wa).then(a.cmp(b)));
    weights.into_iter().map(|(a, _)| a).collect()
}

fn greedy(schema: &SpaceSchema, mut searches: Vec<&QueryClass>) -> Vec<AttrIndex> {
    let mut chosen = Vec::new();
    while chosen.len() < SUBSPACES_MAX - 1 {
        let Some(&attr) = by_weight(schema, &searches).first() else {
            break;
        };
        chosen.push(attr);
        searches.retain(|c| match &c.operation {
            Operation::Search { predicates, .. } => !predicates.iter().any(|(a, _)| *a == attr),
            _ => false,
        });
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_workload;
    use tessera_types::parse_space;

    #[test]
    fn the_heuristics_of_seed_000() {
        let schema = parse_space(
            "space hotels key id attributes string city, int stars, int price, string tel, set(string) tags \
             subspace tel create 64 partitions",
        )
        .expect("valid space");
        let workload = parse_workload(
            r#"{"p": 0.3, "search": {"city": "eq", "tags": "eq"}}
               {"p": 0.25, "search": {"stars": "eq", "price": "range"}}
               {"p": 0.15, "search": {"price": "range", "id": "eq"}}
               {"p": 0.1, "search": {"stars": "eq"}}
               {"p": 0.2, "update": ["tel"]}"#,
            &schema,
        )
        .expect("valid workload");
        let names: Vec<(BaselineName, Vec<Vec<String>>)> = baselines(&schema, &workload)
            .into_iter()
            .map(|(n, c)| (n, c.names(&schema)))
            .collect();
        let v = |s: &[&[&str]]| {
            s.iter()
                .map(|d| d.iter().map(|a| a.to_string()).collect())
                .collect::<Vec<Vec<String>>>()
        };
        assert_eq!(
            names,
            vec![
                (BaselineName::Current, v(&[&["tel"]])),
                (BaselineName::NoSubspace, v(&[])),
                // Neither the key nor a set can be a dimension; tel is only updated.
                (BaselineName::Hyperspace, v(&[&["city", "stars", "price"]])),
                (
                    BaselineName::SubspacesAll,
                    v(&[&["city"], &["stars"], &["price"]])
                ),
                // price 0.4, stars 0.35, city 0.3.
                (BaselineName::Dominant, v(&[&["price"]])),
                // price serves 0.4; then stars (0.1) and city (0.3) remain: city, then stars.
                (
                    BaselineName::Greedy,
                    v(&[&["price"], &["city"], &["stars"]])
                ),
            ]
        );
        let json = serde_json::to_string(&BaselineName::SubspacesAll).expect("serializes");
        assert_eq!(json, "\"subspaces-all\"");
    }
}
