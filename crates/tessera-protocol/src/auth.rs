//! Who may send what. Clients present a token from the daemon's token file (`--auth`), which
//! gives them a [`Role`]; each request needs an [`Access`]. Coordinators and servers prove to
//! each other that they hold the cluster secret (`--cluster-secret-file`) by a challenge and
//! response, so the secret never travels; only such a connection may carry the cluster's own
//! messages (registration, heartbeats, chain envelopes, Raft).
//!
//! A connection's standing is a [`Session`], stepped by each request through
//! [`Session::admit`] against the daemon's [`Policy`]. Pure: no I/O, the nonce comes from the
//! caller. The tokens, roles, secret and proofs themselves are in [`crate::credentials`]
//! (re-exported here), which knows nothing of requests.
//!
//! The handshake, for a connection from member C to daemon D, with HMAC-SHA-256 over the secret:
//! 1. C sends `ClusterChallenge { nonce: c }`, a fresh random nonce;
//! 2. D answers `ClusterChallenge { nonce: d, proof: mac("server", c, d) }`; C checks the proof
//!    (D holds the secret too: a fake coordinator learns nothing from C);
//! 3. C sends `ClusterProof { proof: mac("client", c, d) }`; D checks it and answers `Done`.
//!
//! Each side's proof covers a nonce it did not choose, so a recorded handshake cannot be replayed.

use crate::credentials::digest;
pub use crate::credentials::{
    ClusterSecret, Gate, Nonce, Policy, Proof, Role, SecretError, TokenDigest, TokenFileError,
    TokenTable, SECRET_BYTES_MIN,
};
use crate::message::{Request, Response};
use crate::status::{ErrorReply, Status};

/// What a request needs of its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone: the steps of authenticating.
    Open,
    /// A token of this role or a higher one (or a cluster member).
    Role(Role),
    /// A cluster member: the connection proved the cluster secret.
    Cluster,
}

impl Request {
    /// What this request needs of its connection. Every variant is named, so a new request
    /// must be classified here to compile.
    pub fn access(&self) -> Access {
        match self {
            Request::Authenticate { .. }
            | Request::ClusterChallenge { .. }
            | Request::ClusterProof { .. } => Access::Open,
            Request::GetConfig
            | Request::WaitConfig { .. }
            | Request::CoordinatorStatus
            | Request::Get { .. }
            | Request::GetMany { .. }
            | Request::SearchRegions { .. }
            | Request::Trace { .. }
            | Request::KeyRegionLoads { .. }
            | Request::RegionCounts { .. }
            | Request::Statistics { .. } => Access::Role(Role::Read),
            Request::Put { .. } | Request::Del { .. } | Request::WriteKeys { .. } => {
                Access::Role(Role::Write)
            }
            Request::AddSpace { .. }
            | Request::RmSpace { .. }
            | Request::AlterSpace { .. }
            | Request::SetModel { .. }
            | Request::Decommission { .. } => Access::Role(Role::Admin),
            Request::RegisterServer { .. }
            | Request::Heartbeat { .. }
            | Request::TransfersDone { .. }
            | Request::RestServer { .. }
            | Request::PeerHello { .. } => Access::Cluster,
        }
    }
}

/// What to do with a request, given its connection's standing.
#[derive(Debug, PartialEq)]
pub enum Admission {
    /// Serve it.
    Proceed,
    /// A step of authenticating, answered by the session: send this.
    Answer(Response),
    /// Refused, and nothing changed. `close`: the connection is closed after the answer (it
    /// claimed to be a cluster member and did not prove it).
    Refuse { error: ErrorReply, close: bool },
}

impl Admission {
    /// What to send instead of serving the request, and whether to close the connection once
    /// it is sent; `None`: serve the request.
    pub fn reply(self) -> Option<(Response, bool)> {
        match self {
            Admission::Proceed => None,
            Admission::Answer(response) => Some((response, false)),
            Admission::Refuse { error, close } => Some((Response::Error(error), close)),
        }
    }
}

/// A connection's standing: the token it presented, and whether it proved the cluster secret.
#[derive(Clone, Debug, Default)]
pub struct Session {
    token: Option<TokenDigest>,
    member: bool,
    /// The nonces of a handshake begun: the member's, and the one this daemon answered with.
    challenge: Option<(Nonce, Nonce)>,
}

impl Session {
    /// Whether the connection proved the cluster secret.
    pub fn is_member(&self) -> bool {
        self.member
    }

    /// Decides on `request`, and takes the steps of authenticating. The role of a token is
    /// looked up in `policy` on every request, so a token removed from the file (and the file
    /// reloaded) stops working on open connections too. `fresh_nonce` is called for a
    /// challenge.
    pub fn admit(
        &mut self,
        policy: &Policy,
        request: &Request,
        fresh_nonce: impl FnOnce() -> Nonce,
    ) -> Admission {
        match request {
            Request::Authenticate { token } => self.authenticate(policy, token),
            Request::ClusterChallenge { nonce } => {
                let Some(secret) = &policy.secret else {
                    return refuse_member(
                        "this daemon has no cluster secret (--cluster-secret-file)",
                    );
                };
                let ours = fresh_nonce();
                self.challenge = Some((*nonce, ours));
                Answer(Response::ClusterChallenge {
                    nonce: ours,
                    proof: secret.server_proof(nonce, &ours),
                })
            }
            Request::ClusterProof { proof } => {
                let (Some(secret), Some((theirs, ours))) = (&policy.secret, self.challenge.take())
                else {
                    return refuse_member("a cluster proof without a challenge answered first");
                };
                if !secret.check_client_proof(&theirs, &ours, proof) {
                    return refuse_member(
                        "wrong cluster proof: this connection does not hold the cluster secret",
                    );
                }
                self.member = true;
                Answer(Response::Done)
            }
            _ => self.check(policy, request.access()),
        }
    }

    fn authenticate(&mut self, policy: &Policy, token: &str) -> Admission {
        let Some(tokens) = &policy.tokens else {
            // An open daemon: a client that brings a token anyway may do everything.
            return Answer(Response::Authenticated { role: Role::Admin });
        };
        let digest = digest(token);
        match tokens.role(&digest) {
            Some(role) => {
                self.token = Some(digest);
                Answer(Response::Authenticated { role })
            }
            None => {
                // A failed attempt leaves the connection with no token, not the last good one.
                self.token = None;
                refuse("unknown token")
            }
        }
    }

    fn check(&self, policy: &Policy, access: Access) -> Admission {
        if self.member {
            return Proceed;
        }
        match access {
            Access::Open => Proceed,
            Access::Cluster if policy.secret.is_none() => Proceed,
            Access::Cluster => refuse_member(
                "only a cluster member may send this, and this connection did not prove the cluster secret",
            ),
            Access::Role(needed) => {
                let Some(tokens) = &policy.tokens else {
                    return Proceed;
                };
                match self.token.and_then(|d| tokens.role(&d)) {
                    Some(role) if role >= needed => Proceed,
                    Some(role) => refuse(&format!(
                        "this needs a token with the {} role; this connection's token has {}",
                        needed.name(),
                        role.name()
                    )),
                    None if self.token.is_some() => refuse("this connection's token was revoked"),
                    None => refuse(&format!(
                        "this daemon requires a token (--token or TESSERA_TOKEN) with the {} role",
                        needed.name()
                    )),
                }
            }
        }
    }
}

use Admission::{Answer, Proceed};

fn refuse(message: &str) -> Admission {
    Admission::Refuse {
        error: ErrorReply::new(Status::Unauthorized, message),
        close: false,
    }
}

fn refuse_member(message: &str) -> Admission {
    Admission::Refuse {
        error: ErrorReply::new(Status::Unauthorized, message),
        close: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{SearchAnswer, SortOrder};
    use tessera_types::{ServerId, Value};

    const READER: &str = "reader-token-0123456789";
    const WRITER: &str = "writer-token-0123456789";
    const ADMIN: &str = "admin-token-0123456789";

    fn tokens() -> TokenTable {
        TokenTable::parse(&format!(
            "# tokens\n{READER} read\n\n  {WRITER}   write  \n{ADMIN} admin\n"
        ))
        .unwrap()
    }

    fn secret(s: &str) -> ClusterSecret {
        ClusterSecret::parse(s.as_bytes()).unwrap()
    }

    /// One request of every kind, with the role a client needs for it, written out here
    /// rather than read from `Request::access` (the rule: reads need read, writes
    /// write, space and cluster changes admin; the cluster's own messages a member).
    fn every_request() -> Vec<(Request, Option<Role>)> {
        let space = || "s".to_string();
        vec![
            (Request::GetConfig, Some(Role::Read)),
            (
                Request::WaitConfig {
                    after: tessera_types::Epoch(1),
                    timeout_ms: 1,
                },
                Some(Role::Read),
            ),
            (Request::CoordinatorStatus, Some(Role::Read)),
            (
                Request::Get {
                    space: space(),
                    key: Value::Int(1),
                },
                Some(Role::Read),
            ),
            (
                Request::GetMany {
                    space: space(),
                    keys: vec![],
                },
                Some(Role::Read),
            ),
            (
                Request::SearchRegions {
                    space: space(),
                    predicates: vec![],
                    parts: vec![],
                    answer: SearchAnswer::Matches,
                    follow_stubs: false,
                },
                Some(Role::Read),
            ),
            (
                Request::SearchRegions {
                    space: space(),
                    predicates: vec![],
                    parts: vec![],
                    answer: SearchAnswer::Sorted {
                        sort_by: "a".into(),
                        limit: 1,
                        order: SortOrder::Ascending,
                    },
                    follow_stubs: true,
                },
                Some(Role::Read),
            ),
            (
                Request::Trace {
                    space: space(),
                    minutes: 1,
                },
                Some(Role::Read),
            ),
            (Request::KeyRegionLoads { space: space() }, Some(Role::Read)),
            (Request::Statistics { space: space() }, Some(Role::Read)),
            (
                Request::RegionCounts {
                    space: space(),
                    subspace: tessera_types::SubspaceId(1),
                },
                Some(Role::Read),
            ),
            (
                Request::Put {
                    space: space(),
                    key: Value::Int(1),
                    mode: crate::WriteMode::Upsert,
                    conditions: vec![],
                    funcalls: vec![],
                },
                Some(Role::Write),
            ),
            (
                Request::Del {
                    space: space(),
                    key: Value::Int(1),
                    conditions: vec![],
                },
                Some(Role::Write),
            ),
            (
                Request::WriteKeys {
                    space: space(),
                    keys: vec![Value::Int(1)],
                    conditions: vec![],
                    change: crate::message::KeysChange::Delete,
                },
                Some(Role::Write),
            ),
            (
                Request::AddSpace {
                    description: "space s key k".into(),
                },
                Some(Role::Admin),
            ),
            (Request::RmSpace { name: space() }, Some(Role::Admin)),
            (
                Request::Decommission {
                    server: ServerId(2),
                },
                Some(Role::Admin),
            ),
            (
                Request::RegisterServer {
                    token: 1,
                    address: "a:1".into(),
                    incarnation: 1,
                },
                None,
            ),
            (
                Request::Heartbeat {
                    server: ServerId(1),
                    token: 1,
                    incarnation: 1,
                    failed: false,
                    epoch: tessera_types::Epoch(1),
                },
                None,
            ),
            (
                Request::TransfersDone {
                    server: ServerId(1),
                    token: 1,
                    incarnation: 1,
                    done: vec![],
                    backfilled: vec![],
                },
                None,
            ),
            (Request::PeerHello { from: ServerId(1) }, None),
        ]
    }

    fn status_of(admission: Admission) -> Option<(Status, bool)> {
        match admission {
            Admission::Proceed => None,
            Admission::Refuse { error, close } => Some((error.status, close)),
            Admission::Answer(r) => panic!("answered {r:?}"),
        }
    }

    #[test]
    fn token_files_parse_or_say_which_line_is_wrong() {
        assert_eq!(tokens().len(), 3);
        let cases = [
            (
                "onlyonewordhere-long",
                TokenFileError::Shape { line: 1, found: 1 },
            ),
            (
                "a-long-enough-token x y",
                TokenFileError::Shape { line: 1, found: 3 },
            ),
            (
                "# c\na-long-enough-token superuser",
                TokenFileError::UnknownRole {
                    line: 2,
                    role: "superuser".into(),
                },
            ),
            (
                "short read",
                TokenFileError::ShortToken { line: 1, bytes: 5 },
            ),
            (
                "a-long-enough-token read\na-long-enough-token admin",
                TokenFileError::Duplicate { line: 2 },
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(TokenTable::parse(text), Err(expected), "{text:?}");
        }
        assert!(TokenTable::parse("").unwrap().is_empty());
    }

    #[test]
    fn each_request_needs_its_role_and_higher_roles_include_lower_ones() {
        let policy = Policy {
            tokens: Some(tokens()),
            secret: Some(secret("a-cluster-secret-of-some-length")),
        };
        for (request, needed) in every_request() {
            for (token, role) in [
                (None, None),
                (Some("not-a-listed-token-at-all"), None),
                (Some(READER), Some(Role::Read)),
                (Some(WRITER), Some(Role::Write)),
                (Some(ADMIN), Some(Role::Admin)),
            ] {
                let mut session = Session::default();
                if let Some(t) = token {
                    let answer =
                        session.admit(&policy, &Request::Authenticate { token: t.into() }, || {
                            [0; 32]
                        });
                    match role {
                        Some(r) => assert_eq!(
                            answer,
                            Admission::Answer(Response::Authenticated { role: r })
                        ),
                        None => assert_eq!(status_of(answer), Some((Status::Unauthorized, false))),
                    }
                }
                let got = status_of(session.admit(&policy, &request, || [0; 32]));
                let expected = match (needed, role) {
                    // The cluster's own messages: refused, and the connection closed.
                    (None, _) => Some((Status::Unauthorized, true)),
                    (Some(n), Some(r)) if r >= n => None,
                    (Some(_), _) => Some((Status::Unauthorized, false)),
                };
                assert_eq!(got, expected, "{request:?} with {token:?}");
            }
        }
    }

    #[test]
    fn an_open_daemon_lets_everyone_do_everything() {
        let policy = Policy::default();
        for (request, _) in every_request() {
            assert_eq!(
                Session::default().admit(&policy, &request, || [0; 32]),
                Admission::Proceed,
                "{request:?}"
            );
        }
        let answer = Session::default().admit(
            &policy,
            &Request::Authenticate {
                token: "anything".into(),
            },
            || [0; 32],
        );
        assert_eq!(
            answer,
            Admission::Answer(Response::Authenticated { role: Role::Admin })
        );
    }

    /// The member's side of the handshake, written from the protocol's description.
    fn handshake(daemon: &Policy, member: &ClusterSecret, session: &mut Session) -> Admission {
        let ours = [7u8; 32];
        let Admission::Answer(Response::ClusterChallenge { nonce, proof }) =
            session.admit(daemon, &Request::ClusterChallenge { nonce: ours }, || {
                [9; 32]
            })
        else {
            panic!("no challenge answered")
        };
        assert_eq!(nonce, [9; 32]);
        let daemon_holds_it = member.check_server_proof(&ours, &nonce, &proof);
        assert_eq!(
            daemon_holds_it,
            daemon.secret.as_ref().unwrap().0 == member.0
        );
        session.admit(
            daemon,
            &Request::ClusterProof {
                proof: member.client_proof(&ours, &nonce),
            },
            || unreachable!(),
        )
    }

    #[test]
    fn only_the_cluster_secret_makes_a_member() {
        let daemon = Policy {
            tokens: Some(tokens()),
            secret: Some(secret("the-right-secret-0123")),
        };
        let mut member = Session::default();
        assert_eq!(
            handshake(&daemon, &secret("the-right-secret-0123"), &mut member),
            Admission::Answer(Response::Done)
        );
        assert!(member.is_member());
        for (request, _) in every_request() {
            assert_eq!(
                member.admit(&daemon, &request, || [0; 32]),
                Admission::Proceed,
                "{request:?}"
            );
        }

        let mut impostor = Session::default();
        assert_eq!(
            status_of(handshake(
                &daemon,
                &secret("a-wrong-secret-456789"),
                &mut impostor
            )),
            Some((Status::Unauthorized, true))
        );
        assert!(!impostor.is_member());

        // A proof with no challenge answered first, or replayed on another connection (whose
        // daemon nonce differs), does not count.
        let mut replayer = Session::default();
        let right = secret("the-right-secret-0123");
        let recorded = right.client_proof(&[7; 32], &[9; 32]);
        assert_eq!(
            status_of(
                replayer.admit(&daemon, &Request::ClusterProof { proof: recorded }, || [0;
                    32])
            ),
            Some((Status::Unauthorized, true))
        );
        let _ = replayer.admit(
            &daemon,
            &Request::ClusterChallenge { nonce: [7; 32] },
            || [10; 32],
        );
        assert_eq!(
            status_of(
                replayer.admit(&daemon, &Request::ClusterProof { proof: recorded }, || [0;
                    32])
            ),
            Some((Status::Unauthorized, true))
        );

        // A daemon without a secret has no members to make.
        let open = Policy::default();
        assert_eq!(
            status_of(Session::default().admit(
                &open,
                &Request::ClusterChallenge { nonce: [1; 32] },
                || [0; 32]
            )),
            Some((Status::Unauthorized, true))
        );
    }

    #[test]
    fn a_reloaded_token_file_applies_to_open_connections() {
        let gate = Gate::new(Policy {
            tokens: Some(tokens()),
            secret: None,
        });
        let mut session = Session::default();
        let _ = session.admit(
            &gate.policy(),
            &Request::Authenticate {
                token: WRITER.into(),
            },
            || [0; 32],
        );
        let put = Request::Del {
            space: "s".into(),
            key: Value::Int(1),
            conditions: vec![],
        };
        assert_eq!(
            session.admit(&gate.policy(), &put, || [0; 32]),
            Admission::Proceed
        );
        gate.set_tokens(Some(TokenTable::parse(&format!("{WRITER} read")).unwrap()));
        assert_eq!(
            status_of(session.admit(&gate.policy(), &put, || [0; 32])),
            Some((Status::Unauthorized, false))
        );
        gate.set_tokens(Some(TokenTable::parse(&format!("{READER} read")).unwrap()));
        let get = Request::Get {
            space: "s".into(),
            key: Value::Int(1),
        };
        assert_eq!(
            status_of(session.admit(&gate.policy(), &get, || [0; 32])),
            Some((Status::Unauthorized, false))
        );
    }

    #[test]
    fn secrets_must_be_long_enough() {
        assert_eq!(
            ClusterSecret::parse(b"  short\n").unwrap_err(),
            SecretError::Short(5)
        );
        assert!(ClusterSecret::parse(b"0123456789abcdef\n").is_ok());
    }
}
