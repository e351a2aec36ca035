//! What a fixed number of clients, each waiting for its answer before it asks again, get out of
//! the servers: the throughput of a closed loop, by exact mean value analysis (MVA) of a
//! closed queueing network with one class of requests.
//!
//! The model's costs are capacity: seconds of a server's CPU per operation. A closed loop of N
//! clients reaches that capacity only if N requests in flight keep the CPU busy; a write also
//! waits for the fsync that makes it durable, and every request spends the client's own CPU and
//! the network's time. The network here:
//!
//! * the servers' CPU, a queue: `server_s` per operation (averaged over the mix, divided by the
//!   cores serving);
//! * the client's CPU, a queue: `client_s` per operation;
//! * a delay every operation spends without a queue: `delay_s` per operation (the fsync wait of
//!   the writes among them, the network's round trip).
//!
//! MVA (Reiser and Lavenberg's recursion) is exact for such a network with exponential service
//! times: for n = 1 … N, R_k(n) = D_k · (1 + Q_k(n − 1)) at each queue k, X(n) = n / (Z + Σ R_k(n)),
//! Q_k(n) = X(n) · R_k(n). As N grows X tends to 1 / max D_k (capacity); with one client it is
//! 1 / (Z + Σ D_k).
//!
//! The fsync wait depends on the throughput (writes arriving during an fsync share the next
//! one: a group commit), so [`closed_loop`] solves for it by fixed-point iteration.

use serde::{Deserialize, Serialize};

/// Throughput of `clients` closed-loop clients through queues of the given demands (seconds
/// per operation) and a delay of `delay_s` per operation, exactly by MVA.
pub fn mean_value_analysis(clients: u32, queues: &[f64], delay_s: f64) -> f64 {
    let mut lengths = vec![0.0; queues.len()];
    let mut throughput = 0.0;
    for n in 1..=clients.max(1) {
        let residences: Vec<f64> = queues
            .iter()
            .zip(&lengths)
            .map(|(d, q)| d * (1.0 + q))
            .collect();
        throughput = f64::from(n) / (delay_s + residences.iter().sum::<f64>());
        for (q, r) in lengths.iter_mut().zip(&residences) {
            *q = throughput * r;
        }
    }
    throughput
}

/// What one operation of a mix asks of the servers, the disk and the client, on average.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MixDemands {
    /// Server CPU seconds per operation, fsyncs' share left out.
    pub server_s: f64,
    /// Fraction of the operations that are writes (each waits for an fsync).
    pub writes: f64,
    /// Client CPU seconds per operation.
    pub client_s: f64,
    /// Seconds per operation without a queue: the network's round trip.
    pub round_trip_s: f64,
}

/// The disk as the model sees it: how long an fsync takes, and the server CPU each costs (the
/// commit's fixed work: the syscall, waking the loop, releasing the answers).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Durability {
    pub fsync_s: f64,
    pub fsync_cpu_s: f64,
}

/// The steady state of a closed loop: its throughput, and what it implies.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClosedLoop {
    pub throughput_ops_s: f64,
    /// Writes per fsync (1 when writes arrive one at a time, more as they queue).
    pub writes_per_fsync: f64,
    /// Server CPU seconds per operation, the fsyncs' share included.
    pub server_s: f64,
    /// Fraction of the time the servers' CPU is busy.
    pub server_busy: f64,
}

/// The throughput of `clients` closed-loop clients running a mix of `demands` on servers
/// whose writes wait for `durability` (`None`: nothing is fsynced), with `cores` server cores.
///
/// Writes arriving at rate λ while fsyncs take t each are committed in groups: an fsync starts
/// when a write is waiting, and the writes that arrive meanwhile share the next, so a group
/// holds 1 + λ·t writes on average and the disk is busy λ·t / (1 + λ·t) of the time. A write
/// waits for its own fsync and, when it arrives during another, half of that one on average:
/// t · (1 + busy / 2). A write sees only the other clients' writes (the arrival theorem of
/// closed networks), so λ is the write rate times (N − 1) / N: one client fsyncs each write
/// alone. Each fsync costs the server `fsync_cpu_s`, shared by its group.
pub fn closed_loop(
    clients: u32,
    cores: f64,
    demands: &MixDemands,
    durability: Option<Durability>,
) -> ClosedLoop {
    let cores = cores.max(1e-3);
    let solve = |throughput: f64| {
        let (per_fsync, wait_s, fsync_cpu_s) = match durability {
            Some(d) if demands.writes > 0.0 => {
                // By the arrival theorem, a write sees the other N − 1 clients' traffic.
                let others = f64::from(clients.max(1) - 1) / f64::from(clients.max(1));
                let arrivals = demands.writes * throughput * others * d.fsync_s;
                let busy = arrivals / (1.0 + arrivals);
                (
                    1.0 + arrivals,
                    d.fsync_s * (1.0 + busy / 2.0),
                    d.fsync_cpu_s,
                )
            }
            _ => (1.0, 0.0, 0.0),
        };
        let server_s = demands.server_s + demands.writes * fsync_cpu_s / per_fsync;
        let delay_s = demands.round_trip_s + demands.writes * wait_s;
        let next = mean_value_analysis(clients, &[server_s / cores, demands.client_s], delay_s);
        (next, per_fsync, server_s)
    };
    // The throughput with every write fsynced alone is a lower bound; iterate from it,
    // damped, to the fixed point (the map is monotone in the throughput and contracting).
    let mut throughput = solve(0.0).0;
    let mut state = solve(throughput);
    for _ in 0..200 {
        let next = 0.5 * throughput + 0.5 * state.0;
        if (next - throughput).abs() <= 1e-9 * throughput.max(1.0) {
            break;
        }
        throughput = next;
        state = solve(throughput);
    }
    let (throughput, per_fsync, server_s) = state;
    ClosedLoop {
        throughput_ops_s: throughput,
        writes_per_fsync: per_fsync,
        server_s,
        server_busy: (throughput * server_s / cores).min(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance * b.abs().max(1e-12)
    }

    #[test]
    fn one_client_waits_for_every_step_in_turn() {
        let x = mean_value_analysis(1, &[10e-6, 5e-6], 85e-6);
        assert!(close(x, 1.0 / 100e-6, 1e-12), "{x}");
    }

    #[test]
    fn many_clients_saturate_the_busiest_queue() {
        let x = mean_value_analysis(10_000, &[10e-6, 5e-6], 85e-6);
        assert!(close(x, 1e5, 1e-3), "{x}");
        // Throughput never falls as clients are added, and never passes the capacity.
        let mut last = 0.0;
        for n in 1..64 {
            let x = mean_value_analysis(n, &[10e-6, 5e-6], 85e-6);
            assert!(x >= last && x <= 1e5 * (1.0 + 1e-9), "{n}: {x}");
            last = x;
        }
    }

    /// Two clients, one queue of demand D, no delay: by hand, R(1) = D, Q(1) = 1, R(2) = 2D,
    /// X(2) = 2 / 2D = 1 / D: the queue is always busy.
    #[test]
    fn two_clients_on_one_queue_keep_it_busy() {
        let x = mean_value_analysis(2, &[1e-3], 0.0);
        assert!(close(x, 1e3, 1e-12), "{x}");
        // With a delay Z = D: R(1) = D, X(1) = 1 / 2D, Q(1) = 1/2, R(2) = 1.5 D, X(2) = 2 / 2.5 D.
        let x = mean_value_analysis(2, &[1e-3], 1e-3);
        assert!(close(x, 2.0 / 2.5e-3, 1e-12), "{x}");
    }

    #[test]
    fn writes_group_their_fsyncs_as_they_queue() {
        let durability = Durability {
            fsync_s: 1e-3,
            fsync_cpu_s: 20e-6,
        };
        let writes = MixDemands {
            server_s: 20e-6,
            writes: 1.0,
            client_s: 5e-6,
            round_trip_s: 30e-6,
        };
        // One client: one write per fsync, each waiting the whole fsync and nothing else.
        let one = closed_loop(1, 1.0, &writes, Some(durability));
        let cycle = 20e-6 + 20e-6 + 5e-6 + 30e-6 + 1e-3;
        assert!(close(one.throughput_ops_s, 1.0 / cycle, 0.02), "{one:?}");
        assert!(one.writes_per_fsync < 1.1, "{one:?}");
        // Sixteen clients: most writes share an fsync, and the throughput is far higher, but
        // below 16 fsync-bound clients' and below the CPU's capacity.
        let many = closed_loop(16, 1.0, &writes, Some(durability));
        assert!(many.writes_per_fsync > 4.0, "{many:?}");
        assert!(
            many.throughput_ops_s > 8.0 * one.throughput_ops_s,
            "{many:?}"
        );
        assert!(many.throughput_ops_s < 16.0 / 1e-3, "{many:?}");
        assert!(
            many.throughput_ops_s * many.server_s <= 1.0 + 1e-9,
            "{many:?}"
        );
        // Without fsyncs the same clients run at the CPU's pace.
        let none = closed_loop(16, 1.0, &writes, None);
        assert!(none.throughput_ops_s > many.throughput_ops_s, "{none:?}");
    }

    #[test]
    fn a_workload_naming_its_clients_is_predicted_below_its_capacity_in_the_same_order() {
        use crate::{parse_workload, Calibration, Configuration, Model};
        let schema = tessera_types::parse_space(
            "space h key id attributes string city, string tel create 16 partitions",
        )
        .expect("schema");
        let text =
            "{\"p\": 0.8, \"search\": {\"city\": \"eq\"}}\n{\"p\": 0.2, \"update\": [\"tel\"]}\n";
        let open = parse_workload(text, &schema).expect("parses");
        let closed =
            parse_workload(&format!("{text}{{\"clients\": 4}}\n"), &schema).expect("parses");
        assert_eq!((open.clients(), closed.clients()), (None, Some(4)));
        let c = Calibration {
            fsync_cpu_s: 100e-6,
            ..Calibration::default()
        };
        let (open, closed) = (
            Model::new(&schema, &open, c).expect("model"),
            Model::new(&schema, &closed, c).expect("model"),
        );
        let city = schema.attribute_index("city").expect("city");
        let configurations = [
            Configuration::none(),
            Configuration::new(&schema, vec![vec![city]]).expect("ok"),
        ];
        let mut ranks = Vec::new();
        for configuration in &configurations {
            let (o, k) = (open.predict(configuration), closed.predict(configuration));
            assert_eq!(o.throughput_ops_s, o.capacity_ops_s);
            assert!(o.closed_loop.is_none());
            let l = k.closed_loop.expect("four clients make a closed loop");
            assert_eq!(k.capacity_ops_s, o.capacity_ops_s);
            assert!(k.throughput_ops_s < k.capacity_ops_s, "{k:?}");
            // The fsyncs' CPU is in the closed loop's, not in the capacity's cost.
            assert!(l.server_s > 1.0 / k.capacity_ops_s);
            ranks.push((o.throughput_ops_s, k.throughput_ops_s));
        }
        assert_eq!(ranks[0].0 < ranks[1].0, ranks[0].1 < ranks[1].1);
    }

    #[test]
    fn reads_only_ignore_the_disk() {
        let reads = MixDemands {
            server_s: 50e-6,
            writes: 0.0,
            client_s: 5e-6,
            round_trip_s: 30e-6,
        };
        let durability = Some(Durability {
            fsync_s: 1e-3,
            fsync_cpu_s: 20e-6,
        });
        assert_eq!(
            closed_loop(16, 1.0, &reads, durability),
            closed_loop(16, 1.0, &reads, None)
        );
        // Two cores halve the CPU's queue.
        let two = closed_loop(64, 2.0, &reads, None);
        assert!(close(two.throughput_ops_s, 40_000.0, 0.02), "{two:?}");
    }
}
