//! The model coordinator: configurations made and published, faults injected (crashes,
//! pauses, partitions, restarts), regions healed and moved by state transfer, subspaces added,
//! re-cut and dropped, shapes registered, key regions split.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::Rng;
use tessera_geometry::RegionIndex;
use tessera_protocol::{
    Configuration, RestingPlace, ServerInfo, ServerState, SpaceChange, SpaceConfig, Status,
    Transfer,
};
use tessera_replication::Input;
use tessera_types::{AxisCuts, Epoch, PrimitiveType, ServerId, SpaceSchema, SubspaceId, Value};

use crate::cluster::{start_replica, Sim};
use crate::model::Outcome;
use crate::store::{recover_log, Geometry};
use crate::{tweet_key, ADDED, FORMULA, LEASE_TICKS, ORDERED_KEYS, SPLITS_MAX};

/// `spare` servers at the end of the list hold nothing at first (they joined the cluster).
pub(crate) fn first_configuration(
    servers: usize,
    spare: usize,
    k: usize,
    schema: &SpaceSchema,
) -> Configuration {
    let ids: Vec<ServerId> = (1..=servers as u64).map(ServerId).collect();
    let holders = servers - spare;
    let mut space = SpaceConfig::owned_by(1, schema.clone(), &ids[..k]);
    if schema.is_dynamic() {
        // A formula whose documents (those with an even `a`, see `formula_of`) are placed in
        // an overlay of a and c instead of the unispace: documents change formula as they are
        // written, leaving one subspace for another.
        let spec = tessera_types::FormulaSpec::parse(Some(FORMULA), &["a*2,c"]).expect("valid");
        for change in [
            tessera_protocol::SpaceChange::AddFormula(spec),
            tessera_protocol::SpaceChange::FormulaReady(FORMULA.to_owned()),
        ] {
            space
                .alter(1, &change, |t| {
                    vec![ids[..k].to_vec(); t.regions_count() as usize]
                })
                .expect("the formula applies");
        }
    }
    // Rotate replica sets so every server leads some regions and the chains cross servers.
    for (s, regions) in space.replicas.iter_mut().enumerate() {
        for (r, set) in regions.iter_mut().enumerate() {
            *set = (0..k).map(|i| ids[(r * 3 + s + i) % holders]).collect();
        }
    }
    Configuration {
        model: None,
        epoch: Epoch(1),
        servers: ids
            .iter()
            .map(|&id| ServerInfo {
                id,
                address: format!("s{}", id.0),
                state: ServerState::Available,
            })
            .collect(),
        spaces: vec![space],
    }
}

/// Most ticks the regions a resting server left wait for it after its removal (the
/// coordinators' grace period, drawn for each server below this): a crashed server restarts
/// within 200 ticks of its removal and a paused one wakes within 100, so many come back in
/// time, some do not, and some come back to see the places they had not caught up yet go.
const GRACE_TICKS_MAX: u64 = 300;

/// The coordinator's next configuration: `change` applied, epoch + 1. Resting places that no
/// longer fit go (their region dropped with its subspace, or the server back in its set).
pub(crate) fn next_configuration(
    current: &Configuration,
    change: impl FnOnce(&mut Configuration),
) -> Configuration {
    let mut next = current.clone();
    next.epoch = Epoch(current.epoch.0 + 1);
    change(&mut next);
    for space in &mut next.spaces {
        let fits = |p: &RestingPlace| {
            space
                .replica_set(p.subspace, p.region)
                .is_some_and(|set| !set.is_empty() && !set.contains(&p.server))
        };
        let resting: Vec<RestingPlace> = space.resting.iter().copied().filter(fits).collect();
        space.resting = resting;
    }
    next
}

/// The places `server` left in `after`'s replica sets that it held in `before`'s: it rests
/// there (`SpaceConfig::resting`), and keeps their data.
fn leave_resting_places(
    before: &Configuration,
    after: &mut Configuration,
    server: ServerId,
) -> u64 {
    let mut left = 0;
    for (was, space) in before.spaces.iter().zip(&mut after.spaces) {
        for sub in space.schema.subspace_ids() {
            for r in 0..space.replicas[sub.get()].len() {
                let region = RegionIndex(r as u32);
                if was.holds(sub, region, server) && !space.holds(sub, region, server) {
                    space.resting.push(RestingPlace {
                        subspace: sub,
                        region,
                        server,
                    });
                    left += 1;
                }
            }
        }
        space
            .resting
            .sort_by_key(|p| (p.subspace, p.region, p.server));
    }
    left
}

/// Takes `server` out of every replica set, keeping the order of the others, except where it
/// is the only complete member (a region keeps its last full copy). A transfer into it ends;
/// so does one it was the source of (the target leaves too: a new transfer starts over); one
/// that was to replace it goes on replacing nobody.
fn remove_server(config: &mut Configuration, server: ServerId) {
    for space in &mut config.spaces {
        let mut transfers = Vec::new();
        for t in std::mem::take(&mut space.transfers) {
            let source = space.transfer_source(&t);
            let set = &mut space.replicas[t.subspace.get()][t.region.0 as usize];
            // The target leaves (it is last), or the source does and the target with it.
            if t.to == server || (source == server && set.len() > 2) {
                set.pop();
            } else {
                transfers.push(Transfer {
                    replaces: t.replaces.filter(|r| *r != server),
                    ..t
                });
            }
        }
        space.transfers = transfers;
        for (sub, regions) in space.replicas.iter_mut().enumerate() {
            for (r, set) in regions.iter_mut().enumerate() {
                let catching_up = space
                    .transfers
                    .iter()
                    .any(|t| t.subspace.get() == sub && t.region.0 as usize == r);
                let complete = set.len() - usize::from(catching_up);
                if complete > 1 || (complete == 1 && set[0] != server) {
                    set.retain(|s| *s != server);
                }
            }
        }
        space.forget_departed();
    }
}

/// Starts a transfer of `region` of `subspace` into `to`, which joins the set last.
fn start_transfer(
    config: &mut Configuration,
    space: usize,
    (subspace, region): (SubspaceId, RegionIndex),
    to: ServerId,
    replaces: Option<ServerId>,
) {
    let id = config.epoch.0;
    config.spaces[space].start_transfer(id, subspace, region, to, replaces);
}

/// `TESSERA_SIM_TRANSFERS=0` or `=1` runs every seed without or with state transfers; by
/// default three seeds in four have them (the others keep the cluster that cannot re-replicate,
/// one with no server to spare, in the test).
pub(crate) fn transfers_wanted(rng: &mut StdRng) -> bool {
    match std::env::var("TESSERA_SIM_TRANSFERS").as_deref() {
        Ok("0") => false,
        Ok(_) => true,
        Err(_) => rng.random_bool(0.75),
    }
}

/// `TESSERA_SIM_ORDERED=0` or `=1` makes every typed seed hashed or ordered; by default a
/// third are ordered, by their number (so the rest run as they did before ordered runs).
pub(crate) fn ordered_wanted(seed: u64) -> bool {
    match std::env::var("TESSERA_SIM_ORDERED").as_deref() {
        Ok("0") => false,
        Ok(_) => true,
        Err(_) => seed % 3 == 1,
    }
}

impl Sim {
    /// A new configuration from the coordinator, reaching each live server at its own time.
    pub(crate) fn publish(&mut self, config: Configuration) {
        let config = Arc::new(config);
        self.configs.push(config.clone());
        for (&id, node) in &self.nodes {
            if node.replica.is_some() {
                let at = self.now + self.rng.random_range(0..60);
                self.config_deliveries.push((at, id, config.clone()));
            }
        }
    }

    /// Maybe injects a fault: only where regions have replicas to spare (K ≥ 2), one fault at
    /// a time, and only on a server whose failure leaves every region a complete replica that
    /// has not failed (with K replicas, K - 1 failures are tolerated: a region being refilled
    /// has fewer to spare).
    pub(crate) fn maybe_fault(&mut self) {
        let busy = !self.removals.is_empty() || self.nodes.values().any(|n| n.paused.is_some());
        if self.k < 2 || busy {
            return;
        }
        if !self.transfers_on && self.failed.len() + 1 >= self.k {
            return; // nothing heals: K - 1 failures in all
        }
        let config = self.config().clone();
        let spared = |victim: ServerId| {
            config.spaces.iter().all(|space| {
                space.schema.subspace_ids().all(|sub| {
                    (0..space.replicas[sub.get()].len() as u32).all(|r| {
                        space
                            .complete_replicas(sub, RegionIndex(r))
                            .iter()
                            .any(|s| *s != victim && !self.failed.contains(s))
                    })
                })
            })
        };
        let live: Vec<ServerId> = self
            .nodes
            .iter()
            .filter(|(id, n)| n.replica.is_some() && !self.failed.contains(id))
            .map(|(id, _)| *id)
            .filter(|id| spared(*id))
            .collect();
        if live.is_empty() {
            return;
        }
        let victim = live[self.rng.random_range(0..live.len())];
        match self.rng.random_range(0..3) {
            0 => {
                // kill -9: what it had not made durable is gone.
                if self.tracing {
                    eprintln!("t={} crash {victim:?}", self.now);
                }
                self.faults[0] += 1;
                let node = self.nodes.get_mut(&victim).expect("live");
                node.replica = None;
                node.forget_syncs();
                // Its waiting gets die with it: their clients time out.
                let waiting = node.gates.release_all();
                for (event, _) in waiting {
                    let e = &mut self.history[event];
                    e.ret = Some(self.now);
                    e.outcome = Some(Outcome::Failed(Status::Unavailable));
                }
                let node = self.nodes.get_mut(&victim).expect("live");
                if !std::mem::take(&mut node.deferred).is_empty() {
                    self.faults[4] += 1;
                }
                if node.store.entries != node.durable.entries
                    || node.store.log.len() != node.durable.log.len()
                {
                    self.faults[5] += 1;
                }
                node.store = node.durable.clone();
                self.failed.insert(victim);
                self.ever_failed.insert(victim);
                self.removals.push((self.now + LEASE_TICKS + 20, victim));
            }
            1 => {
                if self.tracing {
                    eprintln!("t={} pause {victim:?}", self.now);
                }
                self.faults[1] += 1;
                let node = self.nodes.get_mut(&victim).expect("live");
                node.paused = Some(Vec::new());
                self.failed.insert(victim);
                self.ever_failed.insert(victim);
                self.removals.push((self.now + LEASE_TICKS + 20, victim));
            }
            _ => {
                if self.tracing {
                    eprintln!("t={} partition {victim:?}", self.now);
                }
                self.faults[2] += 1;
                self.nodes.get_mut(&victim).expect("live").partitioned_until =
                    self.now + self.rng.random_range(20..200);
            }
        }
    }

    /// The model coordinator's part in registering shapes: a shape asked for is added; one
    /// added is made ready once every running server that is not paused has the configuration
    /// that added it (the real coordinators check the servers' heartbeats). Then the held
    /// writes whose servers have the shape ready are written again (evaluated afresh); those
    /// of a server that crashed since are gone with it.
    pub(crate) fn register_shapes(&mut self) {
        let config = self.config().clone();
        let space = &config.spaces[0];
        // Shapes stay asked for until ready; one change per turn, as the real coordinators'
        // log takes them.
        self.shape_requests
            .retain(|shape| space.shape_entry(shape).is_none_or(|e| !e.ready));
        let caught_up = |since: u64| {
            self.nodes
                .values()
                .all(|n| n.replica.is_none() || n.paused.is_some() || n.config.epoch.0 >= since)
        };
        let change = self
            .shape_requests
            .iter()
            .find_map(|shape| match space.shape_entry(shape) {
                None => Some(SpaceChange::AddShape(shape.clone())),
                Some(e) if caught_up(e.since) => Some(SpaceChange::ShapeReady(shape.clone())),
                Some(_) => None,
            });
        if let Some(change) = change {
            if matches!(change, SpaceChange::AddShape(_)) {
                self.shapes[0] += 1;
            }
            if self.tracing {
                eprintln!("t={} coordinator: {change:?}", self.now);
            }
            let next = next_configuration(&config, |c| {
                let epoch = c.epoch.0;
                c.spaces[0]
                    .alter(epoch, &change, |_| vec![])
                    .expect("a valid shape");
            });
            self.publish(next);
        }
        let held = std::mem::take(&mut self.held);
        for (server, incarnation, u) in held {
            let node = &self.nodes[&server];
            if node.replica.is_none() || node.incarnation != incarnation {
                continue; // gone with the process
            }
            let ready = node
                .config
                .spaces
                .iter()
                .find(|s| s.schema.name == u.space)
                .and_then(|s| s.shape_entry(&u.shape))
                .is_some_and(|e| e.ready);
            if !ready || node.paused.is_some() {
                self.held.push((server, incarnation, u));
                continue;
            }
            self.step(
                server,
                Input::Write {
                    client: u.client,
                    space: u.space,
                    write: u.write,
                },
            );
        }
    }

    /// Removals whose time came; paused servers wake up once they are out; crashed ones may
    /// restart.
    pub(crate) fn coordinator_acts(&mut self) {
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) =
            self.removals.drain(..).partition(|(at, _)| *at <= now);
        self.removals = later;
        for (_, server) in due {
            // Half the servers taken out (with transfers on) rest: the regions they leave wait
            // for them, and they keep those regions' data to catch up from.
            let rests = self.transfers_on && self.rng.random_bool(0.5);
            let mut left = 0;
            let next = next_configuration(self.config(), |c| {
                let before = c.clone();
                remove_server(c, server);
                if rests {
                    left = leave_resting_places(&before, c, server);
                }
            });
            if left > 0 {
                self.catch_ups[0] += left;
                let grace = self.rng.random_range(30..GRACE_TICKS_MAX);
                self.resting.insert(server, now + grace);
                if self.tracing {
                    eprintln!("t={now} {server:?} rests in {left} regions");
                }
            }
            let epoch = next.epoch;
            self.publish(next);
            if self.nodes[&server].replica.is_none() && self.rng.random_bool(0.5) {
                let at = now + self.rng.random_range(0..200);
                self.restart_at.push((at, server));
            }
            let node = self.nodes.get_mut(&server).expect("known");
            if node.paused.is_some() {
                node.lease_lapsed_until_epoch = Some(epoch);
                let wake_at = now + self.rng.random_range(0..100);
                self.config_deliveries.push((
                    wake_at,
                    server,
                    Arc::new(Configuration::clone(self.config())),
                ));
                self.wake_at.push((wake_at, server));
            }
        }
        let waking: Vec<ServerId> = {
            let (due, later): (Vec<_>, Vec<_>) =
                self.wake_at.drain(..).partition(|(at, _)| *at <= now);
            self.wake_at = later;
            due.into_iter().map(|(_, s)| s).collect()
        };
        let restarting: Vec<ServerId> = {
            let (due, later): (Vec<_>, Vec<_>) =
                self.restart_at.drain(..).partition(|(at, _)| *at <= now);
            self.restart_at = later;
            due.into_iter().map(|(_, s)| s).collect()
        };
        for server in restarting {
            // The same disk, a new incarnation; the coordinator took it out of its replica sets
            // (a restarted server lost its in-flight state), so it starts holding nothing.
            self.faults[3] += 1;
            let config = self.config().clone();
            // `Store::open` commits what the log holds, then its storage follows the
            // configuration it starts on before its replica does.
            let node = self.nodes.get_mut(&server).expect("known");
            recover_log(&mut node.store, &node.geometry);
            node.durable = node.store.clone();
            let previous = self.nodes[&server].config.clone();
            self.install_storage(server, &config);
            let node = self.nodes.get_mut(&server).expect("known");
            node.incarnation += 1 + self.rng.random_range(0..1000);
            node.replica = Some(start_replica(
                server,
                node.incarnation,
                config.clone(),
                Some(&previous),
                self.paced,
            ));
            node.config = config;
            self.drop_dropped_subspaces(server);
            if self.tracing {
                eprintln!("t={now} restart {server:?}");
            }
            // Out of every replica set and empty-handed: a healthy server again (one that
            // transfers can fill).
            if self.transfers_on {
                self.failed.remove(&server);
            }
            // The shell's first round (regions lost while it was down cleared) is durable
            // before it persists the configuration that lost them and serves.
            self.flush_durable(server);
            self.check_keeps_only(server);
        }
        for server in waking {
            if self.tracing {
                eprintln!("t={now} wake {server:?}");
            }
            let queued = self
                .nodes
                .get_mut(&server)
                .expect("known")
                .paused
                .take()
                .unwrap_or_default();
            for input in queued {
                self.step(server, input);
            }
            self.flush(server);
            if self.transfers_on {
                self.failed.remove(&server);
            }
        }
        if self.transfers_on {
            self.complete_transfers();
            self.settle_resting();
            self.plan_transfers();
        }
        self.complete_backfills();
    }

    /// Resting servers: those whose grace period ended lose their places (their regions
    /// gain replicas elsewhere, and they clear what they kept); a place in a region that has
    /// its K members again goes; a server back (running, not failed) gets a transfer into
    /// each region it rests in, a few at a time, from the region's last member (if usable):
    /// a catch-up over the data it kept.
    fn settle_resting(&mut self) {
        let now = self.now;
        let expired: Vec<ServerId> = self
            .resting
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(s, _)| *s)
            .collect();
        self.resting.retain(|_, until| *until > now);
        let usable = self.usable();
        let (k, config) = (self.k, self.config().clone());
        let mut starts = Vec::new();
        let mut dropped = 0;
        for (n, space) in config.spaces.iter().enumerate() {
            for p in &space.resting {
                let set = space.replicas_of(p.subspace, p.region);
                let location = (p.subspace, p.region);
                let source = *set.last().expect("never empty");
                if expired.contains(&p.server) || set.len() >= k {
                    dropped += 1;
                } else if usable.contains(&p.server)
                    && usable.contains(&source)
                    && space.transfer_at(p.subspace, p.region).is_none()
                    && !starts.iter().any(|(m, l, _)| (*m, *l) == (n, location))
                    && starts.len() < 3
                {
                    starts.push((n, location, p.server));
                }
            }
        }
        if dropped == 0 && starts.is_empty() {
            return;
        }
        self.catch_ups[1] += starts.len() as u64;
        self.transfers[0] += starts.len() as u64;
        if self.tracing {
            eprintln!("t={now} resting: {expired:?} expired, catch-ups {starts:?}");
        }
        let next = next_configuration(&config, |c| {
            for space in &mut c.spaces {
                let keep = |p: &RestingPlace| {
                    !expired.contains(&p.server)
                        && space.replicas_of(p.subspace, p.region).len() < k
                };
                let resting: Vec<RestingPlace> =
                    space.resting.iter().copied().filter(keep).collect();
                space.resting = resting;
            }
            for (n, location, to) in starts {
                start_transfer(c, n, location, to, None);
            }
        });
        next.check().expect("a valid configuration");
        self.publish(next);
    }

    /// Whether `region` of `subspace` of `space` waits for a resting server.
    fn waits(space: &SpaceConfig, subspace: SubspaceId, region: RegionIndex) -> bool {
        space
            .resting
            .iter()
            .any(|p| (p.subspace, p.region) == (subspace, region))
    }

    /// `tessera alter-space t add-subspace c,a`: the new subspace's regions get K usable
    /// servers each, rotated so that chains cross servers. Once per run.
    pub(crate) fn add_subspace(&mut self) {
        let usable = self.usable();
        let config = self.config().clone();
        if usable.len() < self.k || config.spaces[0].schema.subspaces.len() > 3 {
            return;
        }
        let change = SpaceChange::AddSubspace {
            attributes: ADDED.iter().map(|a| a.to_string()).collect(),
        };
        // Refused while a re-cut is being built, or once a re-cut made one over c, a.
        self.build_subspace(&config, &change, &usable, "add subspace".to_owned());
    }

    /// Applies `change`, which adds a subspace to be built, unless the configuration refuses
    /// it: the new subspace's regions get K of `usable` each, rotated from a random offset so
    /// that chains cross servers.
    fn build_subspace(
        &mut self,
        config: &Configuration,
        change: &SpaceChange,
        usable: &[ServerId],
        what: String,
    ) {
        let (k, offset) = (self.k, self.rng.random_range(0..usable.len()));
        let mut refused = false;
        let next = next_configuration(config, |c| {
            let epoch = c.epoch.0;
            refused = c.spaces[0]
                .alter(epoch, change, |t| {
                    (0..t.regions_count() as usize)
                        .map(|r| {
                            (0..k)
                                .map(|i| usable[(offset + r + i) % usable.len()])
                                .collect()
                        })
                        .collect()
                })
                .is_err();
        });
        if refused {
            return;
        }
        if self.tracing {
            eprintln!("t={} {what}", self.now);
        }
        self.alterations[0] += 1;
        self.extend_geometries(&next);
        self.publish(next);
    }

    /// `tessera recut t S`: a written subspace of the typed space rebuilt at random cuts (int
    /// axes at points among the values written, string axes in equal slices) beside the old
    /// one, which goes when the new one is built. Skipped when the configuration refuses it (a
    /// build under way).
    pub(crate) fn recut_subspace(&mut self) {
        let usable = self.usable();
        let config = self.config().clone();
        let schema = &config.spaces[0].schema;
        let serving: Vec<SubspaceId> = schema.searchable_subspaces().skip(1).collect();
        if usable.len() < self.k || serving.is_empty() || schema.is_dynamic() {
            return;
        }
        let subspace = serving[self.rng.random_range(0..serving.len())];
        let cuts: Vec<AxisCuts> = schema
            .subspace(subspace)
            .dimensions
            .iter()
            .map(|&a| match schema.attribute(a).ty.as_primitive() {
                Some(PrimitiveType::Int) => {
                    let mut at: Vec<u64> = (0..self.rng.random_range(0..6))
                        .map(|_| {
                            let v = self.rng.random_range(-4i64..5) * 1_000_000_000_000_000_000
                                + self.rng.random_range(-3i64..4);
                            tessera_geometry::coordinate(&Value::Int(v))
                        })
                        .collect();
                    at.sort_unstable();
                    at.dedup();
                    AxisCuts::At(at)
                }
                _ => AxisCuts::Equal(self.rng.random_range(1..5)),
            })
            .collect();
        let change = SpaceChange::RecutSubspace {
            subspace: subspace.0,
            cuts,
        };
        let what = format!("recut subspace {}", subspace.0);
        self.build_subspace(&config, &change, &usable, what);
    }

    /// `tessera split-region t R AT` of the ordered space: at a key of the run or just above
    /// one (that key moves, or stays below the split), or anywhere about them, in the key
    /// region holding that point. Skipped when the configuration refuses it: the region is
    /// gaining a replica by state transfer, a subspace is being built, or the point is the
    /// region's first key. At most [`SPLITS_MAX`] a run.
    pub(crate) fn maybe_split(&mut self, keys: &[Value]) {
        if self.splits[0] >= SPLITS_MAX {
            return;
        }
        let strings = matches!(keys[0], Value::String(_));
        let at = if self.rng.random_bool(0.7) {
            match &keys[self.rng.random_range(0..keys.len())] {
                Value::Int(k) => Value::Int(k + self.rng.random_range(0..2)),
                // The key, or just above it: one byte more.
                Value::String(s) => {
                    let mut at = s.as_bytes().to_vec();
                    at.extend(b"0".repeat(self.rng.random_range(0..2)));
                    Value::from(at)
                }
                other => unreachable!("an ordered run's keys are ints or strings, not {other}"),
            }
        } else {
            let n = self.rng.random_range(-8..ORDERED_KEYS + 8);
            if strings {
                tweet_key(n)
            } else {
                Value::Int(n)
            }
        };
        let before = self.geometry().clone();
        let region = before.key_region(&at);
        let config = self.config().clone();
        let change = SpaceChange::SplitKeyRegion {
            region: region.0,
            at: at.clone(),
        };
        if let Err(e) = config.spaces[0].check_change(&change) {
            if self.tracing {
                eprintln!(
                    "t={} split of key region {} at {at} refused: {e}",
                    self.now, region.0
                );
            }
            return;
        }
        let next = next_configuration(&config, |c| {
            let epoch = c.epoch.0;
            c.spaces[0]
                .alter(epoch, &change, |_| unreachable!("a split assigns nothing"))
                .expect("checked above");
        });
        next.check().expect("a valid configuration");
        let after = Geometry::new(
            &self.geometries[0].schema,
            &next.spaces[0].schema.key_splits,
        );
        // The new region is numbered after every other and has the split one's keys from `at`
        // up; no other key moves.
        let new = RegionIndex(before.tessellations[0].regions_count());
        assert_eq!(
            after.tessellations[0].regions_count() as usize,
            next.spaces[0].replicas[SubspaceId::KEY.get()].len()
        );
        for key in keys.iter().chain([&at]) {
            let (was, is) = (before.key_region(key), after.key_region(key));
            if was == region && *key >= at {
                assert_eq!(is, new, "{key} moves to the new region");
            } else {
                assert_eq!(is, was, "{key} stays");
            }
        }
        if self.tracing {
            eprintln!(
                "t={} split key region {} at {at}: new region {}",
                self.now, region.0, new.0
            );
        }
        self.splits[0] += 1;
        self.geometries.push(Arc::new(after));
        self.publish(next);
    }

    /// `tessera alter-space t drop-subspace N` of a subspace written now (serving, or the one
    /// being built), but the key subspace.
    pub(crate) fn drop_subspace(&mut self) {
        let config = self.config().clone();
        let written: Vec<u16> = config.spaces[0]
            .schema
            .written_subspaces()
            .skip(1)
            .map(|id| id.0)
            .collect();
        if written.is_empty() {
            return;
        }
        let subspace = written[self.rng.random_range(0..written.len())];
        let next = next_configuration(&config, |c| {
            let epoch = c.epoch.0;
            c.spaces[0]
                .alter(epoch, &SpaceChange::DropSubspace { subspace }, |_| {
                    unreachable!("a drop assigns nothing")
                })
                .expect("a written subspace");
        });
        if self.tracing {
            eprintln!("t={} drop subspace {subspace}", self.now);
        }
        self.alterations[2] += 1;
        self.publish(next);
    }

    /// Backfill reports that arrived: the coordinator records each key region done (when its
    /// build is still the one under way); the last makes the subspace serve.
    fn complete_backfills(&mut self) {
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) = self
            .backfill_reports
            .drain(..)
            .partition(|(at, _, _)| *at <= now);
        self.backfill_reports = later;
        for (_, _, done) in due {
            // In the change, so that resting places in a subspace a re-cut drops go with it.
            let mut recorded = 0;
            let next = next_configuration(self.config(), |c| {
                recorded = c
                    .spaces
                    .iter_mut()
                    .map(|s| s.complete_backfills(&[done]))
                    .sum();
            });
            if recorded == 0 {
                continue;
            }
            let built = self.config().spaces[0].build.is_some() && next.spaces[0].build.is_none();
            if built {
                self.alterations[1] += 1;
            }
            if self.tracing {
                eprintln!("t={now} backfilled {done:?}; built: {built}");
            }
            next.check().expect("a valid configuration");
            self.publish(next);
        }
    }

    /// Servers a transfer may go to: running, awake, not failed.
    fn usable(&self) -> Vec<ServerId> {
        self.nodes
            .iter()
            .filter(|(id, n)| {
                n.replica.is_some() && n.paused.is_none() && !self.failed.contains(id)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Re-replication: every region below K replicas with no transfer, whose last member
    /// (the source) is usable, gets a transfer into a usable server outside its set.
    fn plan_transfers(&mut self) {
        let usable = self.usable();
        let config = self.config().clone();
        let mut starts = Vec::new();
        for (n, space) in config.spaces.iter().enumerate() {
            for sub in space.schema.subspace_ids() {
                for (r, set) in space.replicas[sub.get()].iter().enumerate() {
                    let region = RegionIndex(r as u32);
                    let source = *set.last().expect("never empty");
                    if set.len() >= self.k
                        || space.transfer_at(sub, region).is_some()
                        || Self::waits(space, sub, region)
                        || !usable.contains(&source)
                    {
                        continue;
                    }
                    let outside: Vec<ServerId> = usable
                        .iter()
                        .copied()
                        .filter(|s| !set.contains(s))
                        .collect();
                    if !outside.is_empty() {
                        let to = outside[self.rng.random_range(0..outside.len())];
                        starts.push((n, (sub, region), to, None));
                    }
                }
            }
        }
        self.start_transfers(starts);
    }

    /// A region moves: a transfer into a usable server outside its set that replaces one of
    /// its members (a join taking its share, or a decommission draining a server).
    pub(crate) fn maybe_move(&mut self) {
        let usable = self.usable();
        let config = self.config().clone();
        let space = &config.spaces[0];
        let written: Vec<SubspaceId> = space.schema.written_subspaces().collect();
        let sub = written[self.rng.random_range(0..written.len())];
        let region = RegionIndex(
            self.rng
                .random_range(0..space.replicas[sub.get()].len() as u32),
        );
        let set = space.replicas_of(sub, region);
        let outside: Vec<ServerId> = usable
            .iter()
            .copied()
            .filter(|s| !set.contains(s))
            .collect();
        if space.transfer_at(sub, region).is_some()
            || Self::waits(space, sub, region)
            || outside.is_empty()
            || !usable.contains(set.last().expect("never empty"))
        {
            return;
        }
        let to = outside[self.rng.random_range(0..outside.len())];
        let replaces = set[self.rng.random_range(0..set.len())];
        self.start_transfers(vec![(0, (sub, region), to, Some(replaces))]);
    }

    #[allow(clippy::type_complexity)]
    fn start_transfers(
        &mut self,
        starts: Vec<(usize, (SubspaceId, RegionIndex), ServerId, Option<ServerId>)>,
    ) {
        if starts.is_empty() {
            return;
        }
        // A few at a time, as the real coordinator limits them.
        let starts: Vec<_> = starts.into_iter().take(3).collect();
        self.transfers[0] += starts.len() as u64;
        if self.tracing {
            eprintln!("t={} transfers {starts:?}", self.now);
        }
        let next = next_configuration(self.config(), |c| {
            for (space, location, to, replaces) in starts {
                start_transfer(c, space, location, to, replaces);
            }
        });
        self.publish(next);
    }

    /// Reports that arrived: a transfer still under way into the reporting server completes
    /// (its target is a full replica; the member it replaces leaves).
    fn complete_transfers(&mut self) {
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) =
            self.reports.drain(..).partition(|(at, _, _)| *at <= now);
        self.reports = later;
        for (_, from, done) in due {
            let config = self.config().clone();
            let Some(n) = config.spaces.iter().position(|s| s.id == done.space) else {
                continue;
            };
            let location = (done.subspace, RegionIndex(done.region));
            let Some(t) = config.spaces[n]
                .transfer_at(location.0, location.1)
                .filter(|t| t.id == done.id && t.to == from)
                .copied()
            else {
                continue; // stale: that transfer ended another way
            };
            if self.failed.contains(&from) {
                // The target failed since it reported: completing would make a failed server a
                // full member (perhaps the only one, when the transfer replaces the other). The
                // coordinators complete a transfer only into a server whose lease is current;
                // its removal ends the transfer instead.
                continue;
            }
            self.transfers[1] += 1;
            if self.tracing {
                eprintln!("t={now} transfer complete {t:?}");
            }
            let next = next_configuration(&config, |c| c.spaces[n].complete_transfer(&t));
            self.publish(next);
        }
    }
}
