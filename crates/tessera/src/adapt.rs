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
//!    shown by `tessera status`) as started, then add the missing subspaces one build at a
//!    time and drop the others (`alter::apply_with`), printing each change on stderr, and log
//!    it finished (or abandoned, with the reason).
//!
//! Every change it makes, the log's included, is fenced by the coordinators' Raft term it
//! leads in (`tessera_protocol::check_fence`; 0 beside a standalone server): once another
//! coordinator leads, nothing the deposed driver still sends applies. The new leader's driver
//! finds the adaptation logged started (or resumed) and not finished, and before it observes
//! anything it resumes it — logged resumed, then finished — when the space's subspaces are
//! still on the way from the old configuration to the new one, and abandons it otherwise (a
//! user changed them meanwhile).
//!
//! A period in which the space is being altered (a build under way), a server restarted or
//! left (totals went down), or too few requests arrived counts as no evidence, and the run of
//! periods starts over. One space is adapted at a time; observing resumes after it.

use std::collections::HashMap;
use std::time::Duration;

use tessera_advisor::{AdaptPolicy, Adapter, Calibration, Observation, Verdict};
use tessera_client::{
    Adaptation, AdaptationEvent, AdaptationRecord, AdaptationStep, Client, ClientOptions,
    SpaceChange, SpaceConfig, SpaceTrace, WorkDone,
};
use tessera_protocol::ABANDON_WHY_MAX;

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

/// Runs the driver until the process stops. `leader_term` says in which Raft term this
/// process leads the coordinators, if it does (only then it acts; always in term 0 beside a
/// standalone server); `to` is where its client connects (this coordinator or server), and
/// how (the daemon's cluster secret).
pub fn spawn(
    to: (String, ClientOptions),
    options: AdaptOptions,
    leader_term: impl Fn() -> Option<u64> + Send + 'static,
) {
    tokio::spawn(async move {
        run(to, options, leader_term).await;
    });
}

async fn run(
    to: (String, ClientOptions),
    options: AdaptOptions,
    leader_term: impl Fn() -> Option<u64>,
) {
    let mut ticks = crate::driver::ticks(options.period);
    let mut client = crate::driver::DriverClient::new("adaptation", to);
    let mut watches: HashMap<u64, Watch> = HashMap::new();
    loop {
        ticks.tick().await;
        let Some(term) = leader_term() else {
            watches.clear();
            continue;
        };
        let Some(c) = client.get().await else {
            continue;
        };
        if let Err(e) = observe_all(c, &options, &mut watches, term).await {
            eprintln!("tessera adapt: {}", failure_text(&e));
        }
    }
}

fn failure_text(f: &Failure) -> &str {
    match f {
        Failure::Negative(m) | Failure::Error(m) => m,
    }
}

/// One period: every adaptive space observed, and adapted if the policy says so; an
/// adaptation left open by a driver that stopped is settled first.
async fn observe_all(
    client: &Client,
    options: &AdaptOptions,
    watches: &mut HashMap<u64, Watch>,
    term: u64,
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
        if let Some(open) = space.adaptations.last().filter(|r| r.is_open()) {
            // Its driver stopped before it finished (its coordinator lost the lead, or the
            // change failed and the log of it did too): this driver settles it.
            let adaptation = open.step.adaptation.clone();
            settle(client, &space, adaptation, term).await;
            (watch.total, watch.adapter) = (None, Adapter::new(options.policy));
            continue;
        }
        let Some(to) = observe(client, &space, watch, calibration, options).await? else {
            continue;
        };
        watch.adapter.reset();
        adapt(client, &space, to, term).await;
        // The next period starts after the change.
        watch.total = None;
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

/// Logs the adaptation started, then makes it ([`change`]).
async fn adapt(client: &Client, space: &SpaceConfig, adaptation: Adaptation, term: u64) {
    let name = &space.schema.name;
    eprintln!(
        "tessera adapt: space {name:?}: {} predicted {} ops/s, {} predicted {} ops/s ({} periods running): adapting",
        sets_text(&adaptation.from),
        adaptation.predicted_from_ops_s,
        sets_text(&adaptation.to),
        adaptation.predicted_to_ops_s,
        adaptation.observations,
    );
    if log(client, name, term, AdaptationEvent::Started, &adaptation).await {
        change(client, name, adaptation, term).await;
    }
}

/// Resumes an adaptation another driver left open, or abandons it ([`resumable`]).
async fn settle(client: &Client, space: &SpaceConfig, adaptation: Adaptation, term: u64) {
    let name = &space.schema.name;
    match resumable(&adaptation, &space.written_attribute_sets()) {
        Ok(()) => {
            eprintln!(
                "tessera adapt: space {name:?}: resuming {} -> {}",
                sets_text(&adaptation.from),
                sets_text(&adaptation.to)
            );
            if log(client, name, term, AdaptationEvent::Resumed, &adaptation).await {
                change(client, name, adaptation, term).await;
            }
        }
        Err(why) => {
            eprintln!("tessera adapt: space {name:?}: abandoning an adaptation: {why}");
            let abandoned = AdaptationEvent::Abandoned { why };
            log(client, name, term, abandoned, &adaptation).await;
        }
    }
}

/// Whether an open adaptation can go on: every subspace the space has now is one it came
/// from or one it goes to. Otherwise someone else changed the space meanwhile, and the reason
/// says how.
fn resumable(adaptation: &Adaptation, now: &[Vec<String>]) -> Result<(), String> {
    let strangers: Vec<Vec<String>> = now
        .iter()
        .filter(|s| !adaptation.from.contains(s) && !adaptation.to.contains(s))
        .cloned()
        .collect();
    if strangers.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the space's subspaces changed since it started: {} is in neither {} nor {}",
        sets_text(&strangers),
        sets_text(&adaptation.from),
        sets_text(&adaptation.to)
    ))
}

/// Makes the change, then logs it finished, or abandoned with the reason. The space is left
/// as far as the change got, and observed again from the next period.
async fn change(client: &Client, name: &str, adaptation: Adaptation, term: u64) {
    let report = |step: &serde_json::Value| -> Result<(), Failure> {
        eprintln!("tessera adapt: {step}");
        Ok(())
    };
    let done = alter::apply_with(
        client,
        name,
        &adaptation.to,
        Some(BUILD_WAIT),
        Some(term),
        report,
    )
    .await;
    let event = match done {
        Ok(()) => {
            eprintln!("tessera adapt: space {name:?}: adapted");
            AdaptationEvent::Finished
        }
        Err(e) => {
            let why = failure_text(&e);
            eprintln!("tessera adapt: space {name:?}: the change stopped: {why}");
            AdaptationEvent::Abandoned {
                why: bounded(why, ABANDON_WHY_MAX),
            }
        }
    };
    log(client, name, term, event, &adaptation).await;
}

/// Logs one step of an adaptation, fenced by `term`; false (and printed) if that failed.
async fn log(
    client: &Client,
    name: &str,
    term: u64,
    event: AdaptationEvent,
    adaptation: &Adaptation,
) -> bool {
    let step = AdaptationStep {
        term,
        event,
        adaptation: adaptation.clone(),
    };
    let logged = client
        .alter_space_fenced(name, SpaceChange::LogAdaptation(step), Some(term))
        .await;
    if let Err(e) = &logged {
        eprintln!("tessera adapt: space {name:?}: cannot log the adaptation: {e}");
    }
    logged.is_ok()
}

/// `text`'s first `max` bytes at most, cut at a character's boundary.
fn bounded(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
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

/// A logged step of an adaptation as `tessera status` shows it: `started at epoch 9 (term 2):
/// {city} -> {city, price} (predicted 1200 -> 2300 ops/s, 3 periods of 60 s running)`, and
/// for an abandoned one, why.
pub fn record_text(record: &AdaptationRecord) -> String {
    let a = &record.step.adaptation;
    let (event, why) = match &record.step.event {
        AdaptationEvent::Started => ("started", String::new()),
        AdaptationEvent::Resumed => ("resumed", String::new()),
        AdaptationEvent::Finished => ("finished", String::new()),
        AdaptationEvent::Abandoned { why } => ("abandoned", format!(": {why}")),
    };
    format!(
        "{event} at epoch {} (term {}): {} -> {} (predicted {} -> {} ops/s, {} periods of {} s running){why}",
        record.epoch,
        record.step.term,
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

    fn adaptation(from: &[&[&str]], to: &[&[&str]]) -> Adaptation {
        let sets = |sets: &[&[&str]]| -> Vec<Vec<String>> {
            sets.iter()
                .map(|s| s.iter().map(|a| a.to_string()).collect())
                .collect()
        };
        Adaptation {
            from: sets(from),
            to: sets(to),
            predicted_from_ops_s: 1200,
            predicted_to_ops_s: 2300,
            observations: 3,
            period_s: 60,
        }
    }

    #[test]
    fn a_logged_step_reads_as_a_sentence() {
        let record = |event| AdaptationRecord {
            epoch: 9,
            step: AdaptationStep {
                term: 2,
                event,
                adaptation: adaptation(&[], &[&["city", "price"], &["stars"]]),
            },
        };
        assert_eq!(
            record_text(&record(AdaptationEvent::Started)),
            "started at epoch 9 (term 2): (no subspace) -> {city, price} {stars} (predicted 1200 -> 2300 ops/s, 3 periods of 60 s running)"
        );
        let why = "the build failed".to_owned();
        assert!(record_text(&record(AdaptationEvent::Abandoned { why }))
            .starts_with("abandoned at epoch 9 (term 2): (no subspace) -> "));
        assert!(
            record_text(&record(AdaptationEvent::Abandoned { why: "x".into() }))
                .ends_with("running): x")
        );
    }

    /// An open adaptation goes on while every subspace the space has is one it comes from or
    /// goes to, whatever the order of the change's steps reached.
    #[test]
    fn an_open_adaptation_resumes_only_on_its_way() {
        let a = adaptation(&[&["city"], &["tel"]], &[&["city", "price"], &["tel"]]);
        let sets = |sets: &[&[&str]]| -> Vec<Vec<String>> {
            sets.iter()
                .map(|s| s.iter().map(|a| a.to_string()).collect())
                .collect()
        };
        for on_the_way in [
            sets(&[&["city"], &["tel"]]),
            sets(&[&["city"], &["tel"], &["city", "price"]]),
            sets(&[&["tel"], &["city", "price"]]),
            sets(&[&["tel"]]),
            vec![],
        ] {
            assert_eq!(resumable(&a, &on_the_way), Ok(()), "{on_the_way:?}");
        }
        let changed = sets(&[&["tel"], &["stars"]]);
        assert_eq!(
            resumable(&a, &changed),
            Err("the space's subspaces changed since it started: {stars} is in neither {city} {tel} nor {city, price} {tel}".into())
        );
    }

    #[test]
    fn a_reason_is_cut_at_a_character() {
        assert_eq!(bounded("abc", 5), "abc");
        assert_eq!(bounded("abcdef", 3), "abc");
        assert_eq!(bounded("aé", 2), "a"); // é is two bytes
    }
}
