//! A server back from a rest catches up over the data it kept (`SpaceConfig::resting`), on a
//! reliable network, step by step: two replicas of every region, one rests while the other
//! takes writes (objects updated, some moving in a search subspace, deleted and created), then
//! transfers bring it back. It must end with exactly the other's entries, its stale ones gone,
//! and, when nothing is written during the catch-up, have written only the entries that
//! differed. And the start path: a restarted server keeps the regions it rests in or is being
//! transferred into, and clears those it no longer keeps.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use tessera_geometry::RegionIndex;
use tessera_protocol::{
    Configuration, RestingPlace, ServerInfo, ServerState, SpaceConfig, Status, TransferRef,
};
use tessera_replication::{ClientId, Envelope, Input, Replica, StoreWrite};
use tessera_types::{parse_space, Epoch, ServerId, SpaceSchema, SubspaceId, Value};

use crate::model::{key_write, Op};
use crate::store::{apply, Geometry, ModelStore, Reader};
use crate::SPACE;

const A: ServerId = ServerId(1);
const B: ServerId = ServerId(2);

/// Two servers stepping their replicas over a FIFO network that loses nothing.
struct Pair {
    geometry: Geometry,
    replicas: BTreeMap<ServerId, Replica>,
    stores: BTreeMap<ServerId, ModelStore>,
    network: VecDeque<(ServerId, Envelope)>,
    /// Entries each server's transfer chunks changed (written or removed).
    replaced: BTreeMap<ServerId, usize>,
    /// Regions each server cleared.
    cleared: BTreeMap<ServerId, usize>,
    done: Vec<TransferRef>,
    clients: u64,
}

impl Pair {
    fn new(config: &Arc<Configuration>) -> Pair {
        let schema = &config.spaces[0].schema;
        let mut pair = Pair {
            geometry: Geometry::new(schema, &[]),
            replicas: BTreeMap::new(),
            stores: BTreeMap::new(),
            network: VecDeque::new(),
            replaced: BTreeMap::new(),
            cleared: BTreeMap::new(),
            done: Vec::new(),
            clients: 0,
        };
        for (n, server) in [A, B].into_iter().enumerate() {
            let replica = Replica::new(server, 1 + n as u64, config.clone(), None);
            pair.replicas.insert(server, replica);
            pair.stores.insert(server, ModelStore::default());
        }
        pair
    }

    fn step(&mut self, server: ServerId, input: Input) {
        let store = &self.stores[&server];
        let reader = Reader {
            store,
            geometry: &self.geometry,
        };
        let replica = self.replicas.get_mut(&server).expect("known");
        replica.step(input, &reader);
        let out = replica.take_outputs();
        let store = self.stores.get_mut(&server).expect("known");
        for w in &out.writes {
            let before = store.entries.clone();
            apply(store, &self.geometry, w);
            match w {
                StoreWrite::ReplaceRange { .. } => {
                    *self.replaced.entry(server).or_default() += changed(&before, &store.entries)
                }
                StoreWrite::ClearRegion { space, .. } if space == "t" => {
                    *self.cleared.entry(server).or_default() += 1
                }
                _ => {}
            }
        }
        replica.advance();
        for (_, result) in &out.replies {
            // A delete of a key deleted already finds nothing; nothing else fails.
            let fine = result
                .as_ref()
                .map_or_else(|e| e.status == Status::NotFound, |()| true);
            assert!(fine, "{server:?} refused a write: {result:?}");
        }
        self.done.extend(out.transfers_done);
        self.network.extend(out.forwards);
        self.network.extend(out.messages);
    }

    /// Delivers everything in flight, and ticks until nothing is.
    fn settle(&mut self) {
        for _ in 0..1000 {
            while let Some((to, envelope)) = self.network.pop_front() {
                self.step(to, Input::Peer(envelope));
            }
            let quiet = self.replicas.values().all(|r| r.backlog() == (0, 0));
            if quiet {
                return;
            }
            for server in [A, B] {
                self.step(server, Input::Tick);
            }
        }
        panic!("the pair did not settle");
    }

    fn install(&mut self, config: &Arc<Configuration>) {
        for server in [A, B] {
            self.step(server, Input::Configuration(config.clone()));
        }
    }

    /// Key `k{n}` written at `A` (which leads every key), as `op`.
    fn write(&mut self, n: usize, op: Op) {
        self.clients += 1;
        let schema = self.geometry.schema.clone();
        let key = Value::from(format!("k{n}"));
        let write = key_write(&schema, &key, &op);
        let input = Input::Write {
            client: ClientId(self.clients),
            space: "t".to_owned(),
            write,
        };
        self.step(A, input);
    }
}

/// How many places hold something else in `after` than in `before`.
fn changed<K: Ord, V: PartialEq>(before: &BTreeMap<K, V>, after: &BTreeMap<K, V>) -> usize {
    let places: BTreeSet<&K> = before.keys().chain(after.keys()).collect();
    places
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .count()
}

fn upsert(n: usize, round: i64) -> Op {
    let n = n as i64;
    let big = |x: i64| (x % 7 - 3) * 1_000_000_000_000_000_000;
    Op::Upsert {
        a: big(n + round),
        b: big(3 * n),
        c: format!("c{}", (n + round) % 3),
    }
}

fn schema() -> SpaceSchema {
    parse_space(SPACE).expect("valid space")
}

/// Epoch 1: `A` and `B` hold every region, `A` first (it leads every key).
fn both() -> Configuration {
    Configuration {
        model: None,
        epoch: Epoch(1),
        servers: [A, B]
            .iter()
            .map(|&id| ServerInfo {
                id,
                address: format!("s{}", id.0),
                state: ServerState::Available,
            })
            .collect(),
        spaces: vec![SpaceConfig::owned_by(1, schema(), &[A, B])],
    }
}

/// Every region of every subspace of the space.
fn regions(space: &SpaceConfig) -> Vec<(SubspaceId, RegionIndex)> {
    space
        .schema
        .subspace_ids()
        .flat_map(|s| (0..space.replicas[s.get()].len() as u32).map(move |r| (s, RegionIndex(r))))
        .collect()
}

/// `config` one epoch on, changed by `change`.
fn next(config: &Configuration, change: impl FnOnce(&mut SpaceConfig)) -> Arc<Configuration> {
    let mut next = config.clone();
    next.epoch = Epoch(config.epoch.0 + 1);
    change(&mut next.spaces[0]);
    next.check().expect("a valid configuration");
    Arc::new(next)
}

/// `B` out of every replica set, resting in each region.
fn resting(config: &Configuration) -> Arc<Configuration> {
    next(config, |space| {
        for (subspace, region) in regions(space) {
            space.replicas[subspace.get()][region.0 as usize].retain(|s| *s != B);
            space.resting.push(RestingPlace {
                subspace,
                region,
                server: B,
            });
        }
    })
}

/// A transfer into `B` for every region it rests in, its places gone.
fn back(config: &Configuration) -> Arc<Configuration> {
    let id = config.epoch.0 + 1;
    next(config, |space| {
        for p in std::mem::take(&mut space.resting) {
            space.start_transfer(id, p.subspace, p.region, p.server, None);
        }
    })
}

/// `B` a full member again.
fn complete(config: &Configuration) -> Arc<Configuration> {
    next(config, |space| {
        for t in space.transfers.clone() {
            space.complete_transfer(&t);
        }
    })
}

/// 80 objects written and replicated on both; then `B` rests while `A` updates 10 (half of
/// them moving in subspace `a`), deletes 4 and creates 5. Returns the pair and the
/// configuration `B` rests in.
fn rested_pair() -> (Pair, Arc<Configuration>) {
    let first = Arc::new(both());
    let mut pair = Pair::new(&first);
    for n in 0..80 {
        pair.write(n, upsert(n, 0));
    }
    pair.settle();
    assert_eq!(pair.stores[&A].entries, pair.stores[&B].entries);
    let rest = resting(&first);
    pair.install(&rest);
    pair.settle();
    assert_eq!(
        pair.cleared.get(&B),
        None,
        "a server keeps what it rests in"
    );
    for n in 0..10 {
        // Even ones move in subspace a; odd ones keep their a, and change c.
        let round = if n % 2 == 0 { 1 } else { 3 };
        pair.write(n, upsert(n, round));
    }
    for n in 10..14 {
        pair.write(n, Op::Del);
    }
    for n in 80..85 {
        pair.write(n, upsert(n, 0));
    }
    pair.settle();
    (pair, rest)
}

/// Once back, `B`'s regions are `A`'s exactly, and it wrote only the entries that differed
/// (what a full transfer would have cleared and written again is many times that).
#[test]
fn a_server_back_from_a_rest_writes_only_what_it_missed() {
    let (mut pair, rest) = rested_pair();
    let stale = pair.stores[&B].entries.clone();
    let missed = changed(&stale, &pair.stores[&A].entries);
    assert!(missed >= 30, "the rest changed something: {missed}");
    let transfers = back(&rest);
    pair.install(&transfers);
    pair.settle();
    let all = regions(&transfers.spaces[0]).len();
    assert_eq!(pair.done.len(), all, "every transfer reported");
    pair.install(&complete(&transfers));
    pair.settle();
    assert_eq!(pair.stores[&B].entries, pair.stores[&A].entries);
    assert_eq!(pair.replaced[&B], missed);
    let full = stale.len() + pair.stores[&A].entries.len();
    assert!(missed * 4 < full, "{missed} of {full}");
}

/// The same while `A` goes on writing during the catch-up (keys `B` has stale, missing or
/// extra entries of, updated, moved, deleted and created again between chunks): `B` still
/// ends with `A`'s entries exactly.
#[test]
fn a_catch_up_under_writes_ends_equal_to_the_source() {
    let (mut pair, rest) = rested_pair();
    let transfers = back(&rest);
    pair.install(&transfers);
    for (i, n) in (0..86).cycle().step_by(7).take(90).enumerate() {
        let op = match i % 5 {
            0 => Op::Del,
            _ => upsert(n, i as i64),
        };
        pair.write(n, op);
        // A few deliveries between writes: chunks and updates interleave.
        for _ in 0..3 {
            if let Some((to, envelope)) = pair.network.pop_front() {
                pair.step(to, Input::Peer(envelope));
            }
        }
    }
    pair.settle();
    assert_eq!(pair.done.len(), regions(&transfers.spaces[0]).len());
    pair.install(&complete(&transfers));
    pair.settle();
    assert_eq!(pair.stores[&B].entries, pair.stores[&A].entries);
}

/// A restarted server (`Replica::new` with the configuration it saved) keeps a region it
/// held then and rests in now, or is being transferred into; and clears one it kept (held,
/// or rested in) and keeps no more.
#[test]
fn a_restart_clears_only_the_regions_no_longer_kept() {
    let member = both();
    let rest = resting(&member);
    let transfers = back(&rest);
    let gone = next(&rest, |space| space.resting.clear());
    let all = regions(&member.spaces[0]).len();
    let clears = |config: &Arc<Configuration>, saved: &Configuration| {
        let mut replica = Replica::new(B, 7, config.clone(), Some(saved));
        let out = replica.take_outputs();
        out.writes
            .iter()
            .filter(|w| matches!(w, StoreWrite::ClearRegion { .. }))
            .count()
    };
    assert_eq!(clears(&rest, &member), 0, "resting: kept");
    assert_eq!(clears(&transfers, &member), 0, "transferred into: kept");
    assert_eq!(clears(&transfers, &rest), 0, "back from a rest: kept");
    assert_eq!(clears(&gone, &member), all, "held, gone: cleared");
    assert_eq!(clears(&gone, &rest), all, "rested in, gone: cleared");
}
