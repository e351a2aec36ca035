//! Calibration from measurements (seed 000 §4.5 and §5.2.1): micro-workloads measured on the
//! running cluster (`tessera calibrate` will run them) go in, constants come out. Pure: no
//! measuring here.
//!
//! * Searches: least squares of the measured cost 1/T on c0 + a·regions + b·objects +
//!   s·skipped, with c0, a, b, s ≥ 0 (a negative constant would predict a negative cost for
//!   some search).
//! * Writes: the fixed cost and the hop cost by least squares of 1/T on base + hop·K(1 + N)
//!   over the writes that move nothing, both ≥ 0 (with one chain length only, the fixed cost
//!   is kept and the line goes through it), then α by least squares of the rest of 1/T on
//!   2·hop·K·M over the writes that move the object; with one such write it is eq. 4.8
//!   ([`relocation_factor`]).
//! * Gets: the mean of 1/T.

use serde::{Deserialize, Serialize};

use crate::calibration::{Calibration, CalibrationError};

/// A measured search micro-workload: every search of it contacted `regions` regions, read
/// `objects` objects (its box's) and about `skipped` entries outside its box (the model's
/// estimate, [`crate::partial_match_entries`]), and the cluster ran `throughput_ops_s` of them
/// a second.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchMeasurement {
    pub regions: f64,
    pub objects: f64,
    /// 0 in measurements saved before the term existed.
    #[serde(default)]
    pub skipped: f64,
    pub throughput_ops_s: f64,
}

/// A measured update micro-workload: replica sets of `replicas` servers, `subspaces_unmoved`
/// subspaces in which every update left the object in its region and `subspaces_moved` in
/// which every update moved it (the `subspaces` workload of tessera-bench moves it in all).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteMeasurement {
    pub replicas: u32,
    pub subspaces_unmoved: u32,
    pub subspaces_moved: u32,
    pub throughput_ops_s: f64,
}

/// Everything measured; any part may be empty, and its constants are then kept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// Get throughputs, ops/s.
    pub gets: Vec<f64>,
    pub writes: Vec<WriteMeasurement>,
    pub searches: Vec<SearchMeasurement>,
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
        let w = fit_write(&measurements.writes, c.write_base_s)?;
        (c.write_base_s, c.write_hop_s) = (w.base_s, w.hop_s);
    }
    if measurements.writes.iter().any(|w| w.subspaces_moved > 0) {
        c.relocation_factor =
            fit_relocation_factor(c.write_base_s, c.write_hop_s, &measurements.writes)?;
    }
    c.check()?;
    Ok(c)
}

/// The cost of a get: the mean of the measured 1/T.
pub fn fit_get(throughputs_ops_s: &[f64]) -> Result<f64, FitError> {
    if throughputs_ops_s.is_empty() {
        return Err(FitError::NoMeasurements("get"));
    }
    let mut sum = 0.0;
    for (index, &t) in throughputs_ops_s.iter().enumerate() {
        sum += cost_of("get", index, t)?;
    }
    Ok(sum / throughputs_ops_s.len() as f64)
}

/// c0, a, b and s ≥ 0 minimising Σ (c0 + a·regions + b·objects + s·skipped − 1/T)².
pub fn fit_search(samples: &[SearchMeasurement]) -> Result<SearchFit, FitError> {
    if samples.is_empty() {
        return Err(FitError::NoMeasurements("search"));
    }
    let mut rows = Vec::with_capacity(samples.len());
    for (index, s) in samples.iter().enumerate() {
        let cost = cost_of("search", index, s.throughput_ops_s)?;
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
        non_negative_least_squares(&rows).ok_or(FitError::Degenerate)?;
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

/// The fixed cost of a write and the cost of one server of a chain, from the writes that move
/// nothing: base, hop ≥ 0 minimising Σ (base + hop·K(1 + N) − 1/T)². When those writes have
/// one chain length only, the two cannot be told apart: `base_s` is kept and hop is the least
/// squares slope of 1/T − base on the chain length, through 0.
pub fn fit_write(samples: &[WriteMeasurement], base_s: f64) -> Result<WriteFit, FitError> {
    let mut rows = Vec::new();
    for (index, w) in samples.iter().enumerate() {
        let cost = write_cost(index, w)?;
        if w.subspaces_moved == 0 {
            let length = chain_length(w.replicas, w.subspaces_unmoved, 0) as f64;
            rows.push(([1.0, length], cost));
        }
    }
    let Some(&([_, first], _)) = rows.first() else {
        return Err(FitError::NoMeasurements("write that moves nothing"));
    };
    let fit = if rows.iter().any(|([_, length], _)| *length != first) {
        let [base_s, hop_s] = non_negative_least_squares(&rows).ok_or(FitError::Degenerate)?;
        WriteFit { base_s, hop_s }
    } else {
        let (xy, xx) = rows.iter().fold((0.0, 0.0), |(xy, xx), ([_, x], y)| {
            (xy + x * (y - base_s), xx + x * x)
        });
        WriteFit {
            base_s,
            hop_s: xy / xx,
        }
    };
    if fit.hop_s.is_finite() && fit.hop_s > 0.0 {
        Ok(fit)
    } else {
        Err(FitError::WriteHopNotPositive(fit.hop_s))
    }
}

/// α from the writes that move the object, given the fixed and hop costs: least squares of
/// 1/T − base − hop·K(1 + N) on 2·hop·K·M. With one such write, this is [`relocation_factor`].
pub fn fit_relocation_factor(
    write_base_s: f64,
    write_hop_s: f64,
    samples: &[WriteMeasurement],
) -> Result<f64, FitError> {
    let (mut xy, mut xx) = (0.0, 0.0);
    for (index, w) in samples.iter().enumerate() {
        let cost = write_cost(index, w)?;
        if w.subspaces_moved > 0 {
            let (k, n, m) = (
                w.replicas as f64,
                w.subspaces_unmoved as f64,
                w.subspaces_moved as f64,
            );
            let rest = cost - write_base_s - write_hop_s * k * (1.0 + n);
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
/// Tmax = 1/hop, solving 1/T = base + (K(1 + |N|) + 2αK|M|) / Tmax for α:
///
/// α = (Tmax·(1/T − base) − K(1 + |N|)) / (2K|M|)
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
    Some((t_max * (1.0 / w.throughput_ops_s - write_base_s) - k * (1.0 + n)) / (2.0 * k * m))
}

/// The servers of an update's chain when it leaves the object in place in `unmoved` subspaces
/// and moves it in `moved` (docs/design.md §8): K(1 + |N| + 2|M|).
pub fn chain_length(replicas: u32, unmoved: u32, moved: u32) -> u32 {
    replicas * (1 + unmoved + 2 * moved)
}

fn cost_of(what: &'static str, index: usize, throughput_ops_s: f64) -> Result<f64, FitError> {
    if throughput_ops_s.is_finite() && throughput_ops_s > 0.0 {
        Ok(1.0 / throughput_ops_s)
    } else {
        Err(FitError::BadMeasurement {
            what,
            index,
            reason: format!("throughput {throughput_ops_s} is not a positive number"),
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
    cost_of("write", index, w.throughput_ops_s)
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
            throughput_ops_s: 1.0 / (c[0] + c[1] * regions + c[2] * objects),
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
            throughput_ops_s,
        });
        let fit = fit_search(&samples).expect("fits");
        assert_eq!(fit.base_s, 0.0);
        assert!((fit.region_s - 24.2e-6).abs() < 0.1e-6, "{fit:?}");
        assert!((fit.object_s - 0.603e-6).abs() < 0.001e-6, "{fit:?}");
        // Every prediction is positive; the biggest search, which dominates the squares, is
        // predicted within 1 %.
        for s in &samples {
            let cost = fit.base_s + fit.region_s * s.regions + fit.object_s * s.objects;
            assert!(cost > 0.0);
        }
        assert!((1.0 / (fit.region_s * 64.0 + fit.object_s * 10_000.0) / 132.0 - 1.0).abs() < 0.01);
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
            throughput_ops_s: 10.0,
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
            throughput_ops_s: 0.0,
        };
        assert_eq!(
            fit_search(&[zero]).unwrap_err().to_string(),
            "search measurement 0: throughput 0 is not a positive number"
        );
    }

    /// T = 1 / (hop·K(1 + N + 2αM)), the model's write throughput.
    fn write(k: u32, n: u32, m: u32, hop: f64, alpha: f64) -> WriteMeasurement {
        let cost = hop * k as f64 * (1.0 + n as f64 + 2.0 * alpha * m as f64);
        WriteMeasurement {
            replicas: k,
            subspaces_unmoved: n,
            subspaces_moved: m,
            throughput_ops_s: 1.0 / cost,
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
            throughput_ops_s: 1000.0,
        };
        let hop = 1.0 / 9800.0;
        // (9800/1000 − 2·2) / (2·2·1) = 1.45
        assert!(close(
            fit_relocation_factor(0.0, hop, &[w]).expect("fits"),
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
            throughput_ops_s: 2000.0,
        };
        assert!(
            matches!(fit_relocation_factor(0.0, 1e-3, &[w]), Err(FitError::RelocationFactorNotPositive(a)) if a < 0.0)
        );
        assert_eq!(
            fit_write(&[w], 0.0),
            Err(FitError::NoMeasurements("write that moves nothing"))
        );
        let no_replicas = WriteMeasurement { replicas: 0, ..w };
        assert!(matches!(
            fit_write(&[no_replicas], 0.0),
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
                throughput_ops_s: t,
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
        assert!(close(fit_get(&[100.0, 200.0]).expect("fits"), 0.0075));
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
            throughput_ops_s: 1.0
                / (truth[0] + truth[1] * regions + truth[2] * objects + truth[3] * skipped),
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
            throughput_ops_s: 10.0,
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
            throughput_ops_s: 1.0 / cost,
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
                throughput_ops_s: 1e6 / 47.3,
            },
            WriteMeasurement {
                replicas: 1,
                subspaces_unmoved: 2,
                subspaces_moved: 0,
                throughput_ops_s: 1e6 / 66.6,
            },
        ];
        let w = fit_write(&smoke, 0.0).expect("fits");
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
                throughput_ops_s: 1e6 / 40.0,
            },
        ];
        assert!(matches!(
            fit_write(&faster, 0.0),
            Err(FitError::WriteHopNotPositive(h)) if h <= 0.0
        ));
        // One chain length: the fixed cost is kept, the rest is the hop.
        let one = [write_with_base(1, 0, 0, 30e-6, 20e-6, 1.0)];
        let w = fit_write(&one, 30e-6).expect("fits");
        assert!(close(w.base_s, 30e-6) && close(w.hop_s, 20e-6), "{w:?}");
        assert!(matches!(
            fit_write(&one, 60e-6),
            Err(FitError::WriteHopNotPositive(h)) if h < 0.0
        ));
    }
}
