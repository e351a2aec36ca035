//! The adaptation driver: re-subspaces the spaces declared `adapt on` as their workload
//! changes (issue 9, item 5). It runs in every coordinator process and acts only in the Raft
//! leader's (`tessera coordinator`, `tessera dev --servers N`), and in `tessera dev` for the
//! standalone server. It is a client of the database like `tessera advise --apply`, and does
//! what a user would do by hand:
//!
//! 1. every period, for each adaptive space, read the trace's totals since the servers started
//!    (`Request::Trace` with 0 minutes) and subtract the previous period's: the workload served
//!    in this period (`SpaceTrace::since`);
//! 2. rank configurations for it with the advisor (the constants kept with the configuration,
//!    the space's live object count and distinct values), and hand the current configuration's
//!    and the best's predictions to the policy with the model's error this period (the current
//!    configuration's predicted CPU per request against what the servers' trace says they
//!    spent: `ServerWork`) (`tessera_advisor::Adapter`: at least 20 % faster and more than the
//!    model's error in the last three periods, three periods running, by default);
//! 3. when it says so, log the decision in the configuration (`SpaceChange::LogAdaptation`,
//!    shown by `tessera status`), then add the missing subspaces one build at a time and drop
//!    the others (`alter::apply_with`), printing each change on stderr.
//!
//! A period in which the space is being altered (a build under way), a server restarted or
//! left (totals went down), or too few requests arrived counts as no evidence, and the run of
//! periods starts over. One space is adapted at a time; observing resumes after it.

use std::collections::HashMap;
use std::time::Duration;

use tessera_advisor::{AdaptPolicy, Adapter, Calibration, Observation, Verdict};
use tessera_client::{
    Adaptation, AdaptationRecord, Client, ClientOptions, SpaceChange, SpaceConfig, SpaceTrace,
    WorkDone,
};

use crate::failure::Failure;
use crate::{advice, alter, json};

/// Longest the driver waits for one subspace to be built before it gives up on the change
/// (the build goes on; the next observation sees it under way).
const BUILD_WAIT: Duration = Duration::from_secs(3600);

/// How the driver runs.
#[derive(Clone, Copy, Debug)]
pub struct AdaptOptions {
    /// Length of one observation.
    pub period: Duration,
    pub policy: AdaptPolicy,
}

/// What the driver keeps of one adaptive space between periods.
struct Watch {
    /// The trace's totals at the end of the last period.
    total: Option<SpaceTrace>,
    adapter: Adapter,
}

/// Runs the driver until the process stops. `leads` says whether this process should act
/// (the coordinator leads the Raft group; always, standalone); `to` is where its client
/// connects (this coordinator or server), and how (the daemon's cluster secret).
pub fn spawn(
    to: (String, ClientOptions),
    options: AdaptOptions,
    leads: impl Fn() -> bool + Send + 'static,
) {
    tokio::spawn(async move {
        run(to, options, leads).await;
    });
}

async fn run(to: (String, ClientOptions), options: AdaptOptions, leads: impl Fn() -> bool) {
    let mut ticks = crate::driver::ticks(options.period);
    let mut client = crate::driver::DriverClient::new("adaptation", to);
    let mut watches: HashMap<u64, Watch> = HashMap::new();
    loop {
        ticks.tick().await;
        if !leads() {
            watches.clear();
            continue;
        }
        let Some(c) = client.get().await else {
            continue;
        };
        if let Err(e) = observe_all(c, &options, &mut watches).await {
            eprintln!("tessera adapt: {}", failure_text(&e));
        }
    }
}

fn failure_text(f: &Failure) -> &str {
    match f {
        Failure::Negative(m) | Failure::Error(m) => m,
    }
}

/// One period: every adaptive space observed, and adapted if the policy says so.
async fn observe_all(
    client: &Client,
    options: &AdaptOptions,
    watches: &mut HashMap<u64, Watch>,
) -> Result<(), Failure> {
    let config = client.refresh().await?;
    let calibration = config
        .model
        .as_ref()
        .map_or_else(Calibration::default, advice::from_model);
    let adaptive: Vec<SpaceConfig> = config
        .spaces
        .iter()
        .filter(|s| s.schema.adapt)
        .cloned()
        .collect();
    watches.retain(|id, _| adaptive.iter().any(|s| s.id == *id));
    for space in adaptive {
        let watch = watches.entry(space.id).or_insert_with(|| Watch {
            total: None,
            adapter: Adapter::new(options.policy),
        });
        let name = space.schema.name.clone();
        let Some(to) = observe(client, &space, watch, calibration, options).await? else {
            continue;
        };
        watch.adapter.reset();
        adapt(client, &space, to).await;
        // The next period starts after the change.
        watch.total = None;
        eprintln!("tessera adapt: space {name:?}: adapted");
    }
    Ok(())
}

/// Observes one space for the period just ended; returns the adaptation to make, if any.
async fn observe(
    client: &Client,
    space: &SpaceConfig,
    watch: &mut Watch,
    calibration: Calibration,
    options: &AdaptOptions,
) -> Result<Option<Adaptation>, Failure> {
    let name = &space.schema.name;
    let total = client.trace(name, 0).await?;
    let Some(earlier) = watch.total.replace(total.clone()) else {
        return Ok(None);
    };
    let Some(period) = total.since(&earlier) else {
        tracing::info!(space = %name, "adaptation: the trace went back (a server restarted or left)");
        watch.adapter.reset();
        return Ok(None);
    };
    if space.build.is_some() {
        // Being altered: this period's workload ran on a configuration in between.
        watch.adapter.reset();
        return Ok(None);
    }
    let requests = period.requests();
    let lines = json::workload_lines(&period);
    if lines.is_empty() {
        watch.adapter.reset();
        return Ok(None);
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let advice = advice::advice_for(client, name, &text, 1, calibration).await?;
    let best = advice::best_subspaces(&advice)?;
    let best_ops_s = advice
        .clusters
        .first()
        .and_then(|c| c.configurations.first())
        .map_or(0.0, |p| p.throughput_ops_s);
    let current_ops_s = advice
        .baselines
        .iter()
        .find(|b| b.name == tessera_advisor::BaselineName::Current)
        .map_or(0.0, |b| b.prediction.throughput_ops_s);
    let current_cost_s = advice
        .baselines
        .iter()
        .find(|b| b.name == tessera_advisor::BaselineName::Current)
        .map(|b| 1.0 / b.prediction.capacity_ops_s);
    // What the servers spent per request of this space over the period (their whole CPU: other
    // spaces' work makes the model look worse, never better, so it only holds a change back).
    let spent = WorkDone::of(&total.work).minus(&WorkDone::of(&earlier.work));
    let model_error = current_cost_s
        .filter(|_| spent.cpu_s > 0.0 && requests > 0.0)
        .map(|predicted| {
            let measured = spent.cpu_s / requests;
            (predicted - measured).abs() / measured
        });
    let observation = Observation {
        requests,
        current_ops_s,
        best_ops_s,
        best,
        model_error,
    };
    let verdict = watch.adapter.observe(&observation);
    tracing::info!(
        space = %name,
        requests,
        current_ops_s,
        best_ops_s,
        ?model_error,
        gain_needed = watch.adapter.gain_needed(),
        ?verdict,
        "adaptation: observed"
    );
    let Verdict::Adapt { to, streak } = verdict else {
        return Ok(None);
    };
    Ok(Some(Adaptation {
        from: space.written_attribute_sets(),
        to,
        predicted_from_ops_s: current_ops_s.round() as u64,
        predicted_to_ops_s: best_ops_s.round() as u64,
        observations: streak,
        period_s: options.period.as_secs().try_into().unwrap_or(u32::MAX),
    }))
}

/// Logs the adaptation in the configuration, then makes it. Failures are printed: the space
/// is left as far as the change got, and observed again from the next period.
async fn adapt(client: &Client, space: &SpaceConfig, adaptation: Adaptation) {
    let name = &space.schema.name;
    eprintln!(
        "tessera adapt: space {name:?}: {} predicted {} ops/s, {} predicted {} ops/s ({} periods running): adapting",
        sets_text(&adaptation.from),
        adaptation.predicted_from_ops_s,
        sets_text(&adaptation.to),
        adaptation.predicted_to_ops_s,
        adaptation.observations,
    );
    let to = adaptation.to.clone();
    if let Err(e) = client
        .alter_space(name, SpaceChange::LogAdaptation(adaptation))
        .await
    {
        eprintln!("tessera adapt: space {name:?}: cannot log the adaptation: {e}");
        return;
    }
    let report = |step: &serde_json::Value| -> Result<(), Failure> {
        eprintln!("tessera adapt: {step}");
        Ok(())
    };
    if let Err(e) = alter::apply_with(client, name, &to, Some(BUILD_WAIT), report).await {
        eprintln!(
            "tessera adapt: space {name:?}: the change stopped: {}",
            failure_text(&e)
        );
    }
}

/// `{city, price} {stars}`, or `(no subspace)`.
pub fn sets_text(sets: &[Vec<String>]) -> String {
    if sets.is_empty() {
        return "(no subspace)".into();
    }
    sets.iter()
        .map(|s| format!("{{{}}}", s.join(", ")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A logged adaptation as `tessera status` shows it: `adapted at epoch 9: {city} -> {city,
/// price} (predicted 1200 -> 2300 ops/s, 3 periods of 60 s running)`.
pub fn record_text(record: &AdaptationRecord) -> String {
    let a = &record.adaptation;
    format!(
        "adapted at epoch {}: {} -> {} (predicted {} -> {} ops/s, {} periods of {} s running)",
        record.epoch,
        sets_text(&a.from),
        sets_text(&a.to),
        a.predicted_from_ops_s,
        a.predicted_to_ops_s,
        a.observations,
        a.period_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_adaptation_reads_as_a_sentence() {
        let record = AdaptationRecord {
            epoch: 9,
            adaptation: Adaptation {
                from: vec![],
                to: vec![vec!["city".into(), "price".into()], vec!["stars".into()]],
                predicted_from_ops_s: 1200,
                predicted_to_ops_s: 2300,
                observations: 3,
                period_s: 60,
            },
        };
        assert_eq!(
            record_text(&record),
            "adapted at epoch 9: (no subspace) -> {city, price} {stars} (predicted 1200 -> 2300 ops/s, 3 periods of 60 s running)"
        );
    }
}
