//! After a run: every key's history is linearizable against the model, and every replica
//! converged to where the final configuration puts each entry.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use tessera_geometry::RegionIndex;
use tessera_protocol::Status;
use tessera_replication::CommittedReader;
use tessera_types::{Object, ServerId, StoredObject, Value};

use crate::clients::Event;
use crate::cluster::Sim;
use crate::model::{model_apply, Op, Outcome};
use crate::store::Reader;

/// Wing & Gong's search with memoisation: is there an order of the events, consistent with
/// real time, in which every outcome is the model's? Pending events may take effect or not.
pub(crate) fn linearizable(events: &[Event]) -> bool {
    assert!(events.len() <= 128, "histories per key are kept small");
    fn go(
        events: &[Event],
        done: u128,
        state: Option<Object>,
        memo: &mut HashSet<(u128, String)>,
    ) -> bool {
        let all_complete_done = events
            .iter()
            .enumerate()
            .all(|(i, e)| e.ret.is_none() || done & (1 << i) != 0);
        if all_complete_done {
            return true;
        }
        if !memo.insert((done, format!("{state:?}"))) {
            return false;
        }
        // Only an event that started before every remaining event returned can go next.
        let horizon = events
            .iter()
            .enumerate()
            .filter(|(i, _)| done & (1 << i) == 0)
            .filter_map(|(_, e)| e.ret)
            .min()
            .unwrap_or(u64::MAX);
        for (i, e) in events.iter().enumerate() {
            if done & (1 << i) != 0 || e.call > horizon {
                continue;
            }
            let (next, outcome) = model_apply(&e.key, &state, &e.op);
            if e.outcome.as_ref().is_some_and(|o| *o != outcome) {
                continue;
            }
            if go(events, done | (1 << i), next, memo) {
                return true;
            }
        }
        false
    }
    go(events, 0, None, &mut HashSet::new())
}

/// Outcomes that say the write did nothing (the point leader moved or the lease lapsed) leave
/// the history; a TIMEOUT (leadership moved with the write in flight) is an unknown outcome.
pub(crate) fn for_checking(events: Vec<Event>) -> Vec<Event> {
    events
        .into_iter()
        .filter(|e| {
            !matches!(
                e.outcome,
                Some(Outcome::Failed(Status::StaleEpoch | Status::Unavailable))
            )
        })
        .map(|mut e| {
            if e.outcome == Some(Outcome::Failed(Status::Timeout)) {
                e.ret = None;
                e.outcome = None;
            }
            e
        })
        .collect()
}

/// Fails the run with what is unfinished: who holds what, transfers, backlogs, writes in flight.
pub(crate) fn stuck(sim: &Sim, seed: u64, why: &str) -> ! {
    let in_flight: Vec<_> = sim
        .history
        .iter()
        .filter(|e| e.ret.is_none() && !sim.lost_with_leader(e))
        .collect();
    let backlogs: Vec<_> = sim
        .nodes
        .iter()
        .map(|(id, n)| {
            (
                id,
                n.replica
                    .as_ref()
                    .map(|r| (r.unacked(), r.describe_unfinished())),
                n.paused.is_some(),
            )
        })
        .collect();
    let holders: BTreeSet<ServerId> = sim
        .config()
        .spaces
        .iter()
        .flat_map(|s| s.replicas.iter().flatten().flatten().copied())
        .collect();
    let transfers: Vec<_> = sim
        .config()
        .spaces
        .iter()
        .map(|s| (s.id, &s.transfers))
        .collect();
    panic!(
        "seed {seed}: {why} at t={} (replica set members {holders:?}, transfers {transfers:?}): network {} configs {} removals {} wakes {} restarts {}, backlogs {backlogs:?}; writes in flight {in_flight:?}",
        sim.now,
        sim.network.len(),
        sim.config_deliveries.len(),
        sim.removals.len(),
        sim.wake_at.len(),
        sim.restart_at.len()
    );
}

/// Every subspace entry of `key` is on exactly the live replicas of its final object's region
/// in the final configuration, and on no other running server.
pub(crate) fn check_converged(sim: &Sim, key: &Value, final_object: Option<StoredObject>) {
    let config = sim.config();
    let space = &config.spaces[0];
    let geometry = sim.geometry();
    for subspace in geometry.schema.subspace_ids() {
        // A subspace never added, or dropped, is on no server.
        let written = space
            .schema
            .subspaces
            .get(subspace.get())
            .is_some_and(|s| s.is_written());
        let expected: BTreeSet<ServerId> = final_object
            .as_ref()
            .filter(|_| written)
            .and_then(|f| geometry.entry(subspace, &f.object))
            .map(|(_, r, _, _)| {
                config.spaces[0]
                    .replicas_of(subspace, RegionIndex(r))
                    .iter()
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        for (server, node) in &sim.nodes {
            if node.replica.is_none() {
                continue; // down for good: its disk is not read
            }
            let held: Vec<&StoredObject> = node
                .store
                .entries
                .iter()
                .filter(|((s, _, _, k), _)| *s == subspace.0 && k == key)
                .map(|(_, o)| o)
                .collect();
            if expected.contains(server) {
                let want = final_object.as_ref().expect("expected only if present");
                assert_eq!(
                    held,
                    vec![want],
                    "{key} in subspace {} on {server:?}",
                    subspace.0
                );
            } else {
                assert!(
                    held.is_empty(),
                    "{key} left in subspace {} on {server:?}: {held:?}",
                    subspace.0
                );
            }
        }
    }
}

/// Keys with no write in flight, and their value: the last acknowledged write's result, read
/// from the current point leader's committed state (which the linearizability check validates
/// separately). A write answered TIMEOUT, or lost with its point leader, may still be in flight
/// for good: its key is settled only once everything is quiet (`quiet`). Keys whose point
/// leader is not serving are left out.
pub(crate) fn settled_keys(
    sim: &Sim,
    keys: &[Value],
    quiet: bool,
) -> BTreeMap<Value, Option<Object>> {
    let config = sim.config();
    let unsettled =
        |e: &Event| e.ret.is_none() || e.outcome == Some(Outcome::Failed(Status::Timeout));
    keys.iter()
        .filter(|k| quiet || !sim.history.iter().any(|e| &e.key == *k && unsettled(e)))
        .filter_map(|k| {
            let node = &sim.nodes[&sim.leader(config, k)];
            if node.replica.is_none() || node.config.epoch < config.epoch {
                return None;
            }
            let found = Reader {
                store: &node.store,
                geometry: &node.geometry,
            }
            .get("t", k)
            .expect("model");
            Some((k.clone(), found.map(|f| f.object)))
        })
        .collect()
}

#[test]
fn the_checker_rejects_a_lost_write() {
    let key = Value::from("k");
    let put = Op::Upsert {
        a: 5,
        b: 0,
        c: String::new(),
    };
    let (written, _) = model_apply(&key, &None, &put);
    let event = |op, call, ret, outcome| Event {
        key: key.clone(),
        op,
        server: ServerId(1),
        call,
        ret: Some(ret),
        outcome: Some(outcome),
    };
    let done = event(put, 0, 1, Outcome::Done);
    let lost = event(Op::Get, 2, 3, Outcome::Read(None));
    let seen = event(Op::Get, 2, 3, Outcome::Read(written));
    assert!(!linearizable(&[done.clone(), lost]));
    assert!(linearizable(&[done, seen]));
}
