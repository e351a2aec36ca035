//! The performance model (seed 000 ch. 4, rebuilt for Tessera; the equations are in the crate
//! documentation). A configuration's prediction is built in two steps, so that the advisor can
//! score many configurations cheaply: how each subspace serves each class
//! (`Model::subspace_terms`, computed once per candidate subspace), then how a configuration
//! combines its subspaces (`Model::evaluate`: the subspace each search picks, the chain of
//! each write). [`Model::predict`] is those two steps with every term written out.

use tessera_geometry::Tessellation;
use tessera_types::{AttrIndex, PrimitiveType, SpaceSchema};

use crate::calibration::{Calibration, CalibrationError};
use crate::closed_loop::{closed_loop, ClosedLoop, Durability, MixDemands};
use crate::configuration::Configuration;
use crate::prediction::{ClassPrediction, ClassTerms, Prediction};
use crate::workload::{Operation, PredicateKind, Workload};

/// Storage entries outside its box that a search reads in one subspace of `dimensions`
/// dimensions, when its box fixes all but `open` of them (by equality) and crosses `regions`
/// regions holding `points_per_region` distinct points each: about points_per_region^(open/d)
/// per region, the partial-match cost of a Z-order walk (each such entry is followed by a
/// BIGMIN seek). 0 when the box is a point (it reads its matches only) or fixes nothing (it
/// reads whole regions, all in its box). Checked against the store in
/// `tessera-storage/tests/search_cost.rs`; `tessera calibrate` records its searches' entries
/// with this same estimate.
pub fn partial_match_entries(
    regions: f64,
    points_per_region: f64,
    open: usize,
    dimensions: usize,
) -> f64 {
    if open == 0 || open >= dimensions {
        return 0.0;
    }
    regions
        * points_per_region
            .max(1.0)
            .powf(open as f64 / dimensions as f64)
}

/// Predicts a workload's throughput on one space under any configuration of its subspaces.
#[derive(Debug)]
pub struct Model<'a> {
    schema: &'a SpaceSchema,
    workload: &'a Workload,
    calibration: Calibration,
    /// How the key subspace, present in every configuration, serves each class.
    key: SubspaceTerms,
    /// What the mix asks of the disk and the clients whatever the configuration: the share
    /// of writes, and the client's CPU per operation (`crate::closed_loop`).
    writes: f64,
    client_s: f64,
    /// What the mix of reads and writes costs the servers beyond its operations alone, as a
    /// factor of every configuration's cost (`Calibration::mix_scale`).
    mix_scale: f64,
}

/// Why a model cannot be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error(transparent)]
    Calibration(#[from] CalibrationError),
    /// The workload was checked against another space.
    #[error("the workload was checked against space {workload:?}, not against space {space:?}")]
    OtherSpace { workload: String, space: String },
}

/// How one subspace serves each class of the workload, by class index.
#[derive(Clone, Debug)]
pub(crate) struct SubspaceTerms {
    pub(crate) dimensions: usize,
    pub(crate) classes: Vec<ClassInSubspace>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum ClassInSubspace {
    /// A search, were it to use this subspace.
    Search {
        regions: f64,
        objects_read: f64,
        objects_matched: f64,
        entries_skipped: f64,
        cost_s: f64,
    },
    /// A write's passage through this subspace: the replica sets it visits (1, or 1 plus the
    /// probability that it relocates the object), what they cost in units of one replica set
    /// overwriting in place, and the probability of relocation.
    Write {
        replica_sets: f64,
        weight: f64,
        relocation: f64,
    },
    Get,
}

/// A configuration's score, and what the advisor needs to know to rank it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Totals {
    /// Σ p_i · cost_i: seconds of capacity per operation of the mix.
    pub(crate) cost_s: f64,
    /// Bit i set: some search uses the i-th subspace given.
    pub(crate) used: u64,
    /// Some search found two subspaces equally cheap by the code's rule (regions, then
    /// dimensions) but not equally costly, so the declaration order changes the score.
    pub(crate) order_sensitive: bool,
}

/// One class's outcome within a configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClassOutcome {
    pub(crate) cost_s: f64,
    /// For a search, the subspace it uses: 0 for the key subspace, i for the i-th given.
    pub(crate) chosen: usize,
    /// For a write, the servers of its chain (expected) and the subspaces it relocates in.
    pub(crate) chain_length: f64,
    pub(crate) relocations: f64,
}

impl<'a> Model<'a> {
    pub fn new(
        schema: &'a SpaceSchema,
        workload: &'a Workload,
        calibration: Calibration,
    ) -> Result<Model<'a>, ModelError> {
        calibration.check()?;
        if !workload.fits(schema) {
            return Err(ModelError::OtherSpace {
                workload: workload.space().to_owned(),
                space: schema.name.clone(),
            });
        }
        let mut model = Model {
            schema,
            workload,
            calibration,
            key: SubspaceTerms {
                dimensions: 1,
                classes: vec![],
            },
            writes: 0.0,
            client_s: 0.0,
            mix_scale: 1.0,
        };
        model.key = model.terms(&[AttrIndex::KEY], true);
        let (mut writes, mut returned) = (0.0, 0.0);
        for (class, terms) in workload.classes().iter().zip(&model.key.classes) {
            match terms {
                ClassInSubspace::Search {
                    objects_matched, ..
                } => returned += class.probability * objects_matched,
                ClassInSubspace::Write { .. } => writes += class.probability,
                ClassInSubspace::Get => returned += class.probability,
            }
        }
        let c = &model.calibration;
        (model.writes, model.client_s) = (writes, c.client_s + c.client_object_s * returned);
        let total: f64 = workload.classes().iter().map(|k| k.probability).sum();
        model.mix_scale = c.mix_scale(writes, total - writes);
        Ok(model)
    }

    pub fn schema(&self) -> &SpaceSchema {
        self.schema
    }

    pub fn workload(&self) -> &Workload {
        self.workload
    }

    pub fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    /// The predicted throughput of the workload under `configuration`, with every class's terms.
    pub fn predict(&self, configuration: &Configuration) -> Prediction {
        let terms: Vec<SubspaceTerms> = configuration
            .subspaces()
            .iter()
            .map(|dims| self.subspace_terms(dims))
            .collect();
        let refs: Vec<&SubspaceTerms> = terms.iter().collect();
        let mut classes = Vec::with_capacity(self.workload.classes().len());
        let totals = self.evaluate(&refs, |index, outcome| {
            let class = &self.workload.classes()[index];
            let terms = match (
                &class.operation,
                self.terms_of(&refs, index, outcome.chosen),
            ) {
                (
                    Operation::Search { .. },
                    ClassInSubspace::Search {
                        regions,
                        objects_read,
                        objects_matched,
                        entries_skipped,
                        ..
                    },
                ) => {
                    let dims: &[AttrIndex] = match outcome.chosen {
                        0 => &[AttrIndex::KEY],
                        i => &configuration.subspaces()[i - 1],
                    };
                    ClassTerms::Search {
                        subspace: dims
                            .iter()
                            .map(|&a| self.schema.attribute(a).name.clone())
                            .collect(),
                        subspace_index: outcome.chosen,
                        regions_contacted: regions,
                        objects_read,
                        objects_matched,
                        entries_skipped,
                    }
                }
                (Operation::Update { .. }, _) => ClassTerms::Update {
                    chain_length: outcome.chain_length,
                    subspaces_relocated: outcome.relocations,
                },
                (Operation::Put | Operation::Del, _) => ClassTerms::Put {
                    chain_length: outcome.chain_length,
                },
                _ => ClassTerms::Get,
            };
            classes.push(ClassPrediction {
                line: class.line,
                probability: class.probability,
                operation: self.describe(index),
                terms,
                cost_s: outcome.cost_s,
                throughput_ops_s: 1.0 / outcome.cost_s,
            });
        });
        let closed_loop = self.closed_loop(totals.cost_s);
        Prediction {
            subspaces: configuration.names(self.schema),
            throughput_ops_s: closed_loop.map_or(1.0 / totals.cost_s, |l| l.throughput_ops_s),
            capacity_ops_s: 1.0 / totals.cost_s,
            clients: self.workload.clients(),
            closed_loop,
            classes,
        }
    }

    /// Operations a second of a mix that costs `cost_s` seconds of the servers' capacity per
    /// operation: that capacity, 1 / cost, or, when the workload names its closed-loop clients,
    /// what they get of it ([`closed_loop`]: the fsyncs writes wait for, the clients' own CPU,
    /// the round trip). Either way it falls as the cost grows, so both rank configurations
    /// alike.
    pub fn throughput(&self, cost_s: f64) -> f64 {
        self.closed_loop(cost_s)
            .map_or(1.0 / cost_s, |l| l.throughput_ops_s)
    }

    /// The closed loop of the workload's clients on a mix costing `cost_s` per operation, if
    /// the workload names them.
    fn closed_loop(&self, cost_s: f64) -> Option<ClosedLoop> {
        let clients = self.workload.clients()?;
        let c = &self.calibration;
        let demands = MixDemands {
            server_s: cost_s,
            writes: self.writes,
            client_s: self.client_s,
            round_trip_s: c.round_trip_s,
        };
        let durability = Durability {
            fsync_s: c.fsync_s,
            fsync_cpu_s: c.fsync_cpu_s,
        };
        Some(closed_loop(
            clients,
            c.server_cores,
            &demands,
            Some(durability),
        ))
    }

    /// How the key subspace serves each class.
    pub(crate) fn key_terms(&self) -> &SubspaceTerms {
        &self.key
    }

    fn terms_of(
        &self,
        subspaces: &[&SubspaceTerms],
        class: usize,
        chosen: usize,
    ) -> ClassInSubspace {
        match chosen {
            0 => self.key.classes[class],
            i => subspaces[i - 1].classes[class],
        }
    }

    /// How a subspace with these dimensions (in declaration order) serves each class.
    pub(crate) fn subspace_terms(&self, dimensions: &[AttrIndex]) -> SubspaceTerms {
        self.terms(dimensions, false)
    }

    fn terms(&self, dimensions: &[AttrIndex], is_key: bool) -> SubspaceTerms {
        let tessellation = Tessellation::new(dimensions.len(), self.schema.partitions);
        let slices: Vec<f64> = (0..dimensions.len())
            .map(|i| tessellation.intervals(i) as f64)
            .collect();
        let classes = self
            .workload
            .classes()
            .iter()
            .map(|class| match &class.operation {
                Operation::Search {
                    predicates,
                    matches,
                } => self.search_in(dimensions, &slices, is_key, predicates, *matches),
                Operation::Update { attributes } => {
                    self.update_in(dimensions, &slices, is_key, attributes)
                }
                Operation::Put | Operation::Del => ClassInSubspace::Write {
                    replica_sets: 1.0,
                    weight: 1.0,
                    relocation: 0.0,
                },
                Operation::Get => ClassInSubspace::Get,
            })
            .collect();
        SubspaceTerms {
            dimensions: dimensions.len(),
            classes,
        }
    }

    /// Whether `attr`'s coordinates keep the order of its values in this subspace: int and
    /// float attributes do, except on the key axis, which is always hashed.
    fn ordered(&self, attr: AttrIndex, is_key: bool) -> bool {
        !is_key
            && matches!(
                self.schema.attribute(attr).ty.as_primitive(),
                Some(PrimitiveType::Int | PrimitiveType::Float)
            )
    }

    /// Fraction of its axis the attribute's coordinates occupy: hashed axes are covered evenly.
    fn axis_spread(&self, attr: AttrIndex, is_key: bool) -> f64 {
        if self.ordered(attr, is_key) {
            self.workload.spread(attr)
        } else {
            1.0
        }
    }

    /// A search using this subspace: the slices it crosses along each dimension (1 where an
    /// equality fixes it; about 1 + s·f·n of the n slices where a range of selectivity s on an
    /// ordered axis whose values fill a fraction f of it bounds it; all n otherwise), their
    /// product the regions; the objects inside the box and those matching every predicate;
    /// and the entries outside the box the walk reads when the box fixes some dimensions and
    /// leaves others open ([`partial_match_entries`]).
    fn search_in(
        &self,
        dimensions: &[AttrIndex],
        slices: &[f64],
        is_key: bool,
        predicates: &[(AttrIndex, PredicateKind)],
        matches: Option<f64>,
    ) -> ClassInSubspace {
        let kind = |attr: AttrIndex| predicates.iter().find(|(a, _)| *a == attr).map(|(_, k)| *k);
        let selectivity = |attr: AttrIndex, kind: PredicateKind| match kind {
            PredicateKind::Eq => self.workload.equality_selectivity(attr),
            PredicateKind::Range => self.workload.range_selectivity(attr),
        };
        let mut regions = 1.0;
        let mut in_box = 1.0;
        // For the walk's cost: the regions that hold objects (an ordered axis whose values
        // fill a fraction f of it has objects in about f·n of its n slices), those of them the
        // box crosses, the distinct points the subspace can hold, and the dimensions left open.
        let (mut occupied, mut occupied_crossed, mut points, mut open) = (1.0, 1.0, 1.0, 0);
        for (&attr, &n) in dimensions.iter().zip(slices) {
            let filled = (self.axis_spread(attr, is_key) * n).clamp(1.0, n);
            occupied *= filled;
            points *= 1.0 / self.workload.equality_selectivity(attr);
            match kind(attr) {
                Some(PredicateKind::Eq) => in_box *= selectivity(attr, PredicateKind::Eq),
                Some(PredicateKind::Range) if self.ordered(attr, is_key) => {
                    let s = selectivity(attr, PredicateKind::Range);
                    // A range covering a fraction x of an axis cut into n equal slices, placed
                    // uniformly, crosses 1 + x·n of them on average (exactly, when x·n is whole).
                    let crossed = n.min(1.0 + s * self.axis_spread(attr, is_key) * n);
                    regions *= crossed;
                    occupied_crossed *= crossed.min(filled);
                    in_box *= s;
                    open += 1;
                }
                _ => {
                    regions *= n;
                    occupied_crossed *= filled;
                    open += 1;
                }
            }
        }
        let objects = self.workload.objects() as f64;
        let matching: f64 = predicates.iter().map(|&(a, k)| selectivity(a, k)).product();
        // `matches` (measured, as the trace gives it) replaces the estimate of the matches.
        // The box holds every match, so it reads at least that many, and at most every
        // object. Scaling the box's estimate by measured / estimated matches instead (as this
        // did) is wrong for correlated attributes: a search fixing a hotel's city, address,
        // postcode and tel matches one hotel, not O / Π distinct ≈ 10^-12 of one, and the
        // scale then made a one-attribute box read millions of objects.
        let objects_matched = matches.unwrap_or(objects * matching);
        let objects_read = (objects * in_box).max(objects_matched).min(objects);
        let entries_skipped = if is_key {
            0.0 // no Z-order: a region of the key subspace is read whole (in objects_read)
        } else {
            // Never more than the crossed regions hold besides what the box holds.
            let held = objects * occupied_crossed / occupied;
            partial_match_entries(
                occupied_crossed,
                objects.min(points) / occupied,
                open,
                dimensions.len(),
            )
            .min((held - objects_read).max(0.0))
        };
        let c = &self.calibration;
        let cost_s = c.search_base_s
            + c.search_region_s * regions
            + c.search_object_s * objects_read
            + c.search_skip_s * entries_skipped;
        ClassInSubspace::Search {
            regions,
            objects_read,
            objects_matched,
            entries_skipped,
            cost_s,
        }
    }

    /// An update through this subspace. If it assigns none of the dimensions, the object stays
    /// in its region: one replica set overwrites it. Otherwise the new values land in another
    /// slice of an assigned dimension with probability 1 − 1/(f·n) (hashed, or spread over f of
    /// an ordered axis; never, when f·n ≤ 1), and the object moves if it does so along any of
    /// them: the old region's replica set and the new one's are both in the chain, and cost α
    /// each.
    fn update_in(
        &self,
        dimensions: &[AttrIndex],
        slices: &[f64],
        is_key: bool,
        assigned: &[AttrIndex],
    ) -> ClassInSubspace {
        let stays: f64 = dimensions
            .iter()
            .zip(slices)
            .filter(|(attr, _)| assigned.contains(attr))
            .map(|(&attr, &n)| 1.0 / (self.axis_spread(attr, is_key) * n).max(1.0))
            .product();
        let relocation = 1.0 - stays;
        let alpha = self.calibration.relocation_factor;
        ClassInSubspace::Write {
            replica_sets: 1.0 + relocation,
            weight: (1.0 - relocation) + relocation * 2.0 * alpha,
            relocation,
        }
    }

    /// Combines the key subspace and `subspaces` (in declaration order) into the workload's
    /// cost: each search uses the subspace Tessera's client picks (fewest regions, then fewest
    /// dimensions, then first declared: `tessera_geometry::plan_search`), each write
    /// visits every subspace. `each` sees every class's outcome, in the workload's order.
    pub(crate) fn evaluate(
        &self,
        subspaces: &[&SubspaceTerms],
        mut each: impl FnMut(usize, ClassOutcome),
    ) -> Totals {
        let c = &self.calibration;
        let replicas = self.schema.replicas() as f64;
        let mut totals = Totals {
            cost_s: 0.0,
            used: 0,
            order_sensitive: false,
        };
        for (index, class) in self.workload.classes().iter().enumerate() {
            let outcome = match self.key.classes[index] {
                ClassInSubspace::Search {
                    regions, cost_s, ..
                } => {
                    let (mut best, mut best_regions, mut best_dims, mut best_cost) =
                        (0, regions, 1, cost_s);
                    for (i, s) in subspaces.iter().enumerate() {
                        let ClassInSubspace::Search {
                            regions, cost_s, ..
                        } = s.classes[index]
                        else {
                            unreachable!("every subspace sees the same classes")
                        };
                        if regions < best_regions
                            || (regions == best_regions && s.dimensions < best_dims)
                        {
                            (best, best_regions, best_dims, best_cost) =
                                (i + 1, regions, s.dimensions, cost_s);
                        }
                    }
                    if best > 0 {
                        totals.used |= 1 << (best - 1);
                        totals.order_sensitive |= subspaces.iter().enumerate().any(|(i, s)| {
                            let ClassInSubspace::Search {
                                regions, cost_s, ..
                            } = s.classes[index]
                            else {
                                unreachable!()
                            };
                            i + 1 != best
                                && regions == best_regions
                                && s.dimensions == best_dims
                                && cost_s != best_cost
                        });
                    }
                    ClassOutcome {
                        cost_s: best_cost,
                        chosen: best,
                        chain_length: 0.0,
                        relocations: 0.0,
                    }
                }
                ClassInSubspace::Write { .. } => {
                    let (mut sets, mut weight, mut relocations) = (0.0, 0.0, 0.0);
                    for s in std::iter::once(&self.key).chain(subspaces.iter().copied()) {
                        let ClassInSubspace::Write {
                            replica_sets,
                            weight: w,
                            relocation,
                        } = s.classes[index]
                        else {
                            unreachable!("every subspace sees the same classes")
                        };
                        sets += replica_sets;
                        weight += w;
                        relocations += relocation;
                    }
                    ClassOutcome {
                        cost_s: c.write_base_s + c.write_hop_s * replicas * weight,
                        chosen: 0,
                        chain_length: replicas * sets,
                        relocations,
                    }
                }
                ClassInSubspace::Get => ClassOutcome {
                    cost_s: c.get_s,
                    chosen: 0,
                    chain_length: 0.0,
                    relocations: 0.0,
                },
            };
            totals.cost_s += class.probability * outcome.cost_s;
            each(index, outcome);
        }
        totals.cost_s *= self.mix_scale;
        totals
    }

    /// A class's operation in words: `search city=eq price=range`, `update price`, `put`, `get`.
    fn describe(&self, index: usize) -> String {
        let name = |a: &AttrIndex| self.schema.attribute(*a).name.as_str();
        match &self.workload.classes()[index].operation {
            Operation::Search { predicates, .. } if predicates.is_empty() => {
                "search everything".to_owned()
            }
            Operation::Search { predicates, .. } => {
                let terms: Vec<String> = predicates
                    .iter()
                    .map(|(a, k)| {
                        format!(
                            "{}={}",
                            name(a),
                            if *k == PredicateKind::Eq {
                                "eq"
                            } else {
                                "range"
                            }
                        )
                    })
                    .collect();
                format!("search {}", terms.join(" "))
            }
            Operation::Update { attributes } => {
                format!(
                    "update {}",
                    attributes.iter().map(name).collect::<Vec<_>>().join(", ")
                )
            }
            Operation::Put => "put".to_owned(),
            Operation::Del => "del".to_owned(),
            Operation::Get => "get".to_owned(),
        }
    }
}
