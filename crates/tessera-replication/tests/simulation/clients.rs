//! The clients: random operations on a few hot keys, gets at any reader of a key's region,
//! searches, and the history of events the checker reads.

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::Rng;
use tessera_geometry::RegionIndex;
use tessera_protocol::Status;
use tessera_replication::CommittedReader;
use tessera_replication::{ClientId, Input};
use tessera_types::{
    CheckedPredicate, Object, Predicate, PredicateOp, ServerId, StoredObject, SubspaceId, Value,
};

use crate::cluster::Sim;
use crate::model::{key_write, to_model, Op, Outcome};
use crate::store::Reader;
use crate::CLIENTS;

#[derive(Clone, Debug)]
pub(crate) struct Event {
    pub(crate) key: Value,
    pub(crate) op: Op,
    pub(crate) server: ServerId,
    pub(crate) call: u64,
    /// `None` while in flight, or forever if its point leader failed with it.
    pub(crate) ret: Option<u64>,
    pub(crate) outcome: Option<Outcome>,
}

impl Sim {
    fn random_op(&mut self) -> Op {
        let big = |rng: &mut StdRng| rng.random_range(-3..4) * 1_000_000_000_000_000_000;
        match self.rng.random_range(0..10) {
            0..=3 => Op::Upsert {
                a: big(&mut self.rng),
                b: big(&mut self.rng),
                c: format!("c{}", self.rng.random_range(0..3)),
            },
            4 => Op::Create {
                a: big(&mut self.rng),
            },
            5 => Op::SetBIfA {
                if_a: big(&mut self.rng),
                b: big(&mut self.rng),
            },
            6 | 7 if !self.dynamic => Op::AddB,
            6 | 7 => Op::SetBIfA {
                if_a: big(&mut self.rng),
                b: big(&mut self.rng),
            },
            8 => Op::Del,
            _ => Op::DelIfC1,
        }
    }

    /// An operation of a client that has none in flight: a write sent to the key's point
    /// leader in the coordinator's current configuration, or a get ([`Sim::get`]).
    pub(crate) fn client_op(&mut self, keys: &[Value]) -> bool {
        let busy = self
            .history
            .iter()
            .filter(|e| e.ret.is_none() && !self.lost_with_leader(e))
            .count();
        if busy >= CLIENTS {
            return false;
        }
        let key = keys[self.rng.random_range(0..keys.len())].clone();
        if self.rng.random_bool(0.25) {
            return self.get(key);
        }
        let config = self.config().clone();
        let leader = self.leader(&config, &key);
        let node = &self.nodes[&leader];
        if node.replica.is_none() || node.paused.is_some() {
            return false; // the client's request times out; it tries again later
        }
        let op = self.random_op();
        let write = key_write(&self.geometry().schema, &key, &op);
        let client = ClientId(self.history.len() as u64);
        self.history.push(Event {
            key,
            op,
            server: leader,
            call: self.now,
            ret: None,
            outcome: None,
        });
        self.step(
            leader,
            Input::Write {
                client,
                space: "t".into(),
                write,
            },
        );
        true
    }

    /// A get, sent by a client that knows the coordinator's current configuration or, now and
    /// then, one of the few before it, to a random reader of the key's region in that
    /// configuration (`SpaceConfig::readers`). The server refuses it, as the real one does, if
    /// the client's configuration is newer than its own or its own does not list it among the
    /// readers; and while its lease has lapsed. Otherwise it answers from its store at once, or
    /// once the versions pending there when the get came have settled (its read gates); a get
    /// that waited across an install of a configuration is refused then.
    pub(crate) fn get(&mut self, key: Value) -> bool {
        let stale = if self.rng.random_bool(0.3) {
            self.rng.random_range(0..self.configs.len().min(4))
        } else {
            0
        };
        let config = self.configs[self.configs.len() - 1 - stale].clone();
        let region = self.geometry_of(&config).key_region(&key);
        let readers = config.spaces[0].readers(SubspaceId::KEY, region);
        if readers.is_empty() {
            return false;
        }
        let server = readers[self.rng.random_range(0..readers.len())];
        let node = &self.nodes[&server];
        if node.replica.is_none()
            || node.paused.is_some()
            || node.lease_lapsed_until_epoch.is_some()
        {
            return false; // times out, or refused: no effect
        }
        if node.config.epoch < config.epoch || node.config.spaces.is_empty() {
            return false; // RECONFIGURE
        }
        let own_region = node.geometry.key_region(&key);
        let own = &node.config.spaces[0];
        if !own.readers(SubspaceId::KEY, own_region).contains(&server) {
            return false; // RECONFIGURE
        }
        // A known gap, not modelled: the only complete replica of a region (K = 1) that a
        // transfer replaces answers until it leaves, and a server slow to install the
        // configuration that completes the transfer answers a stale client from a region the
        // chains no longer pass (docs/operations.md, "Reads from every replica"). Such a
        // server is asked only while it has the current configuration, as every get was before
        // reads went to every replica.
        let replaced = own
            .transfer_at(SubspaceId::KEY, own_region)
            .is_some_and(|t| t.replaces == Some(server))
            && own.complete_replicas(SubspaceId::KEY, own_region).len() == 1;
        if replaced && node.config.epoch < self.config().epoch {
            return false;
        }
        let (space, installs) = (own.id, node.installs);
        if own.replicas_of(SubspaceId::KEY, own_region)[0] != server {
            self.reads[0] += 1;
        }
        let event = self.history.len();
        self.history.push(Event {
            key: key.clone(),
            op: Op::Get,
            server,
            call: self.now,
            ret: None,
            outcome: None,
        });
        let node = self.nodes.get_mut(&server).expect("known");
        if node.gates.admit(space, &key, (event, installs)).is_some() {
            self.finish_read(server, event, installs);
        } else {
            self.reads[1] += 1;
        }
        true
    }

    /// A get at `server` may read now: it answers from the store, unless its lease lapsed or a
    /// configuration was installed since it came (then it is refused, and has no effect).
    pub(crate) fn finish_read(&mut self, server: ServerId, event: usize, installs: u64) {
        let node = &self.nodes[&server];
        let outcome = if node.lease_lapsed_until_epoch.is_some() {
            Outcome::Failed(Status::Unavailable)
        } else if node.installs != installs {
            Outcome::Failed(Status::StaleEpoch)
        } else {
            let found = Reader {
                store: &node.store,
                geometry: &node.geometry,
            }
            .get("t", &self.history[event].key)
            .expect("model");
            Outcome::Read(found.map(|f| to_model(f.object)))
        };
        let e = &mut self.history[event];
        assert!(e.ret.is_none(), "a get is answered once: {e:?}");
        e.ret = Some(self.now);
        e.outcome = Some(outcome);
    }

    /// Whether `e` went to a point leader that crashed, or that lost its role, before answering:
    /// its outcome is unknown for good.
    pub(crate) fn lost_with_leader(&self, e: &Event) -> bool {
        e.ret.is_none() && self.ever_failed.contains(&e.server)
    }

    /// Writes whose point leader failed with them unanswered: each may or may not take effect
    /// at any time after its call, which the linearizability check must try both ways.
    pub(crate) fn writes_lost(&self) -> usize {
        self.history
            .iter()
            .filter(|e| self.lost_with_leader(e))
            .count()
    }

    /// A search on one live replica per region (in the current configuration), merged by
    /// highest version, checked against the settled keys of the model.
    pub(crate) fn search(&mut self, settled: &BTreeMap<Value, Option<Object>>) {
        let searchable: Vec<SubspaceId> = self.config().spaces[0]
            .schema
            .searchable_subspaces()
            .collect();
        let subspace = searchable[self.rng.random_range(0..searchable.len())];
        // A dynamic space's documents are in their formula's subspace only (the unispace or
        // the overlay): the search reads both, as a plan does, and a copy left behind by a
        // document that changed formula would show as a stale version.
        let geometry = self.geometry().clone();
        let subspaces: Vec<SubspaceId> = if geometry.schema.is_dynamic() {
            searchable[1..].to_vec()
        } else {
            vec![subspace]
        };
        let target = Value::Int(self.rng.random_range(-3..4) * 1_000_000_000_000_000_000);
        let attr = if subspace.0 == 2 && !geometry.schema.is_dynamic() {
            "b"
        } else {
            "a"
        };
        let predicate = CheckedPredicate::check(
            &geometry.schema,
            &Predicate::new(attr, PredicateOp::GreaterEqual(target)),
        )
        .expect("valid");
        let config = self.config().clone();
        let mut merged: BTreeMap<Value, StoredObject> = BTreeMap::new();
        for (subspace, r) in subspaces.iter().flat_map(|&s| {
            (0..geometry.tessellations[s.get()].regions_count()).map(move |r| (s, r))
        }) {
            let set: Vec<ServerId> = config.spaces[0]
                .complete_replicas(subspace, RegionIndex(r))
                .iter()
                .copied()
                .filter(|s| {
                    self.nodes[s].replica.is_some() && self.nodes[s].config.epoch >= config.epoch
                })
                .collect();
            if set.is_empty() {
                return; // the client waits for a server of this region: no search now
            }
            let server = set[self.rng.random_range(0..set.len())];
            let mut seen_here = BTreeSet::new();
            for ((s, region, _, key), o) in &self.nodes[&server].store.entries {
                if *s != subspace.0 || *region != r {
                    continue;
                }
                assert!(
                    seen_here.insert(key.clone()),
                    "key {key} twice in region {r} of subspace {} of server {server:?}: {:?}",
                    subspace.0,
                    self.nodes[&server]
                        .store
                        .entries
                        .iter()
                        .filter(|((s, rr, _, k), _)| (*s, *rr) == (subspace.0, r) && k == key)
                        .collect::<Vec<_>>()
                );
                let produced = self.produced.get(&(key.clone(), o.version));
                assert_eq!(
                    produced,
                    Some(&o.object),
                    "a search returned a value no write produced"
                );
                if predicate.matches(&o.object)
                    && merged.get(key).is_none_or(|m| m.version < o.version)
                {
                    merged.insert(key.clone(), o.clone());
                }
            }
        }
        for (key, expected) in settled {
            let expected = expected.as_ref().filter(|o| predicate.matches(o));
            assert_eq!(
                merged.get(key).map(|o| &o.object),
                expected,
                "search for {attr} >= ... on settled key {key}"
            );
        }
    }
}
