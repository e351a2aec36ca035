//! `tessera calibrate`: measures the performance model's constants on the running database
//! (seed 000 §4.5, §5.2.1). It creates four scratch spaces, loads them, runs short closed-loop
//! micro-workloads (gets; searches that contact 1 to all regions and return a few to all
//! objects; searches fixing some dimensions of two- and three-dimensional subspaces of hashed
//! strings, whose walk skips entries outside the box; writes whose chains hold 0 or 2
//! subspaces, moving the object or not; and searches and writes mixed, half each, for their
//! interference), fits the
//! constants with `tessera_advisor::fit`, drops the spaces and prints the constants with what
//! was measured, and keeps the constants with the configuration (`ModelConstants`), where
//! `tessera advise` finds them. `tessera advise --calibration FILE` uses what `--save FILE`
//! wrote instead.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::collections::BTreeSet;
use std::path::PathBuf;

use tessera_advisor::fit::{FsyncMeasurement, MixMeasurement, RunMeasurement};
use tessera_advisor::{
    fit, partial_match_entries, Calibration, ClassTerms, Measurements, SearchMeasurement,
    WriteMeasurement,
};
use tessera_client::{process_cpu_seconds, Client, ModelConstants, Predicate, Value, WorkDone};

use crate::failure::Failure;
use crate::stdio::print_line;
use crate::target::{connect, Target};

/// The scratch spaces: `_s` for gets and searches, `_m` for partial matches, `_w0` and `_w2`
/// for writes through no and two subspaces. Every one holds its only copy on one server
/// (K = 1): a chain hop is a server.
const SPACES: [(&str, &str); 4] = [
    (
        "tessera_calibrate_s",
        "key int k attributes int g10, int g100, string pad subspace g10 subspace g100, g10",
    ),
    (
        "tessera_calibrate_m",
        "key int k attributes string c, string u, string v, string w, string pad \
         subspace c, u subspace w, u, v",
    ),
    (
        "tessera_calibrate_w0",
        "key int k attributes string pad, string s1, string s2",
    ),
    (
        "tessera_calibrate_w2",
        "key int k attributes string pad, string s1, string s2 subspace s1 subspace s2",
    ),
];

// `tessera calibrate` (its help: `Command::Calibrate`).
#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// Objects loaded into each scratch space. Costs per object read grow with the store (the
    /// memtable, then tables and caches): the default is a store of some size that still
    /// loads in seconds.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(i64).range(100..=10_000_000))]
    objects: i64,
    /// Seconds each micro-workload runs.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    concurrency: u64,
    /// Also write the constants (JSON) to this file.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Do not keep the constants with the configuration.
    #[arg(long)]
    no_store: bool,
}

#[derive(Clone, Copy)]
pub struct CalibrateOptions {
    /// Objects loaded into each scratch space.
    pub objects: i64,
    /// How long each micro-workload runs.
    pub seconds: f64,
    /// Requests in flight at once.
    pub concurrency: usize,
}

/// The constants as the configuration keeps them: costs in whole nanoseconds, the relocation
/// factor in thousandths.
pub fn to_model(c: &Calibration) -> ModelConstants {
    let ns = |s: f64| (s * 1e9).round().max(0.0) as u64;
    ModelConstants {
        write_base_ns: ns(c.write_base_s),
        write_hop_ns: ns(c.write_hop_s),
        relocation_factor_milli: (c.relocation_factor * 1e3).round().max(0.0) as u64,
        get_ns: ns(c.get_s),
        search_base_ns: ns(c.search_base_s),
        search_region_ns: ns(c.search_region_s),
        search_object_ns: ns(c.search_object_s),
        search_skip_ns: ns(c.search_skip_s),
        fsync_ns: ns(c.fsync_s),
        fsync_cpu_ns: ns(c.fsync_cpu_s),
        client_ns: ns(c.client_s),
        client_object_ns: ns(c.client_object_s),
        round_trip_ns: ns(c.round_trip_s),
        server_cores_milli: (c.server_cores * 1e3).round().max(1e3) as u64,
        mix_interference_milli: (c.mix_interference * 1e3).round().max(0.0) as u64,
    }
}

/// `tessera calibrate`: the constants measured and fitted, kept with the configuration (unless
/// `--no-store`) and written to `--save`'s file, then printed with the measurements.
pub async fn calibrate(args: CalibrateArgs, target: &Target) -> Result<(), Failure> {
    let CalibrateArgs {
        objects,
        seconds,
        concurrency,
        save,
        no_store,
    } = args;
    if !(seconds > 0.0 && seconds <= 600.0) {
        return Err(Failure::Error(format!(
            "--seconds must be in (0, 600], not {seconds}"
        )));
    }
    let client = Arc::new(connect(target).await?);
    let options = CalibrateOptions {
        objects,
        seconds,
        concurrency: concurrency as usize,
    };
    let result = measure_on_scratch_spaces(&client, options).await?;
    if let Some(path) = save {
        std::fs::write(&path, result["calibration"].to_string())
            .map_err(|e| Failure::Error(format!("writing {}: {e}", path.display())))?;
    }
    if !no_store {
        let fitted: Calibration = serde_json::from_value(result["calibration"].clone())
            .map_err(|e| Failure::Error(format!("the fitted constants: {e}")))?;
        client.set_model(to_model(&fitted)).await?;
    }
    print_line(&result)
}

/// Runs the micro-workloads and fits the constants; returns them and the measurements.
async fn measure_on_scratch_spaces(
    client: &Arc<Client>,
    options: CalibrateOptions,
) -> Result<serde_json::Value, Failure> {
    for (name, _) in SPACES {
        // Left over from an interrupted run.
        let _ = client.rm_space(name).await;
    }
    for (name, body) in SPACES {
        client
            .add_space(&format!(
                "space {name} {body} create 16 partitions tolerate 0 failures"
            ))
            .await?;
    }
    let outcome = measure_and_fit(client, options).await;
    for (name, _) in SPACES {
        let _ = client.rm_space(name).await;
    }
    let (calibration, measurements) = outcome?;
    Ok(serde_json::json!({ "calibration": calibration, "measurements": measurements }))
}

/// Runs that a fit may refuse (a busy machine's noise can hide the cost a longer chain adds)
/// before calibrate gives up; each runs twice as long as the one before.
const MEASURE_ATTEMPTS: u32 = 3;

async fn measure_and_fit(
    client: &Arc<Client>,
    options: CalibrateOptions,
) -> Result<(Calibration, Measurements), Failure> {
    let mut options = options;
    for attempt in 1..=MEASURE_ATTEMPTS {
        let measurements = measure(client, options).await?;
        match fit(&measurements, Calibration::default()) {
            Ok(calibration) => return Ok((calibration, measurements)),
            Err(e) if attempt < MEASURE_ATTEMPTS => {
                options.seconds *= 2.0;
                eprintln!(
                    "tessera calibrate: the measurements give no constants ({e}); measuring again, {} s a workload",
                    options.seconds
                );
            }
            Err(e) => {
                return Err(Failure::Error(format!(
                    "the measurements give no constants after {MEASURE_ATTEMPTS} runs: {e} (is the machine busy?)"
                )))
            }
        }
    }
    unreachable!("the last attempt returns")
}

/// What every scratch object carries besides its coordinates, so that it is about the size
/// of a typical record (a hotel of the advisor's evaluation: six attributes, about 100 bytes):
/// a search's cost per object read is mostly decoding, filtering and sending it.
const PAD: &str =
    "calibration padding: about the bytes a typical record holds besides the attributes searched";

/// The middle of the `i`-th of `n` equal parts of the i64 axis: values spread so that the
/// axis's equal slices, where a new space cuts it, already fit them. Values 0..n instead would
/// all sit in one slice, and the re-cut driver of the database being calibrated would rebuild
/// the subspace under the measurements.
fn spread(i: i64, n: i64) -> i64 {
    let part = (1i128 << 64) / i128::from(n);
    (i128::from(i64::MIN) + part * i128::from(i) + part / 2) as i64
}

/// Object k of `_s`: g10 and g100 the (k mod 10)-th of 10 and (k mod 100)-th of 100 values
/// spread over the axis ([`spread`]), pad = [`PAD`].
fn object_s(k: i64) -> Vec<(&'static str, Value)> {
    vec![
        ("g10", Value::Int(spread(k % 10, 10))),
        ("g100", Value::Int(spread(k % 100, 100))),
        ("pad", Value::from(PAD)),
    ]
}

/// Object k of `_m`: c and w take 50 values each (k mod 50, k mod 47), u and v are unique.
fn object_m(k: i64) -> Vec<(&'static str, Value)> {
    vec![
        ("c", Value::from(format!("c{}", k % 50))),
        ("u", Value::from(format!("u{k}"))),
        ("v", Value::from(format!("v{k}"))),
        ("w", Value::from(format!("w{}", k % 47))),
        ("pad", Value::from(PAD)),
    ]
}

/// A search micro-workload: its space, how its objects are made, and the attributes it fixes
/// to the values of object k.
struct MicroSearch {
    space: &'static str,
    object: fn(i64) -> Vec<(&'static str, Value)>,
    fixes: &'static [&'static str],
}

impl MicroSearch {
    fn predicates(&self, k: i64) -> Vec<Predicate> {
        let object = (self.object)(k);
        self.fixes
            .iter()
            .map(|&name| {
                let (_, value) = object
                    .iter()
                    .find(|(a, _)| *a == name)
                    .expect("the search fixes an attribute of its objects");
                Predicate::equals(name, value.clone())
            })
            .collect()
    }
}

/// What a search for object k's values runs, as the server plans it (`explain`: the subspace
/// `choose_subspace` picks and the regions its box crosses), with what its walk reads, from
/// the objects loaded: the objects inside the box (those sharing k's values on the dimensions
/// the search fixes, not on all it fixes: a search can run in a subspace that leaves some of
/// its predicates to the filter) and the model's estimate of the entries skipped outside it.
async fn planned(
    client: &Arc<Client>,
    options: CalibrateOptions,
    search: &MicroSearch,
    k: i64,
) -> Result<(f64, f64, f64), Failure> {
    let explained = client.explain(search.space, search.predicates(k)).await?;
    let on_dimension = |object: &[(&'static str, Value)]| -> Vec<Value> {
        explained
            .dimensions
            .iter()
            .filter(|d| search.fixes.contains(&d.as_str()))
            .map(|d| {
                object
                    .iter()
                    .find(|(a, _)| a == d)
                    .map(|(_, v)| v.clone())
                    .expect("a dimension is an attribute")
            })
            .collect()
    };
    let wanted = on_dimension(&(search.object)(k));
    let mut in_box = 0u64;
    let mut points = BTreeSet::new();
    for j in 0..options.objects {
        let object = (search.object)(j);
        if on_dimension(&object) == wanted {
            in_box += 1;
        }
        let point: Vec<Value> = explained
            .dimensions
            .iter()
            .filter_map(|d| object.iter().find(|(a, _)| a == d).map(|(_, v)| v.clone()))
            .collect();
        points.insert(point);
    }
    let regions = explained.regions_contacted as f64;
    let dimensions = explained.dimensions.len();
    let open = explained
        .dimensions
        .iter()
        .filter(|d| !search.fixes.contains(&d.as_str()))
        .count();
    // The key subspace (a region read whole) has no Z-order walk. The hashed dimensions of
    // `_m` fill every region; the int ones of `_s` are only ever fixed or alone (open = 0, or
    // dimensions = 1), where the estimate is 0 anyway.
    let is_key = explained.subspace.get() == 0;
    let all_regions = explained.subspace_regions.max(1) as f64;
    let objects = options.objects as f64;
    let skipped = if is_key {
        0.0
    } else {
        let held = objects * regions / all_regions;
        partial_match_entries(
            regions,
            objects.min(points.len() as f64) / all_regions,
            open,
            dimensions,
        )
        .min((held - in_box as f64).max(0.0))
    };
    Ok((regions, in_box as f64, skipped))
}

async fn measure(client: &Arc<Client>, options: CalibrateOptions) -> Result<Measurements, Failure> {
    load(client, options, |k| (SPACES[0].0, object_s(k))).await?;
    load(client, options, |k| (SPACES[1].0, object_m(k))).await?;
    for space in [SPACES[2].0, SPACES[3].0] {
        load(client, options, move |k| {
            (
                space,
                vec![
                    ("pad", Value::from(PAD)),
                    ("s1", Value::from(format!("a{k}"))),
                    ("s2", Value::from(format!("b{k}"))),
                ],
            )
        })
        .await?;
    }
    let mut m = Measurements::default();
    let get = |c: Arc<Client>, k| async move {
        c.get(SPACES[0].0, k)
            .await
            .map(|found| u64::from(found.is_some()))
    };
    let gets = closed_loop(client, options, options.concurrency, get).await?;
    m.gets.push(gets.server_s());
    // One client alone: what a request spends in neither side's CPU.
    let alone = closed_loop(client, options, 1, get).await?;
    m.round_trips_s
        .push(alone.latency_s() - alone.server_s() - alone.client_s());
    for run in [&gets, &alone] {
        m.runs.push(run.observed());
    }
    // Searches in `_s` (the regions as `explain` gives them): g10 in {g10}, 1 region reading
    // 10 %; g100 in {g100, g10}, 4 regions (g10 left open) reading 1 %; `g100 = v and g10 = v`
    // (which runs in {g10}: both subspaces cross one region, and the rule then takes fewer
    // dimensions, so it reads 10 %); and all 16 regions (pad is no dimension). In `_m`: c
    // fixed in {c, u} (4 regions, one of 2 dimensions open), w in {w, u, v} (two of 3 open),
    // w and u (one of 3 open, or c open in {c, u}: whichever the server picks), and a point.
    let (s, m_) = (SPACES[0].0, SPACES[1].0);
    let searches: Vec<MicroSearch> = [
        (s, object_s as fn(i64) -> _, &["g10"][..]),
        (s, object_s, &["g100"]),
        (s, object_s, &["g100", "g10"]),
        (s, object_s, &["pad"]),
        (m_, object_m, &["c"]),
        (m_, object_m, &["w"]),
        (m_, object_m, &["w", "u"]),
        (m_, object_m, &["w", "u", "v"]),
    ]
    .into_iter()
    .map(|(space, object, fixes)| MicroSearch {
        space,
        object,
        fixes,
    })
    .collect();
    for search in searches {
        // The terms of one search, the same for every k but for the sizes of c's and w's
        // groups (k mod 50 and k mod 47 differ by one object at most).
        let (regions, objects, skipped) = planned(client, options, &search, 1).await?;
        let search = Arc::new(search);
        let run = closed_loop(client, options, options.concurrency, move |c, k| {
            let search = search.clone();
            async move {
                c.search(search.space, search.predicates(k))
                    .await
                    .map(|found| found.len() as u64)
            }
        })
        .await?;
        m.runs.push(run.observed());
        m.searches.push(SearchMeasurement {
            regions,
            objects,
            skipped,
            server_s: run.server_s(),
        });
    }
    // Writes: `pad` is in no subspace (nothing moves); `s1` and `s2` get new values (the object
    // moves in both subspaces of `_w2`, but for the 1 in 16 that hash to the same slice). The
    // chain of one alone, one client: every write fsynced by itself, which tells an fsync's CPU
    // from the write's.
    let fresh = Arc::new(AtomicU64::new(0));
    for (space, subspaces, moved, concurrency) in [
        (SPACES[2].0, 0, false, options.concurrency),
        (SPACES[2].0, 0, false, 1),
        (SPACES[3].0, 2, false, options.concurrency),
        (SPACES[3].0, 2, true, options.concurrency),
    ] {
        let fresh = fresh.clone();
        let run = closed_loop(client, options, concurrency, move |c, k| {
            let v = fresh.fetch_add(1, Ordering::Relaxed);
            async move {
                let written = if moved {
                    c.put(space, k, [("s1", format!("c{v}")), ("s2", format!("d{v}"))])
                        .await
                } else {
                    c.put(space, k, [("pad", format!("p{v}"))]).await
                };
                written.map(|()| 0)
            }
        })
        .await?;
        let (subspaces_unmoved, subspaces_moved) = if moved {
            (0, subspaces)
        } else {
            (subspaces, 0)
        };
        m.runs.push(run.observed());
        m.fsyncs.push(FsyncMeasurement {
            fsyncs: run.work.fsyncs,
            seconds: run.work.fsync_s,
        });
        m.writes.push(WriteMeasurement {
            replicas: 1,
            subspaces_unmoved,
            subspaces_moved,
            server_s: run.server_s(),
            fsyncs_per_write: run.work.fsyncs / run.operations.max(1) as f64,
        });
    }
    let (mix, run) = measure_mix(client, options, fresh).await?;
    m.mixes.push(mix);
    m.runs.push(run);
    Ok(m)
}

/// Searches and writes mixed, half each, in `_s`: the search by g10 (one region, a tenth of
/// the objects) and a write of `pad` (a chain of the key's and both subspaces' servers,
/// moving nothing). Keys alternate in parity from one request of a worker to its next, so
/// each worker alternates too.
async fn measure_mix(
    client: &Arc<Client>,
    options: CalibrateOptions,
    fresh: Arc<AtomicU64>,
) -> Result<(MixMeasurement, RunMeasurement), Failure> {
    let search = Arc::new(MicroSearch {
        space: SPACES[0].0,
        object: object_s,
        fixes: &["g10"],
    });
    let (regions, objects, skipped) = planned(client, options, &search, 1).await?;
    let run = closed_loop(client, options, options.concurrency, move |c, k| {
        let (search, v) = (search.clone(), fresh.fetch_add(1, Ordering::Relaxed));
        async move {
            if k % 2 == 0 {
                let found = c.search(search.space, search.predicates(k)).await?;
                Ok(found.len() as u64)
            } else {
                c.put(SPACES[0].0, k, [("pad", format!("p{v}"))]).await?;
                Ok(0)
            }
        }
    })
    .await?;
    let searched = ClassTerms::Search {
        subspace: vec!["g10".into()],
        subspace_index: 1,
        regions_contacted: regions,
        objects_read: objects,
        objects_matched: objects,
        entries_skipped: skipped,
    };
    let written = ClassTerms::Update {
        chain_length: 3.0,
        subspaces_relocated: 0.0,
    };
    let writes = (run.operations as f64 / 2.0).max(1.0);
    let mix = MixMeasurement {
        classes: vec![(0.5, searched), (0.5, written)],
        fsyncs_per_write: run.work.fsyncs / writes,
        server_s: run.server_s(),
    };
    Ok((mix, run.observed()))
}

/// Puts objects 0..objects, `concurrency` at a time.
async fn load<F>(client: &Arc<Client>, options: CalibrateOptions, object: F) -> Result<(), Failure>
where
    F: Fn(i64) -> (&'static str, Vec<(&'static str, Value)>) + Send + Sync + 'static,
{
    let object = Arc::new(object);
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..options.concurrency)
        .map(|_| {
            let (client, object, next) = (client.clone(), object.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed) as i64;
                    if k >= options.objects {
                        return Ok::<(), Failure>(());
                    }
                    let (space, attributes) = object(k);
                    client.put(space, k, attributes).await?;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await
            .map_err(|e| Failure::Error(format!("a loader failed: {e}")))??;
    }
    Ok(())
}

/// What one micro-workload did: its operations and their latency, the objects they returned,
/// the servers' work and this client's CPU over it.
struct Run {
    operations: u64,
    elapsed_s: f64,
    latency_total_s: f64,
    returned: u64,
    work: WorkDone,
    client_cpu_s: f64,
}

impl Run {
    fn per_operation(&self, total: f64) -> f64 {
        total / self.operations.max(1) as f64
    }

    /// Server CPU seconds per operation.
    fn server_s(&self) -> f64 {
        self.per_operation(self.work.cpu_s)
    }

    fn client_s(&self) -> f64 {
        self.per_operation(self.client_cpu_s)
    }

    fn latency_s(&self) -> f64 {
        self.per_operation(self.latency_total_s)
    }

    /// What every run tells of the client's cost and of the servers' cores.
    fn observed(&self) -> RunMeasurement {
        RunMeasurement {
            returned: self.per_operation(self.returned as f64),
            client_s: self.client_s(),
            server_busy: self.work.cpu_s / self.elapsed_s.max(1e-9),
        }
    }
}

/// The servers' work so far (CPU, commits, fsyncs), every server's, from their trace.
async fn work_now(client: &Client) -> Result<WorkDone, Failure> {
    Ok(WorkDone::of(&client.trace(SPACES[0].0, 1).await?.work))
}

/// Runs `op` (returning the objects it found) on keys spread over the objects, `concurrency`
/// at a time, for `seconds`. Any error ends the calibration.
async fn closed_loop<F, Fut>(
    client: &Arc<Client>,
    options: CalibrateOptions,
    concurrency: usize,
    op: F,
) -> Result<Run, Failure>
where
    F: Fn(Arc<Client>, i64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<u64, tessera_client::ClientError>> + Send,
{
    let op = Arc::new(op);
    let (done, returned, latency_ns, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let work_before = work_now(client).await?;
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency as u64)
        .map(|t| {
            let (client, op, stop) = (client.clone(), op.clone(), stop.clone());
            let (done, returned, latency_ns) = (done.clone(), returned.clone(), latency_ns.clone());
            tokio::spawn(async move {
                let mut k = (t * 7919) as i64;
                while !stop.load(Ordering::Relaxed) {
                    k = (k + 104_729) % options.objects.max(1);
                    let asked = Instant::now();
                    let found = op(client.clone(), k).await?;
                    latency_ns.fetch_add(asked.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    returned.fetch_add(found, Ordering::Relaxed);
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<(), Failure>(())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(options.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await
            .map_err(|e| Failure::Error(format!("a worker failed: {e}")))??;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let client_cpu_s = process_cpu_seconds() - cpu_before;
    let work = work_now(client).await?.minus(&work_before);
    Ok(Run {
        operations: done.load(Ordering::Relaxed),
        elapsed_s,
        latency_total_s: latency_ns.load(Ordering::Relaxed) as f64 * 1e-9,
        returned: returned.load(Ordering::Relaxed),
        work,
        client_cpu_s,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn spread_values_fall_in_equal_parts_of_the_axis() {
        let values: Vec<i64> = (0..10).map(|i| super::spread(i, 10)).collect();
        assert!(values.windows(2).all(|w| w[0] < w[1]));
        let part = (1i128 << 64) / 10;
        for (i, v) in values.iter().enumerate() {
            let offset = i128::from(*v) - i128::from(i64::MIN);
            assert_eq!(offset / part, i as i128, "{v}");
        }
        assert!(values[0] < 0 && values[9] > 0);
    }
}
