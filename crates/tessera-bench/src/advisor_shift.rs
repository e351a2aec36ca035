//! Workload `advisor-shift`: an adaptive space under a workload that changes (issue 9, item 6;
//! docs/advisor.md, "The workload shift"). The hotel space is created `adapt on` with the
//! advisor's configuration for the first workload (`--shift-from`, A-RH by default) and loaded;
//! the clients run that workload for `--shift-before-s`, then switch to the second
//! (`--shift-to`, D-RH: searches by postcode and by tel) for `--shift-after-s`, while the
//! server's adaptation driver (its `--adapt-period-s`) is expected to re-subspace the space.
//! Every second the operations finished and the space's configuration are sampled. After the
//! run every hotel is read back and compared with what the clients had acknowledged (no write
//! lost). Then two references for the second workload, each on a freshly loaded space that
//! does not adapt: the advisor's configuration for it (the best, as far as the model knows),
//! and the first workload's configuration (what the space would have kept without adapting).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tessera_advisor::{advise, parse_workload, AdvisorOptions, Calibration};
use tessera_client::{AdaptationRecord, Client};

use crate::advisor_eval::{
    canonical, check_absent, load_hotels, measure_once, median, run_mix, EvalRun, Measure,
    RunShared,
};
use crate::hotels::{
    base_schema, space_description, Attribute, Generations, HotelWorkload, Hotels, SPACE_NAME,
};
use crate::subspaces::mix;
use crate::target::client_error;
use crate::target::TargetError;

/// `tessera bench -w advisor-shift` options besides the common ones (`--records`: hotels;
/// `--threads`; `--partitions`; `--seed`; `--calibration` of advisor-eval: the constants the
/// first configuration is chosen with — give the ones the server keeps, which its driver uses).
#[derive(Clone, Debug, clap::Args)]
pub struct AdvisorShiftArgs {
    /// Workload advisor-shift: the workload run first (A-RH … C-WH, or D-RH, D-BAL, D-WH).
    #[arg(long, default_value = "A-RH")]
    pub shift_from: String,

    /// Workload advisor-shift: the workload the clients switch to.
    #[arg(long, default_value = "D-RH")]
    pub shift_to: String,

    /// Workload advisor-shift: seconds of the first workload.
    #[arg(long, default_value_t = 60.0)]
    pub shift_before_s: f64,

    /// Workload advisor-shift: seconds of the second workload, adaptation included.
    #[arg(long, default_value_t = 240.0)]
    pub shift_after_s: f64,

    /// Workload advisor-shift: seconds of each reference run of the second workload (the best
    /// configuration's runs at least as long as the adapted space's after-phase).
    #[arg(long, default_value_t = 30.0)]
    pub shift_reference_s: f64,
}

/// One second of the run.
#[derive(Clone, Debug, Serialize)]
pub struct ShiftSample {
    /// Seconds since the first workload started (end of this sample's second).
    pub t_s: f64,
    /// `from` or `to`: the workload the clients ran.
    pub workload: String,
    pub ops_s: f64,
    /// The space's written subspaces then, by attribute names (the key's left out).
    pub subspaces: Vec<Vec<String>>,
    /// A subspace being built then.
    pub building: bool,
}

/// The `advisor_shift` section of the report.
#[derive(Clone, Debug, Serialize)]
pub struct AdvisorShiftReport {
    pub hotels: u64,
    pub partitions: u32,
    pub threads: usize,
    pub seed: u64,
    pub calibration: Calibration,
    pub from: String,
    pub to: String,
    pub before_s: f64,
    pub after_s: f64,
    /// The advisor's configuration for each workload (the space starts with `start`).
    pub start: Vec<Vec<String>>,
    pub advised_for_to: Vec<Vec<String>>,
    /// The space's configuration at the end of the run.
    pub end: Vec<Vec<String>>,
    /// What the server's driver logged.
    pub adaptations: Vec<AdaptationRecord>,
    /// Seconds after the switch at which the space first had its end configuration with no
    /// build under way (none if it never changed).
    pub adapted_after_s: Option<f64>,
    /// Median operations a second: the first workload (its first 5 s left out), the second
    /// before the adaptation was complete, and after it (its first 5 s left out).
    pub before_ops_s: f64,
    pub during_ops_s: Option<f64>,
    pub after_ops_s: Option<f64>,
    /// The second workload on a fresh space with `advised_for_to`, and with `start`.
    pub reference_best: EvalRun,
    pub reference_start: EvalRun,
    /// after_ops_s / reference_best's throughput (target ≥ 0.9).
    pub after_vs_best: Option<f64>,
    /// Hotels read back after the run, and those whose attributes differed from what the
    /// clients had acknowledged (target 0).
    pub hotels_checked: u64,
    pub writes_lost: u64,
    pub timeline: Vec<ShiftSample>,
}

/// The options, checked.
#[derive(Clone, Debug)]
pub struct ShiftOptions {
    pub hotels: u64,
    pub partitions: u32,
    pub seed: u64,
    pub from: HotelWorkload,
    pub to: HotelWorkload,
    pub before: Duration,
    pub after: Duration,
    pub reference: Duration,
    pub calibration: Calibration,
}

/// The advisor's configuration for `workload` on the hotel data set.
pub fn advised(
    options: &ShiftOptions,
    workload: &HotelWorkload,
) -> Result<Vec<Vec<String>>, String> {
    let census = Hotels::new(options.hotels, options.seed).census();
    let schema = base_schema(options.partitions);
    let text = workload.workload_file(&census);
    let parsed = parse_workload(&text, &schema).map_err(|e| format!("{}: {e}", workload.name()))?;
    let advice = advise(
        &schema,
        &parsed,
        options.calibration,
        AdvisorOptions::default(),
    )
    .map_err(|e| format!("advising on {}: {e}", workload.name()))?;
    advice
        .clusters
        .first()
        .and_then(|c| c.configurations.first())
        .map(|p| p.subspaces.clone())
        .ok_or_else(|| format!("{}: the advisor ranks nothing", workload.name()))
}

/// The space's written subspaces (besides the key's) and whether one is being built.
async fn configuration_of(
    client: &Client,
) -> Result<(Vec<Vec<String>>, bool, Vec<AdaptationRecord>), TargetError> {
    let config = client.refresh().await.map_err(client_error)?;
    let space = config
        .space(SPACE_NAME)
        .ok_or_else(|| TargetError::Server(format!("space {SPACE_NAME} vanished")))?;
    let subspaces = space.written_attribute_sets();
    Ok((subspaces, space.build.is_some(), space.adaptations.clone()))
}

/// Reads every hotel back; returns how many differ from the acknowledged generations.
async fn lost_writes(
    client: &Client,
    hotels: &Hotels,
    generations: &Generations,
) -> Result<u64, TargetError> {
    let mut lost = 0;
    for n in 0..hotels.count() {
        let record = client
            .get(SPACE_NAME, Hotels::key(n))
            .await
            .map_err(client_error)?;
        let Some(record) = record else {
            lost += 1;
            continue;
        };
        let differs = Attribute::ALL.into_iter().any(|attr| {
            let want = hotels.value(n, attr, generations.get(n, attr));
            record.attributes.get(attr.name()) != Some(&want)
        });
        lost += u64::from(differs);
    }
    Ok(lost)
}

/// Medians of the per-second samples in [from, to) seconds.
fn median_between(timeline: &[ShiftSample], from: f64, to: f64) -> Option<f64> {
    let v: Vec<f64> = timeline
        .iter()
        .filter(|s| s.t_s > from && s.t_s <= to)
        .map(|s| s.ops_s)
        .collect();
    (!v.is_empty()).then(|| median(&v))
}

/// The I/O part.
pub(crate) async fn measure(
    settings: Measure,
    options: &ShiftOptions,
) -> Result<AdvisorShiftReport, TargetError> {
    check_absent(&settings.addr).await?;
    if options.hotels < settings.threads as u64 {
        return Err(TargetError::Unsupported(format!(
            "advisor-shift needs at least as many hotels (--records {}) as clients (--threads {})",
            options.hotels, settings.threads
        )));
    }
    let start = advised(options, &options.from).map_err(TargetError::Unsupported)?;
    let advised_for_to = advised(options, &options.to).map_err(TargetError::Unsupported)?;
    let hotels = Hotels::new(options.hotels, options.seed);
    let client = Client::connect(&settings.addr)
        .await
        .map_err(client_error)?;
    let description = format!(
        "{}\nadapt on\n",
        space_description(&start, options.partitions).trim_end()
    );
    client.add_space(&description).await.map_err(client_error)?;
    if let Err(e) = load_hotels(&client, &hotels, settings.threads, options.seed).await {
        let _ = client.rm_space(SPACE_NAME).await;
        return Err(e);
    }
    let generations = Arc::new(Generations::new(hotels.count()));
    let shared = |workload: &HotelWorkload| {
        Arc::new(RunShared {
            hotels: hotels.clone(),
            workload: workload.clone(),
            generations: Arc::clone(&generations),
            tasks: settings.threads as u64,
            finished: Default::default(),
        })
    };
    let (from_run, to_run) = (shared(&options.from), shared(&options.to));

    let started = Instant::now();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = spawn_sampler(
        client.clone(),
        [Arc::clone(&from_run), Arc::clone(&to_run)],
        Arc::clone(&stop),
        started,
        settings.progress,
    );
    run_mix(
        &client,
        &from_run,
        settings.threads,
        options.before,
        mix(options.seed ^ 0x5F),
    )
    .await;
    let switched_s = started.elapsed().as_secs_f64();
    run_mix(
        &client,
        &to_run,
        settings.threads,
        options.after,
        mix(options.seed ^ 0x7F),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let timeline = sampler
        .await
        .map_err(|e| TargetError::Protocol(format!("the sampler failed: {e}")))??;
    let (end, _, adaptations) = configuration_of(&client).await?;
    let writes_lost = lost_writes(&client, &hotels, &generations).await?;
    client.rm_space(SPACE_NAME).await.map_err(client_error)?;

    // When the space first had its end configuration, built, after the switch.
    let changed = canonical(&end) != canonical(&start);
    let adapted_at = timeline
        .iter()
        .filter(|s| s.t_s > switched_s && !s.building && canonical(&s.subspaces) == canonical(&end))
        .map(|s| s.t_s)
        .next()
        .filter(|_| changed);
    let end_s = started.elapsed().as_secs_f64();
    let before_ops_s = median_between(&timeline, 5.0, switched_s).unwrap_or(0.0);
    let during_ops_s = adapted_at.and_then(|a| median_between(&timeline, switched_s, a));
    let after_ops_s = adapted_at.and_then(|a| median_between(&timeline, a + 5.0, end_s));

    // The best configuration's reference runs as long as the adapted space's after-phase, so
    // that both include the same share of an LSM store's flushes and compactions (a short run
    // on a freshly loaded space sees the top of their saw-tooth only).
    let after_s = adapted_at.map_or(0.0, |a| end_s - (a + 5.0));
    let reference = |subspaces: Vec<Vec<String>>, salt: u64, at_least: f64| {
        let settings = Measure {
            duration: options
                .reference
                .max(Duration::from_secs_f64(at_least.max(0.0))),
            ..settings.clone()
        };
        let hotels = hotels.clone();
        let to = options.to.clone();
        async move {
            measure_once(
                &settings,
                &hotels,
                &to,
                &subspaces,
                options.partitions,
                mix(options.seed ^ salt),
            )
            .await
            .map(|(run, _)| run)
        }
    };
    let reference_best = reference(advised_for_to.clone(), 0xBE57, after_s).await?;
    let reference_start = reference(start.clone(), 0x57A7, 0.0).await?;
    let after_vs_best = after_ops_s.map(|a| a / reference_best.throughput_ops_s);
    Ok(AdvisorShiftReport {
        hotels: options.hotels,
        partitions: options.partitions,
        threads: settings.threads,
        seed: options.seed,
        calibration: options.calibration,
        from: options.from.name(),
        to: options.to.name(),
        before_s: options.before.as_secs_f64(),
        after_s: options.after.as_secs_f64(),
        start,
        advised_for_to,
        end,
        adaptations,
        adapted_after_s: adapted_at.map(|a| a - switched_s),
        before_ops_s,
        during_ops_s,
        after_ops_s,
        reference_best,
        reference_start,
        after_vs_best,
        hotels_checked: hotels.count(),
        writes_lost,
        timeline,
    })
}

/// Every second until `stop`: the operations the two runs finished since, and the space's
/// configuration.
fn spawn_sampler(
    client: Client,
    [from_run, to_run]: [Arc<RunShared>; 2],
    stop: Arc<std::sync::atomic::AtomicBool>,
    started: Instant,
    progress: bool,
) -> tokio::task::JoinHandle<Result<Vec<ShiftSample>, TargetError>> {
    tokio::spawn(async move {
        let mut timeline = Vec::new();
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        ticks.tick().await;
        let mut last = (0, started);
        while !stop.load(Ordering::Relaxed) {
            ticks.tick().await;
            let (f, t) = (
                from_run.finished.load(Ordering::Relaxed),
                to_run.finished.load(Ordering::Relaxed),
            );
            let now = Instant::now();
            let ops_s = (f + t - last.0) as f64 / now.duration_since(last.1).as_secs_f64();
            last = (f + t, now);
            let (subspaces, building, _) = configuration_of(&client).await?;
            let sample = ShiftSample {
                t_s: now.duration_since(started).as_secs_f64(),
                workload: if t > 0 { "to" } else { "from" }.into(),
                ops_s,
                subspaces,
                building,
            };
            if progress && timeline.len() % 10 == 0 {
                eprintln!(
                    "advisor-shift: {:.0} s, {}: {:.0} ops/s, subspaces {:?}{}",
                    sample.t_s,
                    sample.workload,
                    sample.ops_s,
                    sample.subspaces,
                    if sample.building { " (building)" } else { "" }
                );
            }
            timeline.push(sample);
        }
        Ok::<_, TargetError>(timeline)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> ShiftOptions {
        ShiftOptions {
            hotels: 2_000,
            partitions: 64,
            seed: 1,
            from: HotelWorkload::from_name("A-RH").unwrap(),
            to: HotelWorkload::from_name("D-RH").unwrap(),
            before: Duration::from_secs(1),
            after: Duration::from_secs(1),
            reference: Duration::from_secs(1),
            calibration: Calibration::default(),
        }
    }

    #[test]
    fn the_two_workloads_want_different_subspaces() {
        let o = options();
        let start = advised(&o, &o.from).unwrap();
        let to = advised(&o, &o.to).unwrap();
        assert_ne!(canonical(&start), canonical(&to), "{start:?} {to:?}");
        // D searches by postcode and by tel: its configuration serves both.
        let names: Vec<&str> = to.iter().flatten().map(String::as_str).collect();
        assert!(
            names.contains(&"postcode") && names.contains(&"tel"),
            "{to:?}"
        );
    }

    #[test]
    fn medians_take_the_samples_inside_the_window() {
        let sample = |t_s: f64, ops_s: f64| ShiftSample {
            t_s,
            workload: "from".into(),
            ops_s,
            subspaces: vec![],
            building: false,
        };
        let timeline = vec![
            sample(1.0, 10.0),
            sample(2.0, 20.0),
            sample(3.0, 30.0),
            sample(4.0, 40.0),
        ];
        assert_eq!(median_between(&timeline, 1.0, 3.0), Some(25.0));
        assert_eq!(median_between(&timeline, 0.0, 4.0), Some(25.0));
        assert_eq!(median_between(&timeline, 4.0, 9.0), None);
    }
}
