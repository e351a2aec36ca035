//! Cluster mode against a fake cluster in this process: one coordinator and three servers that
//! speak the protocol over TCP, keep one shared set of objects, check that every request
//! reaches a server that owns what it names, log what they receive, and fail on demand.
//!
//! This tests the client's machinery (mode detection, routing, fan-out, merging, refreshes
//! and retries), not replication: the real cluster has its own tests.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tessera_client::{
    Client, ClientError, ClientOptions, Fanout, Predicate, PredicateOp, ReadFrom, SortOrder,
    SpaceChange, Status, SubspaceState, Value, WriteMode,
};
use tessera_geometry::{point, RegionIndex, Tessellation};
use tessera_protocol::{
    codec, decode_request, encode_response, BackfillRef, Configuration, CoordinatorStatus,
    ErrorReply, RegionsOf, Request, Response, ResponseFrame, SearchAnswer, ServerInfo, ServerState,
    SpaceConfig, WireObject,
};
use tessera_types::{
    apply_all, matches_all, parse_space, CheckedFuncall, CheckedPredicate, Epoch, Object, ServerId,
    SubspaceId, Version,
};
use tokio::net::TcpListener;
use tokio_util::codec::{FramedRead, FramedWrite};

const SPACE: &str = "space s
    key k
    attributes int n, string tag
    subspace n
    create 8 partitions
    tolerate 1 failure";

const SERVERS: u64 = 3;

/// Region `r` of subspace `s` is owned by servers `(r + s + shift) mod 3` then the next.
fn owners(subspace: usize, region: usize, shift: usize) -> Vec<ServerId> {
    let first = (region + subspace + shift) as u64 % SERVERS;
    vec![ServerId(first + 1), ServerId((first + 1) % SERVERS + 1)]
}

fn space_config(id: u64, description: &str, shift: usize) -> SpaceConfig {
    let mut space = SpaceConfig::owned_by(id, parse_space(description).expect("parses"), &[]);
    for (s, regions) in space.replicas.iter_mut().enumerate() {
        for (r, set) in regions.iter_mut().enumerate() {
            *set = owners(s, r, shift);
        }
    }
    space
}

#[derive(Default)]
struct World {
    config: Option<Configuration>,
    /// Every object, by key (one space is enough here).
    objects: BTreeMap<Value, WireObject>,
    /// Extra objects a server returns from its searches (an object caught in two regions).
    ghosts: HashMap<ServerId, Vec<WireObject>>,
    /// What each server received, in order.
    log: Vec<(ServerId, Request)>,
    /// Per server: answer this many requests `StaleEpoch` as if one epoch behind.
    behind: HashMap<ServerId, u32>,
    /// Servers that hang up on the next request they receive, without answering.
    hang_up: HashSet<ServerId>,
    /// Servers that receive requests and never answer them (a stopped process).
    silent: HashSet<ServerId>,
    /// Keys with an update pending: every replica of the key's region but the last answers a
    /// get of one `UpdatePending`, as servers do.
    pending: BTreeSet<Value>,
    /// Answer this many admin requests (not status or configuration reads) `Unavailable`.
    coordinator_unavailable: u32,
    coordinator_address: String,
}

type Shared = Arc<Mutex<World>>;

enum Answer {
    Frames(Vec<Response>),
    /// A `StaleEpoch` refusal from a server one epoch behind.
    Behind,
    HangUp,
    Silence,
}

fn error(status: Status, message: &str) -> Response {
    Response::Error(ErrorReply::new(status, message))
}

async fn listen(world: Shared, serve: fn(&Shared, Request) -> Answer) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let world = world.clone();
            tokio::spawn(async move {
                let (read, write) = stream.into_split();
                let mut frames = FramedRead::new(read, codec());
                let mut sink = FramedWrite::new(write, codec());
                while let Some(Ok(body)) = frames.next().await {
                    let frame = decode_request(&body).unwrap();
                    let answer = if let Request::WaitConfig { after, timeout_ms } = frame.request {
                        Answer::Frames(vec![wait_config(&world, after, timeout_ms).await])
                    } else {
                        serve(&world, frame.request)
                    };
                    let epoch = world.lock().unwrap().config.as_ref().unwrap().epoch;
                    let (epoch, responses) = match answer {
                        Answer::Frames(responses) => (epoch, responses),
                        Answer::Behind => (
                            Epoch(epoch.0 - 1),
                            vec![error(Status::StaleEpoch, "behind")],
                        ),
                        Answer::HangUp => return,
                        Answer::Silence => continue,
                    };
                    for response in responses {
                        let frame = ResponseFrame {
                            id: frame.id,
                            epoch,
                            response,
                        };
                        sink.feed(encode_response(&frame).unwrap()).await.unwrap();
                    }
                    SinkExt::<bytes::Bytes>::flush(&mut sink).await.unwrap();
                }
            });
        }
    });
    address
}

async fn wait_config(world: &Shared, after: Epoch, timeout_ms: u32) -> Response {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms as u64);
    loop {
        let config = world.lock().unwrap().config.clone().unwrap();
        if config.epoch > after || tokio::time::Instant::now() >= deadline {
            return Response::Config(Box::new(config));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn coordinate(world: &Shared, request: Request) -> Answer {
    let mut guard = world.lock().unwrap();
    let World {
        config,
        coordinator_unavailable,
        coordinator_address,
        ..
    } = &mut *guard;
    let config = config.as_mut().unwrap();
    let response = match request {
        Request::CoordinatorStatus => Response::CoordinatorStatus(CoordinatorStatus {
            id: 1,
            leader: Some(1),
            term: 1,
            last_applied: config.epoch.0,
            // A second member that never answers.
            members: vec![(1, coordinator_address.clone()), (2, "127.0.0.1:1".into())],
            epoch: config.epoch,
            servers: vec![],
        }),
        Request::GetConfig => Response::Config(Box::new(config.clone())),
        _ if *coordinator_unavailable > 0 => {
            *coordinator_unavailable -= 1;
            error(Status::Unavailable, "no leader")
        }
        Request::AddSpace { description } => {
            let schema = parse_space(&description).unwrap();
            if config.space(&schema.name).is_some() {
                error(Status::SpaceExists, "exists")
            } else {
                config.epoch = Epoch(config.epoch.0 + 1);
                config
                    .spaces
                    .push(space_config(config.epoch.0, &description, 0));
                Response::Done
            }
        }
        Request::AlterSpace { space, change, .. } => {
            let epoch = config.epoch.0 + 1;
            match config.spaces.iter_mut().find(|s| s.schema.name == space) {
                None => error(Status::UnknownSpace, "no such space"),
                Some(s) => {
                    let added = s.schema.subspaces.len();
                    let assign = |t: &Tessellation| {
                        (0..t.regions_count() as usize)
                            .map(|r| owners(added, r, 0))
                            .collect()
                    };
                    match s.alter(epoch, &change, assign) {
                        Ok(_) => {
                            config.epoch = Epoch(epoch);
                            Response::Done
                        }
                        Err(e) => error(Status::BadAlteration, &e.to_string()),
                    }
                }
            }
        }
        other => error(
            Status::Malformed,
            &format!("a coordinator does not answer {other:?}"),
        ),
    };
    Answer::Frames(vec![response])
}

/// Server `id`'s answer to a `WriteKeys`: what that many single writes would be answered
/// (each served, and logged, as one), or the first answer that is no answer.
fn write_keys_as(id: ServerId, world: &Shared, request: Request) -> Answer {
    let Request::WriteKeys {
        space,
        keys,
        conditions,
        change,
    } = request
    else {
        unreachable!("only WriteKeys")
    };
    let mut outcomes = Vec::new();
    for key in keys {
        match serve_as(id, world, change.single_write(&space, key, &conditions)) {
            Answer::Frames(frames) => match frames.into_iter().next() {
                Some(Response::Done) => outcomes.push(Ok(())),
                Some(Response::Error(e)) => outcomes.push(Err(e)),
                other => panic!("a single write answered {other:?}"),
            },
            other => return other,
        }
    }
    Answer::Frames(vec![Response::Outcomes(outcomes)])
}

/// Server `id`'s answer, from the configuration the world is in.
fn serve_as(id: ServerId, world: &Shared, request: Request) -> Answer {
    if let Request::WriteKeys { .. } = request {
        return write_keys_as(id, world, request);
    }
    let mut w = world.lock().unwrap();
    w.log.push((id, request.clone()));
    if w.hang_up.remove(&id) {
        return Answer::HangUp;
    }
    if w.silent.contains(&id) {
        return Answer::Silence;
    }
    if let Some(n) = w.behind.get_mut(&id).filter(|n| **n > 0) {
        *n -= 1;
        return Answer::Behind;
    }
    let config = w.config.clone().unwrap();
    let Some(space) = request.space().and_then(|s| config.space(s)).cloned() else {
        return Answer::Frames(vec![error(Status::UnknownSpace, "no such space")]);
    };
    let schema = &space.schema;
    let tessellations: Vec<Tessellation> = space.tessellations();
    let region_of = |subspace: SubspaceId, values: &[Value]| {
        let object = Object {
            values: values.to_vec(),
        };
        let p = point(schema, subspace, &object).expect("a typed space places every object");
        tessellations[subspace.get()].region_of(&p)
    };
    let key_replicas = |key: &Value| {
        let mut values = vec![key.clone()];
        values.extend(schema.attributes[1..].iter().map(|a| a.ty.default_value()));
        space.replicas_of(SubspaceId::KEY, region_of(SubspaceId::KEY, &values))
    };
    let leads = |key: &Value| key_replicas(key)[0] == id;
    // Every replica of a key's region answers a get of it, as servers do.
    let holds = |key: &Value| key_replicas(key).contains(&id);
    let not_mine = || Answer::Frames(vec![error(Status::StaleEpoch, "not mine")]);
    let check = |predicates: &[Predicate]| CheckedPredicate::check_all(schema, predicates).unwrap();
    let response = match request {
        Request::Get { key, .. } => {
            if !holds(&key) {
                return not_mine();
            }
            if w.pending.contains(&key) && key_replicas(&key).last() != Some(&id) {
                return Answer::Frames(vec![error(Status::UpdatePending, "pending here")]);
            }
            Response::Object(w.objects.get(&key).cloned())
        }
        Request::Put {
            key,
            mode,
            conditions,
            funcalls,
            ..
        } => {
            if !leads(&key) {
                return not_mine();
            }
            let current = w.objects.get(&key).cloned();
            let object = match (&current, mode) {
                (None, WriteMode::UpdateOnly) => {
                    return Answer::Frames(vec![error(Status::NotFound, "none")])
                }
                (Some(_), WriteMode::CreateOnly) => {
                    return Answer::Frames(vec![error(Status::CmpFail, "exists")])
                }
                (Some(o), _) => Object {
                    values: o.values.clone(),
                },
                (None, _) => Object::with_defaults(schema, key.clone()),
            };
            if current.is_some() && !matches_all(&check(&conditions), &object) {
                return Answer::Frames(vec![error(Status::CmpFail, "condition")]);
            }
            let funcalls = CheckedFuncall::check_all(schema, &funcalls).unwrap();
            let next = apply_all(&funcalls, &object).unwrap();
            let version = current.map_or(Version(1), |o| o.version.next());
            w.objects.insert(
                key,
                WireObject {
                    version,
                    values: next.values,
                },
            );
            Response::Done
        }
        Request::Del {
            key, conditions, ..
        } => {
            if !leads(&key) {
                return not_mine();
            }
            match w.objects.get(&key) {
                None => error(Status::NotFound, "none"),
                Some(o)
                    if !matches_all(
                        &check(&conditions),
                        &Object {
                            values: o.values.clone(),
                        },
                    ) =>
                {
                    error(Status::CmpFail, "condition")
                }
                Some(_) => {
                    w.objects.remove(&key);
                    Response::Done
                }
            }
        }
        Request::SearchRegions {
            predicates,
            parts,
            answer,
            ..
        } => {
            let owned = |subspace, r: &u32| {
                space
                    .replicas_of(subspace, tessera_geometry::RegionIndex(*r))
                    .contains(&id)
            };
            if !parts
                .iter()
                .all(|p| p.regions.iter().all(|r| owned(p.subspace, r)))
            {
                return not_mine();
            }
            let read = |o: &WireObject| {
                parts
                    .iter()
                    .any(|p| p.regions.contains(&region_of(p.subspace, &o.values).0))
            };
            let predicates = check(&predicates);
            let mut found: Vec<WireObject> = w
                .objects
                .values()
                .chain(w.ghosts.get(&id).into_iter().flatten())
                .filter(|o| read(o))
                .filter(|o| {
                    matches_all(
                        &predicates,
                        &Object {
                            values: o.values.clone(),
                        },
                    )
                })
                .cloned()
                .collect();
            match answer {
                SearchAnswer::Matches => {}
                SearchAnswer::Count => {
                    return Answer::Frames(vec![Response::Count(found.len() as u64)])
                }
                // A model of the order: by the attribute's value, then by key.
                SearchAnswer::Sorted {
                    sort_by,
                    limit,
                    order,
                } => {
                    let at = schema
                        .attributes
                        .iter()
                        .position(|a| a.name == sort_by)
                        .unwrap();
                    found.sort_by(|a, b| {
                        let ordered =
                            (&a.values[at], &a.values[0]).cmp(&(&b.values[at], &b.values[0]));
                        match order {
                            SortOrder::Ascending => ordered,
                            SortOrder::Descending => ordered.reverse(),
                        }
                    });
                    found.truncate(limit as usize);
                }
            }
            // Two frames of items when there are several, to exercise the stream.
            let half = found.len() / 2;
            let mut frames: Vec<Response> = [&found[..half], &found[half..]]
                .iter()
                .filter(|p| !p.is_empty())
                .map(|p| Response::SearchItems(p.to_vec()))
                .collect();
            frames.push(Response::SearchDone);
            return Answer::Frames(frames);
        }
        other => error(
            Status::Malformed,
            &format!("not for a cluster server: {other:?}"),
        ),
    };
    Answer::Frames(vec![response])
}

fn serve_1(w: &Shared, r: Request) -> Answer {
    serve_as(ServerId(1), w, r)
}
fn serve_2(w: &Shared, r: Request) -> Answer {
    serve_as(ServerId(2), w, r)
}
fn serve_3(w: &Shared, r: Request) -> Answer {
    serve_as(ServerId(3), w, r)
}

/// A running fake cluster with space `s` created through `client`.
/// A client whose gets go to the point leader only.
fn leader_reads() -> ClientOptions {
    ClientOptions::default().with_read_from(ReadFrom::Leader)
}

async fn cluster() -> (Shared, Client) {
    cluster_with(ClientOptions::default()).await
}

async fn cluster_with(options: ClientOptions) -> (Shared, Client) {
    let world: Shared = Arc::new(Mutex::new(World::default()));
    let mut servers = vec![];
    for (i, serve) in [serve_1 as fn(&Shared, Request) -> Answer, serve_2, serve_3]
        .into_iter()
        .enumerate()
    {
        let address = listen(world.clone(), serve).await;
        servers.push(ServerInfo {
            id: ServerId(i as u64 + 1),
            address,
            state: ServerState::Available,
        });
    }
    world.lock().unwrap().config = Some(Configuration {
        model: None,
        epoch: Epoch(1),
        servers,
        spaces: vec![],
    });
    let coordinator = listen(world.clone(), coordinate).await;
    world.lock().unwrap().coordinator_address = coordinator.clone();
    // A dead address first: the client moves on to the next.
    let client = Client::connect_with(&format!("127.0.0.1:1, {coordinator}"), options)
        .await
        .unwrap();
    client.add_space(SPACE).await.unwrap();
    (world, client)
}

/// By default a search asks the fewest servers that hold every region it reads (each once,
/// for all its regions), as few as any choice of replicas allows (brute force over sets of
/// servers), and finds what one replica per region finds.
#[tokio::test]
async fn a_search_asks_the_fewest_servers() {
    let (world, client) = cluster().await;
    fill(&client, 20).await;
    let config = client.configuration();
    let space = config.space("s").unwrap();
    let holders: Vec<Vec<ServerId>> = (0..8)
        .map(|r| space.replicas_of(SubspaceId::KEY, RegionIndex(r)).to_vec())
        .collect();
    let fewest = (1..=SERVERS as usize)
        .find(|&k| {
            (1u32..1 << SERVERS)
                .filter(|m| m.count_ones() as usize == k)
                .any(|m| {
                    holders
                        .iter()
                        .all(|h| h.iter().any(|s| m >> (s.0 - 1) & 1 == 1))
                })
        })
        .unwrap();
    for _ in 0..3 {
        log(&world);
        let found = client.search("s", vec![]).await.unwrap();
        assert_eq!(found.len(), 20);
        let asked = log(&world);
        let servers: BTreeSet<ServerId> = asked.iter().map(|(s, _)| *s).collect();
        assert_eq!(servers.len(), asked.len(), "one request per server");
        assert_eq!(servers.len(), fewest, "{asked:?}");
        let mut regions: Vec<u32> = vec![];
        for (server, request) in asked {
            let Request::SearchRegions { parts, .. } = request else {
                panic!("{request:?}")
            };
            let r: Vec<u32> = parts.into_iter().flat_map(|p| p.regions).collect();
            for &region in &r {
                assert!(holders[region as usize].contains(&server));
            }
            regions.extend(r);
        }
        regions.sort();
        assert_eq!(regions, (0..8).collect::<Vec<_>>());
    }
    let e = client.explain("s", vec![]).await.unwrap();
    assert_eq!(e.servers_fewest, fewest as u64);
    assert_eq!(e.servers_contacted, fewest as u64);
    assert!(e.servers_each_region >= e.servers_fewest, "{e:?}");
}

fn log(world: &Shared) -> Vec<(ServerId, Request)> {
    std::mem::take(&mut world.lock().unwrap().log)
}

/// The point leader of key `k` as the world's configuration says.
fn leader_of(world: &Shared, key: &str) -> ServerId {
    let config = world.lock().unwrap().config.clone().unwrap();
    let space = config.space("s").unwrap();
    let t = &space.tessellations()[0];
    let region = t.region_of(&[tessera_geometry::key_coordinate(&Value::from(key))]);
    space.replicas_of(SubspaceId::KEY, region)[0]
}

async fn fill(client: &Client, n: i64) {
    for i in 0..n {
        client
            .put(
                "s",
                format!("k{i}"),
                [
                    ("n", Value::Int(i % 5)),
                    ("tag", Value::from(format!("t{i}"))),
                ],
            )
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn connects_in_cluster_mode_and_knows_the_coordinators() {
    let (world, client) = cluster().await;
    assert!(client.is_cluster());
    assert_eq!(
        client.configuration().epoch,
        Epoch(2),
        "add_space waited for the new configuration"
    );
    assert!(client.configuration().space("s").is_some());
    let statuses = client.coordinator_statuses().await;
    let coordinator = world.lock().unwrap().coordinator_address.clone();
    let answered: Vec<&String> = statuses
        .iter()
        .filter(|(_, s)| s.is_ok())
        .map(|(a, _)| a)
        .collect();
    assert_eq!(answered, vec![&coordinator]);
    // The dead address given and the dead member named: asked, and failed.
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert!(statuses
        .iter()
        .any(|(a, s)| a == "127.0.0.1:1" && s.is_err()));
    assert_eq!(client.describe_space("s").await.unwrap().name, "s");
    let e = client.add_space(SPACE).await.unwrap_err();
    assert_eq!(e.status(), Some(Status::SpaceExists));
}

#[tokio::test]
async fn key_requests_go_to_the_point_leader() {
    let (world, client) = cluster_with(leader_reads()).await;
    log(&world);
    fill(&client, 30).await;
    let record = client.get("s", "k7").await.unwrap().unwrap();
    assert_eq!(record.attributes["tag"], Value::from("t7"));
    assert_eq!(client.get("s", "nope").await.unwrap(), None);
    client.del("s", "k8").await.unwrap();
    assert!(client.del("s", "k8").await.unwrap_err().is_not_found());
    let e = client
        .cond_put("s", "k9", vec![Predicate::equals("n", 0i64)], [("n", 1i64)])
        .await
        .unwrap_err();
    assert!(e.is_cmp_fail());
    let received = log(&world);
    assert_eq!(received.len(), 30 + 2 + 2 + 1);
    for (server, request) in received {
        let key = match request {
            Request::Get { key, .. } | Request::Put { key, .. } | Request::Del { key, .. } => key,
            other => panic!("unexpected {other:?}"),
        };
        let Value::String(key) = key else {
            panic!("string keys")
        };
        assert_eq!(
            server,
            leader_of(&world, key.as_str().expect("text")),
            "{key:?}"
        );
    }
    // Refused on sight, as a server would: no server contacted.
    let e = client.get("s", 3i64).await.unwrap_err();
    assert_eq!(e.status(), Some(Status::WrongType));
    assert_eq!(
        client.get("nope", "k").await.unwrap_err().status(),
        Some(Status::UnknownSpace)
    );
    assert!(log(&world).is_empty());
}

#[tokio::test]
async fn a_search_asks_one_replica_per_region_and_merges() {
    let (world, client) =
        cluster_with(ClientOptions::default().with_fanout(Fanout::EachRegion)).await;
    fill(&client, 20).await;
    // Caught moving: k3 also lingers at an older version where n was 0; k5 is already
    // committed, newer, where n is huge (another region of subspace n). Any server asked for
    // those regions returns them too.
    {
        let mut w = world.lock().unwrap();
        let mut old = w.objects[&Value::from("k3")].clone();
        (old.values[1], old.values[2], old.version) =
            (Value::Int(0), Value::from("stale"), Version(0));
        let mut new = w.objects[&Value::from("k5")].clone();
        (new.values[1], new.values[2], new.version) =
            (Value::Int(i64::MAX), Value::from("moved"), Version(9));
        for server in 1..=SERVERS {
            w.ghosts
                .insert(ServerId(server), vec![old.clone(), new.clone()]);
        }
    }
    let check = |found: Vec<tessera_client::Record>| {
        let keys: BTreeSet<Value> = found.iter().map(|r| r.key.clone()).collect();
        assert_eq!((found.len(), keys.len()), (20, 20));
        let k3 = found.iter().find(|r| r.key == Value::from("k3")).unwrap();
        assert_eq!(
            (k3.version, &k3.attributes["tag"]),
            (Version(1), &Value::from("t3"))
        );
        let k5 = found.iter().find(|r| r.key == Value::from("k5")).unwrap();
        assert_eq!(
            (k5.version, &k5.attributes["tag"]),
            (Version(9), &Value::from("moved"))
        );
    };
    // Both copies of k5 in two regions of subspace n, asked of different servers.
    for _ in 0..2 {
        log(&world);
        check(
            client
                .search(
                    "s",
                    vec![Predicate::new(
                        "n",
                        PredicateOp::GreaterEqual(Value::Int(0)),
                    )],
                )
                .await
                .unwrap(),
        );
        let received = log(&world);
        let server_of = |region: u32| {
            received.iter().find_map(|(server, r)| match r {
                Request::SearchRegions { parts, .. } => parts
                    .iter()
                    .any(|p| p.subspace == SubspaceId(1) && p.regions.contains(&region))
                    .then_some(*server),
                other => panic!("{other:?}"),
            })
        };
        // n = 0 lies in region 4, n = i64::MAX in region 7.
        assert_ne!(server_of(4).unwrap(), server_of(7).unwrap());
    }
    // Each search: every region of the key subspace exactly once, one request per server;
    // over three searches every replica of a region was asked.
    let mut asked: HashMap<u32, BTreeSet<ServerId>> = HashMap::new();
    for _ in 0..3 {
        log(&world);
        check(client.search("s", vec![]).await.unwrap());
        let search = log(&world);
        let mut regions = vec![];
        let servers: BTreeSet<ServerId> = search.iter().map(|(s, _)| *s).collect();
        assert_eq!(servers.len(), search.len(), "one request per server");
        for (server, request) in search {
            let Request::SearchRegions { parts, .. } = request else {
                panic!("{request:?}")
            };
            let [RegionsOf {
                subspace,
                regions: r,
            }] = &parts[..]
            else {
                panic!("{parts:?}")
            };
            assert_eq!(*subspace, SubspaceId::KEY);
            let r = r.clone();
            regions.extend(r.iter().copied());
            for region in r {
                asked.entry(region).or_default().insert(server);
            }
        }
        regions.sort();
        assert_eq!(regions, (0..8).collect::<Vec<_>>());
    }
    assert!(
        asked.values().all(|servers| servers.len() == 2),
        "{asked:?}"
    );
    world.lock().unwrap().ghosts.clear();

    // A search on n uses subspace 1 and one region.
    let found = client
        .search("s", vec![Predicate::equals("n", 2i64)])
        .await
        .unwrap();
    assert_eq!(found.len(), 4);
    let received = log(&world);
    assert_eq!(received.len(), 1);
    assert!(
        matches!(&received[0].1, Request::SearchRegions { parts, .. } if parts == &[RegionsOf { subspace: SubspaceId(1), regions: parts[0].regions.clone() }] && parts[0].regions.len() == 1)
    );
    let e = client
        .explain("s", vec![Predicate::equals("n", 2i64)])
        .await
        .unwrap();
    assert_eq!(
        (
            e.subspace,
            e.regions_contacted,
            e.servers_contacted,
            e.subspace_regions
        ),
        (SubspaceId(1), 1, 1, 8)
    );
    assert_eq!(
        client
            .count(
                "s",
                vec![Predicate::new("n", PredicateOp::LessEqual(Value::Int(1)))]
            )
            .await
            .unwrap(),
        8
    );

    // Contradicting predicates contact nobody; bad ones are refused on sight.
    log(&world);
    let none = vec![Predicate::equals("n", 1i64), Predicate::equals("n", 2i64)];
    assert!(client.search("s", none.clone()).await.unwrap().is_empty());
    assert_eq!(client.count("s", none).await.unwrap(), 0);
    let e = client
        .search("s", vec![Predicate::equals("nope", 1i64)])
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::UnknownAttribute));
    let e = client
        .count("s", vec![Predicate::equals("n", "x")])
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::WrongType));
    assert!(log(&world).is_empty());
}

#[tokio::test]
async fn sorted_search_and_group_operations() {
    let (world, client) = cluster().await;
    fill(&client, 20).await;
    let sorted = client
        .sorted_search("s", vec![], "n", 6, SortOrder::Descending)
        .await
        .unwrap();
    let ranks: Vec<(Value, Value)> = sorted
        .iter()
        .map(|r| (r.attributes["n"].clone(), r.key.clone()))
        .collect();
    let expected: Vec<(Value, Value)> = ["k9", "k4", "k19", "k14", "k8", "k3"]
        .iter()
        .map(|k| {
            (
                Value::Int(k[1..].parse::<i64>().unwrap() % 5),
                Value::from(*k),
            )
        })
        .collect();
    assert_eq!(ranks, expected);
    let e = client
        .sorted_search("s", vec![], "nope", 3, SortOrder::Ascending)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::UnknownAttribute));

    use tessera_client::{Funcall, FuncallOp, NumOp};
    let add = vec![Funcall::new("n", FuncallOp::Num(NumOp::Add), 10i64)];
    assert_eq!(
        client
            .group_update("s", vec![Predicate::equals("n", 4i64)], add)
            .await
            .unwrap(),
        4
    );
    assert_eq!(
        client
            .count("s", vec![Predicate::equals("n", 14i64)])
            .await
            .unwrap(),
        4
    );
    // An atomic operation that fits no object applies to none, asking nobody.
    log(&world);
    let bad = vec![Funcall::new("tag", FuncallOp::Num(NumOp::Add), 1i64)];
    assert_eq!(client.group_update("s", vec![], bad).await.unwrap(), 0);
    assert!(log(&world).is_empty());
    assert_eq!(
        client
            .group_del(
                "s",
                vec![Predicate::new("n", PredicateOp::LessEqual(Value::Int(1)))]
            )
            .await
            .unwrap(),
        8
    );
    assert_eq!(client.count("s", vec![]).await.unwrap(), 12);
    assert_eq!(world.lock().unwrap().objects.len(), 12);
}

#[tokio::test]
async fn a_request_refused_for_a_newer_epoch_is_rerouted() {
    let (world, client) = cluster().await;
    fill(&client, 10).await;
    // The cluster moves on: every region changes hands; the client does not know yet.
    let old_leader = leader_of(&world, "k1");
    {
        let mut w = world.lock().unwrap();
        let config = w.config.as_mut().unwrap();
        config.epoch = Epoch(config.epoch.0 + 1);
        let id = config.spaces[0].id;
        config.spaces[0] = space_config(id, SPACE, 1);
        w.log.clear();
    }
    let new_leader = leader_of(&world, "k1");
    assert_ne!(old_leader, new_leader);
    client.put("s", "k1", [("n", 42i64)]).await.unwrap();
    let received: Vec<ServerId> = log(&world).into_iter().map(|(s, _)| s).collect();
    assert_eq!(received, vec![old_leader, new_leader]);
    assert_eq!(client.configuration().epoch, Epoch(3));
    assert_eq!(
        client.get("s", "k1").await.unwrap().unwrap().attributes["n"],
        Value::Int(42)
    );
    assert_eq!(client.search("s", vec![]).await.unwrap().len(), 10);
}

/// By default gets take turns among the replicas of the key's region, and go nowhere else;
/// writes still go to the point leader.
#[tokio::test]
async fn gets_take_turns_among_the_replicas_of_the_key_region() {
    let (world, client) = cluster().await;
    fill(&client, 10).await;
    log(&world);
    for round in 0..16 {
        for i in 0..10 {
            let key = format!("k{i}");
            let record = client.get("s", key.as_str()).await.unwrap().unwrap();
            assert_eq!(
                record.attributes["tag"],
                Value::from(format!("t{i}")),
                "{round}"
            );
        }
    }
    let config = world.lock().unwrap().config.clone().unwrap();
    let space = config.space("s").unwrap();
    let mut asked: BTreeMap<String, BTreeSet<ServerId>> = BTreeMap::new();
    for (server, request) in log(&world) {
        let Request::Get {
            key: Value::String(key),
            ..
        } = request
        else {
            panic!("only gets: {request:?}");
        };
        let key = key.as_str().expect("text").to_owned();
        asked.entry(key).or_default().insert(server);
    }
    for (key, servers) in asked {
        let t = &space.tessellations()[0];
        let region = t.region_of(&[tessera_geometry::key_coordinate(&Value::from(key.as_str()))]);
        let replicas: BTreeSet<ServerId> = space
            .replicas_of(SubspaceId::KEY, region)
            .iter()
            .copied()
            .collect();
        assert!(replicas.len() >= 2, "the fake cluster keeps two copies");
        assert!(
            servers.is_subset(&replicas),
            "{key}: {servers:?} not in {replicas:?}"
        );
        assert!(servers.len() >= 2, "{key}: 16 gets all went to {servers:?}");
    }
    client.put("s", "k1", [("n", 1i64)]).await.unwrap();
    let writes: Vec<ServerId> = log(&world).into_iter().map(|(s, _)| s).collect();
    assert_eq!(writes, vec![leader_of(&world, "k1")]);
}

/// A get that finds an update of its key pending at the point leader is asked again at once
/// of the key region's last replica, which answers; a get of another key is not.
#[tokio::test]
async fn a_get_refused_for_a_pending_update_goes_to_the_last_replica() {
    let (world, client) = cluster_with(leader_reads()).await;
    fill(&client, 3).await;
    world.lock().unwrap().pending.insert(Value::from("k1"));
    log(&world);
    let record = client.get("s", "k1").await.unwrap().unwrap();
    assert_eq!(record.attributes["tag"], Value::from("t1"));
    let leader = leader_of(&world, "k1");
    let asked: Vec<ServerId> = log(&world).into_iter().map(|(s, _)| s).collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0], leader);
    assert_ne!(asked[1], leader, "then the other replica of the region");
    let record = client.get("s", "k2").await.unwrap().unwrap();
    assert_eq!(record.attributes["tag"], Value::from("t2"));
    let asked: Vec<ServerId> = log(&world).into_iter().map(|(s, _)| s).collect();
    assert_eq!(asked, vec![leader_of(&world, "k2")]);
}

#[tokio::test]
async fn a_server_behind_is_given_time() {
    let (world, client) = cluster_with(leader_reads()).await;
    fill(&client, 3).await;
    let leader = leader_of(&world, "k2");
    world.lock().unwrap().behind.insert(leader, 3);
    log(&world);
    assert!(client.get("s", "k2").await.unwrap().is_some());
    assert_eq!(log(&world).len(), 4);
    // Past the retry budget, the refusal itself is returned.
    world.lock().unwrap().behind.insert(leader, u32::MAX);
    let started = std::time::Instant::now();
    let e = client.get("s", "k2").await.unwrap_err();
    assert_eq!(e.status(), Some(Status::Timeout));
    let message = e.to_string();
    assert!(
        message.contains("RECONFIGURE") && message.contains("not applied"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_silent_server_costs_a_read_two_seconds_and_a_write_its_deadline() {
    let (world, _) = cluster().await;
    let coordinator = world.lock().unwrap().coordinator_address.clone();
    let options = tessera_client::ClientOptions::with_timeout(Duration::from_secs(3));
    let client = Client::connect_with(&coordinator, options).await.unwrap();
    fill(&client, 3).await;
    let leader = leader_of(&world, "k1");
    world.lock().unwrap().silent.insert(leader);
    // A write is sent once and then waits out the deadline: its outcome is unknown.
    let started = std::time::Instant::now();
    let e = client.put("s", "k1", [("n", 5i64)]).await.unwrap_err();
    assert_eq!(e.status(), Some(Status::Timeout), "{e}");
    assert!(
        e.to_string().contains("may or may not have been applied"),
        "{e}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    // A read gives up on the silent server after 2 s a try: one of any replica then asks the
    // other replica; one of the point leader only gives up on the whole request.
    let started = std::time::Instant::now();
    assert!(client.get("s", "k1").await.unwrap().is_some());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let mut options = leader_reads();
    options.timeout = Duration::from_secs(3);
    let client = Client::connect_with(&coordinator, options).await.unwrap();
    let started = std::time::Instant::now();
    let e = client.get("s", "k1").await.unwrap_err();
    assert_eq!(e.status(), Some(Status::Timeout), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Keys led by others are served meanwhile.
    let other = (0..3)
        .map(|i| format!("k{i}"))
        .find(|k| leader_of(&world, k) != leader)
        .expect("another leader");
    assert!(client.get("s", other.as_str()).await.unwrap().is_some());
    world.lock().unwrap().silent.clear();
}

#[tokio::test]
async fn a_lost_write_is_not_resent_but_a_lost_read_is() {
    let (world, client) = cluster_with(leader_reads()).await;
    fill(&client, 3).await;
    let leader = leader_of(&world, "k0");
    world.lock().unwrap().hang_up.insert(leader);
    log(&world);
    let e = client.put("s", "k0", [("n", 7i64)]).await.unwrap_err();
    assert!(
        matches!(e, ClientError::ConnectionClosed | ClientError::Io(_)),
        "{e:?}"
    );
    assert_eq!(log(&world).len(), 1, "the write was sent once");
    world.lock().unwrap().hang_up.insert(leader);
    assert!(client.get("s", "k0").await.unwrap().is_some());
    assert_eq!(log(&world).len(), 2, "the read was sent again");
    // A search whose server hangs up is made again.
    world.lock().unwrap().hang_up.insert(ServerId(1));
    assert_eq!(client.search("s", vec![]).await.unwrap().len(), 3);
}

#[tokio::test]
async fn admin_requests_wait_for_a_coordinator_leader() {
    let (world, client) = cluster().await;
    world.lock().unwrap().coordinator_unavailable = 2;
    client
        .add_space(&SPACE.replace("space s", "space t"))
        .await
        .unwrap();
    assert!(client.configuration().space("t").is_some());
    assert_eq!(world.lock().unwrap().coordinator_unavailable, 0);
}

#[tokio::test]
async fn a_schema_refusal_looks_at_a_newer_configuration_first() {
    let (world, client) = cluster().await;
    // Dropped and created again elsewhere with another schema: `n` is a string now, and the
    // client's cached configuration does not know it yet.
    {
        let mut w = world.lock().unwrap();
        let config = w.config.as_mut().unwrap();
        config.epoch = Epoch(config.epoch.0 + 2);
        let id = config.epoch.0;
        config.spaces[0] = space_config(
            id,
            &SPACE.replace("attributes int n", "attributes string n"),
            0,
        );
    }
    let before = client.configuration().epoch;
    // Checked by the client against its cached schema, where `n` is an int: refused there,
    // then accepted once the client has looked at the current configuration.
    client
        .search("s", vec![Predicate::equals("n", "text")])
        .await
        .expect("valid under the current schema");
    assert!(
        client.configuration().epoch > before,
        "the client fetched the newer configuration"
    );
    // A request that is wrong under the current schema too is still refused.
    let e = client
        .search("s", vec![Predicate::equals("n", 5i64)])
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::WrongType), "{e}");
}

/// The subspaces the searches logged since the last look went to.
fn searched_subspaces(world: &Shared) -> BTreeSet<u16> {
    log(world)
        .into_iter()
        .filter_map(|(_, r)| match r {
            Request::SearchRegions { parts, .. } => Some(parts),
            _ => None,
        })
        .flatten()
        .map(|p| p.subspace.0)
        .collect()
}

/// Alter-space goes to the coordinators like add-space, and the client has the configuration
/// with the change when it returns; refusals come back as they are. A subspace being built
/// serves no search, `wait_built` follows the build to its end (or times out saying how far
/// it got), and a dropped subspace serves no search either; searches stay right throughout.
#[tokio::test]
async fn alter_space_and_wait_built() {
    let (world, client) = cluster().await;
    fill(&client, 20).await;
    let tagged = |t: &str| vec![Predicate::equals("tag", t)];
    let add_tag = || SpaceChange::AddSubspace {
        attributes: vec!["tag".into()],
    };

    let before = client.configuration().epoch;
    let e = client
        .alter_space(
            "s",
            SpaceChange::AddSubspace {
                attributes: vec!["nope".into()],
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::BadAlteration), "{e}");
    let e = client.alter_space("t", add_tag()).await.unwrap_err();
    assert_eq!(e.status(), Some(Status::UnknownSpace), "{e}");
    let e = client
        .alter_space("s", SpaceChange::DropSubspace { subspace: 0 })
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::BadAlteration), "{e}");
    assert_eq!(world.lock().unwrap().config.as_ref().unwrap().epoch, before);

    // Subspace 2 (tag) is added: being built, searches on tag read the key subspace.
    client.alter_space("s", add_tag()).await.unwrap();
    let config = client.configuration();
    let space = config.space("s").unwrap();
    assert_eq!(
        config.epoch,
        Epoch(before.0 + 1),
        "the client has the change"
    );
    assert_eq!(
        space.schema.subspace(SubspaceId(2)).state,
        SubspaceState::Building
    );
    log(&world);
    let found = client.search("s", tagged("t3")).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(searched_subspaces(&world), BTreeSet::from([0]));
    let e = client.alter_space("s", add_tag()).await.unwrap_err();
    assert_eq!(e.status(), Some(Status::BadAlteration), "{e}");

    // Nothing backfills yet: the wait times out, saying how far the build got.
    let e = client
        .wait_built("s", Some(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(Status::Timeout), "{e}");
    assert!(e.to_string().contains("0 of 8 key regions"), "{e}");

    // A key region is backfilled every 20 ms, each in a configuration of its own.
    let backfills = world.clone();
    tokio::spawn(async move {
        for region in 0..8 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let mut w = backfills.lock().unwrap();
            let config = w.config.as_mut().unwrap();
            config.epoch = Epoch(config.epoch.0 + 1);
            let space = &mut config.spaces[0];
            let since = space.build.as_ref().unwrap().since;
            let done = BackfillRef {
                space: space.id,
                subspace: SubspaceId(2),
                region,
                since,
            };
            assert_eq!(space.complete_backfills(&[done]), 1);
        }
    });
    let mut seen = vec![];
    let built = client
        .wait_built_with("s", Some(Duration::from_secs(10)), |s| {
            seen.push(s.build.as_ref().map_or(8, |b| b.done.len()))
        })
        .await
        .unwrap();
    assert!(built.build.is_none());
    assert_eq!(
        built.schema.subspace(SubspaceId(2)).state,
        SubspaceState::Serving
    );
    assert!(seen.len() >= 2, "progress was reported: {seen:?}");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&8));
    // Built: a search on tag uses it.
    client.refresh().await.unwrap();
    log(&world);
    assert_eq!(client.search("s", tagged("t3")).await.unwrap().len(), 1);
    assert_eq!(searched_subspaces(&world), BTreeSet::from([2]));
    // Waiting on a space with nothing under way returns at once.
    assert!(client.wait_built("s", None).await.unwrap().build.is_none());

    // Subspace 1 (n) dropped: searches on n read the key subspace, and find the same objects.
    client
        .alter_space("s", SpaceChange::DropSubspace { subspace: 1 })
        .await
        .unwrap();
    let config = client.configuration();
    let space = config.space("s").unwrap();
    assert_eq!(
        space.schema.subspace(SubspaceId(1)).state,
        SubspaceState::Dropped
    );
    assert!(space.replicas[1].is_empty());
    log(&world);
    let found = client
        .search("s", vec![Predicate::equals("n", 2i64)])
        .await
        .unwrap();
    let mut keys: Vec<Value> = found.into_iter().map(|r| r.key).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["k12", "k17", "k2", "k7"].map(Value::from).to_vec(),
        "i % 5 == 2"
    );
    assert_eq!(searched_subspaces(&world), BTreeSet::from([0]));
    let e = client
        .alter_space("s", SpaceChange::DropSubspace { subspace: 1 })
        .await
        .unwrap_err();
    assert_eq!(
        e.status(),
        Some(Status::BadAlteration),
        "dropped already: {e}"
    );
    // Writes go on; explain and a search of everything do not trip on the dropped subspace.
    client.put("s", "k1", [("n", Value::Int(2))]).await.unwrap();
    assert_eq!(
        client
            .count("s", vec![Predicate::equals("n", 2i64)])
            .await
            .unwrap(),
        5
    );
    let e = client
        .explain("s", vec![Predicate::equals("n", 2i64)])
        .await
        .unwrap();
    assert_eq!(e.subspace, SubspaceId::KEY);
    assert_eq!(client.search("s", vec![]).await.unwrap().len(), 20);
}
