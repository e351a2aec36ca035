//! Cluster authentication at a coordinator (issue "Security and limits", items 2 and 6): with a
//! cluster secret, forged Raft votes and fake server registrations from a socket that did not
//! prove it are refused and their connection closed, and nothing changes — while the same
//! attacks succeed against a coordinator without one (so the test shows it can fail).

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use futures::{SinkExt, StreamExt};
use openraft::{LogId, Vote};
use tessera_coordinator::{Coordinator, PEER_TAG};
use tessera_protocol::handshake::Dialer;
use tessera_protocol::{
    codec, decode_response, encode_request, ClusterSecret, Gate, Policy, Request, RequestFrame,
    Response, Status,
};
use tessera_types::Epoch;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

const SECRET: &str = "the-cluster-secret-0123456789";

async fn coordinator(secret: Option<&str>) -> (Coordinator, tempfile::TempDir) {
    one_coordinator(|options| {
        options.gate = Arc::new(Gate::new(Policy {
            tokens: None,
            secret: secret.map(|s| ClusterSecret::parse(s.as_bytes()).unwrap()),
        }));
    })
    .await
}

/// A Raft vote request as a coordinator's peer frame: the tag, then postcard of the peer
/// message `Vote` (the second variant) — built by hand, as an attacker would.
fn forged_vote(term: u64) -> Bytes {
    let request = openraft::raft::VoteRequest::<u64> {
        vote: Vote::new(term, 2),
        last_log_id: Some(LogId::new(
            openraft::CommittedLeaderId::new(term, 2),
            1_000_000,
        )),
    };
    let mut body = BytesMut::new();
    body.put_u8(PEER_TAG);
    body.put_u8(1);
    body.extend_from_slice(&postcard::to_allocvec(&request).unwrap());
    body.freeze()
}

/// Sends forged votes with ever higher terms for a while; how many connections the
/// coordinator closed on them.
async fn vote_storm(c: &Coordinator, rounds: u64) -> u64 {
    // Past the leader's lease (Raft refuses votes while a leader was heard from recently).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let base = c.status().term;
    let mut closed = 0;
    for round in 1..=rounds {
        let mut conn = Framed::new(TcpStream::connect(c.local_addr()).await.unwrap(), codec());
        let _ = conn.send(forged_vote(base + 10 * round)).await;
        match tokio::time::timeout(Duration::from_secs(5), conn.next()).await {
            Ok(None) | Ok(Some(Err(_))) => closed += 1,
            Ok(Some(Ok(_))) => {}
            Err(_) => panic!("neither an answer nor a close"),
        }
        // The attack: one forged vote every 0.3 s.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    closed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_raft_votes_do_not_unseat_a_leader_that_holds_a_secret() {
    // Without a secret the attack works: the forged terms take the coordinator's term.
    let (open, _dir) = coordinator(None).await;
    let term = open.status().term;
    assert_eq!(vote_storm(&open, 3).await, 0);
    assert!(
        open.status().term > term,
        "the control: forged votes move an open coordinator"
    );
    open.shutdown().await;

    let (guarded, _dir) = coordinator(Some(SECRET)).await;
    let term = guarded.status().term;
    assert_eq!(
        vote_storm(&guarded, 5).await,
        5,
        "every forging connection is closed"
    );
    let status = guarded.status();
    assert_eq!(
        (status.term, status.leader),
        (term, Some(1)),
        "the leader keeps leading"
    );
    // It still serves clients and writes.
    assert!(matches!(
        call(guarded.local_addr(), Request::GetConfig)
            .await
            .response,
        Response::Config(_)
    ));
    guarded.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_member_that_proves_the_secret_registers_a_server() {
    let (c, _dir) = coordinator(Some(SECRET)).await;
    let register = Request::RegisterServer {
        token: 42,
        address: "127.0.0.1:9".into(),
        incarnation: 1,
    };
    let frame = |request: Request| {
        encode_request(&RequestFrame {
            id: 1,
            epoch: Epoch(0),
            request,
        })
        .unwrap()
    };

    // A fake server: refused, and its connection closed.
    let mut fake = Framed::new(TcpStream::connect(c.local_addr()).await.unwrap(), codec());
    fake.send(frame(register.clone())).await.unwrap();
    let answer = decode_response(&fake.next().await.unwrap().unwrap()).unwrap();
    assert!(
        matches!(&answer.response, Response::Error(e) if e.status == Status::Unauthorized),
        "{answer:?}"
    );
    let after = tokio::time::timeout(Duration::from_secs(5), fake.next())
        .await
        .unwrap();
    assert!(
        after.is_none() || after.unwrap().is_err(),
        "the connection is closed"
    );

    // One that holds another secret cannot even finish the handshake.
    let wrong = ClusterSecret::parse(b"another-secret-0123456789").unwrap();
    let refused = Dialer::member(Some(wrong), None)
        .connect(&c.local_addr().to_string(), codec(), Duration::from_secs(5))
        .await;
    assert!(refused.is_err());
    assert!(
        get_config(c.local_addr()).await.servers.is_empty(),
        "no server registered"
    );

    // A member registers.
    let right = ClusterSecret::parse(SECRET.as_bytes()).unwrap();
    let mut member = Dialer::member(Some(right), None)
        .connect(&c.local_addr().to_string(), codec(), Duration::from_secs(5))
        .await
        .expect("a member's handshake");
    member.send(frame(register)).await.unwrap();
    let answer = decode_response(&member.next().await.unwrap().unwrap()).unwrap();
    assert!(
        matches!(answer.response, Response::Registered(_)),
        "{answer:?}"
    );
    assert_eq!(get_config(c.local_addr()).await.servers.len(), 1);
    c.shutdown().await;
}
