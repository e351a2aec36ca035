//! Tessera's performance model and automatic configurator (DESIGN §8; seed 000 ch. 4 and 5,
//! rebuilt for how Tessera works). Pure: no I/O, no clocks, no network.
//!
//! So far: the workload a prediction is about ([`parse_workload`], [`Workload`]), and the
//! hardware constants ([`Calibration`]) with their fit from measurements ([`fit()`]).

pub mod calibration;
pub mod constants;
pub mod fit;
pub mod parse;
pub mod workload;

pub use calibration::{Calibration, CalibrationError};
pub use fit::{fit, FitError, Measurements, SearchMeasurement, WriteMeasurement};
pub use parse::parse_workload;
pub use workload::{
    AttributeStatistics, Operation, PredicateKind, QueryClass, Workload, WorkloadError,
};
