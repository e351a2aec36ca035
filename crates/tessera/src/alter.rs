//! `tessera alter-space` (add or drop a subspace of a live space, optionally waiting for the
//! build), what `tessera status` and `tessera list-spaces --describe` say of each subspace,
//! and `tessera advise --apply` (the advised subspaces made real, one change at a time).

use std::collections::BTreeSet;
use std::time::Duration;

use tessera_client::{Client, ClientError, SpaceChange, SpaceConfig, SubspaceId, SubspaceState};

use crate::failure::Failure;
use crate::fitting;
use crate::stdio::print_line;

/// A subspace's attributes, by name, in its dimensions' order.
pub fn attribute_names(space: &SpaceConfig, id: SubspaceId) -> Vec<String> {
    space.attribute_names(id)
}

fn state_name(state: SubspaceState) -> &'static str {
    match state {
        SubspaceState::Serving => "serving",
        SubspaceState::Building => "building",
        SubspaceState::Dropped => "dropped",
    }
}

/// The key regions of a space: what a build backfills, one by one.
pub(crate) fn key_regions(space: &SpaceConfig) -> usize {
    space.replicas.first().map_or(0, Vec::len)
}

/// (backfilled, key regions) of the subspace `id` when it is the one being built.
fn progress(space: &SpaceConfig, id: SubspaceId) -> Option<(usize, usize)> {
    space
        .build
        .as_ref()
        .filter(|b| b.subspace == id)
        .map(|b| (b.done.len(), key_regions(space)))
}

/// Subspaces writes go through (serving and building), the key subspace included.
pub fn written_count(space: &SpaceConfig) -> usize {
    space.schema.written_subspaces().count()
}

/// `subspace 2: city, price (building, 3/64 key regions backfilled)`.
pub fn subspace_text(space: &SpaceConfig, id: SubspaceId) -> String {
    let state = space.schema.subspace(id).state;
    let detail = match progress(space, id) {
        Some((done, total)) if state == SubspaceState::Building => {
            let recut = match space.build.as_ref().and_then(|b| b.replaces) {
                Some(old) => format!("re-cutting subspace {}, ", old.0),
                None => String::new(),
            };
            format!("building, {recut}{done}/{total} key regions backfilled")
        }
        _ => state_name(state).to_owned(),
    };
    let over = match space.schema.kind {
        tessera_types::SpaceKind::Dynamic { dimensions } if id == tessera_types::UNISPACE => {
            format!(
                "the unispace, {dimensions} axes of hashed property names, {} shapes of document",
                space.shapes.len()
            )
        }
        _ => match &space.schema.subspace(id).overlay {
            Some(overlay) => {
                let formulas: Vec<String> = space
                    .schema
                    .formulas
                    .iter()
                    .filter(|f| f.overlays.contains(&id))
                    .map(|f| format!("{:?}", f.id))
                    .collect();
                format!("overlay {overlay} of formula {}", formulas.join(", "))
            }
            None => attribute_names(space, id).join(", "),
        },
    };
    format!("subspace {}: {over} ({detail})", id.0)
}

/// `{"id": 2, "attributes": ["city", "price"], "state": "building", "backfilled": 3,
/// "key_regions": 64}` (the last two for the subspace being built only).
pub fn subspace_json(space: &SpaceConfig, id: SubspaceId) -> serde_json::Value {
    let state = space.schema.subspace(id).state;
    let mut value = serde_json::json!({
        "id": id.0,
        "attributes": attribute_names(space, id),
        "state": state_name(state),
    });
    if let Some((done, total)) = progress(space, id) {
        value["backfilled"] = done.into();
        value["key_regions"] = total.into();
        if let Some(old) = space.build.as_ref().and_then(|b| b.replaces) {
            value["recuts"] = old.0.into();
        }
    }
    let subspace = space.schema.subspace(id);
    if state != SubspaceState::Dropped && subspace.tags.is_none() {
        let t = tessera_geometry::tessellation_of(subspace, &space.schema);
        value["regions"] = t.regions_count().into();
        value["cut_by_data"] = subspace.cuts.is_some().into();
    }
    value
}

/// Every subspace of a space, dropped ones included (ids are stable), as JSON.
pub fn subspaces_json(space: &SpaceConfig) -> Vec<serde_json::Value> {
    space
        .schema
        .subspace_ids()
        .map(|id| subspace_json(space, id))
        .collect()
}

/// The build under way, as JSON (`null` when none).
pub fn build_json(space: &SpaceConfig) -> serde_json::Value {
    match &space.build {
        None => serde_json::Value::Null,
        Some(b) => serde_json::json!({
            "subspace": b.subspace.0,
            "since": b.since,
            "done": b.done.len(),
            "total": key_regions(space),
        }),
    }
}

/// The build under way in words, as the console shows it: `re-cutting subspace 1: 3 of 64
/// key regions backfilled (into subspace 3)`, or `building subspace 3: 3 of 64 key regions
/// backfilled` for an added subspace; `None` when no build is under way.
pub fn build_text(space: &SpaceConfig) -> Option<String> {
    let build = space.build.as_ref()?;
    let (done, total) = progress(space, build.subspace)?;
    let new = build.subspace.0;
    Some(match build.replaces {
        Some(old) => format!(
            "re-cutting subspace {}: {done} of {total} key regions backfilled (into subspace {new})",
            old.0
        ),
        None => format!("building subspace {new}: {done} of {total} key regions backfilled"),
    })
}

/// The written subspace (not the key's) over exactly these attributes, in any order.
fn find_written(space: &SpaceConfig, attributes: &[String]) -> Option<SubspaceId> {
    let wanted: BTreeSet<&str> = attributes.iter().map(String::as_str).collect();
    space.schema.written_subspaces().skip(1).find(|&id| {
        let names = attribute_names(space, id);
        names.len() == attributes.len()
            && names.iter().map(String::as_str).collect::<BTreeSet<_>>() == wanted
    })
}

fn unknown_space(space: &str) -> Failure {
    Failure::Error(format!("no space named {space:?}"))
}

/// The space's configuration as the client last fetched it.
fn space_config(client: &Client, space: &str) -> Result<SpaceConfig, Failure> {
    client
        .configuration()
        .space(space)
        .cloned()
        .ok_or_else(|| unknown_space(space))
}

/// A refusal of an alteration, in words that say what was refused.
fn refused(space: &str, e: ClientError) -> Failure {
    Failure::Error(format!("cannot alter space {space:?}: {e}"))
}

/// Adds a subspace over `attributes`; returns its id and the configuration then.
async fn add(
    client: &Client,
    space: &str,
    attributes: &[String],
    fence: Option<u64>,
) -> Result<(SubspaceId, SpaceConfig), Failure> {
    // Cut from the data it is built from, when the space holds some.
    let statistics = client.statistics(space).await?;
    let config = space_config(client, space)?;
    let change = match fitting::cuts_for_added(&config, attributes, &statistics) {
        Some(cuts) => SpaceChange::AddCutSubspace {
            attributes: attributes.to_vec(),
            cuts,
        },
        None => SpaceChange::AddSubspace {
            attributes: attributes.to_vec(),
        },
    };
    client
        .alter_space_fenced(space, change, fence)
        .await
        .map_err(|e| refused(space, e))?;
    let mut config = space_config(client, space)?;
    if find_written(&config, attributes).is_none() {
        // The configuration with the change was slow to come: look once more.
        client.refresh().await?;
        config = space_config(client, space)?;
    }
    let id = find_written(&config, attributes).ok_or_else(|| {
        Failure::Error(format!(
            "the subspace over {attributes:?} was added to {space:?}, but the configuration \
             fetched since does not show it (dropped meanwhile?)"
        ))
    })?;
    Ok((id, config))
}

/// Drops subspace `id`; returns its attributes and the configuration then.
async fn drop_subspace(
    client: &Client,
    space: &str,
    id: u16,
    fence: Option<u64>,
) -> Result<(Vec<String>, SpaceConfig), Failure> {
    // Named before it goes, for the message (an id the space does not have is refused).
    let attributes = client
        .configuration()
        .space(space)
        .filter(|s| usize::from(id) < s.schema.subspaces.len())
        .map(|s| attribute_names(s, SubspaceId(id)));
    client
        .alter_space_fenced(space, SpaceChange::DropSubspace { subspace: id }, fence)
        .await
        .map_err(|e| refused(space, e))?;
    let config = space_config(client, space)?;
    let attributes = attributes.unwrap_or_else(|| attribute_names(&config, SubspaceId(id)));
    Ok((attributes, config))
}

/// Waits until subspace `id` of `space` is built, printing its progress on stderr as the
/// backfilled key regions grow. Fails if it was dropped instead, or past `timeout`.
pub(crate) async fn wait_for(
    client: &Client,
    space: &str,
    id: SubspaceId,
    timeout: Option<Duration>,
) -> Result<SpaceConfig, Failure> {
    let mut shown = None;
    let config = client
        .wait_built_with(space, timeout, |s| {
            if let Some((done, total)) = progress(s, id) {
                if shown != Some(done) {
                    shown = Some(done);
                    eprintln!(
                        "tessera: building subspace {} of {space:?}: {done}/{total} key regions backfilled",
                        id.0
                    );
                }
            }
        })
        .await?;
    // No build under way: the subspace serves, or was dropped before it was built (a
    // configuration never shows a subspace building without its build).
    match config.schema.subspaces.get(id.get()).map(|s| s.state) {
        Some(SubspaceState::Serving) => Ok(config),
        _ => Err(Failure::Error(format!(
            "subspace {} of {space:?} was dropped before it was built",
            id.0
        ))),
    }
}

/// A --wait-timeout in seconds, checked (`alter-space add-subspace --wait`, `recut`,
/// `advise --apply`: the commands that wait for a build).
pub(crate) fn wait_timeout(seconds: Option<f64>) -> Result<Option<Duration>, Failure> {
    match seconds {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(Failure::Error(format!(
            "--wait-timeout must be a positive number of seconds, not {s}"
        ))),
    }
}

/// What `alter-space` was asked to do.
pub enum Alteration {
    Add {
        attributes: Vec<String>,
        wait: bool,
        wait_timeout: Option<Duration>,
    },
    Drop {
        subspace: u16,
    },
    Adapt {
        on: bool,
    },
    AddFormula {
        id: Option<String>,
        overlays: Vec<String>,
    },
}

/// `tessera alter-space SPACE add-subspace A,B [--wait] | drop-subspace N`.
pub async fn alter_space(
    client: &Client,
    space: &str,
    alteration: Alteration,
    json: bool,
) -> Result<(), Failure> {
    match alteration {
        Alteration::AddFormula { id, overlays } => {
            let texts: Vec<&str> = overlays.iter().map(String::as_str).collect();
            let spec = tessera_types::FormulaSpec::parse(id.as_deref(), &texts)
                .map_err(|e| Failure::Error(e.to_string()))?;
            let id = client.add_formula(space, spec).await?;
            let config = client.refresh().await?;
            let subspaces: Vec<u16> = config
                .space(space)
                .and_then(|s| s.schema.formula_subspaces(&id))
                .map(|ids| ids.iter().map(|s| s.0).collect())
                .unwrap_or_default();
            if json {
                return print_line(&serde_json::json!({
                    "space": space,
                    "action": "add-formula",
                    "formula": id,
                    "subspaces": subspaces,
                    "epoch": config.epoch.0,
                }));
            }
            println!("formula {id:?} of {space} is ready: its documents are placed in subspaces {subspaces:?}");
            Ok(())
        }
        Alteration::Add {
            attributes,
            wait,
            wait_timeout,
        } => {
            let attributes: Vec<String> = attributes
                .iter()
                .map(|a| a.trim().to_owned())
                .filter(|a| !a.is_empty())
                .collect();
            let (id, mut config) = add(client, space, &attributes, None).await?;
            if wait {
                if !json {
                    println!(
                        "added subspace {} ({}) to {space}; waiting until it is built",
                        id.0,
                        attribute_names(&config, id).join(", ")
                    );
                }
                config = wait_for(client, space, id, wait_timeout).await?;
            }
            let epoch = client.configuration().epoch;
            if json {
                let mut value = subspace_json(&config, id);
                value["space"] = space.into();
                value["action"] = "add-subspace".into();
                value["epoch"] = epoch.0.into();
                return print_line(&value);
            }
            let names = attribute_names(&config, id).join(", ");
            match config.schema.subspace(id).state {
                SubspaceState::Serving if wait => println!(
                    "subspace {} ({names}) of {space} is built and serves searches",
                    id.0
                ),
                SubspaceState::Serving => println!(
                    "added subspace {} ({names}) to {space}: built already, it serves searches",
                    id.0
                ),
                _ => {
                    let (done, total) = progress(&config, id).unwrap_or((0, key_regions(&config)));
                    println!(
                        "added subspace {} ({names}) to {space}: building from the \
                         existing objects, {done}/{total} key regions so far; it serves searches once built \
                         (`tessera status` shows the progress)",
                        id.0
                    )
                }
            }
            Ok(())
        }
        Alteration::Adapt { on } => {
            client
                .alter_space(space, SpaceChange::SetAdapt { on })
                .await
                .map_err(|e| refused(space, e))?;
            if json {
                return print_line(&serde_json::json!({
                    "space": space,
                    "action": "adapt",
                    "adapt": on,
                    "epoch": client.configuration().epoch.0,
                }));
            }
            if on {
                println!(
                    "{space} adapts: Tessera changes its subspaces when another configuration \
                     is predicted at least 20 % faster for its workload (and by more than the model's \
                     measured error), several periods running \
                     (`tessera status` lists each change)"
                );
            } else {
                println!("{space} no longer adapts: its subspaces change only when you alter them");
            }
            Ok(())
        }
        Alteration::Drop { subspace } => {
            let (attributes, config) = drop_subspace(client, space, subspace, None).await?;
            let epoch = client.configuration().epoch;
            if json {
                let mut value = subspace_json(&config, SubspaceId(subspace));
                value["space"] = space.into();
                value["action"] = "drop-subspace".into();
                value["epoch"] = epoch.0.into();
                return print_line(&value);
            }
            println!(
                "dropped subspace {subspace} ({}) of {space}: no search uses it and no \
                 write goes through it; its id is not reused",
                attributes.join(", ")
            );
            Ok(())
        }
    }
}

/// What `advise --apply` changes to get from the space's written subspaces to `advised`
/// (attribute sets compared in any order; the key subspace is never touched): the subspaces
/// to add, in the advice's order, and the ids to drop.
fn plan(space: &SpaceConfig, advised: &[Vec<String>]) -> (Vec<Vec<String>>, Vec<SubspaceId>) {
    let set = |names: &[String]| -> BTreeSet<String> { names.iter().cloned().collect() };
    let mut missing: Vec<&Vec<String>> = advised.iter().collect();
    let mut extra = Vec::new();
    for id in space.schema.written_subspaces().skip(1) {
        let have = set(&attribute_names(space, id));
        match missing.iter().position(|a| set(a) == have) {
            Some(i) => {
                missing.remove(i);
            }
            None => extra.push(id),
        }
    }
    (missing.into_iter().cloned().collect(), extra)
}

fn action(
    what: &str,
    space: &SpaceConfig,
    id: SubspaceId,
    epoch: u64,
    attributes: Vec<String>,
) -> serde_json::Value {
    serde_json::json!({
        "action": what,
        "space": space.schema.name,
        "subspace": id.0,
        "attributes": attributes,
        "epoch": epoch,
    })
}

/// `tessera advise --apply`: makes the space's subspaces those of `advised` (see
/// [`apply_with`]), printing one JSON line per change.
pub async fn apply(
    client: &Client,
    space: &str,
    advised: &[Vec<String>],
    wait_timeout: Option<Duration>,
) -> Result<(), Failure> {
    apply_with(client, space, advised, wait_timeout, None, print_line).await
}

/// Makes the space's subspaces those of `advised`, one change at a time. A build under way
/// of a subspace the advice does not keep is dropped first; one it keeps is waited for. Then
/// each missing subspace is added and waited for (one build at a time), and last the
/// subspaces the advice does not have are dropped. Each change, and at the end the outcome,
/// goes to `report` as a JSON value (`advise --apply` prints them; the adaptation driver logs
/// them). `fence`: the adaptation driver's Raft term, which fences each change
/// (`tessera_protocol::check_fence`); `None` for a user's.
pub async fn apply_with(
    client: &Client,
    space: &str,
    advised: &[Vec<String>],
    wait_timeout: Option<Duration>,
    fence: Option<u64>,
    mut report: impl FnMut(&serde_json::Value) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let epoch = |client: &Client| client.configuration().epoch.0;
    client.refresh().await?;
    let start = space_config(client, space)?;
    let (to_add, to_drop) = plan(&start, advised);
    let (mut added, mut dropped) = (0, 0);
    // A build under way first: only one at a time.
    if let Some(b) = &start.build {
        if to_drop.contains(&b.subspace) {
            let (attributes, config) = drop_subspace(client, space, b.subspace.0, fence).await?;
            report(&action(
                "drop-subspace",
                &config,
                b.subspace,
                epoch(client),
                attributes,
            ))?;
            dropped += 1;
        } else {
            let config = wait_for(client, space, b.subspace, wait_timeout).await?;
            let names = attribute_names(&config, b.subspace);
            report(&action("built", &config, b.subspace, epoch(client), names))?;
        }
    }
    for attributes in &to_add {
        let (id, config) = add(client, space, attributes, fence).await?;
        let names = attribute_names(&config, id);
        report(&action(
            "add-subspace",
            &config,
            id,
            epoch(client),
            names.clone(),
        ))?;
        added += 1;
        let config = wait_for(client, space, id, wait_timeout).await?;
        report(&action("built", &config, id, epoch(client), names))?;
    }
    for id in to_drop {
        let current = space_config(client, space)?;
        if !current.schema.subspace(id).is_written() {
            continue; // the build dropped above
        }
        let (attributes, config) = drop_subspace(client, space, id.0, fence).await?;
        report(&action(
            "drop-subspace",
            &config,
            id,
            epoch(client),
            attributes,
        ))?;
        dropped += 1;
    }
    let config = space_config(client, space)?;
    report(&serde_json::json!({
        "action": "applied",
        "space": space,
        "added": added,
        "dropped": dropped,
        "epoch": epoch(client),
        "subspaces": subspaces_json(&config),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_types::{parse_space, ServerId};

    fn hotels() -> SpaceConfig {
        let schema = parse_space(
            "space hotels key id attributes string city, int stars, int price \
             subspace city, price subspace stars create 8 partitions",
        )
        .unwrap();
        SpaceConfig::owned_by(1, schema, &[ServerId(1)])
    }

    fn alter(space: &mut SpaceConfig, change: SpaceChange) -> SubspaceId {
        space
            .alter(2, &change, |t| {
                vec![vec![ServerId(1)]; t.regions_count() as usize]
            })
            .unwrap()
            .expect("a subspace added or dropped")
    }

    fn names(v: &[&[&str]]) -> Vec<Vec<String>> {
        v.iter()
            .map(|s| s.iter().map(|a| a.to_string()).collect())
            .collect()
    }

    #[test]
    fn subspaces_are_described_with_their_states() {
        let mut space = hotels();
        let added = alter(
            &mut space,
            SpaceChange::AddSubspace {
                attributes: vec!["price".into()],
            },
        );
        assert_eq!(added, SubspaceId(3));
        space.build.as_mut().unwrap().done = vec![0, 5];
        alter(&mut space, SpaceChange::DropSubspace { subspace: 2 });
        let texts: Vec<String> = space
            .schema
            .subspace_ids()
            .map(|id| subspace_text(&space, id))
            .collect();
        assert_eq!(
            texts,
            [
                "subspace 0: id (serving)",
                "subspace 1: city, price (serving)",
                "subspace 2: stars (dropped)",
                "subspace 3: price (building, 2/8 key regions backfilled)",
            ]
        );
        assert_eq!(written_count(&space), 3);
        assert_eq!(
            serde_json::Value::from(subspaces_json(&space)),
            serde_json::json!([
                {"id": 0, "attributes": ["id"], "state": "serving", "regions": 8, "cut_by_data": false},
                {"id": 1, "attributes": ["city", "price"], "state": "serving", "regions": 9, "cut_by_data": false},
                {"id": 2, "attributes": ["stars"], "state": "dropped"},
                {"id": 3, "attributes": ["price"], "state": "building", "backfilled": 2, "key_regions": 8, "regions": 8, "cut_by_data": false},
            ])
        );
        assert_eq!(
            build_json(&space),
            serde_json::json!({"subspace": 3, "since": 2, "done": 2, "total": 8})
        );
        assert_eq!(build_json(&hotels()), serde_json::Value::Null);
        assert_eq!(
            build_text(&space).as_deref(),
            Some("building subspace 3: 2 of 8 key regions backfilled")
        );
        assert_eq!(build_text(&hotels()), None);
        assert_eq!(
            find_written(&space, &["price".into(), "city".into()]),
            Some(SubspaceId(1))
        );
        assert_eq!(find_written(&space, &["stars".into()]), None, "dropped");
        assert_eq!(find_written(&space, &["price".into()]), Some(SubspaceId(3)));
    }

    #[test]
    fn a_recut_is_described_with_the_subspace_it_replaces() {
        let mut space = hotels();
        let cuts = vec![tessera_types::AxisCuts::At(vec![10, 20, 30])];
        let change = SpaceChange::RecutSubspace { subspace: 2, cuts };
        assert_eq!(alter(&mut space, change), SubspaceId(3));
        space.build.as_mut().unwrap().done = vec![1, 4, 6];
        assert_eq!(
            build_text(&space).as_deref(),
            Some("re-cutting subspace 2: 3 of 8 key regions backfilled (into subspace 3)")
        );
        let new = subspace_json(&space, SubspaceId(3));
        assert_eq!(
            (&new["recuts"], &new["cut_by_data"], &new["regions"]),
            (&2.into(), &true.into(), &4.into())
        );
    }

    #[test]
    fn the_plan_compares_attribute_sets_in_any_order() {
        let space = hotels();
        // Same sets, other orders: nothing to do.
        assert_eq!(
            plan(&space, &names(&[&["stars"], &["price", "city"]])),
            (vec![], vec![])
        );
        // One kept, one added, one dropped.
        assert_eq!(
            plan(&space, &names(&[&["price", "city"], &["stars", "price"]])),
            (names(&[&["stars", "price"]]), vec![SubspaceId(2)])
        );
        // Nothing advised: every subspace but the key's goes.
        assert_eq!(
            plan(&space, &[]),
            (vec![], vec![SubspaceId(1), SubspaceId(2)])
        );
        // A dropped subspace is not there to keep: it is added again (under a new id).
        let mut altered = hotels();
        alter(&mut altered, SpaceChange::DropSubspace { subspace: 2 });
        assert_eq!(
            plan(&altered, &names(&[&["city", "price"], &["stars"]])),
            (names(&[&["stars"]]), vec![])
        );
    }
}
