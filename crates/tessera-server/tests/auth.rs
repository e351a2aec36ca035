//! Client authentication (issue "Security and limits", items 1 and 6): a server started with
//! client tokens refuses, with UNAUTHORIZED and no change, every request its connection's
//! token does not allow — no token, an unknown one, a read-only one writing, a writer changing
//! spaces, a revoked one — and serves the rest. Attacks are sent as raw frames, as an attacker
//! would, and what is stored is compared before and after with an admin client.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::{SinkExt, StreamExt};
use tessera_client::{Client, ClientOptions, Status};
use tessera_protocol::{
    codec, decode_response, encode_request, Configuration, Gate, KeysChange, Policy, Request,
    RequestFrame, Response, SearchAnswer, SortOrder, SpaceChange, TokenTable, WriteMode,
};
use tessera_types::funcall::{Funcall, FuncallOp};
use tessera_types::{Epoch, Value};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

const READER: &str = "reader-0123456789abcdef";
const WRITER: &str = "writer-0123456789abcdef";
const ADMIN: &str = "admin-0123456789abcdef";

fn token_table(text: &str) -> TokenTable {
    TokenTable::parse(text).expect("a good token file")
}

async fn guarded() -> (TestServer, Arc<Gate>) {
    let gate = Arc::new(Gate::new(Policy {
        tokens: Some(token_table(&format!(
            "{READER} read\n{WRITER} write\n{ADMIN} admin\n"
        ))),
        secret: None,
    }));
    let given = gate.clone();
    let server = TestServer::start_with(move |o| o.gate = given.clone()).await;
    (server, gate)
}

async fn client_with(server: &TestServer, token: &str) -> Client {
    Client::connect_with(
        &server.addr_string(),
        ClientOptions::default().with_token(token),
    )
    .await
    .expect("a client with a listed token connects")
}

type Raw = Framed<TcpStream, LengthDelimitedCodec>;

async fn raw(server: &TestServer) -> Raw {
    Framed::new(TcpStream::connect(server.addr()).await.unwrap(), codec())
}

/// Sends `request` and returns the first answer to it (a search may answer in several frames).
async fn ask(conn: &mut Raw, id: u64, request: Request) -> Response {
    let body = encode_request(&RequestFrame {
        id,
        epoch: Epoch(0),
        request,
    })
    .unwrap();
    conn.send(body).await.unwrap();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), conn.next())
            .await
            .expect("an answer in time")
            .expect("the connection stays open")
            .unwrap();
        let frame = decode_response(&frame).unwrap();
        if frame.id == id {
            return frame.response;
        }
    }
}

fn refused(response: &Response) -> bool {
    matches!(response, Response::Error(e) if e.status == Status::Unauthorized)
}

/// Every request a client may send to a standalone server, with the role it needs; searches
/// as a client of `config` sends them (every region of the key subspace). A group delete or
/// update is a search, then `WriteKeys` to each point leader.
fn requests(config: &Configuration) -> Vec<(&'static str, Request, &'static str)> {
    let hotels = || "hotels".to_string();
    let search = |answer| search_everything(config, "hotels", answer);
    vec![
        (
            "get",
            Request::Get {
                space: hotels(),
                key: s("h1"),
            },
            "read",
        ),
        ("search", search(SearchAnswer::Matches), "read"),
        ("count", search(SearchAnswer::Count), "read"),
        (
            "sorted search",
            search(SearchAnswer::Sorted {
                sort_by: "price".into(),
                limit: 10,
                order: SortOrder::Ascending,
            }),
            "read",
        ),
        ("config", Request::GetConfig, "read"),
        (
            "put",
            Request::Put {
                space: hotels(),
                key: s("h9"),
                mode: WriteMode::Upsert,
                conditions: vec![],
                funcalls: vec![Funcall {
                    attr: "price".into(),
                    op: FuncallOp::Set,
                    arg: i(1),
                }],
            },
            "write",
        ),
        (
            "atomic add",
            Request::Put {
                space: hotels(),
                key: s("h1"),
                mode: WriteMode::UpdateOnly,
                conditions: vec![],
                funcalls: vec![Funcall {
                    attr: "price".into(),
                    op: FuncallOp::Num(tessera_types::funcall::NumOp::Add),
                    arg: i(1),
                }],
            },
            "write",
        ),
        (
            "del",
            Request::Del {
                space: hotels(),
                key: s("h1"),
                conditions: vec![],
            },
            "write",
        ),
        (
            "write keys",
            Request::WriteKeys {
                space: hotels(),
                keys: vec![s("h1"), s("h2")],
                conditions: vec![],
                change: KeysChange::Delete,
            },
            "write",
        ),
        (
            "add space",
            Request::AddSpace {
                description: PROBE.into(),
            },
            "admin",
        ),
        ("rm space", Request::RmSpace { name: hotels() }, "admin"),
        (
            "alter space",
            Request::AlterSpace {
                space: hotels(),
                change: SpaceChange::AddSubspace {
                    attributes: vec!["rating".into()],
                },
                fence: None,
            },
            "admin",
        ),
    ]
}

/// What an admin sees: the objects and the configuration's spaces.
async fn state(admin: &Client) -> (Vec<tessera_client::Record>, String) {
    let config = admin.refresh().await.unwrap();
    (
        snapshot(admin, "hotels").await,
        format!("{:?}", config.spaces),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_needs_a_token_of_its_role() {
    let (server, _gate) = guarded().await;
    let admin = client_with(&server, ADMIN).await;
    admin.add_space(HOTELS).await.unwrap();
    for (k, city) in [("h1", "Paris"), ("h2", "Rome")] {
        admin
            .put("hotels", k, [("city", s(city)), ("price", i(100))])
            .await
            .unwrap();
    }
    let before = state(&admin).await;
    let config = admin.refresh().await.unwrap();

    // (token presented, the role it has), then what each request should get.
    let attackers: [(Option<&str>, Option<&str>); 4] = [
        (None, None),
        (Some("guessed-0123456789abcdef"), None),
        (Some(READER), Some("read")),
        (Some(WRITER), Some("write")),
    ];
    let rank = |role: &str| {
        ["read", "write", "admin"]
            .iter()
            .position(|r| *r == role)
            .unwrap()
    };
    let mut id = 0;
    for (token, role) in attackers {
        let mut conn = raw(&server).await;
        if let Some(t) = token {
            id += 1;
            let answer = ask(&mut conn, id, Request::Authenticate { token: t.into() }).await;
            assert_eq!(role.is_none(), refused(&answer), "{token:?}: {answer:?}");
        }
        for (name, request, needed) in requests(&config) {
            let allowed = role.is_some_and(|r| rank(r) >= rank(needed));
            if allowed {
                continue; // allowed requests would change the state compared below
            }
            id += 1;
            let answer = ask(&mut conn, id, request).await;
            assert!(refused(&answer), "{name} with {token:?}: {answer:?}");
        }
    }
    assert_eq!(
        state(&admin).await,
        before,
        "a refused request changed something"
    );

    // What each role may do, it does.
    let reader = client_with(&server, READER).await;
    assert_eq!(reader.count("hotels", vec![]).await.unwrap(), 2);
    assert_eq!(
        status(reader.put("hotels", "h3", [("price", i(1))]).await),
        Status::Unauthorized
    );
    let writer = client_with(&server, WRITER).await;
    writer.put("hotels", "h3", [("price", i(1))]).await.unwrap();
    assert_eq!(
        status(writer.rm_space("hotels").await),
        Status::Unauthorized
    );
    admin.rm_space("hotels").await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_cannot_connect_and_a_revoked_one_stops_working() {
    let (server, gate) = guarded().await;
    let wrong = Client::connect_with(
        &server.addr_string(),
        ClientOptions::default().with_token("guessed-0123456789abcdef"),
    )
    .await;
    assert_eq!(
        wrong.err().and_then(|e| e.status()),
        Some(Status::Unauthorized)
    );
    let anonymous = Client::connect(&server.addr_string()).await;
    assert_eq!(
        anonymous.err().and_then(|e| e.status()),
        Some(Status::Unauthorized)
    );

    let writer = client_with(&server, WRITER).await;
    writer
        .add_space(PROBE)
        .await
        .expect_err("a writer adds no space");
    let admin = client_with(&server, ADMIN).await;
    admin.add_space(PROBE).await.unwrap();
    writer.put("probe", "a", [("n", i(1))]).await.unwrap();

    // The token file reloaded without the writer: its open connection is refused from now on.
    gate.set_tokens(Some(token_table(&format!(
        "{ADMIN} admin\n{READER} read\n"
    ))));
    assert_eq!(
        status(writer.put("probe", "b", [("n", i(2))]).await),
        Status::Unauthorized
    );
    assert_eq!(status(writer.get("probe", "a").await), Status::Unauthorized);
    assert_eq!(admin.count("probe", vec![]).await.unwrap(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_server_refuses_a_socket_posing_as_a_peer() {
    let (server, _gate) = guarded().await;
    let mut conn = raw(&server).await;
    let hello = ask(
        &mut conn,
        1,
        Request::PeerHello {
            from: tessera_types::ServerId(7),
        },
    )
    .await;
    assert!(matches!(hello, Response::Error(_)), "{hello:?}");
    let _ = Value::Int(0);
    server.shutdown().await;
}
