//! The coordinator's state machine (`tessera_coordinator::state`) through its public commands:
//! registration, spaces added, altered and removed, servers taken offline, restarted and
//! decommissioned, state transfers planned and completed, leadership balanced after key
//! splits. Property tests over command sequences check its rules (every change bumps the
//! epoch by one, a failed command changes nothing, no replica set empties or loses its last
//! complete member) against checks written here, not calls into the implementation.

use std::collections::HashMap;

use proptest::prelude::*;
use tessera_coordinator::state::{
    ClusterState, Command, CommandError, CommandOutcome, RegisteredServer, CONFIGURATION_BYTES_MAX,
    PLAN_TRANSFERS, TRANSFERS_PER_SERVER_MAX,
};
use tessera_geometry::{assign_replicas, RegionIndex};
use tessera_protocol::{
    AlterError, BackfillRef, Joined, ModelConstants, ServerState, SpaceChange, SpaceConfig,
    Transfer, TransferRef,
};
use tessera_types::{parse_space, Epoch, ServerId, SpaceSchema, SubspaceId, SubspaceState, Value};

fn schema(name: &str, subspaces: usize, partitions: u32, tolerate: u32) -> SpaceSchema {
    let mut text = format!("space {name}\nkey k\nattributes int a, int b, string c\n");
    let dims = ["a", "b, c", "a, b, c", "c"];
    for d in dims.iter().take(subspaces) {
        text.push_str(&format!("subspace {d}\n"));
    }
    text.push_str(&format!(
        "create {partitions} partitions\ntolerate {tolerate} failures\n"
    ));
    parse_space(&text).unwrap()
}

/// `st` with state transfers planned: for the tests of the planner, which is off by default
/// ([`PLAN_TRANSFERS`]).
fn planning(mut st: ClusterState) -> ClusterState {
    st.plan_transfers = true;
    st
}

fn with_servers(n: u64) -> ClusterState {
    let mut st = ClusterState::default();
    for i in 0..n {
        st.apply(Command::RegisterServer {
            token: 1000 + i as u128,
            address: format!("10.0.0.{i}:2000"),
            incarnation: 1,
        })
        .unwrap();
    }
    st
}

/// A space just created: K distinct Available servers per region, within the balance bound.
fn check_space(st: &ClusterState, space: &SpaceConfig) {
    let k = space.schema.replicas() as usize;
    let n = st
        .servers
        .iter()
        .filter(|s| s.info.state == ServerState::Available)
        .count() as u64;
    for (sub, t) in space.replicas.iter().zip(space.tessellations()) {
        assert_eq!(sub.len(), t.regions_count() as usize);
        let regions = sub.len() as u64;
        let bound = (regions * k as u64).div_ceil(n) + 1;
        let head_bound = regions.div_ceil(n) + 1;
        let mut hold: HashMap<ServerId, u64> = HashMap::new();
        let mut heads: HashMap<ServerId, u64> = HashMap::new();
        for set in sub {
            assert_eq!(set.len(), k, "K members");
            let mut d = set.clone();
            d.sort();
            d.dedup();
            assert_eq!(d.len(), k, "distinct members: {set:?}");
            for s in set {
                let r = st
                    .servers
                    .iter()
                    .find(|r| r.info.id == *s)
                    .expect("members are registered");
                assert_eq!(
                    r.info.state,
                    ServerState::Available,
                    "{s:?} is given regions only while Available"
                );
                *hold.entry(*s).or_default() += 1;
            }
            *heads.entry(set[0]).or_default() += 1;
        }
        for (s, h) in &hold {
            assert!(
                *h <= bound,
                "{s:?} holds {h} of {regions} regions (K={k}, n={n}, bound {bound})"
            );
        }
        for (s, h) in &heads {
            assert!(
                *h <= head_bound,
                "{s:?} heads {h} of {regions} regions (n={n}, bound {head_bound})"
            );
        }
    }
}

#[test]
fn register_assigns_ids_in_order_and_is_idempotent() {
    let mut st = ClusterState::default();
    let a = st
        .apply(Command::RegisterServer {
            token: 7,
            address: "a:1".into(),
            incarnation: 1,
        })
        .unwrap();
    assert_eq!(
        a,
        CommandOutcome::Registered {
            id: ServerId(1),
            changed: true
        }
    );
    assert_eq!(st.epoch, Epoch(1));
    let b = st
        .apply(Command::RegisterServer {
            token: 9,
            address: "b:1".into(),
            incarnation: 1,
        })
        .unwrap();
    assert_eq!(
        b,
        CommandOutcome::Registered {
            id: ServerId(2),
            changed: true
        }
    );
    let again = st
        .apply(Command::RegisterServer {
            token: 7,
            address: "a:1".into(),
            incarnation: 1,
        })
        .unwrap();
    assert_eq!(
        again,
        CommandOutcome::Registered {
            id: ServerId(1),
            changed: false
        }
    );
    assert_eq!(st.epoch, Epoch(2), "same address: no new epoch");
    let moved = st
        .apply(Command::RegisterServer {
            token: 7,
            address: "a:2".into(),
            incarnation: 1,
        })
        .unwrap();
    assert_eq!(
        moved,
        CommandOutcome::Registered {
            id: ServerId(1),
            changed: true
        }
    );
    assert_eq!(st.epoch, Epoch(3));
    assert_eq!(
        st.configuration().server(ServerId(1)).unwrap().address,
        "a:2"
    );
    assert_eq!(st.servers.len(), 2);
    assert!(matches!(
        st.apply(Command::RegisterServer {
            token: 1,
            address: String::new(),
            incarnation: 1
        }),
        Err(CommandError::InvalidAddress(_))
    ));
}

fn reg(token: u128, address: &str, incarnation: u64) -> Command {
    Command::RegisterServer {
        token,
        address: address.into(),
        incarnation,
    }
}

/// Every replica set of every space, flattened, in a stable order.
fn sets(st: &ClusterState) -> Vec<Vec<ServerId>> {
    st.spaces
        .iter()
        .flat_map(|s| s.replicas.iter().flatten().cloned())
        .collect()
}

/// Every replica set as it was before planning ran in the current epoch: planning only
/// appends the targets of the transfers it starts, named by that epoch.
fn sets_before_planning(st: &ClusterState) -> Vec<Vec<ServerId>> {
    let mut st = st.clone();
    for space in &mut st.spaces {
        for t in space.transfers.iter().filter(|t| t.id == st.epoch.0) {
            let set = &mut space.replicas[t.subspace.get()][t.region.0 as usize];
            assert_eq!(set.pop(), Some(t.to), "a target is last");
        }
    }
    sets(&st)
}

fn state_of(st: &ClusterState, id: ServerId) -> ServerState {
    st.configuration().server(id).unwrap().state
}

#[test]
fn mark_offline_removes_the_server_keeping_the_order_of_the_others() {
    let mut st = with_servers(3);
    st.apply(Command::AddSpace {
        schema: schema("s", 1, 8, 2),
    })
    .unwrap();
    st.apply(Command::AddSpace {
        schema: schema("solo", 0, 4, 0),
    })
    .unwrap();
    let before = st.clone();
    let victim = ServerId(2);
    let out = st
        .apply(Command::MarkOffline {
            id: victim,
            incarnation: 1,
        })
        .unwrap();
    assert_eq!(out, CommandOutcome::MarkedOffline { id: victim });
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    assert_eq!(state_of(&st, victim), ServerState::Offline);
    assert_eq!(state_of(&st, ServerId(1)), ServerState::Available);
    assert_eq!(state_of(&st, ServerId(3)), ServerState::Available);
    let mut sole = 0;
    for (old, new) in sets(&before).iter().zip(sets(&st)) {
        if old == &[victim] {
            // Its data is nowhere else: the region keeps its last replica.
            assert_eq!(new, [victim]);
            sole += 1;
        } else {
            let expected: Vec<ServerId> = old.iter().copied().filter(|s| *s != victim).collect();
            assert_eq!(new, expected, "the others keep their order");
            if old[0] == victim {
                assert_eq!(new[0], old[1], "the next replica becomes the point leader");
            }
        }
    }
    assert!(
        sole > 0,
        "the single-replica space gave the victim some regions of its own"
    );

    // A second decision about it, a stale incarnation or an unknown server change nothing.
    let after = st.clone();
    assert_eq!(
        st.apply(Command::MarkOffline {
            id: victim,
            incarnation: 1
        }),
        Err(CommandError::AlreadyOffline(victim))
    );
    assert_eq!(
        st.apply(Command::MarkOffline {
            id: ServerId(1),
            incarnation: 7
        }),
        Err(CommandError::StaleServer {
            id: ServerId(1),
            incarnation: 7,
            current: 1
        })
    );
    assert_eq!(
        st.apply(Command::MarkOffline {
            id: ServerId(9),
            incarnation: 1
        }),
        Err(CommandError::UnknownServer(ServerId(9)))
    );
    assert_eq!(st, after);

    // An Offline server gets nothing in a new space, and does not count as available.
    st.apply(Command::AddSpace {
        schema: schema("t", 2, 16, 1),
    })
    .unwrap();
    let t = st.spaces.last().unwrap();
    assert!(
        t.replicas
            .iter()
            .flatten()
            .all(|set| !set.contains(&victim)),
        "{t:?}"
    );
    check_space(&st, t);
    assert_eq!(
        st.apply(Command::AddSpace {
            schema: schema("u", 1, 4, 2)
        }),
        Err(CommandError::TooFewServers {
            space: "u".into(),
            needed: 3,
            available: 2
        })
    );
}

#[test]
fn registration_by_incarnation() {
    let mut st = planning(ClusterState::default());
    st.apply(reg(1, "a:1", 10)).unwrap();
    st.apply(reg(2, "b:1", 10)).unwrap();
    st.apply(reg(3, "c:1", 10)).unwrap();
    st.apply(Command::AddSpace {
        schema: schema("s", 1, 8, 2),
    })
    .unwrap();
    st.apply(Command::AddSpace {
        schema: schema("solo", 0, 4, 0),
    })
    .unwrap();
    let a = ServerId(1);

    // Same incarnation, same address: nothing changes.
    let before = st.clone();
    assert_eq!(
        st.apply(reg(1, "a:1", 10)),
        Ok(CommandOutcome::Registered {
            id: a,
            changed: false
        })
    );
    assert_eq!(st, before);
    // An earlier incarnation is refused and changes nothing.
    assert_eq!(
        st.apply(reg(1, "a:1", 9)),
        Err(CommandError::StaleServer {
            id: a,
            incarnation: 9,
            current: 10
        })
    );
    assert_eq!(st, before);
    // Same incarnation, new address: the address changes, the sets do not.
    assert_eq!(
        st.apply(reg(1, "a:2", 10)),
        Ok(CommandOutcome::Registered {
            id: a,
            changed: true
        })
    );
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    assert_eq!(sets(&st), sets(&before));
    assert_eq!(st.configuration().server(a).unwrap().address, "a:2");

    // A new incarnation: a restart. It leaves every set it can leave, stays Available.
    let before = st.clone();
    assert_eq!(
        st.apply(reg(1, "a:3", 11)),
        Ok(CommandOutcome::Registered {
            id: a,
            changed: true
        })
    );
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    assert_eq!(state_of(&st, a), ServerState::Available);
    assert_eq!(st.server(a).unwrap().incarnation, 11);
    assert_eq!(st.configuration().server(a).unwrap().address, "a:3");
    for (old, new) in sets(&before).iter().zip(sets_before_planning(&st)) {
        if old == &[a] {
            assert_eq!(new, [a]);
        } else {
            assert_eq!(
                new,
                old.iter().copied().filter(|s| *s != a).collect::<Vec<_>>()
            );
        }
    }
    assert!(
        sets(&st).iter().any(|set| set == &[a]),
        "it keeps the regions it alone holds"
    );
    // The regions it left (16 of "s", K = 3) are a replica short, and it is the only
    // server not in them: it is sent 8 of them at once, the rest wait.
    let s = st.spaces.iter().find(|s| s.schema.name == "s").unwrap();
    assert_eq!(s.transfers.len(), TRANSFERS_PER_SERVER_MAX);
    for t in &s.transfers {
        assert_eq!((t.to, t.replaces, t.id), (a, None, st.epoch.0));
        assert_eq!(s.replicas_of(t.subspace, t.region).len(), 3);
    }

    // Offline, then registering again (same incarnation): Available, nothing else changes.
    st.apply(Command::MarkOffline {
        id: ServerId(2),
        incarnation: 10,
    })
    .unwrap();
    let before = st.clone();
    assert_eq!(
        st.apply(reg(2, "b:1", 10)),
        Ok(CommandOutcome::Registered {
            id: ServerId(2),
            changed: true
        })
    );
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    assert_eq!(state_of(&st, ServerId(2)), ServerState::Available);
    assert_eq!(sets_before_planning(&st), sets(&before));
    // Offline, then restarted: Available at the new incarnation.
    st.apply(Command::MarkOffline {
        id: ServerId(3),
        incarnation: 10,
    })
    .unwrap();
    let before = st.clone();
    assert_eq!(
        st.apply(reg(3, "c:1", 12)),
        Ok(CommandOutcome::Registered {
            id: ServerId(3),
            changed: true
        })
    );
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    assert_eq!(state_of(&st, ServerId(3)), ServerState::Available);
    assert_eq!(st.server(ServerId(3)).unwrap().incarnation, 12);
    // A decision about the earlier incarnation cannot hit the restarted server.
    let before = st.clone();
    assert!(matches!(
        st.apply(Command::MarkOffline {
            id: ServerId(3),
            incarnation: 10
        }),
        Err(CommandError::StaleServer { .. })
    ));
    assert_eq!(st, before);
}

#[test]
fn add_and_remove_spaces() {
    let mut st = with_servers(4);
    let before = st.clone();
    let out = st
        .apply(Command::AddSpace {
            schema: schema("s", 2, 16, 1),
        })
        .unwrap();
    assert_eq!(out, CommandOutcome::SpaceAdded { id: 5 });
    assert_eq!(st.epoch, Epoch(5));
    let cfg = st.configuration();
    let space = cfg.space("s").unwrap();
    assert_eq!(space.id, 5);
    check_space(&st, space);
    assert_eq!(
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 4, 0)
        }),
        Err(CommandError::SpaceExists("s".into()))
    );
    assert_eq!(
        st.apply(Command::RmSpace { name: "s".into() }),
        Ok(CommandOutcome::SpaceRemoved)
    );
    assert_eq!(st.epoch, Epoch(6));
    assert_eq!(st.spaces, before.spaces);
    assert_eq!(
        st.apply(Command::RmSpace { name: "s".into() }),
        Err(CommandError::UnknownSpace("s".into()))
    );
    // Created again: a new id.
    assert_eq!(
        st.apply(Command::AddSpace {
            schema: schema("s", 1, 4, 0)
        }),
        Ok(CommandOutcome::SpaceAdded { id: 7 })
    );
}

#[test]
fn too_few_servers_names_both_numbers() {
    let mut st = with_servers(2);
    let before = st.clone();
    let err = st
        .apply(Command::AddSpace {
            schema: schema("s", 1, 8, 2),
        })
        .unwrap_err();
    assert_eq!(
        err,
        CommandError::TooFewServers {
            space: "s".into(),
            needed: 3,
            available: 2
        }
    );
    let msg = err.to_string();
    assert!(msg.contains('3') && msg.contains('2'), "{msg}");
    assert_eq!(st, before);
}

#[test]
fn a_configuration_over_the_frame_limit_is_refused() {
    let mut st = with_servers(8);
    let before = st.clone();
    let big = schema("big", 4, tessera_types::constants::PARTITIONS_MAX, 7);
    assert!(matches!(
        st.apply(Command::AddSpace { schema: big }),
        Err(CommandError::ConfigurationTooLarge { .. })
    ));
    assert_eq!(st, before);
}

#[test]
fn shapes_that_would_pass_the_frame_limit_are_refused() {
    use tessera_types::{PropertyKind, Shape};
    let mut st = with_servers(1);
    let docs =
        tessera_types::parse_space("space docs dynamic key k dimensions 2 tolerate 0 failures")
            .unwrap();
    st.apply(Command::AddSpace { schema: docs }).unwrap();
    // Shapes at their byte limit: 50 paths of 300 bytes (15 KiB each).
    let shape = |n: usize| Shape {
        formula: String::new(),
        properties: (0..50)
            .map(|i| (format!("{n:0>8}{i:0>292}"), PropertyKind::Int))
            .collect(),
    };
    let mut added = 0;
    let refused = loop {
        assert!(added < 1000, "never refused");
        let before = st.clone();
        let change = SpaceChange::AddShape(shape(added));
        match st.apply(Command::AlterSpace {
            name: "docs".into(),
            change,
            fence: None,
        }) {
            Ok(_) => added += 1,
            Err(e) => {
                assert_eq!(st, before, "a refused shape changes nothing");
                break e;
            }
        }
    };
    assert!(
        matches!(refused, CommandError::ConfigurationTooLarge { .. }),
        "{refused:?}"
    );
    let bytes = postcard::to_allocvec(&st.configuration()).unwrap().len();
    assert!(bytes <= CONFIGURATION_BYTES_MAX, "{bytes}");
    assert!(added > 100, "{added} shapes fit");
}

#[test]
fn an_invalid_schema_is_refused_not_a_panic() {
    let mut st = with_servers(3);
    let mut bad = schema("s", 1, 8, 0);
    bad.partitions = 0;
    assert!(matches!(
        st.apply(Command::AddSpace { schema: bad }),
        Err(CommandError::InvalidSchema(_))
    ));
    let mut bad = schema("s", 1, 8, 0);
    bad.subspaces[1].dimensions.clear();
    assert!(matches!(
        st.apply(Command::AddSpace { schema: bad }),
        Err(CommandError::InvalidSchema(_))
    ));
    let mut bad = schema("s", 1, 8, 0);
    bad.subspaces[1].dimensions[0] = tessera_types::AttrIndex(60);
    assert!(matches!(
        st.apply(Command::AddSpace { schema: bad }),
        Err(CommandError::InvalidSchema(_))
    ));
    assert_eq!(st.epoch, Epoch(3));
}

#[test]
fn load_spreads_across_spaces() {
    // Servers join one by one between space creations; new spaces favour the least loaded.
    let mut st = with_servers(3);
    for i in 0..6 {
        st.apply(Command::AddSpace {
            schema: schema(&format!("s{i}"), 1, 10, 1),
        })
        .unwrap();
    }
    let mut load: HashMap<ServerId, u64> = HashMap::new();
    for sp in &st.spaces {
        for sub in &sp.replicas {
            for set in sub {
                for s in set {
                    *load.entry(*s).or_default() += 1;
                }
            }
        }
    }
    let max = load.values().max().unwrap();
    let min = load.values().min().unwrap();
    assert!(max - min <= 1, "{load:?}");
}

/// A region's members and its transfer, by subspace and region number.
fn region(
    st: &ClusterState,
    space: &str,
    sub: u16,
    region: u32,
) -> (Vec<ServerId>, Option<Transfer>) {
    let space = st.spaces.iter().find(|s| s.schema.name == space).unwrap();
    let (sub, region) = (SubspaceId(sub), RegionIndex(region));
    (
        space.replicas_of(sub, region).to_vec(),
        space.transfer_at(sub, region).copied(),
    )
}

fn ids(list: &[u64]) -> Vec<ServerId> {
    list.iter().map(|i| ServerId(*i)).collect()
}

#[test]
fn a_dead_server_is_replaced_a_few_regions_at_a_time() {
    let mut st = planning(with_servers(4));
    st.apply(Command::AddSpace {
        schema: schema("s", 1, 32, 1),
    })
    .unwrap();
    let before = st.clone();
    let dead = ServerId(1);
    st.apply(Command::MarkOffline {
        id: dead,
        incarnation: 1,
    })
    .unwrap();
    let space = &st.spaces[0];
    let short: usize = sets(&before)
        .iter()
        .filter(|set| set.contains(&dead))
        .count();
    assert!(
        short > 2 * TRANSFERS_PER_SERVER_MAX,
        "enough regions to hit the limit: {short}"
    );
    // Each region it left gets one new member, streamed by the one that is left, but no
    // server receives or sends more than the limit: 3 survivors, so at most 3 * 8.
    assert!(!space.transfers.is_empty() && space.transfers.len() <= 3 * TRANSFERS_PER_SERVER_MAX);
    let (to, from) = transfer_counts(&st);
    assert!(
        to.values()
            .chain(from.values())
            .all(|n| *n <= TRANSFERS_PER_SERVER_MAX),
        "{to:?} {from:?}"
    );
    for t in &space.transfers {
        let set = space.replicas_of(t.subspace, t.region);
        assert_eq!((t.id, t.replaces), (st.epoch.0, None));
        assert_eq!(set.len(), 2);
        assert_eq!(set[1], t.to);
        assert_ne!(t.to, dead);
    }
    // Completing them all, round after round, brings every region back to K = 2, none on
    // the dead server, balanced over the three.
    let rounds = settle(&mut st).unwrap();
    assert!(
        rounds >= 2,
        "the limit spread the work over rounds: {rounds}"
    );
    assert!(sets(&st)
        .iter()
        .all(|set| set.len() == 2 && !set.contains(&dead)));
    st.servers.retain(|s| s.info.id != dead);
    check_settled(&st).unwrap();
}

#[test]
fn transfers_follow_their_members_out() {
    // Four servers, K = 3, one region: [1, 2, 3]; 3 dies, so 4 catches up from 2.
    let mut st = planning(with_servers(4));
    st.apply(Command::AddSpace {
        schema: schema("s", 0, 1, 2),
    })
    .unwrap();
    assert_eq!(region(&st, "s", 0, 0).0, ids(&[1, 2, 3]));
    let base = st.clone();
    st.apply(Command::MarkOffline {
        id: ServerId(3),
        incarnation: 1,
    })
    .unwrap();
    let started = st.epoch.0;
    let t = Transfer {
        id: started,
        subspace: SubspaceId(0),
        region: RegionIndex(0),
        to: ServerId(4),
        replaces: None,
    };
    assert_eq!(region(&st, "s", 0, 0), (ids(&[1, 2, 4]), Some(t)));
    let catching_up = st.clone();

    // The target dies: the transfer ends, and nobody else is free to take it.
    st.apply(Command::MarkOffline {
        id: ServerId(4),
        incarnation: 1,
    })
    .unwrap();
    assert_eq!(region(&st, "s", 0, 0), (ids(&[1, 2]), None));

    // The source dies: the transfer is cancelled and started again from the new last
    // member, under a new id.
    let mut st = catching_up.clone();
    st.apply(Command::MarkOffline {
        id: ServerId(2),
        incarnation: 1,
    })
    .unwrap();
    let again = Transfer {
        id: st.epoch.0,
        ..t
    };
    assert_ne!(again.id, t.id);
    assert_eq!(region(&st, "s", 0, 0), (ids(&[1, 4]), Some(again)));

    // A member before the source dies: the transfer goes on.
    let mut st = catching_up.clone();
    st.apply(Command::MarkOffline {
        id: ServerId(1),
        incarnation: 1,
    })
    .unwrap();
    assert_eq!(region(&st, "s", 0, 0), (ids(&[2, 4]), Some(t)));

    // The only complete member dies while the target catches up: it stays (its data is
    // nowhere else), the transfer is cancelled, and no new one starts from a dead source.
    let mut st = catching_up.clone();
    st.apply(Command::MarkOffline {
        id: ServerId(1),
        incarnation: 1,
    })
    .unwrap();
    st.apply(Command::MarkOffline {
        id: ServerId(2),
        incarnation: 1,
    })
    .unwrap();
    assert_eq!(region(&st, "s", 0, 0), (ids(&[2]), None));

    // A restart counts as leaving too: the target restarting loses its partial copy.
    let mut st = catching_up.clone();
    st.apply(reg(1003, "10.0.0.3:2000", 2)).unwrap();
    let (set, transfer) = region(&st, "s", 0, 0);
    assert_eq!(set[..2], ids(&[1, 2])[..]);
    assert_ne!(
        transfer.map(|t| t.id),
        Some(t.id),
        "the restarted target starts over"
    );

    // The member a transfer replaces dies: it goes, the transfer goes on replacing nobody.
    let mut st = base.clone();
    st.apply(Command::Decommission { id: ServerId(1) }).unwrap();
    let (set, Some(leaving)) = region(&st, "s", 0, 0) else {
        panic!("a transfer replaces the Leaving server")
    };
    assert_eq!(
        (set, leaving.replaces, leaving.to),
        (ids(&[1, 2, 3, 4]), Some(ServerId(1)), ServerId(4))
    );
    st.apply(Command::MarkOffline {
        id: ServerId(1),
        incarnation: 1,
    })
    .unwrap();
    assert_eq!(
        region(&st, "s", 0, 0),
        (
            ids(&[2, 3, 4]),
            Some(Transfer {
                replaces: None,
                ..leaving
            })
        )
    );
    assert!(
        st.server(ServerId(1)).is_none(),
        "a Leaving server that dies holding nothing is gone"
    );
}

#[test]
fn completing_transfers_checks_what_it_is_told() {
    let mut st = planning(with_servers(3));
    st.apply(Command::AddSpace {
        schema: schema("s", 0, 1, 1),
    })
    .unwrap();
    assert_eq!(region(&st, "s", 0, 0).0, ids(&[1, 2]));
    st.apply(Command::MarkOffline {
        id: ServerId(2),
        incarnation: 1,
    })
    .unwrap();
    let (set, Some(t)) = region(&st, "s", 0, 0) else {
        panic!("a transfer to 3")
    };
    assert_eq!((set, t.to), (ids(&[1, 3]), ServerId(3)));
    let space = st.spaces[0].id;
    let good = TransferRef {
        space,
        subspace: SubspaceId(0),
        region: 0,
        id: t.id,
    };
    let complete = |id: u64, incarnation: u64, done: Vec<TransferRef>| Command::CompleteTransfers {
        id: ServerId(id),
        incarnation,
        done,
        backfilled: vec![],
    };

    // References that name no transfer of this server change nothing.
    let before = st.clone();
    for wrong in [
        TransferRef {
            id: t.id + 1,
            ..good
        },
        TransferRef {
            id: t.id - 1,
            ..good
        },
        TransferRef {
            space: space + 1,
            ..good
        },
        TransferRef { region: 1, ..good },
        TransferRef {
            subspace: SubspaceId(1),
            ..good
        },
    ] {
        assert_eq!(
            st.apply(complete(3, 1, vec![wrong])),
            Ok(CommandOutcome::TransfersCompleted {
                completed: 0,
                backfilled: 0
            })
        );
    }
    assert_eq!(
        st.apply(complete(1, 1, vec![good])),
        Ok(CommandOutcome::TransfersCompleted {
            completed: 0,
            backfilled: 0
        }),
        "not its transfer"
    );
    assert_eq!(
        st.apply(complete(3, 1, vec![])),
        Ok(CommandOutcome::TransfersCompleted {
            completed: 0,
            backfilled: 0
        })
    );
    assert_eq!(
        st.apply(complete(3, 2, vec![good])),
        Err(CommandError::StaleServer {
            id: ServerId(3),
            incarnation: 2,
            current: 1
        })
    );
    assert_eq!(
        st.apply(complete(9, 1, vec![good])),
        Err(CommandError::UnknownServer(ServerId(9)))
    );
    assert_eq!(st, before);

    // The right one, repeated: completed once, one new epoch; 3 is a full member.
    assert_eq!(
        st.apply(complete(3, 1, vec![good, good])),
        Ok(CommandOutcome::TransfersCompleted {
            completed: 1,
            backfilled: 0
        })
    );
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    assert_eq!(region(&st, "s", 0, 0), (ids(&[1, 3]), None));
    assert_eq!(
        st.configuration().spaces[0].complete_replicas(SubspaceId(0), RegionIndex(0)),
        ids(&[1, 3])
    );
    // Reported again (a lost reply): nothing.
    let after = st.clone();
    assert_eq!(
        st.apply(complete(3, 1, vec![good])),
        Ok(CommandOutcome::TransfersCompleted {
            completed: 0,
            backfilled: 0
        })
    );
    assert_eq!(st, after);
}

#[test]
fn decommission_drains_a_server_then_removes_it() {
    let mut st = planning(with_servers(5));
    st.apply(Command::AddSpace {
        schema: schema("two", 2, 24, 1),
    })
    .unwrap();
    st.apply(Command::AddSpace {
        schema: schema("three", 1, 16, 2),
    })
    .unwrap();
    let gone = ServerId(2);
    let held = sets(&st).iter().filter(|set| set.contains(&gone)).count();
    assert_eq!(
        st.apply(Command::Decommission { id: gone }),
        Ok(CommandOutcome::Decommissioned {
            id: gone,
            removed: false
        })
    );
    assert_eq!(state_of(&st, gone), ServerState::Leaving);
    // Its regions start moving, at most the limit of them from it at once; each transfer
    // replaces it.
    let moving: Vec<Transfer> = st
        .spaces
        .iter()
        .flat_map(|s| s.transfers.iter().copied())
        .collect();
    assert!(!moving.is_empty());
    assert!(
        moving
            .iter()
            .all(|t| t.replaces == Some(gone) && t.to != gone),
        "{moving:?}"
    );
    // Nothing new for it, and it cannot be decommissioned twice.
    assert_eq!(
        st.apply(Command::Decommission { id: gone }),
        Err(CommandError::AlreadyLeaving(gone))
    );
    st.apply(Command::AddSpace {
        schema: schema("later", 0, 8, 0),
    })
    .unwrap();
    assert!(st.spaces[2]
        .replicas
        .iter()
        .flatten()
        .all(|set| !set.contains(&gone)));
    // It keeps serving (and holding) until its last region has moved, then it is gone.
    let rounds = settle(&mut st).unwrap();
    assert!(
        rounds > 1 && held > TRANSFERS_PER_SERVER_MAX,
        "{held} regions moved over {rounds} rounds"
    );
    assert!(st.server(gone).is_none());
    assert!(st.configuration().server(gone).is_none());
    check_settled(&st).unwrap();
    assert_eq!(
        st.apply(Command::Decommission { id: gone }),
        Err(CommandError::UnknownServer(gone))
    );

    // Four servers left and a K = 3 space: one more may go, not two.
    st.apply(Command::Decommission { id: ServerId(1) }).unwrap();
    let err = st
        .apply(Command::Decommission { id: ServerId(3) })
        .unwrap_err();
    assert_eq!(
        err,
        CommandError::WouldUnderReplicate {
            id: ServerId(3),
            space: "three".into(),
            needed: 3,
            available: 2
        }
    );
    assert!(err.to_string().contains("three"), "{err}");

    // An Offline server: refused while it alone holds a region, removed at once otherwise.
    let mut solo = planning(with_servers(3));
    solo.apply(Command::AddSpace {
        schema: schema("solo", 0, 4, 0),
    })
    .unwrap();
    solo.apply(Command::MarkOffline {
        id: ServerId(1),
        incarnation: 1,
    })
    .unwrap();
    assert!(matches!(
        solo.apply(Command::Decommission { id: ServerId(1) }),
        Err(CommandError::OfflineHoldsRegions { .. })
    ));
    let mut empty = planning(with_servers(3));
    empty
        .apply(Command::AddSpace {
            schema: schema("s", 1, 16, 1),
        })
        .unwrap();
    empty
        .apply(Command::RegisterServer {
            token: 77,
            address: "x:1".into(),
            incarnation: 1,
        })
        .unwrap();
    let new = empty.servers.last().unwrap().info.id;
    settle(&mut empty).unwrap();
    empty
        .apply(Command::MarkOffline {
            id: new,
            incarnation: 1,
        })
        .unwrap();
    settle(&mut empty).unwrap();
    assert!(sets(&empty).iter().all(|set| !set.contains(&new)));
    assert_eq!(
        empty.apply(Command::Decommission { id: new }),
        Ok(CommandOutcome::Decommissioned {
            id: new,
            removed: true
        })
    );
    assert!(empty.server(new).is_none());
}

#[test]
fn a_server_holding_nothing_leaves_at_once() {
    let mut st = with_servers(3);
    let before = st.clone();
    assert_eq!(
        st.apply(Command::Decommission { id: ServerId(3) }),
        Ok(CommandOutcome::Decommissioned {
            id: ServerId(3),
            removed: true
        })
    );
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    assert_eq!(st.servers, before.servers[..2]);
}

#[test]
fn a_leaving_server_that_restarts_or_registers_again_goes_on_leaving() {
    let mut st = planning(with_servers(3));
    st.apply(Command::AddSpace {
        schema: schema("s", 0, 16, 1),
    })
    .unwrap();
    st.apply(Command::Decommission { id: ServerId(1) }).unwrap();
    let before = st.clone();
    // A retried registration of the same process changes nothing.
    assert_eq!(
        st.apply(reg(1000, "10.0.0.0:2000", 1)),
        Ok(CommandOutcome::Registered {
            id: ServerId(1),
            changed: false
        })
    );
    assert_eq!(st, before);
    // A restart leaves its sets, but not the decision.
    st.apply(reg(1000, "10.0.0.0:2000", 2)).unwrap();
    assert_eq!(
        st.server(ServerId(1)).map(|s| s.info.state),
        None,
        "it held nothing more: gone"
    );
    assert!(sets(&st).iter().all(|set| !set.contains(&ServerId(1))));
}

#[test]
fn a_joining_server_takes_its_share() {
    let mut st = planning(with_servers(3));
    st.apply(Command::AddSpace {
        schema: schema("s", 2, 16, 1),
    })
    .unwrap();
    let new = ServerId(4);
    st.apply(reg(9, "new:1", 1)).unwrap();
    // It gets regions from the most loaded, each transfer replacing the donor.
    let moving: Vec<Transfer> = st.spaces[0].transfers.clone();
    assert!(
        !moving.is_empty() && moving.len() <= TRANSFERS_PER_SERVER_MAX,
        "{moving:?}"
    );
    assert!(moving
        .iter()
        .all(|t| t.to == new && t.replaces.is_some_and(|r| r != new)));
    settle(&mut st).unwrap();
    check_settled(&st).unwrap();
    for sub in &st.spaces[0].replicas {
        // 16 regions * K 2 / 4 servers: exactly 8 each.
        assert_eq!(
            sub.iter().filter(|set| set.contains(&new)).count(),
            sub.len() * 2 / 4
        );
    }
}

/// What [`PLAN_TRANSFERS`] off means (set explicitly here, so the default changes no test).
#[test]
fn without_planning_regions_stay_short_and_decommission_needs_an_empty_server() {
    let mut st = with_servers(3);
    st.plan_transfers = false;
    st.apply(Command::AddSpace {
        schema: schema("s", 1, 8, 1),
    })
    .unwrap();
    // A dead server leaves its regions a replica short: nothing replaces it.
    st.apply(Command::MarkOffline {
        id: ServerId(3),
        incarnation: 1,
    })
    .unwrap();
    assert!(st.spaces[0].transfers.is_empty());
    assert!(sets(&st)
        .iter()
        .all(|set| !set.contains(&ServerId(3)) && !set.is_empty()));
    assert!(
        sets(&st).iter().any(|set| set.len() == 1),
        "some regions are one short"
    );
    // A joining server takes no share of existing spaces.
    st.apply(reg(9, "new:1", 1)).unwrap();
    let new = st.servers.last().unwrap().info.id;
    assert!(st.spaces[0].transfers.is_empty() && sets(&st).iter().all(|set| !set.contains(&new)));
    // Decommission: refused, with the reason, for a server that holds regions; nothing
    // changes. One that holds none (the new one, the offline one) leaves at once.
    let before = st.clone();
    let err = st
        .apply(Command::Decommission { id: ServerId(1) })
        .unwrap_err();
    assert!(
        matches!(err, CommandError::TransfersOff { id: ServerId(1), regions } if regions > 0),
        "{err:?}"
    );
    assert!(err.to_string().contains("no state transfers"), "{err}");
    assert_eq!(st, before);
    assert_eq!(
        st.apply(Command::Decommission { id: new }),
        Ok(CommandOutcome::Decommissioned {
            id: new,
            removed: true
        })
    );
    assert_eq!(
        st.apply(Command::Decommission { id: ServerId(3) }),
        Ok(CommandOutcome::Decommissioned {
            id: ServerId(3),
            removed: true
        })
    );
    st.configuration().check().unwrap();
}

#[test]
fn join_records_follow_the_members() {
    // Three servers, K = 2, one region: [1, 2].
    let mut st = planning(with_servers(3));
    st.apply(Command::AddSpace {
        schema: schema("s", 0, 1, 1),
    })
    .unwrap();
    assert_eq!(region(&st, "s", 0, 0).0, ids(&[1, 2]));
    let joined = |st: &ClusterState| st.spaces[0].joined.clone();
    let complete = |st: &mut ClusterState, to: u64| {
        let done = refs_into(st, ServerId(to));
        assert_eq!(done.len(), 1);
        st.apply(Command::CompleteTransfers {
            id: ServerId(to),
            incarnation: 1,
            done,
            backfilled: vec![],
        })
        .unwrap();
        st.configuration().check().unwrap();
    };
    // 1 is decommissioned: 3 replaces it and, once done, is a member since that transfer.
    st.apply(Command::Decommission { id: ServerId(1) }).unwrap();
    let (_, Some(t)) = region(&st, "s", 0, 0) else {
        panic!("a transfer to 3")
    };
    assert_eq!((t.to, t.replaces), (ServerId(3), Some(ServerId(1))));
    assert_eq!(
        st.spaces[0].member_since(SubspaceId(0), RegionIndex(0), ServerId(3)),
        Epoch(t.id)
    );
    assert!(
        joined(&st).is_empty(),
        "a record only once the transfer completes"
    );
    complete(&mut st, 3);
    assert_eq!(region(&st, "s", 0, 0), (ids(&[2, 3]), None));
    let record = Joined {
        subspace: SubspaceId(0),
        region: RegionIndex(0),
        server: ServerId(3),
        since: t.id,
    };
    assert_eq!(joined(&st), [record]);
    assert!(st.server(ServerId(1)).is_none());
    // A fourth server; 3 dies: it leaves the set, and its record with it.
    st.apply(reg(9, "new:1", 1)).unwrap();
    let four = st.servers.last().unwrap().info.id;
    settle(&mut st).unwrap();
    let (set, _) = region(&st, "s", 0, 0);
    assert!(set.contains(&ServerId(3)));
    st.apply(Command::MarkOffline {
        id: ServerId(3),
        incarnation: 1,
    })
    .unwrap();
    assert!(
        joined(&st).iter().all(|j| j.server != ServerId(3)),
        "{:?}",
        joined(&st)
    );
    st.configuration().check().unwrap();
    // 3 comes back (a restart); the region is completed by someone, and 3's old record
    // never returns: each member has at most one record, of its latest transfer.
    st.apply(reg(1002, "10.0.0.2:2000", 2)).unwrap();
    settle(&mut st).unwrap();
    for j in joined(&st) {
        assert!(region(&st, "s", 0, 0).0.contains(&j.server));
        assert!(j.since > t.id || j.server != ServerId(3), "{j:?}");
    }
    assert!(st.server(four).is_some());
    st.configuration().check().unwrap();
}

fn alter(name: &str, change: SpaceChange) -> Command {
    Command::AlterSpace {
        name: name.into(),
        change,
        fence: None,
    }
}

fn add_sub(attributes: &[&str]) -> SpaceChange {
    SpaceChange::AddSubspace {
        attributes: attributes.iter().map(|a| a.to_string()).collect(),
    }
}

fn drop_sub(subspace: u16) -> SpaceChange {
    SpaceChange::DropSubspace { subspace }
}

fn backfill(space: u64, subspace: u16, region: u32, since: u64) -> BackfillRef {
    BackfillRef {
        space,
        subspace: SubspaceId(subspace),
        region,
        since,
    }
}

fn report_backfills(id: u64, incarnation: u64, backfilled: Vec<BackfillRef>) -> Command {
    Command::CompleteTransfers {
        id: ServerId(id),
        incarnation,
        done: vec![],
        backfilled,
    }
}

#[test]
fn adaptation_is_switched_and_logged_through_the_log_and_survives_validation() {
    let mut st = with_servers(2);
    st.apply(Command::AddSpace {
        schema: schema("s", 1, 8, 1).with_adapt(true),
    })
    .unwrap();
    assert!(
        st.spaces[0].schema.adapt,
        "adapt on survives validate_schema"
    );
    let decision = tessera_protocol::Adaptation {
        from: vec![vec!["a".into()]],
        to: vec![vec!["c".into()]],
        predicted_from_ops_s: 10,
        predicted_to_ops_s: 20,
        observations: 3,
        period_s: 60,
    };
    let step = |term| {
        SpaceChange::LogAdaptation(tessera_protocol::AdaptationStep {
            term,
            event: tessera_protocol::AdaptationEvent::Started,
            adaptation: decision.clone(),
        })
    };
    let epoch = st.epoch.0;
    let out = st.apply(alter("s", step(0))).unwrap();
    assert_eq!(out, CommandOutcome::SpaceAltered { subspace: None });
    assert_eq!(st.epoch.0, epoch + 1);
    assert_eq!(st.spaces[0].adaptations.len(), 1);
    assert_eq!(st.spaces[0].adaptations[0].epoch, epoch + 1);
    // Fenced by the term the driver decided in: it applies in an entry of that term only.
    let fenced = |change, term| Command::AlterSpace {
        name: "s".into(),
        change,
        fence: Some(term),
    };
    let before = st.clone();
    for (fence, entry_term) in [(3, 4), (5, 4)] {
        assert_eq!(
            st.apply_in_term(fenced(step(fence), fence), entry_term),
            Err(CommandError::Alter(AlterError::Fenced {
                decided: fence,
                term: entry_term
            }))
        );
        let add = SpaceChange::AddSubspace {
            attributes: vec!["c".into()],
        };
        assert!(st.apply_in_term(fenced(add, fence), entry_term).is_err());
        assert_eq!(st, before, "a fenced change changed nothing");
    }
    st.apply_in_term(fenced(step(4), 4), 4).unwrap();
    assert_eq!(st.spaces[0].adaptations[1].step.term, 4);
    // Off: the space no longer takes adaptations, and nothing else changed.
    st.apply(alter("s", SpaceChange::SetAdapt { on: false }))
        .unwrap();
    assert!(!st.spaces[0].schema.adapt);
    let before = st.clone();
    assert_eq!(
        st.apply(alter("s", step(0))),
        Err(CommandError::Alter(AlterError::NotAdaptive))
    );
    assert_eq!(st, before);
    assert!(st.configuration().check().is_ok());
}

#[test]
fn adding_a_subspace_builds_it_on_balanced_replica_sets() {
    // Three Available servers and an Offline fourth; K = 2.
    let mut st = planning(with_servers(4));
    st.apply(Command::MarkOffline {
        id: ServerId(4),
        incarnation: 1,
    })
    .unwrap();
    st.apply(Command::AddSpace {
        schema: schema("s", 1, 8, 1),
    })
    .unwrap();
    let before = st.clone();
    let out = st.apply(alter("s", add_sub(&["c", "b"]))).unwrap();
    assert_eq!(out, CommandOutcome::SpaceAltered { subspace: Some(2) });
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    let space = &st.spaces[0];
    let c = space.schema.attribute_index("c").unwrap();
    let b = space.schema.attribute_index("b").unwrap();
    assert_eq!(
        space.schema.subspaces[2],
        tessera_types::Subspace {
            dimensions: vec![c, b],
            state: SubspaceState::Building,
            overlay: None,
            tags: None,
            cuts: None,
        }
    );
    assert_eq!(
        space.build,
        Some(tessera_protocol::Build {
            subspace: SubspaceId(2),
            since: st.epoch.0,
            done: vec![],
            replaces: None,
        })
    );
    // The others are as they were; the new one has a set per region of its tessellation
    // (2 dimensions over 8 partitions: 3 x 3 regions).
    assert_eq!(space.replicas[..2], before.spaces[0].replicas[..]);
    assert_eq!(space.replicas.len(), 3);
    assert_eq!(space.replicas[2].len(), 9);
    let mut hold: HashMap<ServerId, usize> = HashMap::new();
    for set in &space.replicas[2] {
        assert_eq!(set.len(), 2, "K members: {set:?}");
        assert_ne!(set[0], set[1], "distinct members: {set:?}");
        for s in set {
            assert!(
                [ServerId(1), ServerId(2), ServerId(3)].contains(s),
                "Available members only: {set:?}"
            );
            *hold.entry(*s).or_default() += 1;
        }
    }
    // 18 memberships over 3 servers: 6 each.
    assert_eq!(hold.len(), 3, "{hold:?}");
    assert!(hold.values().all(|h| *h == 6), "{hold:?}");
    assert!(space.transfers.is_empty(), "nothing to plan");
    assert_eq!(space.schema.searchable_subspaces().count(), 2);
    assert_eq!(space.schema.written_subspaces().count(), 3);
    st.configuration().check().unwrap();
}

#[test]
fn refused_alterations_change_nothing() {
    let mut st = with_servers(3);
    st.apply(Command::AddSpace {
        schema: schema("s", 2, 8, 1),
    })
    .unwrap();
    let refusals = |st: &mut ClusterState, cases: Vec<(Command, CommandError)>| {
        for (command, expected) in cases {
            let before = st.clone();
            assert_eq!(st.apply(command.clone()), Err(expected), "{command:?}");
            assert_eq!(*st, before, "{command:?} changed nothing");
        }
    };
    use tessera_types::SchemaError as E;
    refusals(
        &mut st,
        vec![
            (
                alter("nope", add_sub(&["a"])),
                CommandError::UnknownSpace("nope".into()),
            ),
            (
                alter("nope", drop_sub(1)),
                CommandError::UnknownSpace("nope".into()),
            ),
            (
                alter("s", add_sub(&["zz"])),
                CommandError::Alter(AlterError::Schema(E::UnknownAttribute("zz".into()))),
            ),
            (
                alter("s", add_sub(&["a", "k"])),
                CommandError::Alter(AlterError::Schema(E::KeyInSubspace("k".into()))),
            ),
            (
                alter("s", add_sub(&[])),
                CommandError::Alter(AlterError::Schema(E::EmptySubspace)),
            ),
            // Subspace 2 spans b, c.
            (
                alter("s", add_sub(&["c", "b"])),
                CommandError::Alter(AlterError::SubspaceExists(2)),
            ),
            (
                alter("s", add_sub(&["a"])),
                CommandError::Alter(AlterError::SubspaceExists(1)),
            ),
            (
                alter("s", drop_sub(0)),
                CommandError::Alter(AlterError::KeySubspace),
            ),
            (
                alter("s", drop_sub(3)),
                CommandError::Alter(AlterError::NoSuchSubspace(3)),
            ),
            (
                alter("s", drop_sub(u16::MAX)),
                CommandError::Alter(AlterError::NoSuchSubspace(u16::MAX)),
            ),
        ],
    );
    // One build at a time.
    assert_eq!(
        st.apply(alter("s", add_sub(&["c"]))),
        Ok(CommandOutcome::SpaceAltered { subspace: Some(3) })
    );
    refusals(
        &mut st,
        vec![(
            alter("s", add_sub(&["a", "b"])),
            CommandError::Alter(AlterError::BuildUnderWay(3)),
        )],
    );
    // A dropped subspace is gone: dropping it again names nothing, and its attributes
    // may span a new one.
    assert_eq!(
        st.apply(alter("s", drop_sub(1))),
        Ok(CommandOutcome::SpaceAltered { subspace: Some(1) })
    );
    refusals(
        &mut st,
        vec![(
            alter("s", drop_sub(1)),
            CommandError::Alter(AlterError::NoSuchSubspace(1)),
        )],
    );
    // Too few servers for K = 2 once two are offline; a drop needs none.
    for id in [2, 3] {
        st.apply(Command::MarkOffline {
            id: ServerId(id),
            incarnation: 1,
        })
        .unwrap();
    }
    assert_eq!(
        st.apply(alter("s", drop_sub(3))),
        Ok(CommandOutcome::SpaceAltered { subspace: Some(3) })
    );
    refusals(
        &mut st,
        vec![(
            alter("s", add_sub(&["a"])),
            CommandError::TooFewServers {
                space: "s".into(),
                needed: 2,
                available: 1,
            },
        )],
    );
    st.configuration().check().unwrap();
}

#[test]
fn subspace_ids_run_out() {
    let mut st = with_servers(2);
    st.apply(Command::AddSpace {
        schema: schema("s", 1, 4, 1),
    })
    .unwrap();
    // Add and drop until every id is used: 30 more after the key subspace and "a".
    for id in 2..32u16 {
        assert_eq!(
            st.apply(alter("s", add_sub(&["c"]))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(id) })
        );
        assert_eq!(
            st.apply(alter("s", drop_sub(id))),
            Ok(CommandOutcome::SpaceAltered { subspace: Some(id) })
        );
    }
    assert_eq!(st.spaces[0].schema.subspaces.len(), 32);
    let before = st.clone();
    assert_eq!(
        st.apply(alter("s", add_sub(&["c"]))),
        Err(CommandError::Alter(AlterError::SubspaceIdsUsed))
    );
    assert_eq!(st, before);
    // Dropping still works.
    assert_eq!(
        st.apply(alter("s", drop_sub(1))),
        Ok(CommandOutcome::SpaceAltered { subspace: Some(1) })
    );
    let space = &st.spaces[0];
    assert_eq!(space.schema.written_subspaces().count(), 1);
    assert!(space.replicas[1..].iter().all(|sets| sets.is_empty()));
    st.configuration().check().unwrap();
}

#[test]
fn an_alteration_over_the_frame_limit_is_refused() {
    let mut st = with_servers(8);
    // Three subspaces of about 65536 regions, K = 8: about 1.8 MB.
    st.apply(Command::AddSpace {
        schema: schema("big", 2, tessera_types::constants::PARTITIONS_MAX, 7),
    })
    .unwrap();
    let before = st.clone();
    assert!(matches!(
        st.apply(alter("big", add_sub(&["c"]))),
        Err(CommandError::ConfigurationTooLarge { .. })
    ));
    assert_eq!(st, before);
}

/// The model's constants join the configuration in a new epoch; the same again changes
/// nothing; unusable ones (a free chain hop) are refused and change nothing.
#[test]
fn model_constants_are_kept_with_the_configuration() {
    let mut st = with_servers(1);
    let constants = ModelConstants {
        write_base_ns: 0,
        write_hop_ns: 119_000,
        relocation_factor_milli: 1_000,
        get_ns: 10_000,
        search_base_ns: 0,
        search_region_ns: 10_000,
        search_object_ns: 700,
        search_skip_ns: 2_800,
        fsync_ns: 300_000,
        fsync_cpu_ns: 20_000,
        client_ns: 20_000,
        client_object_ns: 200,
        round_trip_ns: 40_000,
        server_cores_milli: 1_000,
        mix_interference_milli: 300,
    };
    let before = st.epoch;
    assert_eq!(
        st.apply(Command::SetModel { constants }),
        Ok(CommandOutcome::ModelSet { changed: true })
    );
    assert_eq!(st.epoch.0, before.0 + 1);
    assert_eq!(st.configuration().model, Some(constants));
    st.configuration().check().unwrap();
    let same = st.clone();
    assert_eq!(
        st.apply(Command::SetModel { constants }),
        Ok(CommandOutcome::ModelSet { changed: false })
    );
    assert_eq!(st, same);
    for unusable in [
        ModelConstants {
            write_hop_ns: 0,
            ..constants
        },
        ModelConstants {
            search_base_ns: 0,
            search_region_ns: 0,
            ..constants
        },
    ] {
        assert_eq!(
            st.apply(Command::SetModel {
                constants: unusable
            }),
            Err(CommandError::UnusableModel(unusable))
        );
        assert_eq!(st, same);
    }
}

#[test]
fn a_new_space_is_declared_never_built() {
    let mut st = with_servers(3);
    for state in [SubspaceState::Building, SubspaceState::Dropped] {
        let mut bad = schema("s", 2, 8, 0);
        bad.subspaces[2].state = state;
        assert_eq!(
            st.apply(Command::AddSpace { schema: bad }),
            Err(CommandError::SubspaceNotServing { subspace: 2, state })
        );
    }
    assert_eq!(st.epoch, Epoch(3));
    assert!(st.spaces.is_empty());
}

#[test]
fn backfill_reports_complete_a_build() {
    let mut st = with_servers(3);
    st.apply(Command::AddSpace {
        schema: schema("s", 1, 4, 1),
    })
    .unwrap();
    st.apply(alter("s", add_sub(&["b"]))).unwrap();
    let (space, since) = (st.spaces[0].id, st.epoch.0);
    assert_eq!(st.spaces[0].replicas[0].len(), 4, "4 key regions");

    // Two regions: recorded, one new epoch, still building.
    let before = st.clone();
    assert_eq!(
        st.apply(report_backfills(
            1,
            1,
            vec![backfill(space, 2, 1, since), backfill(space, 2, 0, since)]
        )),
        Ok(CommandOutcome::TransfersCompleted {
            completed: 0,
            backfilled: 2
        })
    );
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    let build = st.spaces[0].build.clone().unwrap();
    assert_eq!((build.subspace, build.since), (SubspaceId(2), since));
    assert_eq!(build.done, vec![0, 1]);
    assert_eq!(
        st.spaces[0].schema.subspaces[2].state,
        SubspaceState::Building
    );
    st.configuration().check().unwrap();

    // Repeated, of another build (wrong since, subspace or space), out of range: ignored,
    // no new epoch.
    let before = st.clone();
    for refs in [
        vec![backfill(space, 2, 0, since), backfill(space, 2, 1, since)],
        vec![backfill(space, 2, 2, since + 1)],
        vec![backfill(space, 2, 2, since - 1)],
        vec![backfill(space, 1, 2, since)],
        vec![backfill(space + 1, 2, 2, since)],
        vec![backfill(space, 2, 4, since)],
    ] {
        assert_eq!(
            st.apply(report_backfills(2, 1, refs.clone())),
            Ok(CommandOutcome::TransfersCompleted {
                completed: 0,
                backfilled: 0
            }),
            "{refs:?}"
        );
        assert_eq!(st, before, "{refs:?}");
    }
    // Refused like a transfer report: an earlier process, an unknown server.
    assert!(matches!(
        st.apply(report_backfills(2, 0, vec![backfill(space, 2, 2, since)])),
        Err(CommandError::StaleServer { .. })
    ));
    assert_eq!(
        st.apply(report_backfills(9, 1, vec![backfill(space, 2, 2, since)])),
        Err(CommandError::UnknownServer(ServerId(9)))
    );
    assert_eq!(st, before);

    // The rest, out of order and with a region done already: the subspace serves.
    assert_eq!(
        st.apply(report_backfills(
            3,
            1,
            vec![
                backfill(space, 2, 3, since),
                backfill(space, 2, 0, since),
                backfill(space, 2, 2, since)
            ]
        )),
        Ok(CommandOutcome::TransfersCompleted {
            completed: 0,
            backfilled: 2
        })
    );
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    assert_eq!(st.spaces[0].build, None);
    assert_eq!(
        st.spaces[0].schema.subspaces[2].state,
        SubspaceState::Serving
    );
    assert_eq!(st.spaces[0].schema.searchable_subspaces().count(), 3);
    st.configuration().check().unwrap();
    // A late report of the finished build: nothing.
    let before = st.clone();
    assert_eq!(
        st.apply(report_backfills(1, 1, vec![backfill(space, 2, 3, since)])),
        Ok(CommandOutcome::TransfersCompleted {
            completed: 0,
            backfilled: 0
        })
    );
    assert_eq!(st, before);
}

#[test]
fn dropped_subspaces_are_left_alone_by_planning() {
    let mut st = planning(with_servers(3));
    st.apply(Command::AddSpace {
        schema: schema("s", 1, 8, 1),
    })
    .unwrap();
    // A fourth server joins: it is sent its share of both subspaces (4 regions each).
    st.apply(reg(1003, "10.0.0.3:2000", 1)).unwrap();
    let four = ServerId(4);
    let into = |st: &ClusterState, sub: u16| {
        st.spaces[0]
            .transfers
            .iter()
            .filter(|t| t.subspace == SubspaceId(sub) && t.to == four)
            .count()
    };
    assert_eq!((into(&st, 0), into(&st, 1)), (4, 4));
    // Two of subspace 1 complete: it has join records there, and transfers under way.
    let done: Vec<TransferRef> = refs_into(&st, four)
        .into_iter()
        .filter(|r| r.subspace == SubspaceId(1))
        .take(2)
        .collect();
    st.apply(Command::CompleteTransfers {
        id: four,
        incarnation: 1,
        done,
        backfilled: vec![],
    })
    .unwrap();
    assert_eq!(into(&st, 1), 2);
    assert!(st.spaces[0]
        .joined
        .iter()
        .any(|j| j.subspace == SubspaceId(1)));

    // Dropping it: no region, no transfer, no join record; subspace 0 untouched.
    let before = st.clone();
    assert_eq!(
        st.apply(alter("s", drop_sub(1))),
        Ok(CommandOutcome::SpaceAltered { subspace: Some(1) })
    );
    assert_eq!(st.epoch.0, before.epoch.0 + 1);
    let space = &st.spaces[0];
    assert_eq!(space.schema.subspaces[1].state, SubspaceState::Dropped);
    assert!(space.replicas[1].is_empty());
    assert!(space.transfers.iter().all(|t| t.subspace == SubspaceId(0)));
    assert!(space.joined.iter().all(|j| j.subspace == SubspaceId(0)));
    assert_eq!(space.replicas[0], before.spaces[0].replicas[0]);
    assert_eq!(
        space
            .transfers
            .iter()
            .filter(|t| t.subspace == SubspaceId(0))
            .count(),
        4
    );
    st.configuration().check().unwrap();

    // Dropping the subspace being built ends the build.
    assert_eq!(
        st.apply(alter("s", add_sub(&["b"]))),
        Ok(CommandOutcome::SpaceAltered { subspace: Some(2) })
    );
    assert!(st.spaces[0].build.is_some());
    assert_eq!(
        st.apply(alter("s", drop_sub(2))),
        Ok(CommandOutcome::SpaceAltered { subspace: Some(2) })
    );
    assert_eq!(st.spaces[0].build, None);
    assert_eq!(
        st.spaces[0].schema.subspaces[2].state,
        SubspaceState::Dropped
    );
    assert!(st.spaces[0].replicas[2].is_empty());
    st.configuration().check().unwrap();

    // One more being built; then a server fails and another joins: planning moves
    // regions of the live subspaces only.
    assert_eq!(
        st.apply(alter("s", add_sub(&["c"]))),
        Ok(CommandOutcome::SpaceAltered { subspace: Some(3) })
    );
    let dropped = |st: &ClusterState| {
        let space = &st.spaces[0];
        assert!(space.replicas[1].is_empty() && space.replicas[2].is_empty());
        assert!(space
            .transfers
            .iter()
            .all(|t| t.subspace == SubspaceId(0) || t.subspace == SubspaceId(3)));
        assert!(space
            .joined
            .iter()
            .all(|j| j.subspace == SubspaceId(0) || j.subspace == SubspaceId(3)));
        st.configuration().check().unwrap();
    };
    st.apply(Command::MarkOffline {
        id: ServerId(2),
        incarnation: 1,
    })
    .unwrap();
    dropped(&st);
    assert!(
        st.spaces[0]
            .transfers
            .iter()
            .any(|t| t.subspace == SubspaceId(3)),
        "the subspace being built is re-replicated like any other"
    );
    st.apply(reg(1004, "10.0.0.4:2000", 1)).unwrap();
    dropped(&st);
    settle(&mut st).unwrap();
    dropped(&st);
    // Server 2 back: settled, balanced, the dropped subspaces still empty.
    st.apply(reg(1001, "10.0.0.1:2000", 1)).unwrap();
    settle(&mut st).unwrap();
    dropped(&st);
    check_settled(&st).unwrap();
    assert_eq!(
        st.spaces[0].schema.subspaces[3].state,
        SubspaceState::Building
    );
}

/// A generated step: a command as generated, or one aimed at a registered server's current
/// incarnation (resolved against the state it applies to), so the mix hits real servers.
#[derive(Clone, Debug)]
enum Step {
    Apply(Command),
    /// MarkOffline of the n-th server (mod their number) at its current incarnation.
    MarkCurrent(usize),
    /// The n-th server restarts: registers at its current incarnation + 1.
    Restart(usize),
    /// The n-th transfer target (mod their number) reports every transfer into it done,
    /// with a reference that names no transfer and one repeated.
    Complete(usize),
    /// The n-th server is decommissioned.
    Decommission(usize),
    /// The n-th server rests at its current incarnation.
    Rest(usize),
    /// The n-th server (mod their number) reports, at its current incarnation, the key
    /// regions `r` with `r % m == n % m` of the n-th build under way (mod their number)
    /// backfilled, with one region repeated, one of a wrong `since` and one out of range.
    Backfill(usize, usize),
}

impl Step {
    fn command(&self, st: &ClusterState) -> Command {
        let nth = |n: usize| &st.servers[n % st.servers.len()];
        match self {
            Step::Apply(c) => c.clone(),
            Step::MarkCurrent(_)
            | Step::Restart(_)
            | Step::Complete(_)
            | Step::Decommission(_)
            | Step::Rest(_)
            | Step::Backfill(..)
                if st.servers.is_empty() =>
            {
                Command::MarkOffline {
                    id: ServerId(1),
                    incarnation: 0,
                }
            }
            Step::MarkCurrent(n) => Command::MarkOffline {
                id: nth(*n).info.id,
                incarnation: nth(*n).incarnation,
            },
            Step::Restart(n) => Command::RegisterServer {
                token: nth(*n).token,
                address: nth(*n).info.address.clone(),
                incarnation: nth(*n).incarnation + 1,
            },
            Step::Complete(n) => {
                let mut targets: Vec<ServerId> = st
                    .spaces
                    .iter()
                    .flat_map(|s| s.transfers.iter().map(|t| t.to))
                    .collect();
                targets.sort();
                targets.dedup();
                let to = if targets.is_empty() {
                    nth(*n).info.id
                } else {
                    targets[n % targets.len()]
                };
                let mut done = refs_into(st, to);
                done.extend(done.first().copied());
                done.push(TransferRef {
                    space: 0,
                    subspace: SubspaceId(0),
                    region: 0,
                    id: 0,
                });
                Command::CompleteTransfers {
                    id: to,
                    incarnation: st.server(to).unwrap().incarnation,
                    done,
                    backfilled: vec![],
                }
            }
            Step::Backfill(n, m) => {
                let builds: Vec<(&SpaceConfig, &tessera_protocol::Build)> = st
                    .spaces
                    .iter()
                    .filter_map(|s| s.build.as_ref().map(|b| (s, b)))
                    .collect();
                let mut backfilled = Vec::new();
                if !builds.is_empty() {
                    let (space, b) = builds[n % builds.len()];
                    let key_regions = space.replicas[0].len();
                    let at = |region: usize, since: u64| BackfillRef {
                        space: space.id,
                        subspace: b.subspace,
                        region: region as u32,
                        since,
                    };
                    backfilled.extend(
                        (0..key_regions)
                            .filter(|r| r % m == n % m)
                            .map(|r| at(r, b.since)),
                    );
                    backfilled.extend(backfilled.first().copied());
                    backfilled.push(at(n % key_regions, b.since + 1));
                    backfilled.push(at(key_regions + n, b.since));
                }
                Command::CompleteTransfers {
                    id: nth(*n).info.id,
                    incarnation: nth(*n).incarnation,
                    done: vec![],
                    backfilled,
                }
            }
            Step::Decommission(n) => Command::Decommission {
                id: nth(*n).info.id,
            },
            Step::Rest(n) => Command::Rest {
                id: nth(*n).info.id,
                incarnation: nth(*n).incarnation,
            },
        }
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u128..7, 0u8..3, 0u64..3).prop_map(|(token, a, i)| Step::Apply(Command::RegisterServer { token, address: format!("h{a}:1"), incarnation: i })),
        3 => (0u8..4, 0usize..4, 1u32..40, 0u32..4).prop_map(|(n, subs, p, t)| Step::Apply(Command::AddSpace { schema: schema(&format!("s{n}"), subs, p, t) })),
        1 => (0u8..4).prop_map(|n| Step::Apply(Command::RmSpace { name: format!("s{n}") })),
        1 => (1u64..8, 0u64..3).prop_map(|(id, i)| Step::Apply(Command::MarkOffline { id: ServerId(id), incarnation: i })),
        1 => (1u64..8, 0u64..3).prop_map(|(id, i)| Step::Apply(Command::CompleteTransfers { id: ServerId(id), incarnation: i, done: vec![], backfilled: vec![] })),
        1 => (1u64..8).prop_map(|id| Step::Apply(Command::Decommission { id: ServerId(id) })),
        2 => (0usize..8).prop_map(Step::MarkCurrent),
        2 => (0usize..8).prop_map(Step::Restart),
        5 => (0usize..8).prop_map(Step::Complete),
        1 => (0usize..8).prop_map(Step::Decommission),
        3 => (0usize..8).prop_map(Step::Rest),
        1 => (1u64..8, 0u64..3).prop_map(|(id, i)| Step::Apply(Command::Rest { id: ServerId(id), incarnation: i })),
        4 => (0u8..4, 0usize..ALTER_ATTRIBUTES.len()).prop_map(|(n, a)| Step::Apply(Command::AlterSpace {
            name: format!("s{n}"),
            change: SpaceChange::AddSubspace { attributes: ALTER_ATTRIBUTES[a].iter().map(|s| s.to_string()).collect() },
            fence: None,
        })),
        2 => (0u8..4, 0u16..6).prop_map(|(n, subspace)| Step::Apply(Command::AlterSpace { name: format!("s{n}"), change: SpaceChange::DropSubspace { subspace }, fence: None })),
        4 => (0usize..8, 1usize..4).prop_map(|(n, m)| Step::Backfill(n, m)),
    ]
}

/// Attribute lists alter-space steps add subspaces over (the spaces of [`schema`] have a
/// key `k` and attributes `a`, `b`, `c`): valid ones, some naming a subspace [`schema`]
/// declares, and invalid ones.
const ALTER_ATTRIBUTES: &[&[&str]] = &[
    &["a"],
    &["b"],
    &["c"],
    &["b", "a"],
    &["c", "a"],
    &["c", "b", "a"],
    &["k"],
    &["zz"],
    &["a", "a"],
    &[],
];

/// References to every transfer into `to`.
fn refs_into(st: &ClusterState, to: ServerId) -> Vec<TransferRef> {
    st.spaces
        .iter()
        .flat_map(|s| s.transfer_refs_into(to))
        .collect()
}

/// Every region of every space, as (space, subspace, region).
fn regions(st: &ClusterState) -> Vec<(u64, SubspaceId, RegionIndex)> {
    let mut out = Vec::new();
    for space in &st.spaces {
        for (sub, sets) in space.replicas.iter().enumerate() {
            for region in 0..sets.len() {
                out.push((space.id, SubspaceId(sub as u16), RegionIndex(region as u32)));
            }
        }
    }
    out
}

fn space_by_id(st: &ClusterState, id: u64) -> Option<&SpaceConfig> {
    st.spaces.iter().find(|s| s.id == id)
}

/// Every server's transfers under way, as the target and as the source.
fn transfer_counts(st: &ClusterState) -> (HashMap<ServerId, usize>, HashMap<ServerId, usize>) {
    let (mut to, mut from) = (HashMap::new(), HashMap::new());
    for space in &st.spaces {
        for t in &space.transfers {
            *to.entry(t.to).or_default() += 1;
            let set = space.replicas_of(t.subspace, t.region);
            *from.entry(set[set.len() - 2]).or_default() += 1;
        }
    }
    (to, from)
}

/// The invariants every state keeps, checked directly on it.
fn check_state(st: &ClusterState) -> Result<(), TestCaseError> {
    let cfg = st.configuration();
    prop_assert!(cfg.check().is_ok(), "{:?}", cfg.check());
    let state = |id: ServerId| st.server(id).map(|s| s.info.state);
    for (space, sub, region) in regions(st) {
        let space = space_by_id(st, space).unwrap();
        let set = space.replicas_of(sub, region);
        let k = space.schema.replicas() as usize;
        prop_assert!(!set.is_empty(), "an empty replica set");
        let mut d = set.to_vec();
        d.sort();
        d.dedup();
        prop_assert_eq!(d.len(), set.len(), "members are distinct: {:?}", set);
        for id in set {
            prop_assert!(state(*id).is_some(), "{:?} is registered", id);
            if state(*id).is_some_and(away) {
                prop_assert_eq!(
                    set,
                    &[*id][..],
                    "offline or resting {:?} is only in sets of its own",
                    id
                );
            }
        }
        match space.transfer_at(sub, region) {
            Some(t) => {
                prop_assert_eq!(
                    state(t.to),
                    Some(ServerState::Available),
                    "a target is Available: {:?}",
                    t
                );
                prop_assert_eq!(set.last(), Some(&t.to));
                prop_assert!(
                    set.len() >= 2 && set[0] != t.to,
                    "a target never leads: {:?} {:?}",
                    set,
                    t
                );
                prop_assert!(
                    set.len() <= k + usize::from(t.replaces.is_some()),
                    "{:?} {:?} K={}",
                    set,
                    t,
                    k
                );
            }
            None => prop_assert!(set.len() <= k, "{:?} has more than K={} members", set, k),
        }
    }
    let (to, from) = transfer_counts(st);
    for (server, n) in to.iter().chain(&from) {
        prop_assert!(
            *n <= TRANSFERS_PER_SERVER_MAX,
            "{:?} in {} transfers at once",
            server,
            n
        );
    }
    for s in st
        .servers
        .iter()
        .filter(|s| s.info.state == ServerState::Leaving)
    {
        prop_assert!(
            sets(st).iter().any(|set| set.contains(&s.info.id)),
            "a Leaving server that holds nothing is gone"
        );
    }
    // Places wait in regions short of members, for a server resting or back.
    for space in &st.spaces {
        let k = space.schema.replicas() as usize;
        for p in &space.resting {
            let set = space.replicas_of(p.subspace, p.region);
            prop_assert!(set.len() < k, "{:?} waits in a full region {:?}", p, set);
            prop_assert!(
                matches!(
                    state(p.server),
                    Some(ServerState::Resting | ServerState::Available)
                ),
                "{:?} waits for a server {:?}",
                p,
                state(p.server)
            );
        }
    }
    // Planned: planning again finds nothing to do.
    let mut again = st.clone();
    again.plan();
    prop_assert_eq!(&again, st, "planning again changed the state");
    // Join records name members (`check` above), each joined no later than now.
    for space in &st.spaces {
        for j in &space.joined {
            prop_assert!(j.since <= st.epoch.0, "{:?} from the future", j);
        }
    }
    if !st.plan_transfers {
        prop_assert!(
            st.spaces.iter().all(|s| s.transfers.is_empty()),
            "a transfer while planning is off"
        );
        prop_assert!(
            st.servers
                .iter()
                .all(|s| s.info.state != ServerState::Leaving),
            "a Leaving server while planning is off"
        );
    }
    Ok(())
}

/// No region loses its data: some member complete after the command was complete before
/// it, or is the target of a transfer into `completed_by` that this command completed.
fn check_continuity(
    before: &ClusterState,
    after: &ClusterState,
    completed_by: Option<ServerId>,
) -> Result<(), TestCaseError> {
    for (space, sub, region) in regions(before) {
        let Some(a) = space_by_id(after, space) else {
            continue;
        };
        if a.schema.subspace(sub).state == SubspaceState::Dropped {
            // Dropped with its data, on purpose.
            continue;
        }
        let b = space_by_id(before, space).unwrap();
        let was = b.complete_replicas(sub, region);
        let finished = b
            .transfer_at(sub, region)
            .filter(|t| {
                Some(t.to) == completed_by && a.transfer_at(sub, region).map(|x| x.id) != Some(t.id)
            })
            .map(|t| t.to);
        let now = a.complete_replicas(sub, region);
        prop_assert!(
            now.iter().any(|s| was.contains(s) || Some(*s) == finished),
            "region {:?}/{:?} of space {}: complete members {:?} before, {:?} after",
            sub,
            region,
            space,
            was,
            now
        );
    }
    Ok(())
}

/// Whether `small` is `big` with some members left out, the others in the same order.
fn is_subsequence(small: &[ServerId], big: &[ServerId]) -> bool {
    let mut rest = big.iter();
    small.iter().all(|s| rest.any(|b| b == s))
}

/// `after` took `id` out of the replica sets of `before` (compared before this epoch's
/// planning): the others keep their order and every complete member but `id` stays; `id`
/// stays only where it was the only complete member, and then alone; a transfer survives
/// when `id` was neither its target nor the member streaming to it (the one before the
/// target), and then replaces nobody (the region is a member short already).
fn check_removed(
    before: &ClusterState,
    after: &ClusterState,
    id: ServerId,
) -> Result<(), TestCaseError> {
    let mut stripped = after.clone();
    for space in &mut stripped.spaces {
        let epoch = after.epoch.0;
        let SpaceConfig {
            replicas,
            transfers,
            ..
        } = space;
        transfers.retain(|t| {
            if t.id == epoch {
                replicas[t.subspace.get()][t.region.0 as usize].pop();
            }
            t.id != epoch
        });
    }
    prop_assert_eq!(regions(before), regions(&stripped));
    for (space, sub, region) in regions(before) {
        let (b, a) = (
            space_by_id(before, space).unwrap(),
            space_by_id(&stripped, space).unwrap(),
        );
        let (o, n) = (b.replicas_of(sub, region), a.replicas_of(sub, region));
        let complete = b.complete_replicas(sub, region);
        if !o.contains(&id) {
            prop_assert_eq!(o, n);
            prop_assert_eq!(b.transfer_at(sub, region), a.transfer_at(sub, region));
            continue;
        }
        prop_assert!(is_subsequence(n, o), "{:?} is {:?} less some members", n, o);
        for c in complete.iter().filter(|c| **c != id) {
            prop_assert!(
                n.contains(c),
                "complete member {:?} stays: {:?} -> {:?}",
                c,
                o,
                n
            );
        }
        if complete == [id] {
            prop_assert_eq!(n, &[id][..], "the only complete member stays, alone");
        } else {
            prop_assert!(!n.contains(&id), "{:?} left {:?}", id, n);
        }
        if let Some(t) = b.transfer_at(sub, region) {
            let source = o[o.len() - 2];
            if t.to != id && source != id {
                prop_assert_eq!(
                    a.transfer_at(sub, region),
                    Some(&Transfer {
                        replaces: None,
                        ..*t
                    })
                );
            } else {
                prop_assert_eq!(
                    a.transfer_at(sub, region),
                    None,
                    "transfer {:?} ends with {:?}",
                    t,
                    id
                );
                prop_assert!(!n.contains(&t.to));
            }
        }
    }
    Ok(())
}

/// Whether a server in `state` is away: it left the replica sets it could leave.
fn away(state: ServerState) -> bool {
    matches!(state, ServerState::Offline | ServerState::Resting)
}

/// Whether some region keeps a place for `id`.
fn places_of(st: &ClusterState, id: ServerId) -> bool {
    st.spaces
        .iter()
        .any(|s| s.resting.iter().any(|p| p.server == id))
}

/// Completes every transfer under way, one report per target; returns how many there were.
fn complete_all(st: &mut ClusterState) -> usize {
    let mut targets: Vec<ServerId> = st
        .spaces
        .iter()
        .flat_map(|s| s.transfers.iter().map(|t| t.to))
        .collect();
    targets.sort();
    targets.dedup();
    let mut n = 0;
    for to in targets {
        let done = refs_into(st, to);
        let incarnation = st.server(to).unwrap().incarnation;
        let out = st.apply(Command::CompleteTransfers {
            id: to,
            incarnation,
            done: done.clone(),
            backfilled: vec![],
        });
        assert_eq!(
            out,
            Ok(CommandOutcome::TransfersCompleted {
                completed: done.len() as u32,
                backfilled: 0,
            })
        );
        n += done.len();
    }
    n
}

/// Completes transfers until planning starts no more; returns how many rounds it took.
fn settle(st: &mut ClusterState) -> Result<usize, TestCaseError> {
    for round in 0..10_000 {
        check_state(st)?;
        if complete_all(st) == 0 {
            return Ok(round);
        }
    }
    Err(TestCaseError::fail("transfers never stop"))
}

/// A settled state with at least K Available servers for every space: no transfer, no
/// Leaving server, every region K distinct Available members, and within each subspace
/// every Available server holds between floor and ceil of regions * K / servers.
fn check_settled(st: &ClusterState) -> Result<(), TestCaseError> {
    let available: Vec<ServerId> = st
        .servers
        .iter()
        .filter(|s| s.info.state == ServerState::Available)
        .map(|s| s.info.id)
        .collect();
    prop_assert!(
        st.servers
            .iter()
            .all(|s| s.info.state == ServerState::Available),
        "{:?}",
        st.servers
    );
    let n = available.len();
    for space in &st.spaces {
        prop_assert!(space.transfers.is_empty());
        let k = space.schema.replicas() as usize;
        prop_assert!(
            k <= n,
            "space {:?} needs {} servers, {} are available",
            space.schema.name,
            k,
            n
        );
        for sets in &space.replicas {
            let mut hold: HashMap<ServerId, usize> = available.iter().map(|s| (*s, 0)).collect();
            for set in sets {
                prop_assert_eq!(set.len(), k, "K members: {:?}", set);
                for s in set {
                    *hold.get_mut(s).expect("members are Available") += 1;
                }
            }
            let (floor, ceil) = (sets.len() * k / n, (sets.len() * k).div_ceil(n));
            for (s, h) in &hold {
                prop_assert!(
                    floor <= *h && *h <= ceil,
                    "{:?} holds {} of {} regions (K={}, n={})",
                    s,
                    h,
                    sets.len(),
                    k,
                    n
                );
            }
        }
    }
    Ok(())
}

/// Brings every Offline or Resting server back (registering again at its incarnation).
fn bring_back(st: &mut ClusterState) -> Result<(), TestCaseError> {
    let offline: Vec<RegisteredServer> = st
        .servers
        .iter()
        .filter(|s| away(s.info.state))
        .cloned()
        .collect();
    for s in offline {
        st.apply(Command::RegisterServer {
            token: s.token,
            address: s.info.address,
            incarnation: s.incarnation,
        })
        .unwrap();
        check_state(st)?;
    }
    Ok(())
}

/// Checks one applied command against what it must have done.
fn check_command(
    before: &ClusterState,
    st: &ClusterState,
    c: &Command,
    result: &Result<CommandOutcome, CommandError>,
) -> Result<(), TestCaseError> {
    let completed_by = match (c, result) {
        (Command::CompleteTransfers { id, .. }, Ok(_)) => Some(*id),
        _ => None,
    };
    check_continuity(before, st, completed_by)?;
    // Servers leave the configuration only after Leaving.
    for b in &before.servers {
        if st.server(b.info.id).is_none() {
            let decommissioned = matches!(c, Command::Decommission { id } if *id == b.info.id);
            prop_assert!(
                b.info.state == ServerState::Leaving || decommissioned,
                "{:?} vanished",
                b
            );
        }
    }
    match (c, result) {
        (
            Command::RegisterServer {
                token,
                address,
                incarnation,
            },
            Ok(CommandOutcome::Registered { id, .. }),
        ) => {
            let old = before.server_by_token(*token);
            let was_leaving = old.is_some_and(|o| o.info.state == ServerState::Leaving);
            match st.server(*id) {
                Some(now) => {
                    prop_assert_eq!(&now.info.address, address);
                    prop_assert_eq!(now.incarnation, *incarnation);
                    let expected = if was_leaving {
                        ServerState::Leaving
                    } else {
                        ServerState::Available
                    };
                    prop_assert_eq!(now.info.state, expected);
                }
                None => prop_assert!(
                    was_leaving,
                    "only a Leaving server may leave as it registers"
                ),
            }
            match old {
                Some(old) if old.incarnation < *incarnation => check_removed(before, st, *id)?,
                _ if st.epoch == before.epoch => prop_assert_eq!(st, before),
                _ => prop_assert_eq!(sets_before_planning(st), sets(before)),
            }
        }
        (
            Command::RegisterServer {
                token, incarnation, ..
            },
            Err(e),
        ) => {
            if let Some(old) = before.server_by_token(*token) {
                prop_assert!(
                    *incarnation < old.incarnation,
                    "refused only as an earlier incarnation: {}",
                    e
                );
            }
        }
        (Command::MarkOffline { id, .. }, Ok(outcome)) => {
            prop_assert_eq!(outcome, &CommandOutcome::MarkedOffline { id: *id });
            prop_assert!(!places_of(st, *id), "no place waits for an Offline server");
            let was = before.server(*id).unwrap().info.state;
            prop_assert!(was != ServerState::Offline);
            match st.server(*id) {
                Some(now) => prop_assert_eq!(now.info.state, ServerState::Offline),
                None => {
                    prop_assert_eq!(was, ServerState::Leaving);
                    prop_assert!(!sets(st).iter().any(|set| set.contains(id)));
                }
            }
            check_removed(before, st, *id)?;
            for a in &st.servers {
                if a.info.id != *id {
                    prop_assert_eq!(
                        Some(a),
                        before.server(a.info.id),
                        "other servers are untouched"
                    );
                }
            }
        }
        (Command::MarkOffline { id, incarnation }, Err(e)) => {
            let refused = match before.server(*id) {
                None => matches!(e, CommandError::UnknownServer(_)),
                Some(s) if s.incarnation != *incarnation => {
                    matches!(e, CommandError::StaleServer { .. })
                }
                Some(s) => {
                    s.info.state == ServerState::Offline
                        && matches!(e, CommandError::AlreadyOffline(_))
                }
            };
            prop_assert!(refused, "{:?} refused with {}", c, e);
        }
        (Command::Rest { id, .. }, Ok(CommandOutcome::Rested { id: rested, places })) => {
            prop_assert_eq!(rested, id);
            prop_assert_eq!(st.server(*id).unwrap().info.state, ServerState::Resting);
            check_removed(before, st, *id)?;
            // Every region it left that is short of K waits for it, and nothing else.
            let mut expected = 0;
            for (space, sub, region) in regions(before) {
                let (b, a) = (
                    space_by_id(before, space).unwrap(),
                    space_by_id(st, space).unwrap(),
                );
                let k = a.schema.replicas() as usize;
                let left = b.holds(sub, region, *id) && !a.holds(sub, region, *id);
                let short = a.replicas_of(sub, region).len() < k;
                // A place kept from an earlier rest stays too (planning off, nothing filled it).
                let kept = b.rests_in(sub, region, *id) && short;
                prop_assert_eq!(a.rests_in(sub, region, *id), left && short || kept);
                expected += usize::from(left && short);
            }
            prop_assert_eq!(*places as usize, expected);
            for a in &st.servers {
                if a.info.id != *id {
                    prop_assert_eq!(Some(a), before.server(a.info.id), "others are untouched");
                }
            }
        }
        (Command::Rest { id, incarnation }, Err(e)) => {
            let refused = match before.server(*id) {
                None => matches!(e, CommandError::UnknownServer(_)),
                Some(s) if s.incarnation != *incarnation => {
                    matches!(e, CommandError::StaleServer { .. })
                }
                Some(s) => {
                    s.info.state != ServerState::Available
                        && matches!(e, CommandError::CannotRest { .. })
                }
            };
            prop_assert!(refused, "{:?} refused with {}", c, e);
        }
        (Command::AddSpace { schema }, Ok(CommandOutcome::SpaceAdded { id })) => {
            prop_assert_eq!(*id, st.epoch.0);
            let space = st.spaces.last().unwrap();
            prop_assert_eq!(&space.schema, schema);
            prop_assert!(
                space.transfers.is_empty(),
                "a new space is balanced: {:?}",
                space.transfers
            );
            check_space(st, space);
        }
        (
            Command::AddSpace { schema },
            Err(CommandError::TooFewServers {
                needed, available, ..
            }),
        ) => {
            prop_assert_eq!(*needed, schema.replicas());
            prop_assert!((*available as usize) < *needed as usize);
            let live = st
                .servers
                .iter()
                .filter(|s| s.info.state == ServerState::Available)
                .count();
            prop_assert_eq!(*available as usize, live);
        }
        (
            Command::CompleteTransfers {
                id,
                incarnation,
                done,
                backfilled,
            },
            result,
        ) => {
            let server = before.server(*id);
            match result {
                Err(CommandError::UnknownServer(_)) => prop_assert!(server.is_none()),
                Err(CommandError::StaleServer { .. }) => {
                    prop_assert!(server.unwrap().incarnation != *incarnation)
                }
                Ok(CommandOutcome::TransfersCompleted {
                    completed,
                    backfilled: recorded,
                }) => {
                    // Which backfill references name a build under way exactly, a key
                    // region it has not recorded yet, each counted once.
                    let mut new_regions: Vec<BackfillRef> = backfilled
                        .iter()
                        .copied()
                        .filter(|r| {
                            space_by_id(before, r.space).is_some_and(|s| {
                                s.build.as_ref().is_some_and(|b| {
                                    b.subspace == r.subspace
                                        && b.since == r.since
                                        && (r.region as usize) < s.replicas[0].len()
                                        && !b.done.contains(&r.region)
                                })
                            })
                        })
                        .collect();
                    new_regions.sort();
                    new_regions.dedup();
                    prop_assert_eq!(*recorded as usize, new_regions.len());
                    for b in &before.spaces {
                        let Some(build) = &b.build else { continue };
                        let a = space_by_id(st, b.id).unwrap();
                        let mut done: Vec<u32> = build.done.clone();
                        done.extend(
                            new_regions
                                .iter()
                                .filter(|r| r.space == b.id)
                                .map(|r| r.region),
                        );
                        done.sort();
                        if done.len() == b.replicas[0].len() {
                            prop_assert_eq!(&a.build, &None);
                            prop_assert_eq!(
                                a.schema.subspace(build.subspace).state,
                                SubspaceState::Serving
                            );
                        } else {
                            prop_assert_eq!(
                                a.build.as_ref().map(|x| &x.done),
                                Some(&done),
                                "{:?}",
                                build
                            );
                            prop_assert_eq!(
                                a.schema.subspace(build.subspace).state,
                                SubspaceState::Building
                            );
                        }
                    }
                    // Which references name a transfer into `id` exactly, each counted once.
                    let mut matching: Vec<TransferRef> = done
                        .iter()
                        .copied()
                        .filter(|r| {
                            space_by_id(before, r.space).is_some_and(|s| {
                                s.transfers.iter().any(|t| {
                                    t.to == *id
                                        && t.id == r.id
                                        && t.subspace == r.subspace
                                        && t.region.0 == r.region
                                })
                            })
                        })
                        .collect();
                    matching.sort();
                    matching.dedup();
                    prop_assert_eq!(*completed as usize, matching.len());
                    prop_assert_eq!(
                        st.epoch.0,
                        before.epoch.0 + u64::from(!matching.is_empty() || !new_regions.is_empty())
                    );
                    for r in &matching {
                        let (b, a) = (
                            space_by_id(before, r.space).unwrap(),
                            space_by_id(st, r.space).unwrap(),
                        );
                        let region = RegionIndex(r.region);
                        let t = b.transfer_at(r.subspace, region).unwrap();
                        prop_assert!(a
                            .transfer_at(r.subspace, region)
                            .is_none_or(|x| x.id == st.epoch.0));
                        let now = a.complete_replicas(r.subspace, region);
                        prop_assert!(
                            now.contains(id),
                            "{:?} is a complete member of {:?}",
                            id,
                            now
                        );
                        // Joined since the transfer's epoch, by one record.
                        prop_assert_eq!(a.member_since(r.subspace, region, *id), Epoch(t.id));
                        let records = a
                            .joined
                            .iter()
                            .filter(|j| {
                                (j.subspace, j.region, j.server) == (r.subspace, region, *id)
                            })
                            .count();
                        prop_assert_eq!(records, 1);
                        if let Some(old) = t.replaces {
                            // It left; planning may have sent the region back to it already (a new
                            // transfer, as balance now sees it), never as a complete member.
                            let back = a
                                .transfer_at(r.subspace, region)
                                .filter(|x| x.to == old && x.id == st.epoch.0);
                            prop_assert!(
                                !now.contains(&old)
                                    && (back.is_some()
                                        || !a.replicas_of(r.subspace, region).contains(&old)),
                                "{:?} left",
                                old
                            );
                        }
                    }
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }
        (Command::AlterSpace { name, change, .. }, result) => {
            check_alter(before, st, name, change, result)?;
        }
        (Command::SetModel { .. }, _) => {}
        (Command::Decommission { id }, result) => {
            let server = before.server(*id);
            let others = before
                .servers
                .iter()
                .filter(|s| s.info.state == ServerState::Available && s.info.id != *id)
                .count();
            let needed = before
                .spaces
                .iter()
                .map(|s| s.schema.replicas() as usize)
                .max()
                .unwrap_or(0);
            let holds = sets(before).iter().any(|set| set.contains(id));
            match result {
                Err(CommandError::UnknownServer(_)) => prop_assert!(server.is_none()),
                Err(CommandError::AlreadyLeaving(_)) => {
                    prop_assert_eq!(server.unwrap().info.state, ServerState::Leaving)
                }
                Err(CommandError::OfflineHoldsRegions { .. }) => {
                    prop_assert!(away(server.unwrap().info.state) && holds)
                }
                Err(CommandError::WouldUnderReplicate { .. }) => {
                    prop_assert!(
                        server.unwrap().info.state != ServerState::Leaving && others < needed
                    )
                }
                Err(CommandError::TransfersOff { .. }) => {
                    prop_assert!(!before.plan_transfers && holds && others >= needed);
                    prop_assert_eq!(server.unwrap().info.state, ServerState::Available);
                }
                Ok(CommandOutcome::Decommissioned { removed, .. }) => {
                    let was = server.unwrap().info.state;
                    prop_assert!(others >= needed);
                    prop_assert!(
                        before.plan_transfers || (!holds && *removed),
                        "nothing would move its regions"
                    );
                    prop_assert!(away(was) && !holds || was == ServerState::Available);
                    prop_assert!(!places_of(st, *id), "no place waits for a server leaving");
                    prop_assert_eq!(*removed, st.server(*id).is_none());
                    if !removed {
                        prop_assert_eq!(st.server(*id).unwrap().info.state, ServerState::Leaving);
                    }
                    prop_assert!(
                        refs_into(st, *id).is_empty(),
                        "no transfer goes to a Leaving server"
                    );
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }
        _ => {}
    }
    Ok(())
}

/// Checks one applied `AlterSpace` against what it must have done or why it was refused,
/// from the states before and after it.
fn check_alter(
    before: &ClusterState,
    st: &ClusterState,
    name: &str,
    change: &SpaceChange,
    result: &Result<CommandOutcome, CommandError>,
) -> Result<(), TestCaseError> {
    let Some(b) = before.spaces.iter().find(|s| s.schema.name == name) else {
        prop_assert_eq!(result, &Err(CommandError::UnknownSpace(name.to_owned())));
        return Ok(());
    };
    let names = |dims: &[tessera_types::AttrIndex]| {
        let mut v: Vec<String> = dims
            .iter()
            .map(|d| b.schema.attributes[d.get()].name.clone())
            .collect();
        v.sort();
        v
    };
    match (change, result) {
        (
            SpaceChange::AddSubspace { attributes },
            Ok(CommandOutcome::SpaceAltered {
                subspace: Some(subspace),
            }),
        ) => {
            let a = space_by_id(st, b.id).unwrap();
            let id = SubspaceId(*subspace);
            prop_assert_eq!(id.get(), b.schema.subspaces.len());
            prop_assert!(b.build.is_none());
            let mut wanted = attributes.clone();
            wanted.sort();
            prop_assert_eq!(names(&a.schema.subspace(id).dimensions), wanted);
            prop_assert_eq!(a.schema.subspace(id).state, SubspaceState::Building);
            prop_assert_eq!(
                &a.build,
                &Some(tessera_protocol::Build {
                    subspace: id,
                    since: st.epoch.0,
                    done: vec![],
                    replaces: None,
                })
            );
            // K distinct Available members per region, holdings within one of each other.
            let k = b.schema.replicas() as usize;
            let mut hold: HashMap<ServerId, usize> = st
                .servers
                .iter()
                .filter(|s| s.info.state == ServerState::Available)
                .map(|s| (s.info.id, 0))
                .collect();
            for set in &a.replicas[id.get()] {
                let mut d = set.clone();
                d.sort();
                d.dedup();
                prop_assert_eq!((d.len(), set.len()), (k, k), "{:?}", set);
                for s in set {
                    *hold.get_mut(s).expect("an Available member") += 1;
                }
            }
            let (min, max) = (hold.values().min().unwrap(), hold.values().max().unwrap());
            prop_assert!(max - min <= 1, "{:?}", hold);
            prop_assert!(a.transfers.iter().all(|t| t.subspace != id));
        }
        (
            SpaceChange::DropSubspace { subspace },
            Ok(CommandOutcome::SpaceAltered {
                subspace: Some(got),
            }),
        ) => {
            let a = space_by_id(st, b.id).unwrap();
            let id = SubspaceId(*subspace);
            prop_assert_eq!(got, subspace);
            prop_assert!(*subspace > 0);
            prop_assert!(b.schema.subspace(id).is_written());
            prop_assert_eq!(a.schema.subspace(id).state, SubspaceState::Dropped);
            prop_assert!(a.replicas[id.get()].is_empty());
            prop_assert!(a.transfers.iter().all(|t| t.subspace != id));
            prop_assert!(a.joined.iter().all(|j| j.subspace != id));
            let was_built = b.build.as_ref().is_some_and(|x| x.subspace == id);
            prop_assert_eq!(a.build.is_none(), was_built || b.build.is_none());
            prop_assert_eq!(a.schema.subspaces.len(), b.schema.subspaces.len());
        }
        (_, Ok(other)) => prop_assert!(false, "{:?}", other),
        (SpaceChange::AddSubspace { .. }, Err(CommandError::TooFewServers { .. })) => {
            let available = before
                .servers
                .iter()
                .filter(|s| s.info.state == ServerState::Available)
                .count();
            prop_assert!(available < b.schema.replicas() as usize);
        }
        (SpaceChange::AddSubspace { attributes }, Err(CommandError::Alter(e))) => {
            let mut wanted = attributes.clone();
            wanted.sort();
            let mut distinct = wanted.clone();
            distinct.dedup();
            let known = |n: &String| b.schema.attributes[1..].iter().any(|a| &a.name == n);
            let ok = match e {
                AlterError::Schema(_) => {
                    wanted.is_empty() || distinct.len() != wanted.len() || !wanted.iter().all(known)
                }
                AlterError::BuildUnderWay(x) => b.build.as_ref().map(|b| b.subspace.0) == Some(*x),
                AlterError::SubspaceExists(x) => {
                    let s = b.schema.subspace(SubspaceId(*x));
                    s.is_written() && names(&s.dimensions) == wanted
                }
                AlterError::SubspaceIdsUsed => {
                    b.schema.subspaces.len() == tessera_types::constants::SUBSPACES_MAX
                }
                _ => false,
            };
            prop_assert!(ok, "{:?} refused with {:?}: {:?}", attributes, e, b);
        }
        (SpaceChange::DropSubspace { subspace }, Err(CommandError::Alter(e))) => {
            let ok = match e {
                AlterError::KeySubspace => *subspace == 0,
                AlterError::NoSuchSubspace(x) => {
                    x == subspace
                        && b.schema
                            .subspaces
                            .get(usize::from(*x))
                            .is_none_or(|s| s.state == SubspaceState::Dropped)
                }
                _ => false,
            };
            prop_assert!(ok, "drop {} refused with {:?}: {:?}", subspace, e, b);
        }
        (_, Err(e)) => prop_assert!(false, "{:?} refused with {}", change, e),
    }
    Ok(())
}

/// Applies `steps` to `st`, checking after each command that: epochs bump by exactly one
/// on change, failures change nothing, the state keeps its invariants ([`check_state`]:
/// among them, the configuration passes `Configuration::check`), the command did what it
/// says ([`check_command`]), a token keeps its id, and the state survives a postcard round
/// trip. Then that ids are distinct and in registration order.
fn apply_steps(st: &mut ClusterState, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut ids: HashMap<u128, ServerId> = HashMap::new();
    for s in steps {
        let c = s.command(st);
        let before = st.clone();
        let result = st.apply(c.clone());
        match &result {
            Err(_) => prop_assert_eq!(&*st, &before),
            Ok(
                CommandOutcome::Registered { changed: false, .. }
                | CommandOutcome::TransfersCompleted {
                    completed: 0,
                    backfilled: 0,
                },
            ) => {
                prop_assert_eq!(&*st, &before)
            }
            Ok(_) => prop_assert_eq!(st.epoch.0, before.epoch.0 + 1),
        }
        check_state(st)?;
        check_command(&before, st, &c, &result)?;
        if let (Command::RegisterServer { token, .. }, Ok(CommandOutcome::Registered { id, .. })) =
            (&c, &result)
        {
            // A token keeps its id while the server is in the configuration.
            if before.server_by_token(*token).is_some() {
                prop_assert_eq!(ids[token], *id, "a token keeps its id");
            }
            ids.insert(*token, *id);
        }
        let bytes = postcard::to_allocvec(&*st).unwrap();
        let mut back: ClusterState = postcard::from_bytes(&bytes).unwrap();
        // A rule of this coordinator, not replicated: snapshots do not carry it.
        prop_assert_eq!(back.plan_transfers, PLAN_TRANSFERS);
        back.plan_transfers = st.plan_transfers;
        prop_assert_eq!(&back, &*st);
    }
    // Ids are distinct and below the next one, in registration order.
    let got: Vec<u64> = st.servers.iter().map(|s| s.info.id.0).collect();
    prop_assert!(
        got.windows(2).all(|w| w[0] < w[1]) && got.iter().all(|i| *i < st.next_server_id),
        "{:?}",
        got
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With transfers planned: any sequence of commands (registrations, restarts, servers
    /// taken offline and decommissioned, spaces added and removed, transfers reported
    /// done): epochs bump by exactly one on change, failures change nothing, the
    /// configuration checks (join records included: they name members only, one per
    /// member), no region loses its last complete member, the transfer limits hold, every
    /// state is one planning leaves as it is, and each command did what it says. Then,
    /// every server brought back and transfers completed until none is planned: every
    /// region has K Available members, balanced within each subspace; a server joining
    /// takes its share the same way, and a decommissioned one hands everything over and
    /// is gone.
    #[test]
    fn command_sequences_keep_the_invariants(steps in proptest::collection::vec(step(), 1..60), victim in 0usize..16) {
        let mut st = planning(ClusterState::default());
        apply_steps(&mut st, steps)?;
        bring_back(&mut st)?;
        settle(&mut st)?;
        check_settled(&st)?;

        // A server joins: it takes its share.
        st.apply(Command::RegisterServer { token: 1 << 100, address: "new:1".into(), incarnation: 1 }).unwrap();
        settle(&mut st)?;
        check_settled(&st)?;

        // One is decommissioned: everything it held moves, and it is gone.
        let id = st.servers[victim % st.servers.len()].info.id;
        let before = st.clone();
        match st.apply(Command::Decommission { id }) {
            Ok(_) => {
                settle(&mut st)?;
                prop_assert!(st.server(id).is_none(), "{:?} is gone", id);
                check_settled(&st)?;
            }
            Err(e) => {
                prop_assert!(matches!(e, CommandError::WouldUnderReplicate { .. }), "{}", e);
                prop_assert_eq!(&st, &before);
            }
        }
    }

    /// With planning off ([`PLAN_TRANSFERS`] false): the same invariants
    /// after every command, and no transfer nor Leaving server ever appears; then, every
    /// server brought back, each decommission either removes a server that holds nothing
    /// at once or is refused, `TransfersOff` for one that holds regions, changing nothing.
    #[test]
    fn command_sequences_without_planning_keep_the_invariants(steps in proptest::collection::vec(step(), 1..60)) {
        let mut st = ClusterState { plan_transfers: false, ..ClusterState::default() };
        apply_steps(&mut st, steps)?;
        bring_back(&mut st)?;
        for id in st.servers.iter().map(|s| s.info.id).collect::<Vec<_>>() {
            let before = st.clone();
            let holds = sets(&st).iter().any(|set| set.contains(&id));
            match st.apply(Command::Decommission { id }) {
                Ok(outcome) => {
                    prop_assert!(!holds);
                    prop_assert_eq!(outcome, CommandOutcome::Decommissioned { id, removed: true });
                }
                Err(CommandError::TransfersOff { regions, .. }) => {
                    prop_assert!(holds && regions > 0);
                    prop_assert_eq!(&st, &before);
                }
                Err(e) => {
                    prop_assert!(matches!(e, CommandError::WouldUnderReplicate { .. }), "{}", e);
                    prop_assert_eq!(&st, &before);
                }
            }
            check_state(&st)?;
        }
    }

    /// Key splits under planning (every new region led by the split one's leader), settled
    /// after each: holdings stay balanced (`check_settled`), and point leadership spreads
    /// over the servers in each class of regions (made or cut by splits; the others), none
    /// leading more than K − 1 regions over its share of a class (`ceil(regions / n)`, one
    /// more for the others): a move hands leadership to a region's second member only, and
    /// with K = 3 a leader's regions may all have the same one.
    #[test]
    fn leadership_spreads_after_key_splits(
        n in 4u64..8,
        tolerate in 1u32..3,
        partitions in 1u32..12,
        splits in proptest::collection::vec((any::<u32>(), -1_000_000i64..1_000_000), 0..40),
    ) {
        // At least two servers more than replicas: with as many, every server holds every
        // region and no transfer can move leadership; with one more, every region of a
        // leader may have the same second member, the only one a move can hand it to.
        let tolerate = tolerate.min(n as u32 - 3);
        let mut st = planning(with_servers(n));
        let text = format!(
            "space t key int k attributes int a create {partitions} partitions \
             tolerate {tolerate} failures placement ordered"
        );
        st.apply(Command::AddSpace { schema: parse_space(&text).unwrap() }).unwrap();
        settle(&mut st)?;
        for (pick, at) in splits {
            // The region holding `at`, mostly: the splits follow where keys are.
            let space = &st.spaces[0];
            let keys = &space.tessellations()[0];
            let region = if pick % 4 == 0 {
                pick % keys.regions_count()
            } else {
                tessera_geometry::key_region(keys, &Value::Int(at)).0
            };
            let change = SpaceChange::SplitKeyRegion { region, at: Value::Int(at) };
            let _ = st.apply(Command::AlterSpace {
                name: "t".into(),
                change,
                fence: None,
            });
            settle(&mut st)?;
        }
        check_settled(&st)?;
        // Per class (regions splits made or cut; the others), the regions each server leads.
        let space = &st.spaces[0];
        let class = made_by_splits(space);
        for c in [false, true] {
            let regions = class.iter().filter(|&&x| x == c).count() as u64;
            let share = regions.div_ceil(n) + u64::from(!c);
            let mut led: HashMap<ServerId, u64> = HashMap::new();
            for (set, _) in space.replicas[0].iter().zip(&class).filter(|(_, &x)| x == c) {
                *led.entry(set[0]).or_default() += 1;
            }
            for (s, l) in &led {
                prop_assert!(
                    *l <= share + u64::from(tolerate),
                    "{:?} leads {} of {} regions (split: {}) on {} servers: {:?}", s, l, regions, c, n, led
                );
            }
        }
    }

    /// The balance bound for any server count, K and partition count, with other spaces
    /// already loading some servers unevenly.
    #[test]
    fn assignment_is_balanced(n in 1u64..12, tolerate in 0u32..4, partitions in 1u32..200, subs in 0usize..4, skew in 0u32..3) {
        let tolerate = tolerate.min(n as u32 - 1);
        let mut st = with_servers(n.min(2));
        for i in 0..skew {
            let t = tolerate.min(st.servers.len() as u32 - 1);
            st.apply(Command::AddSpace { schema: schema(&format!("skew{i}"), 1, 7, t) }).unwrap();
        }
        for i in 2..n {
            st.apply(Command::RegisterServer { token: 1000 + i as u128, address: format!("10.0.0.{i}:2000"), incarnation: 1 }).unwrap();
        }
        st.apply(Command::AddSpace { schema: schema("s", subs, partitions, tolerate) }).unwrap();
        check_space(&st, st.spaces.last().unwrap());
        // Deterministic: the same inputs give the same sets.
        let existing = st.spaces[..st.spaces.len() - 1].iter().flat_map(SpaceConfig::replica_sets);
        let again = assign_replicas(&st.spaces.last().unwrap().schema, &st.servers.iter().map(|s| s.info.id).collect::<Vec<_>>(), existing);
        prop_assert_eq!(&again, &st.spaces.last().unwrap().replicas);
    }
}

/// Per key region of `space`: whether a split made or cut it (regions past the partitions the
/// space was created with were made by splits; a split also cuts the region it names).
fn made_by_splits(space: &SpaceConfig) -> Vec<bool> {
    let created = space.schema.partitions as usize;
    let regions = space.replicas[SubspaceId::KEY.get()].len();
    (0..regions)
        .map(|r| {
            r >= created
                || space
                    .schema
                    .key_splits
                    .iter()
                    .any(|s| s.region as usize == r)
        })
        .collect()
}

/// Each region's members as a sorted list: who holds it, whatever the chain order.
fn members(st: &ClusterState) -> Vec<Vec<ServerId>> {
    sets(st)
        .into_iter()
        .map(|mut set| {
            set.sort();
            set
        })
        .collect()
}

/// Every transfer under way goes into `to`.
fn transfers_only_into(st: &ClusterState, to: ServerId) -> bool {
    st.spaces
        .iter()
        .flat_map(|s| &s.transfers)
        .all(|t| t.to == to)
}

/// A server that rests and comes back (restarted, a new incarnation) gets back exactly the
/// regions it held, by transfers into it alone; no other server gains a region meanwhile.
#[test]
fn a_planned_restart_moves_no_region() {
    let mut st = planning(with_servers(4));
    st.apply(Command::AddSpace {
        schema: schema("h", 2, 16, 1),
    })
    .unwrap();
    settle(&mut st).unwrap();
    let held = members(&st);
    let id = ServerId(2);
    let incarnation = st.server(id).unwrap().incarnation;
    let out = st.apply(Command::Rest { id, incarnation }).unwrap();
    let left = held.iter().filter(|set| set.contains(&id)).count() as u32;
    assert_eq!(out, CommandOutcome::Rested { id, places: left });
    assert_eq!(state_of(&st, id), ServerState::Resting);
    assert!(
        st.spaces[0].transfers.is_empty(),
        "nothing moves while it rests"
    );
    assert!(!sets(&st).iter().any(|set| set.contains(&id)));
    // Other commands plan meanwhile, and leave the places alone.
    st.apply(Command::AddSpace {
        schema: schema("g", 1, 4, 1),
    })
    .unwrap();
    assert!(st.spaces.iter().all(|s| s.transfers.is_empty()));
    assert_eq!(st.spaces[0].resting.len(), left as usize);
    // Back, restarted.
    let address = st.server(id).unwrap().info.address.clone();
    st.apply(reg(1001, &address, incarnation + 1)).unwrap();
    assert_eq!(state_of(&st, id), ServerState::Available);
    let mut rounds = 0;
    loop {
        if !st.spaces[0].resting.is_empty() {
            assert!(transfers_only_into(&st, id), "{:?}", st.spaces[0].transfers);
        }
        let done = refs_into(&st, id);
        if done.is_empty() {
            break;
        }
        let incarnation = incarnation + 1;
        let backfilled = vec![];
        st.apply(Command::CompleteTransfers {
            id,
            incarnation,
            done,
            backfilled,
        })
        .unwrap();
        rounds += 1;
    }
    assert!(rounds >= 2, "at most {TRANSFERS_PER_SERVER_MAX} at a time");
    for (before, now) in held.iter().zip(sets(&st)) {
        assert_eq!(
            before.contains(&id),
            now.contains(&id),
            "{before:?} -> {now:?}"
        );
    }
    // It comes back last in each chain, so it leads none of its key regions; in a space whose
    // key regions never split, leadership is not balanced by copies: nothing else moves.
    assert!(st.spaces.iter().all(|s| s.transfers.is_empty()));
    let leads = sets(&st).iter().take(16).filter(|set| set[0] == id).count();
    assert_eq!(leads, 0);
}

/// Past its grace period (the detector proposes `MarkOffline`), a resting server's places are
/// dropped and its regions gain replicas elsewhere, as after a failure; a place also goes when
/// the server is decommissioned, and a Resting server cannot rest again.
#[test]
fn a_rest_past_its_grace_is_a_failure() {
    let mut st = planning(with_servers(4));
    st.apply(Command::AddSpace {
        schema: schema("h", 1, 8, 1),
    })
    .unwrap();
    settle(&mut st).unwrap();
    let id = ServerId(3);
    let incarnation = st.server(id).unwrap().incarnation;
    st.apply(Command::Rest { id, incarnation }).unwrap();
    assert_eq!(
        st.apply(Command::Rest { id, incarnation }),
        Err(CommandError::CannotRest {
            id,
            state: ServerState::Resting
        })
    );
    assert!(!st.spaces[0].resting.is_empty());
    st.apply(Command::MarkOffline { id, incarnation }).unwrap();
    assert!(st.spaces[0].resting.is_empty());
    assert!(!st.spaces[0].transfers.is_empty(), "re-replication starts");
    assert!(!transfers_only_into(&st, id));
    settle(&mut st).unwrap();
    assert!(!sets(&st).iter().any(|set| set.contains(&id)));

    let other = ServerId(4);
    let incarnation = st.server(other).unwrap().incarnation;
    st.apply(Command::Rest {
        id: other,
        incarnation,
    })
    .unwrap();
    st.apply(Command::Decommission { id: other }).unwrap();
    assert!(st.server(other).is_none());
    assert!(st.spaces[0].resting.is_empty());
}
