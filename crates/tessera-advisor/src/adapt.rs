//! When an adaptive space (`adapt on`) should be re-subspaced: the policy the adaptation
//! driver applies to each observation of the space's workload. Pure: the driver (in the
//! `tessera` binary, run by the coordinators' leader or by `tessera dev`) measures, asks the
//! advisor and alters the space; this decides.
//!
//! An observation is one period's workload (the trace's counts over the period) scored by the
//! advisor: the predicted throughput of the space's current subspaces and of the best
//! configuration, and how far the model was from what the servers measured in the period. The
//! space changes once the best is predicted faster, by at least `gain_min` and by more than the
//! model's measured error, in `observations` observations running: a burst does not
//! reconfigure a space, a lasting change of workload does, and a gain the model cannot vouch
//! for does not. A period with too few requests to say anything, or one where the current
//! configuration is (nearly) the best, breaks the run.

use crate::constants::{ADAPT_GAIN_MIN_DEFAULT, ADAPT_OBSERVATIONS_DEFAULT, ADAPT_REQUESTS_MIN};

/// The thresholds of adaptation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptPolicy {
    /// How much faster the best configuration must be predicted, relative to the current one
    /// (0.2: 20 % faster).
    pub gain_min: f64,
    /// Observations running in which it must be.
    pub observations: u32,
    /// Fewest requests an observation must count to be evidence.
    pub requests_min: f64,
}

impl Default for AdaptPolicy {
    fn default() -> AdaptPolicy {
        AdaptPolicy {
            gain_min: ADAPT_GAIN_MIN_DEFAULT,
            observations: ADAPT_OBSERVATIONS_DEFAULT,
            requests_min: ADAPT_REQUESTS_MIN,
        }
    }
}

/// One period's workload, as the advisor scored it.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// Requests the period counted.
    pub requests: f64,
    /// Predicted throughput of the space's current subspaces, operations a second.
    pub current_ops_s: f64,
    /// Predicted throughput of the best configuration.
    pub best_ops_s: f64,
    /// The best configuration's subspaces, by attribute names (the key subspace left out).
    pub best: Vec<Vec<String>>,
    /// |predicted − measured| / measured of the servers' CPU per operation under the current
    /// configuration over the period, if the servers said what they spent.
    pub model_error: Option<f64>,
}

impl Observation {
    /// best / current − 1: how much faster the best configuration is predicted.
    pub fn gain(&self) -> f64 {
        self.best_ops_s / self.current_ops_s - 1.0
    }
}

/// What the policy made of an observation.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Too few requests to judge; the run starts over.
    TooQuiet,
    /// The current configuration is within `gain_min` of the best; the run starts over.
    Keep,
    /// The best is faster enough, `streak` observations running, of the `needed`.
    Better { streak: u32, needed: u32 },
    /// Re-subspace the space to `to` now (`streak` observations running found it faster).
    Adapt { to: Vec<Vec<String>>, streak: u32 },
}

/// Observations whose model error the gain must beat: the largest of the last few, so that one
/// lucky period does not vouch for the model.
const ERRORS_KEPT: usize = 3;

/// The policy's state for one space: how many observations running found a better
/// configuration, and the model's error in the last observations.
#[derive(Clone, Debug)]
pub struct Adapter {
    policy: AdaptPolicy,
    streak: u32,
    errors: std::collections::VecDeque<f64>,
}

impl Adapter {
    pub fn new(policy: AdaptPolicy) -> Adapter {
        assert!(
            policy.gain_min >= 0.0 && policy.gain_min.is_finite(),
            "a gain threshold is a non-negative number"
        );
        assert!(policy.observations >= 1, "at least one observation");
        Adapter {
            policy,
            streak: 0,
            errors: std::collections::VecDeque::new(),
        }
    }

    /// The gain a better configuration must be predicted to bring: `gain_min`, or the model's
    /// largest measured error of the last observations if that is more.
    pub fn gain_needed(&self) -> f64 {
        self.errors
            .iter()
            .copied()
            .fold(self.policy.gain_min, f64::max)
    }

    pub fn policy(&self) -> &AdaptPolicy {
        &self.policy
    }

    /// Observations running so far that found a better configuration.
    pub fn streak(&self) -> u32 {
        self.streak
    }

    /// Forgets the run (the space changed, or the driver lost track of it).
    pub fn reset(&mut self) {
        self.streak = 0;
    }

    /// Judges one observation. After an `Adapt`, the run starts over.
    pub fn observe(&mut self, observation: &Observation) -> Verdict {
        let o = observation;
        // A quiet period's error says little (a handful of requests against the servers' idle
        // CPU).
        if let Some(e) = o
            .model_error
            .filter(|e| e.is_finite() && *e >= 0.0 && o.requests >= self.policy.requests_min)
        {
            if self.errors.len() == ERRORS_KEPT {
                self.errors.pop_front();
            }
            self.errors.push_back(e);
        }
        let scored = o.current_ops_s.is_finite()
            && o.current_ops_s > 0.0
            && o.best_ops_s.is_finite()
            && o.best_ops_s > 0.0;
        // A NaN count is too quiet as well.
        let evidence = o.requests >= self.policy.requests_min;
        if !evidence || !scored {
            self.streak = 0;
            return Verdict::TooQuiet;
        }
        if o.best_ops_s < o.current_ops_s * (1.0 + self.gain_needed()) {
            self.streak = 0;
            return Verdict::Keep;
        }
        self.streak += 1;
        if self.streak < self.policy.observations {
            return Verdict::Better {
                streak: self.streak,
                needed: self.policy.observations,
            };
        }
        let streak = std::mem::take(&mut self.streak);
        Verdict::Adapt {
            to: o.best.clone(),
            streak,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(requests: f64, current: f64, best: f64) -> Observation {
        Observation {
            requests,
            current_ops_s: current,
            best_ops_s: best,
            best: vec![vec!["city".into()]],
            model_error: None,
        }
    }

    fn policy(observations: u32) -> AdaptPolicy {
        AdaptPolicy {
            gain_min: 0.2,
            observations,
            requests_min: 100.0,
        }
    }

    #[test]
    fn a_lasting_gain_adapts_once_the_run_is_long_enough() {
        let mut a = Adapter::new(policy(3));
        let better = seen(1000.0, 100.0, 130.0);
        assert_eq!(
            a.observe(&better),
            Verdict::Better {
                streak: 1,
                needed: 3
            }
        );
        assert_eq!(
            a.observe(&better),
            Verdict::Better {
                streak: 2,
                needed: 3
            }
        );
        assert_eq!(
            a.observe(&better),
            Verdict::Adapt {
                to: vec![vec!["city".into()]],
                streak: 3
            }
        );
        // The run starts over after a change.
        assert_eq!(a.streak(), 0);
        assert!(matches!(
            a.observe(&better),
            Verdict::Better { streak: 1, .. }
        ));
    }

    #[test]
    fn a_small_gain_a_quiet_period_or_a_reset_breaks_the_run() {
        let mut a = Adapter::new(policy(2));
        let better = seen(1000.0, 100.0, 130.0);
        assert!(matches!(
            a.observe(&better),
            Verdict::Better { streak: 1, .. }
        ));
        // 19 % is under the threshold.
        assert_eq!(a.observe(&seen(1000.0, 100.0, 119.0)), Verdict::Keep);
        assert!(matches!(
            a.observe(&better),
            Verdict::Better { streak: 1, .. }
        ));
        assert_eq!(a.observe(&seen(99.0, 100.0, 500.0)), Verdict::TooQuiet);
        assert!(matches!(
            a.observe(&better),
            Verdict::Better { streak: 1, .. }
        ));
        a.reset();
        assert!(matches!(
            a.observe(&better),
            Verdict::Better { streak: 1, .. }
        ));
        assert!(matches!(a.observe(&better), Verdict::Adapt { .. }));
    }

    #[test]
    fn a_gain_within_the_models_measured_error_is_not_taken() {
        let mut a = Adapter::new(policy(1));
        let with_error = |best: f64, error: f64| Observation {
            model_error: Some(error),
            ..seen(1000.0, 100.0, best)
        };
        // 30 % better, but the model was 40 % off this period: kept.
        assert_eq!(a.observe(&with_error(130.0, 0.4)), Verdict::Keep);
        assert_eq!(a.gain_needed(), 0.4);
        // The largest of the last three errors counts: two good periods do not clear it.
        assert_eq!(a.observe(&with_error(130.0, 0.05)), Verdict::Keep);
        assert_eq!(a.observe(&with_error(130.0, 0.05)), Verdict::Keep);
        // The 40 % is now four periods old: 30 % clears the 20 % floor and the 5 % errors.
        assert!(matches!(
            a.observe(&with_error(130.0, 0.05)),
            Verdict::Adapt { .. }
        ));
        assert_eq!(a.gain_needed(), 0.2);
    }

    #[test]
    fn exactly_the_threshold_counts_and_unscored_periods_do_not() {
        let mut a = Adapter::new(policy(1));
        assert!(matches!(
            a.observe(&seen(100.0, 100.0, 120.0)),
            Verdict::Adapt { .. }
        ));
        for (current, best) in [(0.0, 10.0), (f64::NAN, 10.0), (10.0, f64::INFINITY)] {
            assert_eq!(
                a.observe(&seen(1000.0, current, best)),
                Verdict::TooQuiet,
                "{current} {best}"
            );
        }
        assert_eq!(a.observe(&seen(f64::NAN, 1.0, 2.0)), Verdict::TooQuiet);
    }
}
