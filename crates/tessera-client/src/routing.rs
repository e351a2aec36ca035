//! Routing as pure functions: which server a key's requests go to, which
//! replica serves each region a search crosses, and the checks a cluster client makes itself
//! because no single server sees the whole request (docs/design.md §4-§5).
//!
//! * A key's requests go to its **point leader**: the first server of the replica set of the
//!   key's region in the key subspace (subspace 0). Never a state transfer's target, which is
//!   always the set's last member, after at least one other.
//! * A search runs on the subspace `tessera_geometry::choose_subspace` picks (every client and
//!   server makes the same choice), crosses the regions of its box there, and asks **one replica
//!   per region** among those that hold all of it ([`SpaceConfig::complete_replicas`]: not a
//!   transfer's target still catching up, which would miss what it has not received yet): search
//!   number `turn` asks complete replica `(turn + region) mod K` of each region, so successive
//!   searches rotate over every complete replica.
//! * Predicates, keys, sort attributes and funcalls are checked against the schema with the
//!   functions the server uses, and refused with the statuses a server would answer.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tessera_geometry::{cover_regions, RegionIndex};
use tessera_protocol::{
    funcall_status, predicate_status, sort_status, Configuration, ErrorReply, Explanation,
    RegionsOf, SearchAnswer, ServerState, SpaceConfig, SpaceMap, Status,
};
use tessera_types::constants::KEY_BYTES_MAX;
use tessera_types::{
    AttributeType, CheckedFuncall, CheckedPredicate, Funcall, Placement, Predicate, PrimitiveType,
    ServerId, SortKey, SpaceSchema, SubspaceId, Value,
};

use crate::error::ClientError;

/// A configuration and what routing derives from it, computed once per epoch.
#[derive(Debug)]
pub(crate) struct Routes {
    pub(crate) config: Arc<Configuration>,
    /// Per space name, its configuration with the tessellations of its subspaces.
    spaces: HashMap<String, SpaceMap>,
    /// The one address every server of the configuration is reached at, if there is one: a
    /// standalone server's, which the client knows by the address it was given (the server
    /// records the one it listens on).
    via: Option<String>,
}

impl Routes {
    pub(crate) fn new(config: Arc<Configuration>, via: Option<&str>) -> Routes {
        let spaces = config
            .spaces
            .iter()
            .map(|s| (s.schema.name.clone(), SpaceMap::new(s.clone())))
            .collect();
        let via = via.map(str::to_owned);
        Routes {
            config,
            spaces,
            via,
        }
    }

    /// A space of this configuration, by name.
    pub(crate) fn space(&self, name: &str) -> Option<&SpaceMap> {
        self.spaces.get(name)
    }

    /// The address of a server, if this configuration names it.
    pub(crate) fn address(&self, server: ServerId) -> Option<&str> {
        let info = self.config.server(server)?;
        Some(self.via.as_deref().unwrap_or(&info.address))
    }
}

/// A refusal built here, in the words a server would use.
pub(crate) fn refused(status: Status, message: impl Into<String>) -> ClientError {
    ClientError::from(ErrorReply::new(status, message))
}

pub(crate) fn unknown_space(name: &str) -> ClientError {
    refused(Status::UnknownSpace, format!("no space named {name:?}"))
}

/// Why the server at `address`, to which a request went in epoch `sent`, no longer serves in
/// `config`: the coordinators took it out of the chains since (Offline or Resting, or gone
/// from the configuration). `None` while it serves, or when `config` is not newer than `sent`.
pub(crate) fn taken_out(
    config: &Configuration,
    address: &str,
    sent: tessera_types::Epoch,
) -> Option<String> {
    if config.epoch <= sent {
        return None;
    }
    let epoch = config.epoch.0;
    match config.servers.iter().find(|s| s.address == address) {
        None => Some(format!(
            "the server at {address} left the configuration (epoch {epoch})"
        )),
        Some(s) if matches!(s.state, ServerState::Offline | ServerState::Resting) => Some(format!(
            "the coordinators took server {} out of the chains (epoch {epoch})",
            s.id
        )),
        Some(_) => None,
    }
}

/// The key converted to the space's key type (routing hashes the converted key, as the
/// server stores it), or the server's `WrongType` / `TooLarge` refusal.
pub(crate) fn check_key(schema: &SpaceSchema, key: Value) -> Result<Value, ClientError> {
    let ty = schema.key().ty;
    let given = key.kind_name();
    let key = ty.coerce(key).ok_or_else(|| {
        refused(
            Status::WrongType,
            format!(
                "the key of space {:?} is a {ty}, not a {given}",
                schema.name
            ),
        )
    })?;
    if let Value::String(s) = &key {
        if s.len() > KEY_BYTES_MAX {
            return Err(refused(
                Status::TooLarge,
                format!(
                    "a key of {} bytes is over the {KEY_BYTES_MAX}-byte limit",
                    s.len()
                ),
            ));
        }
    }
    Ok(key)
}

/// The replicas a search may ask for a region: its complete replicas (all but a transfer's
/// target still catching up), empty when the configuration has none for it.
fn read_replicas(space: &SpaceConfig, subspace: SubspaceId, region: RegionIndex) -> &[ServerId] {
    // `complete_replicas` indexes directly, and a configuration from the network may lack
    // the region: look it up with bounds first.
    match space.replica_set(subspace, region) {
        Some(set) if !set.is_empty() => space.complete_replicas(subspace, region),
        _ => &[],
    }
}

/// The replica of `region` that search number `turn` asks among `replicas` (the region's
/// [`read_replicas`]), if there is any.
fn pick_replica(replicas: &[ServerId], region: RegionIndex, turn: u64) -> Option<ServerId> {
    if replicas.is_empty() {
        return None;
    }
    let index = turn.wrapping_add(region.0 as u64) % replicas.len() as u64;
    Some(replicas[index as usize])
}

/// Which server each region of a search is asked of: one complete replica per region,
/// rotating with `turn`. Every region lands in exactly one server's list, each list in the
/// order given. `Unavailable` when a region has no complete replica.
pub(crate) fn assign_regions(
    space: &SpaceConfig,
    subspace: SubspaceId,
    regions: &[RegionIndex],
    turn: u64,
) -> Result<BTreeMap<ServerId, Vec<u32>>, ClientError> {
    let mut by_server: BTreeMap<ServerId, Vec<u32>> = BTreeMap::new();
    for &region in regions {
        let server = pick_replica(read_replicas(space, subspace, region), region, turn)
            .ok_or_else(|| no_server(subspace, region))?;
        by_server.entry(server).or_default().push(region.0);
    }
    Ok(by_server)
}

/// `Unavailable`: a region a read needs has no complete replica in this configuration.
fn no_server(subspace: SubspaceId, region: RegionIndex) -> ClientError {
    refused(
        Status::Unavailable,
        format!(
            "region {} of subspace {} has no server",
            region.0,
            subspace.get()
        ),
    )
}

/// How a read over several regions picks, among each region's replicas, whom to ask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fanout {
    /// The fewest servers that together hold every region (set cover, seed 003's Figure 1),
    /// each asked for all it holds of the read; among equal covers, a different one each
    /// read, so that the load spreads.
    #[default]
    Fewest,
    /// One replica per region, rotating from read to read: as many servers as the regions'
    /// replicas spread over.
    EachRegion,
}

/// Which replica of a key's region a get asks, in a cluster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadFrom {
    /// Any complete replica of the key region, a different one each get: gets spread over
    /// the K copies of a region. Still linearizable: a replica with an update of the key under
    /// way answers once that update is settled there (see the server's read gates).
    #[default]
    AnyReplica,
    /// The key's point leader only.
    Leader,
}

/// The server a get of `key` asks under `read_from`, for get number `turn`: the point leader,
/// or one of the key region's complete replicas, spread evenly over gets.
pub(crate) fn key_reader(
    map: &SpaceMap,
    key: &Value,
    read_from: ReadFrom,
    turn: u64,
) -> Result<ServerId, ClientError> {
    let readers = map.key_readers(key);
    match (read_from, readers.len()) {
        (_, 0) => Ok(map.point_leader(key)?),
        (ReadFrom::Leader, _) => Ok(readers[0]),
        // Mixed, so that gets of keys taken in a fixed order do not keep to one replica.
        (ReadFrom::AnyReplica, n) => {
            let mixed = turn.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
            Ok(readers[(mixed % n as u64) as usize])
        }
    }
}

/// Which server each region of a read is asked of under `fanout`, for read number `turn`.
pub(crate) fn assign_by(
    space: &SpaceConfig,
    subspace: SubspaceId,
    regions: &[RegionIndex],
    turn: u64,
    fanout: Fanout,
) -> Result<BTreeMap<ServerId, Vec<u32>>, ClientError> {
    match fanout {
        Fanout::EachRegion => assign_regions(space, subspace, regions, turn),
        Fanout::Fewest => assign_fewest(space, subspace, regions, turn),
    }
}

/// The regions of a read assigned to the fewest servers holding them all ([`cover_regions`]).
/// Ties go to the server ids lowest after rotating them by `turn`, so that equal covers take
/// turns. `Unavailable` when a region has no complete replica.
pub(crate) fn assign_fewest(
    space: &SpaceConfig,
    subspace: SubspaceId,
    regions: &[RegionIndex],
    turn: u64,
) -> Result<BTreeMap<ServerId, Vec<u32>>, ClientError> {
    let mut holders: Vec<Vec<ServerId>> = Vec::with_capacity(regions.len());
    for &region in regions {
        let replicas = read_replicas(space, subspace, region);
        if replicas.is_empty() {
            return Err(no_server(subspace, region));
        }
        holders.push(replicas.to_vec());
    }
    let mut servers: Vec<ServerId> = holders.iter().flatten().copied().collect();
    servers.sort();
    servers.dedup();
    let Some(&pivot) = servers.get((turn % servers.len().max(1) as u64) as usize) else {
        return Ok(BTreeMap::new());
    };
    // Ids shifted so that `pivot` is the lowest: a rotation of their order.
    let shift = |s: ServerId| ServerId(s.0.wrapping_sub(pivot.0));
    let shifted: Vec<Vec<ServerId>> = holders
        .iter()
        .map(|h| h.iter().copied().map(shift).collect())
        .collect();
    let cover = cover_regions(&shifted).expect("every region has a replica");
    let mut by_server: BTreeMap<ServerId, Vec<u32>> = BTreeMap::new();
    for (server, indices) in cover.servers {
        let mut asked: Vec<u32> = indices.iter().map(|&i| regions[i].0).collect();
        asked.sort_unstable();
        by_server.insert(ServerId(server.0.wrapping_add(pivot.0)), asked);
    }
    Ok(by_server)
}

/// Where one search goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SearchRoute {
    pub(crate) subspace: SubspaceId,
    /// Per server, the regions of `subspace` it is asked for. Empty when the predicates
    /// contradict each other: the search contacts nobody. In a dynamic space, a search that
    /// no registered shape can answer still asks one server for no region: shapes registered
    /// since this client's configuration are known to every server, which then says so.
    pub(crate) regions: BTreeMap<ServerId, Vec<u32>>,
}

/// Plans search number `turn`: per subspace it reads (one in a typed space; one per overlay
/// chosen in a dynamic space), the regions its boxes cross, one replica each.
#[cfg(test)]
pub(crate) fn route_search(
    map: &SpaceMap,
    predicates: &[CheckedPredicate],
    turn: u64,
) -> Result<Vec<SearchRoute>, ClientError> {
    route_search_by(map, predicates, turn, Fanout::EachRegion)
}

/// [`route_search`], picking replicas by `fanout`.
pub(crate) fn route_search_by(
    map: &SpaceMap,
    predicates: &[CheckedPredicate],
    turn: u64,
    fanout: Fanout,
) -> Result<Vec<SearchRoute>, ClientError> {
    let (space, tessellations) = (map.config(), map.tessellations());
    let mut routes = space
        .plan(tessellations, predicates)
        .into_iter()
        .map(|part| {
            let regions = part.regions(&tessellations[part.subspace.get()]);
            Ok(SearchRoute {
                subspace: part.subspace,
                regions: assign_by(space, part.subspace, &regions, turn, fanout)?,
            })
        })
        .collect::<Result<Vec<_>, ClientError>>()?;
    if space.schema.is_dynamic() && routes.iter().all(|r| r.regions.is_empty()) {
        let first = &mut routes[0];
        let probe = RegionIndex(0);
        if let Some(server) = pick_replica(read_replicas(space, first.subspace, probe), probe, turn)
        {
            first.regions.insert(server, vec![]);
        }
    }
    Ok(routes)
}

/// How search number `turn` would run: the fields a standalone server fills, with
/// `servers_contacted` the distinct replicas this client would pick.
pub(crate) fn explain(
    map: &SpaceMap,
    predicates: &[CheckedPredicate],
    turn: u64,
    fanout: Fanout,
) -> Explanation {
    let space = map.config();
    let mut explained = Explanation::of(space, map.tessellations(), predicates, |subspace, r| {
        pick_replica(read_replicas(space, subspace, r), r, turn)
    });
    // Both fan-outs, and whom this client's asks for what.
    let asked =
        |fanout| contacts(route_search_by(map, predicates, turn, fanout).unwrap_or_default());
    let (each, fewest) = (asked(Fanout::EachRegion), asked(Fanout::Fewest));
    explained.servers_each_region = Explanation::servers_in(&each);
    explained.servers_fewest = Explanation::servers_in(&fewest);
    explained.contacted = match fanout {
        Fanout::EachRegion => each,
        Fanout::Fewest => fewest,
    };
    explained.servers_contacted = Explanation::servers_in(&explained.contacted);
    explained
}

/// Whom a cluster client picking replicas by `fanout` asks for search number `turn` of
/// `space` by `predicates`: (server, subspace, regions), from the configuration alone (nothing
/// is contacted). Benchmarks count servers with it, for clusters they do not run.
pub fn search_contacts(
    space: &SpaceConfig,
    predicates: &[Predicate],
    fanout: Fanout,
    turn: u64,
) -> Result<Vec<(ServerId, SubspaceId, Vec<u32>)>, ClientError> {
    plan_search(&SpaceMap::new(space.clone()), predicates, fanout, turn)
}

/// [`search_contacts`] over a [`SpaceMap`] made already (as a cluster client makes one per
/// space and epoch): the planning a cluster client does for every search before it sends
/// anything (the predicates checked, the subspace chosen, the regions its box crosses, a
/// replica picked for each). Benchmarks time it over clusters of any size
/// (`tessera bench -w plan`).
pub fn plan_search(
    map: &SpaceMap,
    predicates: &[Predicate],
    fanout: Fanout,
    turn: u64,
) -> Result<Vec<(ServerId, SubspaceId, Vec<u32>)>, ClientError> {
    let checked = check_predicates(&map.config().schema, predicates)?;
    let routes = route_search_by(map, &checked, turn, fanout)?;
    Ok(contacts(routes))
}

/// Routes as (server, subspace, regions) triples, one per server and subspace asked.
pub(crate) fn contacts(routes: Vec<SearchRoute>) -> Vec<(ServerId, SubspaceId, Vec<u32>)> {
    routes
        .into_iter()
        .flat_map(|route| {
            let subspace = route.subspace;
            route
                .regions
                .into_iter()
                .map(move |(server, regions)| (server, subspace, regions))
        })
        .collect()
}

/// One request of a search: the regions of `parts`, asked of `server`, answered as `answer`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ask {
    pub(crate) server: ServerId,
    pub(crate) parts: Vec<RegionsOf>,
    pub(crate) answer: SearchAnswer,
    pub(crate) follow_stubs: bool,
}

/// The requests of a search routed as `routes`, and whether their answer is the search's
/// (`whole`). When one server answers every region of the plan (a standalone server always
/// does) it is sent them all in one request answered as `answer` says — a count, the first
/// matches in an order — and follows a pointer overlay's stubs itself; but stubs are followed
/// only by a server that leads every key region (it holds every document), so a plan that
/// reads a pointer overlay is whole only on such a server. Otherwise each server is asked for
/// its matches, one request per subspace, and the client merges them (an object moving between
/// regions meanwhile may be met twice, at two versions), follows the stubs, counts and sorts.
pub(crate) fn asks(
    space: &SpaceConfig,
    routes: Vec<SearchRoute>,
    answer: &SearchAnswer,
) -> (Vec<Ask>, bool) {
    let servers: BTreeSet<ServerId> = routes
        .iter()
        .flat_map(|r| r.regions.keys().copied())
        .collect();
    let reads_stubs = routes
        .iter()
        .any(|r| space.schema.pointer_overlay(r.subspace).is_some());
    let whole = match servers.iter().collect::<Vec<_>>().as_slice() {
        [only] => !reads_stubs || leads_every_key_region(space, **only),
        _ => false,
    };
    if whole {
        let server = *servers.first().expect("one server");
        let parts = routes
            .into_iter()
            .flat_map(|r| {
                let subspace = r.subspace;
                r.regions
                    .into_values()
                    .map(move |regions| RegionsOf { subspace, regions })
            })
            .collect();
        let ask = Ask {
            server,
            parts,
            answer: answer.clone(),
            follow_stubs: reads_stubs,
        };
        return (vec![ask], true);
    }
    let asks = contacts(routes)
        .into_iter()
        .map(|(server, subspace, regions)| Ask {
            server,
            parts: vec![RegionsOf { subspace, regions }],
            answer: SearchAnswer::Matches,
            follow_stubs: false,
        })
        .collect();
    (asks, false)
}

/// Whether `server` is the point leader of every key region of `space`.
fn leads_every_key_region(space: &SpaceConfig, server: ServerId) -> bool {
    space.replicas[SubspaceId::KEY.get()]
        .iter()
        .all(|set| set.first() == Some(&server))
}

/// The point leaders a `multi_get` or `multi_put` of `keys` asks, from the configuration alone.
pub fn key_leaders(
    space: &SpaceConfig,
    keys: &[Value],
) -> Result<std::collections::BTreeSet<ServerId>, ClientError> {
    let map = SpaceMap::new(space.clone());
    keys.iter()
        .map(|k| {
            let key = check_key(&space.schema, k.clone())?;
            map.point_leader(&key).map_err(ClientError::from)
        })
        .collect()
}

/// The attribute `get_by_tags` reads tags from: the tagged placement's, or the space's only
/// set(string) attribute. `WrongType` when there is none or there are several.
pub(crate) fn tags_attribute(schema: &SpaceSchema) -> Result<String, ClientError> {
    if let Placement::Tagged { attribute, .. } = &schema.placement {
        return Ok(schema.attribute(*attribute).name.clone());
    }
    let sets: Vec<&str> = schema
        .attributes
        .iter()
        .filter(|a| a.ty == AttributeType::Set(PrimitiveType::String))
        .map(|a| a.name.as_str())
        .collect();
    match sets.as_slice() {
        [only] => Ok((*only).to_owned()),
        [] => Err(refused(
            Status::WrongType,
            format!("space {:?} has no set(string) attribute to hold tags", schema.name),
        )),
        several => Err(refused(
            Status::WrongType,
            format!(
                "space {:?} has several set(string) attributes ({}): search with `contains` on the one that holds the tags, or give the space `placement tagged ATTR`",
                schema.name,
                several.join(", ")
            ),
        )),
    }
}

/// The predicates checked against the schema, or the server's refusal: `UnknownAttribute`,
/// `WrongType` (wrong operand, or an operator that does not apply), `BadPredicate` (a regex
/// that does not compile), `TooLarge` (too many predicates).
pub(crate) fn check_predicates(
    schema: &SpaceSchema,
    predicates: &[Predicate],
) -> Result<Vec<CheckedPredicate>, ClientError> {
    CheckedPredicate::check_all(schema, predicates)
        .map_err(|e| refused(predicate_status(&e), e.to_string()))
}

/// The attribute a sorted search sorts by, or the server's refusal: `UnknownAttribute`, or
/// `WrongType` for a container attribute.
pub(crate) fn check_sort_attribute(
    schema: &SpaceSchema,
    sort_by: &str,
) -> Result<SortKey, ClientError> {
    SortKey::of(schema, sort_by).map_err(|e| refused(sort_status(&e), e.to_string()))
}

/// Whether a group update's funcalls can apply to any object: `Ok(false)` when an atomic
/// operation does not fit its attribute's type (then it applies to none, as on a standalone
/// server), the server's refusal when they are wrong otherwise.
pub(crate) fn check_group_funcalls(
    schema: &SpaceSchema,
    funcalls: &[Funcall],
) -> Result<bool, ClientError> {
    match CheckedFuncall::check_all(schema, funcalls) {
        Ok(_) => Ok(true),
        Err(e) if e.is_atomic_mismatch() => Ok(false),
        Err(e) => Err(refused(funcall_status(&e), e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_geometry::{key_coordinate, key_region};
    use tessera_protocol::{BackfillRef, ServerInfo, ServerState, SpaceChange, Transfer};
    use tessera_types::{parse_space, Epoch, PredicateOp, SubspaceState};

    const HOTELS: &str = "space hotels
        key id
        attributes string city, int stars, int price, set(string) tags
        subspace city, price
        subspace stars
        create 8 partitions";

    fn schema() -> SpaceSchema {
        parse_space(HOTELS).expect("test schema parses")
    }

    /// The hotels space, region `r` of subspace `s` owned by `owners(s, r)`.
    fn space_with(owners: impl Fn(usize, usize) -> Vec<ServerId>) -> SpaceConfig {
        let mut space = SpaceConfig::owned_by(1, schema(), &[ServerId(1)]);
        for (s, regions) in space.replicas.iter_mut().enumerate() {
            for (r, set) in regions.iter_mut().enumerate() {
                *set = owners(s, r);
            }
        }
        space
    }

    fn status_of<T: std::fmt::Debug>(r: Result<T, ClientError>) -> Status {
        r.expect_err("refused").status().expect("a status")
    }

    fn point_leader(space: &SpaceConfig, key: &Value) -> Result<ServerId, ClientError> {
        Ok(SpaceMap::new(space.clone()).point_leader(key)?)
    }

    #[test]
    fn routes_index_spaces_and_servers() {
        let space = space_with(|_, r| vec![ServerId(r as u64 % 3)]);
        let config = Configuration {
            model: None,
            epoch: Epoch(4),
            servers: (0..3)
                .map(|i| ServerInfo {
                    id: ServerId(i),
                    address: format!("h:{i}"),
                    state: ServerState::Available,
                })
                .collect(),
            spaces: vec![space.clone()],
        };
        let routes = Routes::new(Arc::new(config), None);
        let found = routes.space("hotels").expect("indexed");
        assert_eq!(found.config(), &space);
        assert_eq!(found.tessellations(), space.tessellations().as_slice());
        assert!(routes.space("nope").is_none());
        assert_eq!(routes.address(ServerId(2)), Some("h:2"));
        assert_eq!(routes.address(ServerId(9)), None);
    }

    #[test]
    fn a_server_is_taken_out_once_a_newer_configuration_says_so() {
        let config = |epoch: u64, states: &[ServerState]| Configuration {
            model: None,
            epoch: Epoch(epoch),
            servers: states
                .iter()
                .enumerate()
                .map(|(i, state)| ServerInfo {
                    id: ServerId(i as u64 + 1),
                    address: format!("h:{}", i + 1),
                    state: *state,
                })
                .collect(),
            spaces: vec![],
        };
        use ServerState::*;
        let live = config(5, &[Available, Leaving]);
        assert_eq!(taken_out(&live, "h:1", Epoch(4)), None);
        assert_eq!(
            taken_out(&live, "h:2", Epoch(4)),
            None,
            "a Leaving server serves"
        );
        let out = config(5, &[Offline, Resting]);
        assert!(taken_out(&out, "h:1", Epoch(4)).is_some());
        assert!(taken_out(&out, "h:2", Epoch(4)).is_some());
        assert_eq!(
            taken_out(&out, "h:1", Epoch(5)),
            None,
            "not newer than the request"
        );
        assert!(
            taken_out(&out, "h:9", Epoch(4)).is_some(),
            "gone from the configuration"
        );
    }

    #[test]
    fn keys_are_converted_as_the_server_converts_them() {
        let float_keys = parse_space("space f key float k attributes int a").unwrap();
        assert_eq!(
            check_key(&float_keys, Value::Int(3)).unwrap(),
            Value::Float(3.0)
        );
        assert_eq!(
            status_of(check_key(&float_keys, Value::from("x"))),
            Status::WrongType
        );
        assert_eq!(
            status_of(check_key(&float_keys, Value::Float(f64::NAN))),
            Status::WrongType
        );
        let long = "k".repeat(KEY_BYTES_MAX + 1);
        assert_eq!(
            status_of(check_key(&schema(), Value::from(long))),
            Status::TooLarge
        );
    }

    #[test]
    fn a_region_without_replicas_is_unavailable() {
        let space = space_with(|_, _| vec![]);
        assert_eq!(
            status_of(point_leader(&space, &Value::from("k"))),
            Status::Unavailable
        );
        assert_eq!(
            status_of(assign_regions(&space, SubspaceId(1), &[RegionIndex(0)], 0)),
            Status::Unavailable
        );
        assert_eq!(
            assign_regions(&space, SubspaceId(1), &[], 0).unwrap(),
            BTreeMap::new()
        );
    }

    /// `plan_search` over tessellations computed once is `search_contacts`: one region for
    /// a city, a run for a price range, every region for a predicate on no dimension; and
    /// refuses what the server would.
    #[test]
    fn planning_with_cached_tessellations_is_search_contacts() {
        let space = space_with(|_, r| vec![ServerId(r as u64 % 4), ServerId(r as u64 % 4 + 4)]);
        let map = SpaceMap::new(space.clone());
        let queries = [
            vec![
                Predicate::equals("city", "Ithaca"),
                Predicate::equals("price", 40i64),
            ],
            vec![Predicate::new(
                "price",
                PredicateOp::Range(Value::Int(10), Value::Int(60)),
            )],
            vec![Predicate::new(
                "tags",
                PredicateOp::Contains(Value::from("pool")),
            )],
        ];
        let mut regions_seen = vec![];
        for predicates in &queries {
            for fanout in [Fanout::EachRegion, Fanout::Fewest] {
                for turn in 0..3 {
                    let planned = plan_search(&map, predicates, fanout, turn).unwrap();
                    assert_eq!(
                        planned,
                        search_contacts(&space, predicates, fanout, turn).unwrap()
                    );
                    let regions: usize = planned.iter().map(|(_, _, r)| r.len()).sum();
                    regions_seen.push(regions);
                }
            }
        }
        assert_eq!(regions_seen[0], 1, "city and price fixed: one region");
        assert!(regions_seen[6] > 1, "a range crosses several regions");
        assert!(
            regions_seen[12] >= regions_seen[6],
            "no dimension: every region"
        );
        assert_eq!(
            status_of(plan_search(
                &map,
                &[Predicate::equals("nope", 1i64)],
                Fanout::Fewest,
                0
            )),
            Status::UnknownAttribute
        );
    }

    /// A transfer's target holds only part of its region until the transfer completes: no
    /// search asks it there, whatever the turn, while it is asked as usual elsewhere.
    #[test]
    fn a_catching_up_target_is_never_picked() {
        let (a, b, target) = (ServerId(1), ServerId(2), ServerId(3));
        // Every region of subspace 1 gains `target`; the even ones are still catching up.
        let space = with_transfers(
            space_with(|s, _| {
                if s == 1 {
                    vec![a, b, target]
                } else {
                    vec![a, b]
                }
            }),
            |s, r| s == 1 && r % 2 == 0,
        );
        assert_eq!(space.transfers.len(), 5, "regions 0, 2, 4, 6 and 8 of nine");
        let subspace = SubspaceId(1);
        let regions: Vec<RegionIndex> = (0..9).map(RegionIndex).collect();
        let mut asked_target = std::collections::BTreeSet::new();
        for turn in 0..6 {
            let assigned = assign_regions(&space, subspace, &regions, turn).unwrap();
            for (server, list) in &assigned {
                assert!(
                    *server != target || list.iter().all(|r| r % 2 == 1),
                    "turn {turn}: {server} asked for {list:?}"
                );
                if *server == target {
                    asked_target.extend(list.iter().copied());
                }
            }
        }
        // Over three turns each region's three replicas took a turn: the complete ones still do.
        assert_eq!(asked_target, [1, 3, 5, 7].into_iter().collect());
        // With every region of subspace 1 catching up, a point search there (one region)
        // contacts one of the two others, whatever the turn, and explain counts that server.
        let all = with_transfers(
            space_with(|s, _| {
                if s == 1 {
                    vec![a, b, target]
                } else {
                    vec![a, b]
                }
            }),
            |s, _| s == 1,
        );
        let all = SpaceMap::new(all);
        let checked = check_predicates(
            &all.config().schema,
            &[
                Predicate::equals("city", "x"),
                Predicate::equals("price", 1i64),
            ],
        )
        .unwrap();
        let mut asked = std::collections::BTreeSet::new();
        for turn in 0..6 {
            let route = route_search(&all, &checked, turn).unwrap().remove(0);
            assert_eq!(route.subspace, subspace);
            let servers: Vec<ServerId> = route.regions.keys().copied().collect();
            assert_eq!(servers.len(), 1);
            assert_ne!(servers[0], target, "turn {turn}");
            asked.insert(servers[0]);
            assert_eq!(
                explain(&all, &checked, turn, Fanout::EachRegion).servers_contacted,
                1
            );
        }
        assert_eq!(
            asked,
            [a, b].into_iter().collect(),
            "the complete replicas still rotate"
        );
        // The point leader heads the set and is never the target.
        assert_eq!(point_leader(&space, &Value::from("k")).unwrap(), a);
        // A region whose only member is a catching-up target (a configuration `check` refuses)
        // has no replica to ask.
        let mut lone = space_with(|_, _| vec![target]);
        lone.transfers.push(Transfer {
            id: 1,
            subspace,
            region: RegionIndex(0),
            to: target,
            replaces: None,
        });
        assert_eq!(
            status_of(assign_regions(&lone, subspace, &[RegionIndex(0)], 0)),
            Status::Unavailable
        );
    }

    #[test]
    fn predicates_are_refused_with_the_servers_statuses() {
        let s = schema();
        let check = |p: Predicate| status_of(check_predicates(&s, &[p]));
        assert_eq!(
            check(Predicate::equals("nope", 1i64)),
            Status::UnknownAttribute
        );
        assert_eq!(check(Predicate::equals("stars", "four")), Status::WrongType);
        assert_eq!(
            check(Predicate::new("stars", PredicateOp::Regex("4".into()))),
            Status::WrongType
        );
        assert_eq!(
            check(Predicate::new("city", PredicateOp::Regex("(".into()))),
            Status::BadPredicate
        );
        let many =
            vec![Predicate::equals("stars", 1i64); tessera_types::constants::PREDICATES_MAX + 1];
        assert_eq!(status_of(check_predicates(&s, &many)), Status::TooLarge);
        assert_eq!(
            check_predicates(&s, &[Predicate::equals("price", 3i64)])
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn sort_attributes_and_group_funcalls_are_checked() {
        let s = schema();
        assert_eq!(
            check_sort_attribute(&s, "price").unwrap(),
            SortKey::Attribute(s.attribute_index("price").unwrap())
        );
        assert_eq!(
            status_of(check_sort_attribute(&s, "nope")),
            Status::UnknownAttribute
        );
        assert_eq!(
            status_of(check_sort_attribute(&s, "tags")),
            Status::WrongType
        );
        use tessera_types::{FuncallOp, NumOp};
        assert!(check_group_funcalls(
            &s,
            &[Funcall::new("stars", FuncallOp::Num(NumOp::Add), 1i64)]
        )
        .unwrap());
        // An atomic add on a string applies to no object.
        assert!(!check_group_funcalls(
            &s,
            &[Funcall::new("city", FuncallOp::Num(NumOp::Add), 1i64)]
        )
        .unwrap());
        assert_eq!(
            status_of(check_group_funcalls(&s, &[Funcall::set("nope", 1i64)])),
            Status::UnknownAttribute
        );
        assert_eq!(
            status_of(check_group_funcalls(&s, &[Funcall::set("stars", "x")])),
            Status::WrongType
        );
    }

    #[test]
    fn explain_fills_what_the_server_fills() {
        // Region r of every subspace owned by server r mod 3, then (r + 1) mod 3.
        let space = space_with(|_, r| vec![ServerId(r as u64 % 3), ServerId((r as u64 + 1) % 3)]);
        let map = SpaceMap::new(space.clone());
        let s = &space.schema;
        let checked = check_predicates(s, &[Predicate::equals("stars", 4i64)]).unwrap();
        let e = explain(&map, &checked, 0, Fanout::EachRegion);
        assert_eq!(e.subspace, SubspaceId(2));
        assert_eq!(e.dimensions, vec!["stars".to_owned()]);
        assert_eq!(e.subspace_regions, 8);
        assert_eq!(e.regions_contacted, 1);
        assert_eq!(e.servers_contacted, 1);
        assert_eq!(
            e.candidates,
            vec![(SubspaceId(0), 8), (SubspaceId(1), 9), (SubspaceId(2), 1)]
        );
        // Contradicting predicates contact nobody.
        let none = check_predicates(
            s,
            &[
                Predicate::equals("stars", 4i64),
                Predicate::equals("stars", 5i64),
            ],
        )
        .unwrap();
        let e = explain(&map, &none, 0, Fanout::EachRegion);
        assert_eq!((e.regions_contacted, e.servers_contacted), (0, 0));
        assert!(route_search(&map, &none, 0).unwrap()[0].regions.is_empty());
        // Everything: every region of the key subspace, spread over the three servers.
        let e = explain(&map, &[], 0, Fanout::EachRegion);
        assert_eq!(
            (e.subspace, e.regions_contacted, e.servers_contacted),
            (SubspaceId(0), 8, 3)
        );
    }

    /// The hotels space (subspaces 1: city, price; 2: stars), altered by `changes` in turn,
    /// region r of every written subspace owned by server r mod 3, then (r + 1) mod 3.
    fn altered(changes: &[SpaceChange]) -> SpaceConfig {
        let owners = |r: usize| vec![ServerId(r as u64 % 3), ServerId((r as u64 + 1) % 3)];
        let mut space = space_with(|_, r| owners(r));
        for (i, change) in changes.iter().enumerate() {
            space
                .alter(2 + i as u64, change, |t| {
                    (0..t.regions_count() as usize).map(owners).collect()
                })
                .expect("the change applies");
        }
        space
    }

    /// Every way a search can be planned and asked, for `predicates`: the route of a few turns
    /// and explain agree, and return the subspace searched.
    fn searched(space: &SpaceConfig, predicates: &[Predicate]) -> SubspaceId {
        let map = SpaceMap::new(space.clone());
        let checked = check_predicates(&space.schema, predicates).unwrap();
        let subspace = route_search(&map, &checked, 0).unwrap()[0].subspace;
        for turn in 1..4 {
            let route = route_search(&map, &checked, turn).unwrap().remove(0);
            assert_eq!(route.subspace, subspace);
            let e = explain(&map, &checked, turn, Fanout::EachRegion);
            assert_eq!(e.subspace, subspace);
            assert_eq!(e.servers_contacted, route.regions.len() as u64);
        }
        subspace
    }

    /// A subspace being built holds only part of the objects, a dropped one none: no search
    /// picks either, however well its dimensions fit, and nothing about them panics (a
    /// dropped subspace keeps its slot with no replica set).
    #[test]
    fn searches_skip_building_and_dropped_subspaces() {
        let stars = || vec![Predicate::equals("stars", 4i64)];
        let city = || vec![Predicate::equals("city", "x")];
        let price = || vec![Predicate::equals("price", 7i64)];
        let before = altered(&[]);
        assert_eq!(searched(&before, &stars()), SubspaceId(2));
        assert_eq!(searched(&before, &city()), SubspaceId(1));

        // Subspace 3 (price) is being built: a search on price alone would cross 1 region
        // there, 3 in subspace 1; it still goes to subspace 1.
        let add_price = SpaceChange::AddSubspace {
            attributes: vec!["price".into()],
        };
        let building = altered(std::slice::from_ref(&add_price));
        assert_eq!(
            building.schema.subspace(SubspaceId(3)).state,
            SubspaceState::Building
        );
        assert_eq!(
            building.replicas[3].len(),
            8,
            "it has regions, and chains hop there"
        );
        assert_eq!(searched(&building, &price()), SubspaceId(1));
        assert_eq!(searched(&building, &stars()), SubspaceId(2));
        // Once built it serves.
        let mut built = building.clone();
        let since = built.build.as_ref().unwrap().since;
        let done: Vec<BackfillRef> = (0..8)
            .map(|region| BackfillRef {
                space: built.id,
                subspace: SubspaceId(3),
                region,
                since,
            })
            .collect();
        assert_eq!(built.complete_backfills(&done), 8);
        assert!(built.build.is_none());
        assert_eq!(searched(&built, &price()), SubspaceId(3));

        // Subspace 2 (stars) dropped: searches on stars read every key region instead.
        let drop_stars = SpaceChange::DropSubspace { subspace: 2 };
        let dropped = altered(std::slice::from_ref(&drop_stars));
        assert!(dropped.replicas[2].is_empty());
        assert_eq!(searched(&dropped, &stars()), SubspaceId::KEY);
        assert_eq!(searched(&dropped, &city()), SubspaceId(1));
        let checked = check_predicates(&dropped.schema, &stars()).unwrap();
        let e = explain(
            &SpaceMap::new(dropped.clone()),
            &checked,
            0,
            Fanout::EachRegion,
        );
        assert_eq!((e.regions_contacted, e.servers_contacted), (8, 3));
        assert_eq!(e.candidates, vec![(SubspaceId(0), 8), (SubspaceId(1), 9)]);
        let e = explain(
            &SpaceMap::new(building.clone()),
            &checked,
            0,
            Fanout::EachRegion,
        );
        assert_eq!(
            e.candidates,
            vec![(SubspaceId(0), 8), (SubspaceId(1), 9), (SubspaceId(2), 1)],
            "serving subspaces only"
        );
        // Asking a dropped subspace's regions directly is refused, not a panic.
        assert_eq!(
            status_of(assign_regions(
                &dropped,
                SubspaceId(2),
                &[RegionIndex(0)],
                0
            )),
            Status::Unavailable
        );
        assert_eq!(
            point_leader(&dropped, &Value::from("k")).unwrap(),
            point_leader(&before, &Value::from("k")).unwrap()
        );

        // Both at once, and then subspace 1 dropped too: only the key subspace is left.
        let drop_city = SpaceChange::DropSubspace { subspace: 1 };
        let both = altered(&[drop_stars.clone(), add_price.clone()]);
        assert_eq!(
            searched(&both, &price()),
            SubspaceId(1),
            "3 regions of its 9"
        );
        assert_eq!(searched(&both, &stars()), SubspaceId::KEY);
        let only_key = altered(&[drop_stars, add_price, drop_city]);
        for p in [stars(), city(), price(), vec![]] {
            assert_eq!(searched(&only_key, &p), SubspaceId::KEY);
        }
        // Routes index an altered configuration like any other.
        let config = Configuration {
            model: None,
            epoch: Epoch(9),
            servers: vec![],
            spaces: vec![only_key.clone()],
        };
        let routes = Routes::new(Arc::new(config), None);
        let found = routes.space("hotels").unwrap();
        assert_eq!(
            found.tessellations().len(),
            found.config().schema.subspaces.len()
        );
    }

    /// `space` with a state transfer into every region of `subspace` that `into(region)`
    /// picks, its target the set's last member (as `Configuration::check` requires).
    fn with_transfers(mut space: SpaceConfig, into: impl Fn(usize, usize) -> bool) -> SpaceConfig {
        for (s, regions) in space.replicas.iter().enumerate() {
            for (r, set) in regions.iter().enumerate() {
                if set.len() >= 2 && into(s, r) {
                    space.transfers.push(Transfer {
                        id: 1,
                        subspace: SubspaceId(s as u16),
                        region: RegionIndex(r as u32),
                        to: *set.last().unwrap(),
                        replaces: None,
                    });
                }
            }
        }
        space
    }

    /// The members of a region's set a search may ask: every one that no transfer targets.
    fn readable(space: &SpaceConfig, subspace: SubspaceId, region: RegionIndex) -> Vec<ServerId> {
        let targets: Vec<ServerId> = space
            .transfers
            .iter()
            .filter(|t| t.subspace == subspace && t.region == region)
            .map(|t| t.to)
            .collect();
        space
            .replicas_of(subspace, region)
            .iter()
            .copied()
            .filter(|s| !targets.contains(s))
            .collect()
    }

    /// A space whose every region has 1 to 3 distinct replicas among servers 0..6, and some
    /// regions of 2 or more a transfer under way.
    fn any_space() -> impl Strategy<Value = SpaceConfig> {
        let sets = proptest::collection::vec(
            proptest::sample::subsequence((0..6u64).collect::<Vec<_>>(), 1..=3),
            9,
        );
        let transfers = proptest::collection::vec(any::<bool>(), 7);
        (sets, any::<u64>(), transfers).prop_map(|(sets, seed, transfers)| {
            let space = space_with(|s, r| {
                let mut set: Vec<ServerId> = sets[(s * 3 + r) % sets.len()]
                    .iter()
                    .map(|&i| ServerId(i))
                    .collect();
                // Chain order need not be sorted.
                let len = set.len();
                set.rotate_left((seed as usize + r) % len);
                set
            });
            with_transfers(space, |s, r| transfers[(s * 5 + r) % transfers.len()])
        })
    }

    fn any_key() -> impl Strategy<Value = Value> {
        "[a-z0-9]{0,12}".prop_map(Value::from)
    }

    #[test]
    fn a_key_routes_as_the_value_it_is_stored_as() {
        let config = |schema| SpaceConfig::owned_by(1, schema, &[ServerId(1)]);
        let float_keys = config(
            parse_space("space f key float k attributes int a create 64 partitions").unwrap(),
        );
        let t = float_keys.tessellations();
        for i in [-5i64, 0, 3, 1 << 40] {
            let key = check_key(&float_keys.schema, Value::Int(i)).unwrap();
            assert_eq!(
                key_region(&t[0], &key),
                t[0].region_of(&[key_coordinate(&Value::Float(i as f64))])
            );
        }
        // Int keys spread over the regions (hashed, not ordered).
        let int_keys = config(parse_space("space i key int k create 64 partitions").unwrap());
        let t = int_keys.tessellations();
        let regions: std::collections::BTreeSet<_> = (0..64i64)
            .map(|i| key_region(&t[0], &Value::Int(i)))
            .collect();
        assert!(regions.len() > 32, "{} regions", regions.len());
    }

    proptest! {
        /// A search is answered whole, as asked, by its server exactly when one server answers
        /// every region of its routes (the hotels have no pointer overlay); otherwise every
        /// server is asked for its matches once per subspace. Either way each (server, subspace,
        /// region) of the routes is asked exactly once.
        #[test]
        fn one_server_answers_a_search_whole(
            routes in proptest::collection::vec(
                (0..3u16, proptest::collection::btree_map(0..4u64, proptest::collection::vec(0..8u32, 0..3), 0..3)),
                0..3,
            ),
            count in any::<bool>(),
        ) {
            let routes: Vec<SearchRoute> = routes
                .into_iter()
                .map(|(s, by)| SearchRoute {
                    subspace: SubspaceId(s),
                    regions: by.into_iter().map(|(k, v)| (ServerId(k), v)).collect(),
                })
                .collect();
            let answer = if count { SearchAnswer::Count } else { SearchAnswer::Matches };
            let mut expected: Vec<(ServerId, SubspaceId, Vec<u32>)> = Vec::new();
            for route in &routes {
                for (server, regions) in &route.regions {
                    expected.push((*server, route.subspace, regions.clone()));
                }
            }
            let servers: BTreeSet<ServerId> = expected.iter().map(|(s, _, _)| *s).collect();
            let (asks, whole) = asks(&space_with(|_, _| vec![ServerId(1)]), routes, &answer);
            prop_assert_eq!(whole, servers.len() == 1);
            let mut asked: Vec<(ServerId, SubspaceId, Vec<u32>)> = Vec::new();
            for ask in &asks {
                prop_assert!(!ask.follow_stubs);
                if whole {
                    prop_assert_eq!(&ask.answer, &answer);
                } else {
                    prop_assert_eq!(&ask.answer, &SearchAnswer::Matches);
                    prop_assert_eq!(ask.parts.len(), 1);
                }
                for part in &ask.parts {
                    asked.push((ask.server, part.subspace, part.regions.clone()));
                }
            }
            prop_assert_eq!(asks.len(), if whole { 1 } else { expected.len() });
            asked.sort();
            expected.sort();
            prop_assert_eq!(asked, expected);
        }

        /// The point leader is the head of the replica set of the region the key hashes to.
        #[test]
        fn point_leader_heads_the_key_region(space in any_space(), key in any_key()) {
            let t = space.tessellations();
            let key = check_key(&space.schema, key).unwrap();
            let region = t[0].region_of(&[key_coordinate(&key)]);
            prop_assert_eq!(key_region(&t[0], &key), region);
            let leader = point_leader(&space, &key).unwrap();
            prop_assert_eq!(leader, space.replicas_of(SubspaceId::KEY, region)[0]);
            prop_assert!(readable(&space, SubspaceId::KEY, region).contains(&leader), "never a transfer's target");
        }

        /// Under either fan-out, every region is asked of exactly one server, a replica of that
        /// region that no transfer targets, and the lists keep the regions' order; the fewest
        /// servers are as few as any choice of replicas allows (brute force over every pick,
        /// on the first 6 regions).
        #[test]
        fn every_region_is_covered_once(
            space in any_space(),
            subspace in 0..3u16,
            picks in proptest::collection::vec(any::<bool>(), 9),
            turn in any::<u64>(),
        ) {
            let subspace = SubspaceId(subspace);
            let count = space.tessellations()[subspace.get()].regions_count();
            let regions: Vec<RegionIndex> =
                (0..count).filter(|&r| picks[r as usize % picks.len()]).map(RegionIndex).collect();
            for fanout in [Fanout::EachRegion, Fanout::Fewest] {
                let assigned = assign_by(&space, subspace, &regions, turn, fanout).unwrap();
                let mut covered: Vec<u32> = assigned.values().flatten().copied().collect();
                covered.sort();
                prop_assert_eq!(covered, regions.iter().map(|r| r.0).collect::<Vec<_>>());
                for (server, list) in &assigned {
                    prop_assert!(!list.is_empty());
                    prop_assert!(list.windows(2).all(|w| w[0] < w[1]));
                    for &r in list {
                        prop_assert!(readable(&space, subspace, RegionIndex(r)).contains(server));
                    }
                }
            }
            let few = &regions[..regions.len().min(6)];
            let choices: Vec<Vec<ServerId>> = few.iter().map(|&r| readable(&space, subspace, r)).collect();
            let mut fewest = if few.is_empty() { 0 } else { usize::MAX };
            let mut pick = vec![0usize; choices.len()];
            while !few.is_empty() {
                let used: std::collections::BTreeSet<ServerId> =
                    pick.iter().zip(&choices).map(|(&i, c)| c[i]).collect();
                fewest = fewest.min(used.len());
                let Some(d) = (0..pick.len()).rev().find(|&d| pick[d] + 1 < choices[d].len()) else {
                    break;
                };
                pick[d] += 1;
                for later in &mut pick[d + 1..] {
                    *later = 0;
                }
            }
            prop_assert_eq!(assign_fewest(&space, subspace, few, turn).unwrap().len(), fewest);
        }

        /// K successive searches ask each of a region's K replicas that hold all of it (all
        /// but a transfer's target) exactly once.
        #[test]
        fn replicas_rotate(space in any_space(), subspace in 0..3u16, region in 0..8u32, turn in any::<u64>()) {
            let subspace = SubspaceId(subspace);
            let region = RegionIndex(region % space.tessellations()[subspace.get()].regions_count());
            let set = readable(&space, subspace, region);
            let mut asked: Vec<ServerId> = (0..set.len() as u64)
                .map(|i| {
                    let assigned = assign_regions(&space, subspace, &[region], turn.wrapping_add(i)).unwrap();
                    prop_assert_eq!(assigned.len(), 1);
                    Ok(*assigned.keys().next().unwrap())
                })
                .collect::<Result<_, TestCaseError>>()?;
            asked.sort();
            let mut expected = set.clone();
            expected.sort();
            prop_assert_eq!(asked, expected);
        }

        /// Whatever states subspaces 1 and 2 are in, a search is routed to a serving subspace
        /// only, every region of its box covered, and explain agrees.
        #[test]
        fn searches_use_serving_subspaces_only(
            space in any_space(),
            states in proptest::collection::vec(0..3u8, 2),
            stars in proptest::option::of(0..6i64),
            price in proptest::option::of(0..300i64),
            city in proptest::option::of("[ab]"),
            turn in any::<u64>(),
        ) {
            let mut space = space;
            for (i, state) in states.iter().enumerate() {
                let id = i + 1;
                space.schema.subspaces[id].state = match state {
                    0 => SubspaceState::Serving,
                    1 => SubspaceState::Building,
                    _ => SubspaceState::Dropped,
                };
                if *state == 2 {
                    space.replicas[id].clear();
                    space.transfers.retain(|t| t.subspace.get() != id);
                }
            }
            let mut predicates = vec![];
            if let Some(s) = stars { predicates.push(Predicate::equals("stars", s)); }
            if let Some(p) = price { predicates.push(Predicate::equals("price", p)); }
            if let Some(c) = city { predicates.push(Predicate::equals("city", c)); }
            let map = SpaceMap::new(space.clone());
            let checked = check_predicates(&space.schema, &predicates).unwrap();
            let route = route_search(&map, &checked, turn).unwrap().remove(0);
            prop_assert!(space.schema.subspace(route.subspace).is_searchable());
            let e = explain(&map, &checked, turn, Fanout::EachRegion);
            prop_assert_eq!(e.subspace, route.subspace);
            prop_assert_eq!(e.servers_contacted, route.regions.len() as u64);
            let routed: usize = route.regions.values().map(Vec::len).sum();
            prop_assert_eq!(routed as u64, e.regions_contacted);
        }

        /// A search is routed to exactly the regions of the chosen subspace its box crosses,
        /// and explain counts what the route contacts.
        #[test]
        fn route_and_explain_agree(
            space in any_space(),
            stars in proptest::option::of(0..6i64),
            price in proptest::option::of((0..300i64, 0..300i64)),
            city in proptest::option::of("[ab]"),
            turn in any::<u64>(),
        ) {
            let mut predicates = vec![];
            if let Some(s) = stars { predicates.push(Predicate::equals("stars", s)); }
            if let Some((lo, hi)) = price {
                predicates.push(Predicate::new("price", PredicateOp::Range(Value::Int(lo), Value::Int(hi))));
            }
            if let Some(c) = city { predicates.push(Predicate::equals("city", c)); }
            let map = SpaceMap::new(space.clone());
            let t = map.tessellations();
            let checked = check_predicates(&space.schema, &predicates).unwrap();
            let route = route_search(&map, &checked, turn).unwrap().remove(0);
            let plan = space.plan(t, &checked).remove(0);
            prop_assert_eq!(route.subspace, plan.subspace);
            let expected: Vec<u32> =
                plan.regions(&t[plan.subspace.get()]).iter().map(|r| r.0).collect();
            let mut routed: Vec<u32> = route.regions.values().flatten().copied().collect();
            routed.sort();
            prop_assert_eq!(&routed, &expected);
            let e = explain(&map, &checked, turn, Fanout::EachRegion);
            prop_assert_eq!(e.regions_contacted, expected.len() as u64);
            prop_assert_eq!(e.servers_contacted, route.regions.len() as u64);
        }
    }
}
