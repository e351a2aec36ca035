//! The hardware-dependent constants of the model (seed 000's Tmax, α, β, rebuilt for Tessera).
//!
//! Every constant is a cost in seconds of the cluster's capacity: an operation of cost `c`
//! lets the cluster run `1 / c` of them a second. The defaults come from this repository's own
//! measurements on its 2-core development machine (docs/benchmarks.md); they rank
//! configurations sensibly, but absolute throughputs need `tessera calibrate` on the real
//! cluster (see [`crate::fit`](mod@crate::fit)).

use serde::{Deserialize, Serialize};

/// The model's constants. Build with [`Calibration::default`] or [`crate::fit::fit`], then
/// [`Calibration::check`] them (the model does).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Fixed cost of a write, whatever its chain: the client's request, the point leader's
    /// ordering, the group commit's share and the reply. Default 0: the `subspaces` sweep
    /// below (4 servers) ran through the origin, its fixed cost spread over the servers;
    /// `tessera calibrate` on one standalone server measured 47 µs for a chain of one and
    /// 67 µs for a chain of three (docs/advisor.md's smoke run), about 37 µs fixed and 10 µs
    /// per server, which only this term can explain.
    pub write_base_s: f64,
    /// Cost of one server of an update's chain: 1 / Tmax, Tmax being the write throughput of
    /// a chain of one server (K = 1, no subspace) when the fixed cost is 0. Default 119 µs:
    /// the `subspaces` sweep of docs/benchmarks.md (4 servers, K = 1) ran puts/s × chain
    /// length ≈ 8,400 at every chain length from 1 to 21.
    pub write_hop_s: f64,
    /// α: what one replica set of a subspace the update relocates the object in costs,
    /// relative to a replica set that overwrites it in place (the old region's servers delete,
    /// the new region's insert). Default 1: in that same sweep every put relocated the object
    /// in every subspace, and throughput still followed the chain length with one cost per
    /// server (Tessera's LSM store makes a delete a write, unlike HyperDex's, for which the
    /// seed measured α = 2.66).
    pub relocation_factor: f64,
    /// Cost of a get: one server, the key's point leader. Default 10 µs: 98,861 gets/s on the
    /// standalone server at 100k objects.
    pub get_s: f64,
    /// c0: fixed cost of a search, whatever it contacts.
    pub search_base_s: f64,
    /// a: cost of each region a search contacts (a server walks the region's part of the box).
    pub search_region_s: f64,
    /// b: cost of each object a search reads (every object inside its box, before the
    /// predicates that are not dimensions filter it). The defaults, c0 = 0, a = 10 µs and
    /// b = 0.7 µs, predict the standalone `search-fixed` figures of docs/benchmarks.md
    /// (1, 4, 16 and 64 regions; 2.4, 39, 625 and 10,000 objects) within 30 %.
    pub search_object_s: f64,
    /// s: cost of each storage entry a search reads *outside* its box, and the seek that
    /// follows it (BIGMIN). Only a box that fixes some dimensions of a subspace and leaves
    /// others open has such entries: about m^(open/d) per region crossed, m objects per
    /// region ([`crate::partial_match_entries`]). Default 2.8 µs: a store holding 20,000
    /// objects in one subspace of 4 string dimensions (64 regions) read 1,695 entries for a
    /// search fixing one of them, at 4.8 ms a search (2.8 µs an entry; 0.7 µs when read in
    /// sequence without seeking), after the Z-order codec was made table-driven.
    pub search_skip_s: f64,
    /// How long one fsync of a server's store takes: what a write waits for beyond CPU
    /// (`crate::closed_loop`). Constants saved before it existed get the default.
    #[serde(default = "default_fsync_s")]
    pub fsync_s: f64,
    /// Server CPU of one fsync (the syscall, waking the chain loop, releasing the answers),
    /// shared by the writes of its group.
    #[serde(default)]
    pub fsync_cpu_s: f64,
    /// Client CPU per request, and per object a request returns.
    #[serde(default = "default_client_s")]
    pub client_s: f64,
    #[serde(default)]
    pub client_object_s: f64,
    /// What a request spends in neither side's CPU (the network's round trip, scheduling).
    #[serde(default)]
    pub round_trip_s: f64,
    /// CPU cores each server computes on (the most it was seen using at once).
    #[serde(default = "default_server_cores")]
    pub server_cores: f64,
    /// μ: how much more the servers spend on a mix of reads and writes than on its operations
    /// alone, as a fraction of the latter ([`Calibration::mix_scale`]). Measured, not
    /// explained: the evaluation of 29 November found every mix 30 % above what the same
    /// operations cost in runs of their kind alone, whatever its share of writes (10, 50 or
    /// 95 %), and `tessera calibrate` measures it on a mix of its own.
    #[serde(default)]
    pub mix_interference: f64,
}

/// The share of writes (and of reads) from which a mix pays the whole interference.
pub const MIX_FULL_SHARE: f64 = 0.05;

fn default_fsync_s() -> f64 {
    Calibration::default().fsync_s
}

fn default_client_s() -> f64 {
    Calibration::default().client_s
}

fn default_server_cores() -> f64 {
    1.0
}

impl Default for Calibration {
    fn default() -> Calibration {
        Calibration {
            write_base_s: 0.0,
            write_hop_s: 119e-6,
            relocation_factor: 1.0,
            get_s: 10e-6,
            search_base_s: 0.0,
            search_region_s: 10e-6,
            search_object_s: 0.7e-6,
            search_skip_s: 2.8e-6,
            fsync_s: 1e-3,
            fsync_cpu_s: 0.0,
            client_s: 10e-6,
            client_object_s: 0.0,
            round_trip_s: 0.0,
            server_cores: 1.0,
            mix_interference: 0.0,
        }
    }
}

/// Why a calibration cannot be used: some prediction would not be a positive, finite number.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrationError {
    /// A constant is NaN or infinite.
    #[error("calibration constant {name} is {value}: it must be a finite number")]
    NotFinite { name: &'static str, value: f64 },
    /// A constant that must be positive is zero or negative (`write_hop_s`, `get_s`,
    /// `relocation_factor`).
    #[error("calibration constant {name} is {value}: it must be greater than 0")]
    NotPositive { name: &'static str, value: f64 },
    /// A search cost or the fixed write cost is negative.
    #[error("calibration constant {name} is {value}: it must not be negative")]
    Negative { name: &'static str, value: f64 },
    /// `search_base_s` and `search_region_s` are both 0, so a search reading no object would
    /// cost nothing (a search contacts at least one region).
    #[error("search_base_s and search_region_s are both 0: a search would be free")]
    FreeSearch,
    /// `server_cores` is below 1 (or not a number): a server computes on one core at least.
    #[error("calibration constant server_cores is {0}: it must be at least 1")]
    TooFewCores(f64),
}

impl Calibration {
    /// Tmax: the write throughput of a chain of one server.
    pub fn write_throughput_max(&self) -> f64 {
        1.0 / (self.write_base_s + self.write_hop_s)
    }

    /// What a mix with these shares of writes and of reads (searches and gets) costs the
    /// servers, relative to its operations alone: 1 + μ once each share is at least
    /// [`MIX_FULL_SHARE`], rising linearly in each below it, so 1 for writes or reads alone.
    pub fn mix_scale(&self, writes: f64, reads: f64) -> f64 {
        let part = |share: f64| (share / MIX_FULL_SHARE).clamp(0.0, 1.0);
        1.0 + self.mix_interference * part(writes) * part(reads)
    }

    /// Checks that every prediction made with these constants is positive and finite.
    pub fn check(&self) -> Result<(), CalibrationError> {
        let all = [
            ("write_hop_s", self.write_hop_s),
            ("relocation_factor", self.relocation_factor),
            ("get_s", self.get_s),
            ("search_base_s", self.search_base_s),
            ("search_region_s", self.search_region_s),
            ("search_object_s", self.search_object_s),
            ("search_skip_s", self.search_skip_s),
            ("write_base_s", self.write_base_s),
            ("fsync_s", self.fsync_s),
            ("fsync_cpu_s", self.fsync_cpu_s),
            ("client_s", self.client_s),
            ("client_object_s", self.client_object_s),
            ("round_trip_s", self.round_trip_s),
            ("mix_interference", self.mix_interference),
        ];
        for (name, value) in all {
            if !value.is_finite() {
                return Err(CalibrationError::NotFinite { name, value });
            }
        }
        for (name, value) in &all[..3] {
            if *value <= 0.0 {
                return Err(CalibrationError::NotPositive {
                    name,
                    value: *value,
                });
            }
        }
        for (name, value) in &all[3..] {
            if *value < 0.0 {
                return Err(CalibrationError::Negative {
                    name,
                    value: *value,
                });
            }
        }
        if self.search_base_s + self.search_region_s <= 0.0 {
            return Err(CalibrationError::FreeSearch);
        }
        if !(self.server_cores.is_finite() && self.server_cores >= 1.0) {
            return Err(CalibrationError::TooFewCores(self.server_cores));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_usable() {
        let c = Calibration::default();
        assert_eq!(c.check(), Ok(()));
        assert!((c.write_throughput_max() - 8403.0).abs() < 1.0);
    }

    #[test]
    fn a_mix_pays_its_interference_once_it_has_both_kinds() {
        let c = Calibration {
            mix_interference: 0.3,
            ..Calibration::default()
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(c.mix_scale(0.0, 1.0), 1.0));
        assert!(close(c.mix_scale(1.0, 0.0), 1.0));
        for (writes, reads) in [(0.05, 0.95), (0.1, 0.9), (0.5, 0.5), (0.95, 0.05)] {
            assert!(close(c.mix_scale(writes, reads), 1.3), "{writes}");
        }
        assert!(close(c.mix_scale(0.025, 0.975), 1.15));
        assert!(close(c.mix_scale(0.99, 0.01), 1.0 + 0.3 * 0.2));
        assert!(close(Calibration::default().mix_scale(0.5, 0.5), 1.0));
    }

    #[test]
    fn each_bad_constant_is_named() {
        let base = Calibration::default();
        let with = |f: fn(&mut Calibration)| {
            let mut c = base;
            f(&mut c);
            c.check()
        };
        assert_eq!(
            with(|c| c.get_s = f64::NAN).unwrap_err().to_string(),
            "calibration constant get_s is NaN: it must be a finite number"
        );
        assert_eq!(
            with(|c| c.write_hop_s = 0.0),
            Err(CalibrationError::NotPositive {
                name: "write_hop_s",
                value: 0.0
            })
        );
        assert_eq!(
            with(|c| c.relocation_factor = -1.0),
            Err(CalibrationError::NotPositive {
                name: "relocation_factor",
                value: -1.0
            })
        );
        assert_eq!(
            with(|c| c.search_object_s = -1e-9),
            Err(CalibrationError::Negative {
                name: "search_object_s",
                value: -1e-9
            })
        );
        assert_eq!(
            with(|c| {
                c.search_base_s = 0.0;
                c.search_region_s = 0.0;
            }),
            Err(CalibrationError::FreeSearch)
        );
        // A fixed cost alone is enough.
        assert_eq!(
            with(|c| {
                c.search_base_s = 1e-6;
                c.search_region_s = 0.0;
            }),
            Ok(())
        );
    }
}
