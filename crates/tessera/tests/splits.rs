//! Key regions that split under load: an ordered space on a real cluster (three coordinator
//! and four server processes, every region on two servers), clients writing and reading its
//! keys without pause while its key regions split three times and the coordinators move the
//! new regions by state transfer. Nothing is lost: the recorded history is linearizable
//! (Porcupine, tools/lincheck), and at the end gets, a search, a count, a range read and the
//! regions' own counts agree, with every key in the region the final configuration puts it in.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{
    admin_with_space, assert_did_work, assert_linearizable, final_state_agrees, lincheck, runtime,
    start_workers, value_of, Cluster, KEYS,
};
use tessera_client::{Client, ClientError, Status, Value};

/// The workers' space ([`common::cluster::SPACE`]) with its keys in order. Keys 0..8 all lie
/// in the upper of its two equal slices (region 1) until it splits.
const ORDERED_SPACE: &str = "space kv key int k attributes int v subspace v create 2 partitions tolerate 1 failure placement ordered";
const WORKERS: u64 = 6;
const RUN_FOR: Duration = Duration::from_secs(6);

/// The splits made while the workers run, in order: (region, first key of the new region).
/// Region 1 [0, ∞) splits at 4 (region 2 = [4, ∞)), then at 2 (region 3 = [2, 4)), then
/// region 2 at 6 (region 4 = [6, ∞)).
const SPLITS: [(u32, i64); 3] = [(1, 4), (1, 2), (2, 6)];

/// Each key's region once every split is made, from the ranges above (written out, not
/// computed by the geometry under test).
fn final_region(key: i64) -> u32 {
    match key {
        ..=1 => 1,
        2..=3 => 3,
        4..=5 => 2,
        _ => 4,
    }
}

#[test]
fn key_regions_split_under_concurrent_writes_and_lose_nothing() {
    let checker = lincheck();
    let cluster = Cluster::start(3, 4, &["--split-period-s", "0"]);
    let runtime = runtime();
    let history = runtime.block_on(async {
        let admin = admin_with_space(&cluster, ORDERED_SPACE).await;
        let (started, tasks) = start_workers(&cluster, WORKERS, RUN_FOR).await;
        // The splits, spread over the run; one refused because its region is still gaining
        // a replica (the coordinators' balancing moves regions after each split) is retried.
        for (n, (region, at)) in SPLITS.into_iter().enumerate() {
            tokio::time::sleep_until((started + RUN_FOR * (n as u32 + 1) / 4).into()).await;
            loop {
                match admin.split_key_region("kv", region, Value::Int(at)).await {
                    Ok(()) => break,
                    Err(e)
                        if e.status() == Some(Status::BadAlteration)
                            && e.to_string().contains("state transfer") =>
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => panic!("splitting region {region} at {at}: {e}"),
                }
            }
            // A range read in the middle of it all returns keys in order, each once.
            let range = read_range(&admin).await;
            let keys: Vec<i64> = range.iter().map(|(k, _)| *k).collect();
            assert!(
                keys.windows(2).all(|w| w[0] < w[1]),
                "keys in order, each once: {keys:?}"
            );
        }
        let mut history = Vec::new();
        for t in tasks {
            history.extend(t.await.expect("a worker panicked"));
        }
        // Every key read by key, one search and a count agree ...
        let gets = final_state_agrees(&admin).await;
        // ... and so does a range read of every key, in key order ...
        let range = read_range(&admin).await;
        assert_eq!(range, gets.clone().into_iter().collect::<Vec<_>>());
        // ... and the regions' own counts, once the moves are over: every key is where the
        // final ranges put it, and nowhere else.
        let config = admin.refresh().await.expect("configuration");
        let space = config.space("kv").expect("the space");
        assert_eq!(space.schema.key_splits.len(), SPLITS.len());
        assert_eq!(
            space.replicas[0].len(),
            2 + SPLITS.len(),
            "a region per split"
        );
        let mut expected = vec![0u64; 2 + SPLITS.len()];
        for key in gets.keys() {
            expected[final_region(*key) as usize] += 1;
        }
        let loads = wait_for_loads(&admin, expected.len()).await;
        let counted: Vec<u64> = loads.iter().map(|l| l.objects).collect();
        assert_eq!(counted, expected, "objects per key region");
        history
    });
    assert_did_work(&history, 200, 50);
    assert_linearizable(&checker, &history, "splits");
    drop(cluster);
}

/// Every key of `kv` with its value, by a range read of the whole key range.
async fn read_range(admin: &Client) -> Vec<(i64, i64)> {
    let records = admin
        .get_by_range("kv", Value::Int(-1), Value::Int(KEYS), None)
        .await
        .expect("get_by_range");
    records
        .iter()
        .map(|r| match &r.key {
            Value::Int(k) => (*k, value_of(r)),
            other => panic!("int keys, got {other:?}"),
        })
        .collect()
}

/// The loads of all `regions` key regions, once every region's leader answers for it.
async fn wait_for_loads(admin: &Client, regions: usize) -> Vec<tessera_client::KeyRegionLoad> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match admin.key_region_loads("kv").await {
            Ok(loads) if loads.len() == regions => return loads,
            Ok(_) | Err(ClientError::Io(_) | ClientError::ConnectionClosed) => {}
            Err(e) if e.status() == Some(Status::StaleEpoch) => {}
            Err(e) => panic!("key region loads: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "every key region's leader answers"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
