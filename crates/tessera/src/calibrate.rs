//! `tessera calibrate`: measures the performance model's constants on the running database
//! (seed 000 §4.5, §5.2.1). It creates three scratch spaces, loads them, runs short closed-loop
//! micro-workloads (gets; searches that contact 1 to all regions and return a few to all
//! objects; writes whose chains hold 0 or 2 subspaces, moving the object or not), fits the
//! constants with `tessera_advisor::fit`, drops the spaces and prints the constants with what
//! was measured, and keeps the constants with the configuration (`ModelConstants`), where
//! `tessera advise` finds them. `tessera advise --calibration FILE` uses what `--save FILE`
//! wrote instead.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_advisor::{fit, Calibration, Measurements, SearchMeasurement, WriteMeasurement};
use tessera_client::{Client, ModelConstants, Predicate, Value};

use crate::Failure;

/// The scratch spaces: `_s` for gets and searches, `_w0` and `_w2` for writes through no and
/// two subspaces. Every one holds its only copy on one server (K = 1): a chain hop is a server.
const SPACES: [(&str, &str); 3] = [
    (
        "tessera_calibrate_s",
        "key int k attributes int g10, int g100, string pad subspace g10 subspace g100, g10",
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
    }
}

/// The constants the configuration keeps, for the model.
pub fn from_model(m: &ModelConstants) -> Calibration {
    let s = |ns: u64| ns as f64 * 1e-9;
    Calibration {
        write_base_s: s(m.write_base_ns),
        write_hop_s: s(m.write_hop_ns),
        relocation_factor: m.relocation_factor_milli as f64 * 1e-3,
        get_s: s(m.get_ns),
        search_base_s: s(m.search_base_ns),
        search_region_s: s(m.search_region_ns),
        search_object_s: s(m.search_object_ns),
        search_skip_s: s(m.search_skip_ns),
    }
}

/// Runs the micro-workloads and fits the constants; returns them and the measurements.
pub async fn calibrate(
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
    let outcome = measure(client, options).await;
    for (name, _) in SPACES {
        let _ = client.rm_space(name).await;
    }
    let measurements = outcome?;
    let calibration = fit(&measurements, Calibration::default())
        .map_err(|e| Failure::Error(format!("the measurements give no constants: {e}")))?;
    Ok(serde_json::json!({ "calibration": calibration, "measurements": measurements }))
}

async fn measure(client: &Arc<Client>, options: CalibrateOptions) -> Result<Measurements, Failure> {
    load(client, options, |k| {
        (
            SPACES[0].0,
            vec![
                ("g10", Value::Int(k % 10)),
                ("g100", Value::Int(k % 100)),
                ("pad", Value::from("x")),
            ],
        )
    })
    .await?;
    for space in [SPACES[1].0, SPACES[2].0] {
        load(client, options, move |k| {
            (
                space,
                vec![
                    ("pad", Value::from("x")),
                    ("s1", Value::from(format!("a{k}"))),
                    ("s2", Value::from(format!("b{k}"))),
                ],
            )
        })
        .await?;
    }
    let mut m = Measurements::default();
    m.gets.push(
        closed_loop(client, options, |c, k| async move {
            c.get(SPACES[0].0, k).await.map(|_| ())
        })
        .await?,
    );
    // (predicates for object k): each search's regions from explain, its objects from a run.
    let searches: [fn(i64) -> Vec<Predicate>; 4] = [
        |k| vec![Predicate::equals("g10", k % 10)],
        |k| vec![Predicate::equals("g100", k % 100)],
        |k| {
            vec![
                Predicate::equals("g100", k % 100),
                Predicate::equals("g10", k % 10),
            ]
        },
        |_| vec![Predicate::equals("pad", "x")],
    ];
    for predicates in searches {
        let regions = client
            .explain(SPACES[0].0, predicates(1))
            .await?
            .regions_contacted as f64;
        let objects = client.search(SPACES[0].0, predicates(1)).await?.len() as f64;
        let throughput_ops_s = closed_loop(client, options, move |c, k| async move {
            c.search(SPACES[0].0, predicates(k)).await.map(|_| ())
        })
        .await?;
        m.searches.push(SearchMeasurement {
            regions,
            objects,
            skipped: 0.0,
            throughput_ops_s,
        });
    }
    // Writes: `pad` is in no subspace (nothing moves); `s1` and `s2` get new values (the object
    // moves in both subspaces of `_w2`, but for the 1 in 16 that hash to the same slice).
    let fresh = Arc::new(AtomicU64::new(0));
    for (space, subspaces, moved) in [
        (SPACES[1].0, 0, false),
        (SPACES[2].0, 2, false),
        (SPACES[2].0, 2, true),
    ] {
        let fresh = fresh.clone();
        let throughput_ops_s = closed_loop(client, options, move |c, k| {
            let v = fresh.fetch_add(1, Ordering::Relaxed);
            async move {
                if moved {
                    c.put(space, k, [("s1", format!("c{v}")), ("s2", format!("d{v}"))])
                        .await
                } else {
                    c.put(space, k, [("pad", format!("p{v}"))]).await
                }
            }
        })
        .await?;
        let (subspaces_unmoved, subspaces_moved) = if moved {
            (0, subspaces)
        } else {
            (subspaces, 0)
        };
        m.writes.push(WriteMeasurement {
            replicas: 1,
            subspaces_unmoved,
            subspaces_moved,
            throughput_ops_s,
        });
    }
    Ok(m)
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

/// Runs `op` on keys spread over the objects, `concurrency` at a time, for `seconds`; returns
/// the requests completed per second. Any error ends the calibration.
async fn closed_loop<F, Fut>(
    client: &Arc<Client>,
    options: CalibrateOptions,
    op: F,
) -> Result<f64, Failure>
where
    F: Fn(Arc<Client>, i64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), tessera_client::ClientError>> + Send,
{
    let op = Arc::new(op);
    let (done, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let started = Instant::now();
    let tasks: Vec<_> = (0..options.concurrency as u64)
        .map(|t| {
            let (client, op, done, stop) = (client.clone(), op.clone(), done.clone(), stop.clone());
            tokio::spawn(async move {
                let mut k = (t * 7919) as i64;
                while !stop.load(Ordering::Relaxed) {
                    k = (k + 104_729) % options.objects.max(1);
                    op(client.clone(), k).await?;
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
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}
