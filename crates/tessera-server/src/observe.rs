//! What a server tells its metrics, through the `metrics` facade; the `tessera` binary renders
//! them as Prometheus text on its `--http` port. Every series carries the server's id, so that
//! the servers of one process (`tessera dev --servers N`) stay apart.
//!
//! Counters and histograms are recorded as things happen (requests, group commits, chains,
//! searches);
//! gauges of what the server holds (regions, entries, connections) are set by
//! [`Meter::publish`], which the binary calls just before each scrape.

use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram, SharedString};
use tessera_protocol::{Configuration, Response, Status};
use tessera_storage::Store;
use tessera_types::ServerId;

/// Whether an error answer refuses the request (bad input, no right, unavailable, ...), as
/// opposed to answering it: no object, or a condition that did not hold.
pub fn refusal(status: Status) -> bool {
    !matches!(status, Status::NotFound | Status::CmpFail)
}

/// A server's handle on its metrics (cheap to clone: every reply carries one).
#[derive(Clone, Debug)]
pub struct Meter(std::sync::Arc<Labels>);

#[derive(Debug)]
pub struct Labels {
    server: SharedString,
    me: ServerId,
}

impl std::ops::Deref for Meter {
    type Target = Labels;

    fn deref(&self) -> &Labels {
        &self.0
    }
}

impl Meter {
    pub fn new(me: ServerId) -> Meter {
        Meter(std::sync::Arc::new(Labels {
            server: SharedString::from(me.0.to_string()),
            me,
        }))
    }

    /// A request answered: by operation and status (`OK` or the error's symbol), and how
    /// long it took from its frame's arrival. A refused request is logged, with its cause.
    pub fn request(&self, operation: &'static str, response: &Response, started: Instant) {
        let status = match response {
            Response::Error(e) => {
                // A client's first request asks which kind of daemon it reached: a server's
                // refusal of `coordinator_status` is that answer, not worth a line.
                if refusal(e.status) && operation != "coordinator_status" {
                    tracing::info!(server = self.me.0, op = operation, status = e.status.symbol(), cause = %e.message, "request refused");
                }
                e.status.symbol()
            }
            _ => "OK",
        };
        counter!("tessera_requests_total", "server" => self.server.clone(), "op" => operation, "status" => status)
            .increment(1);
        histogram!("tessera_request_seconds", "server" => self.server.clone(), "op" => operation)
            .record(started.elapsed().as_secs_f64());
    }

    /// A group commit: the object writes it made durable together, and how long the commit
    /// (its fsync included) took.
    pub fn group_commit(&self, writes: usize, took: Duration) {
        histogram!("tessera_group_commit_writes", "server" => self.server.clone())
            .record(writes as f64);
        histogram!("tessera_group_commit_seconds", "server" => self.server.clone())
            .record(took.as_secs_f64());
    }

    /// A chain this server started as a point leader, by its hops (one per region a write
    /// visits, over every subspace: docs/design.md §5).
    pub fn chain(&self, hops: usize) {
        histogram!("tessera_chain_hops", "server" => self.server.clone()).record(hops as f64);
    }

    /// A search this server ran: the regions it reads (a cluster client's share, or every region
    /// the search crosses on a standalone server).
    pub fn search(&self, regions: usize) {
        histogram!("tessera_search_regions", "server" => self.server.clone())
            .record(regions as f64);
    }

    /// Envelopes waiting to be sent to peer `to`.
    pub fn link_backlog(&self, to: ServerId, envelopes: usize) {
        gauge!("tessera_link_backlog", "server" => self.server.clone(), "peer" => to.0.to_string())
            .set(envelopes as f64);
    }

    /// A client connection opened (+1) or closed (-1).
    pub fn connections(&self, delta: f64) {
        gauge!("tessera_connections", "server" => self.server.clone()).increment(delta);
    }

    /// Sets the gauges of what the server holds: regions (replicas) per space and subspace
    /// under `config`, and the entries each subspace's store holds.
    pub fn publish(&self, config: &Configuration, store: &Store) {
        for space in &config.spaces {
            for (n, regions) in space.replicas.iter().enumerate() {
                let held = regions.iter().filter(|set| set.contains(&self.me)).count();
                gauge!("tessera_regions", "server" => self.server.clone(), "space" => space.schema.name.clone(), "subspace" => n.to_string())
                    .set(held as f64);
            }
        }
        for (space, subspaces) in store.entries_estimate() {
            for (subspace, entries) in subspaces {
                gauge!("tessera_entries", "server" => self.server.clone(), "space" => space.clone(), "subspace" => subspace.0.to_string())
                    .set(entries as f64);
            }
        }
        gauge!("tessera_epoch", "server" => self.server.clone()).set(config.epoch.0 as f64);
    }
}
