//! What a request asks, checked against the view it arrived in: the one place that turns a
//! request from a socket into typed work ([`Job`]), or into the error its client gets.
//!
//! Pure: no I/O, no locks. Everything after it meets only well-typed work (attributes exist,
//! types fit, operations apply, keys and descriptions within their limits, and this server is
//! the one to ask); what remains to fail depends on the data (a condition, an overflow).
//!
//! Every search, count and sorted search arrives as a `SearchRegions`: the regions the client
//! planned on its configuration, which this server must serve reads of. A standalone server is
//! the one-server cluster: it is sent every region of the plan, and is refused what a cluster
//! server would refuse (regions it does not have, a plan made before shapes or key splits that
//! change it).

use std::sync::Arc;

use tessera_geometry::{RegionIndex, Tessellation};
use tessera_protocol::constants::{DESCRIPTION_BYTES_MAX, KEYS_PER_REQUEST_MAX};
use tessera_protocol::{
    funcall_status, predicate_status, sort_status, ErrorReply, KeysChange, ModelConstants,
    RegionsOf, Request, RequestFrame, Response, SearchAnswer, SortOrder, SpaceChange, Status,
    WriteMode,
};
use tessera_replication::KeyWrite;

use crate::queue::LocalChange;
use tessera_types::constants::KEY_BYTES_MAX;
use tessera_types::funcall::FuncallCheckError;
use tessera_types::predicate::PredicateError;
use tessera_types::{
    parse_space, CheckedFuncall, CheckedPredicate, Epoch, FormulaError, Funcall, FuncallOp,
    Predicate, SortKey, SubspaceId, Value, FORMULA_INDEX,
};

use crate::view::{Mode, ServedSpace, View};

/// A request, validated.
#[derive(Debug)]
pub enum Job {
    /// Answered from the view alone.
    Answer(Response),
    /// A key of a region this server reads for; `last_reader` when it is the region's last
    /// reader, nearest the chain's tail (the others send a get of a pending key there).
    Get {
        space: Arc<ServedSpace>,
        key: Value,
        last_reader: bool,
    },
    Search {
        space: Arc<ServedSpace>,
        predicates: Vec<CheckedPredicate>,
        kind: SearchKind,
    },
    Write {
        space: Arc<ServedSpace>,
        write: KeyWrite,
    },
    /// `WriteKeys`: one write per key, each taken as a `Write` is.
    Writes {
        space: Arc<ServedSpace>,
        writes: Vec<KeyWrite>,
    },
    /// The shapes of the requests served in a space (`tessera trace`).
    Trace {
        space: Arc<ServedSpace>,
        minutes: u32,
    },
    /// The load of the key regions this server leads.
    KeyRegionLoads { space: Arc<ServedSpace> },
    /// The objects in each region of a subspace that this server leads.
    RegionCounts {
        space: Arc<ServedSpace>,
        subspace: SubspaceId,
    },
    /// Statistics of the values of the key regions this server leads.
    Statistics { space: Arc<ServedSpace> },
    /// Standalone: a configuration change.
    Change(LocalChange),
}

/// What a search reads.
#[derive(Debug)]
pub enum SearchKind {
    /// A search, or a cluster client's share of one: the regions of each part (a subspace,
    /// and regions of it this server serves reads of) as the client planned them — a
    /// standalone server is sent every region of the plan — answered as `answer` says.
    /// `follow_stubs`: a pointer overlay's stubs are followed to their documents in this
    /// server's store (it leads every key region); otherwise they are answered as they are.
    Regions {
        parts: Vec<(SubspaceId, Vec<RegionIndex>)>,
        answer: Answer,
        follow_stubs: bool,
    },
    /// `multi_get`: the objects of these keys, which this server leads (no predicates).
    Keys(Vec<Value>),
}

/// What a search answers with ([`SearchAnswer`], its sort attribute checked).
#[derive(Debug)]
pub enum Answer {
    /// Every match.
    Matches,
    /// How many match.
    Count,
    /// At most `limit` matches ordered by `by`, ties by key.
    Sorted {
        by: SortKey,
        limit: usize,
        order: SortOrder,
    },
}

/// Checks `frame` against `view`.
pub fn validate(frame: RequestFrame, view: &View) -> Result<Job, ErrorReply> {
    let epoch = view.epoch();
    if frame.epoch > epoch {
        return Err(ErrorReply::new(
            Status::StaleEpoch,
            format!(
                "request built on epoch {} but this server is at {epoch}; retry",
                frame.epoch
            ),
        ));
    }
    if view.mode == Mode::Cluster {
        refuse_in_cluster(&frame.request)?;
    }
    let space = |name: &str| view.space(name);
    match frame.request {
        Request::GetConfig => Ok(Job::Answer(Response::Config(Box::new(
            (*view.config).clone(),
        )))),
        Request::Get { space: name, key } => {
            let space = space(&name)?;
            let (key, last_reader) = check_read_key(&space, key, view)?;
            Ok(Job::Get {
                space,
                key,
                last_reader,
            })
        }
        Request::GetMany { space: name, keys } => get_many(space(&name)?, keys, view),
        Request::SearchRegions {
            space: name,
            predicates,
            parts,
            answer,
            follow_stubs,
        } => {
            let space = space(&name)?;
            let predicates = check_predicates(&space, &predicates)?;
            let answer = check_answer(&space, answer)?;
            let kind = search_regions(
                &space,
                &predicates,
                frame.epoch,
                parts,
                answer,
                follow_stubs,
            )?;
            Ok(Job::Search {
                space,
                predicates,
                kind,
            })
        }
        Request::AddSpace { description } => add_space(&description),
        Request::RmSpace { name } => Ok(Job::Change(LocalChange::RmSpace(name))),
        Request::AlterSpace {
            space,
            change,
            fence,
        } => alter_space(space, change, fence),
        Request::SetModel { constants } => set_model(constants),
        Request::KeyRegionLoads { space: name } => Ok(Job::KeyRegionLoads {
            space: space(&name)?,
        }),
        Request::RegionCounts {
            space: name,
            subspace,
        } => {
            let space = space(&name)?;
            check_subspace(&space, subspace)?;
            Ok(Job::RegionCounts { space, subspace })
        }
        Request::Statistics { space: name } => Ok(Job::Statistics {
            space: space(&name)?,
        }),
        Request::Trace {
            space: name,
            minutes,
        } => Ok(Job::Trace {
            space: space(&name)?,
            minutes,
        }),
        Request::RegisterServer { .. }
        | Request::Heartbeat { .. }
        | Request::TransfersDone { .. }
        | Request::RestServer { .. }
        | Request::Decommission { .. }
        | Request::WaitConfig { .. }
        | Request::CoordinatorStatus => Err(ErrorReply::new(
            Status::Malformed,
            "this is a server; that request is for a coordinator",
        )),
        Request::Authenticate { .. }
        | Request::ClusterChallenge { .. }
        | Request::ClusterProof { .. } => Err(ErrorReply::new(
            Status::Internal,
            "the connection's session answers the steps of authenticating",
        )),
        Request::PeerHello { .. } => Err(ErrorReply::new(
            Status::Malformed,
            "a peer's hello must be the first request of its connection",
        )),
        Request::Put {
            space: name,
            key,
            mode,
            conditions,
            funcalls,
        } => put(space(&name)?, key, mode, &conditions, &funcalls),
        Request::Del {
            space: name,
            key,
            conditions,
        } => {
            let space = space(&name)?;
            let key = check_key(&space, key)?;
            let conditions = check_predicates(&space, &conditions)?;
            Ok(Job::Write {
                space,
                write: KeyWrite::Del { key, conditions },
            })
        }
        Request::WriteKeys {
            space: name,
            keys,
            conditions,
            change,
        } => write_keys(space(&name)?, keys, &conditions, change),
    }
}

/// A `WriteKeys`: every key checked as a single write's is, the conditions and funcalls once;
/// anything wrong refuses the whole request. Whether this server leads each key is the chain's
/// to say, key by key, as for a single write.
fn write_keys(
    space: Arc<ServedSpace>,
    keys: Vec<Value>,
    conditions: &[Predicate],
    change: KeysChange,
) -> Result<Job, ErrorReply> {
    check_key_count(&keys, "write_keys")?;
    let keys = keys
        .into_iter()
        .map(|k| check_key(&space, k))
        .collect::<Result<Vec<_>, _>>()?;
    let conditions = check_predicates(&space, conditions)?;
    let funcalls = match change {
        KeysChange::Delete => None,
        KeysChange::Update(funcalls) => {
            let funcalls = CheckedFuncall::check_all(&space.config().schema, &funcalls)
                .map_err(funcall_error)?;
            check_formula(&space, &funcalls)?;
            Some(funcalls)
        }
    };
    let writes = keys
        .into_iter()
        .map(|key| match &funcalls {
            None => KeyWrite::Del {
                key,
                conditions: conditions.clone(),
            },
            Some(funcalls) => KeyWrite::Put {
                key,
                mode: WriteMode::UpdateOnly,
                conditions: conditions.clone(),
                funcalls: funcalls.clone(),
            },
        })
        .collect();
    Ok(Job::Writes { space, writes })
}

/// A formula id: text.
fn formula_id(value: &Value) -> Option<&str> {
    match value {
        Value::String(id) => id.as_str(),
        _ => None,
    }
}

fn writes_formula(space: &ServedSpace, f: &CheckedFuncall) -> bool {
    space.config().schema.is_dynamic() && f.attr == FORMULA_INDEX
}

/// A put that names a dynamic space's document formula sets it to one the space has made
/// ready: `WrongType` for an atomic operation on it or a formula the space does not have,
/// `Unavailable` (retry) for one still being registered.
fn check_formula(space: &ServedSpace, funcalls: &[CheckedFuncall]) -> Result<(), ErrorReply> {
    for f in funcalls.iter().filter(|f| writes_formula(space, f)) {
        let (FuncallOp::Set, Some(id)) = (&f.op, formula_id(&f.arg)) else {
            return Err(ErrorReply::new(
                Status::WrongType,
                "a document's formula is set by a put, to a formula id",
            ));
        };
        space.config().formula_usable(id).map_err(|e| {
            let status = match e {
                FormulaError::NotReady(_) => Status::Unavailable,
                _ => Status::WrongType,
            };
            ErrorReply::new(status, e.to_string())
        })?;
    }
    Ok(())
}

/// What a cluster server leaves to others: space changes to the coordinators.
fn refuse_in_cluster(request: &Request) -> Result<(), ErrorReply> {
    let why = match request {
        Request::AddSpace { .. }
        | Request::RmSpace { .. }
        | Request::AlterSpace { .. }
        | Request::SetModel { .. } => "send configuration changes to a coordinator",
        _ => return Ok(()),
    };
    Err(ErrorReply::new(
        Status::Malformed,
        format!("this server is part of a cluster: {why}"),
    ))
}

/// At most [`KEYS_PER_REQUEST_MAX`] keys in one `request` (`TooLarge` otherwise).
fn check_key_count(keys: &[Value], request: &str) -> Result<(), ErrorReply> {
    if keys.len() > KEYS_PER_REQUEST_MAX {
        return Err(ErrorReply::new(
            Status::TooLarge,
            format!(
                "{} keys in one {request} request, over its {KEYS_PER_REQUEST_MAX}",
                keys.len()
            ),
        ));
    }
    Ok(())
}

/// A multi_get: at most [`KEYS_PER_REQUEST_MAX`] keys, each of a key region this server leads.
fn get_many(space: Arc<ServedSpace>, keys: Vec<Value>, view: &View) -> Result<Job, ErrorReply> {
    check_key_count(&keys, "multi_get")?;
    let keys = keys
        .into_iter()
        .map(|k| check_led_key(&space, k, view))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Job::Search {
        space,
        predicates: vec![],
        kind: SearchKind::Keys(keys),
    })
}

/// A search's answer, its sort attribute one of the space's that sorts (the statuses a
/// client's check of it gives too).
fn check_answer(space: &ServedSpace, answer: SearchAnswer) -> Result<Answer, ErrorReply> {
    Ok(match answer {
        SearchAnswer::Matches => Answer::Matches,
        SearchAnswer::Count => Answer::Count,
        SearchAnswer::Sorted {
            sort_by,
            limit,
            order,
        } => Answer::Sorted {
            by: SortKey::of(&space.config().schema, &sort_by)
                .map_err(|e| ErrorReply::new(sort_status(&e), e.to_string()))?,
            limit: limit as usize,
            order,
        },
    })
}

/// A search of the regions a client planned on its configuration of epoch `planned`.
fn search_regions(
    space: &ServedSpace,
    checked: &[CheckedPredicate],
    planned: Epoch,
    parts: Vec<RegionsOf>,
    answer: Answer,
    follow_stubs: bool,
) -> Result<SearchKind, ErrorReply> {
    let schema = &space.config().schema;
    let name = schema.name.as_str();
    // Stubs decide only some predicates, and order nothing: only their documents can be
    // counted or sorted.
    let reads_stubs = parts
        .iter()
        .any(|p| schema.pointer_overlay(p.subspace).is_some());
    if reads_stubs && !follow_stubs && !matches!(answer, Answer::Matches) {
        return Err(ErrorReply::new(
            Status::Malformed,
            "a count or sorted search of a pointer overlay must follow its stubs",
        ));
    }
    // A dynamic space's search is planned from the shapes the client knew; documents of a
    // shape registered since are acknowledged only once every live server knows the shape
    // (the coordinators answer its registration then), so this server can tell the client
    // that its plan may miss them.
    if space.config().shapes_since_matter(planned.0, checked) {
        return Err(ErrorReply::new(
            Status::StaleEpoch,
            format!(
                "space {name:?} has shapes of document registered after epoch {planned}: refresh the configuration and plan again"
            ),
        ));
    }
    // A key region split since the client's configuration holds only part of what the client
    // thinks it does: the rest is in the new region, which it did not ask.
    let reads_keys = parts.iter().any(|p| p.subspace == SubspaceId::KEY);
    if reads_keys && space.config().key_split_since(planned.0) {
        return Err(ErrorReply::new(
            Status::StaleEpoch,
            format!(
                "a key region of space {name:?} was split after epoch {planned}: refresh the configuration and plan again"
            ),
        ));
    }
    // A region read twice would count and return its objects twice.
    let mut named = std::collections::HashSet::new();
    if let Some(p) = parts
        .iter()
        .find(|p| !p.regions.iter().all(|&r| named.insert((p.subspace, r))))
    {
        return Err(ErrorReply::new(
            Status::Malformed,
            format!(
                "a search names a region of subspace {} twice",
                p.subspace.get()
            ),
        ));
    }
    let parts = parts
        .into_iter()
        .map(|p| Ok((p.subspace, check_regions(space, p.subspace, &p.regions)?)))
        .collect::<Result<Vec<_>, ErrorReply>>()?;
    // Only the point leader of every key region holds every document a stub may point to
    // (a client of this configuration asks such a server, or follows the stubs itself).
    if follow_stubs && !space.leads_every_key_region() {
        return Err(ErrorReply::new(
            Status::StaleEpoch,
            format!(
                "this server does not lead every key region of space {name:?}, so it cannot follow stubs to their documents; refresh the configuration"
            ),
        ));
    }
    Ok(SearchKind::Regions {
        parts,
        answer,
        follow_stubs,
    })
}

fn add_space(description: &str) -> Result<Job, ErrorReply> {
    if description.len() > DESCRIPTION_BYTES_MAX {
        return Err(ErrorReply::new(
            Status::TooLarge,
            format!("descriptions are at most {DESCRIPTION_BYTES_MAX} bytes"),
        ));
    }
    let schema = parse_space(description)
        .map_err(|e| ErrorReply::new(Status::BadDescription, e.to_string()))?;
    Ok(Job::Change(LocalChange::AddSpace(schema)))
}

/// A standalone server is its own coordinator, forever in term 0: the adaptation driver beside
/// it fences with 0 (`tessera_protocol::check_fence`).
fn alter_space(name: String, change: SpaceChange, fence: Option<u64>) -> Result<Job, ErrorReply> {
    // Bounded as the coordinators bound it: an adaptation's names stay in the log.
    let bytes = name.len() + change.name_bytes();
    if bytes > DESCRIPTION_BYTES_MAX {
        return Err(ErrorReply::new(
            Status::TooLarge,
            format!("alteration of {bytes} bytes is over the {DESCRIPTION_BYTES_MAX}-byte limit"),
        ));
    }
    tessera_protocol::check_fence(fence, 0, &change)
        .map_err(|e| ErrorReply::new(Status::BadAlteration, e.to_string()))?;
    Ok(Job::Change(LocalChange::AlterSpace { name, change }))
}

fn set_model(constants: ModelConstants) -> Result<Job, ErrorReply> {
    if !constants.is_usable() {
        return Err(ErrorReply::new(
            Status::Malformed,
            format!("model constants {constants:?} would make some prediction free or impossible"),
        ));
    }
    Ok(Job::Change(LocalChange::SetModel(constants)))
}

fn put(
    space: Arc<ServedSpace>,
    key: Value,
    mode: WriteMode,
    conditions: &[Predicate],
    funcalls: &[Funcall],
) -> Result<Job, ErrorReply> {
    let key = check_key(&space, key)?;
    let conditions = check_predicates(&space, conditions)?;
    let funcalls =
        CheckedFuncall::check_all(&space.config().schema, funcalls).map_err(funcall_error)?;
    check_formula(&space, &funcalls)?;
    Ok(Job::Write {
        space,
        write: KeyWrite::Put {
            key,
            mode,
            conditions,
            funcalls,
        },
    })
}

fn predicate_error(e: PredicateError) -> ErrorReply {
    ErrorReply::new(predicate_status(&e), e.to_string())
}

fn funcall_error(e: FuncallCheckError) -> ErrorReply {
    ErrorReply::new(funcall_status(&e), e.to_string())
}

/// A key of `space` whose region this server holds complete: any such replica answers a get
/// (`tessera_replication::read_gate` says when).
/// A key of a region this server reads for, and whether it is that region's last reader.
fn check_read_key(
    space: &ServedSpace,
    key: Value,
    view: &View,
) -> Result<(Value, bool), ErrorReply> {
    let key = check_key(space, key)?;
    let readers = space.key_readers(&key);
    if !readers.contains(&view.me) {
        return Err(ErrorReply::new(
            Status::StaleEpoch,
            format!(
                "this server does not hold the region of key {key} in epoch {} (servers {readers:?} do); refresh the configuration",
                view.epoch()
            ),
        ));
    }
    let last_reader = readers.last() == Some(&view.me);
    Ok((key, last_reader))
}

/// A key of `space` this server leads: a multi_get goes to the point leader of its keys.
fn check_led_key(space: &ServedSpace, key: Value, view: &View) -> Result<Value, ErrorReply> {
    let key = check_key(space, key)?;
    let leader = space.point_leader(&key)?;
    if leader != view.me {
        return Err(ErrorReply::new(
            Status::StaleEpoch,
            format!(
                "server {leader} leads key {key} in epoch {}; refresh the configuration",
                view.epoch()
            ),
        ));
    }
    Ok(key)
}

/// The key, converted to the space's key type and within the size limit.
fn check_key(space: &ServedSpace, key: Value) -> Result<Value, ErrorReply> {
    let schema = &space.config().schema;
    let ty = schema.key().ty;
    let given = key.kind_name();
    let key = ty.coerce(key).ok_or_else(|| {
        ErrorReply::new(
            Status::WrongType,
            format!(
                "the key of space {:?} is a {ty}, not a {given}",
                schema.name
            ),
        )
    })?;
    if let Value::String(s) = &key {
        if s.len() > KEY_BYTES_MAX {
            return Err(ErrorReply::new(
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

fn check_predicates(
    space: &ServedSpace,
    predicates: &[Predicate],
) -> Result<Vec<CheckedPredicate>, ErrorReply> {
    CheckedPredicate::check_all(&space.config().schema, predicates).map_err(predicate_error)
}

/// The tessellation of `subspace`, which must be one of the space's.
fn check_subspace(space: &ServedSpace, subspace: SubspaceId) -> Result<&Tessellation, ErrorReply> {
    space.tessellations().get(subspace.get()).ok_or_else(|| {
        let schema = &space.config().schema;
        ErrorReply::new(
            Status::Malformed,
            format!(
                "space {:?} has {} subspaces, not {}",
                schema.name,
                schema.subspaces.len(),
                subspace.get() + 1
            ),
        )
    })
}

/// The regions a `SearchRegions` names: they exist, and this server serves reads of every one
/// of them (a member of its replica set, not a state transfer's target still catching up).
fn check_regions(
    space: &ServedSpace,
    subspace: SubspaceId,
    regions: &[u32],
) -> Result<Vec<RegionIndex>, ErrorReply> {
    let schema = &space.config().schema;
    let t = check_subspace(space, subspace)?;
    if !schema.subspace(subspace).is_searchable() {
        // Being built (not every object is in it yet) or dropped, in this server's view: a
        // client that asks acts on another configuration.
        return Err(ErrorReply::new(
            Status::StaleEpoch,
            format!(
                "subspace {} of {:?} serves no searches in this server's configuration; refresh yours",
                subspace.get(),
                schema.name,
            ),
        ));
    }
    regions
        .iter()
        .map(|&r| {
            if r >= t.regions_count() {
                return Err(ErrorReply::new(
                    Status::Malformed,
                    format!("subspace {} of {:?} has {} regions, not {}", subspace.get(), schema.name, t.regions_count(), r + 1),
                ));
            }
            if !space.owns(subspace, RegionIndex(r)) {
                return Err(ErrorReply::new(
                    Status::StaleEpoch,
                    format!("this server does not own region {r} of subspace {} in its configuration; refresh", subspace.get()),
                ));
            }
            // A client with this configuration asks another replica; one that asks here acts
            // on an older configuration, as for a region this server does not own.
            if !space.serves_reads(subspace, RegionIndex(r)) {
                return Err(ErrorReply::new(
                    Status::StaleEpoch,
                    format!(
                        "this server is still receiving region {r} of subspace {} by state transfer; refresh",
                        subspace.get()
                    ),
                ));
            }
            Ok(RegionIndex(r))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_protocol::{Configuration, ServerInfo, ServerState, ShapeEntry, SpaceConfig};
    use tessera_types::{Epoch, Formula, FormulaSpec, ServerId, SpaceSchema, Subspace};

    /// A view of server `me` of a configuration of epoch 5 with `space`, servers 1 to 3.
    fn view_with(space: SpaceConfig, me: u64, mode: Mode) -> View {
        let servers = (1..=3)
            .map(|i| ServerInfo {
                id: ServerId(i),
                address: format!("h:{i}"),
                state: ServerState::Available,
            })
            .collect();
        let config = Configuration {
            model: None,
            epoch: Epoch(5),
            servers,
            spaces: vec![space],
        };
        config
            .check()
            .expect("a configuration a coordinator could make");
        View::new(Arc::new(config), ServerId(me), mode)
    }

    /// A cluster view of server `me`: servers 1 and 2 hold every region (server 1 first, so
    /// it leads every key region), and region 1 of subspace 1 is gaining server 3 by state
    /// transfer.
    fn view_of(me: u64) -> View {
        let schema = parse_space(
            "space t key k attributes int x, set(string) tags subspace x create 4 partitions",
        )
        .unwrap();
        let mut space = SpaceConfig::owned_by(1, schema, &[ServerId(1), ServerId(2)]);
        space.start_transfer(5, SubspaceId(1), RegionIndex(1), ServerId(3), None);
        view_with(space, me, Mode::Cluster)
    }

    /// A standalone view of a dynamic space whose formula `f` places documents in a pointer
    /// overlay (subspace 2: stubs by year) and a copy overlay (subspace 3: by title).
    fn papers() -> View {
        let mut schema: SpaceSchema =
            parse_space("space papers dynamic key id dimensions 4 create 4 partitions").unwrap();
        let spec = FormulaSpec::parse(Some("f"), &["&year", "title"]).unwrap();
        let first = schema.subspaces.len() as u16;
        for o in &spec.overlays {
            schema.subspaces.push(Subspace::overlay(o.clone()));
        }
        schema.formulas.push(Formula {
            id: "f".into(),
            overlays: vec![SubspaceId(first), SubspaceId(first + 1)],
        });
        assert!(schema.pointer_overlay(SubspaceId(first)).is_some());
        assert!(schema.pointer_overlay(SubspaceId(first + 1)).is_none());
        let mut space = SpaceConfig::owned_by(1, schema, &[ServerId(1)]);
        space.formula_entries.push(ShapeEntry {
            since: 1,
            ready: true,
        });
        view_with(space, 1, Mode::Standalone)
    }

    /// A `SearchRegions` of `space` on epoch 5.
    fn ask(
        view: &View,
        space: &str,
        parts: Vec<(u16, Vec<u32>)>,
        answer: SearchAnswer,
        follow_stubs: bool,
    ) -> Result<Job, ErrorReply> {
        let parts = parts
            .into_iter()
            .map(|(subspace, regions)| RegionsOf {
                subspace: SubspaceId(subspace),
                regions,
            })
            .collect();
        let request = Request::SearchRegions {
            space: space.into(),
            predicates: vec![],
            parts,
            answer,
            follow_stubs,
        };
        validate(
            RequestFrame {
                id: 1,
                epoch: Epoch(5),
                request,
            },
            view,
        )
    }

    fn search_regions(view: &View, regions: Vec<u32>) -> Result<Job, ErrorReply> {
        ask(view, "t", vec![(1, regions)], SearchAnswer::Matches, false)
    }

    /// The parts, answer and `follow_stubs` of a validated search.
    fn kind_of(
        job: Result<Job, ErrorReply>,
    ) -> (Vec<(SubspaceId, Vec<RegionIndex>)>, Answer, bool) {
        match job {
            Ok(Job::Search {
                kind:
                    SearchKind::Regions {
                        parts,
                        answer,
                        follow_stubs,
                    },
                ..
            }) => (parts, answer, follow_stubs),
            other => panic!("expected a search of regions, got {other:?}"),
        }
    }

    fn regions_of(job: Result<Job, ErrorReply>) -> Vec<RegionIndex> {
        match kind_of(job) {
            (parts, Answer::Matches, false) => match parts.as_slice() {
                [(subspace, regions)] => {
                    assert_eq!(*subspace, SubspaceId(1));
                    regions.clone()
                }
                other => panic!("expected one part, got {other:?}"),
            },
            other => panic!("expected the matches of one part, got {other:?}"),
        }
    }

    fn status_of(job: Result<Job, ErrorReply>) -> (Status, String) {
        match job {
            Err(e) => (e.status, e.message),
            Ok(job) => panic!("expected a refusal, got {job:?}"),
        }
    }

    #[test]
    fn a_catching_up_target_answers_searches_of_its_region_with_stale_epoch() {
        let target = view_of(3);
        for regions in [vec![1], vec![0, 1], vec![0]] {
            let refused = search_regions(&target, regions.clone()).expect_err("refused");
            assert_eq!(
                refused.status,
                Status::StaleEpoch,
                "regions {regions:?}: {}",
                refused.message
            );
        }
        let refused = search_regions(&target, vec![1]).unwrap_err();
        assert!(
            refused.message.contains("state transfer"),
            "{}",
            refused.message
        );
        // The complete replicas serve that region, and every other.
        for member in [1, 2] {
            assert_eq!(
                regions_of(search_regions(&view_of(member), vec![0, 1, 3])),
                vec![RegionIndex(0), RegionIndex(1), RegionIndex(3)]
            );
        }
        // A region that does not exist is still malformed, whoever asks.
        assert_eq!(
            search_regions(&target, vec![4]).unwrap_err().status,
            Status::Malformed
        );
    }

    #[test]
    fn every_part_is_checked_and_kept_with_its_regions() {
        let member = view_of(2);
        let (parts, answer, follow) = kind_of(ask(
            &member,
            "t",
            vec![(0, vec![0, 2]), (1, vec![3])],
            SearchAnswer::Count,
            false,
        ));
        assert_eq!(
            parts,
            vec![
                (SubspaceId(0), vec![RegionIndex(0), RegionIndex(2)]),
                (SubspaceId(1), vec![RegionIndex(3)])
            ]
        );
        assert!(matches!(answer, Answer::Count) && !follow);
        // One bad part refuses the whole search.
        let target = view_of(3);
        let (status, message) = status_of(ask(
            &target,
            "t",
            vec![(1, vec![1]), (0, vec![0])],
            SearchAnswer::Matches,
            false,
        ));
        assert_eq!(status, Status::StaleEpoch, "{message}");
        let (status, _) = status_of(ask(
            &member,
            "t",
            vec![(1, vec![0]), (9, vec![0])],
            SearchAnswer::Matches,
            false,
        ));
        assert_eq!(status, Status::Malformed);
        // A region named twice, in one part or in two of the same subspace, would be read twice.
        for twice in [
            vec![(1, vec![0, 0])],
            vec![(1, vec![0]), (0, vec![0]), (1, vec![2, 0])],
        ] {
            let (status, message) = status_of(ask(&member, "t", twice, SearchAnswer::Count, false));
            assert_eq!(status, Status::Malformed, "{message}");
        }
        // No part at all: a search that finds nothing.
        let (parts, answer, _) = kind_of(ask(&member, "t", vec![], SearchAnswer::Count, false));
        assert!(parts.is_empty() && matches!(answer, Answer::Count));
    }

    #[test]
    fn following_stubs_needs_the_lead_of_every_key_region() {
        let every_key_region = || vec![(0, vec![0, 1, 2, 3])];
        // Server 2 holds every key region, but server 1 leads them.
        let (status, message) = status_of(ask(
            &view_of(2),
            "t",
            every_key_region(),
            SearchAnswer::Count,
            true,
        ));
        assert_eq!(status, Status::StaleEpoch, "{message}");
        assert!(message.contains("refresh"), "{message}");
        let (_, _, follow) = kind_of(ask(
            &view_of(1),
            "t",
            every_key_region(),
            SearchAnswer::Count,
            true,
        ));
        assert!(follow);
        // A standalone server leads every key region.
        let (parts, answer, follow) = kind_of(ask(
            &papers(),
            "papers",
            vec![(2, vec![0, 1])],
            SearchAnswer::Count,
            true,
        ));
        assert_eq!(parts.len(), 1);
        assert!(matches!(answer, Answer::Count) && follow);
    }

    #[test]
    fn a_count_or_sorted_search_of_a_pointer_overlay_must_follow_its_stubs() {
        let papers = papers();
        let by_year = || SearchAnswer::Sorted {
            sort_by: "year".into(),
            limit: 3,
            order: SortOrder::Ascending,
        };
        for answer in [SearchAnswer::Count, by_year()] {
            for parts in [vec![(2, vec![0])], vec![(3, vec![0]), (2, vec![])]] {
                let (status, message) =
                    status_of(ask(&papers, "papers", parts, answer.clone(), false));
                assert_eq!(status, Status::Malformed, "{answer:?}: {message}");
                assert!(message.contains("follow its stubs"), "{message}");
            }
        }
        // Its stubs as they are, for a client that follows them; a copy overlay's documents
        // counted or sorted as they are.
        let (_, answer, follow) = kind_of(ask(
            &papers,
            "papers",
            vec![(2, vec![0])],
            SearchAnswer::Matches,
            false,
        ));
        assert!(matches!(answer, Answer::Matches) && !follow);
        for answer in [SearchAnswer::Count, by_year()] {
            kind_of(ask(&papers, "papers", vec![(3, vec![0])], answer, false));
        }
        let (_, answer, _) = kind_of(ask(&papers, "papers", vec![(2, vec![0])], by_year(), true));
        assert!(matches!(answer, Answer::Sorted { limit: 3, .. }));
    }

    #[test]
    fn a_sorted_search_needs_an_attribute_that_sorts() {
        let sorted = |by: &str| SearchAnswer::Sorted {
            sort_by: by.into(),
            limit: 10,
            order: SortOrder::Descending,
        };
        let view = view_of(1);
        let parts = || vec![(1, vec![0])];
        assert_eq!(
            status_of(ask(&view, "t", parts(), sorted("nope"), false)).0,
            Status::UnknownAttribute
        );
        assert_eq!(
            status_of(ask(&view, "t", parts(), sorted("tags"), false)).0,
            Status::WrongType
        );
        // The attribute is checked before the regions: a stale plan by an unknown attribute
        // is refused for the attribute.
        assert_eq!(
            status_of(ask(&view_of(3), "t", parts(), sorted("nope"), false)).0,
            Status::UnknownAttribute
        );
        let (_, answer, _) = kind_of(ask(&view, "t", parts(), sorted("x"), false));
        assert!(matches!(
            answer,
            Answer::Sorted {
                limit: 10,
                order: SortOrder::Descending,
                ..
            }
        ));
        assert_eq!(
            status_of(ask(&papers(), "papers", vec![], sorted("a..b"), true)).0,
            Status::BadPredicate
        );
    }
}
