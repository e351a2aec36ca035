//! The web console's data (`/api/...` on a daemon's `--http` port; the page is console.html).
//!
//! The console is a client of the cluster like any other: the daemon connects to it the way its
//! own drivers do (to itself, or to its coordinators, proving the cluster secret when there is
//! one), and every answer is computed from the configuration that client holds, with the same
//! pure geometry the servers use: the regions of a subspace and who holds them, the box a
//! search becomes and whom it contacts (the client's `explain`), the value-dependent chain an
//! update would take. Object counts per region come from the servers leading the regions
//! (`Client::region_counts`), a space's statistics from the servers leading its key regions
//! (`Client::statistics`, shown as `tessera stats` prints them), a build's progress from the
//! configuration (as `tessera status` says it). Nothing here writes.

use std::sync::Arc;

use serde_json::{json, Value as Json};
use tessera_client::{Client, ClientOptions, SpaceConfig, SubspaceId};
use tessera_geometry::chain::{chain_for_update, ReplicaMap};
use tessera_geometry::search::SearchBox;
use tessera_geometry::RegionIndex;
use tessera_types::{AttrIndex, CheckedPredicate, Object, ServerId, SpaceSchema};
use tokio::sync::Mutex;

/// Why the console could not answer; each becomes an HTTP status and a one-line message.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The request itself is wrong (a missing or malformed parameter): 400.
    #[error("{0}")]
    BadRequest(String),
    /// No such space, or no such path: 404.
    #[error("{0}")]
    NotFound(String),
    /// The cluster did not answer: 503.
    #[error("the cluster did not answer: {0}")]
    Unavailable(String),
}

/// How the console reaches the cluster: the addresses a client bootstraps from, and the
/// options it connects with. Connected on first use and kept.
pub struct Console {
    addresses: String,
    options: ClientOptions,
    client: Mutex<Option<Arc<Client>>>,
}

/// The query of a request: `name=value` pairs, percent-decoded, in order.
pub type Query = Vec<(String, String)>;

impl Console {
    pub fn new(addresses: String, options: ClientOptions) -> Console {
        Console {
            addresses,
            options,
            client: Mutex::new(None),
        }
    }

    async fn client(&self) -> Result<Arc<Client>, ConsoleError> {
        let mut held = self.client.lock().await;
        if let Some(client) = held.as_ref() {
            return Ok(client.clone());
        }
        let client = Client::connect_with(&self.addresses, self.options.clone())
            .await
            .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
        let client = Arc::new(client);
        *held = Some(client.clone());
        Ok(client)
    }

    /// The answer to `GET /api/<path>?<query>`, as JSON.
    pub async fn answer(&self, path: &str, query: &Query) -> Result<Json, ConsoleError> {
        let client = self.client().await?;
        // Each answer reads the newest configuration: the console watches a changing cluster.
        client.refresh().await.map_err(unavailable)?;
        match path {
            "cluster" => Ok(crate::overview::status_json(&client).await),
            "regions" => regions(&client, query).await,
            "search" => search(&client, query).await,
            "chain" => chain(&client, query).await,
            "statistics" => statistics(&client, query).await,
            other => Err(ConsoleError::NotFound(format!(
                "no /api/{other}: the console serves cluster, regions, statistics, search and chain"
            ))),
        }
    }
}

fn unavailable(e: tessera_client::ClientError) -> ConsoleError {
    match e.status() {
        Some(tessera_client::Status::UnknownSpace) => ConsoleError::NotFound(e.to_string()),
        Some(
            tessera_client::Status::Malformed
            | tessera_client::Status::WrongType
            | tessera_client::Status::UnknownAttribute
            | tessera_client::Status::BadPredicate,
        ) => ConsoleError::BadRequest(e.to_string()),
        _ => ConsoleError::Unavailable(e.to_string()),
    }
}

/// The value of parameter `name`, which must be there.
fn required<'q>(query: &'q Query, name: &str) -> Result<&'q str, ConsoleError> {
    query
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .ok_or_else(|| ConsoleError::BadRequest(format!("give the parameter {name}")))
}

/// The space named by the `space` parameter, from the client's configuration.
fn space_of(client: &Client, query: &Query) -> Result<SpaceConfig, ConsoleError> {
    let name = required(query, "space")?;
    client
        .configuration()
        .space(name)
        .cloned()
        .ok_or_else(|| ConsoleError::NotFound(format!("no space named {name:?}")))
}

/// A subspace's dimensions by name.
fn dimension_names(space: &SpaceConfig, subspace: SubspaceId) -> Vec<String> {
    space.attribute_names(subspace)
}

/// `regions?space=S&subspace=N`: every region of the subspace with its cell along each
/// dimension, its replica set (head first) and the objects it holds (`null` where its leader
/// did not answer), and the number of intervals along each dimension, from which the page
/// draws the grid and its 2-D projections.
async fn regions(client: &Client, query: &Query) -> Result<Json, ConsoleError> {
    let space = space_of(client, query)?;
    let schema = &space.schema;
    let subspace = match query.iter().find(|(n, _)| n == "subspace") {
        None => SubspaceId::KEY,
        Some((_, text)) => text
            .parse::<u16>()
            .ok()
            .filter(|&n| usize::from(n) < schema.subspaces.len())
            .map(SubspaceId)
            .ok_or_else(|| {
                ConsoleError::BadRequest(format!(
                    "subspace {text:?}: space {:?} has subspaces 0 to {}",
                    schema.name,
                    schema.subspaces.len() - 1
                ))
            })?,
    };
    let tessellations = space.tessellations();
    let t = &tessellations[subspace.get()];
    let mut objects: Vec<Option<u64>> = vec![None; t.regions_count() as usize];
    for count in client
        .region_counts(&schema.name, subspace)
        .await
        .map_err(unavailable)?
    {
        if let Some(slot) = objects.get_mut(count.region as usize) {
            *slot = Some(count.objects);
        }
    }
    let regions: Vec<Json> = (0..t.regions_count())
        .map(|r| {
            let region = RegionIndex(r);
            json!({
                "region": r,
                "cells": t.cells_of(region),
                "replicas": space.replicas_of(subspace, region).iter().map(|s| s.0).collect::<Vec<_>>(),
                "objects": objects[r as usize],
            })
        })
        .collect();
    Ok(json!({
        "space": schema.name,
        "subspace": subspace.0,
        "subspaces": schema.subspace_ids().map(|id| subspace_entry(&space, id)).collect::<Vec<_>>(),
        "build": crate::alter::build_text(&space),
        "dimensions": dimension_names(&space, subspace),
        "intervals": (0..t.dimensions()).map(|d| t.intervals(d)).collect::<Vec<_>>(),
        "regions": regions,
    }))
}

/// A subspace as the console lists it: its entry of `tessera status --json` (state, regions,
/// whether it is cut by the data, the build's progress) with its number and dimensions.
fn subspace_entry(space: &SpaceConfig, id: SubspaceId) -> Json {
    let mut entry = crate::alter::subspace_json(space, id);
    entry["subspace"] = id.0.into();
    entry["dimensions"] = dimension_names(space, id).into();
    entry
}

/// `statistics?space=S`: the statistics of the space's values as `tessera stats S` prints
/// them (each attribute of a primitive type: count, distinct, min, max, quantiles), and how
/// many of its key regions' leaders answered.
async fn statistics(client: &Client, query: &Query) -> Result<Json, ConsoleError> {
    let space = space_of(client, query)?;
    let schema = &space.schema;
    let statistics = client.statistics(&schema.name).await.map_err(unavailable)?;
    let attributes: Vec<Json> = (0..schema.attributes.len())
        .map(|i| AttrIndex(i as u16))
        .filter(|&a| schema.attribute(a).ty.is_primitive())
        .filter_map(|a| {
            let sketch = statistics.attributes.get(a.get())?;
            Some(crate::json::attribute_statistics(schema, a, sketch))
        })
        .collect();
    Ok(json!({
        "space": schema.name,
        "attributes": attributes,
        "key_regions_counted": statistics.regions.len(),
        "key_regions": crate::alter::key_regions(&space),
    }))
}

/// The predicates of the `q` parameter: whitespace-separated, each as the CLI takes them
/// (`price<100`, `city=Paris`); `"..."` keeps spaces in one.
fn predicates_of(
    schema: &SpaceSchema,
    query: &Query,
) -> Result<Vec<tessera_client::Predicate>, ConsoleError> {
    let text = query
        .iter()
        .find(|(n, _)| n == "q")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    split_words(text)?
        .iter()
        .map(|word| {
            if schema.is_dynamic() {
                crate::predicates::parse_document_predicate(word)
            } else {
                crate::predicates::parse_predicate(schema, word)
            }
            .map_err(ConsoleError::BadRequest)
        })
        .collect()
}

/// `a "b c" d` as `["a", "b c", "d"]`: words separated by whitespace, quotes keeping spaces.
fn split_words(text: &str) -> Result<Vec<String>, ConsoleError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if quoted {
        return Err(ConsoleError::BadRequest(format!(
            "{text:?} opens a quote it does not close"
        )));
    }
    if started {
        words.push(word);
    }
    Ok(words)
}

/// `search?space=S&q=PREDICATES`: how the search would run (as `tessera explain` prints it,
/// whom it contacts included) and, for a typed space, the box it becomes in the subspace it
/// reads: per dimension, the cells it spans and the share of the axis it covers.
async fn search(client: &Client, query: &Query) -> Result<Json, ConsoleError> {
    let space = space_of(client, query)?;
    let schema = &space.schema;
    let predicates = predicates_of(schema, query)?;
    let checked = CheckedPredicate::check_all(schema, &predicates)
        .map_err(|e| ConsoleError::BadRequest(e.to_string()))?;
    let explanation = client
        .explain(&schema.name, predicates)
        .await
        .map_err(unavailable)?;
    let mut out = crate::explanation::typed_explanation(schema, &explanation, true);
    if !schema.is_dynamic() {
        let tessellations = space.tessellations();
        let t = &tessellations[explanation.subspace.get()];
        out["box"] = match SearchBox::for_predicates(schema, explanation.subspace, &checked) {
            None => Json::Null,
            Some(b) => b
                .ranges
                .iter()
                .enumerate()
                .map(|(d, &(lo, hi))| {
                    json!({
                        "cells": [t.interval_of(d, lo), t.interval_of(d, hi)],
                        "share": [axis_share(lo), axis_share(hi)],
                    })
                })
                .collect(),
        };
    }
    Ok(out)
}

/// Where `coordinate` lies along its axis, from 0 to 1.
fn axis_share(coordinate: u64) -> f64 {
    coordinate as f64 / u64::MAX as f64
}

/// The replica sets of a space's configuration, as the chain computation reads them.
struct Owners<'a>(&'a SpaceConfig);

impl ReplicaMap for Owners<'_> {
    fn replicas(&self, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
        self.0.replicas_of(subspace, region)
    }
}

/// `chain?space=S&key=K&set={"attr":value,...}` (or `&delete=1`): the value-dependent chain
/// of that update as the point leader would build it now: the object's current values (read
/// from its point leader) are the old point, those values with `set` applied the new one.
/// Nothing is written. Typed spaces only.
async fn chain(client: &Client, query: &Query) -> Result<Json, ConsoleError> {
    let space = space_of(client, query)?;
    let schema = &space.schema;
    if schema.is_dynamic() {
        return Err(ConsoleError::BadRequest(format!(
            "space {:?} is dynamic: its documents' chains depend on their shapes; the console draws typed spaces' chains",
            schema.name
        )));
    }
    let key = crate::predicates::parse_key(schema, required(query, "key")?)
        .map_err(ConsoleError::BadRequest)?;
    let delete = query.iter().any(|(n, v)| n == "delete" && v != "0");
    let set = match query.iter().find(|(n, _)| n == "set") {
        Some((_, text)) if !text.trim().is_empty() => {
            crate::json::attributes_from_json(schema, text).map_err(ConsoleError::BadRequest)?
        }
        _ => Vec::new(),
    };
    let stored = client
        .get(&schema.name, key.clone())
        .await
        .map_err(unavailable)?;
    let old = stored.as_ref().map(|record| {
        let mut object = Object::with_defaults(schema, key.clone());
        for (name, value) in &record.attributes {
            if let Some(i) = schema.attribute_index(name) {
                object.values[i.get()] = value.clone();
            }
        }
        object
    });
    let new = (!delete).then(|| {
        let mut object = old
            .clone()
            .unwrap_or_else(|| Object::with_defaults(schema, key.clone()));
        for (name, value) in &set {
            let i = schema
                .attribute_index(name)
                .expect("checked by attributes_from_json");
            object.values[i.get()] = value.clone();
        }
        object
    });
    if old.is_none() && new.is_none() {
        return Err(ConsoleError::BadRequest(format!(
            "key {key} has no object: there is nothing to delete"
        )));
    }
    let tessellations = space.tessellations();
    let hops = chain_for_update(
        schema,
        &tessellations,
        &Owners(&space),
        old.as_ref(),
        new.as_ref(),
    );
    Ok(json!({
        "space": schema.name,
        "key": crate::json::to_json(&key),
        "exists": old.is_some(),
        "operation": match (&old, &new) {
            (None, _) => "insert",
            (Some(_), Some(_)) => "update",
            (Some(_), None) => "delete",
        },
        "hops": hops.iter().map(|h| json!({
            "subspace": h.subspace.0,
            "dimensions": dimension_names(&space, h.subspace),
            "region": h.region.0,
            "cells": tessellations[h.subspace.get()].cells_of(h.region),
            "server": h.server.0,
        })).collect::<Vec<_>>(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_on_whitespace_and_quotes_keep_spaces() {
        let words = |t: &str| split_words(t).unwrap();
        assert_eq!(words(""), Vec::<String>::new());
        assert_eq!(
            words("  price<100   city=Paris "),
            ["price<100", "city=Paris"]
        );
        assert_eq!(
            words(r#"city="New York" stars>=4"#),
            ["city=New York", "stars>=4"]
        );
        assert_eq!(words(r#"name="""#), ["name="]);
        assert!(matches!(
            split_words(r#"city="New York"#),
            Err(ConsoleError::BadRequest(_))
        ));
    }

    /// Each subspace is listed with its number and dimensions, whether it is cut by data, and
    /// the build under way (here a re-cut of subspace 1 into subspace 2).
    #[test]
    fn subspaces_are_listed_with_their_cuts_and_the_build() {
        let schema = tessera_types::parse_space(
            "space s key id attributes int price subspace price create 4 partitions",
        )
        .unwrap();
        let mut space = SpaceConfig::owned_by(1, schema, &[ServerId(1)]);
        let cuts = vec![tessera_types::AxisCuts::At(vec![10, 20, 30])];
        let recut = tessera_client::SpaceChange::RecutSubspace { subspace: 1, cuts };
        space
            .alter(2, &recut, |t| {
                vec![vec![ServerId(1)]; t.regions_count() as usize]
            })
            .unwrap();
        let entries: Vec<Json> = space
            .schema
            .subspace_ids()
            .map(|id| subspace_entry(&space, id))
            .collect();
        let listed: Vec<Json> = entries
            .iter()
            .map(|e| {
                json!([
                    e["subspace"],
                    e["dimensions"][0],
                    e["state"],
                    e["cut_by_data"]
                ])
            })
            .collect();
        assert_eq!(
            Json::from(listed),
            json!([
                [0, "id", "serving", false],
                [1, "price", "serving", false],
                [2, "price", "building", true],
            ])
        );
        assert_eq!(
            (&entries[2]["backfilled"], &entries[2]["recuts"]),
            (&json!(0), &json!(1))
        );
        assert_eq!(
            crate::alter::build_text(&space).as_deref(),
            Some("re-cutting subspace 1: 0 of 4 key regions backfilled (into subspace 2)")
        );
    }

    #[test]
    fn axis_shares_run_from_zero_to_one() {
        assert_eq!(axis_share(0), 0.0);
        assert_eq!(axis_share(u64::MAX), 1.0);
        assert!((axis_share(u64::MAX / 2) - 0.5).abs() < 1e-9);
    }
}
