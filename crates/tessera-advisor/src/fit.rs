//! Calibration from measurements (seed 000 §4.5 and §5.2.1): micro-workloads measured on the
//! running cluster (`tessera calibrate` runs them) go in, constants come out. Pure: no
//! measuring here.
//!
//! A measurement's cost is what the servers spent on one operation: their CPU seconds over the
//! run divided by the operations (`server_s`), not 1 / throughput, which a closed loop of
//! clients waiting on fsyncs and on themselves holds below the servers' capacity.
//!
//! Every fit minimises relative errors, as the model is judged by them.
//!
//! * Searches: least squares of the measured cost on c0 + a·regions + b·objects +
//!   s·skipped, with c0, a, b, s ≥ 0 (a negative constant would predict a negative cost for
//!   some search).
//! * Writes: the fixed cost, the hop cost and an fsync's CPU by least squares of the cost on
//!   base + hop·K(1 + N) + fsync_cpu·(fsyncs per write) over the writes that move nothing, all
//!   ≥ 0 (with one chain length only, the fixed cost is kept; with one fsyncs-per-write ratio,
//!   the fsync's CPU), then α by least squares of the rest of the cost on 2·hop·K·M over the
//!   writes that move the object; with one such write it is eq. 4.8 ([`relocation_factor`]).
//! * Gets: the mean cost.
//! * The client and the network ([`fit_client`], the round trip) and the disk ([`fit_fsync`]),
//!   for the closed loop's prediction (`crate::closed_loop`); the cores the servers were seen
//!   busy on.
//! * The interference of reads and writes mixed ([`fit_interference`]): what runs of both
//!   kinds cost beyond their operations at the constants fitted above, relative to them.
//! * Mixes ([`fit_mixes`]): the same linear constants fitted on runs of whole mixes (the
//!   evaluation's step-by-step scenarios), the interference divided out.

use serde::{Deserialize, Serialize};

use crate::calibration::{Calibration, CalibrationError};
use crate::prediction::ClassTerms;

/// A measured search micro-workload: every search of it contacted `regions` regions, read
/// `objects` objects (its box's) and about `skipped` entries outside its box (the model's
/// estimate, [`crate::partial_match_entries`]), and each cost the servers `server_s` seconds
/// of CPU.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchMeasurement {
    pub regions: f64,
    pub objects: f64,
    /// 0 in measurements saved before the term existed.
    #[serde(default)]
    pub skipped: f64,
    pub server_s: f64,
}

/// A measured update micro-workload: replica sets of `replicas` servers, `subspaces_unmoved`
/// subspaces in which every update left the object in its region and `subspaces_moved` in
/// which every update moved it (the `subspaces` workload of tessera-bench moves it in all).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteMeasurement {
    pub replicas: u32,
    pub subspaces_unmoved: u32,
    pub subspaces_moved: u32,
    pub server_s: f64,
    /// fsyncs per write over the run (a write fsynced alone: 1; in groups of 16: 1/16); 0
    /// where not measured (the fsync's CPU is then left out of the fit).
    #[serde(default)]
    pub fsyncs_per_write: f64,
}

/// fsyncs a write micro-workload made, and the seconds they took in all.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FsyncMeasurement {
    pub fsyncs: f64,
    pub seconds: f64,
}

/// What any micro-workload tells besides its own cost: the client's CPU per operation for the
/// objects each returned, and the cores the servers kept busy.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMeasurement {
    pub returned: f64,
    pub client_s: f64,
    /// Server CPU seconds per second of the run.
    pub server_busy: f64,
}

/// Everything measured; any part may be empty, and its constants are then kept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// Server CPU seconds per get.
    pub gets: Vec<f64>,
    pub writes: Vec<WriteMeasurement>,
    pub searches: Vec<SearchMeasurement>,
    #[serde(default)]
    pub fsyncs: Vec<FsyncMeasurement>,
    /// One client's mean latency less the CPU both sides spent per request.
    #[serde(default)]
    pub round_trips_s: Vec<f64>,
    #[serde(default)]
    pub runs: Vec<RunMeasurement>,
    /// Runs of reads and writes mixed, for their interference ([`fit_interference`]).
    #[serde(default)]
    pub mixes: Vec<MixMeasurement>,
}

/// The search constants fitted.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchFit {
    pub base_s: f64,
    pub region_s: f64,
    pub object_s: f64,
    pub skip_s: f64,
}

/// The write constants fitted from the writes that move nothing.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteFit {
    pub base_s: f64,
    pub hop_s: f64,
    pub fsync_cpu_s: f64,
}

/// Why measurements give no constants.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FitError {
    /// A throughput that is not a positive finite number, or a negative count.
    #[error("{what} measurement {index}: {reason}")]
    BadMeasurement {
        what: &'static str,
        index: usize,
        reason: String,
    },
    /// No measurement of the kind a constant needs.
    #[error("no {0} measurement to fit")]
    NoMeasurements(&'static str),
    /// The search measurements cannot tell regions from objects from the fixed cost (and no
    /// positive fit exists), e.g. every search contacted the same regions and read nothing.
    #[error("the search measurements do not determine a positive search cost")]
    Degenerate,
    /// The writes that move nothing give no positive cost per chain server (longer chains ran
    /// as fast as shorter ones, or faster).
    #[error("the writes give a cost per chain server of {0} s: it must be positive")]
    WriteHopNotPositive(f64),
    /// Writes that move the object ran faster than the chains without moving predict (α would
    /// be 0 or less): the measurements disagree with each other.
    #[error("relocation factor {0} from the measurements is not positive")]
    RelocationFactorNotPositive(f64),
    /// The fitted constants are not a usable calibration.
    #[error(transparent)]
    Calibration(#[from] CalibrationError),
}

/// Replaces the constants of `start` that `measurements` determine.
pub fn fit(measurements: &Measurements, start: Calibration) -> Result<Calibration, FitError> {
    let mut c = start;
    if !measurements.gets.is_empty() {
        c.get_s = fit_get(&measurements.gets)?;
    }
    if !measurements.searches.is_empty() {
        let s = fit_search(&measurements.searches)?;
        (
            c.search_base_s,
            c.search_region_s,
            c.search_object_s,
            c.search_skip_s,
        ) = (s.base_s, s.region_s, s.object_s, s.skip_s);
    }
    if measurements.writes.iter().any(|w| w.subspaces_moved == 0) {
        let start = WriteFit {
            base_s: c.write_base_s,
            hop_s: c.write_hop_s,
            fsync_cpu_s: c.fsync_cpu_s,
        };
        let w = fit_write(&measurements.writes, start)?;
        (c.write_base_s, c.write_hop_s, c.fsync_cpu_s) = (w.base_s, w.hop_s, w.fsync_cpu_s);
    }
    if measurements.writes.iter().any(|w| w.subspaces_moved > 0) {
        let fitted = WriteFit {
            base_s: c.write_base_s,
            hop_s: c.write_hop_s,
            fsync_cpu_s: c.fsync_cpu_s,
        };
        c.relocation_factor = fit_relocation_factor(fitted, &measurements.writes)?;
    }
    if let Some(fsync_s) = fit_fsync(&measurements.fsyncs) {
        c.fsync_s = fsync_s;
    }
    if !measurements.round_trips_s.is_empty() {
        let n = measurements.round_trips_s.len() as f64;
        c.round_trip_s = (measurements.round_trips_s.iter().sum::<f64>() / n).max(0.0);
    }
    if let Some((client_s, client_object_s)) = fit_client(&measurements.runs) {
        (c.client_s, c.client_object_s) = (client_s, client_object_s);
    }
    if let Some(busiest) = measurements
        .runs
        .iter()
        .map(|r| r.server_busy)
        .reduce(f64::max)
    {
        // Pinned to one core, a saturated server shows about 0.95 of it.
        c.server_cores = busiest.max(1.0);
    }
    if let Some(mu) = fit_interference(&measurements.mixes, &c)? {
        c.mix_interference = mu;
    }
    c.check()?;
    Ok(c)
}

/// The mean fsync: all their seconds over all of them; `None` without any.
pub fn fit_fsync(samples: &[FsyncMeasurement]) -> Option<f64> {
    let fsyncs: f64 = samples.iter().map(|f| f.fsyncs).sum();
    let seconds: f64 = samples.iter().map(|f| f.seconds).sum();
    (fsyncs > 0.0 && seconds.is_finite() && seconds >= 0.0).then(|| seconds / fsyncs)
}

/// The client's CPU per request and per object returned: k0, k1 ≥ 0 minimising the relative
/// errors of k0 + k1·returned; `None` without a usable run.
pub fn fit_client(runs: &[RunMeasurement]) -> Option<(f64, f64)> {
    let rows: Vec<([f64; 2], f64)> = runs
        .iter()
        .filter(|r| r.client_s.is_finite() && r.client_s > 0.0 && r.returned >= 0.0)
        .map(|r| ([1.0, r.returned], r.client_s))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let [k0, k1] = non_negative_least_squares(&relative(&rows))?;
    Some((k0, k1))
}

/// The cost of a get: the mean of the measured costs.
pub fn fit_get(costs_s: &[f64]) -> Result<f64, FitError> {
    if costs_s.is_empty() {
        return Err(FitError::NoMeasurements("get"));
    }
    let mut sum = 0.0;
    for (index, &c) in costs_s.iter().enumerate() {
        sum += cost_of("get", index, c)?;
    }
    Ok(sum / costs_s.len() as f64)
}

/// c0, a, b and s ≥ 0 minimising Σ (c0 + a·regions + b·objects + s·skipped − cost)².
pub fn fit_search(samples: &[SearchMeasurement]) -> Result<SearchFit, FitError> {
    if samples.is_empty() {
        return Err(FitError::NoMeasurements("search"));
    }
    let mut rows = Vec::with_capacity(samples.len());
    for (index, s) in samples.iter().enumerate() {
        let cost = cost_of("search", index, s.server_s)?;
        if !(s.regions.is_finite()
            && s.regions >= 1.0
            && s.objects.is_finite()
            && s.objects >= 0.0
            && s.skipped.is_finite()
            && s.skipped >= 0.0)
        {
            return Err(FitError::BadMeasurement {
                what: "search",
                index,
                reason: format!(
                    "regions {} must be at least 1, objects {} and skipped {} at least 0",
                    s.regions, s.objects, s.skipped
                ),
            });
        }
        rows.push(([1.0, s.regions, s.objects, s.skipped], cost));
    }
    let [base_s, region_s, object_s, skip_s] =
        non_negative_least_squares(&relative(&rows)).ok_or(FitError::Degenerate)?;
    if base_s + region_s <= 0.0 {
        return Err(FitError::Degenerate);
    }
    Ok(SearchFit {
        base_s,
        region_s,
        object_s,
        skip_s,
    })
}

/// The fixed cost of a write, the cost of one server of a chain and an fsync's CPU, from the
/// writes that move nothing: base, hop, fsync_cpu ≥ 0 minimising
/// Σ (base + hop·K(1 + N) + fsync_cpu·f − cost)², f the write's fsyncs per write. What the
/// writes cannot tell apart is kept from `start`: the fixed cost when they have one chain
/// length only (hop is then the least squares slope through it), the fsync's CPU when they
/// have one ratio of fsyncs per write (its share is subtracted first).
pub fn fit_write(samples: &[WriteMeasurement], start: WriteFit) -> Result<WriteFit, FitError> {
    let mut rows = Vec::new();
    for (index, w) in samples.iter().enumerate() {
        let cost = write_cost(index, w)?;
        if w.subspaces_moved == 0 {
            let length = chain_length(w.replicas, w.subspaces_unmoved, 0) as f64;
            rows.push(([1.0, length, w.fsyncs_per_write], cost));
        }
    }
    let Some(&([_, first_length, first_ratio], _)) = rows.first() else {
        return Err(FitError::NoMeasurements("write that moves nothing"));
    };
    let lengths_vary = rows.iter().any(|([_, l, _], _)| *l != first_length);
    let ratios_vary = rows.iter().any(|([_, _, f], _)| *f != first_ratio);
    let fit = if lengths_vary && ratios_vary {
        let [base_s, hop_s, fsync_cpu_s] =
            non_negative_least_squares(&relative(&rows)).ok_or(FitError::Degenerate)?;
        WriteFit {
            base_s,
            hop_s,
            fsync_cpu_s,
        }
    } else {
        let fsync_cpu_s = start.fsync_cpu_s;
        let rest: Vec<([f64; 2], f64)> = rows
            .iter()
            .map(|([one, l, f], cost)| ([*one, *l], cost - fsync_cpu_s * f))
            .collect();
        if lengths_vary {
            let [base_s, hop_s] =
                non_negative_least_squares(&relative(&rest)).ok_or(FitError::Degenerate)?;
            WriteFit {
                base_s,
                hop_s,
                fsync_cpu_s,
            }
        } else {
            let (xy, xx) = rest.iter().fold((0.0, 0.0), |(xy, xx), ([_, x], y)| {
                (xy + x * (y - start.base_s), xx + x * x)
            });
            WriteFit {
                base_s: start.base_s,
                hop_s: xy / xx,
                fsync_cpu_s,
            }
        }
    };
    if fit.hop_s.is_finite() && fit.hop_s > 0.0 {
        Ok(fit)
    } else {
        Err(FitError::WriteHopNotPositive(fit.hop_s))
    }
}

/// α from the writes that move the object, given the fixed and hop costs (and the fsync's
/// share, subtracted first): least squares of cost − base − hop·K(1 + N) on 2·hop·K·M. With one such write, this is [`relocation_factor`].
pub fn fit_relocation_factor(
    fitted: WriteFit,
    samples: &[WriteMeasurement],
) -> Result<f64, FitError> {
    let (write_base_s, write_hop_s) = (fitted.base_s, fitted.hop_s);
    let (mut xy, mut xx) = (0.0, 0.0);
    for (index, w) in samples.iter().enumerate() {
        let cost = write_cost(index, w)?;
        if w.subspaces_moved > 0 {
            let (k, n, m) = (
                w.replicas as f64,
                w.subspaces_unmoved as f64,
                w.subspaces_moved as f64,
            );
            let rest = cost
                - fitted.fsync_cpu_s * w.fsyncs_per_write
                - write_base_s
                - write_hop_s * k * (1.0 + n);
            let per_alpha = 2.0 * write_hop_s * k * m;
            xy += per_alpha * rest;
            xx += per_alpha * per_alpha;
        }
    }
    if xx == 0.0 {
        return Err(FitError::NoMeasurements("write that moves the object"));
    }
    let alpha = xy / xx;
    if alpha.is_finite() && alpha > 0.0 {
        Ok(alpha)
    } else {
        Err(FitError::RelocationFactorNotPositive(alpha))
    }
}

/// Seed 000 eq. 4.8, rebuilt for Tessera: α from one measured write, the fixed cost and
/// Tmax = 1/hop, solving cost = 1/T = base + (K(1 + |N|) + 2αK|M|) / Tmax for α:
///
/// α = (Tmax·(cost − base) − K(1 + |N|)) / (2K|M|)
///
/// The seed's eq. 4.8, α = (Tmax − T − |N|KT) / (2|M|KT), solves its eq. 4.5 with the key
/// subspace's K left out of the chain and its read before the modify kept; Tessera does no
/// such read (the point leader applies the update to the object it holds) and every chain
/// starts at the key subspace; nor has it a fixed cost (base = 0 gives it back). `None` when
/// the write moves nothing (α does not enter it).
pub fn relocation_factor(write_base_s: f64, write_hop_s: f64, w: &WriteMeasurement) -> Option<f64> {
    if w.subspaces_moved == 0 {
        return None;
    }
    let (k, n, m) = (
        w.replicas as f64,
        w.subspaces_unmoved as f64,
        w.subspaces_moved as f64,
    );
    let t_max = 1.0 / write_hop_s;
    Some((t_max * (w.server_s - write_base_s) - k * (1.0 + n)) / (2.0 * k * m))
}

/// The servers of an update's chain when it leaves the object in place in `unmoved` subspaces
/// and moves it in `moved` (docs/design.md §8): K(1 + |N| + 2|M|).
pub fn chain_length(replicas: u32, unmoved: u32, moved: u32) -> u32 {
    replicas * (1 + unmoved + 2 * moved)
}

fn cost_of(what: &'static str, index: usize, cost_s: f64) -> Result<f64, FitError> {
    if cost_s.is_finite() && cost_s > 0.0 {
        Ok(cost_s)
    } else {
        Err(FitError::BadMeasurement {
            what,
            index,
            reason: format!("cost {cost_s} s is not a positive number"),
        })
    }
}

fn write_cost(index: usize, w: &WriteMeasurement) -> Result<f64, FitError> {
    if w.replicas == 0 {
        return Err(FitError::BadMeasurement {
            what: "write",
            index,
            reason: "replicas is 0".into(),
        });
    }
    cost_of("write", index, w.server_s)
}

/// A measured run of a mix: the servers' CPU per operation, the share of each class with the
/// model's terms for it under the configuration the run had (`Prediction::classes`), and the
/// fsyncs per write the run made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MixMeasurement {
    pub classes: Vec<(f64, ClassTerms)>,
    pub fsyncs_per_write: f64,
    pub server_s: f64,
}

/// The constants that are linear in a mix's cost, in the order of a row of [`fit_mixes`].
const MIX_CONSTANTS: [fn(&mut Calibration) -> &mut f64; 8] = [
    |c| &mut c.search_base_s,
    |c| &mut c.search_region_s,
    |c| &mut c.search_object_s,
    |c| &mut c.search_skip_s,
    |c| &mut c.write_base_s,
    |c| &mut c.write_hop_s,
    |c| &mut c.fsync_cpu_s,
    |c| &mut c.get_s,
];

/// Index of the fsync's CPU in [`MIX_CONSTANTS`].
const FSYNC_CPU: usize = 6;

impl MixMeasurement {
    /// What the mix's operations ask per operation of each of [`MIX_CONSTANTS`] (α given):
    /// its cost alone is this row times those constants.
    fn row(&self, alpha: f64) -> [f64; 8] {
        let mut row = [0.0; 8];
        for (p, terms) in &self.classes {
            let features: [f64; 8] = match terms {
                ClassTerms::Search {
                    regions_contacted,
                    objects_read,
                    entries_skipped,
                    ..
                } => [
                    1.0,
                    *regions_contacted,
                    *objects_read,
                    *entries_skipped,
                    0.0,
                    0.0,
                    0.0,
                    0.0,
                ],
                ClassTerms::Update {
                    chain_length,
                    subspaces_relocated,
                } => {
                    // K(1 + Σ w_i) with w_i = (1 − P) + 2αP: the chain with α for each move.
                    let weight = chain_length + subspaces_relocated * (2.0 * alpha - 2.0);
                    [0.0, 0.0, 0.0, 0.0, 1.0, weight, self.fsyncs_per_write, 0.0]
                }
                ClassTerms::Put { chain_length } => [
                    0.0,
                    0.0,
                    0.0,
                    0.0,
                    1.0,
                    *chain_length,
                    self.fsyncs_per_write,
                    0.0,
                ],
                ClassTerms::Get => [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            };
            for (r, f) in row.iter_mut().zip(features) {
                *r += p * f;
            }
        }
        row
    }

    /// The shares of writes and of reads in the mix.
    fn shares(&self) -> (f64, f64) {
        let writes: f64 = self
            .classes
            .iter()
            .filter(|(_, t)| matches!(t, ClassTerms::Update { .. } | ClassTerms::Put { .. }))
            .map(|(p, _)| p)
            .sum();
        let all: f64 = self.classes.iter().map(|(p, _)| p).sum();
        (writes, all - writes)
    }
}

/// The constants of [`MIX_CONSTANTS`] in `c`.
fn mix_constants(c: &Calibration) -> [f64; 8] {
    let mut c = *c;
    MIX_CONSTANTS.map(|constant| *constant(&mut c))
}

/// μ, the interference of reads and writes mixed (`Calibration::mix_scale`): what each mix
/// of both kinds cost beyond its operations alone at `c`'s constants (its fsyncs' CPU taken
/// off first), relative to them, and averaged; never below 0. `None` without such a mix.
pub fn fit_interference(
    mixes: &[MixMeasurement],
    c: &Calibration,
) -> Result<Option<f64>, FitError> {
    let constants = mix_constants(c);
    let unit = Calibration {
        mix_interference: 1.0,
        ..*c
    };
    let mut excess = Vec::new();
    for (index, m) in mixes.iter().enumerate() {
        let cost = cost_of("mix", index, m.server_s)?;
        let (writes, reads) = m.shares();
        // How much of the whole interference this mix pays (1 from 5 % of each kind).
        let part = unit.mix_scale(writes, reads) - 1.0;
        if part <= 0.0 {
            continue; // one kind alone: no interference to see
        }
        let row = m.row(c.relocation_factor);
        let fsyncs = row[FSYNC_CPU] * constants[FSYNC_CPU];
        let alone = row.iter().zip(constants).map(|(r, x)| r * x).sum::<f64>() - fsyncs;
        if alone > 0.0 {
            excess.push(((cost - fsyncs) / alone - 1.0) / part);
        }
    }
    if excess.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        (excess.iter().sum::<f64>() / excess.len() as f64).max(0.0),
    ))
}

/// Seed 000 §4.5's calibration on mixes: the constants whose Σ_i p_i · cost_i best predicts
/// each run's measured CPU per operation, in relative terms, all ≥ 0. α, an fsync's CPU and
/// the interference μ are kept from `start` (the fsync's share subtracted first, the
/// interference divided out): mixes of many clients group their writes about alike, so they
/// cannot tell an fsync's CPU from a write's, which `tessera calibrate`'s writes by one client
/// alone do. A constant no run depends on (no get among the classes, say) is kept from
/// `start` too. Single-operation micro-workloads are mixes of one class.
pub fn fit_mixes(mixes: &[MixMeasurement], start: Calibration) -> Result<Calibration, FitError> {
    if mixes.is_empty() {
        return Err(FitError::NoMeasurements("mix"));
    }
    let mut rows = Vec::with_capacity(mixes.len());
    for (index, m) in mixes.iter().enumerate() {
        let cost = cost_of("mix", index, m.server_s)?;
        let mut row = m.row(start.relocation_factor);
        // The fsync's share is known: take it off, and fit the rest.
        let rest = cost - row[FSYNC_CPU] * start.fsync_cpu_s;
        row[FSYNC_CPU] = 0.0;
        if rest <= 0.0 {
            return Err(FitError::BadMeasurement {
                what: "mix",
                index,
                reason: format!("its fsyncs alone cost more than the {cost} s measured"),
            });
        }
        let (writes, reads) = m.shares();
        rows.push((row, rest / start.mix_scale(writes, reads)));
    }
    let fitted = non_negative_least_squares(&relative(&rows)).ok_or(FitError::Degenerate)?;
    let mut c = start;
    for (k, constant) in MIX_CONSTANTS.iter().enumerate() {
        // A constant nothing measured depends on stays as it was.
        if rows.iter().any(|(row, _)| row[k] != 0.0) {
            *constant(&mut c) = fitted[k];
        }
    }
    c.check()?;
    Ok(c)
}

/// The rows scaled so that least squares minimises the relative errors, Σ ((row·x − y) / y)²:
/// a point search of 10 µs weighs as much as a scan of 2 ms, as the model's error counts them
/// (in absolute terms the scans decide the fit alone, and the cheap operations most workloads
/// are made of come out several times off). `y` is positive (checked by `cost_of`).
fn relative<const N: usize>(rows: &[([f64; N], f64)]) -> Vec<([f64; N], f64)> {
    rows.iter()
        .map(|(row, y)| (row.map(|v| v / y), 1.0))
        .collect()
}

/// The x ≥ 0 minimising Σ (row·x − y)², exactly: the optimum is the unconstrained least squares
/// solution on the set of its non-zero variables, so trying every set (2^N − 1: 15 for 4
/// variables) and keeping the best non-negative solution finds it. `None` when no set gives one.
fn non_negative_least_squares<const N: usize>(rows: &[([f64; N], f64)]) -> Option<[f64; N]> {
    let residual = |x: &[f64; N]| -> f64 {
        rows.iter()
            .map(|(r, y)| (r.iter().zip(x).map(|(a, b)| a * b).sum::<f64>() - y).powi(2))
            .sum()
    };
    let mut best: Option<([f64; N], f64)> = None;
    for support in 1u32..(1 << N) {
        let vars: Vec<usize> = (0..N).filter(|i| support & (1 << i) != 0).collect();
        let Some(solution) = least_squares(rows, &vars) else {
            continue;
        };
        if solution.iter().any(|&v| v < 0.0 || !v.is_finite()) {
            continue;
        }
        let mut x = [0.0; N];
        for (&var, &v) in vars.iter().zip(&solution) {
            x[var] = v;
        }
        let r = residual(&x);
        if best.is_none_or(|(_, b)| r < b) {
            best = Some((x, r));
        }
    }
    best.map(|(x, _)| x)
}

/// Least squares on the variables `vars` only, by the normal equations and Gaussian
/// elimination with partial pivoting; `None` when they are singular (the columns are
/// dependent, or there are fewer rows than variables).
fn least_squares<const N: usize>(rows: &[([f64; N], f64)], vars: &[usize]) -> Option<Vec<f64>> {
    let n = vars.len();
    let mut m = vec![vec![0.0; n + 1]; n];
    for (r, y) in rows {
        for i in 0..n {
            for j in 0..n {
                m[i][j] += r[vars[i]] * r[vars[j]];
            }
            m[i][n] += r[vars[i]] * y;
        }
    }
    let scale = m
        .iter()
        .flat_map(|row| row[..n].iter())
        .fold(0.0f64, |a, &v| a.max(v.abs()));
    for col in 0..n {
        let pivot = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() <= scale * 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (v, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *v -= f * p;
                }
            }
        }
    }
    Some((0..n).map(|i| m[i][n] / m[i][i]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(regions: f64, objects: f64, c: [f64; 3]) -> SearchMeasurement {
        SearchMeasurement {
            regions,
            objects,
            skipped: 0.0,
            server_s: c[0] + c[1] * regions + c[2] * objects,
        }
    }

    fn start(base_s: f64) -> WriteFit {
        WriteFit {
            base_s,
            hop_s: 0.0,
            fsync_cpu_s: 0.0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
    }

    #[test]
    fn exact_search_samples_give_their_constants_back() {
        let truth = [20e-6, 8e-6, 0.5e-6];
        let samples: Vec<_> = [
            (1.0, 1.0),
            (4.0, 40.0),
            (16.0, 600.0),
            (64.0, 10_000.0),
            (8.0, 5.0),
        ]
        .iter()
        .map(|&(r, o)| search(r, o, truth))
        .collect();
        let fit = fit_search(&samples).expect("fits");
        assert!(
            close(fit.base_s, truth[0])
                && close(fit.region_s, truth[1])
                && close(fit.object_s, truth[2]),
            "{fit:?}"
        );
    }

    #[test]
    fn a_negative_least_squares_constant_is_clamped_to_zero() {
        // The standalone search-fixed figures of docs/benchmarks.md: plain least squares gives
        // c0 = −37 µs, which would make a point search's cost negative.
        let samples = [
            (64.0, 10_000.0, 132.0),
            (16.0, 625.0, 1_283.0),
            (4.0, 39.0, 13_558.0),
            (1.0, 2.4, 94_791.0),
        ]
        .map(|(regions, objects, throughput_ops_s)| SearchMeasurement {
            regions,
            objects,
            skipped: 0.0,
            server_s: 1.0 / throughput_ops_s,
        });
        let fit = fit_search(&samples).expect("fits");
        assert_eq!(fit.base_s, 0.0);
        assert!((fit.region_s - 9.38e-6).abs() < 0.01e-6, "{fit:?}");
        assert!((fit.object_s - 0.791e-6).abs() < 0.001e-6, "{fit:?}");
        // Every prediction is positive and within 20 % of its measurement, the point search
        // too: a fit of the absolute errors (c0 = 0, a = 24.2 µs, b = 0.603 µs) predicted the
        // biggest search within 1 % and the point search 144 % over.
        for s in &samples {
            let cost = fit.base_s + fit.region_s * s.regions + fit.object_s * s.objects;
            assert!(cost > 0.0 && (cost / s.server_s - 1.0).abs() < 0.2, "{s:?}");
        }
    }

    #[test]
    fn searches_that_cannot_tell_the_constants_apart_are_still_fitted_or_refused() {
        // One sample: several supports fit it exactly; any non-negative one will do.
        let one = fit_search(&[search(4.0, 10.0, [0.0, 1e-5, 1e-6])]).expect("fits");
        assert!(close(
            one.base_s + 4.0 * one.region_s + 10.0 * one.object_s,
            4e-5 + 1e-5
        ));
        assert_eq!(fit_search(&[]), Err(FitError::NoMeasurements("search")));
        let bad = SearchMeasurement {
            regions: 0.5,
            objects: 1.0,
            skipped: 0.0,
            server_s: 1.0 / (10.0),
        };
        assert!(matches!(
            fit_search(&[bad]),
            Err(FitError::BadMeasurement {
                what: "search",
                index: 0,
                ..
            })
        ));
        let zero = SearchMeasurement {
            regions: 1.0,
            objects: 1.0,
            skipped: 0.0,
            server_s: 0.0,
        };
        assert_eq!(
            fit_search(&[zero]).unwrap_err().to_string(),
            "search measurement 0: cost 0 s is not a positive number"
        );
    }

    /// T = 1 / (hop·K(1 + N + 2αM)), the model's write throughput.
    fn write(k: u32, n: u32, m: u32, hop: f64, alpha: f64) -> WriteMeasurement {
        let cost = hop * k as f64 * (1.0 + n as f64 + 2.0 * alpha * m as f64);
        WriteMeasurement {
            replicas: k,
            subspaces_unmoved: n,
            subspaces_moved: m,
            server_s: cost,
            fsyncs_per_write: 0.0,
        }
    }

    #[test]
    fn writes_give_hop_and_alpha_back() {
        let (hop, alpha) = (100e-6, 2.5);
        let samples: Vec<_> = [
            (1, 0, 0),
            (2, 1, 0),
            (3, 2, 0),
            (1, 0, 1),
            (2, 1, 1),
            (3, 0, 2),
        ]
        .iter()
        .map(|&(k, n, m)| write(k, n, m, hop, alpha))
        .collect();
        let c = fit(
            &Measurements {
                writes: samples.clone(),
                ..Default::default()
            },
            Calibration::default(),
        )
        .expect("fits");
        assert!(
            close(c.write_hop_s, hop) && close(c.relocation_factor, alpha),
            "{c:?}"
        );
        // Eq. 4.8 rebuilt gives α from each moving write alone.
        for w in samples.iter().filter(|w| w.subspaces_moved > 0) {
            assert!(close(relocation_factor(0.0, hop, w).expect("moves"), alpha));
        }
        assert_eq!(relocation_factor(0.0, hop, &samples[0]), None);
    }

    #[test]
    fn one_moving_write_is_eq_4_8() {
        let w = WriteMeasurement {
            replicas: 2,
            subspaces_unmoved: 1,
            subspaces_moved: 1,
            server_s: 1.0 / (1000.0),
            fsyncs_per_write: 0.0,
        };
        let hop = 1.0 / 9800.0;
        // (9800/1000 − 2·2) / (2·2·1) = 1.45
        assert!(close(
            fit_relocation_factor(
                WriteFit {
                    base_s: 0.0,
                    hop_s: hop,
                    fsync_cpu_s: 0.0
                },
                &[w]
            )
            .expect("fits"),
            1.45
        ));
        assert!(close(relocation_factor(0.0, hop, &w).expect("moves"), 1.45));
    }

    #[test]
    fn writes_that_contradict_each_other_are_refused() {
        // A moving write faster than the same chain without moving: α ≤ 0.
        let w = WriteMeasurement {
            replicas: 1,
            subspaces_unmoved: 0,
            subspaces_moved: 1,
            server_s: 1.0 / (2000.0),
            fsyncs_per_write: 0.0,
        };
        assert!(
            matches!(fit_relocation_factor(WriteFit { base_s: 0.0, hop_s: 1e-3, fsync_cpu_s: 0.0 }, &[w]), Err(FitError::RelocationFactorNotPositive(a)) if a < 0.0)
        );
        assert_eq!(
            fit_write(&[w], start(0.0)),
            Err(FitError::NoMeasurements("write that moves nothing"))
        );
        let no_replicas = WriteMeasurement { replicas: 0, ..w };
        assert!(matches!(
            fit_write(&[no_replicas], start(0.0)),
            Err(FitError::BadMeasurement { what: "write", .. })
        ));
    }

    #[test]
    fn the_repository_sweep_gives_the_default_hop() {
        // docs/benchmarks.md, 4 servers K = 1, S subspaces all moved: chain 1 + 2S.
        let puts = [
            9086.0, 2585.0, 1664.0, 1306.0, 935.0, 764.0, 646.0, 600.0, 509.0, 420.0, 400.0,
        ];
        let moving: Vec<_> = puts
            .iter()
            .enumerate()
            .map(|(s, &t)| WriteMeasurement {
                replicas: 1,
                subspaces_unmoved: 0,
                subspaces_moved: s as u32,
                server_s: 1.0 / t,
                fsyncs_per_write: 0.0,
            })
            .collect();
        // The sweep has one chain that moves nothing (S = 0): the hop is its cost; α is then
        // fitted on the others.
        let c = fit(
            &Measurements {
                writes: moving,
                ..Default::default()
            },
            Calibration::default(),
        )
        .expect("fits");
        assert!((c.write_hop_s - 110e-6).abs() < 1e-6, "{c:?}");
        assert!((c.relocation_factor - 1.083).abs() < 0.001, "{c:?}");
        let defaults = Calibration::default();
        assert!((defaults.write_hop_s / c.write_hop_s - 1.0).abs() < 0.1);
        assert!((defaults.relocation_factor / c.relocation_factor - 1.0).abs() < 0.1);
    }

    #[test]
    fn gets_and_empty_measurements() {
        assert!(close(fit_get(&[0.01, 0.005]).expect("fits"), 0.0075));
        assert_eq!(fit_get(&[]), Err(FitError::NoMeasurements("get")));
        assert_eq!(
            fit(&Measurements::default(), Calibration::default()),
            Ok(Calibration::default())
        );
    }

    #[test]
    fn chain_lengths_of_design_section_8() {
        assert_eq!(chain_length(1, 0, 0), 1);
        assert_eq!(chain_length(3, 1, 2), 18);
    }

    #[test]
    fn searches_with_skipped_entries_give_all_four_constants_back() {
        let truth = [15e-6, 6e-6, 0.8e-6, 2.5e-6];
        let samples: Vec<_> = [
            (1.0, 1.0, 0.0),
            (4.0, 40.0, 0.0),
            (16.0, 600.0, 0.0),
            (6.0, 50.0, 700.0),
            (2.0, 1.0, 25.0),
            (8.0, 90.0, 140.0),
        ]
        .iter()
        .map(|&(regions, objects, skipped)| SearchMeasurement {
            regions,
            objects,
            skipped,
            server_s: truth[0] + truth[1] * regions + truth[2] * objects + truth[3] * skipped,
        })
        .collect();
        let fit = fit_search(&samples).expect("fits");
        for (got, want) in [fit.base_s, fit.region_s, fit.object_s, fit.skip_s]
            .iter()
            .zip(truth)
        {
            assert!(close(*got, want), "{fit:?}");
        }
        let c = super::fit(
            &Measurements {
                searches: samples,
                ..Default::default()
            },
            Calibration::default(),
        )
        .expect("fits");
        assert!(close(c.search_skip_s, truth[3]), "{c:?}");
        // A negative number of entries is refused, naming the measurement.
        let bad = SearchMeasurement {
            regions: 1.0,
            objects: 1.0,
            skipped: -1.0,
            server_s: 1.0 / (10.0),
        };
        assert!(matches!(
            fit_search(&[search(1.0, 1.0, truth[..3].try_into().unwrap()), bad]),
            Err(FitError::BadMeasurement {
                what: "search",
                index: 1,
                ..
            })
        ));
    }

    /// T = 1 / (base + hop·K(1 + N + 2αM)), the model's write throughput with a fixed cost.
    fn write_with_base(
        k: u32,
        n: u32,
        m: u32,
        base: f64,
        hop: f64,
        alpha: f64,
    ) -> WriteMeasurement {
        let cost = base + hop * k as f64 * (1.0 + n as f64 + 2.0 * alpha * m as f64);
        WriteMeasurement {
            replicas: k,
            subspaces_unmoved: n,
            subspaces_moved: m,
            server_s: cost,
            fsyncs_per_write: 0.0,
        }
    }

    #[test]
    fn writes_give_base_hop_and_alpha_back() {
        let (base, hop, alpha) = (37e-6, 10e-6, 1.7);
        let samples: Vec<_> = [(1, 0, 0), (1, 2, 0), (1, 0, 2), (2, 1, 1)]
            .iter()
            .map(|&(k, n, m)| write_with_base(k, n, m, base, hop, alpha))
            .collect();
        let c = fit(
            &Measurements {
                writes: samples.clone(),
                ..Default::default()
            },
            Calibration::default(),
        )
        .expect("fits");
        assert!(
            close(c.write_base_s, base) && close(c.write_hop_s, hop),
            "{c:?}"
        );
        assert!((c.relocation_factor - alpha).abs() < 1e-9, "{c:?}");
        assert!(close(
            relocation_factor(base, hop, &samples[2]).expect("moves"),
            alpha
        ));
        // Calibrate's smoke-run writes (47.3 µs alone, 66.6 µs through two subspaces): about
        // 37.7 µs fixed and 9.7 µs a server, where the line through 0 said 24.7 µs a server
        // and mispredicted both.
        let smoke = [
            WriteMeasurement {
                replicas: 1,
                subspaces_unmoved: 0,
                subspaces_moved: 0,
                server_s: 1.0 / (1e6 / 47.3),
                fsyncs_per_write: 0.0,
            },
            WriteMeasurement {
                replicas: 1,
                subspaces_unmoved: 2,
                subspaces_moved: 0,
                server_s: 1.0 / (1e6 / 66.6),
                fsyncs_per_write: 0.0,
            },
        ];
        let w = fit_write(&smoke, start(0.0)).expect("fits");
        assert!((w.base_s - 37.65e-6).abs() < 0.01e-6, "{w:?}");
        assert!((w.hop_s - 9.65e-6).abs() < 0.01e-6, "{w:?}");
    }

    #[test]
    fn writes_that_cannot_give_a_positive_hop_are_refused() {
        // Longer chains ran faster: the best non-negative line is flat, a free chain server.
        let faster = [
            write_with_base(1, 0, 0, 50e-6, 0.0, 1.0),
            WriteMeasurement {
                replicas: 1,
                subspaces_unmoved: 2,
                subspaces_moved: 0,
                server_s: 1.0 / (1e6 / 40.0),
                fsyncs_per_write: 0.0,
            },
        ];
        assert!(matches!(
            fit_write(&faster, start(0.0)),
            Err(FitError::WriteHopNotPositive(h)) if h <= 0.0
        ));
        // One chain length: the fixed cost is kept, the rest is the hop.
        let one = [write_with_base(1, 0, 0, 30e-6, 20e-6, 1.0)];
        let w = fit_write(&one, start(30e-6)).expect("fits");
        assert!(close(w.base_s, 30e-6) && close(w.hop_s, 20e-6), "{w:?}");
        assert!(matches!(
            fit_write(&one, start(60e-6)),
            Err(FitError::WriteHopNotPositive(h)) if h < 0.0
        ));
    }

    fn search_terms(regions: f64, objects: f64, skipped: f64) -> ClassTerms {
        ClassTerms::Search {
            subspace: vec!["a".into()],
            subspace_index: 1,
            regions_contacted: regions,
            objects_read: objects,
            objects_matched: objects,
            entries_skipped: skipped,
        }
    }

    /// A mix's cost by the model's formulas, written out independently of `fit_mixes`.
    fn mix_cost(c: &Calibration, classes: &[(f64, ClassTerms)], fsyncs_per_write: f64) -> f64 {
        classes
            .iter()
            .map(|(p, t)| {
                p * match t {
                    ClassTerms::Search {
                        regions_contacted: r,
                        objects_read: o,
                        entries_skipped: k,
                        ..
                    } => {
                        c.search_base_s
                            + c.search_region_s * r
                            + c.search_object_s * o
                            + c.search_skip_s * k
                    }
                    ClassTerms::Update {
                        chain_length: l,
                        subspaces_relocated: m,
                    } => {
                        c.write_base_s
                            + c.write_hop_s * (l - 2.0 * m + 2.0 * c.relocation_factor * m)
                            + c.fsync_cpu_s * fsyncs_per_write
                    }
                    ClassTerms::Put { chain_length: l } => {
                        c.write_base_s + c.write_hop_s * l + c.fsync_cpu_s * fsyncs_per_write
                    }
                    ClassTerms::Get => c.get_s,
                }
            })
            .sum()
    }

    /// What a mix measures when reads and writes interfere by μ: the cost of its operations
    /// (fsyncs apart) times 1 + μ·min(1, w/0.05)·min(1, r/0.05), plus the fsyncs' CPU.
    fn measured(c: &Calibration, classes: &[(f64, ClassTerms)], fsyncs_per_write: f64) -> f64 {
        let writes: f64 = classes
            .iter()
            .filter(|(_, t)| !matches!(t, ClassTerms::Search { .. } | ClassTerms::Get))
            .map(|(p, _)| p)
            .sum();
        let reads = 1.0 - writes;
        let scale = 1.0 + c.mix_interference * (writes / 0.05).min(1.0) * (reads / 0.05).min(1.0);
        let no_fsync = Calibration {
            fsync_cpu_s: 0.0,
            ..*c
        };
        mix_cost(&no_fsync, classes, 0.0) * scale + c.fsync_cpu_s * fsyncs_per_write * writes
    }

    #[test]
    fn the_interference_of_mixes_is_what_they_cost_beyond_their_operations() {
        let truth = Calibration {
            fsync_cpu_s: 150e-6,
            mix_interference: 0.3,
            ..Calibration::default()
        };
        let update = || ClassTerms::Update {
            chain_length: 3.0,
            subspaces_relocated: 1.0,
        };
        let mix = |classes: Vec<(f64, ClassTerms)>| MixMeasurement {
            server_s: measured(&truth, &classes, 0.4),
            classes,
            fsyncs_per_write: 0.4,
        };
        let both = [
            mix(vec![(0.9, search_terms(4.0, 20.0, 0.0)), (0.1, update())]),
            mix(vec![(0.5, search_terms(1.0, 2.0, 5.0)), (0.5, update())]),
            mix(vec![(0.98, update()), (0.02, ClassTerms::Get)]),
        ];
        let alone = mix(vec![(1.0, update())]);
        let fitted = fit_interference(&both, &truth).unwrap().expect("mixes");
        assert!((fitted - 0.3).abs() < 1e-9, "{fitted}");
        // A workload of one kind shows none; nothing to fit from it.
        assert_eq!(fit_interference(&[alone], &truth), Ok(None));
        assert_eq!(fit_interference(&[], &truth), Ok(None));
        // Cheaper than its operations: no negative interference.
        let mut cheap = both[1].clone();
        cheap.server_s *= 0.5;
        assert_eq!(fit_interference(&[cheap], &truth), Ok(Some(0.0)));
        // fit() keeps it with the other constants.
        let m = Measurements {
            mixes: both.to_vec(),
            ..Measurements::default()
        };
        let start = Calibration {
            fsync_cpu_s: truth.fsync_cpu_s,
            ..Calibration::default()
        };
        assert!((fit(&m, start).unwrap().mix_interference - 0.3).abs() < 1e-9);
    }

    #[test]
    fn exact_mixes_give_their_constants_back_and_leave_the_rest() {
        let truth = Calibration {
            search_base_s: 12e-6,
            search_region_s: 3e-6,
            search_object_s: 0.6e-6,
            search_skip_s: 1.5e-6,
            write_base_s: 20e-6,
            write_hop_s: 7e-6,
            fsync_cpu_s: 150e-6,
            relocation_factor: 1.3,
            mix_interference: 0.25,
            ..Calibration::default()
        };
        let update = |l: f64, m: f64| ClassTerms::Update {
            chain_length: l,
            subspaces_relocated: m,
        };
        let runs: Vec<(Vec<(f64, ClassTerms)>, f64)> = vec![
            (vec![(1.0, search_terms(1.0, 1.0, 0.0))], 0.0),
            (vec![(1.0, search_terms(1.0, 90.0, 0.0))], 0.0),
            (
                vec![
                    (0.5, search_terms(8.0, 30.0, 200.0)),
                    (0.5, search_terms(1.0, 1.0, 0.0)),
                ],
                0.0,
            ),
            (vec![(1.0, search_terms(64.0, 20_000.0, 0.0))], 0.0),
            (
                vec![(0.9, search_terms(4.0, 2.0, 40.0)), (0.1, update(3.0, 1.0))],
                0.8,
            ),
            (vec![(1.0, update(2.0, 0.0))], 0.1),
            (vec![(1.0, update(4.0, 1.0))], 0.3),
            (vec![(0.5, update(6.0, 2.0)), (0.5, update(3.0, 0.5))], 0.2),
        ];
        let mixes: Vec<MixMeasurement> = runs
            .iter()
            .map(|(classes, f)| MixMeasurement {
                classes: classes.clone(),
                fsyncs_per_write: *f,
                server_s: measured(&truth, classes, *f),
            })
            .collect();
        // α, the fsync's CPU and the interference come from calibrate.
        let start = Calibration {
            relocation_factor: truth.relocation_factor,
            fsync_cpu_s: truth.fsync_cpu_s,
            mix_interference: truth.mix_interference,
            get_s: 33e-6,
            ..Calibration::default()
        };
        let c = fit_mixes(&mixes, start).expect("fits");
        for (got, want) in [
            (c.search_base_s, truth.search_base_s),
            (c.search_region_s, truth.search_region_s),
            (c.search_object_s, truth.search_object_s),
            (c.search_skip_s, truth.search_skip_s),
            (c.write_base_s, truth.write_base_s),
            (c.write_hop_s, truth.write_hop_s),
        ] {
            assert!((got - want).abs() <= 1e-6 * want, "{c:?}");
        }
        // No run has a get: its cost is the one given; so is the fsync's.
        assert_eq!(c.get_s, 33e-6);
        assert_eq!(c.fsync_cpu_s, truth.fsync_cpu_s);
        assert_eq!(fit_mixes(&[], start), Err(FitError::NoMeasurements("mix")));
    }

    #[test]
    fn the_client_the_disk_and_the_cores_are_fitted_from_every_run() {
        let run = |returned: f64, client_s: f64, server_busy: f64| RunMeasurement {
            returned,
            client_s,
            server_busy,
        };
        let m = Measurements {
            runs: vec![
                run(1.0, 10.5e-6, 0.9),
                run(100.0, 60e-6, 0.97),
                run(0.0, 10e-6, 0.4),
            ],
            fsyncs: vec![
                FsyncMeasurement {
                    fsyncs: 100.0,
                    seconds: 0.02,
                },
                FsyncMeasurement {
                    fsyncs: 300.0,
                    seconds: 0.1,
                },
            ],
            round_trips_s: vec![20e-6, 30e-6],
            ..Default::default()
        };
        let c = fit(&m, Calibration::default()).expect("fits");
        assert!(
            (c.client_s - 10e-6).abs() < 1e-9 && (c.client_object_s - 0.5e-6).abs() < 1e-9,
            "{c:?}"
        );
        assert!((c.fsync_s - 0.12 / 400.0).abs() < 1e-12);
        assert!((c.round_trip_s - 25e-6).abs() < 1e-12);
        // Busy at most 0.97 of a core: one core.
        assert_eq!(c.server_cores, 1.0);
        let busy = Measurements {
            runs: vec![run(1.0, 10e-6, 1.8)],
            ..Default::default()
        };
        assert_eq!(
            fit(&busy, Calibration::default())
                .expect("fits")
                .server_cores,
            1.8
        );
    }

    #[test]
    fn constants_saved_before_the_closed_loop_still_load() {
        let old = r#"{"write_base_s":3.5e-5,"write_hop_s":1.1e-5,"relocation_factor":1.03,"get_s":5.5e-6,"search_base_s":0.0,"search_region_s":5.6e-6,"search_object_s":8.1e-7,"search_skip_s":2.4e-6}"#;
        let c: Calibration = serde_json::from_str(old).expect("loads");
        let d = Calibration::default();
        assert_eq!((c.write_base_s, c.get_s), (3.5e-5, 5.5e-6));
        assert_eq!(
            (c.fsync_s, c.client_s, c.server_cores),
            (d.fsync_s, d.client_s, 1.0)
        );
        assert_eq!(c.check(), Ok(()));
    }
}
