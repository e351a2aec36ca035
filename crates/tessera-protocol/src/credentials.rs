//! What a daemon trusts: client tokens and their [`Role`]s (the `--auth` token file), the
//! cluster secret its coordinators and servers share (`--cluster-secret-file`) and the proofs
//! of holding it, and the [`Policy`] made of them. Pure: no I/O, no knowledge of requests;
//! `auth` decides on requests with these.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a token allows. Each role allows what the ones before it do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Role {
    /// Reads and searches, the configuration, explain, trace.
    Read,
    /// And writes: put, delete, conditional and atomic writes, group writes.
    Write,
    /// And changes to spaces and to the cluster: add, remove and alter spaces, the model's
    /// constants, decommissioning a server.
    Admin,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }
}

/// Shortest token and cluster secret accepted: guessing one must be out of reach.
pub const SECRET_BYTES_MIN: usize = 16;

/// A token file that cannot be used. Nothing of it is taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenFileError {
    #[error("line {line}: expected `TOKEN ROLE`, found {found} words")]
    Shape { line: usize, found: usize },
    #[error("line {line}: unknown role `{role}` (roles: read, write, admin)")]
    UnknownRole { line: usize, role: String },
    #[error("line {line}: a token of {bytes} bytes is too short to be secret (at least {SECRET_BYTES_MIN})")]
    ShortToken { line: usize, bytes: usize },
    #[error("line {line}: this token is listed already")]
    Duplicate { line: usize },
}

/// The SHA-256 of a token: what a daemon keeps and a session remembers, so the token itself
/// stays with its owner and lookups take the same time whatever the token's bytes.
pub type TokenDigest = [u8; 32];

pub(crate) fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// The tokens of a daemon's token file and their roles.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenTable {
    roles: HashMap<TokenDigest, Role>,
}

impl TokenTable {
    /// One `TOKEN ROLE` a line; blank lines and lines starting with `#` are skipped.
    pub fn parse(text: &str) -> Result<TokenTable, TokenFileError> {
        let mut roles = HashMap::new();
        for (n, raw) in text.lines().enumerate() {
            let line = n + 1;
            let content = raw.trim();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = content.split_whitespace().collect();
            let [token, role] = words[..] else {
                return Err(TokenFileError::Shape {
                    line,
                    found: words.len(),
                });
            };
            let role = match role {
                "read" => Role::Read,
                "write" => Role::Write,
                "admin" => Role::Admin,
                other => {
                    return Err(TokenFileError::UnknownRole {
                        line,
                        role: other.to_string(),
                    })
                }
            };
            if token.len() < SECRET_BYTES_MIN {
                return Err(TokenFileError::ShortToken {
                    line,
                    bytes: token.len(),
                });
            }
            if roles.insert(digest(token), role).is_some() {
                return Err(TokenFileError::Duplicate { line });
            }
        }
        Ok(TokenTable { roles })
    }

    pub fn len(&self) -> usize {
        self.roles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.roles.is_empty()
    }

    pub(crate) fn role(&self, digest: &TokenDigest) -> Option<Role> {
        self.roles.get(digest).copied()
    }

    /// The role of `token`, if the file lists it (for callers outside the protocol, such as
    /// the HTTP port, which have a token but no session).
    pub fn role_of(&self, token: &str) -> Option<Role> {
        self.role(&digest(token))
    }
}

/// The secret a cluster's coordinators and servers share.
#[derive(Clone)]
pub struct ClusterSecret(pub(crate) Vec<u8>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("a cluster secret of {0} bytes is too short (at least {SECRET_BYTES_MIN}; 32 random bytes, hex-encoded, are a good one)")]
    Short(usize),
}

impl ClusterSecret {
    /// The secret in a secret file: its content without surrounding whitespace.
    pub fn parse(content: &[u8]) -> Result<ClusterSecret, SecretError> {
        let text = content.trim_ascii();
        if text.len() < SECRET_BYTES_MIN {
            return Err(SecretError::Short(text.len()));
        }
        Ok(ClusterSecret(text.to_vec()))
    }

    /// A secret known to nobody else: for daemons that run every member in one process.
    #[cfg(feature = "frame")]
    pub fn random() -> ClusterSecret {
        let bytes: [u8; 32] = rand::random();
        ClusterSecret(bytes.to_vec())
    }

    fn mac(&self, side: &[u8], client: &Nonce, server: &Nonce) -> hmac::Hmac<Sha256> {
        let mut mac =
            <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("any key length");
        mac.update(b"tessera cluster handshake, ");
        mac.update(side);
        mac.update(client);
        mac.update(server);
        mac
    }

    /// The daemon's proof, answering a member's challenge `client` with its own nonce `server`.
    pub fn server_proof(&self, client: &Nonce, server: &Nonce) -> Proof {
        self.mac(b"server", client, server)
            .finalize()
            .into_bytes()
            .into()
    }

    /// The connecting member's proof.
    pub fn client_proof(&self, client: &Nonce, server: &Nonce) -> Proof {
        self.mac(b"client", client, server)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `proof` is the daemon's proof for these nonces (in constant time).
    pub fn check_server_proof(&self, client: &Nonce, server: &Nonce, proof: &Proof) -> bool {
        self.mac(b"server", client, server)
            .verify_slice(proof)
            .is_ok()
    }

    /// Whether `proof` is the member's proof for these nonces (in constant time).
    pub fn check_client_proof(&self, client: &Nonce, server: &Nonce, proof: &Proof) -> bool {
        self.mac(b"client", client, server)
            .verify_slice(proof)
            .is_ok()
    }
}

pub type Nonce = [u8; 32];
pub type Proof = [u8; 32];

/// What a daemon demands: client tokens (`None`: every client may do everything, the
/// development default) and the cluster secret (`None`: cluster messages are open).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub tokens: Option<TokenTable>,
    pub secret: Option<ClusterSecret>,
}

/// A daemon's policy as its connections read it: swapped whole when the token file is
/// reloaded (SIGHUP), so every request after the swap is judged by the new tokens.
#[derive(Debug, Default)]
pub struct Gate(RwLock<Arc<Policy>>);

impl Gate {
    pub fn new(policy: Policy) -> Gate {
        Gate(RwLock::new(Arc::new(policy)))
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the client tokens (the cluster secret stays: members keep their connections).
    pub fn set_tokens(&self, tokens: Option<TokenTable>) {
        let mut policy = self.0.write().unwrap_or_else(|e| e.into_inner());
        *policy = Arc::new(Policy {
            tokens,
            secret: policy.secret.clone(),
        });
    }
}
