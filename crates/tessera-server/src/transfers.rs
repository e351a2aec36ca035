//! Telling the coordinators that state transfers into this server are complete, and that key
//! regions it leads are backfilled into a subspace being built (`tessera_protocol::Build`).
//! Both go the same way, as [`Report`]s; what follows says "transfer" for either.
//!
//! The chain loop learns it when the writes of a transfer's last chunk are durable
//! (`Outputs::transfers_done`, at most once per transfer and process). It must never wait on
//! the network, so it hands each report to [`report_transfers`], a task of its own, through an
//! unbounded channel ([`TransferReports`]; a transfer is reported once, and a server is the
//! target of a few at a time, so the channel stays small). The task sends
//! `Request::TransfersDone` to the coordinators, any one of them (a follower forwards it to
//! the leader), and keeps a report until a coordinator accepts it (`Done`: applied, or it named
//! nothing any more) or the configuration this server acts on no longer lists the transfer
//! (completed, an answer having been lost; or cancelled: its source or this server left the
//! region), a configuration at least as new as the transfer ([`may_be_under_way`]). Until then it retries, on every coordinator in turn, backing off to
//! [`RETRY_MAX`], with every report it holds in one request.
//!
//! A report is lost with the process that made it: harmless, since the coordinators take a
//! restarted server out of every replica set, its transfers with it.

use std::time::Duration;

use tessera_geometry::RegionIndex;
use tessera_protocol::{BackfillRef, Configuration, Request, Response, Status, TransferRef};
use tessera_types::ServerId;
use tokio::sync::mpsc;

use crate::coordination::Coordinators;
use crate::lease::Link;

/// First wait before trying the coordinators again after none accepted.
const RETRY_MIN: Duration = Duration::from_millis(100);
/// How long a backfill report waits for the next ones before it is sent with them.
const BACKFILL_REPORTS_GATHERED: Duration = Duration::from_millis(250);
/// Longest wait between two rounds of tries.
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How long one coordinator has to answer: a follower forwards the report to the leader (up to
/// 5 s) and waits to apply it itself (up to 2 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What the coordinators must hear of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Report {
    /// A state transfer into this server is complete.
    Transfer(TransferRef),
    /// This server finished backfilling a key region it leads.
    Backfill(BackfillRef),
}

/// The chain loop's end of the reports: hands them over without waiting. A standalone server
/// has nobody to report to (it makes no transfers, and records its backfills itself).
pub struct TransferReports(Option<mpsc::UnboundedSender<Report>>);

impl TransferReports {
    /// Reports for [`report_transfers`], which gets the other end.
    pub fn channel() -> (TransferReports, mpsc::UnboundedReceiver<Report>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (TransferReports(Some(tx)), rx)
    }

    /// Reports that go nowhere: a standalone server's.
    pub fn none() -> TransferReports {
        TransferReports(None)
    }

    /// Queues `done` for the coordinators. Never blocks.
    pub fn send(&self, done: Report) {
        match &self.0 {
            Some(tx) => {
                if tx.send(done).is_err() {
                    // The task stopped: the server is shutting down, or is an earlier
                    // incarnation the coordinators no longer listen to.
                    tracing::debug!(
                        ?done,
                        "transfer report dropped: nobody reports to the coordinators any more"
                    );
                }
            }
            None => tracing::debug!(
                ?done,
                "transfer report dropped: a standalone server has no coordinators"
            ),
        }
    }
}

/// Whether what `report` names may still be unrecorded as far as `config` knows (see
/// [`transfer_under_way`] and [`backfill_under_way`]).
pub fn may_be_under_way(config: &Configuration, me: ServerId, report: &Report) -> bool {
    match report {
        Report::Transfer(done) => transfer_under_way(config, me, done),
        Report::Backfill(done) => backfill_under_way(config, done),
    }
}

/// Whether the backfill `done` names may be unrecorded as far as `config` knows: `config` is
/// older than the build, or its build is that one and lacks the region.
pub fn backfill_under_way(config: &Configuration, done: &BackfillRef) -> bool {
    config.epoch.0 < done.since
        || config
            .spaces
            .iter()
            .find(|s| s.id == done.space)
            .and_then(|s| s.build.as_ref())
            .is_some_and(|b| {
                (b.subspace, b.since) == (done.subspace, done.since)
                    && b.done.binary_search(&done.region).is_err()
            })
}

/// Whether the transfer `done` names, into `me`, may still be under way as far as `config`
/// knows: `config` lists it, or is older than the epoch that started it. The chain loop
/// learns of a configuration before the connections' view does (it steps the state machine
/// with it, commits what that produced, and only then swaps the view), and a transfer can
/// complete in that commit (chunks that came before the configuration): a view older than
/// the transfer says nothing about it.
pub fn transfer_under_way(config: &Configuration, me: ServerId, done: &TransferRef) -> bool {
    config.epoch.0 < done.id
        || config
            .spaces
            .iter()
            .find(|s| s.id == done.space)
            .and_then(|s| s.transfer_at(done.subspace, RegionIndex(done.region)))
            .is_some_and(|t| t.id == done.id && t.to == me)
}

/// What the coordinators made of one round of tries.
enum Outcome {
    /// A coordinator answered `Done`.
    Accepted,
    /// They know a newer incarnation of this server: this process is an earlier one, and
    /// nothing it reports will ever be accepted.
    Stale(String),
    /// None accepted (no answer, no leader, a refusal): try again later.
    NotYet(String),
}

/// Reports completed transfers into `server` to the coordinators (see the module
/// documentation) until `reports` closes or `stop()` says so. `listed(r)`: whether the
/// transfer `r` names may still be under way in the configuration the server acts on (see
/// [`may_be_under_way`]).
pub async fn report_transfers(
    coordinators: Coordinators,
    server: ServerId,
    token: u128,
    incarnation: u64,
    mut reports: mpsc::UnboundedReceiver<Report>,
    listed: impl Fn(&Report) -> bool,
    stop: impl Fn() -> bool,
) {
    let mut links = Link::to_each(coordinators);
    // The coordinator tried first: the last that accepted.
    let mut first = 0;
    let mut pending: Vec<Report> = Vec::new();
    let mut retry = RETRY_MIN;
    while !stop() {
        if pending.is_empty() {
            match reports.recv().await {
                Some(done) => pending.push(done),
                None => return,
            }
            // Backfilled regions come one after another, and each report recorded is an
            // epoch every server installs: gather the ones that follow closely into one.
            if matches!(pending[0], Report::Backfill(_)) {
                tokio::time::sleep(BACKFILL_REPORTS_GATHERED).await;
            }
        }
        while let Ok(done) = reports.try_recv() {
            pending.push(done);
        }
        pending.sort();
        pending.dedup();
        pending.retain(|done| {
            let still = listed(done);
            if !still {
                tracing::debug!(
                    ?done,
                    "the configuration no longer lists this transfer: not reporting it"
                );
            }
            still
        });
        if pending.is_empty() || stop() {
            continue;
        }
        let request = Request::TransfersDone {
            server,
            token,
            incarnation,
            done: pending
                .iter()
                .filter_map(|r| match r {
                    Report::Transfer(t) => Some(*t),
                    Report::Backfill(_) => None,
                })
                .collect(),
            backfilled: pending
                .iter()
                .filter_map(|r| match r {
                    Report::Backfill(b) => Some(*b),
                    Report::Transfer(_) => None,
                })
                .collect(),
        };
        match report(&mut links, &mut first, request).await {
            Outcome::Accepted => {
                tracing::info!(server = %server, transfers = ?pending, "reported state transfers complete");
                pending.clear();
                retry = RETRY_MIN;
            }
            Outcome::Stale(why) => {
                tracing::error!(server = %server, incarnation, %why, "the coordinators know a newer incarnation of this server: it reports nothing any more");
                return;
            }
            Outcome::NotYet(why) => {
                // Said once per streak of failures, then quietly until one is accepted.
                if retry == RETRY_MIN {
                    tracing::warn!(server = %server, transfers = pending.len(), %why, "no coordinator accepted the transfer report; retrying");
                } else {
                    tracing::debug!(server = %server, transfers = pending.len(), %why, "transfer report not accepted yet; retrying");
                }
                // New reports join the next try; the wait goes on only for the backoff.
                let wake = tokio::time::sleep(retry);
                tokio::pin!(wake);
                loop {
                    tokio::select! {
                        _ = &mut wake => break,
                        done = reports.recv() => match done {
                            Some(done) => pending.push(done),
                            None => return,
                        },
                    }
                }
                retry = (retry * 2).min(RETRY_MAX);
            }
        }
    }
}

/// Sends `request` to each coordinator in turn, from `first`, until one accepts it.
async fn report(links: &mut [Link], first: &mut usize, request: Request) -> Outcome {
    let mut why = String::from("no coordinator address given");
    for k in 0..links.len() {
        let i = (*first + k) % links.len();
        let link = &mut links[i];
        match link.call(request.clone(), CALL_TIMEOUT).await {
            Some(Response::Done) => {
                *first = i;
                return Outcome::Accepted;
            }
            Some(Response::Error(e)) if e.status == Status::StaleServer => {
                return Outcome::Stale(format!("{}: {e}", link.address));
            }
            Some(Response::Error(e)) => why = format!("{}: {e}", link.address),
            Some(other) => why = format!("{}: unexpected answer {other:?}", link.address),
            None => why = format!("{}: no answer", link.address),
        }
    }
    Outcome::NotYet(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tessera_coordinator::{Coordinator, CoordinatorOptions};
    use tessera_protocol::handshake::Dialer;
    use tessera_types::Epoch;
    use tokio::time::Instant;

    async fn call(addr: SocketAddr, request: Request) -> Response {
        Link::new(addr.to_string(), Dialer::default())
            .call(request, Duration::from_secs(10))
            .await
            .expect("an answer")
    }

    async fn configuration(addr: SocketAddr) -> Configuration {
        match call(addr, Request::GetConfig).await {
            Response::Config(c) => *c,
            other => panic!("{other:?}"),
        }
    }

    /// Every transfer into `to` that `config` lists, as its target reports it.
    fn refs_into(config: &Configuration, to: ServerId) -> Vec<TransferRef> {
        config
            .spaces
            .iter()
            .flat_map(|s| s.transfer_refs_into(to))
            .collect()
    }

    /// A report is kept while the configuration lists its transfer, or predates it (the view
    /// lags the chain loop); dropped once a configuration as new as the transfer lacks it.
    #[test]
    fn a_report_waits_for_a_configuration_as_new_as_its_transfer() {
        let schema = tessera_types::parse_space(
            "space t key k attributes int x subspace x create 4 partitions",
        )
        .unwrap();
        let (me, other) = (ServerId(3), ServerId(1));
        let mut space =
            tessera_protocol::SpaceConfig::owned_by(2, schema, &[ServerId(1), ServerId(2)]);
        let config = |epoch: u64, space: &tessera_protocol::SpaceConfig| Configuration {
            model: None,
            epoch: Epoch(epoch),
            servers: vec![],
            spaces: vec![space.clone()],
        };
        let done = TransferRef {
            space: 2,
            subspace: tessera_types::SubspaceId(1),
            region: 1,
            id: 5,
        };
        let may_be_under_way =
            |c: &Configuration, me, done: &TransferRef| transfer_under_way(c, me, done);
        // Before epoch 5, the view knows nothing of it: kept.
        assert!(may_be_under_way(&config(4, &space), me, &done));
        // Epoch 5 and later without it: completed or cancelled, dropped.
        assert!(!may_be_under_way(&config(5, &space), me, &done));
        assert!(!may_be_under_way(&config(9, &space), me, &done));
        space.start_transfer(5, done.subspace, RegionIndex(1), me, None);
        assert!(may_be_under_way(&config(5, &space), me, &done));
        assert!(may_be_under_way(&config(9, &space), me, &done));
        // Another transfer of the region, another target, another space: not this one.
        for wrong in [
            TransferRef { id: 6, ..done },
            TransferRef { region: 2, ..done },
            TransferRef { space: 3, ..done },
            TransferRef {
                subspace: tessera_types::SubspaceId(0),
                ..done
            },
        ] {
            assert!(
                !may_be_under_way(&config(9, &space), me, &wrong),
                "{wrong:?}"
            );
        }
        assert!(!may_be_under_way(&config(9, &space), other, &done));
    }

    /// A backfill report is kept while the configuration is older than the build, or its build
    /// is that one and lacks the region; dropped once the region is recorded, or the build
    /// ended (built or dropped) or is another.
    #[test]
    fn a_backfill_report_waits_for_its_region_to_be_recorded() {
        let schema = tessera_types::parse_space(
            "space t key k attributes int x, int y subspace x create 4 partitions",
        )
        .unwrap();
        let mut space = tessera_protocol::SpaceConfig::owned_by(2, schema, &[ServerId(1)]);
        let config = |epoch: u64, space: &tessera_protocol::SpaceConfig| Configuration {
            model: None,
            epoch: Epoch(epoch),
            servers: vec![],
            spaces: vec![space.clone()],
        };
        let change = tessera_protocol::SpaceChange::AddSubspace {
            attributes: vec!["y".into()],
        };
        let done = BackfillRef {
            space: 2,
            subspace: tessera_types::SubspaceId(2),
            region: 1,
            since: 5,
        };
        let report = Report::Backfill(done);
        assert!(may_be_under_way(&config(4, &space), ServerId(1), &report));
        assert!(!may_be_under_way(&config(5, &space), ServerId(1), &report));
        space
            .alter(5, &change, |t| {
                vec![vec![ServerId(1)]; t.regions_count() as usize]
            })
            .unwrap();
        assert!(may_be_under_way(&config(5, &space), ServerId(1), &report));
        for wrong in [
            BackfillRef { since: 6, ..done },
            BackfillRef { space: 3, ..done },
            BackfillRef {
                subspace: tessera_types::SubspaceId(1),
                ..done
            },
        ] {
            assert!(
                !may_be_under_way(&config(9, &space), ServerId(1), &Report::Backfill(wrong)),
                "{wrong:?}"
            );
        }
        assert_eq!(space.complete_backfills(&[done]), 1);
        assert!(!may_be_under_way(&config(6, &space), ServerId(1), &report));
    }

    async fn start_coordinator(
        dir: &std::path::Path,
        listener: tokio::net::TcpListener,
    ) -> Coordinator {
        let addr = listener.local_addr().unwrap();
        let mut options = CoordinatorOptions::new(1, dir, addr, vec![(1, addr.to_string())]);
        // Fake servers never heartbeat: keep them Available for the test.
        options.lease.lease_ms = 600_000;
        // This test needs transfers to report, whatever the default.
        options.plan_transfers = true;
        Coordinator::start_with_listener(options, listener)
            .await
            .unwrap()
    }

    async fn rebind(addr: SocketAddr) -> tokio::net::TcpListener {
        for _ in 0..100 {
            if let Ok(l) = tokio::net::TcpListener::bind(addr).await {
                return l;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("cannot bind {addr} again");
    }

    /// Against a real coordinator that plans transfers: reports handed to the task complete
    /// their transfers in the next configuration, even when the coordinators were away when
    /// the report was made (it retries, passing over one that is not there); a report the
    /// configuration no longer lists is dropped, never sent; an earlier incarnation's report
    /// is refused (`StaleServer`) and ends the task.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reports_complete_transfers_once_a_coordinator_accepts_them() {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let coordinator = start_coordinator(dir.path(), listener).await;
        // Three servers with a space of 8 regions a subspace (K = 2), then a fourth: the
        // planner sends it regions to catch up on.
        let register = |token: u128| Request::RegisterServer {
            token,
            address: format!("10.0.0.{token}:2000"),
            incarnation: 1,
        };
        let mut ids = Vec::new();
        for token in 1..=4u128 {
            if token == 4 {
                let space = "space s key k attributes int a subspace a create 8 partitions tolerate 1 failure";
                assert_eq!(
                    call(
                        addr,
                        Request::AddSpace {
                            description: space.into()
                        }
                    )
                    .await,
                    Response::Done
                );
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match call(addr, register(token)).await {
                    Response::Registered(id) => break ids.push(id),
                    other => assert!(Instant::now() < deadline, "{other:?}"),
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let new = ids[3];
        let before = configuration(addr).await;
        let done = refs_into(&before, new);
        assert!(
            done.len() >= 2,
            "transfers into the new server: {before:#?}"
        );

        // The coordinator goes away before the reports are made.
        coordinator.shutdown().await;
        let (reports, rx) = TransferReports::channel();
        let config = Arc::new(std::sync::Mutex::new(before.clone()));
        let seen = config.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        // A coordinator that is not there (connections refused) comes first in the list.
        let dead = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let task = tokio::spawn(report_transfers(
            Coordinators {
                addresses: vec![dead.to_string(), addr.to_string()],
                dialer: Dialer::default(),
            },
            new,
            4,
            1,
            rx,
            move |r| may_be_under_way(&seen.lock().unwrap(), new, r),
            move || stopped.load(Ordering::SeqCst),
        ));
        for r in &done {
            reports.send(Report::Transfer(*r));
        }
        // While the coordinators are away, the configuration this server acts on stops
        // listing the last transfer (as if cancelled): that report is dropped.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let dropped = *done.last().unwrap();
        config.lock().unwrap().spaces[0]
            .transfers
            .retain(|t| (t.subspace, t.region.0) != (dropped.subspace, dropped.region));
        tokio::time::sleep(Duration::from_millis(2500)).await;

        // Back: the reports still listed are accepted, completing their transfers in one new
        // epoch; the dropped one is still under way.
        let coordinator = start_coordinator(dir.path(), rebind(addr).await).await;
        // Its heartbeats: the coordinators complete transfers only into a server whose lease
        // they see current.
        let heartbeats = tokio::spawn(async move {
            loop {
                let beat = Request::Heartbeat {
                    server: new,
                    token: 4,
                    incarnation: 1,
                    failed: false,
                    epoch: Epoch(0),
                };
                let _ = Link::new(addr.to_string(), Dialer::default())
                    .call(beat, Duration::from_secs(1))
                    .await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let after = loop {
            let c = configuration(addr).await;
            if c.epoch > before.epoch {
                break c;
            }
            assert!(Instant::now() < deadline, "the reports were never accepted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(
            after.epoch,
            Epoch(before.epoch.0 + 1),
            "one report, one epoch"
        );
        let space = &after.spaces[0];
        for r in &done[..done.len() - 1] {
            let region = RegionIndex(r.region);
            assert!(
                space.complete_replicas(r.subspace, region).contains(&new),
                "{r:?}"
            );
            assert_eq!(
                space.member_since(r.subspace, region, new),
                Epoch(r.id),
                "joined by that transfer"
            );
        }
        assert!(
            transfer_under_way(&after, new, &dropped),
            "a report the configuration no longer listed was not sent"
        );
        *config.lock().unwrap() = after.clone();

        // A report from an earlier incarnation (the coordinators know incarnation 2 now) is
        // refused: the task stops, and the transfer stays under way.
        let r = call(
            addr,
            Request::RegisterServer {
                token: 4,
                address: "10.0.0.4:2000".into(),
                incarnation: 2,
            },
        )
        .await;
        assert_eq!(r, Response::Registered(new));
        let restarted = configuration(addr).await;
        *config.lock().unwrap() = restarted.clone();
        // It left its regions, and is sent some again under new transfers.
        let again = refs_into(&restarted, new);
        assert!(!again.is_empty(), "{restarted:#?}");
        reports.send(Report::Transfer(again[0]));
        tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("the task ends")
            .unwrap();
        assert_eq!(
            configuration(addr).await.epoch,
            restarted.epoch,
            "nothing completed"
        );
        stop.store(true, Ordering::SeqCst);
        heartbeats.abort();
        coordinator.shutdown().await;
    }
}
